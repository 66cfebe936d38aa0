"""Legacy IR layers that map onto ``ir_*`` extension operations, end to end from IR files.

References are numpy/torch code written here, or (marked ``peer``) OpenVINO's own
implementation of the same layer built from the same attributes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnefx.diagnostics import NNEFXError
from test_ir_legacy import one, rand, t, unary_net
from test_ir_legacy_util import LegacyNet

RNG = np.random.default_rng(3)


def ov_ops():
    ov = pytest.importorskip("openvino")
    o1 = pytest.importorskip("openvino.opset1")
    o2 = pytest.importorskip("openvino.opset2")
    return ov, o1, o2


def o1_any(name):
    """An OpenVINO op builder from the lowest opset that has it."""
    import importlib

    for v in range(1, 16):
        mod = importlib.import_module(f"openvino.opset{v}")
        if hasattr(mod, name):
            return getattr(mod, name)
    pytest.skip(f"OpenVINO has no {name}")


def ov_eval(ov, o1, params, build):
    nodes = [o1.parameter(list(a.shape), a.dtype) for a in params]
    out = build(*nodes)
    compiled = ov.compile_model(ov.Model([out], nodes), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(list(params))[compiled.outputs[0]]


@pytest.mark.parametrize("axis", [None, 1])
def test_argmax(tmp_path, axis):
    x = rand(2, 3, 4)
    data = {"top_k": "2", "out_max_val": "1"}
    if axis is not None:
        data["axis"] = str(axis)
        order = np.argsort(-x, axis=1, kind="stable")[:, :2]
        ref, shape = np.take_along_axis(x, order, 1), [2, 2, 4]
    else:
        flat = x.reshape(2, -1)
        order = np.argsort(-flat, axis=1, kind="stable")[:, :2]
        ref, shape = np.stack([order, np.take_along_axis(flat, order, 1)], 1), [2, 2, 2]
    one(unary_net("ArgMax", x.shape, data, shape), tmp_path, {"data": x}, ref)


def test_ctc_greedy_decoder_both_spellings(tmp_path):
    T, N, C = 5, 2, 3
    path = np.array([[0, 2], [0, 1], [2, 1], [0, 2], [1, 0]])
    data = np.zeros((T, N, C), "f4")
    for tt in range(T):
        for n in range(N):
            data[tt, n, path[tt, n]] = 1
    seq = np.ones((T, N), "f4")
    seq[4, 1] = 0
    ref = np.full((N, T, 1, 1), -1.0, "f4")
    ref[0, :3, 0, 0] = [0, 0, 1]             # 0 0 _ 0 1 -> merged repeats, blanks dropped
    ref[1, :1, 0, 0] = [1]                    # _ 1 1 _ | (step 4 not in the sequence)
    for name in ("CTCGreedyDecoder", "CTCGreadyDecoder"):
        net = LegacyNet("ctc")
        d, s = net.input("data", data.shape), net.input("seq", seq.shape)
        net.add(name, [d, s], [[N, T, 1, 1]], {"ctc_merge_repeated": "1"}, name="out")
        one(net, tmp_path, {"data": data, "seq": seq}, ref)


def test_reverse_sequence(tmp_path):
    x = rand(3, 10, 4)
    lengths = np.array([3, 10, 1], "f4")
    net = LegacyNet("rs")
    a, b = net.input("data", x.shape), net.input("len", lengths.shape)
    net.add("ReverseSequence", [a, b], [list(x.shape)], {"batch_axis": "0", "seq_axis": "1"}, name="out")
    ref = x.copy()
    for i, n in enumerate(lengths.astype(int)):
        ref[i, :n] = x[i, :n][::-1]
    one(net, tmp_path, {"data": x, "len": lengths}, ref)


def test_quantize(tmp_path):
    x = rand(2, 3, 4, lo=-2, hi=2)
    lo, hi = np.array([[-1.0], [-0.5], [0.0]], "f4"), np.array([[1.0], [0.5], [1.5]], "f4")
    net = LegacyNet("q")
    i = net.input("data", x.shape)
    c = [net.const(n, v) for n, v in (("il", lo), ("ih", hi), ("ol", np.array([0.0], "f4")),
                                      ("oh", np.array([255.0], "f4")))]
    net.add("Quantize", [i, *c], [list(x.shape)], {"levels": "256"}, name="out")
    q = np.floor((np.clip(x, lo, hi) - lo) / (hi - lo) * 255 + 0.5) / 255 * 255
    ref = np.where(x <= lo, 0.0, np.where(x > hi, 255.0, q))
    one(net, tmp_path, {"data": x}, ref, 1e-3)


def test_quantize_levels_range(tmp_path):
    net = LegacyNet("q")
    i = net.input("data", [2])
    c = [net.const(n, np.array([v], "f4")) for n, v in (("a", 0.0), ("b", 1.0), ("c", 0.0), ("d", 1.0))]
    net.add("Quantize", [i, *c], [[2]], {"levels": "1"}, name="out")
    with pytest.raises(NNEFXError, match=r"\(Quantize\).*attribute 'levels' = 1"):
        net.run(tmp_path, {})


def test_region_yolo_softmax(tmp_path):
    x = rand(1, 2 * (4 + 1 + 3), 2, 3, lo=-3, hi=3)
    data = {"axis": "1", "classes": "3", "coords": "4", "do_softmax": "1", "end_axis": "3", "num": "2"}
    y = x.reshape(1, 2, 8, 2, 3).copy()
    y[:, :, [0, 1, 4]] = 1 / (1 + np.exp(-y[:, :, [0, 1, 4]]))
    e = np.exp(y[:, :, 5:] - y[:, :, 5:].max(axis=2, keepdims=True))
    y[:, :, 5:] = e / e.sum(axis=2, keepdims=True)
    one(unary_net("RegionYolo", x.shape, data, [1, 16 * 6]), tmp_path, {"data": x}, y.reshape(1, -1))


@pytest.mark.parametrize("align", [0, 1])
def test_interp(tmp_path, align):
    x = rand(1, 2, 5, 7)
    data = {"align_corners": str(align), "factor": "2.0", "pad_beg": "0", "pad_end": "0"}
    if align:
        ref = F.interpolate(t(x), size=(10, 14), mode="bilinear", align_corners=True).numpy()
    else:
        # Caffe Interp without aligned corners: source = out * in / out_size, upper neighbour clamped
        def axis_w(n_in, n_out):
            m = np.zeros((n_out, n_in))
            for o in range(n_out):
                f = o * n_in / n_out
                lo = int(np.floor(f))
                hi = min(lo + 1, n_in - 1)
                m[o, lo] += 1 - (f - lo)
                m[o, hi] += f - lo
            return m
        ref = np.einsum("oh,nchw,pw->ncop", axis_w(5, 10), x, axis_w(7, 14))
    one(unary_net("Interp", x.shape, data, [1, 2, 10, 14]), tmp_path, {"data": x}, ref, 1e-5)


@pytest.mark.parametrize("kind,factor", [("NEAREST", 2), ("NEAREST", 1.5), ("LINEAR", 2)])
def test_resample_type1(tmp_path, kind, factor):
    x = rand(1, 2, 4, 6)
    out = [1, 2, int(4 * factor), int(6 * factor)]
    data = {"antialias": "0", "factor": str(factor), "type": f"caffe.ResampleParameter.{kind}"}
    if kind == "NEAREST":
        ref = F.interpolate(t(x), size=out[2:], mode="nearest").numpy()
    else:
        ref = F.interpolate(t(x), size=out[2:], mode="bilinear", align_corners=False).numpy()
    one(unary_net("Resample", x.shape, data, out), tmp_path, {"data": x}, ref, 1e-5)


def test_resample_type2(tmp_path):
    x = rand(1, 3, 5, 6)
    net = LegacyNet("rs2")
    i = net.input("data", x.shape)
    d = net.const("dims", np.array([1, 3, 10, 9], "f4"))
    net.add("Resample", [i, d], [[1, 3, 10, 9]], {"antialias": "0", "factor": "1",
                                                   "type": "caffe.ResampleParameter.NEAREST"}, name="out")
    one(net, tmp_path, {"data": x}, F.interpolate(t(x), size=(10, 9), mode="nearest").numpy())


@pytest.mark.peer
def test_reorg_yolo(tmp_path):
    ov, o1, o2 = ov_ops()
    x = rand(1, 8, 4, 6)
    ref = ov_eval(ov, o1, [x], lambda p: o2.reorg_yolo(p, [2]))
    one(unary_net("ReorgYolo", x.shape, {"stride": "2"}, [1, 32, 2, 3]), tmp_path, {"data": x}, ref)


@pytest.mark.peer
def test_roi_pooling(tmp_path):
    ov, o1, o2 = ov_ops()
    x = rand(1, 3, 8, 8)
    rois = np.array([[0, 0, 0, 14, 12], [0, 4, 2, 10, 15]], "f4")
    ref = ov_eval(ov, o1, [x, rois], lambda a, b: o2.roi_pooling(a, b, [2, 3], 0.5, "max"))
    net = LegacyNet("roi")
    a, b = net.input("data", x.shape), net.input("rois", rois.shape)
    net.add("ROIPooling", [a, b], [[2, 3, 2, 3]], {"pooled_h": "2", "pooled_w": "3", "spatial_scale": "0.5"},
            name="out")
    one(net, tmp_path, {"data": x, "rois": rois}, ref)


@pytest.mark.peer
def test_psroi_pooling(tmp_path):
    ov, o1, _ = ov_ops()
    x = rand(1, 2 * 9, 7, 7)
    rois = np.array([[0, 0, 0, 5, 6], [0, 2, 1, 6, 6]], "f4")
    ref = ov_eval(ov, o1, [x, rois], lambda a, b: o1.psroi_pooling(a, b, 2, 3, 1.0, 1, 1, "average"))
    net = LegacyNet("psroi")
    a, b = net.input("data", x.shape), net.input("rois", rois.shape)
    net.add("PSROIPooling", [a, b], [[2, 2, 3, 3]], {"group_size": "3", "output_dim": "2", "spatial_scale": "1"},
            name="out")
    one(net, tmp_path, {"data": x, "rois": rois}, ref)


@pytest.mark.peer
def test_ssd_head_prior_box_and_detection_output(tmp_path):
    """A small SSD tail: PriorBox on a feature map + DetectionOutput, as the catalog writes them."""
    ov, o1, _ = ov_ops()
    H, W, C = 2, 3, 3
    feat, img = rand(1, 4, H, W), rand(1, 3, 24, 36)
    pb_attrs = dict(min_size=[8.0], max_size=[16.0], aspect_ratio=[2.0], flip=True, clip=False, step=0.0,
                    offset=0.5, variance=[0.1, 0.1, 0.2, 0.2], scale_all_sizes=True)
    P = H * W * 4
    loc = RNG.normal(0, 0.3, (1, P * 4)).astype("f4")
    conf = RNG.uniform(0, 1, (1, P * C)).astype("f4")
    node = o1.prior_box(o1.constant(np.array([H, W], "int64")), o1.constant(np.array([24, 36], "int64")), pb_attrs)
    cm = ov.compile_model(ov.Model([node], []), "CPU")
    priors = cm([])[cm.outputs[0]].reshape(1, 2, -1)
    do_attrs = {"num_classes": C, "background_label_id": 0, "top_k": 10, "keep_top_k": [5],
                "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "share_location": True, "nms_threshold": 0.45,
                "confidence_threshold": 0.2, "variance_encoded_in_target": False, "normalized": True}
    ref = ov_eval(ov, o1, [loc, conf, priors.astype("f4")], lambda a, b, c: o1.detection_output(a, b, c, do_attrs))
    net = LegacyNet("ssd")
    f, im = net.input("feat", feat.shape), net.input("img", img.shape)
    l_, c_ = net.input("loc", loc.shape), net.input("conf", conf.shape)
    (pb,) = net.add("PriorBox", [f, im], [[1, 2, P * 4]],
                    {"min_size": "8.000000", "max_size": "16.000000", "aspect_ratio": "2.000000", "flip": "1",
                     "clip": "0", "step": "0", "offset": "0.500000", "variance": "0.100000,0.100000,0.200000,0.200000"},
                    name="priors")
    net.add("DetectionOutput", [l_, c_, pb], [[1, 1, 5, 7]],
            {"num_classes": str(C), "share_location": "1", "background_label_id": "0", "nms_threshold": "0.450000",
             "top_k": "10", "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "variance_encoded_in_target": "0",
             "keep_top_k": "5", "confidence_threshold": "0.2"}, name="detections")
    out = one(net, tmp_path, {"feat": feat, "img": img, "loc": loc, "conf": conf}, {"detections": ref}, 1e-5)
    assert out["detections"].shape == (1, 1, 5, 7)


@pytest.mark.peer
def test_proposal(tmp_path):
    ov, o1, _ = ov_ops()
    A = 6
    cls = RNG.uniform(0, 1, (1, 2 * A, 3, 4)).astype("f4")
    bbox = RNG.normal(0, 0.2, (1, 4 * A, 3, 4)).astype("f4")
    info = np.array([[48, 64, 1.0]], "f4")
    attrs = {"base_size": np.uint32(16), "pre_nms_topn": np.uint32(40), "post_nms_topn": np.uint32(8),
             "nms_thresh": 0.6, "feat_stride": np.uint32(16), "min_size": np.uint32(4), "ratio": [2.67],
             "scale": [4.0, 6.0, 9.0, 16.0, 24.0, 32.0], "framework": ""}
    ref = ov_eval(ov, o1, [cls, bbox, info.reshape(-1)], lambda a, b, c: o1.proposal(a, b, c, attrs))
    net = LegacyNet("rpn")
    a, b, c = net.input("cls", cls.shape), net.input("bbox", bbox.shape), net.input("info", info.shape)
    net.add("Proposal", [a, b, c], [[8, 5]], {"base_size": "16", "feat_stride": "16", "min_size": "4",
                                              "nms_thresh": "0.6", "post_nms_topn": "8", "pre_nms_topn": "40",
                                              "ratio": "2.67", "scale": "4.0,6.0,9.0,16.0,24.0,32.0"}, name="out")
    out = net.run(tmp_path, {"cls": cls, "bbox": bbox, "info": info})[1]["out"]
    rows = int((np.abs(ref).sum(axis=1) > 0).sum())
    np.testing.assert_allclose(out[:rows], ref[:rows], rtol=1e-4, atol=1e-3)


def test_simpler_nms_runs_and_filters(tmp_path):
    cls = rand(1, 6, 3, 3, lo=0, hi=1)
    bbox = rand(1, 12, 3, 3, lo=-0.1, hi=0.1)
    info = np.array([[64, 64, 1.0]], "f4")
    net = LegacyNet("snms")
    a, b, c = net.input("cls", cls.shape), net.input("bbox", bbox.shape), net.input("info", info.shape)
    net.add("SimplerNMS", [a, b, c], [[5, 5]], {"iou_threshold": "0.7", "min_bbox_size": "1", "feat_stride": "16",
                                               "pre_nms_topn": "20", "post_nms_topn": "5", "scale": "2.0"},
            name="out")
    out = net.run(tmp_path, {"cls": cls, "bbox": bbox, "info": info})[1]["out"]
    assert out.shape == (5, 5)
    kept = out[out[:, 0] == 0][: int(np.argmax(out[:, 0] == -1)) if (out[:, 0] == -1).any() else 5]
    assert len(kept) >= 1 and np.all(kept[:, 3] >= kept[:, 1]) and np.all(kept[:, 4] >= kept[:, 2])


def test_detection_output_attribute_errors(tmp_path):
    net = LegacyNet("do")
    a, b, c = net.input("l", [1, 8]), net.input("c", [1, 4]), net.input("p", [1, 2, 8])
    net.add("DetectionOutput", [a, b, c], [[1, 1, 2, 7]], {"num_classes": "2", "nms_threshold": "1.5"}, name="out")
    with pytest.raises(NNEFXError, match=r"layer 3 'out' \(DetectionOutput\).*'nms_threshold' = 1.5"):
        net.run(tmp_path, {})


def test_tile_argmax_catalog_examples_parse(tmp_path):
    x = rand(1, 2, 3, 1)
    one(unary_net("Tile", x.shape, {"axis": "3", "tiles": "88"}, [1, 2, 3, 88]), tmp_path, {"data": x},
        np.tile(x, (1, 1, 1, 88)))
    assert torch is not None


@pytest.mark.peer
def test_normalizations_and_interp_match_openvino(tmp_path):
    """MVN (eps placement), GRN, Norm within a channel and Interp without aligned corners as
    OpenVINO's descendants of these layers compute them."""
    ov, o1, o2 = ov_ops()
    x = rand(1, 3, 4, 5)
    cases = [
        ("MVN", {"across_channels": "1", "normalize_variance": "1", "eps": "0.5"}, [1, 3, 4, 5],
         lambda a: o2.mvn(a, True, True, 0.5)),
        ("GRN", {"bias": "1.0"}, [1, 3, 4, 5], lambda a: o1.grn(a, 1.0)),
        ("Norm", {"alpha": "0.3", "beta": "0.75", "local-size": "3", "region": "same"}, [1, 3, 4, 5],
         lambda a: o1.lrn(a, o1.constant(np.array([2, 3], "int64")), 0.3, 0.75, 1.0, 3)),
        ("Interp", {"align_corners": "0", "height": "7", "width": "9"}, [1, 3, 7, 9],
         lambda a: o1.interpolate(a, o1.constant(np.array([7, 9], "int64")),
                                  {"axes": [2, 3], "mode": "linear", "align_corners": False, "antialias": False,
                                   "pads_begin": [0], "pads_end": [0]})),
    ]
    for ltype, data, out_shape, build in cases:
        ref = ov_eval(ov, o1, [x], build)
        one(unary_net(ltype, x.shape, data, out_shape), tmp_path, {"data": x}, ref, 1e-5)


@pytest.mark.peer
def test_shape_and_window_layers_match_openvino(tmp_path):
    ov, o1, _ = ov_ops()
    x = rand(1, 8, 5, 7)
    cases = [
        ("DepthToSpace", {"block_size": "2", "mode": "depth_first"}, [1, 2, 10, 14],
         lambda a: o1.depth_to_space(a, "depth_first", 2)),
        ("DepthToSpace", {"block_size": "2"}, [1, 2, 10, 14], lambda a: o1.depth_to_space(a, "blocks_first", 2)),
        ("ShuffleChannels", {"group": "4", "axis": "1"}, [1, 8, 5, 7], lambda a: o1_any("shuffle_channels")(a, 1, 4)),
        ("Pooling", {"kernel": "3,3", "strides": "2,2", "pads_begin": "1,0", "pads_end": "0,1", "pool-method": "max",
                     "rounding_type": "ceil"}, [1, 8, 3, 4],
         lambda a: o1.max_pool(a, [2, 2], [1, 0], [0, 1], [3, 3], "ceil")),
        ("Pooling", {"kernel": "3,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1", "pool-method": "avg",
                     "exclude-pad": "false", "rounding_type": "ceil"}, [1, 8, 3, 4],
         lambda a: o1.avg_pool(a, [2, 2], [1, 1], [1, 1], [3, 3], False, "ceil")),
        ("Pooling", {"kernel": "2,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1", "pool-method": "avg",
                     "exclude-pad": "true", "rounding_type": "ceil"}, [1, 8, 4, 4],
         lambda a: o1.avg_pool(a, [2, 2], [1, 1], [1, 1], [2, 3], True, "ceil")),
        # ceil rounding without Caffe's clip: the last row of windows holds no input element
        ("Pooling", {"kernel": "2,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1", "pool-method": "max",
                     "rounding_type": "ceil"}, [1, 8, 4, 4],
         lambda a: o1.max_pool(a, [2, 2], [1, 1], [1, 1], [2, 3], "ceil")),
        ("Pooling", {"kernel": "2,3", "strides": "2,2", "pads_begin": "1,1", "pads_end": "1,1", "pool-method": "avg",
                     "exclude-pad": "false", "rounding_type": "ceil"}, [1, 8, 4, 4],
         lambda a: o1.avg_pool(a, [2, 2], [1, 1], [1, 1], [2, 3], False, "ceil")),
    ]
    for ltype, data, out_shape, build in cases:
        ref = ov_eval(ov, o1, [x], build)
        assert list(ref.shape) == out_shape, (ltype, data)
        one(unary_net(ltype, x.shape, data, out_shape), tmp_path, {"data": x}, ref, 1e-5)


@pytest.mark.peer
def test_batch_norm_and_normalize_match_openvino(tmp_path):
    ov, o1, _ = ov_ops()
    x = rand(2, 3, 4, 5)
    mean, var = rand(3), rand(3, lo=0.2, hi=2.0)
    ref = ov_eval(ov, o1, [x], lambda a: o1.batch_norm_inference(a, o1.constant(np.ones(3, "f4")),
                                                                  o1.constant(np.zeros(3, "f4")), o1.constant(mean),
                                                                  o1.constant(var), 1e-3))
    net = unary_net("BatchNormalization", x.shape, {"epsilon": "1e-3"}, blobs={"weights": var, "biases": mean})
    one(net, tmp_path, {"data": x}, ref, 1e-5)
    scale = rand(3, lo=0.5, hi=2.0)
    ref = ov_eval(ov, o1, [x], lambda a: o1.multiply(
        o1.normalize_l2(a, o1.constant(np.array([1], "int64")), 1e-4, "add"), o1.constant(scale.reshape(3, 1, 1))))
    net = unary_net("Normalize", x.shape, {"across_spatial": "0", "channel_shared": "0", "eps": "1e-4"},
                    blobs={"weights": scale})
    one(net, tmp_path, {"data": x}, ref, 1e-5)


def test_faster_rcnn_tail_proposal_into_roi_pooling(tmp_path):
    """Proposal writes fewer boxes than post_nms_topn, ending with batch -1; ROIPooling pools the
    real ones and gives zeros from the marker on."""
    A = 3
    cls = rand(1, 2 * A, 2, 2, lo=0, hi=1)
    bbox = rand(1, 4 * A, 2, 2, lo=-0.05, hi=0.05)
    info = np.array([[32, 32, 1.0]], "f4")
    feat = rand(1, 4, 2, 2)
    net = LegacyNet("frcnn")
    a, b, c, f = (net.input("cls", cls.shape), net.input("bbox", bbox.shape), net.input("info", info.shape),
                  net.input("feat", feat.shape))
    (p,) = net.add("Proposal", [a, b, c], [[20, 5]], {"base_size": "16", "feat_stride": "16", "min_size": "1",
                                                      "nms_thresh": "0.5", "post_nms_topn": "20",
                                                      "pre_nms_topn": "12", "ratio": "1", "scale": "0.5,1,2"},
                   name="rois")
    net.add("ROIPooling", [f, p], [[20, 4, 2, 2]], {"pooled_h": "2", "pooled_w": "2", "spatial_scale": "0.0625"},
            name="pooled")
    net.add("Power", [p], [[20, 5]], {"scale": "1"}, name="rois_out")
    out = net.run(tmp_path, {"cls": cls, "bbox": bbox, "info": info, "feat": feat})[1]
    rois, pooled = out["rois_out"], out["pooled"]
    n = int(np.argmax(rois[:, 0] == -1))
    assert 0 < n < 20 and np.all(rois[:n, 0] == 0)
    assert pooled[:n].any() and not pooled[n:].any()
