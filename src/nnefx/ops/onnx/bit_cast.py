"""ONNX BitCast (opset 26) as an operation: the bits of each item read as another element type
of the same width (little-endian bytes), with no value conversion — NNEF's ``cast`` converts
values, so it has no counterpart.  ``to`` is an nnefx element type name (``f32``, ``i32``,
``u8``, ``bool``, ``bf16``, ...)."""

from __future__ import annotations

import numpy as np

from ... import etypes
from .._common import attr_error
from ..registry import define

FAMILY = "onnx_bit_cast"

onnx_bit_cast = define("onnx_bit_cast", FAMILY, """
fragment onnx_bit_cast<?>( input: tensor<>, to: string ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX BitCast: each item's bits reinterpreted as element type `to` "
                                      "of the same width.")


def _target(to: str) -> np.dtype:
    if to not in etypes.ETYPES or to == "string" or etypes.BITS.get(to, 0) < 8:
        raise attr_error("onnx_bit_cast", "to", to, "must be an element type of 8 bits or more other than string")
    return etypes.numpy_dtype(to)


@onnx_bit_cast.shape
def _bit_cast_shape(x, to="f32", dtype=None):
    _target(to)
    return tuple(x)


@onnx_bit_cast.etypes
def _bit_cast_etypes(x, to="f32"):
    if etypes.BITS.get(x) != etypes.BITS[to]:
        raise attr_error("onnx_bit_cast", "to", to, f"must have the width of the input's {x} "
                                                    f"({etypes.BITS.get(x)} bits)")
    return to


@onnx_bit_cast.formal
def _bit_cast_formal(x, to="f32", dtype=None):
    x = np.asarray(x, order="C")
    target = _target(to)
    if x.dtype.itemsize != target.itemsize:
        raise attr_error("onnx_bit_cast", "to", to, f"must have the width of the input's {x.dtype} "
                                                    f"({x.dtype.itemsize * 8} bits)")
    little = x.astype(x.dtype.newbyteorder("<"), copy=False) if x.dtype.byteorder == ">" else x
    return little.view(target.newbyteorder("<")).astype(target, copy=False)


onnx_bit_cast.fast(_bit_cast_formal)  # one view of the bytes is both the definition and the fast form
