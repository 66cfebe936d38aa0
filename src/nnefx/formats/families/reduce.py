"""Reductions, TopK and CumSum: how each operator is read from IR and ONNX (and written, below).

Reduce{Mean,Sum,Max,Min,Prod,L1,L2,LogicalAnd,LogicalOr}, TopK, CumSum; ONNX Reduce*, ArgMax/ArgMin, CumSum.

Specifications: OpenVINO opset docs: Reduce*-1, TopK-1/3/11, CumSum-3; ONNX operator docs: Reduce*, ArgMax, ArgMin, CumSum.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    binop,
    out,
    reshape,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape, reduce_layer, slice_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import I64, reduce
from ..onnx.writer import NUMPY, tensor_type
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import IndexPlan, binary, emit_index_plan, norm_axes, norm_axis, unary
from ..reading.registry import ANY, OPSETS, fold, onnx_node, operator
from ..reading.values import const, dtype_of, element_type, nnef_dtype
from ..reading.values import ints as _ints
from ._common import onnx_carried, onnx_emit, onnx_ints, onnx_kept_etypes, onnx_need, onnx_rank, onnx_write

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
    if ctx.type in ("ReduceMax", "ReduceMin") and dtype_of(ctx.input(0)) == "logical":
        # on booleans (false < true) the maximum is "any" and the minimum "all", empty sets included
        op, logical = ("any_reduce" if ctx.type == "ReduceMax" else "all_reduce"), True
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

_ORDERED = ("f32", "f64", "f16", "bf16")  # data the float top_k / cumulative_sum hold (narrower floats widened)


@onnx_node("CumSum")
def _onnx_cumsum(r, attrs, ins):
    x, axis = onnx_need(r, ins, 0, "x"), onnx_need(r, ins, 1, "axis")
    flags = {"exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))}
    if x.etype not in _ORDERED:  # integers: summed exactly in their own width
        onnx_kept_etypes(r, [x], narrow=False)
        if axis.etype != "i64":
            axis = r.apply1("Convert", {"destination_type": "i64"}, [axis])
        return onnx_emit(r, "onnx_cum_sum", {"x": x, "axis": axis}, flags, results=[x.etype],
                         dtype=nnef_dtype(x.etype))[0]
    return r.apply1("CumSum", flags, [x, axis], version="opset3")

_onnx_RED = {"ReduceMean": "ReduceMean", "ReduceSum": "ReduceSum", "ReduceMax": "ReduceMax", "ReduceMin": "ReduceMin",
        "ReduceL2": "ReduceL2", "ReduceL1": "ReduceL1", "ReduceProd": "ReduceProd"}


@onnx_node(*_onnx_RED)
def _onnx_reduce(r, attrs, ins, x=None, kind=None):
    """ONNX Reduce*; the readers of ReduceSumSquare/ReduceLogSum(Exp) pass their transformed ``x`` and the
    operator ``kind`` that reduces it (their axes are read by their own node's rules)."""
    x = onnx_need(r, ins, 0, "data") if x is None else x
    rank = onnx_rank(r, x)
    kind = kind or r.node.op_type
    axes_from_input = r.opset >= 18 or (r.node.op_type == "ReduceSum" and r.opset >= 13)
    if axes_from_input:
        axes = onnx_ints(r, ins[1], "axes") if len(ins) > 1 and ins[1] is not None else None
    else:
        axes = list(attrs["axes"]) if "axes" in attrs else None
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(rank))
    if x.etype[:1] in "iu" and kind in _INT_REDUCE and not x.is_const:
        return _onnx_reduce_integers(r, x, sorted(norm_axes(r, axes, rank)), _INT_REDUCE[kind],
                                     bool(attrs.get("keepdims", 1)))
    return r.apply1(_onnx_RED[kind], {"keep_dims": bool(attrs.get("keepdims", 1))}, [x, const(np.array(axes, np.int64))])


_INT_REDUCE = {"ReduceSum": "sum", "ReduceProd": "prod", "ReduceMax": "max", "ReduceMin": "min"}


def _onnx_reduce_integers(r, x, axes: list[int], op: str, keep: bool):
    """Integer data reduced in its own type (``onnx_reduce``: sums and products wrap, the
    empty set gives the identity); the reduced axes squeezed unless ``keepdims``."""
    onnx_kept_etypes(r, [x])
    y = onnx_emit(r, "onnx_reduce", {"input": x}, {"axes": axes, "op": op}, results=[x.etype], dtype="integer")[0]
    if keep:
        return y
    c = r.ctx([y])
    if len(axes) == len(x.shape):
        out = c.emit1("reshape", {"input": c.tensor(0)}, {"shape": []}, dtype="integer")
    else:
        out = c.emit1("squeeze", {"input": c.tensor(0)}, {"axes": axes}, dtype="integer")
    return c.result(out, x.etype)


@onnx_node("ArgMax", "ArgMin")
def _onnx_arg(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    rank = onnx_rank(r, x)
    axis = norm_axis(r, int(attrs.get("axis", 0)), rank)
    if x.etype not in ("f32", "f64", "f16"):
        onnx_kept_etypes(r, [x])  # integer and boolean data: the first of onnx_top_k's order
    c = r.ctx([x])
    op = "argmax_reduce" if r.node.op_type == "ArgMax" else "argmin_reduce"
    if attrs.get("select_last_index", 0):
        y = _arg_last(r, c, op, x, axis)
    else:
        y = _arg_first(c, op, x, c.tensor(0), axis)
    if not attrs.get("keepdims", 1):
        y = c.emit1("squeeze", {"input": y}, {"axes": [axis]}, dtype="integer")
    return c.result(y, "i64")


# --- ONNX operators of the onnx domain (ops/onnx/arith.py) ---------------------------------------

@onnx_node("CumProd")
def _onnx_cum_prod(r, attrs, ins):
    x = onnx_need(r, ins, 0, "x")
    onnx_kept_etypes(r, ins, widened=(1,))
    return onnx_emit(r, "onnx_cum_prod", {"x": x, "axis": onnx_need(r, ins, 1, "axis")},
                     {"exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))},
                     results=[x.etype], dtype=nnef_dtype(x.etype))[0]


@onnx_node("Hardmax")
def _onnx_hardmax(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    onnx_kept_etypes(r, ins)
    rank = onnx_rank(r, x)
    axis = norm_axis(r, int(attrs.get("axis", -1 if r.opset >= 13 else 1)), rank)
    if r.opset < 13 and axis != rank - 1:
        # Hardmax-1/11 take the maximum over the flattened axes [axis, rank): not one axis
        raise r.error(f"Hardmax before opset 13 with axis = {axis} of a rank-{rank} input (a maximum over "
                      "several flattened axes) is not supported")
    return onnx_emit(r, "onnx_hardmax", {"input": x}, {"axis": axis}, results=[x.etype])[0]


def _arg_first(c, op: str, x, tensor: str, axis: int) -> str:
    """The first index of the extreme along ``axis`` (kept with extent 1): ``argmax_reduce`` /
    ``argmin_reduce`` of floats; of integer and boolean data (which those hold as float32) the
    index ``onnx_top_k`` puts first with k = 1 — equal values by index, so the first."""
    if x.etype in ("f32", "f64", "f16"):
        return c.emit1(op, {"input": tensor}, {"axes": [axis]}, out_dtype="integer")
    _, idx = c.emit("onnx_top_k", {"input": tensor}, {"k": 1, "axis": axis, "largest": op == "argmax_reduce"},
                    outputs=2, dtype=dtype_of(x))
    c.builder.graph.tensors[idx].dtype = "integer"
    c.builder.graph.tensors[idx].etype = None  # int64
    return idx


def _arg_last(r, c, op: str, x, axis: int) -> str:
    """The last index of the extreme (``select_last_index``): extent - 1 - the first index in the
    input reversed along ``axis``."""
    n = x.shape[axis]
    if n is None:
        raise r.error("select_last_index=1 needs the extent of the reduced axis known while loading")
    plan = IndexPlan([("slice", None, None, 1)] * axis + [("slice", None, None, -1)])
    flipped = emit_index_plan(c, plan, x, c.tensor(0))
    first = _arg_first(c, op, x, flipped, axis)
    last = r.apply1("Subtract", {"auto_broadcast": "numpy"},
                    [const(np.int64(n - 1)), c.result(first, "i64")])
    return c.tensor_of(last)


# --- ONNX TopK (ONNX operator docs: equal values keep the lower index first) ----------------------

@onnx_node("TopK")
def _onnx_top_k(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_carried(r, x)
    k = [int(attrs["k"])] if r.opset < 10 else onnx_ints(r, onnx_need(r, ins, 1, "K"), "K")
    if len(k) != 1 or k[0] < 0:
        raise r.error(f"K {k} must be one value of at least 0")
    if x.etype not in _ORDERED or k[0] == 0:
        # integer and boolean data ordered exactly in their own type; K = 0: empty results
        if x.etype not in _ORDERED:
            onnx_kept_etypes(r, [x])
        return onnx_emit(r, "onnx_top_k", {"input": x},
                         {"k": k[0], "axis": int(attrs.get("axis", -1)), "largest": bool(attrs.get("largest", 1))},
                         results=[x.etype, "i64"], dtype=nnef_dtype(x.etype))
    mode = "max" if attrs.get("largest", 1) else "min"
    return r.apply("TopK", {"axis": int(attrs.get("axis", -1)), "mode": mode, "sort": "value",
                            "index_element_type": "i64"}, [x, const(np.int64(k[0]))], n_out=2, version="opset11")


# --- ONNX ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (ONNX operator docs: their function bodies) ---

@onnx_node("ReduceSumSquare")
def _onnx_reduce_sum_square(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    onnx_carried(r, x)
    return _onnx_reduce(r, attrs, ins, r.apply1("Multiply", {"auto_broadcast": "numpy"}, [x, x]), "ReduceSum")


@onnx_node("ReduceLogSum")
def _onnx_reduce_log_sum(r, attrs, ins):
    x = onnx_need(r, ins, 0, "data")
    onnx_carried(r, x, floating=True)
    return r.apply1("Log", {}, [_onnx_reduce(r, attrs, ins, x, "ReduceSum")])


@onnx_node("ReduceLogSumExp")
def _onnx_reduce_log_sum_exp(r, attrs, ins):
    # log(sum(exp(x - m))) + m with m the maximum over the finite items (ONNX's reference does the
    # same): exact where exp(x) would overflow float32, and +inf items still give +inf.
    x = onnx_need(r, ins, 0, "data")
    onnx_carried(r, x, floating=True)
    keep = {**attrs, "keepdims": 1}
    finite = r.apply1("Select", {"auto_broadcast": "numpy"},
                      [r.apply1("IsInf", {}, [x], version="opset10"), const(np.float32(-np.inf)), x])
    m = _onnx_reduce(r, keep, ins, finite, "ReduceMax")
    e = r.apply1("Exp", {}, [r.apply1("Subtract", {"auto_broadcast": "numpy"}, [x, m])])
    y = r.apply1("Add", {"auto_broadcast": "numpy"}, [r.apply1("Log", {}, [_onnx_reduce(r, keep, ins, e, "ReduceSum")]), m])
    if attrs.get("keepdims", 1):
        return y
    return _onnx_reduce(r, attrs, ins, y, "ReduceMax")


# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------

_REDUCE_ir = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "any": "ReduceLogicalOr", "all": "ReduceLogicalAnd"}


# --- ONNX helpers ----------------------------------------------------------------------------

BOOL = NUMPY["logical"]


_REDUCE_onnx = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "any": "ReduceMax", "all": "ReduceMin"}


# --- writers --------------------------------------------------------------------------------------

@to_ir(*nnef_attrs.REDUCTIONS)
def reduce_to_ir(ctx: IRContext, op: Operation) -> None:
    kind = _REDUCE_ir[nnef_attrs.reduction(op)]
    x = op.inputs["input"]
    axes = [int(a) for a in op.attribs["axes"]]
    if not axes:
        ctx.bind(out(op), ctx.ref(x))
        return
    if kind in ("ReduceMax", "ReduceMin") and any(ctx.shape(x)[a] == 0 for a in axes):
        # the empty set's maximum is -inf (minimum +inf); OpenVINO's CPU plugin answers the
        # lowest (highest) finite value of the type instead
        raise ctx.fallback(f"{kind} over an empty axis: IR has no layer giving its identity "
                           f"({'-inf' if kind == 'ReduceMax' else '+inf'})")
    ctx.bind(out(op), ctx.layer(kind, [x, ctx.ints(axes)], out_shape(ctx, op), attrs={"keep_dims": True}))


@to_onnx(*nnef_attrs.REDUCTIONS)
def reduce_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    what = nnef_attrs.reduction(op)
    kind = _REDUCE_onnx[what]
    x = ctx.ref(op.inputs["input"])
    axes = [int(a) for a in op.attribs["axes"]]
    if not axes:   # nothing reduced (ONNX would reduce everything)
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    if what in ("any", "all"):
        # no logical reductions before opset 20: max/min over 0/1 integers
        xi = ctx.node("Cast", [x], ctx.dims(x), dtype=np.int32, to=tensor_type(np.int32))
        r = reduce(ctx, kind, xi, axes)
        ctx.bind(out(op), ctx.node("Cast", [r], ctx.dims(r), dtype=BOOL, to=tensor_type(BOOL)))
        return
    if what == "mean" and _spatial_mean(ctx, x, axes):
        # A mean over every spatial axis of an (N, C, ...) tensor is GlobalAveragePool, the
        # form onnxruntime's NCHWc layout pass keeps blocked: ReduceMean there makes it
        # reorder the whole activation back to NCHW first (ResNet-50's last one at batch 8:
        # [8, 2048, 7, 7] reordered instead of [8, 2048, 1, 1]).
        ctx.bind(out(op), ctx.node("GlobalAveragePool", [x], nnef_attrs.reduced_shape(ctx.dims(x), axes)))
        return
    ctx.bind(out(op), reduce(ctx, kind, x, axes))


def _spatial_mean(ctx: OnnxContext, x: str, axes: list[int]) -> bool:
    """Whether a mean over ``axes`` of ``x`` is GlobalAveragePool's (ONNX operator docs:
    GlobalAveragePool-1, T float16/float/double): every axis from 2 on of a tensor of rank >= 3,
    none of them empty (the mean of nothing is NaN; the pooling's is not specified)."""
    dims = ctx.dims(x)
    return (len(dims) >= 3 and sorted(a % len(dims) for a in axes) == list(range(2, len(dims)))
            and all(d is not None and d > 0 for d in dims[2:])
            and ctx.dtype(x) in (np.float16, np.float32, np.float64))


@to_ir("ir_argmax")
def ir_argmax_to_ir(ctx: IRContext, op: Operation) -> None:
    # Caffe ArgMax breaks ties toward the *higher* index; TopK-11 with stable=true toward the
    # lower one.  Reversing the axis first makes the two agree exactly.
    x = ctx.ref(op.inputs["input"])
    xs = ctx.shape(x)
    k = int(op.attribs.get("top_k", 1))
    keep_vals = bool(op.attribs.get("out_max_val", False))
    axis = [int(a) for a in op.attribs.get("axis", [])]
    if axis:
        a = axis[0] % len(xs)
    else:
        xs = (xs[0], int(np.prod(xs[1:], dtype=np.int64)))
        x = reshape(ctx, x, xs)
        a = 1
    n = xs[a]
    rev = slice_layer(ctx, x, [(a, n - 1, -1, n)], xs)
    ks = tuple(k if i == a else d for i, d in enumerate(xs))
    vals, idx = ctx.layer("TopK", [rev, ctx.const(np.asarray(k), "i64")], outputs=[(ks, "f32"), (ks, "i64")],
                          attrs={"axis": a, "mode": "max", "sort": "value", "index_element_type": "i64",
                                 "stable": True}, version="opset11")
    orig = binop(ctx, "sub", ctx.const(np.asarray(n - 1), "i64"), idx)
    orig = ctx.layer("Convert", [orig], ks, etype="f32", attrs={"destination_type": "f32"})
    shape = out_shape(ctx, op)
    if axis:
        ctx.bind(out(op), vals if keep_vals else orig)
        return
    parts = [orig] + ([vals] if keep_vals else [])
    parts = [ctx.layer("Unsqueeze", [p, ctx.ints([1])], (xs[0], 1, k)) for p in parts]
    ctx.bind(out(op), parts[0] if len(parts) == 1 else ctx.layer("Concat", parts, shape, attrs={"axis": 1}))


@to_ir("moments")
def moments_to_ir(ctx: IRContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    shape = ctx.shape(x)
    axes = [int(a) for a in op.attribs["axes"]]
    mean = reduce_layer(ctx, "ReduceMean", x, axes, shape)
    d = binop(ctx, "sub", x, mean)
    var = reduce_layer(ctx, "ReduceMean", binop(ctx, "mul", d, d), axes, shape)
    ctx.bind(out(op, 0), mean)
    ctx.bind(out(op, 1), var)


@to_onnx("moments")
def moments_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    axes = [int(a) for a in op.attribs["axes"]]
    mean = reduce(ctx, "ReduceMean", x, axes)
    d = binop(ctx, "sub", x, mean)
    ctx.bind(out(op, 0), mean)
    ctx.bind(out(op, 1), reduce(ctx, "ReduceMean", binop(ctx, "mul", d, d), axes))


@to_ir("argmax_reduce", "argmin_reduce")
def arg_reduce_to_ir(ctx: IRContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    xs = ctx.shape(x)
    axes = sorted(int(a) % len(xs) for a in op.attribs["axes"])
    name = op.op[:6]   # argmax / argmin
    if len(axes) != 1:
        raise ctx.fail(f"{name} over several axes {axes} (a flattened index) has no TopK form")
    if xs[axes[0]] == 0:
        raise ctx.fail(f"{name} over an empty axis has no index to give")
    ks = nnef_attrs.reduced_shape(xs, axes)
    # the first extreme wins, as TopK-11 with stable=true keeps it
    _, idx = ctx.layer("TopK", [x, ctx.const(np.asarray(1), "i64")], outputs=[(ks, ctx.etype(x)), (ks, "i64")],
                       attrs={"axis": axes[0], "mode": name[3:], "sort": "value", "index_element_type": "i64",
                              "stable": True}, version="opset11")
    ctx.bind(out(op), idx)


@to_onnx("argmax_reduce", "argmin_reduce")
def arg_reduce_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # the first extreme wins (select_last_index = 0); several axes: the index into the
    # row-major flattening of those axes, so move them last, flatten them, and move back
    x = ctx.ref(op.inputs["input"])
    dims = ctx.dims(x)
    r = len(dims)
    axes = sorted({int(a) % r for a in op.attribs["axes"]})
    kind = "ArgMax" if op.op == "argmax_reduce" else "ArgMin"
    if any(dims[a] == 0 for a in axes):
        raise ctx.fail(f"{kind} over an empty axis has no index to give")
    if not axes:
        ctx.bind(out(op), ctx.const(np.zeros([d for d in ctx.shape(x)], np.int64)))
        return
    if len(axes) == 1:
        ctx.bind(out(op), ctx.node(kind, [x], nnef_attrs.reduced_shape(dims, axes), dtype=I64, axis=axes[0], keepdims=1, select_last_index=0))
        return
    kept = [k for k in range(r) if k not in axes]
    perm = kept + axes
    t = ctx.node("Transpose", [x], tuple(dims[p] for p in perm), perm=perm)
    vol = None if any(dims[a] is None for a in axes) else int(np.prod([dims[a] for a in axes]))
    flat = ctx.node("Reshape", [t, ctx.ints([0] * len(kept) + [-1])], tuple(dims[k] for k in kept) + (vol,))
    idx = ctx.node(kind, [flat], tuple(dims[k] for k in kept) + (1,), dtype=I64, axis=len(kept), keepdims=1,
                   select_last_index=0)
    idx = ctx.node("Unsqueeze", [idx, ctx.ints(range(len(kept) + 1, r))], tuple(dims[k] for k in kept) + (1,) * len(axes))
    inv = [perm.index(k) for k in range(r)]
    ctx.bind(out(op), ctx.node("Transpose", [idx], ctx.dims(out(op)), perm=inv))


@to_ir("top_k")
def ir_top_k_to_ir(ctx: IRContext, op: Operation) -> None:
    # 'ties keep the lower index' = TopK-11 with stable=true
    x = op.inputs["input"]
    names = op.output_names()
    vals, idx = ctx.layer("TopK", [x, ctx.const(np.asarray(int(op.attribs["k"])), "i64")],
                          outputs=[(ctx.shape(names[0]), ctx.etype(x)), (ctx.shape(names[1]), "i64")],
                          attrs={"axis": int(op.attribs["axis"]), "mode": str(op.attribs.get("mode", "max")),
                                 "sort": str(op.attribs.get("sort", "value")), "index_element_type": "i64",
                                 "stable": True}, version="opset11")
    ctx.bind(names[0], vals)
    ctx.bind(names[1], idx)


@to_onnx("top_k")
def ir_top_k_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # values sorted, ties keep the lower index: ONNX TopK's own rule
    if str(op.attribs.get("sort", "value")) != "value" and int(op.attribs["k"]) != 1:
        raise ctx.fallback(f"sort '{op.attribs.get('sort')}' has no TopK form")
    x = ctx.ref(op.inputs["input"])
    names = op.output_names()
    vals, idx = ctx.node("TopK", [x, ctx.ints([int(op.attribs["k"])])],
                         outputs=[(ctx.dims(names[0]), ctx.dtype(x)), (ctx.dims(names[1]), I64)],
                         axis=int(op.attribs["axis"]), largest=int(op.attribs.get("mode", "max") == "max"), sorted=1)
    ctx.bind(names[0], vals)
    ctx.bind(names[1], idx)


@to_ir("cumulative_sum")
def ir_cumsum_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("CumSum", [op.inputs["x"], ctx.const(np.asarray(int(op.attribs["axis"])), "i64")],
                                out_shape(ctx, op), version="opset3",
                                attrs={"exclusive": bool(op.attribs.get("exclusive", False)),
                                       "reverse": bool(op.attribs.get("reverse", False))}))


@to_onnx("cumulative_sum")
def ir_cumsum_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    axis = ctx.const(np.asarray(int(op.attribs["axis"]), np.int64))
    ctx.bind(out(op), ctx.node("CumSum", [x, axis], ctx.dims(x), exclusive=int(bool(op.attribs.get("exclusive"))),
                               reverse=int(bool(op.attribs.get("reverse")))))


@to_ir("prod_reduce")
def ir_reduce_prod_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("ReduceProd", [op.inputs["input"], ctx.ints(op.attribs["axes"])], out_shape(ctx, op),
                                attrs={"keep_dims": True}))


@to_onnx("prod_reduce")
def ir_reduce_prod_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    axes = [int(a) for a in op.attribs["axes"]]
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), reduce(ctx, "ReduceProd", x, axes) if axes else unop(ctx, "copy", x))


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

@to_onnx("onnx_cum_prod")
def cum_prod_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "CumProd", [op.inputs["x"], op.inputs["axis"]], 26,
               exclusive=int(bool(op.attribs.get("exclusive", False))), reverse=int(bool(op.attribs.get("reverse", False))))


@to_onnx("onnx_cum_sum")
def cum_sum_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "CumSum", [op.inputs["x"], op.inputs["axis"]], 14, exclusive=int(bool(op.attribs.get("exclusive", False))),
               reverse=int(bool(op.attribs.get("reverse", False))))


@to_onnx("onnx_top_k")
def top_k_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "TopK", [op.inputs["input"], np.array([int(op.attribs["k"])], np.int64)], 11,
               keep=("axis", "largest"), axis=int(op.attribs.get("axis", -1)),
               largest=int(bool(op.attribs.get("largest", True))))


@to_onnx("onnx_reduce")
def onnx_reduce_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    kind = {"sum": "ReduceSum", "prod": "ReduceProd", "max": "ReduceMax", "min": "ReduceMin"}[op.attribs["op"]]
    onnx_write(ctx, op, kind, [op.inputs["input"], np.array(op.attribs["axes"], np.int64)], 18, keepdims=1)


@to_onnx("onnx_hardmax")
def hardmax_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "Hardmax", [op.inputs["input"]], 13, axis=int(op.attribs.get("axis", -1)))
