"""Detection operators: how each operator is read from IR and ONNX (and written, below).

NonMaxSuppression, PriorBox, PriorBoxClustered (folded while loading: their outputs depend only on sizes).

Specifications: OpenVINO opset docs: NonMaxSuppression-1/3/4/5/9, PriorBox-1/8, PriorBoxClustered-1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Operation
from ..export.lowering import (
    binop,
    out,
    reshape,
    scalar,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64
from ..onnx.writer import ExportContext as OnnxContext
from ..onnx.writer import tensor_type
from ..reading.context import NodeContext
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, element_type
from ._common import onnx_carried, onnx_const, onnx_need

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

@operator("NonMaxSuppression", ANY)
def _nms(ctx: NodeContext):
    def scalar(i: int, what: str, default):
        if ctx.n_inputs <= i:
            return default
        return np.asarray(ctx.const(i, what)).reshape(-1)[0].item()

    max_out = int(scalar(2, "max_output_boxes_per_class", 0))
    iou = float(scalar(3, "iou_threshold", 0.0))
    score = float(scalar(4, "score_threshold", float(np.finfo(np.float32).min)))
    sigma = float(scalar(5, "soft_nms_sigma", 0.0))
    encoding = ctx.choice("box_encoding", ("corner", "center"), "corner")
    sort = ctx.bool("sort_result_descending", True)
    iet = element_type(ctx.str("output_type", "i64"), ctx.location)
    if ctx.version not in ("opset5", "opset9") and ctx.n_outputs == 1:
        raise ctx.error(f"NonMaxSuppression {ctx.version} (fixed-size output) is not supported")
    outs = ctx.emit("non_max_suppression", {"boxes": ctx.tensor(0), "scores": ctx.tensor(1)},
                    {"max_output_boxes_per_class": max_out, "iou_threshold": iou, "score_threshold": score,
                     "soft_nms_sigma": sigma, "box_encoding": encoding, "sort_result_descending": sort},
                    outputs=3)
    ctx.builder.graph.tensors[outs[0]].dtype = "integer"
    ctx.builder.graph.tensors[outs[2]].dtype = "integer"
    return [ctx.result(outs[0], iet, port=0), ctx.result(outs[1], port=1), ctx.result(outs[2], iet, port=2)]

@onnx_node("NonMaxSuppression")
def _onnx_nms(r, attrs, ins):
    boxes, scores = onnx_need(r, ins, 0, "boxes"), onnx_need(r, ins, 1, "scores")

    def scalar(i: int, what: str, default):
        if len(ins) <= i or ins[i] is None:
            return default
        a = np.asarray(onnx_const(r, ins[i], what)).reshape(-1)
        if a.size != 1:
            raise r.error(f"{what} must hold one value, holds {a.size}")
        return a[0].item()

    max_out = int(scalar(2, "max_output_boxes_per_class", 0))
    iou = float(scalar(3, "iou_threshold", 0.0))
    if not 0.0 <= iou <= 1.0:
        raise r.error(f"iou_threshold must lie in [0, 1], is {iou}")
    score = float(scalar(4, "score_threshold", float(np.finfo(np.float32).min)))
    center = int(attrs.get("center_point_box", 0))
    if center not in (0, 1):
        raise r.error(f"center_point_box must be 0 or 1, is {center}")
    c = r.ctx([boxes, scores])
    outs = c.emit("non_max_suppression", {"boxes": c.tensor(0), "scores": c.tensor(1)},
                  {"max_output_boxes_per_class": max(max_out, 0), "iou_threshold": iou, "score_threshold": score,
                   "soft_nms_sigma": 0.0, "box_encoding": "center" if center else "corner",
                   "sort_result_descending": False}, outputs=3)
    r.builder.graph.tensors[outs[0]].dtype = "integer"
    r.builder.graph.tensors[outs[2]].dtype = "integer"
    return c.result(outs[0], "i64")

# --- SSD-style detection layers (kernels shared with the legacy catalog) -----------------------------------


def _prior_sizes(ctx: NodeContext) -> tuple[list[int], list[int]]:
    out = ctx.const_ints(0, "output_size")
    img = ctx.const_ints(1, "image_size")
    if len(out) != 2 or len(img) != 2 or min(out + img) < 1:
        raise ctx.error(f"output_size {out} and image_size {img} must be two positive extents each")
    return out, img


def _fold_prior(ctx: NodeContext, op: str, attrs: dict) -> Value:
    """PriorBox outputs depend only on sizes and attributes: computed while loading."""
    from ...ops import registry

    out, img = _prior_sizes(ctx)
    grid = np.zeros((1, 1, out[0], out[1]), np.float32)
    image = np.zeros((1, 1, img[0], img[1]), np.float32)
    try:
        y = registry.get(op).kernel("fast")(grid, image, **attrs)
    except NNEFXError as exc:
        raise ctx.error(exc.message) from None
    y = np.asarray(y, dtype=np.float32)
    return ctx.folded(y.reshape(2, -1), "f32")


@operator("PriorBox", ANY)
def _prior_box(ctx: NodeContext):
    for key in ("fixed_size", "fixed_ratio", "density"):
        if ctx.floats(key, []):
            raise ctx.error(f"attribute '{key}' is not supported")
    if ctx.version == "opset8" and not ctx.bool("min_max_aspect_ratios_order", True):
        raise ctx.error("min_max_aspect_ratios_order = false is not supported")
    attrs = {"min_size": ctx.floats("min_size"), "max_size": ctx.floats("max_size", []),
             "aspect_ratio": ctx.floats("aspect_ratio", []), "flip": ctx.bool("flip", False),
             "clip": ctx.bool("clip", False), "step": ctx.float("step", 0.0), "offset": ctx.float("offset", 0.5),
             "variance": ctx.floats("variance", []), "scale_all_sizes": ctx.bool("scale_all_sizes", True)}
    return _fold_prior(ctx, "ir_prior_box", attrs)


@operator("PriorBoxClustered", ANY)
def _prior_box_clustered(ctx: NodeContext):
    attrs = {"width": ctx.floats("width"), "height": ctx.floats("height"), "clip": ctx.bool("clip", False),
             "offset": ctx.float("offset", 0.5), "variance": ctx.floats("variance", []),
             "step": ctx.float("step", 0.0), "step_w": ctx.float("step_w", 0.0), "step_h": ctx.float("step_h", 0.0)}
    return _fold_prior(ctx, "ir_prior_box_clustered", attrs)


# --- ONNX RoiAlign (its own operation: ONNX's border and max rules differ from NNEF's) ------------

@onnx_node("RoiAlign")
def _onnx_roi_align(r, attrs, ins):
    x, rois, idx = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "rois"), onnx_need(r, ins, 2, "batch_indices")
    onnx_carried(r, x, rois)
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel" if r.opset >= 16 else "output_half_pixel")
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise r.error(f"unknown coordinate_transformation_mode '{ctm}' (known: half_pixel, output_half_pixel)")
    c = r.ctx([x, rois, idx])
    index = c.tensor(2) if idx.etype == "i64" else c.emit1("convert_element_type", {"input": c.tensor(2)},
                                                           {"destination_type": "i64"}, dtype="integer")
    y = c.emit1("onnx_roi_align", {"input": c.tensor(0), "rois": c.tensor(1), "batch_indices": index},
                {"mode": attrs.get("mode", "avg"), "output_height": int(attrs.get("output_height", 1)),
                 "output_width": int(attrs.get("output_width", 1)),
                 "sampling_ratio": int(attrs.get("sampling_ratio", 0)),
                 "spatial_scale": float(attrs.get("spatial_scale", 1.0)), "half_pixel": ctm == "half_pixel"})
    return c.result(y, x.etype)


# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------

def _proposal_layer_attrs(a: dict) -> dict:
    return {"base_size": int(a["base_size"]), "pre_nms_topn": int(a["pre_nms_topn"]),
            "post_nms_topn": int(a["post_nms_topn"]), "nms_thresh": float(a["nms_thresh"]),
            "feat_stride": int(a["feat_stride"]), "min_size": int(a["min_size"]),
            "ratio": [float(v) for v in a["ratio"]], "scale": [float(v) for v in a["scale"]],
            "clip_before_nms": bool(a.get("clip_before_nms", True)),
            "clip_after_nms": bool(a.get("clip_after_nms", False)), "normalize": bool(a.get("normalize", False)),
            "box_size_scale": float(a.get("box_size_scale", 1.0)),
            "box_coordinate_scale": float(a.get("box_coordinate_scale", 1.0)), "framework": ""}


def _proposal_inputs(ctx: IRContext, op: Operation) -> list:
    info = op.inputs["im_info"]
    n = int(np.prod(ctx.shape(info), dtype=np.int64))
    if ctx.shape(op.inputs["cls_prob"])[0] != 1 or n not in (3, 4):
        raise ctx.fail("only batch 1 with a 3- or 4-item image info has a Proposal form")
    return [op.inputs["cls_prob"], op.inputs["bbox_pred"], reshape(ctx, info, (n,))]


# --- ONNX helpers ----------------------------------------------------------------------------

F64 = np.dtype(np.float64)


def _extents(ctx: OnnxContext, xd: tuple) -> tuple[int, ...]:
    """The input's spatial extents, which must be static: the row index arithmetic of the
    resampling and the cell masks of the pooling span them."""
    if any(d is None for d in xd[2:]):
        raise ctx.fail(f"the input's spatial extents {list(xd[2:])} are not static (the RoI sampling indices and "
                       "cells are computed against them); give the input shapes when loading")
    return tuple(int(d) for d in xd[2:])


def _batch_index(ctx: OnnxContext, op: Operation, n: int | None) -> str:
    """The batch index as an int64 (N,) value (NNEF allows (N,) and (N, 1))."""
    index = ctx.ref(op.inputs["batch_index"], I64)
    if ctx.rank(index) != 1:
        index = ctx.node("Reshape", [index, ctx.ints([-1])], (n,))
    if ctx.dtype(index) != I64:
        index = ctx.node("Cast", [index], (n,), dtype=I64, to=tensor_type(I64))
    return index


def _columns(ctx: OnnxContext, rois: str, m: int, dtype: Any) -> list[tuple[str, str]]:
    """(start, end) of each spatial axis as (N, 1) values in ``dtype``."""
    n = ctx.dims(rois)[0]
    src = rois if ctx.dtype(rois) == dtype else ctx.node("Cast", [rois], ctx.dims(rois), dtype=dtype,
                                                         to=tensor_type(dtype))

    def col(k: int) -> str:
        return ctx.node("Gather", [src, ctx.ints([k])], (n, 1), axis=1)

    return [(col(k), col(m + k)) for k in range(m)]


def _pick_items(ctx: OnnxContext, per_item: str, index: str, shape: tuple) -> str:
    """``per_item[n, index[n]]`` for a value of shape (N, B, ...): each RoI's own batch item."""
    n = ctx.dims(index)[0]
    idx = ctx.node("Unsqueeze", [index, ctx.ints([1])], (n, 1))
    return ctx.node("GatherND", [per_item, idx], shape, batch_dims=1)


def _spread(ctx: OnnxContext, v: Any, positions: list[int], rank: int) -> Any:
    """``v`` with unit axes inserted so that its axes land at ``positions`` of a rank-``rank``
    value (broadcasting against it)."""
    axes = [a for a in range(rank) if a not in positions]
    if not axes:
        return v
    d = ctx.dims(v)
    dims = [1] * rank
    for p, e in zip(positions, d, strict=True):
        dims[p] = e
    return ctx.node("Unsqueeze", [v, ctx.ints(axes)], tuple(dims))


def _taps(ctx: OnnxContext, start: str, end: str, o: int, method: str) -> str:
    """NNEF's sampling coordinates (N, o) of RoIs [start, end) (N, 1), in float64 and in the
    order of operations of :func:`nnefx.ops.roi.resample_taps`, so they are its values."""
    r = binop(ctx, "sub", end, start)
    i = np.arange(o, dtype=np.float64).reshape(1, o)
    if method == "symmetric":      # start + (i + 0.5) * r / o - 0.5
        step = binop(ctx, "div", binop(ctx, "mul", ctx.const(i + 0.5), r), ctx.const(np.asarray(o, F64)))
        return binop(ctx, "sub", binop(ctx, "add", start, step), ctx.const(np.asarray(0.5, F64)))
    if method == "asymmetric":     # start + i * r / o
        step = binop(ctx, "div", binop(ctx, "mul", ctx.const(i), r), ctx.const(np.asarray(o, F64)))
        return binop(ctx, "add", start, step)
    if o == 1:                     # 'aligned': start + i * (r - 1) / (o - 1), start when o = 1
        return start
    span = binop(ctx, "sub", r, ctx.const(np.asarray(1.0, F64)))
    step = binop(ctx, "div", binop(ctx, "mul", ctx.const(i), span), ctx.const(np.asarray(o - 1, F64)))
    return binop(ctx, "add", start, step)


def resample(ctx: OnnxContext, op: Operation, size: list[int], method: str) -> str:
    """The RoIs of ``op``'s input resampled to ``size`` by ``method`` (N, C, size...).

    Every output element is NNEF's sum over the 2^M corners of the interpolation cell of
    weight x input, as in :func:`nnefx.ops.roi._roi_resample_formal`: coordinates, corner
    weights and the sum in float64 (the kernel's values), the corners' input values read by
    one ``Gather`` each from the input laid out as rows of channels (batch item and position
    flattened, indices clamped into the input).  Memory is 2^M output-sized values.
    """
    from ...ops.resize import UPSAMPLE_METHODS

    if method not in UPSAMPLE_METHODS:
        raise ctx.fail(f"method '{method}' is not one of {', '.join(UPSAMPLE_METHODS)}")
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    m = len(xd) - 2
    extents = _extents(ctx, xd)
    rois = ctx.ref(op.inputs["rois"])
    n, c = ctx.dims(rois)[0], xd[1]
    index = _batch_index(ctx, op, n)
    size = [int(s) for s in size]
    # the input as rows of channels: row ((b * X0 + p0) * X1 + p1) ... holds x[b, :, p0, p1, ...]
    perm = [0] + list(range(2, m + 2)) + [1]
    xt = ctx.node("Transpose", [x], tuple(xd[p] for p in perm), perm=perm)
    volume = int(np.prod(extents, dtype=np.int64))
    rows = ctx.node("Flatten", [xt], (None if xd[0] is None else xd[0] * volume, c), axis=m + 1)
    lows, highs, weights = [], [], []
    for k, (start, end) in enumerate(_columns(ctx, rois, m, F64)):
        coord = _taps(ctx, start, end, size[k], method)
        floor = unop(ctx, "floor", coord)
        frac = binop(ctx, "sub", coord, floor)
        j = ctx.node("Cast", [floor], ctx.dims(floor), dtype=I64, to=tensor_type(I64))
        hi = binop(ctx, "add", j, ctx.const(np.asarray(1, np.int64)))
        bounds = [ctx.const(np.asarray(0, np.int64)), ctx.const(np.asarray(extents[k] - 1, np.int64))]
        lows.append(_spread(ctx, ctx.node("Clip", [j] + bounds, ctx.dims(j)), [0, 1 + k], 1 + m))
        highs.append(_spread(ctx, ctx.node("Clip", [hi] + bounds, ctx.dims(hi)), [0, 1 + k], 1 + m))
        weights.append((_spread(ctx, binop(ctx, "sub", ctx.const(np.asarray(1.0, F64)), frac), [0, 1 + k], 1 + m),
                        _spread(ctx, frac, [0, 1 + k], 1 + m)))
    base: str = ctx.node("Reshape", [index, ctx.ints([-1] + [1] * m)], (n,) + (1,) * m)
    out_dims = (n,) + tuple(size)
    total: str | None = None
    for corner in np.ndindex(*(2,) * m):
        flat, weight = base, None
        for k in range(m):
            flat = binop(ctx, "add", binop(ctx, "mul", flat, ctx.const(np.asarray(extents[k], np.int64))),
                         highs[k] if corner[k] else lows[k])
            w = weights[k][corner[k]]
            weight = w if weight is None else binop(ctx, "mul", weight, w)
        assert weight is not None
        value = ctx.node("Gather", [rows, flat], out_dims + (c,), axis=0)
        value = ctx.node("Cast", [value], out_dims + (c,), dtype=F64, to=tensor_type(F64))
        wc = ctx.node("Unsqueeze", [weight, ctx.ints([m + 1])], ctx.dims(weight) + (1,))
        term = binop(ctx, "mul", wc, value)
        total = term if total is None else binop(ctx, "add", total, term)
    assert total is not None
    y = ctx.node("Cast", [total], out_dims + (c,), dtype=F32, to=tensor_type(F32))
    back = [0, m + 1] + list(range(1, m + 1))
    return ctx.node("Transpose", [y], (n, c) + tuple(size), perm=back)


def _roi_align_exact(ctx: OnnxContext, op: Operation) -> str | None:
    """Why ``op`` cannot be one RoiAlign node, or None when it can (see the module text)."""
    from ...ops.roi import resample_taps

    if str(op.attribs.get("resize_method", "symmetric")) != "symmetric":
        return "only resize_method 'symmetric' is RoiAlign's 'half_pixel' sampling"
    rate = [int(s) for s in op.attribs["sampling_rate"]]
    if len(rate) != 2 or rate[0] != rate[1]:
        return f"RoiAlign has one sampling_ratio for both axes, not {rate}"
    boxes = ctx.data(op.inputs["rois"])
    if boxes is None:
        return "the RoIs are computed at run time, and RoiAlign reads 0 (not the edge) beyond one pixel outside"
    xd = ctx.dims(op.inputs["input"])
    if any(d is None for d in xd[2:]):
        return "the input's spatial extents are not static"
    size = [int(o) * s for o, s in zip(op.attribs["output_size"], rate, strict=True)]
    margin = 1e-3 + 1e-5 * max(xd[2:])   # onnxruntime computes the taps in float32
    for row in np.asarray(boxes, np.float64).reshape(-1, 4):
        for k in range(2):
            taps = resample_taps(float(row[k]), float(row[2 + k]), size[k], "symmetric")
            if taps and (min(taps) < -1 + margin or max(taps) > xd[2 + k] - margin):
                return "a RoI samples beyond one pixel outside the input, where RoiAlign reads 0 (NNEF: the edge)"
    return None


def _roi_align_node(ctx: OnnxContext, op: Operation) -> None:
    boxes = np.asarray(ctx.data(op.inputs["rois"]), np.float32).reshape(-1, 4)
    x, index = ctx.ref(op.inputs["input"]), _batch_index(ctx, op, boxes.shape[0])
    xyxy = ctx.const(boxes[:, [1, 0, 3, 2]])   # NNEF rows (y0, x0, y1, x1) -> ONNX (x1, y1, x2, y2)
    oh, ow = (int(o) for o in op.attribs["output_size"])
    ctx.bind(out(op), ctx.node("RoiAlign", [x, xyxy, index], ctx.dims(out(op)), mode="avg", output_height=oh,
                               output_width=ow, sampling_ratio=int(op.attribs["sampling_rate"][0]),
                               spatial_scale=1.0, coordinate_transformation_mode="half_pixel"))


def _rounded(ctx: OnnxContext, v: str) -> str:
    """NNEF's round, floor(v + 0.5), of float64 RoI coordinates, as int64."""
    r = unop(ctx, "floor", binop(ctx, "add", v, ctx.const(np.asarray(0.5, F64))))
    return ctx.node("Cast", [r], ctx.dims(r), dtype=I64, to=tensor_type(I64))


def _cells(ctx: OnnxContext, start: str, end: str, p: int, extent: int) -> tuple[str, str, str, str]:
    """Masks (N, p, X) of NNEF's cells over one axis, whether each cell reaches outside the
    input (N, p), the cell size (N, 1) and whether the RoI is non-empty (N, 1)."""
    r = binop(ctx, "sub", end, start)
    stride = binop(ctx, "div", r, ctx.const(np.asarray(p, np.int64)))                    # r > 0: floor
    size = binop(ctx, "div", binop(ctx, "add", r, ctx.const(np.asarray(p - 1, np.int64))),
                 ctx.const(np.asarray(p, np.int64)))                                   # r > 0: ceil
    lo = binop(ctx, "add", start, binop(ctx, "mul", stride, ctx.const(np.arange(p, dtype=np.int64).reshape(1, p))))
    hi = binop(ctx, "add", lo, size)
    pos = ctx.const(np.arange(extent, dtype=np.int64).reshape(1, 1, extent))
    lo3 = ctx.node("Unsqueeze", [lo, ctx.ints([2])], ctx.dims(lo) + (1,))
    hi3 = ctx.node("Unsqueeze", [hi, ctx.ints([2])], ctx.dims(hi) + (1,))
    mask = binop(ctx, "and", binop(ctx, "ge", pos, lo3), binop(ctx, "lt", pos, hi3))
    outside = binop(ctx, "or", binop(ctx, "lt", lo, ctx.const(np.asarray(0, np.int64))),
                    binop(ctx, "gt", hi, ctx.const(np.asarray(extent, np.int64))))
    nonempty = binop(ctx, "gt", r, ctx.const(np.asarray(0, np.int64)))
    return mask, outside, size, nonempty


def _as_float(ctx: OnnxContext, v: str) -> str:
    return ctx.node("Cast", [v], ctx.dims(v), dtype=F32, to=tensor_type(F32))


# --- writers --------------------------------------------------------------------------------------

@to_ir("ir_prior_box")
def ir_prior_box_to_ir(ctx: IRContext, op: Operation) -> None:
    # PriorBox-8 takes the feature map and image sizes as 1-D [H, W] inputs (not tensors) and
    # returns [2, 4 * priors]; the legacy layer's result has a leading unit dimension
    fs, ims = ctx.shape(op.inputs["input"]), ctx.shape(op.inputs["image"])
    a = op.attribs
    attrs = {"min_size": [float(v) for v in a["min_size"]], "max_size": [float(v) for v in a.get("max_size", [])],
             "aspect_ratio": [float(v) for v in a.get("aspect_ratio", [])], "flip": bool(a.get("flip", False)),
             "clip": bool(a.get("clip", False)), "step": float(a.get("step", 0.0)),
             "offset": float(a.get("offset", 0.5)), "variance": [float(v) for v in a.get("variance", [])],
             "scale_all_sizes": bool(a.get("scale_all_sizes", True)), "min_max_aspect_ratios_order": True,
             "density": [], "fixed_ratio": [], "fixed_size": []}
    shape = out_shape(ctx, op)
    y = ctx.layer("PriorBox", [ctx.ints(fs[2:4]), ctx.ints(ims[2:4])], shape[1:], etype="f32", attrs=attrs,
                  version="opset8")
    ctx.bind(out(op), reshape(ctx, y, shape))


@to_ir("ir_detection_output")
def ir_detection_output_to_ir(ctx: IRContext, op: Operation) -> None:
    a = op.attribs
    code = str(a.get("code_type", "CORNER"))
    keep = int(a.get("keep_top_k", -1))
    attrs = {"num_classes": int(a["num_classes"]), "background_label_id": int(a.get("background_label_id", 0)),
             "top_k": int(a.get("top_k", -1)), "variance_encoded_in_target": bool(a.get("variance_encoded_in_target",
                                                                                          False)),
             "keep_top_k": [keep], "code_type": f"caffe.PriorBoxParameter.{code}",
             "share_location": bool(a.get("share_location", True)), "nms_threshold": float(a["nms_threshold"]),
             "confidence_threshold": float(a.get("confidence_threshold", 0.0)),
             "clip_after_nms": bool(a.get("clip_after_nms", False)),
             "clip_before_nms": bool(a.get("clip_before_nms", False)), "decrease_label_id": False,
             "normalized": True, "input_height": 1, "input_width": 1, "objectness_score": 0.0}
    ctx.bind(out(op), ctx.layer("DetectionOutput", [op.inputs["loc"], op.inputs["conf"], op.inputs["prior"]],
                                out_shape(ctx, op), attrs=attrs))


@to_ir("ir_proposal")
def ir_proposal_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Proposal", _proposal_inputs(ctx, op), out_shape(ctx, op),
                                attrs=_proposal_layer_attrs(op.attribs)))


@to_ir("ir_proposal_scored")
def ir_proposal_scored_to_ir(ctx: IRContext, op: Operation) -> None:
    rois, scores = ctx.layer("Proposal", _proposal_inputs(ctx, op),
                             outputs=[(out_shape(ctx, op, 0), "f32"), (out_shape(ctx, op, 1), "f32")],
                             attrs=_proposal_layer_attrs(op.attribs), version="opset4")
    ctx.bind(out(op, 0), rois)
    ctx.bind(out(op, 1), scores)


@to_ir("ir_region_yolo")
def ir_region_yolo_to_ir(ctx: IRContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"coords": int(a.get("coords", 4)), "classes": int(a["classes"]), "num": int(a["num"]),
             "do_softmax": bool(a.get("do_softmax", True)), "mask": [int(v) for v in a.get("mask", [])],
             "axis": int(a.get("axis", 1)), "end_axis": int(a.get("end_axis", 3)), "anchors": []}
    ctx.bind(out(op), ctx.layer("RegionYolo", [op.inputs["input"]], out_shape(ctx, op), attrs=attrs))


@to_ir("ir_reorg_yolo")
def ir_reorg_yolo_to_ir(ctx: IRContext, op: Operation) -> None:
    s = int(op.attribs["stride"])
    ctx.bind(out(op), ctx.layer("ReorgYolo", [op.inputs["input"]], out_shape(ctx, op), attrs={"stride": s},
                                version="opset2"))


@to_ir("ir_roi_pooling")
def ir_roi_pooling_to_ir(ctx: IRContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"pooled_h": int(a["pooled_h"]), "pooled_w": int(a["pooled_w"]),
             "spatial_scale": float(a.get("spatial_scale", 1.0)), "method": str(a.get("method", "max"))}
    ctx.bind(out(op), ctx.layer("ROIPooling", [op.inputs["input"], op.inputs["rois"]], out_shape(ctx, op),
                                attrs=attrs))


@to_ir("ir_psroi_pooling")
def ir_psroi_pooling_to_ir(ctx: IRContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"output_dim": int(a["output_dim"]), "group_size": int(a.get("group_size", 1)),
             "spatial_scale": float(a.get("spatial_scale", 1.0)), "mode": str(a.get("mode", "average")),
             "spatial_bins_x": int(a.get("spatial_bins_x", 1)), "spatial_bins_y": int(a.get("spatial_bins_y", 1))}
    ctx.bind(out(op), ctx.layer("PSROIPooling", [op.inputs["input"], op.inputs["rois"]], out_shape(ctx, op),
                                attrs=attrs))


@to_ir("ir_prior_box_clustered")
def ir_prior_box_clustered_to_ir(ctx: IRContext, op: Operation) -> None:
    a = op.attribs
    if int(a.get("img_w", 0)) or int(a.get("img_h", 0)):
        raise ctx.fail("img_w/img_h overrides have no PriorBoxClustered-1 form")
    fs, ims = ctx.shape(op.inputs["input"]), ctx.shape(op.inputs["image"])
    attrs = {"width": [float(v) for v in a["width"]], "height": [float(v) for v in a["height"]],
             "clip": bool(a.get("clip", False)), "step": float(a.get("step", 0.0)),
             "step_w": float(a.get("step_w", 0.0)), "step_h": float(a.get("step_h", 0.0)),
             "offset": float(a.get("offset", 0.5)), "variance": [float(v) for v in a.get("variance", [])]}
    shape = out_shape(ctx, op)
    y = ctx.layer("PriorBoxClustered", [ctx.ints(fs[2:4]), ctx.ints(ims[2:4])], shape[1:], etype="f32",
                  attrs=attrs)
    ctx.bind(out(op), reshape(ctx, y, shape))


@to_onnx("roi_resample")
def roi_resample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    ctx.bind(out(op), resample(ctx, op, [int(s) for s in op.attribs["output_size"]],
                               str(op.attribs.get("method", "symmetric"))))


@to_onnx("onnx_roi_align")
def onnx_roi_align_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    a = op.attribs
    ctx.bind(out(op), ctx.node("RoiAlign", [ctx.ref(op.inputs[k]) for k in ("input", "rois", "batch_indices")],
                               ctx.dims(out(op)), mode=str(a["mode"]), output_height=int(a["output_height"]),
                               output_width=int(a["output_width"]), sampling_ratio=int(a["sampling_ratio"]),
                               spatial_scale=float(a["spatial_scale"]),
                               coordinate_transformation_mode="half_pixel" if a["half_pixel"] else "output_half_pixel"))


@to_onnx("avg_roi_align", "max_roi_align")
def roi_align_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # one RoiAlign node where exact, else NNEF's definition: roi_resample to output_size *
    # sampling_rate, then a pool with window = stride = sampling_rate (no padding: the
    # resampled extent is a multiple of the window), written directly (any batch / RoI count)
    if op.op == "avg_roi_align" and ctx.rank(op.inputs["input"]) == 4 and _roi_align_exact(ctx, op) is None:
        _roi_align_node(ctx, op)
        return
    rate = [int(s) for s in op.attribs["sampling_rate"]]
    size = [int(o) * s for o, s in zip(op.attribs["output_size"], rate, strict=True)]
    y = resample(ctx, op, size, str(op.attribs.get("resize_method", "symmetric")))
    if len(rate) <= 3:
        pool = "AveragePool" if op.op == "avg_roi_align" else "MaxPool"
        ctx.bind(out(op), ctx.node(pool, [y], ctx.dims(out(op)), kernel_shape=rate, strides=rate))
        return
    # onnxruntime pools over at most 3 dims: the windows tile the resampled RoI exactly, so
    # each is a (o, s) pair of axes of a reshape, reduced over the s axes
    n, c = ctx.dims(y)[:2]
    tiles = [d for o, s in zip(op.attribs["output_size"], rate, strict=True) for d in (int(o), s)]
    y = ctx.node("Reshape", [y, ctx.ints([0, 0] + tiles)], (n, c) + tuple(tiles))
    reduce = "ReduceMean" if op.op == "avg_roi_align" else "ReduceMax"
    ctx.bind(out(op), ctx.node(reduce, [y, ctx.ints([3 + 2 * k for k in range(len(rate))])], ctx.dims(out(op)),
                               keepdims=0))


@to_onnx("avg_roi_pool", "max_roi_pool")
def roi_pool_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    m = len(xd) - 2
    extents = _extents(ctx, xd)
    rois = ctx.ref(op.inputs["rois"])
    n = ctx.dims(rois)[0]
    index = _batch_index(ctx, op, n)
    sizes = [int(s) for s in op.attribs["output_size"]]
    cells = [_cells(ctx, _rounded(ctx, s), _rounded(ctx, e), sizes[k], extents[k])
             for k, (s, e) in enumerate(_columns(ctx, rois, m, F64))]
    rank, zero = 2 + m, scalar(ctx, 0.0)
    dims = [n, xd[1]] + list(extents)
    if op.op == "avg_roi_pool":
        # cell sums, one spatial axis at a time (last first): that axis moved last, a MatMul
        # with the cell masks (N, X, p), moved back.  The first runs on every batch item at
        # once (x broadcast against the RoIs' masks; each RoI then keeps its own item) where
        # that is smaller than a copy of each RoI's item (B * p <= X), else on those copies
        last = m - 1
        broadcast = xd[0] is not None and xd[0] * sizes[last] <= extents[last]
        y = x if broadcast else ctx.node("Gather", [x, index], tuple(dims), axis=0)
        for step, k in enumerate(reversed(range(m))):
            ax = 2 + k
            perm = list(range(rank))
            perm[ax], perm[-1] = perm[-1], perm[ax]
            if ax != rank - 1:
                y = ctx.node("Transpose", [y], tuple(ctx.dims(y)[a] for a in perm), perm=perm)
            masks = ctx.node("Transpose", [_as_float(ctx, cells[k][0])], (n, extents[k], sizes[k]), perm=[0, 2, 1])
            swapped = [dims[a] for a in perm]
            if step == 0 and broadcast:
                wide = ctx.node("Unsqueeze", [y, ctx.ints([0])], (1,) + ctx.dims(y))
                masks = _spread(ctx, masks, [0, rank - 1, rank], rank + 1)
                summed = ctx.node("MatMul", [wide, masks], (n, xd[0]) + tuple(swapped[1:-1]) + (sizes[k],))
                y = _pick_items(ctx, summed, index, tuple(swapped[:-1]) + (sizes[k],))
            else:
                masks = _spread(ctx, masks, [0, rank - 2, rank - 1], rank)
                y = ctx.node("MatMul", [y, masks], tuple(swapped[:-1]) + (sizes[k],))
            dims[ax] = sizes[k]
            if ax != rank - 1:
                y = ctx.node("Transpose", [y], tuple(dims), perm=perm)
        # divided by the whole cell area: the zeros outside the input count (empty RoIs: 0 below)
        area: Any = None
        for cell in cells:
            area = cell[2] if area is None else binop(ctx, "mul", area, cell[2])
        area = binop(ctx, "max", area, ctx.const(np.asarray(1, np.int64)))
        y = binop(ctx, "div", y, _spread(ctx, _as_float(ctx, area), [0, 1], rank))
    else:
        # masked maxima over each RoI's own batch item, one spatial axis at a time (last first)
        lowest = scalar(ctx, -np.inf)
        y = ctx.node("Gather", [x, index], tuple(dims), axis=0)
        for k in reversed(range(m)):
            ax = 2 + k
            wide = ctx.node("Unsqueeze", [y, ctx.ints([ax])], tuple(dims[:ax]) + (1,) + tuple(dims[ax:]))
            masks = _spread(ctx, cells[k][0], [0, ax, ax + 1], rank + 1)
            y = ctx.node("Where", [masks, wide, lowest], tuple(dims[:ax]) + (sizes[k],) + tuple(dims[ax:]), dtype=F32)
            dims[ax] = sizes[k]
            y = ctx.node("ReduceMax", [y, ctx.ints([ax + 1])], tuple(dims), keepdims=0)
        # cells reaching outside the input also read zeros, which take part in the maximum
        reach: Any = None
        for k, cell in enumerate(cells):
            o = _spread(ctx, cell[1], [0, 2 + k], rank)
            reach = o if reach is None else binop(ctx, "or", reach, o)
        y = ctx.node("Where", [reach, binop(ctx, "max", y, zero), y], tuple(dims), dtype=F32)
    valid: Any = None
    for cell in cells:
        valid = cell[3] if valid is None else binop(ctx, "and", valid, cell[3])
    valid = _spread(ctx, valid, [0, 1], rank)
    ctx.bind(out(op), ctx.node("Where", [valid, y, zero], tuple(dims), dtype=F32))
