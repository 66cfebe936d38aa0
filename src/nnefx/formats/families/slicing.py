"""Slicing and gathering in the formats.

Covers NNEF ``slice`` (§4.5), ``gather`` and the opset gather/scatter layers kept as ``ir_*`` extensions.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
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
