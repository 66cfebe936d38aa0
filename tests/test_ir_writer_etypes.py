"""Element types through the IR v11 writer and reader: an ONNX network in float16, float64 or
an 8/16/32-bit integer type is written with those IR element types on its ports and
constants, read back by nnefx in the same types with the same values, and computed by
OpenVINO the same way (within its float16 accumulation; OpenVINO's CPU plugin saturates
narrow-integer overflow, so those cases keep to values that do not overflow)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

ETYPES = {"f16": (T.FLOAT16, np.float16), "f64": (T.DOUBLE, np.float64), "i8": (T.INT8, np.int8),
          "u8": (T.UINT8, np.uint8), "i16": (T.INT16, np.int16), "u16": (T.UINT16, np.uint16),
          "i32": (T.INT32, np.int32), "u32": (T.UINT32, np.uint32)}
IR_NAMES = {"f16": "FP16", "f64": "FP64", "i8": "I8", "u8": "U8", "i16": "I16", "u16": "U16", "i32": "I32",
            "u32": "U32"}


def _model(et: str, nodes: list, inits: list, shape: tuple = (2, 3), out: int | None = None) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", ETYPES[et][0], list(shape))],
                     [h.make_tensor_value_info("y", out or ETYPES[et][0], None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def _init(name: str, et: str, values) -> onnx.TensorProto:
    a = np.asarray(values).astype(ETYPES[et][1])
    return h.make_tensor(name, ETYPES[et][0], a.shape, a.tobytes(), raw=True)


CASES = {
    "add": lambda et: _model(et, [h.make_node("Add", ["x", "w"], ["y"])], [_init("w", et, [1, 2, 3])]),
    "mul": lambda et: _model(et, [h.make_node("Mul", ["x", "w"], ["y"])], [_init("w", et, [3, 1, 2])]),
    "max": lambda et: _model(et, [h.make_node("Max", ["x", "w"], ["y"])], [_init("w", et, [6, 2, 13])]),
    "concat": lambda et: _model(et, [h.make_node("Concat", ["x", "x"], ["y"], axis=1)], []),
    "transpose": lambda et: _model(et, [h.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], []),
    "less": lambda et: _model(et, [h.make_node("Less", ["x", "w"], ["y"])], [_init("w", et, [6, 2, 13])], out=T.BOOL),
    "where": lambda et: _model(et, [h.make_node("Less", ["x", "w"], ["c"]), h.make_node("Where", ["c", "x", "w"], ["y"])],
                               [_init("w", et, [6, 2, 13])]),
    "matmul": lambda et: _model(et, [h.make_node("MatMul", ["x", "w"], ["y"])],
                                [_init("w", et, np.arange(12).reshape(3, 4) % 5)]),
    "exp": lambda et: _model(et, [h.make_node("Exp", ["x"], ["y"])], []),
    "conv": lambda et: _model(et, [h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                              [_init("w", et, np.ones((2, 1, 3, 3)) / 4)], shape=(1, 1, 4, 4)),
}
INTEGER_CASES = ("add", "mul", "max", "concat", "transpose", "less", "where")
MATRIX = [(c, et) for et in ("f16", "f64") for c in CASES] + \
    [(c, et) for et in ("i8", "u8", "i16", "u16", "i32", "u32") for c in INTEGER_CASES]


def _input(et: str, shape: tuple) -> np.ndarray:
    a = np.arange(int(np.prod(shape))).reshape(shape) * 7 % 23
    return (a / 4 - 2).astype(ETYPES[et][1]) if et.startswith("f") else a.astype(ETYPES[et][1])


@pytest.mark.parametrize("case,et", MATRIX, ids=[f"{c}-{et}" for c, et in MATRIX])
def test_element_types_written_and_read_back(tmp_path, case, et):
    proto = CASES[case](et)
    onnx.save(proto, tmp_path / "m.onnx")
    shape = tuple(d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim)
    x = _input(et, shape)
    source = nnefx.load(tmp_path / "m.onnx")
    want = nnefx.Session(source, backend="formal").run({"x": x})["y"]
    nnefx.save(source, tmp_path / "m.xml")
    back = nnefx.load(tmp_path / "m.xml")
    assert back.graph.tensors[back.graph.inputs[0]].etype == et
    got = nnefx.Session(back, backend="formal").run({"x": x})["y"]
    assert got.dtype == want.dtype and np.array_equal(got, want)
    net = ET.parse(tmp_path / "m.xml").getroot()
    param = next(lay for lay in net.iter("layer") if lay.get("type") == "Parameter")
    assert param.find("data").get("element_type") == et
    assert param.find("output/port").get("precision") == IR_NAMES[et]
    ov = pytest.importorskip("openvino")
    theirs = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")({0: x})[0]
    assert theirs.dtype == want.dtype
    if et.startswith("f"):   # OpenVINO's CPU plugin accumulates f16/f64 in f32
        np.testing.assert_allclose(theirs.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)
    else:
        assert np.array_equal(theirs, want)


def test_wrapping_integer_arithmetic_reads_back_wrapped(tmp_path):
    """i8 arithmetic wraps around in the file's meaning (nnefx on both sides)."""
    onnx.save(CASES["mul"]("i8"), tmp_path / "m.onnx")
    x = np.array([[100, -100, 60], [1, 2, 3]], np.int8)
    source = nnefx.load(tmp_path / "m.onnx")
    nnefx.save(source, tmp_path / "m.xml")
    got = nnefx.Session(nnefx.load(tmp_path / "m.xml")).run({"x": x})["y"]
    assert got.dtype == np.int8 and got.tolist() == [[44, -100, 120], [3, 2, 6]]


def test_openvino_engine_refuses_narrow_integer_arithmetic(tmp_path):
    """OpenVINO's CPU plugin saturates i8 overflow; the engine backend says so instead of
    returning other values than the graph's."""
    pytest.importorskip("openvino")
    from nnefx.engines import get

    onnx.save(CASES["mul"]("i8"), tmp_path / "m.onnx")
    model = nnefx.load(tmp_path / "m.onnx")
    problems = get("openvino").problems(model.graph)
    assert problems and "saturates i8" in problems[0].reason
    with pytest.raises(NNEFXError, match="backend 'openvino' cannot run this graph: .*saturates i8") as err:
        nnefx.Session(model, backend="openvino")
    assert "Mul" in str(err.value.location)


def test_element_type_without_ir_form_is_refused_located(tmp_path):
    onnx.save(CASES["add"]("f16"), tmp_path / "m.onnx")
    model = nnefx.load(tmp_path / "m.onnx")
    model.graph.tensors["x"].etype = "f8e5m2"
    with pytest.raises(NNEFXError, match="element type f8e5m2 has no IR element type") as err:
        nnefx.save(model, tmp_path / "m.xml")
    assert "x" in str(err.value.location)
    assert not (tmp_path / "m.xml").exists()


def test_bfloat16_written_read_back_and_computed_by_openvino(tmp_path):
    """bf16 ports and Const bytes; OpenVINO's Python API shows bf16 data as float16 bit patterns."""
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    w = np.array([1, 2, 3], bf16)
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "g", [h.make_tensor_value_info("x", T.BFLOAT16, [2, 3])],
                     [h.make_tensor_value_info("y", T.BFLOAT16, [2, 3])],
                     [h.make_tensor("w", T.BFLOAT16, [3], w.view(np.uint16).tobytes(), raw=True)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), tmp_path / "m.onnx")
    x = (np.arange(6).reshape(2, 3) / 4 - 2).astype(bf16)
    source = nnefx.load(tmp_path / "m.onnx")
    want = nnefx.Session(source, backend="formal").run({"x": x})["y"]
    nnefx.save(source, tmp_path / "m.xml")
    got = nnefx.Session(nnefx.load(tmp_path / "m.xml"), backend="formal").run({"x": x})["y"]
    assert got.dtype == bf16 and np.array_equal(got.view(np.uint16), want.view(np.uint16))
    ov = pytest.importorskip("openvino")
    request = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU").create_infer_request()
    feed = ov.Tensor(ov.Type.bf16, [2, 3])
    feed.data[:] = x.view(np.uint16).view(np.float16)
    request.infer({0: feed})
    theirs = request.get_output_tensor(0).data.view(np.uint16)
    assert np.array_equal(theirs, want.view(np.uint16))
