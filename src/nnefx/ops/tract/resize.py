"""tract's resampling: resize (``nnef/src/ops/core/resize.rs``; meaning in ``core/src/ops/nn/resize.rs``),
which torch-to-nnef writes for ``upsample_*`` / ``interpolate``, and grid_sample (``grid_sample.rs``,
``core/src/ops/nn/grid_sample.rs``) for torch's ``grid_sample``.

The output extents come from ``scales`` (one float per axis: ``floor(extent * scale)``) or from
``sizes``; each axis is then resampled in turn.  Output position x maps to the input coordinate
``c = coord_transformer(x)``; with ``cell = ceil(c) - 1`` and ``r = c - cell`` the taps are input
positions ``cell + 1 - window/2 .. cell + window/2`` (clamped to the axis), weighted

* ``nearest`` (window 2): all on ``cell + 1`` when ``r == 1`` or (``round_prefer_ceil`` and
  ``r >= 1/2``), else all on ``cell``;
* ``linear`` (window 2): ``1 - r`` and ``r``;
* ``cubic`` (window 4): Keys' kernel with a = -0.75 at distances ``k - 1 - r``.

tract resamples in f32 and casts back to the input's type; so do the kernels (the formal one
evaluates the taps in float64).
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error, float_type, guard_family, op_error
from ..registry import define
from ._util import DOMAIN

FAMILY = "tract_resize"

COORD_TRANSFORMERS = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric",
                      "tf_half_pixel_for_nn")
INTERPOLATORS = ("nearest", "linear", "cubic")
NEAREST_MODES = ("floor", "round_prefer_ceil")

resize = define("tract_core_resize", FAMILY, """
fragment tract_core_resize( input: tensor<scalar>, scales: tensor<scalar> = 0.0, sizes: tensor<scalar> = 0.0,
                            coord_transformer: string = 'half_pixel', interpolator: string = 'nearest',
                            nearest_mode: string = 'floor' ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_core_resize( input: tensor<scalar>, scales: tensor<scalar> = false, "
                                 "sizes: tensor<scalar> = false, coord_transformer: string = \"half_pixel\", "
                                 "interpolator: string = \"nearest\", nearest_mode: string = \"floor\" ) -> "
                                 "( output: tensor<scalar> );",
    doc="Resample input to new extents given by scales or sizes (exactly one of them; ops::nn::Resize), see "
        "the module text for the taps.  tract's defaults for scales and sizes are 'false' (absent); NNEF "
        "1.0.5 wants a number for a tensor default, so here a rank-0 value (the default 0.0) means absent.")


def _check_modes(coord_transformer, interpolator, nearest_mode) -> None:
    op = "tract_core_resize"
    for name, value, allowed in (("coord_transformer", coord_transformer, COORD_TRANSFORMERS),
                                 ("interpolator", interpolator, INTERPOLATORS),
                                 ("nearest_mode", nearest_mode, NEAREST_MODES)):
        if value not in allowed:
            raise attr_error(op, name, value, f"is not one of {', '.join(allowed)}")


@resize.shape
def _resize_shape(x, scales=(), sizes=(), coord_transformer="half_pixel", interpolator="nearest",
                  nearest_mode="floor"):
    _check_modes(coord_transformer, interpolator, nearest_mode)
    given = [s for s in (scales, sizes) if len(s)]
    if len(given) != 1:
        raise op_error("tract_core_resize", "needs exactly one of scales and sizes (a 1-D tensor)")
    if len(given[0]) != 1 or given[0][0] not in (len(x), None):
        raise op_error("tract_core_resize", f"scales or sizes must hold one value per axis ({len(x)})")
    return (None,) * len(x)  # the extents are values of scales / sizes, known when the model runs


def _output_shape(x: np.ndarray, scales: np.ndarray, sizes: np.ndarray) -> tuple[list[int], list[float]]:
    if scales.ndim:
        s = [float(v) for v in scales.astype(np.float32)]
        out = [int(np.float32(n) * np.float32(v)) for n, v in zip(x.shape, s, strict=True)]
    else:
        out = [int(v) for v in sizes.reshape(-1)]
        s = [float(np.float32(o) / np.float32(n)) for o, n in zip(out, x.shape, strict=True)]
    if any(o < 0 for o in out):
        raise op_error("tract_core_resize", f"negative output extent {out}")
    return out, s


def _coordinate(mode: str, x: int, scale: float, n_in: int, n_out: int) -> float:
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "align_corners":
        width = scale * n_in
        return 0.0 if width == 1.0 else x * (n_in - 1.0) / (width - 1.0)
    if mode == "asymmetric":
        return x / scale
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else -0.5
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        return n_in / 2.0 * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
    return (x + 0.5) / scale  # tf_half_pixel_for_nn


def _cubic(s: float, a: float = -0.75) -> float:
    s = abs(s)
    if s <= 1.0:
        return (a + 2.0) * s ** 3 - (a + 3.0) * s ** 2 + 1.0
    if s <= 2.0:
        return a * s ** 3 - 5.0 * a * s ** 2 + 8.0 * a * s - 4.0 * a
    return 0.0


def taps(n_in: int, n_out: int, scale: float, coord: str, interpolator: str, nearest: str, f32: bool):
    """Per output position, the (input index, weight) pairs (the plan of one axis)."""
    cast = (lambda v: float(np.float32(v))) if f32 else float
    window = 4 if interpolator == "cubic" else 2
    plan = []
    for x in range(n_out):
        c = cast(_coordinate(coord, x, cast(scale), n_in, n_out))
        cell = math.ceil(c) - 1.0
        r = cast(c - cell)
        if interpolator == "nearest":
            right = r == 1.0 or (nearest == "round_prefer_ceil" and r >= 0.5)
            weights = [0.0, 1.0] if right else [1.0, 0.0]
        elif interpolator == "linear":
            weights = [max(0.0, min(1.0, 1.0 - abs(k - r))) for k in range(2)]
        else:
            weights = [_cubic(k - 1.0 - r) for k in range(4)]
        first = int(cell) + 1 - window // 2
        plan.append([(min(max(first + k, 0), n_in - 1), w) for k, w in enumerate(weights)])
    return plan


def _args(x, scales, sizes, coord_transformer, interpolator, nearest_mode):
    x = np.asarray(x)
    _resize_shape(x.shape, np.shape(scales), np.shape(sizes), coord_transformer, interpolator, nearest_mode)
    return x, _output_shape(x, np.asarray(scales), np.asarray(sizes))


@resize.formal
def _resize_formal(x, scales=0.0, sizes=0.0, coord_transformer="half_pixel", interpolator="nearest",
                   nearest_mode="floor"):
    x, (out_shape, s) = _args(x, scales, sizes, coord_transformer, interpolator, nearest_mode)
    plans = [None if (n == o and v == 1.0) else taps(n, o, v, coord_transformer, interpolator, nearest_mode, False)
             for n, o, v in zip(x.shape, out_shape, s, strict=True)]
    out = np.empty(out_shape, x.dtype)
    for pos in np.ndindex(*out_shape):
        # out[pos] = sum over tap combinations of the product of weights * x[source]
        terms = [(1.0, ())]
        for axis, p in enumerate(pos):
            if plans[axis] is None:
                terms = [(w, src + (p,)) for w, src in terms]
            else:
                terms = [(w * tw, src + (i,)) for w, src in terms for i, tw in plans[axis][p] if tw != 0.0]
        out[pos] = math.fsum(w * float(x[src]) for w, src in terms)
    return out


@resize.fast
def _resize_fast(x, scales=0.0, sizes=0.0, coord_transformer="half_pixel", interpolator="nearest",
                 nearest_mode="floor"):
    x, (out_shape, s) = _args(x, scales, sizes, coord_transformer, interpolator, nearest_mode)
    data = x.astype(float_type())
    for axis, (n, o, v) in enumerate(zip(x.shape, out_shape, s, strict=True)):
        if n == o and v == 1.0:
            continue
        matrix = np.zeros((o, n), float_type())
        for p, row in enumerate(taps(n, o, v, coord_transformer, interpolator, nearest_mode, True)):
            for i, w in row:
                matrix[p, i] += w
        data = np.moveaxis(np.tensordot(matrix, np.moveaxis(data, axis, 0), axes=(1, 0)), 0, axis)
    return data.astype(x.dtype)


# --- grid_sample -------------------------------------------------------------------------------------------

grid_sample = define("tract_core_grid_sample", FAMILY, """
fragment tract_core_grid_sample( input: tensor<scalar>, grid: tensor<scalar>, mode: string = 'bilinear',
                                 padding_mode: string = 'zeros', align_corners: logical = false )
    -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="out[b, c, p..] samples input[b, c] at the point grid[b, p.., :] (normalised to "
                        "[-1, 1], last item the innermost axis), as torch's grid_sample: bilinear (2^n corners), "
                        "nearest (ties to even) or bicubic (2-D, Keys a = -0.75); outside points read zeros, "
                        "the border, or the reflection (ops::nn::GridSample).  A point outside is first moved inside "
                        "(clamped or reflected), then each tap reads with the padding rule: for bicubic with "
                        "border or reflection padding this is tract's result, not torch's (which pads each tap).")

GRID_MODES = ("bilinear", "nearest", "bicubic")
GRID_PADDINGS = ("zeros", "border", "reflection")


@grid_sample.shape
def _grid_shape(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    op = "tract_core_grid_sample"
    if mode not in GRID_MODES:
        raise attr_error(op, "mode", mode, f"is not one of {', '.join(GRID_MODES)}")
    if padding_mode not in GRID_PADDINGS:
        raise attr_error(op, "padding_mode", padding_mode, f"is not one of {', '.join(GRID_PADDINGS)}")
    n = len(x) - 2
    if n < 1 or len(grid) != len(x) or grid[-1] not in (n, None) or \
            (x[0] is not None and grid[0] not in (x[0], None)):
        raise op_error(op, f"input {list(x)} needs a grid [N, spatial.., {max(n, 1)}], got {list(grid)}")
    if mode == "bicubic" and n != 2:
        raise attr_error(op, "mode", mode, "needs 2 spatial axes")
    return tuple(x[:2]) + tuple(grid[1:-1])


def _reflect(c: float, lo: float, hi: float) -> float:
    span = hi - lo
    if span == 0.0:
        return lo
    if c < lo:
        d = lo - c
        k = int(d / span)
        r = d - k * span
        return lo + r if k % 2 == 0 else hi - r
    if c > hi:
        d = c - hi
        k = int(d / span)
        r = d - k * span
        return hi - r if k % 2 == 0 else lo + r
    return c


def _grid_cubic(t: float) -> list[float]:
    a = -0.75
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


class _Sampler:
    """The per-point definition (tract's ``GridSample::sample_nd``), in float64."""

    def __init__(self, x: np.ndarray, mode: str, padding: str, align: bool):
        self.x, self.mode, self.padding, self.align = x, mode, padding, align
        self.sizes = x.shape[2:]
        self.bounds = [(0.0, s - 1.0) if align else (-0.5, s - 0.5) for s in self.sizes]

    def denormalize(self, g: float, size: int) -> float:
        return (g + 1.0) / 2.0 * (size - 1.0) if self.align else ((g + 1.0) * size - 1.0) / 2.0

    def pad(self, c: float, lo: float, hi: float) -> float:
        if self.padding == "border":
            return min(max(c, 0.0), hi + lo)
        return _reflect(c, lo, hi) if self.padding == "reflection" else c

    def pixel(self, b: int, ch: int, idx) -> float:
        out = []
        for c, s, (lo, hi) in zip(idx, self.sizes, self.bounds, strict=True):
            if self.padding == "zeros" and not 0 <= c < s:
                return 0.0
            if self.padding == "border":
                c = min(max(c, 0), s - 1)
            elif self.padding == "reflection":
                c = int(_reflect(float(c), lo, hi))
            out.append(int(c))
        return float(self.x[(b, ch) + tuple(out)])

    def sample(self, b: int, ch: int, coords: list[float]) -> float:
        oob = any(c < lo or c > hi for c, (lo, hi) in zip(coords, self.bounds, strict=True))
        if self.mode == "nearest":
            coords = [float(round(c)) for c in coords]  # Python rounds ties to even
            oob = any(c < lo or c > hi for c, (lo, hi) in zip(coords, self.bounds, strict=True))
        if oob:
            coords = [self.pad(c, lo, hi) for c, (lo, hi) in zip(coords, self.bounds, strict=True)]
        if self.mode == "nearest":
            return self.pixel(b, ch, [int(c) for c in coords])
        if self.mode == "bilinear":
            total = 0.0
            for corner in range(1 << len(coords)):
                w, idx = 1.0, []
                for d, c in enumerate(coords):
                    lo = math.floor(c)
                    up = (corner >> d) & 1
                    idx.append(lo + up)
                    w *= (c - lo) if up else (lo + 1 - c)
                total += w * self.pixel(b, ch, idx)
            return total
        r0, c0 = math.floor(coords[0]) - 1, math.floor(coords[1]) - 1
        wr, wc = _grid_cubic(coords[0] - r0 - 1), _grid_cubic(coords[1] - c0 - 1)
        return math.fsum(wr[i] * wc[j] * self.pixel(b, ch, [r0 + i, c0 + j]) for i in range(4) for j in range(4))


def _grid_args(x, grid, mode, padding_mode, align_corners):
    x, grid = np.asarray(x), np.asarray(grid)
    shape = _grid_shape(x.shape, grid.shape, mode, padding_mode, align_corners)
    return x, grid, shape


@grid_sample.formal
def _grid_formal(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    x, grid, shape = _grid_args(x, grid, mode, padding_mode, align_corners)
    s = _Sampler(x, mode, padding_mode, bool(align_corners))
    n = x.ndim - 2
    out = np.empty(shape, x.dtype)
    for pos in np.ndindex(*shape):
        b, ch, p = pos[0], pos[1], pos[2:]
        g = grid[(b,) + p]
        coords = [s.denormalize(float(g[n - 1 - d]), x.shape[2 + d]) for d in range(n)]  # grid's last = innermost
        out[pos] = s.sample(b, ch, coords)
    return out


def _vec_reflect(c: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span == 0.0:
        return np.full_like(c, lo)
    below, above = c < lo, c > hi
    d = np.where(below, lo - c, np.where(above, c - hi, 0.0))
    k = np.trunc(d / span)
    r = d - k * span
    even = (k % 2) == 0
    return np.where(below, np.where(even, lo + r, hi - r), np.where(above, np.where(even, hi - r, lo + r), c))


@grid_sample.fast
def _grid_fast(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    x, grid, shape = _grid_args(x, grid, mode, padding_mode, align_corners)
    n, align = x.ndim - 2, bool(align_corners)
    sizes = x.shape[2:]
    bounds = [(0.0, s - 1.0) if align else (-0.5, s - 0.5) for s in sizes]
    g = grid.astype(np.float64)
    coords = [((g[..., n - 1 - d] + 1.0) / 2.0 * (sizes[d] - 1.0)) if align
              else (((g[..., n - 1 - d] + 1.0) * sizes[d] - 1.0) / 2.0) for d in range(n)]
    if mode == "nearest":
        coords = [np.rint(c) for c in coords]
    oob = np.zeros(coords[0].shape, bool)
    for c, (lo, hi) in zip(coords, bounds, strict=True):
        oob |= (c < lo) | (c > hi)
    for d, (lo, hi) in enumerate(bounds):  # padding applies to points outside in any axis
        if padding_mode == "border":
            coords[d] = np.where(oob, np.clip(coords[d], 0.0, hi + lo), coords[d])
        elif padding_mode == "reflection":
            coords[d] = np.where(oob, _vec_reflect(coords[d], lo, hi), coords[d])
    bidx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (coords[0].ndim - 1))
    xs = x.astype(np.float64)

    def read(idx):  # [B, spatial..] index arrays -> [B, C, spatial..] values with the padding rule
        ok = np.ones(idx[0].shape, bool)
        fixed = []
        for i, s, (lo, hi) in zip(idx, sizes, bounds, strict=True):
            if padding_mode == "zeros":
                ok &= (i >= 0) & (i < s)
                i = np.clip(i, 0, s - 1)
            elif padding_mode == "border":
                i = np.clip(i, 0, s - 1)
            else:
                i = _vec_reflect(i.astype(np.float64), lo, hi).astype(np.int64)
            fixed.append(i)
        vals = np.moveaxis(xs, 1, -1)[(bidx,) + tuple(fixed)]  # [B, spatial.., C]
        return np.moveaxis(np.where(ok[..., None], vals, 0.0), -1, 1)

    if mode == "nearest":
        out = read([c.astype(np.int64) for c in coords])
    elif mode == "bilinear":
        out = 0.0
        floors = [np.floor(c) for c in coords]
        for corner in range(1 << n):
            w = np.ones(coords[0].shape)
            idx = []
            for d, (c, f) in enumerate(zip(coords, floors, strict=True)):
                up = (corner >> d) & 1
                idx.append((f + up).astype(np.int64))
                w = w * ((c - f) if up else (f + 1 - c))
            out = out + w[:, None] * read(idx)
    else:
        r0, c0 = np.floor(coords[0]) - 1, np.floor(coords[1]) - 1
        tr, tc = coords[0] - r0 - 1, coords[1] - c0 - 1
        wr, wc = _grid_cubic(tr), _grid_cubic(tc)
        out = 0.0
        for i in range(4):
            for j in range(4):
                out = out + (wr[i] * wc[j])[:, None] * read([(r0 + i).astype(np.int64), (c0 + j).astype(np.int64)])
    return np.asarray(out).astype(x.dtype)


guard_family(FAMILY)
