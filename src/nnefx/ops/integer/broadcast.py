"""Broadcast operators: ``cvm_broadcast_{add,sub,mul,div,max,greater}`` (the CVM runtime's "Operator Math Formalization", "Broadcast Operators").

Shapes align on the right; aligned dimensions must be equal or one of them 1.  add, sub and
mul wrap in int32; div truncates toward zero with ``x / 0 = 0`` (the seed is silent on both,
the runtime does this, fixture ex08); greater gives 1 or 0 (``broadcast_greater`` is
registered by the runtime but absent from the seed).
"""

from __future__ import annotations

import itertools

import numpy as np

from ._int import (
    as_int32,
    cvm_define,
    precision_rule,
    shape_error,
    trunc_div,
    trunc_div_int,
    wrap32,
    wrap32_int,
)

_PARAMS = "a: tensor<integer>, b: tensor<integer>"


def broadcast_shape(op: str, a, b) -> tuple[int, ...]:
    m, n = len(a), len(b)
    q = max(m, n)
    ea = (1,) * (q - m) + tuple(a)
    eb = (1,) * (q - n) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(ea, eb, strict=True)):
        if x != y and x != 1 and y != 1:
            raise shape_error(op, f"shapes {tuple(a)} and {tuple(b)} do not broadcast (dimension {i})")
        out.append(max(x, y) if x != 1 and y != 1 else (y if x == 1 else x))
    return tuple(out)


def _formal(op, f, a, b):
    """Y[d] = A[a] OP B[b] with a_j = d_{Q-M+j} if it is < m_j else 0 (likewise b)."""
    a = as_int32(a, op, "a")
    b = as_int32(b, op, "b")
    shape = broadcast_shape(op, a.shape, b.shape)
    q, m, n = len(shape), a.ndim, b.ndim
    y = np.zeros(shape, np.int32)
    for d in itertools.product(*(range(s) for s in shape)):
        ai = tuple(d[q - m + j] if d[q - m + j] < a.shape[j] else 0 for j in range(m))
        bi = tuple(d[q - n + j] if d[q - n + j] < b.shape[j] else 0 for j in range(n))
        y[d] = f(int(a[ai]), int(b[bi]))
    return y


def _make(name: str, scalar, vector, precision, doc: str):
    op = cvm_define(name, "integer.broadcast", _PARAMS, doc=doc)
    full = "cvm_" + name
    op.shape(lambda a, b: broadcast_shape(full, a, b))
    op.formal(lambda a, b: _formal(full, scalar, a, b))

    def fast(a, b):
        a = as_int32(a, full, "a")
        b = as_int32(b, full, "b")
        broadcast_shape(full, a.shape, b.shape)
        return vector(a.astype(np.int64), b.astype(np.int64))

    op.fast(fast)
    precision_rule(op)(precision)
    return op


_make("broadcast_add", lambda x, y: wrap32_int(x + y), lambda x, y: wrap32(x + y),
      lambda p, s, o: [max(p[0], p[1]) + 1], "A + B with broadcasting; int32 wrap-around.")
_make("broadcast_sub", lambda x, y: wrap32_int(x - y), lambda x, y: wrap32(x - y),
      lambda p, s, o: [max(p[0], p[1]) + 1], "A - B with broadcasting; int32 wrap-around.")
_make("broadcast_mul", lambda x, y: wrap32_int(x * y), lambda x, y: wrap32(x * y),
      lambda p, s, o: [p[0] + p[1]], "A * B with broadcasting; int32 wrap-around.")
_make("broadcast_div", trunc_div_int, trunc_div,
      lambda p, s, o: [p[0]], "A / B truncated toward zero; x / 0 = 0 (runtime).")
_make("broadcast_max", max, lambda x, y: np.maximum(x, y).astype(np.int32),
      lambda p, s, o: [max(p[0], p[1])], "max(A, B) with broadcasting.")
_make("broadcast_greater", lambda x, y: int(x > y), lambda x, y: (x > y).astype(np.int32),
      lambda p, s, o: [p[0]], "1 where A > B else 0 (runtime-only operator).")
