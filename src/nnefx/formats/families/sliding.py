"""Sliding-window operations in the formats.

Covers NNEF operators §4.3 and §4.9.3 (convolutions, pools, box filters, ``sample``/``desample``) and ``ir_binary_convolution``.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
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
from ..onnx.spelling import F32, I64, average_pool, filled_tensor, pad_node, pads_attr
from ..onnx.writer import ExportContext as OnnxContext

# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------

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

def _conv_bias(ctx: OnnxContext, op: Operation, channels: int | None) -> str | None:
    """The bias as Conv's 1-D ``B`` when it is per-channel load-time data, else None."""
    bias = op.inputs.get("bias", 0.0)
    if isinstance(bias, str) and bias in ctx.refs:
        return None
    data = ctx.data(bias)
    if data is None or channels is None:
        return None
    arr = np.asarray(data, dtype=F32)
    if arr.size == channels and (arr.ndim <= 1 or arr.shape[:2] in ((1, channels), (channels,))) and \
            all(d == 1 for d in arr.shape[2:]):
        return ctx.const(arr.reshape(channels))
    if arr.size == 1:
        return ctx.const(np.full((channels,), arr.reshape(-1)[0], F32))
    return None


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
    b = _conv_bias(ctx, op, fs[0])
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
    b = _conv_bias(ctx, op, shape[1]) if inside else None
    partial = shape if inside else shape[:2] + tuple(want[i] - extra[i] for i in range(n))
    y = ctx.node("ConvTranspose", [x, f] + ([b] if b is not None else []), partial, dtype=ctx.dtype(x),
                 kernel_shape=list(fs[2:]), pads=pads_attr(pads), strides=stride, dilations=dil, group=groups,
                 output_padding=extra if inside and any(extra) else None)
    if not inside:
        y = pad_node(ctx, y, [(0, 0), (0, 0)] + list(zip(lead, extra, strict=True)), "constant")
    ctx.bind(out(op), y if b is not None else bias_add(ctx, op, y))


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
