"""Nodes that need an input's extents which only a run gives: inside a body (bodies are generic
in their inputs' shapes) and downstream of run-time values in the main graph (a Range, an
Expand to a computed shape).  They are deferred at load and read again per run with the
measured shapes, on both numpy backends, against onnxruntime; the main graph's own unknown
extents (a dynamic input dimension) are still refused at load, at the node, and so is a body
node whose refusal does not depend on the extents."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

I64 = TensorProto.INT64


def _vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx") -> str:
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def _against_onnxruntime(path, backend, feeds):
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = list(Session(nnefx.load(path), backend).run(feeds).values())
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _branch_split():
    """If (flag): the then branch expands x to the outer run-time shape 'target' and splits it
    in two along axis 1 (an extent the branch knows only when it runs), the else branch
    negates the outer tensor 'r' (a Reshape to a run-time shape: even its rank is unknown)."""
    then = helper.make_graph(
        [helper.make_node("Expand", ["x", "target"], ["e"]),
         helper.make_node("Split", ["e"], ["a", "b"], axis=1, num_outputs=2),
         helper.make_node("Sub", ["a", "b"], ["y_then"])],
        "then", [], [_vi("y_then", None)])
    other = helper.make_graph([helper.make_node("Neg", ["r"], ["y_else"])], "else", [], [_vi("y_else", None)])
    nodes = [helper.make_node("Reshape", ["x", "rshape"], ["r"]),
             helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)]
    return nodes, [_vi("flag", [], TensorProto.BOOL), _vi("x", [1, 1]), _vi("target", [2], I64),
                   _vi("rshape", [None], I64)], [_vi("y", None)]


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_a_branch_splits_a_tensor_whose_extents_a_run_gives(tmp_path, backend):
    path = _save(tmp_path, *_branch_split())
    x = np.full((1, 1), 3.0, np.float32)
    for flag, target, rshape in ((True, [3, 4], [1]), (True, [2, 6], [1, 1]), (False, [3, 4], [1, 1, 1])):
        _against_onnxruntime(path, backend, {"flag": np.array(flag), "x": x, "target": np.array(target, np.int64),
                                             "rshape": np.array(rshape, np.int64)})


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_a_loop_body_splits_its_carried_value_per_call(tmp_path, backend):
    """The carried value's extent is declared unknown in the body: each call gives it."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Split", ["y_in"], ["lo", "hi"], num_outputs=2),
         helper.make_node("Concat", ["hi", "lo"], ["y_out"], axis=0)],
        "body", [_vi("i", [], I64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [None])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [None])])
    path = _save(tmp_path, [helper.make_node("Loop", ["M", "", "y0"], ["y"], body=body)],
                 [_vi("M", [], I64), _vi("y0", [None])], [_vi("y", [None])])
    for n, m in ((6, 1), (6, 3), (10, 2)):
        _against_onnxruntime(path, backend, {"M": np.array(m, np.int64), "y0": np.arange(n, dtype=np.float32)})


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_the_main_graph_splits_what_a_range_of_run_time_bounds_gives(tmp_path, backend):
    path = _save(tmp_path, [helper.make_node("Range", ["zero", "n", "one"], ["r"]),
                            helper.make_node("Split", ["r"], ["a", "b"], num_outputs=2),
                            helper.make_node("Mul", ["a", "b"], ["y"])],
                 [_vi("n", [], I64)], [_vi("y", [None], I64)],
                 [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("one", I64, [], [1])])
    for n in (6, 8, 10):
        _against_onnxruntime(path, backend, {"n": np.array(n, np.int64)})


def test_extents_a_run_gives_that_a_node_rejects_are_located_with_them(tmp_path):
    path = _save(tmp_path, [helper.make_node("Range", ["zero", "n", "one"], ["r"]),
                            helper.make_node("Pad", ["r", "pads"], ["y"], mode="reflect")],
                 [_vi("n", [], I64)], [_vi("y", [None], I64)],
                 [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("one", I64, [], [1]),
                  helper.make_tensor("pads", I64, [2], [1, 1])])
    session = Session(nnefx.load(path))
    np.testing.assert_array_equal(session.run({"n": np.array(3, np.int64)})["y"], [1, 0, 1, 2, 1])
    with pytest.raises(NNEFXError, match=r"node 1 '' \(Pad\).*run-time shapes: 'r' \[0\]") as info:
        session.run({"n": np.array(0, np.int64)})
    assert info.value.location is not None


def test_a_refusal_that_does_not_depend_on_extents_stays_at_load_in_a_body(tmp_path):
    """The carried value's extents are unknown, but Bernoulli is refused whatever they are: the
    node is not deferred to the first run (its reader never looked at the shape)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Bernoulli", ["y_in"], ["y_out"])],
        "body", [_vi("i", [], I64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [None])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [None])])
    path = _save(tmp_path, [helper.make_node("Loop", ["M", "", "y0"], ["y"], body=body)],
                 [_vi("M", [], I64), _vi("y0", [None])], [_vi("y", [None])])
    with pytest.raises(NNEFXError, match=r"\(Loop\) body: node 1 '' \(Bernoulli\)\].*random") as info:
        nnefx.load(path)
    assert "run-time" not in str(info.value)


def test_the_main_graphs_own_unknown_extents_are_refused_at_load(tmp_path):
    path = _save(tmp_path, [helper.make_node("Split", ["x"], ["a", "b"], num_outputs=2)],
                 [_vi("x", ["n"])], [_vi("a", [None]), _vi("b", [None])])
    with pytest.raises(NNEFXError, match=r"node 0 '' \(Split\).*known extent"):
        nnefx.load(path)


def test_a_loop_binding_other_values_every_iteration_keeps_its_plans(tmp_path, monkeypatch):
    """Each iteration's Slice bounds differ: the body is compiled once, each deferred node per
    value set, and a second run with the same inputs compiles nothing."""
    from nnefx.runtime import planner
    from test_onnx_control_flow_values import _window_loop

    path = str(tmp_path / "loop.onnx")
    onnx.save(_window_loop(), path)
    session = Session(nnefx.load(path), "fast")
    feeds = {"M": np.array(40, np.int64), "acc0": np.zeros(1, np.float32), "x": np.arange(44, dtype=np.float32),
             "w": np.array([4], np.int64), "shape": np.array([2, 2], np.int64)}
    compiled = []
    real = planner.compile_plan
    monkeypatch.setattr(planner, "compile_plan", lambda *a, **k: compiled.append(1) or real(*a, **k))
    want = sum(float(4 * k + 6) for k in range(40))
    assert session.run(feeds)["acc"][0] == want
    assert 40 <= len(compiled) <= 45  # one small plan per iteration's bounds (+ the Reshape's, once)
    compiled.clear()
    got = session.run(feeds)
    assert got["acc"][0] == want and got["scans"].shape == (40, 2, 2)
    assert compiled == []
