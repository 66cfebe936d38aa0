"""Mappings of the IR v10/11 opset layers onto NNEF operations (and ``ir_`` extensions).

Rules followed throughout:

* numpy broadcasting (right-aligned) is made explicit before every NNEF binary operation,
  whose broadcasting aligns from dimension 0: the lower-rank operand gets leading unit
  dimensions (folded into constants, ``unsqueeze`` for run-time tensors), after which both
  conventions agree.
* negative axes are normalised with the input rank; NNEF wants ``0 <= axis < rank``.
* anything computed from constants (shape sub-graphs) is folded while loading (see the
  ``@fold`` functions), so the graph only holds real run-time work.
* integer run-time arithmetic (shape computations under a dynamic batch) uses ``integer_arith``/
  ``integer_compare`` because NNEF arithmetic is defined on ``scalar`` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...diagnostics import NNEFXError
from ...ops.ext import (
    COORD_MODES,
    INTERP_MODES,
    NEAREST_MODES,
    arith,
    broadcast_to,
    compare,
    convert,
    gather,
    reshape_target,
)
from .mapping import OPSETS, Dim, LayerContext, Value, binary_filter, fold, layer
from .weights import nnef_dtype

ANY = None

# --- helpers ---------------------------------------------------------------------------------


def norm_axis(ctx: LayerContext, axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return a


def norm_axes(ctx: LayerContext, axes, rank: int) -> list[int]:
    out = [norm_axis(ctx, int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"repeated axes {list(axes)}")
    return out


def dtype_of(v: Value) -> str:
    return nnef_dtype(v.etype)


def aligned(ctx: LayerContext, indices: list[int]) -> list[str]:
    """Tensors of the given inputs with equal ranks (numpy-style leading unit dims added)."""
    ranks = [ctx.in_rank(i) for i in indices]
    r = max(ranks)
    out = []
    for i, ri in zip(indices, ranks, strict=False):
        v = ctx.input(i)
        if ri == r:
            out.append(ctx.tensor(i))
        elif v.is_const:
            arr = np.asarray(v.const).reshape((1,) * (r - ri) + tuple(v.const.shape))
            out.append(ctx.tensor_of(ctx.folded(arr, v.etype), f"{ctx.name}_in{i}"))
        else:
            out.append(ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": list(range(r - ri))},
                                 dtype=dtype_of(v)))
    return out


def const_value(ctx: LayerContext, arr, etype: str) -> str:
    return ctx.tensor_of(ctx.folded(np.asarray(arr), etype))


def unary(ctx: LayerContext, op: str, x: str, attribs: dict | None = None) -> str:
    return ctx.emit1(op, {"x": x}, attribs)


def binary(ctx: LayerContext, op: str, x, y, out_dtype: str = "scalar") -> str:
    return ctx.emit1(op, {"x": x, "y": y}, out_dtype=out_dtype)


# --- structural helpers for the folds -------------------------------------------------------

#: Largest constant a fold may create (items); beyond it a file is more likely hostile than real.
MAX_FOLD_ITEMS = 1 << 26


def check_items(ctx: LayerContext, shape) -> None:
    """Refuse to build a load-time constant of ``shape`` if it is absurdly large."""
    n = 1
    for d in shape:
        if d < 0:
            raise ctx.error(f"negative extent {d} in {list(shape)}")
        n *= int(d)
        if n > MAX_FOLD_ITEMS:
            raise ctx.error(f"a constant of shape {list(shape)} would be too large "
                            f"(more than {MAX_FOLD_ITEMS} items)")


def _ints(a) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


# --- element-wise ------------------------------------------------------------------------------

_BINARY = {"Add": ("add", "add"), "Subtract": ("sub", "subtract"), "Multiply": ("mul", "multiply"),
           "Divide": ("div", "divide"), "Maximum": ("max", "maximum"), "Minimum": ("min", "minimum"),
           "Power": ("pow", "power"), "SquaredDifference": (None, "squared_difference"),
           "FloorMod": (None, "floor_mod"), "Mod": (None, "mod")}
_COMPARE = {"Equal": ("eq", "equal"), "NotEqual": ("ne", "not_equal"), "Less": ("lt", "less"),
            "LessEqual": ("le", "less_equal"), "Greater": ("gt", "greater"),
            "GreaterEqual": ("ge", "greater_equal")}


def _check_broadcast(ctx: LayerContext) -> None:
    mode = ctx.str("auto_broadcast", "numpy").lower()
    if mode not in ("numpy", "none"):
        raise ctx.error(f"auto_broadcast='{mode}' is not supported (only numpy and none)")


def _arith_op(ctx: LayerContext) -> str:
    name = _BINARY[ctx.type][1]
    if ctx.type == "Divide" and ctx.bool("m_pythondiv", True):
        name = "pythondiv"
    return name


@fold(list(_BINARY), OPSETS)
def _fold_binary(ctx: LayerContext, arrays):
    x, y = arrays
    if x.dtype == object or y.dtype == object:
        if ctx.type not in ("Add", "Subtract", "Multiply", "Divide"):
            return None
        for a in (x, y):
            if a.dtype == object and any(isinstance(v, Dim) for v in a.reshape(-1)):
                return None  # arithmetic on an unknown extent: computed at run time
        x, y = x.astype(np.int64), y.astype(np.int64)
    return arith(x, y, _arith_op(ctx)).astype(np.result_type(x, y))


@layer(list(_BINARY), ANY)
def _binary(ctx: LayerContext):
    ctx.expect_inputs(2)
    _check_broadcast(ctx)
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
def _fold_compare(ctx: LayerContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    return compare(arrays[0], arrays[1], _COMPARE[ctx.type][1])


@layer(list(_COMPARE), ANY)
def _compare(ctx: LayerContext):
    ctx.expect_inputs(2)
    _check_broadcast(ctx)
    nnef_op, ir_op = _COMPARE[ctx.type]
    kinds = {dtype_of(ctx.input(0)), dtype_of(ctx.input(1))}
    if kinds != {"scalar"}:
        z = ctx.emit1("integer_compare", {"x": ctx.tensor(0), "y": ctx.tensor(1)}, {"op": ir_op},
                      dtype=dtype_of(ctx.input(0)), out_dtype="logical")
        return ctx.result(z, "boolean")
    x, y = aligned(ctx, [0, 1])
    return ctx.result(binary(ctx, nnef_op, x, y, "logical"), "boolean")


_LOGICAL = {"LogicalAnd": "and", "LogicalOr": "or", "LogicalXor": "xor"}


@fold(list(_LOGICAL) + ["LogicalNot"], OPSETS)
def _fold_logical(ctx: LayerContext, arrays):
    if ctx.type == "LogicalNot":
        return np.logical_not(arrays[0])
    fn = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[_LOGICAL[ctx.type]]
    return fn(arrays[0], arrays[1])


@layer(list(_LOGICAL), ANY)
def _logical(ctx: LayerContext):
    ctx.expect_inputs(2)
    _check_broadcast(ctx)
    x, y = aligned(ctx, [0, 1])
    op = _LOGICAL[ctx.type]
    if op == "xor":
        a = binary(ctx, "or", x, y, "logical")
        b = binary(ctx, "and", x, y, "logical")
        nb = ctx.emit1("not", {"x": b}, out_dtype="logical")
        return ctx.result(binary(ctx, "and", a, nb, "logical"), "boolean")
    return ctx.result(binary(ctx, op, x, y, "logical"), "boolean")


@layer("LogicalNot", ANY)
def _logical_not(ctx: LayerContext):
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
def _fold_unary(ctx: LayerContext, arrays):
    a = arrays[0]
    if a.dtype == object:
        return None
    return _NP_UNARY[ctx.type](a).astype(a.dtype)


@layer(list(_UNARY), ANY)
def _unary(ctx: LayerContext):
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


@layer("Clamp", ANY)
def _clamp(ctx: LayerContext):
    lo, hi = ctx.float("min"), ctx.float("max")
    if dtype_of(ctx.input(0)) != "scalar":
        x = ctx.tensor(0)
        a = ctx.emit1("integer_arith", {"x": x, "y": const_value(ctx, np.int64(math.ceil(lo)), ctx.in_etype(0))},
                      {"op": "maximum"}, dtype="integer")
        b = ctx.emit1("integer_arith", {"x": a, "y": const_value(ctx, np.int64(math.floor(hi)), ctx.in_etype(0))},
                      {"op": "minimum"}, dtype="integer")
        return ctx.result(b, ctx.in_etype(0))
    return ctx.result(ctx.emit1("clamp", {"x": ctx.tensor(0), "a": lo, "b": hi}))


@layer("Elu", ANY)
def _elu(ctx: LayerContext):
    return ctx.result(ctx.emit1("elu", {"x": ctx.tensor(0)}, {"alpha": ctx.float("alpha")}))


def _erf_gelu(ctx: LayerContext, x: str) -> str:
    s = binary(ctx, "mul", x, 1.0 / math.sqrt(2.0))
    e = unary(ctx, "erf", s)
    one = binary(ctx, "add", e, 1.0)
    h = binary(ctx, "mul", x, 0.5)
    return binary(ctx, "mul", h, one)


@layer("Gelu", ANY)
def _gelu(ctx: LayerContext):
    x = ctx.tensor(0)
    mode = ctx.choice("approximation_mode", ("erf", "tanh"), "erf") if ctx.version != "opset2" else "erf"
    if mode == "erf":
        return ctx.result(_erf_gelu(ctx, x))
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x3 = binary(ctx, "mul", binary(ctx, "mul", x, x), x)
    inner = binary(ctx, "add", x, binary(ctx, "mul", x3, 0.044715))
    t = unary(ctx, "tanh", binary(ctx, "mul", inner, math.sqrt(2.0 / math.pi)))
    return ctx.result(binary(ctx, "mul", binary(ctx, "mul", x, 0.5), binary(ctx, "add", t, 1.0)))


@layer("Swish", ANY)
def _swish(ctx: LayerContext):
    x = ctx.tensor(0)
    if ctx.n_inputs < 2:
        return ctx.result(unary(ctx, "silu", x))
    beta = ctx.input(1)
    b = float(np.asarray(beta.const).reshape(-1)[0]) if beta.is_const else None
    if b == 1.0:
        return ctx.result(unary(ctx, "silu", x))
    bx = binary(ctx, "mul", x, b if b is not None else ctx.tensor(1))
    return ctx.result(binary(ctx, "mul", x, unary(ctx, "sigmoid", bx)))


def _hsig(ctx: LayerContext, x: str) -> str:
    c = ctx.emit1("clamp", {"x": binary(ctx, "add", x, 3.0), "a": 0.0, "b": 6.0})
    return binary(ctx, "div", c, 6.0)


@layer("HSigmoid", ANY)
def _hsigmoid(ctx: LayerContext):
    return ctx.result(_hsig(ctx, ctx.tensor(0)))


@layer("HSwish", ANY)
def _hswish(ctx: LayerContext):
    x = ctx.tensor(0)
    return ctx.result(binary(ctx, "mul", x, _hsig(ctx, x)))


@layer("Mish", ANY)
def _mish(ctx: LayerContext):
    x = ctx.tensor(0)
    return ctx.result(binary(ctx, "mul", x, unary(ctx, "tanh", unary(ctx, "softplus", x))))


@layer("SoftSign", ANY)
def _softsign(ctx: LayerContext):
    x = ctx.tensor(0)
    return ctx.result(binary(ctx, "div", x, binary(ctx, "add", unary(ctx, "abs", x), 1.0)))


@layer("HardSigmoid", ANY)
def _hard_sigmoid(ctx: LayerContext):
    alpha = float(ctx.const(1, "alpha").reshape(-1)[0])
    beta = float(ctx.const(2, "beta").reshape(-1)[0])
    y = binary(ctx, "add", binary(ctx, "mul", ctx.tensor(0), alpha), beta)
    return ctx.result(ctx.emit1("clamp", {"x": y, "a": 0.0, "b": 1.0}))


@layer("Selu", ANY)
def _selu(ctx: LayerContext):
    alpha = float(ctx.const(1, "alpha").reshape(-1)[0])
    lam = float(ctx.const(2, "lambda").reshape(-1)[0])
    return ctx.result(ctx.emit1("selu", {"x": ctx.tensor(0)}, {"alpha": alpha, "lambda": lam}))


@layer(("PRelu", "PReLU"), ANY)
def _prelu(ctx: LayerContext):
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


@fold("Select", OPSETS)
def _fold_select(ctx: LayerContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    return np.where(arrays[0], arrays[1], arrays[2])


@layer("Select", ANY)
def _select(ctx: LayerContext):
    ctx.expect_inputs(3)
    _check_broadcast(ctx)
    c, a, b = aligned(ctx, [0, 1, 2])
    dt = dtype_of(ctx.input(1))
    return ctx.result(ctx.emit1("select", {"condition": c, "true_value": a, "false_value": b}, dtype=dt),
                      ctx.in_etype(1))


# --- Convert ---------------------------------------------------------------------------------------


@fold(("Convert", "ConvertLike"), OPSETS)
def _fold_convert(ctx: LayerContext, arrays):
    dest = _convert_target(ctx)
    a = arrays[0]
    if a.dtype == object:
        if dest in ("i64", "i32") and ctx.in_etype(0) in ("i64", "i32"):
            return a  # a symbolic shape stays symbolic through an integer conversion
        return None
    return ctx.folded(convert(a, dest), dest)


def _convert_target(ctx: LayerContext) -> str:
    from .weights import element_type

    if ctx.type == "ConvertLike":
        return ctx.in_etype(1)
    return element_type(ctx.str("destination_type"), ctx.location)


@layer(("Convert", "ConvertLike"), ANY)
def _convert(ctx: LayerContext):
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


# --- shape operations ---------------------------------------------------------------------------


@layer("ShapeOf", ANY)
def _shape_of(ctx: LayerContext):
    shape = ctx.in_shape(0)
    et = ctx.str("output_type", "i64") if ctx.version != "opset1" else "i64"
    if shape is not None and all(d is not None for d in shape):
        return ctx.folded(np.asarray(shape, dtype=np.int64), et)
    x = ctx.tensor(0)
    if shape is None:
        return ctx.result(ctx.emit1("tensor_shape", {"input": x}, dtype=dtype_of(ctx.input(0)), out_dtype="integer"),
                          et)
    sym = np.empty(len(shape), dtype=object)
    for i, d in enumerate(shape):
        sym[i] = Dim(x, i) if d is None else int(d)

    def lazy() -> str:
        return ctx.emit1("tensor_shape", {"input": x}, dtype=dtype_of(ctx.input(0)), out_dtype="integer")

    return Value(sym=sym, etype=et, shape=(len(shape),), lazy=lazy)


@fold("ShapeOf", OPSETS)
def _fold_shape_of(ctx: LayerContext, arrays):
    if arrays[0].dtype == object:
        return None
    return np.asarray(arrays[0].shape, dtype=np.int64)


def _reshape_spec(ctx: LayerContext, target: np.ndarray, x: Value) -> list[int] | None:
    """NNEF reshape ``shape`` for an IR target (possibly symbolic), or None if impossible."""
    special_zero = ctx.bool("special_zero")
    out: list[int] = []
    for k, e in enumerate(target.reshape(-1)):
        if isinstance(e, Dim):
            # the input's own extent at the same position is NNEF's 0 ("copy"); any other
            # unknown extent can only be inferred (-1), which works for at most one of them
            out.append(0 if x.tensor is not None and e.tensor == x.tensor and e.axis == k else -1)
            continue
        e = int(e)
        if e == 0 and not special_zero:
            raise ctx.error("reshape to a zero extent is not supported")
        if e < -1:
            raise ctx.error(f"invalid reshape target extent {e}")
        if e == 0 and x.shape is not None and k < len(x.shape) and x.shape[k] is not None:
            e = int(x.shape[k])
        out.append(e)
    return None if out.count(-1) > 1 else out  # None: reshape at run time (reshape_to)


@fold("Reshape", OPSETS)
def _fold_reshape(ctx: LayerContext, arrays):
    x, t = arrays
    if t.dtype == object:
        return None
    return x.reshape(reshape_target(x.shape, _ints(t), ctx.bool("special_zero")))


@layer("Reshape", ANY)
def _reshape(ctx: LayerContext):
    x = ctx.input(0)
    t = ctx.input(1)
    xt = ctx.tensor(0)
    x = Value(tensor=xt, etype=x.etype, shape=x.shape)
    target = t.const if t.is_const else t.sym
    if target is not None:
        spec = _reshape_spec(ctx, np.asarray(target), x)
        if spec is not None:
            # with a fully known input shape, spell the target out exactly
            if x.shape is not None and all(d is not None for d in x.shape) and all(
                    not isinstance(e, Dim) for e in np.asarray(target).reshape(-1)):
                try:
                    spec = list(reshape_target(x.shape, spec, True))
                except NNEFXError as exc:
                    raise ctx.error(exc.message) from None
            return ctx.result(ctx.emit1("reshape", {"input": xt}, {"shape": spec}, dtype=dtype_of(x)), x.etype)
    y = ctx.emit1("reshape_to", {"input": xt, "shape": ctx.tensor(1)},
                  {"special_zero": ctx.bool("special_zero")}, dtype=dtype_of(x))
    return ctx.result(y, x.etype)


def _squeeze_axes(ctx: LayerContext, shape, axes) -> list[int]:
    r = len(shape)
    if axes is None:
        if any(d is None for d in shape):
            raise ctx.error("Squeeze without axes needs a known input shape")
        return [i for i, d in enumerate(shape) if d == 1]
    ax = sorted(norm_axes(ctx, axes, r))
    for a in ax:
        if shape[a] is not None and shape[a] != 1:
            if ctx.version == "opset15":
                continue
            raise ctx.error(f"cannot squeeze axis {a} of extent {shape[a]}")
    return [a for a in ax if shape[a] is None or shape[a] == 1]


@fold("Squeeze", OPSETS)
def _fold_squeeze(ctx: LayerContext, arrays):
    x = arrays[0]
    axes = _squeeze_axes(ctx, x.shape, _ints(arrays[1]) if len(arrays) > 1 else None)
    return x.reshape([d for i, d in enumerate(x.shape) if i not in axes])


@layer("Squeeze", ANY)
def _squeeze(ctx: LayerContext):
    shape = ctx.in_shape(0)
    if shape is None:
        raise ctx.error("the rank of the input is not known")
    axes = _squeeze_axes(ctx, shape, ctx.const_ints(1, "axes") if ctx.n_inputs > 1 else None)
    x = ctx.tensor(0)
    if not axes:
        return ctx.result(x, ctx.in_etype(0))
    return ctx.result(ctx.emit1("squeeze", {"input": x}, {"axes": axes}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


def _unsqueeze_axes(ctx: LayerContext, rank: int, axes) -> list[int]:
    return sorted(norm_axes(ctx, axes, rank + len(list(axes))))


@fold("Unsqueeze", OPSETS)
def _fold_unsqueeze(ctx: LayerContext, arrays):
    x = arrays[0]
    axes = _unsqueeze_axes(ctx, x.ndim, _ints(arrays[1]))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


@layer("Unsqueeze", ANY)
def _unsqueeze(ctx: LayerContext):
    axes = _unsqueeze_axes(ctx, ctx.in_rank(0), ctx.const_ints(1, "axes"))
    return ctx.result(ctx.emit1("unsqueeze", {"input": ctx.tensor(0)}, {"axes": axes},
                                dtype=dtype_of(ctx.input(0))), ctx.in_etype(0))


def _perm(ctx: LayerContext, rank: int, order: list[int]) -> list[int]:
    if not order:
        return list(range(rank - 1, -1, -1))
    p = norm_axes(ctx, order, rank)
    if len(p) != rank:
        raise ctx.error(f"transpose order {order} does not match rank {rank}")
    return p


@fold("Transpose", OPSETS)
def _fold_transpose(ctx: LayerContext, arrays):
    x = arrays[0]
    return np.transpose(x, _perm(ctx, x.ndim, _ints(arrays[1])))


@layer("Transpose", ANY)
def _transpose(ctx: LayerContext):
    p = _perm(ctx, ctx.in_rank(0), ctx.const_ints(1, "order"))
    x = ctx.tensor(0)
    if p == list(range(len(p))):
        return ctx.result(x, ctx.in_etype(0))
    return ctx.result(ctx.emit1("transpose", {"input": x}, {"axes": p}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


@fold("Concat", OPSETS)
def _fold_concat(ctx: LayerContext, arrays):
    r = arrays[0].ndim
    return np.concatenate(arrays, axis=norm_axis(ctx, ctx.int("axis"), r))


@layer("Concat", ANY)
def _concat(ctx: LayerContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.int("axis"), r)
    vals = [ctx.tensor(i) for i in range(ctx.n_inputs)]
    if len(vals) == 1:
        return ctx.result(vals[0], ctx.in_etype(0))
    return ctx.result(ctx.emit1("concat", {"values": vals}, {"axis": axis}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


def _split_lengths(ctx: LayerContext, extent, lengths: list[int]) -> list[int]:
    if lengths.count(-1) > 1:
        raise ctx.error("split_lengths has more than one -1")
    if -1 in lengths:
        if extent is None:
            raise ctx.error("split_lengths has -1 but the axis extent is not known")
        rest = extent - sum(x for x in lengths if x != -1)
        lengths = [rest if x == -1 else x for x in lengths]
    if extent is not None and sum(lengths) != extent:
        raise ctx.error(f"split lengths {lengths} do not add up to the axis extent {extent}")
    if any(x < 0 for x in lengths):
        raise ctx.error(f"negative split length in {lengths}")
    return lengths


@fold(("Split", "VariadicSplit"), OPSETS)
def _fold_split(ctx: LayerContext, arrays):
    x = arrays[0]
    axis = norm_axis(ctx, int(np.asarray(arrays[1]).reshape(-1)[0]), x.ndim)
    if ctx.type == "Split":
        n = ctx.int("num_splits")
        if x.shape[axis] % n:
            raise ctx.error(f"extent {x.shape[axis]} does not divide into {n} parts")
        return list(np.split(x, n, axis=axis))
    lengths = _split_lengths(ctx, x.shape[axis], _ints(arrays[2]))
    return list(np.split(x, np.cumsum(lengths)[:-1], axis=axis))


@layer(("Split", "VariadicSplit"), ANY)
def _split(ctx: LayerContext):
    shape = ctx.in_shape(0)
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.const_ints(1, "axis")[0], r)
    extent = shape[axis]
    if ctx.type == "Split":
        n = ctx.int("num_splits")
        if extent is not None and extent % n:
            raise ctx.error(f"extent {extent} does not divide into {n} parts")
        ratios = [1] * n
    else:
        ratios = _split_lengths(ctx, extent, ctx.const_ints(2, "split_lengths"))
    x = ctx.tensor(0)
    dt = dtype_of(ctx.input(0))
    if all(v > 0 for v in ratios):
        outs = ctx.emit("split", {"value": x}, {"axis": axis, "ratios": ratios}, outputs=[len(ratios)], dtype=dt)
    else:  # zero-length pieces: slices
        outs = []
        start = 0
        for n in ratios:
            if n == 0:
                raise ctx.error("zero-length split outputs are not supported")
            outs.append(ctx.emit1("slice", {"input": x}, {"axes": [axis], "begin": [start], "end": [start + n]},
                                  dtype=dt))
            start += n
    return [ctx.result(o, ctx.in_etype(0), port=i) for i, o in enumerate(outs)]


# --- slicing ------------------------------------------------------------------------------------

BIG = 2 ** 31 - 1


class _Plan:
    """A numpy-style indexing plan: items are ('slice', b, e, s), ('index', i), ('new',), ('ellipsis',)."""

    def __init__(self, items: list[tuple]):
        self.items = items

    def expand(self, rank: int) -> list[tuple]:
        used = sum(1 for it in self.items if it[0] in ("slice", "index"))
        out = []
        seen_ellipsis = False
        for it in self.items:
            if it[0] == "ellipsis":
                if seen_ellipsis:
                    raise NNEFXError("more than one ellipsis in a StridedSlice")
                seen_ellipsis = True
                out.extend([("slice", None, None, 1)] * (rank - used))
            else:
                out.append(it)
        used = sum(1 for it in out if it[0] in ("slice", "index"))
        if used > rank:
            raise NNEFXError(f"slice addresses {used} dimensions of a rank-{rank} tensor")
        out.extend([("slice", None, None, 1)] * (rank - used))
        return out

    def numpy_index(self, rank: int) -> tuple:
        idx = []
        for it in self.expand(rank):
            if it[0] == "slice":
                idx.append(slice(it[1], it[2], it[3]))
            elif it[0] == "index":
                idx.append(it[1])
            else:
                idx.append(np.newaxis)
        return tuple(idx)


def _mask(ctx: LayerContext, key: str, n: int) -> list[int]:
    m = ctx.ints(key, []) if ctx.has(key) else []
    return (m + [0] * n)[:n] if len(m) < n else m[:n]


def _strided_plan(ctx: LayerContext, begin: list[int], end: list[int], strides: list[int]) -> _Plan:
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ctx.error("begin, end and strides must have the same length")
    bm, em = _mask(ctx, "begin_mask", n), _mask(ctx, "end_mask", n)
    nm, sm, elm = _mask(ctx, "new_axis_mask", n), _mask(ctx, "shrink_axis_mask", n), _mask(ctx, "ellipsis_mask", n)
    items = []
    for i in range(n):
        if elm[i]:
            items.append(("ellipsis",))
        elif nm[i]:
            items.append(("new",))
        elif sm[i]:
            items.append(("index", begin[i]))
        else:
            if strides[i] == 0:
                raise ctx.error("slice stride 0")
            items.append(("slice", None if bm[i] else begin[i], None if em[i] else end[i], strides[i]))
    return _Plan(items)


def _slice8_plan(ctx: LayerContext, rank: int, start, stop, step, axes) -> _Plan:
    n = len(start)
    if axes is None:
        axes = list(range(n))
    axes = norm_axes(ctx, axes, rank)
    if not (len(stop) == len(step) == len(axes) == n):
        raise ctx.error("start, stop, step and axes must have the same length")
    items: list[tuple] = [("slice", None, None, 1)] * rank
    for a, b, e, s in zip(axes, start, stop, step, strict=False):
        if s == 0:
            raise ctx.error("slice step 0")
        items[a] = ("slice", b, e, s)
    return _Plan(items)


def _apply_plan(ctx: LayerContext, plan: _Plan, value: Value, x: str) -> str:
    shape = value.shape
    rank = len(shape)
    try:
        items = plan.expand(rank)
    except NNEFXError as exc:
        raise ctx.error(exc.message) from None
    dt = dtype_of(value)
    axes, begins, ends, strides, squeeze, new_pos = [], [], [], [], [], []
    d = 0
    out_pos = 0
    for it in items:
        if it[0] == "new":
            new_pos.append(out_pos)
            out_pos += 1
            continue
        extent = shape[d]
        if it[0] == "index":
            i = it[1]
            if extent is not None:
                if not -extent <= i < extent:
                    raise ctx.error(f"index {i} out of range for extent {extent}")
                i = i + extent if i < 0 else i
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            elif i >= 0:
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            elif i == -1:
                axes.append(d), begins.append(-1), ends.append(BIG), strides.append(1)
            else:
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            squeeze.append(d)
            d += 1
            continue
        _, b, e, s = it
        out_pos += 1
        if b is None and e is None and s == 1:
            d += 1
            continue
        if extent is not None:
            start, stop, step = slice(b, e, s).indices(extent)
            count = len(range(start, stop, step))
            if count == 0:
                raise ctx.error("empty slices are not supported")
            if step < 0 and stop < 0:
                stop = -(extent + 1)
            axes.append(d), begins.append(start), ends.append(stop), strides.append(step)
        else:
            if s > 0:
                bb = 0 if b is None else b
                ee = BIG if e is None or e >= BIG else e
            else:
                bb = -1 if b is None else b
                ee = -BIG if e is None or e <= -BIG else e
            axes.append(d), begins.append(bb), ends.append(ee), strides.append(s)
        d += 1
    y = x
    if axes:
        attrs = {"axes": axes, "begin": begins, "end": ends}
        if any(s != 1 for s in strides):
            attrs["stride"] = strides
        y = ctx.emit1("slice", {"input": y}, attrs, dtype=dt)
    if squeeze:
        y = ctx.emit1("squeeze", {"input": y}, {"axes": squeeze}, dtype=dt)
    if new_pos:
        y = ctx.emit1("unsqueeze", {"input": y}, {"axes": new_pos}, dtype=dt)
    return y


def _plan_for(ctx: LayerContext, arrays_or_none, rank: int) -> _Plan:
    if ctx.type == "StridedSlice":
        begin = ctx.const_ints(1, "begin")
        end = ctx.const_ints(2, "end")
        strides = ctx.const_ints(3, "strides") if ctx.n_inputs > 3 else [1] * len(begin)
        return _strided_plan(ctx, begin, end, strides)
    start = ctx.const_ints(1, "start")
    stop = ctx.const_ints(2, "stop")
    step = ctx.const_ints(3, "step")
    axes = ctx.const_ints(4, "axes") if ctx.n_inputs > 4 else None
    return _slice8_plan(ctx, rank, start, stop, step, axes)


@fold(("StridedSlice", "Slice"), OPSETS)
def _fold_slice(ctx: LayerContext, arrays):
    for a in arrays[1:]:
        if a.dtype == object:
            return None
    x = arrays[0]
    plan = _plan_for(ctx, arrays, x.ndim)
    return np.asarray(x[plan.numpy_index(x.ndim)])


@layer(("StridedSlice", "Slice"), ANY)
def _slice(ctx: LayerContext):
    rank = ctx.in_rank(0)
    plan = _plan_for(ctx, None, rank)
    y = _apply_plan(ctx, plan, ctx.input(0), ctx.tensor(0))
    return ctx.result(y, ctx.in_etype(0))


# --- Gather ---------------------------------------------------------------------------------------


def _gather_axis(ctx: LayerContext, rank: int) -> int:
    return norm_axis(ctx, ctx.const_ints(2, "axis")[0], rank)


@fold("Gather", OPSETS)
def _fold_gather(ctx: LayerContext, arrays):
    x, idx = arrays[0], arrays[1]
    if idx.dtype == object:
        return None
    axis = _gather_axis(ctx, x.ndim)
    bd = ctx.int("batch_dims", 0)
    if bd < 0:
        bd += idx.ndim
    return gather(x, idx.astype(np.int64), axis, bd)


@layer("Gather", ANY)
def _gather(ctx: LayerContext):
    shape = ctx.in_shape(0)
    if shape is None:
        raise ctx.error("the rank of the input is not known")
    rank = len(shape)
    axis = _gather_axis(ctx, rank)
    bd = ctx.int("batch_dims", 0)
    iv = ctx.input(1)
    if bd < 0:
        bd += len(iv.shape or ())
    dt = dtype_of(ctx.input(0))
    x = ctx.tensor(0)
    extent = shape[axis]
    if iv.is_const and bd == 0:
        idx = np.asarray(iv.const).astype(np.int64)
        if extent is not None:
            if np.any((idx < -extent) | (idx >= extent)):
                raise ctx.error(f"gather index out of range for extent {extent}")
            idx = np.where(idx < 0, idx + extent, idx)
        if idx.ndim == 0:
            i = int(idx)
            plan = _Plan([("slice", None, None, 1)] * axis + [("index", i)])
            return ctx.result(_apply_plan(ctx, plan, Value(tensor=x, etype=ctx.in_etype(0), shape=shape), x),
                              ctx.in_etype(0))
        if np.all(idx >= 0):
            it = const_value(ctx, idx, "i64")
            return ctx.result(ctx.emit1("gather", {"input": x, "indices": it}, {"axis": axis}, dtype=dt),
                              ctx.in_etype(0))
    y = ctx.emit1("gather_axis", {"input": x, "indices": ctx.tensor(1)}, {"axis": axis, "batch_dims": bd}, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))


# --- Broadcast / Tile / Pad / Range ----------------------------------------------------------------


def _bcast_mode(ctx: LayerContext) -> str:
    return ctx.choice("mode", ("numpy", "bidirectional", "explicit"), "numpy")


@fold("Broadcast", OPSETS)
def _fold_broadcast(ctx: LayerContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    mode = _bcast_mode(ctx)
    axes = _ints(arrays[2]) if len(arrays) > 2 else []
    target = tuple(_ints(arrays[1]))
    check_items(ctx, target)
    if mode == "bidirectional":
        from ...ops.ext import broadcast_shape
        check_items(ctx, broadcast_shape(arrays[0].shape, target))
    return broadcast_to(arrays[0], target, mode, axes)


@layer("Broadcast", ANY)
def _broadcast(ctx: LayerContext):
    mode = _bcast_mode(ctx)
    v = ctx.input(0)
    tv = ctx.input(1)
    dt = dtype_of(v)
    shape = v.shape
    if tv.is_const and shape is not None and all(d is not None for d in shape) and mode != "explicit":
        target = tuple(_ints(tv.const))
        r = max(len(target), len(shape))
        full = (1,) * (r - len(shape)) + tuple(shape)
        tgt = (1,) * (r - len(target)) + target
        try:
            if mode == "numpy":
                from ...ops.ext import broadcast_shape
                if broadcast_shape(shape, target) != target:
                    raise ctx.error(f"{list(shape)} cannot be broadcast to {list(target)}")
        except NNEFXError as exc:
            raise ctx.error(exc.message) from None
        x = ctx.tensor(0)
        if r > len(shape):
            x = ctx.emit1("unsqueeze", {"input": x}, {"axes": list(range(r - len(shape)))}, dtype=dt)
        reps = []
        for a, b in zip(full, tgt, strict=False):
            if a == b or b == 1:
                reps.append(1)
            elif a == 1:
                reps.append(b)
            else:
                raise ctx.error(f"{list(shape)} cannot be broadcast to {list(target)}")
        if any(k != 1 for k in reps):
            x = ctx.emit1("tile", {"input": x}, {"repeats": reps}, dtype=dt)
        return ctx.result(x, v.etype)
    axes = ctx.const_ints(2, "axes_mapping") if mode == "explicit" else []
    y = ctx.emit1("broadcast_to", {"input": ctx.tensor(0), "shape": ctx.tensor(1)},
                  {"mode": mode, "axes_mapping": axes}, dtype=dt)
    return ctx.result(y, v.etype)


@fold("Tile", OPSETS)
def _fold_tile(ctx: LayerContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    reps = _ints(arrays[1])
    if any(k < 0 for k in reps):
        raise ctx.error(f"negative repeats {reps}")
    x = arrays[0]
    full = [1] * max(len(reps) - x.ndim, 0) + list(x.shape)
    reps_full = [1] * max(x.ndim - len(reps), 0) + reps
    check_items(ctx, [a * b for a, b in zip(full, reps_full, strict=True)])
    return np.tile(x, reps)


@layer("Tile", ANY)
def _tile(ctx: LayerContext):
    reps = ctx.const_ints(1, "repeats")
    r = ctx.in_rank(0)
    dt = dtype_of(ctx.input(0))
    x = ctx.tensor(0)
    if len(reps) > r:
        x = ctx.emit1("unsqueeze", {"input": x}, {"axes": list(range(len(reps) - r))}, dtype=dt)
    elif len(reps) < r:
        reps = [1] * (r - len(reps)) + reps
    if any(k < 0 for k in reps):
        raise ctx.error(f"negative repeats {reps}")
    if all(k == 1 for k in reps):
        return ctx.result(x, ctx.in_etype(0))
    return ctx.result(ctx.emit1("tile", {"input": x}, {"repeats": reps}, dtype=dt), ctx.in_etype(0))


_PAD_MODES = {"constant": "constant", "edge": "replicate", "reflect": "reflect", "symmetric": "reflect-even"}


@layer("Pad", ANY)
def _pad(ctx: LayerContext):
    r = ctx.in_rank(0)
    pb = ctx.const_ints(1, "pads_begin")
    pe = ctx.const_ints(2, "pads_end")
    if len(pb) != r or len(pe) != r:
        raise ctx.error(f"pads_begin/pads_end must have {r} entries")
    mode = ctx.choice("pad_mode", tuple(_PAD_MODES))
    value = 0.0
    if mode == "constant" and ctx.n_inputs > 3:
        value = float(np.asarray(ctx.const(3, "pad_value")).reshape(-1)[0])
    if dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error("Pad of non-floating-point tensors is not supported")
    attrs = {"padding": [(int(a), int(b)) for a, b in zip(pb, pe, strict=False)], "border": _PAD_MODES[mode]}
    if mode == "constant":
        attrs["value"] = value
    return ctx.result(ctx.emit1("pad", {"input": ctx.tensor(0)}, attrs))


@fold("Range", OPSETS)
def _fold_range(ctx: LayerContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    start, stop, step = (np.asarray(a).reshape(-1)[0] for a in arrays[:3])
    if ctx.version == "opset4" or ctx.has("output_type"):
        from .weights import element_type
        et = element_type(ctx.str("output_type", "i64"), ctx.location)
    else:
        et = ctx.in_etype(0)
    if step == 0:
        raise ctx.error("Range step 0")
    if not all(np.isfinite(float(v)) for v in (start, stop, step)):
        raise ctx.error("Range bounds must be finite")
    check_items(ctx, [max(int(math.ceil((float(stop) - float(start)) / float(step))), 0)])
    out = np.arange(start, stop, step)
    from .mapping import storage_array
    return ctx.folded(storage_array(out, et), et)


@layer("Range", ANY)
def _range(ctx: LayerContext):
    ctx.expect_inputs(3)
    if ctx.version == "opset4" or ctx.has("output_type"):
        from .weights import element_type
        et = element_type(ctx.str("output_type", "i64"), ctx.location)
    else:
        et = ctx.in_etype(0)
    kind = nnef_dtype(et)
    if kind == "logical":
        raise ctx.error("Range of booleans is not supported")
    args = []
    for i in range(3):
        v = ctx.input(i)
        if v.is_const:
            arr = np.asarray(v.const).reshape(())
            args.append(ctx.tensor_of(ctx.folded(arr.astype(np.float32 if kind == "scalar" else np.int64), et)))
        elif nnef_dtype(v.etype) != kind:
            args.append(ctx.emit1("convert_element_type", {"input": ctx.tensor(i)}, {"destination_type": et}, dtype=kind))
        else:
            args.append(ctx.tensor(i))
    y = ctx.emit1("arange", {"start": args[0], "stop": args[1], "step": args[2]}, dtype=kind)
    return ctx.result(y, et)


@layer("TopK", ANY)
def _top_k(ctx: LayerContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.int("axis"), r)
    k = ctx.const_ints(1, "k")
    if len(k) != 1:
        raise ctx.error("k must be a single value")
    mode = ctx.choice("mode", ("max", "min"))
    sort = ctx.choice("sort", ("value", "index", "none"), "none")
    if dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error("TopK of integer tensors is not supported")
    from .weights import element_type
    iet = element_type(ctx.str("index_element_type", "i32"), ctx.location)
    vals, idx = ctx.emit("top_k", {"input": ctx.tensor(0)},
                         {"k": k[0], "axis": axis, "mode": mode, "sort": "index" if sort == "index" else "value"},
                         outputs=2)
    ctx.builder.graph.tensors[idx].dtype = "integer"
    return [ctx.result(vals, port=0), ctx.result(idx, iet, port=1)]


@layer("CumSum", ANY)
def _cumsum(ctx: LayerContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.const_ints(1, "axis")[0] if ctx.n_inputs > 1 else 0, r)
    if dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error("CumSum of integer tensors is not supported")
    y = ctx.emit1("cumulative_sum", {"x": ctx.tensor(0)}, {"axis": axis, "exclusive": ctx.bool("exclusive", False),
                                                      "reverse": ctx.bool("reverse", False)})
    return ctx.result(y)


@layer("Round", ANY)
def _round(ctx: LayerContext):
    mode = ctx.choice("mode", ("half_to_even", "half_away_from_zero"))
    if dtype_of(ctx.input(0)) != "scalar":
        return ctx.result(ctx.tensor(0), ctx.in_etype(0))
    return ctx.result(ctx.emit1("round_with_mode", {"x": ctx.tensor(0)}, {"mode": mode}))


@layer("Einsum", ANY)
def _einsum(ctx: LayerContext):
    eq = ctx.str("equation").replace(" ", "")
    if "->" not in eq or "." in eq:
        raise ctx.error(f"Einsum equation '{eq}' is not supported (needs '->' and no ellipsis)")
    xs = [ctx.tensor(i) for i in range(ctx.n_inputs)]
    return ctx.result(ctx.emit1("einsum", {"inputs": xs}, {"equation": eq}))


def _static_chw(ctx: LayerContext) -> tuple:
    shape = ctx.in_shape(0)
    if shape is None or len(shape) != 4 or any(d is None for d in shape[1:]):
        raise ctx.error("needs a rank-4 input with known channel and spatial extents")
    return shape


@layer("DepthToSpace", ANY)
def _depth_to_space(ctx: LayerContext):
    _, c, h, w = _static_chw(ctx)
    bs = ctx.int("block_size")
    mode = ctx.choice("mode", ("blocks_first", "depth_first"))
    if bs < 1 or c % (bs * bs):
        raise ctx.error(f"channels {c} are not divisible by block_size^2 = {bs * bs}")
    co = c // (bs * bs)
    dt = dtype_of(ctx.input(0))
    if mode == "blocks_first":
        t = ctx.emit1("reshape", {"input": ctx.tensor(0)}, {"shape": [0, bs, bs, co, h, w]}, dtype=dt)
        t = ctx.emit1("transpose", {"input": t}, {"axes": [0, 3, 4, 1, 5, 2]}, dtype=dt)
    else:
        t = ctx.emit1("reshape", {"input": ctx.tensor(0)}, {"shape": [0, co, bs, bs, h, w]}, dtype=dt)
        t = ctx.emit1("transpose", {"input": t}, {"axes": [0, 1, 4, 2, 5, 3]}, dtype=dt)
    y = ctx.emit1("reshape", {"input": t}, {"shape": [0, co, h * bs, w * bs]}, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))


@layer("SpaceToDepth", ANY)
def _space_to_depth(ctx: LayerContext):
    _, c, h, w = _static_chw(ctx)
    bs = ctx.int("block_size")
    mode = ctx.choice("mode", ("blocks_first", "depth_first"))
    if bs < 1 or h % bs or w % bs:
        raise ctx.error(f"spatial extents {h}x{w} are not divisible by block_size {bs}")
    dt = dtype_of(ctx.input(0))
    t = ctx.emit1("reshape", {"input": ctx.tensor(0)}, {"shape": [0, c, h // bs, bs, w // bs, bs]}, dtype=dt)
    axes = [0, 3, 5, 1, 2, 4] if mode == "blocks_first" else [0, 1, 3, 5, 2, 4]
    t = ctx.emit1("transpose", {"input": t}, {"axes": axes}, dtype=dt)
    y = ctx.emit1("reshape", {"input": t}, {"shape": [0, c * bs * bs, h // bs, w // bs]}, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))


# --- reductions ------------------------------------------------------------------------------------

_REDUCE = {"ReduceMean": "mean_reduce", "ReduceSum": "sum_reduce", "ReduceMax": "max_reduce",
           "ReduceMin": "min_reduce", "ReduceL1": None, "ReduceL2": None, "ReduceProd": None,
           "ReduceLogicalAnd": "all_reduce", "ReduceLogicalOr": "any_reduce"}
_NP_REDUCE = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
              "ReduceProd": np.prod, "ReduceLogicalAnd": np.all, "ReduceLogicalOr": np.any}


@fold(list(_NP_REDUCE), OPSETS)
def _fold_reduce(ctx: LayerContext, arrays):
    x = arrays[0]
    if any(a.dtype == object for a in arrays):
        return None
    axes = tuple(norm_axes(ctx, _ints(arrays[1]), x.ndim))
    return np.asarray(_NP_REDUCE[ctx.type](x, axis=axes, keepdims=ctx.bool("keep_dims", False))).astype(
        x.dtype if ctx.type != "ReduceMean" or x.dtype.kind == "f" else np.float64)


@layer(list(_REDUCE), ANY)
def _reduce(ctx: LayerContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    keep = ctx.bool("keep_dims", False)
    x = ctx.tensor(0)
    op = _REDUCE[ctx.type]
    logical = ctx.type in ("ReduceLogicalAnd", "ReduceLogicalOr")
    if not logical and dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error(f"{ctx.type} of integer tensors at run time is not supported")
    if not axes:
        return ctx.result(x, ctx.in_etype(0))
    kind = "logical" if logical else "scalar"
    if ctx.type == "ReduceL1":
        y = ctx.emit1("sum_reduce", {"input": unary(ctx, "abs", x)}, {"axes": axes})
    elif ctx.type == "ReduceL2":
        y = unary(ctx, "sqrt", ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": axes}))
    elif ctx.type == "ReduceProd":
        y = ctx.emit1("prod_reduce", {"input": x}, {"axes": axes})
    else:
        y = ctx.emit1(op, {"input": x}, {"axes": axes}, out_dtype=kind)
    if not keep:
        if len(axes) == r:
            y = ctx.emit1("reshape", {"input": y}, {"shape": []}, dtype=kind)
        else:
            y = ctx.emit1("squeeze", {"input": y}, {"axes": axes}, dtype=kind)
    return ctx.result(y, ctx.in_etype(0))


# --- softmax, normalisation --------------------------------------------------------------------


@layer(("Softmax", "SoftMax"), ANY)
def _softmax(ctx: LayerContext):
    axis = norm_axis(ctx, ctx.int("axis", 1), ctx.in_rank(0))
    return ctx.result(ctx.emit1("softmax", {"x": ctx.tensor(0)}, {"axes": [axis]}))


@layer("LogSoftmax", ANY)
def _log_softmax(ctx: LayerContext):
    axis = norm_axis(ctx, ctx.int("axis", 1), ctx.in_rank(0))
    x = ctx.tensor(0)
    m = ctx.emit1("max_reduce", {"input": x}, {"axes": [axis]})
    d = binary(ctx, "sub", x, m)
    s = ctx.emit1("sum_reduce", {"input": unary(ctx, "exp", d)}, {"axes": [axis]})
    return ctx.result(binary(ctx, "sub", d, unary(ctx, "log", s)))


def _mvn(ctx: LayerContext, x: str, axes: list[int], normalize: bool, eps: float, inside: bool) -> str:
    mean = ctx.emit1("mean_reduce", {"input": x}, {"axes": axes})
    d = binary(ctx, "sub", x, mean)
    if not normalize:
        return d
    var = ctx.emit1("mean_reduce", {"input": binary(ctx, "mul", d, d)}, {"axes": axes})
    if inside:
        den = unary(ctx, "sqrt", binary(ctx, "add", var, eps))
    else:
        den = binary(ctx, "add", unary(ctx, "sqrt", var), eps)
    return binary(ctx, "div", d, den)


@layer("MVN", ("opset6",))
def _mvn6(ctx: LayerContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    mode = ctx.choice("eps_mode", ("inside_sqrt", "outside_sqrt"))
    y = _mvn(ctx, ctx.tensor(0), axes, ctx.bool("normalize_variance"), ctx.float("eps"), mode == "inside_sqrt")
    return ctx.result(y)


@layer("MVN", ("opset2", "opset1"))
def _mvn1(ctx: LayerContext):
    r = ctx.in_rank(0)
    if ctx.has("reduction_axes"):
        axes = sorted(norm_axes(ctx, ctx.ints("reduction_axes"), r))
    else:
        axes = list(range(1 if ctx.bool("across_channels", False) else 2, r))
    y = _mvn(ctx, ctx.tensor(0), axes, ctx.bool("normalize_variance", False), ctx.float("eps"), False)
    return ctx.result(y)


@layer("NormalizeL2", ANY)
def _normalize_l2(ctx: LayerContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    eps = ctx.float("eps")
    mode = ctx.choice("eps_mode", ("add", "max"))
    x = ctx.tensor(0)
    if mode == "max":
        # x / sqrt(max(sum x^2, eps)) == x / max(sqrt(sum x^2), sqrt(eps))
        y = ctx.emit1("l2_normalization", {"input": x}, {"axes": axes, "bias": 0.0, "epsilon": math.sqrt(eps)})
        return ctx.result(y)
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": axes})
    return ctx.result(binary(ctx, "div", x, unary(ctx, "sqrt", binary(ctx, "add", s, eps))))


def _channel_param(ctx: LayerContext, i: int, rank: int) -> str:
    """A per-channel [C] parameter as an NNEF [1, C] tensor (channel axis 1)."""
    v = ctx.input(i)
    if v.is_const:
        return const_value(ctx, np.asarray(v.const).reshape(1, -1), v.etype)
    return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [0]})


@layer("BatchNormInference", ANY)
def _batch_norm(ctx: LayerContext):
    ctx.expect_inputs(5)
    if ctx.version == "opset1":
        gi, bi, xi, mi, vi = 0, 1, 2, 3, 4
    else:
        xi, gi, bi, mi, vi = 0, 1, 2, 3, 4
    r = ctx.in_rank(xi)
    p = {k: _channel_param(ctx, i, r) for k, i in (("scale", gi), ("offset", bi), ("mean", mi), ("variance", vi))}
    y = ctx.emit1("batch_normalization", {"input": ctx.tensor(xi), "mean": p["mean"], "variance": p["variance"],
                                          "offset": p["offset"], "scale": p["scale"]},
                  {"epsilon": ctx.float("epsilon")})
    return ctx.result(y)


# --- sliding window ------------------------------------------------------------------------------


def _spatial(ctx: LayerContext, key: str, n: int, default: int | None) -> list[int]:
    if not ctx.has(key) and default is not None:
        return [default] * n
    v = ctx.ints(key)
    if len(v) != n:
        raise ctx.error(f"attribute '{key}' must have {n} entries (one per spatial dimension), has {len(v)}")
    return v


def _padding(ctx: LayerContext, in_spatial, kernel, strides, dilations, *, rounding: str = "floor",
             out_spatial=None) -> list[tuple[int, int]] | None:
    """Explicit (before, after) padding per spatial dim, reproducing auto_pad and ceil rounding."""
    n = len(kernel)
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("explicit", "notset", ""):
        pb = _spatial(ctx, "pads_begin", n, 0)
        pe = _spatial(ctx, "pads_end", n, 0)
        pads = list(zip(pb, pe, strict=False))
    elif auto == "valid":
        pads = [(0, 0)] * n
    elif auto in ("same_upper", "same_lower"):
        if any(x is None for x in in_spatial):
            if auto == "same_upper" and rounding == "floor":
                return None  # NNEF automatic padding is exactly same_upper
            raise ctx.error("auto_pad=same_lower needs known spatial extents")
        pads = []
        for x, k, s, d in zip(in_spatial, kernel, strides, dilations, strict=False):
            out = -(-x // s)
            t = max((out - 1) * s + (k - 1) * d + 1 - x, 0)
            small, large = t // 2, t - t // 2
            pads.append((small, large) if auto == "same_upper" else (large, small))
    else:
        raise ctx.error(f"unknown auto_pad '{auto}'")
    return pads


@layer("Convolution", ANY)
def _convolution(ctx: LayerContext):
    return ctx.result(_conv(ctx, groups=1))


@layer("GroupConvolution", ANY)
def _group_convolution(ctx: LayerContext):
    return ctx.result(_conv(ctx, groups=None))


@layer("BinaryConvolution", ANY)
def _binary_convolution(ctx: LayerContext):
    """BinaryConvolution-1 as ``ir_binary_convolution`` (0/1 input and filter read as -1/+1).

    Where the opset is ambiguous the layer is refused rather than guessed: ``pad_value`` fills
    padded positions, but OpenVINO's reference implementation and its CPU plugin disagree on
    every value but 1 (0 reads as -1 in the reference and as "no contribution" on the CPU;
    -1 never matches a bit in the reference and reads as -1 on the CPU), so padding is mapped
    only with ``pad_value = 1`` (each padded position counts as +1, as in nnefx).  The input
    should hold 0/1 values; nnefx reads ``x > 0`` as +1 for any value, as the CPU plugin does.
    """
    ctx.expect_inputs(2)
    mode = ctx.str("mode")
    if mode != "xnor-popcount":
        raise ctx.error(f"mode '{mode}' is not supported (only xnor-popcount is defined)")
    xshape = ctx.in_shape(0)
    if xshape is None or len(xshape) < 3:
        raise ctx.error("the input rank must be known and >= 3")
    n = len(xshape) - 2
    w = ctx.input(1)
    if w.shape is None or any(d is None for d in w.shape) or len(w.shape) != n + 2:
        raise ctx.error(f"the filter shape must be known and of rank {n + 2}")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    pads = _padding(ctx, xshape[2:], w.shape[2:], strides, dil)
    if pads is None:
        raise ctx.error("auto_pad needs known spatial extents")
    pad_value = ctx.float("pad_value")
    if pad_value != 1.0 and any(p or q for p, q in pads):
        raise ctx.error(f"pad_value {pad_value:g} with padding is ambiguous (OpenVINO's reference and CPU "
                        "plugin compute different results); only pad_value 1 is mapped")
    if w.is_const:
        # a u1 filter is unpacked least significant bit first (binary_filter says why)
        filt = const_value(ctx, binary_filter(ctx, w), "f32")
    elif w.etype in ("f32", "f16", "f64", "bf16"):
        filt = ctx.tensor(1)
    else:
        raise ctx.error(f"a run-time filter of element type {w.etype} is not supported")
    y = ctx.emit1("ir_binary_convolution", {"input": ctx.tensor(0), "filter": filt},
                  {"padding": pads, "stride": strides, "dilation": dil, "groups": 1, "pad_value": pad_value})
    return ctx.result(y)


def _filter(ctx: LayerContext, grouped: bool, transposed: bool) -> tuple[str, tuple, int]:
    w = ctx.input(1)
    wshape = w.shape
    if wshape is None or any(d is None for d in wshape):
        raise ctx.error("the filter shape must be known")
    if not grouped:
        return ctx.tensor(1), tuple(wshape), 1
    g = wshape[0]
    if transposed:  # [G, Cin/G, Cout/G, k...] -> [Cin, Cout/G, k...]
        new = (g * wshape[1],) + tuple(wshape[2:])
    else:  # [G, Cout/G, Cin/G, k...] -> [Cout, Cin/G, k...]
        new = (g * wshape[1],) + tuple(wshape[2:])
    if w.is_const:
        return const_value(ctx, np.asarray(w.const).reshape(new), w.etype), new, g
    t = ctx.emit1("reshape", {"input": ctx.tensor(1)}, {"shape": list(new)})
    return t, new, g


def _conv(ctx: LayerContext, groups: int | None) -> str:
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    w, wshape, g = _filter(ctx, groups is None, False)
    if len(wshape) != n + 2:
        raise ctx.error(f"filter rank {len(wshape)} does not match input rank {n + 2}")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    pads = _padding(ctx, xshape[2:], wshape[2:], strides, dil)
    attrs = {"border": "constant", "padding": [] if pads is None else pads, "stride": strides, "dilation": dil,
             "groups": g}
    return ctx.emit1("conv", {"input": ctx.tensor(0), "filter": w, "bias": 0.0}, attrs)


@layer(("ConvolutionBackpropData", "GroupConvolutionBackpropData"), ANY)
def _deconvolution(ctx: LayerContext):
    grouped = ctx.type.startswith("Group")
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    w, wshape, g = _filter(ctx, grouped, True)
    if ctx.n_inputs > 2:
        raise ctx.error("an explicit output_shape input is not supported")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    outpad = _spatial(ctx, "output_padding", n, 0)
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("explicit", "notset", ""):
        pads = list(zip(_spatial(ctx, "pads_begin", n, 0), _spatial(ctx, "pads_end", n, 0), strict=False))
    elif auto == "valid":
        pads = [(0, 0)] * n
    elif auto in ("same_upper", "same_lower"):
        pads = []
        for k, s, d, op in zip(wshape[2:], strides, dil, outpad, strict=False):
            t = max((k - 1) * d + 1 - s + op, 0)
            small, large = t // 2, t - t // 2
            pads.append((small, large) if auto == "same_upper" else (large, small))
    else:
        raise ctx.error(f"unknown auto_pad '{auto}'")
    # output_padding adds extents at the end: NNEF expresses that as less end padding
    padding = [(p, q - op) for (p, q), op in zip(pads, outpad, strict=False)]
    attrs = {"border": "constant", "padding": padding, "stride": strides, "dilation": dil, "groups": g}
    return ctx.result(ctx.emit1("deconv", {"input": ctx.tensor(0), "filter": w, "bias": 0.0}, attrs))


def _pool_common(ctx: LayerContext):
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    kernel = _spatial(ctx, "kernel", n, None)
    strides = _spatial(ctx, "strides", n, 1)
    dil = _spatial(ctx, "dilations", n, 1)
    for key, values in (("kernel", kernel), ("strides", strides), ("dilations", dil)):
        if any(v < 1 for v in values):
            raise ctx.error(f"attribute '{key}' = {list(values)} must have items >= 1")
    rounding = ctx.choice("rounding_type", ("floor", "ceil", "ceil_torch"), "floor")
    return xshape, n, kernel, strides, dil, rounding


def _pool(ctx: LayerContext, op: str, x: str, xshape, kernel, strides, dil, pads, rounding: str, border: str,
          fill: float, extra: dict) -> str:
    """Pool with OpenVINO's output extents (floor/ceil/ceil_torch rounding).

    OpenVINO's extent is ``round((X + p + q - fd) / s) + 1``; NNEF always floors, so the end
    padding grows to reach the same count.  With ``border='ignore'`` a window lying wholly
    beyond the input has no element to look at: OpenVINO gives ``fill`` there (0 for average,
    the lowest float for max pooling), so such windows are not pooled but padded on after.
    """
    n = len(kernel)
    spatial = xshape[2:]
    new_pads = []
    tail = []
    for i in range(n):
        X, k, s, d = spatial[i], kernel[i], strides[i], dil[i]
        p, q = pads[i]
        fd = (k - 1) * d + 1
        if X is None:
            if rounding != "floor":
                raise ctx.error(f"rounding_type={rounding} needs known spatial extents "
                                "(fix dynamic input dims with nnefx.load(..., shapes={...}))")
            new_pads.append((p, q))
            tail.append(0)
            continue
        span = X + p + q - fd
        if span < 0:
            raise ctx.error(f"the pooling window ({fd}) is larger than the padded input ({X + p + q})")
        out = (span // s if rounding == "floor" else -(-span // s)) + 1
        if rounding == "ceil_torch" and (out - 1) * s >= X + p:
            out -= 1
        valid = out
        if border == "ignore":
            valid = min(out, -(-(X + p) // s))  # windows starting before the end of the input
            valid = max(valid, 1)
        q_eff = max((valid - 1) * s + fd - X - p, 0)  # any value giving `valid` windows
        new_pads.append((p, q_eff))
        tail.append(out - valid)
    attrs = dict(extra)
    attrs.update({"size": [1, 1] + list(kernel), "border": border, "padding": [(0, 0), (0, 0)] + new_pads,
                  "stride": [1, 1] + list(strides)})
    if any(v != 1 for v in dil):
        attrs["dilation"] = [1, 1] + list(dil)
    y = ctx.emit1(op, {"input": x}, attrs)
    if any(tail):
        y = ctx.emit1("pad", {"input": y}, {"padding": [(0, 0), (0, 0)] + [(0, t) for t in tail],
                                            "border": "constant", "value": fill})
    return y


def _pool_pads(ctx: LayerContext, xshape, n, kernel, strides, dil) -> list[tuple[int, int]]:
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("same_upper", "same_lower") and any(d is None for d in xshape[2:]):
        raise ctx.error("auto_pad same_* pooling needs known spatial extents")
    pads = _padding(ctx, xshape[2:], kernel, strides, dil)
    assert pads is not None
    return pads


@layer("MaxPool", ANY)
def _max_pool(ctx: LayerContext):
    xshape, n, kernel, strides, dil, rounding = _pool_common(ctx)
    pads = _pool_pads(ctx, xshape, n, kernel, strides, dil)
    y = _pool(ctx, "max_pool", ctx.tensor(0), xshape, kernel, strides, dil, pads, rounding, "ignore",
              float(np.finfo(np.float32).min), {})
    outs = [ctx.result(y)]
    if len(ctx.layer.outputs) > 1:
        outs.append(Value(unsupported=f"the indices output of {ctx.layer.where()} is not supported"))
    return outs


@layer("AvgPool", ANY)
def _avg_pool(ctx: LayerContext):
    xshape, n, kernel, strides, dil, rounding = _pool_common(ctx)
    exclude = ctx.bool("exclude-pad", False) if ctx.has("exclude-pad") else ctx.bool("exclude_pad", False)
    pads = _pool_pads(ctx, xshape, n, kernel, strides, [1] * n)
    # OpenVINO (CPU) semantics, checked case by case: with exclude-pad=false and some
    # padding, every window divides by the full kernel size (padding and ceil overhang count
    # as zeros); without padding, or with exclude-pad=true, only input elements count.
    counted = not exclude and any(p or q for p, q in pads)
    border = "constant" if counted else "ignore"
    y = _pool(ctx, "avg_pool", ctx.tensor(0), xshape, kernel, strides, [1] * n, pads, rounding, border, 0.0, {})
    return ctx.result(y)


# --- MatMul ----------------------------------------------------------------------------------------


@layer("MatMul", ANY)
def _matmul(ctx: LayerContext):
    ta, tb = ctx.bool("transpose_a", False), ctx.bool("transpose_b", False)
    ra, rb = ctx.in_rank(0), ctx.in_rank(1)
    a, b = ctx.input(0), ctx.input(1)
    if dtype_of(a) != "scalar" or dtype_of(b) != "scalar":
        raise ctx.error("MatMul of integer tensors is not supported")

    def prep(i: int, v: Value, r: int, vector_axis: int) -> tuple[str, int]:
        if r == 1:
            if v.is_const:
                shape = (1, -1) if vector_axis == 0 else (-1, 1)
                return const_value(ctx, np.asarray(v.const).reshape(shape), v.etype), 2
            return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [vector_axis]}), 2
        return ctx.tensor(i), r

    xa, ra2 = prep(0, a, ra, 0)
    xb, rb2 = prep(1, b, rb, 1)
    if ra == 1:
        ta = False
    if rb == 1:
        tb = False
    r = max(ra2, rb2)
    if ra2 < r:
        if a.is_const and ra > 1:
            xa = const_value(ctx, np.asarray(a.const).reshape((1,) * (r - ra2) + a.const.shape), a.etype)
        else:
            xa = ctx.emit1("unsqueeze", {"input": xa}, {"axes": list(range(r - ra2))})
    if rb2 < r:
        if b.is_const and rb > 1:
            xb = const_value(ctx, np.asarray(b.const).reshape((1,) * (r - rb2) + b.const.shape), b.etype)
        else:
            xb = ctx.emit1("unsqueeze", {"input": xb}, {"axes": list(range(r - rb2))})
    y = ctx.emit1("matmul", {"A": xa, "B": xb}, {"transposeA": ta, "transposeB": tb})
    squeeze = []
    if ra == 1:
        squeeze.append(r - 2)
    if rb == 1:
        squeeze.append(r - 1)
    if squeeze:
        y = ctx.emit1("squeeze", {"input": y}, {"axes": squeeze})
    return ctx.result(y)


# --- attention --------------------------------------------------------------------------------------

NEG_INF = float(np.finfo(np.float32).min)


@layer("ScaledDotProductAttention", ANY)
def _sdpa(ctx: LayerContext):
    q, k = ctx.input(0), ctx.input(1)
    qs, ks = q.shape, k.shape
    if qs is None or ks is None:
        raise ctx.error("query and key ranks must be known")
    r = max(len(qs), len(ks), ctx.in_rank(2))
    qt, kt, vt = aligned(ctx, [0, 1, 2])
    if ctx.n_inputs > 4:
        sv = ctx.input(4)
        scale: object = float(np.asarray(sv.const).reshape(-1)[0]) if sv.is_const else ctx.tensor(4)
    else:
        e = qs[-1]
        if e is None:
            raise ctx.error("the embedding size of the query must be known")
        scale = 1.0 / math.sqrt(e)
    s = ctx.emit1("matmul", {"A": qt, "B": kt}, {"transposeA": False, "transposeB": True})
    s = binary(ctx, "mul", s, scale)
    if ctx.bool("causal", False):
        lq, lk = qs[-2], ks[-2]
        if lq is None or lk is None:
            raise ctx.error("causal attention needs known sequence lengths")
        m = np.where(np.triu(np.ones((lq, lk), bool), 1), NEG_INF, 0.0).astype(np.float32)
        s = binary(ctx, "add", s, const_value(ctx, m.reshape((1,) * (r - 2) + m.shape), "f32"))
    elif ctx.n_inputs > 3:
        mv = ctx.input(3)
        mr = len(mv.shape or ())
        if mv.etype == "boolean":
            if mv.is_const:
                arr = np.where(mv.const, 0.0, NEG_INF).astype(np.float32)
                mt = const_value(ctx, arr.reshape((1,) * (r - arr.ndim) + arr.shape), "f32")
            else:
                sel = ctx.emit1("select", {"condition": ctx.tensor(3), "true_value": 0.0, "false_value": NEG_INF},
                                dtype="scalar")
                mt = sel if mr == r else ctx.emit1("unsqueeze", {"input": sel}, {"axes": list(range(r - mr))})
        elif mv.is_const:
            arr = np.asarray(mv.const)
            mt = const_value(ctx, arr.reshape((1,) * (r - arr.ndim) + arr.shape), mv.etype)
        else:
            mt = ctx.tensor(3)
            if mr < r:
                mt = ctx.emit1("unsqueeze", {"input": mt}, {"axes": list(range(r - mr))})
        s = binary(ctx, "add", s, mt)
    p = ctx.emit1("softmax", {"x": s}, {"axes": [r - 1]})
    return ctx.result(ctx.emit1("matmul", {"A": p, "B": vt}, {"transposeA": False, "transposeB": False}))


# --- Interpolate -----------------------------------------------------------------------------------


@layer("Interpolate", ANY)
def _interpolate(ctx: LayerContext):
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    r = len(xshape)
    odims = ctx.out_dims(0)
    if odims is None or len(odims) != r:
        raise ctx.error("Interpolate needs the output rank")
    if ctx.version == "opset1":
        mode = ctx.str("mode").lower()
        coord = "half_pixel" if not ctx.bool("align_corners", False) else "align_corners"
        nearest = "round_prefer_floor" if mode != "nearest" else "floor"
        coord = "asymmetric" if mode == "nearest" and coord == "half_pixel" else coord
        axes = sorted(norm_axes(ctx, ctx.ints("axes"), r))
        cubic_a = -0.75
        if any(ctx.ints("pads_begin", [0])) or any(ctx.ints("pads_end", [0])):
            raise ctx.error("Interpolate with pads is not supported")
        if mode == "linear":
            mode = "linear_onnx"
    else:
        mode = ctx.str("mode").lower()
        coord = ctx.choice("coordinate_transformation_mode", COORD_MODES, "half_pixel")
        nearest = ctx.choice("nearest_mode", NEAREST_MODES, "round_prefer_floor")
        cubic_a = ctx.float("cube_coeff", -0.75)
        if any(ctx.ints("pads_begin", [0])) or any(ctx.ints("pads_end", [0])):
            raise ctx.error("Interpolate with pads is not supported")
        if ctx.bool("antialias", False):
            raise ctx.error("Interpolate with antialias is not supported")
        axes_input = 3 if ctx.version == "opset4" else 2
        if ctx.n_inputs > axes_input:
            axes = norm_axes(ctx, ctx.const_ints(axes_input, "axes"), r)
        else:
            axes = list(range(r))
    calc = ctx.str("shape_calculation_mode", "sizes").lower() if ctx.version != "opset1" else "sizes"
    target = list(odims)
    if calc == "scales":  # axes scaled by exactly 1 are left alone (e.g. a dynamic batch)
        all_scales = _interp_scales(ctx, axes, None, None)
        axes = [a for a, sc in zip(axes, all_scales, strict=True) if sc != 1.0]
        for a, sc in zip(axes, _interp_scales(ctx, axes, None, None), strict=True):
            if target[a] is None and xshape[a] is not None:
                v = xshape[a] * sc  # OpenVINO: floor(extent * scale), tolerant to float noise
                target[a] = int(round(v)) if abs(v - round(v)) < 1e-5 else int(math.floor(v))
    else:
        sizes_in = ctx.input(1)
        given = sizes_in.const if sizes_in.is_const else sizes_in.sym
        x_name = ctx.input(0).tensor
        keep = []
        for k, a in enumerate(axes):
            entry = np.asarray(given).reshape(-1)[k] if given is not None and np.size(given) == len(axes) else None
            if isinstance(entry, Dim) and entry.tensor == x_name and entry.axis == a:
                continue  # the target extent is the input's own (dynamic) extent
            if target[a] is None and entry is not None and not isinstance(entry, Dim):
                target[a] = int(entry)
            if xshape[a] is not None and xshape[a] == target[a]:
                continue
            keep.append(a)
        axes = keep
    for a in axes:
        if xshape[a] is None or target[a] is None:
            raise ctx.error("Interpolate needs known input and output extents on the resized axes "
                            "(fix dynamic input dims with nnefx.load(..., shapes={...}))")
    sizes = [int(target[a]) for a in axes]
    scales = _interp_scales(ctx, axes, [int(xshape[a]) for a in axes], sizes)
    if not axes:
        return ctx.result(ctx.tensor(0))
    x = ctx.tensor(0)
    if all(xshape[a] == n for a, n in zip(axes, sizes, strict=True)) and mode != "cubic":
        if all(abs(s - 1.0) < 1e-12 for s in scales):
            return ctx.result(x)
    standard = _interp_standard(ctx, x, xshape, axes, sizes, scales, mode, coord, nearest)
    if standard is not None:
        return ctx.result(standard)
    if mode == "linear":
        if any(s < 1 for s in scales):
            raise ctx.error("Interpolate mode 'linear' down-scaling is not supported")
        mode = "linear_onnx"
    if mode not in INTERP_MODES:
        raise ctx.error(f"Interpolate mode '{mode}' is not supported")
    y = ctx.emit1("interpolate", {"input": x},
                  {"axes": axes, "sizes": sizes, "scales": scales, "mode": mode,
                   "coordinate_transformation_mode": coord, "nearest_mode": nearest, "cubic_coeff_a": cubic_a})
    return ctx.result(y)


def _interp_scales(ctx: LayerContext, axes: list[int], ins, outs) -> list[float]:
    """The scale per resized axis as OpenVINO uses it in the coordinate transform."""
    mode = ctx.str("shape_calculation_mode", "sizes").lower() if ctx.version != "opset1" else "sizes"
    if mode == "scales":
        idx = 2 if ctx.version == "opset4" else 1
        sc = [float(v) for v in np.asarray(ctx.const(idx, "scales")).reshape(-1)]
        given = ctx.const_ints(3 if ctx.version == "opset4" else 2, "axes") if ctx.n_inputs > (
            3 if ctx.version == "opset4" else 2) else list(range(ctx.in_rank(0)))
        given = norm_axes(ctx, given, ctx.in_rank(0))
        if len(sc) != len(given):
            raise ctx.error("scales do not match the axes")
        by_axis = dict(zip(given, sc, strict=True))
        return [by_axis[a] for a in axes]
    return [o / i for i, o in zip(ins, outs, strict=True)]


def _interp_standard(ctx: LayerContext, x: str, xshape, axes, sizes, scales, mode, coord, nearest) -> str | None:
    """NNEF nearest_upsample / multilinear_upsample where they compute exactly the same thing."""
    r = len(xshape)
    if sorted(axes) != list(range(2, r)) or r < 3:
        return None
    factors = []
    for a, n in zip(axes, sizes, strict=True):
        if n % xshape[a]:
            return None
        factors.append(n // xshape[a])
    if any(abs(s - f) > 1e-9 for s, f in zip(scales, factors, strict=True)) or all(f == 1 for f in factors):
        return None
    if mode == "nearest":
        ok = (coord == "asymmetric" and nearest in ("floor", "simple")) or \
             (coord in ("half_pixel", "pytorch_half_pixel") and nearest == "round_prefer_ceil") or \
             (coord == "tf_half_pixel_for_nn" and nearest == "floor")
        if not ok:
            return None
        return ctx.emit1("nearest_upsample", {"input": x}, {"factor": factors})
    if mode in ("linear", "linear_onnx"):
        method = {"half_pixel": "symmetric", "pytorch_half_pixel": "symmetric", "align_corners": "aligned",
                  "asymmetric": "asymmetric"}.get(coord)
        if method is None:
            return None
        return ctx.emit1("multilinear_upsample", {"input": x},
                         {"factor": factors, "method": method, "border": "replicate"})
    return None


# --- recurrent cells -------------------------------------------------------------------------------


def _chunks(ctx: LayerContext, i: int, n: int) -> list[str]:
    """Split a weight input along axis 0 into n equal parts (folded when constant)."""
    v = ctx.input(i)
    if v.is_const:
        return [const_value(ctx, c, v.etype) for c in np.split(np.asarray(v.const), n, axis=0)]
    return ctx.emit("split", {"value": ctx.tensor(i)}, {"axis": 0, "ratios": [1] * n}, outputs=[n])


def _row(ctx: LayerContext, t: str) -> str:
    return ctx.emit1("unsqueeze", {"input": t}, {"axes": [0]})


_ACT = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu"}


def _acts(ctx: LayerContext, default: list[str]) -> list[str]:
    acts = [a.strip().lower() for a in ctx.str("activations", ",".join(default)).split(",") if a.strip()]
    for a in acts:
        if a not in _ACT:
            raise ctx.error(f"activation '{a}' is not supported")
    if ctx.has("activations_alpha") or ctx.has("activations_beta"):
        if ctx.str("activations_alpha", "") or ctx.str("activations_beta", ""):
            raise ctx.error("activations_alpha/beta are not supported")
    return acts


def _clip(ctx: LayerContext, t: str) -> str:
    c = ctx.float("clip", 0.0)
    if c:
        return ctx.emit1("clamp", {"x": t, "a": -c, "b": c})
    return t


def _lin(ctx: LayerContext, x: str, w: str) -> str:
    return ctx.emit1("matmul", {"A": x, "B": w}, {"transposeA": False, "transposeB": True})


@layer("LSTMCell", ANY)
def _lstm_cell(ctx: LayerContext):
    f_act, g_act, h_act = _acts(ctx, ["sigmoid", "tanh", "tanh"])
    if ctx.n_inputs > 6:
        raise ctx.error("LSTMCell peepholes are not supported")
    x, h, c = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    hs = ctx.int("hidden_size")
    wshape = ctx.in_shape(3)
    if wshape is not None and wshape[0] is not None and wshape[0] != 4 * hs:
        raise ctx.error(f"W has {wshape[0]} rows, expected 4 * hidden_size = {4 * hs}")
    b = const_value(ctx, np.asarray(ctx.const(5)).reshape(1, -1), ctx.in_etype(5)) if ctx.is_const(5) \
        else _row(ctx, ctx.tensor(5))
    gates = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, ctx.tensor(3)), _lin(ctx, h, ctx.tensor(4))), b)
    gates = _clip(ctx, gates)
    f, i, g, o = ctx.emit("split", {"value": gates}, {"axis": 1, "ratios": [1, 1, 1, 1]}, outputs=[4])
    ft, it, ot = (unary(ctx, _ACT[f_act], t) for t in (f, i, o))
    gt = unary(ctx, _ACT[g_act], g)
    c2 = binary(ctx, "add", binary(ctx, "mul", ft, c), binary(ctx, "mul", it, gt))
    h2 = binary(ctx, "mul", ot, unary(ctx, _ACT[h_act], c2))
    return [ctx.result(h2, port=0), ctx.result(c2, port=1)]


@layer("GRUCell", ANY)
def _gru_cell(ctx: LayerContext):
    f_act, g_act = _acts(ctx, ["sigmoid", "tanh"])
    x, h = ctx.tensor(0), ctx.tensor(1)
    lbr = ctx.bool("linear_before_reset", False)
    wz, wr, wh = _chunks(ctx, 2, 3)
    rz, rr, rh = _chunks(ctx, 3, 3)
    bparts = _chunks(ctx, 4, 4 if lbr else 3)
    bparts = [_row(ctx, t) for t in bparts]
    z = unary(ctx, _ACT[f_act], _clip(ctx, binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wz), _lin(ctx, h, rz)),
                                                  bparts[0])))
    rg = unary(ctx, _ACT[f_act], _clip(ctx, binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wr),
                                                                      _lin(ctx, h, rr)), bparts[1])))
    if lbr:
        hh = binary(ctx, "add", binary(ctx, "mul", rg, binary(ctx, "add", _lin(ctx, h, rh), bparts[3])),
                    binary(ctx, "add", _lin(ctx, x, wh), bparts[2]))
    else:
        hh = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wh), _lin(ctx, binary(ctx, "mul", rg, h), rh)),
                    bparts[2])
    ht = unary(ctx, _ACT[g_act], _clip(ctx, hh))
    # H' = (1 - z) * h~ + z * H
    one_minus = binary(ctx, "sub", 1.0, z)
    h2 = binary(ctx, "add", binary(ctx, "mul", one_minus, ht), binary(ctx, "mul", z, h))
    return ctx.result(h2)


@layer("RNNCell", ANY)
def _rnn_cell(ctx: LayerContext):
    (act,) = _acts(ctx, ["tanh"])
    x, h = ctx.tensor(0), ctx.tensor(1)
    b = const_value(ctx, np.asarray(ctx.const(4)).reshape(1, -1), ctx.in_etype(4)) if ctx.is_const(4) \
        else _row(ctx, ctx.tensor(4))
    y = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, ctx.tensor(2)), _lin(ctx, h, ctx.tensor(3))), b)
    return ctx.result(unary(ctx, _ACT[act], _clip(ctx, y)))


@layer("LSTMSequence", ANY)
def _lstm_sequence(ctx: LayerContext):
    acts = _acts(ctx, ["sigmoid", "tanh", "tanh"])
    if acts != ["sigmoid", "tanh", "tanh"]:
        raise ctx.error("LSTMSequence with non-default activations is not supported")
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    ctx.expect_inputs(7)
    lt = _sequence_inputs(ctx, 3)
    outs = ctx.emit("lstm_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                         "initial_cell": ctx.tensor(2), "sequence_lengths": lt,
                                         "W": ctx.tensor(4), "R": ctx.tensor(5), "B": ctx.tensor(6)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0)}, outputs=3)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


def _sequence_inputs(ctx: LayerContext, lens_index: int) -> str:
    lens = ctx.input(lens_index)
    if lens.is_const:
        return ctx.tensor_of(ctx.folded(np.asarray(lens.const).astype(np.int64), "i64"))
    t = ctx.tensor(lens_index)
    if lens.etype != "i64":
        t = ctx.emit1("convert_element_type", {"input": t}, {"destination_type": "i64"}, dtype="integer")
    return t


@layer("GRUSequence", ANY)
def _gru_sequence(ctx: LayerContext):
    if _acts(ctx, ["sigmoid", "tanh"]) != ["sigmoid", "tanh"]:
        raise ctx.error("GRUSequence with non-default activations is not supported")
    ctx.expect_inputs(6)
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    outs = ctx.emit("gru_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                        "sequence_lengths": _sequence_inputs(ctx, 2), "W": ctx.tensor(3),
                                        "R": ctx.tensor(4), "B": ctx.tensor(5)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0),
                     "linear_before_reset": ctx.bool("linear_before_reset", False)}, outputs=2)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


@layer("RNNSequence", ANY)
def _rnn_sequence(ctx: LayerContext):
    (act,) = _acts(ctx, ["tanh"])
    ctx.expect_inputs(6)
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    outs = ctx.emit("rnn_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                        "sequence_lengths": _sequence_inputs(ctx, 2), "W": ctx.tensor(3),
                                        "R": ctx.tensor(4), "B": ctx.tensor(5)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0), "activation": act}, outputs=2)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


# --- quantization ----------------------------------------------------------------------------------------


@layer("FakeQuantize", ANY)
def _fake_quantize(ctx: LayerContext):
    ctx.expect_inputs(5)
    _check_broadcast(ctx)
    levels = ctx.int("levels")
    if levels < 2:
        raise ctx.error(f"attribute 'levels' = {levels} must be >= 2")
    for i in range(5):
        if dtype_of(ctx.input(i)) != "scalar":
            raise ctx.error("FakeQuantize of integer tensors is not supported")
    ins = {name: ctx.tensor(i) for i, name in
           enumerate(("input", "input_low", "input_high", "output_low", "output_high"))}
    return ctx.result(ctx.emit1("ir_fake_quantize", ins, {"levels": levels}))


# --- TensorIterator (opset form) ------------------------------------------------------------------------

#: Unrolling bound: iterations x body layers (a hostile file must not make the graph explode).
MAX_UNROLLED = 50_000


def _ti_port_maps(ctx: LayerContext, tag: str) -> list:
    from .legacy_state import PortMap

    pm = ctx.layer.port_map
    out = []
    for el in pm.findall(tag) if pm is not None else []:
        def num(key: str, default, _el=el):
            v = _el.attrib.get(key)
            if v is None:
                if default is _REQUIRED:
                    raise ctx.error(f"<port_map><{tag}> lacks '{key}'")
                return default
            try:
                return int(v)
            except ValueError:
                raise ctx.error(f"<port_map><{tag}> '{key}' = {v!r} is not an integer") from None

        if el.attrib.get("purpose"):  # Loop's special body ports, handled by the Loop mapping
            continue
        out.append(PortMap(num("external_port_id", _REQUIRED), num("internal_layer_id", _REQUIRED), 0,
                           num("axis", None), num("start", 0), num("end", -1), num("stride", 1),
                           num("part_size", 1), el.line))
    return out


def _special_port(ctx: LayerContext, tag: str, purpose: str) -> int | None:
    pm = ctx.layer.port_map
    for el in pm.findall(tag) if pm is not None else []:
        if el.attrib.get("purpose") == purpose:
            try:
                return int(el.attrib["internal_layer_id"])
            except (KeyError, ValueError):
                raise ctx.error(f"<port_map><{tag} purpose='{purpose}'> needs an integer internal_layer_id") from None
    return None


_REQUIRED = object()


@layer("TensorIterator", ANY)
def _tensor_iterator(ctx: LayerContext):
    """Unrolled while loading: the body is mapped once per iteration (the count is static)."""
    return _unroll(ctx, trip_count=None, first_input=0)


@layer("Loop", ANY)
def _loop(ctx: LayerContext):
    """Unrolled while loading when the iteration count is known then: a constant trip count
    (or -1) and an execution condition that is a load-time constant in every iteration."""
    if ctx.n_inputs < 2:
        raise ctx.error("a Loop needs trip count and execution condition inputs")
    trip = ctx.input(0)
    cond = ctx.input(1)
    if not trip.is_const or not cond.is_const:
        raise ctx.error("a Loop whose trip count or initial condition is computed at run time is not supported")
    n = int(np.asarray(trip.const).reshape(-1)[0])
    if not bool(np.asarray(cond.const).reshape(-1)[0]):
        n = 0
    return _unroll(ctx, trip_count=n, first_input=2)


def _unroll(ctx: LayerContext, trip_count: int | None, first_input: int):
    from .legacy_state import _chunks, _take
    from .reader import NetReader

    lay = ctx.layer
    if lay.body is None:
        raise ctx.error(f"a {ctx.type} needs a <body>")
    ins, outs = _ti_port_maps(ctx, "input"), _ti_port_maps(ctx, "output")
    counter = _special_port(ctx, "input", "current_iteration")
    condition = _special_port(ctx, "output", "execution_condition")
    in_index = {p.id: k for k, p in enumerate(lay.inputs)}
    out_index = {p.id: k for k, p in enumerate(lay.outputs)}
    sub = NetReader(lay.body, ctx.builder.file, ctx.builder.weights)
    sub.builder = ctx.builder
    order, body_inputs = sub.order()
    by_id = {bl.id: bl for bl in lay.body.layers}
    params: dict[int, object] = {}
    for m in ins:
        if m.external not in in_index or in_index[m.external] < first_input:
            raise ctx.error(f"port map input names external port {m.external}, which is not a data input of the layer")
        bl = by_id.get(m.layer)
        if bl is None or bl.type != "Parameter":
            raise ctx.error(f"port map input {m.external} must name a body Parameter (layer {m.layer})")
        if m.layer in params:
            raise ctx.error(f"two port map inputs feed body Parameter {m.layer}")
        params[m.layer] = m
    for special, kind in ((counter, "Parameter"), (condition, "Result")):
        if special is not None and (by_id.get(special) is None or by_id[special].type != kind):
            raise ctx.error(f"special body port {special} must be a body {kind}")
    for m in outs:
        if m.external not in out_index:
            raise ctx.error(f"port map output names external port {m.external}, which is not an output of the layer")
        if by_id.get(m.layer) is None or by_id[m.layer].type != "Result":
            raise ctx.error(f"port map output {m.external} must name a body Result (layer {m.layer})")
    back = {}
    for e in lay.back_edges:
        if by_id.get(e.from_layer) is None or by_id[e.from_layer].type != "Result" or \
                by_id.get(e.to_layer) is None or by_id[e.to_layer].type != "Parameter":
            raise ctx.error(f"back edge {e.from_layer} -> {e.to_layer} must lead from a body Result to a Parameter")
        if e.to_layer not in params:
            raise ctx.error(f"back edge into body Parameter {e.to_layer}, which has no initial value")
        back[e.to_layer] = e.from_layer
    chunks: dict[int, list[int]] = {}
    for pid, m in params.items():
        if m.axis is None:
            continue
        v = ctx.input(in_index[m.external])
        if v.shape is None or any(d is None for d in v.shape):
            raise ctx.error(f"sliced input port {m.external} needs a static shape")
        m.axis = norm_axis(ctx, m.axis, len(v.shape))
        chunks[pid] = _chunks(ctx, m, v.shape[m.axis])
    counts = {len(c) for c in chunks.values()}
    if len(counts) > 1:
        raise ctx.error(f"the sliced inputs give different iteration counts {sorted(counts)}")
    if trip_count is None:
        if not counts:
            raise ctx.error("a TensorIterator needs at least one sliced input")
        n_iter = counts.pop()
    else:
        n_iter = trip_count if trip_count >= 0 else MAX_UNROLLED
        if counts:
            n_iter = min(n_iter, counts.pop())
    if n_iter * max(len(order), 1) > MAX_UNROLLED and (trip_count is None or trip_count >= 0):
        raise ctx.error(f"cannot unroll {n_iter} iterations of {len(order)} layers (limit {MAX_UNROLLED})")
    consts: dict[int, Value] = {}
    state: dict[int, Value] = {}
    collected: dict[int, list[Value]] = {m.external: [] for m in outs}
    done = 0
    for it in range(n_iter):
        if done * max(len(order), 1) > MAX_UNROLLED:
            raise ctx.error(f"the loop runs more than {done} iterations; unrolling stops at {MAX_UNROLLED} layers")
        vals: dict[tuple[int, int], Value] = {}
        res_vals: dict[int, Value] = {}
        for bl in order:
            if bl.type == "Parameter" and bl.id == counter:
                shape = tuple(d or 1 for d in (bl.outputs[0].dims or ()))
                et = sub.port_etype(bl, bl.outputs[0]) if bl.outputs[0].precision else "i64"
                vals[(bl.id, bl.outputs[0].id)] = ctx.folded(np.full(shape, it, dtype=np.int64), et)
            elif bl.type == "Parameter":
                if bl.id not in params:
                    raise ctx.error(f"body Parameter {bl.id} '{bl.name}' has no port map input")
                m = params[bl.id]
                if it > 0 and bl.id in back:
                    v = state[bl.id]
                else:
                    v = ctx.input(in_index[m.external])
                    if m.axis is not None:
                        v = _take(ctx, v, m.axis, chunks[bl.id][it], m.part)
                vals[(bl.id, bl.outputs[0].id)] = v
            elif bl.type == "Const":
                if bl.id not in consts:
                    consts[bl.id] = sub.const(bl)
                vals[(bl.id, bl.outputs[0].id)] = consts[bl.id]
            elif bl.type == "Result":
                res_vals[bl.id] = vals[body_inputs[bl.id][0][1]]
            else:
                res = sub.map_layer(bl, [vals[src] for _, src in body_inputs[bl.id]])
                for k, port in enumerate(bl.outputs):
                    vals[(bl.id, port.id)] = res[k]
        for pid, rid in back.items():
            state[pid] = res_vals[rid]
        for m in outs:
            collected[m.external].append(res_vals[m.layer])
        done += 1
        if condition is not None:
            c = res_vals[condition]
            if not c.is_const:
                raise ctx.error("the Loop's execution condition is computed at run time; only loops whose "
                                "condition is known while loading are supported")
            if not bool(np.asarray(c.const).reshape(-1)[0]):
                break
    if done == 0:
        raise ctx.error(f"the {ctx.type} runs no iteration; zero-iteration loops are not supported")
    results: list[Value | None] = [None] * len(lay.outputs)
    for m in outs:
        parts = collected[m.external]
        if m.axis is None:
            v = parts[-1]
        else:
            if abs(m.stride) != m.part:
                raise ctx.error(f"port map output {m.external}: only |stride| = part_size is supported")
            if m.stride < 0:
                parts = parts[::-1]
            rank = len(parts[0].shape or ())
            axis = norm_axis(ctx, m.axis, rank)
            kind = dtype_of(parts[0])
            t = ctx.emit1("concat", {"values": [ctx.tensor_of(p) for p in parts]}, {"axis": axis}, dtype=kind)
            v = ctx.result(t, parts[0].etype)
        results[out_index[m.external]] = v
    missing = [lay.outputs[k].id for k, r in enumerate(results) if r is None]
    if missing:
        raise ctx.error(f"output ports {missing} have no port map entry")
    return results


@layer("LRN", ANY)
def _lrn(ctx: LayerContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    n = ctx.int("size")
    if n < 1:
        raise ctx.error(f"attribute 'size' = {n} must be >= 1")
    # OpenVINO sums over [c - (size-1)/2, c + (size-1)/2] (integer halves: an even size covers
    # size-1 elements, checked against OpenVINO) but scales by alpha / size^len(axes). NNEF's
    # box(normalize = true) divides by its own window volume, so the odd window w is used and
    # alpha rescaled by (w / size)^len(axes); automatic padding centres an odd window exactly.
    w = 2 * ((n - 1) // 2) + 1
    size = [w if a in axes else 1 for a in range(r)]
    alpha = ctx.float("alpha") * (w / n) ** len(axes)
    y = ctx.emit1("local_response_normalization", {"input": ctx.tensor(0)},
                  {"size": size, "alpha": alpha, "beta": ctx.float("beta"), "bias": ctx.float("bias")})
    return ctx.result(y)


# --- gathers, scatters, one-hot ----------------------------------------------------------------------


def _index_tensor(ctx: LayerContext, i: int) -> str:
    v = ctx.input(i)
    if dtype_of(v) != "integer":
        raise ctx.error(f"input {i} must hold integer indices")
    if v.is_const:
        return ctx.tensor_of(ctx.folded(np.asarray(v.const).astype(np.int64), "i64"))
    return ctx.tensor(i)


@layer("GatherElements", ANY)
def _gather_elements(ctx: LayerContext):
    axis = norm_axis(ctx, ctx.int("axis"), ctx.in_rank(0))
    y = ctx.emit1("gather_elements", {"input": ctx.tensor(0), "indices": _index_tensor(ctx, 1)}, {"axis": axis},
                  dtype=dtype_of(ctx.input(0)))
    return ctx.result(y, ctx.in_etype(0))


@layer("GatherND", ANY)
def _gather_nd(ctx: LayerContext):
    bd = ctx.int("batch_dims", 0)
    xshape, ishape = ctx.in_shape(0), ctx.in_shape(1)
    if bd < 0:
        raise ctx.error(f"batch_dims = {bd} must not be negative")
    dt = dtype_of(ctx.input(0))
    y = ctx.emit1("gather_nd", {"input": ctx.tensor(0), "indices": _index_tensor(ctx, 1)}, {"batch_dims": bd},
                  dtype=dt)
    if ctx.version == "opset5" and bd > 0:
        # GatherND-5 flattens the batch dimensions into one
        if xshape is None or ishape is None or any(d is None for d in list(ishape[:bd])):
            raise ctx.error("GatherND-5 with batch_dims needs known batch extents")
        prod = int(np.prod(ishape[:bd]))
        y = ctx.emit1("reshape", {"input": y}, {"shape": [prod], "axis_start": 0, "axis_count": bd}, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))


@layer(("ScatterUpdate", "ScatterNDUpdate", "ScatterElementsUpdate"), ANY)
def _scatter(ctx: LayerContext):
    kind = {"ScatterUpdate": "update", "ScatterNDUpdate": "nd", "ScatterElementsUpdate": "elements"}[ctx.type]
    attrs: dict = {"kind": kind}
    if kind in ("update", "elements"):
        attrs["axis"] = norm_axis(ctx, ctx.const_ints(3, "axis")[0], ctx.in_rank(0))
    if kind in ("elements", "nd"):
        attrs["reduction"] = ctx.choice("reduction", ("none", "sum", "prod", "min", "max", "mean"), "none")
        attrs["use_init_val"] = ctx.bool("use_init_val", True)
    dt = dtype_of(ctx.input(0))
    if kind == "nd" and attrs["reduction"] != "none":
        raise ctx.error("ScatterNDUpdate with a reduction is not supported")
    y = ctx.emit1("scatter", {"data": ctx.tensor(0), "indices": _index_tensor(ctx, 1), "updates": ctx.tensor(2)},
                  attrs, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))


@layer("OneHot", ANY)
def _one_hot(ctx: LayerContext):
    depth = ctx.const_ints(1, "depth")
    if len(depth) != 1 or depth[0] < 1:
        raise ctx.error(f"depth {depth} must be one positive value")
    r = ctx.in_rank(0)
    axis = ctx.int("axis", -1)
    axis = norm_axis(ctx, axis, r + 1)
    et = ctx.in_etype(2)
    kind = nnef_dtype(et)
    y = ctx.emit1("one_hot", {"indices": _index_tensor(ctx, 0), "on_value": ctx.tensor(2),
                                 "off_value": ctx.tensor(3)}, {"depth": depth[0], "axis": axis}, dtype=kind)
    return ctx.result(y, et)


@layer("NonMaxSuppression", ANY)
def _nms(ctx: LayerContext):
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
    from .weights import element_type
    iet = element_type(ctx.str("output_type", "i64"), ctx.location)
    if ctx.version not in ("opset5", "opset9") and len(ctx.layer.outputs) == 1:
        raise ctx.error(f"NonMaxSuppression {ctx.version} (fixed-size output) is not supported")
    outs = ctx.emit("non_max_suppression", {"boxes": ctx.tensor(0), "scores": ctx.tensor(1)},
                    {"max_output_boxes_per_class": max_out, "iou_threshold": iou, "score_threshold": score,
                     "soft_nms_sigma": sigma, "box_encoding": encoding, "sort_result_descending": sort},
                    outputs=3)
    ctx.builder.graph.tensors[outs[0]].dtype = "integer"
    ctx.builder.graph.tensors[outs[2]].dtype = "integer"
    return [ctx.result(outs[0], iet, port=0), ctx.result(outs[1], port=1), ctx.result(outs[2], iet, port=2)]


# --- SSD-style detection layers (kernels shared with the legacy catalog) -----------------------------------


def _prior_sizes(ctx: LayerContext) -> tuple[list[int], list[int]]:
    out = ctx.const_ints(0, "output_size")
    img = ctx.const_ints(1, "image_size")
    if len(out) != 2 or len(img) != 2 or min(out + img) < 1:
        raise ctx.error(f"output_size {out} and image_size {img} must be two positive extents each")
    return out, img


def _fold_prior(ctx: LayerContext, op: str, attrs: dict) -> Value:
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


@layer("PriorBox", ANY)
def _prior_box(ctx: LayerContext):
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


@layer("PriorBoxClustered", ANY)
def _prior_box_clustered(ctx: LayerContext):
    attrs = {"width": ctx.floats("width"), "height": ctx.floats("height"), "clip": ctx.bool("clip", False),
             "offset": ctx.float("offset", 0.5), "variance": ctx.floats("variance", []),
             "step": ctx.float("step", 0.0), "step_w": ctx.float("step_w", 0.0), "step_h": ctx.float("step_h", 0.0)}
    return _fold_prior(ctx, "ir_prior_box_clustered", attrs)


@layer("DetectionOutput", ANY)
def _detection_output(ctx: LayerContext):
    from .legacy_ext import _detection_output as legacy_detection_output

    if not ctx.has("num_classes"):  # DetectionOutput-8 derives it from the shapes
        conf, prior = ctx.in_shape(1), ctx.in_shape(2)
        if conf is None or prior is None or conf[1] is None or prior[-1] is None:
            raise ctx.error("num_classes cannot be derived: the confidence and prior shapes must be known")
        priors = prior[-1] // 4
        if priors < 1 or conf[1] % priors:
            raise ctx.error(f"confidences ({conf[1]}) do not divide into {priors} priors")
        ctx.layer.data["num_classes"] = str(conf[1] // priors)
    return legacy_detection_output(ctx)


def _shared_with_legacy(name: str, fn_name: str) -> None:
    """Register an opset layer whose attributes and semantics equal its legacy namesake."""

    def mapped(ctx: LayerContext):
        from . import legacy_ext

        return getattr(legacy_ext, fn_name)(ctx)

    mapped.__name__ = f"_opset_{fn_name.strip('_')}"
    mapped.__qualname__ = mapped.__name__
    layer(name, ANY)(mapped)


for _name, _fn in (("RegionYolo", "_region_yolo"), ("ReorgYolo", "_reorg_yolo"), ("ROIPooling", "_roi_pooling"),
                   ("PSROIPooling", "_psroi"), ("ReverseSequence", "_reverse_sequence"),
                   ("CTCGreedyDecoder", "_ctc")):
    _shared_with_legacy(_name, _fn)


# --- If -----------------------------------------------------------------------------------------------------


def _map_branch(ctx: LayerContext, tag: str) -> dict[int, Value]:
    """Map one If branch once; returns output port id -> Value."""
    from .reader import NetReader

    lay = ctx.layer
    net = lay.branches.get(tag)
    pm = lay.branch_maps.get(tag)
    if net is None or pm is None:
        raise ctx.error(f"an If needs <{tag}> and its port map")
    in_index = {p.id: k for k, p in enumerate(lay.inputs)}
    out_ids = {p.id for p in lay.outputs}

    def entries(kind: str) -> dict[int, int]:
        out = {}
        for el in pm.findall(kind):
            try:
                ext, internal = int(el.attrib["external_port_id"]), int(el.attrib["internal_layer_id"])
            except (KeyError, ValueError):
                raise ctx.error(f"<{tag}> port map entries need integer external_port_id and "
                                "internal_layer_id") from None
            out[internal] = ext
        return out

    ins, outs = entries("input"), entries("output")
    sub = NetReader(net, ctx.builder.file, ctx.builder.weights)
    sub.builder = ctx.builder
    order, body_inputs = sub.order()
    vals: dict[tuple[int, int], Value] = {}
    result: dict[int, Value] = {}
    for bl in order:
        if bl.type == "Parameter":
            ext = ins.get(bl.id)
            if ext is None or ext not in in_index or in_index[ext] == 0:
                raise ctx.error(f"{tag} Parameter {bl.id} '{bl.name}' is not fed by a data input of the If")
            vals[(bl.id, bl.outputs[0].id)] = ctx.input(in_index[ext])
        elif bl.type == "Const":
            vals[(bl.id, bl.outputs[0].id)] = sub.const(bl)
        elif bl.type == "Result":
            ext = outs.get(bl.id)
            if ext is not None:
                if ext not in out_ids:
                    raise ctx.error(f"{tag} output names external port {ext}, which is not an output of the If")
                result[ext] = vals[body_inputs[bl.id][0][1]]
        else:
            res = sub.map_layer(bl, [vals[src] for _, src in body_inputs[bl.id]])
            for k, port in enumerate(bl.outputs):
                vals[(bl.id, port.id)] = res[k]
    return result


@layer("If", ANY)
def _if(ctx: LayerContext):
    """A load-time condition keeps one branch; a run-time one evaluates both and selects
    (NNEF's ``select``; both branches must give equal shapes)."""
    cond = ctx.input(0)
    ports = [p.id for p in ctx.layer.outputs]
    if cond.is_const:
        tag = "then_body" if bool(np.asarray(cond.const).reshape(-1)[0]) else "else_body"
        got = _map_branch(ctx, tag)
        missing = [p for p in ports if p not in got]
        if missing:
            raise ctx.error(f"the {tag} gives no value for output ports {missing}")
        return [got[p] for p in ports]
    then_v, else_v = _map_branch(ctx, "then_body"), _map_branch(ctx, "else_body")
    c = ctx.tensor(0)
    outs = []
    for p in ports:
        a, b = then_v.get(p), else_v.get(p)
        if a is None or b is None:
            raise ctx.error(f"output port {p} is missing from a branch")
        if a.shape is None or b.shape is None or tuple(a.shape) != tuple(b.shape) or \
                any(d is None for d in a.shape):
            raise ctx.error("an If with a run-time condition needs branches of equal, known shapes")
        r = len(a.shape)
        cond_t = c if r == 0 else ctx.emit1("reshape", {"input": c}, {"shape": [1] * r}, dtype="logical")
        y = ctx.emit1("select", {"condition": cond_t, "true_value": ctx.tensor_of(a), "false_value": ctx.tensor_of(b)},
                      dtype=dtype_of(a))
        outs.append(ctx.result(y, a.etype))
    return outs


@layer("ShuffleChannels", ANY)
def _shuffle_channels(ctx: LayerContext):
    shape = ctx.in_shape(0)
    if shape is None:
        raise ctx.error("the input rank is not known")
    r = len(shape)
    axis = norm_axis(ctx, ctx.int("axis", 1), r)
    group = ctx.int("group", 1)
    c = shape[axis]
    if c is None or group < 1 or c % group:
        raise ctx.error(f"the extent {c} of axis {axis} must be known and divisible by group {group}")
    if any(d is None for i, d in enumerate(shape) if i != 0):
        raise ctx.error("ShuffleChannels needs known extents (except the batch)")
    dt = dtype_of(ctx.input(0))
    split = [0 if i == 0 else d for i, d in enumerate(shape[:axis])] + [group, c // group] + list(shape[axis + 1:])
    t = ctx.emit1("reshape", {"input": ctx.tensor(0)}, {"shape": split}, dtype=dt)
    perm = list(range(r + 1))
    perm[axis], perm[axis + 1] = perm[axis + 1], perm[axis]
    t = ctx.emit1("transpose", {"input": t}, {"axes": perm}, dtype=dt)
    back = [0 if i == 0 and axis != 0 else d for i, d in enumerate(shape)]
    return ctx.result(ctx.emit1("reshape", {"input": t}, {"shape": back}, dtype=dt), ctx.in_etype(0))


@layer(("AdaptiveAvgPool", "AdaptiveMaxPool"), ANY)
def _adaptive_pool(ctx: LayerContext):
    shape = ctx.in_shape(0)
    if shape is None or len(shape) < 3:
        raise ctx.error("adaptive pooling needs an input of known rank >= 3")
    size = ctx.const_ints(1, "output_shape")
    if len(size) != len(shape) - 2 or any(n < 1 for n in size):
        raise ctx.error(f"output_shape {size} must give one positive extent per spatial axis")
    mode = "max" if ctx.type == "AdaptiveMaxPool" else "avg"
    y = ctx.emit1("adaptive_pool", {"input": ctx.tensor(0)}, {"output_size": size, "mode": mode})
    outs = [ctx.result(y)]
    if len(ctx.layer.outputs) > 1:
        outs.append(Value(unsupported=f"the indices output of {ctx.layer.where()} is not supported"))
    return outs


@layer("GroupNormalization", ANY)
def _group_normalization(ctx: LayerContext):
    shape = ctx.in_shape(0)
    if shape is None or len(shape) < 2 or shape[1] is None:
        raise ctx.error("GroupNormalization needs a known channel extent")
    g = ctx.int("num_groups")
    c = shape[1]
    if g < 1 or c % g:
        raise ctx.error(f"{c} channels do not divide into num_groups = {g}")
    r = len(shape)
    x = ctx.tensor(0)
    t = ctx.emit1("reshape", {"input": x}, {"shape": [g, -1], "axis_start": 1, "axis_count": -1})
    t = _mvn(ctx, t, [2], True, ctx.float("epsilon"), True)
    if any(d is None for d in shape[1:]):  # dynamic spatial extents: restore the shape at run time
        s_t = ctx.emit1("tensor_shape", {"input": x}, dtype="scalar", out_dtype="integer")
        t = ctx.emit1("reshape_to", {"input": t, "shape": s_t}, {"special_zero": False}, dtype="scalar")
    else:
        t = ctx.emit1("reshape", {"input": t}, {"shape": [int(d) for d in shape[1:]], "axis_start": 1,
                                                "axis_count": -1})

    def per_channel(i: int) -> str:
        v = ctx.input(i)
        if v.is_const:
            return const_value(ctx, np.asarray(v.const).reshape((1, -1) + (1,) * (r - 2)), v.etype)
        return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [0] + list(range(2, r))})

    y = binary(ctx, "add", binary(ctx, "mul", t, per_channel(1)), per_channel(2))
    return ctx.result(y)


# --- GRN, Identity, Roll, IsNaN / IsInf / IsFinite ------------------------------------------
# Exact compositions of standard operations (their formal and fast kernels run them).


@layer("GRN", ANY)
def _grn_opset(ctx: LayerContext):
    # OpenVINO opset1 GRN: x / sqrt(sum over channels (axis 1) of x^2 + bias); the bias sits
    # under the root, so this is not NNEF's l2_normalization (bias added to the root).
    ctx.expect_inputs(1)
    if ctx.in_rank(0) < 2:
        raise ctx.error("GRN needs an input of rank 2 or more (channels on axis 1)")
    bias = ctx.float("bias")
    if not bias >= 0:
        raise ctx.error(f"bias = {bias} must be a non-negative number")
    x = ctx.tensor(0)
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": [1]})
    return ctx.result(binary(ctx, "div", x, unary(ctx, "sqrt", binary(ctx, "add", s, bias))))


@fold("Identity", OPSETS)
def _fold_identity(ctx: LayerContext, arrays):
    return arrays[0]


@layer("Identity", ANY)
def _identity(ctx: LayerContext):
    # OpenVINO opset16 Identity: the input, unchanged
    ctx.expect_inputs(1)
    return ctx.result(ctx.emit1("copy", {"x": ctx.tensor(0)}, dtype=dtype_of(ctx.input(0))), ctx.in_etype(0))


@layer("Roll", ANY)
def _roll(ctx: LayerContext):
    # OpenVINO opset7 Roll: shifts per axis (a scalar shift applies to every axis; an axis named
    # more than once moves by the sum of its shifts); as slices of the static axis + concat.
    ctx.expect_inputs(3)
    shape = ctx.in_shape(0)
    rank = ctx.in_rank(0)
    shifts, axes = ctx.const_ints(1, "shift"), ctx.const_ints(2, "axes")
    if any(not -rank <= a < rank for a in axes):
        raise ctx.error(f"axes {axes} out of range for rank {rank}")
    axes = [a % rank for a in axes]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ctx.error(f"{len(shifts)} shifts for {len(axes)} axes")
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes, strict=True):
        total[a] = total.get(a, 0) + s
    x0 = x = ctx.tensor(0)
    dt = dtype_of(ctx.input(0))
    for a, s in total.items():
        n = shape[a]
        if n is None:
            raise ctx.error(f"Roll needs a known extent on axis {a}")
        s %= n
        if s:
            tail = ctx.emit1("slice", {"input": x}, {"axes": [a], "begin": [n - s], "end": [n]}, dtype=dt)
            head = ctx.emit1("slice", {"input": x}, {"axes": [a], "begin": [0], "end": [n - s]}, dtype=dt)
            x = ctx.emit1("concat", {"values": [tail, head]}, {"axis": a}, dtype=dt)
    if x == x0:
        x = ctx.emit1("copy", {"x": x}, dtype=dt)
    return ctx.result(x, ctx.in_etype(0))


@layer(("IsNaN", "IsInf", "IsFinite"), ANY)
def _is_class(ctx: LayerContext):
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


@fold("Eye", OPSETS)
def _fold_eye(ctx: LayerContext, arrays):
    # OpenVINO opset9 Eye: ones on the diagonal shifted by diagonal_index, broadcast to batch_shape
    rows, cols, k = (int(np.asarray(a).reshape(-1)[0]) for a in arrays[:3])
    batch = [int(d) for d in np.asarray(arrays[3]).reshape(-1)] if len(arrays) > 3 else []
    if rows < 0 or cols < 0 or any(d < 0 for d in batch):
        raise ctx.error(f"Eye extents must not be negative (rows {rows}, columns {cols}, batch {batch})")
    check_items(ctx, batch + [rows, cols])
    np_type = _ETYPE_NUMPY.get(ctx.out_etype(0))
    if np_type is None:
        raise ctx.error(f"Eye of output type {ctx.out_etype(0)} is not supported")
    return np.broadcast_to(np.eye(rows, cols, k, dtype=np_type), (*batch, rows, cols)).copy()


_ETYPE_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
                "u8": np.uint8, "boolean": np.bool_}


@layer("Eye", ANY)
def _eye(ctx: LayerContext):
    raise ctx.error("Eye needs its rows, columns, diagonal index and batch shape known while loading")


@layer(("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"), ANY)
def _bitwise(ctx: LayerContext):
    # OpenVINO opset13 bitwise operations: on booleans they are the logical ones; on integers
    # no NNEF operation computes them.
    if any(ctx.in_etype(i) != "boolean" for i in range(len(ctx.values))):
        raise ctx.error(f"{ctx.type} is supported on boolean tensors only (found "
                        f"{', '.join(ctx.in_etype(i) for i in range(len(ctx.values)))})")
    if ctx.type == "BitwiseNot":
        ctx.expect_inputs(1)
        return ctx.result(ctx.emit1("not", {"x": ctx.tensor(0)}, out_dtype="logical"))
    ctx.expect_inputs(2)
    _check_broadcast(ctx)
    a, b = aligned(ctx, [0, 1])
    if ctx.type == "BitwiseXor":  # (a or b) and not (a and b)
        both = ctx.emit1("not", {"x": binary(ctx, "and", a, b, "logical")}, out_dtype="logical")
        return ctx.result(binary(ctx, "and", binary(ctx, "or", a, b, "logical"), both, "logical"))
    return ctx.result(binary(ctx, "and" if ctx.type == "BitwiseAnd" else "or", a, b, "logical"))


@layer(("SpaceToBatch", "BatchToSpace"), ANY)
def _space_batch(ctx: LayerContext):
    # OpenVINO opset2 SpaceToBatch / BatchToSpace, as their specifications define them: pad,
    # reshape to [N, D1/B1, B1, ...], move the blocks in front of the batch, reshape (and the
    # reverse, then crop).  Static shapes and load-time block/pad/crop vectors only.
    ctx.expect_inputs(4)
    shape = ctx.in_shape(0)
    if shape is None or any(d is None for d in shape):
        raise ctx.error(f"{ctx.type} needs a static input shape")
    r = len(shape)
    blocks, lo, hi = (ctx.const_ints(i, what) for i, what in ((1, "block_shape"), (2, "begin"), (3, "end")))
    if len(blocks) != r or len(lo) != r or len(hi) != r or blocks[0] != 1 or min(blocks) < 1 \
            or min(lo) < 0 or min(hi) < 0:
        raise ctx.error(f"block_shape {blocks}, begin {lo} and end {hi} must have {r} items, block_shape[0] = 1, "
                        "no negative values")
    x, dt = ctx.tensor(0), dtype_of(ctx.input(0))
    n, dims, bs = shape[0], list(shape[1:]), blocks[1:]
    if ctx.type == "SpaceToBatch":
        padded = [d + a + b for d, a, b in zip(dims, lo[1:], hi[1:], strict=True)]
        if lo[0] or hi[0] or any(p % b for p, b in zip(padded, bs, strict=True)):
            raise ctx.error(f"padded extents {padded} must divide by block_shape {blocks} (and the batch is not padded)")
        if any(lo + hi):
            if dt != "scalar":
                raise ctx.error("padding a non-float tensor is not supported")
            x = ctx.emit1("pad", {"input": x}, {"padding": list(zip(lo, hi, strict=True))})
        split = [n] + [v for p, b in zip(padded, bs, strict=True) for v in (p // b, b)]
        x = ctx.emit1("reshape", {"input": x}, {"shape": split}, dtype=dt)
        k = len(bs)
        x = ctx.emit1("transpose", {"input": x}, {"axes": [2 + 2 * i for i in range(k)] + [0] +
                                                   [1 + 2 * i for i in range(k)]}, dtype=dt)
        out = [n * int(np.prod(bs))] + [p // b for p, b in zip(padded, bs, strict=True)]
        return ctx.result(ctx.emit1("reshape", {"input": x}, {"shape": out}, dtype=dt))
    prod = int(np.prod(bs))
    if n % prod:
        raise ctx.error(f"batch {n} does not divide by the block volume {prod}")
    k = len(bs)
    x = ctx.emit1("reshape", {"input": x}, {"shape": bs + [n // prod] + dims}, dtype=dt)
    axes = [k] + [v for i in range(k) for v in (k + 1 + i, i)]
    x = ctx.emit1("transpose", {"input": x}, {"axes": axes}, dtype=dt)
    full = [d * b for d, b in zip(dims, bs, strict=True)]
    x = ctx.emit1("reshape", {"input": x}, {"shape": [n // prod] + full}, dtype=dt)
    if lo[0] or hi[0] or any(a + b > f for a, b, f in zip(lo[1:], hi[1:], full, strict=True)):
        raise ctx.error(f"crops {lo}/{hi} do not fit the shape {[n // prod] + full} (and the batch is not cropped)")
    if any(lo + hi):
        x = ctx.emit1("slice", {"input": x}, {"axes": list(range(1, r)), "begin": lo[1:],
                                             "end": [f - b for f, b in zip(full, hi[1:], strict=True)]}, dtype=dt)
    return ctx.result(x)
