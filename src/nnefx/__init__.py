"""nnefx: read, check, shape, convert and run neural networks with exact semantics.

The pipeline (see ARCHITECTURE.md): text → tokens → AST → checked & expanded graph →
shaped graph → plan → execution, with formats (NNEF, IR, CVM, ONNX) at the edges and one
operator registry (:mod:`nnefx.ops`) in the middle.

``import nnefx`` only defines names: it changes nothing in the process environment and
does not import numpy, so that :func:`nnefx.blas.configure` can still choose OpenBLAS's
kernels afterwards.  The public names load their modules on first use.
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Location, NNEFXError

__version__ = "0.1.0"

__all__ = ["Graph", "Location", "Model", "NNEFXError", "Operation", "Session", "Tensor", "load", "query",
           "save", "__version__"]

#: Public name -> module that defines it (imported on first access).
_LAZY = {"load": ".api", "save": ".api", "Graph": ".graph", "Model": ".graph", "Operation": ".graph",
         "Tensor": ".graph", "Session": ".runtime.session", "query": ".engines.query"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnefx' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
