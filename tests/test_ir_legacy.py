"""Legacy IR layers end to end: write a legacy .xml/.bin, ``nnefx.load`` it, run it through the
generic ``Session`` (fast and formal backends), compare with numpy/torch references written
here — independent of the mappings under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnefx.diagnostics import NNEFXError
from test_ir_legacy_util import LegacyNet, run_both

RNG = np.random.default_rng(0)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def t(a):
    return torch.tensor(np.asarray(a))


def one(net, tmp_path, feeds, expected, tol=1e-5):
    out = run_both(net, tmp_path, feeds)
    if isinstance(expected, dict):
        assert set(out) == set(expected), (sorted(out), sorted(expected))
        for k, e in expected.items():
            np.testing.assert_allclose(out[k], np.asarray(e, dtype=np.float32), rtol=tol, atol=tol)
        return out
    got = list(out.values())
    if not isinstance(expected, list):
        expected = [expected]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, np.asarray(e, dtype=np.float32), rtol=tol, atol=tol)
    return out


def unary_net(ltype, shape, data=None, out_shape=None, blobs=None):
    net = LegacyNet(ltype.lower())
    x = net.input("data", shape)
    net.add(ltype, [x], [out_shape or shape], data=data, blobs=blobs, name="out")
    return net


# --- activations --------------------------------------------------------------------------------

ACTS = {
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "elu": lambda x: np.where(x < 0, 0.5 * (np.exp(x) - 1), x),
    "relu6": lambda x: np.clip(x, 0, 6),
    "exp": np.exp,
    "not": lambda x: (x == 0).astype(np.float32),
    "relu": lambda x: np.where(x < 0, 0.1 * x, x),
    "logistic": lambda x: 1 / (1 + np.exp(-x)),
    "abs": np.abs,
    "softplus": lambda x: np.log1p(np.exp(x)),
    "swish": lambda x: x / (1 + np.exp(-x)),
    "hsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "clamp": lambda x: np.clip(x, -1.5, 2.0),
}


@pytest.mark.parametrize("kind", sorted(ACTS))
def test_activation(tmp_path, kind):
    x = rand(2, 3, 4, 5, lo=-8, hi=8)
    x[0, 0, 0, :2] = 0
    data = {"type": kind}
    if kind == "elu":
        data["alpha"] = "0.5"
    if kind == "relu":
        data["negative_slope"] = "0.1"
    if kind == "clamp":
        data.update(min="-1.5", max="2.0")
    one(unary_net("Activation", x.shape, data), tmp_path, {"data": x}, ACTS[kind](x), 1e-5)


def test_activation_unknown_type_names_layer(tmp_path):
    net = unary_net("Activation", [1, 2], {"type": "wiggle"})
    with pytest.raises(NNEFXError) as e:
        net.run(tmp_path, {"data": np.zeros((1, 2), "f4")})
    assert "layer 1 'out' (Activation)" in str(e.value) and "'type'" in str(e.value) and "wiggle" in str(e.value)


@pytest.mark.parametrize("slope", [0.0, 0.25])
def test_relu(tmp_path, slope):
    x = rand(3, 7, lo=-3, hi=3)
    data = {"negative_slope": str(slope)} if slope else None
    one(unary_net("ReLU", x.shape, data), tmp_path, {"data": x}, np.where(x < 0, slope * x, x))


def test_clamp(tmp_path):
    x = rand(4, 6, lo=0, hi=60)
    one(unary_net("Clamp", x.shape, {"min": "10", "max": "50"}), tmp_path, {"data": x}, np.clip(x, 10, 50))


def test_clamp_rejects_min_above_max(tmp_path):
    with pytest.raises(NNEFXError, match="attribute 'min' = 5.0"):
        unary_net("Clamp", [2], {"min": "5", "max": "1"}).run(tmp_path, {"data": np.zeros(2, "f4")})


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_softmax(tmp_path, axis):
    x = rand(2, 3, 4, lo=-3, hi=3)
    one(unary_net("SoftMax", x.shape, {"axis": str(axis)}), tmp_path, {"data": x},
        torch.softmax(t(x), dim=axis).numpy())


def test_power(tmp_path):
    x = rand(3, 4)
    one(unary_net("Power", x.shape, {"power": "2", "scale": "0.1", "shift": "5"}), tmp_path, {"data": x},
        (5 + 0.1 * x) ** 2, 1e-4)


@pytest.mark.parametrize("shared", [False, True])
def test_prelu(tmp_path, shared):
    x = rand(2, 3, 4, 4)
    w = np.array([0.5], "f4") if shared else rand(3)
    net = unary_net("PReLU", x.shape, {"channel_shared": str(int(shared))}, blobs={"weights": w})
    ref = np.maximum(0, x) + w.reshape(-1, 1, 1) * np.minimum(0, x)
    one(net, tmp_path, {"data": x}, ref)


def test_scale_shift(tmp_path):
    x, w, b = rand(2, 3, 4, 5), rand(3), rand(3)
    net = unary_net("ScaleShift", x.shape, blobs={"weights": w, "biases": b})
    one(net, tmp_path, {"data": x}, x * w.reshape(3, 1, 1) + b.reshape(3, 1, 1))


# --- Eltwise ----------------------------------------------------------------------------------------

ELT = {
    "sum": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum,
    "squared_diff": lambda a, b: (a - b) ** 2, "pow": np.power,
    "floor_mod": lambda a, b: a - np.floor(a / b) * b,
    "equal": lambda a, b: (a == b) * 1.0, "not_equal": lambda a, b: (a != b) * 1.0,
    "less": lambda a, b: (a < b) * 1.0, "less_equal": lambda a, b: (a <= b) * 1.0,
    "greater": lambda a, b: (a > b) * 1.0, "greater_equal": lambda a, b: (a >= b) * 1.0,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)) * 1.0, "logical_or": lambda a, b: ((a != 0) | (b != 0)) * 1.0,
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)) * 1.0,
}


@pytest.mark.parametrize("op", sorted(ELT))
def test_eltwise_numpy_broadcasting(tmp_path, op):
    a = RNG.integers(0, 4, (2, 3, 4)).astype("f4") + 0.5
    b = RNG.integers(0, 3, (3, 1)).astype("f4") + 1.0          # numpy: aligned from the back
    if op.startswith("logical") or op in ("equal", "not_equal"):
        a = RNG.integers(0, 2, (2, 3, 4)).astype("f4")
        b = RNG.integers(0, 2, (3, 1)).astype("f4")
    net = LegacyNet("elt")
    x = net.input("a", a.shape)
    y = net.input("b", b.shape)
    net.add("Eltwise", [x, y], [list(np.broadcast_shapes(a.shape, b.shape))], {"operation": op}, name="out")
    one(net, tmp_path, {"a": a, "b": b}, ELT[op](a, b), 1e-5)


def test_eltwise_sum_three_inputs_with_coeff_and_const(tmp_path):
    a, b = rand(2, 3), rand(2, 3)
    c = rand(3)
    net = LegacyNet("elt3")
    x = net.input("a", a.shape)
    y = net.input("b", b.shape)
    k = net.const("k", c)
    net.add("Eltwise", [x, y, k], [[2, 3]], {"operation": "sum", "coeff": "1,-2,0.5"}, name="out")
    one(net, tmp_path, {"a": a, "b": b}, a - 2 * b + 0.5 * c)


def test_eltwise_rejects_bad_broadcast(tmp_path):
    net = LegacyNet("bad")
    x = net.input("a", [2, 3])
    y = net.input("b", [4])
    net.add("Eltwise", [x, y], [[2, 3]], {"operation": "sum"}, name="out")
    with pytest.raises(NNEFXError, match="do not broadcast"):
        net.run(tmp_path, {})


# --- shape layers -----------------------------------------------------------------------------------

def test_concat_permute_flatten_reshape_tile(tmp_path):
    a, b = rand(2, 3, 4), rand(2, 5, 4)
    net = LegacyNet("shapes")
    x = net.input("a", a.shape)
    y = net.input("b", b.shape)
    (c,) = net.add("Concat", [x, y], [[2, 8, 4]], {"axis": "1"})
    (p,) = net.add("Permute", [c], [[4, 2, 8]], {"order": "2,0,1"})
    (f,) = net.add("Flatten", [p], [[4, 16]], {"axis": "1", "end_axis": "-1"})
    shape = net.const("shape", np.array([0, -1, 2], "f4"))
    (r,) = net.add("Reshape", [f, shape], [[4, 8, 2]])
    net.add("Tile", [r], [[4, 8, 6]], {"axis": "2", "tiles": "3"}, name="out")
    ref = np.tile(np.concatenate([a, b], 1).transpose(2, 0, 1).reshape(4, 16).reshape(4, 8, 2), (1, 1, 3))
    one(net, tmp_path, {"a": a, "b": b}, ref)


def test_reshape_dim_attribute_and_errors(tmp_path):
    x = rand(2, 6)
    one(unary_net("Reshape", x.shape, {"dim": "3,-1"}, out_shape=[3, 4]), tmp_path, {"data": x}, x.reshape(3, 4))
    with pytest.raises(NNEFXError, match="attribute 'dim'"):
        unary_net("Reshape", x.shape, {"dim": "-1,-1"}, out_shape=[3, 4]).run(tmp_path, {"data": x})


@pytest.mark.parametrize("ltype", ["Split", "Slice"])
def test_split_and_legacy_slice(tmp_path, ltype):
    x = rand(1, 10, 3)
    net = LegacyNet("split")
    i = net.input("data", x.shape)
    data = {"axis": "1"}
    if ltype == "Slice":
        data["slice_point"] = "3,7"
    net.add(ltype, [i], [[1, 3, 3], [1, 4, 3], [1, 3, 3]], data, name="s")
    one(net, tmp_path, {"data": x}, {"s": x[:, :3], "s.2": x[:, 3:7], "s.3": x[:, 7:]})


def test_crop_types(tmp_path):
    x = rand(1, 2, 10, 12)
    r = rand(1, 2, 5, 6)
    net = LegacyNet("crop")
    i = net.input("data", x.shape)
    j = net.input("ref", r.shape)
    net.add("Crop", [i, j], [[1, 2, 5, 6]], {"axis": "2,3", "offset": "1,2"}, name="t1")
    net.add("Crop", [i], [[1, 2, 4, 3]], {"axis": "2,3", "offset": "3,0", "dim": "4,3"}, name="t2")
    net.add("Crop", [i], [[1, 2, 6, 5]], {"axis": "2,3", "crop_begin": "4,4", "crop_end": "0,3"}, name="t3")
    one(net, tmp_path, {"data": x, "ref": r}, {"t1": x[:, :, 1:6, 2:8], "t2": x[:, :, 3:7, 0:3],
                                               "t3": x[:, :, 4:10, 4:9]})


def test_crop_out_of_range(tmp_path):
    net = unary_net("Crop", [1, 4], {"axis": "1", "offset": "2", "dim": "3"}, out_shape=[1, 3])
    with pytest.raises(NNEFXError, match="attribute 'offset'"):
        net.run(tmp_path, {})


@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("edge", "edge"), ("reflect", "reflect"),
                                          ("symmetric", "symmetric")])
def test_pad_modes(tmp_path, mode, np_mode):
    x = np.arange(1, 13, dtype="f4").reshape(3, 4)               # the catalog's example
    data = {"pads_begin": "0,1", "pads_end": "2,3", "pad_mode": mode}
    kw = {}
    if mode == "constant":
        data["pad_value"] = "666.0"
        kw["constant_values"] = 666.0
    ref = np.pad(x, [(0, 2), (1, 3)], mode=np_mode, **kw)
    one(unary_net("Pad", x.shape, data, out_shape=list(ref.shape)), tmp_path, {"data": x}, ref)


def test_shuffle_channels_and_depth_to_space(tmp_path):
    x = rand(2, 12, 2, 3)
    net = LegacyNet("perm")
    i = net.input("data", x.shape)
    net.add("ShuffleChannels", [i], [list(x.shape)], {"group": "3", "axis": "1"}, name="shuffled")
    net.add("DepthToSpace", [i], [[2, 3, 4, 6]], {"block_size": "2"}, name="d2s")
    shuffled = x.reshape(2, 3, 4, 6).transpose(0, 2, 1, 3).reshape(x.shape)
    # ONNX DepthToSpace, DCR (blocks first) mode, written out independently
    ref = x.reshape(2, 2, 2, 3, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(2, 3, 4, 6)
    one(net, tmp_path, {"data": x}, {"shuffled": shuffled, "d2s": ref})


def test_shape_fill_range_fold(tmp_path):
    x = rand(2, 3, 5)
    net = LegacyNet("fold")
    i = net.input("data", x.shape)
    (s,) = net.add("Shape", [i], [[3]])
    v = net.const("value", np.array([7.0], "f4"))
    net.add("Fill", [s, v], [[2, 3, 5]], name="filled")
    a, b, c = net.const("a", np.array([1.0], "f4")), net.const("b", np.array([2.5], "f4")), net.const(
        "c", np.array([0.25], "f4"))
    (rg,) = net.add("Range", [a, b, c], [[6]])
    net.add("Power", [rg], [[6]], {"power": "1"}, name="range_out")
    one(net, tmp_path, {"data": x}, {"filled": np.full((2, 3, 5), 7.0), "range_out": np.arange(1.0, 2.5, 0.25)})


def test_gather_runtime_indices(tmp_path):
    data = rand(4, 5)
    idx = np.array([[-1, 0], [2, -4]], "f4")
    net = LegacyNet("gather")
    k = net.input("indices", idx.shape)
    d = net.input("data", data.shape)
    net.add("Gather", [k, d], [[2, 2, 5]], {"axis": "0"}, name="out")
    one(net, tmp_path, {"indices": idx, "data": data}, data[np.array([[3, 0], [2, 0]])])


def test_gather_catalog_example_shape(tmp_path):
    data = rand(6, 12, 10, 3)
    idx = RNG.integers(-12, 12, (3, 4)).astype("f4")
    net = LegacyNet("gather")
    k = net.const("indices", idx)
    d = net.input("data", data.shape)
    net.add("Gather", [k, d], [[6, 3, 4, 10, 3]], {"axis": "1"}, name="out")
    ref = np.take(data, np.where(idx < 0, idx + 12, idx).astype(int), axis=1)
    one(net, tmp_path, {"data": data}, ref)


@pytest.mark.parametrize("case", [
    # (begin, end, stride, masks) — legacy polarity: begin/end mask 1 = use the value
    ([0, 1, 0, 0, 0], [0, 2, 0, 0, 0], [1, 1, 1, 1, 1],
     dict(begin_mask="0,1,0,0,0", end_mask="0,1,0,0,0", shrink_axis_mask="0,1,0,0,0"), (slice(None), 1)),
    ([0, 0, 1], [0, 0, -1], [1, 1, 2], dict(begin_mask="0,0,1", end_mask="0,0,1"),
     (slice(None), slice(None), slice(1, -1, 2))),
    ([0, 0, 5], [0, 0, 0], [1, 1, -2], dict(begin_mask="0,0,1", end_mask="0,0,0"),
     (slice(None), slice(None), slice(5, None, -2))),
    ([0, 0], [1, 0], [1, 1], dict(begin_mask="1,0", end_mask="1,0", new_axis_mask="0,1"),
     (slice(0, 1), None)),
    ([0, 1], [0, 3], [1, 1], dict(begin_mask="0,1", end_mask="0,1", ellipsis_mask="1,0"),
     (Ellipsis, slice(1, 3))),
])
def test_strided_slice_legacy_masks(tmp_path, case):
    begin, end, stride, masks, ref_index = case
    x = rand(1, 2, 6, 8) if len(begin) != 5 else rand(1, 2, 6, 8, 3)
    ref = x[ref_index]
    net = LegacyNet("ss")
    i = net.input("data", x.shape)
    b, e, s = (net.const(n, np.array(v, "f4")) for n, v in (("b", begin), ("e", end), ("s", stride)))
    net.add("StridedSlice", [i, b, e, s], [list(ref.shape)], masks, name="out")
    one(net, tmp_path, {"data": x}, ref)


def test_strided_slice_catalog_example_shape(tmp_path):
    x = rand(1, 2, 4, 5, 3)
    net = LegacyNet("ss")
    i = net.input("data", x.shape)
    b, e, s = (net.const(n, np.array(v, "f4")) for n, v in (("b", [0, 1, 0, 0, 0]), ("e", [0, 2, 0, 0, 0]),
                                                             ("s", [1] * 5)))
    net.add("StridedSlice", [i, b, e, s], [[1, 4, 5, 3]],
            {"begin_mask": "0,1,0,0,0", "ellipsis_mask": "0,0,0,0,0", "end_mask": "0,1,0,0,0",
             "new_axis_mask": "0,0,0,0,0", "shrink_axis_mask": "0,1,0,0,0"}, name="out")
    one(net, tmp_path, {"data": x}, x[:, 1])


# --- StridedSlice against numpy indexing (legacy mask polarity) -------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_strided_slice_matches_numpy(tmp_path, data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    n = data.draw(st.integers(1, rank + 1))
    begin, end, stride, ub, ue, new, shrink, ell = [], [], [], [], [], [], [], []
    has_ellipsis = False
    for _ in range(n):
        kind = data.draw(st.sampled_from(["slice", "slice", "slice", "new", "shrink", "ellipsis"]))
        if kind == "ellipsis" and has_ellipsis:
            kind = "slice"
        has_ellipsis |= kind == "ellipsis"
        begin.append(data.draw(st.integers(-6, 6)))
        end.append(data.draw(st.integers(-6, 6)))
        stride.append(data.draw(st.sampled_from([1, 2, 3, -1, -2])))
        ub.append(data.draw(st.integers(0, 1)))
        ue.append(data.draw(st.integers(0, 1)))
        new.append(int(kind == "new"))
        shrink.append(int(kind == "shrink"))
        ell.append(int(kind == "ellipsis"))
    index = []
    for i in range(n):
        if ell[i]:
            index.append(Ellipsis)
        elif new[i]:
            index.append(None)
        elif shrink[i]:
            index.append(begin[i])
        else:
            index.append(slice(begin[i] if ub[i] else None, end[i] if ue[i] else None, stride[i]))
    x = np.arange(int(np.prod(shape)), dtype="f4").reshape(shape)
    try:
        ref = x[tuple(index)]
    except IndexError:
        return                               # e.g. a shrink index out of range, or too many indices
    if ref.size == 0:
        return
    net = LegacyNet("ss")
    inp = net.input("data", shape)
    b, e, s = (net.const(nm, np.array(v, "f4")) for nm, v in (("b", begin), ("e", end), ("s", stride)))
    masks = {"begin_mask": ",".join(map(str, ub)), "end_mask": ",".join(map(str, ue)),
             "new_axis_mask": ",".join(map(str, new)), "shrink_axis_mask": ",".join(map(str, shrink)),
             "ellipsis_mask": ",".join(map(str, ell))}
    net.add("StridedSlice", [inp, b, e, s], [list(ref.shape)], masks, name="out")
    out = net.run(tmp_path, {"data": x})[1]["out"]
    np.testing.assert_array_equal(out, ref)


CATALOG_TYPES = (
    "Activation ArgMax BatchNormalization BinaryConvolution Clamp Concat Convolution Crop CTCGreedyDecoder "
    "Deconvolution DepthToSpace DetectionOutput Eltwise Fill Flatten FullyConnected Gather GRN GRUCell Interp "
    "LSTMCell Memory MVN Norm Normalize Pad Permute Pooling Power PReLU PriorBox PriorBoxClustered Proposal "
    "PSROIPooling Quantize Range RegionYolo ReLU ReorgYolo Resample Reshape ReverseSequence RNNCell ROIPooling "
    "ScaleShift Shape ShuffleChannels SimplerNMS Slice SoftMax Split StridedSlice TensorIterator Tile").split()


def test_every_catalog_layer_has_a_legacy_mapping():
    from nnefx.formats.ir.mapping import find_mapping

    missing = [tp for tp in CATALOG_TYPES if find_mapping(tp, "legacy") is None]
    assert missing == []      # Input and Const are read by the reader itself


def test_unknown_legacy_layer_is_reported(tmp_path):
    net = unary_net("Frobnicate", [1, 2])
    with pytest.raises(NNEFXError, match="unsupported IR layer type 'Frobnicate'"):
        net.run(tmp_path, {})


def test_non_numeric_attribute(tmp_path):
    with pytest.raises(NNEFXError, match=r"\(SoftMax\).*attribute 'axis' must be an integer"):
        unary_net("SoftMax", [2, 3], {"axis": "one"}).run(tmp_path, {})


def test_hostile_sizes_are_refused_at_load(tmp_path):
    net = unary_net("Tile", [1, 4], {"axis": "1", "tiles": "1000000000000"}, [1, 4_000_000_000_000])
    with pytest.raises(NNEFXError, match=r"\(Tile\).*4000000000000"):
        net.run(tmp_path, {})
