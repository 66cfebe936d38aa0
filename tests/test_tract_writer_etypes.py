"""Element types through the tract writer (``dialect="tract"``): tract computes each operation
in its inputs' datum types, so a graph input of a concrete element type is declared with
``tract_core_external(datum_type = ...)``, variables keep theirs in their tensor files, and
ONNX ``Cast`` becomes ``tract_core_cast`` — with float → integer written as ONNX's truncation
and wrap-around, since Rust's ``as`` saturates.  tract itself runs every written folder and
must return the formal backend's values in the same type, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx import etypes
from nnefx.diagnostics import NNEFXError

onnx = pytest.importorskip("onnx")
tract = pytest.importorskip("tract")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

TYPES = {"f16": T.FLOAT16, "f32": T.FLOAT, "f64": T.DOUBLE, "i8": T.INT8, "u8": T.UINT8, "i16": T.INT16,
         "i32": T.INT32, "u32": T.UINT32, "i64": T.INT64, "u64": T.UINT64, "bool": T.BOOL, "bf16": T.BFLOAT16}


def _save(tmp_path, nodes, et_in, et_out, inits=(), shape=(2, 3)):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TYPES[et_in], list(shape))],
                     [h.make_tensor_value_info("y", TYPES[et_out], None)], list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), tmp_path / "m.onnx")
    return nnefx.load(tmp_path / "m.onnx")


def _init(name, et, values):
    a = np.asarray(values).astype(onnx.helper.tensor_dtype_to_np_dtype(TYPES[et]))
    return h.make_tensor(name, TYPES[et], a.shape, a.tobytes(), raw=True)


def _same_in_tract(tmp_path, model, x):
    want = nnefx.Session(model, backend="formal").run({"x": x})["y"]
    nnefx.save(model, tmp_path / "t", dialect="tract")
    got = tract.nnef().load(str(tmp_path / "t")).into_runnable().run([x])[0].to_numpy()
    assert got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), (got, want)
    return (tmp_path / "t" / "graph.nnef").read_text()


ARITH = [(op, et) for et in ("f16", "f64", "i8", "u8", "i16", "i32", "u32") for op in ("Add", "Mul", "Sub", "Max")]


@pytest.mark.parametrize("op,et", ARITH, ids=[f"{o}-{e}" for o, e in ARITH])
def test_arithmetic_in_the_inputs_datum_type(tmp_path, op, et):
    model = _save(tmp_path, [h.make_node(op, ["x", "w"], ["y"])], et, et, [_init("w", et, [3, 1, 7])])
    x = (np.arange(6).reshape(2, 3) * 50 % 251).astype(etypes.numpy_dtype(et))
    text = _same_in_tract(tmp_path, model, x)   # integer overflow wraps in both
    assert f"tract_core_external<{'scalar' if et[0] == 'f' else 'integer'}>(shape = [2, 3], datum_type = '{et}')" \
        in text


@pytest.mark.parametrize("case", ["matmul", "conv", "where", "less", "transpose"])
def test_float16_network_computes_float16_in_tract(tmp_path, case):
    nodes = {"matmul": ([h.make_node("MatMul", ["x", "w"], ["y"])], [_init("w", "f16", np.arange(12).reshape(3, 4) % 5)]),
             "conv": ([h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [_init("w", "f16", np.ones((2, 1, 3, 3)) / 4)]),
             "where": ([h.make_node("Less", ["x", "w"], ["c"]), h.make_node("Where", ["c", "x", "w"], ["y"])],
                       [_init("w", "f16", [6, 2, 13])]),
             "less": ([h.make_node("Less", ["x", "w"], ["y"])], [_init("w", "f16", [6, 2, 13])]),
             "transpose": ([h.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], [])}[case]
    shape = (1, 1, 4, 4) if case == "conv" else (2, 3)
    model = _save(tmp_path, nodes[0], "f16", "bool" if case == "less" else "f16", nodes[1], shape)
    x = (np.arange(int(np.prod(shape))).reshape(shape) / 4 - 2).astype(np.float16)
    _same_in_tract(tmp_path, model, x)


X = np.array([0.0, 1.7, -1.7, 127.9, 128.5, -129.5, 300.25, -70000.75, 3e9, -5e9, 1e19, -1e19, 2.0 ** 63, 9.3e18,
              np.nan, np.inf, -np.inf, 2.0 ** 52 + 1, -(2.0 ** 53)], np.float32)
CASTS = [("f32", t) for t in ("i8", "u8", "i16", "i32", "u32", "i64", "u64", "f16", "f64", "bool")] + \
    [("f16", "i8"), ("f64", "i64"), ("i32", "i8"), ("i32", "u32"), ("i64", "f32"), ("bool", "f32")]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s}-{d}" for s, d in CASTS])
def test_cast_matches_onnx_in_tract(tmp_path, src, dst):
    """Out-of-range, huge and non-finite floats included: truncation and wrap-around, 0 for NaN/inf."""
    model = _save(tmp_path, [h.make_node("Cast", ["x"], ["y"], to=TYPES[dst])], src, dst, shape=(len(X),))
    if src in ("i32", "i64"):
        x = np.array([0, 1, -1, 127, 128, -129, 300, -70000, 2 ** 31 - 1, -2 ** 31] + list(range(9)),
                     etypes.numpy_dtype(src))
    elif src == "bool":
        x = X > 1
    else:
        with np.errstate(over="ignore"):   # (beyond f16: infinity)
            x = X.astype(etypes.numpy_dtype(src))
    text = _same_in_tract(tmp_path, model, x)
    assert "tract_core_cast" in text


def test_datum_type_tract_lacks_is_refused_located(tmp_path):
    model = _save(tmp_path, [h.make_node("Add", ["x", "x"], ["y"])], "bf16", "bf16")
    with pytest.raises(NNEFXError, match="input 'x' is bf16 data, which has no tract datum type") as err:
        nnefx.save(model, tmp_path / "t", dialect="tract")
    assert err.value.location is not None and "x" in str(err.value.location)
    assert not (tmp_path / "t").exists()


def test_cast_like_takes_the_second_inputs_type_in_tract(tmp_path):
    g = h.make_graph([h.make_node("CastLike", ["x", "like"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [4])],
                     [h.make_tensor_value_info("y", T.INT8, [4])], [_init("like", "i8", [0])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), tmp_path / "m.onnx")
    text = _same_in_tract(tmp_path, nnefx.load(tmp_path / "m.onnx"), np.array([1.5, -200.7, 300.2, np.nan], np.float32))
    assert "tract_core_cast" in text
