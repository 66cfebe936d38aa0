"""Element-wise operators: how each operator is read from IR and ONNX (and written, below).

Arithmetic, comparison and logic with numpy broadcasting, unary math (with the activations both formats
name alike: ReLU, Sigmoid, SoftPlus, ...), Clamp, Select, Convert, Round; the other activations are in
:mod:`.activation`.

Numpy broadcasting is made explicit before every NNEF binary operation (see
:func:`nnefx.formats.reading.conventions.aligned`); operations on constants are folded while
loading (the ``@fold`` functions), so the graph holds only run-time work; integer run-time
arithmetic (shape computations under a dynamic batch) uses ``integer_arith``/``integer_compare``, because
NNEF arithmetic is defined on ``scalar`` only.

Specifications: OpenVINO opset docs: arithmetic/comparison/logical/activation operations; ONNX operator docs: Add, Sub,
Mul, Div, Pow, Mod, Max, Min, Sum, Mean, Relu, ..., Clip, Where, Cast, Round.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...etypes import numpy_dtype
from ...graph import Operation
from ...ops.ext import arith, compare, convert
from ...ops.onnx.tensors import cast as onnx_cast_kernel
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    BINARY,
    binop,
    broadcast_dims,
    cast,
    first_input,
    literal_type,
    operands,
    out,
    scalar,
    unop,
)
from ..export.lowering import (
    aligned as lowering_aligned,
)
from ..export.registry import for_all, to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ETYPE
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64
from ..onnx.writer import NUMPY, WRITABLE_ETYPES, tensor_type
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import aligned, binary, const_value, unary
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import Dim, Value, concrete, const, dtype_of, element_type, nnef_dtype
from ._common import (
    onnx_carried,
    onnx_const,
    onnx_convert,
    onnx_emit,
    onnx_kept_etypes,
    onnx_need,
    onnx_write,
)

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

_BINARY = {"Add": ("add", "add"), "Subtract": ("sub", "subtract"), "Multiply": ("mul", "multiply"),
           "Divide": ("div", "divide"), "Maximum": ("max", "maximum"), "Minimum": ("min", "minimum"),
           "Power": ("pow", "power"), "SquaredDifference": (None, "squared_difference"),
           "FloorMod": (None, "floor_mod"), "Mod": (None, "mod")}
_COMPARE = {"Equal": ("eq", "equal"), "NotEqual": ("ne", "not_equal"), "Less": ("lt", "less"),
            "LessEqual": ("le", "less_equal"), "Greater": ("gt", "greater"),
            "GreaterEqual": ("ge", "greater_equal")}


def check_broadcast(ctx: NodeContext) -> None:
    mode = ctx.str("auto_broadcast", "numpy").lower()
    if mode not in ("numpy", "none"):
        raise ctx.error(f"auto_broadcast='{mode}' is not supported (only numpy and none)")


def _arith_op(ctx: NodeContext) -> str:
    name = _BINARY[ctx.type][1]
    if ctx.type == "Divide" and ctx.bool("m_pythondiv", True):
        name = "pythondiv"
    return name


@fold(list(_BINARY), OPSETS)
def _fold_binary(ctx: NodeContext, arrays):
    x, y = arrays
    if x.dtype == object or y.dtype == object:
        if ctx.type not in ("Add", "Subtract", "Multiply", "Divide"):
            return None
        for a in (x, y):
            if a.dtype == object and any(isinstance(v, Dim) for v in a.reshape(-1)):
                return None  # arithmetic on an unknown extent: computed at run time
        x, y = x.astype(np.int64), y.astype(np.int64)
    return arith(x, y, _arith_op(ctx)).astype(np.result_type(x, y))


@operator(list(_BINARY), ANY)
def _binary(ctx: NodeContext):
    ctx.expect_inputs(2)
    check_broadcast(ctx)
    nnef_op = _BINARY[ctx.type][0]
    kinds = {dtype_of(ctx.input(0)), dtype_of(ctx.input(1))}
    if kinds != {"scalar"} or nnef_op is None:
        if kinds == {"scalar"} and ctx.type == "SquaredDifference":
            x, y = aligned(ctx, [0, 1])
            d = binary(ctx, "sub", x, y)
            return ctx.result(binary(ctx, "mul", d, d))
        z = ctx.emit1("integer_arith", {"x": ctx.tensor(0), "y": ctx.tensor(1)}, {"op": _arith_op(ctx)},
                      dtype=dtype_of(ctx.input(0)))
        return ctx.result(z, ctx.in_etype(0))
    x, y = aligned(ctx, [0, 1])
    return ctx.result(binary(ctx, nnef_op, x, y))


@fold(list(_COMPARE), OPSETS)
def _fold_compare(ctx: NodeContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    return compare(arrays[0], arrays[1], _COMPARE[ctx.type][1])


@operator(list(_COMPARE), ANY)
def _compare(ctx: NodeContext):
    ctx.expect_inputs(2)
    check_broadcast(ctx)
    nnef_op, ir_op = _COMPARE[ctx.type]
    kinds = {dtype_of(ctx.input(0)), dtype_of(ctx.input(1))}
    if "string" in kinds and (kinds != {"string"} or ctx.type != "Equal"):
        # ONNX Equal-19 compares strings for equality; no ordering of strings is defined
        raise ctx.error(f"{ctx.type} of {' and '.join(sorted(kinds))} tensors is not defined "
                        "(strings compare only for equality, with strings)")
    if kinds != {"scalar"}:
        z = ctx.emit1("integer_compare", {"x": ctx.tensor(0), "y": ctx.tensor(1)}, {"op": ir_op},
                      dtype=dtype_of(ctx.input(0)), out_dtype="logical")
        return ctx.result(z, "boolean")
    x, y = aligned(ctx, [0, 1])
    return ctx.result(binary(ctx, nnef_op, x, y, "logical"), "boolean")


_LOGICAL = {"LogicalAnd": "and", "LogicalOr": "or", "LogicalXor": "xor"}


@fold(list(_LOGICAL) + ["LogicalNot"], OPSETS)
def _fold_logical(ctx: NodeContext, arrays):
    if ctx.type == "LogicalNot":
        return np.logical_not(arrays[0])
    fn = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[_LOGICAL[ctx.type]]
    return fn(arrays[0], arrays[1])


@operator(list(_LOGICAL), ANY)
def _logical(ctx: NodeContext):
    ctx.expect_inputs(2)
    check_broadcast(ctx)
    x, y = aligned(ctx, [0, 1])
    op = _LOGICAL[ctx.type]
    if op == "xor":
        a = binary(ctx, "or", x, y, "logical")
        b = binary(ctx, "and", x, y, "logical")
        nb = ctx.emit1("not", {"x": b}, out_dtype="logical")
        return ctx.result(binary(ctx, "and", a, nb, "logical"), "boolean")
    return ctx.result(binary(ctx, op, x, y, "logical"), "boolean")


@operator("LogicalNot", ANY)
def _logical_not(ctx: NodeContext):
    return ctx.result(ctx.emit1("not", {"x": ctx.tensor(0)}, out_dtype="logical"), "boolean")


_UNARY = {"Relu": "relu", "ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Abs": "abs", "Negative": "neg", "Floor": "floor", "Ceiling": "ceil", "Ceil": "ceil",
          "Sin": "sin", "Cos": "cos", "Tan": "tan", "Sinh": "sinh", "Cosh": "cosh", "Asin": "asin",
          "Acos": "acos", "Atan": "atan", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
          "Sign": "sign", "SoftPlus": "softplus", "Erf": "erf"}

_NP_UNARY: dict[str, Callable] = {"Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Abs": np.abs,
                                  "Negative": np.negative, "Floor": np.floor, "Ceiling": np.ceil,
                                  "Ceil": np.ceil, "Sign": np.sign}


@fold(list(_NP_UNARY), OPSETS)
def _fold_unary(ctx: NodeContext, arrays):
    a = arrays[0]
    if a.dtype == object:
        return None
    return _NP_UNARY[ctx.type](a).astype(a.dtype)


@operator(list(_UNARY), ANY)
def _unary(ctx: NodeContext):
    ctx.expect_inputs(1)
    v = ctx.input(0)
    if dtype_of(v) != "scalar":
        if ctx.type in ("Abs", "Negative", "Sign", "Floor", "Ceiling", "Ceil"):
            x = ctx.tensor(0)
            if ctx.type in ("Floor", "Ceiling", "Ceil"):
                return ctx.result(x, v.etype)
            zero = const_value(ctx, np.zeros((1,) * ctx.in_rank(0), np.int64), v.etype)
            if ctx.type == "Negative":
                return ctx.result(ctx.emit1("integer_arith", {"x": zero, "y": x}, {"op": "subtract"}, dtype="integer"),
                                  v.etype)
            neg = ctx.emit1("integer_arith", {"x": zero, "y": x}, {"op": "subtract"}, dtype="integer")
            if ctx.type == "Abs":
                return ctx.result(ctx.emit1("integer_arith", {"x": x, "y": neg}, {"op": "maximum"}, dtype="integer"),
                                  v.etype)
        raise ctx.error(f"{ctx.type} on {v.etype} tensors is not supported")
    return ctx.result(unary(ctx, _UNARY[ctx.type], ctx.tensor(0)))


@operator("Clamp", ANY)
def _clamp(ctx: NodeContext):
    lo, hi = ctx.float("min"), ctx.float("max")
    if dtype_of(ctx.input(0)) != "scalar":
        x = ctx.tensor(0)
        a = ctx.emit1("integer_arith", {"x": x, "y": const_value(ctx, np.int64(math.ceil(lo)), ctx.in_etype(0))},
                      {"op": "maximum"}, dtype="integer")
        b = ctx.emit1("integer_arith", {"x": a, "y": const_value(ctx, np.int64(math.floor(hi)), ctx.in_etype(0))},
                      {"op": "minimum"}, dtype="integer")
        return ctx.result(b, ctx.in_etype(0))
    return ctx.result(ctx.emit1("clamp", {"x": ctx.tensor(0), "a": lo, "b": hi}))


@fold("Select", OPSETS)
def _fold_select(ctx: NodeContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    return np.where(arrays[0], arrays[1], arrays[2])


@operator("Select", ANY)
def _select(ctx: NodeContext):
    ctx.expect_inputs(3)
    check_broadcast(ctx)
    c, a, b = aligned(ctx, [0, 1, 2])
    dt = dtype_of(ctx.input(1))
    return ctx.result(ctx.emit1("select", {"condition": c, "true_value": a, "false_value": b}, dtype=dt),
                      ctx.in_etype(1))


# --- Convert ---------------------------------------------------------------------------------------


@fold(("Convert", "ConvertLike"), OPSETS)
def _fold_convert(ctx: NodeContext, arrays):
    dest = _convert_target(ctx)
    a = arrays[0]
    if a.dtype == object:
        if dest in ("i64", "i32") and ctx.in_etype(0) in ("i64", "i32"):
            return a  # a symbolic shape stays symbolic through an integer conversion
        return None
    return ctx.folded(convert(a, dest), dest)


def _convert_target(ctx: NodeContext) -> str:

    if ctx.type == "ConvertLike":
        return ctx.in_etype(1)
    return element_type(ctx.str("destination_type"), ctx.location)


@operator(("Convert", "ConvertLike"), ANY)
def _convert(ctx: NodeContext):
    dest = _convert_target(ctx)
    src = ctx.in_etype(0)
    x = ctx.tensor(0)
    sk, dk = nnef_dtype(src), nnef_dtype(dest)
    if src == dest or (sk == dk == "scalar" and dest in ("f32", "f64") and src != "f64"):
        return ctx.result(x, dest)  # exact: every f16/f32 value is an f32 value
    if sk == dk == "integer" and dest in ("i64",):
        return ctx.result(x, dest)
    if sk != "scalar" and dk == "scalar" and dest in ("f32", "f64"):
        return ctx.result(ctx.emit1("cast", {"input": x}, dtype="scalar"), dest)
    if dk == "logical":
        return ctx.result(ctx.emit1("cast", {"input": x}, dtype="logical"), dest)
    return ctx.result(ctx.emit1("convert_element_type", {"input": x}, {"destination_type": dest}, dtype=dk), dest)

@operator("Round", ANY)
def _round(ctx: NodeContext):
    mode = ctx.choice("mode", ("half_to_even", "half_away_from_zero"))
    if dtype_of(ctx.input(0)) != "scalar":
        return ctx.result(ctx.tensor(0), ctx.in_etype(0))
    return ctx.result(ctx.emit1("round_with_mode", {"x": ctx.tensor(0)}, {"mode": mode}))


# --- IsNaN / IsInf / IsFinite, bitwise operations on booleans -------------------------------------


@operator(("IsNaN", "IsInf", "IsFinite"), ANY)
def _is_class(ctx: NodeContext):
    # OpenVINO opset10: x - x is 0 exactly for finite x and NaN for NaN and infinities, so the
    # tests below hold for every floating width (no constant like FLT_MAX is involved).
    ctx.expect_inputs(1)
    x = ctx.tensor(0)

    def test(op: str, a, b) -> str:
        return binary(ctx, op, a, b, out_dtype="logical")

    if ctx.type == "IsNaN":
        y = test("ne", x, x)
    elif ctx.type == "IsFinite":
        y = test("eq", binary(ctx, "sub", x, x), 0.0)
    else:
        y = test("and", test("eq", x, x), test("ne", binary(ctx, "sub", x, x), 0.0))
        pos, neg = ctx.bool("detect_positive", True), ctx.bool("detect_negative", True)
        if not (pos or neg):
            y = test("and", y, False)
        elif pos != neg:
            y = test("and", y, test("gt" if pos else "lt", x, 0.0))
    return ctx.result(y)


@operator(("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"), ANY)
def _bitwise(ctx: NodeContext):
    # OpenVINO opset13 bitwise operations: on booleans they are the logical ones; on integers
    # no NNEF operation computes them.
    if any(ctx.in_etype(i) != "boolean" for i in range(len(ctx.values))):
        raise ctx.error(f"{ctx.type} is supported on boolean tensors only (found "
                        f"{', '.join(ctx.in_etype(i) for i in range(len(ctx.values)))})")
    if ctx.type == "BitwiseNot":
        ctx.expect_inputs(1)
        return ctx.result(ctx.emit1("not", {"x": ctx.tensor(0)}, out_dtype="logical"))
    ctx.expect_inputs(2)
    check_broadcast(ctx)
    a, b = aligned(ctx, [0, 1])
    if ctx.type == "BitwiseXor":  # (a or b) and not (a and b)
        both = ctx.emit1("not", {"x": binary(ctx, "and", a, b, "logical")}, out_dtype="logical")
        return ctx.result(binary(ctx, "and", binary(ctx, "or", a, b, "logical"), both, "logical"))
    return ctx.result(binary(ctx, "and" if ctx.type == "BitwiseAnd" else "or", a, b, "logical"))


# --- ONNX nodes -----------------------------------------------------------------------------------

_onnx_BIN = {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Div": "Divide", "Pow": "Power", "Max": "Maximum",
        "Min": "Minimum", "Equal": "Equal", "Less": "Less", "Greater": "Greater", "LessOrEqual": "LessEqual",
        "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd", "Or": "LogicalOr", "Xor": "LogicalXor"}


@onnx_node(*_onnx_BIN)
def _onnx_binary(r, attrs, ins):
    kind = _onnx_BIN[r.node.op_type]
    if attrs.get("broadcast", 0) and "axis" in attrs:
        raise r.error("legacy broadcast with an axis (opset < 7) is not supported")
    vals = [v for v in ins if v is not None]
    if kind in ("Maximum", "Minimum") and len(vals) == 1:
        return vals[0]
    if len(vals) < 2 or (len(vals) > 2 and kind not in ("Maximum", "Minimum")):
        raise r.error(f"expects 2 inputs, has {len(vals)}")
    data = {"auto_broadcast": "numpy"}
    if kind == "Divide":
        data["m_pythondiv"] = False  # ONNX integer division truncates
    acc = vals[0]
    for v in vals[1:]:
        if kind == "Power" and nnef_dtype(acc.etype) == "integer" and nnef_dtype(v.etype) == "scalar":
            # Pow of an integer base to a float exponent (Pow-15 T1, T2 differ): the base's type
            # is the result's; ONNX computes it in floating point and converts back (toward zero)
            power = r.apply1(kind, data, [onnx_convert(r, acc, "f64"), onnx_convert(r, v, "f64")])
            acc = onnx_convert(r, power, acc.etype)
            continue
        if kind == "Power" and v.is_const and v.etype != acc.etype:
            v = const(np.asarray(v.const).astype(np.float32 if acc.etype == "f32" else v.const.dtype))
        acc = r.apply1(kind, data, [acc, v])
    return acc


@onnx_node("Mod")
def _onnx_mod(r, attrs, ins):
    kind = "Mod" if attrs.get("fmod", 0) else "FloorMod"  # fmod=1: C fmod; 0: the divisor's sign
    return r.apply1(kind, {"auto_broadcast": "numpy"}, [onnx_need(r, ins, 0, "A"), onnx_need(r, ins, 1, "B")])


@onnx_node("Sum", "Mean")
def _onnx_sum(r, attrs, ins):
    vals = [v for v in ins if v is not None]
    acc = vals[0]
    for v in vals[1:]:
        acc = r.apply1("Add", {"auto_broadcast": "numpy"}, [acc, v])
    if r.node.op_type == "Mean" and len(vals) > 1:
        acc = r.apply1("Divide", {"auto_broadcast": "numpy"}, [acc, const(np.float32(len(vals)))])
    return acc


_onnx_UN = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
       "Abs": "Abs", "Neg": "Negative", "Floor": "Floor", "Ceil": "Ceiling", "Erf": "Erf", "Sin": "Sin",
       "Cos": "Cos", "Tan": "Tan", "Sign": "Sign", "Softplus": "SoftPlus", "Not": "LogicalNot",
       "HardSwish": "HSwish", "Mish": "Mish", "Softsign": "SoftSign", "Asin": "Asin", "Acos": "Acos",
       "Atan": "Atan", "Sinh": "Sinh", "Cosh": "Cosh"}


@onnx_node(*_onnx_UN)
def _onnx_unary(r, attrs, ins):
    return r.apply1(_onnx_UN[r.node.op_type], {}, [onnx_need(r, ins, 0, "X")])


@onnx_node("Reciprocal")
def _onnx_reciprocal(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    if x.etype not in ("f32", "f64", "f16"):
        raise r.error("Reciprocal of integer tensors is not supported")
    return r.apply1("Divide", {"auto_broadcast": "numpy"}, [const(np.ones((), x.const.dtype if x.is_const
                                                                         else np.float32)), x])


@onnx_node("Clip")
def _onnx_clip(r, attrs, ins):
    """ONNX Clip: ``min(max(x, lo), hi)`` in x's own element type (ONNX Clip-13: a missing
    bound is the type's limit, i.e. no bound; when ``min > max`` every value becomes ``max``).
    Bounds are attributes before opset 11, scalar tensors (known at load or at run time)
    after; an NNEF ``clamp`` where both are constants in order on a float32 tensor."""
    x = onnx_need(r, ins, 0, "input")
    store = numpy_dtype(concrete(x.etype) or "bool")
    if r.opset < 11:
        bounds = [None if attrs.get(k) is None else const(np.asarray(attrs[k]).astype(store)) for k in ("min", "max")]
    else:
        bounds = [ins[k] if len(ins) > k else None for k in (1, 2)]
    for b, what in zip(bounds, ("min", "max"), strict=True):
        if b is not None and b.shape is not None and None not in b.shape and int(np.prod(b.shape)) != 1:
            raise r.error(f"Clip's {what} must be a scalar, got shape {list(b.shape)}")
    lo, hi = bounds
    if all(b is None or b.is_const for b in bounds):
        lo_v = None if lo is None else np.asarray(lo.const).reshape(())
        hi_v = None if hi is None else np.asarray(hi.const).reshape(())
        if x.is_const:
            y = np.asarray(x.const)
            y = y if lo_v is None else np.maximum(y, lo_v.astype(y.dtype))
            y = y if hi_v is None else np.minimum(y, hi_v.astype(y.dtype))
            return Value(const=y.astype(x.const.dtype), etype=x.etype, shape=tuple(y.shape))
        if x.etype == "f32" and lo_v is not None and hi_v is not None and float(lo_v) <= float(hi_v):
            return r.apply1("Clamp", {"min": float(lo_v), "max": float(hi_v)}, [x])
    y = x
    if lo is not None:
        y = r.apply1("Maximum", {"auto_broadcast": "numpy"}, [y, lo])
    if hi is not None:
        y = r.apply1("Minimum", {"auto_broadcast": "numpy"}, [y, hi])
    return y


@onnx_node("Where")
def _onnx_where(r, attrs, ins):
    vals = [onnx_need(r, ins, i, "input") for i in range(3)]
    y = r.apply1("Select", {"auto_broadcast": "numpy"}, vals)
    if y.shape is None and all(v.shape is not None and None not in v.shape for v in vals):
        # the result shape is numpy's broadcast of the three (select's rule may not say)
        y.shape = tuple(np.broadcast_shapes(*[tuple(v.shape) for v in vals]))
        r.builder.graph.tensors[y.tensor].shape = y.shape
    return y


@onnx_node("Identity", "Dropout")
def _onnx_identity(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    if r.node.op_type == "Dropout":
        _check_inference_dropout(r, attrs, ins)
    if r.node.op_type == "Dropout" and len(r.node.output) > 1 and r.node.output[1]:
        # inference keeps every element: the mask is all true
        if x.shape is None or any(d is None for d in x.shape):
            return [x, Value(unsupported="the mask output of Dropout needs a known input shape")]
        r.ctx([x]).check_items(x.shape)
        return [x, const(np.ones(x.shape, np.bool_))]
    return x


def _check_inference_dropout(r, attrs, ins) -> None:
    """Dropout is the identity only in inference (ONNX Dropout-12: ``training_mode`` false, or a
    ratio of 0; Dropout-1/6: ``is_test``); in training it drops random elements, which no exact
    form can express, so it is refused rather than read as the identity.  A ``training_mode``
    (and then a ``ratio``) computed at run time is asked for (:func:`onnx_const`): the node is
    deferred and read again with the run's values — the identity when they say inference, the
    same refusal, located and naming the values, when they ask for random draws."""
    if "is_test" in attrs and not int(attrs["is_test"]):
        raise r.error("Dropout with is_test=0 (training) drops random elements; only inference Dropout is read")
    training = ins[2] if len(ins) > 2 else None
    if training is None:
        return
    if not bool(np.asarray(onnx_const(r, training, "training_mode")).reshape(-1)[0]):
        return
    ratio = ins[1] if len(ins) > 1 else None
    value = 0.5 if ratio is None else float(np.asarray(onnx_const(r, ratio, "ratio")).reshape(-1)[0])
    if value != 0.0:
        raise r.error(f"training-mode Dropout drops random elements (ratio {value}); only inference Dropout, "
                      "or a ratio of 0, is read")


@onnx_node("Cast", "CastLike")
def _onnx_cast(r, attrs, ins):
    """ONNX Cast / CastLike: the exact ONNX conversion (``onnx_cast``, whose kernel is the one
    :func:`nnefx.ops.onnx.tensors.cast`), into the target's own element type."""
    x = onnx_need(r, ins, 0, "input")
    if r.node.op_type == "CastLike":
        et = onnx_need(r, ins, 1, "target_type").etype
    else:
        et = r.etype_code(int(attrs["to"]))
    to = concrete(et) or "bool"
    saturate = bool(int(attrs.get("saturate", 1)))
    round_mode = str(attrs.get("round_mode", "up"))
    if x.sym is not None or (x.is_const and x.const.dtype == object and x.etype != "string"):
        return r.apply1("Convert", {"destination_type": et}, [x])  # a symbolic shape through a Cast
    if x.is_const:
        arr = onnx_cast_kernel(x.const, numpy_dtype(to), saturate, round_mode)
        return Value(const=arr, etype=et, shape=tuple(arr.shape))
    ctx = r.ctx([x])
    out = ctx.emit1("onnx_cast", {"input": ctx.tensor(0)}, {"to": to, "saturate": saturate, "round_mode": round_mode},
                    dtype=nnef_dtype(et))
    return ctx.result(out)

@onnx_node("Round")
def _onnx_round(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    if x.is_const:
        return const(np.round(x.const).astype(x.const.dtype))  # numpy rounds half to even, as ONNX
    return r.apply1("Round", {"mode": "half_to_even"}, [x], version="opset5")


# --- ONNX operators of the onnx domain (ops/onnx/tensors.py, ops/onnx/arith.py) ------------------

@onnx_node("BitShift")
def _onnx_bit_shift(r, attrs, ins):
    x, y = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "Y")
    onnx_kept_etypes(r, ins)
    direction = str(attrs["direction"])
    if direction not in ("LEFT", "RIGHT"):
        raise r.error(f"attribute 'direction' must be LEFT or RIGHT, got '{direction}'")
    return onnx_emit(r, "onnx_bit_shift", {"x": x, "y": y}, {"direction": direction}, results=[x.etype])[0]


@onnx_node("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _onnx_bitwise(r, attrs, ins):
    x, y = onnx_need(r, ins, 0, "A"), onnx_need(r, ins, 1, "B")
    onnx_kept_etypes(r, ins)
    how = r.node.op_type[len("Bitwise"):].lower()
    return onnx_emit(r, "onnx_bitwise", {"x": x, "y": y}, {"op": how}, results=[x.etype])[0]


@onnx_node("BitwiseNot")
def _onnx_bitwise_not(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    return onnx_emit(r, "onnx_bitwise_not", {"x": x}, {}, results=[x.etype])[0]


# --- ONNX nodes: inverse hyperbolic functions, IsNaN / IsInf --------------------------------------

@onnx_node("Acosh", "Asinh", "Atanh")
def _onnx_inverse_hyperbolic(r, attrs, ins):
    return r.apply1(r.node.op_type, {}, [onnx_need(r, ins, 0, "input")])


@onnx_node("Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial")
def _onnx_random(r, attrs, ins):
    # refused by name: their outputs are random draws, which no other runtime reproduces
    raise r.error(f"{r.node.op_type} draws random numbers; random operations are not supported (their results "
                  "cannot be reproduced or compared)")


@onnx_node("BitCast")
def _onnx_bit_cast(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    to = r.etype_code(int(attrs["to"]))
    onnx_carried(r, x, Value(etype=to))
    c = r.ctx([x])
    y = c.emit1("onnx_bit_cast", {"input": c.tensor(0)}, {"to": "bool" if to == "boolean" else to},
                dtype=nnef_dtype(to))
    return c.result(y, to)


@onnx_node("IsNaN")
def _onnx_is_nan(r, attrs, ins):
    return r.apply1("IsNaN", {}, [onnx_need(r, ins, 0, "X")], version="opset10")


@onnx_node("IsInf")
def _onnx_is_inf(r, attrs, ins):
    return r.apply1("IsInf", {"detect_positive": bool(attrs.get("detect_positive", 1)),
                              "detect_negative": bool(attrs.get("detect_negative", 1))},
                    [onnx_need(r, ins, 0, "X")], version="opset10")


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


@to_ir("copy")   # (registered after write_unary: IR's own form)
def copy_to_ir(ctx: IRContext, op: Operation) -> None:
    # the same port: no layer, and no need for a static shape (a loop's scan output has none)
    ctx.bind(out(op), ctx.ref(first_input(op, "x", "input"), ctx.etype(first_input(op, "x", "input"))))


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
    refs = [lowering_aligned(ctx, c, rank, ctx.LOGICAL), lowering_aligned(ctx, t, rank, et), lowering_aligned(ctx, f, rank, et)]
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
        if np.dtype(ctx.dtype(a)).kind == "O":  # strings: Equal-19 compares them; nothing orders them
            if kind != "equal":
                raise ctx.fail(f"comparison '{kind}' of strings has no ONNX node (Equal-19 compares strings)")
            ctx.e.need_opset(19)
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


@to_ir("onnx_cast", "onnx_cast_like")
def onnx_cast_to_ir(ctx: IRContext, op: Operation) -> None:
    # Convert-1 converts as ONNX Cast does between floats (to nearest even, infinity beyond the
    # range), from integers and booleans (the low bits for a narrower integer; the opset doc's
    # modulo rule), and to boolean (x != 0).  Float -> integer it leaves open beyond the target's
    # range and for NaN, where ONNX Cast as nnefx computes it truncates and wraps: refused.
    from ...etypes import abstract, is_float
    from ...etypes import of as etype_of
    from ..ir.writer import IR_ETYPES

    to = str(op.attribs["to"]) if op.op == "onnx_cast" else etype_of(ctx.graph.tensors[op.inputs["like"]])
    if to not in IR_ETYPES:
        raise ctx.fail(f"Cast to {to}: IR as nnefx writes it has no such element type")
    x = ctx.ref(op.inputs["input"])
    src = ctx.graph.tensors[op.inputs["input"]]
    if is_float(src.etype or ("f32" if src.dtype == "scalar" else "i64")) and abstract(to) == "integer":
        raise ctx.fail(f"Cast from a float type to {to}: OpenVINO's Convert leaves out-of-range and NaN "
                       "values undefined, where ONNX Cast truncates and wraps around")
    target = IR_ETYPES[to]
    ctx.bind(out(op), x if ctx.w.etype(x) == target else ctx.convert(x, target))


@to_onnx("onnx_cast")
def onnx_cast_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # Cast converts between every type it holds exactly as onnx_cast does (ONNX Cast operator
    # doc); a float8/4-bit/2-bit type is written in the opset that added it (the model's opset
    # follows its values' types), saturate only matters for float8 targets (Cast-19) and
    # round_mode only for float8e8m0 ones (Cast-24), so each is written only there
    to = str(op.attribs["to"])
    if to not in WRITABLE_ETYPES:
        raise ctx.fail(f"Cast to {to}: ONNX as nnefx writes it has no such element type")
    target = numpy_dtype(to)
    x = ctx.ref(op.inputs["input"])
    if np.dtype(ctx.dtype(x)) == target:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    attrs = {}
    if to.startswith("f8") and not op.attribs.get("saturate", True):
        attrs["saturate"] = 0
        ctx.e.need_opset(19)
    if to == "f8e8m0" and str(op.attribs.get("round_mode", "up")) != "up":
        attrs["round_mode"] = str(op.attribs["round_mode"])
        ctx.e.need_opset(24)
    ctx.bind(out(op), ctx.node("Cast", [x], ctx.dims(x), dtype=target, to=tensor_type(target), **attrs))


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


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

@to_onnx("onnx_cast_like")
def cast_like_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    saturate = bool(op.attribs.get("saturate", True))
    onnx_write(ctx, op, "CastLike", [op.inputs["input"], op.inputs["like"]], 15 if saturate else 19,
               saturate=None if saturate else 0)


@to_onnx("onnx_bit_cast")
def bit_cast_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    to = str(op.attribs["to"])
    if to not in WRITABLE_ETYPES:
        raise ctx.fail(f"BitCast to {to}: ONNX as nnefx writes it has no such element type")
    onnx_write(ctx, op, "BitCast", [op.inputs["input"]], 26, to=tensor_type(numpy_dtype(to)))


@to_onnx("onnx_bit_shift")
def bit_shift_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    signed = ctx.dtype(op.inputs["x"]).kind == "i"   # BitShift-28 added the signed types
    onnx_write(ctx, op, "BitShift", [op.inputs["x"], op.inputs["y"]], 28 if signed else 11,
               direction=str(op.attribs["direction"]))


@to_onnx("onnx_bitwise")
def bitwise_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    kind = "Bitwise" + str(op.attribs["op"]).capitalize()
    onnx_write(ctx, op, kind, [op.inputs["x"], op.inputs["y"]], 18)


@to_onnx("onnx_bitwise_not")
def bitwise_not_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "BitwiseNot", [op.inputs["x"]], 18)
