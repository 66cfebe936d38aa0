"""ONNX readers that keep the model's element types where they once answered in float32/int64
or refused: MaxPool of int8/uint8, Pow of an integer base to a float exponent, EyeLike and
ConstantOfShape of any stored type (ConstantOfShape to a run-time shape too), OneHot whose
values are int32.  Each is run on both backends against the node suite's cases (element types
compared strictly) and against onnx.reference on inputs the cases do not cover."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.backend.test.case import node as node_cases  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nnefx  # noqa: E402

BACKENDS = ("formal", "fast")
CASES = ("test_maxpool_2d_uint8", "test_pow_types_int64_float32", "test_pow_types_int32_float32",
         "test_eyelike_without_dtype", "test_eyelike_with_dtype", "test_constantofshape_int_zeros",
         "test_constantofshape_int_shape_zero", "test_onehot_without_axis")


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in ("pool_op_common", "maxpool", "pow", "eyelike", "constantofshape", "onehot"):
            try:
                importlib.import_module(f"{node_cases.__name__}.{module}")
            except ImportError:
                continue
    return {c.name: c for c in node_cases._NodeTestCases if c.name in CASES}


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def _run(model, feeds, backend, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return list(nnefx.Session(nnefx.load(str(path)), backend=backend).run(feeds).values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_suite_cases_keep_their_element_types(backend, tmp_path):
    cases = _cases()
    assert set(cases) == set(CASES)
    for case in cases.values():
        inputs, expected = case.data_sets[0]
        feeds = {vi.name: _array(v) for vi, v in zip(case.model.graph.input, inputs, strict=True)}
        got = _run(case.model, feeds, backend, tmp_path)
        for g, w in zip(got, expected, strict=True):
            w = _array(w)
            assert g.dtype == w.dtype and g.shape == w.shape, case.name
            np.testing.assert_array_equal(g, w, err_msg=case.name)


def _single(op_type, inputs, output_type, attrs=None, opset=22):
    node = helper.make_node(op_type, [name for name, _, _ in inputs], ["y"], **(attrs or {}))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", output_type, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_max_pool_with_padding_ceil_and_indices_matches_the_reference(backend, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 3, 7, 6)).astype(np.int8)
    model = _single("MaxPool", [("x", TensorProto.INT8, x.shape)], TensorProto.INT8,
                    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1})
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    (got,) = _run(model, {"x": x}, backend, tmp_path)
    assert got.dtype == np.int8 and np.array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_power_of_float_exponents_truncates_like_onnx(backend, tmp_path):
    base = np.array([-3, -2, 0, 2, 3, 7, 10], np.int32)
    exponent = np.array([2.0, 0.5, 1.5, -1.0, 2.5, 0.3, 3.0], np.float32)
    model = _single("Pow", [("x", TensorProto.INT32, base.shape), ("e", TensorProto.FLOAT, exponent.shape)],
                    TensorProto.INT32)
    with np.errstate(invalid="ignore"):
        want = np.power(base.astype(np.float64), exponent.astype(np.float64))
    keep = np.isfinite(want)  # (-2) ** 0.5 is NaN: its integer conversion is undefined in ONNX
    (got,) = _run(model, {"x": base, "e": exponent}, backend, tmp_path)
    assert got.dtype == np.int32
    assert np.array_equal(got[keep], np.trunc(want[keep]).astype(np.int32))  # 2 ** -1 = 0.5 -> 0, 3 ** 2.5 -> 15


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_of_shape_to_a_run_time_shape_keeps_the_value_type(backend, tmp_path):
    for code, dtype in ((TensorProto.INT32, np.int32), (TensorProto.FLOAT16, np.float16), (TensorProto.UINT8, np.uint8)):
        value = helper.make_tensor("value", code, [1], np.array([7], dtype).astype(dtype).tolist()
                                   if code != TensorProto.FLOAT16 else [7.0])
        model = _single("ConstantOfShape", [("s", TensorProto.INT64, [2])], code, {"value": value})
        (got,) = _run(model, {"s": np.array([2, 3])}, backend, tmp_path)
        assert got.dtype == dtype and got.shape == (2, 3) and np.all(got == 7)
