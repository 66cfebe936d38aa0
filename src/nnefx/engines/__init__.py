"""Engine backends: run nnefx graphs on onnxruntime, OpenVINO or PyTorch, behind the same Session.

Each engine is an optional extra (``pip install 'nnefx[onnxruntime]'``, ``[openvino]``,
``[torch]``).  A graph reaches an engine through one of nnefx's exporters (ONNX for
onnxruntime, IR v11 for OpenVINO, a torch module for PyTorch), so an engine runs exactly what
the exporter can express exactly; what it cannot is refused before anything runs, with the
operation and its position (:func:`query`).  Engines are checked against the formal backend
(``Session(..., verify=True)``) and in the test suite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..diagnostics import NNEFXError

if TYPE_CHECKING:
    from .base import Engine, EngineRunner, Problem

NUMPY_BACKENDS = ("fast", "formal")
#: Engine backend name -> (module, class): one engine is imported without the others (a
#: compiled OpenVINO model's load need not import the torch engine and the exporters it uses).
ENGINES = {"onnxruntime": (".onnxruntime", "OnnxRuntimeEngine"), "openvino": (".openvino", "OpenVinoEngine"),
           "torch": (".torch", "TorchEngine")}


def engines() -> dict[str, Engine]:
    """Every engine nnefx knows, installed or not, by backend name."""
    return {name: get(name) for name in ENGINES}


def get(name: str) -> Engine:
    if name not in ENGINES:
        raise NNEFXError(f"unknown backend '{name}' (known: {', '.join(backend_names())})")
    import importlib

    module, cls = ENGINES[name]
    return getattr(importlib.import_module(module, __name__), cls)()


def backend_names() -> list[str]:
    return [*NUMPY_BACKENDS, *ENGINES, "auto"]


def __getattr__(name: str) -> Any:
    # The engine classes and the graph model they use are imported when first asked for: a
    # compiled model's load (``engines.compiled``, ``engines.loaded``) needs none of them.
    if name in ("Engine", "EngineRunner", "Problem"):
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Engine", "EngineRunner", "Problem", "backend_names", "engines", "get"]
