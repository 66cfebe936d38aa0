"""Upgrading legacy IR files: ``nnefx convert old.xml new.xml`` writes IR v11 that today's
OpenVINO (which refuses the legacy form) reads and runs with the outputs nnefx computes for the
old file; nnefx reads the new file back to the same outputs.

The legacy nets come from the legacy-layer tests' writer (``test_ir_legacy_util.LegacyNet``).
"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.cli import main
from nnefx.runtime.session import Session
from test_ir_legacy_util import LegacyNet
from test_ir_writer import close, run_openvino

pytest.importorskip("openvino")

RNG = np.random.default_rng(11)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def unary(ltype, shape, data=None, out_shape=None, blobs=None):
    net = LegacyNet(ltype.lower())
    x = net.input("data", shape)
    net.add(ltype, [x], [out_shape or list(shape)], data=data, blobs=blobs, name="out")
    return net


def upgrade(net: LegacyNet, feeds: dict, tmp_path, rtol=1e-4, roundtrip=True) -> dict:
    old = net.save(tmp_path, "old")
    want = Session(nnefx.load(old), "fast").run(feeds)
    new = str(tmp_path / "new.xml")
    assert main(["convert", old, new]) == 0
    text = open(new).read()
    assert '<net name=' in text and 'version="11"' in text
    got = run_openvino(new, feeds)
    assert set(got) == set(want), (sorted(got), sorted(want))
    bad = []
    for k in want:
        try:
            close(got[k], want[k], rtol)
        except AssertionError as exc:
            bad.append(f"{k}: {exc}")
    assert not bad, bad
    if roundtrip:
        back = Session(nnefx.load(new), "fast").run(feeds)
        for k in want:
            close(back[k], want[k], rtol)
    return got


# --- nets -----------------------------------------------------------------------------------

def _out(X, k, s, d, pb, pe, auto):
    fd = (k - 1) * d + 1
    if auto.startswith("same"):
        return -(-X // s)
    if auto == "valid":
        return (X - fd) // s + 1
    return (X + pb + pe - fd) // s + 1


@pytest.mark.parametrize("auto_pad", ["", "same_upper", "same_lower", "valid"])
@pytest.mark.parametrize("group", [1, 2])
def test_convolution(tmp_path, auto_pad, group):
    x = rand(1, 4, 9, 8)
    w, b = rand(6, 4 // group, 3, 2), rand(6)
    data = {"kernel": "3,2", "strides": "2,2", "dilations": "1,2", "group": str(group), "output": "6",
            "pads_begin": "2,0", "pads_end": "1,1"}
    if auto_pad:
        data["auto_pad"] = auto_pad
    shape = [1, 6, _out(9, 3, 2, 1, 2, 1, auto_pad), _out(8, 2, 2, 2, 0, 1, auto_pad)]
    upgrade(unary("Convolution", x.shape, data, shape, blobs={"weights": w, "biases": b}), {"data": x}, tmp_path)


@pytest.mark.parametrize("group,stride,pad", [(1, 2, 0), (2, 2, 1)])
def test_deconvolution(tmp_path, group, stride, pad):
    x = rand(1, 4, 3, 4)
    w, b = rand(4, 6 // group, 3, 3), rand(6)
    data = {"kernel": "3,3", "strides": f"{stride},{stride}", "output": "6", "group": str(group),
            "pads_begin": f"{pad},{pad}", "pads_end": f"{pad},{pad}"}
    shape = [1, 6, (3 - 1) * stride + 3 - 2 * pad, (4 - 1) * stride + 3 - 2 * pad]
    upgrade(unary("Deconvolution", x.shape, data, shape, blobs={"weights": w, "biases": b}), {"data": x}, tmp_path)


@pytest.mark.parametrize("method", ["max", "avg"])
@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("rounding", ["floor", "ceil"])
def test_pooling(tmp_path, method, exclude, rounding):
    x = rand(1, 2, 7, 8, lo=-2, hi=-0.5)          # all negative: zero padding would show in max
    data = {"kernel": "3,2", "strides": "2,3", "pads_begin": "1,0", "pads_end": "1,1", "pool-method": method,
            "exclude-pad": str(exclude).lower(), "rounding_type": rounding}
    h, w = 4, 3      # ceil rounding: the last column window would start in the padding, so none is added
    upgrade(unary("Pooling", x.shape, data, [1, 2, h, w]), {"data": x}, tmp_path)


def test_classifier_head(tmp_path):
    """FullyConnected + BatchNormalization + ScaleShift + PReLU + SoftMax."""
    x = rand(2, 3, 4, 4)
    net = LegacyNet("head")
    i = net.input("data", x.shape)
    (bn,) = net.add("BatchNormalization", [i], [[2, 3, 4, 4]], {"epsilon": "1e-5"},
                    blobs={"weights": rand(3, lo=0.1, hi=2), "biases": rand(3)})
    (ss,) = net.add("ScaleShift", [bn], [[2, 3, 4, 4]], blobs={"weights": rand(3), "biases": rand(3)})
    (pr,) = net.add("PReLU", [ss], [[2, 3, 4, 4]], {"channel_shared": "0"}, blobs={"weights": rand(3)})
    (fc,) = net.add("FullyConnected", [pr], [[2, 5]], {"out-size": "5"}, blobs={"weights": rand(5, 48),
                                                                                 "biases": rand(5)})
    net.add("SoftMax", [fc], [[2, 5]], {"axis": "1"}, name="prob")
    upgrade(net, {"data": x}, tmp_path)


@pytest.mark.parametrize("kind", ["sigmoid", "tanh", "elu", "relu6", "exp", "relu"])
def test_activation(tmp_path, kind):
    x = rand(2, 3, 4, lo=-4, hi=4)
    data = {"type": kind}
    if kind == "elu":
        data["alpha"] = "0.5"
    if kind == "relu":
        data["negative_slope"] = "0.1"
    upgrade(unary("Activation", x.shape, data), {"data": x}, tmp_path)


def test_eltwise_and_simple_layers(tmp_path):
    a, b = rand(2, 3, 4) + 2.0, rand(3, 1) + 2.0
    net = LegacyNet("elt")
    x, y = net.input("a", a.shape), net.input("b", b.shape)
    for op in ("sum", "sub", "mul", "div", "max", "min", "squared_diff", "pow", "less", "greater_equal",
               "logical_and"):
        net.add("Eltwise", [x, y], [[2, 3, 4]], {"operation": op}, name=op)
    net.add("Clamp", [x], [[2, 3, 4]], {"min": "1.5", "max": "2.5"}, name="clamp")
    net.add("Power", [x], [[2, 3, 4]], {"power": "2", "scale": "0.1", "shift": "5"}, name="power")
    net.add("ReLU", [x], [[2, 3, 4]], {"negative_slope": "0.2"}, name="relu")
    upgrade(net, {"a": a, "b": b}, tmp_path)


def test_shape_layers(tmp_path):
    a, b = rand(2, 3, 4), rand(2, 5, 4)
    net = LegacyNet("shapes")
    x, y = net.input("a", a.shape), net.input("b", b.shape)
    (c,) = net.add("Concat", [x, y], [[2, 8, 4]], {"axis": "1"})
    (p,) = net.add("Permute", [c], [[4, 2, 8]], {"order": "2,0,1"})
    (f,) = net.add("Flatten", [p], [[4, 16]], {"axis": "1", "end_axis": "-1"})
    shape = net.const("shape", np.array([0, -1, 2], "f4"))
    (r,) = net.add("Reshape", [f, shape], [[4, 8, 2]])
    net.add("Tile", [r], [[4, 8, 6]], {"axis": "2", "tiles": "3"}, name="tiled")
    net.add("Slice", [c], [[2, 3, 4], [2, 4, 4], [2, 1, 4]], {"axis": "1", "slice_point": "3,7"}, name="s")
    net.add("Split", [y], [[2, 5, 2], [2, 5, 2]], {"axis": "2"}, name="halves")
    net.add("Crop", [c], [[2, 4, 3]], {"axis": "1,2", "offset": "2,1", "dim": "4,3"}, name="crop")
    net.add("Pad", [x], [[2, 5, 8]], {"pads_begin": "0,1,2", "pads_end": "0,1,2", "pad_mode": "reflect"},
            name="pad")
    net.add("ShuffleChannels", [y], [[2, 5, 4]], {"group": "1", "axis": "1"}, name="shuf")
    upgrade(net, {"a": a, "b": b}, tmp_path)


def test_gather_and_strided_slice(tmp_path):
    data = rand(4, 5, 6)
    idx = np.array([[3, 0], [2, 1]], "f4")
    net = LegacyNet("gs")
    d = net.input("data", data.shape)
    k = net.const("indices", idx)
    net.add("Gather", [k, d], [[4, 2, 2, 6]], {"axis": "1"}, name="gathered")
    b_, e_, s_ = (net.const("b", np.array([0, 1, 5], "f4")), net.const("e", np.array([0, 4, 0], "f4")),
                  net.const("s", np.array([1, 2, -2], "f4")))
    net.add("StridedSlice", [d, b_, e_, s_], [[4, 2, 3]], {"begin_mask": "0,1,1", "end_mask": "0,1,0"},
            name="sliced")
    upgrade(net, {"data": data}, tmp_path)


@pytest.mark.parametrize("across,normalize", [(0, 1), (1, 0)])
def test_mvn_norm_normalize_grn(tmp_path, across, normalize):
    x = rand(1, 5, 4, 3)
    net = LegacyNet("norms")
    i = net.input("data", x.shape)
    net.add("MVN", [i], [list(x.shape)], {"across_channels": str(across), "normalize_variance": str(normalize),
                                           "eps": "0.25"}, name="mvn")
    net.add("Normalize", [i], [list(x.shape)], {"across_spatial": str(across), "channel_shared": "0", "eps": "1e-6"},
            blobs={"weights": rand(5)}, name="normalize")
    net.add("GRN", [i], [list(x.shape)], {"bias": "1.0"}, name="grn")
    upgrade(net, {"data": x}, tmp_path)


def test_norm_lrn(tmp_path):
    x = rand(1, 7, 3, 3)
    net = unary("Norm", x.shape, {"alpha": "1e-2", "beta": "0.75", "local-size": "5", "region": "across"})
    upgrade(net, {"data": x}, tmp_path)   # nnefx's opset reader has no LRN mapping yet


def sig(v):
    return 1 / (1 + np.exp(-v))


def test_recurrent_cells(tmp_path):
    N, I, H = 2, 3, 4
    x, h, c = rand(N, I), rand(N, H), rand(N, H)
    net = LegacyNet("cells")
    xi, hi, ci = net.input("x", x.shape), net.input("h", h.shape), net.input("c", c.shape)
    net.add("LSTMCell", [xi, hi, ci], [[N, H], [N, H]], {"hidden_size": str(H)},
            blobs={"weights": rand(4 * H, I + H), "biases": rand(4 * H)}, name="lstm")
    net.add("GRUCell", [xi, hi], [[N, H]], {"hidden_size": str(H), "linear_before_reset": "1"},
            blobs={"weights": rand(3 * H, I + H), "biases": rand(4 * H)}, name="gru")
    net.add("RNNCell", [xi, hi], [[N, H]], {"hidden_size": str(H), "clip": "0.5"},
            blobs={"weights": rand(H, I + H), "biases": rand(H)}, name="rnn")
    upgrade(net, {"x": x, "h": h, "c": c}, tmp_path)


# --- IR-only extension layers: mapped back to their opset layers ------------------------------

def test_ssd_tail_prior_box_and_detection_output(tmp_path):
    H, W, C = 2, 3, 3
    feat, img = rand(1, 4, H, W), rand(1, 3, 24, 36)
    P = H * W * 4
    loc = RNG.normal(0, 0.3, (1, P * 4)).astype("f4")
    conf = RNG.uniform(0, 1, (1, P * C)).astype("f4")
    net = LegacyNet("ssd")
    f, im = net.input("feat", feat.shape), net.input("img", img.shape)
    l_, c_ = net.input("loc", loc.shape), net.input("conf", conf.shape)
    (pb,) = net.add("PriorBox", [f, im], [[1, 2, P * 4]],
                    {"min_size": "8.0", "max_size": "16.0", "aspect_ratio": "2.0", "flip": "1", "clip": "0",
                     "step": "0", "offset": "0.5", "variance": "0.1,0.1,0.2,0.2"}, name="priors")
    net.add("DetectionOutput", [l_, c_, pb], [[1, 1, 5, 7]],
            {"num_classes": str(C), "share_location": "1", "background_label_id": "0", "nms_threshold": "0.45",
             "top_k": "10", "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "variance_encoded_in_target": "0",
             "keep_top_k": "5", "confidence_threshold": "0.2"}, name="detections")
    got = upgrade(net, {"feat": feat, "img": img, "loc": loc, "conf": conf}, tmp_path)
    assert (got["detections"][0, 0, :, 0] >= 0).any()      # something was detected


def test_yolo_layers(tmp_path):
    x = rand(1, 2 * (4 + 1 + 3), 2, 4, lo=-3, hi=3)
    net = LegacyNet("yolo")
    i = net.input("data", x.shape)
    net.add("RegionYolo", [i], [[1, 16 * 8]], {"axis": "1", "classes": "3", "coords": "4", "do_softmax": "1",
                                              "end_axis": "3", "num": "2"}, name="region")
    net.add("ReorgYolo", [i], [[1, 64, 1, 2]], {"stride": "2"}, name="reorg")
    upgrade(net, {"data": x}, tmp_path)


def test_roi_layers(tmp_path):
    x = rand(1, 18, 8, 8)
    rois = np.array([[0, 0, 0, 14, 12], [0, 4, 2, 10, 15]], "f4")
    net = LegacyNet("roi")
    a, b = net.input("data", x.shape), net.input("rois", rois.shape)
    net.add("ROIPooling", [a, b], [[2, 18, 2, 3]], {"pooled_h": "2", "pooled_w": "3", "spatial_scale": "0.5"},
            name="roi")
    net.add("PSROIPooling", [a, b], [[2, 2, 3, 3]], {"group_size": "3", "output_dim": "2", "spatial_scale": "0.5"},
            name="psroi")
    upgrade(net, {"data": x, "rois": rois}, tmp_path)


def test_proposal(tmp_path):
    A = 6
    cls = RNG.uniform(0, 1, (1, 2 * A, 3, 4)).astype("f4")
    bbox = RNG.normal(0, 0.2, (1, 4 * A, 3, 4)).astype("f4")
    info = np.array([[48, 64, 1.0]], "f4")
    net = LegacyNet("rpn")
    a, b, c = net.input("cls", cls.shape), net.input("bbox", bbox.shape), net.input("info", info.shape)
    net.add("Proposal", [a, b, c], [[8, 5]], {"base_size": "16", "feat_stride": "16", "min_size": "4",
                                              "nms_thresh": "0.6", "post_nms_topn": "8", "pre_nms_topn": "40",
                                              "ratio": "2.67", "scale": "4.0,6.0,9.0,16.0,24.0,32.0"}, name="out")
    upgrade(net, {"cls": cls, "bbox": bbox, "info": info}, tmp_path)


def test_sequence_and_quantize_layers(tmp_path):
    T, N, C = 5, 2, 3
    data = np.eye(C, dtype="f4")[RNG.integers(0, C, (T, N))]
    seq = np.ones((T, N), "f4")
    seq[4, 1] = 0
    x = rand(2, 6, 4, lo=-2, hi=2)
    lengths = np.array([3, 6], "f4")
    lo, hi = rand(6, 1, lo=-1, hi=-0.2), rand(6, 1, lo=0.2, hi=1)     # numpy-aligned to x's last two dims
    net = LegacyNet("seq")
    d, s = net.input("data", data.shape), net.input("seq", seq.shape)
    xi, li = net.input("x", x.shape), net.input("len", lengths.shape)
    net.add("CTCGreedyDecoder", [d, s], [[N, T, 1, 1]], {"ctc_merge_repeated": "1"}, name="ctc")
    net.add("ReverseSequence", [xi, li], [list(x.shape)], {"batch_axis": "0", "seq_axis": "1"}, name="rev")
    c = [net.const(n, v) for n, v in (("il", lo), ("ih", hi), ("ol", np.array([0.0], "f4")),
                                      ("oh", np.array([255.0], "f4")))]
    net.add("Quantize", [xi, *c], [list(x.shape)], {"levels": "256"}, name="q")
    upgrade(net, {"data": data, "seq": seq, "x": x, "len": lengths}, tmp_path, rtol=1e-3)


@pytest.mark.parametrize("align", [0, 1])
def test_interp_and_resample(tmp_path, align):
    x = rand(1, 2, 5, 7)
    net = LegacyNet("rs")
    i = net.input("data", x.shape)
    net.add("Interp", [i], [[1, 2, 10, 14]], {"align_corners": str(align), "factor": "2.0", "pad_beg": "0",
                                              "pad_end": "0"}, name="interp")
    net.add("Resample", [i], [[1, 2, 10, 14]], {"antialias": "0", "factor": "2",
                                                "type": "caffe.ResampleParameter.NEAREST"}, name="nearest")
    net.add("Resample", [i], [[1, 2, 10, 14]], {"antialias": "0", "factor": "2",
                                                "type": "caffe.ResampleParameter.LINEAR"}, name="linear")
    upgrade(net, {"data": x}, tmp_path)


@pytest.mark.parametrize("axis", [None, 1])
def test_argmax_ties_break_like_caffe(tmp_path, axis):
    x = RNG.integers(0, 3, (2, 5, 4)).astype("f4")          # many ties: higher index first
    data = {"top_k": "3", "out_max_val": "1" if axis is None else "0"}
    shape = [2, 2, 3]
    if axis is not None:
        data["axis"] = str(axis)
        shape = [2, 3, 4]
    upgrade(unary("ArgMax", x.shape, data, shape), {"data": x}, tmp_path)


def test_layer_without_opset_form_is_refused_with_its_location(tmp_path):
    net = LegacyNet("snms")
    a, b, c = net.input("cls", [1, 6, 3, 3]), net.input("bbox", [1, 12, 3, 3]), net.input("info", [1, 3])
    net.add("SimplerNMS", [a, b, c], [[5, 5]], {"iou_threshold": "0.7", "min_bbox_size": "1", "feat_stride": "16",
                                               "pre_nms_topn": "20", "post_nms_topn": "5", "scale": "2.0"},
            name="out")
    old = net.save(tmp_path, "old")
    new = tmp_path / "new.xml"
    assert main(["convert", old, str(new)]) == 1
    with pytest.raises(nnefx.NNEFXError) as e:
        nnefx.save(nnefx.load(old), str(new))
    text = str(e.value)
    assert "ir_simpler_nms" in text and "old.xml" in text and "'out' (SimplerNMS)" in text
    assert not new.exists() and not (tmp_path / "new.bin").exists()


@pytest.mark.parametrize("base", ["catalog_examples"])   # (the large one takes ~15 s)
def test_catalog_example_files_upgrade(tmp_path, base):
    """The legacy catalog's own example layers (fixtures) convert and run in OpenVINO; random
    float Gather indices exercise cast's floor (Convert alone truncates toward zero)."""
    old = f"tests/fixtures/ir/legacy/{base}.xml"
    model = nnefx.load(old)
    feeds = {n: RNG.uniform(-1, 1, model.graph.tensors[n].shape).astype("f4") for n in model.graph.inputs}
    want = Session(model, "fast").run(feeds)
    new = str(tmp_path / "new.xml")
    assert main(["convert", old, new]) == 0
    got = run_openvino(new, feeds)
    assert set(got) == set(want)
    for k in want:
        close(got[k], want[k])


def test_gather_float_runtime_indices_round_down(tmp_path):
    data = rand(4, 5)
    idx = np.array([[-0.7, 1.3], [2.9, -3.5]], "f4")      # cast floors: -1, 1, 2, -4
    net = LegacyNet("gather")
    k, d = net.input("indices", idx.shape), net.input("data", data.shape)
    net.add("Gather", [k, d], [[2, 2, 5]], {"axis": "0"}, name="out")
    got = upgrade(net, {"indices": idx, "data": data}, tmp_path)
    close(got["out"], data[np.array([[3, 1], [2, 0]])])


def test_prior_box_clustered(tmp_path):
    feat, img = rand(1, 4, 3, 2), rand(1, 3, 30, 20)
    net = LegacyNet("pbc")
    f, im = net.input("feat", feat.shape), net.input("img", img.shape)
    net.add("PriorBoxClustered", [f, im], [[1, 2, 3 * 2 * 2 * 4]],
            {"width": "4.0,9.5", "height": "6.0,3.0", "clip": "1", "offset": "0.5",
             "variance": "0.1,0.1,0.2,0.2", "step_w": "0", "step_h": "0"}, name="priors")
    upgrade(net, {"feat": feat, "img": img}, tmp_path)


# --- state and loops ----------------------------------------------------------------------------

def test_memory_pair_becomes_read_value_assign(tmp_path):
    from test_ir_legacy_state import memory_net

    old = memory_net().save(tmp_path, "old")
    new = str(tmp_path / "new.xml")
    assert main(["convert", old, new]) == 0
    ov = pytest.importorskip("openvino")
    request = ov.Core().compile_model(new, "CPU").create_infer_request()
    sess = Session(nnefx.load(old), "fast")
    for step in range(4):
        if step == 3:                       # both forget the accumulated state
            request.reset_state()
            sess.reset()
        x = rand(1, 4)
        close(request.infer({"x": x})["out"], sess.run({"x": x})["out"])


@pytest.mark.parametrize("stride", [1, -1])
def test_tensor_iterator_unrolled(tmp_path, stride):
    from test_ir_legacy_state import rnn_ti

    N, T, I, S = 2, 4, 3, 4
    net = rnn_ti(N, T, I, S, rand(S, I + S), rand(S), stride)
    upgrade(net, {"x": rand(N, T, I), "h0": rand(N, S)}, tmp_path)


def test_names_with_commas_and_spaces_survive(tmp_path):
    net = LegacyNet("names")
    x = net.input("in,put", [1, 3])
    net.add("ReLU", [x], [[1, 3]], name="out,1/a b")
    feeds = {"in,put": rand(1, 3)}
    upgrade(net, feeds, tmp_path)
    assert nnefx.load(str(tmp_path / "new.xml")).graph.outputs == ["out,1/a b"]


def test_avg_pool_padding_no_window_reaches_is_trimmed(tmp_path):
    # pads_end 2 = kernel: OpenVINO refuses exclude-pad AvgPool with it, but no window reaches
    # the second padded column, so the writer trims it
    x = rand(1, 2, 5, 5)
    data = {"kernel": "2,2", "strides": "2,2", "pads_begin": "0,0", "pads_end": "2,2", "pool-method": "avg",
            "exclude-pad": "true", "rounding_type": "floor"}
    upgrade(unary("Pooling", x.shape, data, [1, 2, 3, 3]), {"data": x}, tmp_path)
