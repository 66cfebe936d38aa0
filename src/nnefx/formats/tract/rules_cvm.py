"""The deterministic integer set (``cvm_*``) in tract: int32 tensors, standard operations.

CVM tensors are int32 at every boundary and arithmetic wraps modulo 2**32
(``ops/integer/_int.py``).  tract computes i32 tensors with Rust's integer operations, which
wrap the same way in its release builds, so the element-wise, reduction and matrix operations
map to the standard ones on i32; the model's integer inputs become
``tract_core_external(datum_type = 'i32')`` and bounds are i32 constants (tract's binary
operations want one datum type).  Where tract's integer operation differs, the form says how
it is made exact: division (tract panics on ``/ 0``; the runtime gives 0), the rounding right
shift (computed by exact float64 floors), the ``cvm_max`` start at 0 for ``axis = []``.
Operations tract computes only in floats (integer ``conv``) or that have no form here are
refused, located.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ...ops.integer._int import alpha
from ...ops.integer.reduce import reduced_axes
from .rewrite import Rewriter, rule
from .rules import _out, _rank_to, _refuse, typed_external


def _i32(rw: Rewriter, op: Operation, value: int) -> str:
    return rw.constant(_out(op), np.array(value, np.int32), op, fresh=True)


def _f64(rw: Rewriter, op: Operation, value: float) -> str:
    return rw.constant(_out(op), np.array(value, np.float64), op, fresh=True)


def _t(rw: Rewriter, op: Operation, name: str, inputs: dict[str, Any], attribs: dict | None = None,
       dtype: str = "integer", etype: str = "i32") -> str:
    return rw.temp(name, inputs, attribs or {}, like=op, dtype=dtype, shape=rw.shape(_out(op), op), etype=etype)


def _clamp(rw: Rewriter, op: Operation, x: str, lo: int, hi: int) -> None:
    low = _t(rw, op, "min", {"x": x, "y": _i32(rw, op, hi)})
    rw.emit("max", {"x": low, "y": _i32(rw, op, lo)}, {}, _out(op), like=op)


@rule("external")
def _external(rw: Rewriter, op: Operation) -> None:
    # an integer input of a CVM graph is int32 (tract's external<integer> would be i64)
    out = _out(op)
    consumers = [o for o in rw.source.operations if out in o.input_names()]
    if rw.tensor(out).dtype == "integer" and consumers and all(o.op.startswith("cvm_") for o in consumers):
        rw.emit("tract_core_external", {}, {"shape": list(op.attribs["shape"]), "datum_type": "i32"}, out,
                like=op)
    else:
        typed_external(rw, op)


@rule("cvm_cvm_clip")
def _cvm_clip(rw: Rewriter, op: Operation) -> None:
    a = alpha(int(op.attribs["precision"]))
    _clamp(rw, op, op.inputs["x"], -a, a)


@rule("cvm_clip")
def _clip(rw: Rewriter, op: Operation) -> None:
    _clamp(rw, op, op.inputs["x"], int(op.attribs["a_min"]), int(op.attribs["a_max"]))


@rule("cvm_relu")
def _relu(rw: Rewriter, op: Operation) -> None:
    rw.emit("max", {"x": op.inputs["x"], "y": _i32(rw, op, 0)}, {}, _out(op), like=op)


@rule("cvm_abs", "cvm_negative")
def _unary(rw: Rewriter, op: Operation) -> None:
    rw.emit({"cvm_abs": "abs", "cvm_negative": "neg"}[op.op], {"x": op.inputs["x"]}, {}, _out(op), like=op)


_BINARY = {"cvm_elemwise_add": "add", "cvm_elemwise_sub": "sub", "cvm_broadcast_add": "add",
           "cvm_broadcast_sub": "sub", "cvm_broadcast_mul": "mul", "cvm_broadcast_max": "max"}


@rule(*_BINARY)
def _binary(rw: Rewriter, op: Operation) -> None:
    rank = len(rw.shape(_out(op), op))
    a, b = (_rank_to(rw, op, op.inputs[k], rank) for k in ("a", "b"))
    rw.emit(_BINARY[op.op], {"x": a, "y": b}, {}, _out(op), like=op)


@rule("cvm_broadcast_greater")
def _greater(rw: Rewriter, op: Operation) -> None:
    rank = len(rw.shape(_out(op), op))
    a, b = (_rank_to(rw, op, op.inputs[k], rank) for k in ("a", "b"))
    flag = _t(rw, op, "gt", {"x": a, "y": b}, dtype="logical", etype="bool")
    rw.emit("tract_core_cast", {"input": flag}, {"to": "i32"}, _out(op), like=op)


@rule("cvm_broadcast_div")
def _div(rw: Rewriter, op: Operation) -> None:
    # C division toward zero, as tract's i32 division; x / 0 = 0 and x / -1 = -x (wrapping)
    # are selected around it, so tract never divides by 0 nor overflows INT32_MIN / -1
    rank = len(rw.shape(_out(op), op))
    a, b = (_rank_to(rw, op, op.inputs[k], rank) for k in ("a", "b"))
    zero, one, minus = _i32(rw, op, 0), _i32(rw, op, 1), _i32(rw, op, -1)
    special = _t(rw, op, "le", {"x": _t(rw, op, "mul", {"x": b, "y": b}), "y": one}, dtype="logical", etype="bool")
    safe = _t(rw, op, "select", {"condition": special, "true_value": one, "false_value": b})
    q = _t(rw, op, "div", {"x": a, "y": safe})
    is_zero = _t(rw, op, "eq", {"x": b, "y": zero}, dtype="logical", etype="bool")
    is_minus = _t(rw, op, "eq", {"x": b, "y": minus}, dtype="logical", etype="bool")
    q2 = _t(rw, op, "select", {"condition": is_minus, "true_value": _t(rw, op, "neg", {"x": a}), "false_value": q})
    rw.emit("select", {"condition": is_zero, "true_value": zero, "false_value": q2}, {}, _out(op), like=op)


def _floor_shift(rw: Rewriter, op: Operation, x: str, s: int) -> str:
    """floor(x / 2**s) for i32 ``x``: float64 holds every int32 and the quotient exactly."""
    f = _t(rw, op, "tract_core_cast", {"input": x}, {"to": "f64"}, dtype="scalar", etype="f64")
    q = _t(rw, op, "mul", {"x": f, "y": _f64(rw, op, 2.0 ** -s)}, dtype="scalar", etype="f64")
    return _t(rw, op, "tract_core_cast", {"input": _t(rw, op, "floor", {"x": q}, dtype="scalar", etype="f64")},
              {"to": "i32"})


@rule("cvm_cvm_right_shift")
def _right_shift(rw: Rewriter, op: Operation) -> None:
    # ((x >> (s-1)) + 1) >> 1 in int32 (the + 1 wraps as the runtime's does), then the clip
    s = int(op.attribs["shift_bit"])
    t = _t(rw, op, "add", {"x": _floor_shift(rw, op, op.inputs["x"], s - 1), "y": _i32(rw, op, 1)})
    a = alpha(int(op.attribs["precision"]))
    _clamp(rw, op, _floor_shift(rw, op, t, 1), -a, a)


@rule("cvm_cvm_left_shift")
def _left_shift(rw: Rewriter, op: Operation) -> None:
    # x * 2**s wraps in int32 like the shift; 2**31 itself is INT32_MIN as an i32 factor
    s = int(op.attribs["shift_bit"])
    factor = int(np.array(1 << s, np.int64).astype(np.int32))
    y = _t(rw, op, "mul", {"x": op.inputs["x"], "y": _i32(rw, op, factor)})
    a = alpha(int(op.attribs["precision"]))
    _clamp(rw, op, y, -a, a)


@rule("cvm_sum", "cvm_max")
def _reduce(rw: Rewriter, op: Operation) -> None:
    x, out = op.inputs["x"], _out(op)
    shape = rw.shape(x, op)
    axis, keep, exclude = op.attribs.get("axis", []), op.attribs.get("keepdims", False), op.attribs.get("exclude", False)
    axes, out_shape = reduced_axes(op.op, shape, axis, keep, exclude)
    name = "sum_reduce" if op.op == "cvm_sum" else "max_reduce"
    kept = (1,) * len(shape) if len(axes) == len(shape) else tuple(1 if i in axes else d for i, d in enumerate(shape))
    r = rw.temp(name, {"input": x}, {"axes": list(axes)}, like=op, dtype="integer", shape=kept, etype="i32")
    if op.op == "cvm_max" and not list(axis) and not exclude:
        # the runtime starts this maximum at 0 (ops/integer/reduce.py)
        r = rw.temp("max", {"x": r, "y": _i32(rw, op, 0)}, {}, like=op, dtype="integer", shape=kept, etype="i32")
    rw.emit("reshape", {"input": r}, {"shape": list(out_shape), "axis_start": 0, "axis_count": -1}, out, like=op,
            dtype="integer")


@rule("cvm_reshape", "cvm_flatten", "cvm_expand_dims", "cvm_squeeze")
def _reshape(rw: Rewriter, op: Operation) -> None:
    # every one of these only renames the extents; the result's static shape is the meaning
    out = _out(op)
    rw.emit("reshape", {"input": op.inputs["x"]}, {"shape": list(rw.shape(out, op)), "axis_start": 0,
                                                   "axis_count": -1}, out, like=op, dtype="integer")


@rule("cvm_transpose")
def _transpose(rw: Rewriter, op: Operation) -> None:
    x = op.inputs["x"]
    rank = len(rw.shape(x, op))
    axes = [a % rank for a in op.attribs.get("axes", [])] or list(reversed(range(rank)))
    rw.emit("transpose", {"input": x}, {"axes": axes}, _out(op), like=op, dtype="integer")


@rule("cvm_concatenate")
def _concat(rw: Rewriter, op: Operation) -> None:
    xs = op.inputs["x"]
    rank = len(rw.shape(xs[0], op))
    rw.emit("concat", {"values": xs}, {"axis": int(op.attribs.get("axis", 1)) % rank}, _out(op), like=op,
            dtype="integer")


@rule("cvm_tile")
def _tile(rw: Rewriter, op: Operation) -> None:
    x, out = op.inputs["x"], _out(op)
    reps = list(op.attribs["reps"])
    rank = len(rw.shape(out, op))
    x = _rank_to(rw, op, x, rank)
    rw.emit("tile", {"input": x}, {"repeats": [1] * (rank - len(reps)) + reps}, out, like=op, dtype="integer")


@rule("cvm_where")
def _where(rw: Rewriter, op: Operation) -> None:
    cond = op.inputs["condition"]
    flag = rw.temp("ne", {"x": cond, "y": _i32(rw, op, 0)}, {}, like=op, dtype="logical",
                   shape=rw.shape(cond, op), etype="bool")
    rank = len(rw.shape(_out(op), op))
    if len(rw.shape(cond, op)) != rank:
        raise _refuse(op, "a condition of another rank than the values (the runtime's per-row form)")
    rw.emit("select", {"condition": flag, "true_value": op.inputs["x"], "false_value": op.inputs["y"]}, {},
            _out(op), like=op)


@rule("cvm_dense")
def _dense(rw: Rewriter, op: Operation) -> None:
    # x · wᵀ (+ b): tract's i32 matmul accumulates in i32, wrapping like the runtime
    x, w, out = op.inputs["x"], op.inputs["w"], _out(op)
    y = rw.temp("matmul", {"A": x, "B": w}, {"transposeA": False, "transposeB": True}, like=op, dtype="integer",
                shape=rw.shape(out, op), etype="i32")
    b = op.inputs.get("b")
    if op.attribs.get("use_bias", True) and isinstance(b, str):
        rw.emit("add", {"x": y, "y": _rank_to(rw, op, b, 2)}, {}, out, like=op)
    else:
        rw.emit("copy", {"x": y}, {}, out, like=op, dtype="integer")


def _pick(rw: Rewriter, op: Operation, x: str, plan: list[np.ndarray | None], last: bool) -> str:
    """``x`` indexed per axis by constant index vectors (``None``: the whole axis), as
    tract_core_gather per axis; the last gather writes the operation's result."""
    todo = [(a, idx) for a, idx in enumerate(plan) if idx is not None]
    if not todo:
        todo = [(0, np.arange(rw.shape(x, op)[0]))]
    shape = list(rw.shape(x, op))
    for n, (axis, idx) in enumerate(todo):
        ind = rw.constant(_out(op), np.asarray(idx, np.int64), op, fresh=True)
        shape[axis] = len(idx)
        if last and n == len(todo) - 1:
            return rw.emit("tract_core_gather", {"input": x, "indices": ind}, {"axis": axis}, _out(op), like=op)
        x = rw.temp("tract_core_gather", {"input": x, "indices": ind}, {"axis": axis}, like=op, dtype="integer",
                    shape=tuple(shape), etype="i32")
    return x


@rule("cvm_strided_slice")
def _strided_slice(rw: Rewriter, op: Operation) -> None:
    # the runtime's clipped begin/end/stride (ops/integer/transform.py) as index vectors
    from ...ops.integer.transform import _slice_plan

    x = op.inputs["x"]
    plan = _slice_plan(rw.shape(x, op), **op.attribs)
    dims = rw.shape(x, op)
    _pick(rw, op, x, [None if (b, s, k) == (0, 1, d) else b + s * np.arange(k)
                      for (b, s, k), d in zip(plan, dims, strict=True)], True)


@rule("cvm_slice_like")
def _slice_like(rw: Rewriter, op: Operation) -> None:
    x = op.inputs["x"]
    dims, out = rw.shape(x, op), rw.shape(_out(op), op)
    _pick(rw, op, x, [None if o == d else np.arange(o) for d, o in zip(dims, out, strict=True)], True)


@rule("cvm_repeat")
def _repeat(rw: Rewriter, op: Operation) -> None:
    x = op.inputs["x"]
    dims = rw.shape(x, op)
    r, a = int(op.attribs["repeats"]), int(op.attribs.get("axis", 0)) % len(dims)
    _pick(rw, op, x, [np.arange(d * r) // r if i == a else None for i, d in enumerate(dims)], True)


@rule("cvm_upsampling")
def _upsampling(rw: Rewriter, op: Operation) -> None:
    # nearest-neighbour upsampling of an NCHW tensor: each row and column repeated `scale` times
    x = op.inputs["x"]
    dims = rw.shape(x, op)
    r = int(op.attribs["scale"])
    _pick(rw, op, x, [np.arange(d * r) // r if i >= 2 else None for i, d in enumerate(dims)], True)


@rule("cvm_take", "cvm_cvm_lut")
def _take(rw: Rewriter, op: Operation) -> None:
    # gather with indices clamped into range; no axis (and the look-up table) reads the input flat
    x, ind = (op.inputs["table"], op.inputs["indices"]) if op.op == "cvm_cvm_lut" else (op.inputs["x"],
                                                                                         op.inputs["indices"])
    dims = rw.shape(x, op)
    axis = op.attribs.get("axis", [])
    axis = (axis[0] if axis else None) if isinstance(axis, (list, tuple)) else axis
    if axis is None:
        size = int(np.prod(dims))
        x = rw.temp("reshape", {"input": x}, {"shape": [size], "axis_start": 0, "axis_count": -1}, like=op,
                    dtype="integer", shape=(size,), etype="i32")
        n, axis = size, 0
    else:
        axis %= len(dims)
        n = dims[axis]
    ishape = rw.shape(ind, op)
    low = rw.temp("max", {"x": ind, "y": _i32(rw, op, 0)}, {}, like=op, dtype="integer", shape=ishape, etype="i32")
    safe = rw.temp("min", {"x": low, "y": _i32(rw, op, n - 1)}, {}, like=op, dtype="integer", shape=ishape,
                   etype="i32")
    rw.emit("tract_core_gather", {"input": x, "indices": safe}, {"axis": axis}, _out(op), like=op)


@rule("cvm_cvm_precision")
def _precision(rw: Rewriter, op: Operation) -> None:
    # bits of |x| (0 takes 1): the count of k in 0..31 with |x| >= 2**k, in i64 (|INT32_MIN| fits)
    x, out = op.inputs["x"], _out(op)
    shape = rw.shape(x, op)
    wide = rw.temp("tract_core_cast", {"input": x}, {"to": "i64"}, like=op, dtype="integer", shape=shape,
                   etype="i64")
    mag = rw.temp("abs", {"x": wide}, {}, like=op, dtype="integer", shape=shape, etype="i64")
    col = rw.temp("unsqueeze", {"input": mag}, {"axes": [len(shape)]}, like=op, dtype="integer",
                  shape=(*shape, 1), etype="i64")
    powers = rw.constant(out, np.array([1 << k for k in range(32)], np.int64).reshape((1,) * len(shape) + (32,)), op, fresh=True)
    hits = rw.temp("ge", {"x": col, "y": powers}, {}, like=op, dtype="logical", shape=(*shape, 32), etype="bool")
    ones = rw.temp("tract_core_cast", {"input": hits}, {"to": "i32"}, like=op, dtype="integer", shape=(*shape, 32),
                   etype="i32")
    bits = rw.temp("sum_reduce", {"input": ones}, {"axes": [len(shape)]}, like=op, dtype="integer",
                   shape=(*shape, 1), etype="i32")
    flat = rw.temp("squeeze", {"input": bits}, {"axes": [len(shape)]}, like=op, dtype="integer", shape=shape,
                   etype="i32")
    rw.emit("max", {"x": flat, "y": _i32(rw, op, 1)}, {}, out, like=op)


@rule("cvm_max_pool2d")
def _max_pool(rw: Rewriter, op: Operation) -> None:
    # padded cells never win (the runtime pads with INT32_MIN; tract's border 'ignore'); every
    # window starts inside the input (pool_geometry), so none is all padding; ceil_mode's extra
    # row/column is more trailing padding
    from ...ops.integer.nn import pool_geometry

    x, out = op.inputs["x"], _out(op)
    pool_geometry(rw.shape(x, op), **op.attribs)
    n, c, h, w = rw.shape(x, op)
    oh, ow = rw.shape(out, op)[2:]
    ph, pw = (list(op.attribs.get("padding", [0, 0])) * 2)[:2] if len(op.attribs.get("padding", [0, 0])) == 1 \
        else list(op.attribs.get("padding", [0, 0]))
    kh, kw = op.attribs["pool_size"]
    sh, sw = op.attribs.get("strides", [1, 1])
    extra_h = max(0, (oh - 1) * sh + kh - (h + 2 * ph))
    extra_w = max(0, (ow - 1) * sw + kw - (w + 2 * pw))
    rw.emit("max_pool", {"input": x}, {"size": [1, 1, kh, kw], "border": "ignore",
                                       "padding": [(0, 0), (0, 0), (ph, ph + extra_h), (pw, pw + extra_w)],
                                       "stride": [1, 1, sh, sw], "dilation": []}, out, like=op)


@rule("cvm_conv2d")
def _conv2d(rw: Rewriter, op: Operation) -> None:
    # tract convolves only floats and quantized 8-bit types, so the i32 convolution is written as
    # im2col and tract's i32 matmul (accumulating in i32, wrapping like the runtime).  Padding
    # and im2col are one gather per spatial axis: the input gets one zero row and column, and a
    # window position outside the input reads them.
    from ...ops.integer.nn import conv_geometry

    x, w, out = op.inputs["x"], op.inputs["w"], _out(op)
    b = op.inputs.get("b")
    attribs = {k: v for k, v in op.attribs.items()}
    (n, oc, oh, ow), (kh, kw, sh, sw, ph, pw, dh, dw, g, use_bias) = conv_geometry(
        rw.shape(x, op), rw.shape(w, op), rw.shape(b, op) if isinstance(b, str) else None, **attribs)
    _, c, h, wd = rw.shape(x, op)
    ic = c // g

    def temp(name: str, inputs: dict, attrs: dict, shape: tuple) -> str:
        return rw.temp(name, inputs, attrs, like=op, dtype="integer", shape=shape, etype="i32")

    def reshape(t: str, shape: tuple) -> str:
        return temp("reshape", {"input": t}, {"shape": list(shape), "axis_start": 0, "axis_count": -1}, shape)

    z_rows = rw.constant(out, np.zeros((n, c, 1, wd), np.int32), op, fresh=True)
    xz = temp("concat", {"values": [x, z_rows]}, {"axis": 2}, (n, c, h + 1, wd))
    z_cols = rw.constant(out, np.zeros((n, c, h + 1, 1), np.int32), op, fresh=True)
    xz = temp("concat", {"values": [xz, z_cols]}, {"axis": 3}, (n, c, h + 1, wd + 1))

    def taps(size: int, o: int, k: int, s: int, d: int, p: int) -> np.ndarray:
        r = (np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - p).reshape(-1)
        return np.where((r < 0) | (r >= size), size, r).astype(np.int64)

    rows = rw.constant(out, taps(h, oh, kh, sh, dh, ph), op, fresh=True)
    cols = rw.constant(out, taps(wd, ow, kw, sw, dw, pw), op, fresh=True)
    g1 = temp("tract_core_gather", {"input": xz, "indices": rows}, {"axis": 2}, (n, c, oh * kh, wd + 1))
    g2 = temp("tract_core_gather", {"input": g1, "indices": cols}, {"axis": 3}, (n, c, oh * kh, ow * kw))
    p7 = reshape(g2, (n, g, ic, oh, kh, ow, kw))
    pt = temp("transpose", {"input": p7}, {"axes": [0, 1, 3, 5, 2, 4, 6]}, (n, g, oh, ow, ic, kh, kw))
    patches = reshape(pt, (n, g, oh * ow, ic * kh * kw))
    wr = reshape(w, (1, g, oc // g, ic * kh * kw))
    y = temp("matmul", {"A": patches, "B": wr}, {"transposeA": False, "transposeB": True}, (n, g, oh * ow, oc // g))
    yt = temp("transpose", {"input": y}, {"axes": [0, 1, 3, 2]}, (n, g, oc // g, oh * ow))
    if use_bias and isinstance(b, str):
        y4 = reshape(yt, (n, oc, oh, ow))
        rw.emit("add", {"x": y4, "y": reshape(b, (1, oc, 1, 1))}, {}, out, like=op)
    else:
        rw.emit("reshape", {"input": yt}, {"shape": [n, oc, oh, ow], "axis_start": 0, "axis_count": -1}, out,
                like=op, dtype="integer")
