"""Concrete element types: what a tensor's items are, beside NNEF's abstract data type.

NNEF text knows three abstract tensor data types (``scalar``, ``integer``, ``logical``) and
leaves their machine representation to the implementation (NNEF spec §4.1 "Types").  The
formats nnefx reads are more precise: an ONNX tensor is ``float16`` or ``uint8``, an IR port
``bf16`` or ``i4``, a tract-dialect tensor file ``f16`` or ``i64``, and a model's meaning
depends on it (a float16 network returns float16; an int8 ``Add`` wraps around at 8 bits).

So every :class:`~nnefx.graph.Tensor` carries both:

* ``Tensor.dtype`` — the abstract NNEF type, exactly what the NNEF text says or would say;
* ``Tensor.etype`` — the concrete element type from :data:`ETYPES`, or ``None`` for "the
  default storage of the abstract type" (f32 / i64 / bool, the behaviour of every graph that
  never names one).  :func:`of` resolves the default.

The vocabulary is one short name per type (tract's and OpenVINO's spelling, lower case); each
format keeps its own spelling table and converts through :func:`parse` or its own map.
``abstract(e)`` relates the two: floating-point and complex types are ``scalar``, integer
types ``integer``, ``bool`` ``logical``; ``string`` has no NNEF counterpart (``None``), so an
NNEF writer must refuse it (or use an extension that declares it).

The arithmetic contract every kernel keeps (formal and fast alike):

* **Integer types** compute exactly and wrap around modulo 2^bits of the result type, as
  ONNX and the IR opsets define for fixed-width integers (division truncates toward zero
  unless the operation's definition says otherwise).
* **Floating types narrower than f32** (``f16``, ``bf16``, the 8- and 4-bit kinds) are
  *accumulated* wider — float32 in the fast backend, float64 in the formal one — and rounded
  once, to nearest even, to the result's element type.  A float16 network therefore returns
  float16 values that equal the correctly rounded wide result for element-wise operations,
  and stay within the float16 rounding of a float32 accumulation for reductions and
  products.  :func:`compute_dtype` names the fast backend's accumulation type.  The rounding
  is per registry operation (the planner widens the arguments and stores the result, see
  :func:`kernel_dtype`); an ONNX operator its spec defines by a function body whose steps
  each round (a float16 ``Softmax``) is read as that body, or its kernel takes its inputs as
  stored and rounds where the body's nodes do (``Attention``, ``ops/onnx/attention.py``).
* ``f32``/``f64`` compute in their own type (the formal backend in float64): the rule is
  *accumulate at least as wide as the element type*.  An operation that reads or writes an
  ``f64`` tensor runs its kernel with float64 as the working float type (the planner wraps it
  in :func:`nnefx.ops._common.wide_floats`; kernels ask :func:`nnefx.ops._common.float_type`
  instead of naming float32, and its literals are float64), so a float64 graph is computed in
  float64 on both backends, not in float32 and returned typed f64.  Float32 kernels are
  untouched by this (no wrapper, the same arrays).

bfloat16, the float8 and 4-bit kinds are stored through the ``ml_dtypes`` package (numpy
has no such dtypes); it is imported only when one of them is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .diagnostics import Location, NNEFXError

#: Floating-point element types, narrowest kinds first.
FLOATS = ("f4e2m1", "f8e8m0", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "bf16", "f16", "f32", "f64")
#: Signed and unsigned integer element types.
INTEGERS = ("i2", "u2", "i4", "u4", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
COMPLEX = ("c64", "c128")
#: Every element type nnefx knows, in one vocabulary shared by all formats.
ETYPES = FLOATS + INTEGERS + COMPLEX + ("bool", "string")

#: The element type of each abstract NNEF type when a tensor names none.
DEFAULTS = {"scalar": "f32", "integer": "i64", "logical": "bool"}

_NUMPY = {
    "f16": "float16", "f32": "float32", "f64": "float64",
    "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32",
    "i64": "int64", "u64": "uint64", "c64": "complex64", "c128": "complex128", "bool": "bool",
}
#: Element types numpy lacks, by their ``ml_dtypes`` attribute.
_ML_DTYPES = {
    "bf16": "bfloat16", "f8e4m3fn": "float8_e4m3fn", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2": "float8_e5m2", "f8e5m2fnuz": "float8_e5m2fnuz", "f8e8m0": "float8_e8m0fnu",
    "f4e2m1": "float4_e2m1fn", "i4": "int4", "u4": "uint4", "i2": "int2", "u2": "uint2",
}
#: Bits per item (``string`` has no fixed width).
BITS = {"i2": 2, "u2": 2, "f4e2m1": 4, "i4": 4, "u4": 4, "f8e8m0": 8, "f8e4m3fn": 8, "f8e4m3fnuz": 8, "f8e5m2": 8,
        "f8e5m2fnuz": 8, "i8": 8, "u8": 8, "bool": 8, "bf16": 16, "f16": 16, "i16": 16, "u16": 16,
        "f32": 32, "i32": 32, "u32": 32, "f64": 64, "i64": 64, "u64": 64, "c64": 64, "c128": 128}

_cache: dict[str, np.dtype] = {}
_by_numpy: dict[np.dtype, str] = {}


def _ml_dtypes() -> Any:
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a core dependency
        raise NNEFXError("bfloat16, float8 and 4-bit tensors need the 'ml_dtypes' package "
                         "(pip install ml_dtypes)") from None
    return ml_dtypes


def check(etype: str, location: Location | None = None) -> str:
    """``etype`` itself if it is a known element type; a located error otherwise."""
    if etype not in ETYPES:
        raise NNEFXError(f"unknown element type '{etype}' (known: {', '.join(ETYPES)})", location)
    return etype


def numpy_dtype(etype: str) -> np.dtype:
    """The numpy dtype that stores items of ``etype`` (``object`` for strings)."""
    dt = _cache.get(etype)
    if dt is not None:
        return dt
    if etype not in ETYPES:  # another spelling ("boolean", "float16", ...)
        dt = numpy_dtype(parse(etype))
        _cache[etype] = dt
        return dt
    if etype == "string":
        dt = np.dtype(object)
    elif etype in _NUMPY:
        dt = np.dtype(_NUMPY[etype])
    else:
        dt = np.dtype(getattr(_ml_dtypes(), _ML_DTYPES[etype]))
    _cache[etype] = dt
    return dt


def from_numpy(dtype: Any, location: Location | None = None) -> str:
    """The element type a numpy dtype stores; an error for dtypes with none (datetimes, ...)."""
    dt = np.dtype(dtype)
    if not _by_numpy:
        for name in _NUMPY:
            _by_numpy[np.dtype(_NUMPY[name])] = name
    found = _by_numpy.get(dt)
    if found is not None:
        return found
    if dt.kind in "OUS":
        return "string"
    for name in _ML_DTYPES:
        try:
            if dt == numpy_dtype(name):
                _by_numpy[dt] = name
                return name
        except NNEFXError:
            break
    raise NNEFXError(f"numpy dtype {dt} has no nnefx element type", location)


def abstract(etype: str) -> str | None:
    """The NNEF data type of ``etype``: ``scalar``, ``integer``, ``logical`` or None (string)."""
    check(etype)
    if etype in FLOATS or etype in COMPLEX:
        return "scalar"
    if etype in INTEGERS:
        return "integer"
    return "logical" if etype == "bool" else None


def of(tensor: Any) -> str:
    """A tensor's concrete element type, resolving ``etype=None`` to its abstract type's default."""
    etype = getattr(tensor, "etype", None)
    if etype is not None:
        return etype
    return "string" if tensor.dtype == "string" else DEFAULTS.get(tensor.dtype, "f32")


def is_float(etype: str) -> bool:
    return etype in FLOATS


def compute_dtype(etype: str) -> np.dtype:
    """The dtype the fast backend accumulates ``etype`` in: float32 for floats narrower than f32."""
    if etype in FLOATS and BITS[etype] < 32:
        return np.dtype(np.float32)
    return numpy_dtype(etype)


def parse(name: str, location: Location | None = None) -> str:
    """An element type from a common spelling: nnefx/tract/IR short names (any case) or numpy names."""
    low = str(name).strip().lower()
    if low in ETYPES:
        return low
    aliases = {"boolean": "bool", "str": "string", "tdim": "i64", "bfloat16": "bf16"}
    if low in aliases:
        return aliases[low]
    for short, numpy_name in _NUMPY.items():
        if low == numpy_name:
            return short
    for short, ml_name in _ML_DTYPES.items():
        if low == ml_name:
            return short
    raise NNEFXError(f"unknown element type '{name}' (known: {', '.join(ETYPES)})", location)


def kernel_dtype(etype: str, formal: bool = False) -> np.dtype | None:
    """The dtype a kernel is handed items of ``etype`` in, or None to hand them over as stored.

    This is where the arithmetic contract above is kept for every operation at once: floats
    narrower than f32 are widened (float32 for the fast backend, float64 for the formal one)
    and the result is rounded once to its own element type when it is stored; 2- and 4-bit
    integers, which numpy cannot compute with, are widened to int64 and wrap when stored.
    Every other type is computed in its own storage (integers wrap in their width).
    """
    if etype in FLOATS and BITS[etype] < 32:
        return np.dtype(np.float64 if formal else np.float32)
    if etype in INTEGERS and BITS[etype] < 8:
        return np.dtype(np.int64)
    return None


def kind_fits(dtype: Any, nnef_dtype: str | None) -> bool:
    """True when arrays of numpy ``dtype`` hold values of abstract type ``nnef_dtype``
    (``None``: strings) — ml_dtypes kinds included (bfloat16 is ``scalar``, int4 ``integer``)."""
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        return nnef_dtype == "scalar"
    if dt.kind in "iu":
        return nnef_dtype == "integer"
    if dt.kind == "b":
        return nnef_dtype == "logical"
    if dt.kind in "OUS":
        return nnef_dtype in (None, "string")
    try:
        return abstract(from_numpy(dt)) == nnef_dtype
    except NNEFXError:
        return False


def storage(etype: str | None, nnef_dtype: str, default: Any) -> np.dtype:
    """The storage dtype of a tensor: its concrete type's, else ``default[nnef_dtype]``."""
    if etype is not None:
        return numpy_dtype(etype)
    return default[nnef_dtype]
