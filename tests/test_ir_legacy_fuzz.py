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
