"""The optimizer steps of the ONNX training domain (``ai.onnx.preview.training``, opset 1):
Adagrad, Adam and Momentum, one operation each for one optimized tensor.

An ONNX node updates n tensors at once (inputs ``R, T, X_1..X_n, G_1..G_n, ...``); every
tensor's update depends only on its own X, G and state and on the shared R and T, so the
reader emits one operation per tensor.  Definitions (ONNX operator docs, ai.onnx.preview.training):

* **Adagrad**: ``r = R / (1 + T * decay_factor)``, ``g = norm_coefficient * X + G``,
  ``H' = H + g * g``, ``X' = X - r * g / (sqrt(H') + epsilon)``.
* **Adam**: ``g = norm_coefficient * X + G``, ``V' = alpha * V + (1 - alpha) * g``,
  ``H' = beta * H + (1 - beta) * g * g``; the rate is bias-corrected once ``T > 0``:
  ``r = R * sqrt(1 - beta^T) / (1 - alpha^T)``; ``X' = (1 - norm_coefficient_post) *
  (X - r * V' / (sqrt(H') + epsilon))``.
* **Momentum**: ``g = norm_coefficient * X + G``, ``V' = alpha * V + b * g`` with ``b = beta``
  once ``T > 0`` and 1 at the first step; ``X' = X - R * V'`` (``standard``) or
  ``X' = X - R * (g + alpha * V')`` (``nesterov``).

``R`` and ``T`` are rank-0 tensors.  The formal kernels compute in float64 and round once to
the tensor's element type; the fast ones compute in that type (float32 for narrower floats).
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_training"


def _shapes(name: str, r, t, x, *others) -> tuple:
    for what, s in (("R", r), ("T", t)):
        if len(s) != 0:
            raise op_error(name, f"{what} must be a rank-0 tensor, got shape {list(s)}")
    for s in others:
        if len(s) != len(x) or any(a is not None and b is not None and a != b for a, b in zip(s, x, strict=True)):
            raise op_error(name, f"the gradient and state tensors must have the shape of X {list(x)}, got {list(s)}")
    return tuple(x)


def _acc(x: np.ndarray, formal: bool) -> type:
    return np.float64 if formal or x.dtype == np.float64 else np.float32


def _scalars(r, t, acc) -> tuple:
    r, t = np.asarray(r), np.asarray(t)
    if r.ndim or t.ndim:
        raise op_error(FAMILY, f"R and T must be rank-0 tensors, got shapes {list(r.shape)} and {list(t.shape)}")
    return acc(r), int(t)


# --- Adagrad ------------------------------------------------------------------------------------

onnx_adagrad = define("onnx_adagrad", FAMILY, """
fragment onnx_adagrad( r: tensor<scalar>, t: tensor<integer>, x: tensor<scalar>, g: tensor<scalar>, h: tensor<scalar>,
                       decay_factor: scalar = 0.0, epsilon: scalar = 1e-6, norm_coefficient: scalar = 0.0 )
-> ( x_new: tensor<scalar>, h_new: tensor<scalar> );
""", domain="onnx", doc="ONNX Adagrad (ai.onnx.preview.training): one step for tensor x with gradient g and "
                        "accumulated squared gradient h, rate r decayed by the update count t.")


@onnx_adagrad.shape
def _adagrad_shape(r, t, x, g, h, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    s = _shapes("onnx_adagrad", r, t, x, g, h)
    return s, s


def _adagrad(formal: bool):
    def kernel(r, t, x, g, h, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
        x = np.asarray(x)
        acc = _acc(x, formal)
        r, t = _scalars(r, t, acc)
        xa, ga, ha = (np.asarray(a).astype(acc) for a in (x, g, h))
        rate = r / (acc(1) + acc(t) * acc(decay_factor))
        reg = acc(norm_coefficient) * xa + ga
        h_new = ha + reg * reg
        x_new = xa - rate * reg / (np.sqrt(h_new) + acc(epsilon))
        return x_new.astype(x.dtype), h_new.astype(np.asarray(h).dtype)
    return kernel


onnx_adagrad.formal(_adagrad(True))
onnx_adagrad.fast(_adagrad(False))


# --- Adam ---------------------------------------------------------------------------------------

onnx_adam = define("onnx_adam", FAMILY, """
fragment onnx_adam( r: tensor<scalar>, t: tensor<integer>, x: tensor<scalar>, g: tensor<scalar>, v: tensor<scalar>,
                    h: tensor<scalar>, alpha: scalar = 0.9, beta: scalar = 0.999, epsilon: scalar = 1e-6,
                    norm_coefficient: scalar = 0.0, norm_coefficient_post: scalar = 0.0 )
-> ( x_new: tensor<scalar>, v_new: tensor<scalar>, h_new: tensor<scalar> );
""", domain="onnx", doc="ONNX Adam (ai.onnx.preview.training): one step for tensor x with gradient g, momentum "
                        "v and second moment h; the rate r is bias-corrected once the update count t > 0.")


@onnx_adam.shape
def _adam_shape(r, t, x, g, v, h, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
                norm_coefficient_post=0.0):
    s = _shapes("onnx_adam", r, t, x, g, v, h)
    return s, s, s


def _adam(formal: bool):
    def kernel(r, t, x, g, v, h, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
               norm_coefficient_post=0.0):
        x = np.asarray(x)
        acc = _acc(x, formal)
        r, t = _scalars(r, t, acc)
        xa, ga, va, ha = (np.asarray(a).astype(acc) for a in (x, g, v, h))
        a, b = acc(alpha), acc(beta)
        reg = acc(norm_coefficient) * xa + ga
        v_new = a * va + (acc(1) - a) * reg
        h_new = b * ha + (acc(1) - b) * (reg * reg)
        rate = r * np.sqrt(acc(1) - b ** t) / (acc(1) - a ** t) if t > 0 else r
        x_new = (acc(1) - acc(norm_coefficient_post)) * (xa - rate * (v_new / (np.sqrt(h_new) + acc(epsilon))))
        return x_new.astype(x.dtype), v_new.astype(np.asarray(v).dtype), h_new.astype(np.asarray(h).dtype)
    return kernel


onnx_adam.formal(_adam(True))
onnx_adam.fast(_adam(False))


# --- Momentum -----------------------------------------------------------------------------------

onnx_momentum = define("onnx_momentum", FAMILY, """
fragment onnx_momentum( r: tensor<scalar>, t: tensor<integer>, x: tensor<scalar>, g: tensor<scalar>, v: tensor<scalar>,
                        alpha: scalar, beta: scalar, norm_coefficient: scalar, mode: string = 'standard' )
-> ( x_new: tensor<scalar>, v_new: tensor<scalar> );
""", domain="onnx", doc="ONNX Momentum (ai.onnx.preview.training): one step of stochastic gradient descent with "
                        "momentum v, 'standard' or 'nesterov'.")


@onnx_momentum.shape
def _momentum_shape(r, t, x, g, v, alpha, beta, norm_coefficient, mode="standard"):
    if mode not in ("standard", "nesterov"):
        raise attr_error("onnx_momentum", "mode", mode, "must be 'standard' or 'nesterov'")
    s = _shapes("onnx_momentum", r, t, x, g, v)
    return s, s


def _momentum(formal: bool):
    def kernel(r, t, x, g, v, alpha, beta, norm_coefficient, mode="standard"):
        x = np.asarray(x)
        acc = _acc(x, formal)
        r, t = _scalars(r, t, acc)
        xa, ga, va = (np.asarray(a).astype(acc) for a in (x, g, v))
        a = acc(alpha)
        reg = acc(norm_coefficient) * xa + ga
        v_new = a * va + (acc(beta) if t > 0 else acc(1)) * reg
        x_new = xa - r * v_new if mode == "standard" else xa - r * (reg + a * v_new)
        return x_new.astype(x.dtype), v_new.astype(np.asarray(v).dtype)
    return kernel


onnx_momentum.formal(_momentum(True))
onnx_momentum.fast(_momentum(False))
