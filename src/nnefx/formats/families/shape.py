"""Shape operations in the formats.

Covers NNEF operators §4.5 (reshape, transpose, concat, split, pad, tile, cast, ...) and the shape-computing ``ir_*`` extensions.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.context import export_copy_n
from ..export.lowering import (
    literal_type,
    out,
    pad,
    reshape,
    static,
    unop,
)
from ..export.registry import for_all, to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ETYPE
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64
from ..onnx.writer import NUMPY
from ..onnx.writer import ExportContext as OnnxContext

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


@to_ir("pad")
def pad_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    pads = [tuple(int(v) for v in p) for p in op.attribs["padding"]]
    value = op.inputs.get("value", op.attribs.get("value", 0.0))
    if isinstance(value, str):
        raise ctx.fail("a tensor padding value has no opset form")
    ctx.bind(out(op), pad(ctx, x, pads, op.attribs.get("border", "constant"), float(value)))


@to_onnx("pad")
def pad_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = op.inputs["input"]
    value = op.attribs.get("value", op.inputs.get("value", 0.0))
    if isinstance(value, str):
        raise ctx.fallback("a tensor padding value has no Pad form")
    pads = [tuple(int(v) for v in p) for p in op.attribs["padding"]]
    ctx.bind(out(op), pad(ctx, x, pads, op.attribs.get("border", "constant"), float(value)))


@to_ir("tile")
def tile_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Tile", [op.inputs["input"], ctx.ints(op.attribs["repeats"])], out_shape(ctx, op)))


@to_onnx("tile")
def tile_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Tile", [x, ctx.ints(op.attribs["repeats"])], ctx.dims(out(op))))


@to_ir("arange")
def ir_range_to_ir(ctx: IRContext, op: Operation) -> None:
    et = ETYPE.get(op.dtype or "scalar", "f32")
    refs = [ctx.ref(op.inputs[k], et) for k in ("start", "stop", "step")]
    ctx.bind(out(op), ctx.layer("Range", refs, out_shape(ctx, op), etype=et, attrs={"output_type": et},
                                version="opset4"))


@to_onnx("arange")
def ir_range_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    dt = NUMPY.get(op.dtype or "scalar", F32)
    refs = [ctx.ref(op.inputs[k], dt) for k in ("start", "stop", "step")]
    if any(len(ctx.dims(r)) != 0 for r in refs):
        refs = [reshape(ctx, r, ()) if ctx.dims(r) in ((1,), ()) else r for r in refs]
    if any(len(ctx.dims(r)) != 0 for r in refs):
        raise ctx.fallback("Range takes scalars")
    ctx.bind(out(op), ctx.node("Range", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0])))


@to_ir("broadcast_to")
def ir_broadcast_to_ir(ctx: IRContext, op: Operation) -> None:
    # the target shape was computed at run time; written statically, it is the output shape
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    mode = str(op.attribs.get("mode", "numpy"))
    inputs = [x, ctx.ints(shape)]
    if mode == "explicit":
        inputs.append(ctx.ints(op.attribs.get("axes_mapping", [])))
    elif mode not in ("numpy", "bidirectional"):
        raise ctx.fail(f"broadcast mode '{mode}' has no Broadcast-3 form")
    ctx.bind(out(op), ctx.layer("Broadcast", inputs, shape, etype=ctx.etype(x), attrs={"mode": mode},
                                version="opset3"))


@to_onnx("broadcast_to")
def ir_broadcast_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # numpy / bidirectional broadcasting to the target = Expand (bidirectional, and equal to
    # the target whenever numpy mode is valid)
    mode = str(op.attribs.get("mode", "numpy"))
    if mode not in ("numpy", "bidirectional"):
        raise ctx.fallback(f"broadcast mode '{mode}' has no Expand form")
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Expand", [x, ctx.ref(op.inputs["shape"], I64)], ctx.dims(out(op))))


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
