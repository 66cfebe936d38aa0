"""The classical machine-learning domain of ONNX, ``ai.onnx.ml`` (``ops/onnx/ml.py``,
``ops/onnx/tree_ensemble.py``).

Reading: ``Binarizer`` (opset 1), ``ArrayFeatureExtractor`` (1), ``LabelEncoder`` (2-4) and
``TreeEnsemble`` (5) of numeric tensors.  Attribute lists and tensors that hold data (label
keys and values, split thresholds, leaf weights, member sets) become constant tensors of
their own element types, so float16/float64 thresholds and int16 labels keep every bit;
attributes that hold structure (node ids, modes, feature ids) stay attributes.  LabelEncoder
maps strings too (keys, values and default as string tensors); other operations' string
tensors (string features) are refused at the node.

Writing: ONNX writes each operation back as its ``ai.onnx.ml`` node (TreeEnsemble's softmax
and logistic post transforms as default-domain Softmax / Sigmoid after it); IR has no
counterpart and refuses them, located.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ..reading.values import Value, etype_of_array, nnef_dtype
from ._common import onnx_emit, onnx_kept_etypes, onnx_need, onnx_write

_ML = "ai.onnx.ml"
_STRING = 8  # TensorProto.STRING


def _const(arr: Any, etype: str | None = None) -> Value:
    arr = np.asarray(arr)
    return Value(const=arr, etype=etype or etype_of_array(arr), shape=tuple(arr.shape))


def _tensor_attr(r: Any, attrs: dict, name: str, strings: bool = False) -> np.ndarray | None:
    """A TENSOR attribute's data (None when absent); string tensors refused at the node unless
    ``strings`` (then an object array of ``str``)."""
    t = attrs.get(name)
    if t is None:
        return None
    if int(t.data_type) == _STRING and not strings:
        raise r.error(f"{r.node.op_type} with string tensors ({name}) is not supported")
    return r.tensor_array(t)


@onnx_node("Binarizer", domain=_ML)
def _binarizer(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    return onnx_emit(r, "onnx_binarizer", {"input": x}, {"threshold": float(attrs.get("threshold", 0.0))},
                     results=[x.etype], dtype=nnef_dtype(x.etype))[0]


@onnx_node("ArrayFeatureExtractor", domain=_ML)
def _array_feature_extractor(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    indices = onnx_need(r, ins, 1, "Y")
    onnx_kept_etypes(r, ins, widened=(1,))
    return onnx_emit(r, "onnx_array_feature_extractor", {"input": x, "indices": indices}, {},
                     results=[x.etype], dtype=nnef_dtype(x.etype))[0]


# --- LabelEncoder -------------------------------------------------------------------------------

#: LabelEncoder's list attributes and the element type each holds (ONNX operator docs).
_KEYS = {"keys_int64s": "i64", "keys_floats": "f32", "keys_strings": "string"}
_VALUES = {"values_int64s": ("i64", "default_int64", -1), "values_floats": ("f32", "default_float", -0.0),
           "values_strings": ("string", "default_string", "_Unused")}


@onnx_node("LabelEncoder", domain=_ML)
def _label_encoder(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    keys = [k for k in (*_KEYS, "keys_tensor") if k in attrs]
    values = [k for k in (*_VALUES, "values_tensor") if k in attrs]
    if len(keys) != 1 or len(values) != 1:
        raise r.error(f"LabelEncoder needs exactly one keys_* and one values_* attribute, got "
                      f"{', '.join(keys + values) or 'none'}")
    if keys[0] == "keys_tensor":
        key_arr = _tensor_attr(r, attrs, "keys_tensor", strings=True)
    else:
        key_arr = np.asarray(attrs[keys[0]], _dtype(_KEYS[keys[0]]))
    if values[0] == "values_tensor":
        value_arr = _tensor_attr(r, attrs, "values_tensor", strings=True)
        default = _tensor_attr(r, attrs, "default_tensor", strings=True)
        # the documented default: -1 for integers, -0.0 for floats, "_Unused" for strings
        if default is None:
            kind = value_arr.dtype.kind
            default = np.asarray("_Unused" if kind == "O" else -1 if kind in "iu" else -0.0, value_arr.dtype)
        if default.size != 1 or default.dtype != value_arr.dtype:
            raise r.error(f"default_tensor must hold one value of the values' element type, got "
                          f"{list(default.shape)} of {default.dtype}")
    else:
        et, default_name, fallback = _VALUES[values[0]]
        value_arr = np.asarray(attrs[values[0]], _dtype(et))
        default = np.asarray(attrs.get(default_name, fallback), _dtype(et))
    key_arr, value_arr = key_arr.reshape(-1), value_arr.reshape(-1)
    if key_arr.size != value_arr.size:
        raise r.error(f"LabelEncoder has {key_arr.size} keys but {value_arr.size} values")
    key_et = etype_of_array(key_arr)
    if key_et != x.etype:
        raise r.error(f"LabelEncoder keys are {key_et} but the input is {x.etype}; ONNX requires the same type")
    out_et = etype_of_array(value_arr)
    onnx_kept_etypes(r, [], outputs=(out_et,))
    given = {"input": x, "keys": _const(key_arr), "values": _const(value_arr), "default": _const(default.reshape(1))}
    return onnx_emit(r, "onnx_label_encoder", given, {}, results=[out_et], dtype=nnef_dtype(out_et))[0]


def _dtype(etype: str) -> Any:
    return {"i64": np.int64, "f32": np.float32, "string": object}[etype]


# --- TreeEnsemble -------------------------------------------------------------------------------

@onnx_node("TreeEnsemble", domain=_ML)
def _tree_ensemble(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    splits = _tensor_attr(r, attrs, "nodes_splits")
    weights = _tensor_attr(r, attrs, "leaf_weights")
    modes = _tensor_attr(r, attrs, "nodes_modes")
    if splits is None or weights is None or modes is None:
        raise r.error("TreeEnsemble needs nodes_splits, leaf_weights and nodes_modes")
    for what, arr in (("nodes_splits", splits), ("leaf_weights", weights)):
        if etype_of_array(arr) != x.etype:
            raise r.error(f"{what} is {etype_of_array(arr)} but the input is {x.etype}; ONNX requires the same type")
    members = _tensor_attr(r, attrs, "membership_values")
    given = {"input": x, "splits": _const(splits.reshape(-1)), "leaf_weights": _const(weights.reshape(-1)),
             "membership_values": None if members is None else _const(members.reshape(-1))}
    ints = {"featureids": "nodes_featureids", "truenodeids": "nodes_truenodeids", "trueleafs": "nodes_trueleafs",
            "falsenodeids": "nodes_falsenodeids", "falseleafs": "nodes_falseleafs",
            "missing_tracks_true": "nodes_missing_value_tracks_true", "leaf_targetids": "leaf_targetids",
            "tree_roots": "tree_roots"}
    data: dict[str, Any] = {k: [int(v) for v in attrs[a]] for k, a in ints.items() if a in attrs}
    data["modes"] = [int(v) for v in modes.reshape(-1)]
    data["n_targets"] = int(attrs["n_targets"]) if "n_targets" in attrs else \
        max(data.get("leaf_targetids") or [0]) + 1
    data["aggregate_function"] = int(attrs.get("aggregate_function", 1))
    data["post_transform"] = int(attrs.get("post_transform", 0))
    return onnx_emit(r, "onnx_tree_ensemble", given, data, results=[x.etype], dtype=nnef_dtype(x.etype))[0]


# ================================================================================================
# Writing
# ================================================================================================

def _data(ctx: OnnxContext, op: Operation, key: str) -> np.ndarray:
    """The load-time data of tensor input ``key`` (an attribute in ONNX), in its element type."""
    value = op.inputs[key]
    arr = ctx.data(value)
    if arr is None:
        raise ctx.fail(f"its {key} are computed at run time; ONNX takes them as attributes")
    return np.asarray(arr).astype(ctx.dtype(value), copy=False) if isinstance(value, str) else np.asarray(arr)


@to_onnx("onnx_binarizer")
def binarizer_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "Binarizer", [op.inputs["input"]], 1, domain=_ML,
               threshold=float(op.attribs.get("threshold", 0.0)))


@to_onnx("onnx_array_feature_extractor")
def array_feature_extractor_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "ArrayFeatureExtractor", [op.inputs["input"], op.inputs["indices"]], 1, domain=_ML)


@to_onnx("onnx_label_encoder")
def label_encoder_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    from onnx import numpy_helper

    keys, values, default = (_data(ctx, op, k) for k in ("keys", "values", "default"))
    keys, values = keys.reshape(-1), values.reshape(-1)
    # one entry per key, the last of repeated ones (the docs' rule; onnxruntime keeps the first)
    last: dict = {}
    for i, k in enumerate(keys.tolist()):
        last["nan" if k != k else k] = i
    keep = sorted(last.values())
    onnx_write(ctx, op, "LabelEncoder", [op.inputs["input"]], 4, domain=_ML,
               keys_tensor=numpy_helper.from_array(keys[keep], "keys_tensor"),
               values_tensor=numpy_helper.from_array(values[keep], "values_tensor"),
               default_tensor=numpy_helper.from_array(default.reshape(1).astype(values.dtype), "default_tensor"))


@to_onnx("onnx_tree_ensemble")
def tree_ensemble_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    from onnx import numpy_helper

    a = op.attribs
    post = int(a.get("post_transform", 0))
    attrs: dict[str, Any] = {
        "nodes_splits": numpy_helper.from_array(_data(ctx, op, "splits").reshape(-1), "nodes_splits"),
        "leaf_weights": numpy_helper.from_array(_data(ctx, op, "leaf_weights").reshape(-1), "leaf_weights"),
        "nodes_modes": numpy_helper.from_array(np.asarray(a["modes"], np.uint8), "nodes_modes"),
        "n_targets": int(a["n_targets"]), "aggregate_function": int(a.get("aggregate_function", 1)),
        # softmax (1) and logistic (2) as default-domain nodes after the ensemble: onnxruntime
        # reads those two codes the other way round from the operator docs
        "post_transform": post if post in (0, 3) else 0}
    for k, onnx_name in (("featureids", "nodes_featureids"), ("truenodeids", "nodes_truenodeids"),
                         ("trueleafs", "nodes_trueleafs"), ("falsenodeids", "nodes_falsenodeids"),
                         ("falseleafs", "nodes_falseleafs"), ("leaf_targetids", "leaf_targetids"),
                         ("tree_roots", "tree_roots"), ("missing_tracks_true", "nodes_missing_value_tracks_true")):
        if a.get(k):
            attrs[onnx_name] = [int(v) for v in a[k]]
    members = op.inputs.get("membership_values")
    if isinstance(members, str):
        attrs["membership_values"] = numpy_helper.from_array(_data(ctx, op, "membership_values").reshape(-1),
                                                             "membership_values")
    out = op.output_names()[0]
    shape, dtype = ctx.dims(out), ctx.dtype(out)
    y = ctx.node("TreeEnsemble", [op.inputs["input"]], shape, dtype=dtype, domain=_ML, **attrs)
    ctx.e.need_opset(5, _ML)
    if post == 1:
        y = ctx.node("Softmax", [y], shape, dtype=dtype, axis=-1)
    elif post == 2:
        y = ctx.node("Sigmoid", [y], shape, dtype=dtype)
    ctx.bind(out, y)
