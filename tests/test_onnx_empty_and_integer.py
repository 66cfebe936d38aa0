"""Empty tensors and integer data through ONNX readers: zero-length Split outputs, empty Slices,
reductions over empty sets, Pad of integer data, integer TopK/CumSum and narrow floats of
data-moving operators, each checked against ``onnx.reference`` (or the node suite's expected
outputs) on both backends, element types and shapes compared strictly."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

#: node-suite cases (without ``test_``) that must pass on both backends as they are
PASS = """
split_zero_size_splits_opset13 split_zero_size_splits_opset18 slice_start_out_of_bounds
rotary_embedding_expanded rotary_embedding_3d_input_expanded rotary_embedding_interleaved_expanded
rotary_embedding_no_position_ids_expanded rotary_embedding_no_position_ids_interleaved_expanded
causal_conv_with_state_kernel_size_one_expanded
reduce_max_empty_set reduce_min_empty_set reduce_log_sum_exp_empty_set
reduce_max_bool_inputs reduce_min_bool_inputs reduce_max_empty_set_bool
edge_pad reflect_pad
""".split()


@pytest.fixture(scope="module")
def suite() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    return {c.name[len("test_"):]: c for c in collect_testcases(None)}


def _check(got, want, rtol=1e-7, atol=0.0, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_node_suite_cases_pass(suite, backend, tmp_path):
    for name in PASS:
        case = suite[name]
        path = os.path.join(tmp_path, name + ".onnx")
        onnx.save(case.model, path)
        session = Session(nnefx.load(path), backend)
        feeds = [i.name for i in session.inputs]
        for inputs, outputs in case.data_sets:
            got = list(session.run(dict(zip(feeds, inputs, strict=False))).values())
            assert len(got) == len(outputs), name
            for g, w in zip(got, outputs, strict=True):
                _check(g, w, case.rtol, case.atol, name)


def _run_both(model, feeds, tmp_path, name="m", want=None):
    """The model's outputs by onnx.reference (or ``want``), and by nnefx on both backends (checked equal)."""
    path = os.path.join(tmp_path, name + ".onnx")
    onnx.save(model, path)
    want = ReferenceEvaluator(model).run(None, feeds) if want is None else want
    loaded = nnefx.load(path)
    for backend in ("fast", "formal"):
        got = list(Session(loaded, backend).run(feeds).values())
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _check(g, w, what=f"{name} {backend} output {k}")


def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_pad_of_integers_matches_the_reference(mode, tmp_path):
    # pads beyond the extent (reflected or wrapped more than once), a crop beside an extension;
    # onnx.reference refuses negative pads, so the expected output is numpy's pad then the crop
    x = (np.arange(2 * 3 * 4, dtype=np.int32) * 7919 - 40000).reshape(2, 3, 4)
    for pads in ([0, 1, 2, 1, 0, 1], [1, -1, 5, 0, 2, -2], [0, 4, -1, 0, 0, 3]):
        node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
        model = _model([node], [_vi("x", TensorProto.INT32, x.shape)], [_vi("y", TensorProto.INT32)],
                       [onnx.numpy_helper.from_array(np.array(pads, np.int64), "pads")])
        # ONNX's reference: the positive pads extend the input (np.pad), the negative ones then crop
        before, after = pads[:3], pads[3:]
        want = np.pad(x, [(max(b, 0), max(e, 0)) for b, e in zip(before, after, strict=True)], mode=mode)
        want = want[tuple(slice(max(-b, 0), want.shape[k] - max(-e, 0))
                          for k, (b, e) in enumerate(zip(before, after, strict=True)))]
        _run_both(model, {"x": x}, tmp_path, f"pad_{mode}", [want])


def test_empty_slices_and_split_pieces_match_the_reference(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (
        ("s0", [3, 0]), ("e0", [1, 2]), ("a0", [2, 0]),  # start past stop: empty along axis 2
        ("s1", [-1]), ("e1", [-10]), ("st1", [1]), ("a1", [1]),  # positive step from the end: empty
        ("s2", [0]), ("e2", [5]), ("st2", [-1]), ("a2", [2]),  # negative step from before the end: empty
        ("lens", [0, 3, 0]))]
    nodes = [helper.make_node("Slice", ["x", "s0", "e0", "a0"], ["y0"]),
             helper.make_node("Slice", ["x", "s1", "e1", "a1", "st1"], ["y1"]),
             helper.make_node("Slice", ["x", "s2", "e2", "a2", "st2"], ["y2"]),
             helper.make_node("Split", ["x", "lens"], ["p0", "p1", "p2"], axis=1)]
    outs = [_vi(n, TensorProto.FLOAT) for n in ("y0", "y1", "y2", "p0", "p1", "p2")]
    _run_both(_model(nodes, [_vi("x", TensorProto.FLOAT, x.shape)], outs, inits), {"x": x}, tmp_path, "empty")


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"])
def test_reductions_over_empty_sets_match_the_reference(op, tmp_path):
    x = np.zeros((2, 0, 3), np.float32)
    for keepdims in (0, 1):
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
        model = _model([node], [_vi("x", TensorProto.FLOAT, x.shape)], [_vi("y", TensorProto.FLOAT)],
                       [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])
        _run_both(model, {"x": x}, tmp_path, f"{op}_{keepdims}")


def test_arg_reductions_of_empty_sets_are_refused():
    from nnefx.diagnostics import NNEFXError
    from nnefx.ops import registry

    x = np.zeros((2, 0), np.float32)
    for name in ("argmax_reduce", "argmin_reduce"):
        op = registry.get(name)
        for kernel in (op.formal_kernel, op.fast_kernel):
            with pytest.raises(NNEFXError, match="empty"):
                kernel(x, axes=[1])
        assert op.fast_kernel(np.zeros((0, 3), np.float32), axes=[1]).shape == (0, 1)
