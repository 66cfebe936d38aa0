"""nnefx: read, check, shape, convert and run neural networks with exact semantics.

The pipeline (see ARCHITECTURE.md): text → tokens → AST → checked & expanded graph →
shaped graph → plan → execution, with formats (NNEF, IR, CVM, ONNX) at the edges and one
operator registry (:mod:`nnefx.ops`) in the middle.
"""

from __future__ import annotations

# Before anything imports numpy: pick OpenBLAS kernels on CPUs it misdetects (see _blas.py).
from ._blas import select as _select_blas

_select_blas()

from typing import Any  # noqa: E402

from .api import load, save  # noqa: E402
from .diagnostics import Location, NNEFXError  # noqa: E402
from .graph import Graph, Model, Operation, Tensor  # noqa: E402

__version__ = "0.1.0"

__all__ = ["Graph", "Location", "Model", "NNEFXError", "Operation", "Session", "Tensor", "load", "query",
           "save", "__version__"]


def __getattr__(name: str) -> Any:
    # The runtime pulls in every operator family; import it only when asked for.
    if name == "Session":
        from .runtime.session import Session

        return Session
    if name == "query":
        from .engines.query import query

        return query
    raise AttributeError(f"module 'nnefx' has no attribute {name!r}")
