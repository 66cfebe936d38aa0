"""Shapes, reshapes and rearrangements: how each operator is read from IR and ONNX (and written, below).

ShapeOf, Reshape, Squeeze/Unsqueeze, Transpose, Concat, Split; ONNX Constant, Shape, Size, Flatten,
Reshape, Squeeze/Unsqueeze, Transpose, Concat, Split.  Writing: NNEF reshape, squeeze, unsqueeze,
transpose, concat, split, stack, unstack, copy_n and the reshape_to extension.  (Broadcasting,
tiling, padding, ranges and block moves are in :mod:`.layout`.)

Specifications: OpenVINO opset docs: shape and movement operations; ONNX operator docs of the same names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import DEFERRED, Operation
from ...ops.ext import reshape_target
from ..export import attrs as nnef_attrs
from ..export.context import export_copy_n
from ..export.lowering import (
    literal_type,
    out,
    reshape,
    static,
    unop,
)
from ..export.registry import for_all, to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import I64
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import norm_axes, norm_axis
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import Dim, Value, const, dtype_of
from ..reading.values import ints as _ints
from ._common import onnx_ints, onnx_need, onnx_rank

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


@operator("ShapeOf", ANY)
def _shape_of(ctx: NodeContext):
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
def _fold_shape_of(ctx: NodeContext, arrays):
    if arrays[0].dtype == object:
        return None
    return np.asarray(arrays[0].shape, dtype=np.int64)


def _reshape_spec(ctx: NodeContext, target: np.ndarray, x: Value) -> list[int] | None:
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
def _fold_reshape(ctx: NodeContext, arrays):
    x, t = arrays
    if t.dtype == object:
        return None
    return x.reshape(reshape_target(x.shape, _ints(t), ctx.bool("special_zero")))


@operator("Reshape", ANY)
def _reshape(ctx: NodeContext):
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


def _squeeze_axes(ctx: NodeContext, shape, axes) -> list[int]:
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
def _fold_squeeze(ctx: NodeContext, arrays):
    x = arrays[0]
    axes = _squeeze_axes(ctx, x.shape, _ints(arrays[1]) if len(arrays) > 1 else None)
    return x.reshape([d for i, d in enumerate(x.shape) if i not in axes])


@operator("Squeeze", ANY)
def _squeeze(ctx: NodeContext):
    shape = ctx.in_shape(0)
    if shape is None:
        raise ctx.error("the rank of the input is not known")
    axes = _squeeze_axes(ctx, shape, ctx.const_ints(1, "axes") if ctx.n_inputs > 1 else None)
    x = ctx.tensor(0)
    if not axes:
        return ctx.result(x, ctx.in_etype(0))
    return ctx.result(ctx.emit1("squeeze", {"input": x}, {"axes": axes}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


def _unsqueeze_axes(ctx: NodeContext, rank: int, axes) -> list[int]:
    return sorted(norm_axes(ctx, axes, rank + len(list(axes))))


@fold("Unsqueeze", OPSETS)
def _fold_unsqueeze(ctx: NodeContext, arrays):
    x = arrays[0]
    axes = _unsqueeze_axes(ctx, x.ndim, _ints(arrays[1]))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


@operator("Unsqueeze", ANY)
def _unsqueeze(ctx: NodeContext):
    axes = _unsqueeze_axes(ctx, ctx.in_rank(0), ctx.const_ints(1, "axes"))
    return ctx.result(ctx.emit1("unsqueeze", {"input": ctx.tensor(0)}, {"axes": axes},
                                dtype=dtype_of(ctx.input(0))), ctx.in_etype(0))


def _perm(ctx: NodeContext, rank: int, order: list[int]) -> list[int]:
    if not order:
        return list(range(rank - 1, -1, -1))
    p = norm_axes(ctx, order, rank)
    if len(p) != rank:
        raise ctx.error(f"transpose order {order} does not match rank {rank}")
    return p


@fold("Transpose", OPSETS)
def _fold_transpose(ctx: NodeContext, arrays):
    x = arrays[0]
    return np.transpose(x, _perm(ctx, x.ndim, _ints(arrays[1])))


@operator("Transpose", ANY)
def _transpose(ctx: NodeContext):
    p = _perm(ctx, ctx.in_rank(0), ctx.const_ints(1, "order"))
    x = ctx.tensor(0)
    if p == list(range(len(p))):
        return ctx.result(x, ctx.in_etype(0))
    return ctx.result(ctx.emit1("transpose", {"input": x}, {"axes": p}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


@fold("Concat", OPSETS)
def _fold_concat(ctx: NodeContext, arrays):
    r = arrays[0].ndim
    return np.concatenate(arrays, axis=norm_axis(ctx, ctx.int("axis"), r))


@operator("Concat", ANY)
def _concat(ctx: NodeContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.int("axis"), r)
    vals = [ctx.tensor(i) for i in range(ctx.n_inputs)]
    if len(vals) == 1:
        return ctx.result(vals[0], ctx.in_etype(0))
    return ctx.result(ctx.emit1("concat", {"values": vals}, {"axis": axis}, dtype=dtype_of(ctx.input(0))),
                      ctx.in_etype(0))


def _split_lengths(ctx: NodeContext, extent, lengths: list[int]) -> list[int]:
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
def _fold_split(ctx: NodeContext, arrays):
    x = arrays[0]
    axis = norm_axis(ctx, int(np.asarray(arrays[1]).reshape(-1)[0]), x.ndim)
    if ctx.type == "Split":
        n = ctx.int("num_splits")
        if x.shape[axis] % n:
            raise ctx.error(f"extent {x.shape[axis]} does not divide into {n} parts")
        return list(np.split(x, n, axis=axis))
    lengths = _split_lengths(ctx, x.shape[axis], _ints(arrays[2]))
    return list(np.split(x, np.cumsum(lengths)[:-1], axis=axis))


@operator(("Split", "VariadicSplit"), ANY)
def _split(ctx: NodeContext):
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
        start, total = 0, sum(ratios)  # the lengths add up to the axis extent
        for n in ratios:
            # an empty piece is [extent, extent): NNEF's slice reads an end of 0 as "to the end"
            b, e = (start, start + n) if n else (total, total)
            outs.append(ctx.emit1("slice", {"input": x}, {"axes": [axis], "begin": [b], "end": [e]}, dtype=dt))
            start += n
    return [ctx.result(o, ctx.in_etype(0), port=i) for i, o in enumerate(outs)]

# --- Broadcast / Tile / Pad / Range ----------------------------------------------------------------


# --- Identity, Roll, Eye, SpaceToBatch / BatchToSpace ---------------------------------------------


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("Constant")
def _onnx_constant(r, attrs, ins):
    if "value" in attrs:
        return const(r.tensor_array(attrs["value"]))
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                    ("value_ints", np.int64)):
        if key in attrs:
            return const(np.asarray(attrs[key], dt))
    raise r.error("Constant without a supported value attribute")


@onnx_node("Shape")
def _onnx_shape(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    start, end = attrs.get("start", 0), attrs.get("end", None)
    if x.shape is not None and all(d is not None for d in x.shape):
        return const(np.array(x.shape, np.int64)[start:end])
    # extents known only at run time (a dynamic batch, or results of a deferred node) stay
    # symbolic: gathered, concatenated or reshaped by later nodes while loading, computed at
    # run time only where a node needs the tensor
    shape = r.apply1("ShapeOf", {"output_type": "i64"}, [x], version="opset3")
    if (start, end) == (0, None):
        return shape
    if x.shape is None:
        raise r.error("Shape with start or end of a tensor whose rank is not known is not supported")
    rank = len(x.shape)
    lo, hi, _ = slice(start, end).indices(rank)
    return r.apply1("Gather", {"batch_dims": 0}, [shape, const(np.arange(lo, max(lo, hi), dtype=np.int64)),
                                                  const(np.int64(0))], version="opset8")


@onnx_node("Size")
def _onnx_size(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    if x.shape is None or any(d is None for d in x.shape):
        raise r.error("Size of a tensor whose shape is not known when loading is not supported")
    return const(np.int64(np.prod(x.shape, dtype=np.int64)))


@onnx_node("Flatten")
def _onnx_flatten(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    rank = onnx_rank(r, x)
    axis = int(attrs.get("axis", 1))  # in [-rank, rank]: the rank itself flattens everything into the rows
    axis = rank if axis == rank else norm_axis(r, axis, rank)
    lead, rest = x.shape[:axis], x.shape[axis:]
    if all(d is not None for d in lead):
        target = [int(np.prod(lead, dtype=np.int64)), -1]
    elif all(d is not None for d in rest):  # e.g. an unknown batch: [-1, C*H*W]
        target = [-1, int(np.prod(rest, dtype=np.int64))]
    elif axis == 1:
        return r.apply1("Reshape", {"special_zero": True}, [x, const(np.array([0, -1], np.int64))])
    else:
        raise r.error("Flatten needs known leading or trailing extents")
    return r.apply1("Reshape", {"special_zero": False}, [x, const(np.array(target, np.int64))])


@onnx_node("Reshape")
def _onnx_reshape(r, attrs, ins):
    if r.opset < 5:
        target = const(np.array(attrs["shape"], np.int64))
    else:
        target = onnx_need(r, ins, 1, "shape")
    return r.apply1("Reshape", {"special_zero": not attrs.get("allowzero", 0)}, [onnx_need(r, ins, 0, "data"), target])


@onnx_node("Squeeze", "Unsqueeze")
def _onnx_squeeze(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    axes = ins[1] if len(ins) > 1 else None
    if axes is None and "axes" in attrs:
        axes = const(np.array(attrs["axes"], np.int64))
    kind = r.node.op_type
    if axes is None:
        if kind == "Unsqueeze":
            raise r.error("Unsqueeze needs axes")
        return r.apply1("Squeeze", {}, [x])
    return r.apply1(kind, {}, [x, axes])


@onnx_node("Transpose")
def _onnx_transpose(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    perm = attrs.get("perm", list(range(onnx_rank(r, x)))[::-1])
    return r.apply1("Transpose", {}, [x, const(np.array(perm, np.int64))])


@onnx_node("Concat")
def _onnx_concat(r, attrs, ins):
    return r.apply1("Concat", {"axis": int(attrs["axis"])}, [v for v in ins if v is not None])


@onnx_node("Split")
def _onnx_split(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    rank = onnx_rank(r, x)
    axis = norm_axis(r, int(attrs.get("axis", 0)), rank)
    k = len(r.node.output)
    lengths = onnx_ints(r, ins[1], "split") if len(ins) > 1 and ins[1] is not None else attrs.get("split")
    if not lengths:  # absent, or an empty 'split' input: equal parts
        extent = x.shape[axis]
        if extent is None:
            raise r.error("Split needs a known extent on the split axis")
        k = int(attrs.get("num_outputs", k))
        chunk = -(-extent // k)
        lengths = [min(chunk, extent - i * chunk) for i in range(k)]
    return r.apply("VariadicSplit", {}, [x, const(np.int64(axis)), const(np.array(lengths, np.int64))],
                n_out=len(lengths), version="opset1")


# ================================================================================================
# Writing
# ================================================================================================

# --- ONNX helpers ----------------------------------------------------------------------------


# --- writers --------------------------------------------------------------------------------------


@to_ir("reshape", "reshape_to")
def reshape_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), reshape(ctx, op.inputs["input"], out_shape(ctx, op)))


@to_onnx("reshape")
def reshape_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    od = ctx.dims(out(op))
    if all(d is not None for d in od):
        ctx.bind(out(op), reshape(ctx, x, od))
        return
    # unknown dims: NNEF's 0 ("copy input[axis_start + k]") is ONNX's 0 at the same index as
    # long as the axes before it are copied too, and the axes after the reshaped range are
    # at the same index only when the range keeps its length
    start = int(op.attribs.get("axis_start", 0))
    count = int(op.attribs.get("axis_count", -1))
    count = len(xd) - start if count == -1 else count
    shape = [int(s) for s in op.attribs["shape"]]
    tail = list(xd[start + count:])
    target: list[int] = [0] * start + shape
    if len(shape) == count:
        target += [0] * len(tail)
    elif all(d is not None for d in tail):
        target += [int(d) for d in tail]
    else:
        raise ctx.fail("a reshape of a sub-range that changes its length needs static trailing dims")
    ctx.bind(out(op), ctx.node("Reshape", [x, ctx.ints(target)], od))


@to_onnx("reshape_to")
def ir_reshape_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    od = ctx.dims(out(op))
    if all(d is not None for d in od):
        ctx.bind(out(op), reshape(ctx, x, od))
        return
    special_zero = bool(op.attribs.get("special_zero", True))   # 0 copies = allowzero 0
    shape = ctx.ref(op.inputs["shape"], I64)
    ctx.bind(out(op), ctx.node("Reshape", [x, shape], od, allowzero=0 if special_zero else 1))


@to_ir("squeeze", "unsqueeze")
def squeeze_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("squeeze", "unsqueeze")
def squeeze_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    x = ctx.ref(op.inputs["input"])
    if not axes:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    kind = "Squeeze" if op.op == "squeeze" else "Unsqueeze"
    ctx.bind(out(op), ctx.node(kind, [x, ctx.ints(axes)], ctx.dims(out(op))))


@to_ir("transpose")
def transpose_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    perm = nnef_attrs.transpose_perm(op, len(ctx.shape(x)))
    ctx.bind(out(op), ctx.layer("Transpose", [x, ctx.ints(perm)], out_shape(ctx, op)))


@to_onnx("transpose")
def transpose_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    perm = nnef_attrs.transpose_perm(op, ctx.rank(x))
    ctx.bind(out(op), ctx.node("Transpose", [x], ctx.dims(out(op)), perm=perm))


@to_ir("concat")
def concat_to_ir(ctx: IRContext, op: Operation) -> None:
    values = op.inputs["values"]
    ctx.bind(out(op), ctx.layer("Concat", list(values), out_shape(ctx, op), attrs={"axis": int(op.attribs["axis"])}))


@to_onnx("concat")
def concat_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    values = list(op.inputs["values"])
    dt = literal_type(ctx, op, values)
    refs = [ctx.ref(v, dt) for v in values]
    ctx.bind(out(op), ctx.node("Concat", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0]),
                               axis=int(op.attribs["axis"])))


@to_ir("split")
def split_to_ir(ctx: IRContext, op: Operation) -> None:
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


@to_onnx("split")
def split_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["value"])
    axis = int(op.attribs["axis"])
    names = op.output_names()
    shapes = [ctx.dims(n) for n in names]
    sizes = static(ctx, tuple(s[axis] for s in shapes))
    refs = ctx.node("Split", [x, ctx.ints(sizes)], outputs=[(s, ctx.dtype(x)) for s in shapes], axis=axis)
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, r)


@for_all("stack")
def write_stack(ctx: Any, op: Operation) -> None:
    # concat of the values, each with a unit dim inserted at axis
    axis = int(op.attribs["axis"])
    parts = []
    for v in op.inputs["values"]:
        d = ctx.dims(v)
        parts.append(ctx.unsqueeze(ctx.ref(v), [axis], d[:axis] + (1,) + d[axis:]))
    ctx.bind(out(op), ctx.concat(parts, axis, ctx.dims(out(op))))


@to_ir("unstack")
def unstack_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["value"]
    xs = ctx.shape(x)
    axis = int(op.attribs["axis"]) % len(xs)
    names = op.output_names()
    piece = xs[:axis] + (1,) + xs[axis + 1:]
    refs = ctx.layer("Split", [x, ctx.const(np.asarray(axis), "i64")], outputs=[(piece, ctx.etype(x))] * len(names),
                     attrs={"num_splits": len(names)})
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, ctx.layer("Squeeze", [r, ctx.ints([axis])], ctx.shape(n)))


@to_onnx("unstack")
def unstack_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["value"])
    xd = ctx.dims(x)
    axis = int(op.attribs["axis"]) % len(xd)
    names = op.output_names()
    piece = xd[:axis] + (1,) + xd[axis + 1:]
    refs = ctx.node("Split", [x, ctx.ints([1] * len(names))], outputs=[(piece, ctx.dtype(x))] * len(names), axis=axis)
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, ctx.node("Squeeze", [r, ctx.ints([axis])], ctx.dims(n)))


@to_onnx("tensor_shape")
def ir_shape_of_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Shape", [x], (ctx.rank(x),), dtype=I64))


for_all("copy_n")(export_copy_n)


@to_ir(DEFERRED)
def deferred_to_ir(ctx: IRContext, op: Operation) -> None:
    """A node whose parameters are run-time values (:class:`~nnefx.graph.Deferred`): the IR
    writer writes layers whose parameters are fixed when the network is written."""
    node = op.attribs["node"]
    raise ctx.fail(f"{node.kind} takes the values of {', '.join(repr(v) for v in node.values)} at run time; "
                   "the IR writer writes only operations whose parameters are known when it writes")
