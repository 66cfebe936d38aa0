"""Convolutions: how each is read from IR and ONNX and written to them.

Convolution, GroupConvolution, BinaryConvolution, (Group)ConvolutionBackpropData; ONNX Conv,
ConvTranspose.  Writing: NNEF conv, deconv, separable_conv and the legacy binary convolution.
(Pooling and the other window operations are in :mod:`.sliding_pool`.)

Specifications: OpenVINO opset docs: Convolution-1, GroupConvolution-1, BinaryConvolution-1,
ConvolutionBackpropData-1; ONNX operator docs: Conv, ConvTranspose; NNEF spec §4.5.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    bias_add,
    binop,
    out,
    reshape,
    scalar,
    static,
    window,
    window_input,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import pad_node, pads_attr
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import const_value
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, const
from ._common import onnx_carried, onnx_emit, onnx_ints, onnx_kept_etypes, onnx_need, onnx_present, onnx_write

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


@onnx_node("CausalConvWithState")
def _onnx_causal_conv_with_state(r, attrs, ins):
    # ONNX CausalConvWithState (opset 27): the input after past_state (or k - 1 zeros) along the
    # length, a depthwise valid convolution of it (filter [C, 1, k]), bias, optional SiLU; the
    # present state is the last k - 1 positions of that padded input
    x, w = onnx_need(r, ins, 0, "input"), onnx_need(r, ins, 1, "weight")
    onnx_carried(r, x, w)
    act = attrs.get("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise r.error(f"unknown activation '{act}' (known: none, silu, swish)")
    if x.shape is None or len(x.shape) != 3 or w.shape is None or len(w.shape) != 3 or w.shape[1] != 1 \
            or w.shape[2] is None or x.shape[1] is None or w.shape[0] != x.shape[1]:
        raise r.error(f"input {x.shape} and weight {w.shape} must be [B, C, L] and [C, 1, k] with a known C and k")
    k = w.shape[2]
    past = ins[3] if len(ins) > 3 and ins[3] is not None else None
    if past is not None:
        padded = r.apply1("Concat", {"axis": 2}, [past, x])
    else:
        zeros = const(np.array([0, 0, k - 1], np.int64))
        padded = r.apply1("Pad", {"pad_mode": "constant"}, [x, zeros, const(np.zeros(3, np.int64)),
                                                            const(np.float32(0))], version="opset12")
    c = r.ctx([padded, w])
    y = c.result(c.emit1("conv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": _onnx_bias(r, c, ins, 2)},
                         {"border": "constant", "padding": [(0, 0)], "stride": [1], "dilation": [1],
                          "groups": x.shape[1]}))
    if act != "none":
        y = r.apply1("Swish", {}, [y], version="opset4")
    # the last k - 1 positions: with k = 1 none, the empty slice [end, end)
    first = -(k - 1) if k > 1 else 2**62
    state = r.apply1("Slice", {}, [padded, const(np.array([first], np.int64)), const(np.array([2**62], np.int64)),
                                   const(np.array([1], np.int64)), const(np.array([2], np.int64))])
    return [y, state]


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
    else:
        if auto == "VALID":
            pads = [(0, 0)] * n
        else:
            p = list(attrs.get("pads", [0] * (2 * n)))
            pads = list(zip(p[:n], p[n:], strict=True))
    # output_padding adds rows at the end: the NNEF padding after shrinks by it (the total above,
    # from output_shape, already counts it)
    padding = [(a, b - op) for (a, b), op in zip(pads, outpad, strict=True)]
    c = r.ctx([x, w])
    bias = _onnx_bias(r, c, ins, 2)
    y = c.emit1("deconv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": bias},
                {"border": "constant", "padding": padding, "stride": strides, "dilation": dil, "groups": g})
    return c.result(y)

_onnx_AUTO = {"NOTSET": "explicit", "": "explicit", "VALID": "valid", "SAME_UPPER": "same_upper",
         "SAME_LOWER": "same_lower"}


# --- ONNX Col2Im and DeformConv (ops/onnx/sliding.py) --------------------------------------------

def _window_attrs(attrs, *names: str) -> dict:
    return {k: [int(v) for v in attrs[k]] for k in names if k in attrs}


@onnx_node("Col2Im")
def _onnx_col2im(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    onnx_kept_etypes(r, ins[:1])
    data = {"image_shape": onnx_ints(r, onnx_need(r, ins, 1, "image_shape"), "image_shape"),
            "block_shape": onnx_ints(r, onnx_need(r, ins, 2, "block_shape"), "block_shape"),
            **_window_attrs(attrs, "dilations", "pads", "strides")}
    return onnx_emit(r, "onnx_col2im", {"input": x}, data, results=[x.etype])[0]


@onnx_node("DeformConv")
def _onnx_deform_conv(r, attrs, ins):
    x, w = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "W")
    onnx_kept_etypes(r, ins)
    if "kernel_shape" in attrs and w.shape is not None and list(w.shape[2:]) != [int(k) for k in attrs["kernel_shape"]]:
        raise r.error(f"kernel_shape {list(attrs['kernel_shape'])} differs from the filter's {list(w.shape[2:])}")
    data = {"group": int(attrs.get("group", 1)), "offset_group": int(attrs.get("offset_group", 1)),
            **_window_attrs(attrs, "dilations", "pads", "strides")}
    given = {"input": x, "filter": w, "offset": onnx_need(r, ins, 2, "offset"), "bias": onnx_present(ins, 3),
             "mask": onnx_present(ins, 4)}
    return onnx_emit(r, "onnx_deform_conv", given, data, results=[x.etype])[0]


# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------


def _grouped_ir(ctx: IRContext, layer: str, x: Any, f: Any, groups: int, shape: tuple, attrs: dict) -> Any:
    """``layer`` (Convolution, ConvolutionBackpropData) or, with groups, its Group form, whose
    filter has the groups split off as a leading dimension."""
    if groups == 1:
        return ctx.layer(layer, [x, f], shape, attrs=attrs)
    fs = ctx.shape(f)
    wf = reshape(ctx, f, (groups, fs[0] // groups) + tuple(fs[1:]))
    return ctx.layer("Group" + layer, [x, wf], shape, attrs=attrs)


def _pad_correction(ctx: IRContext, bits: np.ndarray, in_spatial: tuple, out_spatial: tuple,
                    pads: list[tuple[int, int]], stride: list[int], dil: list[int], pad_value: float) -> np.ndarray:
    """``(pad_value - 1) * S`` (float32, shape ``[O, out spatial...]``): what turns the layer's
    padded +1s into nnefx's ``pad_value``; ``S[o, y]`` sums the +-1 weights of filter ``o``
    that meet padded input positions for output position ``y`` (zero away from the borders).

    nnefx sums exactly in float64 and rounds once to float32; the file's Add rounds the exact
    ``(core + S) + (p - 1) S`` once too -- the same value -- when every term is exact: p a
    float32 value, the nnefx sums within float64's 53 bits, ``core + S`` an integer within
    float32's 24 bits and ``(p - 1) S`` a float32 value.  Anything else is refused.
    """
    count = int(np.prod(bits.shape[1:]))  # +-1 terms per output value
    finite = math.isfinite(pad_value) and float(np.float32(pad_value)) == pad_value
    denominator = pad_value.as_integer_ratio()[1] if finite else 0
    if not finite or count > 1 << 24 or count * max(1.0, abs(pad_value)) * denominator >= 2.0 ** 53:
        raise ctx.fail(f"pad_value {pad_value!r} has no exact opset form (BinaryConvolution-1 pads with +1; "
                       "the difference is exact only for a float32 pad_value and moderate sums)")
    wsum = np.where(bits, 1.0, -1.0).sum(axis=1)                      # [O, kernel...]
    padded = np.pad(np.zeros(in_spatial), pads, constant_values=1.0)  # 1 on padded positions
    s = np.zeros((bits.shape[0],) + tuple(out_spatial))
    k = len(in_spatial)
    for kpos in np.ndindex(*bits.shape[2:]):
        window = tuple(slice(kpos[i] * dil[i], kpos[i] * dil[i] + (out_spatial[i] - 1) * stride[i] + 1, stride[i])
                       for i in range(k))
        s += wsum[(slice(None),) + kpos].reshape((-1,) + (1,) * k) * padded[window]
    corr = (pad_value - 1.0) * s
    if not np.array_equal(corr.astype(np.float32), corr):
        raise ctx.fail(f"pad_value {pad_value!r} has no exact opset form (its correction is not a float32 value)")
    return corr.astype(np.float32)


# --- ONNX helpers ----------------------------------------------------------------------------

def _conv_bias(ctx: OnnxContext, op: Operation, channels: int | None, dtype: Any) -> str | None:
    """The bias as Conv's 1-D ``B`` when it is per-channel load-time data, else None.  ``B`` has
    the convolution's element type (``dtype``, its input's): ONNX binds X, W and B to one T."""
    bias = op.inputs.get("bias", 0.0)
    if isinstance(bias, str) and bias in ctx.refs:
        return None
    data = ctx.data(bias)
    if data is None or channels is None:
        return None
    arr = np.asarray(data, dtype=dtype)
    if arr.size == channels and (arr.ndim <= 1 or arr.shape[:2] in ((1, channels), (channels,))) and \
            all(d == 1 for d in arr.shape[2:]):
        return ctx.const(arr.reshape(channels))
    if arr.size == 1:
        return ctx.const(np.full((channels,), arr.reshape(-1)[0], dtype))
    return None


# --- writers --------------------------------------------------------------------------------------

@to_ir("conv")
def conv_to_ir(ctx: IRContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    n = len(xs) - 2
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]))
    border = op.attribs.get("border", "constant")
    xin, pads = window_input(ctx, x, pads, border, ("constant", "ignore"))
    groups = int(op.attribs.get("groups", 1)) or xs[1]
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "auto_pad": "explicit"}
    shape = out_shape(ctx, op)
    ctx.bind(out(op), bias_add(ctx, op, _grouped_ir(ctx, "Convolution", xin, f, groups, shape, attrs)))


@to_onnx("conv")
def conv_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xd, fs = ctx.dims(x), ctx.shape(f)
    n = len(xd) - 2
    if n < 1:
        raise ctx.fallback(f"a convolution of a rank-{len(xd)} tensor has no Conv form")
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]))
    border = op.attribs.get("border", "constant")
    xin, pads = window_input(ctx, x, pads, border, ("constant", "ignore"))
    groups = int(op.attribs.get("groups", 1))
    if groups == 0:
        groups = static(ctx, xd[1:2])[0]
    shape = ctx.dims(out(op))
    b = _conv_bias(ctx, op, fs[0], ctx.dtype(xin))
    y = ctx.node("Conv", [xin, f] + ([b] if b is not None else []), shape, dtype=ctx.dtype(xin),
                 kernel_shape=list(fs[2:]), pads=pads_attr(pads), strides=stride, dilations=dil, group=groups)
    ctx.bind(out(op), y if b is not None else bias_add(ctx, op, y))


@to_ir("deconv")
def deconv_to_ir(ctx: IRContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    n = len(xs) - 2
    if op.attribs.get("border", "constant") != "constant":
        raise ctx.fail(f"border '{op.attribs.get('border')}' of a deconvolution has no opset form")
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]), transposed=True)
    if any(p < 0 for p, _ in pads):
        raise ctx.fail(f"negative padding {pads} has no opset form")
    # a negative padding after extends the output past the full transposed extent: that is
    # OpenVINO's output_padding
    pads = [(p, max(q, 0)) for p, q in pads]
    shape = out_shape(ctx, op)
    base = [nnef_attrs.window_span(xs[2 + i], fs[2 + i], stride[i], dil[i]) - pads[i][0] - pads[i][1] for i in range(n)]
    extra = [shape[2 + i] - base[i] for i in range(n)]
    if any(e < 0 or e >= max(stride[i], dil[i]) for i, e in enumerate(extra)):
        raise ctx.fail(f"output shape {shape} needs output padding {extra} outside the opset's range")
    attrs = {"strides": stride, "dilations": dil, "pads_begin": [p for p, _ in pads],
             "pads_end": [q for _, q in pads], "auto_pad": "explicit", "output_padding": extra}
    groups = int(op.attribs.get("groups", 1))
    if groups == 0:
        groups = shape[1]
    y = _grouped_ir(ctx, "ConvolutionBackpropData", x, f, groups, shape, attrs)
    ctx.bind(out(op), bias_add(ctx, op, y))


@to_onnx("deconv")
def deconv_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xd, fs = ctx.dims(x), ctx.shape(f)
    n = len(xd) - 2
    xs = (xd[0], xd[1]) + static(ctx, xd[2:])
    if op.attribs.get("border", "constant") != "constant":
        raise ctx.fallback(f"border '{op.attribs.get('border')}' of a deconvolution has no ConvTranspose form")
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]), transposed=True)
    od = ctx.dims(out(op))
    shape = (od[0],) + static(ctx, od[1:])
    # output index i is index i + p of the full transposed result (extent F): a negative p
    # puts positions before it (zeros padded on); the end padding is whatever makes the
    # output X long: a crop where X < F - p, else positions past the full extent, which
    # receive nothing either (ConvTranspose's output_padding, or zeros padded on)
    full = [nnef_attrs.window_span(xs[2 + i], fs[2 + i], stride[i], dil[i]) for i in range(n)]
    lead = [max(-p, 0) for p, _ in pads]
    want = [shape[2 + i] - lead[i] for i in range(n)]
    if any(w < 1 for w in want):
        raise ctx.fallback(f"padding {pads} leaves no position of the transposed result")
    pads = [(max(p, 0), max(full[i] - max(p, 0) - want[i], 0)) for i, (p, _) in enumerate(pads)]
    extra = [want[i] - (full[i] - pads[i][0] - pads[i][1]) for i in range(n)]
    inside = not any(lead) and all(e < stride[i] for i, e in enumerate(extra))   # onnxruntime: < stride
    groups = int(op.attribs.get("groups", 1))
    if groups == 0:   # as nnefx decides it: the output_shape's channels, else the input's
        given = list(op.attribs.get("output_shape", []))
        groups = int(given[1]) if given else static(ctx, xd[1:2])[0]
    b = _conv_bias(ctx, op, shape[1], ctx.dtype(x)) if inside else None
    partial = shape if inside else shape[:2] + tuple(want[i] - extra[i] for i in range(n))
    y = ctx.node("ConvTranspose", [x, f] + ([b] if b is not None else []), partial, dtype=ctx.dtype(x),
                 kernel_shape=list(fs[2:]), pads=pads_attr(pads), strides=stride, dilations=dil, group=groups,
                 output_padding=extra if inside and any(extra) else None)
    if not inside:
        y = pad_node(ctx, y, [(0, 0), (0, 0)] + list(zip(lead, extra, strict=True)), "constant")
    ctx.bind(out(op), y if b is not None else bias_add(ctx, op, y))


@to_ir("ir_binary_convolution")
def ir_binary_convolution_to_ir(ctx: IRContext, op: Operation) -> None:
    """``ir_binary_convolution`` as BinaryConvolution-1 (``xnor-popcount``), where exact.

    The opset layer and nnefx agree on what a +1/-1 product sum is; the to_ir closes the
    gaps between them (found by reading the opset specification and OpenVINO's reference
    implementation, and by running its CPU plugin):

    * *Input.*  The layer is defined for 0/1 inputs (the reference counts a match only for a
      value exactly 0 or 1); nnefx reads ``x > 0`` as +1 for any ``x``.  ``Greater(x, 0)`` then
      ``Convert`` to f32 in front of the layer hands it exactly 0/1.
    * *Filter.*  Load-time data only, written as ``u1`` (bit = ``filter > 0``, nnefx's reading),
      packed least significant bit first as the Model Optimizer did and the CPU plugin reads.
    * *pad_value.*  OpenVINO's reference and CPU plugin agree only on ``pad_value = 1`` (a
      padded position counts as +1), so that is what is written; for any other nnefx
      ``pad_value`` p the difference, ``(p - 1) * S`` with ``S[o, y]`` the sum of the +-1
      weights that meet padded positions, is a load-time constant added after the layer.  It
      is refused unless the sums are exact in both nnefx (float64, then float32) and the file
      (float32): p a float32 value and small enough sums (:func:`_pad_correction`).
    * *groups.*  The layer has none: the input is split along the channels, each group
      convolved with its filters, and the results concatenated (exact).
    * *Rank.*  The layer is 2-D only (4-D input, checked by OpenVINO itself); a 1-D one is
      written with a unit height, a 3-D one is refused.
    """
    x, f = op.inputs["input"], op.inputs["filter"]
    xs, fs = ctx.shape(x), ctx.shape(f)
    k = len(xs) - 2
    if k not in (1, 2):
        raise ctx.fail(f"a {k}-D binary convolution has no opset form (BinaryConvolution-1 is 2-D only)")
    fdata = ctx.data(f)
    if fdata is None:
        raise ctx.fail("the filter must be load-time data (BinaryConvolution-1 takes packed u1 weights)")
    bits = np.broadcast_to(np.asarray(fdata), fs) > 0
    a = op.attribs
    pads = [(int(p), int(q)) for p, q in a["padding"]]
    stride = [int(v) for v in a.get("stride") or [1] * k]
    dil = [int(v) for v in a.get("dilation") or [1] * k]
    groups = int(a.get("groups", 1))
    pad_value = float(a.get("pad_value", 0.0))
    if any(p < 0 or q < 0 for p, q in pads):
        raise ctx.fail(f"negative padding {pads} has no opset form")
    oshape = out_shape(ctx, op)
    correction = None
    if pad_value != 1.0 and any(p or q for p, q in pads):
        correction = _pad_correction(ctx, bits, xs[2:], oshape[2:], pads, stride, dil, pad_value)
    xb = ctx.layer("Convert", [binop(ctx, "gt", x, scalar(ctx, 0.0))], xs, etype="f32",
                   attrs={"destination_type": "f32"})
    if k == 1:  # a unit height in front of the one spatial axis
        xs, fs, oshape4 = xs[:2] + (1,) + xs[2:], fs[:2] + (1,) + fs[2:], oshape[:2] + (1,) + oshape[2:]
        xb, bits = reshape(ctx, xb, xs), bits.reshape(fs)
        pads, stride, dil = [(0, 0)] + pads, [1] + stride, [1] + dil
    else:
        oshape4 = oshape
    attrs = {"strides": stride, "pads_begin": [p for p, _ in pads], "pads_end": [q for _, q in pads],
             "dilations": dil, "mode": "xnor-popcount", "pad_value": 1.0, "auto_pad": "explicit"}
    cg, og = xs[1] // groups, fs[0] // groups
    if groups == 1:
        parts = [xb]
    else:
        parts = ctx.layer("Split", [xb, ctx.const(np.asarray(1), "i64")], attrs={"num_splits": groups},
                          outputs=[(xs[:1] + (cg,) + xs[2:], "f32")] * groups)
    ys = [ctx.layer("BinaryConvolution", [part, ctx.w.const_bits(bits[g * og:(g + 1) * og], name=f"{out(op)}/bits")],
                    oshape4[:1] + (og,) + oshape4[2:], etype="f32", attrs=attrs)
          for g, part in enumerate(parts)]
    y = ys[0] if groups == 1 else ctx.layer("Concat", ys, oshape4, attrs={"axis": 1})
    if k == 1:
        y = reshape(ctx, y, oshape)
    if correction is not None:
        y = binop(ctx, "add", y, ctx.const(correction.reshape((1,) + correction.shape), "f32"))
    ctx.bind(out(op), y)


@to_ir("separable_conv")
def separable_conv_to_ir(ctx: IRContext, op: Operation) -> None:
    # conv(input, plane_filter, groups = 0, window attributes), then a 1x1 conv with the bias
    plane = Operation("conv", {"input": op.inputs["input"], "filter": op.inputs["plane_filter"], "bias": 0.0},
                      {"output": out(op)}, {k: v for k, v in op.attribs.items() if k != "groups"} | {"groups": 0},
                      location=op.location)
    xs, fs = ctx.shape(op.inputs["input"]), ctx.shape(op.inputs["plane_filter"])
    from ...ops._common import down_extent, window_arrays

    size, pads, stride, dil = window_arrays("conv", len(xs) - 2, list(fs[2:]), op.attribs.get("padding", []),
                                            op.attribs.get("stride", []), op.attribs.get("dilation", []))
    mid = (xs[0], fs[0]) + tuple(down_extent("conv", 2 + i, xs[2 + i], size[i], stride[i], dil[i],
                                             None if pads is None else pads[i]) for i in range(len(size)))
    saved = ctx.graph.tensors[out(op)].shape
    ctx.graph.tensors[out(op)].shape = mid       # the depth-wise result's shape, while it is written
    try:
        conv_to_ir(ctx, plane)
    finally:
        ctx.graph.tensors[out(op)].shape = saved
    filtered = ctx.refs.pop(out(op))
    point = Operation("conv", {"input": filtered, "filter": op.inputs["point_filter"], "bias": op.inputs.get("bias", 0.0)},
                      {"output": out(op)}, {"groups": op.attribs.get("groups", 1)}, location=op.location)
    conv_to_ir(ctx, point)


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

@to_onnx("onnx_col2im")
def col2im_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "Col2Im", [op.inputs["input"], ctx.ints(op.attribs["image_shape"]),
                                   ctx.ints(op.attribs["block_shape"])], 18,
               **{k: [int(v) for v in op.attribs[k]] or None for k in ("dilations", "pads", "strides") if k in op.attribs})


@to_onnx("onnx_deform_conv")
def deform_conv_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "DeformConv", [op.inputs.get(k) for k in ("input", "filter", "offset", "bias", "mask")], 19,
               group=int(op.attribs.get("group", 1)), offset_group=int(op.attribs.get("offset_group", 1)),
               **{k: [int(v) for v in op.attribs[k]] or None for k in ("dilations", "pads", "strides") if k in op.attribs})
