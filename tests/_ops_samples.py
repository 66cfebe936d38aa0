"""One concrete, valid invocation per operation: shared by the ops tests.

Each entry is ``(positional tensors, attributes)``; generic operations get ``dtype`` in the
attributes.  Values are small random arrays with fixed seeds, shapes chosen so every
operation does something non-trivial (padding, strides, groups, broadcasting).
"""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(1234)


def f(*shape, lo=-2.0, hi=2.0):
    return _rng.uniform(lo, hi, size=shape).astype(np.float32)


def i(*shape, lo=0, hi=3):
    return _rng.integers(lo, hi, size=shape).astype(np.int64)


def b(*shape):
    return _rng.random(size=shape) < 0.5


X4 = f(2, 4, 5, 6)
POS = f(2, 3, 4, lo=0.1, hi=3.0)
UNIT = f(2, 3, 4, lo=-0.9, hi=0.9)
WIN = dict(size=[1, 2, 3, 2], padding=[(0, 0), (1, 0), (1, 1), (0, 1)], stride=[1, 1, 2, 2])

SAMPLES: dict[str, tuple[list, dict]] = {
    "constant": ([], dict(shape=[2, 3], value=[1.5], dtype="scalar")),
    "update": ([f(2, 3), f(2, 3)], dict(dtype="scalar")),
    "copy": ([i(2, 3)], dict(dtype="integer")),
    "not": ([b(3, 4)], {}),
    "select": ([b(2, 3), f(2, 3), f(2, 1)], dict(dtype="scalar")),
    "sqr": ([f(2, 3)], {}), "sqrt": ([POS], {}), "rsqr": ([POS], {}), "rsqrt": ([POS], {}),
    "log2": ([POS], {}), "min": ([f(2, 3), f(2)], {}), "max": ([f(2, 3), f(1, 3)], {}),
    "clamp": ([f(2, 3), f(1), f(1, 3, lo=2.0, hi=3.0)], {}),
    "conv": ([X4, f(6, 2, 3, 2), f(1, 6)], dict(padding=[(1, 0), (0, 1)], stride=[2, 1], dilation=[1, 2], groups=2)),
    "deconv": ([f(2, 6, 3, 4), f(6, 2, 3, 2), f(1, 4)], dict(padding=[], stride=[2, 1], groups=2)),
    "box": ([X4], dict(WIN, border="ignore", normalize=True)),
    "debox": ([f(2, 4, 3, 3)], dict(size=[1, 1, 3, 2], stride=[1, 1, 2, 2], border="constant")),
    "argmax_pool": ([X4], dict(WIN, border="constant")),
    "sample": ([X4, i(2, 4, 3, 3, hi=12)], dict(WIN, border="reflect")),
    "desample": ([f(2, 4, 3, 3), i(2, 4, 3, 3, hi=12)], dict(WIN, output_shape=[2, 4, 5, 6])),
    "multilinear_upsample": ([f(1, 2, 3, 4)], dict(factor=[2, 3], method="symmetric", border="replicate")),
    "nearest_downsample": ([X4[:, :, :4, :]], dict(factor=[2, 3])),
    "area_downsample": ([X4[:, :, :4, :]], dict(factor=[2, 3])),
    "nearest_upsample": ([f(1, 2, 2, 3)], dict(factor=[2, 2])),
    "sum_reduce": ([X4], dict(axes=[1, 3], normalize=True)),
    "max_reduce": ([X4], dict(axes=[2])), "min_reduce": ([X4], dict(axes=[0, 2])),
    "argmax_reduce": ([X4], dict(axes=[1, 2])), "argmin_reduce": ([X4], dict(axes=[3])),
    "all_reduce": ([b(3, 4, 2)], dict(axes=[1])), "any_reduce": ([b(3, 4, 2)], dict(axes=[0, 2])),
    "mean_reduce": ([X4], dict(axes=[2, 3])), "moments": ([X4], dict(axes=[0, 2, 3])),
    "reshape": ([f(2, 3, 4)], dict(shape=[0, -1], axis_start=1, dtype="scalar")),
    "squeeze": ([f(2, 1, 3, 1)], dict(axes=[1, 3], dtype="scalar")),
    "unsqueeze": ([i(2, 3)], dict(axes=[0, 3], dtype="integer")),
    "transpose": ([f(2, 3, 4)], dict(axes=[1, 0], dtype="scalar")),
    "split": ([f(2, 6, 3)], dict(axis=1, ratios=[1, 2], dtype="scalar")),
    "concat": ([[f(2, 3), f(2, 1), f(2, 2)]], dict(axis=1, dtype="scalar")),
    "stack": ([[b(2, 3), b(2, 3)]], dict(axis=2, dtype="logical")),
    "unstack": ([f(2, 3, 4)], dict(axis=1, dtype="scalar")),
    "slice": ([f(5, 6, 7)], dict(axes=[0, 2], begin=[-1, 1], end=[0, 6], stride=[-2, 2], dtype="scalar")),
    "pad": ([f(3, 4)], dict(padding=[(2, -1), (1, 3)], border="reflect-even")),
    "tile": ([i(2, 3)], dict(repeats=[2, 1], dtype="integer")),
    "gather": ([f(3, 4, 2), i(2, 5, hi=4)], dict(axis=1, dtype="scalar")),
    "cast": ([f(3, 4, lo=-5, hi=5)], dict(dtype="integer")),
    "avg_roi_pool": ([f(2, 3, 8, 7), np.array([[0, 0, 5, 6], [1.4, 2.2, 7.6, 6.9]], np.float32),
                      np.array([0, 1])], dict(output_size=[2, 3])),
    "max_roi_pool": ([f(2, 3, 8, 7), np.array([[0, 0, 5, 6], [-2, -1, 3, 2]], np.float32), np.array([[1], [0]])],
                     dict(output_size=[2, 2])),
    "roi_resample": ([f(2, 3, 8, 7), np.array([[0.5, 0, 5, 6.5]], np.float32), np.array([1])],
                     dict(output_size=[3, 4], method="aligned")),
    "avg_roi_align": ([f(2, 3, 8, 7), np.array([[0.5, 0, 5, 6.5]], np.float32), np.array([1])],
                      dict(output_size=[2, 2], sampling_rate=[2, 2])),
    "max_roi_align": ([f(2, 3, 8, 7), np.array([[0.5, 0, 5, 6.5]], np.float32), np.array([1])],
                      dict(output_size=[2, 3], sampling_rate=[1, 2], resize_method="asymmetric")),
    "matmul": ([f(2, 1, 3, 4), f(1, 3, 5, 4)], dict(transposeB=True)),
    "sigmoid": ([f(2, 3)], {}), "relu": ([f(2, 3)], {}), "prelu": ([f(2, 3, 4), f(1, 3)], {}),
    "leaky_relu": ([f(2, 3)], dict(alpha=0.1)), "elu": ([f(2, 3)], dict(alpha=0.5)),
    "selu": ([f(2, 3)], {"alpha": 1.5, "lambda": 1.1}), "gelu": ([f(2, 3)], {}), "silu": ([f(2, 3)], {}),
    "softmax": ([f(2, 3, 4)], dict(axes=[1, 2])), "softplus": ([f(2, 3)], {}), "softabs": ([f(2, 3)], dict(epsilon=0.01)),
    "linear": ([f(3, 4), f(5, 4), f(1, 5)], {}),
    "separable_conv": ([X4, f(8, 1, 3, 3), f(6, 4, 1, 1), f(1, 6)], dict(stride=[1, 2], groups=2, border="replicate")),
    "separable_deconv": ([f(2, 6, 3, 3), f(8, 1, 3, 3), f(6, 4, 1, 1), f(1, 8)], dict(stride=[2, 2], groups=2)),
    "max_pool_with_index": ([X4], dict(WIN, border="ignore")),
    "max_pool": ([X4], dict(WIN, border="constant")),
    "avg_pool": ([X4], dict(WIN, border="constant")),
    "rms_pool": ([X4], dict(WIN, border="reflect")),
    "local_response_normalization": ([X4], dict(size=[1, 3, 1, 1], alpha=0.2, beta=0.75, bias=2.0)),
    "local_mean_normalization": ([X4], dict(size=[1, 1, 3, 3])),
    "local_variance_normalization": ([X4], dict(size=[1, 1, 3, 3], bias=0.1, epsilon=0.01)),
    "local_contrast_normalization": ([X4], dict(size=[1, 2, 3, 3], epsilon=0.05)),
    "l1_normalization": ([X4], dict(axes=[1], epsilon=1e-3)),
    "l2_normalization": ([X4], dict(axes=[2, 3], bias=0.01)),
    "batch_normalization": ([X4, f(1, 4), f(1, 4, lo=0.5, hi=2.0), f(1, 4), f(1, 4)], dict(epsilon=1e-3)),
    "min_max_linear_quantize": ([f(3, 4), np.float32(-1.0), f(1, 4, lo=1.0, hi=2.0)],
                                dict(bits=4, signed=True, symmetric=True)),
    "zero_point_linear_quantize": ([f(3, 4), i(1, 4, lo=-3, hi=3), f(1, 4, lo=0.05, hi=0.2)],
                                   dict(bits=4, signed=True, symmetric=False)),
    "linear_quantize": ([f(3, 4), np.float32(-1.0), np.float32(1.5)], dict(bits=3)),
    "logarithmic_quantize": ([f(3, 4), np.float32(1.5)], dict(bits=3)),
    "copy_n": ([f(2, 3)], dict(times=3, dtype="scalar")),
    "add_n": ([[f(2, 3), f(2, 3), f(2, 1)]], {}),
}

for _name in ("neg", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh", "atan", "asinh", "abs", "sign",
              "floor", "ceil", "round"):
    SAMPLES[_name] = ([f(2, 3, 4, lo=-3, hi=3)], {})
SAMPLES["rcp"] = ([f(2, 3, lo=0.5, hi=2)], {})
SAMPLES["log"] = ([POS], {})
SAMPLES["acosh"] = ([f(2, 3, lo=1.0, hi=4.0)], {})
for _name in ("asin", "acos", "atanh"):
    SAMPLES[_name] = ([UNIT], {})
for _name in ("add", "sub", "mul", "div"):
    SAMPLES[_name] = ([f(2, 3, 4), f(2, 3)], {})
SAMPLES["pow"] = ([POS, f(2, 1, 4)], {})
for _name in ("lt", "gt", "le", "ge", "eq", "ne"):
    SAMPLES[_name] = ([np.round(f(2, 3, 4)), np.round(f(2, 3))], {})
for _name in ("and", "or"):
    SAMPLES[_name] = ([b(2, 3, 4), b(2, 3)], {})


def nnef_literal(v) -> str:
    """NNEF source text of an attribute value (the sample tables' Python values)."""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, tuple):
        return "(" + ", ".join(nnef_literal(x) for x in v) + ")"
    if isinstance(v, list):
        return "[" + ", ".join(nnef_literal(x) for x in v) + "]"
    if isinstance(v, int | np.integer):
        return str(int(v))
    return repr(float(v))


def shape_of(value):
    """Shape argument for a shape rule: a tuple, or a list of tuples for tensor arrays."""
    if isinstance(value, list):
        return [np.shape(v) for v in value]
    return np.shape(value)
