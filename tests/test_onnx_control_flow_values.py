"""Values of ONNX control flow beyond float32/int64/bool: Loop, Scan and If carry f16, i32,
f64, u8, ... in their own element type (integers wrap in their width, f16 rounds each step),
against onnx.reference and onnxruntime, on both numpy backends."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

_ELEM = {np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.int32): TensorProto.INT32,
         np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.uint8): TensorProto.UINT8,
         np.dtype(np.float32): TensorProto.FLOAT}


def _vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _model(nodes, inputs, outputs, inits=(), opset=18):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _save(tmp_path, model, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _loop(dtype) -> onnx.ModelProto:
    """Loop of M trips: acc = acc * k + x (carried, the element type of x), and the scan
    output of each step's acc."""
    e = _ELEM[np.dtype(dtype)]
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["acc_in", "k"], ["m"]),
         helper.make_node("Add", ["m", "x"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["step"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("acc_in", [3], e)],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("acc_out", [3], e), _vi("step", [3], e)])
    loop = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "steps"], body=body)
    return _model([loop], [_vi("M", [], TensorProto.INT64), _vi("acc0", [3], e), _vi("x", [3], e),
                           _vi("k", [], e)], [_vi("acc", [3], e), _vi("steps", [None, 3], e)])


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("dtype,k", [(np.int32, 1000), (np.float16, 1.5), (np.float64, 1.5), (np.uint8, 3)])
def test_loop_carries_its_element_type(tmp_path, backend, dtype, k):
    path = _save(tmp_path, _loop(dtype))
    feeds = {"M": np.array(5, np.int64), "acc0": np.array([1, 2, 3], dtype), "x": np.array([7, 1, 2], dtype),
             "k": np.array(k, dtype)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = list(Session(nnefx.load(path), backend).run(feeds).values())
    # the same, step by step in the element type (i32/u8 wrap in their width, f16 rounds each step)
    acc, steps = feeds["acc0"], []
    with np.errstate(over="ignore"):
        for _ in range(5):
            acc = (acc * feeds["k"] + feeds["x"]).astype(dtype)
            steps.append(acc)
    for g, w, mine in zip(got, want, [acc, np.stack(steps)], strict=True):
        assert g.dtype == w.dtype == np.dtype(dtype) and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, mine)
    if dtype == np.int32:
        assert (np.abs(want[0].astype(np.int64)) < 2 ** 31).all() and want[0][0] != 1 * 1000 ** 5  # wrapped


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_scan_and_if_keep_f16_and_i32(tmp_path, backend):
    f16, i32 = TensorProto.FLOAT16, TensorProto.INT32
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y"])],
        "sb", [_vi("s_in", [2], f16), _vi("row", [2], f16)], [_vi("s_out", [2], f16), _vi("y", [2], f16)])
    then_g = helper.make_graph([helper.make_node("Neg", ["n"], ["t"])], "then", [], [_vi("t", [2], i32)])
    else_g = helper.make_graph([helper.make_node("Abs", ["n"], ["e"])], "else", [], [_vi("e", [2], i32)])
    nodes = [helper.make_node("Scan", ["s0", "rows"], ["s", "ys"], body=scan_body, num_scan_inputs=1),
             helper.make_node("If", ["c"], ["z"], then_branch=then_g, else_branch=else_g)]
    model = _model(nodes, [_vi("s0", [2], f16), _vi("rows", [4, 2], f16), _vi("n", [2], i32),
                           _vi("c", [], TensorProto.BOOL)],
                   [_vi("s", [2], f16), _vi("ys", [4, 2], f16), _vi("z", [2], i32)])
    path = _save(tmp_path, model)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    mine = Session(nnefx.load(path), backend)
    rng = np.random.default_rng(0)
    for c in (True, False):
        feeds = {"s0": rng.standard_normal(2).astype(np.float16), "rows": rng.standard_normal((4, 2)).astype(np.float16),
                 "n": np.array([-(2 ** 31), 5], np.int32), "c": np.array(c)}
        want = sess.run(None, feeds)
        got = list(mine.run(feeds).values())
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_a_bfloat16_loop_value_is_refused_at_the_node(tmp_path):
    model = _loop(np.float32)
    for vi in list(model.graph.input[1:]) + list(model.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    body = model.graph.node[0].attribute[0].g
    for vi in list(body.input[2:]) + list(body.output[1:]):
        vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    with pytest.raises(NNEFXError, match=r"\(Loop\).*bf16"):
        nnefx.load(_save(tmp_path, model))


@pytest.mark.parametrize("dtype", [np.int32, np.float16])
def test_written_back_to_onnx_the_loop_keeps_its_types(tmp_path, dtype):
    path = _save(tmp_path, _loop(dtype))
    out = str(tmp_path / "back.onnx")
    nnefx.save(nnefx.load(path), out)
    feeds = {"M": np.array(4, np.int64), "acc0": np.array([1, 2, 3], dtype), "x": np.array([7, 1, 2], dtype),
             "k": np.array(3, dtype)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(g, w)


# --- run-time values inside bodies ------------------------------------------------------------

def _window_loop(opset=18):
    """Loop: each iteration i sums x[i : i + w] (Slice bounds computed in the body from the
    iteration number and the outer input w) and reshapes it to the outer input 'shape'."""
    i64 = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start"]),
         helper.make_node("Add", ["start", "w"], ["stop"]),
         helper.make_node("Slice", ["x", "start", "stop"], ["win"]),
         helper.make_node("ReduceSum", ["win"], ["s"], keepdims=1),
         helper.make_node("Add", ["acc_in", "s"], ["acc_out"]),
         helper.make_node("Reshape", ["win", "shape"], ["scan"])],
        "body", [_vi("i", [], i64), _vi("cond_in", [], TensorProto.BOOL), _vi("acc_in", [1])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("acc_out", [1]), _vi("scan", None)])
    loop = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "scans"], body=body)
    inits = [helper.make_tensor("zero", i64, [1], [0])]
    return _model([loop], [_vi("M", [], i64), _vi("acc0", [1]), _vi("x", [None]), _vi("w", [1], i64),
                           _vi("shape", [2], i64)],
                  [_vi("acc", [1]), _vi("scans", None)], inits, opset)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_a_body_binds_its_run_time_values_per_iteration(tmp_path, backend):
    path = _save(tmp_path, _window_loop())
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    mine = Session(nnefx.load(path), backend)
    x = np.arange(40, dtype=np.float32)
    for m, w, shape in ((30, 4, [2, 2]), (3, 6, [3, 2]), (30, 4, [1, 4])):  # more iterations than value sets kept
        feeds = {"M": np.array(m, np.int64), "acc0": np.zeros(1, np.float32), "x": x,
                 "w": np.array([w], np.int64), "shape": np.array(shape, np.int64)}
        want = sess.run(None, feeds)
        got = list(mine.run(feeds).values())
        for g, wv in zip(got, want, strict=True):
            assert g.shape == wv.shape
            np.testing.assert_allclose(g, wv, rtol=1e-6)


def test_a_run_time_value_a_body_node_rejects_is_located_in_the_body(tmp_path):
    mine = Session(nnefx.load(_save(tmp_path, _window_loop())))
    feeds = {"M": np.array(2, np.int64), "acc0": np.zeros(1, np.float32), "x": np.arange(8, dtype=np.float32),
             "w": np.array([4], np.int64), "shape": np.array([3, 5], np.int64)}
    with pytest.raises(NNEFXError, match=r"\(Loop\) body: node 6 '' \(Reshape\)\].*\[4\].*\[3, 5\]"):
        mine.run(feeds)
    feeds.update(shape=np.array([2, 2], np.int64), x=np.arange(2, dtype=np.float32), M=np.array(3, np.int64))
    # the window of iteration 2 starts past x's end: empty, which Reshape to [2, 2] refuses
    with pytest.raises(NNEFXError, match=r"\(Loop\) body: node [36] ''"):
        mine.run(feeds)


def test_a_body_with_run_time_values_is_written_back_to_onnx(tmp_path):
    path = _save(tmp_path, _window_loop())
    out = str(tmp_path / "back.onnx")
    nnefx.save(nnefx.load(path), out)
    feeds = {"M": np.array(5, np.int64), "acc0": np.zeros(1, np.float32), "x": np.arange(12, dtype=np.float32),
             "w": np.array([3], np.int64), "shape": np.array([3, 1], np.int64)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
