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
causal_conv_with_state_kernel_size_one causal_conv_with_state_kernel_size_one_expanded
reduce_max_empty_set reduce_min_empty_set reduce_log_sum_exp_empty_set
reduce_max_bool_inputs reduce_min_bool_inputs reduce_max_empty_set_bool
edge_pad reflect_pad
top_k_uint64 top_k_same_values top_k_same_values_largest top_k_same_values_2d
cumsum_2d_int32 cumsum_1d_int32_exclusive
shape_start_greater_than_end celu_bfloat16 onehot_with_bfloat16_values reversesequence_bfloat16 unique_bfloat16_sorted_without_axis
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


def _saved_back(model, tmp_path, name):
    """The model read by nnefx and written back as ONNX (its path)."""
    path, back = os.path.join(tmp_path, name + ".onnx"), os.path.join(tmp_path, name + "_back.onnx")
    onnx.save(model, path)
    nnefx.save(nnefx.load(path), back)
    return back


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.UINT64, TensorProto.INT8, TensorProto.BOOL])
def test_integer_top_k_matches_the_reference_and_writes_back(elem, tmp_path):
    dt = helper.tensor_dtype_to_np_dtype(elem)
    rng = np.random.default_rng(int(elem))
    x = rng.integers(0, 5, (3, 6)).astype(dt)
    if dt == np.uint64:
        x = x + np.uint64(2**63)  # beyond float64 and int64: ordered exactly
    for k, largest, axis in ((3, 1, 1), (2, 0, 0), (0, 1, -1), (6, 0, -1)):
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
        model = _model([node], [_vi("x", elem, x.shape), _vi("k", TensorProto.INT64, [1])],
                       [_vi("v", elem), _vi("i", TensorProto.INT64)])
        feeds = {"x": x, "k": np.array([k], np.int64)}
        _run_both(model, feeds, tmp_path, "top_k")
    # K known while loading: written back as an ONNX TopK that onnx.reference runs alike
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    model = _model([node], [_vi("x", elem, x.shape)], [_vi("v", elem), _vi("i", TensorProto.INT64)],
                   [onnx.numpy_helper.from_array(np.array([4], np.int64), "k")])
    back = onnx.load(_saved_back(model, tmp_path, "top_k_const"))
    assert [n.op_type for n in back.graph.node].count("TopK") == 1
    for g, w in zip(ReferenceEvaluator(back).run(None, {"x": x}), ReferenceEvaluator(model).run(None, {"x": x}),
                    strict=True):
        _check(g, w)


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.INT8, TensorProto.UINT64])
def test_integer_cum_sum_wraps_like_the_reference_and_writes_back(elem, tmp_path):
    dt = helper.tensor_dtype_to_np_dtype(elem)
    info = np.iinfo(dt)
    x = np.random.default_rng(3).integers(info.max // 4, info.max // 2, (3, 5), dtype=dt)  # sums overflow
    for exclusive, reverse in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
        model = _model([node], [_vi("x", elem, x.shape), _vi("axis", TensorProto.INT32, [])], [_vi("y", elem)])
        with np.errstate(over="ignore"):
            _run_both(model, {"x": x, "axis": np.array(1, np.int32)}, tmp_path, "cum_sum")
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1)
    model = _model([node], [_vi("x", elem, x.shape)], [_vi("y", elem)],
                   [onnx.numpy_helper.from_array(np.array(0, np.int64), "axis")])
    back = onnx.load(_saved_back(model, tmp_path, "cum_sum_const"))
    assert [n.op_type for n in back.graph.node].count("CumSum") == 1
    with np.errstate(over="ignore"):
        _check(ReferenceEvaluator(back).run(None, {"x": x})[0], ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_bfloat16_celu_is_computed_wide_and_rounded_once(tmp_path):
    # the composition max(0, x) + min(0, a * (exp(x / a) - 1)) rounded at every step in bfloat16
    # loses most digits near 0 (exp(x / a) - 1 cancels); computed in float32 and rounded once it
    # is the exact result rounded (within one bfloat16 step where the float32 result lies on a tie)
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    x = np.linspace(-4, 4, 401).astype(bf16)
    node = helper.make_node("Celu", ["x"], ["y"], alpha=2.0)
    model = _model([node], [_vi("x", TensorProto.BFLOAT16, x.shape)], [_vi("y", TensorProto.BFLOAT16)], opset=22)
    path = os.path.join(tmp_path, "celu.onnx")
    onnx.save(model, path)
    wide = x.astype(np.float64)
    exact = (np.maximum(wide, 0) + np.minimum(0, 2.0 * np.expm1(wide / 2.0))).astype(bf16)
    for backend in ("fast", "formal"):
        got = Session(nnefx.load(path), backend).run({"x": x})["y"]
        assert got.dtype == bf16
        np.testing.assert_allclose(got.astype(np.float32), exact.astype(np.float32), rtol=2.0**-8, atol=0,
                                   err_msg=backend)
        assert np.mean(got == exact) > 0.97, backend


def test_top_k_and_cum_sum_of_constant_integers(tmp_path):
    # inputs known while loading (initializers) take the same operations, computed once by the plan
    x = np.array([[5, -2, 7, 7], [0, 3, -9, 3]], np.int32)
    nodes = [helper.make_node("TopK", ["c", "k"], ["v", "i"]), helper.make_node("CumSum", ["c", "axis"], ["s"]),
             helper.make_node("TopK", ["f", "k0"], ["fv", "fi"])]
    inits = [onnx.numpy_helper.from_array(x, "c"), onnx.numpy_helper.from_array(np.array([2], np.int64), "k"),
             onnx.numpy_helper.from_array(np.array([0], np.int64), "k0"),
             onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")]
    outs = [_vi("v", TensorProto.INT32), _vi("i", TensorProto.INT64), _vi("s", TensorProto.INT32),
            _vi("fv", TensorProto.FLOAT), _vi("fi", TensorProto.INT64)]
    model = _model(nodes, [_vi("f", TensorProto.FLOAT, [2, 3])], outs, inits)
    _run_both(model, {"f": np.ones((2, 3), np.float32)}, tmp_path, "const_int")


def test_slices_of_unknown_extent_are_right_or_refused(tmp_path):
    # the extent is known only at run time: a slice the reader can tell is empty (a stop at 0 with a
    # positive step — NNEF's end 0 means "to the end" —, or bounds on one side the wrong way round)
    # is empty; the others equal numpy's, or are refused at the node when NNEF's slice cannot say them
    import itertools

    from nnefx.diagnostics import NNEFXError

    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    ran = 0
    for b, e, s in itertools.product([-8, -1, 0, 2, 9], [-3, 0, 5, 9], [-1, 1, 2]):
        node = helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])
        inits = [onnx.numpy_helper.from_array(np.array([v], np.int64), n) for n, v in
                 (("s", b), ("e", e), ("a", 1), ("st", s))]
        path = os.path.join(tmp_path, "slice.onnx")
        onnx.save(_model([node], [_vi("x", TensorProto.FLOAT, [2, "L"])], [_vi("y", TensorProto.FLOAT)], inits), path)
        want = x[:, b:e:s]
        for backend in ("fast", "formal"):
            try:
                got = Session(nnefx.load(path), backend).run({"x": x})["y"]
            except NNEFXError as exc:
                # NNEF's slice clamps a begin below 0 to -1 and needs begin <= end: numpy's clamps
                # that it cannot say with the extent unknown are refused, located
                assert "(Slice)" in str(exc) and not (e == 0 and s > 0), (b, e, s, str(exc))
                continue
            ran += 1
            _check(got, want, what=f"x[:, {b}:{e}:{s}] {backend}")
    assert ran >= 80


@pytest.mark.parametrize("engine", ["onnxruntime", "openvino", "torch"])
def test_engines_on_empty_reductions_agree_or_refuse(engine, tmp_path):
    # the engines see the same empty sets: the identity where they give it, a located refusal
    # where they would not (OpenVINO's ReduceMin of nothing is the largest finite float; an
    # arg-reduction of nothing has no index anywhere)
    from nnefx.diagnostics import NNEFXError
    from nnefx.engines import get

    pytest.importorskip(engine)
    if not get(engine).available():
        pytest.skip(f"engine {engine} not available")
    x = np.zeros((2, 0, 3), np.float32)
    node = helper.make_node("ReduceMin", ["x", "axes"], ["y"], keepdims=0)
    model = _model([node], [_vi("x", TensorProto.FLOAT, x.shape)], [_vi("y", TensorProto.FLOAT)],
                   [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])
    path = os.path.join(tmp_path, "min.onnx")
    onnx.save(model, path)
    if engine == "openvino":
        with pytest.raises(NNEFXError, match=r"\(ReduceMin\).*over an empty axis"):
            Session(nnefx.load(path), engine).run({"x": x})
    else:
        _check(Session(nnefx.load(path), engine).run({"x": x})["y"], np.full((2, 3), np.inf, np.float32))
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1)
    model = _model([node], [_vi("x", TensorProto.FLOAT, x.shape)], [_vi("y", TensorProto.INT64)])
    onnx.save(model, path)
    with pytest.raises(NNEFXError, match=r"\(ArgMax\).*empty axis"):
        Session(nnefx.load(path), engine).run({"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin"])
def test_integer_reductions_match_the_reference(op, tmp_path):
    # in the data's own type (sums and products wrap in it), axes given at run time, empty sets
    # giving the identity (the type's lowest value for a maximum, its highest for a minimum)
    rng = np.random.default_rng(7)
    for elem in (TensorProto.INT32, TensorProto.INT64, TensorProto.UINT64):
        dt = helper.tensor_dtype_to_np_dtype(elem)
        info = np.iinfo(dt)
        for shape, axes, keep in (((3, 4, 5), [1], 1), ((3, 4, 5), [0, -1], 0), ((2, 0, 3), [1], 1),
                                  ((3, 4), [0, 1], 0)):
            x = rng.integers(info.min // 2, info.max // 2, shape, dtype=dt, endpoint=True)
            node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)
            model = _model([node], [_vi("x", elem, shape), _vi("axes", TensorProto.INT64, [len(axes)])],
                           [_vi("y", elem)])
            with np.errstate(over="ignore"):
                _run_both(model, {"x": x, "axes": np.array(axes, np.int64)}, tmp_path, f"{op}_{dt}")
    # axes known while loading: written back as the ONNX node, which onnx.reference runs alike
    x = rng.integers(-1000, 1000, (3, 4), dtype=np.int64)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    model = _model([node], [_vi("x", TensorProto.INT64, x.shape)], [_vi("y", TensorProto.INT64)],
                   [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])
    back = onnx.load(_saved_back(model, tmp_path, "reduce_back"))
    assert [n.op_type for n in back.graph.node].count(op) == 1
    with np.errstate(over="ignore"):
        _check(ReferenceEvaluator(back).run(None, {"x": x})[0], ReferenceEvaluator(model).run(None, {"x": x})[0])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_integer_arg_reductions_match_the_reference(op, tmp_path):
    # few distinct values, so ties decide: the first index, or the last with select_last_index
    rng = np.random.default_rng(11)
    for elem in (TensorProto.INT32, TensorProto.UINT64, TensorProto.UINT8):
        x = rng.integers(0, 3, (3, 4, 5)).astype(helper.tensor_dtype_to_np_dtype(elem))
        for axis, keep, last in ((1, 1, 0), (0, 0, 0), (-1, 1, 1), (1, 0, 1)):
            node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=last)
            model = _model([node], [_vi("x", elem, x.shape)], [_vi("y", TensorProto.INT64)], opset=13)
            _run_both(model, {"x": x}, tmp_path, f"{op}_{elem}")
