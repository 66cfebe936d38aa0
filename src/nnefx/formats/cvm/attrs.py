"""Operator attributes in CVM graph JSON: their spelling, types, defaults and arity.

``op_attrs[node]`` is a JSON object whose values are the Python ``str()`` of each attribute
(``"(1, 2)"``, ``"True"``, ``"None"``).  Each runtime operator accepts a fixed set of keys;
unknown keys are errors except "hidden" ``__name__`` keys, which the runtime ignores.
Attributes that can take a single value in the runtime (layouts, ``method``, NMS's fixed
column indices) are validated here and not carried into the nnefx graph; ``is_sign`` and
reduce's ``dtype`` are accepted and ignored, as the runtime does.
"""

from __future__ import annotations

import re
from typing import Any

from ...diagnostics import NNEFXError

REQUIRED = object()

# kinds: "int", "bool", "ints", "optint", ("enum", allowed...), ("fixed", value) and "ignore"
_REDUCE = {"axis": ("ints", ()), "keepdims": ("bool", False), "exclude": ("bool", False),
           "dtype": ("ignore", "int32")}
_SHIFT = {"precision": ("int", REQUIRED), "shift_bit": ("int", REQUIRED), "is_sign": ("ignore", True)}

SCHEMAS: dict[str, dict[str, tuple[Any, Any]]] = {
    "sum": _REDUCE, "max": _REDUCE,
    "broadcast_add": {}, "broadcast_sub": {}, "broadcast_mul": {}, "broadcast_div": {},
    "broadcast_max": {}, "broadcast_greater": {},
    "conv2d": {"channels": ("int", REQUIRED), "kernel_size": ("ints", REQUIRED),
               "strides": ("ints", (1, 1)), "padding": ("ints", (0, 0)), "dilation": ("ints", (1, 1)),
               "groups": ("int", 1), "layout": (("enum", "NCHW"), "NCHW"),
               "kernel_layout": (("enum", "OIHW"), "OIHW"),
               "out_layout": (("enum", "__undef__", "NCHW"), "__undef__"),
               "out_dtype": (("enum", "same", "int32"), "same"), "use_bias": ("bool", True)},
    "dense": {"units": ("int", REQUIRED), "use_bias": ("bool", True)},
    "relu": {}, "abs": {}, "negative": {}, "cvm_precision": {}, "elemwise_add": {}, "elemwise_sub": {},
    "flatten": {}, "where": {},
    "max_pool2d": {"pool_size": ("ints", REQUIRED), "strides": ("ints", (1, 1)),
                   "padding": ("ints", (0, 0)), "layout": (("enum", "NCHW"), "NCHW"),
                   "ceil_mode": ("bool", False)},
    "upsampling": {"scale": ("int", REQUIRED), "layout": (("enum", "NCHW"), "NCHW"),
                   "method": (("enum", "NEAREST_NEIGHBOR"), "NEAREST_NEIGHBOR")},
    "clip": {"a_min": ("int", REQUIRED), "a_max": ("int", REQUIRED)},
    "cvm_clip": {"precision": ("int", REQUIRED), "is_sign": ("ignore", True)},
    "cvm_right_shift": _SHIFT, "cvm_left_shift": _SHIFT,
    "repeat": {"repeats": ("int", REQUIRED), "axis": ("int", 0)},
    "tile": {"reps": ("ints", (0,))},
    "concatenate": {"axis": ("int", 1)},
    "transpose": {"axes": ("ints", ())},
    "strided_slice": {"begin": ("ints", (0,)), "end": ("ints", (1,)), "stride": ("ints", ())},
    "slice_like": {"axis": ("ints", ())},
    "take": {"axis": ("optint", None)},
    "cvm_lut": {"in_dim": ("int", REQUIRED)},
    "expand_dims": {"axis": ("int", REQUIRED), "num_newaxis": ("int", 1)},
    "reshape": {"shape": ("ints", REQUIRED)},
    "squeeze": {"axis": ("ints", ())},
    "get_valid_counts": {"score_threshold": ("int", 0)},
    "non_max_suppression": {"max_output_size": ("int", -1), "iou_threshold": ("int", 50),
                            "force_suppress": ("bool", False), "top_k": ("int", -1),
                            "coord_start": (("fixed", 2), 2), "score_index": (("fixed", 1), 1),
                            "id_index": (("fixed", 0), 0), "return_indices": (("fixed", False), False),
                            "invalid_to_bottom": (("fixed", True), True)},
}

#: Fixed input counts (conv2d/dense: 3 with use_bias, else 2; concatenate: at least 1).
_ARITY = {"broadcast_add": 2, "broadcast_sub": 2, "broadcast_mul": 2, "broadcast_div": 2,
          "broadcast_max": 2, "broadcast_greater": 2, "elemwise_add": 2, "elemwise_sub": 2,
          "slice_like": 2, "take": 2, "cvm_lut": 2, "where": 3, "non_max_suppression": 2}

#: Operators whose output may share its input's storage (runtime's in-place list).
INPLACE = {"flatten", "relu", "expand_dims", "reshape", "squeeze", "abs", "cvm_precision", "elemwise_add",
           "elemwise_sub", "clip", "cvm_clip", "cvm_right_shift", "cvm_left_shift"}

_INT = re.compile(r"^\s*[+-]?\d+L?\s*$")


def num_outputs(op: str) -> int:
    return 2 if op == "get_valid_counts" else 1


def expected_inputs(op: str, attribs: dict[str, Any]) -> int | None:
    """The input count the operator needs (None: at least one)."""
    if op in ("conv2d", "dense"):
        return 3 if attribs.get("use_bias", True) else 2
    if op == "concatenate":
        return None
    return _ARITY.get(op, 1)


def _int(text: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"expected an integer, got '{text}'")
    return int(text.strip().rstrip("L"))


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1"):
        return True
    if t in ("false", "0"):
        return False
    raise ValueError(f"expected True or False, got '{text}'")


def _ints(text: str) -> tuple[int, ...]:
    t = text.strip()
    if t[:1] in "([" and t:
        close = ")" if t[0] == "(" else "]"
        if not t.endswith(close):
            raise ValueError(f"unbalanced tuple '{text}'")
        inner = t[1:-1].strip()
        if not inner:
            return ()
        parts = [p.strip() for p in inner.split(",")]
        if parts[-1] == "":
            parts.pop()
        return tuple(_int(p) for p in parts)
    return (_int(t),)


def parse_attrs(op: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Typed attributes for runtime operator ``op`` (defaults filled, fixed/ignored ones dropped).

    Raises ``ValueError`` with a message naming the attribute; the caller adds the location.
    """
    schema = SCHEMAS[op]
    out: dict[str, Any] = {}
    for key, text in raw.items():
        if key.startswith("__") and key.endswith("__") and len(key) > 4:
            continue  # "hidden" attributes are ignored by the runtime
        if key not in schema:
            raise ValueError(f"unknown attribute '{key}' for operator '{op}'")
        if not isinstance(text, str):
            raise ValueError(f"attribute '{key}' must be a string, got {type(text).__name__}")
        kind = schema[key][0]
        try:
            if kind == "int":
                out[key] = _int(text)
            elif kind == "bool":
                out[key] = _bool(text)
            elif kind == "ints":
                out[key] = _ints(text)
            elif kind == "optint":
                out[key] = None if text.strip() == "None" else _int(text)
            elif kind == "ignore":
                continue
            elif kind[0] == "enum":
                if text.strip() not in kind[1:]:
                    raise ValueError(f"must be one of {', '.join(kind[1:])}")
            elif kind[0] == "fixed":
                value = _bool(text) if isinstance(kind[1], bool) else _int(text)
                if value != kind[1]:
                    raise ValueError(f"only {kind[1]} is supported")
        except ValueError as exc:
            raise ValueError(f"attribute '{key}' = '{text}': {exc}") from None
    for key, (kind, default) in schema.items():
        if key in out or kind == "ignore" or (isinstance(kind, tuple)):
            continue
        if default is REQUIRED:
            raise ValueError(f"operator '{op}' needs attribute '{key}'")
        out[key] = default
    return out


def to_nnefx(op: str, attribs: dict[str, Any]) -> dict[str, Any]:
    """Runtime attributes -> the ``cvm_<op>`` operation's attributes (lists for tuples)."""
    out: dict[str, Any] = {}
    for key, value in attribs.items():
        if op == "take" and key == "axis":
            value = [] if value is None else [value]
        elif op == "max_pool2d" and key == "padding" and len(value) == 1:
            value = [value[0], value[0]]
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def error(message: str, file: str | None, field: str) -> NNEFXError:
    from ...diagnostics import Location

    return NNEFXError(message, Location(file, field=field))
