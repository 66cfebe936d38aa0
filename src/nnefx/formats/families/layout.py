"""Broadcasting, tiling, padding, ranges and block moves: how each is read from IR and ONNX and written to them.

Broadcast, Tile, Pad, Range, DepthToSpace, SpaceToDepth, ShuffleChannels, Identity, Roll, Eye,
SpaceToBatch/BatchToSpace; ONNX ConstantOfShape, Range, Pad, Tile, Expand, DepthToSpace,
SpaceToDepth, Trilu.  Writing: NNEF pad, tile, and the arange / broadcast_to extensions.
(Reshapes, transposes, concatenation and splits are in :mod:`.shape`.)

Specifications: OpenVINO opset docs: Broadcast-3, Tile-1, Pad-12, Range-4, DepthToSpace-1,
SpaceToDepth-1, ShuffleChannels-1, Roll-7, Eye-9, SpaceToBatch-2, BatchToSpace-2; ONNX operator
docs: ConstantOfShape, Range, Pad, Tile, Expand, DepthToSpace, SpaceToDepth, Trilu; NNEF spec §4.3.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import NNEFXError
from ...graph import Operation
from ...ops.ext import broadcast_to
from ..export.lowering import (
    out,
    pad,
    reshape,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ETYPE
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64
from ..onnx.writer import NUMPY
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import norm_axes, norm_axis
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import Dim, const, dtype_of, element_type, etype_of_array, nnef_dtype, storage_array
from ..reading.values import ints as _ints
from ._common import (
    KEPT_ETYPES,
    onnx_carried,
    onnx_const,
    onnx_emit,
    onnx_ints,
    onnx_kept_etypes,
    onnx_need,
    onnx_rank,
    onnx_scalar_like,
    onnx_write,
)

# ================================================================================================
# Reading
# ================================================================================================

def _bcast_mode(ctx: NodeContext) -> str:
    return ctx.choice("mode", ("numpy", "bidirectional", "explicit"), "numpy")


@fold("Broadcast", OPSETS)
def _fold_broadcast(ctx: NodeContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    mode = _bcast_mode(ctx)
    axes = _ints(arrays[2]) if len(arrays) > 2 else []
    target = tuple(_ints(arrays[1]))
    ctx.check_items(target)
    if mode == "bidirectional":
        from ...ops.ext import broadcast_shape
        ctx.check_items(broadcast_shape(arrays[0].shape, target))
    return broadcast_to(arrays[0], target, mode, axes)


@operator("Broadcast", ANY)
def _broadcast(ctx: NodeContext):
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
    known = _broadcast_extents(shape, tv.sym if tv.sym is not None else tv.const, mode)
    t = ctx.builder.graph.tensors[y]
    if known is not None and (t.shape is None or len(t.shape) == len(known)):
        t.shape = tuple(k if k is not None else (None if t.shape is None else t.shape[i])
                        for i, k in enumerate(known))
    return ctx.result(y, v.etype)


def _broadcast_extents(shape: tuple | None, target: Any, mode: str) -> tuple | None:
    """What is known of a run-time broadcast's result shape (None items: known at run time
    only) from the input's shape and the target's partly known items, or None."""
    if shape is None or target is None or mode not in ("numpy", "bidirectional"):
        return None
    items = [None if isinstance(d, Dim) else int(d) for d in np.asarray(target).reshape(-1)]
    r = max(len(items), len(shape))
    full = [1] * (r - len(shape)) + list(shape)
    tgt = [1] * (r - len(items)) + items
    if mode == "numpy":
        return tuple(tgt)
    out: list[int | None] = []
    for a, b in zip(full, tgt, strict=True):
        if b is None:
            out.append(a if a is not None and a != 1 else None)
        elif a is None:
            out.append(b if b != 1 else None)
        else:
            out.append(a if b == 1 else b)
    return tuple(out)


@fold("Tile", OPSETS)
def _fold_tile(ctx: NodeContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    reps = _ints(arrays[1])
    if any(k < 0 for k in reps):
        raise ctx.error(f"negative repeats {reps}")
    x = arrays[0]
    full = [1] * max(len(reps) - x.ndim, 0) + list(x.shape)
    reps_full = [1] * max(x.ndim - len(reps), 0) + reps
    ctx.check_items([a * b for a, b in zip(full, reps_full, strict=True)])
    return np.tile(x, reps)


@operator("Tile", ANY)
def _tile(ctx: NodeContext):
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


@operator("Pad", ANY)
def _pad(ctx: NodeContext):
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
def _fold_range(ctx: NodeContext, arrays):
    if any(a.dtype == object for a in arrays):
        return None
    start, stop, step = (np.asarray(a).reshape(-1)[0] for a in arrays[:3])
    if ctx.version == "opset4" or ctx.has("output_type"):
        et = element_type(ctx.str("output_type", "i64"), ctx.location)
    else:
        et = ctx.in_etype(0)
    if step == 0:
        raise ctx.error("Range step 0")
    if not all(np.isfinite(float(v)) for v in (start, stop, step)):
        raise ctx.error("Range bounds must be finite")
    ctx.check_items([max(int(math.ceil((float(stop) - float(start)) / float(step))), 0)])
    out = np.arange(start, stop, step)
    return ctx.folded(storage_array(out, et), et)


@operator("Range", ANY)
def _range(ctx: NodeContext):
    ctx.expect_inputs(3)
    if ctx.version == "opset4" or ctx.has("output_type"):
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


def _static_chw(ctx: NodeContext) -> tuple:
    shape = ctx.in_shape(0)
    if shape is None or len(shape) != 4 or any(d is None for d in shape[1:]):
        raise ctx.error("needs a rank-4 input with known channel and spatial extents")
    return shape


@operator("DepthToSpace", ANY)
def _depth_to_space(ctx: NodeContext):
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


@operator("SpaceToDepth", ANY)
def _space_to_depth(ctx: NodeContext):
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


@operator("ShuffleChannels", ANY)
def _shuffle_channels(ctx: NodeContext):
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


@fold("Identity", OPSETS)
def _fold_identity(ctx: NodeContext, arrays):
    return arrays[0]


@operator("Identity", ANY)
def _identity(ctx: NodeContext):
    # OpenVINO opset16 Identity: the input, unchanged
    ctx.expect_inputs(1)
    return ctx.result(ctx.emit1("copy", {"x": ctx.tensor(0)}, dtype=dtype_of(ctx.input(0))), ctx.in_etype(0))


@operator("Roll", ANY)
def _roll(ctx: NodeContext):
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


@fold("Eye", OPSETS)
def _fold_eye(ctx: NodeContext, arrays):
    # OpenVINO opset9 Eye: ones on the diagonal shifted by diagonal_index, broadcast to batch_shape
    rows, cols, k = (int(np.asarray(a).reshape(-1)[0]) for a in arrays[:3])
    batch = [int(d) for d in np.asarray(arrays[3]).reshape(-1)] if len(arrays) > 3 else []
    if rows < 0 or cols < 0 or any(d < 0 for d in batch):
        raise ctx.error(f"Eye extents must not be negative (rows {rows}, columns {cols}, batch {batch})")
    ctx.check_items(batch + [rows, cols])
    np_type = _ETYPE_NUMPY.get(ctx.out_etype(0))
    if np_type is None:
        raise ctx.error(f"Eye of output type {ctx.out_etype(0)} is not supported")
    return np.broadcast_to(np.eye(rows, cols, k, dtype=np_type), (*batch, rows, cols)).copy()


_ETYPE_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
                "u8": np.uint8, "boolean": np.bool_}


@operator("Eye", ANY)
def _eye(ctx: NodeContext):
    raise ctx.error("Eye needs its rows, columns, diagonal index and batch shape known while loading")


@operator(("SpaceToBatch", "BatchToSpace"), ANY)
def _space_batch(ctx: NodeContext):
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


@onnx_node("ConstantOfShape")
def _onnx_constant_of_shape(r, attrs, ins):
    target = onnx_need(r, ins, 0, "input")
    value = r.tensor_array(attrs["value"]).reshape(-1)[0] if "value" in attrs else np.float32(0)
    if not target.is_const and target.shape is not None and None not in target.shape:
        # a shape of known rank known at run time only (a dynamic batch): the value broadcast to
        # it; of an unknown rank, onnx_ints below defers the node until the shape is bound
        onnx_rank(r, target)
        # the value's element type is the result's (broadcasting a value is exact in any type)
        onnx_kept_etypes(r, [], outputs=(etype_of_array(np.asarray(value)),), narrow=True)
        y = r.apply1("Broadcast", {"mode": "numpy"}, [const(np.asarray(value)), target], version="opset3")
        if target.sym is not None and y.tensor is not None:  # the known extents of the shape stay known
            y.shape = tuple(None if isinstance(d, Dim) else int(d) for d in target.sym.reshape(-1))
            r.builder.graph.tensors[y.tensor].shape = y.shape
        return y
    shape = onnx_ints(r, target, "the shape")
    c = r.ctx([])
    c.check_items(shape)
    return const(np.full(shape, value, dtype=np.asarray(value).dtype))


@onnx_node("Range")
def _onnx_range(r, attrs, ins):
    vals = [onnx_need(r, ins, i, "input") for i in range(3)]
    return r.apply1("Range", {"output_type": vals[0].etype}, vals, version="opset4")


def _pad_source(mode: str, k: np.ndarray, m: int) -> np.ndarray:
    """The item of an extent-``m`` axis that padded position ``k`` (0 = its first item) reads."""
    if mode == "wrap":
        return k % m
    if mode == "edge":
        return np.clip(k, 0, m - 1)
    if m == 1:  # reflect: the mirror of a single item is itself
        return np.zeros_like(k)
    k = k % (2 * (m - 1))  # reflect about the end items, repeatedly where a pad exceeds the extent
    return np.where(k < m, k, 2 * (m - 1) - k)


def _onnx_pad_indexed(r, x, before: list[int], after: list[int], mode: str):
    """Pad modes 'wrap', 'edge' and 'reflect' as a Gather of load-time indices per padded axis:
    output item j of an axis of extent n reads input item source(j - before) — the positive pads
    extend the whole input and the negative ones then crop the result, as ONNX's reference does.
    Only values move, so every element type is kept exactly."""
    onnx_carried(r, x)
    for axis, (b, e) in enumerate(zip(before, after, strict=True)):
        if not b and not e:
            continue
        n = x.shape[axis]
        if n is None or n < 1 or n + b + e < 1:
            raise r.error(f"Pad mode '{mode}' needs a known, non-empty extent and result along axis {axis} "
                          f"(extent {n}, pads {b} and {e})")
        idx = _pad_source(mode, np.arange(n + b + e, dtype=np.int64) - b, n)
        x = r.apply1("Gather", {"batch_dims": 0}, [x, const(idx.astype(np.int64)), const(np.int64(axis))])
    return x


@onnx_node("Pad")
def _onnx_pad(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    rank = onnx_rank(r, x)
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise r.error(f"Pad mode '{mode}' is not supported")
    if r.opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings", []))), float(attrs.get("value", 0.0))
        axes = list(range(rank))
    else:
        pads = onnx_ints(r, onnx_need(r, ins, 1, "pads"), "pads")
        value = 0.0
        if len(ins) > 2 and ins[2] is not None:
            value = float(np.asarray(onnx_const(r, ins[2], "constant_value")).reshape(-1)[0]) if \
                np.asarray(onnx_const(r, ins[2], "constant_value")).size else 0.0
        axes = onnx_ints(r, ins[3], "axes") if len(ins) > 3 and ins[3] is not None else list(range(rank))
    axes = norm_axes(r, axes, rank)
    if len(pads) != 2 * len(axes):
        raise r.error(f"pads {pads} must have {2 * len(axes)} entries")
    pb, pe = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        pb[a], pe[a] = pads[i], pads[len(axes) + i]
    if mode == "wrap" or (mode != "constant" and x.etype not in ("f32", "f64", "f16", "bf16")):
        return _onnx_pad_indexed(r, x, pb, pe, mode)
    # the pad value as a number of x's kind: a float16/bfloat16/float64 value held as float64
    # (as int64 it lost its fraction, and -inf became the int64 minimum)
    dt = x.const.dtype if x.is_const else (np.float32 if x.etype == "f32" else
                                          np.float64 if x.etype in ("f64", "f16", "bf16") else np.int64)
    return r.apply1("Pad", {"pad_mode": mode}, [x, const(np.array(pb, np.int64)), const(np.array(pe, np.int64)),
                                             const(np.asarray(value).astype(dt))], version="opset1")


@onnx_node("Tile")
def _onnx_tile(r, attrs, ins):
    return r.apply1("Tile", {}, [onnx_need(r, ins, 0, "input"), onnx_need(r, ins, 1, "repeats")])


@onnx_node("Expand")
def _onnx_expand(r, attrs, ins):
    return r.apply1("Broadcast", {"mode": "bidirectional"}, [onnx_need(r, ins, 0, "input"), onnx_need(r, ins, 1, "shape")],
                 version="opset3")


# --- ONNX EyeLike, ReverseSequence, CenterCropPad (ONNX operator docs) -----------------------------

@onnx_node("EyeLike")
def _onnx_eye_like(r, attrs, ins):
    # ones on diagonal k of a matrix shaped like the input: known once the input's shape is
    x = onnx_need(r, ins, 0, "input")
    if x.shape is None or len(x.shape) != 2 or any(d is None for d in x.shape):
        raise r.error(f"EyeLike needs a rank-2 input of known shape (got {x.shape})")
    et = r.etype_code(int(attrs["dtype"])) if "dtype" in attrs else x.etype
    onnx_kept_etypes(r, [], outputs=(et,), narrow=True)  # a load-time constant: any stored type
    r.ctx([x]).check_items(x.shape)
    eye = np.eye(x.shape[0], x.shape[1], int(attrs.get("k", 0)))
    return const(eye.astype(etypes.numpy_dtype(et)))


# the window functions' cosine terms (a_k of sum_k (-1)^k a_k cos(2 pi k n / N)), ONNX operator docs
_WINDOWS = {"HannWindow": (0.5, 0.5), "HammingWindow": (25.0 / 46.0, 21.0 / 46.0),
            "BlackmanWindow": (0.42, 0.5, 0.08)}


@onnx_node(*_WINDOWS)
def _onnx_window(r, attrs, ins):
    # w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 (symmetric):
    # known once the size is
    size = onnx_ints(r, onnx_need(r, ins, 0, "size"), "size")
    if len(size) != 1 or size[0] < 1:
        raise r.error(f"size {size} must be one value of at least 1")
    et = r.etype_code(int(attrs.get("output_datatype", 1)))
    if et not in KEPT_ETYPES:
        raise r.error(f"{r.node.op_type} of element type {et} is not supported (supported: "
                      f"{', '.join(KEPT_ETYPES)})")
    n = size[0]
    r.ctx([]).check_items([n])
    period = n if attrs.get("periodic", 1) else n - 1
    steps = np.arange(n, dtype=np.float64) * (2.0 * math.pi / period) if period else np.zeros(n)
    w = sum((-1) ** k * a * np.cos(k * steps) for k, a in enumerate(_WINDOWS[r.node.op_type]))
    return const(np.asarray(w).astype(_ETYPE_NUMPY[et]))


@onnx_node("MelWeightMatrix")
def _onnx_mel_weight_matrix(r, attrs, ins):
    # ONNX MelWeightMatrix (opset 17), as its reference runtime reads the definition: num_mel_bins
    # + 2 points equally spaced on the mel scale mel(f) = 2595 log10(1 + f / 700) from the lower to
    # the upper edge (step = span / (num_mel_bins + 2)), each mapped to the spectrogram bin
    # floor((dft_length + 1) f / sample_rate); column i is the triangle rising from point i to
    # point i + 1 (peak 1) and falling to point i + 2.  Known once the five scalars are.
    def scalar(i: int, what: str) -> float:
        return float(np.asarray(onnx_const(r, onnx_need(r, ins, i, what), what)).reshape(-1)[0])

    bins, dft, rate = (int(scalar(i, w)) for i, w in ((0, "num_mel_bins"), (1, "dft_length"), (2, "sample_rate")))
    low, high = scalar(3, "lower_edge_hertz"), scalar(4, "upper_edge_hertz")
    if bins < 1 or dft < 1 or rate < 1 or not 0 <= low <= high:
        raise r.error(f"num_mel_bins {bins}, dft_length {dft}, sample_rate {rate} must be positive and "
                      f"0 <= lower_edge_hertz {low} <= upper_edge_hertz {high}")
    et = r.etype_code(int(attrs.get("output_datatype", 1)))
    if et not in KEPT_ETYPES:
        raise r.error(f"MelWeightMatrix of element type {et} is not supported (supported: {', '.join(KEPT_ETYPES)})")
    spectrum = dft // 2 + 1
    r.ctx([]).check_items([spectrum, bins])
    mel_low, mel_high = (2595.0 * math.log10(1.0 + f / 700.0) for f in (low, high))
    mels = mel_low + np.arange(bins + 2) * ((mel_high - mel_low) / (bins + 2))
    hertz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    points = np.floor((dft + 1) * hertz / rate).astype(np.int64)
    if points.min() < 0 or points.max() >= spectrum:
        raise r.error(f"the mel points reach spectrogram bin {int(points.max())}, beyond the {spectrum} bins")
    w = np.zeros((spectrum, bins))
    for i in range(bins):
        left, centre, right = (int(p) for p in points[i:i + 3])
        if centre == left:
            w[centre, i] = 1.0
        else:
            w[left:centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            w[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
    return const(w.astype(_ETYPE_NUMPY[et]))


@onnx_node("ReverseSequence")
def _onnx_reverse_sequence(r, attrs, ins):
    # out[.., t, .., b, ..] = x[.., L[b] - 1 - t, .., b, ..] for t < L[b], else x itself: a
    # GatherElements along the time axis with those indices
    x, lens = onnx_need(r, ins, 0, "input"), onnx_need(r, ins, 1, "sequence_lens")
    onnx_carried(r, x, moved=True)
    rank = onnx_rank(r, x)
    ta, ba = int(attrs.get("time_axis", 0)), int(attrs.get("batch_axis", 1))
    if rank < 2 or sorted((ta, ba)) != [0, 1]:
        raise r.error(f"time_axis {ta} and batch_axis {ba} must be 0 and 1 (in either order) of a tensor of rank >= 2")
    if any(d is None for d in x.shape):
        raise r.error(f"ReverseSequence needs a known input shape (got {x.shape})")
    n_t = x.shape[ta]
    t = const(np.arange(n_t, dtype=np.int64).reshape([n_t if a == ta else 1 for a in range(rank)]))
    if lens.etype != "i64":
        lens = r.apply1("Convert", {"destination_type": "i64"}, [lens])
    length = r.apply1("Reshape", {"special_zero": False},
                      [lens, const(np.array([-1 if a == ba else 1 for a in range(rank)], np.int64))])
    back = r.apply1("Subtract", {"auto_broadcast": "numpy"},
                    [r.apply1("Subtract", {"auto_broadcast": "numpy"}, [length, const(np.int64(1))]), t])
    idx = r.apply1("Select", {"auto_broadcast": "numpy"},
                   [r.apply1("Less", {"auto_broadcast": "numpy"}, [t, length]), back, t])
    idx = r.apply1("Broadcast", {"mode": "numpy"}, [idx, const(np.array(x.shape, np.int64))], version="opset3")
    return r.apply1("GatherElements", {"axis": ta}, [x, idx], version="opset6")


@onnx_node("CenterCropPad")
def _onnx_center_crop_pad(r, attrs, ins):
    # per axis: crop a centred window (start rounded down) or pad with zeros (the odd one after)
    x = onnx_need(r, ins, 0, "input_data")
    onnx_carried(r, x)
    rank = onnx_rank(r, x)
    target = onnx_ints(r, onnx_need(r, ins, 1, "shape"), "shape")
    axes = norm_axes(r, [int(a) for a in attrs.get("axes", range(rank))], rank)
    if len(axes) != len(target) or len(set(axes)) != len(axes):
        raise r.error(f"shape {target} must have one extent per axis of {axes}")
    starts, ends, lo, hi = [], [], [0] * rank, [0] * rank
    for a, want in zip(axes, target, strict=True):
        have = x.shape[a]
        if have is None or want < 0:
            raise r.error(f"axis {a}: extent {have} and target {want} must be known and not negative")
        begin = max(have - want, 0) // 2
        starts.append(begin)
        ends.append(begin + min(have, want))
        lo[a] = max(want - have, 0) // 2
        hi[a] = max(want - have, 0) - lo[a]
    y = r.apply1("Slice", {}, [x, const(np.array(starts, np.int64)), const(np.array(ends, np.int64)),
                               const(np.ones(len(axes), np.int64)), const(np.array(axes, np.int64))])
    if any(lo) or any(hi):
        y = r.apply1("Pad", {"pad_mode": "constant"},
                     [y, const(np.array(lo, np.int64)), const(np.array(hi, np.int64)), onnx_scalar_like(x, 0)],
                     version="opset12")
    return y


@onnx_node("DepthToSpace", "SpaceToDepth")
def _onnx_depth_space(r, attrs, ins):
    mode = {"DCR": "blocks_first", "CRD": "depth_first"}[attrs.get("mode", "DCR")]
    return r.apply1(r.node.op_type, {"mode": mode, "block_size": int(attrs["blocksize"])}, [onnx_need(r, ins, 0, "input")],
                 version="opset1")


@onnx_node("Trilu")
def _onnx_trilu(r, attrs, ins):
    """Folded on constants (causal attention masks), else the onnx-domain operation."""
    x = onnx_need(r, ins, 0, "input")
    k_in = ins[1] if len(ins) > 1 else None
    if not x.is_const or (k_in is not None and not k_in.is_const):
        onnx_kept_etypes(r, ins, widened=(1,))
        if len(x.shape or ()) < 2:
            raise r.error("Trilu needs a tensor of rank 2 or more")
        return onnx_emit(r, "onnx_trilu", {"input": x, "k": k_in}, {"upper": bool(attrs.get("upper", 1))},
                         results=[x.etype], dtype=nnef_dtype(x.etype))[0]
    k = 0
    if len(ins) > 1 and ins[1] is not None:
        k = int(np.asarray(onnx_const(r, ins[1], "k")).reshape(-1)[0])
    a = np.asarray(x.const)
    if a.ndim < 2:
        raise r.error("Trilu needs a tensor of rank 2 or more")
    return const(np.triu(a, k) if attrs.get("upper", 1) else np.tril(a, k))


# ================================================================================================
# Writing
# ================================================================================================

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


@to_onnx("onnx_trilu")
def trilu_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "Trilu", [op.inputs["input"], op.inputs.get("k")], 14,
               upper=int(bool(op.attribs.get("upper", True))))
