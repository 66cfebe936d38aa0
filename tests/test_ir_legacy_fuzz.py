"""Hostile attribute values on legacy layers: loading (and running, when loading succeeds) ends
either in results or in an NNEFXError — never another exception, never a huge allocation."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.runtime.session import Session
from test_ir_legacy_util import LegacyNet

VALUES = ["", "0", "1", "2", "-1", "-7", "3,3", "1,1,1,1", "0,0", "-2,5", "1.5", "abc", "nan", "inf", "1e12",
          "99999999999999999999", "true", "caffe.PriorBoxParameter.CENTER_SIZE", "2.0,3.0", "max", "avg",
          "same_upper", "valid", "reflect", "constant", "0,1,0,0", "1,0,1,1"]

LAYERS = {
    "Convolution": (["kernel", "strides", "pads_begin", "pads_end", "dilations", "group", "output", "auto_pad"],
                    {"weights": np.ones(36, "f4")}),
    "Pooling": (["kernel", "strides", "pads_begin", "pads_end", "pool-method", "exclude-pad", "rounding_type",
                 "auto_pad"], None),
    "Pad": (["pads_begin", "pads_end", "pad_mode", "pad_value"], None),
    "Crop": (["axis", "offset", "dim", "crop_begin", "crop_end"], None),
    "Tile": (["axis", "tiles"], None),
    "Reshape": (["dim"], None),
    "Split": (["axis", "num_split"], None),
    "Slice": (["axis", "slice_point"], None),
    "SoftMax": (["axis"], None),
    "Flatten": (["axis", "end_axis"], None),
    "Interp": (["height", "width", "factor", "align_corners", "pad_beg", "pad_end", "zoom_factor"], None),
    "Resample": (["factor", "type", "antialias"], None),
    "Norm": (["alpha", "beta", "local-size", "region", "k"], None),
    "MVN": (["across_channels", "normalize_variance", "eps"], None),
    "DepthToSpace": (["block_size", "mode"], None),
    "ShuffleChannels": (["group", "axis"], None),
    "PriorBox": (["min_size", "max_size", "aspect_ratio", "flip", "clip", "step", "offset", "variance"], None),
    "RegionYolo": (["coords", "classes", "num", "do_softmax", "mask", "axis", "end_axis"], None),
    "ReorgYolo": (["stride"], None),
    "ArgMax": (["top_k", "out_max_val", "axis"], None),
    "Activation": (["type", "alpha", "negative_slope", "min", "max"], None),
    "Eltwise": (["operation", "coeff"], None),
    "Power": (["power", "scale", "shift"], None),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ltype=st.sampled_from(sorted(LAYERS)), data=st.data())
def test_hostile_attributes(tmp_path, ltype, data):
    keys, blobs = LAYERS[ltype]
    attrs = {k: data.draw(st.sampled_from(VALUES)) for k in keys if data.draw(st.booleans())}
    out_dims = data.draw(st.sampled_from([[1, 4, 6, 6], [1, 4, 3, 3], [1, 144], [2, 2, 6, 6], [1, 4, 12, 12]]))
    net = LegacyNet("fuzz")
    x = net.input("data", [1, 4, 6, 6])
    inputs = [x]
    if ltype in ("PriorBox", "Eltwise"):
        inputs.append(net.input("other", [1, 4, 6, 6]))
    net.add(ltype, inputs, [out_dims], attrs, blobs=blobs, name="out")
    path = net.save(tmp_path)
    try:
        model = nnefx.load(path)
    except NNEFXError:
        return
    feeds = {n: np.zeros(model.graph.tensors[n].shape, np.float32) for n in model.graph.inputs}
    try:
        Session(model).run(feeds)
    except NNEFXError:
        pass


MULTI = {
    # type: (attribute keys, input shapes, const inputs {index: array}, blobs)
    "DetectionOutput": (["num_classes", "background_label_id", "top_k", "keep_top_k", "code_type", "share_location",
                         "nms_threshold", "confidence_threshold", "variance_encoded_in_target", "normalized"],
                        [[1, 16], [1, 8], [1, 2, 16]], {}, None),
    "Proposal": (["base_size", "pre_nms_topn", "post_nms_topn", "nms_thresh", "feat_stride", "min_size", "ratio",
                  "scale", "framework"], [[1, 4, 2, 2], [1, 8, 2, 2], [1, 3]], {}, None),
    "ROIPooling": (["pooled_h", "pooled_w", "spatial_scale", "method"], [[1, 2, 4, 4], [2, 5]], {}, None),
    "PSROIPooling": (["output_dim", "group_size", "spatial_scale", "mode", "spatial_bins_x", "spatial_bins_y"],
                     [[1, 8, 4, 4], [2, 5]], {}, None),
    "StridedSlice": (["begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask"],
                     [[1, 4, 6, 6], [4], [4], [4]],
                     {1: np.array([0, 1, -1, 2], "f4"), 2: np.array([1, 3, 0, -1], "f4"),
                      3: np.array([1, 1, -1, 2], "f4")}, None),
    "Gather": (["axis"], [[2, 3], [4, 6, 6]], {0: np.array([[0, -1, 2], [3, 1, 0]], "f4")}, None),
    "Quantize": (["levels"], [[1, 4, 6, 6], [1], [1], [1], [1]],
                 {1: np.zeros(1, "f4"), 2: np.ones(1, "f4"), 3: np.zeros(1, "f4"), 4: np.ones(1, "f4")}, None),
    "Deconvolution": (["kernel", "strides", "pads_begin", "pads_end", "group", "output", "auto_pad"],
                      [[1, 4, 6, 6]], {}, {"weights": np.ones(64, "f4")}),
    "FullyConnected": (["out-size"], [[1, 4, 6, 6]], {}, {"weights": np.ones(144 * 2, "f4")}),
    "Normalize": (["across_spatial", "channel_shared", "eps"], [[1, 4, 6, 6]], {}, {"weights": np.ones(4, "f4")}),
    "Concat": (["axis"], [[1, 4, 6, 6], [1, 4, 6, 6]], {}, None),
    "Permute": (["order"], [[1, 4, 6, 6]], {}, None),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ltype=st.sampled_from(sorted(MULTI)), data=st.data())
def test_hostile_attributes_multi_input(tmp_path, ltype, data):
    keys, shapes, consts, blobs = MULTI[ltype]
    attrs = {k: data.draw(st.sampled_from(VALUES)) for k in keys if data.draw(st.booleans())}
    out_dims = data.draw(st.sampled_from([[1, 1, 2, 7], [2, 5], [1, 4, 6, 6], [1, 2], [2, 3, 6, 6]]))
    net = LegacyNet("fuzz")
    refs = [net.const(f"c{i}", consts[i]) if i in consts else net.input(f"in{i}", s) for i, s in enumerate(shapes)]
    net.add(ltype, refs, [out_dims], attrs, blobs=blobs, name="out")
    try:
        model = nnefx.load(net.save(tmp_path))
    except NNEFXError:
        return
    rng = np.random.default_rng(0)
    feeds = {n: rng.uniform(0, 1, model.graph.tensors[n].shape).astype(np.float32) for n in model.graph.inputs}
    try:
        Session(model).run(feeds)
    except NNEFXError:
        pass
