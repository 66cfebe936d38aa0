"""Concrete element types end to end: ONNX models compute and return their own types.

The contract (``nnefx.etypes``): integers wrap in their width; floats narrower than float32
reach each kernel widened (float32 fast, float64 formal) and are rounded once per operation;
ONNX Cast/CastLike follow the ONNX Cast rules bit for bit (checked against onnx.reference).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

BACKENDS = ("fast", "formal")


def _model(tmp_path, nodes, inputs, outputs, initializers=(), opset=21, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path), model


def _vi(name, code, shape):
    return helper.make_tensor_value_info(name, code, shape)


def _run(path, feeds, backend):
    return Session(nnefx.load(path), backend).run(feeds)


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")


# --- integers wrap in their own width -------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,code,dtype,x,y,want", [
    ("Add", TensorProto.INT8, np.int8, [100, -100, 7], [100, -100, 1], [-56, 56, 8]),
    ("Sub", TensorProto.UINT16, np.uint16, [0, 5, 65535], [1, 6, 0], [65535, 65535, 65535]),
    ("Mul", TensorProto.INT16, np.int16, [300, -2, 3], [300, 3, 3], [24464, -6, 9]),
    ("Div", TensorProto.INT32, np.int32, [7, -7, -2147483648], [2, 2, -1], [3, -3, -2147483648]),
    ("Max", TensorProto.UINT64, np.uint64, [2**64 - 1, 3, 0], [1, 9, 0], [2**64 - 1, 9, 0]),
])
def test_integer_arithmetic_returns_its_type_and_wraps(tmp_path, backend, op, code, dtype, x, y, want):
    path, _ = _model(tmp_path, [helper.make_node(op, ["x", "y"], ["z"])],
                     [_vi("x", code, [3]), _vi("y", code, [3])], [_vi("z", code, [3])])
    z = _run(path, {"x": np.array(x, dtype), "y": np.array(y, dtype)}, backend)["z"]
    assert z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z, np.array(want, dtype=np.int64 if dtype != np.uint64 else np.uint64).astype(dtype))


# --- narrow floats: widened per operation, rounded once --------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_network_computes_in_float16_and_rounds_once_per_operation(tmp_path, backend):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 64)).astype(np.float16)
    b = rng.standard_normal((64, 5)).astype(np.float16)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("ReduceSum", ["m"], ["s"], keepdims=0)]
    path, _ = _model(tmp_path, nodes, [_vi("a", TensorProto.FLOAT16, [4, 64]), _vi("b", TensorProto.FLOAT16, [64, 5])],
                     [_vi("s", TensorProto.FLOAT16, [])])
    got = _run(path, {"a": a, "b": b}, backend)["s"]
    assert got.dtype == np.float16
    wide = np.float64 if backend == "formal" else np.float32
    m = (a.astype(wide) @ b.astype(wide)).astype(np.float16)        # the matmul rounds once
    want = m.astype(wide).sum(dtype=wide).astype(np.float16)        # the sum accumulates wide, rounds once
    assert got.tobytes() == np.asarray(want).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [[], [2]])
def test_float64_through_identity_keeps_every_bit_at_any_rank(tmp_path, backend, shape):
    # Identity is a copy: a float64 tensor, rank 0 included, is not rounded through float32
    x = np.full(shape, 1.0 + 2.0 ** -40)
    path, _ = _model(tmp_path, [helper.make_node("Identity", ["x"], ["y"])], [_vi("x", TensorProto.DOUBLE, shape)],
                     [_vi("y", TensorProto.DOUBLE, shape)])
    y = _run(path, {"x": x}, backend)["y"]
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_input_is_read_and_returned(tmp_path, backend):
    x = np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16)
    nodes = [helper.make_node("Mul", ["x", "x"], ["y"])]
    path, _ = _model(tmp_path, nodes, [_vi("x", TensorProto.BFLOAT16, [3])], [_vi("y", TensorProto.BFLOAT16, [3])])
    y = _run(path, {"x": x}, backend)["y"]
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), [2.25, 5.0625, 9.0])


def test_wrong_input_kind_names_both_types(tmp_path):
    path, _ = _model(tmp_path, [helper.make_node("Neg", ["x"], ["y"])],
                     [_vi("x", TensorProto.INT8, [2])], [_vi("y", TensorProto.INT8, [2])])
    with pytest.raises(NNEFXError, match=r"i8 \(integer\) data, got float32"):
        _run(path, {"x": np.zeros(2, np.float32)}, "fast")


# --- Cast, bit for bit against onnx.reference -------------------------------------------------

_VALUES = np.array([0.0, -0.0, 0.3, -1.7, 2.5, 3.5, 448.0, 449.0, 500.0, -1e6, 57344.0, 7e4, 1e-9,
                    np.inf, -np.inf, np.nan, 0.0625, 1.75, 6.0, 0.25], dtype=np.float32)
_FLOAT8 = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
           TensorProto.FLOAT8E5M2FNUZ]


def _cast_model(tmp_path, src, dst, **attrs):
    node = helper.make_node("Cast", ["x"], ["y"], to=dst, **attrs)
    return _model(tmp_path, [node], [_vi("x", src, [len(_VALUES)])], [_vi("y", dst, [len(_VALUES)])], opset=25)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    ok = ~np.isnan(w)
    np.testing.assert_array_equal(g[ok], w[ok])
    np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("dst", _FLOAT8 + [TensorProto.BFLOAT16, TensorProto.FLOAT16, TensorProto.FLOAT4E2M1])
def test_cast_float_to_narrow_floats_matches_onnx_reference(tmp_path, backend, saturate, dst):
    path, model = _cast_model(tmp_path, TensorProto.FLOAT, dst, saturate=saturate)
    want = ReferenceEvaluator(model).run(None, {"x": _VALUES})[0]
    _same(_run(path, {"x": _VALUES}, backend)["y"], want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_e8m0_rounding_modes_match_onnx_reference(tmp_path, backend, mode, saturate):
    values = np.array([1.0, 1.5, 1.25, 3.0, 0.75, 2.0 ** 127 * 1.5, 2.0 ** -126, 2.0 ** -126 * 1.5, 1e38, 3e38,
                       np.nan, 6.0, 1000.0, 0.001], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=mode)
    path, model = _model(tmp_path, [node], [_vi("x", TensorProto.FLOAT, [len(values)])],
                         [_vi("y", TensorProto.FLOAT8E8M0, [len(values)])], opset=25)
    want = ReferenceEvaluator(model).run(None, {"x": values})[0]
    got = _run(path, {"x": values}, backend)["y"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))
    # the ONNX Cast table, where onnx.reference keeps infinity as NaN: Inf -> E8M0_MAX when saturating
    inf = _run(path, {"x": np.full(len(values), np.inf, np.float32)}, backend)["y"]
    assert set(_bits(inf).tolist()) == {254 if saturate else 255}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dst,lo,hi", [(TensorProto.INT4, -8, 7), (TensorProto.UINT4, 0, 15),
                                       (TensorProto.INT2, -2, 1), (TensorProto.UINT2, 0, 3)])
def test_cast_to_sub_byte_integers_truncates_in_range(tmp_path, backend, dst, lo, hi):
    values = np.linspace(lo, hi + 0.9, len(_VALUES)).astype(np.float32)
    path, model = _cast_model(tmp_path, TensorProto.FLOAT, dst)
    got = _run(path, {"x": values}, backend)["y"]
    want = ReferenceEvaluator(model).run(None, {"x": values})[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.int64), np.trunc(values).astype(np.int64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_between_integers_keeps_the_low_bits(tmp_path, backend):
    # ONNX Cast: "200 (int16) -> -56 (int8)"
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT8)
    path, _ = _model(tmp_path, [node], [_vi("x", TensorProto.INT16, [3])], [_vi("y", TensorProto.INT8, [3])])
    y = _run(path, {"x": np.array([200, -129, 5], np.int16)}, backend)["y"]
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [-56, 127, 5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_castlike_takes_the_element_type_of_its_second_input(tmp_path, backend):
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    path, _ = _model(tmp_path, [node], [_vi("x", TensorProto.FLOAT, [3]), _vi("like", TensorProto.FLOAT8E5M2, [1])],
                     [_vi("y", TensorProto.FLOAT8E5M2, [3])])
    y = _run(path, {"x": np.array([1e6, -3.0, 0.1], np.float32),
                    "like": np.zeros(1, ml_dtypes.float8_e5m2)}, backend)["y"]
    assert y.dtype == np.dtype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(y.astype(np.float32), [57344.0, -3.0, np.float32(ml_dtypes.float8_e5m2(0.1))])


# --- initializers of every type ---------------------------------------------------------------

@pytest.mark.parametrize("code,values", [
    (TensorProto.FLOAT8E4M3FN, [1.0, -2.5, 448.0]), (TensorProto.INT4, [-8, 7, 3]), (TensorProto.UINT2, [0, 3, 1]),
    (TensorProto.FLOAT4E2M1, [0.5, -6.0, 3.0]), (TensorProto.BFLOAT16, [1.5, -0.25, 8.0]),
])
def test_initializers_of_narrow_types_are_read_as_values(tmp_path, code, values):
    init = helper.make_tensor("w", code, [3], values)
    node = helper.make_node("Cast", ["w"], ["y"], to=TensorProto.FLOAT)
    ident = helper.make_node("Add", ["y", "x"], ["z"])
    path, _ = _model(tmp_path, [node, ident], [_vi("x", TensorProto.FLOAT, [3])], [_vi("z", TensorProto.FLOAT, [3])],
                     initializers=[init], opset=25)
    for backend in BACKENDS:
        z = _run(path, {"x": np.zeros(3, np.float32)}, backend)["z"]
        np.testing.assert_array_equal(z, np.asarray(values, np.float32))
    assert numpy_helper.to_array(init).shape == (3,)


def test_string_initializer_is_read_as_str_items(tmp_path):
    init = helper.make_tensor("w", TensorProto.STRING, [2], [b"a", "é".encode()])
    node = helper.make_node("Identity", ["w"], ["y"])
    path, _ = _model(tmp_path, [node], [], [_vi("y", TensorProto.STRING, [2])], initializers=[init])
    for backend in BACKENDS:
        y = _run(path, {}, backend)["y"]
        assert y.dtype == object and y.tolist() == ["a", "é"]


def test_string_initializer_that_lies_about_its_size_is_refused_located(tmp_path):
    init = TensorProto(name="w", data_type=TensorProto.STRING, dims=[3], string_data=[b"a"])
    node = helper.make_node("Identity", ["w"], ["y"])
    path, _ = _model(tmp_path, [node], [], [_vi("y", TensorProto.STRING, [3])], initializers=[init])
    with pytest.raises(NNEFXError, match="initializer 'w'.*string_data holds 1 items"):
        nnefx.load(path)


# --- Clip ----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_int8_without_bounds_and_with_run_time_bounds(tmp_path, backend):
    x = np.array([-128, -5, 0, 7, 127], np.int8)
    path, _ = _model(tmp_path, [helper.make_node("Clip", ["x"], ["y"])],
                     [_vi("x", TensorProto.INT8, [5])], [_vi("y", TensorProto.INT8, [5])], name="a.onnx")
    y = _run(path, {"x": x}, backend)["y"]
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, x)
    path, _ = _model(tmp_path, [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                     [_vi("x", TensorProto.INT8, [5]), _vi("lo", TensorProto.INT8, []), _vi("hi", TensorProto.INT8, [])],
                     [_vi("y", TensorProto.INT8, [5])], name="b.onnx")
    y = _run(path, {"x": x, "lo": np.int8(-6), "hi": np.int8(5)}, backend)["y"]
    np.testing.assert_array_equal(y, [-6, -5, 0, 5, 5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_with_min_above_max_gives_max_everywhere(tmp_path, backend):
    lo = helper.make_tensor("lo", TensorProto.FLOAT, [], [3.0])
    hi = helper.make_tensor("hi", TensorProto.FLOAT, [], [1.0])
    path, _ = _model(tmp_path, [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                     [_vi("x", TensorProto.FLOAT, [4])], [_vi("y", TensorProto.FLOAT, [4])], initializers=[lo, hi])
    y = _run(path, {"x": np.array([-5.0, 0.0, 2.0, 9.0], np.float32)}, backend)["y"]
    np.testing.assert_array_equal(y, [1.0, 1.0, 1.0, 1.0])  # ONNX Clip: min > max sets every value to max


# --- writers ------------------------------------------------------------------------------

def test_onnx_writer_keeps_float16_and_float8(tmp_path):
    path, _ = _model(tmp_path, [helper.make_node("Add", ["x", "x"], ["y"])],
                     [_vi("x", TensorProto.FLOAT16, [2])], [_vi("y", TensorProto.FLOAT16, [2])], name="h.onnx")
    out = tmp_path / "h2.onnx"
    nnefx.save(nnefx.load(path), str(out))
    written = onnx.load(str(out))
    assert written.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert written.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    x = np.array([1.5, 65504.0], np.float16)
    y = Session(nnefx.load(str(out)), "fast").run({"x": x})["y"]
    assert y.dtype == np.float16 and np.isinf(y[1])
    # float8 came with opset 19: the model is written in it (it was refused at opset 18)
    path, _ = _cast_model(tmp_path, TensorProto.FLOAT, TensorProto.FLOAT8E4M3FN)
    nnefx.save(nnefx.load(path), str(tmp_path / "f8.onnx"))
    written = onnx.load(str(tmp_path / "f8.onnx"))
    assert written.opset_import[0].version == 19
    assert written.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT8E4M3FN
    x = np.asarray(_VALUES, np.float32)
    _same(Session(nnefx.load(str(tmp_path / "f8.onnx"))).run({"x": x})["y"], Session(nnefx.load(path)).run({"x": x})["y"])


def test_nnef_writer_refuses_concrete_types_its_text_cannot_carry(tmp_path):
    """(IR v11 writes them as its element types: tests/test_ir_writer_etypes.py.)"""
    path, _ = _model(tmp_path, [helper.make_node("Add", ["x", "x"], ["y"])],
                     [_vi("x", TensorProto.INT8, [2])], [_vi("y", TensorProto.INT8, [2])])
    with pytest.raises(NNEFXError, match=r"input 'x'.*cannot write tensor 'x' as NNEF: it is i8 data"):
        nnefx.save(nnefx.load(path), str(tmp_path / "out_nnef"))
    assert not (tmp_path / "out_nnef").exists()
