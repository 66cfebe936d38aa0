"""How NNEF data types are stored in numpy arrays while a graph runs.

NNEF has three tensor data types (``scalar``, ``integer``, ``logical``) and leaves their
machine representation to the implementation.  nnefx stores them as float32, int64 and
bool, like the official tools' Python side.  A model may ask for a different width through
``Model.extras["storage"]`` (e.g. ``{"integer": "int32"}`` for graphs of the deterministic
integer runtime), so the session itself never needs to know which format a graph came from.

Conversions check the *kind* (float / integer / bool) strictly — feeding floats to an
``integer`` input is a user error, not something to round silently — but adapt the *width*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import etypes
from ..diagnostics import Location, NNEFXError

DEFAULT_STORAGE: dict[str, np.dtype] = {
    "scalar": np.dtype(np.float32),
    "integer": np.dtype(np.int64),
    "logical": np.dtype(np.bool_),
    # not an NNEF tensor type: ONNX string tensors (nnefx.graph.DTYPES), Python str items
    "string": np.dtype(object),
}

_KIND_OF = {"scalar": "f", "integer": "iu", "logical": "b", "string": "OUS"}
_KIND_WORDS = {"scalar": "floating-point", "integer": "integer", "logical": "boolean", "string": "string"}


def storage_map(*overrides: Mapping[str, Any] | None) -> dict[str, np.dtype]:
    """The NNEF-type → numpy-dtype map, defaults updated by each mapping in turn."""
    result = dict(DEFAULT_STORAGE)
    for mapping in overrides:
        for key, value in (mapping or {}).items():
            if key not in result:
                raise NNEFXError(f"storage override for unknown data type '{key}' "
                                 f"(expected one of {', '.join(DEFAULT_STORAGE)})")
            dt = np.dtype(value)
            if dt.kind not in _KIND_OF[key]:
                raise NNEFXError(f"storage for '{key}' must be a {_KIND_WORDS[key]} dtype, not {dt}")
            result[key] = dt
    return result


def kind_matches(array: np.ndarray, nnef_dtype: str) -> bool:
    """True when ``array``'s numpy kind can hold ``nnef_dtype`` values without reinterpretation."""
    return array.dtype.kind in _KIND_OF.get(nnef_dtype, "fiub")


def to_storage(value: Any, nnef_dtype: str, storage: Mapping[str, np.dtype], what: str,
               location: Location | None = None, etype: str | None = None) -> np.ndarray:
    """``value`` as an array of the storage dtype for ``nnef_dtype`` (or of the concrete
    element type ``etype``, :mod:`nnefx.etypes`); wrong kinds are errors.

    Integer narrowing (int64 data into int32 storage) is allowed only when every value fits,
    so nothing wraps around silently; floating-point data of another width is rounded to
    nearest even (a float64 array fed to a float16 input).
    """
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if nnef_dtype not in storage:
        raise NNEFXError(f"{what} has unknown data type '{nnef_dtype}' (expected scalar, integer or logical)",
                         location)
    if nnef_dtype == "string":
        return _string_storage(array, what, location)
    target = storage[nnef_dtype] if etype is None else etypes.numpy_dtype(etype)
    if array.dtype == target:
        return array
    if array.size == 0:  # no item of a wrong kind: an empty list ([]) reads as float64 in numpy
        return np.empty(array.shape, target)
    if not etypes.kind_fits(array.dtype, nnef_dtype):
        want = f"{nnef_dtype} ({_KIND_WORDS[nnef_dtype]})" if etype is None else f"{etype} ({nnef_dtype})"
        raise NNEFXError(f"{what} must be {want} data, got {array.dtype}", location)
    if target.kind in "iu" and array.size:
        info = np.iinfo(target)
        lo, hi = array.min(), array.max()
        if lo < info.min or hi > info.max:
            raise NNEFXError(f"{what} has values outside the {target} range of this graph "
                             f"([{lo}, {hi}])", location)
    elif etype in etypes.INTEGERS and etypes.BITS[etype] < 8 and array.size:
        wide = array.astype(np.int64)
        info = ml_info(target)
        if wide.min() < int(info.min) or wide.max() > int(info.max):
            raise NNEFXError(f"{what} has values outside the {etype} range ([{wide.min()}, {wide.max()}])",
                             location)
    if array.dtype.kind == "V" and target.kind == "V":
        array = array.astype(np.float64 if nnef_dtype == "scalar" else np.int64)  # ml_dtypes cast via wide
    with np.errstate(over="ignore", invalid="ignore"):  # float overflow is infinity, as the type defines
        return array.astype(target)


def _string_storage(array: np.ndarray, what: str, location: Location | None) -> np.ndarray:
    """A string tensor as stored: an object array of ``str`` (numpy ``str_`` arrays converted)."""
    if array.dtype.kind == "U":
        return array.astype(object)
    if array.dtype == object and all(isinstance(v, str) for v in array.flat):
        return array
    raise NNEFXError(f"{what} must be string data (str items), got {array.dtype}", location)


def ml_info(dtype: np.dtype) -> Any:
    """``iinfo`` of an ml_dtypes integer type (int2/int4/uint2/uint4)."""
    import ml_dtypes

    return ml_dtypes.iinfo(dtype)


def literal_array(value: Any, nnef_dtype: str | None, storage: Mapping[str, np.dtype]) -> np.ndarray:
    """A literal used where a tensor is expected (``add(x, 1.0)``): a rank-0 array.

    The declared parameter type decides the storage (an integer literal passed for a
    ``tensor<scalar>`` becomes a float); without one, the Python type does.
    """
    if nnef_dtype is None:
        if isinstance(value, (bool, np.bool_)):
            nnef_dtype = "logical"
        elif isinstance(value, (int, np.integer)):
            nnef_dtype = "integer"
        else:
            nnef_dtype = "scalar"
    return np.asarray(value, dtype=storage[nnef_dtype])


def _param(value: Any, rank: int) -> np.ndarray:
    """A quantization parameter as float64, aligned from dimension 0 (NNEF broadcasting)."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim > rank:
        raise ValueError(f"parameter of shape {list(array.shape)} has more dimensions than the tensor")
    return array.reshape(array.shape + (1,) * (rank - array.ndim))


def dequantize(codes: np.ndarray, quant: Mapping[str, Any], what: str,
               location: Location | None = None) -> np.ndarray:
    """Real values (float32) of quantized integer ``codes`` read from a tensor file.

    The algorithm and its parameters come from the tensor's ``graph.quant`` entry (or a
    legacy header); formulas as in nnef-binary.md §7, which invert the quantization
    compounds' code computation:

    * ``zero_point_linear_quantize``: ``(q - zero_point) * scale``;
    * ``min_max_linear_quantize`` / ``linear_quantize``: with ``r = 2^bits - 1 - [signed and
      symmetric]`` and ``p = 2^(bits-1) - [symmetric]`` for signed codes (else 0):
      ``(q + p) / r * (max - min) + min``.

    ``logarithmic_quantize`` defines no code layout anyone agrees on, so it is refused.
    """
    name = str(quant.get("op_name", ""))
    rank = codes.ndim
    q = codes.astype(np.float64)
    try:
        if name == "zero_point_linear_quantize":
            values = (q - _param(quant.get("zero_point", 0), rank)) * _param(quant["scale"], rank)
        elif name in ("min_max_linear_quantize", "linear_quantize"):
            bits = int(quant["bits"])
            signed = bool(quant.get("signed", False))
            symmetric = bool(quant.get("symmetric", False))
            r = 2.0 ** bits - 1 - (1 if signed and symmetric else 0)
            p = 2.0 ** (bits - 1) - (1 if symmetric else 0) if signed else 0.0
            lo, hi = _param(quant["min"], rank), _param(quant["max"], rank)
            values = (q + p) / r * (hi - lo) + lo
        elif not name:
            raise NNEFXError(f"{what} holds quantized codes but no graph.quant entry says how to "
                             "read them", location)
        else:
            raise NNEFXError(f"{what}: reading '{name}' codes is not supported", location)
    except KeyError as exc:
        raise NNEFXError(f"{what}: quantization '{name}' lacks parameter {exc}", location) from None
    except ValueError as exc:
        raise NNEFXError(f"{what}: quantization parameters do not fit the tensor ({exc})", location) from None
    return values.astype(np.float32)
