"""Activations (NNEF 1.0.5 §4.9.1, mirroring :mod:`nnefx.ops.activation`): how each is read from IR and ONNX (and written, below).

ELU, GELU (erf and tanh forms), Swish, HSigmoid/HSwish, Mish, SoftSign, HardSigmoid, SELU, PReLU and
LeakyReLU, and the Tools' ``softabs``.  The activations both formats name alike and NNEF writes as one
unary operation (``relu``, ``sigmoid``, ``softplus``, ``gelu``, ``silu``) are read and written with the
other unary operations in :mod:`.elementwise`.

Specifications: OpenVINO opset docs: activation functions (Elu-1, Gelu-2/7, Swish-4, HSigmoid-5,
HSwish-4, Mish-4 (read into and written from nnefx's ``mish``), SoftSign-9, HardSigmoid-1, Selu-1, PRelu-1); ONNX operator docs: Elu, Gelu, LeakyRelu,
PRelu, Selu, HardSigmoid, Mish (opset 18, through the operator reader; written from ``mish``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...graph import Operation
from ..export.lowering import aligned as lowering_aligned
from ..export.lowering import binop, broadcast_dims, first_input, literal, operands, out, scalar, unop
from ..export.registry import for_all, to_ir, to_onnx
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import aligned, binary, const_value, unary
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import const
from ._common import onnx_carried, onnx_narrowed, onnx_need, onnx_scalar_like, onnx_widened

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

@operator("Elu", ANY)
def _elu(ctx: NodeContext):
    return ctx.result(ctx.emit1("elu", {"x": ctx.tensor(0)}, {"alpha": ctx.float("alpha")}))


def _erf_gelu(ctx: NodeContext, x: str) -> str:
    s = binary(ctx, "mul", x, 1.0 / math.sqrt(2.0))
    e = unary(ctx, "erf", s)
    one = binary(ctx, "add", e, 1.0)
    h = binary(ctx, "mul", x, 0.5)
    return binary(ctx, "mul", h, one)


@operator("Gelu", ANY)
def _gelu(ctx: NodeContext):
    x = ctx.tensor(0)
    mode = ctx.choice("approximation_mode", ("erf", "tanh"), "erf") if ctx.version != "opset2" else "erf"
    if mode == "erf":
        return ctx.result(_erf_gelu(ctx, x))
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x3 = binary(ctx, "mul", binary(ctx, "mul", x, x), x)
    inner = binary(ctx, "add", x, binary(ctx, "mul", x3, 0.044715))
    t = unary(ctx, "tanh", binary(ctx, "mul", inner, math.sqrt(2.0 / math.pi)))
    return ctx.result(binary(ctx, "mul", binary(ctx, "mul", x, 0.5), binary(ctx, "add", t, 1.0)))


@operator("Swish", ANY)
def _swish(ctx: NodeContext):
    x = ctx.tensor(0)
    if ctx.n_inputs < 2:
        return ctx.result(unary(ctx, "silu", x))
    beta = ctx.input(1)
    b = float(np.asarray(beta.const).reshape(-1)[0]) if beta.is_const else None
    if b == 1.0:
        return ctx.result(unary(ctx, "silu", x))
    bx = binary(ctx, "mul", x, b if b is not None else ctx.tensor(1))
    return ctx.result(binary(ctx, "mul", x, unary(ctx, "sigmoid", bx)))


def _hsig(ctx: NodeContext, x: str) -> str:
    c = ctx.emit1("clamp", {"x": binary(ctx, "add", x, 3.0), "a": 0.0, "b": 6.0})
    return binary(ctx, "div", c, 6.0)


@operator("HSigmoid", ANY)
def _hsigmoid(ctx: NodeContext):
    return ctx.result(_hsig(ctx, ctx.tensor(0)))


@operator("HSwish", ANY)
def _hswish(ctx: NodeContext):
    x = ctx.tensor(0)
    return ctx.result(binary(ctx, "mul", x, _hsig(ctx, x)))


@operator("Mish", ANY)
def _mish(ctx: NodeContext):
    # OpenVINO Mish-4 and ONNX Mish-18 (read through this operator): x * tanh(softplus(x))
    ctx.expect_inputs(1)
    return ctx.result(ctx.emit1("mish", {"x": ctx.tensor(0)}))


@operator("SoftSign", ANY)
def _softsign(ctx: NodeContext):
    x = ctx.tensor(0)
    return ctx.result(binary(ctx, "div", x, binary(ctx, "add", unary(ctx, "abs", x), 1.0)))


@operator("HardSigmoid", ANY)
def _hard_sigmoid(ctx: NodeContext):
    alpha = float(ctx.const(1, "alpha").reshape(-1)[0])
    beta = float(ctx.const(2, "beta").reshape(-1)[0])
    y = binary(ctx, "add", binary(ctx, "mul", ctx.tensor(0), alpha), beta)
    return ctx.result(ctx.emit1("clamp", {"x": y, "a": 0.0, "b": 1.0}))


@operator("Selu", ANY)
def _selu(ctx: NodeContext):
    alpha = float(ctx.const(1, "alpha").reshape(-1)[0])
    lam = float(ctx.const(2, "lambda").reshape(-1)[0])
    return ctx.result(ctx.emit1("selu", {"x": ctx.tensor(0)}, {"alpha": alpha, "lambda": lam}))


@operator(("PRelu", "PReLU"), ANY)
def _prelu(ctx: NodeContext):
    r = ctx.in_rank(0)
    slope = ctx.input(1)
    srank = len(slope.shape or ())
    if srank == 1 and r >= 2 and slope.shape[0] != 1 and ctx.in_shape(0)[-1] != slope.shape[0]:
        # a per-channel slope [C] applies along axis 1 (OpenVINO PRelu rule)
        if slope.is_const:
            a = const_value(ctx, slope.const.reshape((1, -1) + (1,) * (r - 2)), slope.etype)
        else:
            a = ctx.emit1("unsqueeze", {"input": ctx.tensor(1)}, {"axes": [0] + list(range(2, r))})
        x = ctx.tensor(0)
    else:
        x, a = aligned(ctx, [0, 1])
    return ctx.result(ctx.emit1("prelu", {"x": x, "alpha": a}))


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("LeakyRelu")
def _onnx_leaky_relu(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    c = r.ctx([x])
    return c.result(c.emit1("leaky_relu", {"x": c.tensor(0)}, {"alpha": float(attrs.get("alpha", 0.01))}))


@onnx_node("PRelu")
def _onnx_prelu(r, attrs, ins):
    # max(0, x) + slope * min(0, x), with ONNX's (numpy) broadcasting of the slope
    x, slope = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "slope")
    zero = const(np.zeros((), np.float32))
    pos = r.apply1("Maximum", {"auto_broadcast": "numpy"}, [x, zero])
    neg = r.apply1("Minimum", {"auto_broadcast": "numpy"}, [x, zero])
    return r.apply1("Add", {"auto_broadcast": "numpy"}, [pos, r.apply1("Multiply", {"auto_broadcast": "numpy"},
                                                                [neg, slope])])


@onnx_node("Elu")
def _onnx_elu(r, attrs, ins):
    return r.apply1("Elu", {"alpha": float(attrs.get("alpha", 1.0))}, [onnx_need(r, ins, 0, "X")])


@onnx_node("Selu")
def _onnx_selu(r, attrs, ins):
    a = float(attrs.get("alpha", 1.67326319217681884765625))
    g = float(attrs.get("gamma", 1.05070102214813232421875))
    return r.apply1("Selu", {}, [onnx_need(r, ins, 0, "X"), const(np.float32(a)), const(np.float32(g))])


@onnx_node("HardSigmoid")
def _onnx_hard_sigmoid(r, attrs, ins):
    a, b = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    return r.apply1("HardSigmoid", {}, [onnx_need(r, ins, 0, "X"), const(np.float32(a)), const(np.float32(b))])


@onnx_node("Gelu")
def _onnx_gelu(r, attrs, ins):
    mode = {"none": "erf", "tanh": "tanh"}.get(attrs.get("approximate", "none"))
    if mode is None:
        raise r.error(f"unknown approximate='{attrs.get('approximate')}'")
    return r.apply1("Gelu", {"approximation_mode": mode}, [onnx_need(r, ins, 0, "X")], version="opset7")


# --- ONNX nodes written as compositions of numpy-style operators (ONNX operator docs) ---------

def _np_op(r, kind: str, *values):
    return r.apply1(kind, {"auto_broadcast": "numpy"}, list(values))


@onnx_node("Celu")
def _onnx_celu(r, attrs, ins):
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    # (bfloat16 and float8 data computed in float32 and rounded once)
    x, narrow = onnx_widened(r, onnx_need(r, ins, 0, "X"))
    onnx_carried(r, x)
    alpha = onnx_scalar_like(x, float(attrs.get("alpha", 1.0)))
    zero, one = onnx_scalar_like(x, 0.0), onnx_scalar_like(x, 1.0)
    e = _np_op(r, "Subtract", r.apply1("Exp", {}, [_np_op(r, "Divide", x, alpha)]), one)
    y = _np_op(r, "Add", _np_op(r, "Maximum", x, zero), _np_op(r, "Minimum", zero, _np_op(r, "Multiply", alpha, e)))
    return onnx_narrowed(r, y, narrow)


@onnx_node("ThresholdedRelu")
def _onnx_thresholded_relu(r, attrs, ins):
    # x where x > alpha, else 0
    x = onnx_need(r, ins, 0, "X")
    onnx_carried(r, x)
    above = _np_op(r, "Greater", x, onnx_scalar_like(x, float(attrs.get("alpha", 1.0))))
    return _np_op(r, "Select", above, x, onnx_scalar_like(x, 0))


@onnx_node("Shrink")
def _onnx_shrink(r, attrs, ins):
    # x - bias where x > lambd, x + bias where x < -lambd, else 0 (for every numeric type)
    x = onnx_need(r, ins, 0, "input")
    onnx_carried(r, x)
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    if x.etype not in ("f64", "f32", "f16", "bf16") and (lambd != int(lambd) or bias != int(bias)):
        raise r.error(f"Shrink of {x.etype} data with a fractional lambd {lambd} or bias {bias} is not supported")
    hi = _np_op(r, "Select", _np_op(r, "Greater", x, onnx_scalar_like(x, lambd)),
                _np_op(r, "Subtract", x, onnx_scalar_like(x, bias)), onnx_scalar_like(x, 0))
    return _np_op(r, "Select", _np_op(r, "Less", x, onnx_scalar_like(x, -lambd)),
                  _np_op(r, "Add", x, onnx_scalar_like(x, bias)), hi)


@onnx_node("Swish")
def _onnx_swish(r, attrs, ins):
    # x * sigmoid(alpha * x)
    x = onnx_need(r, ins, 0, "X")
    onnx_carried(r, x)
    return r.apply1("Swish", {}, [x, onnx_scalar_like(x, float(attrs.get("alpha", 1.0)))], version="opset4")


@onnx_node("SwiGLU")
def _onnx_swiglu(r, attrs, ins):
    # Swish_alpha(A) * B, A and B of one shape
    a, b = onnx_need(r, ins, 0, "A"), onnx_need(r, ins, 1, "B")
    onnx_carried(r, a, b)
    if a.shape != b.shape:
        raise r.error(f"A {a.shape} and B {b.shape} must have the same shape")
    gate = r.apply1("Swish", {}, [a, onnx_scalar_like(a, float(attrs.get("alpha", 1.0)))], version="opset4")
    return _np_op(r, "Multiply", gate, b)


# ================================================================================================
# Writing
# ================================================================================================

@for_all("softabs")
def write_softabs(ctx: Any, op: Operation) -> None:
    # sqrt(x^2 + epsilon)
    ctx.bind(out(op), unop(ctx, "softabs", op.inputs["x"], epsilon=literal(ctx, op, "epsilon")))


@for_all("elu")
def write_elu(ctx: Any, op: Operation) -> None:
    # select(x < 0, alpha * (exp(x) - 1), x): Elu in both formats
    ctx.bind(out(op), unop(ctx, "elu", op.inputs["x"], alpha=literal(ctx, op, "alpha", 1.0)))


# --- each format's own ---

@to_ir("mish")
def mish_to_ir(ctx: IRContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.layer("Mish", [x], ctx.shape(x), version="opset4"))


@to_onnx("mish")
def mish_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.node("Mish", [x], ctx.dims(x)))


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
        slope = lowering_aligned(ctx, alpha, rank)
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
