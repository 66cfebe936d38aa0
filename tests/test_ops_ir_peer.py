"""IR extension operations against the OpenVINO runtime's own operations (a peer, test-only).

OpenVINO still implements the legacy catalog's layers as opset operations (ReorgYolo,
RegionYolo, PriorBox, ...), so running the same inputs through both checks that the
``ir_*`` kernels reproduce the layer semantics, not just that formal and fast agree."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.ops import registry

ov = pytest.importorskip("openvino")
o1 = pytest.importorskip("openvino.opset1")
o2 = pytest.importorskip("openvino.opset2")

pytestmark = pytest.mark.peer
RNG = np.random.default_rng(7)


def ov_run(params, build):
    """Compile a one-op model: ``params`` {name: array} become Parameters; returns outputs."""
    nodes = [o1.parameter(list(a.shape), a.dtype, name=n) for n, a in params.items()]
    out = build(*nodes)
    model = ov.Model(out if isinstance(out, list) else [out], nodes)
    compiled = ov.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled(list(params.values()))
    return [res[k] for k in compiled.outputs]


def ours(name, *args, **kw):
    op = registry.get(name)
    fast = op.kernel("fast")(*args, **kw)
    formal = op.kernel("formal")(*args, **kw)
    np.testing.assert_allclose(fast, formal, rtol=1e-5, atol=1e-6)
    return fast


def test_reorg_yolo_peer():
    x = RNG.normal(size=(2, 8, 4, 6)).astype("f4")
    (ref,) = ov_run({"x": x}, lambda p: o2.reorg_yolo(p, [2]))
    np.testing.assert_array_equal(ours("ir_reorg_yolo", x, stride=2), ref)


@pytest.mark.parametrize("soft", [True, False])
def test_region_yolo_peer(soft):
    if soft:
        x = RNG.normal(size=(1, 2 * (4 + 1 + 3), 3, 3)).astype("f4")
        kw = dict(coords=4, classes=3, num=2, do_softmax=True, mask=[], axis=1, end_axis=3)
    else:
        x = RNG.normal(size=(1, 2 * (4 + 1 + 3), 3, 3)).astype("f4")
        kw = dict(coords=4, classes=3, num=3, do_softmax=False, mask=[0, 2], axis=1, end_axis=3)
    (ref,) = ov_run({"x": x}, lambda p: o1.region_yolo(p, kw["coords"], kw["classes"], kw["num"], kw["do_softmax"],
                                                      kw["mask"], kw["axis"], kw["end_axis"]))
    np.testing.assert_allclose(ours("ir_region_yolo", x, **kw), ref.reshape(-1).reshape(
        ours("ir_region_yolo", x, **kw).shape), rtol=1e-5, atol=1e-6)


def test_prior_box_peer():
    feat, img = np.zeros((1, 3, 3, 4), "f4"), np.zeros((1, 3, 30, 40), "f4")
    attrs = {"min_size": [4.0, 8.0], "max_size": [9.0, 16.0], "aspect_ratio": [2.0, 3.0], "flip": True,
             "clip": True, "step": 0.0, "offset": 0.5, "variance": [0.1, 0.1, 0.2, 0.2], "scale_all_sizes": True}

    def build():
        return o1.prior_box(o1.constant(np.array([3, 4], "int64")), o1.constant(np.array([30, 40], "int64")), attrs)

    nodes = build()
    compiled = ov.compile_model(ov.Model([nodes], []), "CPU")
    ref = compiled([])[compiled.outputs[0]]
    got = ours("ir_prior_box", feat, img, **attrs)
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


def test_prior_box_clustered_peer():
    feat, img = np.zeros((1, 3, 3, 4), "f4"), np.zeros((1, 3, 30, 40), "f4")
    attrs = {"width": [4.0, 10.0], "height": [6.0, 3.0], "clip": False, "offset": 0.5,
             "variance": [0.1, 0.1, 0.2, 0.2]}
    node = o1.prior_box_clustered(o1.constant(np.array([3, 4], "int64")), o1.constant(np.array([30, 40], "int64")),
                                  attrs)
    compiled = ov.compile_model(ov.Model([node], []), "CPU")
    ref = compiled([])[compiled.outputs[0]]
    got = ours("ir_prior_box_clustered", feat, img, width=[4.0, 10.0], height=[6.0, 3.0], clip=False,
               variance=[0.1, 0.1, 0.2, 0.2])
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("code", ["caffe.PriorBoxParameter.CENTER_SIZE", "caffe.PriorBoxParameter.CORNER"])
@pytest.mark.parametrize("share", [True, False])
def test_detection_output_peer(code, share):
    N, P, C = 2, 8, 3
    L = 1 if share else C
    xy = RNG.uniform(0, 0.6, (P, 2))
    priors = np.concatenate([xy, xy + RNG.uniform(0.1, 0.4, (P, 2))], axis=1).reshape(-1)
    prior = np.stack([priors, np.tile([0.1, 0.1, 0.2, 0.2], P)])[None].astype("f4")
    loc = RNG.normal(0, 0.5, (N, P * L * 4)).astype("f4")
    conf = RNG.uniform(0, 1, (N, P * C)).astype("f4")
    attrs = {"num_classes": C, "background_label_id": 0, "top_k": 5, "keep_top_k": [6], "code_type": code,
             "share_location": share, "nms_threshold": 0.45, "confidence_threshold": 0.3,
             "variance_encoded_in_target": False, "normalized": True, "clip_before_nms": False,
             "clip_after_nms": False, "decrease_label_id": False, "input_height": 1, "input_width": 1,
             "objectness_score": 0.0}
    (ref,) = ov_run({"loc": loc, "conf": conf, "prior": prior}, lambda a, b, c: o1.detection_output(a, b, c, attrs))
    got = ours("ir_detection_output", loc, conf, prior, num_classes=C, background_label_id=0, top_k=5, keep_top_k=6,
               code_type=code.rsplit(".", 1)[-1], share_location=share, nms_threshold=0.45,
               confidence_threshold=0.3)
    assert got.shape == ref.shape
    valid = int(np.argmax(ref[0, 0, :, 0] == -1)) if (ref[0, 0, :, 0] == -1).any() else ref.shape[2]
    np.testing.assert_allclose(got[0, 0, :valid], ref[0, 0, :valid], rtol=1e-5, atol=1e-5)
    if valid < ref.shape[2]:
        assert got[0, 0, valid, 0] == -1


def test_roi_pooling_peer():
    x = RNG.normal(size=(2, 3, 8, 9)).astype("f4")
    rois = np.array([[0, 1, 2, 10, 12], [1, 0, 0, 17, 15], [0, 5.4, 3.5, 9.6, 6.6]], "f4")
    (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o2.roi_pooling(a, b, [3, 2], 0.5, "max"))
    np.testing.assert_allclose(ours("ir_roi_pooling", x, rois, pooled_h=3, pooled_w=2, spatial_scale=0.5), ref,
                               rtol=1e-6)


def test_roi_pooling_bilinear_peer():
    x = RNG.normal(size=(1, 2, 6, 7)).astype("f4")
    rois = np.array([[0, 0.1, 0.2, 0.7, 0.9], [0, 0.0, 0.0, 1.0, 1.0]], "f4")
    (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o2.roi_pooling(a, b, [3, 4], 1.0, "bilinear"))
    got = ours("ir_roi_pooling", x, rois, pooled_h=3, pooled_w=4, spatial_scale=1.0, method="bilinear")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_psroi_pooling_average_peer():
    G, D = 2, 3
    x = RNG.normal(size=(1, D * G * G, 8, 8)).astype("f4")
    rois = np.array([[0, 1, 1, 6, 5], [0, 0, 2, 7, 7]], "f4")
    (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o1.psroi_pooling(a, b, D, G, 1.0, 1, 1, "average"))
    np.testing.assert_allclose(ours("ir_psroi_pooling", x, rois, output_dim=D, group_size=G), ref, rtol=1e-5,
                               atol=1e-6)


def test_psroi_pooling_bilinear_peer():
    D, bx, by, G = 2, 2, 3, 2
    x = RNG.normal(size=(1, D * bx * by, 6, 7)).astype("f4")
    rois = np.array([[0, 0.1, 0.1, 0.8, 0.7], [0, 0.2, 0.0, 0.9, 1.0]], "f4")
    (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o1.psroi_pooling(a, b, D, G, 1.0, bx, by, "bilinear"))
    got = ours("ir_psroi_pooling", x, rois, output_dim=D, group_size=G, mode="bilinear", spatial_bins_x=bx,
               spatial_bins_y=by)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_ctc_greedy_decoder_peer():
    T, N, C = 6, 2, 4
    data = RNG.normal(size=(T, N, C)).astype("f4")
    seq = np.ones((T, N), "f4")
    seq[4:, 1] = 0
    (ref,) = ov_run({"d": data, "s": seq}, lambda a, b: o1.ctc_greedy_decoder(a, b, True))
    np.testing.assert_array_equal(ours("ir_ctc_greedy_decoder", data, seq), ref)


def test_fake_quantize_peer():
    x = RNG.uniform(-3, 3, (2, 3, 4)).astype("f4")
    lo, hi = np.array([[-1.0], [-2.0], [0.0]], "f4"), np.array([[1.0], [0.5], [2.0]], "f4")
    olo, ohi = np.array(-1.0, "f4"), np.array(1.0, "f4")
    (ref,) = ov_run({"x": x, "a": lo, "b": hi, "c": olo, "d": ohi},
                    lambda *p: o1.fake_quantize(*p, 5))
    np.testing.assert_allclose(ours("ir_fake_quantize", x, lo, hi, olo, ohi, levels=5), ref, rtol=1e-5, atol=1e-6)


def test_reverse_sequence_peer():
    x = RNG.normal(size=(3, 5, 2)).astype("f4")
    lengths = np.array([1, 5, 3], "int32")
    (ref,) = ov_run({"x": x, "l": lengths}, lambda a, b: o1.reverse_sequence(a, b, 0, 1))
    np.testing.assert_array_equal(ours("ir_reverse_sequence", x, lengths.astype("f4"), seq_axis=1, batch_axis=0), ref)


def test_proposal_peer():
    A = 4
    cls = RNG.uniform(0, 1, (1, 2 * A, 4, 5)).astype("f4")
    bbox = RNG.normal(0, 0.2, (1, 4 * A, 4, 5)).astype("f4")
    info = np.array([60, 70, 1.0], "f4")
    attrs = {"base_size": np.uint32(8), "pre_nms_topn": np.uint32(30), "post_nms_topn": np.uint32(10),
             "nms_thresh": 0.6, "feat_stride": np.uint32(8), "min_size": np.uint32(2), "ratio": [0.5, 2.0], "scale": [1.0, 2.0], "clip_before_nms": True,
             "clip_after_nms": False, "normalize": False, "box_size_scale": 1.0, "box_coordinate_scale": 1.0,
             "framework": ""}
    (ref,) = ov_run({"c": cls, "b": bbox, "i": info}, lambda a, b, c: o1.proposal(a, b, c, attrs))
    got = ours("ir_proposal", cls, bbox, info, base_size=8, pre_nms_topn=30, post_nms_topn=10, nms_thresh=0.6,
               feat_stride=8, min_size=2, ratio=[0.5, 2.0], scale=[1.0, 2.0])
    rows = int((np.abs(ref).sum(axis=1) > 0).sum())
    np.testing.assert_allclose(got[:rows], ref[:rows], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("variant", ["encoded", "no_background", "clip_before", "no_limits",
                                     "clip_after"])
def test_detection_output_variants_peer(variant):
    N, P, C = 1, 10, 3
    xy = RNG.uniform(0, 0.7, (P, 2))
    priors = np.concatenate([xy, xy + RNG.uniform(0.1, 0.5, (P, 2))], axis=1).reshape(-1)
    prior = np.stack([priors, np.tile([0.1, 0.1, 0.2, 0.2], P)])[None].astype("f4")
    loc = RNG.normal(0, 0.6, (N, P * 4)).astype("f4")
    conf = RNG.uniform(0, 1, (N, P * C)).astype("f4")
    ours_kw = dict(num_classes=C, background_label_id=0, top_k=6, keep_top_k=4, code_type="CENTER_SIZE",
                   nms_threshold=0.4, confidence_threshold=0.2)
    if variant == "encoded":
        prior = prior[:, :1]
        ours_kw["variance_encoded_in_target"] = True
    if variant == "no_background":
        ours_kw["background_label_id"] = -1
    if variant == "clip_before":
        ours_kw["clip_before_nms"] = True
    if variant == "clip_after":
        ours_kw["clip_after_nms"] = True
    if variant == "no_limits":
        ours_kw.update(top_k=-1, keep_top_k=-1)
    attrs = {"num_classes": C, "background_label_id": ours_kw["background_label_id"], "top_k": ours_kw["top_k"],
             "keep_top_k": [ours_kw["keep_top_k"]], "code_type": "caffe.PriorBoxParameter." + ours_kw["code_type"],
             "share_location": True, "nms_threshold": 0.4, "confidence_threshold": 0.2,
             "variance_encoded_in_target": ours_kw.get("variance_encoded_in_target", False), "normalized": True,
             "clip_before_nms": ours_kw.get("clip_before_nms", False),
             "clip_after_nms": ours_kw.get("clip_after_nms", False)}
    (ref,) = ov_run({"loc": loc, "conf": conf, "prior": prior}, lambda a, b, c: o1.detection_output(a, b, c, attrs))
    got = ours("ir_detection_output", loc, conf, prior, **ours_kw)
    assert got.shape == ref.shape
    end = ref[0, 0, :, 0] == -1
    valid = int(np.argmax(end)) if end.any() else ref.shape[2]
    np.testing.assert_allclose(got[0, 0, :valid], ref[0, 0, :valid], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["normalize", "clip_after", "scales", "no_clip_before"])
def test_proposal_variants_peer(variant):
    A = 4
    cls = RNG.uniform(0, 1, (1, 2 * A, 3, 4)).astype("f4")
    bbox = RNG.normal(0, 0.4, (1, 4 * A, 3, 4)).astype("f4")
    info = np.array([30, 40, 1.0], "f4")
    kw = dict(clip_before_nms=True, clip_after_nms=False, normalize=False, box_size_scale=1.0,
              box_coordinate_scale=1.0)
    if variant == "normalize":
        kw["normalize"] = True
    if variant == "clip_after":
        kw.update(clip_before_nms=False, clip_after_nms=True)
    if variant == "scales":
        kw.update(box_size_scale=2.0, box_coordinate_scale=0.5)
    if variant == "no_clip_before":
        kw["clip_before_nms"] = False
    attrs = {"base_size": np.uint32(8), "pre_nms_topn": np.uint32(30), "post_nms_topn": np.uint32(12),
             "nms_thresh": 0.7, "feat_stride": np.uint32(8), "min_size": np.uint32(1), "ratio": [0.5, 2.0],
             "scale": [1.0, 2.0], "framework": "", **kw}
    (ref,) = ov_run({"c": cls, "b": bbox, "i": info}, lambda a, b, c: o1.proposal(a, b, c, attrs))
    got = ours("ir_proposal", cls, bbox, info, base_size=8, pre_nms_topn=30, post_nms_topn=12, nms_thresh=0.7,
               feat_stride=8, min_size=1, ratio=[0.5, 2.0], scale=[1.0, 2.0], **kw)
    end = ref[:, 0] == -1
    rows = int(np.argmax(end)) if end.any() else ref.shape[0]
    np.testing.assert_allclose(got[:rows], ref[:rows], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kw", [
    dict(min_size=[5.0], aspect_ratio=[], flip=False, clip=False, step=4.0, offset=0.25, variance=[0.1]),
    dict(min_size=[5.0, 9.0], max_size=[7.0, 20.0], aspect_ratio=[3.0, 0.5], flip=True, clip=True, step=0.0,
         offset=0.5, variance=[]),
    dict(min_size=[12.0], aspect_ratio=[2.0, 2.0, 1.0], flip=False, clip=False, step=8.0, offset=0.5,
         variance=[0.1, 0.2, 0.3, 0.4]),
])
def test_prior_box_variants_peer(kw):
    attrs = {"max_size": [], "scale_all_sizes": True, **kw}
    node = o1.prior_box(o1.constant(np.array([3, 5], "int64")), o1.constant(np.array([24, 40], "int64")), attrs)
    compiled = ov.compile_model(ov.Model([node], []), "CPU")
    ref = compiled([])[compiled.outputs[0]]
    got = ours("ir_prior_box", np.zeros((1, 1, 3, 5), "f4"), np.zeros((1, 1, 24, 40), "f4"), **attrs)
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


def test_prior_box_clustered_step_clip_peer():
    attrs = {"width": [30.0, 6.0], "height": [5.0, 40.0], "clip": True, "offset": 0.25, "step": 6.0,
             "variance": [0.2]}
    node = o1.prior_box_clustered(o1.constant(np.array([3, 4], "int64")), o1.constant(np.array([20, 25], "int64")),
                                  attrs)
    compiled = ov.compile_model(ov.Model([node], []), "CPU")
    ref = compiled([])[compiled.outputs[0]]
    got = ours("ir_prior_box_clustered", np.zeros((1, 1, 3, 4), "f4"), np.zeros((1, 1, 20, 25), "f4"), **attrs)
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


def test_ctc_greedy_decoder_no_merge_peer():
    T, N, C = 7, 3, 3
    data = RNG.integers(0, 3, (T, N, C)).astype("f4") + RNG.uniform(0, 0.1, (T, N, C)).astype("f4")
    seq = np.ones((T, N), "f4")
    seq[5:, 0] = 0
    (ref,) = ov_run({"d": data, "s": seq}, lambda a, b: o1.ctc_greedy_decoder(a, b, False))
    np.testing.assert_array_equal(ours("ir_ctc_greedy_decoder", data, seq, ctc_merge_repeated=False), ref)


@pytest.mark.parametrize("op", ["roi", "psroi"])
def test_roi_end_marker_peer(op):
    x = RNG.normal(size=(1, 4, 6, 6)).astype("f4")
    rois = np.array([[0, 0, 0, 4, 4], [-1, 0, 0, 0, 0], [0, 1, 1, 5, 5]], "f4")
    if op == "roi":
        (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o2.roi_pooling(a, b, [2, 2], 1.0, "max"))
        got = ours("ir_roi_pooling", x, rois, pooled_h=2, pooled_w=2)
    else:
        (ref,) = ov_run({"x": x, "r": rois}, lambda a, b: o1.psroi_pooling(a, b, 1, 2, 1.0, 1, 1, "average"))
        got = ours("ir_psroi_pooling", x, rois, output_dim=1, group_size=2)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert not got[1:].any()
