"""ONNX GridSample (opsets 16-22, 2-D and N-D) as one operation.

Each output item reads the input at the location its grid entry names, in normalised
coordinates (-1 … 1 across the input, the grid's last axis listing them x first, i.e. the
innermost spatial axis first).  ``align_corners`` says whether -1 and 1 are the centres of
the corner items or their outer edges.  Locations outside the input are first brought back
by ``padding_mode`` (``border``: clamped to the edge items; ``reflection``: mirrored at the
edges), then interpolated with ``mode``:

* ``nearest`` — the item at the location rounded half to even;
* ``linear`` — separable linear weights on the two neighbours per axis;
* ``cubic`` — separable Keys cubic weights (a = -0.75) on the four neighbours per axis.

Neighbours outside the input read 0 (``zeros``), the edge item (``border``) or the mirrored
item (``reflection``).  NNEF's resampling operations read a regular lattice, not a
per-item location, so this is an extension operation.  (GridSample-16 spelled the modes
``bilinear`` and ``bicubic``; the reader passes them as ``linear`` and ``cubic``.)

AffineGrid (opset 20), which builds such a grid from an affine map, lives here too; its
``size`` input decides the grid's shape and is an attribute.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define

FAMILY = "onnx_sampling"
_MODES = ("linear", "nearest", "cubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75

onnx_grid_sample = define("onnx_grid_sample", FAMILY, """
fragment onnx_grid_sample(
    input: tensor<scalar>,
    grid: tensor<scalar>,
    mode: string = 'linear',
    padding_mode: string = 'zeros',
    align_corners: logical = false )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX GridSample: the input read at per-item normalised locations (nearest, "
                        "linear or cubic; zeros, border or reflection padding).")


@onnx_grid_sample.shape
def _grid_sample_shape(x, grid, mode="linear", padding_mode="zeros", align_corners=False):
    name = "onnx_grid_sample"
    if mode not in _MODES:
        raise attr_error(name, "mode", mode, "must be 'linear', 'nearest' or 'cubic'")
    if padding_mode not in _PADDINGS:
        raise attr_error(name, "padding_mode", padding_mode, "must be 'zeros', 'border' or 'reflection'")
    spatial = len(x) - 2
    if spatial < 1:
        raise op_error(name, f"the input needs shape [N, C, D1, ...], got {list(x)}")
    if len(grid) != len(x) or grid[-1] not in (spatial, None) or None not in (grid[0], x[0]) and grid[0] != x[0]:
        raise op_error(name, f"the grid needs shape [N, ..., {spatial}] of rank {len(x)} for input {list(x)}, "
                             f"got {list(grid)}")
    return (x[0], x[1], *grid[1:-1])


def _bounds(length: int, align_corners: bool) -> tuple[float, float]:
    return (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)


def _denormalize(v: float, length: int, align_corners: bool) -> float:
    return (v + 1) / 2 * (length - 1) if align_corners else ((v + 1) * length - 1) / 2


def _reflect(v: float, lo: float, hi: float) -> float:
    """``v`` mirrored at ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo
    if span <= 0:
        return lo
    if lo <= v <= hi:
        return v
    d = lo - v if v < lo else v - hi
    turns = int(d / span)
    rest = d - turns * span
    if v < lo:
        return lo + rest if turns % 2 == 0 else hi - rest
    return hi - rest if turns % 2 == 0 else lo + rest


def _cubic_weights(t: float) -> list[float]:
    a = _CUBIC_A

    def near(s):  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(v: float, mode: str) -> list[tuple[int, float]]:
    """(integer position, weight) of the neighbours interpolation ``mode`` reads at ``v``."""
    if mode == "nearest":
        return [(int(v), 1.0)]
    base = math.floor(v)
    t = v - base
    if mode == "linear":
        return [(base, 1 - t), (base + 1, t)]
    return list(zip(range(base - 1, base + 3), _cubic_weights(t), strict=True))


@onnx_grid_sample.formal
def _grid_sample_formal(x, grid, mode="linear", padding_mode="zeros", align_corners=False):
    x, grid = np.asarray(x), np.asarray(grid)
    _grid_sample_shape(x.shape, grid.shape, mode, padding_mode, align_corners)
    dims = x.shape[2:]
    out = np.zeros((x.shape[0], x.shape[1], *grid.shape[1:-1]), np.float64)
    for n in range(x.shape[0]):
        for where in np.ndindex(grid.shape[1:-1]):
            location = grid[(n, *where)][::-1].astype(np.float64)  # innermost axis first -> axis order
            per_axis = []
            for v, length in zip(location, dims, strict=True):
                p = _denormalize(float(v), length, align_corners)
                if mode == "nearest":
                    p = float(np.rint(p))
                lo, hi = _bounds(length, align_corners)
                if not lo <= p <= hi:
                    if padding_mode == "border":
                        p = min(max(p, 0.0), length - 1.0)
                    elif padding_mode == "reflection":
                        p = _reflect(p, lo, hi)
                taps = []
                for i, w in _taps(p, mode):
                    if padding_mode == "zeros":
                        taps.append((i, w) if 0 <= i < length else (None, w))
                    elif padding_mode == "border":
                        taps.append((min(max(i, 0), length - 1), w))
                    else:
                        taps.append((int(_reflect(float(i), lo, hi)), w))
                per_axis.append(taps)
            for c in range(x.shape[1]):
                total = 0.0
                for combo in itertools.product(*per_axis):
                    if any(i is None for i, _ in combo):
                        continue
                    weight = math.prod(w for _, w in combo)
                    total += weight * float(x[(n, c, *(i for i, _ in combo))])
                out[(n, c, *where)] = total
    return out.astype(x.dtype)


def _reflect_all(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    d = np.where(below, lo - v, np.where(above, v - hi, 0.0))
    turns = np.trunc(d / span)
    rest = d - turns * span
    even = turns % 2 == 0
    return np.where(below, np.where(even, lo + rest, hi - rest),
                    np.where(above, np.where(even, hi - rest, lo + rest), v))


@onnx_grid_sample.fast
def _grid_sample_fast(x, grid, mode="linear", padding_mode="zeros", align_corners=False):
    x, grid = np.asarray(x), np.asarray(grid)
    _grid_sample_shape(x.shape, grid.shape, mode, padding_mode, align_corners)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    dims = x.shape[2:]
    axis_taps = []  # per spatial axis: (indices [N, *out, T], weights [N, *out, T], valid)
    for k, length in enumerate(dims):
        v = grid[..., len(dims) - 1 - k].astype(acc)
        p = (v + 1) / 2 * (length - 1) if align_corners else ((v + 1) * length - 1) / 2
        if mode == "nearest":
            p = np.rint(p)
        lo, hi = _bounds(length, align_corners)
        if padding_mode == "border":
            p = np.clip(p, 0, length - 1)
        elif padding_mode == "reflection":
            p = _reflect_all(p, lo, hi)
        if mode == "nearest":
            idx, wts = np.trunc(p).astype(np.int64)[..., None], np.ones(p.shape + (1,), acc)
        else:
            base = np.floor(p)
            t = p - base
            if mode == "linear":
                idx, wts = base[..., None] + np.arange(2), np.stack([1 - t, t], axis=-1)
            else:
                a = _CUBIC_A
                s = np.stack([t + 1, t, 1 - t, 2 - t], axis=-1)
                near = ((a + 2) * s - (a + 3)) * s * s + 1
                far = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
                wts = np.where(np.arange(4) % 3 == 0, far, near)
                idx = base[..., None] + np.arange(-1, 3)
            idx = idx.astype(np.int64)
        valid = np.ones(idx.shape, bool)
        if padding_mode == "zeros":
            valid = (idx >= 0) & (idx < length)
            idx = np.clip(idx, 0, length - 1)
        elif padding_mode == "border":
            idx = np.clip(idx, 0, length - 1)
        else:
            idx = np.trunc(_reflect_all(idx.astype(np.float64), lo, hi)).astype(np.int64)
        axis_taps.append((idx, wts.astype(acc), valid))
    n_index = np.arange(x.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    out = np.zeros((x.shape[0], *grid.shape[1:-1], x.shape[1]), acc)
    for combo in itertools.product(*(range(t[0].shape[-1]) for t in axis_taps)):
        weight = np.ones(grid.shape[:-1], acc)
        where = []
        for (idx, wts, valid), j in zip(axis_taps, combo, strict=True):
            weight = weight * wts[..., j] * valid[..., j]
            where.append(idx[..., j])
        values = x.transpose(0, *range(2, x.ndim), 1)[(n_index, *where)]  # [N, *out, C]
        out += values.astype(acc) * weight[..., None]
    return np.moveaxis(out, -1, 1).astype(x.dtype)


# --- AffineGrid -------------------------------------------------------------------------------

onnx_affine_grid = define("onnx_affine_grid", FAMILY, """
fragment onnx_affine_grid( theta: tensor<scalar>, size: integer[], align_corners: logical = false )
-> ( grid: tensor<scalar> );
""", domain="onnx", doc="ONNX AffineGrid: the GridSample grid of an affine map theta ([N, 2, 3] or [N, 3, 4]) "
                        "over an output of `size` ([N, C, H, W] or [N, C, D, H, W]).")


@onnx_affine_grid.shape
def _affine_grid_shape(theta, size, align_corners=False):
    name = "onnx_affine_grid"
    if len(size) not in (4, 5) or min(size) <= 0:
        raise op_error(name, f"size must be [N, C, H, W] or [N, C, D, H, W] of positive extents, got {list(size)}")
    k = len(size) - 2
    if len(theta) != 3 or theta[1:] not in ((k, k + 1), (None, None)) or theta[0] not in (size[0], None):
        raise op_error(name, f"theta must be [{size[0]}, {k}, {k + 1}] for size {list(size)}, got {list(theta)}")
    return (size[0], *size[2:], k)


def _base(index: int, length: int, align_corners: bool) -> float:
    """The normalised coordinate of item ``index`` of ``length`` (GridSample's convention)."""
    if align_corners:
        return -1.0 if length == 1 else -1.0 + 2.0 * index / (length - 1)
    return -1.0 + (2.0 * index + 1.0) / length


@onnx_affine_grid.formal
def _affine_grid_formal(theta, size, align_corners=False):
    theta = np.asarray(theta)
    _affine_grid_shape(theta.shape, size, align_corners)
    spatial = list(size[2:])
    k = len(spatial)
    out = np.zeros((size[0], *spatial, k), np.float64)
    for n in range(size[0]):
        for where in np.ndindex(*spatial):
            # homogeneous (x, y[, z], 1): x runs along the innermost axis
            point = [_base(where[k - 1 - d], spatial[k - 1 - d], align_corners) for d in range(k)] + [1.0]
            for d in range(k):
                out[(n, *where, d)] = sum(float(theta[n, d, j]) * point[j] for j in range(k + 1))
    return out.astype(theta.dtype)


@onnx_affine_grid.fast
def _affine_grid_fast(theta, size, align_corners=False):
    theta = np.asarray(theta)
    _affine_grid_shape(theta.shape, size, align_corners)
    spatial = list(size[2:])
    k = len(spatial)
    axes = [np.array([_base(i, n, align_corners) for i in range(n)]) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial axis, outermost first
    points = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1).reshape(-1, k + 1)  # x first
    acc = np.float64 if theta.dtype == np.float64 else np.float32
    grid = np.einsum("nij,pj->npi", theta.astype(acc), points.astype(acc))
    return grid.reshape(size[0], *spatial, k).astype(theta.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
