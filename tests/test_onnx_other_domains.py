"""ONNX operators outside the default domain: ``ai.onnx.ml`` (Binarizer, ArrayFeatureExtractor,
LabelEncoder, TreeEnsemble), ``ai.onnx.preview.training`` (Adagrad, Adam, Momentum) and
``ai.onnx.preview`` (FlexAttention), read by ``nnefx.load`` and run on both backends.

Peers: the node suite's expected outputs, onnxruntime and onnx.reference (where they implement
the operator as the ONNX operator docs define it: onnxruntime's TreeEnsemble reads
post_transform 1 as logistic and 2 as softmax, the docs say the reverse, and its LabelEncoder
keeps the first of repeated keys, the docs the last; onnx.reference's TreeEnsemble ignores
post_transform), and the definitions written out in numpy.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402

BACKENDS = ("formal", "fast")

#: node-suite cases of these domains the reader runs
CASES = ("test_ai_onnx_ml_label_encoder_string_int", "test_ai_onnx_ml_label_encoder_string_int_no_default",
         "test_ai_onnx_ml_label_encoder_tensor_mapping", "test_ai_onnx_ml_label_encoder_tensor_value_only_mapping",
         "test_adagrad", "test_adagrad_multiple", "test_adam", "test_adam_multiple", "test_momentum",
         "test_momentum_multiple", "test_nesterov_momentum", "test_ai_onnx_ml_binarizer",
         "test_ai_onnx_ml_array_feature_extractor", "test_ai_onnx_ml_tree_ensemble_single_tree",
         "test_ai_onnx_ml_tree_ensemble_set_membership", "test_flexattention", "test_flexattention_scaled",
         "test_flexattention_gqa", "test_flexattention_diff_head_sizes", "test_flexattention_fp16",
         "test_flexattention_double", "test_flexattention_score_mod", "test_flexattention_prob_mod",
         "test_flexattention_causal_mask", "test_flexattention_soft_cap", "test_flexattention_relative_positional")


@pytest.fixture(scope="module")
def suite():
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in node.collect_testcases("") if c.name in CASES}


def _save(model, tmp_path, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, opsets, ir_version=10):
    graph = h.make_graph(nodes if isinstance(nodes, list) else [nodes], "g", inputs, outputs)
    m = h.make_model(graph, opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = ir_version
    return m


def _run(path, feeds, backend):
    return list(nnefx.Session(nnefx.load(path), backend=backend).run(feeds).values())


@pytest.mark.parametrize("name", CASES)
def test_node_suite_case_runs_on_both_backends(suite, name, tmp_path):
    case = suite[name]
    path = _save(case.model, tmp_path)
    names = [i.name for i in case.model.graph.input]
    for backend in BACKENDS:
        for inputs, expected in case.data_sets:
            got = _run(path, dict(zip(names, inputs, strict=False)), backend)
            assert len(got) == len(expected)
            for g, w in zip(got, expected, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape, (backend, g.dtype, w.dtype, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


# --- the reader: domains and their opsets ---------------------------------------------------------

def _binarizer_model(opsets, domain="ai.onnx.ml", ir_version=10):
    node = h.make_node("Binarizer", ["X"], ["Y"], domain=domain, threshold=1.5)
    return _model(node, [h.make_tensor_value_info("X", TensorProto.INT32, [5])],
                  [h.make_tensor_value_info("Y", TensorProto.INT32, [5])], opsets, ir_version)


def test_a_model_of_one_non_default_domain_needs_no_default_opset(tmp_path):
    path = _save(_binarizer_model([("ai.onnx.ml", 1)]), tmp_path)
    x = np.array([-3, 1, 2, 2**31 - 1, 1], np.int32)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": x}, backend)
        assert y.dtype == np.int32 and y.tolist() == [0, 0, 1, 1, 0]


@pytest.mark.parametrize("opsets, domain, message", [
    ([("ai.onnx.ml", 99)], "ai.onnx.ml", r"\[opset_import\]: error: opset 99 of domain 'ai.onnx.ml' is not one"),
    ([("", 21)], "ai.onnx.ml", r"\[node 0 '' \(Binarizer\)\]: error: the model imports no opset of domain "
                               r"'ai.onnx.ml'"),
    ([("", 21), ("com.example", 1)], "com.example",
     r"\[node 0 '' \(Binarizer\)\]: error: unsupported operation 'Binarizer' of domain 'com.example'"),
])
def test_domains_and_opsets_are_checked_located(tmp_path, opsets, domain, message):
    path = _save(_binarizer_model(opsets, domain), tmp_path)
    with pytest.raises(NNEFXError, match=message):
        nnefx.load(path)


def test_default_domain_nodes_still_need_the_default_opset(tmp_path):
    node = h.make_node("Relu", ["X"], ["Y"])
    m = _model(node, [h.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
               [h.make_tensor_value_info("Y", TensorProto.FLOAT, [2])], [("ai.onnx.ml", 1)])
    with pytest.raises(NNEFXError, match=r"\[opset_import\]: error: the model imports no opset of the default"):
        nnefx.load(_save(m, tmp_path))


# --- ai.onnx.ml ------------------------------------------------------------------------------------

def _label_model(x_type, y_type, **attrs):
    node = h.make_node("LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", **attrs)
    return _model(node, [h.make_tensor_value_info("X", x_type, [6])], [h.make_tensor_value_info("Y", y_type, [6])],
                  [("ai.onnx.ml", 4), ("", 21)])


def test_label_encoder_numeric_keys_nan_repeated_and_default(tmp_path):
    # the docs: NaN keys match NaN inputs, the last of repeated keys counts, default elsewhere
    m = _label_model(TensorProto.FLOAT, TensorProto.INT64, keys_floats=[1.0, float("nan"), 1.0, 2.5],
                     values_int64s=[5, 7, 9, 11], default_int64=-3)
    path = _save(m, tmp_path)
    x = np.array([1.0, np.nan, 2.5, 3.0, -0.0, 1.0], np.float32)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": x}, backend)
        assert y.dtype == np.int64 and y.tolist() == [9, 7, 11, -3, -3, 9]


def test_label_encoder_tensor_keys_keep_their_element_types(tmp_path):
    m = _label_model(TensorProto.INT16, TensorProto.DOUBLE,
                     keys_tensor=nh.from_array(np.array([3, -1, 40], np.int16), "keys"),
                     values_tensor=nh.from_array(np.array([0.1, 0.2, 1e300], np.float64), "values"),
                     default_tensor=nh.from_array(np.array([-0.5], np.float64), "default"))
    path = _save(m, tmp_path)
    x = np.array([40, 3, 3, 7, -1, 0], np.int16)
    want = np.array([1e300, 0.1, 0.1, -0.5, 0.2, -0.5])
    from onnx.reference import ReferenceEvaluator  # (onnxruntime has no int16 -> double LabelEncoder)

    peer = ReferenceEvaluator(m).run(None, {"X": x})[0]
    np.testing.assert_array_equal(peer, want)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": x}, backend)
        assert y.dtype == np.float64
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("attrs, message", [
    ({"keys_strings": ["a"], "values_int64s": [1]}, "keys are string but the input is i64"),
    ({"keys_int64s": [1, 2], "values_int64s": [1]}, "has 2 keys but 1 values"),
    ({"keys_int64s": [1], "keys_floats": [1.0], "values_int64s": [1]}, "exactly one keys_\\* and one values_\\*"),
    ({"keys_floats": [1.0], "values_int64s": [1]}, "keys are f32 but the input is i64"),
])
def test_label_encoder_refusals_are_located(tmp_path, attrs, message):
    m = _label_model(TensorProto.INT64, TensorProto.INT64, **attrs)
    with pytest.raises(NNEFXError, match=r"\[node 0 '' \(LabelEncoder\)\]: error: .*" + message):
        nnefx.load(_save(m, tmp_path))


def test_array_feature_extractor_rows_and_bad_index(tmp_path):
    node = h.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain="ai.onnx.ml")
    m = _model(node, [h.make_tensor_value_info("X", TensorProto.INT64, [4]),
                      h.make_tensor_value_info("I", TensorProto.INT64, [2, 2])],
               [h.make_tensor_value_info("Y", TensorProto.INT64, None)], [("ai.onnx.ml", 1)])
    path = _save(m, tmp_path)
    x = np.array([10, 11, 12, 13], np.int64)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": x, "I": np.array([[3, 0], [0, 2]], np.int64)}, backend)
        assert y.tolist() == [[13, 10, 10, 12]]  # a 1-D input gives one row (onnxruntime's kernel)
        with pytest.raises(NNEFXError, match="index 4 is outside \\[0, 4\\)"):
            _run(path, {"X": x, "I": np.array([[4, 0], [0, 2]], np.int64)}, backend)


def _tree_model(aggregate, post, *, truenodeids=(0, 1, 2), n_targets=2, etype=TensorProto.FLOAT,
                weights=(1.0, 2.0, -3.0, 4.0)):
    dtype = nh.helper.tensor_dtype_to_np_dtype(etype)
    node = h.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", n_targets=n_targets, aggregate_function=aggregate,
        post_transform=post, tree_roots=[0, 2], nodes_featureids=[0, 1, 1],
        nodes_modes=nh.from_array(np.array([0, 3, 5], np.uint8), "modes"),
        nodes_splits=nh.from_array(np.array([0.5, 1.0, 2.0], dtype), "splits"),
        nodes_truenodeids=list(truenodeids), nodes_trueleafs=[1, 1, 1], nodes_falsenodeids=[1, 2, 3],
        nodes_falseleafs=[0, 1, 1], leaf_targetids=[0, 1, 0, 1],
        leaf_weights=nh.from_array(np.array(weights, dtype), "weights"),
        nodes_missing_value_tracks_true=[1, 0, 0])
    return _model(node, [h.make_tensor_value_info("X", etype, [4, 2])],
                  [h.make_tensor_value_info("Y", etype, [4, 2])], [("ai.onnx.ml", 5), ("", 21)])


TREE_X = np.array([[0.1, 3.0], [0.9, 0.5], [np.nan, 2.0], [2.0, np.nan]], np.float32)


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("post", [0, 3])
def test_tree_ensemble_aggregations_match_onnxruntime(tmp_path, aggregate, post):
    import onnxruntime as ort

    path = _save(_tree_model(aggregate, post), tmp_path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": TREE_X})[0]
    for backend in BACKENDS:
        (y,) = _run(path, {"X": TREE_X}, backend)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize("post", [1, 2])
def test_tree_ensemble_softmax_and_logistic_as_the_docs_number_them(tmp_path, post):
    raw = _run(_save(_tree_model(1, 0), tmp_path, "raw.onnx"), {"X": TREE_X}, "fast")[0].astype(np.float64)
    want = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True) if post == 1 else 1 / (1 + np.exp(-raw))
    path = _save(_tree_model(1, post, etype=TensorProto.DOUBLE), tmp_path)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": TREE_X.astype(np.float64)}, backend)
        assert y.dtype == np.float64
        np.testing.assert_allclose(y, want, rtol=1e-12)


def test_tree_ensemble_structure_is_checked_before_running(tmp_path):
    cyclic = _tree_model(1, 0, truenodeids=(0, 1, 2))
    node = cyclic.graph.node[0]
    for a in node.attribute:  # node 0's false branch to node 1, node 1's false branch back to node 0
        if a.name == "nodes_falsenodeids":
            a.ints[:] = [1, 0, 3]
        if a.name == "nodes_falseleafs":
            a.ints[:] = [0, 0, 1]
    with pytest.raises(NNEFXError, match=r"\(TreeEnsemble\)\]: error: .*cycle through node"):
        nnefx.load(_save(cyclic, tmp_path))
    with pytest.raises(NNEFXError, match=r"\(TreeEnsemble\)\]: error: .*'post_transform' = 5 must be 0 to 4"):
        nnefx.load(_save(_tree_model(1, 5), tmp_path))


def test_tree_ensemble_probit_is_the_normal_quantile(tmp_path):
    from statistics import NormalDist

    path = _save(_tree_model(0, 4, etype=TensorProto.DOUBLE, weights=(0.1, 0.35, 0.6, 0.999)), tmp_path)
    raw = _run(_save(_tree_model(0, 0, etype=TensorProto.DOUBLE, weights=(0.1, 0.35, 0.6, 0.999)), tmp_path, "r.onnx"),
               {"X": TREE_X.astype(np.float64)}, "fast")[0]
    want = np.vectorize(lambda p: NormalDist().inv_cdf(p) if 0 < p < 1 else (-np.inf if p == 0 else np.nan))(raw)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": TREE_X.astype(np.float64)}, backend)
        np.testing.assert_allclose(y, want, rtol=1e-12)


# --- ai.onnx.preview.training ----------------------------------------------------------------------

def test_adam_bias_correction_and_post_norm_in_float64(tmp_path):
    node = h.make_node("Adam", ["R", "T", "X", "G", "V", "H"], ["X2", "V2", "H2"], domain="ai.onnx.preview.training",
                       alpha=0.8, beta=0.7, epsilon=1e-3, norm_coefficient=0.1, norm_coefficient_post=0.25)
    d = TensorProto.DOUBLE
    m = _model(node, [h.make_tensor_value_info("R", d, []), h.make_tensor_value_info("T", TensorProto.INT64, [])]
               + [h.make_tensor_value_info(n, d, [3]) for n in "XGVH"],
               [h.make_tensor_value_info(n, d, [3]) for n in ("X2", "V2", "H2")], [("ai.onnx.preview.training", 1)])
    path = _save(m, tmp_path)
    rng = np.random.default_rng(0)
    x, g, v = rng.standard_normal((3, 3))
    hh = rng.random(3)
    alpha, beta, eps, norm = (float(np.float32(a)) for a in (0.8, 0.7, 1e-3, 0.1))  # FLOAT attributes
    for t in (0, 3):
        gr = norm * x + g
        v2 = alpha * v + (1 - alpha) * gr
        h2 = beta * hh + (1 - beta) * gr * gr
        rate = 0.5 * math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t else 0.5
        x2 = 0.75 * (x - rate * v2 / (np.sqrt(h2) + eps))
        feeds = {"R": np.array(0.5), "T": np.array(t), "X": x, "G": g, "V": v, "H": hh}
        for backend in BACKENDS:
            got = _run(path, feeds, backend)
            for a, b in zip(got, (x2, v2, h2), strict=True):
                assert a.dtype == np.float64
                np.testing.assert_allclose(a, b, rtol=1e-12)


def test_momentum_needs_its_attributes(tmp_path):
    node = h.make_node("Momentum", ["R", "T", "X", "G", "V"], ["X2", "V2"], domain="ai.onnx.preview.training",
                       alpha=0.9, beta=0.1, norm_coefficient=0.0)
    f = TensorProto.FLOAT
    m = _model(node, [h.make_tensor_value_info("R", f, []), h.make_tensor_value_info("T", TensorProto.INT64, [])]
               + [h.make_tensor_value_info(n, f, [2]) for n in "XGV"],
               [h.make_tensor_value_info(n, f, [2]) for n in ("X2", "V2")], [("ai.onnx.preview.training", 1)])
    with pytest.raises(NNEFXError, match=r"\(Momentum\)\]: error: missing attribute 'mode'"):
        nnefx.load(_save(m, tmp_path))


# --- ai.onnx.preview: FlexAttention ------------------------------------------------------------

def _flex_model(q_shape, k_shape, score_mod=None, extra_inputs=()):
    f = TensorProto.FLOAT
    attrs = {} if score_mod is None else {"score_mod": score_mod}
    node = h.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", **attrs)
    inputs = [h.make_tensor_value_info("Q", f, q_shape), h.make_tensor_value_info("K", f, k_shape),
              h.make_tensor_value_info("V", f, k_shape), *extra_inputs]
    return _model(node, inputs, [h.make_tensor_value_info("Y", f, None)], [("", 26), ("ai.onnx.preview", 1)], 13)


def _reference(q, k, v, bias):
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_flex_attention_score_mod_reads_an_outer_tensor(tmp_path):
    f = TensorProto.FLOAT
    body = h.make_graph([h.make_node("Add", ["s", "B"], ["out"])], "add_bias",
                        [h.make_tensor_value_info("s", f, ["b", "h", "l", "s"])],
                        [h.make_tensor_value_info("out", f, ["b", "h", "l", "s"])])
    m = _flex_model(["N", 2, 3, 4], ["N", 2, 5, 4], body, [h.make_tensor_value_info("B", f, [3, 5])])
    path = _save(m, tmp_path)
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 4))
    bias = rng.standard_normal((3, 5))
    feeds = {"Q": q.astype(np.float32), "K": k.astype(np.float32), "V": v.astype(np.float32),
             "B": bias.astype(np.float32)}
    for backend in BACKENDS:
        (y,) = _run(path, feeds, backend)  # a dynamic batch: the body does not need its extents
        np.testing.assert_allclose(y, _reference(q, k, v, bias), rtol=1e-5, atol=1e-6)


def test_flex_attention_refusals_are_located(tmp_path):
    f = TensorProto.FLOAT
    body = h.make_graph([h.make_node("Cast", ["s"], ["out"], to=TensorProto.DOUBLE)], "widen",
                        [h.make_tensor_value_info("s", f, [1, 1, 2, 2])],
                        [h.make_tensor_value_info("out", TensorProto.DOUBLE, [1, 1, 2, 2])])
    with pytest.raises(NNEFXError, match=r"\(FlexAttention\)\]: error: score_mod must return a f32 tensor"):
        nnefx.load(_save(_flex_model([1, 1, 2, 4], [1, 1, 2, 4], body), tmp_path))
    with pytest.raises(NNEFXError, match=r"\(FlexAttention\)\]: error: .*query heads are not a multiple"):
        nnefx.load(_save(_flex_model([1, 3, 2, 4], [1, 2, 2, 4]), tmp_path))


def test_flex_attention_with_a_body_is_refused_by_the_nnef_writer(suite, tmp_path):
    model = nnefx.load(_save(suite["test_flexattention_score_mod"].model, tmp_path))
    with pytest.raises(NNEFXError, match=r"\(FlexAttention\)\]: error: cannot write operation 'onnx_flex_attention' "
                                         r"as NNEF: NNEF has no operation that applies a body graph \(its score_mod\)"):
        nnefx.save(model, str(tmp_path / "out.nnef"))


# --- writing back as ONNX ------------------------------------------------------------------------

#: operators onnxruntime runs (the training and preview domains it does not implement)
ORT_RUNS = ("Binarizer", "ArrayFeatureExtractor", "LabelEncoder", "TreeEnsemble")


@pytest.mark.parametrize("name", [c for c in CASES if c.endswith(("_multiple", "momentum", "binarizer", "extractor",
                                                                   "membership", "score_mod", "gqa", "causal_mask"))])
def test_written_back_as_onnx_identically(suite, name, tmp_path):
    case = suite[name]
    model = nnefx.load(_save(case.model, tmp_path))
    out = str(tmp_path / "out.onnx")
    nnefx.save(model, out)
    written = onnx.load(out)
    # (one node per optimized tensor; graph outputs copied by Identity)
    assert {(n.domain, n.op_type) for n in written.graph.node} - {("", "Identity")} == \
        {(n.domain, n.op_type) for n in case.model.graph.node}
    names = [i.name for i in case.model.graph.input]
    feeds = dict(zip(names, case.data_sets[0][0], strict=False))
    first = _run(_save(case.model, tmp_path), feeds, "fast")
    again = _run(out, feeds, "fast")
    for a, b in zip(first, again, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    if written.graph.node[0].op_type in ORT_RUNS:
        import onnxruntime as ort

        peer = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
        for a, b in zip(first, peer, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5)


@pytest.mark.parametrize("post", [1, 2])
def test_written_tree_ensemble_means_the_documented_post_transform_to_onnxruntime(tmp_path, post):
    import onnxruntime as ort

    model = nnefx.load(_save(_tree_model(3, post), tmp_path))
    out = str(tmp_path / "out.onnx")
    nnefx.save(model, out)
    assert [n.op_type for n in onnx.load(out).graph.node][:2] == ["TreeEnsemble", "Softmax" if post == 1 else "Sigmoid"]
    want = _run(out, {"X": TREE_X}, "formal")[0]
    peer = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": TREE_X})[0]
    np.testing.assert_allclose(peer, want, rtol=1e-6)


def test_written_label_encoder_keeps_the_last_of_repeated_keys(tmp_path):
    import onnxruntime as ort

    m = _label_model(TensorProto.INT64, TensorProto.FLOAT, keys_int64s=[4, 2, 4], values_floats=[1.5, 2.5, 3.5],
                     default_float=-1.0)
    out = str(tmp_path / "out.onnx")
    nnefx.save(nnefx.load(_save(m, tmp_path)), out)
    x = np.array([4, 2, 0, 4, 2, 9], np.int64)
    peer = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    assert peer.tolist() == [3.5, 2.5, -1.0, 3.5, 2.5, -1.0]


def test_label_encoder_of_strings_both_ways_and_written_back(tmp_path):
    import onnxruntime as ort

    m = _label_model(TensorProto.STRING, TensorProto.INT64, keys_strings=["a", "é", "a", ""],
                     values_int64s=[1, 2, 3, 4], default_int64=-9)
    path = _save(m, tmp_path)
    x = np.array(["a", "é", "", "b", "A", "a"], object)
    for backend in BACKENDS:
        (y,) = _run(path, {"X": x}, backend)
        assert y.dtype == np.int64 and y.tolist() == [3, 2, 4, -9, -9, 3]   # the last of repeated keys
    back = _label_model(TensorProto.INT64, TensorProto.STRING, keys_int64s=[7, 8], values_strings=["x", "yz"])
    xi = np.array([8, 7, 0, 8, 7, 1], np.int64)
    for backend in BACKENDS:
        (y,) = _run(_save(back, tmp_path, "back.onnx"), {"X": xi}, backend)
        assert y.tolist() == ["yz", "x", "_Unused", "yz", "x", "_Unused"]   # the documented default
    out = str(tmp_path / "out.onnx")
    nnefx.save(nnefx.load(path), out)
    peer = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    assert peer.tolist() == [3, 2, 4, -9, -9, 3]


def test_binarizer_compares_large_integers_exactly(tmp_path):
    node = h.make_node("Binarizer", ["X"], ["Y"], domain="ai.onnx.ml", threshold=2.0 ** 60)
    m = _model(node, [h.make_tensor_value_info("X", TensorProto.INT64, [3])],
               [h.make_tensor_value_info("Y", TensorProto.INT64, [3])], [("ai.onnx.ml", 1)])
    path = _save(m, tmp_path)
    x = np.array([2 ** 60, 2 ** 60 + 1, -(2 ** 62)], np.int64)  # 2^60 + 1 is not a float64
    for backend in BACKENDS:
        assert _run(path, {"X": x}, backend)[0].tolist() == [0, 1, 0]
