"""nnefx operation -> ONNX node(s) (opset 18): one small function per operation.

Each exporter gets the :class:`~.writer.ExportContext` and the Operation, emits nodes and
binds the operation's output tensors to ONNX values.  The rules every exporter follows:

* **Exact or refused.**  Where NNEF and ONNX differ, the exporter reproduces NNEF's result
  exactly (extra nodes where needed) or raises ``ctx.fallback`` (then a compound operation
  is written through its NNEF definition) / ``ctx.fail`` — never an approximation.
* **NNEF broadcasting.**  NNEF aligns shapes from dimension 0 (a ``[1, C]`` bias against
  ``[N, C, H, W]`` means ``[1, C, 1, 1]``) while ONNX aligns from the right, so operands of
  lower rank get trailing unit dimensions (:func:`aligned`) before any broadcasting node.
* **Shapes.**  Unknown dims (``None``) travel as long as an operation does not need them;
  those that do (automatic padding, slicing, splitting) ask ``ctx.shape`` for static ones.
* **One reading of NNEF.**  What an operation's attributes mean (automatic padding, slice
  stops, reductions, border and resize modes, defaults) comes from
  :mod:`nnefx.formats.export.attrs`, shared with the IR exporters, so both formats
  compute the same thing for the same document; this module only emits nodes.

The traps that matter (all checked by ``tests/test_onnx_export*.py`` against nnefx):
NNEF ``round`` is floor(x + 0.5) while ONNX Round goes half to even; NNEF ``cast`` of
scalars to integers floors while ONNX Cast truncates; ONNX reductions drop the reduced
axes unless ``keepdims=1``; ``Pad`` has no 'symmetric' (NNEF 'reflect-even') mode and its
'reflect' needs the padding below the extent; pooling 'constant' borders pad with zeros
that take part in a maximum, while ONNX MaxPool never reads its padding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export import registry
from ..export.context import export_copy_n
from ..export.lowering import (
    aligned,
    bias_add,
    binop,
    broadcast_dims,
    cast,
    channel_vector,
    crop,
    is_zero,
    literal,
    literal_type,
    operands,
    out,
    pad,
    reshape,
    scalar,
    static,
    unop,
    window,
)
from .spelling import pad_node, slice_axis
from .writer import NUMPY, ExportContext, tensor_type

Exporter = Callable[[ExportContext, Operation], None]
exporter = registry.to_onnx

F32 = NUMPY["scalar"]
I64 = NUMPY["integer"]
BOOL = NUMPY["logical"]


def exportable_ops() -> list[str]:
    """Names of the operations the ONNX writer has an exporter for (compounds without one
    may still be written through their definitions)."""
    return registry.table("onnx").names()


# --- helpers --------------------------------------------------------------------------------


_LOGICAL_NODES = {"Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal", "And", "Or", "Not"}


# --- element-wise ---------------------------------------------------------------------------

@exporter("selu")
def _selu(ctx: ExportContext, op: Operation) -> None:
    # lambda * select(x < 0, alpha * (exp(x) - 1), x)
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.node("Selu", [x], ctx.dims(x), alpha=literal(ctx, op, "alpha", 1.67326319),
                               gamma=literal(ctx, op, "lambda", 1.05070102)))


@exporter("leaky_relu")
def _leaky_relu(ctx: ExportContext, op: Operation) -> None:
    # select(x < 0, alpha * x, x)
    x = ctx.ref(op.inputs["x"])
    ctx.bind(out(op), ctx.node("LeakyRelu", [x], ctx.dims(x), alpha=literal(ctx, op, "alpha")))


@exporter("prelu")
def _prelu(ctx: ExportContext, op: Operation) -> None:
    # select(x < 0, alpha * x, x) with NNEF broadcasting (PRelu's slope may only broadcast
    # towards x; the definition broadcasts both ways)
    x, alpha = op.inputs["x"], op.inputs["alpha"]
    xr, ar = operands(ctx, op, [x, alpha])
    dt = ctx.dtype(xr)
    neg = binop(ctx, "lt", xr, scalar(ctx, 0.0, dt))
    prod = binop(ctx, "mul", ar, xr)
    shape = broadcast_dims(ctx.dims(neg), ctx.dims(prod))
    ctx.bind(out(op), ctx.node("Where", [neg, prod, xr], shape, dtype=dt))


@exporter("cast")
def _cast(ctx: ExportContext, op: Operation) -> None:
    target = NUMPY.get(op.dtype or "scalar", F32)
    x = ctx.ref(op.inputs["input"])
    src = ctx.dtype(x)
    # Identity where nothing changes; NNEF cast floors scalars first (lowering.cast)
    ctx.bind(out(op), unop(ctx, "copy", x) if src == target else cast(ctx, x, target))


# --- linear algebra -------------------------------------------------------------------------

def _transposed(ctx: ExportContext, value: Any) -> str:
    ref = ctx.ref(value)
    dims = ctx.dims(ref)
    r = len(dims)
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return ctx.node("Transpose", [ref], tuple(dims[p] for p in perm), perm=perm)


@exporter("matmul")
def _matmul(ctx: ExportContext, op: Operation) -> None:
    a, b = op.inputs["A"], op.inputs["B"]
    if op.attribs.get("transposeA", False):
        a = _transposed(ctx, a)
    if op.attribs.get("transposeB", False):
        b = _transposed(ctx, b)
    ctx.bind(out(op), ctx.node("MatMul", [a, b], ctx.dims(out(op)), dtype=ctx.dtype(a)))


@exporter("linear")
def _linear(ctx: ExportContext, op: Operation) -> None:
    # matmul(input, filter, transposeB = true) + bias
    x, w = op.inputs["input"], op.inputs["filter"]
    bias = op.inputs.get("bias", 0.0)
    shape = ctx.dims(out(op))
    if ctx.rank(x) != 2 or ctx.rank(w) != 2:
        raise ctx.fallback("Gemm takes matrices only")
    if is_zero(ctx, bias):
        ctx.bind(out(op), ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1))
        return
    bdims = ctx.dims(bias) if isinstance(bias, str) else ()
    if len(bdims) <= 2 and all(d == 1 or d == s for d, s in zip(bdims[::-1], shape[::-1], strict=False)):
        # a bias that broadcasts towards [N, M] (NNEF's [1, M], a scalar) is Gemm's C
        ctx.bind(out(op), ctx.node("Gemm", [x, w, aligned(ctx, bias, 2, ctx.dtype(x))], shape,
                                   dtype=ctx.dtype(x), transB=1))
        return
    y = ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1)
    ctx.bind(out(op), binop(ctx, "add", y, aligned(ctx, bias, len(shape), ctx.dtype(x))))


# --- padding and windows --------------------------------------------------------------------


def _pads_attr(pads: list[tuple[int, int]]) -> list[int]:
    return [p for p, _ in pads] + [q for _, q in pads]


def _conv_bias(ctx: ExportContext, op: Operation, channels: int | None) -> str | None:
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


@exporter("conv")
def _conv(ctx: ExportContext, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    xd, fs = ctx.dims(x), ctx.shape(f)
    n = len(xd) - 2
    if n < 1:
        raise ctx.fallback(f"a convolution of a rank-{len(xd)} tensor has no Conv form")
    pads, stride, dil = window(ctx, op, x, n, list(fs[2:]))
    border = op.attribs.get("border", "constant")
    xin = ctx.ref(x)
    if border != "constant" or any(p < 0 or q < 0 for p, q in pads):
        xin = pad(ctx, xin, [(0, 0), (0, 0)] + pads, border)
        pads = [(0, 0)] * n
    groups = int(op.attribs.get("groups", 1))
    if groups == 0:
        groups = static(ctx, xd[1:2])[0]
    shape = ctx.dims(out(op))
    b = _conv_bias(ctx, op, fs[0])
    y = ctx.node("Conv", [xin, f] + ([b] if b is not None else []), shape, dtype=ctx.dtype(xin),
                 kernel_shape=list(fs[2:]), pads=_pads_attr(pads), strides=stride, dilations=dil, group=groups)
    ctx.bind(out(op), y if b is not None else bias_add(ctx, op, y))


@exporter("deconv")
def _deconv(ctx: ExportContext, op: Operation) -> None:
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
                 kernel_shape=list(fs[2:]), pads=_pads_attr(pads), strides=stride, dilations=dil, group=groups,
                 output_padding=extra if inside and any(extra) else None)
    if not inside:
        y = pad_node(ctx, y, [(0, 0), (0, 0)] + list(zip(lead, extra, strict=True)), "constant")
    ctx.bind(out(op), y if b is not None else bias_add(ctx, op, y))


def _split_window(ctx: ExportContext, r: int, size: list[int], pads: list, stride: list[int], dil: list[int],
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


def _to_spatial(ctx: ExportContext, v: Any, move: tuple | None) -> str:
    """Windowed dims last, the others merged into one batch dim, one channel."""
    if move is None:
        return ctx.ref(v)
    kept, win = move
    d = ctx.shape(v)
    perm = kept + win
    t = ctx.node("Transpose", [v], tuple(d[p] for p in perm), perm=perm)
    return reshape(ctx, t, _layout(d, move))


def _from_spatial(ctx: ExportContext, v: str, dims: tuple, move: tuple | None) -> str:
    if move is None:
        return v
    kept, win = move
    perm = kept + win
    t = reshape(ctx, v, tuple(dims[k] for k in kept) + tuple(dims[k] for k in win))
    return ctx.node("Transpose", [t], tuple(dims), perm=[perm.index(k) for k in range(len(dims))])


def _pool_window(ctx: ExportContext, op: Operation) -> tuple:
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


def _avg_pool(ctx: ExportContext, x: Any, size: list[int], pads: list, stride: list[int], dil: list[int],
              border: str, shape: tuple) -> str:
    """Windowed mean with NNEF's border: 'ignore' divides by the in-range count."""
    xin, full = crop(ctx, ctx.ref(x), [(0, 0), (0, 0)] + list(pads))
    pads = full[2:]
    if border not in ("constant", "ignore") and any(p or q for p, q in pads):
        xin = pad(ctx, xin, full, border)
        pads = [(0, 0)] * len(size)
    if all(d == 1 for d in dil):
        return ctx.node("AveragePool", [xin], shape, kernel_shape=size, pads=_pads_attr(pads), strides=stride,
                        count_include_pad=0 if border == "ignore" else 1)
    # AveragePool-18 has no dilations: window sums as a depth-wise convolution with a ones
    # kernel, divided by the volume or (under 'ignore') by the same sums of ones
    channels = static(ctx, ctx.dims(xin)[1:2])[0]
    dt = ctx.dtype(xin)
    ones = ctx.const(np.ones((channels, 1) + tuple(size), dt))
    attrs = dict(kernel_shape=size, pads=_pads_attr(pads), strides=stride, dilations=dil, group=channels)
    total = ctx.node("Conv", [xin, ones], shape, **attrs)
    if border != "ignore":
        return binop(ctx, "div", total, scalar(ctx, float(np.prod(size)), dt))
    dims = ctx.dims(xin)
    filled = ctx.node("ConstantOfShape", [ctx.node("Shape", [xin], (len(dims),), dtype=I64)], dims, dtype=dt,
                      value=_filled_tensor(1, dt))
    return binop(ctx, "div", total, ctx.node("Conv", [filled, ones], shape, **attrs))


def _filled_tensor(value: float, dtype: Any) -> Any:
    """ConstantOfShape's ``value``: a one-item tensor of ``dtype``."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.full((1,), value, dtype=dtype))


def _max_pool_input(ctx: ExportContext, op: Operation, x: Any, pads: list, size: list[int]) -> tuple[str, list]:
    """MaxPool's input and padding for NNEF's border: negative padding cropped off; MaxPool
    never reads its padding (as 'ignore'), while NNEF 'constant' pads with zeros that take
    part and the other modes with copies, so those are padded explicitly first."""
    border = op.attribs.get("border", "constant")
    xin, full = crop(ctx, ctx.ref(x), [(0, 0), (0, 0)] + list(pads))
    pads = full[2:]
    if border != "ignore" and any(p or q for p, q in pads):
        xin = pad(ctx, xin, full, border)
        pads = [(0, 0)] * len(size)
    return xin, pads


@exporter("max_pool")
def _max_pool(ctx: ExportContext, op: Operation) -> None:
    x, size, pads, stride, dil, pooled, finish = _pool_window(ctx, op)
    xin, pads = _max_pool_input(ctx, op, x, pads, size)
    ctx.bind(out(op), finish(ctx.node("MaxPool", [xin], pooled, kernel_shape=size, pads=_pads_attr(pads),
                                      strides=stride, dilations=dil)))


@exporter("avg_pool", "box", "rms_pool")
def _box(ctx: ExportContext, op: Operation) -> None:
    # avg_pool = normalized box; box = window sum; rms_pool = sqrt(avg_pool(x^2))
    x, size, pads, stride, dil, pooled, finish = _pool_window(ctx, op)
    border, normalize = nnef_attrs.box_mode(op)
    xin = ctx.ref(x)
    if op.op == "rms_pool":
        xin = binop(ctx, "mul", xin, xin)
    y = _avg_pool(ctx, xin, size, pads, stride, dil, border, pooled)
    if op.op == "rms_pool":
        y = unop(ctx, "sqrt", y)
    elif not normalize:
        y = binop(ctx, "mul", y, scalar(ctx, float(np.prod(size)), ctx.dtype(y)))
    ctx.bind(out(op), finish(y))


@exporter("area_downsample")
def _area_downsample(ctx: ExportContext, op: Operation) -> None:
    factor = [int(v) for v in op.attribs["factor"]]
    ctx.bind(out(op), _avg_pool(ctx, op.inputs["input"], factor, [(0, 0)] * len(factor), factor,
                                [1] * len(factor), "constant", ctx.dims(out(op))))


@exporter("nearest_downsample")
def _nearest_downsample(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    factor = [int(v) for v in op.attribs["factor"]]
    axes = [2 + i for i, f in enumerate(factor) if f != 1]
    if not axes:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    steps = [factor[a - 2] for a in axes]
    ctx.bind(out(op), ctx.node("Slice", [x, ctx.ints([0] * len(axes)), ctx.ints([2 ** 62] * len(axes)),
                                         ctx.ints(axes), ctx.ints(steps)], ctx.dims(out(op))))


@exporter("local_response_normalization")
def _lrn(ctx: ExportContext, op: Operation) -> None:
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


# --- resizing -------------------------------------------------------------------------------

def _resize(ctx: ExportContext, op: Operation, mode: str, transform: str, nearest: str | None = None) -> str:
    x = ctx.ref(op.inputs["input"])
    factor = [int(v) for v in op.attribs["factor"]]
    scales = ctx.const(np.asarray([1.0, 1.0] + [float(f) for f in factor], np.float32))
    return ctx.node("Resize", [x, "", scales], ctx.dims(out(op)), mode=mode,
                    coordinate_transformation_mode=transform, nearest_mode=nearest)


@exporter("nearest_upsample")
def _nearest_upsample(ctx: ExportContext, op: Operation) -> None:
    # output[i] = input[floor(i / factor)]: asymmetric coordinates, floor rounding
    ctx.bind(out(op), _resize(ctx, op, "nearest", "asymmetric", "floor"))


@exporter("multilinear_upsample")
def _multilinear_upsample(ctx: ExportContext, op: Operation) -> None:
    # Resize's coordinate transform, as export.attrs.linear_upsample_transform explains
    method, border, transform = nnef_attrs.linear_upsample_transform(op)
    if transform is None:
        raise ctx.fallback(f"method '{method}' with border '{border}' has no Resize form")
    ctx.bind(out(op), _resize(ctx, op, "linear", transform))


# --- shapes ---------------------------------------------------------------------------------

@exporter("reshape")
def _reshape(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    od = ctx.dims(out(op))
    if all(d is not None for d in od):
        ctx.bind(out(op), reshape(ctx, x, od))
        return
    # unknown dims: NNEF's 0 ("copy input[axis_start + k]") is ONNX's 0 at the same index as
    # long as the axes before it are copied too, and the axes after the reshaped range are
    # at the same index only when the range keeps its length
    start = int(op.attribs.get("axis_start", 0))
    count = int(op.attribs.get("axis_count", -1))
    count = len(xd) - start if count == -1 else count
    shape = [int(s) for s in op.attribs["shape"]]
    tail = list(xd[start + count:])
    target: list[int] = [0] * start + shape
    if len(shape) == count:
        target += [0] * len(tail)
    elif all(d is not None for d in tail):
        target += [int(d) for d in tail]
    else:
        raise ctx.fail("a reshape of a sub-range that changes its length needs static trailing dims")
    ctx.bind(out(op), ctx.node("Reshape", [x, ctx.ints(target)], od))


@exporter("squeeze", "unsqueeze")
def _squeeze(ctx: ExportContext, op: Operation) -> None:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    x = ctx.ref(op.inputs["input"])
    if not axes:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    kind = "Squeeze" if op.op == "squeeze" else "Unsqueeze"
    ctx.bind(out(op), ctx.node(kind, [x, ctx.ints(axes)], ctx.dims(out(op))))


@exporter("transpose")
def _transpose(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    perm = nnef_attrs.transpose_perm(op, ctx.rank(x))
    ctx.bind(out(op), ctx.node("Transpose", [x], ctx.dims(out(op)), perm=perm))


@exporter("concat")
def _concat(ctx: ExportContext, op: Operation) -> None:
    values = list(op.inputs["values"])
    dt = literal_type(ctx, op, values)
    refs = [ctx.ref(v, dt) for v in values]
    ctx.bind(out(op), ctx.node("Concat", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0]),
                               axis=int(op.attribs["axis"])))


@exporter("split")
def _split(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["value"])
    axis = int(op.attribs["axis"])
    names = op.output_names()
    shapes = [ctx.dims(n) for n in names]
    sizes = static(ctx, tuple(s[axis] for s in shapes))
    refs = ctx.node("Split", [x, ctx.ints(sizes)], outputs=[(s, ctx.dtype(x)) for s in shapes], axis=axis)
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, r)


@exporter("stack")
def _stack(ctx: ExportContext, op: Operation) -> None:
    axis = int(op.attribs["axis"])
    parts = []
    for v in op.inputs["values"]:
        d = ctx.dims(v)
        parts.append(ctx.node("Unsqueeze", [v, ctx.ints([axis])], d[:axis] + (1,) + d[axis:]))
    ctx.bind(out(op), ctx.node("Concat", parts, ctx.dims(out(op)), axis=axis))


@exporter("unstack")
def _unstack(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["value"])
    xd = ctx.dims(x)
    axis = int(op.attribs["axis"]) % len(xd)
    names = op.output_names()
    piece = xd[:axis] + (1,) + xd[axis + 1:]
    refs = ctx.node("Split", [x, ctx.ints([1] * len(names))], outputs=[(piece, ctx.dtype(x))] * len(names), axis=axis)
    for n, r in zip(names, refs, strict=True):
        ctx.bind(n, ctx.node("Squeeze", [r, ctx.ints([axis])], ctx.dims(n)))


@exporter("slice")
def _slice(ctx: ExportContext, op: Operation) -> None:
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


@exporter("pad")
def _pad(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    value = op.attribs.get("value", op.inputs.get("value", 0.0))
    if isinstance(value, str):
        raise ctx.fallback("a tensor padding value has no Pad form")
    pads = [tuple(int(v) for v in p) for p in op.attribs["padding"]]
    ctx.bind(out(op), pad(ctx, x, pads, op.attribs.get("border", "constant"), float(value)))


@exporter("tile")
def _tile(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Tile", [x, ctx.ints(op.attribs["repeats"])], ctx.dims(out(op))))


@exporter("gather")
def _gather(ctx: ExportContext, op: Operation) -> None:
    x, idx = op.inputs["input"], op.inputs["indices"]
    iref = ctx.ref(idx, I64)
    ctx.bind(out(op), ctx.node("Gather", [x, iref], ctx.dims(out(op)), dtype=ctx.dtype(x),
                               axis=int(op.attribs.get("axis", 0))))


# --- reductions and normalizations ----------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "any": "ReduceMax", "all": "ReduceMin"}


def reduce(ctx: ExportContext, kind: str, x: Any, axes: list[int]) -> str:
    """An NNEF reduction (reduced axes kept); no axes reduces nothing (ONNX: everything)."""
    ref = ctx.ref(x)
    if not axes:
        return unop(ctx, "copy", ref)
    dims = ctx.dims(ref)
    axes = [a % len(dims) for a in axes]
    return ctx.node(kind, [ref, ctx.ints(axes)], nnef_attrs.reduced_shape(dims, axes), keepdims=1)


@exporter(*nnef_attrs.REDUCTIONS)
def _reduce(ctx: ExportContext, op: Operation) -> None:
    what = nnef_attrs.reduction(op)
    kind = _REDUCE[what]
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


@exporter("argmax_reduce", "argmin_reduce")
def _arg_reduce(ctx: ExportContext, op: Operation) -> None:
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


@exporter("softmax")
def _softmax(ctx: ExportContext, op: Operation) -> None:
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


@exporter("moments")
def _moments(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    axes = [int(a) for a in op.attribs["axes"]]
    mean = reduce(ctx, "ReduceMean", x, axes)
    d = binop(ctx, "sub", x, mean)
    ctx.bind(out(op, 0), mean)
    ctx.bind(out(op, 1), reduce(ctx, "ReduceMean", binop(ctx, "mul", d, d), axes))


@exporter("batch_normalization")
def _batch_norm(ctx: ExportContext, op: Operation) -> None:
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


# --- a few more compounds, written as their definitions -------------------------------------

exporter("copy_n")(export_copy_n)


# --- IR/ONNX-import extension operations back to their ONNX nodes ----------------------------
# (an ONNX file read by nnefx keeps a few operations NNEF has no exact counterpart for)

#: ir_arith / ir_compare kind -> the NNEF element-wise operation ONNX writes it as
_IR_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max",
             "minimum": "min", "power": "pow", "mod": "mod"}
_IR_COMPARE = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
               "greater_equal": "ge"}


@exporter("ir_arith", "ir_compare")
def _ir_arith(ctx: ExportContext, op: Operation) -> None:
    # numpy broadcasting already; integer division truncates in both (Div on integers),
    # 'mod' is C's fmod (Mod with fmod = 1); floor division/modulo and integer powers are not
    kind = str(op.attribs["op"])
    x, y = op.inputs["x"], op.inputs["y"]
    dt = literal_type(ctx, op, [x, y])
    a, b = ctx.ref(x, dt), ctx.ref(y, dt)
    if op.op == "ir_compare":
        if kind not in _IR_COMPARE:
            raise ctx.fallback(f"comparison '{kind}' has no ONNX node")
        ctx.bind(out(op), binop(ctx, _IR_COMPARE[kind], a, b))   # ne: not(eq), the definition
        return
    integer = ctx.dtype(a).kind in "iu"
    if kind == "squared_difference":
        d = binop(ctx, "sub", a, b)
        ctx.bind(out(op), binop(ctx, "mul", d, d))
        return
    if kind not in _IR_ARITH or (integer and kind == "power"):
        raise ctx.fallback(f"'{kind}' on {ctx.dtype(a)} has no exact ONNX node")
    if kind == "mod":
        r = ctx.node("Mod", [a, b], broadcast_dims(ctx.dims(a), ctx.dims(b)), dtype=ctx.dtype(a), fmod=1)
    else:
        r = binop(ctx, _IR_ARITH[kind], a, b)
    ctx.bind(out(op), r)


@exporter("ir_gather")
def _ir_gather(ctx: ExportContext, op: Operation) -> None:
    # Gather-8 = ONNX Gather (negative indices count from the end) when no batch dims
    if int(op.attribs.get("batch_dims", 0)) != 0:
        raise ctx.fallback("batch_dims has no ONNX Gather form")
    x = op.inputs["input"]
    ctx.bind(out(op), ctx.node("Gather", [x, ctx.ref(op.inputs["indices"], I64)], ctx.dims(out(op)),
                               dtype=ctx.dtype(x), axis=int(op.attribs["axis"])))


@exporter("ir_reshape")
def _ir_reshape(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    od = ctx.dims(out(op))
    if all(d is not None for d in od):
        ctx.bind(out(op), reshape(ctx, x, od))
        return
    special_zero = bool(op.attribs.get("special_zero", True))   # 0 copies = allowzero 0
    shape = ctx.ref(op.inputs["shape"], I64)
    ctx.bind(out(op), ctx.node("Reshape", [x, shape], od, allowzero=0 if special_zero else 1))


@exporter("ir_shape_of")
def _ir_shape_of(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Shape", [x], (ctx.rank(x),), dtype=I64))


@exporter("ir_broadcast")
def _ir_broadcast(ctx: ExportContext, op: Operation) -> None:
    # numpy / bidirectional broadcasting to the target = Expand (bidirectional, and equal to
    # the target whenever numpy mode is valid)
    mode = str(op.attribs.get("mode", "numpy"))
    if mode not in ("numpy", "bidirectional"):
        raise ctx.fallback(f"broadcast mode '{mode}' has no Expand form")
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), ctx.node("Expand", [x, ctx.ref(op.inputs["shape"], I64)], ctx.dims(out(op))))


# --- recurrent sequences (IR LSTM/GRU/RNNSequence-5) -> ONNX LSTM / GRU / RNN -----------------
# IR is batch-first ([N, T, I], states [N, D, H], output [N, D, T, H]); ONNX is time-first
# ([T, N, I], states [D, N, H], output [T, D, N, H]).  Both reverse a 'reverse' direction
# within each sequence's length, leave zeros past it and return the last active state.
# Gate blocks: IR LSTM f,i,c,o vs ONNX i,o,f,c; GRU z,r,h in both.  ONNX adds a second bias
# (Wb + Rb): IR's bias goes to Wb, Rb is zero except GRU's linear_before_reset term.

def _swap01(ctx: ExportContext, value: Any) -> str:
    ref = ctx.ref(value)
    d = ctx.dims(ref)
    return ctx.node("Transpose", [ref], (d[1], d[0]) + tuple(d[2:]), perm=[1, 0] + list(range(2, len(d))))


def _gate_blocks(ctx: ExportContext, value: Any, order: list[int], hs: int) -> str:
    """``value`` ([D, G*H, ...]) with its gate blocks along axis 1 reordered."""
    idx = np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order])
    if order == list(range(len(order))):
        return ctx.ref(value)
    data = None if (isinstance(value, str) and value in ctx.refs) else ctx.data(value)
    if data is not None:
        return ctx.const(np.take(np.asarray(data, F32), idx, axis=1))
    ref = ctx.ref(value)
    return ctx.node("Gather", [ref, ctx.ints(idx)], ctx.dims(ref), axis=1)


def _sequence_lengths(ctx: ExportContext, value: Any, n: int | None) -> str:
    data = None if (isinstance(value, str) and value in ctx.refs) else ctx.data(value)
    if data is not None:
        arr = np.asarray(data, dtype=np.int64).reshape(-1)
        if arr.size == 1 and n is not None:
            arr = np.repeat(arr, n)
        if n is None or arr.size != n or np.any(arr < 0) or np.any(arr > np.iinfo(np.int32).max):
            raise ctx.fallback(f"sequence lengths {arr.tolist()} do not give one length per batch item")
        return ctx.const(arr.astype(np.int32))
    ref = ctx.ref(value)
    if len(ctx.dims(ref)) != 1:
        raise ctx.fallback(f"run-time sequence lengths of shape {list(ctx.dims(ref))} have no ONNX form")
    return ctx.node("Cast", [ref], ctx.dims(ref), dtype=np.int32, to=tensor_type(np.int32))


@exporter("ir_lstm_sequence", "ir_gru_sequence", "ir_rnn_sequence")
def _ir_sequence(ctx: ExportContext, op: Operation) -> None:
    x = op.inputs["input"]
    n, t, _ = ctx.dims(x)
    w, r, b = op.inputs["W"], op.inputs["R"], op.inputs["B"]
    hs = static(ctx, ctx.dims(op.inputs["initial_hidden"])[2:3])[0]
    dirs = static(ctx, ctx.dims(w)[:1])[0]
    direction = str(op.attribs.get("direction", "forward"))
    clip = float(op.attribs.get("clip", 0.0))
    attrs: dict[str, Any] = {"hidden_size": hs, "direction": direction, "clip": clip if clip else None}
    if op.op == "ir_lstm_sequence":
        kind, order, gates = "LSTM", [1, 3, 0, 2], 4
    elif op.op == "ir_gru_sequence":
        kind, order, gates = "GRU", [0, 1, 2], 3
        attrs["linear_before_reset"] = int(bool(op.attribs.get("linear_before_reset", False)))
    else:
        kind, order, gates = "RNN", [0], 1
        act = str(op.attribs.get("activation", "tanh"))
        names = {"tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu"}
        if act not in names:
            raise ctx.fallback(f"activation '{act}' has no ONNX RNN form")
        attrs["activations"] = [names[act]] * dirs
    W, R = _gate_blocks(ctx, w, order, hs), _gate_blocks(ctx, r, order, hs)
    # the bias: [D, G*H] (+ GRU's recurrent h-bias as a 4th block) -> [D, 2*G*H]
    bdata = None if (isinstance(b, str) and b in ctx.refs) else ctx.data(b)
    lbr = kind == "GRU" and attrs["linear_before_reset"]
    if bdata is not None:
        arr = np.asarray(bdata, F32).reshape(dirs, -1)
        wb = np.take(arr[:, :gates * hs], np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order]), axis=1)
        rb = np.zeros_like(wb)
        if lbr:
            rb[:, 2 * hs:] = arr[:, 3 * hs:4 * hs]
        B = ctx.const(np.concatenate([wb, rb], axis=1))
    else:
        bref = ctx.ref(b)
        if lbr:
            zeros = ctx.const(np.zeros((dirs, 2 * hs), F32))
            wb = slice_axis(ctx, bref, 1, 0, 3 * hs, 1, 3 * hs)
            rbh = slice_axis(ctx, bref, 1, 3 * hs, 4 * hs, 1, hs)
            B = ctx.node("Concat", [wb, zeros, rbh], (dirs, 6 * hs), axis=1)
        else:
            wb = _gate_blocks(ctx, bref, order, hs)
            B = ctx.node("Concat", [wb, ctx.const(np.zeros((dirs, gates * hs), F32))], (dirs, 2 * gates * hs), axis=1)
    inputs = [_swap01(ctx, x), W, R, B, _sequence_lengths(ctx, op.inputs["sequence_lengths"], n),
              _swap01(ctx, op.inputs["initial_hidden"])]
    outs = [((t, dirs, n, hs), F32), ((dirs, n, hs), F32)]
    if kind == "LSTM":
        inputs.append(_swap01(ctx, op.inputs["initial_cell"]))
        outs.append(((dirs, n, hs), F32))
    refs = ctx.node(kind, inputs, outputs=outs, **attrs)
    names = op.output_names()
    ctx.bind(names[0], ctx.node("Transpose", [refs[0]], (n, dirs, t, hs), perm=[2, 1, 0, 3]))
    for name, ref in zip(names[1:], refs[1:], strict=True):
        ctx.bind(name, _swap01(ctx, ref))


@exporter("ir_top_k")
def _ir_top_k(ctx: ExportContext, op: Operation) -> None:
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


@exporter("ir_cumsum")
def _ir_cumsum(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    axis = ctx.const(np.asarray(int(op.attribs["axis"]), np.int64))
    ctx.bind(out(op), ctx.node("CumSum", [x, axis], ctx.dims(x), exclusive=int(bool(op.attribs.get("exclusive"))),
                               reverse=int(bool(op.attribs.get("reverse")))))


@exporter("ir_reduce_prod")
def _ir_reduce_prod(ctx: ExportContext, op: Operation) -> None:
    axes = [int(a) for a in op.attribs["axes"]]
    x = ctx.ref(op.inputs["input"])
    ctx.bind(out(op), reduce(ctx, "ReduceProd", x, axes) if axes else unop(ctx, "copy", x))


@exporter("ir_round")
def _ir_round(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["x"])
    mode = str(op.attribs.get("mode", "half_to_even"))
    if mode == "half_to_even":
        ctx.bind(out(op), ctx.node("Round", [x], ctx.dims(x)))
        return
    if mode != "half_away_from_zero":
        raise ctx.fallback(f"mode '{mode}' has no ONNX form")
    # sign(x) * floor(|x| + 0.5), in the same float32 steps as nnefx
    mag = unop(ctx, "floor", binop(ctx, "add", unop(ctx, "abs", x), scalar(ctx, 0.5, ctx.dtype(x))))
    ctx.bind(out(op), binop(ctx, "mul", unop(ctx, "sign", x), mag))


@exporter("ir_einsum")
def _ir_einsum(ctx: ExportContext, op: Operation) -> None:
    refs = [ctx.ref(v) for v in op.inputs["inputs"]]
    ctx.bind(out(op), ctx.node("Einsum", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0]),
                               equation=str(op.attribs["equation"])))


@exporter("ir_gather_elements", "ir_gather_nd")
def _ir_gather_elements(ctx: ExportContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    idx = ctx.ref(op.inputs["indices"], I64)
    if op.op == "ir_gather_elements":
        y = ctx.node("GatherElements", [x, idx], ctx.dims(out(op)), dtype=ctx.dtype(x), axis=int(op.attribs["axis"]))
    else:
        y = ctx.node("GatherND", [x, idx], ctx.dims(out(op)), dtype=ctx.dtype(x),
                     batch_dims=int(op.attribs.get("batch_dims", 0)))
    ctx.bind(out(op), y)


@exporter("ir_range")
def _ir_range(ctx: ExportContext, op: Operation) -> None:
    dt = NUMPY.get(op.dtype or "scalar", F32)
    refs = [ctx.ref(op.inputs[k], dt) for k in ("start", "stop", "step")]
    if any(len(ctx.dims(r)) != 0 for r in refs):
        refs = [reshape(ctx, r, ()) if ctx.dims(r) in ((1,), ()) else r for r in refs]
    if any(len(ctx.dims(r)) != 0 for r in refs):
        raise ctx.fallback("Range takes scalars")
    ctx.bind(out(op), ctx.node("Range", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0])))


# --- window arg-max, sampling and their reverses ----------------------------------------------
# NNEF's index is the row-major offset inside the window (over every dimension, size 1 on
# batch/channel); ONNX MaxPool's second output is the flat row-major index into the (padded)
# input.  The conversion is integer arithmetic against the window origins.  MaxPool scans
# each window row-major and keeps the first strict maximum: NNEF's tie rule.

def _origins(ctx: ExportContext, shape: tuple, n: int, k: int, stride: int, shift: int) -> str:
    """``o * stride - shift`` for the output positions ``o`` of windowed dim ``k`` (of the last
    ``n`` dims of an output of ``shape``), as a constant that broadcasts along that dim."""
    rank = len(shape)
    axis = rank - n + k
    count = static(ctx, shape[axis:axis + 1])[0]
    dims = [1] * rank
    dims[axis] = count
    return ctx.const((np.arange(count, dtype=np.int64) * stride - shift).reshape(dims))


def _window_offsets(ctx: ExportContext, flat: str, extents: tuple, size: list[int], stride: list[int],
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


@exporter("argmax_pool", "max_pool_with_index")
def _argmax_pool(ctx: ExportContext, op: Operation) -> None:
    x, size, pads, stride, dil, pooled, finish = _pool_window(ctx, op)
    xin, pads = _max_pool_input(ctx, op, x, pads, size)
    shifts = [p for p, _ in pads]   # window origins move by the padding MaxPool itself adds
    extents = static(ctx, ctx.dims(xin)[2:])
    vals, flat = ctx.node("MaxPool", [xin], outputs=[(pooled, ctx.dtype(xin)), (pooled, I64)], kernel_shape=size,
                          pads=_pads_attr(pads), strides=stride, dilations=dil)
    index = _window_offsets(ctx, flat, extents, size, stride, dil, shifts, pooled)
    names = op.output_names()
    if op.op == "max_pool_with_index":
        ctx.bind(names[0], finish(vals))
        ctx.bind(names[1], finish(index))
    else:
        ctx.bind(names[0], finish(index))


def _spatial_window(ctx: ExportContext, op: Operation, x: Any, transposed: bool = False) -> tuple:
    """size, pads, stride, dilation of the windowed dimensions, and the layout move
    (:func:`_split_window`) that makes them the spatial dimensions of an ``[M, 1, W...]``
    tensor (None when the window spans dims 2.. only)."""
    r = ctx.rank(x)
    size = [int(s) for s in op.attribs["size"]]
    pads, stride, dil = window(ctx, op, x, r, size, transposed=transposed)
    return _split_window(ctx, r, size, pads, stride, dil, "form")


def _flat_positions(ctx: ExportContext, idx: str, size: list[int], stride: list[int], dil: list[int],
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


@exporter("sample")
def _sample(ctx: ExportContext, op: Operation) -> None:
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


@exporter("desample")
def _desample(ctx: ExportContext, op: Operation) -> None:
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
                     value=_filled_tensor(0, ctx.dtype(x)))
    where = ctx.node("Reshape", [flat, ctx.ints([0, 0, -1])], lead + (int(np.prod(xs[2:])),))
    vals = ctx.node("Reshape", [x, ctx.ints([0, 0, -1])], lead + (int(np.prod(xs[2:])),))
    buf = ctx.node("ScatterElements", [zeros, where, vals], lead + (volume,), axis=2, reduction="add")
    buf = ctx.node("Reshape", [buf, ctx.ints(lead + extents)], lead + extents)
    starts = [p for p, _ in pads]
    ends = [p + od[2 + k] for k, (p, _) in enumerate(pads)]
    y = ctx.node("Slice", [buf, ctx.ints(starts), ctx.ints(ends), ctx.ints(range(2, 2 + n))], od)
    ctx.bind(out(op), _from_spatial(ctx, y, final, move))


@exporter("debox")
def _debox(ctx: ExportContext, op: Operation) -> None:
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
        _deconv(ctx, Operation("deconv", {"input": value, "filter": ones, "bias": 0.0}, {"output": name}, attribs,
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


_CONVERT = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
            "u64": np.uint64, "u32": np.uint32, "u16": np.uint16, "u8": np.uint8, "boolean": np.bool_}


@exporter("ir_convert")
def _ir_convert(ctx: ExportContext, op: Operation) -> None:
    # OpenVINO Convert: float -> integer truncates (into 32 or 64 bits, then the low bits of
    # the target width), integers wrap, anything -> boolean is != 0; the result is held in
    # nnefx's storage (float32 / int64 / bool) with the target's rounding and range.  Cast
    # does each step the same way for the values nnefx accepts.
    dest = str(op.attribs["destination_type"])
    if dest not in _CONVERT:
        raise ctx.fallback(f"destination type '{dest}' has no exact ONNX Cast chain here")
    target = np.dtype(_CONVERT[dest])
    x = ctx.ref(op.inputs["input"])
    src = ctx.dtype(x)

    def cast(v: str, dt: Any) -> str:
        return ctx.node("Cast", [v], ctx.dims(v), dtype=dt, to=tensor_type(dt))

    y = x
    if target.kind in "iu" and src.kind == "f":
        y = cast(y, np.int64 if target.itemsize == 8 else np.int32)
    if np.dtype(ctx.dtype(y)) != target:
        y = cast(y, target)
    storage = NUMPY["logical"] if target.kind == "b" else (F32 if target.kind == "f" else I64)
    if np.dtype(ctx.dtype(y)) != storage:
        y = cast(y, storage)
    if y == x:
        y = unop(ctx, "copy", x)
    ctx.bind(out(op), y)


@exporter("ir_reverse_sequence")
def _ir_reverse_sequence(ctx: ExportContext, op: Operation) -> None:
    seq, batch = int(op.attribs.get("seq_axis", 1)), int(op.attribs.get("batch_axis", 0))
    x = ctx.ref(op.inputs["input"])
    if ctx.rank(x) < 2 or {seq, batch} != {0, 1}:
        raise ctx.fallback(f"sequence axis {seq} / batch axis {batch} have no ReverseSequence form (axes 0 and 1)")
    lens = ctx.ref(op.inputs["lengths"])
    lens = ctx.node("Cast", [lens], ctx.dims(lens), dtype=I64, to=tensor_type(I64))
    ctx.bind(out(op), ctx.node("ReverseSequence", [x, lens], ctx.dims(x), batch_axis=batch, time_axis=seq))


_RESIZE_MODE = {"nearest": "nearest", "linear_onnx": "linear", "cubic": "cubic"}


def _gather_axes(ctx: ExportContext, x: str, tables: list[tuple[int, np.ndarray]], shape: tuple) -> str:
    """Nearest resizing as one Gather per axis with the source indices nnefx computes:
    exact by construction (Resize would recompute the coordinates in float32, where a
    coordinate on a rounding boundary can land on the other side)."""
    y = x
    for ax, idx in tables:
        dims = list(ctx.dims(y))
        dims[ax] = len(idx)
        y = ctx.node("Gather", [y, ctx.const(np.asarray(idx, np.int64))], tuple(dims), axis=ax)
    return y if y != x else unop(ctx, "copy", x)


@exporter("ir_interpolate")
def _ir_interpolate(ctx: ExportContext, op: Operation) -> None:
    # the coordinate transform uses the given scales (not out/in), as Resize does with its
    # scales input: exact when floor(in * scale) gives the output extents
    a = op.attribs
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    mode = _RESIZE_MODE.get(str(a.get("mode", "nearest")))
    coord = str(a.get("coordinate_transformation_mode", "half_pixel"))
    nearest = str(a.get("nearest_mode", "round_prefer_floor"))
    if mode is None:
        raise ctx.fallback(f"mode {a.get('mode')} has no Resize form")
    axes = [int(v) for v in a["axes"]]
    sizes = [int(v) for v in a["sizes"]]
    scales = [float(v) for v in a["scales"]]
    extents = [static(ctx, xd[ax:ax + 1])[0] for ax in axes]
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(a.get("cubic_coeff_a", -0.75))
    # Resize with sizes uses out / in as the scale: the same transform when the given scales
    # are those ratios (or are not used, with aligned corners)
    by_sizes = coord == "align_corners" or all(abs(sc - n / e) <= 1e-12 * abs(sc) for sc, n, e in
                                               zip(scales, sizes, extents, strict=True))
    if mode == "nearest":
        from ...ops.ir_opset import interpolation_taps

        tables = [(ax, interpolation_taps(e, n, sc, "nearest", coord, nearest, -0.75)[0][:, 0])
                  for ax, n, sc, e in zip(axes, sizes, scales, extents, strict=True)]
        ctx.bind(out(op), _gather_axes(ctx, x, tables, ctx.dims(out(op))))
        return
    if by_sizes:
        ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=axes, **attrs))
        return
    # otherwise the scales themselves, where every tool derives the same extents from them
    # (floor(in * scale) in float32 as onnxruntime runs it, and in float64 as onnx infers it)
    full = [1.0] * len(xd)
    for ax, n, sc, e in zip(axes, sizes, scales, extents, strict=True):
        f32 = np.float32(sc)
        if int(np.floor(np.float32(e) * f32)) != n or int(np.floor(float(e) * float(f32))) != n:
            raise ctx.fallback(f"scale {sc} does not give the extent {n} from {e} as Resize computes it")
        full[ax] = sc
    ctx.bind(out(op), ctx.node("Resize", [x, "", ctx.const(np.asarray(full, np.float32))], ctx.dims(out(op)),
                               **attrs))


@exporter("ir_strided_slice")
def _ir_strided_slice(ctx: ExportContext, op: Operation) -> None:
    # begin/end are resolved already (in range; end -1 with a negative stride = through 0)
    x = ctx.ref(op.inputs["input"])
    begin, end, stride = ([int(v) for v in op.attribs[k]] for k in ("begin", "end", "stride"))
    ends = [nnef_attrs.slice_stop(e, st) for e, st in zip(end, stride, strict=True)]
    ctx.bind(out(op), ctx.node("Slice", [x, ctx.ints(begin), ctx.ints(ends), ctx.ints(range(len(begin))),
                                         ctx.ints(stride)], ctx.dims(out(op))))


@exporter("ir_interp")
def _ir_interp(ctx: ExportContext, op: Operation) -> None:
    # Caffe Interp: source = out * (in-1)/(out-1) (aligned corners) or out * in/out_size
    # (Resize 'asymmetric' with sizes), the upper neighbour clamped at the edge, as Resize does
    x = ctx.ref(op.inputs["input"])
    transform = "align_corners" if op.attribs.get("align_corners", False) else "asymmetric"
    sizes = [int(op.attribs["height"]), int(op.attribs["width"])]
    ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=[2, 3],
                               mode="linear", coordinate_transformation_mode=transform))


@exporter("ir_resample")
def _ir_resample(ctx: ExportContext, op: Operation) -> None:
    # 'nearest': source = floor(out * in / out_size) (asymmetric, floor); 'linear': half-pixel
    # centres clamped to the input (Resize 'linear' / 'half_pixel')
    x = ctx.ref(op.inputs["input"])
    mode = str(op.attribs.get("mode", "nearest"))
    sizes = [int(v) for v in op.attribs["output_size"]]
    xd = ctx.dims(x)
    axes = list(range(2, len(xd)))
    if mode == "nearest":   # source = floor(out * in / out_size), in integers
        tables = []
        for ax, n in zip(axes, sizes, strict=True):
            e = static(ctx, xd[ax:ax + 1])[0]
            tables.append((ax, np.minimum(np.arange(n, dtype=np.int64) * e // n, e - 1)))
        ctx.bind(out(op), _gather_axes(ctx, x, tables, ctx.dims(out(op))))
        return
    if mode == "linear":
        attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    else:
        raise ctx.fallback(f"mode '{mode}' has no Resize form")
    ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=axes, **attrs))


from . import export_roi as _export_roi  # noqa: E402,F401  (registers the RoI exporters)


def find_exporter(name: str) -> Exporter | None:
    """The writer of operation ``name`` as ONNX, or None."""
    return registry.table("onnx").find(name)
