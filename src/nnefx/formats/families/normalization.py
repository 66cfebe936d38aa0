"""Softmax and normalisations: how each operator is read from IR and ONNX (and written, below).

Softmax, LogSoftmax, MVN, NormalizeL2, BatchNormInference, LRN, GroupNormalization; ONNX Softmax,
LogSoftmax, BatchNormalization, LayerNormalization, InstanceNormalization, LRN.

Specifications: OpenVINO opset docs: SoftMax-1/8, LogSoftmax-5, MVN-1/6, NormalizeL2-1, BatchNormInference-1/5, LRN-1,
GroupNormalization-12; ONNX operator docs of the same names.
"""

from __future__ import annotations

import math

import numpy as np

from ... import etypes
from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    aligned,
    binop,
    channel_vector,
    literal,
    operands,
    out,
    scalar,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import reduce_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, reduce
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import binary, const_value, norm_axes, norm_axis, unary
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, const
from ._common import (
    onnx_carried,
    onnx_const,
    onnx_emit,
    onnx_kept_etypes,
    onnx_need,
    onnx_present,
    onnx_rank,
    onnx_write,
)

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


@operator(("Softmax", "SoftMax"), ANY)
def _softmax(ctx: NodeContext):
    axis = norm_axis(ctx, ctx.int("axis", 1), ctx.in_rank(0))
    x = ctx.tensor(0)
    if ctx.builder.concrete and etypes.kernel_dtype(etypes.of(ctx.builder.graph.tensors[x])) is not None:
        # ONNX defines Softmax-13 by its function body (ReduceMax, Sub, Exp, ReduceSum, Div),
        # each result in the input's type: a float16 softmax rounds after each step, not
        # once, so a narrow-float input is read as that body (one registry operation each)
        m = ctx.emit1("max_reduce", {"input": x}, {"axes": [axis]})
        e = unary(ctx, "exp", binary(ctx, "sub", x, m))
        return ctx.result(binary(ctx, "div", e, ctx.emit1("sum_reduce", {"input": e}, {"axes": [axis]})))
    return ctx.result(ctx.emit1("softmax", {"x": x}, {"axes": [axis]}))


@operator("LogSoftmax", ANY)
def _log_softmax(ctx: NodeContext):
    axis = norm_axis(ctx, ctx.int("axis", 1), ctx.in_rank(0))
    x = ctx.tensor(0)
    m = ctx.emit1("max_reduce", {"input": x}, {"axes": [axis]})
    d = binary(ctx, "sub", x, m)
    s = ctx.emit1("sum_reduce", {"input": unary(ctx, "exp", d)}, {"axes": [axis]})
    return ctx.result(binary(ctx, "sub", d, unary(ctx, "log", s)))


def _mvn(ctx: NodeContext, x: str, axes: list[int], normalize: bool, eps: float, inside: bool) -> str:
    mean = ctx.emit1("mean_reduce", {"input": x}, {"axes": axes})
    d = binary(ctx, "sub", x, mean)
    if not normalize:
        return d
    var = ctx.emit1("mean_reduce", {"input": binary(ctx, "mul", d, d)}, {"axes": axes})
    if inside:
        den = unary(ctx, "sqrt", binary(ctx, "add", var, eps))
    else:
        den = binary(ctx, "add", unary(ctx, "sqrt", var), eps)
    return binary(ctx, "div", d, den)


@operator("MVN", ("opset6",))
def _mvn6(ctx: NodeContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    mode = ctx.choice("eps_mode", ("inside_sqrt", "outside_sqrt"))
    y = _mvn(ctx, ctx.tensor(0), axes, ctx.bool("normalize_variance"), ctx.float("eps"), mode == "inside_sqrt")
    return ctx.result(y)


@operator("MVN", ("opset2", "opset1"))
def _mvn1(ctx: NodeContext):
    r = ctx.in_rank(0)
    if ctx.has("reduction_axes"):
        axes = sorted(norm_axes(ctx, ctx.ints("reduction_axes"), r))
    else:
        axes = list(range(1 if ctx.bool("across_channels", False) else 2, r))
    y = _mvn(ctx, ctx.tensor(0), axes, ctx.bool("normalize_variance", False), ctx.float("eps"), False)
    return ctx.result(y)


@operator("NormalizeL2", ANY)
def _normalize_l2(ctx: NodeContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    eps = ctx.float("eps")
    mode = ctx.choice("eps_mode", ("add", "max"))
    x = ctx.tensor(0)
    if mode == "max":
        # x / sqrt(max(sum x^2, eps)) == x / max(sqrt(sum x^2), sqrt(eps))
        y = ctx.emit1("l2_normalization", {"input": x}, {"axes": axes, "bias": 0.0, "epsilon": math.sqrt(eps)})
        return ctx.result(y)
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": axes})
    return ctx.result(binary(ctx, "div", x, unary(ctx, "sqrt", binary(ctx, "add", s, eps))))


def _channel_param(ctx: NodeContext, i: int, rank: int) -> str:
    """A per-channel [C] parameter as an NNEF [1, C] tensor (channel axis 1)."""
    v = ctx.input(i)
    if v.is_const:
        return const_value(ctx, np.asarray(v.const).reshape(1, -1), v.etype)
    return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [0]})


@operator("BatchNormInference", ANY)
def _batch_norm(ctx: NodeContext):
    ctx.expect_inputs(5)
    if ctx.version == "opset1":
        gi, bi, xi, mi, vi = 0, 1, 2, 3, 4
    else:
        xi, gi, bi, mi, vi = 0, 1, 2, 3, 4
    r = ctx.in_rank(xi)
    p = {k: _channel_param(ctx, i, r) for k, i in (("scale", gi), ("offset", bi), ("mean", mi), ("variance", vi))}
    y = ctx.emit1("batch_normalization", {"input": ctx.tensor(xi), "mean": p["mean"], "variance": p["variance"],
                                          "offset": p["offset"], "scale": p["scale"]},
                  {"epsilon": ctx.float("epsilon")})
    return ctx.result(y)

@operator("LRN", ANY)
def _lrn(ctx: NodeContext):
    r = ctx.in_rank(0)
    axes = sorted(norm_axes(ctx, ctx.const_ints(1, "axes"), r))
    n = ctx.int("size")
    if n < 1:
        raise ctx.error(f"attribute 'size' = {n} must be >= 1")
    # OpenVINO sums over [c - (size-1)/2, c + (size-1)/2] (integer halves: an even size covers
    # size-1 elements, checked against OpenVINO) but scales by alpha / size^len(axes). NNEF's
    # box(normalize = true) divides by its own window volume, so the odd window w is used and
    # alpha rescaled by (w / size)^len(axes); automatic padding centres an odd window exactly.
    w = 2 * ((n - 1) // 2) + 1
    size = [w if a in axes else 1 for a in range(r)]
    alpha = ctx.float("alpha") * (w / n) ** len(axes)
    y = ctx.emit1("local_response_normalization", {"input": ctx.tensor(0)},
                  {"size": size, "alpha": alpha, "beta": ctx.float("beta"), "bias": ctx.float("bias")})
    return ctx.result(y)

@operator("GroupNormalization", ANY)
def _group_normalization(ctx: NodeContext):
    shape = ctx.in_shape(0)
    if shape is None or len(shape) < 2 or shape[1] is None:
        raise ctx.error("GroupNormalization needs a known channel extent")
    g = ctx.int("num_groups")
    c = shape[1]
    if g < 1 or c % g:
        raise ctx.error(f"{c} channels do not divide into num_groups = {g}")
    r = len(shape)
    x = ctx.tensor(0)
    t = ctx.emit1("reshape", {"input": x}, {"shape": [g, -1], "axis_start": 1, "axis_count": -1})
    t = _mvn(ctx, t, [2], True, ctx.float("epsilon"), True)
    if any(d is None for d in shape[1:]):  # dynamic spatial extents: restore the shape at run time
        s_t = ctx.emit1("tensor_shape", {"input": x}, dtype="scalar", out_dtype="integer")
        t = ctx.emit1("reshape_to", {"input": t, "shape": s_t}, {"special_zero": False}, dtype="scalar")
    else:
        t = ctx.emit1("reshape", {"input": t}, {"shape": [int(d) for d in shape[1:]], "axis_start": 1,
                                                "axis_count": -1})

    def per_channel(i: int) -> str:
        v = ctx.input(i)
        if v.is_const:
            return const_value(ctx, np.asarray(v.const).reshape((1, -1) + (1,) * (r - 2)), v.etype)
        return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [0] + list(range(2, r))})

    y = binary(ctx, "add", binary(ctx, "mul", t, per_channel(1)), per_channel(2))
    return ctx.result(y)


# --- GRN (an exact composition of standard operations) -------------------------------------------


@operator("GRN", ANY)
def _grn_opset(ctx: NodeContext):
    # OpenVINO opset1 GRN: x / sqrt(sum over channels (axis 1) of x^2 + bias); the bias sits
    # under the root, so this is not NNEF's l2_normalization (bias added to the root).
    ctx.expect_inputs(1)
    if ctx.in_rank(0) < 2:
        raise ctx.error("GRN needs an input of rank 2 or more (channels on axis 1)")
    bias = ctx.float("bias")
    if not bias >= 0:
        raise ctx.error(f"bias = {bias} must be a non-negative number")
    x = ctx.tensor(0)
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": [1]})
    return ctx.result(binary(ctx, "div", x, unary(ctx, "sqrt", binary(ctx, "add", s, bias))))


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("Softmax", "LogSoftmax")
def _onnx_softmax(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    rank = onnx_rank(r, x)
    kind = r.node.op_type
    if r.opset >= 13:
        return r.apply1(kind, {"axis": int(attrs.get("axis", -1))}, [x])
    axis = norm_axis(r, int(attrs.get("axis", 1)), rank)
    if axis == rank - 1:
        return r.apply1(kind, {"axis": axis}, [x])
    # opset < 13: the input is seen as a 2-D [prod(:axis), prod(axis:)] matrix
    shape = x.shape
    if any(d is None for d in shape):
        raise r.error("Softmax (opset < 13) needs a static input shape")
    flat = r.apply1("Reshape", {"special_zero": False}, [x, const(np.array(
        [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))], np.int64))])
    y = r.apply1(kind, {"axis": 1}, [flat])
    return r.apply1("Reshape", {"special_zero": False}, [y, const(np.array(shape, np.int64))])

@onnx_node("BatchNormalization")
def _onnx_batch_norm(r, attrs, ins):
    vals = [onnx_need(r, ins, i, "input") for i in range(5)]
    # training: BatchNormalization-14/15's training_mode; before 14 the node is in training when
    # it names more outputs than Y ("five outputs in training mode, one in test mode")
    named = len([o for o in r.node.output if o])
    if (int(attrs.get("training_mode", 0)) if r.opset >= 14 else named > 1 and not int(attrs.get("is_test", 0))):
        return _onnx_batch_norm_training(r, attrs, vals)
    out = r.apply1("BatchNormInference", {"epsilon": float(attrs.get("epsilon", 1e-5))}, vals, version="opset5")
    if named > 1:
        return [out] + [Value(unsupported="BatchNormalization with is_test=1 has no statistics outputs")] * 4
    return out


def _onnx_batch_norm_training(r, attrs, vals: list[Value]) -> list[Value]:
    """BatchNormalization in training mode (ONNX BatchNormalization-15): Y normalised with the
    statistics of this batch — the mean and the population variance over every axis but the
    channels (1) — and the running statistics ``mean * momentum + batch * (1 - momentum)``.
    Nothing random: the same inputs give the same outputs.  Before opset 14 the outputs are
    Y, the running mean and variance, then the batch's (saved) mean and variance."""
    x, scale, bias, mean_in, var_in = vals
    onnx_carried(r, x, floating=True)
    rank = onnx_rank(r, x)
    if rank < 2:
        raise r.error("BatchNormalization needs an input of rank 2 or more (channels on axis 1)")
    eps = float(attrs.get("epsilon", 1e-5))
    momentum = float(attrs.get("momentum", 0.9))
    ftype = etypes.numpy_dtype(x.etype).type if x.etype in ("f16", "f32", "f64") else np.float32
    axes = const(np.array([0] + list(range(2, rank)), np.int64))

    def op(kind, a, b):
        return r.apply1(kind, {"auto_broadcast": "numpy"}, [a, b])

    def per_channel(v):  # a [C] tensor as [C, 1, ...], beside the kept axes of a [1, C, 1, ...] mean
        return r.apply1("Reshape", {"special_zero": False}, [v, const(np.array([-1] + [1] * (rank - 2), np.int64))])

    def flat(v):  # [1, C, 1, ...] -> [C]
        return r.apply1("Reshape", {"special_zero": False}, [v, const(np.array([-1], np.int64))])

    m = r.apply1("ReduceMean", {"keep_dims": True}, [x, axes])
    d = op("Subtract", x, m)
    v = r.apply1("ReduceMean", {"keep_dims": True}, [op("Multiply", d, d), axes])
    y = op("Divide", d, r.apply1("Sqrt", {}, [op("Add", v, const(ftype(eps)))]))
    y = op("Add", op("Multiply", y, per_channel(scale)), per_channel(bias))
    bm, bv = flat(m), flat(v)

    def running(old, batch):
        return op("Add", op("Multiply", old, const(ftype(momentum))), op("Multiply", batch, const(ftype(1 - momentum))))

    outs = [y, running(mean_in, bm), running(var_in, bv)]
    if r.opset < 14:
        outs += [bm, bv] if r.opset >= 9 else \
            [Value(unsupported="the saved statistics of BatchNormalization before opset 9 are not supported")] * 2
    return outs


@onnx_node("LayerNormalization")
def _onnx_layer_norm(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    rank = onnx_rank(r, x)
    axis = norm_axis(r, int(attrs.get("axis", -1)), rank)
    eps = float(attrs.get("epsilon", 1e-5))
    stash_type = int(attrs.get("stash_type", 1))
    if stash_type != 1 or any(r.node.output[1:]) or x.etype != "f32":
        # statistics asked for, or kept in another type: the onnx-domain operation
        stats = {1: "f32", 10: "f16", 11: "f64", 16: "bf16"}.get(stash_type, "f32")
        wanted = [x.etype] + [stats for o in r.node.output[1:] if o]
        onnx_kept_etypes(r, ins, outputs=tuple(wanted))
        return onnx_emit(r, "onnx_layer_normalization",
                         {"input": x, "scale": onnx_need(r, ins, 1, "Scale"), "bias": onnx_present(ins, 2)},
                         {"axis": axis, "epsilon": eps, "stash_type": stash_type}, results=[x.etype, stats, stats])
    y = r.apply1("MVN", {"normalize_variance": True, "eps": eps,
                      "eps_mode": "inside_sqrt"}, [x, const(np.arange(axis, rank, dtype=np.int64))],
              version="opset6")
    y = r.apply1("Multiply", {"auto_broadcast": "numpy"}, [y, onnx_need(r, ins, 1, "Scale")])
    if len(ins) > 2 and ins[2] is not None:
        y = r.apply1("Add", {"auto_broadcast": "numpy"}, [y, ins[2]])
    return y


@onnx_node("RMSNormalization")
def _onnx_rms_norm(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    axis = norm_axis(r, int(attrs.get("axis", -1)), onnx_rank(r, x))
    onnx_kept_etypes(r, ins)
    return onnx_emit(r, "onnx_rms_normalization", {"input": x, "scale": onnx_need(r, ins, 1, "scale")},
                     {"axis": axis, "epsilon": float(attrs.get("epsilon", 1e-5)),
                      "stash_type": int(attrs.get("stash_type", 1))}, results=[x.etype])


@onnx_node("GroupNormalization")
def _onnx_group_norm(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    scale, bias = onnx_need(r, ins, 1, "scale"), onnx_need(r, ins, 2, "bias")
    onnx_kept_etypes(r, ins)
    groups = int(attrs["num_groups"])
    if r.opset < 21:
        # GroupNormalization-18 scales and shifts per group: the same as -21 with each group's
        # value repeated over its channels
        shape = x.shape
        if shape is None or len(shape) < 2 or shape[1] is None or groups <= 0 or shape[1] % groups:
            raise r.error("GroupNormalization-18 needs a known channel extent divisible by num_groups")
        per = shape[1] // groups
        scale = const(np.repeat(np.asarray(onnx_const(r, scale, "scale (per group)")).reshape(-1), per))
        bias = const(np.repeat(np.asarray(onnx_const(r, bias, "bias (per group)")).reshape(-1), per))
    return onnx_emit(r, "onnx_group_normalization", {"input": x, "scale": scale, "bias": bias},
                     {"num_groups": groups, "epsilon": float(attrs.get("epsilon", 1e-5)),
                      "stash_type": int(attrs.get("stash_type", 1))}, results=[x.etype])


@onnx_node("InstanceNormalization")
def _onnx_instance_norm(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    rank = onnx_rank(r, x)
    y = r.apply1("MVN", {"normalize_variance": True, "eps": float(attrs.get("epsilon", 1e-5)),
                      "eps_mode": "inside_sqrt"}, [x, const(np.arange(2, rank, dtype=np.int64))], version="opset6")
    axes = const(np.arange(1, rank - 1, dtype=np.int64))
    s = r.apply1("Unsqueeze", {}, [onnx_need(r, ins, 1, "scale"), axes])
    b = r.apply1("Unsqueeze", {}, [onnx_need(r, ins, 2, "B"), axes])
    y = r.apply1("Multiply", {"auto_broadcast": "numpy"}, [y, s])
    return r.apply1("Add", {"auto_broadcast": "numpy"}, [y, b])


# --- ONNX LpNormalization, MeanVarianceNormalization (ONNX operator docs, function body) -------

@onnx_node("LpNormalization")
def _onnx_lp_normalization(r, attrs, ins):
    # x / ||x||_p along axis, 0 where the norm is 0
    x = onnx_need(r, ins, 0, "input")
    onnx_carried(r, x, floating=True)
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise r.error(f"p = {p} must be 1 or 2")
    axis = norm_axis(r, int(attrs.get("axis", -1)), onnx_rank(r, x))
    norm = r.apply1("ReduceL1" if p == 1 else "ReduceL2", {"keep_dims": True}, [x, const(np.array([axis], np.int64))])
    zero = const(np.float32(0))
    safe = r.apply1("Select", {"auto_broadcast": "numpy"},
                    [r.apply1("Equal", {"auto_broadcast": "numpy"}, [norm, zero]), const(np.float32(1)), norm])
    y = r.apply1("Divide", {"auto_broadcast": "numpy"}, [x, safe])
    return r.apply1("Select", {"auto_broadcast": "numpy"},
                    [r.apply1("Equal", {"auto_broadcast": "numpy"}, [norm, zero]), zero, y])


@onnx_node("MeanVarianceNormalization")
def _onnx_mvn(r, attrs, ins):
    # (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9), the operator's function body
    x = onnx_need(r, ins, 0, "X")
    onnx_carried(r, x, floating=True)
    axes = const(np.array(norm_axes(r, list(attrs.get("axes", [0, 2, 3])), onnx_rank(r, x)), np.int64))

    def mean(v):
        return r.apply1("ReduceMean", {"keep_dims": True}, [v, axes])

    def op(kind, a, b):
        return r.apply1(kind, {"auto_broadcast": "numpy"}, [a, b])

    m = mean(x)
    std = r.apply1("Sqrt", {}, [op("Subtract", mean(op("Multiply", x, x)), op("Multiply", m, m))])
    return op("Divide", op("Subtract", x, m), op("Add", std, const(np.float32(1e-9))))


@onnx_node("LRN")
def _onnx_lrn(r, attrs, ins):
    data = {"alpha": float(attrs.get("alpha", 1e-4)), "beta": float(attrs.get("beta", 0.75)),
            "bias": float(attrs.get("bias", 1.0)), "size": int(attrs["size"])}
    return r.apply1("LRN", data, [onnx_need(r, ins, 0, "X"), const(np.array([1], np.int64))])


# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("local_response_normalization")
def lrn_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    size = [int(s) for s in op.attribs["size"]]
    axes = [i for i, s in enumerate(size) if s != 1]
    n = size[axes[0]] if axes else 1
    if any(size[a] != n for a in axes) or n % 2 == 0:
        raise ctx.fail(f"window size {size} has no LRN form (needs one odd size on every normalized axis)")
    alpha, beta, bias = nnef_attrs.lrn_params(op)
    if bias <= 0:
        raise ctx.fail(f"bias {bias} <= 0 has no LRN form")
    # NNEF divides alpha by the window volume; LRN divides it by size ** len(axes): the same.
    # OpenVINO's CPU plugin ignores LRN's bias, so write bias 1 and scale instead:
    # x / (k + a s)^b = k^-b * x / (1 + (a/k) s)^b
    attrs = {"alpha": alpha / bias, "beta": beta, "bias": 1.0, "size": n}
    y = ctx.layer("LRN", [x, ctx.ints(axes or [1])], ctx.shape(x), attrs=attrs)
    if bias != 1.0:
        y = binop(ctx, "mul", y, scalar(ctx, bias ** -beta))
    ctx.bind(out(op), y)


@to_onnx("local_response_normalization")
def lrn_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # input / (bias + alpha * box(sqr(input), size, normalize = true)) ^ beta with automatic
    # padding: a window [c - floor((n-1)/2), c + ceil((n-1)/2)], LRN's channel window
    size = [int(s) for s in op.attribs["size"]]
    x = op.inputs["input"]
    if ctx.rank(x) < 3 or len(size) != ctx.rank(x) or any(s != 1 for k, s in enumerate(size) if k != 1):
        raise ctx.fallback(f"window size {size} is not a channel window (LRN's only form)")
    if size[1] % 2 == 0:   # the ONNX spec allows it, onnxruntime's LRN does not
        raise ctx.fallback(f"an even channel window {size[1]} is refused by onnxruntime's LRN")
    for name in ("alpha", "beta", "bias"):
        if isinstance(op.attribs.get(name, op.inputs.get(name)), str):
            raise ctx.fallback(f"a tensor '{name}' has no LRN form")
    alpha, beta, bias = nnef_attrs.lrn_params(op)
    ctx.bind(out(op), ctx.node("LRN", [x], ctx.dims(x), size=size[1], alpha=alpha, beta=beta, bias=bias))


@to_ir("batch_normalization")
def batch_norm_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = ctx.shape(x)
    eps = float(op.attribs["epsilon"])
    params = nnef_attrs.batch_norm_inputs(op)
    if len(shape) >= 2:
        vecs = {k: channel_vector(ctx, v, shape[1], "f32") for k, v in params.items()}
        if all(v is not None for v in vecs.values()):
            ctx.bind(out(op), ctx.layer(
                "BatchNormInference", [x, vecs["scale"], vecs["offset"], vecs["mean"], vecs["variance"]], shape,
                attrs={"epsilon": eps}, version="opset5"))
            return
    # general broadcasting: the definition offset + scale * (x - mean) / sqrt(variance + eps)
    mean, var, off, sc = operands(ctx, op, list(params.values()))
    den = unop(ctx, "sqrt", binop(ctx, "add", var, scalar(ctx, eps)))
    y = binop(ctx, "add", off, binop(ctx, "div", binop(ctx, "mul", sc, binop(ctx, "sub", x, mean)), den))
    ctx.bind(out(op), y)


@to_onnx("batch_normalization")
def batch_norm_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    dims = ctx.dims(x)
    eps = literal(ctx, op, "epsilon")
    names = ("scale", "offset", "mean", "variance")   # BatchNormalization's input order
    vals = nnef_attrs.batch_norm_inputs(op)
    if len(dims) >= 2 and dims[1] is not None:
        vecs = [channel_vector(ctx, vals[k], dims[1], F32) for k in names]
        if all(v is not None for v in vecs):
            ctx.bind(out(op), ctx.node("BatchNormalization", [x] + vecs, dims, epsilon=eps))
            return
    # general NNEF broadcasting: offset + scale * (x - mean) / sqrt(variance + eps)
    mean, var, off, sc = operands(ctx, op, [op.inputs["input"], vals["mean"], vals["variance"], vals["offset"],
                                            vals["scale"]])[1:]
    xr = aligned(ctx, op.inputs["input"], max(ctx.rank(v) for v in (mean, var, off, sc, x)))
    den = unop(ctx, "sqrt", binop(ctx, "add", var, scalar(ctx, eps)))
    y = binop(ctx, "add", off, binop(ctx, "div", binop(ctx, "mul", sc, binop(ctx, "sub", xr, mean)), den))
    ctx.bind(out(op), y)


@to_ir("l1_normalization", "l2_normalization")
def lp_norm_to_ir(ctx: IRContext, op: Operation) -> None:
    # NNEF: x / max(norm + bias, epsilon), norm = sum(|x|) or sqrt(sum(x^2)); NormalizeL2
    # puts eps inside the sqrt, so the definition is written out
    x = ctx.ref(op.inputs["input"])
    shape = ctx.shape(x)
    axes = [int(a) for a in op.attribs["axes"]]
    l2 = op.op == "l2_normalization"
    s = reduce_layer(ctx, "ReduceSum", binop(ctx, "mul", x, x) if l2 else unop(ctx, "abs", x), axes, shape)
    sigma = binop(ctx, "add", unop(ctx, "sqrt", s) if l2 else s, scalar(ctx, float(op.attribs.get("bias", 0.0))))
    den = binop(ctx, "max", sigma, scalar(ctx, float(op.attribs.get("epsilon", 0.0))))
    ctx.bind(out(op), binop(ctx, "div", x, den))


# --- softmax (NNEF operators §4.9.1) ---

@to_ir("softmax")
def softmax_to_ir(ctx: IRContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    shape = ctx.shape(x)
    axes = [int(a) % max(len(shape), 1) for a in op.attribs.get("axes", [1])]
    if len(axes) == 1:
        ctx.bind(out(op), ctx.layer("Softmax", [x], shape, attrs={"axis": axes[0]}, version="opset8"))
        return
    # several axes: the definition, max-shifted as NNEF writes it
    m = reduce_layer(ctx, "ReduceMax", x, axes, shape)
    e = unop(ctx, "exp", binop(ctx, "sub", x, m))
    s = reduce_layer(ctx, "ReduceSum", e, axes, shape)
    ctx.bind(out(op), binop(ctx, "div", e, s))


@to_onnx("softmax")
def softmax_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    r = ctx.rank(x)
    axes = sorted({int(a) % max(r, 1) for a in op.attribs.get("axes", [1])})
    if len(axes) == 1:
        ctx.bind(out(op), ctx.node("Softmax", [x], ctx.dims(x), axis=axes[0]))
        return
    # several axes: the definition, max-shifted as NNEF writes it
    m = reduce(ctx, "ReduceMax", x, axes)
    e = unop(ctx, "exp", binop(ctx, "sub", x, m))
    ctx.bind(out(op), binop(ctx, "div", e, reduce(ctx, "ReduceSum", e, axes)))


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

@to_onnx("onnx_layer_normalization")
def layer_norm_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "LayerNormalization", [op.inputs["input"], op.inputs["scale"], op.inputs.get("bias")], 17,
               axis=int(op.attribs.get("axis", -1)), epsilon=float(op.attribs.get("epsilon", 1e-5)),
               stash_type=int(op.attribs.get("stash_type", 1)))


@to_onnx("onnx_rms_normalization")
def rms_norm_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "RMSNormalization", [op.inputs["input"], op.inputs["scale"]], 23,
               axis=int(op.attribs.get("axis", -1)), epsilon=float(op.attribs.get("epsilon", 1e-5)),
               stash_type=int(op.attribs.get("stash_type", 1)))


@to_onnx("onnx_group_normalization")
def group_norm_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "GroupNormalization", [op.inputs["input"], op.inputs["scale"], op.inputs["bias"]], 21,
               num_groups=int(op.attribs["num_groups"]), epsilon=float(op.attribs.get("epsilon", 1e-5)),
               stash_type=int(op.attribs.get("stash_type", 1)))
