"""ONNX BitwiseAnd/Or/Xor/Not (opset 18), CumProd (opset 26), Hardmax (opset 13) and Det
(opset 11) as operations: NNEF has no bit operations, no running product, no one-hot of the
maximum along an axis and no determinant.

* Bitwise operations act on the two's-complement bits of the operands' own width (numpy
  broadcasting), so an int8 ``BitwiseNot(5)`` is ``-6`` and a uint8 one ``250``.
* ``onnx_cum_prod`` multiplies along ``axis`` (a rank-0 tensor, as ONNX gives it), optionally
  excluding each item itself (``exclusive``: the first product is 1) and from the end
  (``reverse``); integers wrap in their width, floats accumulate in their own type as the
  product runs.  ``onnx_cum_sum`` is the same running sum (the first exclusive sum is 0): the
  ONNX CumSum of integer data, which the float ``cumulative_sum`` cannot hold exactly.
* ``onnx_hardmax`` is 1 at the first maximum along ``axis`` and 0 elsewhere.
* ``onnx_det`` is the determinant of each square matrix in the last two axes.
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define
from ._common import norm_axis, numpy_broadcast

FAMILY = "onnx_arith"
_BITWISE = ("and", "or", "xor")

onnx_bitwise = define("onnx_bitwise", FAMILY, """
fragment onnx_bitwise( x: tensor<integer>, y: tensor<integer>, op: string ) -> ( z: tensor<integer> );
""", domain="onnx", doc="ONNX BitwiseAnd / BitwiseOr / BitwiseXor (op = 'and', 'or', 'xor'), numpy broadcasting.")


@onnx_bitwise.shape
def _bitwise_shape(x, y, op="and"):
    if op not in _BITWISE:
        raise attr_error("onnx_bitwise", "op", op, "must be 'and', 'or' or 'xor'")
    return numpy_broadcast("onnx_bitwise", x, y)


def _bits_of(v: int, width: int) -> list[int]:
    return [(v >> i) & 1 for i in range(width)]  # Python's >> on negatives is two's complement


def _from_bits(bits: list[int], signed: bool) -> int:
    v = sum(b << i for i, b in enumerate(bits))
    return v - (1 << len(bits)) if signed and bits[-1] else v


@onnx_bitwise.formal
def _bitwise_formal(x, y, op="and"):
    _bitwise_shape(np.shape(x), np.shape(y), op)
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    width, signed = x.dtype.itemsize * 8, x.dtype.kind == "i"
    rule = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}[op]
    out = np.empty(x.shape, x.dtype)
    for index in np.ndindex(x.shape):
        a, b = _bits_of(int(x[index]), width), _bits_of(int(y[index]), width)
        out[index] = _from_bits([rule(p, q) for p, q in zip(a, b, strict=True)], signed)
    return out


@onnx_bitwise.fast
def _bitwise_fast(x, y, op="and"):
    _bitwise_shape(np.shape(x), np.shape(y), op)
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    x, y = np.asarray(x), np.asarray(y)
    return fn(x, y.astype(x.dtype, copy=False))


onnx_bitwise_not = define("onnx_bitwise_not", FAMILY, """
fragment onnx_bitwise_not( x: tensor<integer> ) -> ( y: tensor<integer> );
""", domain="onnx", doc="ONNX BitwiseNot: every bit of the operand's width flipped.")


@onnx_bitwise_not.shape
def _bitwise_not_shape(x):
    return tuple(x)


@onnx_bitwise_not.formal
def _bitwise_not_formal(x):
    x = np.asarray(x)
    width, signed = x.dtype.itemsize * 8, x.dtype.kind == "i"
    out = np.empty(x.shape, x.dtype)
    for index in np.ndindex(x.shape):
        out[index] = _from_bits([1 - b for b in _bits_of(int(x[index]), width)], signed)
    return out


@onnx_bitwise_not.fast
def _bitwise_not_fast(x):
    return np.invert(np.asarray(x))


onnx_cum_prod = define("onnx_cum_prod", FAMILY, """
fragment onnx_cum_prod<?>( x: tensor<?>, axis: tensor<integer>, exclusive: logical = false, reverse: logical = false )
-> ( y: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX CumProd: running product along `axis` (exclusive, reverse).")

onnx_cum_sum = define("onnx_cum_sum", FAMILY, """
fragment onnx_cum_sum<?>( x: tensor<?>, axis: tensor<integer>, exclusive: logical = false, reverse: logical = false )
-> ( y: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX CumSum of any numeric type: running sum along `axis` (exclusive, "
                                      "reverse); integers wrap in their width.")

#: the running operations: (name, numpy's running form, identity, one step)
_RUNNING = {"onnx_cum_prod": (np.cumprod, 1, lambda a, b: a * b), "onnx_cum_sum": (np.cumsum, 0, lambda a, b: a + b)}


def _running_shape(name):
    def rule(x, axis, exclusive=False, reverse=False, dtype=None):
        if len(axis) != 0:
            raise op_error(name, f"axis must be a rank-0 tensor, got shape {list(axis)}")
        return tuple(x)
    return rule


def _axis(name: str, x: np.ndarray, axis) -> int:
    axis = np.asarray(axis)
    if axis.ndim:
        raise op_error(name, f"axis must be a rank-0 tensor, got shape {list(axis.shape)}")
    return norm_axis(name, int(axis), x.ndim)


def _running_formal(name):
    """Item by item along the axis: integers wrap after every step, floats accumulate in their type."""
    _, identity, step = _RUNNING[name]

    def formal(x, axis, exclusive=False, reverse=False, dtype=None):
        x = np.asarray(x)
        a = _axis(name, x, axis)
        out = np.empty_like(x)
        n = x.shape[a]
        order = range(n - 1, -1, -1) if reverse else range(n)
        for rest in np.ndindex(x.shape[:a] + x.shape[a + 1:]):
            running = x.dtype.type(identity)
            for i in order:
                where = rest[:a] + (i,) + rest[a:]
                if exclusive:
                    out[where] = running
                with np.errstate(over="ignore"):
                    running = np.asarray(step(running, x[where])).astype(x.dtype)[()]
                if not exclusive:
                    out[where] = running
        return out
    return formal


def _running_fast(name):
    fn, identity, _ = _RUNNING[name]

    def fast(x, axis, exclusive=False, reverse=False, dtype=None):
        x = np.asarray(x)
        a = _axis(name, x, axis)
        n = x.shape[a]
        with np.errstate(over="ignore"):
            out = fn(np.flip(x, a) if reverse else x, axis=a, dtype=x.dtype)
        if exclusive and n:  # each item's running value before it: shifted by one, the identity first
            first = np.full_like(np.take(out, [0], axis=a), identity)
            out = np.concatenate([first, np.take(out, np.arange(n - 1), axis=a)], axis=a)
        return np.flip(out, a) if reverse else out
    return fast


for _op in (onnx_cum_prod, onnx_cum_sum):
    _op.shape(_running_shape(_op.name))
    _op.formal(_running_formal(_op.name))
    _op.fast(_running_fast(_op.name))


onnx_hardmax = define("onnx_hardmax", FAMILY, """
fragment onnx_hardmax( input: tensor<scalar>, axis: integer = -1 ) -> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX Hardmax-13: 1 at the first maximum along `axis`, 0 elsewhere.")


@onnx_hardmax.shape
def _hardmax_shape(x, axis=-1):
    norm_axis("onnx_hardmax", axis, len(x))
    return tuple(x)


@onnx_hardmax.formal
def _hardmax_formal(x, axis=-1):
    x = np.asarray(x)
    a = norm_axis("onnx_hardmax", axis, x.ndim)
    out = np.zeros_like(x)
    for rest in np.ndindex(x.shape[:a] + x.shape[a + 1:]):
        best = None
        for i in range(x.shape[a]):
            v = x[rest[:a] + (i,) + rest[a:]]
            if best is None or v > x[rest[:a] + (best,) + rest[a:]]:
                best = i
        if best is not None:
            out[rest[:a] + (best,) + rest[a:]] = 1
    return out


@onnx_hardmax.fast
def _hardmax_fast(x, axis=-1):
    x = np.asarray(x)
    a = norm_axis("onnx_hardmax", axis, x.ndim)
    out = np.zeros_like(x)
    if x.size:
        np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=a), a), 1, axis=a)
    return out


onnx_det = define("onnx_det", FAMILY, """
fragment onnx_det( input: tensor<scalar> ) -> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX Det: the determinant of each square matrix in the last two axes.")


@onnx_det.shape
def _det_shape(x):
    if len(x) < 2 or None not in (x[-1], x[-2]) and x[-1] != x[-2]:
        raise op_error("onnx_det", f"the input needs square matrices in its last two axes, got {list(x)}")
    return tuple(x[:-2])


@onnx_det.formal
def _det_formal(x):
    # Gaussian elimination with partial pivoting, in float64: det = sign * product of pivots.
    x = np.asarray(x)
    _det_shape(x.shape)
    out = np.empty(x.shape[:-2], np.float64)
    n = x.shape[-1]
    for index in np.ndindex(out.shape):
        m = x[index].astype(np.float64).copy()
        det = 1.0
        for col in range(n):
            pivot = col + int(np.argmax(np.abs(m[col:, col])))
            if m[pivot, col] == 0:
                det = 0.0
                break
            if pivot != col:
                m[[col, pivot]] = m[[pivot, col]]
                det = -det
            det *= m[col, col]
            m[col + 1:] -= np.outer(m[col + 1:, col] / m[col, col], m[col])
        out[index] = det
    return out.astype(x.dtype)


@onnx_det.fast
def _det_fast(x):
    x = np.asarray(x)
    _det_shape(x.shape)
    return np.linalg.det(x).astype(x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
