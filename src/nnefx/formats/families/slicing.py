"""Slicing and gather/scatter operators: how each operator is read from IR and ONNX (and written, below).

StridedSlice, Slice-8, Gather, GatherElements, GatherND, Scatter*Update, OneHot; ONNX Slice, Gather,
GatherElements.  The index rules (clamped bounds, negative indices) are in
:mod:`nnefx.formats.reading.conventions`.

Specifications: OpenVINO opset docs: StridedSlice-1, Slice-8, Gather-8, GatherElements-6, GatherND-5/8, ScatterUpdate-3,
OneHot-1; ONNX operator docs: Slice, Gather, GatherElements.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
from ...ops.ext import gather
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    out,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape, slice_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import I64
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import (
    IndexPlan,
    const_value,
    emit_index_plan,
    gather_indices,
    norm_axis,
    slice_plan,
    strided_plan,
)
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import Value, const, dtype_of, nnef_dtype
from ._common import KEPT_ETYPES, onnx_carried, onnx_const, onnx_need, onnx_scalar_like

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

def _masks(ctx: NodeContext) -> dict[str, list[int]]:
    return {k: (ctx.ints(k, []) if ctx.has(k) else []) for k in
            ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask", "ellipsis_mask")}


def _plan_for(ctx: NodeContext, arrays_or_none, rank: int) -> IndexPlan:
    if ctx.type == "StridedSlice":
        begin = ctx.const_ints(1, "begin")
        end = ctx.const_ints(2, "end")
        strides = ctx.const_ints(3, "strides") if ctx.n_inputs > 3 else [1] * len(begin)
        return strided_plan(ctx, begin, end, strides, **_masks(ctx))
    start = ctx.const_ints(1, "start")
    stop = ctx.const_ints(2, "stop")
    step = ctx.const_ints(3, "step")
    axes = ctx.const_ints(4, "axes") if ctx.n_inputs > 4 else None
    return slice_plan(ctx, rank, start, stop, step, axes)


@fold(("StridedSlice", "Slice"), OPSETS)
def _fold_slice(ctx: NodeContext, arrays):
    for a in arrays[1:]:
        if a.dtype == object:
            return None
    x = arrays[0]
    plan = _plan_for(ctx, arrays, x.ndim)
    return np.asarray(x[plan.numpy_index(x.ndim)])


@operator(("StridedSlice", "Slice"), ANY)
def _slice(ctx: NodeContext):
    rank = ctx.in_rank(0)
    plan = _plan_for(ctx, None, rank)
    y = emit_index_plan(ctx, plan, ctx.input(0), ctx.tensor(0))
    return ctx.result(y, ctx.in_etype(0))


# --- Gather ---------------------------------------------------------------------------------------


def _gather_axis(ctx: NodeContext, rank: int) -> int:
    return norm_axis(ctx, ctx.const_ints(2, "axis")[0], rank)


@fold("Gather", OPSETS)
def _fold_gather(ctx: NodeContext, arrays):
    x, idx = arrays[0], arrays[1]
    if idx.dtype == object:
        return None
    axis = _gather_axis(ctx, x.ndim)
    bd = ctx.int("batch_dims", 0)
    if bd < 0:
        bd += idx.ndim
    return gather(x, idx.astype(np.int64), axis, bd)


@operator("Gather", ANY)
def _gather(ctx: NodeContext):
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
        idx = gather_indices(ctx, iv.const, extent)
        if idx.ndim == 0:
            i = int(idx)
            plan = IndexPlan([("slice", None, None, 1)] * axis + [("index", i)])
            return ctx.result(emit_index_plan(ctx, plan, Value(tensor=x, etype=ctx.in_etype(0), shape=shape), x),
                              ctx.in_etype(0))
        if np.all(idx >= 0):
            it = const_value(ctx, idx, "i64")
            return ctx.result(ctx.emit1("gather", {"input": x, "indices": it}, {"axis": axis}, dtype=dt),
                              ctx.in_etype(0))
    y = ctx.emit1("gather_axis", {"input": x, "indices": ctx.tensor(1)}, {"axis": axis, "batch_dims": bd}, dtype=dt)
    return ctx.result(y, ctx.in_etype(0))

# --- gathers, scatters, one-hot ----------------------------------------------------------------------


def _index_tensor(ctx: NodeContext, i: int) -> str:
    v = ctx.input(i)
    if dtype_of(v) != "integer":
        raise ctx.error(f"input {i} must hold integer indices")
    if v.is_const:
        return ctx.tensor_of(ctx.folded(np.asarray(v.const).astype(np.int64), "i64"))
    return ctx.tensor(i)


@operator("GatherElements", ANY)
def _gather_elements(ctx: NodeContext):
    axis = norm_axis(ctx, ctx.int("axis"), ctx.in_rank(0))
    y = ctx.emit1("gather_elements", {"input": ctx.tensor(0), "indices": _index_tensor(ctx, 1)}, {"axis": axis},
                  dtype=dtype_of(ctx.input(0)))
    return ctx.result(y, ctx.in_etype(0))


@operator("GatherND", ANY)
def _gather_nd(ctx: NodeContext):
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


@operator(("ScatterUpdate", "ScatterNDUpdate", "ScatterElementsUpdate"), ANY)
def _scatter(ctx: NodeContext):
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


@operator("OneHot", ANY)
def _one_hot(ctx: NodeContext):
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


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("Slice")
def _onnx_slice(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    if r.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
        vals = [x, const(np.array(starts, np.int64)), const(np.array(ends, np.int64)),
                const(np.array(steps, np.int64)), const(np.array(axes, np.int64))]
    else:
        starts, ends = onnx_need(r, ins, 1, "starts"), onnx_need(r, ins, 2, "ends")
        n = int(np.prod(starts.shape)) if starts.shape else 1
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else const(np.arange(n, dtype=np.int64))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else const(np.ones(n, np.int64))
        vals = [x, starts, ends, steps, axes]
    return r.apply1("Slice", {}, vals)


@onnx_node("Gather")
def _onnx_gather(r, attrs, ins):
    return r.apply1("Gather", {"batch_dims": 0}, [onnx_need(r, ins, 0, "data"), onnx_need(r, ins, 1, "indices"),
                                               const(np.int64(attrs.get("axis", 0)))])


@onnx_node("GatherElements")
def _onnx_gather_elements(r, attrs, ins):
    return r.apply1("GatherElements", {"axis": int(attrs.get("axis", 0))},
                 [onnx_need(r, ins, 0, "data"), onnx_need(r, ins, 1, "indices")], version="opset6")


# --- ONNX GatherND, ScatterND, ScatterElements / Scatter, OneHot (ONNX operator docs) ---------------

@onnx_node("GatherND")
def _onnx_gather_nd(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    onnx_carried(r, x)
    return r.apply1("GatherND", {"batch_dims": int(attrs.get("batch_dims", 0))},
                    [x, onnx_need(r, ins, 1, "indices")], version="opset8")


_ONNX_REDUCTION = {"none": "none", "add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _onnx_reduction(r, attrs) -> str:
    name = attrs.get("reduction", "none")
    if name not in _ONNX_REDUCTION:
        raise r.error(f"unknown reduction '{name}' (known: {', '.join(_ONNX_REDUCTION)})")
    return _ONNX_REDUCTION[name]


@onnx_node("ScatterND")
def _onnx_scatter_nd(r, attrs, ins):
    data, updates = onnx_need(r, ins, 0, "data"), onnx_need(r, ins, 2, "updates")
    onnx_carried(r, data)
    c = r.ctx([data, onnx_need(r, ins, 1, "indices"), updates])
    y = c.emit1("scatter", {"data": c.tensor(0), "indices": _index_tensor(c, 1), "updates": c.tensor(2)},
                {"kind": "nd", "reduction": _onnx_reduction(r, attrs)}, dtype=dtype_of(data))
    return c.result(y, data.etype)


@onnx_node("ScatterElements", "Scatter")
def _onnx_scatter_elements(r, attrs, ins):
    # Scatter (opset 9-10) is ScatterElements without a reduction
    data = onnx_need(r, ins, 0, "data")
    onnx_carried(r, data)
    return r.apply1("ScatterElementsUpdate", {"reduction": _onnx_reduction(r, attrs), "use_init_val": True},
                    [data, onnx_need(r, ins, 1, "indices"), onnx_need(r, ins, 2, "updates"),
                     const(np.int64(attrs.get("axis", 0)))], version="opset12")


@onnx_node("TensorScatter")
def _onnx_tensor_scatter(r, attrs, ins):
    # ONNX TensorScatter (opset 24): update written into past_cache along `axis` from position
    # write_indices[b] of each batch item b (modulo the cache length in 'circular' mode): a
    # ScatterElements whose indices are write_indices[b] + s along that axis
    cache, update = onnx_need(r, ins, 0, "past_cache"), onnx_need(r, ins, 1, "update")
    onnx_carried(r, cache)
    mode = attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise r.error(f"unknown mode '{mode}' (known: linear, circular)")
    if cache.shape is None or update.shape is None or any(d is None for d in update.shape) \
            or len(cache.shape) != len(update.shape) or len(cache.shape) < 2:
        raise r.error(f"past_cache {cache.shape} and update {update.shape} need equal ranks >= 2 and a known update shape")
    rank = len(cache.shape)
    axis = norm_axis(r, int(attrs.get("axis", -2)), rank)
    if axis == 0:
        raise r.error("axis must not be the batch axis 0")
    length, n = cache.shape[axis], update.shape[axis]
    if length is None:
        raise r.error("the cache length along the axis must be known")
    step = const(np.arange(n, dtype=np.int64).reshape([n if a == axis else 1 for a in range(rank)]))
    if len(ins) > 2 and ins[2] is not None:
        start = r.apply1("Reshape", {"special_zero": False},
                         [r.apply1("Convert", {"destination_type": "i64"}, [ins[2]]),
                          const(np.array([-1] + [1] * (rank - 1), np.int64))])
        idx = r.apply1("Add", {"auto_broadcast": "numpy"}, [start, step])
    else:
        idx = step
    if mode == "circular":
        idx = r.apply1("FloorMod", {"auto_broadcast": "numpy"}, [idx, const(np.int64(length))])
    idx = r.apply1("Broadcast", {"mode": "numpy"}, [idx, const(np.array(update.shape, np.int64))], version="opset3")
    return r.apply1("ScatterElementsUpdate", {"reduction": "none", "use_init_val": True},
                    [cache, idx, update, const(np.int64(axis))], version="opset12")


@onnx_node("OneHot")
def _onnx_one_hot(r, attrs, ins):
    # indices in [-depth, depth) count from the end below 0; others (and non-integral ones) hit nothing
    idx, values = onnx_need(r, ins, 0, "indices"), onnx_need(r, ins, 2, "values")
    onnx_carried(r, values, moved=True)
    depth_v = np.asarray(onnx_const(r, onnx_need(r, ins, 1, "depth"), "depth")).reshape(-1)
    if depth_v.size != 1 or not depth_v[0] >= 1:
        raise r.error(f"depth {depth_v.tolist()} must be one value of at least 1")
    depth = int(depth_v[0])
    if idx.etype in ("f32", "f64", "f16"):
        whole = r.apply1("Equal", {"auto_broadcast": "numpy"}, [r.apply1("Floor", {}, [idx]), idx])
        idx = r.apply1("Select", {"auto_broadcast": "numpy"}, [whole, idx, onnx_scalar_like(idx, -depth - 1)])
        idx = r.apply1("Convert", {"destination_type": "i64"}, [idx])
    elif idx.etype not in KEPT_ETYPES:
        idx = r.apply1("Convert", {"destination_type": "i64"}, [idx])
    below = r.apply1("Less", {"auto_broadcast": "numpy"}, [idx, onnx_scalar_like(idx, 0)])
    idx = r.apply1("Select", {"auto_broadcast": "numpy"},
                   [below, r.apply1("Add", {"auto_broadcast": "numpy"}, [idx, onnx_scalar_like(idx, depth)]), idx])
    off = r.apply1("Gather", {"batch_dims": 0}, [values, const(np.int64(0)), const(np.int64(0))])
    on = r.apply1("Gather", {"batch_dims": 0}, [values, const(np.int64(1)), const(np.int64(0))])
    return r.apply1("OneHot", {"axis": int(attrs.get("axis", -1))}, [idx, const(np.int64(depth)), on, off],
                    version="opset1")
# --- selections of a data-dependent size (nnefx extension operations nonzero, compress, unique) ---

def _flat_or_axis(r, c: NodeContext, x: Value, attrs) -> tuple[str, int]:
    """The tensor to select from and the axis: ``axis`` if the node has one, else flattened."""
    if "axis" in attrs:
        rank = len(x.shape) if x.shape is not None else None
        if rank is None:
            raise r.error("the input rank is not known")
        return c.tensor(0), norm_axis(c, int(attrs["axis"]), rank)
    flat = c.emit1("reshape", {"input": c.tensor(0)}, {"shape": [-1]}, dtype=dtype_of(x))
    return flat, 0


@onnx_node("NonZero")
def _onnx_nonzero(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    if x.is_const:
        a = np.asarray(x.const)
        return const(np.asarray(np.nonzero(a), np.int64).reshape(a.ndim, -1))
    c = r.ctx([x])
    return c.result(c.emit1("nonzero", {"input": c.tensor(0)}, dtype=dtype_of(x), out_dtype="integer"), "i64")


@onnx_node("Compress")
def _onnx_compress(r, attrs, ins):
    x, cond = onnx_need(r, ins, 0, "input"), onnx_need(r, ins, 1, "condition")
    if cond.etype != "boolean":
        raise r.error(f"the condition must be a bool tensor, is {cond.etype}")
    c = r.ctx([x, cond])
    src, axis = _flat_or_axis(r, c, x, attrs)
    y = c.emit1("compress", {"input": src, "condition": c.tensor(1)}, {"axis": axis}, dtype=dtype_of(x))
    return c.result(y, x.etype)


@onnx_node("Unique")
def _onnx_unique(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    c = r.ctx([x])
    src, axis = _flat_or_axis(r, c, x, attrs)
    outs = c.emit("unique", {"input": src}, {"axis": axis, "sorted": bool(attrs.get("sorted", 1))}, outputs=4,
                  dtype=dtype_of(x))
    for name in outs[1:]:
        r.builder.graph.tensors[name].dtype = "integer"
        r.builder.graph.tensors[name].etype = None  # int64 (the default), whatever the data's type
    return [c.result(outs[0], x.etype)] + [c.result(name, "i64", port=k + 1) for k, name in enumerate(outs[1:])]


# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("slice")
def slice_to_ir(ctx: IRContext, op: Operation) -> None:
    from ...ops.shape import _slice_plan

    x = op.inputs["input"]
    plan = _slice_plan(ctx.shape(x), op.attribs["axes"], op.attribs["begin"], op.attribs["end"],
                       op.attribs.get("stride", []))
    ctx.bind(out(op), slice_layer(ctx, x, plan, out_shape(ctx, op)))


@to_onnx("slice")
def slice_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    from ...ops.shape import _slice_plan

    x = ctx.ref(op.inputs["input"])
    plan = _slice_plan(ctx.dims(x), op.attribs["axes"], op.attribs["begin"], op.attribs["end"],
                       op.attribs.get("stride", []))
    if any(b is None for _, b, _, _ in plan):
        raise ctx.fail(f"slicing needs the static extents of axes {list(op.attribs['axes'])}")
    axes, starts, ends, steps = nnef_attrs.slice_bounds(plan)
    if not axes:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    ctx.bind(out(op), ctx.node("Slice", [x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(steps)],
                               ctx.dims(out(op))))


@to_ir("ir_strided_slice")
def ir_strided_slice_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    plan = [(i, int(b), int(s), shape[i]) for i, (b, s) in enumerate(zip(op.attribs["begin"], op.attribs["stride"],
                                                                             strict=True))]
    plan = [p for p in plan if not (p[1] == 0 and p[2] == 1 and p[3] == ctx.shape(x)[p[0]])]
    ctx.bind(out(op), slice_layer(ctx, x, plan, shape))


@to_onnx("ir_strided_slice")
def ir_strided_slice_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # begin/end are resolved already (in range; end -1 with a negative stride = through 0)
    x = ctx.ref(op.inputs["input"])
    begin, end, stride = ([int(v) for v in op.attribs[k]] for k in ("begin", "end", "stride"))
    ends = [nnef_attrs.slice_stop(e, st) for e, st in zip(end, stride, strict=True)]
    ctx.bind(out(op), ctx.node("Slice", [x, ctx.ints(begin), ctx.ints(ends), ctx.ints(range(len(begin))),
                                         ctx.ints(stride)], ctx.dims(out(op))))


@to_ir("gather", "gather_axis")
def gather_to_ir(ctx: IRContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    axis = int(op.attribs.get("axis", 0))
    data = ctx.data(idx)
    iref = ctx.const(np.asarray(data, dtype=np.int64), "i64") if data is not None else ctx.ref(idx)
    ctx.bind(out(op), ctx.layer("Gather", [x, iref, ctx.const(np.asarray(axis), "i64")], out_shape(ctx, op),
                                etype=ctx.etype(x), attrs={"batch_dims": int(op.attribs.get("batch_dims", 0))},
                                version="opset8"))


@to_onnx("gather")
def gather_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    iref = ctx.ref(idx, I64)
    ctx.bind(out(op), ctx.node("Gather", [x, iref], ctx.dims(out(op)), dtype=ctx.dtype(x),
                               axis=int(op.attribs.get("axis", 0))))


@to_onnx("gather_axis")
def ir_gather_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # Gather-8 = ONNX Gather (negative indices count from the end) when no batch dims
    if int(op.attribs.get("batch_dims", 0)) != 0:
        raise ctx.fallback("batch_dims has no ONNX Gather form")
    x = op.inputs["input"]
    ctx.bind(out(op), ctx.node("Gather", [x, ctx.ref(op.inputs["indices"], I64)], ctx.dims(out(op)),
                               dtype=ctx.dtype(x), axis=int(op.attribs["axis"])))


@to_ir("gather_elements", "gather_nd")
def ir_gather_elements_to_ir(ctx: IRContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    if op.op == "gather_elements":
        y = ctx.layer("GatherElements", [x, idx], out_shape(ctx, op), etype=ctx.etype(x), version="opset6",
                      attrs={"axis": int(op.attribs["axis"])})
    else:
        y = ctx.layer("GatherND", [x, idx], out_shape(ctx, op), etype=ctx.etype(x), version="opset8",
                      attrs={"batch_dims": int(op.attribs.get("batch_dims", 0))})
    ctx.bind(out(op), y)


@to_onnx("gather_elements", "gather_nd")
def ir_gather_elements_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    idx = ctx.ref(op.inputs["indices"], I64)
    if op.op == "gather_elements":
        y = ctx.node("GatherElements", [x, idx], ctx.dims(out(op)), dtype=ctx.dtype(x), axis=int(op.attribs["axis"]))
    else:
        y = ctx.node("GatherND", [x, idx], ctx.dims(out(op)), dtype=ctx.dtype(x),
                     batch_dims=int(op.attribs.get("batch_dims", 0)))
    ctx.bind(out(op), y)


@to_ir("one_hot")
def ir_one_hot_to_ir(ctx: IRContext, op: Operation) -> None:
    on = op.inputs["on_value"]
    et = ctx.etype(on)
    ctx.bind(out(op), ctx.layer("OneHot", [op.inputs["indices"], ctx.const(np.asarray(int(op.attribs["depth"])), "i64"),
                                           ctx.ref(on, et), ctx.ref(op.inputs["off_value"], et)],
                                out_shape(ctx, op), etype=et, attrs={"axis": int(op.attribs["axis"])}))


@to_ir("scatter")
def ir_scatter_to_ir(ctx: IRContext, op: Operation) -> None:
    data, idx, upd = op.inputs["data"], op.inputs["indices"], op.inputs["updates"]
    kind = str(op.attribs["kind"])
    shape = out_shape(ctx, op)
    axis = ctx.const(np.asarray(int(op.attribs.get("axis", 0))), "i64")
    if kind == "update":
        y = ctx.layer("ScatterUpdate", [data, idx, upd, axis], shape, etype=ctx.etype(data), version="opset3")
    elif kind == "nd":
        y = ctx.layer("ScatterNDUpdate", [data, idx, upd], shape, etype=ctx.etype(data), version="opset4")
    elif kind == "elements":
        y = ctx.layer("ScatterElementsUpdate", [data, idx, upd, axis], shape, etype=ctx.etype(data),
                      version="opset12", attrs={"reduction": str(op.attribs.get("reduction", "none")),
                                                "use_init_val": bool(op.attribs.get("use_init_val", True))})
    else:
        raise ctx.fail(f"scatter kind '{kind}' has no opset layer")
    ctx.bind(out(op), y)
