"""What flows along an edge while a graph is imported: :class:`Value` and :class:`Dim`.

A reader (IR, ONNX, any later one) hands every operator reader its inputs as Values: a graph
tensor, a constant known while loading, or a partially known integer vector (symbolic
shape).  Nothing here knows a file format.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import Location, NNEFXError


@dataclass
class Value:
    """One edge value of the graph being imported."""

    tensor: str | None = None
    const: np.ndarray | None = None
    #: Element type (``f32``, ``i64``, ``boolean``, ...) of the value.
    etype: str = "f32"
    #: Best-known shape: inferred, else declared by the file (None dims = dynamic).
    shape: tuple | None = None
    #: Name hint for a constant's graph tensor / variable label.
    label: str | None = None
    #: A partially known integer vector (object array of ints and :class:`Dim`), e.g. the
    #: shape of a tensor with a dynamic batch; ``lazy`` computes it at run time if needed.
    sym: np.ndarray | None = None
    lazy: Callable[[], str] | None = None
    #: Set when the value cannot be used (e.g. pooling indices): the reason, raised on use.
    unsupported: str | None = None
    #: The file's bytes behind a bit-packed (``u1``) constant, for readers that unpack it in
    #: an order of their own (IR BinaryConvolution filters).
    packed: np.ndarray | None = None
    #: What the value is (:data:`nnefx.graph.KINDS`): a tensor, or a sequence/optional graph
    #: tensor (``etype`` is then its elements'; ``shape`` is None).
    kind: str = "tensor"

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass(frozen=True)
class Dim:
    """An unknown extent: dimension ``axis`` of graph tensor ``tensor`` (symbolic shapes)."""

    tensor: str
    axis: int

    def __repr__(self) -> str:
        return f"{self.tensor}.shape[{self.axis}]"


#: Element type names of imported values (the OpenVINO IR v11 spelling, which ONNX's
#: ``TensorProto.DataType`` maps onto one to one).
ETYPE_NAMES = ("f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "boolean",
               "u1", "u4", "i4")

#: IR legacy ``precision`` names -> element type
PRECISIONS = {
    "FP64": "f64", "FP32": "f32", "FP16": "f16", "BF16": "bf16",
    "I64": "i64", "I32": "i32", "I16": "i16", "I8": "i8",
    "U64": "u64", "U32": "u32", "U16": "u16", "U8": "u8",
    "BOOL": "boolean", "BIN": "u1", "U1": "u1", "U4": "u4", "I4": "i4",
    "Q78": "i16",
}


def element_type(name: str | None, loc: Location | None = None) -> str:
    """Normalise an element type spelling (``f32``, ``FP32``, ``boolean``...) to :data:`ETYPE_NAMES`."""
    if name is None:
        raise NNEFXError("missing element type", loc)
    key = name.strip()
    if key in ETYPE_NAMES:
        return key
    up = key.upper()
    if up in PRECISIONS:
        return PRECISIONS[up]
    if key.lower() in ETYPE_NAMES:
        return key.lower()
    raise NNEFXError(f"unknown element type '{name}'", loc)


def const(arr: Any, dtype: Any = None, label: str | None = None) -> Value:
    """A load-time constant Value holding ``arr``."""
    a = np.asarray(arr, dtype=dtype)
    return Value(const=a, etype=etype_of_array(a), shape=tuple(a.shape), label=label)


def nnef_dtype(etype: str) -> str:
    """The abstract NNEF data type an element type maps onto."""
    if etype in ("f64", "f32", "f16", "bf16") or etype in etypes.FLOATS:
        return "scalar"
    if etype in ("boolean", "bool"):
        return "logical"
    if etype == "string":  # no NNEF tensor type: the data model's fourth kind (nnefx.graph.DTYPES)
        return "string"
    return "integer"


def dtype_of(v: Value) -> str:
    return nnef_dtype(v.etype)


def etype_for(dtype: str) -> str:
    """The default element type of an abstract NNEF data type."""
    return {"scalar": "f32", "integer": "i64", "logical": "boolean", "string": "string"}.get(dtype, "f32")


def storage_array(arr: np.ndarray, etype: str) -> np.ndarray:
    """How a constant is held in the graph: float32 (f64 stays f64), int64, bool."""
    a = np.asarray(arr)
    kind = nnef_dtype(etype)
    if kind == "scalar":
        dt = np.float64 if a.dtype == np.float64 else np.float32
    elif kind == "logical":
        dt = np.bool_
    else:
        dt = np.int64
    out = np.asarray(a, dtype=dt)  # no copy when it already fits: file weights stay memory-mapped
    if out.ndim and not out.flags.c_contiguous:
        out = np.ascontiguousarray(out)
    return out


def etype_of_array(arr: np.ndarray) -> str:
    dt = np.asarray(arr).dtype
    if dt == np.bool_:
        return "boolean"
    if dt.kind in "OU":  # strings: object arrays of str (nnefx.graph.STRING), or numpy str_
        return "string"
    if dt.kind == "f":
        return {2: "f16", 4: "f32", 8: "f64"}[dt.itemsize]
    if dt.kind == "i":
        return f"i{dt.itemsize * 8}"
    if dt.kind == "u":
        return f"u{dt.itemsize * 8}"
    if dt.kind == "V":  # bfloat16, the float8/float4 kinds, int4/int2 (ml_dtypes)
        try:
            return etypes.from_numpy(dt)
        except NNEFXError:
            pass
    raise NNEFXError(f"unsupported constant data type {dt}")


def concrete(etype: str) -> str | None:
    """The :mod:`nnefx.etypes` name of an imported value's element type (``boolean`` is
    ``bool``); None for ``u1`` (bit-packed, held as booleans)."""
    if etype == "boolean":
        return "bool"
    if etype == "u1":
        return None
    return etypes.check(etype)


def tensor_etype(etype: str) -> str | None:
    """What :attr:`nnefx.graph.Tensor.etype` records for a value of ``etype``: None where it is
    the default storage of its abstract type (f32, i64, bool), so plain graphs stay plain."""
    et = concrete(etype)
    if et is None or etypes.DEFAULTS.get(nnef_dtype(etype)) == et:
        return None
    return et


def reading_etype(etype: str | None, dtype: str) -> str:
    """The import layer's name for a tensor's concrete type (its default when None)."""
    if etype is None:
        return etype_for(dtype)
    return "boolean" if etype == "bool" else etype


def safe_label(name: str) -> str:
    """A variable label / identifier-ish version of ``name`` (NNEF label charset)."""
    s = re.sub(r"[^A-Za-z0-9_\-./]", "_", name).strip("/")
    # no '.'/'..' path segments: a label names a file inside the model folder
    parts = [p if p not in ("", ".", "..") else "_" for p in s.split("/")]
    return "/".join(parts) if s else "v"


def ints(a: Any) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]
