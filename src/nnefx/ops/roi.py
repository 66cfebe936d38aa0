"""Region-of-interest operations (NNEF 1.0.5 §4.6).

``rois`` is (N, 2M) for M spatial dimensions (2-D rows ``(y0, x0, y1, x1)``); ``batch_index``
holds one batch item per RoI, as (N,) or (N, 1).
"""

from __future__ import annotations

from .registry import define

_ROI = """input: tensor<scalar>,
    rois: tensor<scalar>,
    batch_index: tensor<integer>,
    output_size: integer[]"""

avg_roi_pool = define("avg_roi_pool", "roi", f"""
fragment avg_roi_pool(
    {_ROI} )
-> ( output: tensor<scalar> );
""")

max_roi_pool = define("max_roi_pool", "roi", f"""
fragment max_roi_pool(
    {_ROI} )
-> ( output: tensor<scalar> );
""")

roi_resample = define("roi_resample", "roi", f"""
fragment roi_resample(
    {_ROI},
    method: string = 'symmetric' )
-> ( output: tensor<scalar> );
""")

# The spec's bodies pool with M-long ``size``/``stride`` arrays although pools require one
# entry per dimension; we prepend the batch and channel entries so the literal expansion
# passes the pool's own validity check (the evident intent).
avg_roi_align = define("avg_roi_align", "roi", f"""
fragment avg_roi_align(
    {_ROI},
    sampling_rate: integer[],
    resize_method: string = 'symmetric' )
-> ( output: tensor<scalar> )
{{
    size = [for i in range_of(output_size) yield output_size[i] * sampling_rate[i]];
    resized = roi_resample(input, rois, batch_index, output_size = size, method = resize_method);
    output = avg_pool(resized, size = [1,1] + sampling_rate, stride = [1,1] + sampling_rate);
}}
""", compound=True)

max_roi_align = define("max_roi_align", "roi", f"""
fragment max_roi_align(
    {_ROI},
    sampling_rate: integer[],
    resize_method: string = 'symmetric' )
-> ( output: tensor<scalar> )
{{
    size = [for i in range_of(output_size) yield output_size[i] * sampling_rate[i]];
    resized = roi_resample(input, rois, batch_index, output_size = size, method = resize_method);
    output = max_pool(resized, size = [1,1] + sampling_rate, stride = [1,1] + sampling_rate);
}}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# RoI pooling (spec §4.6): RoI coordinates are rounded (round = floor(x + 0.5)); extent
# r = end - start per spatial dimension; p cells of size c = ceil(r / p) placed every
# s = floor(r / p) from the start; a cell averages (avg) or maximises (max) the input over its
# c positions per dimension, reading outside the input as 0 (the pools' default 'constant'
# border: the zeros take part); an empty RoI (r <= 0) gives 0.  The spec prints the cell
# start as "c + i*s", evidently meaning "start + i*s".
#
# ``roi_resample`` samples the RoI [start, end) (real coordinates, not rounded) of extent r
# at o output positions with the multilinear methods of ``multilinear_upsample``:
#   'symmetric':  start + (i + 0.5) * r / o - 0.5
#   'asymmetric': start + i * r / o
#   'aligned':    start + i * (r - 1) / (o - 1)   (start when o = 1)
# then interpolates linearly between the two neighbouring input elements, clamping indices
# into the input (replicate).  Over the whole input with o = x*f this is exactly
# ``multilinear_upsample``'s sampling.  The spec leaves the convention open beyond this.

import itertools  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import attr_error, float_type, op_error, scalar  # noqa: E402
from .resize import UPSAMPLE_METHODS  # noqa: E402
from .sliding import avg_pool, max_pool  # noqa: E402


def _roi_check(op, input, rois, batch_index, output_size):
    input, rois, batch_index = tuple(input), tuple(rois), tuple(batch_index)
    if len(input) < 3:
        raise op_error(op, f"input must have rank >= 3 (batch, channel, spatial...), got {input}")
    m = len(input) - 2
    if len(rois) != 2 or rois[1] not in (2 * m, None):
        raise op_error(op, f"rois must have shape (N, {2 * m}), got {rois}")
    if len(batch_index) not in (1, 2) or (len(batch_index) == 2 and batch_index[1] not in (1, None)):
        raise op_error(op, f"batch_index must have shape (N,) or (N, 1), got {batch_index}")
    if None not in (batch_index[0], rois[0]) and batch_index[0] != rois[0]:
        raise op_error(op, f"batch_index has {batch_index[0]} items for {rois[0]} RoIs")
    output_size = list(output_size)
    if len(output_size) != m or any(not isinstance(o, (int, np.integer)) or o < 1 for o in output_size):
        raise attr_error(op, "output_size", output_size, f"must have {m} items > 0")
    return (rois[0], input[1]) + tuple(output_size)


def _roi_shape(op):
    def rule(input, rois, batch_index, output_size=(), method="symmetric", **_):
        if method not in UPSAMPLE_METHODS:
            raise attr_error(op, "method", method, "is not one of " + ", ".join(map(repr, UPSAMPLE_METHODS)))
        return _roi_check(op, input, rois, batch_index, output_size)
    return rule


avg_roi_pool.shape(_roi_shape("avg_roi_pool"))
max_roi_pool.shape(_roi_shape("max_roi_pool"))
roi_resample.shape(_roi_shape("roi_resample"))


def _align_shape(op):
    def rule(input, rois, batch_index, output_size=(), sampling_rate=(), resize_method="symmetric"):
        out = _roi_shape(op)(input, rois, batch_index, output_size, resize_method)
        rate = list(sampling_rate)
        if len(rate) != len(output_size) or any(not isinstance(s, (int, np.integer)) or s < 1 for s in rate):
            raise attr_error(op, "sampling_rate", rate, f"must have {len(list(output_size))} items > 0")
        return out
    return rule


avg_roi_align.shape(_align_shape("avg_roi_align"))
max_roi_align.shape(_align_shape("max_roi_align"))


def _roi_data(op, input, rois, batch_index, output_size):
    x, boxes = scalar(input), scalar(rois)
    bidx = np.asarray(batch_index, np.int64).reshape(-1)
    _roi_check(op, x.shape, boxes.shape, np.shape(batch_index), output_size)
    if bidx.size and (bidx.min() < 0 or bidx.max() >= x.shape[0]):
        raise op_error(op, f"batch_index holds {int(bidx[(bidx < 0) | (bidx >= x.shape[0])][0])}, "
                           f"outside [0, {x.shape[0]})")
    if not np.all(np.isfinite(boxes)):
        raise op_error(op, "rois hold a non-finite coordinate")
    return x, boxes, bidx


def _rounded(v):
    return int(math.floor(float(v) + 0.5))


def _cells(start, end, p):
    """Start positions and size of the p cells of a rounded RoI extent."""
    r = end - start
    if r <= 0:
        return None, 0
    return [start + i * (r // p) for i in range(p)], -(-r // p)


def _roi_pool_formal(op, reduce_max):
    def kernel(input, rois, batch_index, output_size=()):
        x, boxes, bidx = _roi_data(op, input, rois, batch_index, output_size)
        m = x.ndim - 2
        out = np.zeros((boxes.shape[0], x.shape[1]) + tuple(output_size), float_type())
        for n in range(boxes.shape[0]):
            starts = [_rounded(boxes[n, k]) for k in range(m)]
            ends = [_rounded(boxes[n, m + k]) for k in range(m)]
            cells = [_cells(starts[k], ends[k], output_size[k]) for k in range(m)]
            if any(c[0] is None for c in cells):
                continue
            for ch in range(x.shape[1]):
                for cell in np.ndindex(*output_size):
                    values = []
                    for offs in itertools.product(*(range(cells[k][1]) for k in range(m))):
                        pos = [cells[k][0][cell[k]] + offs[k] for k in range(m)]
                        inside = all(0 <= pos[k] < x.shape[k + 2] for k in range(m))
                        values.append(float(x[(bidx[n], ch) + tuple(pos)]) if inside else 0.0)
                    out[(n, ch) + cell] = max(values) if reduce_max else sum(values) / len(values)
        return out
    return kernel


def _roi_pool_fast(op, reduce_max):
    def kernel(input, rois, batch_index, output_size=()):
        x, boxes, bidx = _roi_data(op, input, rois, batch_index, output_size)
        m = x.ndim - 2
        out = np.zeros((boxes.shape[0], x.shape[1]) + tuple(output_size), float_type())
        for n in range(boxes.shape[0]):  # one vectorised gather per RoI
            starts = [_rounded(boxes[n, k]) for k in range(m)]
            ends = [_rounded(boxes[n, m + k]) for k in range(m)]
            cells = [_cells(starts[k], ends[k], output_size[k]) for k in range(m)]
            if any(c[0] is None for c in cells):
                continue
            idx, valid = [], []
            for k in range(m):
                pos = np.add.outer(np.asarray(cells[k][0]), np.arange(cells[k][1]))  # (p, c)
                valid.append((pos >= 0) & (pos < x.shape[k + 2]))
                idx.append(np.clip(pos, 0, x.shape[k + 2] - 1))
            # grid of shape (p1, c1, p2, c2, ...)
            grids = np.ix_(*[a.reshape(-1) for a in idx])
            vals = x[bidx[n]][(slice(None),) + grids].astype(np.float64)
            mask = np.ones((1,) * m, np.bool_)
            for k in range(m):
                mask = mask[..., None] * valid[k].reshape(-1)
            shape = [x.shape[1]]
            for k in range(m):
                shape += [output_size[k], cells[k][1]]
            vals = np.where(mask, vals, 0.0).reshape(shape)
            axes = tuple(2 + 2 * k for k in range(m))
            out[n] = vals.max(axis=axes) if reduce_max else vals.mean(axis=axes)
        return out
    return kernel


avg_roi_pool.formal(_roi_pool_formal("avg_roi_pool", False))
max_roi_pool.formal(_roi_pool_formal("max_roi_pool", True))
avg_roi_pool.fast(_roi_pool_fast("avg_roi_pool", False))
max_roi_pool.fast(_roi_pool_fast("max_roi_pool", True))


def resample_taps(start: float, end: float, o: int, method: str) -> list[float]:
    """Sampling coordinates of ``o`` outputs over the RoI [start, end)."""
    r = end - start
    if method == "symmetric":
        return [start + (i + 0.5) * r / o - 0.5 for i in range(o)]
    if method == "asymmetric":
        return [start + i * r / o for i in range(o)]
    if o == 1:
        return [start]
    return [start + i * (r - 1) / (o - 1) for i in range(o)]


def _clamp(j, x):
    return min(max(j, 0), x - 1)


@roi_resample.formal
def _roi_resample_formal(input, rois, batch_index, output_size=(), method="symmetric"):
    x, boxes, bidx = _roi_data("roi_resample", input, rois, batch_index, output_size)
    _roi_shape("roi_resample")(x.shape, boxes.shape, np.shape(batch_index), output_size, method)
    m = x.ndim - 2
    out = np.zeros((boxes.shape[0], x.shape[1]) + tuple(output_size), float_type())
    for n in range(boxes.shape[0]):
        coords = [resample_taps(float(boxes[n, k]), float(boxes[n, m + k]), output_size[k], method) for k in range(m)]
        for ch in range(x.shape[1]):
            for cell in np.ndindex(*output_size):
                acc = 0.0
                for corner in itertools.product((0, 1), repeat=m):
                    weight, pos = 1.0, []
                    for k in range(m):
                        c = coords[k][cell[k]]
                        j = math.floor(c)
                        u = c - j
                        weight *= u if corner[k] else 1.0 - u
                        pos.append(_clamp(j + corner[k], x.shape[k + 2]))
                    if weight:
                        acc += weight * float(x[(bidx[n], ch) + tuple(pos)])
                out[(n, ch) + cell] = acc
    return out


@roi_resample.fast
def _roi_resample_fast(input, rois, batch_index, output_size=(), method="symmetric"):
    x, boxes, bidx = _roi_data("roi_resample", input, rois, batch_index, output_size)
    _roi_shape("roi_resample")(x.shape, boxes.shape, np.shape(batch_index), output_size, method)
    m = x.ndim - 2
    out = np.zeros((boxes.shape[0], x.shape[1]) + tuple(output_size), float_type())
    for n in range(boxes.shape[0]):  # separable interpolation, one axis at a time
        y = x[bidx[n]].astype(np.float64)
        for k in range(m):
            c = np.asarray(resample_taps(float(boxes[n, k]), float(boxes[n, m + k]), output_size[k], method))
            j = np.floor(c).astype(np.int64)
            u = c - j
            lo = np.take(y, np.clip(j, 0, x.shape[k + 2] - 1), axis=k + 1)
            hi = np.take(y, np.clip(j + 1, 0, x.shape[k + 2] - 1), axis=k + 1)
            shape = [1] * y.ndim
            shape[k + 1] = len(c)
            uu = u.reshape(shape)
            y = (1.0 - uu) * lo + uu * hi
        out[n] = y
    return out


def _align(op, pool, resample):
    def kernel(input, rois, batch_index, output_size=(), sampling_rate=(), resize_method="symmetric"):
        _align_shape(op)(np.shape(input), np.shape(rois), np.shape(batch_index), output_size, sampling_rate,
                         resize_method)
        size = [o * s for o, s in zip(output_size, sampling_rate, strict=True)]
        resized = resample(input, rois, batch_index, output_size=size, method=resize_method)
        window = [1, 1] + list(sampling_rate)
        return pool(resized, size=window, stride=window)
    return kernel


avg_roi_align.fast(_align("avg_roi_align", lambda *a, **k: avg_pool.fast_kernel(*a, **k), _roi_resample_fast))
max_roi_align.fast(_align("max_roi_align", lambda *a, **k: max_pool.fast_kernel(*a, **k), _roi_resample_fast))
