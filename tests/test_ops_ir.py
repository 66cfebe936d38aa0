"""IR extension operations: formal and fast kernels agree (hypothesis), shape rules match the
kernels, and hand-worked values check the definitions themselves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both(name, *args, **kw):
    op = registry.get(name)
    a = op.kernel("formal")(*args, **kw)
    b = op.kernel("fast")(*args, **kw)
    shape = op.shape_rule(*[x.shape for x in args], **kw)[0]
    assert a.shape == b.shape
    assert all(s is None or s == d for s, d in zip(shape, a.shape, strict=False)) and len(shape) == a.ndim
    return a, b


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def arrays(shape, seed, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(np.float32)


def test_all_ir_ops_complete():
    names = {op.name for op in registry.all_ops("ir") if op.family.startswith("ir.")}
    for n in names:
        op = registry.get(n)
        assert n.startswith("ir_") and op.declaration.startswith(f"fragment {n}")
        assert op.shape_rule and op.formal_kernel and op.fast_kernel
    assert {"ir_prior_box", "ir_detection_output", "ir_proposal", "ir_roi_pooling",
            "ir_ctc_greedy_decoder", "ir_fake_quantize", "ir_binary_convolution"} <= names


# --- detection -------------------------------------------------------------------------------

@SETTINGS
@given(h=st.integers(1, 4), w=st.integers(1, 4), flip=st.booleans(), clip=st.booleans(),
       step=st.sampled_from([0.0, 8.0]), nvar=st.sampled_from([0, 1, 4]), with_max=st.booleans())
def test_prior_box(h, w, flip, clip, step, nvar, with_max):
    x, img = np.zeros((1, 3, h, w), "f4"), np.zeros((1, 3, 32, 48), "f4")
    kw = dict(min_size=[6.0, 10.0], max_size=[9.0, 20.0] if with_max else [], aspect_ratio=[2.0, 3.0, 2.0],
              flip=flip, clip=clip, step=step, offset=0.5, variance=[0.1, 0.2, 0.3, 0.4][:nvar] if nvar != 1
              else [0.3])
    a, b = both("ir_prior_box", x, img, **kw)
    close(a, b)


def test_prior_box_values():
    x, img = np.zeros((1, 1, 1, 2), "f4"), np.zeros((1, 1, 10, 20), "f4")
    out = registry.get("ir_prior_box").kernel("formal")(x, img, min_size=[4.0], aspect_ratio=[4.0],
                                                        variance=[0.5])
    # cell (0, 0): centre (5, 5); ratio 1 box 4x4, ratio 4 box 8x2
    np.testing.assert_allclose(out[0, 0, :8], [3 / 20, 3 / 10, 7 / 20, 7 / 10, 1 / 20, 4 / 10, 9 / 20, 6 / 10],
                               rtol=1e-6)
    assert out.shape == (1, 2, 16) and np.all(out[0, 1] == 0.5)


@SETTINGS
@given(h=st.integers(1, 3), w=st.integers(1, 3), clip=st.booleans(), step=st.sampled_from([0.0, 5.0]))
def test_prior_box_clustered(h, w, clip, step):
    x, img = np.zeros((1, 3, h, w), "f4"), np.zeros((1, 3, 20, 30), "f4")
    a, b = both("ir_prior_box_clustered", x, img, width=[4.0, 30.0], height=[6.0, 3.0], clip=clip, step=step,
                variance=[0.1, 0.1, 0.2, 0.2])
    close(a, b)
    cx = 0.5 * (step or 30 / w)
    assert a[0, 0, 2] == pytest.approx(min(1.0, (cx + 2) / 30) if clip else (cx + 2) / 30, rel=1e-6)


@SETTINGS
@given(seed=st.integers(0, 10_000), code=st.sampled_from(["CORNER", "CENTER_SIZE", "CORNER_SIZE"]),
       share=st.booleans(), keep=st.sampled_from([-1, 3]), top_k=st.sampled_from([-1, 4]),
       enc=st.booleans(), bg=st.sampled_from([0, -1]))
def test_detection_output(seed, code, share, keep, top_k, enc, bg):
    rng = np.random.default_rng(seed)
    N, P, C = 2, 6, 3
    L = 1 if share else C
    xy = rng.uniform(0, 0.6, (P, 2))
    priors = np.concatenate([xy, xy + rng.uniform(0.1, 0.4, (P, 2))], axis=1).reshape(-1)
    prior = np.stack([priors, np.tile([0.1, 0.1, 0.2, 0.2], P)])[None].astype("f4")
    if enc:
        prior = prior[:, :1]
    loc = rng.normal(0, 0.5, (N, P * L * 4)).astype("f4")
    conf = rng.uniform(0, 1, (N, P * C)).astype("f4")
    a, b = both("ir_detection_output", loc, conf, prior, num_classes=C, background_label_id=bg, top_k=top_k,
                keep_top_k=keep, code_type=code, share_location=share, nms_threshold=0.45,
                confidence_threshold=0.2, variance_encoded_in_target=enc, clip_before_nms=True)
    close(a, b)


def test_detection_output_values():
    # two priors overlapping heavily, one class + background: NMS keeps the better one only
    prior = np.array([[[0, 0, .5, .5, 0, 0, .5, .55], [.1] * 8]], "f4")
    loc = np.zeros((1, 8), "f4")
    conf = np.array([[0.1, 0.9, 0.2, 0.8]], "f4")
    out = registry.get("ir_detection_output").kernel("formal")(
        loc, conf, prior, num_classes=2, keep_top_k=3, nms_threshold=0.5, code_type="CENTER_SIZE")
    np.testing.assert_allclose(out[0, 0, 0], [0, 1, 0.9, 0, 0, .5, .5], atol=1e-6)
    assert out[0, 0, 1, 0] == -1 and out.shape == (1, 1, 3, 7)


@SETTINGS
@given(seed=st.integers(0, 10_000), h=st.integers(1, 4), w=st.integers(1, 4), normalize=st.booleans(),
       after=st.booleans())
def test_proposal(seed, h, w, normalize, after):
    rng = np.random.default_rng(seed)
    A = 4
    cls = rng.uniform(0, 1, (2, 2 * A, h, w)).astype("f4")
    bbox = rng.normal(0, 0.3, (2, 4 * A, h, w)).astype("f4")
    info = np.array([[40, 50, 1.0], [30, 60, 1.5]], "f4")
    a, b = both("ir_proposal", cls, bbox, info, base_size=8, pre_nms_topn=12, post_nms_topn=5, nms_thresh=0.5,
                feat_stride=8, min_size=2, ratio=[0.5, 2.0], scale=[1.0, 2.0], clip_after_nms=after,
                normalize=normalize)
    close(a, b, 1e-4)


@SETTINGS
@given(seed=st.integers(0, 10_000))
def test_simpler_nms(seed):
    rng = np.random.default_rng(seed)
    cls = rng.uniform(0, 1, (1, 12, 3, 3)).astype("f4")
    bbox = rng.normal(0, 0.3, (1, 24, 3, 3)).astype("f4")
    info = np.array([[64, 64, 1.0]], "f4")
    a, b = both("ir_simpler_nms", cls, bbox, info, pre_nms_topn=20, post_nms_topn=6, iou_threshold=0.6,
                min_bbox_size=4, feat_stride=16, scale=[1.0, 2.0], cls_threshold=0.3)
    close(a, b, 1e-4)


def test_anchor_generation_matches_rpn_reference():
    from nnefx.ops.ir.detection import generate_anchors
    a = generate_anchors(16, [0.5, 1, 2], [8, 16, 32])
    # the well-known Faster R-CNN anchors for base 16, ratios (0.5, 1, 2), scales (8, 16, 32)
    np.testing.assert_allclose(a[0], [-84, -40, 99, 55])
    np.testing.assert_allclose(a[4], [-120, -120, 135, 135])
    np.testing.assert_allclose(a[8], [-168, -344, 183, 359])


@SETTINGS
@given(seed=st.integers(0, 10_000), soft=st.booleans())
def test_region_yolo(seed, soft):
    x = arrays((1, 3 * (4 + 1 + 2), 2, 3), seed) if not soft else arrays((2, 2 * 7, 2, 3), seed)
    kw = dict(coords=4, classes=2, num=2, do_softmax=soft, mask=[0, 1, 2], axis=1, end_axis=3)
    a, b = both("ir_region_yolo", x, **kw)
    close(a, b)
    y = a.reshape(x.shape)
    sig = 1 / (1 + np.exp(-x[0, 0]))
    close(y[0, 0], sig)
    close(y[0, 2], x[0, 2])        # w, h are left untouched


@SETTINGS
@given(seed=st.integers(0, 1000), s=st.sampled_from([1, 2, 3]))
def test_reorg_yolo(seed, s):
    x = arrays((2, 2 * s * s, 2 * s, 3 * s), seed)
    a, b = both("ir_reorg_yolo", x, stride=s)
    np.testing.assert_array_equal(a, b)


def test_reorg_yolo_index_map():
    # hand-worked: C=8, H=4, W=6, s=2; output flat element 96 (channel 16) reads input (0, 2, 0)
    x = np.arange(8 * 4 * 6, dtype="f4").reshape(1, 8, 4, 6)
    out = registry.get("ir_reorg_yolo").kernel("formal")(x, stride=2)
    assert out.shape == (1, 32, 2, 3)
    assert out[0, 16, 0, 0] == x[0, 0, 2, 0] and out[0, 0, 0, 1] == x[0, 0, 0, 2] and out[0, 8, 0, 0] == x[0, 0, 0, 1]


# --- roi -------------------------------------------------------------------------------------

@SETTINGS
@given(seed=st.integers(0, 10_000), method=st.sampled_from(["max", "bilinear"]), ph=st.integers(1, 3))
def test_roi_pooling(seed, method, ph):
    rng = np.random.default_rng(seed)
    x = arrays((2, 3, 7, 9), seed)
    if method == "max":
        xy = rng.uniform(0, 14, (4, 2))
        rois = np.concatenate([rng.integers(0, 2, (4, 1)), xy, xy + rng.uniform(0, 8, (4, 2))], 1)
    else:
        xy = rng.uniform(-0.2, 0.8, (4, 2))
        rois = np.concatenate([rng.integers(0, 2, (4, 1)), xy, xy + rng.uniform(0, 0.6, (4, 2))], 1)
    if seed % 3 == 0:
        rois[2, 0] = -1                      # end marker: this RoI and the next pool to 0
    a, b = both("ir_roi_pooling", x, rois.astype("f4"), pooled_h=ph, pooled_w=2, spatial_scale=0.5, method=method)
    close(a, b)
    if seed % 3 == 0:
        assert not a[2:].any()


def test_roi_pooling_value():
    x = np.arange(16, dtype="f4").reshape(1, 1, 4, 4)
    rois = np.array([[0, 0, 0, 3, 3]], "f4")
    out = registry.get("ir_roi_pooling").kernel("formal")(x, rois, pooled_h=2, pooled_w=2)
    np.testing.assert_array_equal(out[0, 0], [[5, 7], [13, 15]])


@SETTINGS
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["average", "bilinear"]))
def test_psroi_pooling(seed, mode):
    rng = np.random.default_rng(seed)
    G, D = 2, 2
    C = D * G * G if mode == "average" else D * 2 * 3
    x = arrays((1, C, 6, 7), seed)
    if mode == "average":
        xy = rng.uniform(0, 5, (3, 2))
        rois = np.concatenate([np.zeros((3, 1)), xy, xy + rng.uniform(0, 4, (3, 2))], 1)
    else:
        xy = rng.uniform(0, 0.6, (3, 2))
        rois = np.concatenate([np.zeros((3, 1)), xy, xy + rng.uniform(0, 0.5, (3, 2))], 1)
    a, b = both("ir_psroi_pooling", x, rois.astype("f4"), output_dim=D, group_size=G, spatial_scale=1.0, mode=mode,
                spatial_bins_x=3, spatial_bins_y=2)
    close(a, b)


# --- sequence --------------------------------------------------------------------------------

@SETTINGS
@given(seed=st.integers(0, 10_000), merge=st.booleans())
def test_ctc_greedy(seed, merge):
    rng = np.random.default_rng(seed)
    T, N, C = 7, 3, 4
    data = rng.integers(0, 3, (T, N, C)).astype("f4")     # many ties and repeats
    seq = np.ones((T, N), "f4")
    seq[rng.integers(1, T, N), np.arange(N)] = 0
    a, b = both("ir_ctc_greedy_decoder", data, seq, ctc_merge_repeated=merge)
    np.testing.assert_array_equal(a, b)


def test_ctc_greedy_value():
    T, C = 6, 3                    # blank = 2
    path = [0, 0, 2, 0, 1, 1]
    data = np.zeros((T, 1, C), "f4")
    data[np.arange(T), 0, path] = 1
    out = registry.get("ir_ctc_greedy_decoder").kernel("fast")(data, np.ones((T, 1), "f4"))
    np.testing.assert_array_equal(out[0, :, 0, 0], [0, 0, 1, -1, -1, -1])


@SETTINGS
@given(seed=st.integers(0, 10_000), axes=st.sampled_from([(1, 0), (0, 1), (2, 0), (0, 2), (-1, 1)]))
def test_reverse_sequence(seed, axes):
    x = arrays((3, 4, 5), seed)
    s, b = axes
    n = x.shape[b]
    lengths = np.random.default_rng(seed).integers(0, x.shape[s] + 1, n).astype("f4")
    a, c = both("ir_reverse_sequence", x, lengths, seq_axis=s, batch_axis=b)
    np.testing.assert_array_equal(a, c)
    xs = np.moveaxis(x, (b, s), (0, 1))
    ref = xs.copy()
    for i in range(n):
        k = int(lengths[i])
        ref[i, :k] = xs[i, :k][::-1]
    np.testing.assert_array_equal(np.moveaxis(ref, (0, 1), (b, s)), a)


def test_reverse_sequence_rejects_long_length():
    with pytest.raises(NNEFXError, match="lengths"):
        registry.get("ir_reverse_sequence").kernel("fast")(np.zeros((2, 3), "f4"), np.array([4, 1], "f4"))


# --- misc ------------------------------------------------------------------------------------

@SETTINGS
@given(seed=st.integers(0, 10_000), levels=st.integers(2, 9))
def test_fake_quantize(seed, levels):
    x = arrays((2, 3, 4), seed, -3, 3)
    lo = np.array([-1.0, -2.0, 0.0, -0.5], "f4")
    hi = lo + np.array([2.0, 1.0, 1.5, 0.25], "f4")
    a, b = both("ir_fake_quantize", x, lo, hi, np.float32(-1).reshape(()), np.float32(1).reshape(()), levels=levels)
    close(a, b)
    ref = np.where(x <= lo, -1.0, np.where(x > hi, 1.0,
                   np.floor((x - lo) / (hi - lo) * (levels - 1) + 0.5) / (levels - 1) * 2 - 1))
    close(a, ref)


@SETTINGS
@given(seed=st.integers(0, 10_000), stride=st.integers(1, 2), dil=st.integers(1, 2), groups=st.sampled_from([1, 2]),
       pad=st.integers(0, 2), pad_value=st.sampled_from([-1.0, 1.0, 0.0]))
def test_binary_convolution(seed, stride, dil, groups, pad, pad_value):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, (1, 4, 5, 6)).astype("f4")
    w = rng.integers(0, 2, (4, 4 // groups, 2, 3)).astype("f4")
    kw = dict(padding=[(pad, 1), (0, pad)], stride=[stride, 1], dilation=[1, dil], groups=groups, pad_value=pad_value)
    a, b = both("ir_binary_convolution", x, w, **kw)
    np.testing.assert_array_equal(a, b)
    import torch
    xp = torch.nn.functional.pad(torch.tensor(2 * x - 1), (0, pad, pad, 1), value=pad_value)
    ref = torch.nn.functional.conv2d(xp, torch.tensor(2 * w - 1), stride=(stride, 1), dilation=(1, dil),
                                     groups=groups)
    np.testing.assert_array_equal(a, ref.numpy())


@SETTINGS
@given(seed=st.integers(0, 10_000), k=st.integers(1, 3), omv=st.booleans(), axis=st.sampled_from([[], [1], [-1]]))
def test_argmax(seed, k, omv, axis):
    x = np.random.default_rng(seed).integers(0, 4, (2, 3, 4)).astype("f4")      # ties
    a, b = both("ir_argmax", x, top_k=k, out_max_val=omv, axis=axis)
    np.testing.assert_array_equal(a, b)


def test_argmax_tie_order():
    x = np.array([[1, 3, 3, 0]], "f4")
    out = registry.get("ir_argmax").kernel("formal")(x, top_k=3, out_max_val=True)
    np.testing.assert_array_equal(out[0], [[2, 1, 0], [3, 3, 1]])


@SETTINGS
@given(seed=st.integers(0, 10_000), data=st.data())
def test_strided_slice(seed, data):
    x = arrays((5, 6), seed)
    begin, end, stride, ref = [], [], [], []
    for n in x.shape:
        s = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
        if s > 0:
            b = data.draw(st.integers(0, n))
            e = data.draw(st.integers(b, n))
            ref.append(slice(b, e, s))
        else:
            b = data.draw(st.integers(0, n - 1))
            e = data.draw(st.integers(-1, b))
            ref.append(slice(b, None if e < 0 else e, s))
        begin.append(b)
        end.append(e)
        stride.append(s)
    a, c = both("ir_strided_slice", x, begin=begin, end=end, stride=stride)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, x[tuple(ref)])


@SETTINGS
@given(seed=st.integers(0, 10_000), oh=st.integers(1, 9), ow=st.integers(1, 9), align=st.booleans())
def test_interp(seed, oh, ow, align):
    x = arrays((1, 2, 4, 5), seed)
    a, b = both("ir_interp", x, height=oh, width=ow, align_corners=align)
    close(a, b)


def test_interp_align_corners_matches_torch():
    import torch
    x = arrays((1, 2, 4, 5), 3)
    out = registry.get("ir_interp").kernel("fast")(x, height=7, width=9, align_corners=True)
    ref = torch.nn.functional.interpolate(torch.tensor(x), size=(7, 9), mode="bilinear", align_corners=True)
    close(out, ref.numpy())


@SETTINGS
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["nearest", "linear"]), oh=st.integers(1, 8),
       ow=st.integers(1, 8))
def test_resample(seed, mode, oh, ow):
    x = arrays((1, 2, 3, 4), seed)
    a, b = both("ir_resample", x, output_size=[oh, ow], mode=mode)
    close(a, b)


def test_resample_linear_matches_torch_half_pixel():
    import torch
    x = arrays((1, 2, 3, 4), 5)
    out = registry.get("ir_resample").kernel("formal")(x, output_size=[6, 8], mode="linear")
    ref = torch.nn.functional.interpolate(torch.tensor(x), size=(6, 8), mode="bilinear", align_corners=False)
    close(out, ref.numpy())


def test_attribute_errors_name_the_operation():
    with pytest.raises(NNEFXError, match="ir_fake_quantize.*levels"):
        registry.get("ir_fake_quantize").shape_rule((2,), (1,), (1,), (1,), (1,), levels=1)
    with pytest.raises(NNEFXError, match="ir_reorg_yolo"):
        registry.get("ir_reorg_yolo").shape_rule((1, 2, 5, 4), stride=2)
