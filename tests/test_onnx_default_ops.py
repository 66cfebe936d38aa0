"""ONNX default-domain operators read through registry operations: the ONNX backend node suite's
cases of each, loaded with ``nnefx.load`` and run by a Session on the fast and the formal backend,
compared with the case's expected outputs at the case's own tolerances (element types and shapes
compared strictly).  Cases whose element type the reader cannot return as declared are refused
with the node's location, never answered in another type.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

#: node-suite cases (without ``test_``) that must pass on both backends
PASS = """
celu_float16 gathernd_example_int32 linear_attention_fp16 bitcast_float32_to_int32 bitcast_int8_to_uint8
bitcast_bool_to_uint8 swiglu_float16 causal_conv_with_state_fp16
acosh acosh_example asinh asinh_example atanh atanh_example isinf isinf_positive isinf_negative isinf_float16
isnan isnan_float16 celu thresholdedrelu thresholdedrelu_default thresholdedrelu_example shrink_hard shrink_soft
swish
argmax_no_keepdims_example_select_last_index argmax_keepdims_random_select_last_index
argmax_negative_axis_keepdims_example_select_last_index argmin_default_axis_random_select_last_index
argmin_no_keepdims_example_select_last_index
scatternd scatternd_add scatternd_multiply scatternd_max scatternd_min scatter_elements_with_negative_indices
scatter_elements_with_duplicate_indices scatter_elements_with_reduction_max scatter_with_axis gathernd_example_float32
eyelike_populate_off_main_diagonal eyelike_with_dtype reversesequence_time reversesequence_batch l1normalization_axis_last
l2normalization_axis_0 lpnormalization_default mvn
lppool_1d_default lppool_2d_same_lower lppool_2d_pads lppool_2d_strides lppool_2d_dilations
averagepool_2d_dilations averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True
averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False
causal_conv_with_state_basic causal_conv_with_state_with_bias_and_past_state causal_conv_with_state_silu_with_past_state
causal_conv_with_state_decode_step causal_conv_with_state_short_input_no_past_state causal_conv_with_state_swish_alias
swiglu swiglu_alpha swiglu_expanded tensorscatter tensorscatter_circular tensorscatter_3d
linear_attention_linear linear_attention_gated linear_attention_gated_per_head_decay linear_attention_delta
linear_attention_gated_delta_gqa linear_attention_gated_delta_mqa linear_attention_decode_step
linear_attention_prefill_with_past linear_attention_explicit_scale linear_attention_gated_delta_beta_scalar
maxunpool_export_without_output_shape maxpool_with_argmax_2d_precomputed_pads maxpool_with_argmax_2d_precomputed_strides
dropout_default_mask dropout_default_mask_ratio
""".split()

#: cases whose inputs after the first (k, depth, axes, shape) are made initializers holding the case's
#: data, so they are known while loading (run-time values of these inputs are another matter)
FROZEN = """
top_k top_k_smallest top_k_negative_axis
onehot_with_axis onehot_negative_indices onehot_out_of_range_indices onehot_with_negative_axis
center_crop_pad_crop center_crop_pad_pad center_crop_pad_crop_and_pad center_crop_pad_crop_axes_hwc
center_crop_pad_crop_negative_axes_hwc center_crop_pad_crop_axes_chw
reduce_sum_square_do_not_keepdims_random reduce_sum_square_keepdims_random reduce_sum_square_negative_axes_keepdims_random
reduce_sum_square_default_axes_keepdims_random reduce_log_sum_desc_axes reduce_log_sum_asc_axes reduce_log_sum_default
reduce_log_sum_negative_axes maxunpool_export_with_output_shape reduce_log_sum_exp_keepdims_random
""".split() + ["*" + n for n in """
hannwindow hannwindow_symmetric hammingwindow hammingwindow_symmetric blackmanwindow blackmanwindow_symmetric
melweightmatrix
""".split()]

#: cases refused with a located error naming the node, and a word of the reason
REFUSED = {
    "bernoulli": "draws random numbers",
}


@pytest.fixture(scope="module")
def suite() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    return {c.name[len("test_"):]: c for c in collect_testcases(None)}


def _model(suite: dict, name: str, tmp_path, model=None) -> str:
    path = os.path.join(tmp_path, name + ".onnx")
    onnx.save(model or suite[name].model, path)
    return path


def _frozen(case, kept: int = 1):
    """The case's model with its inputs after the first ``kept`` made initializers (the first data set's)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    keep = list(model.graph.input)[:kept]
    for vi, value in zip(list(model.graph.input)[kept:], inputs[kept:], strict=True):
        model.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(value), vi.name))
    del model.graph.input[:]
    model.graph.input.extend(keep)
    return model, [(inputs[:kept], outputs)]


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("names", [PASS, FROZEN], ids=["as-is", "frozen"])
def test_cases_pass(suite, backend, names, tmp_path):
    for name in names:
        kept = 0 if name.startswith("*") else 1  # "*name": every input frozen
        name = name.lstrip("*")
        case = suite[name]
        model, data_sets = _frozen(case, kept) if names is FROZEN else (case.model, case.data_sets)
        session = Session(nnefx.load(_model(suite, name, tmp_path, model)), backend)
        feeds = [i.name for i in session.inputs]
        for inputs, outputs in data_sets:
            got = list(session.run(dict(zip(feeds, inputs, strict=False))).values())
            assert len(got) == len(outputs), name
            for g, w in zip(got, outputs, strict=True):
                g, w = np.asarray(g), np.asarray(w)
                assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
                assert g.shape == w.shape, (name, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cases_refused_located(suite, name, tmp_path):
    node = suite[name].model.graph.node[0]
    path = _model(suite, name, tmp_path)
    with pytest.raises(NNEFXError, match=REFUSED[name]) as info:
        session = Session(nnefx.load(path), "fast")
        # a node waiting for a run-time value (TopK's K) is refused when the value is bound
        inputs, _ = suite[name].data_sets[0]
        session.run(dict(zip([i.name for i in session.inputs], inputs, strict=False)))
    where = str(info.value)[len(path):]
    assert where.startswith(f": [node 0 '' ({node.op_type})]: error:") or where.startswith(": [output '"), where


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_reduce_log_sum_exp_float32_matches_the_reference(backend, keepdims, tmp_path):
    # large items (exp overflows float32) and +inf: the maximum is taken out first
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32) * 50
    x[0, 1, 2] = np.inf
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=keepdims)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [onnx.numpy_helper.from_array(np.array([1, -1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = Session(nnefx.load(_model({}, "lse", tmp_path, model)), backend).run({"x": x})["y"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_linear_attention_checks_its_inputs():
    from nnefx.ops import registry

    op = registry.get("onnx_linear_attention")
    q = np.zeros((1, 2, 8), np.float32)
    with pytest.raises(NNEFXError, match="needs decay"):
        op.fast_kernel(q, q, q, q_num_heads=2, kv_num_heads=2, update_rule="gated")
    with pytest.raises(NNEFXError, match="positive multiple"):
        op.infer([(1, 2, 8)] * 3, {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"})


def test_bit_cast_kernels_on_the_node_suite(suite):
    # the reader refuses these cases until their element types are carried; the operation
    # itself reinterprets the bits of every width
    from onnx import helper

    from nnefx import etypes
    from nnefx.ops import registry

    op = registry.get("onnx_bit_cast")
    names = [n for n in suite if n.startswith("bitcast_")]
    assert len(names) >= 10
    for name in names:
        case = suite[name]
        to = etypes.from_numpy(helper.tensor_dtype_to_np_dtype(helper.get_attribute_value(
            case.model.graph.node[0].attribute[0])))
        (x,), (want,) = case.data_sets[0]
        assert op.infer([x.shape], {"to": to}) == (x.shape,)
        for kernel in (op.formal_kernel, op.fast_kernel):
            got = kernel(x, to=to)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.tobytes() == want.tobytes(), name


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_einsum_equations_in_float32(suite, backend, tmp_path):
    # the node suite's float64 Einsum cases (implicit output, ellipses, a batch diagonal, an inner
    # product, a scalar) with their data in float32, which the reader returns as declared
    names = [n for n in suite if n.startswith("einsum_") and "bfloat16" not in n]
    assert {"einsum_inner_prod", "einsum_batch_diagonal", "einsum_scalar"} <= set(names)
    for name in names:
        case = suite[name]
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        for vi in list(model.graph.input) + list(model.graph.output):
            assert vi.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
            vi.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        session = Session(nnefx.load(_model(suite, name, tmp_path, model)), backend)
        (inputs, (want,)) = case.data_sets[0]
        got = next(iter(session.run({i.name: x.astype(np.float32) for i, x in zip(session.inputs, inputs,
                                                                                    strict=True)}).values()))
        assert got.dtype == np.float32 and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_the_reference_and_round_trips(mode, ratio, tmp_path):
    # RoIs partly outside the input (0 beyond one pixel), a degenerate one, adaptive grids
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 9, 7)).astype(np.float32)
    rois = np.array([[0, 0, 6, 8], [-3, -2, 4, 3], [2.5, 1.5, 9.5, 12], [3, 3, 3, 3], [1, 2, 5.5, 4]], np.float32)
    idx = np.array([0, 1, 1, 0, 1], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, output_height=3, output_width=2,
                            sampling_ratio=ratio, spatial_scale=0.9)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [onnx.numpy_helper.from_array(rois, "rois"), onnx.numpy_helper.from_array(idx, "idx")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    loaded = nnefx.load(_model({}, "roi", tmp_path, model))
    for backend in ("fast", "formal"):
        got = Session(loaded, backend).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=backend)
    back = os.path.join(tmp_path, "back.onnx")
    nnefx.save(loaded, back)
    assert [n.op_type for n in onnx.load(back).graph.node].count("RoiAlign") == 1
    np.testing.assert_allclose(Session(nnefx.load(back), "fast").run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_pad_wrap_matches_numpy(backend, tmp_path):
    # pads larger than the extent wrap more than once; a negative pad crops
    from onnx import TensorProto, helper

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    pads = np.array([0, 4, -1, 1, 2, 6], np.int64)
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [onnx.numpy_helper.from_array(pads, "pads")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    want = np.pad(x, [(0, 1), (4, 2), (0, 6)], mode="wrap")[:, :, 1:]
    got = Session(nnefx.load(_model({}, "wrap", tmp_path, model)), backend).run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("etype", ["bfloat16", "float16", "float64", "float32"])
def test_pad_constant_value_keeps_its_value_in_every_float_type(etype, tmp_path):
    # a fractional or infinite constant_value pads as itself (it once went through int64:
    # 0.5 became 0 and -inf the int64 minimum for float16, bfloat16 and float64 data)
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    dtype = nnefx.etypes.numpy_dtype(nnefx.etypes.parse(etype))
    code = helper.np_dtype_to_tensor_dtype(dtype)
    for value in (0.5, -np.inf):
        node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", code, [2, 3])],
                                  [helper.make_tensor_value_info("y", code, None)],
                                  [onnx.numpy_helper.from_array(np.array([0, 1, 1, 0], np.int64), "pads"),
                                   onnx.numpy_helper.from_array(np.array(value, dtype), "value")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        x = (np.arange(6).reshape(2, 3) / 4).astype(dtype)
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        loaded = nnefx.load(_model({}, f"pad_{etype}", tmp_path, model))
        for backend in ("fast", "formal"):
            got = Session(loaded, backend).run({"x": x})["y"]
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=backend)
