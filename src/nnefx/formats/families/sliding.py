"""Sliding-window operators: convolutions and pooling: how each operator is read from IR and ONNX (and written, below).

Convolution, GroupConvolution, BinaryConvolution, (Group)ConvolutionBackpropData, MaxPool, AvgPool,
Adaptive{Avg,Max}Pool; ONNX Conv, ConvTranspose, MaxPool, AveragePool, Global{Average,Max}Pool.

Specifications: OpenVINO opset docs: Convolution-1, GroupConvolution-1, BinaryConvolution-1, ConvolutionBackpropData-1,
MaxPool-1/8, AvgPool-1, AdaptiveAvgPool-8; ONNX operator docs: Conv, ConvTranspose, MaxPool, AveragePool.
"""

from __future__ import annotations

import numpy as np

from ..reading.context import NodeContext
from ..reading.conventions import const_value
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, const
from ._common import onnx_need, onnx_rank

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


def _spatial(ctx: NodeContext, key: str, n: int, default: int | None) -> list[int]:
    if not ctx.has(key) and default is not None:
        return [default] * n
    v = ctx.ints(key)
    if len(v) != n:
        raise ctx.error(f"attribute '{key}' must have {n} entries (one per spatial dimension), has {len(v)}")
    return v


def _padding(ctx: NodeContext, in_spatial, kernel, strides, dilations, *, rounding: str = "floor",
             out_spatial=None) -> list[tuple[int, int]] | None:
    """Explicit (before, after) padding per spatial dim, reproducing auto_pad and ceil rounding."""
    n = len(kernel)
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("explicit", "notset", ""):
        pb = _spatial(ctx, "pads_begin", n, 0)
        pe = _spatial(ctx, "pads_end", n, 0)
        pads = list(zip(pb, pe, strict=False))
    elif auto == "valid":
        pads = [(0, 0)] * n
    elif auto in ("same_upper", "same_lower"):
        if any(x is None for x in in_spatial):
            if auto == "same_upper" and rounding == "floor":
                return None  # NNEF automatic padding is exactly same_upper
            raise ctx.error("auto_pad=same_lower needs known spatial extents")
        pads = []
        for x, k, s, d in zip(in_spatial, kernel, strides, dilations, strict=False):
            out = -(-x // s)
            t = max((out - 1) * s + (k - 1) * d + 1 - x, 0)
            small, large = t // 2, t - t // 2
            pads.append((small, large) if auto == "same_upper" else (large, small))
    else:
        raise ctx.error(f"unknown auto_pad '{auto}'")
    return pads


@operator("Convolution", ANY)
def _convolution(ctx: NodeContext):
    return ctx.result(_conv(ctx, groups=1))


@operator("GroupConvolution", ANY)
def _group_convolution(ctx: NodeContext):
    return ctx.result(_conv(ctx, groups=None))


def _filter(ctx: NodeContext, grouped: bool, transposed: bool) -> tuple[str, tuple, int]:
    w = ctx.input(1)
    wshape = w.shape
    if wshape is None or any(d is None for d in wshape):
        raise ctx.error("the filter shape must be known")
    if not grouped:
        return ctx.tensor(1), tuple(wshape), 1
    g = wshape[0]
    if transposed:  # [G, Cin/G, Cout/G, k...] -> [Cin, Cout/G, k...]
        new = (g * wshape[1],) + tuple(wshape[2:])
    else:  # [G, Cout/G, Cin/G, k...] -> [Cout, Cin/G, k...]
        new = (g * wshape[1],) + tuple(wshape[2:])
    if w.is_const:
        return const_value(ctx, np.asarray(w.const).reshape(new), w.etype), new, g
    t = ctx.emit1("reshape", {"input": ctx.tensor(1)}, {"shape": list(new)})
    return t, new, g


def _conv(ctx: NodeContext, groups: int | None) -> str:
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    w, wshape, g = _filter(ctx, groups is None, False)
    if len(wshape) != n + 2:
        raise ctx.error(f"filter rank {len(wshape)} does not match input rank {n + 2}")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    pads = _padding(ctx, xshape[2:], wshape[2:], strides, dil)
    attrs = {"border": "constant", "padding": [] if pads is None else pads, "stride": strides, "dilation": dil,
             "groups": g}
    return ctx.emit1("conv", {"input": ctx.tensor(0), "filter": w, "bias": 0.0}, attrs)


@operator(("ConvolutionBackpropData", "GroupConvolutionBackpropData"), ANY)
def _deconvolution(ctx: NodeContext):
    grouped = ctx.type.startswith("Group")
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    n = len(xshape) - 2
    w, wshape, g = _filter(ctx, grouped, True)
    if ctx.n_inputs > 2:
        raise ctx.error("an explicit output_shape input is not supported")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    outpad = _spatial(ctx, "output_padding", n, 0)
    auto = ctx.str("auto_pad", "explicit").lower()
    if auto in ("explicit", "notset", ""):
        pads = list(zip(_spatial(ctx, "pads_begin", n, 0), _spatial(ctx, "pads_end", n, 0), strict=False))
    elif auto == "valid":
        pads = [(0, 0)] * n
    elif auto in ("same_upper", "same_lower"):
        pads = []
        for k, s, d, op in zip(wshape[2:], strides, dil, outpad, strict=False):
            t = max((k - 1) * d + 1 - s + op, 0)
            small, large = t // 2, t - t // 2
            pads.append((small, large) if auto == "same_upper" else (large, small))
    else:
        raise ctx.error(f"unknown auto_pad '{auto}'")
    # output_padding adds extents at the end: NNEF expresses that as less end padding
    padding = [(p, q - op) for (p, q), op in zip(pads, outpad, strict=False)]
    attrs = {"border": "constant", "padding": padding, "stride": strides, "dilation": dil, "groups": g}
    return ctx.result(ctx.emit1("deconv", {"input": ctx.tensor(0), "filter": w, "bias": 0.0}, attrs))


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


# --- ONNX nodes -----------------------------------------------------------------------------------

def _onnx_conv_pads(r, attrs, spatial, kernel, strides, dil) -> list[tuple[int, int]]:
    n = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = list(attrs.get("pads", [0] * (2 * n)))
        if len(p) != 2 * n:
            raise r.error(f"pads {p} must have {2 * n} entries")
        return list(zip(p[:n], p[n:], strict=True))
    if auto == "VALID":
        return [(0, 0)] * n
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for x, k, s, d in zip(spatial, kernel, strides, dil, strict=True):
            if x is None:
                raise r.error("auto_pad SAME needs known spatial extents")
            out = -(-x // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - x)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return pads
    raise r.error(f"unknown auto_pad '{auto}'")


def _onnx_bias(r, c, ins, idx: int):
    if len(ins) <= idx or ins[idx] is None:
        return 0.0
    b = ins[idx]
    if b.is_const:
        return c.tensor_of(c.folded(np.asarray(b.const).reshape(1, -1)), f"{c.name}_onnx_bias")
    return c.emit1("unsqueeze", {"input": c.tensor_of(b)}, {"axes": [0]})


def _onnx_kernel(r, attrs, w: Value, n: int) -> list[int]:
    kernel = list(w.shape[2:])
    if len(kernel) != n or any(k is None for k in kernel):
        raise r.error(f"filter shape {list(w.shape)} does not fit a {n}-D convolution")
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != kernel:
        raise r.error(f"kernel_shape {list(attrs['kernel_shape'])} disagrees with the filter shape {list(w.shape)}")
    for key in ("strides", "dilations", "output_padding"):
        if key in attrs and (len(attrs[key]) != n or any(int(v) < (0 if key == "output_padding" else 1)
                                                         for v in attrs[key])):
            raise r.error(f"attribute '{key}' = {list(attrs[key])} must have {n} entries "
                          f"{'>= 0' if key == 'output_padding' else '>= 1'}")
    return kernel


@onnx_node("Conv")
def _onnx_conv(r, attrs, ins):
    x, w = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "W")
    if x.shape is None or w.shape is None:
        raise r.error("Conv needs known input and filter ranks")
    n = len(x.shape) - 2
    kernel = _onnx_kernel(r, attrs, w, n)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    pads = _onnx_conv_pads(r, attrs, x.shape[2:], kernel, strides, dil)
    c = r.ctx([x, w])
    bias = _onnx_bias(r, c, ins, 2)
    y = c.emit1("conv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": bias},
                {"border": "constant", "padding": pads, "stride": strides, "dilation": dil,
                 "groups": int(attrs.get("group", 1))})
    return c.result(y)


@onnx_node("ConvTranspose")
def _onnx_conv_transpose(r, attrs, ins):
    x, w = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "W")
    if x.shape is None or w.shape is None:
        raise r.error("ConvTranspose needs known input and filter ranks")
    n = len(x.shape) - 2
    g = int(attrs.get("group", 1))
    kernel = _onnx_kernel(r, attrs, w, n)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    outpad = list(attrs.get("output_padding", [0] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(attrs["output_shape"])[-n:] if "output_shape" in attrs else \
            [None if d is None else d * s for d, s in zip(x.shape[2:], strides, strict=True)]
        pads = []
        for i in range(n):
            if x.shape[2 + i] is None or want[i] is None:
                raise r.error("ConvTranspose output_shape needs known spatial extents")
            total = strides[i] * (x.shape[2 + i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - want[i]
            if auto == "SAME_UPPER":
                pads.append((total // 2, total - total // 2))
            else:
                pads.append((total - total // 2, total // 2))
        padding = pads
    else:
        if auto == "VALID":
            pads = [(0, 0)] * n
        else:
            p = list(attrs.get("pads", [0] * (2 * n)))
            pads = list(zip(p[:n], p[n:], strict=True))
        padding = [(a, b - op) for (a, b), op in zip(pads, outpad, strict=True)]
    c = r.ctx([x, w])
    bias = _onnx_bias(r, c, ins, 2)
    y = c.emit1("deconv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": bias},
                {"border": "constant", "padding": padding, "stride": strides, "dilation": dil, "groups": g})
    return c.result(y)

_onnx_AUTO = {"NOTSET": "explicit", "": "explicit", "VALID": "valid", "SAME_UPPER": "same_upper",
         "SAME_LOWER": "same_lower"}


@onnx_node("MaxPool", "AveragePool")
def _onnx_pool(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    n = onnx_rank(r, x) - 2
    kernel = list(attrs["kernel_shape"])
    p = list(attrs.get("pads", [0] * (2 * n)))
    data = {"kernel": kernel, "strides": list(attrs.get("strides", [1] * n)), "pads_begin": p[:n],
            "pads_end": p[n:], "rounding_type": "ceil_torch" if attrs.get("ceil_mode", 0) else "floor",
            "auto_pad": _onnx_AUTO.get(attrs.get("auto_pad", "NOTSET"), "?")}
    if r.node.op_type == "MaxPool":
        if attrs.get("storage_order", 0):
            raise r.error("storage_order=1 is not supported")
        data["dilations"] = list(attrs.get("dilations", [1] * n))
        n_out = len(r.node.output)
        return r.apply("MaxPool", data, [x], n_out=n_out)
    if any(d != 1 for d in attrs.get("dilations", [1] * n)):
        raise r.error("dilated AveragePool is not supported")
    include = bool(attrs.get("count_include_pad", 0))
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

@onnx_node("GlobalAveragePool", "GlobalMaxPool")
def _onnx_global_pool(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    kind = "ReduceMean" if r.node.op_type == "GlobalAveragePool" else "ReduceMax"
    return r.apply1(kind, {"keep_dims": True}, [x, const(np.arange(2, onnx_rank(r, x), dtype=np.int64))])
