"""ONNX's integer matrix products and convolutions (opset 10; QLinearMatMul opset 21 scales):
``MatMulInteger``, ``ConvInteger``, ``QLinearMatMul`` and ``QLinearConv`` as single operations.

NNEF has no integer ``matmul``/``conv`` (its ``linear_quantize`` works on floats), and the
float kernels of ``matmul``/``conv`` round in float32: an 8-bit product must be exact.  The
definitions, from the ONNX operator docs:

* **MatMulInteger** — ``Y = (A - a_zero_point) @ (B - b_zero_point)`` (numpy.matmul, batch
  axes broadcast) in int32; "the accumulation may overflow if and only if in 32 bits", so the
  exact sum wraps modulo 2^32.  ``a_zero_point`` is per tensor (one value) or per row of ``A``
  (``[M]``, or ``A``'s rank with last extent 1), ``b_zero_point`` per tensor or per column of
  ``B`` (``[N]``, or ``B``'s rank with extent 1 at axis -2).
* **ConvInteger** — ``conv(x - x_zero_point, w - w_zero_point)`` in int32 (wrapping likewise):
  padding reads 0 *after* the zero point is taken off (the padded items are the zero point in
  the code domain); ``w_zero_point`` is per tensor or per output channel (``[M]``).
* **QLinearMatMul / QLinearConv** — the same integer accumulator ``acc`` (QLinearConv adds its
  int32 bias ``B``, quantized at scale ``x_scale * w_scale`` with zero point 0), requantized:
  ``y = saturate(round_half_even(acc * (a_scale * b_scale / y_scale)) + y_zero_point)`` in
  ``y_zero_point``'s 8-bit code type.  The multiplier is formed in float64 from the scales
  (float32, float16 or bfloat16: exact in float64) and the product taken in float64 — one
  rounding, the nnefx arithmetic contract; scales and zero points of ``a``/``b`` are per tensor
  or per row/column as above (QLinearConv: ``w``'s per output channel), ``y``'s broadcast to
  the result (numpy rule).

Both kernels compute the exact integer sums: the formal one element by element in int64, the
fast one as a float64 BLAS product when every partial sum stays below 2^53 (exact; checked from
the operands' magnitudes), else an int64 product.  Either result is then wrapped to int32
(two's complement arithmetic modulo 2^64 keeps the sum's residue modulo 2^32).  float8 codes
(QLinearMatMul-21) are not read.  Convolution attributes are ONNX's (``pads`` begins then ends,
``strides``, ``dilations``, ``group``); the reader resolves ``auto_pad`` to ``pads``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._common import guard_family, op_error
from ..registry import define

FAMILY = "onnx_qlinear"

#: the code types of the quantized results (QLinearMatMul / QLinearConv ``T3``)
CODE_TYPES = ("int8", "uint8")


def _wrap32(acc: np.ndarray) -> np.ndarray:
    """An int64 accumulator wrapped to int32 (the ONNX "accumulation may overflow in 32 bits")."""
    return np.asarray(acc, np.int64).astype(np.int32)


# --- zero points and scales ------------------------------------------------------------------

def _row_param(op: str, what: str, p, a) -> tuple | None:
    """The broadcast shape of a per-tensor or per-row parameter of matrix ``a`` (None: scalar)."""
    p, a = tuple(p), tuple(a)
    if len(p) <= 1 and all(d == 1 for d in p):
        return None
    if len(a) >= 2 and len(p) == 1 and (p[0] is None or a[-2] is None or p[0] == a[-2]):
        return (p[0], 1)
    if len(a) >= 2 and len(p) == len(a) and p[-1] == 1 \
            and all(u in (1, v, None) or v is None for u, v in zip(p[:-1], a[:-1], strict=True)):
        return p
    raise op_error(op, f"{what} of shape {list(p)} is neither per tensor nor per row of a {list(a)} matrix "
                       f"([{a[-2] if len(a) >= 2 else ''}] or {list(a[:-1]) + [1]})")


def _col_param(op: str, what: str, p, b) -> tuple | None:
    """The broadcast shape of a per-tensor or per-column parameter of matrix ``b``."""
    p, b = tuple(p), tuple(b)
    if len(p) <= 1 and all(d == 1 for d in p):
        return None
    if len(b) >= 2 and len(p) == 1 and (p[0] is None or b[-1] is None or p[0] == b[-1]):
        return (1, p[0])
    if len(b) >= 2 and len(p) == len(b) and p[-2] == 1 \
            and all(u in (1, v, None) or v is None for u, v in zip(p[:-2] + p[-1:], b[:-2] + b[-1:], strict=True)):
        return p
    raise op_error(op, f"{what} of shape {list(p)} is neither per tensor nor per column of a {list(b)} matrix "
                       f"([{b[-1] if len(b) >= 2 else ''}] or {list(b[:-2]) + [1] + list(b[-1:])})")


def _channel_param(op: str, what: str, p, channels) -> bool:
    """True for a per-output-channel parameter ``[M]``, False for a per-tensor one."""
    p = tuple(p)
    if len(p) <= 1 and all(d == 1 for d in p):
        return False
    if len(p) == 1 and (p[0] is None or channels is None or p[0] == channels):
        return True
    raise op_error(op, f"{what} of shape {list(p)} is neither per tensor nor per output channel ([{channels}])")


def _scalar_param(op: str, what: str, p) -> None:
    if len(p) > 1 or any(d not in (1, None) for d in p):
        raise op_error(op, f"{what} must be a single value (per tensor), got shape {list(p)}")


def _as(p: np.ndarray, shape: tuple | None) -> np.ndarray:
    p = np.asarray(p)
    return p.reshape(()) if shape is None else p.reshape(shape)


def _per_tensor(p: np.ndarray) -> np.ndarray:
    """A parameter in float64, one value as a rank-0 array (so it broadcasts to any result)."""
    p = np.asarray(p).astype(np.float64)
    return p.reshape(()) if p.size == 1 else p


def _code_dtype(op: str, zero_point) -> np.dtype:
    dt = np.asarray(zero_point).dtype
    if dt.name not in CODE_TYPES:
        raise op_error(op, f"the result's codes (y_zero_point) are {dt.name}; QLinear results are int8 or uint8 codes")
    return dt


def _requantize_fast(acc: np.ndarray, multiplier: np.ndarray, zero: np.ndarray, dt: np.dtype) -> np.ndarray:
    info = np.iinfo(dt)
    y = np.rint(acc.astype(np.float64) * multiplier + np.asarray(zero).astype(np.float64))
    return np.clip(y, info.min, info.max).astype(dt)


def _requantize_formal(acc: np.ndarray, multiplier: np.ndarray, zero: np.ndarray, dt: np.dtype) -> np.ndarray:
    info = np.iinfo(dt)
    mult = np.broadcast_to(multiplier, acc.shape)
    zero = np.broadcast_to(np.asarray(zero), acc.shape)
    out = np.empty(acc.shape, dt)
    for index in np.ndindex(acc.shape):
        v = round(float(acc[index]) * float(mult[index]) + float(zero[index]))  # ties to even
        out[index] = min(max(v, int(info.min)), int(info.max))
    return out


# --- matrix product --------------------------------------------------------------------------

def _matmul_shape(op: str, a, b) -> tuple:
    """numpy.matmul's result shape (1-D operands promoted and their axis dropped)."""
    a, b = tuple(a), tuple(b)
    if not a or not b:
        raise op_error(op, "matmul operands must have rank >= 1")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if None not in (a2[-1], b2[-2]) and a2[-1] != b2[-2]:
        raise op_error(op, f"inner extents differ: {list(a)} @ {list(b)}")
    from ._common import numpy_broadcast

    batch = numpy_broadcast(op, a2[:-2], b2[:-2])
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return tuple(out)


def _shifted(x, zero, shape) -> np.ndarray:
    """``x - zero`` exactly, in int64 (``zero`` reshaped to its broadcast shape)."""
    return np.asarray(x).astype(np.int64) - _as(zero, shape).astype(np.int64)


def _exact_float(a: np.ndarray, b: np.ndarray, terms: int) -> bool:
    """Whether a float64 product of these int64 operands sums exactly (every partial sum < 2^53)."""
    top_a = int(np.max(np.abs(a), initial=0))
    top_b = int(np.max(np.abs(b), initial=0))
    return top_a * top_b * max(terms, 1) < 2 ** 53


def _int_matmul_fast(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = a.shape[-1]
    if _exact_float(a, b, k):
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a, b)


def _int_matmul_formal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_k a[..., i, k] * b[..., k, j], item by item in int64 (numpy.matmul's broadcasting)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    a2 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = np.broadcast_to(b2, batch + b2.shape[-2:])
    out = np.zeros(batch + (a2.shape[-2], b2.shape[-1]), np.int64)
    for index in np.ndindex(out.shape):
        *n, i, j = index
        row, col = a2[(*n, i)], b2[(*n, slice(None), j)]
        out[index] = sum(int(u) * int(v) for u, v in zip(row, col, strict=True))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


onnx_matmul_integer = define("onnx_matmul_integer", FAMILY, """
fragment onnx_matmul_integer(
    A: tensor<integer>,
    B: tensor<integer>,
    a_zero_point: tensor<integer> = 0,
    b_zero_point: tensor<integer> = 0 )
-> ( Y: tensor<integer> );
""", domain="onnx", doc="ONNX MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) exactly, in int32 "
                        "(wrapping); zero points per tensor, per row of A, per column of B.")


@onnx_matmul_integer.shape
def _matmul_integer_shape(a, b, a_zero_point=(), b_zero_point=()):
    name = "onnx_matmul_integer"
    _row_param(name, "a_zero_point", a_zero_point, a)
    _col_param(name, "b_zero_point", b_zero_point, b)
    return _matmul_shape(name, a, b)


@onnx_matmul_integer.etypes
def _matmul_integer_etypes(*_, **__):
    return "i32"


def _matmul_integer(kernel, a, b, a_zero_point, b_zero_point):
    a, b = np.asarray(a), np.asarray(b)
    _matmul_integer_shape(a.shape, b.shape, np.shape(a_zero_point), np.shape(b_zero_point))
    name = "onnx_matmul_integer"
    sa = _shifted(a, a_zero_point, _row_param(name, "a_zero_point", np.shape(a_zero_point), a.shape))
    sb = _shifted(b, b_zero_point, _col_param(name, "b_zero_point", np.shape(b_zero_point), b.shape))
    return _wrap32(kernel(sa, sb))


@onnx_matmul_integer.formal
def _matmul_integer_formal(a, b, a_zero_point=0, b_zero_point=0):
    return _matmul_integer(_int_matmul_formal, a, b, a_zero_point, b_zero_point)


@onnx_matmul_integer.fast
def _matmul_integer_fast(a, b, a_zero_point=0, b_zero_point=0):
    return _matmul_integer(_int_matmul_fast, a, b, a_zero_point, b_zero_point)


onnx_qlinear_matmul = define("onnx_qlinear_matmul", FAMILY, """
fragment onnx_qlinear_matmul(
    a: tensor<integer>,
    a_scale: tensor<scalar>,
    a_zero_point: tensor<integer>,
    b: tensor<integer>,
    b_scale: tensor<scalar>,
    b_zero_point: tensor<integer>,
    y_scale: tensor<scalar>,
    y_zero_point: tensor<integer> )
-> ( y: tensor<integer> );
""", domain="onnx", doc="ONNX QLinearMatMul: the exact integer product of the shifted codes, requantized "
                        "to y_zero_point's 8-bit codes at a_scale * b_scale / y_scale (ties to even, "
                        "saturating).")


def _qmatmul_params(a, a_scale, a_zero_point, b, b_scale, b_zero_point):
    name = "onnx_qlinear_matmul"
    ra = _row_param(name, "a_zero_point", a_zero_point, a)
    if _row_param(name, "a_scale", a_scale, a) != ra:
        raise op_error(name, f"a_scale {list(a_scale)} and a_zero_point {list(a_zero_point)} differ in shape")
    cb = _col_param(name, "b_zero_point", b_zero_point, b)
    if _col_param(name, "b_scale", b_scale, b) != cb:
        raise op_error(name, f"b_scale {list(b_scale)} and b_zero_point {list(b_zero_point)} differ in shape")
    return ra, cb


@onnx_qlinear_matmul.shape
def _qlinear_matmul_shape(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    name = "onnx_qlinear_matmul"
    _qmatmul_params(a, a_scale, a_zero_point, b, b_scale, b_zero_point)
    out = _matmul_shape(name, a, b)
    from ._common import numpy_broadcast

    for what, p in (("y_scale", y_scale), ("y_zero_point", y_zero_point)):
        if numpy_broadcast(name, out, p) != out:
            raise op_error(name, f"{what} of shape {list(p)} does not broadcast to the result {list(out)}")
    return out


@onnx_qlinear_matmul.etypes
def _qlinear_matmul_etypes(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    return y_zero_point


def _qlinear_matmul(kernel, requantize, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    a, b = np.asarray(a), np.asarray(b)
    args = [np.asarray(v) for v in (a_scale, a_zero_point, b_scale, b_zero_point, y_scale, y_zero_point)]
    out_shape = _qlinear_matmul_shape(a.shape, args[0].shape, args[1].shape, b.shape, args[2].shape, args[3].shape,
                                      args[4].shape, args[5].shape)
    dt = _code_dtype("onnx_qlinear_matmul", y_zero_point)
    ra, cb = _qmatmul_params(a.shape, args[0].shape, args[1].shape, b.shape, args[2].shape, args[3].shape)
    acc = _wrap32(kernel(_shifted(a, args[1], ra), _shifted(b, args[3], cb)))
    # per-row / per-column scales meet in the product's 2-D form (a 1-D operand has one row or
    # column, and per tensor parameters only), which has the result's items
    rows = a.shape[-2] if a.ndim > 1 else 1
    cols = b.shape[-1] if b.ndim > 1 else 1
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    scales = _as(args[0], ra).astype(np.float64) * _as(args[2], cb).astype(np.float64)
    multiplier = np.broadcast_to(scales, batch + (rows, cols)).reshape(out_shape) / _per_tensor(args[4])
    return requantize(acc, np.broadcast_to(multiplier, out_shape), args[5], dt)


@onnx_qlinear_matmul.formal
def _qlinear_matmul_formal(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    return _qlinear_matmul(_int_matmul_formal, _requantize_formal, a, a_scale, a_zero_point, b, b_scale,
                           b_zero_point, y_scale, y_zero_point)


@onnx_qlinear_matmul.fast
def _qlinear_matmul_fast(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    return _qlinear_matmul(_int_matmul_fast, _requantize_fast, a, a_scale, a_zero_point, b, b_scale,
                           b_zero_point, y_scale, y_zero_point)


# --- convolution -----------------------------------------------------------------------------

def _conv_geometry(op: str, x, w, pads, strides, dilations, group):
    """ONNX Conv's window arithmetic: (dilations, pads, strides, output spatial extents)."""
    x, w = tuple(x), tuple(w)
    if len(x) < 3 or len(w) != len(x):
        raise op_error(op, f"input {list(x)} and filter {list(w)} must be [N, C, D...] and [M, C/group, k...] "
                           "of one rank >= 3")
    n = len(x) - 2
    dilations = [int(v) for v in dilations] or [1] * n
    strides = [int(v) for v in strides] or [1] * n
    pads = [int(v) for v in pads] or [0] * (2 * n)
    if len(dilations) != n or len(strides) != n or len(pads) != 2 * n:
        raise op_error(op, f"dilations and strides need {n} values and pads {2 * n}")
    if min(dilations) < 1 or min(strides) < 1 or min(pads) < 0:
        raise op_error(op, "dilations and strides must be >= 1 and pads >= 0")
    if group < 1 or (x[1] is not None and w[1] is not None and x[1] != w[1] * group) \
            or (w[0] is not None and w[0] % group):
        raise op_error(op, f"channels do not split: input {list(x)}, filter {list(w)}, group {group}")
    out = []
    for d in range(n):
        if x[2 + d] is None or w[2 + d] is None:
            out.append(None)
            continue
        span = dilations[d] * (w[2 + d] - 1) + 1
        extent = (x[2 + d] + pads[d] + pads[d + n] - span) // strides[d] + 1
        if extent < 1:
            raise op_error(op, f"the filter window ({span}) does not fit spatial axis {d} "
                               f"({x[2 + d]} + padding {pads[d]} + {pads[d + n]})")
        out.append(extent)
    return dilations, pads, strides, out


def _int_conv_fast(x: np.ndarray, w: np.ndarray, dilations, pads, strides, out, group) -> np.ndarray:
    """im2col of the zero-padded shifted input and one exact product per group (see module doc)."""
    n = x.ndim - 2
    batch, channels = x.shape[:2]
    m = w.shape[0]
    kernel = tuple(w.shape[2:])
    cg, mg = channels // group, m // group
    padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[d], pads[d + n]) for d in range(n)])
    st = padded.strides
    view = np.lib.stride_tricks.as_strided(
        padded, (batch, channels, *out, *kernel),
        st[:2] + tuple(st[2 + d] * strides[d] for d in range(n)) + tuple(st[2 + d] * dilations[d] for d in range(n)),
        writeable=False)
    positions, taps = math.prod(out), cg * math.prod(kernel)
    # (batch, group, positions, cg * taps): channel-major then filter offsets, as w is laid out
    perm = (0, 1) + tuple(range(2, 2 + n)) + tuple(range(2 + n, 2 + 2 * n))
    cols = view.transpose(perm).reshape(batch, group, cg, positions, math.prod(kernel))
    cols = cols.transpose(0, 1, 3, 2, 4).reshape(batch, group, positions, taps)
    wm = w.reshape(group, mg, taps).transpose(0, 2, 1)  # (group, taps, mg)
    y = _int_matmul_fast(cols, wm[None])  # (batch, group, positions, mg)
    return y.transpose(0, 1, 3, 2).reshape(batch, m, *out)


def _int_conv_formal(x: np.ndarray, w: np.ndarray, dilations, pads, strides, out, group) -> np.ndarray:
    """out[b, o, i] = sum over the group's channels c and offsets j of
    x~[b, c, i*s + j*d - pad] * w[o, c', j], with x~ = 0 outside the input; in int64."""
    n = x.ndim - 2
    batch, channels = x.shape[:2]
    m = w.shape[0]
    cg, mg = channels // group, m // group
    y = np.zeros((batch, m, *out), np.int64)
    for b, o in itertools.product(range(batch), range(m)):
        g = o // mg
        for i in itertools.product(*(range(e) for e in out)):
            total = 0
            for j in itertools.product(*(range(k) for k in w.shape[2:])):
                src = [i[d] * strides[d] + j[d] * dilations[d] - pads[d] for d in range(n)]
                if not all(0 <= s < x.shape[2 + d] for d, s in enumerate(src)):
                    continue
                for c in range(cg):
                    total += int(x[(b, g * cg + c, *src)]) * int(w[(o, c, *j)])
            y[(b, o, *i)] = total
    return y


def _conv_shifted(op, x, w, x_zero_point, w_zero_point):
    """``x - x_zero_point`` and ``w - w_zero_point`` (per output channel where ``[M]``) in int64."""
    _scalar_param(op, "x_zero_point", np.shape(x_zero_point))
    per_channel = _channel_param(op, "w_zero_point", np.shape(w_zero_point), w.shape[0])
    zw = _as(w_zero_point, (w.shape[0],) + (1,) * (w.ndim - 1) if per_channel else None)
    return _shifted(x, x_zero_point, None), np.asarray(w).astype(np.int64) - zw.astype(np.int64)


onnx_conv_integer = define("onnx_conv_integer", FAMILY, """
fragment onnx_conv_integer(
    x: tensor<integer>,
    w: tensor<integer>,
    x_zero_point: tensor<integer> = 0,
    w_zero_point: tensor<integer> = 0,
    dilations: integer[] = [],
    group: integer = 1,
    pads: integer[] = [],
    strides: integer[] = [] )
-> ( y: tensor<integer> );
""", domain="onnx", doc="ONNX ConvInteger: conv(x - x_zero_point, w - w_zero_point) exactly, in int32 "
                        "(wrapping); w_zero_point per tensor or per output channel.")


@onnx_conv_integer.shape
def _conv_integer_shape(x, w, x_zero_point=(), w_zero_point=(), dilations=(), group=1, pads=(), strides=()):
    name = "onnx_conv_integer"
    _, _, _, out = _conv_geometry(name, x, w, pads, strides, dilations, group)
    _scalar_param(name, "x_zero_point", x_zero_point)
    _channel_param(name, "w_zero_point", w_zero_point, w[0])
    return (x[0], w[0], *out)


@onnx_conv_integer.etypes
def _conv_integer_etypes(*_, **__):
    return "i32"


def _conv_integer(kernel, x, w, x_zero_point, w_zero_point, dilations, group, pads, strides):
    name = "onnx_conv_integer"
    x, w = np.asarray(x), np.asarray(w)
    dilations, pads, strides, out = _conv_geometry(name, x.shape, w.shape, pads, strides, dilations, group)
    sx, sw = _conv_shifted(name, x, w, x_zero_point, w_zero_point)
    return _wrap32(kernel(sx, sw, dilations, pads, strides, out, group))


@onnx_conv_integer.formal
def _conv_integer_formal(x, w, x_zero_point=0, w_zero_point=0, dilations=(), group=1, pads=(), strides=()):
    return _conv_integer(_int_conv_formal, x, w, x_zero_point, w_zero_point, dilations, group, pads, strides)


@onnx_conv_integer.fast
def _conv_integer_fast(x, w, x_zero_point=0, w_zero_point=0, dilations=(), group=1, pads=(), strides=()):
    return _conv_integer(_int_conv_fast, x, w, x_zero_point, w_zero_point, dilations, group, pads, strides)


onnx_qlinear_conv = define("onnx_qlinear_conv", FAMILY, """
fragment onnx_qlinear_conv(
    x: tensor<integer>,
    x_scale: tensor<scalar>,
    x_zero_point: tensor<integer>,
    w: tensor<integer>,
    w_scale: tensor<scalar>,
    w_zero_point: tensor<integer>,
    y_scale: tensor<scalar>,
    y_zero_point: tensor<integer>,
    B: tensor<integer> = 0,
    dilations: integer[] = [],
    group: integer = 1,
    pads: integer[] = [],
    strides: integer[] = [] )
-> ( y: tensor<integer> );
""", domain="onnx", doc="ONNX QLinearConv: the exact integer convolution of the shifted codes plus the int32 "
                        "bias, requantized to y_zero_point's 8-bit codes at x_scale * w_scale / y_scale.")


@onnx_qlinear_conv.shape
def _qlinear_conv_shape(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=(),
                        dilations=(), group=1, pads=(), strides=()):
    name = "onnx_qlinear_conv"
    _, _, _, out = _conv_geometry(name, x, w, pads, strides, dilations, group)
    for what, p in (("x_scale", x_scale), ("x_zero_point", x_zero_point), ("y_scale", y_scale),
                    ("y_zero_point", y_zero_point)):
        _scalar_param(name, what, p)
    if _channel_param(name, "w_scale", w_scale, w[0]) != _channel_param(name, "w_zero_point", w_zero_point, w[0]):
        raise op_error(name, f"w_scale {list(w_scale)} and w_zero_point {list(w_zero_point)} differ in shape")
    if len(B) > 1 or (len(B) == 1 and None not in (B[0], w[0]) and B[0] != w[0]):
        raise op_error(name, f"the bias B must be a [{w[0]}] vector, got shape {list(B)}")
    return (x[0], w[0], *out)


@onnx_qlinear_conv.etypes
def _qlinear_conv_etypes(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, *_, **__):
    return y_zero_point


def _qlinear_conv(kernel, requantize, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
                  B, dilations, group, pads, strides):
    name = "onnx_qlinear_conv"
    x, w, bias = np.asarray(x), np.asarray(w), np.asarray(B)
    _qlinear_conv_shape(x.shape, np.shape(x_scale), np.shape(x_zero_point), w.shape, np.shape(w_scale),
                        np.shape(w_zero_point), np.shape(y_scale), np.shape(y_zero_point), bias.shape,
                        dilations, group, pads, strides)
    dt = _code_dtype(name, y_zero_point)
    dilations, pads, strides, out = _conv_geometry(name, x.shape, w.shape, pads, strides, dilations, group)
    sx, sw = _conv_shifted(name, x, w, x_zero_point, w_zero_point)
    channel = (1, w.shape[0]) + (1,) * len(out)
    acc = kernel(sx, sw, dilations, pads, strides, out, group) + bias.astype(np.int64).reshape(
        channel if bias.size > 1 else ())
    per_channel = _channel_param(name, "w_scale", np.shape(w_scale), w.shape[0])
    ws = _as(w_scale, channel if per_channel else None).astype(np.float64)
    multiplier = _per_tensor(x_scale) * ws / _per_tensor(y_scale)
    return requantize(_wrap32(acc), np.broadcast_to(multiplier, acc.shape), np.asarray(y_zero_point).reshape(()), dt)


@onnx_qlinear_conv.formal
def _qlinear_conv_formal(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=0,
                         dilations=(), group=1, pads=(), strides=()):
    return _qlinear_conv(_int_conv_formal, _requantize_formal, x, x_scale, x_zero_point, w, w_scale, w_zero_point,
                         y_scale, y_zero_point, B, dilations, group, pads, strides)


@onnx_qlinear_conv.fast
def _qlinear_conv_fast(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=0,
                       dilations=(), group=1, pads=(), strides=()):
    return _qlinear_conv(_int_conv_fast, _requantize_fast, x, x_scale, x_zero_point, w, w_scale, w_zero_point,
                         y_scale, y_zero_point, B, dilations, group, pads, strides)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
