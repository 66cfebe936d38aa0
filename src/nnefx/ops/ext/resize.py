"""Interpolation with the coordinate transforms of the ONNX/OpenVINO resize operators, and adaptive pooling.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define

# --- Interpolate ----------------------------------------------------------------------------------

interpolate_op = define("interpolate", "ext", """
fragment interpolate( input: tensor<scalar>, axes: integer[], sizes: integer[], scales: scalar[],
                         mode: string = 'nearest', coordinate_transformation_mode: string = 'half_pixel',
                         nearest_mode: string = 'round_prefer_floor', cubic_coeff_a: scalar = -0.75 )
    -> ( output: tensor<scalar> );
""", domain="nnefx", doc="IR Interpolate (v4/v11): nearest, linear_onnx and cubic resizing of the given axes.")

INTERP_MODES = ("nearest", "linear_onnx", "cubic")
COORD_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


@interpolate_op.shape
def _interp_shape(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                  nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    if mode not in INTERP_MODES or coordinate_transformation_mode not in COORD_MODES or \
            nearest_mode not in NEAREST_MODES:
        raise NNEFXError(f"interpolate: unsupported mode {mode}/{coordinate_transformation_mode}/{nearest_mode}")
    if not (len(axes) == len(sizes) == len(scales)):
        raise NNEFXError("interpolate: axes, sizes and scales must have the same length")
    s = list(x)
    for a, n in zip(axes, sizes, strict=True):
        if not 0 <= a < len(s) or n < 1:
            raise NNEFXError(f"interpolate: bad axis {a} or size {n}")
        s[a] = n
    return tuple(s)


def _source_coordinate(i: np.ndarray, scale: float, n_in: int, n_out: int, mode: str) -> np.ndarray:
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    return i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(i)  # align_corners


def _nearest_index(c: np.ndarray, mode: str, downsample: bool) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(c - np.floor(c) == 0.5, np.floor(c), np.round(c))
    if mode == "round_prefer_ceil":
        return np.where(c - np.floor(c) == 0.5, np.ceil(c), np.round(c))
    if mode == "floor":
        return np.floor(c)
    if mode == "ceil":
        return np.ceil(c)
    return np.ceil(c) if downsample else np.trunc(c)  # simple


def interpolation_taps(n_in: int, n_out: int, scale: float, mode: str, coord: str, nearest: str,
                       a: float) -> tuple[np.ndarray, np.ndarray]:
    """Per output position: source indices [n_out, taps] and weights [n_out, taps]."""
    i = np.arange(n_out, dtype=np.float64)
    c = _source_coordinate(i, scale, n_in, n_out, coord)
    if mode == "nearest":
        idx = np.clip(_nearest_index(c, nearest, scale < 1), 0, n_in - 1).astype(np.int64)
        return idx[:, None], np.ones((n_out, 1))
    if mode == "linear_onnx":
        c = np.clip(c, 0, n_in - 1)
        i0 = np.floor(c).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = c - i0
        return np.stack([i0, i1], 1), np.stack([1 - w, w], 1)
    # cubic (Keys, coefficient a), indices clamped at the borders
    f = np.floor(c)
    t = c - f
    idx = np.stack([f - 1, f, f + 1, f + 2], 1).astype(np.int64)
    d = np.stack([1 + t, t, 1 - t, 2 - t], 1)
    w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                 np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    return np.clip(idx, 0, n_in - 1), w


@interpolate_op.fast
def _interp_formal(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                   nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    x = np.asarray(x)
    y = x.astype(np.float64)
    for a, n, s in zip(axes, sizes, scales, strict=True):
        idx, w = interpolation_taps(y.shape[a], n, s, mode, coordinate_transformation_mode, nearest_mode,
                                    cubic_coeff_a)
        moved = np.moveaxis(y, a, -1)
        out = np.zeros(moved.shape[:-1] + (n,))
        for k in range(idx.shape[1]):
            out += moved[..., idx[:, k]] * w[:, k]
        y = np.moveaxis(out, -1, a)
    return y.astype(x.dtype)



@interpolate_op.formal
def _interp_def(x, axes=(), sizes=(), scales=(), mode="nearest", coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75):
    x = np.asarray(x)
    shape = list(x.shape)
    taps = {}
    for a, n, s in zip(axes, sizes, scales, strict=True):
        taps[a] = interpolation_taps(x.shape[a], n, s, mode, coordinate_transformation_mode, nearest_mode,
                                     cubic_coeff_a)
        shape[a] = n
    out = np.empty(shape, dtype=x.dtype)
    for pos in np.ndindex(*shape):
        # out[pos] = sum over tap combinations of prod(weights) * x[source indices]
        terms = [(1.0, ())]
        for a, p in enumerate(pos):
            if a in taps:
                idx, w = taps[a]
                terms = [(c * float(w[p, t]), src + (int(idx[p, t]),)) for c, src in terms for t in range(idx.shape[1])]
            else:
                terms = [(c, src + (p,)) for c, src in terms]
        out[pos] = sum(c * float(x[src]) for c, src in terms)
    return out



# --- AdaptiveAvgPool / AdaptiveMaxPool -------------------------------------------------------------------

adaptive_pool_op = define("adaptive_pool", "ext", """
fragment adaptive_pool( input: tensor<scalar>, output_size: integer[], mode: string = 'avg' )
    -> ( output: tensor<scalar> );
""", domain="nnefx", doc="IR AdaptiveAvgPool/AdaptiveMaxPool (v8): bin i of an axis of extent X spans "
                      "[floor(i*X/n), ceil((i+1)*X/n)).")


@adaptive_pool_op.shape
def _adaptive_shape(x, output_size=(), mode="avg"):
    if mode not in ("avg", "max") or len(output_size) != len(x) - 2 or any(n < 1 for n in output_size):
        raise NNEFXError(f"adaptive_pool: bad output_size {list(output_size)} or mode '{mode}'")
    return tuple(x[:2]) + tuple(output_size)


def _bins(extent: int, n: int) -> list[tuple[int, int]]:
    return [((i * extent) // n, -((-(i + 1) * extent) // n)) for i in range(n)]


@adaptive_pool_op.formal
def _adaptive_formal(x, output_size=(), mode="avg"):
    x = np.asarray(x)
    spatial = x.shape[2:]
    bins = [_bins(e, n) for e, n in zip(spatial, output_size, strict=True)]
    out = np.empty(x.shape[:2] + tuple(output_size), dtype=x.dtype)
    for pos in np.ndindex(*out.shape):
        window = x[pos[:2] + tuple(slice(*bins[k][p]) for k, p in enumerate(pos[2:]))]
        out[pos] = window.max() if mode == "max" else window.astype(np.float64).mean()
    return out
