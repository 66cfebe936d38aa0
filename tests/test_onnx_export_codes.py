"""ONNX -> nnefx -> ONNX for the element types opset 18 cannot hold (float8, int4/uint4,
float4e2m1, int2/uint2): the writer raises the model's opset to the one that added the type
(ONNX IR ``TensorProto.DataType``: float8 19, 4-bit integers 21, float4 23, 2-bit integers 25)
instead of refusing.  Checked on the node suite's QuantizeLinear / DequantizeLinear / Cast /
BitCast cases (the written file passes onnx's strict type inference, nnefx reads it back with
the same bits, ``onnx.reference`` gives the case's expected outputs on it) and on a
QuantizeLinear -> DequantizeLinear chain onnxruntime runs before and after."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnefx  # noqa: E402
from _export_helpers import run_ort, save_onnx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

#: node-suite case -> the opset the rewritten model must be in (the type's, or the operator's)
CASES = {
    "test_quantizelinear_e4m3fn": 21, "test_quantizelinear_e5m2": 21, "test_quantizelinear_int4": 21,
    "test_quantizelinear_uint4": 21, "test_quantizelinear_float4e2m1": 23, "test_quantizelinear_int2": 25,
    "test_quantizelinear_uint2": 25, "test_dequantizelinear_e4m3fn": 21, "test_dequantizelinear_e4m3fn_float16": 21,
    "test_dequantizelinear_e4m3fn_zero_point": 21, "test_dequantizelinear_e5m2": 21,
    "test_dequantizelinear_int4": 21, "test_dequantizelinear_uint4": 21, "test_dequantizelinear_float4e2m1": 23,
    "test_dequantizelinear_int2": 25, "test_dequantizelinear_uint2": 25,
    "test_cast_FLOAT_to_FLOAT8E4M3FN": 19, "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2": 19,
    "test_cast_FLOAT_to_INT4": 21, "test_cast_FLOAT_to_FLOAT4E2M1": 23, "test_cast_INT4_to_FLOAT": 21,
    "test_cast_FLOAT8E4M3FN_to_FLOAT": 19, "test_bitcast_float32_to_int32": 26,
}


@pytest.fixture(scope="module")
def suite():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None) if c.name in CASES}


def _array(v):
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)


def _bits(a: np.ndarray) -> tuple:
    a = np.ascontiguousarray(a)
    return a.dtype, a.shape, a.tobytes()


@pytest.mark.parametrize("name", sorted(CASES))
def test_typed_node_written_in_the_opset_of_its_types(suite, name, tmp_path):
    from onnx.reference import ReferenceEvaluator

    case = suite[name]
    src, dst = os.path.join(tmp_path, "case.onnx"), os.path.join(tmp_path, "again.onnx")
    onnx.save(case.model, src)
    inputs, outputs = case.data_sets[0]
    inputs = [_array(v) for v in inputs]
    model = nnefx.load(src)
    names = [i.name for i in Session(model).inputs]
    want = list(Session(model).run(dict(zip(names, inputs, strict=True))).values())
    save_onnx(model, dst)
    written = onnx.load(dst)
    onnx.shape_inference.infer_shapes(written, strict_mode=True, check_type=True)
    assert [o.version for o in written.opset_import if o.domain == ""] == [CASES[name]]
    again = list(Session(nnefx.load(dst)).run(dict(zip(names, inputs, strict=True))).values())
    assert [_bits(a) for a in again] == [_bits(a) for a in want]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ReferenceEvaluator(written).run(None, dict(zip([i.name for i in written.graph.input], inputs,
                                                             strict=True)))
    for r, w in zip(ref, outputs, strict=True):
        w = _array(w)
        assert r.dtype == w.dtype
        np.testing.assert_array_equal(r.astype(np.float64), w.astype(np.float64))


@pytest.mark.parametrize("code", ["FLOAT8E4M3FN", "FLOAT8E5M2", "INT4", "UINT4"])
def test_quantize_dequantize_chain_runs_in_onnxruntime_after_the_rewrite(code, tmp_path):
    """The codes stay inside the model (zero points are initializers), so onnxruntime's Python
    API, which cannot feed float8/4-bit arrays, runs both files on float32."""
    from onnx import TensorProto, helper, numpy_helper

    etype = getattr(TensorProto, code)
    zero = numpy_helper.from_array(np.zeros((), helper.tensor_dtype_to_np_dtype(etype)), "zero")
    scale = numpy_helper.from_array(np.asarray(0.25, np.float32), "scale")
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"])], "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7])], initializer=[zero, scale])
    src, dst = os.path.join(tmp_path, "qdq.onnx"), os.path.join(tmp_path, "again.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), src)
    x = np.random.default_rng(3).uniform(-3, 3, (2, 7)).astype(np.float32)
    want = run_ort(src, {"x": x})["y"]
    model = nnefx.load(src)
    np.testing.assert_array_equal(next(iter(Session(model).run({"x": x}).values())), want)
    save_onnx(model, dst)
    assert [o.version for o in onnx.load(dst).opset_import if o.domain == ""] == [21]
    np.testing.assert_array_equal(run_ort(dst, {"x": x})["y"], want)


def test_opset_18_models_stay_opset_18(tmp_path):
    """A model whose types opset 18 holds is still written in opset 18 (IR version 8)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT8)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [3])])
    src, dst = os.path.join(tmp_path, "cast.onnx"), os.path.join(tmp_path, "again.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), src)
    save_onnx(nnefx.load(src), dst)
    written = onnx.load(dst)
    assert [o.version for o in written.opset_import] == [18] and written.ir_version == 8
