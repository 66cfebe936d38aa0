"""ONNX LayerNormalization (opset 17), RMSNormalization (opset 23) and GroupNormalization
(opset 21) as single operations.

ONNX defines all three as functions whose statistics are kept in ``stash_type`` (float32
unless the model says otherwise) and whose normalised value is cast back to the input's type
before the scale and bias apply.  NNEF's own normalisations either lack the statistics outputs
(``Mean``, ``InvStdDev``), the reduction over "every axis from ``axis`` on" or the per-group
grouping, so these are extension operations; the formal kernels follow the function bodies
step by step, in float64.
"""

from __future__ import annotations

import numpy as np

from .._common import guard_family, op_error
from ..registry import define
from ._common import norm_axis, numpy_broadcast, stash

FAMILY = "onnx_normalization"

onnx_layer_normalization = define("onnx_layer_normalization", FAMILY, """
fragment onnx_layer_normalization(
    input: tensor<scalar>,
    scale: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    axis: integer = -1,
    epsilon: scalar = 1e-5,
    stash_type: integer = 1 )
-> ( output: tensor<scalar>, mean: tensor<scalar>, inv_std_dev: tensor<scalar> );
""", domain="onnx", doc="ONNX LayerNormalization: normalise over every axis from `axis` on, "
                        "then scale and bias (numpy broadcasting); also the mean and 1/stddev.")


def _stat_shape(x, axis):
    return tuple(d if i < axis else 1 for i, d in enumerate(x))


@onnx_layer_normalization.shape
def _layer_norm_shape(x, scale, bias=(), axis=-1, epsilon=1e-5, stash_type=1):
    a = norm_axis("onnx_layer_normalization", axis, len(x))
    if len(numpy_broadcast("onnx_layer_normalization", x, scale, bias)) != len(x):
        raise op_error("onnx_layer_normalization", "scale and bias must broadcast to the input's shape")
    return tuple(x), _stat_shape(x, a), _stat_shape(x, a)


@onnx_layer_normalization.formal
def _layer_norm_formal(x, scale, bias=0.0, axis=-1, epsilon=1e-5, stash_type=1):
    # The function body of LayerNormalization-17, in float64, each step rounded to the stash type.
    x = np.asarray(x)
    u = stash(stash_type, "onnx_layer_normalization")
    axes = tuple(range(norm_axis("onnx_layer_normalization", axis, x.ndim), x.ndim))
    xu = x.astype(np.float64)
    mean = np.mean(xu, axis=axes, keepdims=True)
    d = xu - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + float(epsilon))
    normalized = (d * inv_std).astype(x.dtype)
    y = normalized.astype(np.float64) * np.asarray(scale, np.float64) + np.asarray(bias, np.float64)
    return y.astype(x.dtype), mean.astype(u), inv_std.astype(u)


@onnx_layer_normalization.fast
def _layer_norm_fast(x, scale, bias=0.0, axis=-1, epsilon=1e-5, stash_type=1):
    x = np.asarray(x)
    u = stash(stash_type, "onnx_layer_normalization")
    acc = np.float64 if np.float64 in (x.dtype, u) else np.float32
    axes = tuple(range(norm_axis("onnx_layer_normalization", axis, x.ndim), x.ndim))
    xu = x.astype(acc)
    mean = xu.mean(axis=axes, keepdims=True)
    d = xu - mean
    var = np.square(d).mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + acc(epsilon))
    d *= inv_std
    y = d.astype(x.dtype).astype(acc) * np.asarray(scale, acc) + np.asarray(bias, acc)
    return y.astype(x.dtype), mean.astype(u), inv_std.astype(u)


onnx_rms_normalization = define("onnx_rms_normalization", FAMILY, """
fragment onnx_rms_normalization(
    input: tensor<scalar>,
    scale: tensor<scalar>,
    axis: integer = -1,
    epsilon: scalar = 1e-5,
    stash_type: integer = 1 )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX RMSNormalization: x / sqrt(mean(x^2) + epsilon) over every axis "
                        "from `axis` on, times scale (numpy broadcasting).")


@onnx_rms_normalization.shape
def _rms_norm_shape(x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    norm_axis("onnx_rms_normalization", axis, len(x))
    if len(numpy_broadcast("onnx_rms_normalization", x, scale)) != len(x):
        raise op_error("onnx_rms_normalization", "scale must broadcast to the input's shape")
    return tuple(x)


@onnx_rms_normalization.formal
def _rms_norm_formal(x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    # RMSNormalization-23's function body: XSquared, ReduceMean, + epsilon, Sqrt, Reciprocal,
    # X * InvRMS, cast to X's type, times scale.
    x = np.asarray(x)
    stash(stash_type, "onnx_rms_normalization")
    axes = tuple(range(norm_axis("onnx_rms_normalization", axis, x.ndim), x.ndim))
    xu = x.astype(np.float64)
    mean_square = np.mean(xu * xu, axis=axes, keepdims=True)
    inv_rms = 1.0 / np.sqrt(mean_square + float(epsilon))
    normalized = (xu * inv_rms).astype(x.dtype)
    return (normalized.astype(np.float64) * np.asarray(scale, np.float64)).astype(x.dtype)


@onnx_rms_normalization.fast
def _rms_norm_fast(x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    x = np.asarray(x)
    u = stash(stash_type, "onnx_rms_normalization")
    acc = np.float64 if np.float64 in (x.dtype, u) else np.float32
    axes = tuple(range(norm_axis("onnx_rms_normalization", axis, x.ndim), x.ndim))
    xu = x.astype(acc)
    inv_rms = 1.0 / np.sqrt(np.square(xu).mean(axis=axes, keepdims=True) + acc(epsilon))
    xu *= inv_rms
    return (xu.astype(x.dtype).astype(acc) * np.asarray(scale, acc)).astype(x.dtype)


onnx_group_normalization = define("onnx_group_normalization", FAMILY, """
fragment onnx_group_normalization(
    input: tensor<scalar>,
    scale: tensor<scalar>,
    bias: tensor<scalar>,
    num_groups: integer,
    epsilon: scalar = 1e-5,
    stash_type: integer = 1 )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX GroupNormalization-21: channels in `num_groups` groups, each normalised "
                        "over its channels and spatial items, then per-channel scale and bias.")


@onnx_group_normalization.shape
def _group_norm_shape(x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    name = "onnx_group_normalization"
    if len(x) < 2:
        raise op_error(name, f"the input needs rank 2 or more (N, C, ...), got rank {len(x)}")
    if num_groups <= 0:
        raise op_error(name, f"num_groups = {num_groups} must be positive")
    c = x[1]
    if c is not None and c % num_groups:
        raise op_error(name, f"{c} channels do not divide into num_groups = {num_groups}")
    for what, s in (("scale", scale), ("bias", bias)):
        if len(s) != 1 or (c is not None and s[0] not in (c, None)):
            raise op_error(name, f"{what} must have shape [C] = [{c}], got {list(s)}")
    return tuple(x)


@onnx_group_normalization.formal
def _group_norm_formal(x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    # GroupNormalization-21: per (n, group), mean and variance over the group's channels and
    # every spatial item; normalised, cast to X's type, then y = scale[c] * norm + bias[c].
    x = np.asarray(x)
    stash(stash_type, "onnx_group_normalization")
    n, c = x.shape[:2]
    size = c // num_groups
    xu = x.astype(np.float64)
    normalized = np.empty_like(xu)
    for b in range(n):
        for g in range(num_groups):
            block = xu[b, g * size:(g + 1) * size]
            mean = block.mean()
            var = ((block - mean) ** 2).mean()
            normalized[b, g * size:(g + 1) * size] = (block - mean) / np.sqrt(var + float(epsilon))
    normalized = normalized.astype(x.dtype).astype(np.float64)
    view = (1, c) + (1,) * (x.ndim - 2)
    y = normalized * np.asarray(scale, np.float64).reshape(view) + np.asarray(bias, np.float64).reshape(view)
    return y.astype(x.dtype)


@onnx_group_normalization.fast
def _group_norm_fast(x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    x = np.asarray(x)
    u = stash(stash_type, "onnx_group_normalization")
    acc = np.float64 if np.float64 in (x.dtype, u) else np.float32
    n, c = x.shape[:2]
    g = x.astype(acc).reshape(n, num_groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    g = g - mean
    g /= np.sqrt(np.square(g).mean(axis=2, keepdims=True) + acc(epsilon))
    view = (1, c) + (1,) * (x.ndim - 2)
    y = g.reshape(x.shape).astype(x.dtype).astype(acc)
    y = y * np.asarray(scale, acc).reshape(view) + np.asarray(bias, acc).reshape(view)
    return y.astype(x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
