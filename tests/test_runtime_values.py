"""Run-time values: ONNX parameters that arrive as tensors (deferred nodes, bound per value set)
and selections of a data-dependent size, on both backends, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.graph import DEFERRED  # noqa: E402
from nnefx.runtime.values import MAX_VALUE_SETS  # noqa: E402

BACKENDS = ("fast", "formal")


def save(tmp_path, nodes, inputs, outputs, inits=(), opset=18, name="m.onnx"):
    vis = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    g = helper.make_graph(nodes, "g", vis, outs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def reference(path, feed):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed), strict=True))


def check(path, feed, backends=BACKENDS):
    want = reference(path, feed)
    for backend in backends:
        got = nnefx.Session(nnefx.load(path), backend).run(feed)
        for name, w in want.items():
            assert got[name].dtype == w.dtype, (backend, name)
            np.testing.assert_allclose(got[name], w, rtol=1e-6, atol=1e-6, err_msg=f"{backend} {name}")


def _slice_model(tmp_path):
    return save(tmp_path, [helper.make_node("Slice", ["x", "s", "e"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                [("x", T.FLOAT, [4, 6]), ("s", T.INT64, [2]), ("e", T.INT64, [2])], [("y", T.FLOAT)])


def test_parameters_given_as_inputs_are_bound_at_run_time(tmp_path):
    path = _slice_model(tmp_path)
    model = nnefx.load(path)
    assert [op.op for op in model.graph.operations].count(DEFERRED) == 1
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 5
    for s, e in (([1, 2], [3, 5]), ([0, -3], [4, 6]), ([-1, 0], [100, 1])):
        check(path, {"x": x, "s": np.array(s), "e": np.array(e)})


def test_one_plan_per_value_set_reused_and_bounded(tmp_path):
    session = nnefx.Session(nnefx.load(_slice_model(tmp_path)))
    x = np.ones((4, 6), np.float32)
    session.run({"x": x, "s": np.array([0, 0]), "e": np.array([2, 2])})
    first = dict(session._bound_plans)
    session.run({"x": x * 2, "s": np.array([0, 0]), "e": np.array([2, 2])})
    assert session._bound_plans == first  # same values: the same plan, nothing rebuilt
    assert session.run({"x": x, "s": np.array([1, 1]), "e": np.array([4, 5])})["y"].shape == (3, 4)
    assert len(session._bound_plans) == 2
    for k in range(MAX_VALUE_SETS + 4):
        session.run({"x": x, "s": np.array([0, 0]), "e": np.array([4, 1 + k % 6])})
        assert len(session._bound_plans) <= MAX_VALUE_SETS and len(session._value_graphs) <= MAX_VALUE_SETS


def test_constant_parameters_are_folded_at_load_as_before(tmp_path):
    inits = [helper.make_tensor("s", T.INT64, [2], [1, 2]), helper.make_tensor("e", T.INT64, [2], [3, 5])]
    path = save(tmp_path, [helper.make_node("Slice", ["x", "s", "e"], ["y"])], [("x", T.FLOAT, [4, 6])],
                [("y", T.FLOAT)], inits)
    model = nnefx.load(path)
    assert DEFERRED not in [op.op for op in model.graph.operations]
    assert model.graph.tensors["y"].shape == (2, 3)


def test_values_computed_in_the_graph_and_a_second_round(tmp_path):
    # axes = a + 1 computed in the graph; t = ReduceSum(x, axes) (round 1); the shape of t
    # feeds ConstantOfShape (round 2, its value depends on round 1's result)
    one = helper.make_tensor("one", T.INT64, [1], [1])
    nodes = [helper.make_node("Add", ["a", "one"], ["axes"]),
             helper.make_node("ReduceSum", ["x", "axes"], ["t"], keepdims=0),
             helper.make_node("Shape", ["t"], ["st"]),
             helper.make_node("ConstantOfShape", ["st"], ["z"]),
             helper.make_node("Add", ["t", "z"], ["y"])]
    path = save(tmp_path, nodes, [("x", T.FLOAT, [2, 3, 4]), ("a", T.INT64, [1])], [("y", T.FLOAT)], [one])
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for a in (0, 1, -2):
        check(path, {"x": x, "a": np.array([a])})


def test_a_second_value_the_reader_asks_for_is_bound_too(tmp_path):
    path = save(tmp_path, [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                [("x", T.FLOAT, [5]), ("lo", T.FLOAT, []), ("hi", T.FLOAT, [])], [("y", T.FLOAT)])
    x = np.linspace(-2, 2, 5).astype(np.float32)
    check(path, {"x": x, "lo": np.array(-1, np.float32), "hi": np.array(0.5, np.float32)})
    check(path, {"x": x, "lo": np.array(1, np.float32), "hi": np.array(0.5, np.float32)})  # min > max: every value is max


@pytest.mark.parametrize("case", ["axis", "negative", "zero_step"])
def test_invalid_run_time_values_name_operation_position_and_value(tmp_path, case):
    if case == "axis":
        nodes, extra, feed, words = [helper.make_node("ReduceSum", ["x", "v"], ["y"])], [1], np.array([5]), \
            ["axis 5", "'v' = [5]", "ReduceSum"]
    elif case == "negative":
        nodes, extra, feed, words = [helper.make_node("Tile", ["x", "v"], ["y"])], [2], np.array([1, -2]), \
            ["negative", "'v' = [1, -2]", "Tile"]
    else:
        nodes = [helper.make_node("Slice", ["x", "z", "t", "z", "v"], ["y"])]
        extra, feed, words = [1], np.array([0]), ["step 0", "Slice"]
    inputs = [("x", T.FLOAT, [2, 3]), ("v", T.INT64, extra)]
    inits = [helper.make_tensor("z", T.INT64, [1], [0]), helper.make_tensor("t", T.INT64, [1], [2])]
    path = save(tmp_path, nodes, inputs, [("y", T.FLOAT)], inits)
    session = nnefx.Session(nnefx.load(path))
    with pytest.raises(NNEFXError) as err:
        session.run({"x": np.ones((2, 3), np.float32), "v": feed})
    text = str(err.value)
    assert "node 0" in text
    for w in words:
        assert w in text


def test_writers_and_engines(tmp_path):
    path = _slice_model(tmp_path)
    model = nnefx.load(path)
    feed = {"x": np.arange(24, dtype=np.float32).reshape(4, 6), "s": np.array([1, 0]), "e": np.array([3, 4])}
    with pytest.raises(NNEFXError, match=r"node 0 .*cannot write Slice as NNEF"):
        nnefx.save(model, str(tmp_path / "out.nnef"))
    assert not (tmp_path / "out.nnef").exists()
    with pytest.raises(NNEFXError, match=r"node 0 .*IR"):
        nnefx.save(model, str(tmp_path / "out.xml"))
    back = str(tmp_path / "back.onnx")
    nnefx.save(model, back)  # the node written back as it was
    np.testing.assert_array_equal(reference(back, feed)["y"], reference(path, feed)["y"])
    auto = nnefx.Session(model, "auto")
    np.testing.assert_array_equal(auto.run(feed)["y"], reference(path, feed)["y"])


ENGINES = [e for e in ("onnxruntime", "openvino", "torch") if __import__("nnefx.engines", fromlist=["get"]).get(e)
           .available()]


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_run_graphs_with_run_time_values_compiled_per_value_set(tmp_path, engine):
    # round 1 binds the Slice (values from the inputs), round 2 the ConstantOfShape whose shape
    # comes from round 1's result: the engine runs the graph specialised on both
    nodes = [helper.make_node("Slice", ["x", "s", "e"], ["t"]), helper.make_node("Relu", ["t"], ["r"]),
             helper.make_node("Shape", ["r"], ["st"]),
             helper.make_node("ConstantOfShape", ["st"], ["z"], value=helper.make_tensor("v", T.FLOAT, [1], [0.5])),
             helper.make_node("Add", ["r", "z"], ["y"])]
    path = save(tmp_path, nodes, [("x", T.FLOAT, [4, 6]), ("s", T.INT64, [2]), ("e", T.INT64, [2])],
                [("y", T.FLOAT)])
    session = nnefx.Session(nnefx.load(path), engine, verify=True)
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 5
    for s, e in (([1, 2], [3, 5]), ([0, -3], [4, 6]), ([1, 2], [3, 5])):
        feed = {"x": x, "s": np.array(s), "e": np.array(e)}
        got = session.run(feed)["y"]
        want = reference(path, feed)["y"]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert len(session._value_engines) == 2  # the third run found the first value set's engine model
    assert "run-time values" in session.backend_reason


def test_data_dependent_shapes(tmp_path):
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["nzt"]),
             helper.make_node("Compress", ["x", "c"], ["cx"], axis=1),
             helper.make_node("Compress", ["x", "c"], ["cf"]),
             helper.make_node("Unique", ["k"], ["u", "ui", "uinv", "uc"], sorted=0),
             helper.make_node("Unique", ["k"], ["su", "si", "sinv", "sc"]),
             helper.make_node("Unique", ["m"], ["au", "ai", "ainv", "ac"], axis=0)]
    outs = [("nzt", T.INT64), ("cx", T.FLOAT), ("cf", T.FLOAT), ("u", T.INT64), ("ui", T.INT64), ("uinv", T.INT64),
            ("uc", T.INT64), ("su", T.INT64), ("si", T.INT64), ("sinv", T.INT64), ("sc", T.INT64),
            ("au", T.FLOAT), ("ai", T.INT64), ("ainv", T.INT64), ("ac", T.INT64)]
    path = save(tmp_path, nodes, [("x", T.FLOAT, [3, 4]), ("c", T.BOOL, [3]), ("k", T.INT64, [9]),
                                  ("m", T.FLOAT, [5, 2])], outs)
    for _ in range(3):
        x = rng.integers(-1, 2, (3, 4)).astype(np.float32)
        m = rng.integers(0, 2, (5, 2)).astype(np.float32)
        check(path, {"x": x, "c": rng.integers(0, 2, 3).astype(bool), "k": rng.integers(0, 4, 9), "m": m})


def test_non_max_suppression_with_run_time_thresholds(tmp_path):
    rng = np.random.default_rng(2)
    corners = rng.uniform(0, 1, (1, 6, 2, 2)).astype(np.float32)
    boxes = np.concatenate([corners.min(2), corners.max(2)], -1)[:, :, [1, 0, 3, 2]]
    scores = rng.uniform(0, 1, (1, 2, 6)).astype(np.float32)
    path = save(tmp_path, [helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "th"], ["y"])],
                [("b", T.FLOAT, [1, 6, 4]), ("s", T.FLOAT, [1, 2, 6]), ("k", T.INT64, [1]),
                 ("iou", T.FLOAT, [1]), ("th", T.FLOAT, [1])], [("y", T.INT64)])
    for k, iou, th in ((3, 0.3, 0.2), (6, 0.0, 0.0), (0, 0.5, 0.5)):
        check(path, {"b": boxes, "s": scores, "k": np.array([k]), "iou": np.array([iou], np.float32),
                     "th": np.array([th], np.float32)})


def test_compile_refuses_a_graph_with_run_time_values(tmp_path):
    from nnefx.engines.compiled import compile_model

    path = _slice_model(tmp_path)
    with pytest.raises(NNEFXError, match=r"node 0 .*Slice takes the values of .* at run time"):
        compile_model(path, str(tmp_path / "out"), backend="onnxruntime")
    assert not (tmp_path / "out").exists()
