"""Quantization operations (NNEF 1.0.5 §4.9.5): pseudo-quantization, outputs stay real.

``round`` is the spec's ``floor(x + 0.5)``.  In ``zero_point_linear_quantize`` we write the
lower bounds as ``(-r)`` and ``(-r) - 1.0``: the spec's ``-r if symmetric else -r - 1.0``
means the same in the spec grammar, but the official tools' parser gives unary minus the
lowest precedence (``-r - 1.0`` becomes ``-(r - 1.0)``, and ``-r if c else e`` negates the
whole conditional); the parenthesised form reads the same for every parser.
"""

from __future__ import annotations

from .registry import define

min_max_linear_quantize = define("min_max_linear_quantize", "quantization", """
fragment min_max_linear_quantize(
    x: tensor<scalar>,
    min: tensor<scalar>,
    max: tensor<scalar>,
    bits: integer,
    signed: logical,
    symmetric: logical )
-> ( y: tensor<scalar> )
{
    r = scalar(2 ^ bits - 1 - integer(signed && symmetric));
    z = clamp(x, min, max);
    p = scalar(2 ^ (bits - 1) - integer(symmetric) if signed else 0);
    q = round((z - min) / (max - min) * r) - p;
    y = (q + p) / r * (max - min) + min;
}
""", compound=True)

zero_point_linear_quantize = define("zero_point_linear_quantize", "quantization", """
fragment zero_point_linear_quantize(
    x: tensor<scalar>,
    zero_point: tensor<integer>,
    scale: tensor<scalar>,
    bits: integer,
    signed: logical,
    symmetric: logical )
-> ( y: tensor<scalar> )
{
    z = cast<scalar>(zero_point);
    s = round(x / scale) + z;
    r = scalar(2 ^ (bits - 1) - 1 if signed else 2 ^ bits - 1);
    q = clamp(s, 0.0 if !signed else (-r) if symmetric else (-r) - 1.0, r);
    y = (q - z) * scale;
}
""", compound=True)

linear_quantize = define("linear_quantize", "quantization", """
fragment linear_quantize(
    x: tensor<scalar>,
    min: tensor<scalar>,
    max: tensor<scalar>,
    bits: integer )
-> ( y: tensor<scalar> )
{
    y = min_max_linear_quantize(x, min = min, max = max, bits = bits, signed = false, symmetric = false);
}
""", compound=True, deprecated=True)

logarithmic_quantize = define("logarithmic_quantize", "quantization", """
fragment logarithmic_quantize(
    x: tensor<scalar>,
    max: tensor<scalar>,
    bits: integer )
-> ( y: tensor<scalar> )
{
    m = ceil(log2(max));
    r = scalar(2 ^ bits - 1);
    q = round(clamp(log2(abs(x)), m - r, m));
    y = sign(x) * 2.0 ^ q;
}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal kernels run each body through the primitives' formal kernels.  The fast kernels do
# the very same float32 steps vectorised (transcendental steps evaluated in float64 and
# rounded once, like the formal ones), so both agree bit for bit: a quantizer's output jumps
# at thresholds, so a last-ulp difference could otherwise move a value a whole step.

import numpy as np  # noqa: E402

from ._common import attr_error, broadcast_shapes, checked_broadcast, float_type, op_error, scalar  # noqa: E402


def _check_bits(op, bits):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 0 < bits <= 64:
        raise attr_error(op, "bits", bits, "must be an integer in [1, 64]")


def _shape_rule(op):
    def rule(x, *params, bits=8, **_):
        _check_bits(op, bits)
        out = broadcast_shapes(op, x, *params)
        if len(out) != len(x) or any(a is not None and b is not None and a != b for a, b in zip(out, x, strict=True)):
            raise op_error(op, f"parameter shapes {[tuple(p) for p in params]} do not broadcast to x of shape {tuple(x)}")
        return tuple(x)
    return rule


for _op in (min_max_linear_quantize, zero_point_linear_quantize, linear_quantize, logarithmic_quantize):
    _op.shape(_shape_rule(_op.name))


def _round(v):  # floor(v + 0.5) on a float32 array, exactly
    f = np.floor(v)
    return (f + (v - f >= 0.5)).astype(float_type())


def _ranges(bits, signed, symmetric):
    r = float_type()(2 ** bits - 1 - int(bool(signed) and bool(symmetric)))
    p = float_type()(2 ** (bits - 1) - int(bool(symmetric)) if signed else 0)
    return r, p


@min_max_linear_quantize.fast
def _mmlq_fast(x, min, max, bits, signed, symmetric):
    _check_bits("min_max_linear_quantize", bits)
    x, lo, hi = checked_broadcast("min_max_linear_quantize", scalar(x), scalar(min), scalar(max))
    r, p = _ranges(bits, signed, symmetric)
    with np.errstate(all="ignore"):
        t = np.where(x < hi, x, hi)
        z = np.where(t > lo, t, lo)
        span = hi - lo
        q = _round((z - lo) / span * r) - p
        return ((q + p) / r * span + lo).astype(float_type())


linear_quantize.fast(lambda x, min, max, bits: _mmlq_fast(x, min, max, bits, False, False))


def _zp_bounds(bits, signed, symmetric):
    r = float_type()(2 ** (bits - 1) - 1 if signed else 2 ** bits - 1)
    lo = float_type()(0.0) if not signed else (-r if symmetric else -r - float_type()(1.0))
    return lo, r


@zero_point_linear_quantize.fast
def _zplq_fast(x, zero_point, scale, bits, signed, symmetric):
    _check_bits("zero_point_linear_quantize", bits)
    x, zp, sc = checked_broadcast("zero_point_linear_quantize", scalar(x), np.asarray(zero_point, np.int64),
                                  scalar(scale))
    z = zp.astype(float_type())
    lo, r = _zp_bounds(bits, signed, symmetric)
    with np.errstate(all="ignore"):
        s = _round(x / sc) + z
        t = np.where(s < r, s, r)
        q = np.where(t > lo, t, lo)
        return ((q - z) * sc).astype(float_type())


def _log2_exact_steps(v):
    """log(v) / log(2.0) with each step rounded to float32 once, as the formal kernels do."""
    ln = np.log(v.astype(np.float64)).astype(float_type())
    return (ln.astype(np.float64) / np.float64(np.log(float_type()(2.0)).astype(float_type()))).astype(float_type())


@logarithmic_quantize.fast
def _logq_fast(x, max, bits):
    _check_bits("logarithmic_quantize", bits)
    x, hi = checked_broadcast("logarithmic_quantize", scalar(x), scalar(max))
    with np.errstate(all="ignore"):
        m = np.ceil(_log2_exact_steps(hi))
        r = float_type()(2 ** bits - 1)
        lo = m - r
        a = _log2_exact_steps(np.abs(x))
        t = np.where(a < m, a, m)
        q = _round(np.where(t > lo, t, lo))
        return (np.sign(x) * np.power(np.float64(2.0), q.astype(np.float64)).astype(float_type())).astype(float_type())
