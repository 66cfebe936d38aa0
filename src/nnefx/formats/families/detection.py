"""Detection operators: how each operator is read from IR and ONNX (and written, below).

NonMaxSuppression, PriorBox, PriorBoxClustered (folded while loading: their outputs depend only on sizes).

Specifications: OpenVINO opset docs: NonMaxSuppression-1/3/4/5/9, PriorBox-1/8, PriorBoxClustered-1.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ..reading.context import NodeContext
from ..reading.registry import ANY, operator
from ..reading.values import Value, element_type

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
