"""Engine backends: run nnefx graphs on onnxruntime, OpenVINO or PyTorch, behind the same Session.

Each engine is an optional extra (``pip install 'nnefx[onnxruntime]'``, ``[openvino]``,
``[torch]``).  A graph reaches an engine through one of nnefx's exporters (ONNX for
onnxruntime, IR v11 for OpenVINO, a torch module for PyTorch), so an engine runs exactly what
the exporter can express exactly; what it cannot is refused before anything runs, with the
operation and its position (:func:`query`).  Engines are checked against the formal backend
(``Session(..., verify=True)``) and in the test suite.
"""

from __future__ import annotations

from ..diagnostics import NNEFXError
from .base import Engine, EngineRunner, Problem

NUMPY_BACKENDS = ("fast", "formal")


def engines() -> dict[str, Engine]:
    """Every engine nnefx knows, installed or not, by backend name."""
    from .onnxruntime import OnnxRuntimeEngine
    from .openvino import OpenVinoEngine
    from .torch import TorchEngine

    return {e.name: e for e in (OnnxRuntimeEngine(), OpenVinoEngine(), TorchEngine())}


def get(name: str) -> Engine:
    table = engines()
    if name not in table:
        raise NNEFXError(f"unknown backend '{name}' (known: {', '.join(backend_names())})")
    return table[name]


def backend_names() -> list[str]:
    return [*NUMPY_BACKENDS, *engines(), "auto"]


__all__ = ["Engine", "EngineRunner", "Problem", "backend_names", "engines", "get"]
