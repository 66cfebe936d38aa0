"""ONNX Resize (opsets 10-19) as one operation: every mode, coordinate transformation,
``antialias``, ``exclude_outside``, ``keep_aspect_ratio_policy``, ``axes`` and the
``tf_crop_and_resize`` region of interest.

NNEF's ``multilinear_upsample`` / ``nearest_upsample`` (and the IR interpolation operation)
cover integer factors or a subset of the coordinate modes; antialiased down-sampling, the
cubic kernel with ``exclude_outside`` and cropping regions have no counterpart, so this is an
extension operation.  ``scales`` and ``sizes`` decide the result's shape and are attributes
(one of them non-empty, for ``axes`` or every axis); ``roi`` stays a tensor (rank 0 when the
model has none).

Per resized axis of input extent ``L`` and scale ``s`` (given, or ``out / L`` for ``sizes``),
output index ``y`` reads source coordinate ``x`` by the coordinate transformation (ONNX
Resize, "coordinate_transformation_mode"), then neighbours of ``x`` with weights:

* ``nearest``: the neighbour ``nearest_mode`` picks;
* ``linear``: ``1 - t`` and ``t`` on ``floor(x)`` and ``floor(x) + 1`` (``t = x - floor(x)``);
  with ``antialias`` and ``s < 1`` the triangle stretched by ``1 / s`` (normalised);
* ``cubic``: Keys' kernel with ``cubic_coeff_a`` on four neighbours; with ``antialias`` and
  ``s < 1`` stretched by ``1 / s`` (normalised).

Neighbours outside the input read the edge item, or are dropped (weights renormalised) with
``exclude_outside``; ``tf_crop_and_resize`` coordinates outside the input give
``extrapolation_value``.  Axes combine as a tensor product (the interpolation is separable).
Integer results round half to even and saturate to their type.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define
from ._common import norm_axis

FAMILY = "onnx_resize"
_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")

onnx_resize = define("onnx_resize", FAMILY, """
fragment onnx_resize<?>(
    input: tensor<?>,
    roi: tensor<scalar> = 0.0,
    scales: scalar[] = [],
    sizes: integer[] = [],
    axes: integer[] = [],
    mode: string = 'nearest',
    coordinate_transformation_mode: string = 'half_pixel',
    cubic_coeff_a: scalar = -0.75,
    exclude_outside: logical = false,
    extrapolation_value: scalar = 0.0,
    nearest_mode: string = 'round_prefer_floor',
    keep_aspect_ratio_policy: string = 'stretch',
    antialias: logical = false )
-> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX Resize: nearest, linear or cubic resampling to scales or sizes, "
                                      "every coordinate mode, antialias, exclude_outside, roi, axes.")


def plan(shape, scales, sizes, axes, policy="stretch", op="onnx_resize"):
    """Per axis of ``shape``: (scale, output extent), identity (1.0, L) on axes not resized."""
    rank = len(shape)
    if bool(scales) == bool(sizes):
        raise op_error(op, "exactly one of scales and sizes must be given")
    axes = [norm_axis(op, a, rank, "axes") for a in axes] or list(range(rank))
    if len(set(axes)) != len(axes):
        raise attr_error(op, "axes", axes, "repeats an axis")
    given = scales or sizes
    if len(given) != len(axes):
        raise op_error(op, f"{'scales' if scales else 'sizes'} has {len(given)} values for {len(axes)} axes")
    if policy not in _POLICIES:
        raise attr_error(op, "keep_aspect_ratio_policy", policy, f"must be one of {', '.join(_POLICIES)}")
    result = [(1.0, d) for d in shape]
    if scales:
        for a, s in zip(axes, scales, strict=True):
            if not s > 0:
                raise attr_error(op, "scales", list(scales), "must be positive")
            result[a] = (float(s), None if shape[a] is None else int(math.floor(s * shape[a])))
        return result
    if any(v < 0 for v in sizes):
        raise attr_error(op, "sizes", list(sizes), "must not be negative")
    if any(shape[a] is None for a in axes):
        return [(1.0, d) if i not in axes else (None, sizes[axes.index(i)]) for i, d in enumerate(shape)]
    ratios = [v / shape[a] for a, v in zip(axes, sizes, strict=True)]
    if policy == "stretch":
        for a, v, r in zip(axes, sizes, ratios, strict=True):
            result[a] = (r, int(v))
        return result
    s = min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        result[a] = (s, int(s * shape[a] + 0.5))  # round half up, as ONNX states
    return result


@onnx_resize.shape
def _resize_shape(x, roi=(), scales=(), sizes=(), axes=(), mode="nearest",
                  coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=False,
                  extrapolation_value=0.0, nearest_mode="round_prefer_floor", keep_aspect_ratio_policy="stretch",
                  antialias=False, dtype=None):
    op = "onnx_resize"
    if mode not in _MODES:
        raise attr_error(op, "mode", mode, "must be 'nearest', 'linear' or 'cubic'")
    if coordinate_transformation_mode not in _TRANSFORMS:
        raise attr_error(op, "coordinate_transformation_mode", coordinate_transformation_mode,
                         f"must be one of {', '.join(_TRANSFORMS)}")
    if nearest_mode not in _NEAREST:
        raise attr_error(op, "nearest_mode", nearest_mode, f"must be one of {', '.join(_NEAREST)}")
    if antialias and mode == "nearest":
        raise attr_error(op, "antialias", antialias, "applies to the linear and cubic modes only")
    per_axis = plan(tuple(x), list(scales), list(sizes), list(axes), keep_aspect_ratio_policy)
    n_roi = len(axes or x)
    if coordinate_transformation_mode == "tf_crop_and_resize" and (len(roi) != 1 or roi[0] not in (2 * n_roi, None)):
        raise op_error(op, f"tf_crop_and_resize needs a roi of {2 * n_roi} values, got shape {list(roi)}")
    return tuple(out for _, out in per_axis)


def source(y: float, length: int, scale: float, out: int, transform: str, roi: tuple[float, float]):
    """The source coordinate of output index ``y`` (None: outside a tf_crop_and_resize roi)."""
    width = scale * length  # ONNX uses the unrounded output extent here
    if transform == "align_corners":
        return 0.0 if width == 1 else y * (length - 1) / (width - 1)
    if transform == "asymmetric":
        return y / scale
    if transform == "tf_crop_and_resize":
        start, end = roi
        x = (end - start) * (length - 1) / 2 if width == 1 else y * (end - start) * (length - 1) / (width - 1)
        x += start * (length - 1)
        return None if x < 0 or x > length - 1 else x
    if transform == "pytorch_half_pixel":
        return -0.5 if width == 1 else (y + 0.5) / scale - 0.5
    if transform == "half_pixel_symmetric":
        offset = length / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5


def _keys(d: float, a: float) -> float:
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return 0.0


def taps(x: float, length: int, scale: float, mode: str, nearest_mode: str, a: float, antialias: bool,
         exclude_outside: bool) -> list[tuple[int, float]]:
    """(input index, weight) pairs output coordinate ``x`` reads along one axis."""
    base = math.floor(x)
    t = x - base
    if mode == "nearest":
        if t == 0:
            pick = base
        elif nearest_mode == "round_prefer_floor":
            pick = base if t <= 0.5 else base + 1
        elif nearest_mode == "round_prefer_ceil":
            pick = base if t < 0.5 else base + 1
        else:
            pick = base if nearest_mode == "floor" else base + 1
        pairs = [(pick, 1.0)]
    else:
        support = 1 if mode == "linear" else 2  # the kernel's half-width
        stretch = min(scale, 1.0) if antialias else 1.0
        reach = math.ceil(support / stretch)  # neighbours per side
        offsets = range(1 - reach, reach + 1)
        if mode == "linear":
            weights = [max(0.0, 1 - abs((j - t) * stretch)) for j in offsets]
        else:
            weights = [_keys((j - t) * stretch, a) for j in offsets]
        if antialias:
            total = sum(weights)
            weights = [w / total for w in weights]
        pairs = [(base + j, w) for j, w in zip(offsets, weights, strict=True)]
    if exclude_outside:
        pairs = [(i, w) for i, w in pairs if 0 <= i < length]
        total = sum(w for _, w in pairs) or 1.0
        pairs = [(i, w / total) for i, w in pairs]
    return [(min(max(i, 0), length - 1), w) for i, w in pairs]  # edge items beyond the input


def _settings(x: np.ndarray, roi, scales, sizes, axes, coordinate_transformation_mode, policy):
    per_axis = plan(x.shape, list(scales), list(sizes), list(axes), policy)
    rank = x.ndim
    resized = [norm_axis("onnx_resize", a, rank, "axes") for a in axes] or list(range(rank))
    bounds = [(0.0, 1.0)] * rank
    if coordinate_transformation_mode == "tf_crop_and_resize":
        r = np.asarray(roi, np.float64).reshape(-1)
        for i, a in enumerate(resized):
            bounds[a] = (float(r[i]), float(r[i + len(resized)]))
    return per_axis, resized, bounds


def _finish(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    if dtype == np.bool_:
        return values != 0
    return values.astype(dtype)


def _axis_reads(length, scale, out, transform, bounds, mode, nearest_mode, a, antialias, exclude_outside):
    """Per output index along one axis: its taps, or None where it is extrapolated."""
    reads = []
    for y in range(out):
        x = source(float(y), length, scale, out, transform, bounds)
        reads.append(None if x is None else
                     taps(x, length, scale, mode, nearest_mode, a, antialias, exclude_outside))
    return reads


@onnx_resize.formal
def _resize_formal(x, roi=0.0, scales=(), sizes=(), axes=(), mode="nearest",
                   coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=False,
                   extrapolation_value=0.0, nearest_mode="round_prefer_floor", keep_aspect_ratio_policy="stretch",
                   antialias=False, dtype=None):
    x = np.asarray(x)
    # (the registry's guard has run the shape rule on these arguments already)
    per_axis, resized, bounds = _settings(x, roi, scales, sizes, axes, coordinate_transformation_mode,
                                          keep_aspect_ratio_policy)
    reads = []
    for d, (scale, out) in enumerate(per_axis):
        if d in resized:
            reads.append(_axis_reads(x.shape[d], scale, out, coordinate_transformation_mode, bounds[d], mode,
                                     nearest_mode, cubic_coeff_a, antialias, exclude_outside))
        else:
            reads.append([[(i, 1.0)] for i in range(x.shape[d])])
    result = np.zeros(tuple(out for _, out in per_axis), np.float64)
    for index in np.ndindex(result.shape):
        per = [reads[d][i] for d, i in enumerate(index)]
        if any(p is None for p in per):
            result[index] = extrapolation_value
            continue
        total = 0.0
        for combo in itertools.product(*per):
            w = math.prod(wt for _, wt in combo)
            if w:
                total += w * float(x[tuple(i for i, _ in combo)])
        result[index] = total
    return _finish(result, x.dtype)


@onnx_resize.fast
def _resize_fast(x, roi=0.0, scales=(), sizes=(), axes=(), mode="nearest",
                 coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=False,
                 extrapolation_value=0.0, nearest_mode="round_prefer_floor", keep_aspect_ratio_policy="stretch",
                 antialias=False, dtype=None):
    # Separable: one (out x in) weight matrix per resized axis, applied as a tensordot.
    x = np.asarray(x)
    # (the registry's guard has run the shape rule on these arguments already)
    per_axis, resized, bounds = _settings(x, roi, scales, sizes, axes, coordinate_transformation_mode,
                                          keep_aspect_ratio_policy)
    acc = np.float64 if x.dtype == np.float64 or x.dtype.kind in "iu" else np.float32
    result = x.astype(acc)
    outside = np.zeros(tuple(out for _, out in per_axis), bool)
    for d in resized:
        scale, out = per_axis[d]
        reads = _axis_reads(x.shape[d], scale, out, coordinate_transformation_mode, bounds[d], mode,
                            nearest_mode, cubic_coeff_a, antialias, exclude_outside)
        matrix = np.zeros((out, x.shape[d]), np.float64)
        flags = np.zeros(out, bool)
        for y, pairs in enumerate(reads):
            if pairs is None:
                flags[y] = True
                continue
            for i, w in pairs:
                matrix[y, i] += w
        result = np.moveaxis(np.tensordot(matrix.astype(acc), result, axes=(1, d)), 0, d)
        view = [1] * x.ndim
        view[d] = out
        outside = outside | flags.reshape(view)
    if outside.any():
        result = np.where(outside, acc(extrapolation_value), result)
    return _finish(result, x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
