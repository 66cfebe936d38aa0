"""The element-type vocabulary: one name per concrete type, round trips with numpy, abstract types."""

import numpy as np
import pytest

from nnefx import etypes
from nnefx.diagnostics import NNEFXError
from nnefx.graph import Tensor


@pytest.mark.parametrize("etype", etypes.ETYPES)
def test_numpy_round_trip(etype):
    dt = etypes.numpy_dtype(etype)
    assert etypes.from_numpy(dt) == etype
    assert etypes.parse(etype.upper()) == etype


@pytest.mark.parametrize("etype,kind", [("f16", "scalar"), ("bf16", "scalar"), ("f8e5m2", "scalar"),
                                        ("c64", "scalar"), ("i4", "integer"), ("u64", "integer"),
                                        ("bool", "logical"), ("string", None)])
def test_abstract_type(etype, kind):
    assert etypes.abstract(etype) == kind


def test_default_follows_the_abstract_type():
    assert etypes.of(Tensor("x")) == "f32"
    assert etypes.of(Tensor("x", "integer")) == "i64"
    assert etypes.of(Tensor("x", "logical")) == "bool"
    assert etypes.of(Tensor("x", "scalar", etype="bf16")) == "bf16"


def test_narrow_floats_accumulate_in_float32():
    assert etypes.compute_dtype("f16") == np.float32
    assert etypes.compute_dtype("f8e4m3fn") == np.float32
    assert etypes.compute_dtype("f64") == np.float64
    assert etypes.compute_dtype("i8") == np.int8


def test_bit_widths_match_numpy_item_sizes():
    for etype, bits in etypes.BITS.items():
        if bits >= 8:
            assert etypes.numpy_dtype(etype).itemsize * 8 == bits, etype


def test_spellings_and_errors():
    assert etypes.parse("float16") == "f16"
    assert etypes.parse("bfloat16") == "bf16"
    assert etypes.parse("boolean") == "bool"
    assert etypes.from_numpy(np.dtype("U3")) == "string"
    with pytest.raises(NNEFXError, match="unknown element type 'f12'"):
        etypes.parse("f12")
    with pytest.raises(NNEFXError, match="no nnefx element type"):
        etypes.from_numpy(np.dtype("datetime64[s]"))
