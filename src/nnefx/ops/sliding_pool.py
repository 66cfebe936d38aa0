"""``argmax_pool``, ``sample``, ``desample`` and the pooling compounds (NNEF spec §4.3,
§4.9.3): formal and fast kernels.

Split from :mod:`nnefx.ops.sliding` (declarations, shape rules, window geometry, border
conventions); importing either registers both.
"""

from __future__ import annotations

import math

import numpy as np

from ._common import (
    float_type,
    op_error,
    pad_array,
    scalar,
)
from .sliding import (  # noqa: F401
    _box_fast,
    _box_formal,
    _desample_shape,
    _down_window,
    _read,
    _sample_shape,
    _up_window,
    _view,
    _Window,
    argmax_pool,
    avg_pool,
    desample,
    max_pool,
    max_pool_with_index,
    rms_pool,
    sample,
)

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
    out = np.zeros(out_shape, float_type())
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
    return xp[pos].astype(float_type())


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
    out = np.zeros(out_shape, float_type())
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
    return out.astype(float_type())


# --- pooling compounds --------------------------------------------------------------------

@max_pool_with_index.fast
def _mpwi_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    x = scalar(input)
    argmax_pool.shape_rule(x.shape, size, border, padding, stride, dilation)
    win = _down_window("max_pool_with_index", x.shape, size, padding, stride, dilation)
    index = argmax_pool_fast(x, win, border)
    return sample_fast(x, index, win, border), index


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
        out = np.empty(tuple(win.x), float_type())
        for i in range(x.shape[0]):
            out[i:i + 1] = _max_pool_window(x[i:i + 1], item, border)
        return out
    return _max_pool_window(x, win, border)


def _max_pool_window(x, win, border):
    if border != "ignore":
        return _window_max(pad_array(x, win.pads, border), win).astype(float_type(), copy=False)
    out = _window_max(pad_array(x, win.pads, "constant", -np.inf), win)
    outside = _windows_all_outside(win)
    if any(m.any() for m in outside):
        # A window entirely outside samples its first position, which reads 0 under 'ignore'.
        grid = np.zeros(out.shape, np.bool_)
        for k, m in enumerate(outside):
            grid |= m.reshape((1,) * k + (-1,) + (1,) * (out.ndim - k - 1))
        out[grid] = 0.0
    return out.astype(float_type(), copy=False)


avg_pool.fast(lambda input, size=(), border="constant", padding=(), stride=(), dilation=():
              _box_fast(input, size, border, padding, stride, dilation, normalize=True))


def _rms_fast(input, size=(), border="constant", padding=(), stride=(), dilation=()):
    x = scalar(input)
    return np.sqrt(_box_fast(np.square(x), size, border, padding, stride, dilation, normalize=True))


rms_pool.fast(_rms_fast)


