"""nnefx operation -> IR opset layer(s): one small function per operation.

Each exporter gets the :class:`~.writer.ExportContext` and the Operation, emits layers and
binds the operation's output tensors to ports.  The rules every exporter follows:

* **Exact or refused.**  Where NNEF and the opset differ (border modes, broadcasting,
  padding, rounding, window shapes), the exporter either reproduces NNEF's result exactly
  (extra layers where needed) or raises through ``ctx.fail`` — never an approximation.
* **NNEF broadcasting.**  NNEF aligns shapes from dimension 0 (a ``[1, C]`` bias against
  ``[N, C, H, W]`` means ``[1, C, 1, 1]``) while the opset aligns from the right, so operands
  of lower rank get trailing unit dimensions (:func:`aligned`) before any numpy-broadcasting
  layer.
* **Static shapes.**  Port dims are written from the graph's inferred shapes; helper layers
  compute theirs here.
* **One reading of NNEF.**  What an operation's attributes mean (automatic padding, slice
  stops, reductions, border and resize modes, defaults) comes from
  :mod:`nnefx.formats.export.attrs`, shared with the ONNX exporters, so both formats
  compute the same thing for the same document; this module only emits layers.

The legacy/modern traps that matter when mapping back: Gather takes (data, indices, axis);
Slice-8 takes (data, start, stop, step, axes) and is not the legacy ``Slice`` (a split);
BatchNormInference-5 takes (data, gamma, beta, mean, variance) — version 1 put data third;
PriorBox-8 takes 1-D ``[H, W]`` sizes; float constants may sit behind ``Convert`` (f16).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export import registry
from ..export.context import export_copy_n
from ..export.lowering import (
    aligned,
    bias_add,
    binop,
    cast,
    channel_vector,
    crop,
    first_input,
    literal_type,
    operands,
    out,
    pad,
    reshape,
    scalar,
    unop,
    window,
)
from .writer import ETYPE, ExportContext

Exporter = Callable[[ExportContext, Operation], None]
exporter = registry.to_ir


def exportable_ops() -> list[str]:
    """Names of the operations the IR writer can export."""
    return registry.table("ir").names()


# --- helpers --------------------------------------------------------------------------------


def out_shape(ctx: ExportContext, op: Operation, k: int = 0) -> tuple:
    return ctx.shape(out(op, k))


# --- element-wise ---------------------------------------------------------------------------

@exporter("leaky_relu", "prelu")
def _prelu(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(first_input(op, "x"))
    alpha = op.attribs.get("alpha", op.inputs.get("alpha"))
    rank = len(ctx.shape(x))
    if not isinstance(alpha, str):
        slope = ctx.const(np.asarray([float(alpha)]), ctx.etype(x))
    else:
        # aligned to x's rank, the slope broadcasts numpy-style (PRelu's 1-D channel rule
        # then only applies to rank-1 x, where it is element-wise anyway)
        slope = aligned(ctx, alpha, rank)
    ctx.bind(out(op), ctx.layer("PRelu", [x, slope], ctx.shape(x)))


@exporter("selu")
def _selu(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(first_input(op, "x"))
    et = ctx.etype(x)
    alpha = float(op.attribs.get("alpha", 1.67326319))
    lam = float(op.attribs.get("lambda", 1.05070102))
    ctx.bind(out(op), ctx.layer("Selu", [x, ctx.const([alpha], et), ctx.const([lam], et)], ctx.shape(x)))


@exporter("cast", "ir_convert")
def _cast(ctx: ExportContext, op: Operation) -> None:
    # ir_convert is Convert itself; NNEF cast floors scalars first (lowering.cast)
    target = op.attribs.get("destination_type") or ETYPE.get(op.dtype or "scalar", "f32")
    ctx.bind(out(op), cast(ctx, first_input(op, "input"), target, floor=op.op == "cast"))


# --- linear algebra -------------------------------------------------------------------------

@exporter("matmul")
def _matmul(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("MatMul", [op.inputs["A"], op.inputs["B"]], out_shape(ctx, op),
                                attrs={"transpose_a": bool(op.attribs.get("transposeA", False)),
                                       "transpose_b": bool(op.attribs.get("transposeB", False))}))


@exporter("linear")
def _linear(ctx: ExportContext, op: Operation) -> None:
    shape = out_shape(ctx, op)
    y = ctx.layer("MatMul", [op.inputs["input"], op.inputs["filter"]], shape,
                  attrs={"transpose_a": False, "transpose_b": True})
    bias = op.inputs.get("bias", 0.0)
    data = ctx.data(bias)
    if data is None or np.any(np.asarray(data) != 0):
        y = binop(ctx, "add", y, aligned(ctx, bias, len(shape), ctx.etype(y)))
    ctx.bind(out(op), y)


# --- windowed operations ---------------------------------------------------------------------

@exporter("conv")
def _conv(ctx: ExportContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    n = len(xs) - 2
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]))
    border = op.attribs.get("border", "constant")
    xin: Any = x
    if (border not in ("constant", "ignore") and any(p or q for p, q in pads)) or \
            any(p < 0 or q < 0 for p, q in pads):   # negative padding crops (lowering.pad)
        xin = pad(ctx, x, [(0, 0), (0, 0)] + pads, border)
        pads = [(0, 0)] * n
    groups = int(op.attribs.get("groups", 1)) or xs[1]
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "auto_pad": "explicit"}
    shape = out_shape(ctx, op)
    if groups == 1:
        y = ctx.layer("Convolution", [xin, f], shape, attrs=attrs)
    else:
        wf = reshape(ctx, f, (groups, fs[0] // groups) + tuple(fs[1:]))
        y = ctx.layer("GroupConvolution", [xin, wf], shape, attrs=attrs)
    ctx.bind(out(op), bias_add(ctx, op, y))


@exporter("deconv")
def _deconv(ctx: ExportContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    n = len(xs) - 2
    if op.attribs.get("border", "constant") != "constant":
        raise ctx.fail(f"border '{op.attribs.get('border')}' of a deconvolution has no opset form")
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]), transposed=True)
    if any(p < 0 for p, _ in pads):
        raise ctx.fail(f"negative padding {pads} has no opset form")
    # a negative padding after extends the output past the full transposed extent: that is
    # OpenVINO's output_padding
    pads = [(p, max(q, 0)) for p, q in pads]
    shape = out_shape(ctx, op)
    base = [nnef_attrs.window_span(xs[2 + i], fs[2 + i], stride[i], dil[i]) - pads[i][0] - pads[i][1] for i in range(n)]
    extra = [shape[2 + i] - base[i] for i in range(n)]
    if any(e < 0 or e >= max(stride[i], dil[i]) for i, e in enumerate(extra)):
        raise ctx.fail(f"output shape {shape} needs output padding {extra} outside the opset's range")
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "auto_pad": "explicit", "output_padding": extra}
    groups = int(op.attribs.get("groups", 1))
    if groups == 0:
        groups = shape[1]
    if groups == 1:
        y = ctx.layer("ConvolutionBackpropData", [x, f], shape, attrs=attrs)
    else:
        wf = reshape(ctx, f, (groups, fs[0] // groups) + tuple(fs[1:]))
        y = ctx.layer("GroupConvolutionBackpropData", [x, wf], shape, attrs=attrs)
    ctx.bind(out(op), bias_add(ctx, op, y))


def _pool_window(ctx: ExportContext, op: Operation) -> tuple:
    x = op.inputs["input"]
    xs = ctx.shape(x)
    size = list(op.attribs["size"])
    pads, stride, dil = window(ctx, op, x, len(xs), size)
    if any(p < 0 or q < 0 for p, q in pads):   # negative padding crops (lowering.crop)
        x, pads = crop(ctx, ctx.ref(x), pads)
        xs = ctx.shape(x)
    if size[:2] != [1, 1] or stride[:2] != [1, 1] or any(pads[:2][k] != (0, 0) for k in range(min(2, len(pads)))):
        raise ctx.fail(f"pooling over the batch/channel dimensions (size {size}, stride {stride}, padding {pads}) "
                       "has no opset form")
    if any(d != 1 for d in dil):
        if op.op == "avg_pool" or dil[:2] != [1, 1]:
            raise ctx.fail(f"dilation {dil} of {op.op} has no opset form")
    # padding after that no window reaches changes nothing, and OpenVINO's AvgPool refuses
    # exclude-pad with a padding as large as the kernel (e.g. from legacy ceil rounding)
    ys = out_shape(ctx, op)
    trimmed = []
    for i in range(2, len(xs)):
        p, q = pads[i]
        reach = nnef_attrs.window_span(ys[i], size[i], stride[i], dil[i]) - p - xs[i]
        trimmed.append((p, min(q, max(reach, 0))))
    return x, size[2:], trimmed, stride[2:], dil[2:]


@exporter("max_pool")
def _max_pool(ctx: ExportContext, op: Operation) -> None:
    x, size, pads, stride, dil = _pool_window(ctx, op)
    border = op.attribs.get("border", "constant")
    if border != "ignore" and any(p or q for p, q in pads):
        # OpenVINO never reads its padding; NNEF 'constant' pads with 0 (and the other modes
        # with copies), so pad explicitly first
        x = pad(ctx, x, [(0, 0), (0, 0)] + pads, border)
        pads = [(0, 0)] * len(pads)
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "kernel": size, "rounding_type": "floor", "auto_pad": "explicit",
             "index_element_type": "i64", "axis": 0}
    shape = out_shape(ctx, op)
    refs = ctx.layer("MaxPool", [x], outputs=[(shape, "f32"), (shape, "i64")], attrs=attrs, version="opset8")
    ctx.bind(out(op), refs[0])


@exporter("avg_pool", "area_downsample")
def _avg_pool(ctx: ExportContext, op: Operation) -> None:
    if op.op == "area_downsample":
        x = op.inputs["input"]
        factor = [int(v) for v in op.attribs["factor"]]
        size, pads, stride, border = factor, [(0, 0)] * len(factor), factor, "constant"
    else:
        x, size, pads, stride, _ = _pool_window(ctx, op)
        border = op.attribs.get("border", "constant")
    exclude = border == "ignore"
    if border not in ("constant", "ignore") and any(p or q for p, q in pads):
        x = pad(ctx, x, [(0, 0), (0, 0)] + pads, border)
        pads = [(0, 0)] * len(pads)
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "kernel": size, "exclude-pad": exclude, "rounding_type": "floor", "auto_pad": "explicit"}
    ctx.bind(out(op), ctx.layer("AvgPool", [x], out_shape(ctx, op), attrs=attrs))


@exporter("local_response_normalization")
def _lrn(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    size = [int(s) for s in op.attribs["size"]]
    axes = [i for i, s in enumerate(size) if s != 1]
    n = size[axes[0]] if axes else 1
    if any(size[a] != n for a in axes) or n % 2 == 0:
        raise ctx.fail(f"window size {size} has no LRN form (needs one odd size on every normalized axis)")
    alpha, beta, bias = nnef_attrs.lrn_params(op)
    if bias <= 0:
        raise ctx.fail(f"bias {bias} <= 0 has no LRN form")
    # NNEF divides alpha by the window volume; LRN divides it by size ** len(axes): the same.
    # OpenVINO's CPU plugin ignores LRN's bias, so write bias 1 and scale instead:
    # x / (k + a s)^b = k^-b * x / (1 + (a/k) s)^b
    attrs = {"alpha": alpha / bias, "beta": beta, "bias": 1.0, "size": n}
    y = ctx.layer("LRN", [x, ctx.ints(axes or [1])], ctx.shape(x), attrs=attrs)
    if bias != 1.0:
        y = binop(ctx, "mul", y, scalar(ctx, bias ** -beta))
    ctx.bind(out(op), y)


# --- shapes ---------------------------------------------------------------------------------

@exporter("reshape", "ir_reshape")
def _reshape(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), reshape(ctx, op.inputs["input"], out_shape(ctx, op)))


@exporter("squeeze", "unsqueeze")
def _squeeze(ctx: ExportContext, op: Operation) -> None:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    x = op.inputs["input"]
    if not axes:
        ctx.bind(out(op), ctx.ref(x))
        return
    kind = "Squeeze" if op.op == "squeeze" else "Unsqueeze"
    data = ctx.data(x)
    if data is not None:
        ctx.bind(out(op), reshape(ctx, x, out_shape(ctx, op)))
        return
    ctx.bind(out(op), ctx.layer(kind, [x, ctx.ints(axes)], out_shape(ctx, op)))


@exporter("transpose")
def _transpose(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    perm = nnef_attrs.transpose_perm(op, len(ctx.shape(x)))
    ctx.bind(out(op), ctx.layer("Transpose", [x, ctx.ints(perm)], out_shape(ctx, op)))


@exporter("concat")
def _concat(ctx: ExportContext, op: Operation) -> None:
    values = op.inputs["values"]
    ctx.bind(out(op), ctx.layer("Concat", list(values), out_shape(ctx, op), attrs={"axis": int(op.attribs["axis"])}))


@exporter("split")
def _split(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["value"]
    axis = int(op.attribs["axis"])
    names = op.output_names()
    shapes = [ctx.shape(n) for n in names]
    lengths = [s[axis] for s in shapes]
    et = ctx.etype(x)
    refs = ctx.layer("VariadicSplit", [x, ctx.const(np.asarray(axis), "i64"), ctx.ints(lengths)],
                     outputs=[(s, et) for s in shapes])
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, r)


def slice_layer(ctx: ExportContext, x: Any, plan: list[tuple[int, int, int, int]], shape: tuple) -> Any:
    """Slice-8 from resolved (axis, first index, stride, count) items."""
    if not plan:
        return ctx.ref(x)
    axes, start, stop, step = nnef_attrs.slice_bounds(plan)
    return ctx.layer("Slice", [x, ctx.ints(start), ctx.ints(stop), ctx.ints(step), ctx.ints(axes)], shape,
                     version="opset8")


@exporter("slice")
def _slice(ctx: ExportContext, op: Operation) -> None:
    from ...ops.shape import _slice_plan

    x = op.inputs["input"]
    plan = _slice_plan(ctx.shape(x), op.attribs["axes"], op.attribs["begin"], op.attribs["end"],
                       op.attribs.get("stride", []))
    ctx.bind(out(op), slice_layer(ctx, x, plan, out_shape(ctx, op)))


@exporter("ir_strided_slice")
def _ir_strided_slice(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    plan = [(i, int(b), int(s), shape[i]) for i, (b, s) in enumerate(zip(op.attribs["begin"], op.attribs["stride"],
                                                                             strict=True))]
    plan = [p for p in plan if not (p[1] == 0 and p[2] == 1 and p[3] == ctx.shape(x)[p[0]])]
    ctx.bind(out(op), slice_layer(ctx, x, plan, shape))


@exporter("nearest_downsample")
def _nearest_downsample(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    plan = [(2 + i, 0, int(f), shape[2 + i]) for i, f in enumerate(op.attribs["factor"]) if int(f) != 1]
    ctx.bind(out(op), slice_layer(ctx, x, plan, shape))


@exporter("pad")
def _pad(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    pads = [tuple(int(v) for v in p) for p in op.attribs["padding"]]
    value = op.inputs.get("value", op.attribs.get("value", 0.0))
    if isinstance(value, str):
        raise ctx.fail("a tensor padding value has no opset form")
    ctx.bind(out(op), pad(ctx, x, pads, op.attribs.get("border", "constant"), float(value)))


@exporter("tile")
def _tile(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Tile", [op.inputs["input"], ctx.ints(op.attribs["repeats"])], out_shape(ctx, op)))


@exporter("gather", "ir_gather")
def _gather(ctx: ExportContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    axis = int(op.attribs.get("axis", 0))
    data = ctx.data(idx)
    iref = ctx.const(np.asarray(data, dtype=np.int64), "i64") if data is not None else ctx.ref(idx)
    ctx.bind(out(op), ctx.layer("Gather", [x, iref, ctx.const(np.asarray(axis), "i64")], out_shape(ctx, op),
                                etype=ctx.etype(x), attrs={"batch_dims": int(op.attribs.get("batch_dims", 0))},
                                version="opset8"))


# --- reductions and normalizations ----------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "any": "ReduceLogicalOr", "all": "ReduceLogicalAnd"}


@exporter(*nnef_attrs.REDUCTIONS)
def _reduce(ctx: ExportContext, op: Operation) -> None:
    kind = _REDUCE[nnef_attrs.reduction(op)]
    x = op.inputs["input"]
    axes = [int(a) for a in op.attribs["axes"]]
    if not axes:
        ctx.bind(out(op), ctx.ref(x))
        return
    ctx.bind(out(op), ctx.layer(kind, [x, ctx.ints(axes)], out_shape(ctx, op), attrs={"keep_dims": True}))


@exporter("softmax")
def _softmax(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    shape = ctx.shape(x)
    axes = [int(a) % max(len(shape), 1) for a in op.attribs.get("axes", [1])]
    if len(axes) == 1:
        ctx.bind(out(op), ctx.layer("Softmax", [x], shape, attrs={"axis": axes[0]}, version="opset8"))
        return
    # several axes: the definition, max-shifted as NNEF writes it
    m = reduce_layer(ctx, "ReduceMax", x, axes, shape)
    e = unop(ctx, "exp", binop(ctx, "sub", x, m))
    s = reduce_layer(ctx, "ReduceSum", e, axes, shape)
    ctx.bind(out(op), binop(ctx, "div", e, s))


def reduce_layer(ctx: ExportContext, kind: str, x: Any, axes: list[int], shape: tuple) -> Any:
    """A ``kind`` reduction of ``x`` (of ``shape``) over ``axes``, reduced dims kept (NNEF's)."""
    return ctx.layer(kind, [x, ctx.ints(axes)], nnef_attrs.reduced_shape(shape, axes), attrs={"keep_dims": True})


@exporter("batch_normalization")
def _batch_norm(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = ctx.shape(x)
    eps = float(op.attribs["epsilon"])
    params = nnef_attrs.batch_norm_inputs(op)
    if len(shape) >= 2:
        vecs = {k: channel_vector(ctx, v, shape[1], "f32") for k, v in params.items()}
        if all(v is not None for v in vecs.values()):
            ctx.bind(out(op), ctx.layer(
                "BatchNormInference", [x, vecs["scale"], vecs["offset"], vecs["mean"], vecs["variance"]], shape,
                attrs={"epsilon": eps}, version="opset5"))
            return
    # general broadcasting: the definition offset + scale * (x - mean) / sqrt(variance + eps)
    mean, var, off, sc = operands(ctx, op, list(params.values()))
    den = unop(ctx, "sqrt", binop(ctx, "add", var, scalar(ctx, eps)))
    y = binop(ctx, "add", off, binop(ctx, "div", binop(ctx, "mul", sc, binop(ctx, "sub", x, mean)), den))
    ctx.bind(out(op), y)


@exporter("l1_normalization", "l2_normalization")
def _lp_norm(ctx: ExportContext, op: Operation) -> None:
    # NNEF: x / max(norm + bias, epsilon), norm = sum(|x|) or sqrt(sum(x^2)); NormalizeL2
    # puts eps inside the sqrt, so the definition is written out
    x = ctx.ref(op.inputs["input"])
    shape = ctx.shape(x)
    axes = [int(a) for a in op.attribs["axes"]]
    l2 = op.op == "l2_normalization"
    s = reduce_layer(ctx, "ReduceSum", binop(ctx, "mul", x, x) if l2 else unop(ctx, "abs", x), axes, shape)
    sigma = binop(ctx, "add", unop(ctx, "sqrt", s) if l2 else s, scalar(ctx, float(op.attribs.get("bias", 0.0))))
    den = binop(ctx, "max", sigma, scalar(ctx, float(op.attribs.get("epsilon", 0.0))))
    ctx.bind(out(op), binop(ctx, "div", x, den))


# --- resizing -------------------------------------------------------------------------------

def _interpolate(ctx: ExportContext, x: Any, shape: tuple, mode: str, transform: str,
                 nearest: str = "floor") -> Any:
    xs = ctx.shape(x)
    axes = list(range(2, len(xs)))
    attrs = {"mode": mode, "shape_calculation_mode": "sizes", "coordinate_transformation_mode": transform,
             "nearest_mode": nearest, "antialias": False, "pads_begin": [0] * len(xs), "pads_end": [0] * len(xs),
             "cube_coeff": -0.75}
    return ctx.layer("Interpolate", [x, ctx.ints([shape[a] for a in axes]), ctx.ints(axes)], shape,
                     attrs=attrs, version="opset11")


@exporter("nearest_upsample")
def _nearest_upsample(ctx: ExportContext, op: Operation) -> None:
    # output[i] = input[floor(i / factor)]: asymmetric coordinates, floor rounding
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "nearest", "asymmetric"))


@exporter("ir_interp")
def _ir_interp(ctx: ExportContext, op: Operation) -> None:
    transform = "align_corners" if op.attribs.get("align_corners", False) else "asymmetric"
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", transform))


@exporter("ir_resample")
def _ir_resample(ctx: ExportContext, op: Operation) -> None:
    mode = op.attribs.get("mode", "nearest")
    if mode == "nearest":   # Caffe Resample NEAREST: src = floor(dst * in / out)
        y = _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "nearest", "asymmetric")
    elif mode == "linear":  # bilinear, pixel centres aligned, edges clamped
        y = _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", "half_pixel")
    else:
        raise ctx.fail(f"resample mode '{mode}' has no Interpolate form")
    ctx.bind(out(op), y)


# --- IR-only extension operations (from legacy files) back to their opset layers ------------

@exporter("ir_prior_box")
def _ir_prior_box(ctx: ExportContext, op: Operation) -> None:
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


@exporter("ir_detection_output")
def _ir_detection_output(ctx: ExportContext, op: Operation) -> None:
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


def _proposal_layer_attrs(a: dict) -> dict:
    return {"base_size": int(a["base_size"]), "pre_nms_topn": int(a["pre_nms_topn"]),
            "post_nms_topn": int(a["post_nms_topn"]), "nms_thresh": float(a["nms_thresh"]),
            "feat_stride": int(a["feat_stride"]), "min_size": int(a["min_size"]),
            "ratio": [float(v) for v in a["ratio"]], "scale": [float(v) for v in a["scale"]],
            "clip_before_nms": bool(a.get("clip_before_nms", True)),
            "clip_after_nms": bool(a.get("clip_after_nms", False)), "normalize": bool(a.get("normalize", False)),
            "box_size_scale": float(a.get("box_size_scale", 1.0)),
            "box_coordinate_scale": float(a.get("box_coordinate_scale", 1.0)), "framework": ""}


def _proposal_inputs(ctx: ExportContext, op: Operation) -> list:
    info = op.inputs["im_info"]
    n = int(np.prod(ctx.shape(info), dtype=np.int64))
    if ctx.shape(op.inputs["cls_prob"])[0] != 1 or n not in (3, 4):
        raise ctx.fail("only batch 1 with a 3- or 4-item image info has a Proposal form")
    return [op.inputs["cls_prob"], op.inputs["bbox_pred"], reshape(ctx, info, (n,))]


@exporter("ir_proposal")
def _ir_proposal(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Proposal", _proposal_inputs(ctx, op), out_shape(ctx, op),
                                attrs=_proposal_layer_attrs(op.attribs)))


@exporter("ir_proposal_scored")
def _ir_proposal_scored(ctx: ExportContext, op: Operation) -> None:
    rois, scores = ctx.layer("Proposal", _proposal_inputs(ctx, op),
                             outputs=[(out_shape(ctx, op, 0), "f32"), (out_shape(ctx, op, 1), "f32")],
                             attrs=_proposal_layer_attrs(op.attribs), version="opset4")
    ctx.bind(out(op, 0), rois)
    ctx.bind(out(op, 1), scores)


@exporter("ir_region_yolo")
def _ir_region_yolo(ctx: ExportContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"coords": int(a.get("coords", 4)), "classes": int(a["classes"]), "num": int(a["num"]),
             "do_softmax": bool(a.get("do_softmax", True)), "mask": [int(v) for v in a.get("mask", [])],
             "axis": int(a.get("axis", 1)), "end_axis": int(a.get("end_axis", 3)), "anchors": []}
    ctx.bind(out(op), ctx.layer("RegionYolo", [op.inputs["input"]], out_shape(ctx, op), attrs=attrs))


@exporter("ir_reorg_yolo")
def _ir_reorg_yolo(ctx: ExportContext, op: Operation) -> None:
    s = int(op.attribs["stride"])
    ctx.bind(out(op), ctx.layer("ReorgYolo", [op.inputs["input"]], out_shape(ctx, op), attrs={"stride": s},
                                version="opset2"))


@exporter("ir_roi_pooling")
def _ir_roi_pooling(ctx: ExportContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"pooled_h": int(a["pooled_h"]), "pooled_w": int(a["pooled_w"]),
             "spatial_scale": float(a.get("spatial_scale", 1.0)), "method": str(a.get("method", "max"))}
    ctx.bind(out(op), ctx.layer("ROIPooling", [op.inputs["input"], op.inputs["rois"]], out_shape(ctx, op),
                                attrs=attrs))


@exporter("ir_psroi_pooling")
def _ir_psroi_pooling(ctx: ExportContext, op: Operation) -> None:
    a = op.attribs
    attrs = {"output_dim": int(a["output_dim"]), "group_size": int(a.get("group_size", 1)),
             "spatial_scale": float(a.get("spatial_scale", 1.0)), "mode": str(a.get("mode", "average")),
             "spatial_bins_x": int(a.get("spatial_bins_x", 1)), "spatial_bins_y": int(a.get("spatial_bins_y", 1))}
    ctx.bind(out(op), ctx.layer("PSROIPooling", [op.inputs["input"], op.inputs["rois"]], out_shape(ctx, op),
                                attrs=attrs))


@exporter("ir_fake_quantize")
def _ir_fake_quantize(ctx: ExportContext, op: Operation) -> None:
    # the limits broadcast numpy-style already (as in the IR layer it came from)
    refs = [op.inputs[k] for k in ("input", "input_low", "input_high", "output_low", "output_high")]
    ctx.bind(out(op), ctx.layer("FakeQuantize", refs, out_shape(ctx, op), attrs={"levels": int(op.attribs["levels"])}))


# --- BinaryConvolution ------------------------------------------------------------------------


@exporter("ir_binary_convolution")
def _ir_binary_convolution(ctx: ExportContext, op: Operation) -> None:
    """``ir_binary_convolution`` as BinaryConvolution-1 (``xnor-popcount``), where exact.

    The opset layer and nnefx agree on what a +1/-1 product sum is; the exporter closes the
    gaps between them (found by reading the opset specification and OpenVINO's reference
    implementation, and by running its CPU plugin):

    * *Input.*  The layer is defined for 0/1 inputs (the reference counts a match only for a
      value exactly 0 or 1); nnefx reads ``x > 0`` as +1 for any ``x``.  ``Greater(x, 0)`` then
      ``Convert`` to f32 in front of the layer hands it exactly 0/1.
    * *Filter.*  Load-time data only, written as ``u1`` (bit = ``filter > 0``, nnefx's reading),
      packed least significant bit first as the Model Optimizer did and the CPU plugin reads.
    * *pad_value.*  OpenVINO's reference and CPU plugin agree only on ``pad_value = 1`` (a
      padded position counts as +1), so that is what is written; for any other nnefx
      ``pad_value`` p the difference, ``(p - 1) * S`` with ``S[o, y]`` the sum of the +-1
      weights that meet padded positions, is a load-time constant added after the layer.  It
      is refused unless the sums are exact in both nnefx (float64, then float32) and the file
      (float32): p a float32 value and small enough sums (:func:`_pad_correction`).
    * *groups.*  The layer has none: the input is split along the channels, each group
      convolved with its filters, and the results concatenated (exact).
    * *Rank.*  The layer is 2-D only (4-D input, checked by OpenVINO itself); a 1-D one is
      written with a unit height, a 3-D one is refused.
    """
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    k = len(xs) - 2
    if k not in (1, 2):
        raise ctx.fail(f"a {k}-D binary convolution has no opset form (BinaryConvolution-1 is 2-D only)")
    fdata = ctx.data(f)
    if fdata is None:
        raise ctx.fail("the filter must be load-time data (BinaryConvolution-1 takes packed u1 weights)")
    bits = np.broadcast_to(np.asarray(fdata), fs) > 0
    a = op.attribs
    pads = [(int(p), int(q)) for p, q in a["padding"]]
    stride = [int(v) for v in a.get("stride") or [1] * k]
    dil = [int(v) for v in a.get("dilation") or [1] * k]
    groups = int(a.get("groups", 1))
    pad_value = float(a.get("pad_value", 0.0))
    if any(p < 0 or q < 0 for p, q in pads):
        raise ctx.fail(f"negative padding {pads} has no opset form")
    oshape = out_shape(ctx, op)
    correction = None
    if pad_value != 1.0 and any(p or q for p, q in pads):
        correction = _pad_correction(ctx, bits, xs[2:], oshape[2:], pads, stride, dil, pad_value)
    xb = ctx.layer("Convert", [binop(ctx, "gt", x, scalar(ctx, 0.0))], xs, etype="f32",
                   attrs={"destination_type": "f32"})
    if k == 1:  # a unit height in front of the one spatial axis
        xs, fs, oshape4 = xs[:2] + (1,) + xs[2:], fs[:2] + (1,) + fs[2:], oshape[:2] + (1,) + oshape[2:]
        xb, bits = reshape(ctx, xb, xs), bits.reshape(fs)
        pads, stride, dil = [(0, 0)] + pads, [1] + stride, [1] + dil
    else:
        oshape4 = oshape
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "dilations": dil, "mode": "xnor-popcount", "pad_value": 1.0, "auto_pad": "explicit"}
    cg, og = xs[1] // groups, fs[0] // groups
    if groups == 1:
        parts = [xb]
    else:
        parts = ctx.layer("Split", [xb, ctx.const(np.asarray(1), "i64")], attrs={"num_splits": groups},
                          outputs=[(xs[:1] + (cg,) + xs[2:], "f32")] * groups)
    ys = [ctx.layer("BinaryConvolution", [part, ctx.w.const_bits(bits[g * og:(g + 1) * og], name=f"{out(op)}/bits")],
                    oshape4[:1] + (og,) + oshape4[2:], etype="f32", attrs=attrs)
          for g, part in enumerate(parts)]
    y = ys[0] if groups == 1 else ctx.layer("Concat", ys, oshape4, attrs={"axis": 1})
    if k == 1:
        y = reshape(ctx, y, oshape)
    if correction is not None:
        y = binop(ctx, "add", y, ctx.const(correction.reshape((1,) + correction.shape), "f32"))
    ctx.bind(out(op), y)


def _pad_correction(ctx: ExportContext, bits: np.ndarray, in_spatial: tuple, out_spatial: tuple,
                    pads: list[tuple[int, int]], stride: list[int], dil: list[int], pad_value: float) -> np.ndarray:
    """``(pad_value - 1) * S`` (float32, shape ``[O, out spatial...]``): what turns the layer's
    padded +1s into nnefx's ``pad_value``; ``S[o, y]`` sums the +-1 weights of filter ``o``
    that meet padded input positions for output position ``y`` (zero away from the borders).

    nnefx sums exactly in float64 and rounds once to float32; the file's Add rounds the exact
    ``(core + S) + (p - 1) S`` once too -- the same value -- when every term is exact: p a
    float32 value, the nnefx sums within float64's 53 bits, ``core + S`` an integer within
    float32's 24 bits and ``(p - 1) S`` a float32 value.  Anything else is refused.
    """
    count = int(np.prod(bits.shape[1:]))  # +-1 terms per output value
    finite = math.isfinite(pad_value) and float(np.float32(pad_value)) == pad_value
    denominator = pad_value.as_integer_ratio()[1] if finite else 0
    if not finite or count > 1 << 24 or count * max(1.0, abs(pad_value)) * denominator >= 2.0 ** 53:
        raise ctx.fail(f"pad_value {pad_value!r} has no exact opset form (BinaryConvolution-1 pads with +1; "
                       "the difference is exact only for a float32 pad_value and moderate sums)")
    wsum = np.where(bits, 1.0, -1.0).sum(axis=1)                      # [O, kernel...]
    padded = np.pad(np.zeros(in_spatial), pads, constant_values=1.0)  # 1 on padded positions
    s = np.zeros((bits.shape[0],) + tuple(out_spatial))
    k = len(in_spatial)
    for kpos in np.ndindex(*bits.shape[2:]):
        window = tuple(slice(kpos[i] * dil[i], kpos[i] * dil[i] + (out_spatial[i] - 1) * stride[i] + 1, stride[i])
                       for i in range(k))
        s += wsum[(slice(None),) + kpos].reshape((-1,) + (1,) * k) * padded[window]
    corr = (pad_value - 1.0) * s
    if not np.array_equal(corr.astype(np.float32), corr):
        raise ctx.fail(f"pad_value {pad_value!r} has no exact opset form (its correction is not a float32 value)")
    return corr.astype(np.float32)


@exporter("ir_reverse_sequence")
def _ir_reverse_sequence(ctx: ExportContext, op: Operation) -> None:
    attrs = {"seq_axis": int(op.attribs.get("seq_axis", 1)), "batch_axis": int(op.attribs.get("batch_axis", 0))}
    ctx.bind(out(op), ctx.layer("ReverseSequence", [op.inputs["input"], op.inputs["lengths"]], out_shape(ctx, op),
                                attrs=attrs))


@exporter("ir_ctc_greedy_decoder")
def _ir_ctc_greedy_decoder(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("CTCGreedyDecoder", [op.inputs["data"], op.inputs["seq_indicators"]],
                                out_shape(ctx, op), etype="f32",
                                attrs={"ctc_merge_repeated": bool(op.attribs.get("ctc_merge_repeated", True))}))


@exporter("ir_argmax")
def _ir_argmax(ctx: ExportContext, op: Operation) -> None:
    # Caffe ArgMax breaks ties toward the *higher* index; TopK-11 with stable=true toward the
    # lower one.  Reversing the axis first makes the two agree exactly.
    x = ctx.ref(op.inputs["input"])
    xs = ctx.shape(x)
    k = int(op.attribs.get("top_k", 1))
    keep_vals = bool(op.attribs.get("out_max_val", False))
    axis = [int(a) for a in op.attribs.get("axis", [])]
    if axis:
        a = axis[0] % len(xs)
    else:
        xs = (xs[0], int(np.prod(xs[1:], dtype=np.int64)))
        x = reshape(ctx, x, xs)
        a = 1
    n = xs[a]
    rev = slice_layer(ctx, x, [(a, n - 1, -1, n)], xs)
    ks = tuple(k if i == a else d for i, d in enumerate(xs))
    vals, idx = ctx.layer("TopK", [rev, ctx.const(np.asarray(k), "i64")], outputs=[(ks, "f32"), (ks, "i64")],
                          attrs={"axis": a, "mode": "max", "sort": "value", "index_element_type": "i64",
                                 "stable": True}, version="opset11")
    orig = binop(ctx, "sub", ctx.const(np.asarray(n - 1), "i64"), idx)
    orig = ctx.layer("Convert", [orig], ks, etype="f32", attrs={"destination_type": "f32"})
    shape = out_shape(ctx, op)
    if axis:
        ctx.bind(out(op), vals if keep_vals else orig)
        return
    parts = [orig] + ([vals] if keep_vals else [])
    parts = [ctx.layer("Unsqueeze", [p, ctx.ints([1])], (xs[0], 1, k)) for p in parts]
    ctx.bind(out(op), parts[0] if len(parts) == 1 else ctx.layer("Concat", parts, shape, attrs={"axis": 1}))


def _sequence_lengths(ctx: ExportContext, lens: Any, n: int, layer: str) -> Any:
    """The per-batch-item lengths of a sequence layer: load-time data (one length repeated for
    every item) or a run-time ``[N]`` tensor; ``layer`` names the form in a refusal."""
    data = ctx.data(lens)
    if data is not None:
        arr = np.asarray(data, dtype=np.int64).reshape(-1)
        return ctx.const(np.repeat(arr, n) if arr.size == 1 else arr, "i64")
    if ctx.shape(lens) == (n,):
        return ctx.ref(lens)
    raise ctx.fail(f"run-time sequence lengths of shape {ctx.shape(lens)} have no {layer} form")


@exporter("ir_lstm_sequence")
def _ir_lstm_sequence(ctx: ExportContext, op: Operation) -> None:
    # the operation *is* LSTMSequence-5 (batch first, gates f,i,c,o, sigmoid/tanh/tanh)
    x = op.inputs["input"]
    n = ctx.shape(x)[0]
    hs = ctx.shape(op.inputs["initial_hidden"])[2]
    lens_ref = _sequence_lengths(ctx, op.inputs["sequence_lengths"], n, "LSTMSequence")
    names = op.output_names()
    refs = ctx.layer("LSTMSequence", [x, op.inputs["initial_hidden"], op.inputs["initial_cell"], lens_ref,
                                      op.inputs["W"], op.inputs["R"], op.inputs["B"]],
                     outputs=[(ctx.shape(nm), "f32") for nm in names],
                     attrs={"hidden_size": hs, "direction": str(op.attribs.get("direction", "forward")),
                            "clip": float(op.attribs.get("clip", 0.0)), "activations": ["sigmoid", "tanh", "tanh"],
                            "activations_alpha": [], "activations_beta": []}, version="opset5")
    for nm, r in zip(names, refs, strict=True):
        ctx.bind(nm, r)


@exporter("multilinear_upsample")
def _multilinear_upsample(ctx: ExportContext, op: Operation) -> None:
    # checked against Interpolate-11 'linear': symmetric + replicate = half_pixel, asymmetric +
    # replicate = asymmetric, aligned (either border) = align_corners; a zero ('constant')
    # border outside the aligned method has no Interpolate form
    method, border, transform = nnef_attrs.linear_upsample_transform(op)
    if transform is None:
        raise ctx.fail(f"method '{method}' with border '{border}' has no Interpolate form")
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", transform))


@exporter("moments")
def _moments(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    shape = ctx.shape(x)
    axes = [int(a) for a in op.attribs["axes"]]
    mean = reduce_layer(ctx, "ReduceMean", x, axes, shape)
    d = binop(ctx, "sub", x, mean)
    var = reduce_layer(ctx, "ReduceMean", binop(ctx, "mul", d, d), axes, shape)
    ctx.bind(out(op, 0), mean)
    ctx.bind(out(op, 1), var)


@exporter("box", "rms_pool")
def _box(ctx: ExportContext, op: Operation) -> None:
    # box = window sum (or mean with normalize); rms_pool = sqrt(avg_pool(x^2)); both through
    # AvgPool, whose exclude-pad matches border 'ignore' (only a normalized box divides by the
    # count of real values)
    x, size, pads, stride, _ = _pool_window(ctx, op)
    border, normalize = nnef_attrs.box_mode(op)
    xin = ctx.ref(x)
    if op.op == "rms_pool":
        xin = binop(ctx, "mul", xin, xin)
    if border not in ("constant", "ignore") and any(p or q for p, q in pads):
        xin = pad(ctx, xin, [(0, 0), (0, 0)] + pads, border)
        pads = [(0, 0)] * len(pads)
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "kernel": size, "exclude-pad": border == "ignore", "rounding_type": "floor", "auto_pad": "explicit"}
    y = ctx.layer("AvgPool", [xin], out_shape(ctx, op), attrs=attrs)
    if op.op == "rms_pool":
        y = unop(ctx, "sqrt", y)
    elif not normalize:
        y = binop(ctx, "mul", y, scalar(ctx, float(np.prod(size))))
    ctx.bind(out(op), y)


@exporter("argmax_reduce", "argmin_reduce")
def _arg_reduce(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    xs = ctx.shape(x)
    axes = sorted(int(a) % len(xs) for a in op.attribs["axes"])
    name = op.op[:6]   # argmax / argmin
    if len(axes) != 1:
        raise ctx.fail(f"{name} over several axes {axes} (a flattened index) has no TopK form")
    ks = nnef_attrs.reduced_shape(xs, axes)
    # the first extreme wins, as TopK-11 with stable=true keeps it
    _, idx = ctx.layer("TopK", [x, ctx.const(np.asarray(1), "i64")], outputs=[(ks, ctx.etype(x)), (ks, "i64")],
                       attrs={"axis": axes[0], "mode": name[3:], "sort": "value", "index_element_type": "i64",
                              "stable": True}, version="opset11")
    ctx.bind(out(op), idx)


@exporter("ir_prior_box_clustered")
def _ir_prior_box_clustered(ctx: ExportContext, op: Operation) -> None:
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


# --- IR-only extension operations from opset files back to their layers ----------------------

_ARITH = {"add": "Add", "subtract": "Subtract", "multiply": "Multiply", "divide": "Divide",
          "pythondiv": "Divide", "maximum": "Maximum", "minimum": "Minimum", "power": "Power",
          "squared_difference": "SquaredDifference", "floor_mod": "FloorMod", "mod": "Mod"}
_IR_COMPARE = {"equal": "Equal", "not_equal": "NotEqual", "less": "Less", "less_equal": "LessEqual",
               "greater": "Greater", "greater_equal": "GreaterEqual"}


@exporter("ir_arith", "ir_compare")
def _ir_arith(ctx: ExportContext, op: Operation) -> None:
    # numpy broadcasting and OpenVINO's integer semantics already: the layer itself
    kind = str(op.attribs["op"])
    table = _ARITH if op.op == "ir_arith" else _IR_COMPARE
    if kind not in table:
        raise ctx.fail(f"op '{kind}' has no opset layer")
    et = literal_type(ctx, op, [op.inputs["x"], op.inputs["y"]])
    x, y = ctx.ref(op.inputs["x"], et), ctx.ref(op.inputs["y"], et)
    attrs = {"m_pythondiv": kind == "pythondiv"} if table[kind] == "Divide" else None
    out_et = "boolean" if op.op == "ir_compare" else ctx.etype(x)
    ctx.bind(out(op), ctx.layer(table[kind], [x, y], out_shape(ctx, op), etype=out_et, attrs=attrs))


@exporter("ir_top_k")
def _ir_top_k(ctx: ExportContext, op: Operation) -> None:
    # 'ties keep the lower index' = TopK-11 with stable=true
    x = op.inputs["input"]
    names = op.output_names()
    vals, idx = ctx.layer("TopK", [x, ctx.const(np.asarray(int(op.attribs["k"])), "i64")],
                          outputs=[(ctx.shape(names[0]), ctx.etype(x)), (ctx.shape(names[1]), "i64")],
                          attrs={"axis": int(op.attribs["axis"]), "mode": str(op.attribs.get("mode", "max")),
                                 "sort": str(op.attribs.get("sort", "value")), "index_element_type": "i64",
                                 "stable": True}, version="opset11")
    ctx.bind(names[0], vals)
    ctx.bind(names[1], idx)


@exporter("ir_cumsum")
def _ir_cumsum(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("CumSum", [op.inputs["x"], ctx.const(np.asarray(int(op.attribs["axis"])), "i64")],
                                out_shape(ctx, op), version="opset3",
                                attrs={"exclusive": bool(op.attribs.get("exclusive", False)),
                                       "reverse": bool(op.attribs.get("reverse", False))}))


@exporter("ir_reduce_prod")
def _ir_reduce_prod(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("ReduceProd", [op.inputs["input"], ctx.ints(op.attribs["axes"])], out_shape(ctx, op),
                                attrs={"keep_dims": True}))


@exporter("ir_round")
def _ir_round(ctx: ExportContext, op: Operation) -> None:
    mode = str(op.attribs.get("mode", "half_to_even"))
    ctx.bind(out(op), ctx.layer("Round", [op.inputs["x"]], out_shape(ctx, op), attrs={"mode": mode}, version="opset5"))


@exporter("ir_einsum")
def _ir_einsum(ctx: ExportContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Einsum", list(op.inputs["inputs"]), out_shape(ctx, op), version="opset7",
                                attrs={"equation": str(op.attribs["equation"])}))


@exporter("ir_gather_elements", "ir_gather_nd")
def _ir_gather_elements(ctx: ExportContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    if op.op == "ir_gather_elements":
        y = ctx.layer("GatherElements", [x, idx], out_shape(ctx, op), etype=ctx.etype(x), version="opset6",
                      attrs={"axis": int(op.attribs["axis"])})
    else:
        y = ctx.layer("GatherND", [x, idx], out_shape(ctx, op), etype=ctx.etype(x), version="opset8",
                      attrs={"batch_dims": int(op.attribs.get("batch_dims", 0))})
    ctx.bind(out(op), y)


@exporter("ir_one_hot")
def _ir_one_hot(ctx: ExportContext, op: Operation) -> None:
    on = op.inputs["on_value"]
    et = ctx.etype(on)
    ctx.bind(out(op), ctx.layer("OneHot", [op.inputs["indices"], ctx.const(np.asarray(int(op.attribs["depth"])), "i64"),
                                           ctx.ref(on, et), ctx.ref(op.inputs["off_value"], et)],
                                out_shape(ctx, op), etype=et, attrs={"axis": int(op.attribs["axis"])}))


@exporter("ir_scatter")
def _ir_scatter(ctx: ExportContext, op: Operation) -> None:
    data, idx, upd = op.inputs["data"], op.inputs["indices"], op.inputs["updates"]
    kind = str(op.attribs["kind"])
    shape = out_shape(ctx, op)
    axis = ctx.const(np.asarray(int(op.attribs.get("axis", 0))), "i64")
    if kind == "update":
        y = ctx.layer("ScatterUpdate", [data, idx, upd, axis], shape, etype=ctx.etype(data), version="opset3")
    elif kind == "nd":
        y = ctx.layer("ScatterNDUpdate", [data, idx, upd], shape, etype=ctx.etype(data), version="opset4")
    elif kind == "elements":
        y = ctx.layer("ScatterElementsUpdate", [data, idx, upd, axis], shape, etype=ctx.etype(data),
                      version="opset12", attrs={"reduction": str(op.attribs.get("reduction", "none")),
                                                "use_init_val": bool(op.attribs.get("use_init_val", True))})
    else:
        raise ctx.fail(f"scatter kind '{kind}' has no opset layer")
    ctx.bind(out(op), y)


@exporter("ir_gru_sequence", "ir_rnn_sequence")
def _ir_gru_rnn_sequence(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    n = ctx.shape(x)[0]
    hs = ctx.shape(op.inputs["initial_hidden"])[2]
    lens_ref = _sequence_lengths(ctx, op.inputs["sequence_lengths"], n, "sequence-layer")
    attrs: dict[str, Any] = {"hidden_size": hs, "direction": str(op.attribs.get("direction", "forward")),
                             "clip": float(op.attribs.get("clip", 0.0)), "activations_alpha": [],
                             "activations_beta": []}
    if op.op == "ir_gru_sequence":
        kind = "GRUSequence"
        attrs.update(activations=["sigmoid", "tanh"],
                     linear_before_reset=bool(op.attribs.get("linear_before_reset", False)))
    else:
        kind = "RNNSequence"
        attrs["activations"] = [str(op.attribs.get("activation", "tanh"))]
    names = op.output_names()
    refs = ctx.layer(kind, [x, op.inputs["initial_hidden"], lens_ref, op.inputs["W"], op.inputs["R"], op.inputs["B"]],
                     outputs=[(ctx.shape(nm), "f32") for nm in names], attrs=attrs, version="opset5")
    for nm, r in zip(names, refs, strict=True):
        ctx.bind(nm, r)


@exporter("ir_interpolate")
def _ir_interpolate(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    xs, shape = ctx.shape(x), out_shape(ctx, op)
    a = op.attribs
    axes = [int(v) for v in a["axes"]]
    scales = [float(v) for v in a.get("scales", [])]
    attrs = {"mode": str(a.get("mode", "nearest")), "coordinate_transformation_mode":
             str(a.get("coordinate_transformation_mode", "half_pixel")),
             "nearest_mode": str(a.get("nearest_mode", "round_prefer_floor")), "antialias": False,
             "pads_begin": [0] * len(xs), "pads_end": [0] * len(xs),
             "cube_coeff": float(a.get("cubic_coeff_a", -0.75))}
    exact = all(abs(s - shape[ax] / xs[ax]) < 1e-12 for s, ax in zip(scales, axes, strict=True)) if scales else True
    if exact:
        target = ctx.ints([shape[ax] for ax in axes])
        attrs["shape_calculation_mode"] = "sizes"
    else:
        # the coordinate transform uses these scales, not out/in: write them, if OpenVINO's
        # floor(in * scale) gives the same extents
        if any(int(np.floor(xs[ax] * np.float32(s) + 1e-5)) != shape[ax] for s, ax in zip(scales, axes, strict=True)):
            raise ctx.fail(f"scales {scales} do not give the output extents {shape}")
        target = ctx.const(np.asarray(scales, np.float32), "f32")
        attrs["shape_calculation_mode"] = "scales"
    ctx.bind(out(op), ctx.layer("Interpolate", [x, target, ctx.ints(axes)], shape, attrs=attrs, version="opset11"))


@exporter("ir_range")
def _ir_range(ctx: ExportContext, op: Operation) -> None:
    et = ETYPE.get(op.dtype or "scalar", "f32")
    refs = [ctx.ref(op.inputs[k], et) for k in ("start", "stop", "step")]
    ctx.bind(out(op), ctx.layer("Range", refs, out_shape(ctx, op), etype=et, attrs={"output_type": et},
                                version="opset4"))


@exporter("ir_broadcast")
def _ir_broadcast(ctx: ExportContext, op: Operation) -> None:
    # the target shape was computed at run time; written statically, it is the output shape
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    mode = str(op.attribs.get("mode", "numpy"))
    inputs = [x, ctx.ints(shape)]
    if mode == "explicit":
        inputs.append(ctx.ints(op.attribs.get("axes_mapping", [])))
    elif mode not in ("numpy", "bidirectional"):
        raise ctx.fail(f"broadcast mode '{mode}' has no Broadcast-3 form")
    ctx.bind(out(op), ctx.layer("Broadcast", inputs, shape, etype=ctx.etype(x), attrs={"mode": mode},
                                version="opset3"))


# --- a few more NNEF compounds, written as their definitions ---------------------------------

exporter("copy_n")(export_copy_n)


@exporter("stack")
def _stack(ctx: ExportContext, op: Operation) -> None:
    axis = int(op.attribs["axis"])
    parts = []
    for v in op.inputs["values"]:
        s = ctx.shape(v)
        parts.append(ctx.layer("Unsqueeze", [v, ctx.ints([axis])], s[:axis] + (1,) + s[axis:]))
    ctx.bind(out(op), ctx.layer("Concat", parts, out_shape(ctx, op), attrs={"axis": axis}))


@exporter("unstack")
def _unstack(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["value"]
    xs = ctx.shape(x)
    axis = int(op.attribs["axis"]) % len(xs)
    names = op.output_names()
    piece = xs[:axis] + (1,) + xs[axis + 1:]
    refs = ctx.layer("Split", [x, ctx.const(np.asarray(axis), "i64")], outputs=[(piece, ctx.etype(x))] * len(names),
                     attrs={"num_splits": len(names)})
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, ctx.layer("Squeeze", [r, ctx.ints([axis])], ctx.shape(n)))


@exporter("separable_conv")
def _separable_conv(ctx: ExportContext, op: Operation) -> None:
    # conv(input, plane_filter, groups = 0, window attributes), then a 1x1 conv with the bias
    plane = Operation("conv", {"input": op.inputs["input"], "filter": op.inputs["plane_filter"], "bias": 0.0},
                      {"output": out(op)}, {k: v for k, v in op.attribs.items() if k != "groups"} | {"groups": 0},
                      location=op.location)
    xs, fs = ctx.shape(op.inputs["input"]), ctx.shape(op.inputs["plane_filter"])
    from ...ops._common import down_extent, window_arrays

    size, pads, stride, dil = window_arrays("conv", len(xs) - 2, list(fs[2:]), op.attribs.get("padding", []),
                                            op.attribs.get("stride", []), op.attribs.get("dilation", []))
    mid = (xs[0], fs[0]) + tuple(down_extent("conv", 2 + i, xs[2 + i], size[i], stride[i], dil[i],
                                             None if pads is None else pads[i]) for i in range(len(size)))
    saved = ctx.graph.tensors[out(op)].shape
    ctx.graph.tensors[out(op)].shape = mid       # the depth-wise result's shape, while it is written
    try:
        _conv(ctx, plane)
    finally:
        ctx.graph.tensors[out(op)].shape = saved
    filtered = ctx.refs.pop(out(op))
    point = Operation("conv", {"input": filtered, "filter": op.inputs["point_filter"], "bias": op.inputs.get("bias", 0.0)},
                      {"output": out(op)}, {"groups": op.attribs.get("groups", 1)}, location=op.location)
    _conv(ctx, point)


def find_exporter(name: str) -> Exporter | None:
    """The writer of operation ``name`` as IR, or None."""
    return registry.table("ir").find(name)
