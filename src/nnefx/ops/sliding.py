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

import itertools  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import (  # noqa: E402
    BORDERS,
    attr_error,
    border_index,
    check_border,
    check_output_shape,
    dilated,
    down_extent,
    float_type,
    op_error,
    pad_array,
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


def _view(xp, size, stride, dilation, out_shape):
    """v[i..., j...] = xp[i*s + j*d ...] over all dims of xp (a strided view, no copy)."""
    st = xp.strides
    shape = tuple(out_shape) + tuple(size)
    strides = tuple(st[k] * stride[k] for k in range(xp.ndim)) + tuple(st[k] * dilation[k] for k in range(xp.ndim))
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


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
    return _add_bias(out, b, c).astype(float_type())


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
    return _add_bias(out, b, C).astype(float_type())


# --- box / debox ----------------------------------------------------------------------------

@box.formal
def _box_formal(input, size=(), border="constant", padding=(), stride=(), dilation=(), normalize=False):
    """out[i] = sum_j in~[i*s + j*d - p] (all dimensions), / volume if normalize."""
    x = scalar(input)
    out_shape = box.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("box", x.shape, size, padding, stride, dilation)
    out = np.zeros(out_shape, float_type())
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
    return sums.astype(float_type())


@debox.formal
def _debox_formal(input, size=(), border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                  normalize=False):
    """out[i] = sum_j in~[(i + p - j*d) / s] over divisible terms, / volume if normalize."""
    x = scalar(input)
    out_shape = debox.shape_rule(x.shape, size, border, padding, stride, dilation, output_shape)
    win = _up_window("debox", x.shape, size, padding, stride, dilation, out_shape)
    volume = math.prod(win.size)
    out = np.zeros(out_shape, float_type())
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
    return sums.astype(float_type())


# The fast convolution kernels and the pooling kernels live in their own modules; importing
# this one registers them too (names other modules use are re-exported here).
from .sliding_conv import ConvEpilogue, fused_conv, prepared_conv  # noqa: E402, F401
from .sliding_pool import argmax_pool_fast, sample_fast  # noqa: E402, F401
