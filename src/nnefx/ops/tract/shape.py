"""tract's type and shape operations: cast (``nnef/src/ops/core/cast.rs``), shape_of
(``shape_of.rs``), range (``range.rs``), broadcast (``broadcast.rs``), downsample
(``downsample.rs``), dyn_slice (``dyn_slice.rs``) and external (``source.rs``).

Several of tract's ``integer`` parameters receive run-time values in real files (torch-to-nnef
passes ``range``'s bounds and ``dyn_slice``'s start and end as tensors computed from
``shape_of``), so the kernels accept an integer or a one-element integer tensor there, and the
shape rules give ``None`` for an extent that depends on such a value.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from ... import dims, etypes
from .._common import attr_error, guard_attributes, op_error
from ..registry import define
from ._util import DOMAIN, check_axis, int_value, known_int, numpy_broadcast, parse_etype, wrap_int

FAMILY = "tract_shape"

# --- cast ---------------------------------------------------------------------------------------------

cast = define("tract_core_cast", FAMILY, """
fragment tract_core_cast( input: tensor<scalar>, to: string ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="The input converted to the datum type 'to' (tract's names: f16, f32, f64, i8 .. i64, "
                        "u8 .. u64, bool, TDim) as Rust's `as` converts (Tensor::cast_to_dt): float to integer "
                        "truncates toward zero and saturates, NaN becomes 0; integer to integer wraps around; "
                        "number to bool is 'not zero'; bool to number is 0 or 1.")


@cast.shape
def _cast_shape(x, to):
    _cast_target(to)
    return tuple(x)


def _cast_target(to) -> str:
    et = parse_etype("tract_core_cast", "to", to)
    if et == "string":
        raise attr_error("tract_core_cast", "to", to, "is not supported: nnefx casts between numbers and bools")
    return et


cast.etypes(lambda x, to: _cast_target(to))


def _rust_as(v, target: np.dtype):
    """One value converted as Rust's ``as`` converts it (the definition of the cast)."""
    if target == np.bool_:
        return bool(v != 0)
    if isinstance(v, (bool, np.bool_)):
        v = int(v)
    if target.kind in "iu":
        info = np.iinfo(target)
        if isinstance(v, (float, np.floating)):
            f = float(v)
            if math.isnan(f):
                return 0
            if math.isinf(f):
                return info.max if f > 0 else info.min
            return min(max(math.trunc(f), info.min), info.max)  # saturating
        return wrap_int(v, target)
    return float(v) if not isinstance(v, (int, np.integer)) else int(v)


@cast.formal
def _cast_formal(x, to):
    target = etypes.numpy_dtype(_cast_target(to))
    x = np.asarray(x)
    out = np.empty(x.shape, target)
    with np.errstate(over="ignore"):  # a float too large for f16 becomes inf, as in Rust
        for index in np.ndindex(*x.shape):
            out[index] = _rust_as(x[index].item() if x.dtype.kind != "f" else x[index], target)
    return out


@cast.fast
def _cast_fast(x, to):
    target = etypes.numpy_dtype(_cast_target(to))
    x = np.asarray(x)
    if target == np.bool_:
        return x != 0
    if target.kind in "iu" and x.dtype.kind == "f":
        info = np.iinfo(target)
        t = np.trunc(x.astype(np.float64))
        t = np.where(np.isnan(t), 0.0, t)
        out = np.where(t >= float(info.max), info.max, np.where(t <= float(info.min), info.min, 0))
        inside = (t < float(info.max)) & (t > float(info.min))
        out = out.astype(target)
        out[inside] = t[inside].astype(target)
        return out
    with np.errstate(all="ignore"):
        return x.astype(target)  # int -> int wraps; -> float rounds to nearest even


# --- shape_of -------------------------------------------------------------------------------------------

shape_of = define("tract_core_shape_of", FAMILY, """
fragment tract_core_shape_of( input: tensor<scalar> ) -> ( output: tensor<integer> );
""", domain=DOMAIN, doc="The extents of input as a 1-D i64 tensor (tract: TDim, its symbolic dimensions "
                        "resolved when the model runs).")
shape_of.shape(lambda x: (len(x),))
shape_of.etypes(lambda x: "i64")
shape_of.formal(lambda x: np.array([int(d) for d in np.shape(x)], dtype=np.int64))
shape_of.fast(lambda x: np.asarray(np.shape(x), dtype=np.int64).reshape(-1))


# --- range ------------------------------------------------------------------------------------------------

tract_range = define("tract_core_range", FAMILY, """
fragment tract_core_range( start: integer, end: integer, step: integer ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="start, start + step, ... while before end: ceil((end - start) / step) items (none "
                        "if that is negative), of start's element type (ops::array::Range).  start, end and step "
                        "are run-time values in torch-to-nnef's files (tensors of one element): the length is "
                        "then unknown until the model runs.")


def _scalar_value(op: str, name: str, v):
    if isinstance(v, (bool, np.bool_)):
        raise attr_error(op, name, v, "is not a number")
    if isinstance(v, (int, float, np.integer, np.floating)):
        return v
    a = np.asarray(v)
    if a.size != 1 or a.dtype.kind not in "iuf":
        raise attr_error(op, name, v, "is not a number (or a one-element tensor)")
    return a.reshape(-1)[0]


def _range_len(start, end, step) -> int:
    if step == 0:
        raise attr_error("tract_core_range", "step", step, "must not be 0")
    return max(0, math.ceil((float(end) - float(start)) / float(step))) if isinstance(start, (float, np.floating)) \
        else max(0, -((int(start) - int(end)) // int(step)))


@tract_range.shape
def _range_shape(start, end, step):
    s, e, t = (known_int(v) for v in (start, end, step))
    if None in (s, e, t):
        return (None,)  # a run-time value: tract names the length with a fresh symbol
    return (_range_len(s, e, t),)


@tract_range.etypes
def _range_etype(start, end, step):
    """start's element type (an integer literal is i64, a float literal f32)."""
    return etypes.from_numpy(_range_args(start, end, step)[1])


def _range_args(start, end, step):
    vals = [_scalar_value("tract_core_range", n, v) for n, v in (("start", start), ("end", end), ("step", step))]
    dt = np.asarray(vals[0]).dtype if not isinstance(vals[0], int) else np.dtype(np.int64)
    if isinstance(vals[0], float):
        dt = np.dtype(np.float32)
    return [dt.type(v) for v in vals], dt


@tract_range.formal
def _range_formal(start, end, step):
    (s, e, t), dt = _range_args(start, end, step)
    n = _range_len(s, e, t)
    out = np.empty(n, dt)
    v = s
    for i in range(n):  # v, v + step, v + 2 step, ... accumulated as tract does
        out[i] = v
        v = dt.type(v + t)
    return out


@tract_range.fast
def _range_fast(start, end, step):
    (s, e, t), dt = _range_args(start, end, step)
    n = _range_len(s, e, t)
    if dt.kind == "f":
        return _range_formal(s, e, t)  # accumulated rounding, as tract's loop
    return (s + t * np.arange(n, dtype=dt)).astype(dt)


# --- broadcast ----------------------------------------------------------------------------------------------

broadcast = define("tract_core_broadcast", FAMILY, """
fragment tract_core_broadcast( input: tensor<scalar>, shape: integer[] ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="input repeated to 'shape', numpy-style: aligned from the last axis, each input "
                        "extent 1 or equal to the target's (ops::array::MultiBroadcastTo).")


@broadcast.shape
def _broadcast_shape(x, shape):
    target = tuple(int_value("tract_core_broadcast", "shape", d) for d in shape)
    if len(x) > len(target) or numpy_broadcast("tract_core_broadcast", tuple(x), target) != target:
        raise op_error("tract_core_broadcast", f"input {list(x)} does not broadcast to {list(target)}")
    return target


@broadcast.formal
def _broadcast_formal(x, shape):
    x = np.asarray(x)
    out_shape = _broadcast_shape(x.shape, shape)
    out = np.empty(out_shape, x.dtype)
    lead = len(out_shape) - x.ndim
    for index in np.ndindex(*out_shape):
        out[index] = x[tuple(0 if x.shape[k] == 1 else index[lead + k] for k in range(x.ndim))]
    return out


@broadcast.fast
def _broadcast_fast(x, shape):
    x = np.asarray(x)
    return np.broadcast_to(x, _broadcast_shape(x.shape, shape)).copy()


# --- downsample -------------------------------------------------------------------------------------------------

downsample = define("tract_core_downsample", FAMILY, """
fragment tract_core_downsample( input: tensor<scalar>, axis: integer, stride: integer, modulo: integer = 0 )
    -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="Every stride-th element along axis from position modulo (a negative stride walks from "
                        "the last element backwards; ops::Downsample).")


@downsample.shape
def _downsample_shape(x, axis, stride, modulo=0):
    op = "tract_core_downsample"
    a = check_axis(op, axis, len(x))
    s, m = int_value(op, "stride", stride), int_value(op, "modulo", modulo)
    if s == 0:
        raise attr_error(op, "stride", stride, "must not be 0")
    if m < 0 or (m != 0 and s < 0):
        raise attr_error(op, "modulo", modulo, "must be >= 0, and 0 with a negative stride")
    n = x[a]
    extent = None if n is None else max(0, -(-(n - m) // abs(s)))
    return tuple(x[:a]) + (extent,) + tuple(x[a + 1:])


@downsample.formal
def _downsample_formal(x, axis, stride, modulo=0):
    x = np.asarray(x)
    shape = _downsample_shape(x.shape, axis, stride, modulo)
    out = np.empty(shape, x.dtype)
    n = x.shape[axis]
    for index in np.ndindex(*shape):
        j = index[axis]
        src = modulo + j * stride if stride > 0 else n - 1 + j * stride
        out[index] = x[index[:axis] + (src,) + index[axis + 1:]]
    return out


@downsample.fast
def _downsample_fast(x, axis, stride, modulo=0):
    x = np.asarray(x)
    _downsample_shape(x.shape, axis, stride, modulo)
    sl = slice(modulo, None, stride) if stride > 0 else slice(None, None, stride)
    return x[(slice(None),) * axis + (sl,)].copy()


# --- dyn_slice ----------------------------------------------------------------------------------------------------

dyn_slice = define("tract_core_dyn_slice", FAMILY, """
fragment tract_core_dyn_slice( input: tensor<scalar>, start: integer, end: integer, len: integer, axis: integer )
    -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="input[start:end] along axis, start and end being run-time values; len is the slice's "
                        "length as the file states it (a symbol in tract) and must equal end - start "
                        "(ops::array::DynSlice).")


@dyn_slice.shape
def _dyn_slice_shape(x, start, end, len, axis):  # noqa: A002 - tract's parameter name
    a = check_axis("tract_core_dyn_slice", axis, builtins.len(x))
    s, e, n = known_int(start), known_int(end), known_int(len)
    extent = e - s if s is not None and e is not None else n
    return tuple(x[:a]) + (extent,) + tuple(x[a + 1:])


def _dyn_slice_args(x, start, end, len, axis):  # noqa: A002
    x = np.asarray(x)
    op = "tract_core_dyn_slice"
    a = check_axis(op, axis, x.ndim)
    s, e = int_value(op, "start", start), int_value(op, "end", end)
    if not 0 <= s <= e <= x.shape[a]:
        raise op_error(op, f"slice {s}:{e} is not within 0..{x.shape[a]} (axis {a})")
    n = known_int(len)
    if n is not None and n != e - s:
        raise attr_error(op, "len", len, f"differs from end - start = {e - s}")
    return x, a, s, e


@dyn_slice.formal
def _dyn_slice_formal(x, start, end, len, axis):  # noqa: A002
    x, a, s, e = _dyn_slice_args(x, start, end, len, axis)
    shape = x.shape[:a] + (e - s,) + x.shape[a + 1:]
    out = np.empty(shape, x.dtype)
    for index in np.ndindex(*shape):
        out[index] = x[index[:a] + (s + index[a],) + index[a + 1:]]
    return out


@dyn_slice.fast
def _dyn_slice_fast(x, start, end, len, axis):  # noqa: A002
    x, a, s, e = _dyn_slice_args(x, start, end, len, axis)
    return x[(slice(None),) * a + (slice(s, e),)].copy()


# --- external --------------------------------------------------------------------------------------------------

external = define("tract_core_external", FAMILY, """
fragment tract_core_external<? = scalar>( datum_type: string, shape: integer[] ) -> ( output: tensor<?> );
""", domain=DOMAIN, generic=True, tract_header="fragment tract_core_external( datum_type: string, "
                                                "shape: integer[] ) -> ( output: tensor<?> );",
    doc="A graph input of the given datum type and shape, like NNEF's external; the session feeds it.  "
        "tract's header has no generic marker (NNEF 1.0.5 requires one for a tensor<?> result).")


@external.shape
def _external_shape(datum_type, shape, dtype=None):
    parse_etype("tract_core_external", "datum_type", datum_type)
    out = []
    for d in shape:
        k = known_int(d)
        if k is not None and k < 0:
            raise attr_error("tract_core_external", "shape", list(shape), "must not have negative extents")
        out.append(d if k is None and isinstance(d, dims.Dim) else k)  # a symbol (tract_symbol) stays one
    return tuple(out)


external.etypes(lambda datum_type, shape, **_: parse_etype("tract_core_external", "datum_type", datum_type))


def _external_kernel(datum_type, shape, dtype=None):
    raise op_error("tract_core_external", "is a graph input: the session feeds it, no kernel computes it")


external.formal(_external_kernel)
external.fast(_external_kernel)

# tract_core_range and tract_core_dyn_slice take run-time tensors where tract's header says 'integer'
for _op in (cast, shape_of, broadcast, downsample, external):
    guard_attributes(_op)
