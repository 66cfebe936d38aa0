"""Element-wise operations (NNEF operators §4.2, ``add_n`` §4.9.6; the ``ir_arith`` /
``ir_compare`` / ``ir_erf`` / ``ir_round`` extensions) in the formats.

Writing
-------
NNEF broadcasting is aligned (:func:`~nnefx.formats.export.lowering.operands`) and each
operation is named by its NNEF name: a format spells it as one node/layer where it has an
exact one, and the lowering writes the NNEF definition otherwise (``rcp`` is ``1 / x`` in IR,
``Reciprocal`` in ONNX; ``silu`` is ``Swish`` in IR, ``x * sigmoid(x)`` in ONNX).  So one
writer serves both formats here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    BINARY,
    aligned,
    binop,
    broadcast_dims,
    first_input,
    literal,
    literal_type,
    operands,
    out,
    scalar,
    unop,
)
from ..export.registry import for_all, to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext

# === Writing ====================================================================================

#: Unary element-wise operations every format writes by name (its own form or the definition).
UNARY = ("abs", "neg", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "asinh", "acosh", "atanh", "sqrt", "floor", "ceil", "sign", "not", "sigmoid", "relu", "ir_erf",
         "copy", "rcp", "sqr", "rsqrt", "rsqr", "log2", "round", "softplus", "gelu", "silu")


@for_all(*(k for k in BINARY if k != "mod"))
def write_binary(ctx: Any, op: Operation) -> None:
    a, b = operands(ctx, op, [op.inputs["x"], op.inputs["y"]])
    ctx.bind(out(op), binop(ctx, op.op, a, b))


@for_all(*UNARY)
def write_unary(ctx: Any, op: Operation) -> None:
    ctx.bind(out(op), unop(ctx, op.op, first_input(op, "x", "input")))


@for_all("softabs")
def write_softabs(ctx: Any, op: Operation) -> None:
    # sqrt(x^2 + epsilon)
    ctx.bind(out(op), unop(ctx, "softabs", op.inputs["x"], epsilon=literal(ctx, op, "epsilon")))


@for_all("elu")
def write_elu(ctx: Any, op: Operation) -> None:
    # select(x < 0, alpha * (exp(x) - 1), x): Elu in both formats
    ctx.bind(out(op), unop(ctx, "elu", op.inputs["x"], alpha=literal(ctx, op, "alpha", 1.0)))


@for_all("clamp")
def write_clamp(ctx: Any, op: Operation) -> None:
    # max(min(x, b), a); the format's clamp only where it means the same (literal a <= b)
    x, a, b = op.inputs["x"], op.inputs["a"], op.inputs["b"]
    bounds = nnef_attrs.literal_bounds(a, b)
    if bounds is not None:
        ctx.bind(out(op), unop(ctx, "clamp", x, min=bounds[0], max=bounds[1]))
        return
    xr, ar, br = operands(ctx, op, [x, a, b])
    ctx.bind(out(op), binop(ctx, "max", binop(ctx, "min", xr, br), ar))


@for_all("select")
def write_select(ctx: Any, op: Operation) -> None:
    c, t, f = op.inputs["condition"], op.inputs["true_value"], op.inputs["false_value"]
    rank = max((len(ctx.dims(v)) if isinstance(v, str) else 0) for v in (c, t, f))
    et = literal_type(ctx, op, [t, f])
    refs = [aligned(ctx, c, rank, ctx.LOGICAL), aligned(ctx, t, rank, et), aligned(ctx, f, rank, et)]
    shape = broadcast_dims(broadcast_dims(ctx.dims(refs[0]), ctx.dims(refs[1])), ctx.dims(refs[2]))
    ctx.bind(out(op), ctx.spell("select", refs, shape, ctx.type_of(refs[1])))


@for_all("add_n")
def write_add_n(ctx: Any, op: Operation) -> None:
    values = list(op.inputs["x"])
    if not values:   # the definition's end of recursion: constant(shape = [1], value = [0.0])
        ctx.bind(out(op), ctx.const(np.zeros((1,)), ctx.nnef_type("scalar")))
        return
    refs = operands(ctx, op, values)
    y = refs[0]
    for r in refs[1:]:
        y = binop(ctx, "add", y, r)
    ctx.bind(out(op), y)


# --- IR v11 helpers --------------------------------------------------------------------------

_ARITH = {"add": "Add", "subtract": "Subtract", "multiply": "Multiply", "divide": "Divide",
          "pythondiv": "Divide", "maximum": "Maximum", "minimum": "Minimum", "power": "Power",
          "squared_difference": "SquaredDifference", "floor_mod": "FloorMod", "mod": "Mod"}


_IR_COMPARE_ir = {"equal": "Equal", "not_equal": "NotEqual", "less": "Less", "less_equal": "LessEqual",
               "greater": "Greater", "greater_equal": "GreaterEqual"}


# --- ONNX helpers ----------------------------------------------------------------------------

#: ir_arith / ir_compare kind -> the NNEF element-wise operation ONNX writes it as
_IR_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max",
             "minimum": "min", "power": "pow", "mod": "mod"}


_IR_COMPARE_onnx = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
               "greater_equal": "ge"}


# --- the ir_arith / ir_compare / ir_round extensions: each format's own --------------------------------------------------------------------------------------

@to_ir("ir_arith", "ir_compare")
def ir_arith_to_ir(ctx: IRContext, op: Operation) -> None:
    # numpy broadcasting and OpenVINO's integer semantics already: the layer itself
    kind = str(op.attribs["op"])
    table = _ARITH if op.op == "ir_arith" else _IR_COMPARE_ir
    if kind not in table:
        raise ctx.fail(f"op '{kind}' has no opset layer")
    et = literal_type(ctx, op, [op.inputs["x"], op.inputs["y"]])
    x, y = ctx.ref(op.inputs["x"], et), ctx.ref(op.inputs["y"], et)
    attrs = {"m_pythondiv": kind == "pythondiv"} if table[kind] == "Divide" else None
    out_et = "boolean" if op.op == "ir_compare" else ctx.etype(x)
    ctx.bind(out(op), ctx.layer(table[kind], [x, y], out_shape(ctx, op), etype=out_et, attrs=attrs))


@to_onnx("ir_arith", "ir_compare")
def ir_arith_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # numpy broadcasting already; integer division truncates in both (Div on integers),
    # 'mod' is C's fmod (Mod with fmod = 1); floor division/modulo and integer powers are not
    kind = str(op.attribs["op"])
    x, y = op.inputs["x"], op.inputs["y"]
    dt = literal_type(ctx, op, [x, y])
    a, b = ctx.ref(x, dt), ctx.ref(y, dt)
    if op.op == "ir_compare":
        if kind not in _IR_COMPARE_onnx:
            raise ctx.fallback(f"comparison '{kind}' has no ONNX node")
        ctx.bind(out(op), binop(ctx, _IR_COMPARE_onnx[kind], a, b))   # ne: not(eq), the definition
        return
    integer = ctx.dtype(a).kind in "iu"
    if kind == "squared_difference":
        d = binop(ctx, "sub", a, b)
        ctx.bind(out(op), binop(ctx, "mul", d, d))
        return
    if kind not in _IR_ARITH or (integer and kind == "power"):
        raise ctx.fallback(f"'{kind}' on {ctx.dtype(a)} has no exact ONNX node")
    if kind == "mod":
        r = ctx.node("Mod", [a, b], broadcast_dims(ctx.dims(a), ctx.dims(b)), dtype=ctx.dtype(a), fmod=1)
    else:
        r = binop(ctx, _IR_ARITH[kind], a, b)
    ctx.bind(out(op), r)


@to_ir("ir_round")
def ir_round_to_ir(ctx: IRContext, op: Operation) -> None:
    mode = str(op.attribs.get("mode", "half_to_even"))
    ctx.bind(out(op), ctx.layer("Round", [op.inputs["x"]], out_shape(ctx, op), attrs={"mode": mode}, version="opset5"))


@to_onnx("ir_round")
def ir_round_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    mode = str(op.attribs.get("mode", "half_to_even"))
    if mode == "half_to_even":
        ctx.bind(out(op), ctx.node("Round", [x], ctx.dims(x)))
        return
    if mode != "half_away_from_zero":
        raise ctx.fallback(f"mode '{mode}' has no ONNX form")
    # sign(x) * floor(|x| + 0.5), in the same float32 steps as nnefx
    mag = unop(ctx, "floor", binop(ctx, "add", unop(ctx, "abs", x), scalar(ctx, 0.5, ctx.dtype(x))))
    ctx.bind(out(op), binop(ctx, "mul", unop(ctx, "sign", x), mag))
