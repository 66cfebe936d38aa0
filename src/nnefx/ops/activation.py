"""Activation functions (NNEF 1.0.5 §4.9.1, all compound) plus the Tools' ``softabs``.

``gelu`` is the spec's normative approximation ``x * sigmoid(1.702 * x)``, not the erf form.
"""

from __future__ import annotations

from .registry import define

sigmoid = define("sigmoid", "activation", """
fragment sigmoid( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = 1.0 / (1.0 + exp(-x));
}
""", compound=True)

relu = define("relu", "activation", """
fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = max(x, 0.0);
}
""", compound=True)

prelu = define("prelu", "activation", """
fragment prelu( x: tensor<scalar>, alpha: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = select(x < 0.0, alpha * x, x);
}
""", compound=True)

leaky_relu = define("leaky_relu", "activation", """
fragment leaky_relu( x: tensor<scalar>, alpha: scalar ) -> ( y: tensor<scalar> )
{
    y = prelu(x, alpha = alpha);
}
""", compound=True)

elu = define("elu", "activation", """
fragment elu( x: tensor<scalar>, alpha: scalar = 1.0 ) -> ( y: tensor<scalar> )
{
    y = select(x < 0.0, alpha * (exp(x) - 1.0), x);
}
""", compound=True)

selu = define("selu", "activation", """
fragment selu( x: tensor<scalar>, alpha: scalar = 1.67326319, lambda: scalar = 1.05070102 ) -> ( y: tensor<scalar> )
{
    y = lambda * select(x < 0.0, alpha * (exp(x) - 1.0), x);
}
""", compound=True)

gelu = define("gelu", "activation", """
fragment gelu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x * sigmoid(1.702 * x);
}
""", compound=True)

silu = define("silu", "activation", """
fragment silu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x * sigmoid(x);
}
""", compound=True)

softmax = define("softmax", "activation", """
fragment softmax( x: tensor<scalar>, axes: integer[] = [1] ) -> ( y: tensor<scalar> )
{
    m = max_reduce(x, axes = axes);
    e = exp(x - m);
    y = e / sum_reduce(e, axes = axes);
}
""", compound=True)

softplus = define("softplus", "activation", """
fragment softplus( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = log(exp(x) + 1.0);
}
""", compound=True)

# Not in any NNEF specification: shipped by the official tools' standard library, so
# documents written for them may use it.
softabs = define("softabs", "activation", """
fragment softabs( x: tensor<scalar>, epsilon: scalar ) -> ( y: tensor<scalar> )
{
    y = sqrt(sqr(x) + epsilon);
}
""", compound=True, tools_only=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Every operation here is a compound: its formal kernel is its body, run through the
# primitives' formal kernels (nnefx.ops.derived; each step rounded to float32, exactly as
# the expanded graph computes).  Fast
# kernels are fused numpy expressions; they may round differently (a few ulp), e.g. the fast
# ``softmax`` accumulates its sum in float64.

import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import broadcast_shapes, checked_broadcast, float_type, op_error, relu_into, scalar  # noqa: E402
from .reduce import reduced_shape  # noqa: E402


def _same(x, **_):
    return tuple(x)


for _op in (sigmoid, relu, gelu, silu, softplus, elu, selu, leaky_relu, softabs):
    _op.shape(_same)


def sigmoid_fast(x):
    x = scalar(x)
    with np.errstate(over="ignore"):
        return (float_type()(1.0) / (float_type()(1.0) + np.exp(-x))).astype(float_type())


sigmoid.fast(sigmoid_fast)


@relu.fast
def _relu_fast(x):
    """select(x > 0.0, x, 0.0) as ``fmax(x, 0) + 0``: NaN and -0.0 give +0.0, exactly.

    ``fmax`` drops a NaN operand (so NaN -> 0) but may keep -0.0 against +0.0; adding +0.0
    in place turns any zero into +0.0 and leaves every other value unchanged.  Two streaming
    passes without a mask: about 10x faster than ``where`` over a boolean mask, which
    matters because a ReLU follows most convolutions.
    """
    x = scalar(x)
    return relu_into(x, np.empty(x.shape, float_type()))


@prelu.shape
def _prelu_shape(x, alpha):
    out = broadcast_shapes("prelu", x, alpha)
    if len(out) != len(x) or any(a is not None and b is not None and a != b for a, b in zip(out, x, strict=True)):
        raise op_error("prelu", f"alpha of shape {tuple(alpha)} does not broadcast to x of shape {tuple(x)}")
    return tuple(x)


@prelu.fast
def _prelu_fast(x, alpha):
    x, a = checked_broadcast("prelu", scalar(x), scalar(alpha))
    _prelu_shape(np.shape(x), np.shape(a))
    return np.where(x < 0, a * x, x).astype(float_type())


leaky_relu.fast(lambda x, alpha: _prelu_fast(x, float_type()(alpha)))


def _elu_fast_body(x, alpha):
    x = scalar(x)
    with np.errstate(over="ignore"):
        return np.where(x < 0, float_type()(alpha) * np.expm1(np.minimum(x, 0)), x).astype(float_type())


elu.fast(lambda x, alpha=1.0: _elu_fast_body(x, alpha))
selu.fast(lambda x, alpha=1.67326319, **kw: (float_type()(kw.get("lambda", 1.05070102)) * _elu_fast_body(x, alpha))
          .astype(float_type()))


gelu.fast(lambda x: (scalar(x) * sigmoid_fast(float_type()(1.702) * scalar(x))).astype(float_type()))
silu.fast(lambda x: (scalar(x) * sigmoid_fast(x)).astype(float_type()))


@softmax.shape
def _softmax_shape(x, axes=(1,)):
    reduced_shape("softmax", x, axes)
    return tuple(x)


@softmax.fast
def _softmax_fast(x, axes=(1,)):
    x = scalar(x)
    _softmax_shape(x.shape, axes)
    ax = tuple(axes)
    if not ax:
        return np.ones_like(x) if np.all(np.isfinite(x)) else (np.exp(x - x) / np.exp(x - x)).astype(float_type())
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=ax, keepdims=True))
        return (e / np.sum(e, axis=ax, keepdims=True, dtype=np.float64)).astype(float_type())


@softplus.fast
def _softplus_fast(x):
    """log(exp(x) + 1.0) with each step rounded to float32 exactly as the formal body does.

    The float32 ``exp`` of numpy is not always correctly rounded, and near x = -16 one ulp of
    ``exp(x)`` decides whether ``exp(x) + 1`` rounds to 1 (softplus 0) or to 1 + 2^-23
    (softplus 1.2e-7): an error no ulp bound covers.  So ``exp`` and ``log`` are evaluated
    in float64 and rounded once, like the formal primitives.
    """
    x = scalar(x)
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float64)).astype(float_type())
        return np.log((e + float_type()(1.0)).astype(np.float64)).astype(float_type())


softabs.fast(lambda x, epsilon: np.sqrt(np.square(scalar(x)) + float_type()(epsilon)).astype(float_type()))


# --- mish (an nnefx extension: OpenVINO Mish-4, ONNX Mish-18) -------------------------------

mish = define("mish", "activation", """
fragment mish( x: tensor<scalar> ) -> ( y: tensor<scalar> );
""", domain="nnefx", doc="x * tanh(softplus(x)), element-wise (OpenVINO Mish-4, ONNX Mish-18).")

mish.shape(_same)


def _softplus64(v: float) -> float:
    # log(1 + exp(v)) without overflow: v + log(1 + exp(-v)) for positive v
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


@mish.formal
def _mish_formal(x):
    """x * tanh(softplus(x)) per item in double precision, rounded once to float32."""
    x = scalar(x)
    flat = [float(v) * math.tanh(_softplus64(float(v))) if math.isfinite(v) else
            (float(v) if v > 0 or math.isnan(v) else -0.0) for v in x.reshape(-1).tolist()]
    return np.asarray(flat, np.float64).astype(float_type()).reshape(x.shape)


@mish.fast
def _mish_fast(x):
    x = scalar(x)
    d = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        y = d * np.tanh(np.logaddexp(0.0, d))
    return np.where(np.isneginf(d), -0.0, y).astype(float_type())
