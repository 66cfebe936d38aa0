"""Element-wise extension operations: the error function, numpy-semantics integer arithmetic and comparisons, element-type conversion and rounding with a mode.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import math

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define
from .shape import broadcast_shape

# --- erf ---------------------------------------------------------------------------------

erf_op = define("erf", "ext", """
fragment erf( x: tensor<scalar> ) -> ( y: tensor<scalar> );
""", domain="nnefx", doc="Gauss error function, element-wise.")


@erf_op.shape
def _erf_shape(x):
    return tuple(x)


@erf_op.formal
def _erf_formal(x):
    x = np.asarray(x)
    flat = [math.erf(float(v)) for v in x.reshape(-1)]
    return np.asarray(flat, dtype=x.dtype if x.dtype.kind == "f" else np.float32).reshape(x.shape)


def _erf_vec(x: np.ndarray) -> np.ndarray:
    # Abramowitz-Stegun 7.1.26 is too coarse (1.5e-7 abs) for float64 users; use the
    # continued evaluation through math.erf vectorised via np.frompyfunc-free approach:
    # erf is odd; for float32 data a float64 rational approximation (W. J. Cody) is exact
    # to float32 rounding. We evaluate Cody's three ranges.
    a = np.abs(x.astype(np.float64))
    out = np.empty_like(a)
    small = a < 0.5
    mid = (a >= 0.5) & (a < 4.0)
    big = a >= 4.0
    if small.any():
        z = a[small]
        t = z * z
        p = [3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
             3.20937758913846947e03, 1.85777706184603153e-1]
        q = [2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
             2.84423683343917062e03]
        num = p[4] * t
        den = t
        for i in range(3):
            num = (num + p[i]) * t
            den = (den + q[i]) * t
        out[small] = z * (num + p[3]) / (den + q[3])
    if mid.any():
        z = a[mid]
        c = [5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
             2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
             2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8]
        d = [1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
             1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
             3.43936767414372164e03, 1.23033935480374942e03]
        num = c[8] * z
        den = z
        for i in range(7):
            num = (num + c[i]) * z
            den = (den + d[i]) * z
        erfc = (num + c[7]) / (den + d[7]) * np.exp(-z * z)
        out[mid] = 1.0 - erfc
    if big.any():
        z = a[big]
        p = [3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
             1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2]
        q = [2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
             6.05183413124413191e-2, 2.33520497626869185e-3]
        t = 1.0 / (z * z)
        num = p[5] * t
        den = t
        for i in range(4):
            num = (num + p[i]) * t
            den = (den + q[i]) * t
        r = t * (num + p[4]) / (den + q[4])
        r = (1.0 / math.sqrt(math.pi) - r) / z
        out[big] = 1.0 - r * np.exp(-z * z)
    return np.sign(x) * out


@erf_op.fast
def _erf_fast(x):
    x = np.asarray(x)
    return _erf_vec(x).astype(x.dtype if x.dtype.kind == "f" else np.float32)



# --- integer arithmetic and comparisons -----------------------------------------------------

ARITH = ("add", "subtract", "multiply", "divide", "pythondiv", "floor_mod", "mod", "maximum", "minimum",
         "power", "squared_difference")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")

integer_arith_op = define("integer_arith", "ext", """
fragment integer_arith<?>( x: tensor<?>, y: tensor<?>, op: string ) -> ( z: tensor<?> );
""", domain="nnefx", generic=True,
    doc="numpy-broadcast arithmetic with OpenVINO integer semantics (truncating or floor division).")


def _np_shape(a: tuple, b: tuple) -> tuple:
    return broadcast_shape(a, b)


@integer_arith_op.shape
def _arith_shape(x, y, op="add", dtype=None):
    if op not in ARITH:
        raise NNEFXError(f"integer_arith: unknown op '{op}'")
    return _np_shape(tuple(x), tuple(y))


def arith(x: np.ndarray, y: np.ndarray, op: str) -> np.ndarray:
    x = np.asarray(x)
    y = np.asarray(y)
    integer = x.dtype.kind in "iu" and y.dtype.kind in "iu"
    if op == "add":
        return x + y
    if op == "subtract":
        return x - y
    if op == "multiply":
        return x * y
    if op in ("divide", "pythondiv"):
        if integer:
            if np.any(y == 0):
                raise NNEFXError("integer division by zero")
            if op == "pythondiv":
                return np.floor_divide(x, y)
            q = np.abs(x) // np.abs(y)
            return np.where((x < 0) != (y < 0), -q, q).astype(np.result_type(x, y))
        return x / y
    if op == "floor_mod":
        return np.mod(x, y)
    if op == "mod":
        return np.fmod(x, y)
    if op == "maximum":
        return np.maximum(x, y)
    if op == "minimum":
        return np.minimum(x, y)
    if op == "power":
        if integer:
            return np.power(x, y.astype(np.int64)) if np.all(y >= 0) else (x.astype(np.float64) ** y).astype(x.dtype)
        return np.power(x, y)
    if op == "squared_difference":
        return (x - y) * (x - y)
    raise NNEFXError(f"integer_arith: unknown op '{op}'")


@integer_arith_op.formal
def _arith_formal(x, y, op="add", dtype=None):
    return arith(x, y, op)


integer_compare_op = define("integer_compare", "ext", """
fragment integer_compare<?>( x: tensor<?>, y: tensor<?>, op: string ) -> ( z: tensor<logical> );
""", domain="nnefx", generic=True, doc="numpy-broadcast comparison of tensors of any data type.")


@integer_compare_op.shape
def _compare_shape(x, y, op="equal", dtype=None):
    if op not in COMPARE:
        raise NNEFXError(f"integer_compare: unknown op '{op}'")
    return _np_shape(tuple(x), tuple(y))


def compare(x, y, op: str) -> np.ndarray:
    fn = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
          "greater": np.greater, "greater_equal": np.greater_equal}[op]
    return fn(np.asarray(x), np.asarray(y))


@integer_compare_op.formal
def _compare_formal(x, y, op="equal", dtype=None):
    return compare(x, y, op)



# --- Convert ----------------------------------------------------------------------------------

_NUMPY_OF = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
             "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32, "u16": np.uint16,
             "u8": np.uint8, "boolean": np.bool_}


def convert(x: np.ndarray, destination: str) -> np.ndarray:
    """OpenVINO Convert as its CPU plugin computes it (checked value by value).

    float → integer truncates toward zero into a 32-bit integer (64-bit for 64-bit targets;
    out of range or NaN gives the minimum, as x86 conversions do) and then keeps the low bits
    of the target width, so -2.5 → u8 is 254 and 300.7 → u8 is 44; integer → integer wraps;
    anything → boolean is ``!= 0``.
    """
    x = np.asarray(x)
    if destination not in _NUMPY_OF:
        raise NNEFXError(f"Convert to '{destination}' is not supported")
    dt = np.dtype(_NUMPY_OF[destination])
    if dt == np.bool_:
        return x != 0
    if dt.kind in "iu" and x.dtype.kind == "f":
        wide = np.dtype(np.int64) if dt.itemsize == 8 else np.dtype(np.int32)
        info = np.iinfo(wide)
        t = np.trunc(x.astype(np.float64))
        bad = ~np.isfinite(t) | (t < info.min) | (t > info.max)
        t = np.where(bad, info.min, t).astype(wide)
        with np.errstate(over="ignore"):
            return t.astype(dt)
    with np.errstate(over="ignore"):
        return x.astype(dt)


convert_element_type_op = define("convert_element_type", "ext", """
fragment convert_element_type<?>( input: tensor<>, destination_type: string ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR Convert to an element type (f32, f16, i64, i32, u8, boolean, ...).")


@convert_element_type_op.shape
def _convert_shape(x, destination_type="f32", dtype=None):
    if destination_type not in _NUMPY_OF:
        raise NNEFXError(f"convert_element_type: unsupported destination type '{destination_type}'")
    return tuple(x)


@convert_element_type_op.formal
def _convert_formal(x, destination_type="f32", dtype=None):
    y = convert(x, destination_type)
    # Hold results in the NNEF storage types (float32 / int64 / bool); values keep the
    # destination type's rounding and range.
    if y.dtype.kind == "f":
        return y.astype(np.float64 if y.dtype == np.float64 else np.float32)
    if y.dtype.kind in "iu":
        return y.astype(np.int64)
    return y



round_with_mode_op = define("round_with_mode", "ext", """
fragment round_with_mode( x: tensor<scalar>, mode: string = 'half_to_even' ) -> ( y: tensor<scalar> );
""", domain="nnefx", doc="IR Round: ties to even, or away from zero (NNEF round ties toward +infinity).")


@round_with_mode_op.shape
def _round_shape(x, mode="half_to_even"):
    if mode not in ("half_to_even", "half_away_from_zero"):
        raise NNEFXError(f"round_with_mode: unknown mode '{mode}'")
    return tuple(x)


@round_with_mode_op.fast
def _round_formal(x, mode="half_to_even"):
    x = np.asarray(x)
    if mode == "half_to_even":
        return np.round(x).astype(x.dtype)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype)



@round_with_mode_op.formal
def _round_def(x, mode="half_to_even"):
    x = np.asarray(x)
    out = np.empty_like(x)
    for pos in np.ndindex(*x.shape):
        v = float(x[pos])
        if mode == "half_to_even":
            out[pos] = round(v)  # Python rounds halves to even
        else:
            out[pos] = math.copysign(math.floor(abs(v) + 0.5), v)
    return out


