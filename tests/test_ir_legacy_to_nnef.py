"""Legacy networks using every ``ir_*`` extension operation survive conversion to an NNEF
folder: the extension declarations parse and check in the NNEF front-end, and the reloaded
model computes the same results."""

from __future__ import annotations

import numpy as np

import nnefx
from nnefx.runtime.session import Session
from test_ir_legacy import rand
from test_ir_legacy_util import LegacyNet


def build() -> tuple[LegacyNet, dict]:
    rng = np.random.default_rng(11)
    net = LegacyNet("ext_ops")
    feat = net.input("feat", [1, 8, 4, 6])
    img = net.input("img", [1, 3, 32, 48])
    net.add("PriorBox", [feat, img], [[1, 2, 4 * 6 * 3 * 4]], {"min_size": "6", "aspect_ratio": "2", "flip": "1",
                                                               "variance": "0.1,0.1,0.2,0.2"}, name="pb")
    net.add("PriorBoxClustered", [feat, img], [[1, 2, 4 * 6 * 2 * 4]], {"width": "4,9", "height": "5,3"}, name="pbc")
    net.add("ReorgYolo", [feat], [[1, 32, 2, 3]], {"stride": "2"}, name="reorg")
    y = net.input("yolo", [1, 2 * 7, 3, 3])
    net.add("RegionYolo", [y], [[1, 2 * 7 * 9]], {"classes": "2", "coords": "4", "num": "2", "do_softmax": "1",
                                                 "axis": "1", "end_axis": "3"}, name="region")
    rois = net.input("rois", [3, 5])
    net.add("ROIPooling", [feat, rois], [[3, 8, 2, 2]], {"pooled_h": "2", "pooled_w": "2", "spatial_scale": "0.25"},
            name="roi")
    net.add("PSROIPooling", [feat, rois], [[3, 2, 2, 2]], {"output_dim": "2", "group_size": "2",
                                                          "spatial_scale": "0.25"}, name="psroi")
    seq = net.input("seq", [5, 2, 4])
    ind = net.input("ind", [5, 2])
    net.add("CTCGreedyDecoder", [seq, ind], [[2, 5, 1, 1]], {}, name="ctc")
    lens = net.const("lens", np.array([2, 5], "f4"))
    net.add("ReverseSequence", [seq, lens], [[5, 2, 4]], {"seq_axis": "0", "batch_axis": "1"}, name="rev")
    lo, hi = net.const("lo", np.array([-0.5], "f4")), net.const("hi", np.array([0.5], "f4"))
    net.add("Quantize", [feat, lo, hi, lo, hi], [[1, 8, 4, 6]], {"levels": "4"}, name="fq")
    net.add("ArgMax", [feat], [[1, 2, 3]], {"top_k": "3", "out_max_val": "1"}, name="argmax")
    b, e, s = (net.const(n, np.array(v, "f4")) for n, v in (("b", [0, 1, 3]), ("e", [1, 8, 0]), ("s", [1, 2, -1])))
    net.add("StridedSlice", [feat, b, e, s], [[1, 4, 3, 6]], {"begin_mask": "1,1,1", "end_mask": "1,1,1"}, name="ss")
    net.add("Interp", [feat], [[1, 8, 7, 11]], {"height": "7", "width": "11", "align_corners": "0"}, name="interp")
    net.add("Resample", [feat], [[1, 8, 6, 9]], {"factor": "1.5", "type": "caffe.ResampleParameter.LINEAR"},
            name="resample")
    bits = rng.integers(0, 2, (4, 8, 3, 3))
    net.add("BinaryConvolution", [feat], [[1, 4, 4, 6]], {"kernel": "3,3", "output": "4", "pads_begin": "1,1",
                                                          "pads_end": "1,1", "pad_value": "1.0",
                                                          "mode": "xnor-popcount"},
            blobs={"weights": (bits, "BIN")}, name="binconv")
    cls, bbox, info = net.input("cls", [1, 6, 2, 3]), net.input("bbox", [1, 12, 2, 3]), net.input("info", [1, 3])
    net.add("Proposal", [cls, bbox, info], [[4, 5]], {"base_size": "8", "feat_stride": "8", "min_size": "1",
                                                      "nms_thresh": "0.7", "post_nms_topn": "4", "pre_nms_topn": "10",
                                                      "ratio": "0.5,1,2", "scale": "1"}, name="proposal")
    net.add("SimplerNMS", [cls, bbox, info], [[4, 5]], {"iou_threshold": "0.7", "min_bbox_size": "1",
                                                        "feat_stride": "8", "pre_nms_topn": "10", "post_nms_topn": "4",
                                                        "scale": "1"}, name="simpler")
    loc, conf = net.input("loc", [1, 24 * 4]), net.input("conf", [1, 24 * 3])
    pri = net.input("pri", [1, 2, 24 * 4])
    net.add("DetectionOutput", [loc, conf, pri], [[1, 1, 5, 7]], {"num_classes": "3", "nms_threshold": "0.5",
                                                                  "keep_top_k": "5", "confidence_threshold": "0.3",
                                                                  "code_type": "caffe.PriorBoxParameter.CENTER_SIZE"},
            name="det")
    xy = rng.uniform(0, 0.6, (24, 2))
    priors = np.concatenate([xy, xy + rng.uniform(0.1, 0.4, (24, 2))], 1).reshape(-1)
    feeds = {
        "feat": rand(1, 8, 4, 6), "img": rand(1, 3, 32, 48), "yolo": rand(1, 14, 3, 3),
        "rois": np.array([[0, 0, 0, 20, 12], [0, 4, 4, 16, 16], [0, 1, 2, 3, 4]], "f4"),
        "seq": rand(5, 2, 4), "ind": np.ones((5, 2), "f4"),
        "cls": rng.uniform(0, 1, (1, 6, 2, 3)).astype("f4"), "bbox": rand(1, 12, 2, 3, lo=-0.2, hi=0.2),
        "info": np.array([[16, 24, 1]], "f4"), "loc": rand(1, 96, lo=-0.3, hi=0.3),
        "conf": rng.uniform(0, 1, (1, 72)).astype("f4"),
        "pri": np.stack([priors, np.tile([0.1, 0.1, 0.2, 0.2], 24)])[None].astype("f4"),
    }
    return net, feeds


def test_extension_ops_round_trip_through_nnef(tmp_path):
    net, feeds = build()
    model = nnefx.load(net.save(tmp_path))
    ops = {op.op for op in model.graph.operations}
    expected = {"ir_prior_box", "ir_prior_box_clustered", "ir_reorg_yolo", "ir_region_yolo", "ir_roi_pooling",
                "ir_psroi_pooling", "ir_ctc_greedy_decoder", "ir_reverse_sequence", "ir_fake_quantize", "ir_argmax",
                "ir_strided_slice", "ir_interp", "ir_resample", "ir_binary_convolution", "ir_proposal",
                "ir_simpler_nms", "ir_detection_output"}
    assert expected <= ops
    before = Session(model).run(feeds)
    nnefx.save(model, str(tmp_path / "nnef"))
    text = (tmp_path / "nnef" / "graph.nnef").read_text()
    assert "extension" in text and "ir_detection_output(" in text
    again = nnefx.load(str(tmp_path / "nnef"))
    after = Session(again).run(feeds)
    assert len(after) == len(before)
    for (k1, v1), (k2, v2) in zip(sorted(before.items()), sorted(after.items()), strict=True):
        np.testing.assert_allclose(v2, v1, rtol=1e-6, atol=1e-6, err_msg=f"{k1} / {k2}")
