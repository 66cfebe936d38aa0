"""ONNX QuantizeLinear and DequantizeLinear (opset 21+: per-tensor, per-axis and blocked) as
single operations.

NNEF's quantization lives in ``graph.quant`` annotations and ``linear_quantize`` on floats;
neither says "produce uint4 / int16 / float8 codes from floats with a scale per block of
``block_size`` items along ``axis``".  The scale (and zero point) is

* a scalar: one for the whole tensor;
* 1-D of length ``x.shape[axis]``: one per slice along ``axis``;
* of ``x``'s rank, equal to ``x``'s shape except ``ceil(x.shape[axis] / block_size)`` along
  ``axis``: one per block (``block_size > 0``).

The zero point is a tensor, always given (the reader supplies a zero of the output type when
the model has none), and its element type is the quantized type: the planner hands it over in
its stored type (``stored_inputs``), not widened as float8 and 2/4-bit tensors otherwise are,
so the kernel knows the code type it saturates to.  Integer codes are
``clamp(round_half_even(x / scale) + zero_point)`` in the code type's range; float8 codes are
``x / scale`` converted with saturation (or not); the division is done in ``x``'s own type,
as the ONNX definition states.  DynamicQuantizeLinear (uint8 codes with a scale and zero point
from the tensor's own range) lives here too.
"""

from __future__ import annotations

import numpy as np

from .._common import guard_family, op_error
from ..registry import define
from ._common import norm_axis
from .tensors import cast

FAMILY = "onnx_quantization"


def _param_shape(name: str, what: str, x, p, axis: int, block_size: int) -> None:
    """Refuse a scale / zero-point shape that is neither per-tensor, per-axis nor blocked."""
    if block_size < 0:
        raise op_error(name, f"block_size = {block_size} must not be negative")
    if len(p) == 0 or (len(p) == 1 and p[0] == 1):
        return
    a = norm_axis(name, axis, len(x))
    if block_size == 0:
        if len(p) != 1 or None not in (p[0], x[a]) and p[0] != x[a]:
            raise op_error(name, f"a per-axis {what} has shape [{x[a]}] (axis {axis}), got {list(p)}")
        return
    want = list(x)
    want[a] = None if x[a] is None else -(-x[a] // block_size)
    if len(p) != len(x) or any(None not in (u, v) and u != v for u, v in zip(p, want, strict=True)):
        raise op_error(name, f"a blocked {what} (block_size {block_size}, axis {axis}) has shape {want}, "
                             f"got {list(p)}")


def _axis(name: str, axis: int, x: np.ndarray, *params: np.ndarray) -> int:
    """``axis`` normalised, where a parameter has more than one value (else unused: 0)."""
    return norm_axis(name, axis, x.ndim) if any(p.size > 1 for p in params) else 0


def spread(p: np.ndarray, shape: tuple, axis: int, block_size: int) -> np.ndarray:
    """A per-tensor, per-axis or blocked parameter repeated to one value per item of ``shape``."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    axis = axis + len(shape) if axis < 0 else axis
    if block_size == 0:
        view = [1] * len(shape)
        view[axis] = p.size
        return p.reshape(view)
    return np.repeat(p, block_size, axis=axis).take(range(shape[axis]), axis=axis)


def _param_at(p: np.ndarray, index: tuple, axis: int, block_size: int):
    """The parameter that applies to item ``index`` (the formal kernels' lookup)."""
    if p.size == 1:
        return p.reshape(-1)[0]
    if block_size == 0:
        return p.reshape(-1)[index[axis]]
    where = list(index)
    where[axis] //= block_size
    return p[tuple(where)]


def _code_range(dt: np.dtype) -> tuple[int, int] | None:
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return int(info.min), int(info.max)
    if dt.name in ("int4", "uint4", "int2", "uint2"):
        import ml_dtypes

        info = ml_dtypes.iinfo(dt)
        return int(info.min), int(info.max)
    return None


onnx_quantize_linear = define("onnx_quantize_linear", FAMILY, """
fragment onnx_quantize_linear<?>(
    input: tensor<scalar>,
    scale: tensor<scalar>,
    zero_point: tensor<?>,
    axis: integer = 1,
    block_size: integer = 0,
    saturate: logical = true )
-> ( output: tensor<?> );
""", domain="onnx", generic=True, stored_inputs=("zero_point",),
   doc="ONNX QuantizeLinear: codes of zero_point's element type from x / scale (+ zero_point), per tensor, "
       "per axis or per block.")


@onnx_quantize_linear.shape
def _quantize_shape(x, scale, zero_point, axis=1, block_size=0, saturate=True, dtype=None):
    _param_shape("onnx_quantize_linear", "scale", x, scale, axis, block_size)
    _param_shape("onnx_quantize_linear", "zero point", x, zero_point, axis, block_size)
    return tuple(x)


@onnx_quantize_linear.etypes
def _quantize_etypes(x, scale, zero_point, **_):
    return zero_point


@onnx_quantize_linear.formal
def _quantize_formal(x, scale, zero_point, axis=1, block_size=0, saturate=True, dtype=None):
    x, scale, zero_point = np.asarray(x), np.asarray(scale), np.asarray(zero_point)
    _quantize_shape(x.shape, scale.shape, zero_point.shape, axis, block_size, saturate)
    a = _axis("onnx_quantize_linear", axis, x, scale, zero_point)
    to = zero_point.dtype
    limits = _code_range(to)
    out = np.empty(x.shape, to)
    for index in np.ndindex(x.shape):
        q = x.dtype.type(x[index] / x.dtype.type(_param_at(scale, index, a, block_size)))
        z = _param_at(zero_point, index, a, block_size)
        if limits is not None:
            v = int(np.rint(np.float64(q))) + int(z)
            out[index] = min(max(v, limits[0]), limits[1])
        else:
            out[index] = cast(np.asarray(np.float32(q) + np.float32(z)), to, saturate)
    return out


@onnx_quantize_linear.fast
def _quantize_fast(x, scale, zero_point, axis=1, block_size=0, saturate=True, dtype=None):
    x, scale, zero_point = np.asarray(x), np.asarray(scale), np.asarray(zero_point)
    _quantize_shape(x.shape, scale.shape, zero_point.shape, axis, block_size, saturate)
    a = _axis("onnx_quantize_linear", axis, x, scale, zero_point)
    to = zero_point.dtype
    q = x / spread(scale, x.shape, a, block_size).astype(x.dtype)
    limits = _code_range(to)
    if limits is None:
        return cast(q.astype(np.float32) + spread(zero_point, x.shape, a, block_size).astype(np.float32), to, saturate)
    codes = np.rint(q.astype(np.float64)) + spread(zero_point, x.shape, a, block_size).astype(np.float64)
    return np.clip(codes, *limits).astype(to)


onnx_dequantize_linear = define("onnx_dequantize_linear", FAMILY, """
fragment onnx_dequantize_linear<?>(
    input: tensor<?>,
    scale: tensor<scalar>,
    zero_point: tensor<?>,
    axis: integer = 1,
    block_size: integer = 0 )
-> ( output: tensor<scalar> );
""", domain="onnx", generic=True, doc="ONNX DequantizeLinear: (x - zero_point) * scale in scale's element "
                                      "type, per tensor, per axis or per block.")


@onnx_dequantize_linear.shape
def _dequantize_shape(x, scale, zero_point, axis=1, block_size=0, dtype=None):
    _param_shape("onnx_dequantize_linear", "scale", x, scale, axis, block_size)
    _param_shape("onnx_dequantize_linear", "zero point", x, zero_point, axis, block_size)
    return tuple(x)


@onnx_dequantize_linear.etypes
def _dequantize_etypes(x, scale, zero_point, **_):
    return scale


@onnx_dequantize_linear.formal
def _dequantize_formal(x, scale, zero_point, axis=1, block_size=0, dtype=None):
    x, scale, zero_point = np.asarray(x), np.asarray(scale), np.asarray(zero_point)
    _dequantize_shape(x.shape, scale.shape, zero_point.shape, axis, block_size)
    a = _axis("onnx_dequantize_linear", axis, x, scale, zero_point)
    out = np.empty(x.shape, scale.dtype)
    for index in np.ndindex(x.shape):
        z = np.float64(np.float32(_param_at(zero_point, index, a, block_size)))
        s = np.float64(_param_at(scale, index, a, block_size).astype(np.float32))
        out[index] = (np.float64(np.float32(x[index])) - z) * s
    return out


@onnx_dequantize_linear.fast
def _dequantize_fast(x, scale, zero_point, axis=1, block_size=0, dtype=None):
    x, scale, zero_point = np.asarray(x), np.asarray(scale), np.asarray(zero_point)
    _dequantize_shape(x.shape, scale.shape, zero_point.shape, axis, block_size)
    a = _axis("onnx_dequantize_linear", axis, x, scale, zero_point)
    dx = x.astype(np.float32) - spread(zero_point, x.shape, a, block_size).astype(np.float32)
    return (dx * spread(scale, x.shape, a, block_size).astype(np.float32)).astype(scale.dtype)


onnx_dynamic_quantize_linear = define("onnx_dynamic_quantize_linear", FAMILY, """
fragment onnx_dynamic_quantize_linear( input: tensor<scalar> )
-> ( output: tensor<integer>, scale: tensor<scalar>, zero_point: tensor<integer> );
""", domain="onnx", doc="ONNX DynamicQuantizeLinear: uint8 codes with the scale and zero point that map "
                        "[min(x, 0), max(x, 0)] onto [0, 255].")


@onnx_dynamic_quantize_linear.shape
def _dynamic_quantize_shape(x):
    return tuple(x), (), ()


@onnx_dynamic_quantize_linear.etypes
def _dynamic_quantize_etypes(x):
    return "u8", x, "u8"


def _dynamic_range(x: np.ndarray) -> tuple[np.float32, np.float32]:
    """The scale and the (rounded, saturated) zero point, in float32 as ONNX states them."""
    if x.size == 0:
        raise op_error("onnx_dynamic_quantize_linear", "the input is empty (it has no range to quantize)")
    top = np.float32(max(0.0, float(np.max(x))))
    bottom = np.float32(min(0.0, float(np.min(x))))
    scale = np.float32(np.float32(1.0) if top == bottom else top - bottom) / np.float32(255)
    zero = np.float32(min(255.0, max(0.0, float(np.float32(0) - bottom / scale))))
    return scale, np.rint(zero)


@onnx_dynamic_quantize_linear.formal
def _dynamic_quantize_formal(x):
    x = np.asarray(x)
    scale, zero = _dynamic_range(x)
    out = np.empty(x.shape, np.uint8)
    for index in np.ndindex(x.shape):
        code = float(np.rint(np.float32(x[index]) / scale)) + float(zero)
        out[index] = min(255.0, max(0.0, code))
    return out, np.asarray(scale, x.dtype), np.asarray(zero, np.uint8)


@onnx_dynamic_quantize_linear.fast
def _dynamic_quantize_fast(x):
    x = np.asarray(x)
    scale, zero = _dynamic_range(x)
    codes = np.clip(np.rint(x.astype(np.float32) / scale) + zero, 0, 255).astype(np.uint8)
    return codes, np.asarray(scale, x.dtype), np.asarray(zero, np.uint8)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
