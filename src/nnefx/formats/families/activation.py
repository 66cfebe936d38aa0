"""Activation functions in the formats.

Covers NNEF operators §4.9.1 (``elu``, ``prelu``, ``softmax``, ...).

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
from ..export.lowering import (
    aligned,
    binop,
    broadcast_dims,
    first_input,
    literal,
    operands,
    out,
    scalar,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import reduce_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import reduce
from ..onnx.writer import ExportContext as OnnxContext

# === Writing =====================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("leaky_relu", "prelu")
def prelu_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("leaky_relu")
def leaky_relu_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # select(x < 0, alpha * x, x)
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.node("LeakyRelu", [x], ctx.dims(x), alpha=literal(ctx, op, "alpha")))


@to_onnx("prelu")
def prelu_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # select(x < 0, alpha * x, x) with NNEF broadcasting (PRelu's slope may only broadcast
    # towards x; the definition broadcasts both ways)
    x, alpha = op.inputs["x"], op.inputs["alpha"]
    xr, ar = operands(ctx, op, [x, alpha])
    dt = ctx.dtype(xr)
    neg = binop(ctx, "lt", xr, scalar(ctx, 0.0, dt))
    prod = binop(ctx, "mul", ar, xr)
    shape = broadcast_dims(ctx.dims(neg), ctx.dims(prod))
    ctx.bind(out(op), ctx.node("Where", [neg, prod, xr], shape, dtype=dt))


@to_ir("selu")
def selu_to_ir(ctx: IRContext, op: Operation) -> None:
    x = ctx.ref(first_input(op, "x"))
    et = ctx.etype(x)
    alpha = float(op.attribs.get("alpha", 1.67326319))
    lam = float(op.attribs.get("lambda", 1.05070102))
    ctx.bind(out(op), ctx.layer("Selu", [x, ctx.const([alpha], et), ctx.const([lam], et)], ctx.shape(x)))


@to_onnx("selu")
def selu_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # lambda * select(x < 0, alpha * (exp(x) - 1), x)
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.node("Selu", [x], ctx.dims(x), alpha=literal(ctx, op, "alpha", 1.67326319),
                               gamma=literal(ctx, op, "lambda", 1.05070102)))


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
