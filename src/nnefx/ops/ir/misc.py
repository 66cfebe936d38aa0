"""IR layers without an exact NNEF counterpart that do not fit another family: Quantize
(FakeQuantize semantics), BinaryConvolution, ArgMax (Caffe top-k), StridedSlice with any stride,
Interp (Caffe bilinear), Resample (nearest / linear with any factor)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._common import float_type
from ..registry import define
from ._common import require

# ---------------------------------------------------------------------------------------------
# Quantize (FakeQuantize)
# ---------------------------------------------------------------------------------------------

fake_quantize = define(
    "ir_fake_quantize", "ir.misc", """
fragment ir_fake_quantize( input: tensor<scalar>, input_low: tensor<scalar>, input_high: tensor<scalar>,
    output_low: tensor<scalar>, output_high: tensor<scalar>, levels: integer )
    -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Element-wise pseudo-quantization to `levels` values; limits broadcast numpy-style "
        "(aligned from the last dimension), as IR inputs do.")


def numpy_broadcast_shape(op: str, *shapes) -> tuple:
    r = max(len(s) for s in shapes)
    out = []
    for i in range(r):
        dims = {s[len(s) - r + i] for s in shapes if len(s) - r + i >= 0}
        dims.discard(1)
        known = {d for d in dims if d is not None}
        require(len(known) <= 1, op, f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast")
        out.append(known.pop() if known else (None if None in dims else 1))
    return tuple(out)


@fake_quantize.shape
def _fq_shape(input, il, ih, ol, oh, *, levels):
    require(levels >= 2, "ir_fake_quantize", f"'levels' must be >= 2, got {levels}")
    return (numpy_broadcast_shape("ir_fake_quantize", input, il, ih, ol, oh),)


def _c_round(v: float) -> float:
    # The catalog writes round(); the layer's implementation rounds halves away from zero.
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


@fake_quantize.formal
def _fq_formal(input, il, ih, ol, oh, *, levels):
    shape = _fq_shape(input.shape, il.shape, ih.shape, ol.shape, oh.shape, levels=levels)[0]
    arrs = [np.broadcast_to(a, shape) for a in (input, il, ih, ol, oh)]
    out = np.empty(shape, dtype=float_type())
    for idx in np.ndindex(*shape):
        x, lo, hi, olo, ohi = (float(a[idx]) for a in arrs)
        if x <= lo:
            y = olo
        elif x > hi:
            y = ohi
        else:
            y = _c_round((x - lo) / (hi - lo) * (levels - 1)) / (levels - 1) * (ohi - olo) + olo
        out[idx] = y
    return out


@fake_quantize.fast
def _fq_fast(input, il, ih, ol, oh, *, levels):
    _fq_shape(input.shape, il.shape, ih.shape, ol.shape, oh.shape, levels=levels)
    x, lo, hi, olo, ohi = (np.asarray(a, dtype=np.float64) for a in (input, il, ih, ol, oh))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (x - lo) / (hi - lo) * (levels - 1)
        q = np.where(t >= 0, np.floor(t + 0.5), -np.floor(-t + 0.5)) / (levels - 1) * (ohi - olo) + olo
    y = np.where(x <= lo, olo, np.where(x > hi, ohi, q))
    return np.broadcast_to(y, np.broadcast_shapes(x.shape, lo.shape, hi.shape, olo.shape, ohi.shape)) \
        .astype(float_type())


# ---------------------------------------------------------------------------------------------
# BinaryConvolution
# ---------------------------------------------------------------------------------------------

binary_convolution = define(
    "ir_binary_convolution", "ir.misc", """
fragment ir_binary_convolution( input: tensor<scalar>, filter: tensor<scalar>,
    padding: (integer,integer)[], stride: integer[] = [], dilation: integer[] = [],
    groups: integer = 1, pad_value: scalar = 0.0 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="xnor-popcount convolution: input and filter hold 0/1 values read as -1/+1 (input > 0 "
        "reads +1); padded positions contribute pad_value; out = sum(x' * w') = 2*popcount - bits.")


def _conv_geometry(op, input, filter, padding, stride, dilation, groups):
    r = len(input)
    k = r - 2
    require(r >= 3 and len(filter) == r, op, f"input and filter must have equal rank >= 3, got {r}, {len(filter)}")
    stride = list(stride) or [1] * k
    dilation = list(dilation) or [1] * k
    require(len(padding) == k and len(stride) == k and len(dilation) == k, op,
            f"padding, stride and dilation need {k} items")
    require(all(s > 0 for s in stride) and all(d > 0 for d in dilation), op, "stride and dilation must be > 0")
    require(groups > 0, op, f"'groups' must be > 0, got {groups}")
    if input[1] is not None and filter[1] is not None:
        require(filter[1] * groups == input[1], op,
                f"filter input channels {filter[1]} x groups {groups} != input channels {input[1]}")
    if filter[0] is not None:
        require(filter[0] % groups == 0, op, f"output channels {filter[0]} not divisible by groups {groups}")
    spatial = []
    for i in range(k):
        X, f = input[i + 2], filter[i + 2]
        if X is None or f is None:
            spatial.append(None)
            continue
        fd = (f - 1) * dilation[i] + 1
        total = padding[i][0] + X + padding[i][1]
        require(total >= fd, op, f"padded input extent {total} is smaller than the dilated kernel {fd}")
        spatial.append((total - fd) // stride[i] + 1)
    return stride, dilation, (input[0], filter[0], *spatial)


@binary_convolution.shape
def _bc_shape(input, filter, *, padding, stride=(), dilation=(), groups=1, pad_value=0.0):
    return (_conv_geometry("ir_binary_convolution", input, filter, padding, stride, dilation, groups)[2],)


@binary_convolution.formal
def _bc_formal(input, filter, *, padding, stride=(), dilation=(), groups=1, pad_value=0.0):
    stride, dilation, oshape = _conv_geometry("ir_binary_convolution", input.shape, filter.shape, padding, stride,
                                              dilation, groups)
    N, O = oshape[0], oshape[1]
    Cg = filter.shape[1]
    Og = O // groups
    spatial_in = input.shape[2:]
    out = np.zeros(oshape, dtype=float_type())
    for n in range(N):
        for o in range(O):
            g = o // Og
            for pos in np.ndindex(*oshape[2:]):
                total = 0.0
                for ci in range(Cg):
                    c = g * Cg + ci
                    for kpos in np.ndindex(*filter.shape[2:]):
                        w = 1.0 if filter[(o, ci) + kpos] > 0 else -1.0
                        src = [pos[i] * stride[i] + kpos[i] * dilation[i] - padding[i][0] for i in range(len(pos))]
                        if all(0 <= s < e for s, e in zip(src, spatial_in, strict=False)):
                            x = 1.0 if input[(n, c) + tuple(src)] > 0 else -1.0
                        else:
                            x = float(pad_value)
                        total += x * w
                out[(n, o) + pos] = total
    return out


@binary_convolution.fast
def _bc_fast(input, filter, *, padding, stride=(), dilation=(), groups=1, pad_value=0.0):
    stride, dilation, oshape = _conv_geometry("ir_binary_convolution", input.shape, filter.shape, padding, stride,
                                              dilation, groups)
    k = input.ndim - 2
    x = np.where(input > 0, 1.0, -1.0)
    x = np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in padding], constant_values=float(pad_value))
    w = np.where(filter > 0, 1.0, -1.0)
    _N, O = oshape[0], oshape[1]
    Cg = filter.shape[1]
    Og = O // groups
    out = np.zeros(oshape, dtype=np.float64)
    for kpos in np.ndindex(*filter.shape[2:]):
        sl = tuple(slice(kpos[i] * dilation[i], kpos[i] * dilation[i] + (oshape[i + 2] - 1) * stride[i] + 1,
                         stride[i]) for i in range(k))
        patch = x[(slice(None), slice(None)) + sl]                       # (N, C, out spatial...)
        for g in range(groups):
            xs = patch[:, g * Cg:(g + 1) * Cg]
            ws = w[(slice(g * Og, (g + 1) * Og), slice(None)) + kpos]      # (Og, Cg)
            out[:, g * Og:(g + 1) * Og] += np.einsum("nc...,oc->no...", xs, ws)
    return out.astype(float_type())


# ---------------------------------------------------------------------------------------------
# ArgMax (Caffe top-k)
# ---------------------------------------------------------------------------------------------

argmax = define(
    "ir_argmax", "ir.misc", """
fragment ir_argmax( input: tensor<scalar>, top_k: integer = 1, out_max_val: logical = false,
    axis: integer[] = [] ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Top-k along `axis` (one item) or, with axis = [], over each batch item's flattened "
        "C*H*W values; order: value descending, equal values by index descending. No axis: output "
        "[N, 1|2, top_k] (indices, then values if out_max_val); with axis: that axis becomes top_k "
        "and holds values if out_max_val else indices.")


def _am_check(shape, top_k, axis):
    op = "ir_argmax"
    require(top_k >= 1, op, f"'top_k' must be >= 1, got {top_k}")
    require(len(axis) <= 1, op, "'axis' names at most one axis")
    if axis:
        r = len(shape)
        require(-r <= axis[0] < r, op, f"'axis' {axis[0]} is outside [-{r}, {r})")
        a = axis[0] % r
        require(shape[a] is None or top_k <= shape[a], op, f"top_k {top_k} exceeds extent {shape[a]}")
        return a
    vol = shape[1:]
    if all(d is not None for d in vol):
        require(top_k <= int(np.prod(vol, dtype=np.int64)), op, f"top_k {top_k} exceeds the per-item volume")
    return None


@argmax.shape
def _am_shape(input, *, top_k=1, out_max_val=False, axis=()):
    a = _am_check(input, top_k, axis)
    if a is None:
        return ((input[0], 2 if out_max_val else 1, top_k),)
    s = list(input)
    s[a] = top_k
    return (tuple(s),)


def _topk(values) -> list[tuple[float, int]]:
    return sorted(((float(v), i) for i, v in enumerate(values)), reverse=True)


@argmax.formal
def _am_formal(input, *, top_k=1, out_max_val=False, axis=()):
    a = _am_check(input.shape, top_k, axis)
    oshape = _am_shape(input.shape, top_k=top_k, out_max_val=out_max_val, axis=axis)[0]
    out = np.zeros(oshape, dtype=float_type())
    if a is None:
        for n in range(input.shape[0]):
            best = _topk(input[n].reshape(-1))[:top_k]
            for j, (v, i) in enumerate(best):
                out[n, 0, j] = i
                if out_max_val:
                    out[n, 1, j] = v
        return out
    moved = np.moveaxis(input, a, -1)
    res = np.moveaxis(out, a, -1)
    for idx in np.ndindex(*moved.shape[:-1]):
        for j, (v, i) in enumerate(_topk(moved[idx])[:top_k]):
            res[idx + (j,)] = v if out_max_val else i
    return out


@argmax.fast
def _am_fast(input, *, top_k=1, out_max_val=False, axis=()):
    a = _am_check(input.shape, top_k, axis)
    x = input.reshape(input.shape[0], -1) if a is None else np.moveaxis(input, a, -1)
    # value descending, ties by index descending == reverse of a stable ascending sort of
    # (value, index) pairs:  lexsort sorts by the last key first.
    idx = np.arange(x.shape[-1])
    order = np.lexsort((np.broadcast_to(idx, x.shape), x), axis=-1)[..., ::-1][..., :top_k]
    vals = np.take_along_axis(x, order, axis=-1)
    if a is None:
        parts = [order.astype(float_type())] + ([vals.astype(float_type())] if out_max_val else [])
        return np.stack(parts, axis=1)
    res = vals if out_max_val else order
    return np.ascontiguousarray(np.moveaxis(res.astype(float_type()), -1, a))


# ---------------------------------------------------------------------------------------------
# StridedSlice (resolved form)
# ---------------------------------------------------------------------------------------------

strided_slice = define(
    "ir_strided_slice", "ir.misc", """
fragment ir_strided_slice<?>( input: tensor<?>, begin: integer[], end: integer[], stride: integer[] )
    -> ( output: tensor<?> );""",
    domain="ir", generic=True,
    doc="Per axis i, takes indices begin[i], begin[i]+stride[i], ... while < end[i] (stride > 0) "
        "or > end[i] (stride < 0); begin/end are already resolved (begin in range, end may be -1 "
        "for a negative stride running to index 0), so no index wraps.")


def _ss_extents(shape, begin, end, stride):
    op = "ir_strided_slice"
    r = len(shape)
    require(len(begin) == r and len(end) == r and len(stride) == r, op, f"begin, end and stride need {r} items")
    out = []
    for i in range(r):
        require(stride[i] != 0, op, f"stride[{i}] must not be 0")
        n = shape[i]
        if n is None:
            out.append(None)
            continue
        if stride[i] > 0:
            require(0 <= begin[i] <= n and begin[i] <= max(end[i], begin[i]) and end[i] <= n, op,
                    f"axis {i}: range [{begin[i]}, {end[i]}) is outside [0, {n}]")
            out.append(max(0, -(-(end[i] - begin[i]) // stride[i])))
        else:
            require(-1 <= end[i] and begin[i] < n and (begin[i] >= 0 or end[i] >= begin[i]), op,
                    f"axis {i}: range ({end[i]}, {begin[i]}] is outside [-1, {n})")
            out.append(max(0, -(-(begin[i] - end[i]) // -stride[i])))
    return tuple(out)


@strided_slice.shape
def _ss_shape(input, *, begin, end, stride, dtype=None):
    return (_ss_extents(input, begin, end, stride),)


@strided_slice.formal
def _ss_formal(input, *, begin, end, stride, dtype=None):
    oshape = _ss_extents(input.shape, begin, end, stride)
    out = np.empty(oshape, dtype=input.dtype)
    for idx in np.ndindex(*oshape):
        out[idx] = input[tuple(begin[i] + idx[i] * stride[i] for i in range(len(idx)))]
    return out


@strided_slice.fast
def _ss_fast(input, *, begin, end, stride, dtype=None):
    oshape = _ss_extents(input.shape, begin, end, stride)
    sl = tuple(slice(begin[i], begin[i] + (oshape[i] - 1) * stride[i] + (1 if stride[i] > 0 else -1), stride[i])
               if oshape[i] > 0 else slice(0, 0) for i in range(len(oshape)))
    # a negative stop would wrap in Python: spell "through index 0" as None
    sl = tuple(slice(s.start, None if (s.stop is not None and s.stop < 0) else s.stop, s.step) for s in sl)
    return np.ascontiguousarray(input[sl])


# ---------------------------------------------------------------------------------------------
# Interp (Caffe bilinear) and Resample
# ---------------------------------------------------------------------------------------------

interp = define(
    "ir_interp", "ir.misc", """
fragment ir_interp( input: tensor<scalar>, height: integer, width: integer,
    align_corners: logical = false ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Caffe Interp bilinear resize of the last two axes: source coordinate = out * r with "
        "r = (in-1)/(out-1) (align_corners) or in/out; the upper neighbour clamps at the edge.")


def _interp_check(shape, height, width):
    require(len(shape) == 4, "ir_interp", f"input must be 4-D, got rank {len(shape)}")
    require(height > 0 and width > 0, "ir_interp", f"output size must be > 0, got {height} x {width}")


@interp.shape
def _interp_shape(input, *, height, width, align_corners=False):
    _interp_check(input, height, width)
    return ((input[0], input[1], height, width),)


def _interp_ratio(i, o, align):
    if align:
        return (i - 1) / (o - 1) if o > 1 else 0.0
    return i / o


def _interp_axis(i, o, align):
    """(lower index, upper index, weight of upper) per output coordinate."""
    r = _interp_ratio(i, o, align)
    res = []
    for k in range(o):
        f = r * k
        lo = min(int(math.floor(f)), i - 1)
        hi = lo + 1 if lo < i - 1 else lo
        res.append((lo, hi, f - lo))
    return res


@interp.formal
def _interp_formal(input, *, height, width, align_corners=False):
    _interp_check(input.shape, height, width)
    N, C, H, W = input.shape
    ys, xs = _interp_axis(H, height, align_corners), _interp_axis(W, width, align_corners)
    out = np.empty((N, C, height, width), dtype=float_type())
    for n in range(N):
        for c in range(C):
            for oy, (y0, y1, ly) in enumerate(ys):
                for ox, (x0, x1, lx) in enumerate(xs):
                    v = ((1 - ly) * ((1 - lx) * float(input[n, c, y0, x0]) + lx * float(input[n, c, y0, x1]))
                         + ly * ((1 - lx) * float(input[n, c, y1, x0]) + lx * float(input[n, c, y1, x1])))
                    out[n, c, oy, ox] = v
    return out


@interp.fast
def _interp_fast(input, *, height, width, align_corners=False):
    _interp_check(input.shape, height, width)
    N, C, H, W = input.shape
    y0, y1, ly = (np.asarray(t) for t in zip(*_interp_axis(H, height, align_corners), strict=False))
    x0, x1, lx = (np.asarray(t) for t in zip(*_interp_axis(W, width, align_corners), strict=False))
    x = input.astype(np.float64)
    rows = x[:, :, y0, :] * (1 - ly)[:, None] + x[:, :, y1, :] * ly[:, None]
    return (rows[..., x0] * (1 - lx) + rows[..., x1] * lx).astype(float_type())


resample = define(
    "ir_resample", "ir.misc", """
fragment ir_resample( input: tensor<scalar>, output_size: integer[], mode: string = 'nearest' )
    -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Resize of the spatial axes (2..) to output_size. 'nearest': source = floor(out * in / out_size); "
        "'linear': half-pixel centres, source = (out + 0.5) * in / out_size - 0.5 clamped to [0, in-1], "
        "separable linear weights.")


def _rs_check(shape, output_size, mode):
    op = "ir_resample"
    require(len(shape) >= 3, op, f"input must have rank >= 3, got {len(shape)}")
    require(len(output_size) == len(shape) - 2, op, f"output_size needs {len(shape) - 2} items")
    require(all(o > 0 for o in output_size), op, f"output sizes must be > 0, got {list(output_size)}")
    require(mode in ("nearest", "linear"), op, f"'mode' must be 'nearest' or 'linear', got '{mode}'")


@resample.shape
def _resample_shape(input, *, output_size, mode="nearest"):
    _rs_check(input, output_size, mode)
    return (tuple(input[:2]) + tuple(output_size),)


def _rs_taps(i, o, mode):
    """Per output coordinate, a list of (source index, weight)."""
    taps = []
    for k in range(o):
        if mode == "nearest":
            taps.append([(min(int(math.floor(k * i / o)), i - 1), 1.0)])
            continue
        f = min(max((k + 0.5) * i / o - 0.5, 0.0), i - 1)
        lo = int(math.floor(f))
        hi = min(lo + 1, i - 1)
        taps.append([(lo, 1.0 - (f - lo)), (hi, f - lo)])
    return taps


@resample.formal
def _resample_formal(input, *, output_size, mode="nearest"):
    _rs_check(input.shape, output_size, mode)
    taps = [_rs_taps(i, o, mode) for i, o in zip(input.shape[2:], output_size, strict=False)]
    out = np.zeros(tuple(input.shape[:2]) + tuple(output_size), dtype=np.float64)
    for idx in np.ndindex(*out.shape):
        total = 0.0
        for combo in itertools.product(*(taps[d][idx[d + 2]] for d in range(len(output_size)))):
            weight = 1.0
            for _, w in combo:
                weight *= w
            src = idx[:2] + tuple(s for s, _ in combo)
            total += weight * float(input[src])
        out[idx] = total
    return out.astype(float_type())


@resample.fast
def _resample_fast(input, *, output_size, mode="nearest"):
    _rs_check(input.shape, output_size, mode)
    x = input.astype(np.float64)
    for d, (i, o) in enumerate(zip(input.shape[2:], output_size, strict=False)):
        m = np.zeros((o, i))
        for k, tap in enumerate(_rs_taps(i, o, mode)):
            for s, w in tap:
                m[k, s] += w
        x = np.moveaxis(np.tensordot(x, m, axes=([d + 2], [1])), -1, d + 2)
    return x.astype(float_type())
