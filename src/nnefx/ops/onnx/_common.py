"""What the ``onnx`` domain's kernels share: ONNX axis rules, numpy broadcasting of shapes,
and the ``stash_type`` codes of the normalisations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...diagnostics import NNEFXError
from .._common import op_error


def norm_axis(op: str, axis: int, rank: int, attr: str = "axis") -> int:
    """ONNX axis rule: ``-rank <= axis < rank``, negative values count from the end."""
    if not -rank <= axis < rank:
        raise op_error(op, f"{attr} = {axis} is outside [-{rank}, {rank - 1}] for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


def numpy_broadcast(op: str, *shapes: Sequence[int | None]) -> tuple:
    """numpy's right-aligned broadcast of ``shapes`` (``None`` is an unknown extent)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for i in range(rank):
        dim: int | None = 1
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = s[j]
            if d is None:
                dim = None if dim == 1 else dim
            elif d != 1:
                if dim not in (1, None) and dim != d:
                    raise op_error(op, f"shapes {[list(x) for x in shapes]} do not broadcast (numpy rule)")
                dim = d
        out.append(dim)
    return tuple(out)


def stash(code: int, op: str) -> np.dtype:
    """ONNX ``stash_type`` (a TensorProto data type code) as the dtype statistics are kept in."""
    codes = {1: np.float32, 10: np.float16, 11: np.float64}
    if code == 16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if code not in codes:
        raise NNEFXError(f"operation '{op}': stash_type = {code} is not a floating-point type code")
    return np.dtype(codes[code])

