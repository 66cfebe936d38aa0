"""Operators of the ONNX classical machine-learning domain (``ai.onnx.ml``) that work on
numeric tensors: Binarizer (opset 1), ArrayFeatureExtractor (opset 1) and LabelEncoder
(opsets 2-4, numeric keys and values).  TreeEnsemble (opset 5) is ``tree_ensemble.py``.

* ``onnx_binarizer``: 1 where ``x > threshold``, else 0, in ``x``'s element type.
* ``onnx_array_feature_extractor``: the items ``indices`` (every index, flattened) picks from
  the last axis of ``x``; a 1-D ``x`` gives a ``[1, n]`` result, as onnxruntime's
  kernel does (the operator docs leave that case open).  An index outside ``[0, last)`` is an
  error naming it.
* ``onnx_label_encoder``: each item replaced by the value of its key (``keys[i]`` maps to
  ``values[i]``; a repeated key: the last one counts; a NaN key matches every NaN input),
  ``default`` where no key matches.  Keys, values and the default are tensors of their own
  element types, so the result has the values' type (int16 keys to float64 values ...).
"""

from __future__ import annotations

import math

import numpy as np

from .._common import op_error
from ..registry import define

FAMILY = "onnx_ml"

# --- Binarizer ----------------------------------------------------------------------------------

onnx_binarizer = define("onnx_binarizer", FAMILY, """
fragment onnx_binarizer<?>( input: tensor<?>, threshold: scalar = 0.0 ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX-ML Binarizer: 1 where input > threshold, else 0, in the input's "
                                      "element type.")


@onnx_binarizer.shape
def _binarizer_shape(x, threshold=0.0, dtype=None):
    return tuple(x)


@onnx_binarizer.formal
def _binarizer_formal(x, threshold=0.0, dtype=None):
    x = np.asarray(x)
    out = np.empty(x.shape, x.dtype)
    for index in np.ndindex(x.shape):
        out[index] = 1 if x[index].item() > threshold else 0  # Python compares int and float exactly
    return out


@onnx_binarizer.fast
def _binarizer_fast(x, threshold=0.0, dtype=None):
    x = np.asarray(x)
    if x.dtype.kind in "iu":  # x > t exactly is x > floor(t) for integers (no rounding of large x)
        info = np.iinfo(x.dtype)
        if not math.isfinite(threshold) or not info.min <= math.floor(threshold) < info.max:
            return np.full(x.shape, threshold < 0, x.dtype)  # every item above, or none
        return (x > math.floor(threshold)).astype(x.dtype)
    wide = x if x.dtype == np.float64 else x.astype(np.float64)
    return (wide > threshold).astype(x.dtype)


# --- ArrayFeatureExtractor ----------------------------------------------------------------------

onnx_array_feature_extractor = define("onnx_array_feature_extractor", FAMILY, """
fragment onnx_array_feature_extractor<?>( input: tensor<?>, indices: tensor<integer> ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX-ML ArrayFeatureExtractor: the items of the last axis that `indices` "
                                      "(flattened) names; a 1-D input gives one row.")


def _count(indices) -> int | None:
    n = 1
    for d in indices:
        if d is None:
            return None
        n *= d
    return n


@onnx_array_feature_extractor.shape
def _afe_shape(x, indices, dtype=None):
    if len(x) == 0:
        raise op_error("onnx_array_feature_extractor", "the input must have at least one axis")
    n = _count(indices)
    return (1, n) if len(x) == 1 else (*x[:-1], n)


def _picked(x: np.ndarray, indices) -> list[int]:
    last = x.shape[-1]
    picked = [int(i) for i in np.asarray(indices).reshape(-1)]
    bad = [i for i in picked if not 0 <= i < last]
    if bad:
        raise op_error("onnx_array_feature_extractor", f"index {bad[0]} is outside [0, {last}) of the last axis")
    return picked


@onnx_array_feature_extractor.formal
def _afe_formal(x, indices, dtype=None):
    x = np.asarray(x)
    picked = _picked(x, indices)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty((rows.shape[0], len(picked)), x.dtype)
    for r in range(rows.shape[0]):
        for k, i in enumerate(picked):
            out[r, k] = rows[r, i]
    return out.reshape(_afe_shape(x.shape, np.shape(indices)))


@onnx_array_feature_extractor.fast
def _afe_fast(x, indices, dtype=None):
    x = np.asarray(x)
    return x[..., _picked(x, indices)].reshape(_afe_shape(x.shape, np.shape(indices)))


# --- LabelEncoder -------------------------------------------------------------------------------

onnx_label_encoder = define("onnx_label_encoder", FAMILY, """
fragment onnx_label_encoder<?>( input: tensor<>, keys: tensor<>, values: tensor<?>, default: tensor<?> )
-> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX-ML LabelEncoder: each item replaced by the value of the matching key "
                                      "(the last of repeated keys; NaN matches NaN), `default` (one item) where "
                                      "none matches.")


@onnx_label_encoder.shape
def _label_shape(x, keys, values, default, dtype=None):
    name = "onnx_label_encoder"
    if len(keys) != 1 or len(values) != 1 or (None not in (keys[0], values[0]) and keys[0] != values[0]):
        raise op_error(name, f"keys and values must be 1-D of one length, got shapes {list(keys)} and {list(values)}")
    if _count(default) not in (1, None):
        raise op_error(name, f"the default must hold one value, got shape {list(default)}")
    return tuple(x)


@onnx_label_encoder.etypes
def _label_etypes(x, keys, values, default):
    return values


def _is_nan(v) -> bool:
    return isinstance(v, float) and v != v


@onnx_label_encoder.formal
def _label_formal(x, keys, values, default, dtype=None):
    x, values = np.asarray(x), np.asarray(values)
    table: dict = {}
    nan_value = None
    for k, v in zip(np.asarray(keys).tolist(), values.tolist(), strict=True):
        if _is_nan(k):
            nan_value = v
        else:
            table[k] = v
    fallback = np.asarray(default).reshape(-1)[0]
    out = np.empty(x.shape, values.dtype)
    for index in np.ndindex(x.shape):
        item = x[index]
        item = item.item() if isinstance(item, np.generic) else item   # str items of a string tensor
        out[index] = nan_value if _is_nan(item) and nan_value is not None else table.get(item, fallback)
    return out


@onnx_label_encoder.fast
def _label_fast(x, keys, values, default, dtype=None):
    x, keys, values = np.asarray(x), np.asarray(keys), np.asarray(values)
    out = np.full(x.shape, np.asarray(default).reshape(-1)[0], values.dtype)
    if keys.size == 0:
        return out
    # the last of repeated keys counts: unique keys of the reversed list keep their last place
    order, first = np.unique(keys[::-1], return_index=True)
    chosen = values[::-1][first]
    nan = np.isnan(order) if order.dtype.kind == "f" else np.zeros(order.shape, bool)
    order, nan_values, chosen = order[~nan], chosen[nan], chosen[~nan]
    probe = x.astype(np.result_type(x.dtype, order.dtype), copy=False)
    at = np.clip(np.searchsorted(order, probe), 0, max(len(order) - 1, 0))
    if len(order):
        hit = order[at] == probe
        out[hit] = chosen[at[hit]]
    if nan_values.size and x.dtype.kind == "f":
        out[np.isnan(x)] = nan_values[0]
    return out
