"""ONNX NegativeLogLikelihoodLoss (opset 22) and SoftmaxCrossEntropyLoss (opset 13) as single
operations.

Both are ONNX functions over gathers, masks and reductions with a data-dependent divisor (the
summed weights of the targets that are not ``ignore_index``), which NNEF's operations cannot
express.  ``ignore_index`` is optional in ONNX, so it is an ``integer[]`` here: empty when the
model gives none, one value otherwise.  An absent ``weight`` is the literal 1.0 (every class
weighs one).
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define

FAMILY = "onnx_losses"
_REDUCTIONS = ("none", "sum", "mean")

onnx_negative_log_likelihood_loss = define("onnx_negative_log_likelihood_loss", FAMILY, """
fragment onnx_negative_log_likelihood_loss(
    input: tensor<scalar>,
    target: tensor<integer>,
    weight: tensor<scalar> = 1.0,
    reduction: string = 'mean',
    ignore_index: integer[] = [] )
-> ( loss: tensor<scalar> );
""", domain="onnx", doc="ONNX NegativeLogLikelihoodLoss: -input[n, target[n, d...], d...] * weight[target], "
                        "reduced by none / sum / weighted mean; targets equal to ignore_index count 0.")


def _loss_shape(name, x, target, weight, reduction, ignore_index):
    if reduction not in _REDUCTIONS:
        raise attr_error(name, "reduction", reduction, "must be 'none', 'sum' or 'mean'")
    if len(ignore_index) > 1:
        raise attr_error(name, "ignore_index", ignore_index, "holds at most one class index")
    if len(x) < 2:
        raise op_error(name, f"the input needs shape [N, C, d1, ...], got rank {len(x)}")
    if len(target) != len(x) - 1 or any(a is not None and b is not None and a != b
                                        for a, b in zip(target, x[:1] + x[2:], strict=True)):
        raise op_error(name, f"target shape {list(target)} must be the input's {list(x)} without C")
    if len(weight) not in (0, 1) or (len(weight) == 1 and None not in (weight[0], x[1]) and weight[0] != x[1]):
        raise op_error(name, f"weight must have shape [C] = [{x[1]}], got {list(weight)}")
    return tuple(target) if reduction == "none" else ()


@onnx_negative_log_likelihood_loss.shape
def _nll_shape(x, target, weight=(), reduction="mean", ignore_index=()):
    return _loss_shape("onnx_negative_log_likelihood_loss", x, target, weight, reduction, ignore_index)


def _check_targets(name: str, target: np.ndarray, classes: int, ignore: list[int]) -> None:
    bad = (target < 0) | (target >= classes)
    if ignore:
        bad &= target != ignore[0]
    if bad.any():
        raise op_error(name, f"target value {int(target[bad].reshape(-1)[0])} is not a class index "
                             f"in [0, {classes}) nor the ignore_index")


def nll_formal(name: str, x, target, weight, reduction: str, ignore_index) -> np.ndarray:
    """The loss as ONNX defines it, one target at a time, in float64."""
    x = np.asarray(x)
    target = np.asarray(target)
    classes = x.shape[1]
    ignore = list(ignore_index)
    _check_targets(name, target, classes, ignore)
    w = np.broadcast_to(np.asarray(weight, np.float64), (classes,))
    loss = np.zeros(target.shape, np.float64)
    weights = np.zeros(target.shape, np.float64)
    for index in np.ndindex(target.shape):
        c = int(target[index])
        if ignore and c == ignore[0]:
            continue
        weights[index] = w[c]
        loss[index] = -float(x[(index[0], c) + index[1:]]) * w[c]
    if reduction == "none":
        return loss.astype(x.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(), x.dtype)
    return np.asarray(loss.sum() / weights.sum(), x.dtype)


def nll_fast(name: str, x, target, weight, reduction: str, ignore_index) -> np.ndarray:
    x = np.asarray(x)
    target = np.asarray(target)
    classes = x.shape[1]
    ignore = list(ignore_index)
    _check_targets(name, target, classes, ignore)
    keep = target != ignore[0] if ignore else np.ones(target.shape, bool)
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    w = np.broadcast_to(np.asarray(weight, acc), (classes,))[safe] * keep
    loss = -picked.astype(acc) * w
    if reduction == "none":
        return loss.astype(x.dtype)
    if reduction == "sum":
        return np.asarray(loss.sum(dtype=np.float64), x.dtype)
    return np.asarray(loss.sum(dtype=np.float64) / w.sum(dtype=np.float64), x.dtype)


@onnx_negative_log_likelihood_loss.formal
def _nll_formal(x, target, weight=1.0, reduction="mean", ignore_index=()):
    _nll_shape(np.shape(x), np.shape(target), np.shape(weight), reduction, ignore_index)
    return nll_formal("onnx_negative_log_likelihood_loss", x, target, weight, reduction, ignore_index)


@onnx_negative_log_likelihood_loss.fast
def _nll_fast(x, target, weight=1.0, reduction="mean", ignore_index=()):
    _nll_shape(np.shape(x), np.shape(target), np.shape(weight), reduction, ignore_index)
    return nll_fast("onnx_negative_log_likelihood_loss", x, target, weight, reduction, ignore_index)


onnx_softmax_cross_entropy_loss = define("onnx_softmax_cross_entropy_loss", FAMILY, """
fragment onnx_softmax_cross_entropy_loss(
    scores: tensor<scalar>,
    labels: tensor<integer>,
    weights: tensor<scalar> = 1.0,
    reduction: string = 'mean',
    ignore_index: integer[] = [] )
-> ( loss: tensor<scalar>, log_prob: tensor<scalar> );
""", domain="onnx", doc="ONNX SoftmaxCrossEntropyLoss: the negative log-likelihood loss of the log-softmax "
                        "of the scores over axis 1; also the log-probabilities.")


@onnx_softmax_cross_entropy_loss.shape
def _sce_shape(x, labels, weights=(), reduction="mean", ignore_index=()):
    loss = _loss_shape("onnx_softmax_cross_entropy_loss", x, labels, weights, reduction, ignore_index)
    return loss, tuple(x)


@onnx_softmax_cross_entropy_loss.formal
def _sce_formal(x, labels, weights=1.0, reduction="mean", ignore_index=()):
    # SoftmaxCrossEntropyLoss-13: log_prob = x - max - log(sum(exp(x - max))) over axis 1,
    # then NegativeLogLikelihoodLoss(log_prob, labels, weights).
    _sce_shape(np.shape(x), np.shape(labels), np.shape(weights), reduction, ignore_index)
    x = np.asarray(x)
    xu = x.astype(np.float64)
    shifted = xu - xu.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = nll_formal("onnx_softmax_cross_entropy_loss", log_prob, labels, weights, reduction, ignore_index)
    return loss.astype(x.dtype), log_prob.astype(x.dtype)


@onnx_softmax_cross_entropy_loss.fast
def _sce_fast(x, labels, weights=1.0, reduction="mean", ignore_index=()):
    _sce_shape(np.shape(x), np.shape(labels), np.shape(weights), reduction, ignore_index)
    x = np.asarray(x)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    shifted = x.astype(acc) - x.max(axis=1, keepdims=True).astype(acc)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = nll_fast("onnx_softmax_cross_entropy_loss", log_prob, labels, weights, reduction, ignore_index)
    return loss.astype(x.dtype), log_prob.astype(x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
