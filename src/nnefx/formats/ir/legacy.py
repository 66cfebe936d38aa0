"""Mappings of the legacy IR layer catalog (seed 003; IR versions <= 9) to nnefx Operations.

Each ``@legacy_layer(...)`` function reads the layer's ``<data>`` attributes with
the catalog's names and defaults, validates their ranges (an out-of-range value is an
:class:`~nnefx.diagnostics.NNEFXError` that names the layer id/name, the attribute and the
value), and emits NNEF standard operations wherever they mean exactly the same thing, or the
``ir_*`` extension operations of :mod:`nnefx.ops.ir` where no NNEF operation does.

Two conventions differ between the formats and are bridged here rather than in kernels:

* IR broadcasts numpy-style (dimensions aligned from the *last* one); NNEF aligns from the
  first.  Binary layers therefore prepend singleton axes to the lower-rank operand first.
* Legacy blobs are flat (``<weights>``/``<biases>``); their layouts are those the catalog gives
  (GOIYX for convolutions, OI for fully connected) and are reshaped to NNEF's.

This module holds the shared helpers and the element-wise / shape layers; the other families
live in ``legacy_nn`` (convolution, pooling, normalization, recurrent cells), ``legacy_ext``
(layers mapped to ``ir_*`` extensions, StridedSlice) and ``legacy_state`` (Memory and
TensorIterator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .mapping import LayerContext, Value, fold, layer

LEGACY = ("legacy",)

#: Largest result (in items) a legacy layer may declare or compute.  Attributes such as
#: ``tiles``, pads, factors or ``keep_top_k`` size results directly; a hostile value must be an
#: error at load time, not an allocation at run time.
MAX_RESULT_ITEMS = 1 << 31


def legacy_layer(types):
    """``@legacy_layer(types)`` plus a bound on the size of every result."""

    def deco(fn):
        def mapped(ctx: LayerContext):
            res = fn(ctx)
            for k, v in enumerate(res if isinstance(res, list) else [res]):
                shape = v.shape if isinstance(v, Value) else None
                if shape and all(d is not None for d in shape):
                    items = 1
                    for d in shape:
                        items *= int(d)
                    if items > MAX_RESULT_ITEMS:
                        raise ctx.error(f"result {k} would hold {items} items (shape {list(shape)}); the limit "
                                        f"is {MAX_RESULT_ITEMS}")
            return res

        mapped.__name__ = fn.__name__
        mapped.__doc__ = fn.__doc__
        layer(types, versions=LEGACY)(mapped)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------
# helpers shared by the legacy modules
# ---------------------------------------------------------------------------------------------

def bad(ctx: LayerContext, key: str, value: object, why: str):
    """An attribute error that names the layer, the attribute and the offending value."""
    return ctx.error(f"attribute '{key}' = {value!r} {why}")


def check(ctx: LayerContext, cond: bool, key: str, value: object, why: str) -> None:
    if not cond:
        raise bad(ctx, key, value, why)


_MISSING = object()


def fnum(ctx: LayerContext, key: str, default: object = _MISSING) -> float:
    """A finite number attribute (``nan``/``inf`` are refused: they would poison sizes and loops)."""
    v = ctx.float(key) if default is _MISSING else ctx.float(key, default)
    if not math.isfinite(v):
        raise bad(ctx, key, ctx.str(key), "must be a finite number")
    return v


def fnums(ctx: LayerContext, key: str, default: object = _MISSING) -> list[float]:
    v = ctx.floats(key) if default is _MISSING else ctx.floats(key, default)
    if not all(math.isfinite(x) for x in v):
        raise bad(ctx, key, ctx.str(key), "must hold finite numbers")
    return v


def shape_of(ctx: LayerContext, i: int) -> tuple:
    """The fully known shape of input ``i`` (legacy nets are static)."""
    s = ctx.in_shape(i)
    if s is None or any(d is None for d in s):
        raise ctx.error(f"the shape of input {i} must be known (legacy layers need static shapes)")
    return tuple(int(d) for d in s)


def axis_of(ctx: LayerContext, key: str, rank: int, default: int | None = None) -> int:
    a = ctx.int(key) if default is None else ctx.int(key, default)
    check(ctx, -rank <= a < rank, key, a, f"is outside [-{rank}, {rank})")
    return a % rank


def safe_axis_value(ctx: LayerContext, axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} = {axis} is outside [-{rank}, {rank})")
    return axis % rank


def x_of(ctx: LayerContext, i: int = 0) -> str:
    return ctx.tensor(i)


def const_tensor(ctx: LayerContext, array: np.ndarray, hint: str) -> str:
    """A graph tensor holding ``array`` (float32 unless integer)."""
    arr = np.asarray(array)
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float32)
    v = ctx.folded(arr)
    v.label = f"{ctx.name}_{hint}"
    return ctx.tensor_of(v, f"{ctx.name}_{hint}")


def channel_param(ctx: LayerContext, array: np.ndarray, channels: int, key: str, rank: int) -> str:
    """A per-channel parameter ([C] or a single shared value) as a [1, C] (or [1]) tensor,
    which NNEF broadcasting (from the first dimension) applies along dimension 1."""
    a = np.asarray(array, dtype=np.float32).reshape(-1)
    if a.size == 1:
        return const_tensor(ctx, a.reshape(()) if rank else a, key)
    if a.size != channels:
        raise ctx.error(f"<{key}> holds {a.size} values; expected 1 or {channels} (one per channel)")
    return const_tensor(ctx, a.reshape(1, channels), key)


def unary(ctx: LayerContext, op: str, x: str, **attribs) -> str:
    return ctx.emit1(op, {"x": x}, attribs)


def binary(ctx: LayerContext, op: str, a: str | float, b: str | float) -> str:
    return ctx.emit1(op, {"x": a, "y": b})


def numpy_align(ctx: LayerContext, values: Sequence[Value]) -> list[str]:
    """Graph tensors for ``values`` with equal ranks, singleton axes prepended so that NNEF's
    broadcasting (aligned from the front) equals numpy's (aligned from the back)."""
    shapes = [v.shape for v in values]
    if any(s is None for s in shapes):
        raise ctx.error("input shapes must be known to broadcast them")
    rank = max(len(s) for s in shapes)
    out = []
    for k, (v, s) in enumerate(zip(values, shapes, strict=True)):
        for d in range(rank):
            dims = {t[len(t) - rank + d] for t in shapes if len(t) - rank + d >= 0}
            dims.discard(1)
            dims.discard(None)
            if len(dims) > 1:
                raise ctx.error(f"input shapes {', '.join(str(tuple(t)) for t in shapes)} do not broadcast")
        missing = rank - len(s)
        if missing == 0:
            out.append(ctx.tensor_of(v, f"{ctx.name}_in{k}"))
        elif v.is_const:
            c = np.asarray(v.const).reshape((1,) * missing + tuple(s))
            out.append(const_tensor(ctx, c, f"in{k}"))
        else:
            t = ctx.tensor_of(v, f"{ctx.name}_in{k}")
            out.append(ctx.emit1("unsqueeze", {"input": t}, {"axes": list(range(missing))}, dtype="scalar"))
    return out


def reshape(ctx: LayerContext, x: str, shape: Sequence[int], dtype: str = "scalar") -> str:
    return ctx.emit1("reshape", {"input": x}, {"shape": [int(d) for d in shape]}, dtype=dtype)


def to_float(ctx: LayerContext, cond: str) -> str:
    """A logical tensor as 1.0 / 0.0 (legacy layers compute in floating point)."""
    return ctx.emit1("select", {"condition": cond, "true_value": 1.0, "false_value": 0.0}, dtype="scalar")


# ---------------------------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------------------------

ACTIVATIONS = ("sigmoid", "logistic", "tanh", "elu", "relu", "relu6", "exp", "not", "abs", "softplus", "clamp",
               "leaky_relu", "swish", "hsigmoid", "log", "sqrt", "floor", "ceil", "neg", "sign")


def activation(ctx: LayerContext, kind: str, x: str) -> str:
    if kind in ("sigmoid", "logistic"):
        return unary(ctx, "sigmoid", x)
    if kind in ("tanh", "exp", "abs", "softplus", "log", "floor", "ceil", "neg", "sign"):
        return unary(ctx, kind, x)
    if kind == "sqrt":
        return unary(ctx, "sqrt", x)
    if kind == "elu":
        alpha = fnum(ctx, "alpha", 1.0)
        return unary(ctx, "elu", x, alpha=alpha)
    if kind in ("relu", "leaky_relu"):
        slope = fnum(ctx, "negative_slope", fnum(ctx, "alpha", 0.0) if ctx.has("alpha") else 0.0)
        return unary(ctx, "relu", x) if slope == 0.0 else unary(ctx, "leaky_relu", x, alpha=slope)
    if kind == "relu6":
        return ctx.emit1("clamp", {"x": x, "a": 0.0, "b": 6.0})
    if kind == "clamp":
        lo, hi = fnum(ctx, "min"), fnum(ctx, "max")
        check(ctx, lo <= hi, "min", lo, f"exceeds max {hi}")
        return ctx.emit1("clamp", {"x": x, "a": lo, "b": hi})
    if kind == "not":
        return to_float(ctx, ctx.emit1("eq", {"x": x, "y": 0.0}, out_dtype="logical"))
    if kind == "swish":
        beta = fnum(ctx, "beta", 1.0)
        s = unary(ctx, "sigmoid", binary(ctx, "mul", x, beta) if beta != 1.0 else x)
        return binary(ctx, "mul", x, s)
    if kind == "hsigmoid":
        t = ctx.emit1("clamp", {"x": binary(ctx, "add", x, 3.0), "a": 0.0, "b": 6.0})
        return binary(ctx, "div", t, 6.0)
    raise bad(ctx, "type", kind, f"is not a supported activation ({', '.join(ACTIVATIONS)})")


@legacy_layer("Activation")
def _activation(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    kind = ctx.str("type").lower()
    return ctx.result(activation(ctx, kind, x_of(ctx)))


@legacy_layer("ReLU")
def _relu(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    slope = fnum(ctx, "negative_slope", 0.0)
    x = x_of(ctx)
    return ctx.result(unary(ctx, "relu", x) if slope == 0.0 else unary(ctx, "leaky_relu", x, alpha=slope))


@legacy_layer("Clamp")
def _clamp(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    lo, hi = fnum(ctx, "min"), fnum(ctx, "max")
    check(ctx, lo <= hi, "min", lo, f"exceeds max {hi}")
    # The catalog's formula is cut off after "min_value if input_i"; the evident intent is
    # min_value below min, input in between, max_value above max.
    return ctx.result(ctx.emit1("clamp", {"x": x_of(ctx), "a": lo, "b": hi}))


@legacy_layer("SoftMax")
def _softmax(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    rank = len(shape_of(ctx, 0))
    axis = axis_of(ctx, "axis", rank, 1)
    return ctx.result(ctx.emit1("softmax", {"x": x_of(ctx)}, {"axes": [axis]}))


@legacy_layer("Power")
def _power(ctx: LayerContext) -> Value | list[Value]:
    if ctx.layer.body is not None:
        # The catalog's TensorIterator example is written `type="Power"` (a typo): a layer with
        # a <body> and a <port_map> is a TensorIterator whatever its type says.
        from .legacy_state import tensor_iterator

        return tensor_iterator(ctx)
    ctx.expect_inputs(1)
    power, scale, shift = fnum(ctx, "power", 1.0), fnum(ctx, "scale", 1.0), fnum(ctx, "shift", 0.0)
    y = x_of(ctx)
    if scale != 1.0:
        y = binary(ctx, "mul", y, scale)
    if shift != 0.0:
        y = binary(ctx, "add", y, shift)
    if power != 1.0:
        y = binary(ctx, "pow", y, power)
    if y == x_of(ctx):
        y = ctx.emit1("copy", {"x": y}, dtype="scalar")
    return ctx.result(y)


@legacy_layer("PReLU")
def _prelu(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape = shape_of(ctx, 0)
    shared = ctx.bool("channel_shared", False)
    w = ctx.const(1, "slopes") if ctx.n_inputs == 2 else ctx.blob("weights")
    w = np.asarray(w, dtype=np.float32).reshape(-1)
    if shared and w.size != 1:
        raise ctx.error(f"channel_shared = 1 needs one slope, the weights hold {w.size}")
    alpha = channel_param(ctx, w, shape[1] if len(shape) > 1 else 1, "weights", len(shape))
    return ctx.result(ctx.emit1("prelu", {"x": x_of(ctx), "alpha": alpha}))


@legacy_layer("ScaleShift")
def _scale_shift(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    c = shape[1] if len(shape) > 1 else shape[0]
    y = x_of(ctx)
    w = ctx.blob("weights", required=False)
    if w is not None:
        y = binary(ctx, "mul", y, channel_param(ctx, w, c, "weights", len(shape)))
    b = ctx.blob("biases", required=False)
    if b is not None:
        y = binary(ctx, "add", y, channel_param(ctx, b, c, "biases", len(shape)))
    if w is None and b is None:
        raise ctx.error("a ScaleShift needs <weights> and/or <biases>")
    return ctx.result(y)


# ---------------------------------------------------------------------------------------------
# Eltwise (numpy broadcasting)
# ---------------------------------------------------------------------------------------------

ELTWISE = ("sum", "sub", "mul", "prod", "div", "max", "min", "squared_diff", "pow", "floor_mod", "equal",
           "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
           "logical_xor")
_ARITH = {"sum": "add", "sub": "sub", "mul": "mul", "prod": "mul", "div": "div", "max": "max", "min": "min",
          "pow": "pow"}
_COMPARE = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
            "greater_equal": "ge"}


def eltwise_pair(ctx: LayerContext, op: str, a: str, b: str) -> str:
    if op in _ARITH:
        return binary(ctx, _ARITH[op], a, b)
    if op == "squared_diff":
        d = binary(ctx, "sub", a, b)
        return binary(ctx, "mul", d, d)
    if op == "floor_mod":
        q = unary(ctx, "floor", binary(ctx, "div", a, b))
        return binary(ctx, "sub", a, binary(ctx, "mul", q, b))
    if op in _COMPARE:
        return to_float(ctx, ctx.emit1(_COMPARE[op], {"x": a, "y": b}, out_dtype="logical"))
    la = ctx.emit1("ne", {"x": a, "y": 0.0}, out_dtype="logical")
    lb = ctx.emit1("ne", {"x": b, "y": 0.0}, out_dtype="logical")
    if op == "logical_and":
        return to_float(ctx, ctx.emit1("and", {"x": la, "y": lb}, out_dtype="logical"))
    if op == "logical_or":
        return to_float(ctx, ctx.emit1("or", {"x": la, "y": lb}, out_dtype="logical"))
    return to_float(ctx, ctx.emit1("ne", {"x": to_float(ctx, la), "y": to_float(ctx, lb)}, out_dtype="logical"))


@legacy_layer("Eltwise")
def _eltwise(ctx: LayerContext) -> Value:
    if ctx.n_inputs < 2:
        raise ctx.error(f"expects at least 2 inputs, has {ctx.n_inputs}")
    op = ctx.str("operation", "sum").lower()
    check(ctx, op in ELTWISE, "operation", op, f"is not one of {', '.join(ELTWISE)}")
    coeff = fnums(ctx, "coeff", [])
    if coeff:
        check(ctx, op == "sum", "coeff", coeff, "is only allowed with operation = sum")
        check(ctx, len(coeff) == ctx.n_inputs, "coeff", coeff, f"needs one value per input ({ctx.n_inputs})")
    if op not in ("sum", "mul", "prod", "max", "min") and ctx.n_inputs != 2:
        raise ctx.error(f"operation '{op}' takes exactly 2 inputs, has {ctx.n_inputs}")
    xs = numpy_align(ctx, ctx.values)
    if coeff:
        xs = [x if c == 1.0 else binary(ctx, "mul", x, c) for x, c in zip(xs, coeff, strict=True)]
    y = xs[0]
    for x in xs[1:]:
        y = eltwise_pair(ctx, op, y, x)
    return ctx.result(y)


# ---------------------------------------------------------------------------------------------
# shape layers
# ---------------------------------------------------------------------------------------------

@legacy_layer("Concat")
def _concat(ctx: LayerContext) -> Value:
    if ctx.n_inputs < 1:
        raise ctx.error("expects at least one input")
    rank = len(shape_of(ctx, 0))
    axis = axis_of(ctx, "axis", rank, 1)
    xs = [ctx.tensor(i) for i in range(ctx.n_inputs)]
    return ctx.result(ctx.emit1("concat", {"values": xs}, {"axis": axis}, dtype="scalar", result_name="value"))


@fold("Concat", versions=LEGACY)
def _concat_fold(ctx: LayerContext, arrays: list):
    rank = arrays[0].ndim
    return np.concatenate(arrays, axis=axis_of(ctx, "axis", rank, 1))


@legacy_layer("Permute")
def _permute(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    rank = len(shape_of(ctx, 0))
    order = ctx.ints("order")
    check(ctx, sorted(order) == list(range(rank)), "order", order, f"is not a permutation of 0..{rank - 1}")
    return ctx.result(ctx.emit1("transpose", {"input": x_of(ctx)}, {"axes": order}, dtype="scalar"))


@legacy_layer("Flatten")
def _flatten(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    rank = len(shape)
    a = axis_of(ctx, "axis", rank, 0)
    e = axis_of(ctx, "end_axis", rank, -1)
    check(ctx, a <= e, "end_axis", ctx.int("end_axis", -1), f"precedes axis {a}")
    target = list(shape[:a]) + [int(np.prod(shape[a:e + 1]))] + list(shape[e + 1:])
    return ctx.result(reshape(ctx, x_of(ctx), target))


def resolve_reshape(ctx: LayerContext, shape: tuple, dims: list[int], key: str) -> list[int]:
    """Target shape of a legacy Reshape: 0 copies the input extent, -1 is inferred."""
    check(ctx, sum(1 for d in dims if d == -1) <= 1, key, dims, "has more than one -1")
    check(ctx, all(d >= -1 for d in dims), key, dims, "has items below -1")
    out = []
    for i, d in enumerate(dims):
        if d == 0:
            check(ctx, i < len(shape), key, dims, f"copies dimension {i}, which the input lacks")
            out.append(shape[i])
        else:
            out.append(d)
    vol = int(np.prod(shape))
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        check(ctx, known > 0 and vol % known == 0, key, dims, f"cannot hold {vol} items")
        out[out.index(-1)] = vol // known
    check(ctx, int(np.prod(out)) == vol, key, dims, f"has volume {int(np.prod(out))}, the input {vol}")
    return out


@legacy_layer("Reshape")
def _reshape(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape = shape_of(ctx, 0)
    if ctx.n_inputs == 2:
        dims, key = ctx.const_ints(1, "target shape"), "input 1"
    elif ctx.has("dim"):
        dims, key = ctx.ints("dim"), "dim"
    else:
        dims, key = list(ctx.out_dims() or ()), "output dims"
        if not dims:
            raise ctx.error("a Reshape needs a 'dim' attribute, a shape input or output dims")
    target = resolve_reshape(ctx, shape, dims, key)
    if ctx.is_const(0):
        return ctx.folded(np.asarray(ctx.const(0)).reshape(target))
    return ctx.result(reshape(ctx, x_of(ctx), target))


@legacy_layer("Tile")
def _tile(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    rank = len(shape_of(ctx, 0))
    axis = axis_of(ctx, "axis", rank)
    tiles = ctx.int("tiles")
    check(ctx, tiles >= 1, "tiles", tiles, "must be >= 1")
    reps = [1] * rank
    reps[axis] = tiles
    return ctx.result(ctx.emit1("tile", {"input": x_of(ctx)}, {"repeats": reps}, dtype="scalar"))


def split_sizes(ctx: LayerContext, extent: int, axis: int) -> list[int]:
    """Piece sizes of Split/Slice: from slice_point, else the output ports, else equal parts."""
    n_out = len(ctx.layer.outputs)
    if ctx.has("slice_point"):
        pts = ctx.ints("slice_point")
        check(ctx, all(0 < p < extent for p in pts) and pts == sorted(set(pts)), "slice_point", pts,
              f"must increase strictly within (0, {extent})")
        check(ctx, len(pts) + 1 == n_out, "slice_point", pts, f"gives {len(pts) + 1} pieces for {n_out} outputs")
        edges = [0] + pts + [extent]
        return [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    dims = [p.dims for p in ctx.layer.outputs]
    if all(d is not None and len(d) > axis and d[axis] is not None for d in dims):
        sizes = [int(d[axis]) for d in dims]
        if sum(sizes) != extent:
            raise ctx.error(f"output sizes {sizes} along axis {axis} do not add up to the input extent {extent}")
        return sizes
    parts = ctx.int("num_split", n_out)
    check(ctx, parts >= 1 and extent % parts == 0, "num_split", parts, f"does not divide the extent {extent}")
    return [extent // parts] * parts


def emit_split(ctx: LayerContext, default_axis: int) -> list[Value]:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    axis = axis_of(ctx, "axis", len(shape), default_axis)
    sizes = split_sizes(ctx, shape[axis], axis)
    if any(s <= 0 for s in sizes):
        raise ctx.error(f"piece sizes {sizes} must be positive")
    outs = ctx.emit("split", {"value": x_of(ctx)}, {"axis": axis, "ratios": sizes}, outputs=[len(sizes)],
                    dtype="scalar")
    return [ctx.result(t, port=i) for i, t in enumerate(outs)]


@legacy_layer("Split")
def _split(ctx: LayerContext) -> list[Value]:
    return emit_split(ctx, 1)


@legacy_layer("Slice")
def _slice(ctx: LayerContext) -> list[Value]:
    # The legacy Slice is a split (the catalog: "splits the input blob into several pieces").
    return emit_split(ctx, 1)


@legacy_layer("Crop")
def _crop(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape = shape_of(ctx, 0)
    rank = len(shape)
    axes = ctx.ints("axis")
    for a in axes:
        check(ctx, -rank <= a < rank, "axis", axes, f"has an item outside [-{rank}, {rank})")
    axes = [a % rank for a in axes]
    check(ctx, len(set(axes)) == len(axes), "axis", axes, "repeats an axis")
    if ctx.has("crop_begin") or ctx.has("crop_end"):                 # type 3
        cb, ce = ctx.ints("crop_begin"), ctx.ints("crop_end")
        check(ctx, len(cb) == len(axes), "crop_begin", cb, f"needs {len(axes)} items")
        check(ctx, len(ce) == len(axes), "crop_end", ce, f"needs {len(axes)} items")
        begin = cb
        end = [shape[a] - e for a, e in zip(axes, ce, strict=True)]
        for a, b, e in zip(axes, cb, ce, strict=True):
            check(ctx, b >= 0 and e >= 0 and b + e < shape[a], "crop_begin", cb,
                  f"with crop_end {ce} leaves nothing of extent {shape[a]}")
    else:
        offset = ctx.ints("offset")
        check(ctx, len(offset) == len(axes), "offset", offset, f"needs {len(axes)} items")
        if ctx.n_inputs == 2:                                          # type 1
            ref = shape_of(ctx, 1)
            check(ctx, len(ref) == rank, "axis", axes, "needs a second input of the same rank")
            dims = [ref[a] for a in axes]
        else:                                                           # type 2
            dims = ctx.ints("dim")
            check(ctx, len(dims) == len(axes), "dim", dims, f"needs {len(axes)} items")
        begin = offset
        end = [o + d for o, d in zip(offset, dims, strict=True)]
        for a, o, d in zip(axes, offset, dims, strict=True):
            check(ctx, o >= 0 and d > 0 and o + d <= shape[a], "offset", offset,
                  f"with size {d} runs past extent {shape[a]} of axis {a}")
    y = ctx.emit1("slice", {"input": x_of(ctx)}, {"axes": axes, "begin": begin, "end": end}, dtype="scalar")
    return ctx.result(y)


@legacy_layer("Pad")
def _pad(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    pb, pe = ctx.ints("pads_begin"), ctx.ints("pads_end")
    check(ctx, len(pb) == len(shape), "pads_begin", pb, f"needs {len(shape)} items")
    check(ctx, len(pe) == len(shape), "pads_end", pe, f"needs {len(shape)} items")
    check(ctx, all(p >= 0 for p in pb), "pads_begin", pb, "must be >= 0")
    check(ctx, all(p >= 0 for p in pe), "pads_end", pe, "must be >= 0")
    mode = ctx.choice("pad_mode", ("constant", "edge", "reflect", "symmetric"), "constant")
    border = {"constant": "constant", "edge": "replicate", "reflect": "reflect", "symmetric": "reflect-even"}[mode]
    for b, e, n in zip(pb, pe, shape, strict=True):
        if mode == "reflect":
            check(ctx, b < n and e < n, "pads_begin", pb, f"reflect padding needs pads < extent {n}")
        if mode == "symmetric":
            check(ctx, b <= n and e <= n, "pads_begin", pb, f"symmetric padding needs pads <= extent {n}")
    attrs = {"padding": [(int(b), int(e)) for b, e in zip(pb, pe, strict=True)], "border": border}
    if mode == "constant":
        attrs["value"] = fnum(ctx, "pad_value", 0.0)
    return ctx.result(ctx.emit1("pad", {"input": x_of(ctx)}, attrs))


@legacy_layer("ShuffleChannels")
def _shuffle(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    axis = axis_of(ctx, "axis", len(shape), 1)
    group = ctx.int("group", 1)
    c = shape[axis]
    check(ctx, group >= 1 and c % group == 0, "group", group, f"must divide the extent {c} of axis {axis}")
    outer, inner = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1:]))
    t = reshape(ctx, x_of(ctx), [outer, group, c // group, inner])
    t = ctx.emit1("transpose", {"input": t}, {"axes": [0, 2, 1, 3]}, dtype="scalar")
    return ctx.result(reshape(ctx, t, shape))


@legacy_layer("DepthToSpace")
def _depth_to_space(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    k = len(shape) - 2
    if k < 1:
        raise ctx.error(f"input must have rank >= 3, has {len(shape)}")
    bs = ctx.int("block_size")
    c = shape[1]
    check(ctx, bs >= 1 and c % bs ** k == 0, "block_size", bs, f"^{k} must divide the {c} channels")
    mode = ctx.choice("mode", ("blocks_first", "depth_first"), "blocks_first")
    n, spatial, c2 = shape[0], list(shape[2:]), c // bs ** k
    # The catalog's first reshape lists [N, bs, ..., bs, D1*bs, ...]: the evident intent
    # (and the ONNX definition it cites) is [N, bs, ..., bs, C / bs^K, D1, ..., DK].
    if mode == "blocks_first":
        t = reshape(ctx, x_of(ctx), [n] + [bs] * k + [c2] + spatial)
        perm = [0, k + 1]
        for i in range(k):
            perm += [k + 2 + i, 1 + i]
    else:
        t = reshape(ctx, x_of(ctx), [n, c2] + [bs] * k + spatial)
        perm = [0, 1]
        for i in range(k):
            perm += [k + 2 + i, 2 + i]
    t = ctx.emit1("transpose", {"input": t}, {"axes": perm}, dtype="scalar")
    return ctx.result(reshape(ctx, t, [n, c2] + [d * bs for d in spatial]))


@legacy_layer("Shape")
def _shape(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    return ctx.folded(np.asarray(shape_of(ctx, 0), dtype=np.int64))


@legacy_layer("Fill")
def _fill(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2)
    dims = ctx.const_ints(0, "output shape")
    check(ctx, all(d >= 1 for d in dims), "input 0", dims, "must hold positive extents")
    check(ctx, math.prod(dims) <= MAX_RESULT_ITEMS, "input 0", dims, "asks for too many items")
    vshape = ctx.in_shape(1) or ()
    if int(np.prod(vshape)) != 1:
        raise ctx.error(f"input 1 (fill value) must hold one value, has shape {tuple(vshape)}")
    if ctx.is_const(1):
        return ctx.folded(np.full(dims, np.asarray(ctx.const(1)).reshape(-1)[0], dtype=np.float32))
    v = reshape(ctx, ctx.tensor(1), [1] * len(dims))
    return ctx.result(ctx.emit1("tile", {"input": v}, {"repeats": dims}, dtype="scalar"))


@legacy_layer("Range")
def _range(ctx: LayerContext) -> Value:
    ctx.expect_inputs(3)
    start, limit, delta = (float(np.asarray(ctx.const(i, w)).reshape(-1)[0])
                           for i, w in enumerate(("start", "limit", "delta")))
    if delta == 0:
        raise ctx.error("input 2 (delta) must not be 0")
    count = max(int(np.ceil((limit - start) / delta)), 0)
    if count > 1 << 26:
        raise ctx.error(f"Range would produce {count} items")
    dtype = np.float32 if ctx.out_etype(0) in ("f32", "f16", "f64") else np.int64
    return ctx.folded((start + delta * np.arange(count)).astype(dtype))


@legacy_layer("Gather")
def _gather(ctx: LayerContext) -> Value:
    ctx.expect_inputs(2)
    # The catalog: input 0 holds the indices, input 1 the data; the output shape is
    # data.shape[:axis] + indices.shape + data.shape[axis+1:].
    dshape = shape_of(ctx, 1)
    axis = axis_of(ctx, "axis", len(dshape), 0)
    n = dshape[axis]
    if ctx.is_const(0):
        idx = np.asarray(ctx.const(0))
        if idx.dtype.kind == "f" and not np.all(np.floor(idx) == idx):
            raise ctx.error("input 0 (indices) must hold whole numbers")
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ctx.error(f"input 0 (indices) holds values outside [-{n}, {n})")
        idx = np.where(idx < 0, idx + n, idx)
        if ctx.is_const(1):
            return ctx.folded(np.take(np.asarray(ctx.const(1)), idx, axis=axis))
        it = ctx.tensor_of(ctx.folded(idx), f"{ctx.name}_indices")
    else:
        # run-time indices may be negative (counted from the end): gather_axis, not NNEF gather
        it = ctx.emit1("cast", {"input": ctx.tensor(0)}, dtype="integer")
        y = ctx.emit1("gather_axis", {"input": ctx.tensor(1), "indices": it}, {"axis": axis}, dtype="scalar")
        return ctx.result(y)
    y = ctx.emit1("gather", {"input": ctx.tensor(1), "indices": it}, {"axis": axis}, dtype="scalar")
    return ctx.result(y)


from . import legacy_ext, legacy_nn, legacy_state  # noqa: E402,F401  (register their mappings)
