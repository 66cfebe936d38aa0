"""Element-wise operations and activations in the formats.

Covers NNEF operators §4.2, the activations (§4.9.1; ``softmax`` is with the normalizations),
``add_n`` (§4.9.6), ``cast``, and the ``integer_arith`` / ``integer_compare`` / ``erf`` / ``round_with_mode`` /
``convert_element_type`` extensions.

Writing
-------
NNEF broadcasting is aligned (:func:`~nnefx.formats.export.lowering.operands`) and each
operation is named by its NNEF name: a format spells it as one node/layer where it has an
exact one, and the lowering writes the NNEF definition otherwise (``rcp`` is ``1 / x`` in IR,
``Reciprocal`` in ONNX; ``silu`` is ``Swish`` in IR, ``x * sigmoid(x)`` in ONNX).  So one
writer serves both formats for those; the rest (``prelu``, ``selu``, the extensions, ``cast``)
are each format's writer (``*_to_ir`` beside ``*_to_onnx``).
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
    cast,
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
from ..ir.writer import ETYPE
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64
from ..onnx.writer import NUMPY, tensor_type
from ..onnx.writer import ExportContext as OnnxContext

# ================================================================================================
# Writing
# ================================================================================================

#: Unary element-wise operations every format writes by name (its own form or the definition).
UNARY = ("abs", "neg", "exp", "log", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "asinh", "acosh", "atanh", "sqrt", "floor", "ceil", "sign", "not", "sigmoid", "relu", "erf",
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

#: integer_arith / integer_compare kind -> the NNEF element-wise operation ONNX writes it as
_IR_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max",
             "minimum": "min", "power": "pow", "mod": "mod"}


_IR_COMPARE_onnx = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
               "greater_equal": "ge"}


# --- the integer_arith / integer_compare / round_with_mode extensions: each format's own --------------------------------------------------------------------------------------

@to_ir("integer_arith", "integer_compare")
def ir_arith_to_ir(ctx: IRContext, op: Operation) -> None:
    # numpy broadcasting and OpenVINO's integer semantics already: the layer itself
    kind = str(op.attribs["op"])
    table = _ARITH if op.op == "integer_arith" else _IR_COMPARE_ir
    if kind not in table:
        raise ctx.fail(f"op '{kind}' has no opset layer")
    et = literal_type(ctx, op, [op.inputs["x"], op.inputs["y"]])
    x, y = ctx.ref(op.inputs["x"], et), ctx.ref(op.inputs["y"], et)
    attrs = {"m_pythondiv": kind == "pythondiv"} if table[kind] == "Divide" else None
    out_et = "boolean" if op.op == "integer_compare" else ctx.etype(x)
    ctx.bind(out(op), ctx.layer(table[kind], [x, y], out_shape(ctx, op), etype=out_et, attrs=attrs))


@to_onnx("integer_arith", "integer_compare")
def ir_arith_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # numpy broadcasting already; integer division truncates in both (Div on integers),
    # 'mod' is C's fmod (Mod with fmod = 1); floor division/modulo and integer powers are not
    kind = str(op.attribs["op"])
    x, y = op.inputs["x"], op.inputs["y"]
    dt = literal_type(ctx, op, [x, y])
    a, b = ctx.ref(x, dt), ctx.ref(y, dt)
    if op.op == "integer_compare":
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


@to_ir("round_with_mode")
def ir_round_to_ir(ctx: IRContext, op: Operation) -> None:
    mode = str(op.attribs.get("mode", "half_to_even"))
    ctx.bind(out(op), ctx.layer("Round", [op.inputs["x"]], out_shape(ctx, op), attrs={"mode": mode}, version="opset5"))


@to_onnx("round_with_mode")
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


# --- activations (NNEF operators §4.9.1): each format's own ---

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


# --- casts (NNEF cast, the convert_element_type extension) ---

_CONVERT = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
            "u64": np.uint64, "u32": np.uint32, "u16": np.uint16, "u8": np.uint8, "boolean": np.bool_}


@to_ir("cast", "convert_element_type")
def cast_to_ir(ctx: IRContext, op: Operation) -> None:
    # convert_element_type is Convert itself; NNEF cast floors scalars first (lowering.cast)
    target = op.attribs.get("destination_type") or ETYPE.get(op.dtype or "scalar", "f32")
    ctx.bind(out(op), cast(ctx, first_input(op, "input"), target, floor=op.op == "cast"))


@to_onnx("cast")
def cast_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    target = NUMPY.get(op.dtype or "scalar", F32)
    x = ctx.ref(op.inputs["input"])
    src = ctx.dtype(x)
    # Identity where nothing changes; NNEF cast floors scalars first (lowering.cast)
    ctx.bind(out(op), unop(ctx, "copy", x) if src == target else cast(ctx, x, target))


@to_onnx("convert_element_type")
def ir_convert_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # OpenVINO Convert: float -> integer truncates (into 32 or 64 bits, then the low bits of
    # the target width), integers wrap, anything -> boolean is != 0; the result is held in
    # nnefx's storage (float32 / int64 / bool) with the target's rounding and range.  Cast
    # does each step the same way for the values nnefx accepts.
    dest = str(op.attribs["destination_type"])
    if dest not in _CONVERT:
        raise ctx.fallback(f"destination type '{dest}' has no exact ONNX Cast chain here")
    target = np.dtype(_CONVERT[dest])
    x = ctx.ref(op.inputs["input"])
    src = ctx.dtype(x)

    def cast(v: str, dt: Any) -> str:
        return ctx.node("Cast", [v], ctx.dims(v), dtype=dt, to=tensor_type(dt))

    y = x
    if target.kind in "iu" and src.kind == "f":
        y = cast(y, np.int64 if target.itemsize == 8 else np.int32)
    if np.dtype(ctx.dtype(y)) != target:
        y = cast(y, target)
    storage = NUMPY["logical"] if target.kind == "b" else (F32 if target.kind == "f" else I64)
    if np.dtype(ctx.dtype(y)) != storage:
        y = cast(y, storage)
    if y == x:
        y = unop(ctx, "copy", x)
    ctx.bind(out(op), y)
