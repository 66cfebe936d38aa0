"""Pooling and other window operations: how each is read from IR and ONNX and written to them.

MaxPool, AvgPool, AdaptiveAvgPool/AdaptiveMaxPool; ONNX MaxPool, AveragePool, GlobalAveragePool,
GlobalMaxPool.  Writing: NNEF max_pool, avg_pool, box, rms_pool, area_downsample, argmax_pool,
max_pool_with_index, sample, desample, debox.  (Convolutions are in :mod:`.sliding`.)

Specifications: OpenVINO opset docs: MaxPool-14, AvgPool-14, AdaptiveAvgPool-8, AdaptiveMaxPool-8;
ONNX operator docs: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool; NNEF spec §4.5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    binop,
    out,
    pad,
    reshape,
    scalar,
    static,
    unop,
    window,
    window_input,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import I64, average_pool, filled_tensor, pads_attr
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, const
from ._common import onnx_carried, onnx_convert, onnx_ints, onnx_need, onnx_rank

# The convolution readers' attribute helpers, and deconv (a debox is written as one).
from .sliding_conv import _onnx_AUTO, _padding, _spatial, deconv_to_onnx

# ================================================================================================
# Reading
# ================================================================================================

def _pool_common(ctx: NodeContext):
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    kernel = _spatial(ctx, "kernel", n, None)
    strides = _spatial(ctx, "strides", n, 1)
    dil = _spatial(ctx, "dilations", n, 1)
    for key, values in (("kernel", kernel), ("strides", strides), ("dilations", dil)):
        if any(v < 1 for v in values):
            raise ctx.error(f"attribute '{key}' = {list(values)} must have items >= 1")
    rounding = ctx.choice("rounding_type", ("floor", "ceil", "ceil_torch"), "floor")
    return xshape, n, kernel, strides, dil, rounding


def _pool(ctx: NodeContext, op: str, x: str, xshape, kernel, strides, dil, pads, rounding: str, border: str,
          fill: float, extra: dict) -> str:
    """Pool with OpenVINO's output extents (floor/ceil/ceil_torch rounding).

    OpenVINO's extent is ``round((X + p + q - fd) / s) + 1``; NNEF always floors, so the end
    padding grows to reach the same count.  With ``border='ignore'`` a window lying wholly
    beyond the input has no element to look at: OpenVINO gives ``fill`` there (0 for average,
    the lowest float for max pooling), so such windows are not pooled but padded on after.
    """
    n = len(kernel)
    spatial = xshape[2:]
    new_pads = []
    tail = []
    for i in range(n):
        X, k, s, d = spatial[i], kernel[i], strides[i], dil[i]
        p, q = pads[i]
        fd = (k - 1) * d + 1
        if X is None:
            if rounding != "floor":
                raise ctx.error(f"rounding_type={rounding} needs known spatial extents "
                                "(fix dynamic input dims with nnefx.load(..., shapes={...}))")
            new_pads.append((p, q))
            tail.append(0)
            continue
        span = X + p + q - fd
        if span < 0:
            raise ctx.error(f"the pooling window ({fd}) is larger than the padded input ({X + p + q})")
        out = (span // s if rounding == "floor" else -(-span // s)) + 1
        if rounding == "ceil_torch" and (out - 1) * s >= X + p:
            out -= 1
        valid = out
        if border == "ignore":
            valid = min(out, -(-(X + p) // s))  # windows starting before the end of the input
            valid = max(valid, 1)
        q_eff = max((valid - 1) * s + fd - X - p, 0)  # any value giving `valid` windows
        new_pads.append((p, q_eff))
        tail.append(out - valid)
    attrs = dict(extra)
    attrs.update({"size": [1, 1] + list(kernel), "border": border, "padding": [(0, 0), (0, 0)] + new_pads,
                  "stride": [1, 1] + list(strides)})
    if any(v != 1 for v in dil):
        attrs["dilation"] = [1, 1] + list(dil)
    y = ctx.emit1(op, {"input": x}, attrs)
    if any(tail):
        y = ctx.emit1("pad", {"input": y}, {"padding": [(0, 0), (0, 0)] + [(0, t) for t in tail],
                                            "border": "constant", "value": fill})
    return y


def _pool_pads(ctx: NodeContext, xshape, n, kernel, strides, dil) -> list[tuple[int, int]]:
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("same_upper", "same_lower") and any(d is None for d in xshape[2:]):
        raise ctx.error("auto_pad same_* pooling needs known spatial extents")
    pads = _padding(ctx, xshape[2:], kernel, strides, dil)
    assert pads is not None
    return pads


@operator("MaxPool", ANY)
def _max_pool(ctx: NodeContext):
    xshape, n, kernel, strides, dil, rounding = _pool_common(ctx)
    pads = _pool_pads(ctx, xshape, n, kernel, strides, dil)
    y = _pool(ctx, "max_pool", ctx.tensor(0), xshape, kernel, strides, dil, pads, rounding, "ignore",
              float(np.finfo(np.float32).min), {})
    outs = [ctx.result(y)]
    if ctx.n_outputs > 1:
        outs.append(Value(unsupported=f"the indices output of {ctx.where()} is not supported"))
    return outs


@operator("AvgPool", ANY)
def _avg_pool(ctx: NodeContext):
    xshape, n, kernel, strides, dil, rounding = _pool_common(ctx)
    exclude = ctx.bool("exclude-pad", False) if ctx.has("exclude-pad") else ctx.bool("exclude_pad", False)
    pads = _pool_pads(ctx, xshape, n, kernel, strides, [1] * n)
    # OpenVINO (CPU) semantics, checked case by case: with exclude-pad=false and some
    # padding, every window divides by the full kernel size (padding and ceil overhang count
    # as zeros); without padding, or with exclude-pad=true, only input elements count.
    counted = not exclude and any(p or q for p, q in pads)
    border = "constant" if counted else "ignore"
    y = _pool(ctx, "avg_pool", ctx.tensor(0), xshape, kernel, strides, [1] * n, pads, rounding, border, 0.0, {})
    return ctx.result(y)


@operator(("AdaptiveAvgPool", "AdaptiveMaxPool"), ANY)
def _adaptive_pool(ctx: NodeContext):
    shape = ctx.in_shape(0)
    if shape is None or len(shape) < 3:
        raise ctx.error("adaptive pooling needs an input of known rank >= 3")
    size = ctx.const_ints(1, "output_shape")
    if len(size) != len(shape) - 2 or any(n < 1 for n in size):
        raise ctx.error(f"output_shape {size} must give one positive extent per spatial axis")
    mode = "max" if ctx.type == "AdaptiveMaxPool" else "avg"
    y = ctx.emit1("adaptive_pool", {"input": ctx.tensor(0)}, {"output_size": size, "mode": mode})
    outs = [ctx.result(y)]
    if ctx.n_outputs > 1:
        outs.append(Value(unsupported=f"the indices output of {ctx.where()} is not supported"))
    return outs


@onnx_node("MaxPool", "AveragePool")
def _onnx_pool(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    if r.node.op_type == "MaxPool" and x.etype in ("i8", "u8"):
        # MaxPool-12 of 8-bit integers: NNEF's max_pool takes scalars, and every 8-bit value is
        # a float32 exactly, so the maximum is taken there and converted back (no rounding)
        pooled = _onnx_pool(r, attrs, [onnx_convert(r, x, "f32")])
        pooled = pooled if isinstance(pooled, list) else [pooled]
        return [onnx_convert(r, pooled[0], x.etype)] + pooled[1:]
    n = onnx_rank(r, x) - 2
    kernel = list(attrs["kernel_shape"])
    p = list(attrs.get("pads", [0] * (2 * n)))
    data = {"kernel": kernel, "strides": list(attrs.get("strides", [1] * n)), "pads_begin": p[:n],
            "pads_end": p[n:], "rounding_type": "ceil_torch" if attrs.get("ceil_mode", 0) else "floor",
            "auto_pad": _onnx_AUTO.get(attrs.get("auto_pad", "NOTSET"), "?")}
    if r.node.op_type == "MaxPool":
        data["dilations"] = list(attrs.get("dilations", [1] * n))
        if len(r.node.output) > 1 and r.node.output[1]:
            return [r.apply1("MaxPool", data, [x]),
                    _onnx_max_pool_indices(r, x, data, int(attrs.get("storage_order", 0)))]
        return r.apply("MaxPool", data, [x], n_out=len(r.node.output))
    include = bool(attrs.get("count_include_pad", 0))
    if any(d != 1 for d in attrs.get("dilations", [1] * n)):
        data["dilations"] = list(attrs["dilations"])
        return _onnx_dilated_avg_pool(r, x, data, include)
    if include and data["rounding_type"] == "ceil_torch" and data["auto_pad"] == "explicit" and any(p):
        return _onnx_avg_pool_ceil_counting_pads(r, x, kernel, data["strides"], p)
    data["exclude-pad"] = not include
    return r.apply1("AvgPool", data, [x], version="opset1")


def _onnx_avg_pool_ceil_counting_pads(r, x: Value, kernel, strides, p) -> Value:
    """AveragePool(ceil_mode=1, count_include_pad=1): pads count as zeros, the ceil overhang
    beyond the padded input does not (onnxruntime's and torch's divisor).  Expressed as an
    explicit zero pad followed by a pool whose end overhang is ignored."""
    n = len(kernel)
    if x.shape is None or any(d is None for d in x.shape[2:]):
        raise r.error("AveragePool with ceil_mode needs known spatial extents")
    c = r.ctx([x])
    xp = c.emit1("pad", {"input": c.tensor(0)}, {"padding": [(0, 0), (0, 0)] + [(p[i], p[n + i]) for i in range(n)],
                                                 "border": "constant", "value": 0.0})
    tails = []
    for i in range(n):
        size = x.shape[2 + i] + p[i] + p[n + i]
        out = -(-(size - kernel[i]) // strides[i]) + 1
        if (out - 1) * strides[i] >= x.shape[2 + i] + p[i]:
            out -= 1  # onnxruntime (like torch): no window starts in the end padding
        tails.append(max(0, (out - 1) * strides[i] + kernel[i] - size))
    y = c.emit1("avg_pool", {"input": xp}, {"size": [1, 1] + list(kernel), "border": "ignore",
                                           "padding": [(0, 0), (0, 0)] + [(0, t) for t in tails],
                                           "stride": [1, 1] + list(strides)})
    return c.result(y)


# --- window sums: LpPool, dilated AveragePool (ONNX operator docs) -------------------------------

def _onnx_window_sum(r, x: Value, data: dict) -> tuple[Value, list[tuple[int, int]]]:
    """The sum of each pooling window of ``x`` (zeros beyond the input), with the geometry of
    ``data`` (kernel, strides, dilations, pads, auto_pad, rounding as the MaxPool operator
    reads them), and the explicit pads used."""
    c = NodeContext(r.builder, r.node.op_type, r.node.name or f"{r.node.op_type}_{r.index}", data, [x], "opset8",
                    r.loc(r.where()), where=r.where())
    xshape, n, kernel, strides, dil, rounding = _pool_common(c)
    pads = _pool_pads(c, xshape, n, kernel, strides, dil)
    y = _pool(c, "box", c.tensor(0), xshape, kernel, strides, dil, pads, rounding, "constant", 0.0, {})
    return c.result(y), pads


@onnx_node("LpPool")
def _onnx_lp_pool(r, attrs, ins):
    # (sum over the window of |x|^p)^(1/p); padding adds nothing to the sum
    x = onnx_need(r, ins, 0, "X")
    onnx_carried(r, x, floating=True)
    n = onnx_rank(r, x) - 2
    p = int(attrs.get("p", 2))
    if p < 1:
        raise r.error(f"p = {p} must be at least 1")
    pads = list(attrs.get("pads", [0] * (2 * n)))
    data = {"kernel": list(attrs["kernel_shape"]), "strides": list(attrs.get("strides", [1] * n)),
            "dilations": list(attrs.get("dilations", [1] * n)), "pads_begin": pads[:n], "pads_end": pads[n:],
            "rounding_type": "ceil" if attrs.get("ceil_mode", 0) else "floor",
            "auto_pad": _onnx_AUTO.get(attrs.get("auto_pad", "NOTSET"), "?")}
    power = r.apply1("Power", {"auto_broadcast": "numpy"}, [r.apply1("Abs", {}, [x]), const(np.float32(p))])
    total, _ = _onnx_window_sum(r, power, data)
    return r.apply1("Power", {"auto_broadcast": "numpy"}, [total, const(np.float32(1.0 / p))])


def _onnx_dilated_avg_pool(r, x: Value, data: dict, include: bool) -> Value:
    """AveragePool with dilations: the window sum over the number of window samples that fall
    in the input (or in the input and its explicit pads, with count_include_pad)."""
    onnx_carried(r, x)
    if x.shape is None or any(d is None for d in x.shape[2:]):
        raise r.error("dilated AveragePool needs known spatial extents")
    total, pads = _onnx_window_sum(r, x, data)
    out = total.shape[2:]
    counts = np.ones((), np.float64)
    for i, (extent, k, s, d, (lo, hi)) in enumerate(zip(x.shape[2:], data["kernel"], data["strides"],
                                                       data["dilations"], pads, strict=True)):
        first, last = (-lo, extent + hi) if include else (0, extent)
        start = np.arange(out[i]) * s - lo
        taps = start[:, None] + np.arange(k)[None, :] * d
        counts = np.multiply.outer(counts, ((taps >= first) & (taps < last)).sum(axis=1))
    counts = counts.astype(np.float32)  # a window wholly in the padding gives 0 / 0, as the definition
    return r.apply1("Divide", {"auto_broadcast": "numpy"}, [total, const(counts)])


def _onnx_max_pool_indices(r, x: Value, data: dict, storage_order: int) -> Value:
    """MaxPool's Indices: the flat offset of each window's first maximum in the whole input,
    spatial positions row-major (storage_order 0) or column-major (1); padding never wins.
    From NNEF argmax_pool's index inside the window (row-major): each spatial position is
    window start + (window index digit) * dilation."""
    if storage_order not in (0, 1):
        raise r.error(f"storage_order = {storage_order} must be 0 or 1")
    onnx_carried(r, x)
    if x.shape is None or any(d is None for d in x.shape):
        raise r.error("MaxPool's Indices output needs a known input shape")
    c = NodeContext(r.builder, r.node.op_type, r.node.name or f"{r.node.op_type}_{r.index}", data, [x], "opset8",
                    r.loc(r.where()), where=r.where())
    xshape, n, kernel, strides, dil, rounding = _pool_common(c)
    pads = _pool_pads(c, xshape, n, kernel, strides, dil)
    win = _pool(c, "argmax_pool", c.tensor(0), xshape, kernel, strides, dil, pads, rounding, "ignore", -1.0, {})
    c.builder.graph.tensors[win].dtype = "integer"
    found = c.result(win, "i64")
    out = found.shape[2:]
    if any(d is None for d in out) or len(c.ops) > 1:
        raise r.error("MaxPool's Indices output with windows beyond the padded input (ceil_mode) is not supported")
    spatial = list(xshape[2:])
    weights = [int(np.prod(spatial[i + 1:])) for i in range(n)] if storage_order == 0 else \
        [int(np.prod(spatial[:i])) for i in range(n)]
    nc = int(xshape[0]) * int(xshape[1])
    # the batch-and-channel part of the offset: (n * C + c) * (product of spatial extents)
    flat = const((np.arange(nc, dtype=np.int64) * int(np.prod(spatial))).reshape([xshape[0], xshape[1]] + [1] * n))

    def op(kind, a, b):
        return r.apply1(kind, {"auto_broadcast": "numpy"}, [a, b])

    for i in range(n):
        digit = op("FloorMod", op("Divide", found, const(np.int64(np.prod(kernel[i + 1:])))), const(np.int64(kernel[i])))
        start = (np.arange(out[i], dtype=np.int64) * strides[i] - pads[i][0]).reshape([1, 1] + [out[i] if j == i else 1
                                                                                           for j in range(n)])
        pos = op("Add", const(start), op("Multiply", digit, const(np.int64(dil[i]))))
        flat = op("Add", flat, op("Multiply", pos, const(np.int64(weights[i]))))
    return flat


@onnx_node("MaxUnpool")
def _onnx_max_unpool(r, attrs, ins):
    # zeros of the unpooled shape with X written at the flat positions I (MaxPool's Indices: offsets
    # into the whole N x C x spatial tensor): a ScatterElements over the flattened output; a larger
    # output_shape gets that block in its low corner (zeros after it, as ONNX's reference does)
    x, idx = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "I")
    onnx_carried(r, x)
    if x.shape is None or any(d is None for d in x.shape) or len(x.shape) < 3:
        raise r.error(f"MaxUnpool needs an input of known shape and rank >= 3 (got {x.shape})")
    n = len(x.shape) - 2
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * n))
    pads = list(attrs.get("pads", [0] * (2 * n)))
    if len(kernel) != n or len(strides) != n or len(pads) != 2 * n:
        raise r.error(f"kernel_shape {kernel}, strides {strides} and pads {pads} do not fit {n} spatial axes")
    shape = list(x.shape[:2]) + [(d - 1) * s + k - p - q for d, s, k, p, q
                                 in zip(x.shape[2:], strides, kernel, pads[:n], pads[n:], strict=True)]
    want = shape
    if len(ins) > 2 and ins[2] is not None:
        want = onnx_ints(r, ins[2], "output_shape")
        if len(want) != len(shape) or want[:2] != shape[:2] or any(w < d for w, d in zip(want[2:], shape[2:],
                                                                                        strict=True)):
            raise r.error(f"output_shape {want} must keep N and C of {shape} and not shrink its spatial extents")
    r.ctx([x]).check_items(want)
    flat = const(np.array([-1], np.int64))
    zeros = const(np.zeros(int(np.prod(shape)), np.float32))
    y = r.apply1("ScatterElementsUpdate", {"reduction": "none", "use_init_val": True},
                 [zeros, r.apply1("Reshape", {"special_zero": False}, [idx, flat]),
                  r.apply1("Reshape", {"special_zero": False}, [x, flat]), const(np.int64(0))], version="opset12")
    y = r.apply1("Reshape", {"special_zero": False}, [y, const(np.array(shape, np.int64))])
    if want != shape:
        y = r.apply1("Pad", {"pad_mode": "constant"},
                     [y, const(np.zeros(len(shape), np.int64)), const(np.array(want, np.int64) - np.array(shape)),
                      const(np.float32(0))], version="opset12")
    return y


@onnx_node("GlobalAveragePool", "GlobalMaxPool")
def _onnx_global_pool(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    kind = "ReduceMean" if r.node.op_type == "GlobalAveragePool" else "ReduceMax"
    return r.apply1(kind, {"keep_dims": True}, [x, const(np.arange(2, onnx_rank(r, x), dtype=np.int64))])


# ================================================================================================
# Writing
# ================================================================================================

def _pool_window_ir(ctx: IRContext, op: Operation) -> tuple:
    x = op.inputs["input"]
    xs = ctx.shape(x)
    size = list(op.attribs["size"])
    pads, stride, dil = window(ctx, op, x, len(xs), size)
    if size[:2] != [1, 1] or stride[:2] != [1, 1] or any(pads[:2][k] != (0, 0) for k in range(min(2, len(pads)))):
        raise ctx.fail(f"pooling over the batch/channel dimensions (size {size}, stride {stride}, padding {pads}) "
                       "has no opset form")
    if any(d != 1 for d in dil):
        if op.op == "avg_pool" or dil[:2] != [1, 1]:
            raise ctx.fail(f"dilation {dil} of {op.op} has no opset form")
    # padding after that no window reaches changes nothing, and OpenVINO's AvgPool refuses
    # exclude-pad with a padding as large as the kernel (e.g. from legacy ceil rounding)
    ys = out_shape(ctx, op)
    trimmed = []
    for i in range(2, len(xs)):
        p, q = pads[i]
        reach = nnef_attrs.window_span(ys[i], size[i], stride[i], dil[i]) - p - xs[i]
        trimmed.append((p, min(q, max(reach, 0))))
    return x, size[2:], trimmed, stride[2:], dil[2:]


def _split_window(ctx: OnnxContext, r: int, size: list[int], pads: list, stride: list[int], dil: list[int],
                  form: str) -> tuple:
    """size, pads, stride, dilation of the dimensions a rank-``r`` window really spans, and
    the layout move ``(kept, windowed)`` for :func:`_to_spatial` / :func:`_from_spatial`, or
    None when they are dims 2.. (ONNX pools and convolves over those; 1 to 3 of them)."""
    if r >= 3 and size[:2] == [1, 1] and stride[:2] == [1, 1] and dil[:2] == [1, 1] and pads[:2] == [(0, 0)] * 2:
        return size[2:], pads[2:], stride[2:], dil[2:], None
    win = [k for k in range(r) if (size[k], stride[k], dil[k], pads[k]) != (1, 1, 1, (0, 0))]
    if not 1 <= len(win) <= 3:
        raise ctx.fallback(f"a window over {len(win)} dimensions has no ONNX {form}")
    kept = [k for k in range(r) if k not in win]
    return [size[k] for k in win], [pads[k] for k in win], [stride[k] for k in win], [dil[k] for k in win], (kept, win)


def _layout(dims: tuple, move: tuple | None) -> tuple:
    """Dims after :func:`_to_spatial`."""
    if move is None:
        return tuple(dims)
    kept, win = move
    return (int(np.prod([dims[k] for k in kept], dtype=np.int64)), 1) + tuple(dims[k] for k in win)


def _to_spatial(ctx: OnnxContext, v: Any, move: tuple | None) -> str:
    """Windowed dims last, the others merged into one batch dim, one channel."""
    if move is None:
        return ctx.ref(v)
    kept, win = move
    d = ctx.shape(v)
    perm = kept + win
    t = ctx.node("Transpose", [v], tuple(d[p] for p in perm), perm=perm)
    return reshape(ctx, t, _layout(d, move))


def _from_spatial(ctx: OnnxContext, v: str, dims: tuple, move: tuple | None) -> str:
    if move is None:
        return v
    kept, win = move
    perm = kept + win
    t = reshape(ctx, v, tuple(dims[k] for k in kept) + tuple(dims[k] for k in win))
    return ctx.node("Transpose", [t], tuple(dims), perm=[perm.index(k) for k in range(len(dims))])


def _pool_window_onnx(ctx: OnnxContext, op: Operation) -> tuple:
    """(input, spatial size, pads, stride, dilation, pooled shape, finish) of a pooling op.

    ONNX pools over the dimensions after batch and channel.  A window that also spans
    those (a box over channels, as in local contrast normalization) is pooled by moving
    the windowed dimensions last, merging the others into the batch, pooling with one
    channel, and undoing both; ``finish`` maps the pooled value back to the result.
    """
    x = op.inputs["input"]
    r = ctx.rank(x)
    size = [int(s) for s in op.attribs["size"]]
    if r < 1:
        raise ctx.fallback("pooling a scalar has no ONNX pooling form")
    pads, stride, dil = window(ctx, op, x, r, size)
    od = ctx.dims(out(op))
    if op.attribs.get("border", "constant") == "ignore" and any(p or q for p, q in pads):
        # a window with no tap inside the input: nnefx gives 0, ONNX pooling -inf or 0/0
        xs, ys = ctx.dims(x), ctx.dims(out(op))
        for k in (k for k in range(r) if pads[k] != (0, 0)):
            static(ctx, (xs[k], ys[k]))
            for i in range(ys[k]):
                taps = (i * stride[k] - pads[k][0] + j * dil[k] for j in range(size[k]))
                if not any(0 <= t < xs[k] for t in taps):
                    raise ctx.fallback(f"padding {pads} holds whole windows under border 'ignore'")
    size, pads, stride, dil, move = _split_window(ctx, r, size, pads, stride, dil, "pooling form")
    if move is None:
        return ctx.ref(x), size, pads, stride, dil, od, lambda y: y
    t = _to_spatial(ctx, x, move)
    pooled = ctx.dims(t)[:2] + tuple(od[k] for k in move[1])
    return t, size, pads, stride, dil, pooled, lambda y: _from_spatial(ctx, y, od, move)


def _origins(ctx: OnnxContext, shape: tuple, n: int, k: int, stride: int, shift: int) -> str:
    """``o * stride - shift`` for the output positions ``o`` of windowed dim ``k`` (of the last
    ``n`` dims of an output of ``shape``), as a constant that broadcasts along that dim."""
    rank = len(shape)
    axis = rank - n + k
    count = static(ctx, shape[axis:axis + 1])[0]
    dims = [1] * rank
    dims[axis] = count
    return ctx.const((np.arange(count, dtype=np.int64) * stride - shift).reshape(dims))


def _window_offsets(ctx: OnnxContext, flat: str, extents: tuple, size: list[int], stride: list[int],
                    dil: list[int], shifts: list[int], shape: tuple) -> str:
    """The window offset (row-major over ``size``) of flat input indices ``flat``."""
    n = len(size)
    rem = flat
    coords: list[str] = []
    for k in reversed(range(n)):
        e = ctx.const(np.asarray(extents[k], np.int64))
        coords.insert(0, binop(ctx, "mod", rem, e))
        rem = binop(ctx, "div", rem, e)
    index: str | None = None
    for k in range(n):
        origin = _origins(ctx, shape, n, k, stride[k], shifts[k])
        j = binop(ctx, "sub", coords[k], origin)
        if dil[k] != 1:
            j = binop(ctx, "div", j, ctx.const(np.asarray(dil[k], np.int64)))
        weight = int(np.prod(size[k + 1:], dtype=np.int64))
        if weight != 1:
            j = binop(ctx, "mul", j, ctx.const(np.asarray(weight, np.int64)))
        index = j if index is None else binop(ctx, "add", index, j)
    assert index is not None
    return index


def _spatial_window(ctx: OnnxContext, op: Operation, x: Any, transposed: bool = False) -> tuple:
    """size, pads, stride, dilation of the windowed dimensions, and the layout move
    (:func:`_split_window`) that makes them the spatial dimensions of an ``[M, 1, W...]``
    tensor (None when the window spans dims 2.. only)."""
    r = ctx.rank(x)
    size = [int(s) for s in op.attribs["size"]]
    pads, stride, dil = window(ctx, op, x, r, size, transposed=transposed)
    return _split_window(ctx, r, size, pads, stride, dil, "form")


def _flat_positions(ctx: OnnxContext, idx: str, size: list[int], stride: list[int], dil: list[int],
                    extents: tuple, shape: tuple, shifts: list[int]) -> str:
    """Flat row-major positions (in a tensor of spatial ``extents``) of window offsets ``idx``
    at each output position: o * s + j * d - shift."""
    n = len(size)
    flat: str | None = None
    for k in range(n):
        inner = int(np.prod(size[k + 1:], dtype=np.int64))
        j = binop(ctx, "div", idx, ctx.const(np.asarray(inner, np.int64))) if inner != 1 else idx
        j = binop(ctx, "mod", j, ctx.const(np.asarray(size[k], np.int64)))
        if dil[k] != 1:
            j = binop(ctx, "mul", j, ctx.const(np.asarray(dil[k], np.int64)))
        origin = _origins(ctx, shape, n, k, stride[k], shifts[k])
        pos = binop(ctx, "add", j, origin)
        weight = int(np.prod(extents[k + 1:], dtype=np.int64))
        if weight != 1:
            pos = binop(ctx, "mul", pos, ctx.const(np.asarray(weight, np.int64)))
        flat = pos if flat is None else binop(ctx, "add", flat, pos)
    assert flat is not None
    return flat


@to_ir("max_pool")
def max_pool_to_ir(ctx: IRContext, op: Operation) -> None:
    x, size, pads, stride, dil = _pool_window_ir(ctx, op)
    # MaxPool never reads its padding; NNEF 'constant' pads with 0 (and the other modes with
    # copies), so only 'ignore' is left to it
    x, pads = window_input(ctx, x, pads, op.attribs.get("border", "constant"), ("ignore",))
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "kernel": size, "rounding_type": "floor", "auto_pad": "explicit",
             "index_element_type": "i64", "axis": 0}
    shape = out_shape(ctx, op)
    refs = ctx.layer("MaxPool", [x], outputs=[(shape, "f32"), (shape, "i64")], attrs=attrs, version="opset8")
    ctx.bind(out(op), refs[0])


@to_onnx("max_pool")
def max_pool_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x, size, pads, stride, dil, pooled, finish = _pool_window_onnx(ctx, op)
    # as in IR: MaxPool never reads its padding, so only 'ignore' is left to it
    xin, pads = window_input(ctx, x, pads, op.attribs.get("border", "constant"), ("ignore",))
    ctx.bind(out(op), finish(ctx.node("MaxPool", [xin], pooled, kernel_shape=size, pads=pads_attr(pads),
                                      strides=stride, dilations=dil)))


@to_ir("avg_pool", "area_downsample")
def avg_pool_to_ir(ctx: IRContext, op: Operation) -> None:
    if op.op == "area_downsample":
        x = op.inputs["input"]
        factor = [int(v) for v in op.attribs["factor"]]
        size, pads, stride, border = factor, [(0, 0)] * len(factor), factor, "constant"
    else:
        x, size, pads, stride, _ = _pool_window_ir(ctx, op)
        border = op.attribs.get("border", "constant")
    exclude = border == "ignore"
    x, pads = window_input(ctx, x, pads, border, ("constant", "ignore"))
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "kernel": size, "exclude-pad": exclude, "rounding_type": "floor", "auto_pad": "explicit"}
    ctx.bind(out(op), ctx.layer("AvgPool", [x], out_shape(ctx, op), attrs=attrs))


@to_onnx("avg_pool", "box", "rms_pool")
def box_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # avg_pool = normalized box; box = window sum; rms_pool = sqrt(avg_pool(x^2))
    x, size, pads, stride, dil, pooled, finish = _pool_window_onnx(ctx, op)
    border, normalize = nnef_attrs.box_mode(op)
    xin = ctx.ref(x)
    if op.op == "rms_pool":
        xin = binop(ctx, "mul", xin, xin)
    y = average_pool(ctx, xin, size, pads, stride, dil, border, pooled)
    if op.op == "rms_pool":
        y = unop(ctx, "sqrt", y)
    elif not normalize:
        y = binop(ctx, "mul", y, scalar(ctx, float(np.prod(size)), ctx.dtype(y)))
    ctx.bind(out(op), finish(y))


@to_ir("box", "rms_pool")
def box_to_ir(ctx: IRContext, op: Operation) -> None:
    # box = window sum (or mean with normalize); rms_pool = sqrt(avg_pool(x^2)); both through
    # AvgPool, whose exclude-pad matches border 'ignore' (only a normalized box divides by the
    # count of real values)
    x, size, pads, stride, _ = _pool_window_ir(ctx, op)
    border, normalize = nnef_attrs.box_mode(op)
    xin = ctx.ref(x)
    if op.op == "rms_pool":
        xin = binop(ctx, "mul", xin, xin)
    xin, pads = window_input(ctx, xin, pads, border, ("constant", "ignore"))
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "kernel": size, "exclude-pad": border == "ignore", "rounding_type": "floor", "auto_pad": "explicit"}
    y = ctx.layer("AvgPool", [xin], out_shape(ctx, op), attrs=attrs)
    if op.op == "rms_pool":
        y = unop(ctx, "sqrt", y)
    elif not normalize:
        y = binop(ctx, "mul", y, scalar(ctx, float(np.prod(size))))
    ctx.bind(out(op), y)


@to_onnx("argmax_pool", "max_pool_with_index")
def argmax_pool_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x, size, pads, stride, dil, pooled, finish = _pool_window_onnx(ctx, op)
    # as in IR: MaxPool never reads its padding, so only 'ignore' is left to it
    xin, pads = window_input(ctx, x, pads, op.attribs.get("border", "constant"), ("ignore",))
    shifts = [p for p, _ in pads]   # window origins move by the padding MaxPool itself adds
    extents = static(ctx, ctx.dims(xin)[2:])
    vals, flat = ctx.node("MaxPool", [xin], outputs=[(pooled, ctx.dtype(xin)), (pooled, I64)], kernel_shape=size,
                          pads=pads_attr(pads), strides=stride, dilations=dil)
    index = _window_offsets(ctx, flat, extents, size, stride, dil, shifts, pooled)
    names = op.output_names()
    if op.op == "max_pool_with_index":
        ctx.bind(names[0], finish(vals))
        ctx.bind(names[1], finish(index))
    else:
        ctx.bind(names[0], finish(index))


@to_onnx("sample")
def sample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # output[i] = in~[i*s + unravel(index[i])*d - p]: pad by the border, then gather
    size, pads, stride, dil, move = _spatial_window(ctx, op, op.inputs["input"])
    x = _to_spatial(ctx, op.inputs["input"], move)
    border = op.attribs.get("border", "constant")
    xin = pad(ctx, x, [(0, 0), (0, 0)] + list(pads), "constant" if border == "ignore" else border)
    # (a negative padding crops: positions then start at the crop)
    extents = static(ctx, ctx.dims(xin)[2:])
    final = ctx.dims(out(op))
    idx = _to_spatial(ctx, ctx.ref(op.inputs["index"], I64), move)
    od = ctx.dims(idx)
    flat = _flat_positions(ctx, idx, size, stride, dil, extents, od, [0] * len(size))
    volume = int(np.prod(extents, dtype=np.int64))
    lead = tuple(ctx.dims(xin)[:2])
    data = ctx.node("Reshape", [xin, ctx.ints([0, 0, -1])], lead + (volume,))
    where = ctx.node("Reshape", [flat, ctx.ints([0, 0, -1])], lead + (None,))
    got = ctx.node("GatherElements", [data, where], lead + (None,), dtype=ctx.dtype(xin), axis=2)
    got = ctx.node("Reshape", [got, ctx.ints([0, 0] + [int(d) for d in static(ctx, od[2:])])], od)
    ctx.bind(out(op), _from_spatial(ctx, got, final, move))


@to_onnx("desample")
def desample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # output[i] = sum of input[q] over the q whose window put index[q] at i: a scatter-add
    # into a zero buffer in padded coordinates, then the padding cropped off
    size, pads, stride, dil, move = _spatial_window(ctx, op, op.inputs["input"], transposed=True)
    x = _to_spatial(ctx, op.inputs["input"], move)
    xs = ctx.shape(x)
    final = ctx.shape(out(op))
    od = _layout(final, move)
    if any(p < 0 for p, _ in pads):
        raise ctx.fallback(f"negative padding {pads} has no scatter form here")
    n = len(size)
    full = [nnef_attrs.window_span(xs[2 + k], size[k], stride[k], dil[k]) for k in range(n)]
    extents = tuple(max(full[k], pads[k][0] + od[2 + k]) for k in range(n))
    idx = _to_spatial(ctx, ctx.ref(op.inputs["index"], I64), move)
    flat = _flat_positions(ctx, idx, size, stride, dil, extents, xs, [0] * n)
    volume = int(np.prod(extents, dtype=np.int64))
    lead = tuple(xs[:2])
    zeros = ctx.node("ConstantOfShape", [ctx.ints(lead + (volume,))], lead + (volume,), dtype=ctx.dtype(x),
                     value=filled_tensor(0, ctx.dtype(x)))
    where = ctx.node("Reshape", [flat, ctx.ints([0, 0, -1])], lead + (int(np.prod(xs[2:])),))
    vals = ctx.node("Reshape", [x, ctx.ints([0, 0, -1])], lead + (int(np.prod(xs[2:])),))
    buf = ctx.node("ScatterElements", [zeros, where, vals], lead + (volume,), axis=2, reduction="add")
    buf = ctx.node("Reshape", [buf, ctx.ints(lead + extents)], lead + extents)
    starts = [p for p, _ in pads]
    ends = [p + od[2 + k] for k, (p, _) in enumerate(pads)]
    y = ctx.node("Slice", [buf, ctx.ints(starts), ctx.ints(ends), ctx.ints(range(2, 2 + n))], od)
    ctx.bind(out(op), _from_spatial(ctx, y, final, move))


@to_onnx("debox")
def debox_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # out[i] = sum_j in~[(i + p - j*d) / s] = a transposed convolution with a ones kernel per
    # channel; normalize divides by the window volume, or under 'ignore' by the number of
    # in-range terms (the same transposed convolution of ones)
    x = ctx.ref(op.inputs["input"])
    border = op.attribs.get("border", "constant")
    if border not in ("constant", "ignore"):
        raise ctx.fallback(f"border '{border}' of debox has no ConvTranspose form")
    size, _, stride, dil, move = _spatial_window(ctx, op, x, transposed=True)
    if move is not None:
        raise ctx.fallback("a window over the batch/channel dimensions has no ConvTranspose form here")
    channels = static(ctx, ctx.dims(x)[1:2])[0]
    ones = ctx.const(np.ones((channels, 1) + tuple(size), ctx.dtype(x)))
    attribs = {"padding": list(op.attribs.get("padding", []))[2:], "stride": stride, "dilation": dil,
               "groups": channels, "border": "constant"}

    def transposed(value: str) -> str:
        name = out(op)
        deconv_to_onnx(ctx, Operation("deconv", {"input": value, "filter": ones, "bias": 0.0}, {"output": name}, attribs,
                               location=op.location))
        return ctx.refs.pop(name)

    total = transposed(x)
    if not op.attribs.get("normalize", False):
        ctx.bind(out(op), total)
    elif border == "constant":
        ctx.bind(out(op), binop(ctx, "div", total, scalar(ctx, float(np.prod(size)), ctx.dtype(x))))
    else:
        count = transposed(binop(ctx, "add", binop(ctx, "mul", x, scalar(ctx, 0.0, ctx.dtype(x))),
                                 scalar(ctx, 1.0, ctx.dtype(x))))
        some = binop(ctx, "gt", count, scalar(ctx, 0.0, ctx.dtype(x)))
        safe = ctx.node("Where", [some, count, scalar(ctx, 1.0, ctx.dtype(x))], ctx.dims(count), dtype=ctx.dtype(x))
        ctx.bind(out(op), ctx.node("Where", [some, binop(ctx, "div", total, safe), scalar(ctx, 0.0, ctx.dtype(x))],
                                   ctx.dims(total), dtype=ctx.dtype(x)))
