"""Sliding-window operations (NNEF 1.0.5 §4.3) and the pooling compounds (§4.9.3).

Conventions (spec §4.3): *basic* operations (``conv``, ``box``, ``argmax_pool``, ``sample``,
pools) map the up-scaled input to a down-scaled output, *reverse* operations (``deconv``,
``debox``, ``desample``) map down-scaled to up-scaled.  ``padding``/``stride``/``dilation``
are always in up-scaled space.  ``conv``/``deconv`` arrays have one entry per *spatial*
dimension; ``box``/``debox``/``argmax_pool``/``sample``/``desample`` and the pools have one
entry per dimension (batch and channel included).
"""

from __future__ import annotations

from .registry import define

_WINDOW = """border: string = 'constant',
    padding: (integer,integer)[] = [],
    stride: integer[] = [],
    dilation: integer[] = []"""

_PASS = "border = border, padding = padding, stride = stride, dilation = dilation"

conv = define("conv", "sliding", f"""
fragment conv(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    groups: integer = 1 )
-> ( output: tensor<scalar> );
""")

deconv = define("deconv", "sliding", f"""
fragment deconv(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    output_shape: integer[] = [],
    groups: integer = 1 )
-> ( output: tensor<scalar> );
""")

box = define("box", "sliding", f"""
fragment box(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW},
    normalize: logical = false )
-> ( output: tensor<scalar> );
""")

debox = define("debox", "sliding", f"""
fragment debox(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW},
    output_shape: integer[] = [],
    normalize: logical = false )
-> ( output: tensor<scalar> );
""")

argmax_pool = define("argmax_pool", "sliding", f"""
fragment argmax_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( index: tensor<integer> );
""")

sample = define("sample", "sliding", f"""
fragment sample(
    input: tensor<scalar>,
    index: tensor<integer>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> );
""")

desample = define("desample", "sliding", f"""
fragment desample(
    input: tensor<scalar>,
    index: tensor<integer>,
    size: integer[],
    {_WINDOW},
    output_shape: integer[] = [] )
-> ( output: tensor<scalar> );
""")

# --- pooling compounds (§4.9.3) -----------------------------------------------------------

max_pool_with_index = define("max_pool_with_index", "sliding", f"""
fragment max_pool_with_index(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar>, index: tensor<integer> )
{{
    index = argmax_pool(input, size = size, {_PASS});
    output = sample(input, index, size = size, {_PASS});
}}
""", compound=True)

max_pool = define("max_pool", "sliding", f"""
fragment max_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output, index = max_pool_with_index(input, size = size, {_PASS});
}}
""", compound=True)

avg_pool = define("avg_pool", "sliding", f"""
fragment avg_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output = box(input, size = size, {_PASS}, normalize = true);
}}
""", compound=True)

rms_pool = define("rms_pool", "sliding", f"""
fragment rms_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output = sqrt(avg_pool(sqr(input), size = size, {_PASS}));
}}
""", compound=True)

# --- separable convolutions (§4.9.2) ------------------------------------------------------

separable_conv = define("separable_conv", "sliding", f"""
fragment separable_conv(
    input: tensor<scalar>,
    plane_filter: tensor<scalar>,
    point_filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    groups: integer = 1 )
-> ( output: tensor<scalar> )
{{
    filtered = conv(input, plane_filter, {_PASS}, groups = 0);
    output = conv(filtered, point_filter, bias, groups = groups);
}}
""", compound=True)

separable_deconv = define("separable_deconv", "sliding", f"""
fragment separable_deconv(
    input: tensor<scalar>,
    plane_filter: tensor<scalar>,
    point_filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    output_shape: integer[] = [],
    groups: integer = 1 )
-> ( output: tensor<scalar> )
{{
    filtered = deconv(input, point_filter, groups = groups);
    output = deconv(filtered, plane_filter, bias, {_PASS}, output_shape = output_shape, groups = 0);
}}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Border modes (spec §3.3): 'constant' reads zeros outside the input and those zeros take
# part (max-pooling sees them, averaging divides by the whole window volume); 'ignore' skips
# outside positions: sums leave them out, a normalized box/debox (avg_pool) divides by the
# number of positions inside (the tools' "count_include_pad = false"; a window entirely
# outside gives 0), they never win an argmax; 'replicate', 'reflect' (edge not repeated) and
# 'reflect-even' (edge repeated) read mirrored/clamped input elements.  ``sample`` reading
# outside under 'ignore' gives 0.
#
# Formal kernels loop over output positions and window offsets and map each input index
# through :func:`border_index`, accumulating in float64 and rounding once.  Fast kernels pad
# with numpy, take strided window views and use BLAS (im2col) for convolutions; they
# accumulate in float32 (conv, deconv) or float64 (box, debox) and agree with the formal
# ones within |fast - formal| <= 1e-5 * sum(|terms|) (+ the float32 rounding of the result).
# 3×3 stride-1 convolutions of many channels use Winograd F(2×2, 3×3) (ops/winograd.py):
# measured 1–3× im2col's error, ≤ 2.3e-7 * sum(|terms|) on ResNet layers, same bound.
# Arg-max over windows (argmax_pool) treats NaN as the largest value (first NaN wins), as
# argmax_reduce does; ties go to the first position in row-major window order.

import contextvars  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

from . import winograd  # noqa: E402
from ._common import (  # noqa: E402
    BORDERS,
    attr_error,
    border_index,
    check_border,
    check_output_shape,
    dilated,
    down_extent,
    op_error,
    pad_array,
    relu_into,
    resolve_padding_down,
    resolve_padding_up,
    scalar,
    up_extent,
    window_arrays,
)

CONV_BORDERS = ("constant", "replicate", "reflect", "reflect-even")
BOX_BORDERS = BORDERS
SAMPLE_BORDERS = ("constant", "replicate", "reflect", "reflect-even", "ignore")
DESAMPLE_BORDERS = ("constant",)


# --- shape helpers ------------------------------------------------------------------------

def _down_shape(op, X, size, pads, stride, dilation):
    return tuple(down_extent(op, k, X[k], size[k], stride[k], dilation[k], pads[k] if pads else None)
                 for k in range(len(size)))


def _up_shape(op, x, size, pads, stride, dilation):
    return tuple(up_extent(op, k, x[k], size[k], stride[k], dilation[k], pads[k] if pads else None)
                 for k in range(len(size)))


def _check_output_shape_attr(op, output_shape, rank):
    output_shape = list(output_shape)
    if len(output_shape) != rank or any(not isinstance(d, (int, np.integer)) or d <= 0 for d in output_shape):
        raise attr_error(op, "output_shape", output_shape, f"must be empty or have {rank} positive items")
    return [int(d) for d in output_shape]


def _bias_channels(op, bias, channels):
    """Bias is a singleton, a [c] vector (tools' convention) or 1s with c in dimension 1."""
    bias = tuple(bias)
    if all(d == 1 for d in bias):
        return
    fits = (channels, None) if channels is not None else tuple(d for d in bias) + (None,)
    if len(bias) == 1 and bias[0] in fits:
        return
    if len(bias) >= 2 and bias[1] in fits and all(d in (1, None) for k, d in enumerate(bias) if k != 1):
        return
    raise op_error(op, f"bias of shape {bias} must be a singleton or have the {channels} output channels "
                       "in dimension 1 (or be a vector of that length)")


def _conv_common(op, input, filter, padding, stride, dilation, groups, border):
    input, filter = tuple(input), tuple(filter)
    if len(input) < 3:
        raise op_error(op, f"input must have rank >= 3 (batch, channel, spatial...), got shape {input}")
    if len(filter) != len(input):
        raise op_error(op, f"filter rank {len(filter)} differs from input rank {len(input)}")
    check_border(op, border, CONV_BORDERS)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 0:
        raise attr_error(op, "groups", groups, "must be an integer >= 0 (0 = depth-wise)")
    n = len(input) - 2
    size = [1 if f is None else f for f in filter[2:]]
    size, pads, stride, dilation = window_arrays(op, n, size, padding, stride, dilation)
    return input, filter, size, pads, stride, dilation


@conv.shape
def _conv_shape(input, filter, bias=(), border="constant", padding=(), stride=(), dilation=(), groups=1):
    input, filter, size, pads, stride, dilation = _conv_common("conv", input, filter, padding, stride,
                                                               dilation, groups, border)
    C = input[1]
    G = C if groups == 0 else groups
    if G is not None and filter[1] is not None and C is not None and filter[1] * G != C:
        raise op_error("conv", f"filter shape {filter} with groups = {groups} needs {filter[1]}*{G} = "
                               f"{filter[1] * G} input channels, input has {C}")
    if G is not None and filter[0] is not None and (G == 0 or filter[0] % G):
        raise op_error("conv", f"groups {G} does not divide the {filter[0]} output channels of filter {filter}")
    _bias_channels("conv", bias, filter[0])
    X = input[2:]
    if any(f is None for f in filter[2:]):
        spatial = tuple(None for _ in X)
    else:
        spatial = _down_shape("conv", X, size, pads, stride, dilation)
    return (input[0], filter[0]) + spatial


def _deconv_groups(groups, filter, output_shape, c):
    if groups != 0:
        return groups
    return output_shape[1] if output_shape else c


@deconv.shape
def _deconv_shape(input, filter, bias=(), border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                  groups=1):
    input, filter, size, pads, stride, dilation = _deconv_checked(input, filter, border, padding, stride, dilation,
                                                                  output_shape, groups)
    output_shape = list(output_shape)
    G = _deconv_groups(groups, filter, output_shape, input[1])
    C = None if G is None or filter[1] is None else filter[1] * G
    _bias_channels("deconv", bias, C)
    if output_shape:
        return tuple(output_shape)
    if any(f is None for f in filter[2:]):
        return (input[0], C) + tuple(None for _ in input[2:])
    return (input[0], C) + _up_shape("deconv", input[2:], size, pads, stride, dilation)


def _deconv_checked(input, filter, border, padding, stride, dilation, output_shape, groups):
    input, filter, size, pads, stride, dilation = _conv_common("deconv", input, filter, padding, stride,
                                                               dilation, groups, border)
    c = input[1]
    if filter[0] is not None and c is not None and filter[0] != c:
        raise op_error("deconv", f"filter shape {filter} needs {filter[0]} input channels, input has {c}")
    output_shape = list(output_shape)
    if output_shape:
        output_shape = _check_output_shape_attr("deconv", output_shape, len(input))
    G = _deconv_groups(groups, filter, output_shape, c)
    if G is not None and filter[0] is not None and (G == 0 or filter[0] % G):
        raise op_error("deconv", f"groups {G} does not divide the {filter[0]} input channels of filter {filter}")
    if output_shape:
        if input[0] is not None and output_shape[0] != input[0]:
            raise attr_error("deconv", "output_shape", output_shape, f"has batch {output_shape[0]}, input has {input[0]}")
        if filter[1] is not None and G is not None and output_shape[1] != filter[1] * G:
            raise attr_error("deconv", "output_shape", output_shape,
                             f"has {output_shape[1]} channels, filter and groups give {filter[1] * G}")
        check_output_shape("deconv", output_shape, input, size, stride, dilation, pads, 2)
    return input, filter, size, pads, stride, dilation


def _box_common(op, input, size, border, padding, stride, dilation, borders):
    input = tuple(input)
    check_border(op, border, borders)
    return window_arrays(op, len(input), size, padding, stride, dilation)


def _basic_shape(op, borders):
    def rule(input, size=(), border="constant", padding=(), stride=(), dilation=(), **_):
        size, pads, stride, dilation = _box_common(op, input, size, border, padding, stride, dilation, borders)
        return _down_shape(op, tuple(input), size, pads, stride, dilation)
    return rule


def _reverse_shape(op, borders):
    def rule(input, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=(), **_):
        input = tuple(input)
        size, pads, stride, dilation = _box_common(op, input, size, border, padding, stride, dilation, borders)
        if len(output_shape):
            output_shape = _check_output_shape_attr(op, output_shape, len(input))
            check_output_shape(op, output_shape, input, size, stride, dilation, pads, 0)
            return tuple(output_shape)
        return _up_shape(op, input, size, pads, stride, dilation)
    return rule


box.shape(_basic_shape("box", BOX_BORDERS))
debox.shape(_reverse_shape("debox", BOX_BORDERS))
argmax_pool.shape(_basic_shape("argmax_pool", SAMPLE_BORDERS))
for _op in (max_pool_with_index, max_pool, avg_pool, rms_pool):
    _op.shape(_basic_shape(_op.name, SAMPLE_BORDERS if "max" in _op.name else BOX_BORDERS))
max_pool_with_index.shape((lambda rule: lambda *a, **k: (rule(*a, **k), rule(*a, **k)))(
    _basic_shape("max_pool_with_index", SAMPLE_BORDERS)))


@sample.shape
def _sample_shape(input, index, size=(), border="constant", padding=(), stride=(), dilation=()):
    out = _basic_shape("sample", SAMPLE_BORDERS)(input, size, border, padding, stride, dilation)
    if len(index) != len(out) or any(a is not None and b is not None and a != b for a, b in zip(index, out, strict=True)):
        raise op_error("sample", f"index shape {tuple(index)} must equal the output shape {out}")
    return out


@desample.shape
def _desample_shape(input, index, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=()):
    if len(index) != len(input) or any(a is not None and b is not None and a != b for a, b in zip(index, input, strict=True)):
        raise op_error("desample", f"index shape {tuple(index)} must equal the input shape {tuple(input)}")
    return _reverse_shape("desample", DESAMPLE_BORDERS)(input, size, border, padding, stride, dilation, output_shape)


# --- window geometry for kernels --------------------------------------------------------------

class _Window:
    """Resolved geometry of one windowed op over concrete extents (windowed dims only)."""

    def __init__(self, X, x, size, pads, stride, dilation):
        self.X, self.x = list(X), list(x)  # up-scaled and down-scaled extents
        self.size, self.pads, self.stride, self.dilation = list(size), pads, list(stride), list(dilation)

    def offsets(self):
        """Window offsets j in row-major order (the order argmax_pool indices count in)."""
        return itertools.product(*(range(f) for f in self.size))


def _down_window(op, X, size, padding, stride, dilation):
    size, pads, stride, dilation = window_arrays(op, len(X), size, padding, stride, dilation)
    x = _down_shape(op, X, size, pads, stride, dilation)
    return _Window(X, x, size, resolve_padding_down(X, size, stride, dilation, pads), stride, dilation)


def _up_window(op, x, size, padding, stride, dilation, output_shape, offset=0):
    size, pads, stride, dilation = window_arrays(op, len(x), size, padding, stride, dilation)
    if len(output_shape):
        X = list(output_shape)[offset:]
    else:
        X = _up_shape(op, x, size, pads, stride, dilation)
    return _Window(X, x, size, resolve_padding_up(x, X, size, stride, dilation, pads), stride, dilation)


def _read(x, src, border):
    """in~[src] per §3.3: the element, or None outside under 'constant'/'ignore'."""
    mapped = []
    for k, j in enumerate(src):
        m = border_index(j, x.shape[k], border)
        if m is None:
            return None
        mapped.append(m)
    return x[tuple(mapped)]


# --- conv / deconv: formal ------------------------------------------------------------------

def _group_sizes(C, c, G):
    return C // G, c // G


@conv.formal
def _conv_formal(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), groups=1):
    """out[b][k][i] = sum_{k1 in group(k), j} in~[b][k1][i*s + j*d - p] * w[k][k1'][j] + bias.

    Loops over output positions i and filter offsets j; the channel sums of one (i, j)
    are a float64 matrix product per group (the border mapping is the same for every
    batch item and channel).
    """
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _conv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, groups)
    C = x.shape[1]
    c = w.shape[0]
    G = C if groups == 0 else groups
    Cg, cg = _group_sizes(C, c, G)
    win = _down_window("conv", x.shape[2:], w.shape[2:], padding, stride, dilation)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = np.zeros(out_shape, np.float64)
    for i in np.ndindex(*out_shape[2:]):
        for j in win.offsets():
            src = [i[k] * win.stride[k] + j[k] * win.dilation[k] - win.pads[k][0] for k in range(len(i))]
            v = _read_channels(x64, src, border)  # (B, C) or None (zeros)
            if v is None:
                continue
            for g in range(G):
                wg = w64[(slice(g * cg, g * cg + cg), slice(None)) + j]  # (cg, Cg)
                out[(slice(None), slice(g * cg, g * cg + cg)) + i] += v[:, g * Cg:g * Cg + Cg] @ wg.T
    return _add_bias(out, b, c).astype(np.float32)


def _read_channels(x, src, border):
    """in~[:, :, src] for every batch item and channel, or None outside ('constant')."""
    mapped = []
    for k, j in enumerate(src):
        m = border_index(j, x.shape[k + 2], border)
        if m is None:
            return None
        mapped.append(m)
    return x[(slice(None), slice(None)) + tuple(mapped)]


def _add_bias(out, b, c):
    if b.size == 1:
        return out + float(b.reshape(()))
    return out + b.astype(np.float64).reshape((1, c) + (1,) * (out.ndim - 2))


@deconv.formal
def _deconv_formal(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                   groups=1):
    """out[b][k1][i] = sum_{k2 in group(k1), j} in~[b][k2][(i + p - j*d) / s] * w[k2][k1'][j] + bias,
    over the terms where every (i + p - j*d) is divisible by s."""
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _deconv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, output_shape, groups)
    c = x.shape[1]
    C = out_shape[1]
    G = _deconv_groups(groups, w.shape, list(output_shape), c)
    Cg, cg = _group_sizes(C, c, G)
    win = _up_window("deconv", x.shape[2:], w.shape[2:], padding, stride, dilation, out_shape, offset=2)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = np.zeros(out_shape, np.float64)
    for i in np.ndindex(*out_shape[2:]):
        for j in win.offsets():
            t = [i[k] + win.pads[k][0] - j[k] * win.dilation[k] for k in range(len(i))]
            if any(t[k] % win.stride[k] for k in range(len(i))):
                continue
            v = _read_channels(x64, [t[k] // win.stride[k] for k in range(len(i))], border)  # (B, c)
            if v is None:
                continue
            for g in range(G):
                wg = w64[(slice(g * cg, g * cg + cg), slice(None)) + j]  # (cg, Cg)
                out[(slice(None), slice(g * Cg, g * Cg + Cg)) + i] += v[:, g * cg:g * cg + cg] @ wg
    return _add_bias(out, b, C).astype(np.float32)


# --- conv / deconv: fast ------------------------------------------------------------------

def _view(xp, size, stride, dilation, out_shape):
    """v[i..., j...] = xp[i*s + j*d ...] over all dims of xp (a strided view, no copy)."""
    st = xp.strides
    shape = tuple(out_shape) + tuple(size)
    strides = tuple(st[k] * stride[k] for k in range(xp.ndim)) + tuple(st[k] * dilation[k] for k in range(xp.ndim))
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


class ConvEpilogue:
    """What a fused convolution does to each batch item's output, in place, while it is hot.

    Set by :func:`fused_conv` for the duration of one guarded ``conv`` call (a context
    variable, so the kernel keeps its ordinary signature and attribute guard).  ``skip``
    (optional) is added, then ``relu`` applied — the same float32 operations, in the same
    order, as the ``add`` and ``relu`` fast kernels on the convolution's result.

    ``no_negative_zero``: the convolution added a bias without any −0.0 element to every
    output, so no output (nor output + skip) is −0.0 — in round-to-nearest a sum is −0.0
    only when both terms are — and ``fmax(y, 0)`` alone is then the exact ReLU (NaN → +0,
    never −0): ``relu_into``'s second pass, which only maps −0.0 to +0.0, is skipped.
    """

    __slots__ = ("skip", "relu", "applied", "no_negative_zero")

    def __init__(self, skip: np.ndarray | None, relu: bool):
        self.skip = skip
        self.relu = relu
        self.applied = False
        self.no_negative_zero = False

    def fits(self, out_shape: tuple) -> bool:
        """Fusable only without broadcasting: ``skip`` has exactly the result's shape."""
        s = self.skip
        return s is None or (s.__class__ is np.ndarray and s.dtype == np.float32 and s.shape == tuple(out_shape))

    def apply(self, i: int, yi: np.ndarray) -> None:
        if self.skip is not None:
            yi += self.skip[i]
        if self.relu:
            if self.no_negative_zero:
                np.fmax(yi, np.float32(0.0), out=yi)
            else:
                relu_into(yi, yi)


_EPILOGUE: contextvars.ContextVar[ConvEpilogue | None] = contextvars.ContextVar("conv_epilogue", default=None)


@conv.fast
def _conv_fast(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), groups=1):
    """im2col in channel-major order, one BLAS product per batch item, the result already NCHW.

    For each batch item and group, ``cols`` is the (Cg·F, X) matrix of window values (rows:
    input channel and filter offset, columns: output positions) and the filter is the
    (cg, Cg·F) matrix, so ``filter @ cols`` is (cg, X): output channels by positions, the
    layout the result needs — no transposes of the big operands.  A 1×1 filter with unit
    dilation needs no im2col at all: the (strided) input *is* ``cols``.  Bias (and a fused
    epilogue, see :class:`ConvEpilogue`) is applied to each item right after its product,
    while it is still in cache.
    """
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _conv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, groups)
    epilogue = _EPILOGUE.get()
    if epilogue is not None:
        epilogue.applied = epilogue.fits(out_shape)
        if not epilogue.applied:
            epilogue = None
        else:
            epilogue.no_negative_zero = not bool(np.signbit(b[b == 0]).any())
    return _conv_run(x, filter, w, b, border, padding, stride, dilation, groups, out_shape, epilogue, True)


def _conv_run(x, filter, w, b, border, padding, stride, dilation, groups, out_shape, epilogue, allow_winograd):
    """The body of :func:`_conv_fast` once arguments are checked (``filter``: as passed)."""
    B, C = x.shape[:2]
    c = w.shape[0]
    n = x.ndim - 2
    G = C if groups == 0 else groups
    Cg, cg = _group_sizes(C, c, G)
    win = _down_window("conv", x.shape[2:], w.shape[2:], padding, stride, dilation)
    xs = tuple(out_shape[2:])
    F = tuple(w.shape[2:])
    X, K = math.prod(xs), Cg * math.prod(F)
    wm = w.reshape(G, cg, K)
    y = np.empty((B, G, cg, X), np.float32)
    bias_item = b.reshape(()) if b.size == 1 else b.reshape((c,) + (1,) * n)
    pointwise = all(f == 1 for f in F) and not any(p or q for p, q in win.pads)
    if (allow_winograd and n == 2 and G == 1 and F == (3, 3) and win.stride == [1, 1] and win.dilation == [1, 1]
            and border == "constant" and all(p >= 0 and q >= 0 for p, q in win.pads) and B * X > 0
            and winograd.pays(C, c, B, -(-xs[0] // 2), -(-xs[1] // 2))):
        _conv_winograd(x, filter, w, b, bias_item, win, y.reshape((B, c) + xs), epilogue)
        return y.reshape((B, c) + xs)
    # Small images (late layers): several batch items per product, or BLAS runs on thin,
    # slow matrices (7×7 = 49 columns: 25 % below its speed on wide ones).  Only products
    # big enough that OpenBLAS already runs them on all its threads: grouping tiny ones
    # (the digits example) makes them multi-threaded, and on a busy machine each then waits
    # for a second thread (10× slower runs seen).
    group = (min(B, -(-_PRODUCT_COLUMNS // X))
             if B > 1 and 0 < X < _PRODUCT_COLUMNS // 2 and c * K * X >= _GROUP_MIN_MACS else 1)
    if (group == 1 and not pointwise and n == 2 and border == "constant" and xs[1] >= _WIDE_MIN_WIDTH
            and all(p >= 0 and q >= 0 for p, q in win.pads) and B * X > 0):
        _conv_wide_rows(x, wm, bias_item, y.reshape((B, c) + xs), win, F, G, epilogue)
        return y.reshape((B, c) + xs)
    if pointwise:
        # Pointwise: the strided input itself is the column matrix.
        picked = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in win.stride)]
        picked = picked[(slice(None), slice(None)) + tuple(slice(0, e) for e in xs)]

        def columns(i):
            return picked[i]  # (C, xs...)
    else:
        xp = pad_array(x, [(0, 0), (0, 0)] + win.pads, border)
        v = _view(xp, [1, 1] + list(F), [1, 1] + win.stride, [1, 1] + win.dilation, (B, C) + xs)
        # v is (B, C, xs..., 1, 1, F...): bring the filter offsets before the positions.
        v = v.reshape((B, C) + xs + F)
        perm = (0, 1) + tuple(range(2 + n, 2 + 2 * n)) + tuple(range(2, 2 + n))
        v = v.transpose(perm)

        def columns(i):
            return v[i]  # (C, F..., xs...)
    if group == 1:
        # One batch item's columns at a time, in one reused buffer: the buffer stays
        # cache-sized and is allocated (page-faulted) once instead of B times as large.
        cols = np.empty((C,) + (() if pointwise else F) + xs, np.float32)
        for i in range(B):
            src = columns(i)
            if pointwise and src.flags.c_contiguous:
                mat = src.reshape(G, K, X)  # stride 1: no copy at all
            else:
                np.copyto(cols, src)
                mat = cols.reshape(G, K, X)
            np.matmul(wm, mat, out=y[i])  # (G, cg, X): float32 BLAS
            yi = y[i].reshape((c,) + xs)
            yi += bias_item
            if epilogue is not None:
                epilogue.apply(i, yi)
        return y.reshape((B, c) + xs)
    # ``group`` items side by side: columns (G, K, m·X), item j in columns j·X...  Every
    # chunk gets contiguous buffers of its own width (a trailing partial chunk too), so the
    # BLAS always sees dense matrices.
    buffers: dict[int, tuple] = {}
    for i0 in range(0, B, group):
        m = min(group, B - i0)
        if m not in buffers:
            cols = np.empty((G, K, m * X), np.float32)
            out = np.empty((G, cg, m * X), np.float32)
            buffers[m] = (cols, cols.reshape((C,) + (() if pointwise else F) + (m,) + xs),  # views
                          out, out.reshape((c, m) + xs))
        cols, into, out, parts = buffers[m]
        for j in range(m):
            np.copyto(into[(Ellipsis, j) + (slice(None),) * n], columns(i0 + j))
        np.matmul(wm, cols, out=out)  # float32 BLAS
        for j in range(m):
            yi = y[i0 + j].reshape((c,) + xs)
            np.add(parts[:, j], bias_item, out=yi)
            if epilogue is not None:
                epilogue.apply(i0 + j, yi)
    return y.reshape((B, c) + xs)


class PreparedFilter:
    """A plan step's cache of a constant filter's Winograd transform (see :func:`prepared_conv`).

    ``source`` is the filter array the transform was made from; it is reused only for that
    very object (held here, so its identity cannot pass to another array), which the planner
    guarantees never changes: it wraps only steps whose filter is a constant of the plan.
    """

    __slots__ = ("source", "transformed")

    def __init__(self) -> None:
        self.source: object = None
        self.transformed: np.ndarray | None = None


_PREPARED: contextvars.ContextVar[PreparedFilter | None] = contextvars.ContextVar("conv_prepared", default=None)


def prepared_conv(conv_kernel):
    """Wrap a (guarded, possibly fused) ``conv`` kernel whose filter argument is a constant.

    Each call makes the step's :class:`PreparedFilter` visible to :func:`_conv_fast`, which
    then transforms the filter for Winograd once instead of on every run (a 512×512 3×3
    filter: ≈ 15 ms, more than the convolution).  Results are identical with or without.
    """
    holder = PreparedFilter()

    def run(*args, **kwargs):
        token = _PREPARED.set(holder)
        try:
            return conv_kernel(*args, **kwargs)
        finally:
            _PREPARED.reset(token)

    run.prepared = holder  # for tests and profiling
    return run


def _winograd_filter(filter, w):
    holder = _PREPARED.get()
    if holder is not None and holder.source is filter:
        return holder.transformed
    U = winograd.transform_filter(w)
    if holder is not None:
        holder.source, holder.transformed = filter, U
    return U


def _conv_winograd(x, filter, w, b, bias_item, win, y, epilogue):
    """3×3 stride-1 convolution by Winograd F(2×2, 3×3) (:mod:`nnefx.ops.winograd`).

    Any batch item whose result is not all finite is computed again by the direct path: a
    NaN or Inf, or an overflow inside the transforms, spreads over whole 4×4 input tiles,
    where the direct sum keeps it to the windows that read it.  The check is a sum over the
    item's output (a non-finite sum of finite values, i.e. huge ones, also falls back).
    """
    U = _winograd_filter(filter, w)
    pads = [tuple(p) for p in win.pads]

    def finish(i):
        yi = y[i]
        if not math.isfinite(float(np.add.reduce(yi, axis=None))):
            item = x[i:i + 1]
            np.copyto(yi, _conv_run(item, w, w, b, "constant", pads, [1, 1], [1, 1], 1, (1,) + yi.shape,
                                    None, False)[0])
        if epilogue is not None:
            epilogue.apply(i, yi)

    with np.errstate(over="ignore", invalid="ignore"):  # overflows inside the transforms: see finish
        winograd.conv3x3(x, U, bias_item, pads, y, finish)


#: Columns a product should have at least when batch items are small enough to share one
#: (items whose output has fewer than half as many positions are grouped).
_PRODUCT_COLUMNS = 1024

#: Multiply-adds one item's product needs before items are grouped (see ``_conv_fast``).
_GROUP_MIN_MACS = 1 << 20


#: Narrowest output row for which :func:`_conv_wide_rows` beats classic im2col: its
#: products compute (W + pads)/W as many columns (9/7 = 1.29× at 7, 1.07× at 28).
_WIDE_MIN_WIDTH = 12


def _conv_wide_rows(x, wm, bias_item, y, win, F, G, epilogue):
    """2-D convolution with *wide rows*: im2col from contiguous runs instead of a gather.

    Stride 1 first: each batch item is written once into a zero-padded buffer whose rows
    are Wp = W + pads long, flattened per channel.  For filter offset (jh, jw), the window
    values of all output positions (h, w) — taken over full padded rows, w < Wp — are the
    *contiguous* run of ``Ho·Wp`` elements starting at ``jh·dh·Wp + jw·dw``; so the column
    matrix is built from long memcpy-like runs (2–4× faster than gathering ``Wo``-element
    row pieces), and the product yields Ho×Wp values per channel of which the first Wo of
    each row are the output (the rest mix two rows and are dropped while adding the bias).

    Stride (sh, sw): the padded item is split into sh·sw *phases* (padded rows ≡ a mod sh,
    columns ≡ b mod sw), each Hq×Wq; padded element (r·sh + a, q·sw + b) is phase (a, b)
    at (r, q), so filter offset (jh, jw) reads phase (jh·dh mod sh, jw·dw mod sw) from
    (jh·dh div sh, jw·dw div sw) on, again as one contiguous run of ``Ho·Wq`` per channel
    (the ResNet stem's 7×7/2 gather was 4× its product's time).  Each output element gets
    the same products and sum as in the classic path; only the matrix width the BLAS sees
    (Wq instead of Wo columns per row) differs.
    """
    B, C, H, W = x.shape
    c, Ho, Wo = y.shape[1:]
    (pt, pb), (pl, pr) = win.pads
    sh, sw = win.stride
    dh, dw = win.dilation
    fh, fw = F
    Hp, Wp = H + pt + pb, W + pl + pr
    Hq, Wq = -(-Hp // sh), -(-Wp // sw)
    N = Ho * Wq
    length = Hq * Wq + (fw - 1) * dw // sw  # the last offset's run reaches past the last row
    flat = np.zeros((sh, sw, C, length), np.float32)
    fills = []  # (phase interior view, input rows, input columns) per phase
    for a in range(sh):
        i0 = (a - pt) % sh  # first input row landing in phase row set a
        rows_in = range(i0, H, sh)
        for b_ in range(sw):
            j0 = (b_ - pl) % sw
            cols_in = range(j0, W, sw)
            if not len(rows_in) or not len(cols_in):
                continue
            grid = flat[a, b_, :, :Hq * Wq].reshape(C, Hq, Wq)
            r0, q0 = (i0 + pt) // sh, (j0 + pl) // sw
            fills.append((grid[:, r0:r0 + len(rows_in), q0:q0 + len(cols_in)],
                          (slice(None), slice(i0, H, sh), slice(j0, W, sw))))
    cols = np.empty((C, fh, fw, N), np.float32)
    if sh == sw == 1:
        st = flat.strides
        runs = [(cols, np.lib.stride_tricks.as_strided(flat[0, 0], (C, fh, fw, N),
                                                       (st[2], dh * Wp * st[3], dw * st[3], st[3]),
                                                       writeable=False))]
    else:
        runs = []
        for jh in range(fh):
            a, r = divmod(jh * dh, sh)[::-1]
            for jw in range(fw):
                b_, q = divmod(jw * dw, sw)[::-1]
                start = r * Wq + q
                runs.append((cols[:, jh, jw], flat[a, b_, :, start:start + N]))
    wide = np.empty((G, wm.shape[1], N), np.float32)
    valid = wide.reshape(c, Ho, Wq)[:, :, :Wo]
    for i in range(B):
        xi = x[i]
        for dst, src in fills:
            np.copyto(dst, xi[src])
        for dst, src in runs:
            np.copyto(dst, src)
        np.matmul(wm, cols.reshape(G, -1, N), out=wide)  # float32 BLAS
        yi = y[i]
        np.add(valid, bias_item, out=yi)
        if epilogue is not None:
            epilogue.apply(i, yi)


def fused_conv(conv_kernel, add_kernel, relu_kernel, *, residual: bool, relu: bool):
    """``conv`` followed by ``add`` (residual, optional) and ``relu`` (optional), as one kernel.

    ``conv_kernel`` is the guarded ``conv`` fast kernel (attribute checks included); the
    result equals ``relu(add(conv(...), skip))`` computed by the separate fast kernels,
    bit for bit, without the intermediate arrays or passes.  Where ``skip`` would need
    broadcasting (or is not float32), the separate kernels run instead.  With ``residual``
    the last positional argument is ``skip`` and ``skip_first`` says whether it was the
    ``add``'s first operand (addition of two floats is commutative, so it only matters for
    the fallback call, which keeps the graph's order).
    """

    def run(*args, skip_first=False, **kwargs):
        skip = None
        if residual:
            *args, skip = args
        epilogue = ConvEpilogue(skip, relu)
        token = _EPILOGUE.set(epilogue)
        try:
            y = conv_kernel(*args, **kwargs)
        finally:
            _EPILOGUE.reset(token)
        if epilogue.applied:
            return y
        if residual:
            y = add_kernel(skip, y) if skip_first else add_kernel(y, skip)
        return relu_kernel(y) if relu else y

    return run


def _add_bias_f32(y, b, c):
    """Add the bias in place: ``y`` is the kernel's own fresh float32 product."""
    if b.size == 1:
        y += b.reshape(())
    else:
        y += b.reshape((1, c) + (1,) * (y.ndim - 2))
    return y


def _extension(win, k):
    """How many border elements a reverse op can read before/after down-scaled dim k."""
    s, d, f, p = win.stride[k], win.dilation[k], win.size[k], win.pads[k][0]
    before = max(0, -((p - (f - 1) * d) // s))
    after = max(0, (win.X[k] - 1 + p) // s - (win.x[k] - 1))
    return before, after


def _scatter_geometry(win, ext):
    """Buffer layout for scattering: input element q (extended) lands at q*s + j*d + lead."""
    lead, start, length = [], [], []
    for k in range(len(win.size)):
        xe = win.x[k] + ext[k][0] + ext[k][1]
        base = win.pads[k][0] + ext[k][0] * win.stride[k]
        ld = max(0, -base)
        lead.append(ld)
        start.append(base + ld)
        length.append(max(ld + (xe - 1) * win.stride[k] + dilated(win.size[k], win.dilation[k]),
                          base + ld + win.X[k]))
    return lead, start, length


@deconv.fast
def _deconv_fast(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                 groups=1):
    """Scatter form: for each filter offset j, one BLAS product per group added at q*s + j*d."""
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _deconv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, output_shape, groups)
    B, c = x.shape[:2]
    C = out_shape[1]
    n = x.ndim - 2
    G = _deconv_groups(groups, w.shape, list(output_shape), c)
    Cg, cg = _group_sizes(C, c, G)
    win = _up_window("deconv", x.shape[2:], w.shape[2:], padding, stride, dilation, out_shape, offset=2)
    ext = [(0, 0)] * n if border == "constant" else [_extension(win, k) for k in range(n)]
    xe = pad_array(x, [(0, 0), (0, 0)] + ext, border)
    lead, start, length = _scatter_geometry(win, ext)
    xs = xe.shape[2:]
    buf = np.zeros((B, C) + tuple(length), np.float32)
    xg = xe.reshape((B, G, cg) + xs)
    wg = w.reshape((G, cg, Cg) + tuple(w.shape[2:]))
    for j in win.offsets():
        contrib = np.einsum("bgq...,gqc->bgc...", xg, wg[(slice(None),) * 3 + j], optimize=True)
        region = tuple(slice(j[k] * win.dilation[k] + lead[k],
                             j[k] * win.dilation[k] + lead[k] + (xs[k] - 1) * win.stride[k] + 1, win.stride[k])
                       for k in range(n))
        buf[(slice(None), slice(None)) + region] += contrib.reshape((B, C) + xs)
    y = buf[(slice(None), slice(None)) + tuple(slice(start[k], start[k] + win.X[k]) for k in range(n))]
    return _add_bias_f32(np.ascontiguousarray(y), b, C)


# --- box / debox ----------------------------------------------------------------------------

@box.formal
def _box_formal(input, size=(), border="constant", padding=(), stride=(), dilation=(), normalize=False):
    """out[i] = sum_j in~[i*s + j*d - p] (all dimensions), / volume if normalize."""
    x = scalar(input)
    out_shape = box.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("box", x.shape, size, padding, stride, dilation)
    out = np.zeros(out_shape, np.float32)
    volume = math.prod(win.size)
    for i in np.ndindex(*out_shape):
        acc, count = 0.0, 0
        for j in win.offsets():
            src = [i[k] * win.stride[k] + j[k] * win.dilation[k] - win.pads[k][0] for k in range(len(i))]
            v = _read(x, src, border)
            if v is None and border == "ignore":
                continue
            acc += 0.0 if v is None else float(v)
            count += 1
        if normalize:
            divisor = count if border == "ignore" else volume
            acc = acc / divisor if divisor else 0.0
        out[i] = acc
    return out


def _box_sums(x, win, border):
    """Window sums (float64) and, for 'ignore', the in-range counts."""
    xp = pad_array(x.astype(np.float64), win.pads, border)
    n = x.ndim
    axes = tuple(range(n, 2 * n))
    sums = _view(xp, win.size, win.stride, win.dilation, win.x).sum(axis=axes)
    counts = None
    if border == "ignore":
        mp = pad_array(np.ones(x.shape, np.float64), win.pads, "constant")
        counts = _view(mp, win.size, win.stride, win.dilation, win.x).sum(axis=axes)
    return sums, counts


@box.fast
def _box_fast(input, size=(), border="constant", padding=(), stride=(), dilation=(), normalize=False):
    x = scalar(input)
    box.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("box", x.shape, size, padding, stride, dilation)
    sums, counts = _box_sums(x, win, border)
    if normalize:
        if counts is None:
            sums = sums / math.prod(win.size)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                sums = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return sums.astype(np.float32)


@debox.formal
def _debox_formal(input, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                  normalize=False):
    """out[i] = sum_j in~[(i + p - j*d) / s] over divisible terms, / volume if normalize."""
    x = scalar(input)
    out_shape = debox.shape_rule(x.shape, size, border, padding, stride, dilation, output_shape)
    win = _up_window("debox", x.shape, size, padding, stride, dilation, out_shape)
    volume = math.prod(win.size)
    out = np.zeros(out_shape, np.float32)
    for i in np.ndindex(*out_shape):
        acc, count = 0.0, 0
        for j in win.offsets():
            t = [i[k] + win.pads[k][0] - j[k] * win.dilation[k] for k in range(len(i))]
            if any(t[k] % win.stride[k] for k in range(len(i))):
                continue
            v = _read(x, [t[k] // win.stride[k] for k in range(len(i))], border)
            if v is None and border == "ignore":
                continue
            acc += 0.0 if v is None else float(v)
            count += 1
        if normalize:
            divisor = count if border == "ignore" else volume
            acc = acc / divisor if divisor else 0.0
        out[i] = acc
    return out


def _scatter(xe, win, ext, dtype=np.float64):
    """Sum of xe scattered to q*s + j*d over window offsets j; cropped to the output."""
    n = xe.ndim
    lead, start, length = _scatter_geometry(win, ext)
    buf = np.zeros(tuple(length), dtype)
    for j in win.offsets():
        region = tuple(slice(j[k] * win.dilation[k] + lead[k],
                             j[k] * win.dilation[k] + lead[k] + (xe.shape[k] - 1) * win.stride[k] + 1, win.stride[k])
                       for k in range(n))
        buf[region] += xe
    return buf[tuple(slice(start[k], start[k] + win.X[k]) for k in range(n))]


@debox.fast
def _debox_fast(input, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                normalize=False):
    x = scalar(input)
    out_shape = debox.shape_rule(x.shape, size, border, padding, stride, dilation, output_shape)
    win = _up_window("debox", x.shape, size, padding, stride, dilation, out_shape)
    n = x.ndim
    ext = [(0, 0)] * n if border in ("constant", "ignore") else [_extension(win, k) for k in range(n)]
    sums = _scatter(pad_array(x.astype(np.float64), ext, border), win, ext)
    if normalize:
        if border == "ignore":
            counts = _scatter(np.ones(x.shape), win, ext)
            with np.errstate(invalid="ignore", divide="ignore"):
                sums = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        else:
            sums = sums / math.prod(win.size)
    return sums.astype(np.float32)


# --- argmax_pool / sample / desample ----------------------------------------------------------

def _better(v, best):
    """NaN counts as the largest value; strictly greater otherwise (first one wins ties)."""
    if math.isnan(best):
        return False
    return math.isnan(v) or v > best


@argmax_pool.formal
def _argmax_pool_formal(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    """index[i] = row-major position in the window of the first maximum of in~."""
    x = scalar(input)
    out_shape = argmax_pool.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("argmax_pool", x.shape, size, padding, stride, dilation)
    out = np.zeros(out_shape, np.int64)
    for i in np.ndindex(*out_shape):
        best, best_pos = None, 0
        for pos, j in enumerate(win.offsets()):
            src = [i[k] * win.stride[k] + j[k] * win.dilation[k] - win.pads[k][0] for k in range(len(i))]
            v = _read(x, src, border)
            if v is None:
                if border == "ignore":
                    continue
                v = 0.0
            v = float(v)
            if best is None or _better(v, best):
                best, best_pos = v, pos
        out[i] = best_pos
    return out


def _window_values(x, win, border):
    """(values, included) as (out..., V) arrays; V = window volume in row-major order."""
    fill = 0.0
    xp = pad_array(x, win.pads, border, fill)
    n = x.ndim
    V = math.prod(win.size)
    vals = _view(xp, win.size, win.stride, win.dilation, win.x).reshape(tuple(win.x) + (V,))
    if border == "ignore":
        mp = pad_array(np.ones(x.shape, np.bool_), win.pads, "constant", False)
        inc = _view(mp, win.size, win.stride, win.dilation, win.x).reshape(tuple(win.x) + (V,))
    else:
        inc = np.ones((1,) * n + (V,), np.bool_)
    return vals, inc


def argmax_pool_fast(x, win, border):
    vals, inc = _window_values(x, win, border)
    nan = np.isnan(vals) & inc
    has_nan = nan.any(axis=-1)
    vmax = np.where(inc, np.where(np.isnan(vals), -np.inf, vals), -np.inf).max(axis=-1, keepdims=True)
    first_max = np.argmax((vals == vmax) & inc, axis=-1)
    first_nan = np.argmax(nan, axis=-1)
    return np.where(has_nan, first_nan, first_max).astype(np.int64)


@argmax_pool.fast
def _argmax_pool_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    x = scalar(input)
    argmax_pool.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("argmax_pool", x.shape, size, padding, stride, dilation)
    return argmax_pool_fast(x, win, border)


def _check_window_index(op, idx, win):
    V = math.prod(win.size)
    if idx.size and (idx.min() < 0 or idx.max() >= V):
        bad = int(idx[(idx < 0) | (idx >= V)].flat[0])
        raise op_error(op, f"index {bad} is outside the window volume [0, {V})")


@sample.formal
def _sample_formal(input, index, size=(), border="constant", padding=(), stride=(), dilation=()):
    """output[i] = in~[i*s + unravel(index[i])*d - p]."""
    x, idx = scalar(input), np.asarray(index, np.int64)
    out_shape = _sample_shape(x.shape, idx.shape, size, border, padding, stride, dilation)
    win = _down_window("sample", x.shape, size, padding, stride, dilation)
    _check_window_index("sample", idx, win)
    out = np.zeros(out_shape, np.float32)
    for i in np.ndindex(*out_shape):
        j = np.unravel_index(int(idx[i]), win.size)
        src = [i[k] * win.stride[k] + int(j[k]) * win.dilation[k] - win.pads[k][0] for k in range(len(i))]
        v = _read(x, src, border)
        out[i] = 0.0 if v is None else v
    return out


def sample_fast(x, idx, win, border):
    xp = pad_array(x, win.pads, border)
    j = np.unravel_index(idx, win.size)
    grid = np.indices(idx.shape, sparse=True)
    pos = tuple(grid[k] * win.stride[k] + j[k] * win.dilation[k] for k in range(x.ndim))
    return xp[pos].astype(np.float32)


@sample.fast
def _sample_fast(input, index, size=(), border="constant", padding=(), stride=(), dilation=()):
    x, idx = scalar(input), np.asarray(index, np.int64)
    _sample_shape(x.shape, idx.shape, size, border, padding, stride, dilation)
    win = _down_window("sample", x.shape, size, padding, stride, dilation)
    _check_window_index("sample", idx, win)
    return sample_fast(x, idx, win, border)


@desample.formal
def _desample_formal(input, index, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=()):
    """output[i] = sum_j input[q] over j with i + p - j*d = q*s, q in range, index[q] = j."""
    x, idx = scalar(input), np.asarray(index, np.int64)
    out_shape = _desample_shape(x.shape, idx.shape, size, border, padding, stride, dilation, output_shape)
    win = _up_window("desample", x.shape, size, padding, stride, dilation, out_shape)
    _check_window_index("desample", idx, win)
    out = np.zeros(out_shape, np.float32)
    for i in np.ndindex(*out_shape):
        acc = 0.0
        for pos, j in enumerate(win.offsets()):
            t = [i[k] + win.pads[k][0] - j[k] * win.dilation[k] for k in range(len(i))]
            if any(t[k] % win.stride[k] for k in range(len(i))):
                continue
            q = tuple(t[k] // win.stride[k] for k in range(len(i)))
            if all(0 <= q[k] < x.shape[k] for k in range(len(i))) and idx[q] == pos:
                acc += float(x[q])
        out[i] = acc
    return out


@desample.fast
def _desample_fast(input, index, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=()):
    x, idx = scalar(input), np.asarray(index, np.int64)
    out_shape = _desample_shape(x.shape, idx.shape, size, border, padding, stride, dilation, output_shape)
    win = _up_window("desample", x.shape, size, padding, stride, dilation, out_shape)
    _check_window_index("desample", idx, win)
    j = np.unravel_index(idx, win.size)
    grid = np.indices(idx.shape, sparse=True)
    target = [grid[k] * win.stride[k] + j[k] * win.dilation[k] - win.pads[k][0] for k in range(x.ndim)]
    target = np.broadcast_arrays(*target)
    inside = np.ones(idx.shape, np.bool_)
    for k in range(x.ndim):
        inside &= (target[k] >= 0) & (target[k] < out_shape[k])
    out = np.zeros(out_shape, np.float64)
    np.add.at(out, tuple(t[inside] for t in target), x[inside].astype(np.float64))
    return out.astype(np.float32)


# --- pooling compounds --------------------------------------------------------------------

@max_pool_with_index.formal
def _mpwi_formal(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    index = _argmax_pool_formal(input, size, border, padding, stride, dilation)
    return _sample_formal(input, index, size, border, padding, stride, dilation), index


@max_pool_with_index.fast
def _mpwi_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    x = scalar(input)
    argmax_pool.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("max_pool_with_index", x.shape, size, padding, stride, dilation)
    index = argmax_pool_fast(x, win, border)
    return sample_fast(x, index, win, border), index


max_pool.formal(lambda input, size=(), border="constant", padding=(), stride=(), dilation=():
                _mpwi_formal(input, size, border, padding, stride, dilation)[0])


def _window_max(xp, win):
    """Window maximum of a padded array, one axis at a time (a box maximum is separable).

    Axis by axis, ``out[..., i, ...] = max_j in[..., i*s + j*d, ...]`` by one strided slice
    per window offset: a 3×3 window costs 3 + 3 passes over shrinking arrays instead of 9
    over the output (the ResNet stem's max pool: ≈ 2× faster).  ``max`` is exact, so the
    order changes no value; NaN propagates as in a single reduction over the window (only
    which of +0.0 / −0.0 is returned for a tie may differ, as with any order).  Always a
    fresh array, never a view of ``xp``.
    """
    out = xp
    for k in range(xp.ndim):
        f, s, d, n = win.size[k], win.stride[k], win.dilation[k], win.x[k]
        if f == 1 and s == 1 and out.shape[k] == n:
            continue
        lead = (slice(None),) * k

        def tap(j, k=k, lead=lead, s=s, d=d, n=n, src=out):
            return src[lead + (slice(j * d, j * d + (n - 1) * s + 1, s),)]

        if f == 1:
            out = np.array(tap(0), copy=True)
            continue
        new = np.maximum(tap(0), tap(1))
        for j in range(2, f):
            np.maximum(new, tap(j), out=new)
        out = new
    return np.array(out, copy=True) if out is xp else out


def _windows_all_outside(win):
    """Per axis, the output positions whose window reads no input element (1-D masks)."""
    masks = []
    for k in range(len(win.x)):
        starts = np.arange(win.x[k]) * win.stride[k] - win.pads[k][0]
        taps = starts[:, None] + np.arange(win.size[k])[None, :] * win.dilation[k]
        masks.append(~((taps >= 0) & (taps < win.X[k])).any(axis=1))
    return masks


#: Items smaller than this (elements) are pooled as one batch, larger ones one at a time.
_ITEMWISE_MIN = 1 << 16


@max_pool.fast
def _max_pool_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    """Window maximum, one strided slice per window offset; NaN propagates (the arg-max's choice)."""
    x = scalar(input)
    max_pool.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("max_pool", x.shape, size, padding, stride, dilation)
    if (x.ndim > 1 and x.shape[0] > 1 and win.size[0] == 1 and win.stride[0] == 1 and win.pads[0] == (0, 0)
            and x[0].size >= _ITEMWISE_MIN):
        # Batch items pool independently: one at a time keeps the padded copy and the
        # running maximum cache-sized (batch 8 of a ResNet stem: 32 -> ~10 ms).  Small items
        # (digits: 50 × 16×8×8) pool whole: there the per-item Python loop would dominate.
        item = _Window([1] + win.X[1:], [1] + win.x[1:], win.size, win.pads, win.stride, win.dilation)
        out = np.empty(tuple(win.x), np.float32)
        for i in range(x.shape[0]):
            out[i:i + 1] = _max_pool_window(x[i:i + 1], item, border)
        return out
    return _max_pool_window(x, win, border)


def _max_pool_window(x, win, border):
    if border != "ignore":
        return _window_max(pad_array(x, win.pads, border), win).astype(np.float32, copy=False)
    out = _window_max(pad_array(x, win.pads, "constant", -np.inf), win)
    outside = _windows_all_outside(win)
    if any(m.any() for m in outside):
        # A window entirely outside samples its first position, which reads 0 under 'ignore'.
        grid = np.zeros(out.shape, np.bool_)
        for k, m in enumerate(outside):
            grid |= m.reshape((1,) * k + (-1,) + (1,) * (out.ndim - k - 1))
        out[grid] = 0.0
    return out.astype(np.float32, copy=False)


avg_pool.formal(lambda input, size=(), border="constant", padding=(), stride=(), dilation=():
                _box_formal(input, size, border, padding, stride, dilation, normalize=True))
avg_pool.fast(lambda input, size=(), border="constant", padding=(), stride=(), dilation=():
              _box_fast(input, size, border, padding, stride, dilation, normalize=True))


def _rms_formal(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    from .elementwise import sqr, sqrt
    return sqrt.formal_kernel(_box_formal(sqr.formal_kernel(input), size, border, padding, stride, dilation,
                                          normalize=True))


def _rms_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    x = scalar(input)
    return np.sqrt(_box_fast(np.square(x), size, border, padding, stride, dilation, normalize=True))


rms_pool.formal(_rms_formal)
rms_pool.fast(_rms_fast)


# --- separable convolutions -----------------------------------------------------------------

def _check_point_filter(op, plane_filter, point_filter):
    if any(d not in (1, None) for d in tuple(point_filter)[2:]):
        raise op_error(op, f"point filter {tuple(point_filter)} must have spatial extents 1")


@separable_conv.shape
def _sepconv_shape(input, plane_filter, point_filter, bias=(), border="constant", padding=(), stride=(),
                   dilation=(), groups=1):
    _check_point_filter("separable_conv", plane_filter, point_filter)
    filtered = _conv_shape(input, plane_filter, (), border, padding, stride, dilation, 0)
    return _conv_shape(filtered, point_filter, bias, groups=groups)


@separable_deconv.shape
def _sepdeconv_shape(input, plane_filter, point_filter, bias=(), border="constant", padding=(), stride=(),
                     dilation=(), output_shape=(), groups=1):
    _check_point_filter("separable_deconv", plane_filter, point_filter)
    filtered = _deconv_shape(input, point_filter, (), groups=groups)
    return _deconv_shape(filtered, plane_filter, bias, border, padding, stride, dilation, output_shape, 0)


def _sepconv(kconv):
    def run(input, plane_filter, point_filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(),
            groups=1):
        _sepconv_shape(np.shape(input), np.shape(plane_filter), np.shape(point_filter), np.shape(bias), border,
                       padding, stride, dilation, groups)
        filtered = kconv(input, plane_filter, 0.0, border, padding, stride, dilation, 0)
        return kconv(filtered, point_filter, bias, groups=groups)
    return run


def _sepdeconv(kdeconv):
    def run(input, plane_filter, point_filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(),
            output_shape=(), groups=1):
        _sepdeconv_shape(np.shape(input), np.shape(plane_filter), np.shape(point_filter), np.shape(bias), border,
                         padding, stride, dilation, output_shape, groups)
        filtered = kdeconv(input, point_filter, 0.0, groups=groups)
        return kdeconv(filtered, plane_filter, bias, border, padding, stride, dilation, output_shape, 0)
    return run


separable_conv.formal(_sepconv(_conv_formal))
separable_conv.fast(_sepconv(_conv_fast))
separable_deconv.formal(_sepdeconv(_deconv_formal))
separable_deconv.fast(_sepdeconv(_deconv_fast))
