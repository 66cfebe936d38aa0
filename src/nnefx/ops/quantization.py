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
