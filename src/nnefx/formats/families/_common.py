"""Small helpers the families' ONNX readers share (inputs that must be present or known)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..reading.values import Value


def onnx_need(r: Any, ins: list, i: int, what: str) -> Value:
    """Input ``i`` of the node, which must be given."""
    if i >= len(ins) or ins[i] is None:
        raise r.error(f"input {i} ({what}) is missing")
    return ins[i]


def onnx_ints(r: Any, v: Value | None, what: str) -> list[int] | None:
    """The integers of an input known while loading (None when the input is omitted)."""
    if v is None:
        return None
    if not v.is_const:
        raise r.error(f"{what} must be known when the model is loaded")
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def onnx_rank(r: Any, v: Value) -> int:
    if v.shape is None:
        raise r.error("the input rank is not known")
    return len(v.shape)


def onnx_const(r: Any, v: Value, what: str) -> np.ndarray:
    if not v.is_const:
        raise r.error(f"{what} must be known when the model is loaded")
    return v.const
