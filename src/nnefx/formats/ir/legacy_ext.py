"""Legacy IR layers mapped onto the ``ir_*`` extension operations (:mod:`nnefx.ops.ir`):
detection, RoI pooling, sequence decoding, Quantize, ArgMax, Interp, Resample and
StridedSlice (with the legacy mask polarity)."""

from __future__ import annotations

import numpy as np

from ..reading.registry import ir_layer as layer
from ..reading.shapes import tensor_params
from ..reading.values import Value
from .legacy import axis_of, bad, check, fnum, fnums, legacy_layer, reshape, shape_of, x_of
from .mapping import LayerContext


def _emit(ctx: LayerContext, op: str, n_inputs: int, attrs: dict) -> Value:
    """Emit ``op`` with the layer's inputs bound, in order, to the op's tensor parameters."""
    ctx.expect_inputs(n_inputs)
    params = tensor_params(op) or []
    inputs = {p: ctx.tensor(i) for i, p in enumerate(params[:n_inputs])}
    return ctx.result(ctx.emit1(op, inputs, attrs))


def _caffe_enum(value: str) -> str:
    """'caffe.PriorBoxParameter.CENTER_SIZE' -> 'CENTER_SIZE'."""
    return value.rsplit(".", 1)[-1].upper()


@legacy_layer("ArgMax")
def _argmax(ctx: LayerContext) -> Value:
    top_k = ctx.int("top_k", 1)
    check(ctx, top_k >= 1, "top_k", top_k, "must be >= 1")
    axis = []
    if ctx.has("axis"):
        axis = [axis_of(ctx, "axis", len(shape_of(ctx, 0)))]
    return _emit(ctx, "ir_argmax", 1, {"top_k": top_k, "out_max_val": ctx.bool("out_max_val", False),
                                        "axis": axis})


@legacy_layer(("CTCGreedyDecoder", "CTCGreadyDecoder"))
def _ctc(ctx: LayerContext) -> Value:
    # The catalog's example spells the type "CTCGreadyDecoder" (typo); both names are read.
    return _emit(ctx, "ir_ctc_greedy_decoder", 2, {"ctc_merge_repeated": ctx.bool("ctc_merge_repeated", True)})


@legacy_layer("ReverseSequence")
def _reverse_sequence(ctx: LayerContext) -> Value:
    rank = len(shape_of(ctx, 0))
    s = axis_of(ctx, "seq_axis", rank, 1)
    b = axis_of(ctx, "batch_axis", rank, 0)
    check(ctx, s != b, "seq_axis", s, "must differ from batch_axis")
    # lengths holds one item per batch_axis slice (the catalog's example gives lengths [10] for a
    # batch extent of 3 — inconsistent; the description's "for each slice i" decides).
    return _emit(ctx, "ir_reverse_sequence", 2, {"seq_axis": s, "batch_axis": b})


@legacy_layer("Quantize")
def _quantize(ctx: LayerContext) -> Value:
    levels = ctx.int("levels")
    check(ctx, levels >= 2, "levels", levels, "must be >= 2")
    return _emit(ctx, "ir_fake_quantize", 5, {"levels": levels})


@legacy_layer("RegionYolo")
def _region_yolo(ctx: LayerContext) -> Value:
    coords, classes, num = ctx.int("coords", 4), ctx.int("classes"), ctx.int("num")
    for key, v in (("coords", coords), ("classes", classes), ("num", num)):
        check(ctx, v >= 1, key, v, "must be >= 1")
    soft = ctx.bool("do_softmax", True)
    mask = ctx.ints("mask", [])
    check(ctx, all(0 <= m < num for m in mask), "mask", mask, f"must index the {num} anchors")
    rank = len(shape_of(ctx, 0))
    return _emit(ctx, "ir_region_yolo", 1, {"coords": coords, "classes": classes, "num": num, "do_softmax": soft,
                                            "mask": mask, "axis": axis_of(ctx, "axis", rank, 1),
                                            "end_axis": axis_of(ctx, "end_axis", rank, -1)})


@legacy_layer("ReorgYolo")
def _reorg_yolo(ctx: LayerContext) -> Value:
    stride = ctx.int("stride")
    check(ctx, stride >= 1, "stride", stride, "must be >= 1")
    return _emit(ctx, "ir_reorg_yolo", 1, {"stride": stride})


@legacy_layer("ROIPooling")
def _roi_pooling(ctx: LayerContext) -> Value:
    ph, pw = ctx.int("pooled_h"), ctx.int("pooled_w")
    check(ctx, ph >= 1, "pooled_h", ph, "must be >= 1")
    check(ctx, pw >= 1, "pooled_w", pw, "must be >= 1")
    scale = fnum(ctx, "spatial_scale", 1.0)
    check(ctx, scale > 0, "spatial_scale", scale, "must be > 0")
    method = ctx.choice("method", ("max", "bilinear"), "max")
    return _emit(ctx, "ir_roi_pooling", 2, {"pooled_h": ph, "pooled_w": pw, "spatial_scale": scale,
                                            "method": method})


@legacy_layer("PSROIPooling")
def _psroi(ctx: LayerContext) -> Value:
    out_dim, group = ctx.int("output_dim"), ctx.int("group_size", 1)
    check(ctx, out_dim >= 1, "output_dim", out_dim, "must be >= 1")
    check(ctx, group >= 1, "group_size", group, "must be >= 1")
    scale = fnum(ctx, "spatial_scale", 1.0)
    check(ctx, scale > 0, "spatial_scale", scale, "must be > 0")
    mode = ctx.choice("mode", ("average", "bilinear"), "average")
    bx, by = ctx.int("spatial_bins_x", 1), ctx.int("spatial_bins_y", 1)
    check(ctx, bx >= 1, "spatial_bins_x", bx, "must be >= 1")
    check(ctx, by >= 1, "spatial_bins_y", by, "must be >= 1")
    return _emit(ctx, "ir_psroi_pooling", 2, {"output_dim": out_dim, "group_size": group, "spatial_scale": scale,
                                              "mode": mode, "spatial_bins_x": bx, "spatial_bins_y": by})


def _variance(ctx: LayerContext) -> list[float]:
    v = fnums(ctx, "variance", [])
    check(ctx, len(v) in (0, 1, 4), "variance", v, "needs 0, 1 or 4 values")
    check(ctx, all(x > 0 for x in v), "variance", v, "must be > 0")
    return v


@legacy_layer("PriorBox")
def _prior_box(ctx: LayerContext) -> Value:
    min_size = fnums(ctx, "min_size")
    max_size = fnums(ctx, "max_size", [])
    ar = fnums(ctx, "aspect_ratio", [])
    check(ctx, len(min_size) > 0 and all(s > 0 for s in min_size), "min_size", min_size, "must be positive")
    check(ctx, len(max_size) <= len(min_size), "max_size", max_size, "is longer than min_size")
    check(ctx, all(m > s for m, s in zip(max_size, min_size, strict=False)), "max_size", max_size,
          "must exceed min_size")
    check(ctx, all(a > 0 for a in ar), "aspect_ratio", ar, "must be positive")
    step = fnum(ctx, "step", 0.0)
    check(ctx, step >= 0, "step", step, "must be >= 0")
    offset = fnum(ctx, "offset", 0.5)
    check(ctx, 0 <= offset <= 1, "offset", offset, "must lie in [0, 1]")
    sas = ctx.bool("scale_all_sizes", True)
    check(ctx, sas, "scale_all_sizes", sas, "= false is not supported")
    for key in ("fixed_size", "fixed_ratio", "density"):
        if fnums(ctx, key, []):
            raise bad(ctx, key, ctx.str(key), "is not supported")
    return _emit(ctx, "ir_prior_box", 2, {"min_size": min_size, "max_size": max_size, "aspect_ratio": ar,
                                          "flip": ctx.bool("flip", False), "clip": ctx.bool("clip", False),
                                          "step": step, "offset": offset, "variance": _variance(ctx),
                                          "scale_all_sizes": True})


@legacy_layer("PriorBoxClustered")
def _prior_box_clustered(ctx: LayerContext) -> Value:
    width, height = fnums(ctx, "width"), fnums(ctx, "height")
    check(ctx, len(width) == len(height) and width, "width", width, f"must pair with height {height}")
    check(ctx, all(w > 0 for w in width + height), "width", width, "and height must be positive")
    attrs = {"width": width, "height": height, "clip": ctx.bool("clip", False), "offset": fnum(ctx, "offset", 0.5),
             "variance": _variance(ctx), "img_w": ctx.int("img_w", 0), "img_h": ctx.int("img_h", 0)}
    for key in ("step", "step_w", "step_h"):
        attrs[key] = fnum(ctx, key, 0.0)
        check(ctx, attrs[key] >= 0, key, attrs[key], "must be >= 0")
    check(ctx, attrs["img_w"] >= 0 and attrs["img_h"] >= 0, "img_w", attrs["img_w"], "must be >= 0")
    return _emit(ctx, "ir_prior_box_clustered", 2, attrs)


@legacy_layer("DetectionOutput")
def _detection_output(ctx: LayerContext) -> Value:
    if ctx.n_inputs != 3:
        raise ctx.error(f"expects 3 inputs (loc, conf, priors), has {ctx.n_inputs}; the 5-input form is not "
                        "supported")
    nc = ctx.int("num_classes")
    check(ctx, nc >= 1, "num_classes", nc, "must be >= 1")
    raw_code = ctx.str("code_type", "caffe.PriorBoxParameter.CORNER")
    code = _caffe_enum(raw_code)
    check(ctx, code in ("CORNER", "CENTER_SIZE", "CORNER_SIZE"), "code_type", raw_code,
          "is not CORNER, CENTER_SIZE or CORNER_SIZE")
    nms = fnum(ctx, "nms_threshold")
    check(ctx, 0 <= nms <= 1, "nms_threshold", nms, "must lie in [0, 1]")
    bg = ctx.int("background_label_id", 0)
    check(ctx, -1 <= bg < nc, "background_label_id", bg, f"must lie in [-1, {nc})")
    top_k, keep = ctx.int("top_k", -1), ctx.int("keep_top_k", -1)
    check(ctx, top_k == -1 or top_k >= 1, "top_k", top_k, "must be -1 or >= 1")
    check(ctx, keep == -1 or keep >= 1, "keep_top_k", keep, "must be -1 or >= 1")
    for key, default in (("decrease_label_id", False),):
        if ctx.bool(key, default):
            raise bad(ctx, key, ctx.str(key), "is not supported")
    if not ctx.bool("normalized", True):
        raise bad(ctx, "normalized", ctx.str("normalized"), "— only normalized boxes are supported")
    attrs = {"num_classes": nc, "background_label_id": bg, "top_k": top_k, "keep_top_k": keep, "code_type": code,
             "share_location": ctx.bool("share_location", True), "nms_threshold": nms,
             "confidence_threshold": fnum(ctx, "confidence_threshold", 0.0),
             "variance_encoded_in_target": ctx.bool("variance_encoded_in_target", False),
             "clip_before_nms": ctx.bool("clip_before_nms", False) or ctx.bool("clip", False),
             "clip_after_nms": ctx.bool("clip_after_nms", False)}
    # conf may arrive as [N, P*C] or with trailing singletons; flatten loc/conf to 2-D.
    loc, conf = ctx.tensor(0), ctx.tensor(1)
    ls, cs = shape_of(ctx, 0), shape_of(ctx, 1)
    if len(ls) != 2:
        loc = reshape(ctx, loc, [ls[0], int(np.prod(ls[1:]))])
    if len(cs) != 2:
        conf = reshape(ctx, conf, [cs[0], int(np.prod(cs[1:]))])
    y = ctx.emit1("ir_detection_output", {"loc": loc, "conf": conf, "prior": ctx.tensor(2)}, attrs)
    return ctx.result(y)


def _rpn_common(ctx: LayerContext, nms_key: str) -> dict:
    pre, post = ctx.int("pre_nms_topn"), ctx.int("post_nms_topn")
    check(ctx, pre >= 1, "pre_nms_topn", pre, "must be >= 1")
    check(ctx, post >= 1, "post_nms_topn", post, "must be >= 1")
    thr = fnum(ctx, nms_key)
    check(ctx, 0 <= thr <= 1, nms_key, thr, "must lie in [0, 1]")
    fs = ctx.int("feat_stride")
    check(ctx, fs >= 1, "feat_stride", fs, "must be >= 1")
    scale = fnums(ctx, "scale")
    check(ctx, len(scale) > 0 and all(s > 0 for s in scale), "scale", scale, "must be positive")
    return {"pre_nms_topn": pre, "post_nms_topn": post, "feat_stride": fs, "scale": scale}


@legacy_layer("Proposal")
def _proposal(ctx: LayerContext) -> Value:
    return _emit(ctx, "ir_proposal", 3, _proposal_attrs(ctx))


@layer("Proposal", ("opset1", "opset4"))
def _proposal_opset(ctx: LayerContext) -> Value | list[Value]:
    """Proposal-1 is the legacy layer with a 1-D image info ([3] or [4]); Proposal-4 adds a
    second output, the score of each proposal row, which is ``ir_proposal_scored``'s."""
    attrs = _proposal_attrs(ctx)
    if ctx.version == "opset1":
        return _emit(ctx, "ir_proposal", 3, attrs)
    ctx.expect_inputs(3)
    rois, scores = ctx.emit("ir_proposal_scored", {"cls_prob": ctx.tensor(0), "bbox_pred": ctx.tensor(1),
                                                   "im_info": ctx.tensor(2)}, attrs, outputs=2)
    return [ctx.result(rois, port=0), ctx.result(scores, port=1)]


def _proposal_attrs(ctx: LayerContext) -> dict:
    attrs = _rpn_common(ctx, "nms_thresh")
    framework = ctx.str("framework", "").lower()
    check(ctx, framework in ("", "caffe"), "framework", framework, "is not supported (only the Caffe form)")
    base, min_size = ctx.int("base_size"), ctx.int("min_size")
    check(ctx, base >= 1, "base_size", base, "must be >= 1")
    check(ctx, min_size >= 0, "min_size", min_size, "must be >= 0")
    ratio = fnums(ctx, "ratio")
    check(ctx, len(ratio) > 0 and all(r > 0 for r in ratio), "ratio", ratio, "must be positive")
    attrs.update(base_size=base, min_size=min_size, ratio=ratio, nms_thresh=fnum(ctx, "nms_thresh"),
                 clip_before_nms=ctx.bool("clip_before_nms", True), clip_after_nms=ctx.bool("clip_after_nms", False),
                 normalize=ctx.bool("normalize", False), box_size_scale=fnum(ctx, "box_size_scale", 1.0),
                 box_coordinate_scale=fnum(ctx, "box_coordinate_scale", 1.0))
    check(ctx, attrs["box_size_scale"] > 0, "box_size_scale", attrs["box_size_scale"], "must be > 0")
    check(ctx, attrs["box_coordinate_scale"] > 0, "box_coordinate_scale", attrs["box_coordinate_scale"],
          "must be > 0")
    return attrs


@legacy_layer("SimplerNMS")
def _simpler_nms(ctx: LayerContext) -> Value:
    attrs = _rpn_common(ctx, "iou_threshold")
    mb = ctx.int("min_bbox_size")
    check(ctx, mb >= 0, "min_bbox_size", mb, "must be >= 0")
    attrs.update(iou_threshold=fnum(ctx, "iou_threshold"), min_bbox_size=mb,
                 cls_threshold=fnum(ctx, "cls_threshold", 0.0))
    return _emit(ctx, "ir_simpler_nms", 3, attrs)


@legacy_layer("Interp")
def _interp(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape = shape_of(ctx, 0)
    if len(shape) != 4:
        raise ctx.error(f"input must be 4-D, has rank {len(shape)}")
    pb, pe = ctx.int("pad_beg", 0), ctx.int("pad_end", 0)
    check(ctx, pb == 0, "pad_beg", pb, "must be 0 (cropping is not supported)")
    check(ctx, pe == 0, "pad_end", pe, "must be 0 (cropping is not supported)")
    H, W = shape[2], shape[3]
    if ctx.n_inputs == 2:
        oh, ow = shape_of(ctx, 1)[2:4]
    elif ctx.int("height", 0) > 0 or ctx.int("width", 0) > 0:
        oh, ow = ctx.int("height"), ctx.int("width")
    elif ctx.has("factor") and fnum(ctx, "factor") != 0:
        f = fnum(ctx, "factor")
        check(ctx, f > 0, "factor", f, "must be > 0")
        oh, ow = int(H * f), int(W * f)
    elif ctx.has("zoom_factor") or ctx.has("shrink_factor"):
        z, s = ctx.int("zoom_factor", 1), ctx.int("shrink_factor", 1)
        check(ctx, z >= 1, "zoom_factor", z, "must be >= 1")
        check(ctx, s >= 1, "shrink_factor", s, "must be >= 1")
        oh, ow = (H - 1) // s + 1, (W - 1) // s + 1
        oh, ow = oh + (oh - 1) * (z - 1), ow + (ow - 1) * (z - 1)
    else:
        dims = ctx.out_dims()
        if not dims or dims[2] is None or dims[3] is None:
            raise ctx.error("Interp needs height/width, factor, zoom/shrink factors or output dims")
        oh, ow = dims[2], dims[3]
    check(ctx, oh >= 1 and ow >= 1, "height", oh, f"(and width {ow}) must be >= 1")
    y = ctx.emit1("ir_interp", {"input": x_of(ctx)}, {"height": int(oh), "width": int(ow),
                                                      "align_corners": ctx.bool("align_corners", True)})
    return ctx.result(y)


@legacy_layer("Resample")
def _resample(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape = shape_of(ctx, 0)
    kind = _caffe_enum(ctx.str("type", "caffe.ResampleParameter.NEAREST"))
    check(ctx, kind in ("NEAREST", "LINEAR"), "type", ctx.str("type"), "is not NEAREST or LINEAR")
    aa = ctx.bool("antialias", False)
    check(ctx, not aa, "antialias", aa, "= 1 is not supported")
    spatial = list(shape[2:])
    if ctx.n_inputs == 2:                                   # type 2: the output dims as data
        dims = ctx.const_ints(1, "output dims")
        check(ctx, len(dims) == len(shape), "input 1", dims, f"needs {len(shape)} items")
        check(ctx, list(dims[:2]) == list(shape[:2]), "input 1", dims, "must keep batch and channels")
        out = list(dims[2:])
        factor = None
    else:                                                    # type 1: a factor
        factor = fnum(ctx, "factor")
        check(ctx, factor > 0, "factor", factor, "must be > 0")
        out = [int(d * factor) for d in spatial]
    check(ctx, all(o >= 1 for o in out), "factor", factor, "gives an empty output")
    x = x_of(ctx)
    mode = kind.lower()
    if mode == "nearest" and factor is not None and factor == int(factor) and factor >= 1:
        # an integer nearest up-sampling is NNEF's nearest_upsample exactly
        return ctx.result(ctx.emit1("nearest_upsample", {"input": x}, {"factor": [int(factor)] * len(spatial)}))
    return ctx.result(ctx.emit1("ir_resample", {"input": x}, {"output_size": out, "mode": mode}))


# ---------------------------------------------------------------------------------------------
# StridedSlice
# ---------------------------------------------------------------------------------------------


def _mask(ctx: LayerContext, key: str, n: int) -> list[int]:
    m = ctx.ints(key, [])
    check(ctx, all(v in (0, 1) for v in m), key, m, "must hold 0/1 flags")
    return list(m) + [0] * max(0, n - len(m))


def resolve_strided_slice(ctx: LayerContext, shape: tuple, begin: list[int], end: list[int], stride: list[int]):
    """Resolve a legacy StridedSlice into per-input-axis (begin, end, stride) with no wrapping
    and the final output shape (new and shrunk axes applied).

    Legacy mask polarity: begin_mask/end_mask flag 1 means *use* the given value and 0 means
    ignore it (take the whole range) — the inverse of TensorFlow and of IR v10 StridedSlice.
    new_axis_mask, shrink_axis_mask and ellipsis_mask keep the usual meaning (1 = apply)."""
    n = len(begin)
    check(ctx, len(end) == n and len(stride) == n, "input 2", end, "begin, end and stride lengths differ")
    use_b = _mask(ctx, "begin_mask", n) if ctx.has("begin_mask") else [1] * n
    use_e = _mask(ctx, "end_mask", n) if ctx.has("end_mask") else [1] * n
    new = _mask(ctx, "new_axis_mask", n)
    shrink = _mask(ctx, "shrink_axis_mask", n)
    ell = _mask(ctx, "ellipsis_mask", n)
    check(ctx, sum(ell[:n]) <= 1, "ellipsis_mask", ell, "has more than one ellipsis")
    check(ctx, all(s != 0 for s in stride), "input 3", stride, "stride must not be 0")
    rank = len(shape)
    consumed = sum(1 for i in range(n) if not new[i] and not ell[i])
    rb, re, rs, out_shape = [], [], [], []
    axis = 0
    for i in range(n):
        if ell[i]:
            for _ in range(rank - consumed):
                if axis >= rank:
                    break
                rb.append(0)
                re.append(shape[axis])
                rs.append(1)
                out_shape.append(shape[axis])
                axis += 1
            continue
        if new[i]:
            out_shape.append(1)
            continue
        if axis >= rank:
            raise ctx.error(f"the slice specification addresses more axes than the input's {rank}")
        d = shape[axis]
        s = stride[i]
        if shrink[i]:
            b = begin[i] + d if begin[i] < 0 else begin[i]
            if not 0 <= b < d:
                raise ctx.error(f"shrunk axis {axis}: index {begin[i]} is outside [0, {d})")
            rb.append(b)
            re.append(b + 1)
            rs.append(1)
        else:
            if s > 0:
                b = 0 if not use_b[i] else min(max(begin[i] + d if begin[i] < 0 else begin[i], 0), d)
                e = d if not use_e[i] else min(max(end[i] + d if end[i] < 0 else end[i], 0), d)
                e = max(e, b)
                count = -(-(e - b) // s)
            else:
                b = d - 1 if not use_b[i] else min(max(begin[i] + d if begin[i] < 0 else begin[i], -1), d - 1)
                e = -1 if not use_e[i] else min(max(end[i] + d if end[i] < 0 else end[i], -1), d - 1)
                e = min(e, b)
                count = -(-(b - e) // -s)
            rb.append(b)
            re.append(e)
            rs.append(s)
            out_shape.append(count)
        axis += 1
    while axis < rank:
        rb.append(0)
        re.append(shape[axis])
        rs.append(1)
        out_shape.append(shape[axis])
        axis += 1
    return rb, re, rs, out_shape


@legacy_layer("StridedSlice")
def _strided_slice(ctx: LayerContext) -> Value:
    ctx.expect_inputs(3, 4)
    shape = shape_of(ctx, 0)
    begin, end = ctx.const_ints(1, "begin"), ctx.const_ints(2, "end")
    stride = ctx.const_ints(3, "stride") if ctx.n_inputs == 4 else [1] * len(begin)
    rb, re, rs, out_shape = resolve_strided_slice(ctx, shape, begin, end, stride)
    if ctx.is_const(0):
        arr = np.asarray(ctx.const(0))
        sl = tuple(slice(b, None if e < 0 else e, s) for b, e, s in zip(rb, re, rs, strict=True))
        return ctx.folded(arr[sl].reshape(out_shape))
    x = x_of(ctx)
    if all(s == 1 for s in rs):
        y = ctx.emit1("slice", {"input": x}, {"axes": list(range(len(shape))), "begin": rb, "end": re},
                      dtype="scalar")
    else:
        y = ctx.emit1("ir_strided_slice", {"input": x}, {"begin": rb, "end": re, "stride": rs}, dtype="scalar")
    sliced = ctx.builder.graph.tensors[y].shape
    if sliced is None or list(sliced) != list(out_shape):
        y = reshape(ctx, y, out_shape)
    return ctx.result(y)
