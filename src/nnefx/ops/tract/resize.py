"""tract's resize (``nnef/src/ops/core/resize.rs``; meaning in ``core/src/ops/nn/resize.rs``), which
torch-to-nnef writes for ``upsample_*`` / ``interpolate``.

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

from .._common import attr_error, guard_family, op_error
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
    data = x.astype(np.float32)
    for axis, (n, o, v) in enumerate(zip(x.shape, out_shape, s, strict=True)):
        if n == o and v == 1.0:
            continue
        matrix = np.zeros((o, n), np.float32)
        for p, row in enumerate(taps(n, o, v, coord_transformer, interpolator, nearest_mode, True)):
            for i, w in row:
                matrix[p, i] += w
        data = np.moveaxis(np.tensordot(matrix, np.moveaxis(data, axis, 0), axes=(1, 0)), 0, axis)
    return data.astype(x.dtype)


guard_family(FAMILY)
