"""Element-wise operations (NNEF 1.0.5 §4.2): unary, binary, ``select`` and the simplifiers.

Binary operations broadcast the NNEF way: shapes align from dimension 0 and the shorter one
is padded with *trailing* 1s (see :mod:`nnefx.ops._common`).
"""

from __future__ import annotations

from .registry import define

copy = define("copy", "elementwise", """
fragment copy<?>( x: tensor<?> ) -> ( y: tensor<?> );
""", generic=True)

#: Unary scalar functions, all ``( x: tensor<scalar> ) -> ( y: tensor<scalar> )``.
UNARY = ("neg", "rcp", "exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
         "atan", "asinh", "acosh", "atanh", "abs", "sign", "floor", "ceil", "round")
#: Binary arithmetic, ``scalar x scalar -> scalar``.
ARITHMETIC = ("add", "sub", "mul", "div", "pow")
#: Comparisons, ``scalar x scalar -> logical``.
COMPARISON = ("lt", "gt", "le", "ge", "eq", "ne")
#: Logical connectives, ``logical x logical -> logical``.
CONNECTIVE = ("and", "or")

UNARY_OPS = {name: define(name, "elementwise",
                          f"fragment {name}( x: tensor<scalar> ) -> ( y: tensor<scalar> );")
             for name in UNARY}

not_ = define("not", "elementwise", """
fragment not( x: tensor<logical> ) -> ( y: tensor<logical> );
""")

BINARY_OPS = {}
for _name in ARITHMETIC:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );")
for _name in COMPARISON:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<logical> );")
for _name in CONNECTIVE:
    BINARY_OPS[_name] = define(_name, "elementwise",
                               f"fragment {_name}( x: tensor<logical>, y: tensor<logical> ) -> ( z: tensor<logical> );")

select = define("select", "elementwise", """
fragment select<?>( condition: tensor<logical>, true_value: tensor<?>, false_value: tensor<?> ) -> ( output: tensor<?> );
""", generic=True)

# --- simplifiers (compound) ---------------------------------------------------------------

sqr = define("sqr", "elementwise", """
fragment sqr( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ 2.0;
}
""", compound=True)

sqrt = define("sqrt", "elementwise", """
fragment sqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ 0.5;
}
""", compound=True)

rsqr = define("rsqr", "elementwise", """
fragment rsqr( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ -2.0;
}
""", compound=True)

rsqrt = define("rsqrt", "elementwise", """
fragment rsqrt( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = x ^ -0.5;
}
""", compound=True)

log2 = define("log2", "elementwise", """
fragment log2( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = log(x) / log(2.0);
}
""", compound=True)

min_ = define("min", "elementwise", """
fragment min( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> )
{
    z = select(x < y, x, y);
}
""", compound=True)

max_ = define("max", "elementwise", """
fragment max( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> )
{
    z = select(x > y, x, y);
}
""", compound=True)

clamp = define("clamp", "elementwise", """
fragment clamp( x: tensor<scalar>, a: tensor<scalar>, b: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = max(min(x, b), a);
}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal kernels visit every output element and evaluate the definition on that element in
# float64, rounding the result once to the working float type (float32, or float64 in a
# float64 operation: ``_common.float_type``), so they are correctly rounded wherever the
# float64 function is.  Fast kernels apply numpy's ufuncs to whole arrays of that type.  Integer
# and logical results agree bit for bit; float results within a few float32 ulp.
#
# ``round`` is the spec's floor(x + 0.5): ties go toward +infinity (-2.5 -> -2.0), unlike
# numpy's ties-to-even and C's ties-away-from-zero.

import math  # noqa: E402

import numpy as np  # noqa: E402

from ._common import (  # noqa: E402
    as_dtype,
    broadcast_index,
    broadcast_shapes,
    checked_broadcast,
    float_type,
    scalar,
)


def _unary_shape(x):
    return tuple(x)


def _binary_shape_for(name):
    def rule(x, y):
        return broadcast_shapes(name, x, y)
    return rule


def formal_map(op: str, fn, out_dtype, *operands: np.ndarray) -> np.ndarray:
    """Apply the per-element definition ``fn`` over the NNEF broadcast of ``operands``.

    Each operand keeps its own shape; an output index maps to an operand element by
    clamping broadcast (extent-1) dimensions to 0 and ignoring dimensions past its rank.
    """
    shape = broadcast_shapes(op, *(a.shape for a in operands))
    out = np.empty(shape, dtype=out_dtype)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*shape):
            args = [a[broadcast_index(index[:a.ndim], a.shape)] for a in operands]
            out[index] = fn(*args)
    return out


def _f64(v):
    return np.float64(v)


def _round_half_up(v):
    return math.floor(v + 0.5) if math.isfinite(v) else v


def _sign(v):
    if v > 0:
        return 1.0
    if v < 0:
        return -1.0
    return v  # 0.0, -0.0 stay; NaN stays NaN


#: Per-element float64 definitions for the formal kernels.
_UNARY_FORMAL = {
    "neg": lambda v: -v,
    "rcp": lambda v: np.float64(1.0) / v,
    "exp": np.exp, "log": np.log,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "abs": abs,
    "sign": _sign,
    "floor": lambda v: math.floor(v) if math.isfinite(v) else v,
    "ceil": lambda v: math.ceil(v) if math.isfinite(v) else v,
    "round": _round_half_up,
}


def _fast_round(x):
    # floor(x + 0.5) computed without the float32 rounding of x + 0.5 (which would turn
    # 0.49999997 into 1.0): x - floor(x) is exact in float32.
    f = np.floor(x)
    return (f + (x - f >= 0.5)).astype(x.dtype)


_UNARY_FAST = {
    "neg": np.negative, "rcp": lambda x: x.dtype.type(1.0) / x,
    "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "abs": np.abs, "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": _fast_round,
}


def _make_unary(name):
    op = UNARY_OPS[name]
    f64 = _UNARY_FORMAL[name]
    f32 = _UNARY_FAST[name]
    op.shape(_unary_shape)

    @op.formal
    def formal(x):
        return formal_map(name, lambda v: f64(_f64(v)), float_type(), scalar(x))

    @op.fast
    def fast(x):
        x = scalar(x)
        with np.errstate(all="ignore"):
            return np.asarray(f32(x), dtype=x.dtype)


for _name in UNARY:
    _make_unary(_name)


copy.shape(lambda x, dtype=None: _unary_shape(x))  # generic: takes the resolved dtype


def _copy_source(x, dtype):
    """``x`` in its own storage where that already holds the data type (an f64 or int8 tensor of
    a graph with concrete element types stays so: the step stores it in its tensor's type, and
    narrowing it to float32 here would round it twice); a literal in the data type's storage."""
    from .. import etypes

    # a tensor arrives as an array (rank 0 included), a literal as a Python scalar
    a = np.asarray(x)
    held = isinstance(x, np.ndarray) and etypes.kind_fits(a.dtype, dtype)
    return a if dtype is None or held else as_dtype(a, dtype)


@copy.formal
def _copy_formal(x, dtype=None):
    x = _copy_source(x, dtype)
    return formal_map("copy", lambda v: v, x.dtype, x)


@copy.fast
def _copy_fast(x, dtype=None):
    return _copy_source(x, dtype).copy()


not_.shape(_unary_shape)
not_.formal(lambda x: formal_map("not", lambda v: not v, np.bool_, np.asarray(x, np.bool_)))
not_.fast(lambda x: np.logical_not(np.asarray(x, np.bool_)))

_BINARY_FORMAL = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "and": lambda a, b: bool(a) and bool(b), "or": lambda a, b: bool(a) or bool(b),
}
_BINARY_FAST = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}


def _make_binary(name):
    op = BINARY_OPS[name]
    f64 = _BINARY_FORMAL[name]
    f32 = _BINARY_FAST[name]
    logical_in = name in CONNECTIVE
    arithmetic = name in ARITHMETIC
    conv = (lambda a: np.asarray(a, np.bool_)) if logical_in else scalar
    op.shape(_binary_shape_for(name))

    @op.formal
    def formal(x, y):
        out = float_type() if arithmetic else np.bool_
        if logical_in:
            return formal_map(name, f64, out, conv(x), conv(y))
        return formal_map(name, lambda a, b: f64(_f64(a), _f64(b)), out, conv(x), conv(y))

    @op.fast
    def fast(x, y):
        a, b = checked_broadcast(name, conv(x), conv(y))
        with np.errstate(all="ignore"):
            return np.asarray(f32(a, b), dtype=a.dtype if arithmetic else np.bool_)


for _name in ARITHMETIC + COMPARISON + CONNECTIVE:
    _make_binary(_name)


@select.shape
def _select_shape(condition, true_value, false_value, dtype=None):
    return broadcast_shapes("select", condition, true_value, false_value)


@select.formal
def _select_formal(condition, true_value, false_value, dtype=None):
    c = np.asarray(condition, np.bool_)
    t = as_dtype(true_value, dtype)
    f = as_dtype(false_value, dtype)
    out_dtype = np.result_type(t, f) if dtype is None else t.dtype
    return formal_map("select", lambda cv, tv, fv: tv if cv else fv, out_dtype, c, t, f)


@select.fast
def _select_fast(condition, true_value, false_value, dtype=None):
    t = as_dtype(true_value, dtype)
    f = as_dtype(false_value, dtype)
    c, t, f = checked_broadcast("select", np.asarray(condition, np.bool_), t, f)
    return np.where(c, t, f)


# --- simplifiers (compounds: the formal kernel is the body, nnefx.ops.derived) ----------------

for _op, _e in ((sqr, 2.0), (sqrt, 0.5), (rsqr, -2.0), (rsqrt, -0.5)):
    _op.shape(_unary_shape)
    _op.fast((lambda e: lambda x: BINARY_OPS["pow"].fast_kernel(x, float_type()(e)))(_e))

sqr.fast(lambda x: np.square(scalar(x)))

log2.shape(_unary_shape)


@log2.fast
def _log2_fast(x):
    with np.errstate(all="ignore"):
        x = scalar(x)
        return (np.log(x) / np.log(x.dtype.type(2.0))).astype(x.dtype)


min_.shape(_binary_shape_for("min"))
max_.shape(_binary_shape_for("max"))


def min_fast(x, y):
    """select(x < y, x, y): with a NaN the comparison is false, so y wins (not np.minimum)."""
    a, b = checked_broadcast("min", scalar(x), scalar(y))
    return np.where(a < b, a, b).astype(a.dtype)


def max_fast(x, y):
    """select(x > y, x, y): with a NaN the comparison is false, so y wins (not np.maximum)."""
    a, b = checked_broadcast("max", scalar(x), scalar(y))
    return np.where(a > b, a, b).astype(a.dtype)


min_.fast(min_fast)
max_.fast(max_fast)


@clamp.shape
def _clamp_shape(x, a, b):
    return broadcast_shapes("clamp", x, a, b)


@clamp.fast
def _clamp_fast(x, a, b):
    broadcast_shapes("clamp", np.shape(x), np.shape(a), np.shape(b))
    return max_fast(min_fast(x, b), a)
