"""ONNX Trilu (opset 14), BitShift (opset 11) and CastLike (opset 19+) as single operations.

* ``onnx_trilu`` — NNEF has no triangular mask; ``k`` stays a tensor because ONNX may compute
  it at run time (it does not change the result's shape).
* ``onnx_bit_shift`` — NNEF has no bit operations.  Shift amounts outside ``[0, bits)``
  (negative or at least the element width) give the full-width result, as the ONNX text
  reads with unbounded shifts: 0, or -1 for a right shift of a negative signed value (C and
  most hardware mask the amount instead; ONNX does not).
* ``onnx_cast_like`` — ``Cast`` to the element type of a second tensor, with ONNX's
  conversion rules (:func:`cast`): float8 saturation, truncation toward zero then
  wrap-around for integers, round-to-nearest-even between floating types.
"""

from __future__ import annotations

import re

import numpy as np

from ... import etypes
from .. import _common
from ..registry import define
from ._common import numpy_broadcast

FAMILY = "onnx_tensors"

# --- Trilu ----------------------------------------------------------------------------------

onnx_trilu = define("onnx_trilu", FAMILY, """
fragment onnx_trilu<?>( input: tensor<?>, k: tensor<integer> = 0, upper: logical = true ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX Trilu: keep the upper (j - i >= k) or lower (j - i <= k) "
                                      "triangle of each matrix in the last two axes, zero elsewhere.")


@onnx_trilu.shape
def _trilu_shape(x, k=(), upper=True, dtype=None):
    if len(x) < 2:
        raise _common.op_error("onnx_trilu", f"the input needs rank 2 or more, got rank {len(x)}")
    if len(k) != 0:
        raise _common.op_error("onnx_trilu", f"k must be a scalar (rank 0), got shape {list(k)}")
    return tuple(x)


def _k(k) -> int:
    k = np.asarray(k)
    if k.ndim != 0:
        raise _common.op_error("onnx_trilu", f"k must be a scalar (rank 0), got shape {list(k.shape)}")
    return int(k)


@onnx_trilu.formal
def _trilu_formal(x, k=0, upper=True, dtype=None):
    x = np.asarray(x)
    k = _k(k)
    out = np.zeros_like(x)
    rows, cols = x.shape[-2:]
    for i in range(rows):
        for j in range(cols):
            if (j - i >= k) if upper else (j - i <= k):
                out[..., i, j] = x[..., i, j]
    return out


@onnx_trilu.fast
def _trilu_fast(x, k=0, upper=True, dtype=None):
    x = np.asarray(x)
    return np.triu(x, _k(k)) if upper else np.tril(x, _k(k))


# --- BitShift -------------------------------------------------------------------------------

onnx_bit_shift = define("onnx_bit_shift", FAMILY, """
fragment onnx_bit_shift( x: tensor<integer>, y: tensor<integer>, direction: string ) -> ( z: tensor<integer> );
""", domain="onnx", doc="ONNX BitShift: x shifted left or right by y bits (numpy broadcasting), in "
                        "x's element width; shifts outside [0, bits) give the full-width result.")


@onnx_bit_shift.shape
def _bit_shift_shape(x, y, direction="LEFT"):
    if direction not in ("LEFT", "RIGHT"):
        raise _common.attr_error("onnx_bit_shift", "direction", direction, "must be 'LEFT' or 'RIGHT'")
    return numpy_broadcast("onnx_bit_shift", x, y)


@onnx_bit_shift.formal
def _bit_shift_formal(x, y, direction="LEFT"):
    _bit_shift_shape(np.shape(x), np.shape(y), direction)
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    bits = x.dtype.itemsize * 8
    signed = x.dtype.kind == "i"
    out = np.empty(x.shape, dtype=x.dtype)
    for index in np.ndindex(x.shape):
        a, s = int(x[index]), int(y[index])
        if direction == "LEFT":
            v = (a << s) % (1 << bits) if 0 <= s < bits else 0
            if signed and v >= 1 << (bits - 1):
                v -= 1 << bits
        else:
            v = a >> (s if 0 <= s < bits else bits)  # Python's >> is arithmetic (floor)
        out[index] = v
    return out


@onnx_bit_shift.fast
def _bit_shift_fast(x, y, direction="LEFT"):
    _bit_shift_shape(np.shape(x), np.shape(y), direction)
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    bits = x.dtype.itemsize * 8
    inside = (y >= 0) & (y < bits)
    amount = np.where(inside, y, 0).astype(x.dtype)
    if direction == "LEFT":
        unsigned = np.dtype(f"u{x.dtype.itemsize}")
        shifted = np.left_shift(x.view(unsigned) if x.dtype.kind == "i" else x, amount.astype(unsigned))
        return np.where(inside, shifted.view(x.dtype), np.zeros((), x.dtype))
    fill = np.where(x < 0, np.array(-1).astype(x.dtype), np.zeros((), x.dtype)) if x.dtype.kind == "i" \
        else np.zeros((), x.dtype)
    return np.where(inside, np.right_shift(x, amount), fill)


# --- Cast and CastLike -----------------------------------------------------------------------

def _float_info(dt: np.dtype):
    import ml_dtypes

    return ml_dtypes.finfo(dt)


def _is_float(dt: np.dtype) -> bool:
    if dt.kind == "f":
        return True
    if dt.kind != "V":
        return False
    try:
        _float_info(dt)
    except (ValueError, TypeError):
        return False
    return True


_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
E8M0_ROUNDING = ("up", "down", "nearest")


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """ONNX Cast to FLOAT8E8M0 (powers of two 2^(E - 127), E = 0 … 254; 255 is NaN).

    ``round_mode`` 'up' rounds away from zero, 'down' toward zero, 'nearest' to the nearer
    power with ties (1.5 · 2^e) up.  Out of range (zero, values below 2^-127 and above
    2^127, infinities): the nearest end with ``saturate``, NaN without.  ONNX leaves
    negative inputs unspecified; nnefx casts their magnitude.
    """
    import ml_dtypes

    if round_mode not in E8M0_ROUNDING:
        raise _common.attr_error("onnx_cast", "round_mode", round_mode, f"must be one of {', '.join(E8M0_ROUNDING)}")
    a = np.abs(np.asarray(x, dtype=np.float64))
    nan = np.isnan(a)
    inf = np.isinf(a)
    mant, exp = np.frexp(np.where(nan | inf, 1.0, a))   # a = mant * 2^exp, mant in [0.5, 1)
    e = exp.astype(np.int64) - 1                       # a = m * 2^e, m in [1, 2)
    m = mant * 2.0
    if round_mode == "up":
        e = e + (m > 1.0)
    elif round_mode == "nearest":
        e = e + (m >= 1.5)
    biased = e + 127
    zero = a == 0.0
    low = zero | (biased < 0)
    high = inf | (biased > 254)
    if saturate:
        biased = np.where(low, 0, np.where(high, 254, biased))
    else:
        biased = np.where(low | high, 255, biased)
    biased = np.where(nan, 255, biased)
    return biased.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def cast(x: np.ndarray, to: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """ONNX Cast of ``x`` to the numpy (or ml_dtypes) type ``to`` (ONNX Cast operator doc).

    * to a float8 type (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) with ``saturate``: values beyond
      the largest finite value (infinities included) become it, NaN stays NaN; without: the
      type's own overflow (NaN, or infinity for E5M2); otherwise round to nearest even;
    * to FLOAT8E8M0: :func:`_to_e8m0` (``round_mode``, ``saturate``);
    * between floating types: round to nearest even, infinity when out of range;
    * float → integer (2 to 64 bits): truncation toward zero, then wrap-around in the target
      width (ONNX leaves out-of-range values undefined; nnefx's integer contract wraps);
    * integer → integer: the low bits, reinterpreted (200 int16 → -56 int8);
    * anything → bool: ``x != 0``; bool → numbers: 0 and 1.

    Strings (object arrays of ``str``; :func:`to_strings`, :func:`from_strings`): numbers are
    written as ``%.8g`` (``NaN``, ``INF``, ``-INF``; bool ``1``/``0``, integers in decimal), and
    strings read as numeric literals, plain or scientific (``INF``, ``+INF``, ``-INF``, ``NaN``
    in any case); what is no number is refused, naming the item.
    """
    x = np.asarray(x)
    to = np.dtype(to)
    if to.kind in "OUS":
        return to_strings(x)
    if x.dtype.kind in "OUS":
        x = from_strings(x, to)
        if x.dtype == to:
            return x
    if x.dtype.kind == "b":
        x = x.astype(np.uint8)
    src_float = _is_float(x.dtype)
    if x.dtype.kind == "V":  # ml_dtypes storage: compute from an exact wide copy
        x = x.astype(np.float64 if src_float else np.int64)
    if to == np.bool_:
        return x != 0
    if _is_float(to):
        if to.name == "float8_e8m0fnu":
            return _to_e8m0(x, saturate, round_mode)
        if to.name in _FLOAT8:
            wide = x.astype(np.float64)
            if saturate:
                big = float(_float_info(to).max)
                wide = np.where(np.isnan(wide), wide, np.clip(wide, -big, big))
            return wide.astype(to)
        return x.astype(to)
    bits = to.itemsize * 8 if to.kind in "iu" else int(to.name[-1])  # ml_dtypes int4/uint2: 'int4'[-1]
    signed = to.kind == "i" or to.name.startswith("int")
    if src_float:
        wide = x.astype(np.float64)
        wide = np.trunc(np.where(np.isfinite(wide), wide, 0.0))
        if bits < 64:
            ints = np.mod(wide, 2.0 ** bits).astype(np.uint64)  # exact below 2^53
        else:  # fmod is exact; each branch converts a value its type holds exactly
            r = np.fmod(wide, 2.0 ** 64)
            ints = np.where(r >= 2.0 ** 63, np.where(r >= 2.0 ** 63, r, 0.0).astype(np.uint64),
                            np.where(r < -2.0 ** 63, r + 2.0 ** 64, 0.0).astype(np.uint64)
                            | np.where((r >= -2.0 ** 63) & (r < 2.0 ** 63), r, 0.0).astype(np.int64).view(np.uint64))
    else:
        ints = x.astype(np.int64).view(np.uint64) if x.dtype.kind == "i" else x.astype(np.uint64)
    ints = ints & np.uint64((1 << bits) - 1) if bits < 64 else ints
    if signed:
        values = ints.view(np.int64) if bits == 64 else np.where(
            ints >= np.uint64(1 << (bits - 1)), ints.astype(np.int64) - (1 << bits), ints.astype(np.int64))
        return values.astype(to)
    return ints.astype(to)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_SPECIAL = {"inf": np.inf, "+inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def to_strings(x: np.ndarray) -> np.ndarray:
    """Numbers written as ONNX Cast writes them: "plain floating-point representation", which
    onnxruntime spells ``%.8g`` (``NaN``, ``INF``, ``-INF``); integers in decimal, bool 1/0."""
    if x.dtype.kind in "OUS":
        return np.asarray(x, dtype=object)
    if x.dtype.kind == "V" and _is_float(x.dtype) or x.dtype.kind == "f":
        def spell(v: float) -> str:
            return "NaN" if v != v else "INF" if v == np.inf else "-INF" if v == -np.inf else format(v, ".8g")
    elif x.dtype.kind == "b":
        def spell(v: bool) -> str:
            return "1" if v else "0"
    else:
        spell = str
    wide = x.astype(np.float64) if x.dtype.kind == "V" and _is_float(x.dtype) else \
        x.astype(np.int64) if x.dtype.kind == "V" else x
    out = np.empty(x.shape, dtype=object)
    for i in np.ndindex(*x.shape):
        out[i] = spell(wide[i].item())
    return out


def from_strings(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """Strings read as numbers for a Cast to ``to``: exact integers where the target is an
    integer type and the text an integer literal (the caller wraps them), else float64 values
    (the caller converts them by the numeric rules)."""
    integer_target = to.kind in "iu" or (to.kind == "V" and not _is_float(to))
    ints = np.empty(x.shape, dtype=object) if integer_target else None
    values = np.empty(x.shape, np.float64)
    all_ints = integer_target
    for i in np.ndindex(*x.shape):
        s = x[i]
        if not isinstance(s, str):
            raise _common.op_error("onnx_cast", f"item {list(i)} of the string input is {type(s).__name__}, not str")
        text = s.strip()
        low = text.lower()
        if integer_target and _INTEGER.fullmatch(text):
            ints[i] = int(text)
            values[i] = float(ints[i])  # used only if another item is no integer literal
            continue
        all_ints = False
        if low in _SPECIAL:
            values[i] = _SPECIAL[low]
        elif _NUMBER.fullmatch(text):
            values[i] = float(text)
        else:
            raise _common.op_error("onnx_cast", f"item {list(i)} of the string input, {s[:40]!r}, is not a number")
    if all_ints:
        bits = to.itemsize * 8 if to.kind in "iu" else int(to.name[-1])
        mask = (1 << bits) - 1
        wrapped = [(v & mask) - ((1 << bits) if (to.kind == "i" or to.name.startswith("int"))
                                 and (v & mask) >> (bits - 1) else 0) for v in ints.reshape(-1).tolist()]
        return np.asarray(wrapped, np.int64).reshape(x.shape).astype(to)
    return values  # (an integer target with some non-integer literals: every item by the float rule)


onnx_cast = define("onnx_cast", FAMILY, """
fragment onnx_cast<?>( input: tensor<>, to: string, saturate: logical = true, round_mode: string = 'up' )
    -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX Cast: `input` converted to element type `to` (an nnefx element "
                                      "type name) by the ONNX rules (float8 saturation, e8m0 rounding, "
                                      "truncation and wrap-around for integers, round to nearest even).")


def _target(to: str) -> np.dtype:
    if to not in etypes.ETYPES:
        raise _common.attr_error("onnx_cast", "to", to, "is not an element type")
    return etypes.numpy_dtype(to)


@onnx_cast.shape
def _cast_shape(x, to="f32", saturate=True, round_mode="up", dtype=None):
    _target(to)
    if round_mode not in E8M0_ROUNDING:
        raise _common.attr_error("onnx_cast", "round_mode", round_mode, f"must be one of {', '.join(E8M0_ROUNDING)}")
    return tuple(x)


@onnx_cast.etypes
def _cast_etypes(x, to="f32", saturate=True, round_mode="up"):
    return to


@onnx_cast.formal
def _cast_formal(x, to="f32", saturate=True, round_mode="up", dtype=None):
    return cast(np.asarray(x), _target(to), saturate, round_mode)


onnx_cast_like = define("onnx_cast_like", FAMILY, """
fragment onnx_cast_like<?>( input: tensor<>, like: tensor<?>, saturate: logical = true ) -> ( output: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX CastLike: `input` converted to the element type of `like` "
                                      "(float8 saturation, truncation and wrap-around for integers).")


@onnx_cast_like.shape
def _cast_like_shape(x, like, saturate=True, dtype=None):
    return tuple(x)


@onnx_cast_like.etypes
def _cast_like_etypes(x, like, saturate=True):
    return like


@onnx_cast_like.formal
def _cast_like_formal(x, like, saturate=True, dtype=None):
    return cast(np.asarray(x), np.asarray(like).dtype, saturate)


_common.guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
