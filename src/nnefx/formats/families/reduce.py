"""Reductions, TopK and CumSum: how each operator is read from IR and ONNX (and written, below).

Reduce{Mean,Sum,Max,Min,Prod,L1,L2,LogicalAnd,LogicalOr}, TopK, CumSum; ONNX Reduce*, ArgMax/ArgMin, CumSum.

Specifications: OpenVINO opset docs: Reduce*-1, TopK-1/3/11, CumSum-3; ONNX operator docs: Reduce*, ArgMax, ArgMin, CumSum.
"""

from __future__ import annotations

import numpy as np

from ..reading.context import NodeContext
from ..reading.conventions import binary, norm_axes, norm_axis, unary
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import const, dtype_of, element_type
from ..reading.values import ints as _ints
from ._common import onnx_ints, onnx_need, onnx_rank

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

@operator("TopK", ANY)
def _top_k(ctx: NodeContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.int("axis"), r)
    k = ctx.const_ints(1, "k")
    if len(k) != 1:
        raise ctx.error("k must be a single value")
    mode = ctx.choice("mode", ("max", "min"))
    sort = ctx.choice("sort", ("value", "index", "none"), "none")
    if dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error("TopK of integer tensors is not supported")
    iet = element_type(ctx.str("index_element_type", "i32"), ctx.location)
    vals, idx = ctx.emit("top_k", {"input": ctx.tensor(0)},
                         {"k": k[0], "axis": axis, "mode": mode, "sort": "index" if sort == "index" else "value"},
                         outputs=2)
    ctx.builder.graph.tensors[idx].dtype = "integer"
    return [ctx.result(vals, port=0), ctx.result(idx, iet, port=1)]

@operator("CumSum", ANY)
def _cumsum(ctx: NodeContext):
    r = ctx.in_rank(0)
    axis = norm_axis(ctx, ctx.const_ints(1, "axis")[0] if ctx.n_inputs > 1 else 0, r)
    if dtype_of(ctx.input(0)) != "scalar":
        raise ctx.error("CumSum of integer tensors is not supported")
    y = ctx.emit1("cumulative_sum", {"x": ctx.tensor(0)}, {"axis": axis, "exclusive": ctx.bool("exclusive", False),
                                                      "reverse": ctx.bool("reverse", False)})
    return ctx.result(y)

# --- reductions ------------------------------------------------------------------------------------

_REDUCE = {"ReduceMean": "mean_reduce", "ReduceSum": "sum_reduce", "ReduceMax": "max_reduce",
           "ReduceMin": "min_reduce", "ReduceL1": None, "ReduceL2": None, "ReduceProd": None,
           "ReduceLogicalAnd": "all_reduce", "ReduceLogicalOr": "any_reduce"}
_NP_REDUCE = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
              "ReduceProd": np.prod, "ReduceLogicalAnd": np.all, "ReduceLogicalOr": np.any}


@fold(list(_NP_REDUCE), OPSETS)
def _fold_reduce(ctx: NodeContext, arrays):
    x = arrays[0]
    if any(a.dtype == object for a in arrays):
        return None
    axes = tuple(norm_axes(ctx, _ints(arrays[1]), x.ndim))
    return np.asarray(_NP_REDUCE[ctx.type](x, axis=axes, keepdims=ctx.bool("keep_dims", False))).astype(
        x.dtype if ctx.type != "ReduceMean" or x.dtype.kind == "f" else np.float64)


@operator(list(_REDUCE), ANY)
def _reduce(ctx: NodeContext):
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


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("CumSum")
def _onnx_cumsum(r, attrs, ins):
    return r.apply1("CumSum", {"exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))},
                 [onnx_need(r, ins, 0, "x"), onnx_need(r, ins, 1, "axis")], version="opset3")

_onnx_RED = {"ReduceMean": "ReduceMean", "ReduceSum": "ReduceSum", "ReduceMax": "ReduceMax", "ReduceMin": "ReduceMin",
        "ReduceL2": "ReduceL2", "ReduceL1": "ReduceL1", "ReduceProd": "ReduceProd"}


@onnx_node(*_onnx_RED)
def _onnx_reduce(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    rank = onnx_rank(r, x)
    kind = r.node.op_type
    axes_from_input = r.opset >= 18 or (kind == "ReduceSum" and r.opset >= 13)
    if axes_from_input:
        axes = onnx_ints(r, ins[1], "axes") if len(ins) > 1 and ins[1] is not None else None
    else:
        axes = list(attrs["axes"]) if "axes" in attrs else None
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(rank))
    return r.apply1(_onnx_RED[kind], {"keep_dims": bool(attrs.get("keepdims", 1))}, [x, const(np.array(axes, np.int64))])


@onnx_node("ArgMax", "ArgMin")
def _onnx_arg(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    rank = onnx_rank(r, x)
    if attrs.get("select_last_index", 0):
        raise r.error("select_last_index=1 is not supported")
    axis = norm_axis(r, int(attrs.get("axis", 0)), rank)
    if x.etype not in ("f32", "f64", "f16"):
        raise r.error("ArgMax/ArgMin of integer tensors is not supported")
    c = r.ctx([x])
    op = "argmax_reduce" if r.node.op_type == "ArgMax" else "argmin_reduce"
    y = c.emit1(op, {"input": c.tensor(0)}, {"axes": [axis]}, out_dtype="integer")
    if not attrs.get("keepdims", 1):
        y = c.emit1("squeeze", {"input": y}, {"axes": [axis]}, dtype="integer")
    return c.result(y, "i64")
