"""Normalizations in the formats.

Covers NNEF operators §4.9.4 (batch, LRN, L1/L2).

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    aligned,
    binop,
    channel_vector,
    literal,
    operands,
    out,
    scalar,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import reduce_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, reduce
from ..onnx.writer import ExportContext as OnnxContext

# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("local_response_normalization")
def lrn_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("local_response_normalization")
def lrn_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # input / (bias + alpha * box(sqr(input), size, normalize = true)) ^ beta with automatic
    # padding: a window [c - floor((n-1)/2), c + ceil((n-1)/2)], LRN's channel window
    size = [int(s) for s in op.attribs["size"]]
    x = op.inputs["input"]
    if ctx.rank(x) < 3 or len(size) != ctx.rank(x) or any(s != 1 for k, s in enumerate(size) if k != 1):
        raise ctx.fallback(f"window size {size} is not a channel window (LRN's only form)")
    if size[1] % 2 == 0:   # the ONNX spec allows it, onnxruntime's LRN does not
        raise ctx.fallback(f"an even channel window {size[1]} is refused by onnxruntime's LRN")
    for name in ("alpha", "beta", "bias"):
        if isinstance(op.attribs.get(name, op.inputs.get(name)), str):
            raise ctx.fallback(f"a tensor '{name}' has no LRN form")
    alpha, beta, bias = nnef_attrs.lrn_params(op)
    ctx.bind(out(op), ctx.node("LRN", [x], ctx.dims(x), size=size[1], alpha=alpha, beta=beta, bias=bias))


@to_ir("batch_normalization")
def batch_norm_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("batch_normalization")
def batch_norm_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    dims = ctx.dims(x)
    eps = literal(ctx, op, "epsilon")
    names = ("scale", "offset", "mean", "variance")   # BatchNormalization's input order
    vals = nnef_attrs.batch_norm_inputs(op)
    if len(dims) >= 2 and dims[1] is not None:
        vecs = [channel_vector(ctx, vals[k], dims[1], F32) for k in names]
        if all(v is not None for v in vecs):
            ctx.bind(out(op), ctx.node("BatchNormalization", [x] + vecs, dims, epsilon=eps))
            return
    # general NNEF broadcasting: offset + scale * (x - mean) / sqrt(variance + eps)
    mean, var, off, sc = operands(ctx, op, [op.inputs["input"], vals["mean"], vals["variance"], vals["offset"],
                                            vals["scale"]])[1:]
    xr = aligned(ctx, op.inputs["input"], max(ctx.rank(v) for v in (mean, var, off, sc, x)))
    den = unop(ctx, "sqrt", binop(ctx, "add", var, scalar(ctx, eps)))
    y = binop(ctx, "add", off, binop(ctx, "div", binop(ctx, "mul", sc, binop(ctx, "sub", xr, mean)), den))
    ctx.bind(out(op), y)


@to_ir("l1_normalization", "l2_normalization")
def lp_norm_to_ir(ctx: IRContext, op: Operation) -> None:
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


# --- softmax (NNEF operators §4.9.1) ---

@to_ir("softmax")
def softmax_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("softmax")
def softmax_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    r = ctx.rank(x)
    axes = sorted({int(a) % max(r, 1) for a in op.attribs.get("axes", [1])})
    if len(axes) == 1:
        ctx.bind(out(op), ctx.node("Softmax", [x], ctx.dims(x), axis=axes[0]))
        return
    # several axes: the definition, max-shifted as NNEF writes it
    m = reduce(ctx, "ReduceMax", x, axes)
    e = unop(ctx, "exp", binop(ctx, "sub", x, m))
    ctx.bind(out(op), binop(ctx, "div", e, reduce(ctx, "ReduceSum", e, axes)))
