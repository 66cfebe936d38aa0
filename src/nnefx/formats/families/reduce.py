"""Reductions in the formats.

Covers NNEF operators §4.4 and the ``prod_reduce`` / ``cumulative_sum`` / ``top_k`` / ``ir_argmax`` extensions.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
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
    ctx.bind(out(op), reduce(ctx, kind, x, axes))


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
