"""tract's element-wise operations (``nnef/src/ops/core.rs`` ``register``; ``gelu_approximate.rs``,
``is_inf.rs``, ``silu.rs``).

Unit operations (``register_unit_element_wise``) have no parameters besides the input; tract's
documentation dumper (``nnef/src/ast/dump_doc.rs``) writes them ``( x: tensor<scalar> ) ->
( y: tensor<scalar> )``.  Binary operations (``register_binary``) take two positional tensors,
broadcast the NNEF way (the lower-rank operand gets trailing unit axes,
``multi_rank_broadcast`` in ``nnef/src/registry.rs``).  Element-wise operations with parameters (``register_element_wise``)
name their input ``input`` and result ``output``.

Float results keep the input's float type (f16, f32, f64); the formal kernels evaluate each
element in float64 and round once, the fast kernels evaluate whole arrays in float32 (float64
for f64 data).  Bitwise and logical results are exact.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import broadcast_shapes, checked_broadcast, guard_family, op_error
from ..ext.elementwise import _erf_vec
from ..registry import define
from ._util import DOMAIN, wrap_int

FAMILY = "tract_elementwise"

_UNIT = "fragment {}( x: tensor<scalar> ) -> ( y: tensor<scalar> );"
_BINARY = "fragment {}( x: tensor<scalar>, y: tensor<scalar> ) -> ( z: tensor<scalar> );"


def _floats(x) -> np.ndarray:
    """A float operand: float arrays keep their type, anything else becomes float32."""
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def _formal_unary(fn, x: np.ndarray, out_dtype) -> np.ndarray:
    """``fn`` (a float64 function of one element) applied element by element."""
    out = np.empty(x.shape, dtype=out_dtype)
    with np.errstate(all="ignore"):
        for index in np.ndindex(*x.shape):
            out[index] = fn(float(x[index]))
    return out


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64 if x.dtype == np.float64 else np.float32)


# --- float functions -----------------------------------------------------------------------------------

def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def _gelu_approx(v: float, power: int) -> float:
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** power)))


#: name -> (formal element function, fast array function, doc)
_FLOAT_UNITS = {
    "tract_core_erf": (math.erf, lambda a: _erf_vec(a),
                       "Gauss error function erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt (ops::math::Erf)."),
    "tract_core_hard_swish": (lambda v: v * max(0.0, min(1.0, v / 6.0 + 0.5)),
                              lambda a: a * np.clip(a * (1.0 / 6.0) + 0.5, 0.0, 1.0),
                              "x * max(0, min(1, x/6 + 1/2)) (ops::nn::HardSwish)."),
    "tract_core_round_even": (lambda v: math.copysign(float(round(v)), v) if math.isfinite(v) else v, np.rint,
                              "Round to the nearest integer, ties to even (ops::math::RoundHalfToEven)."),
    "tract_core_silu": (lambda v: v * _sigmoid(v), lambda a: a / (1.0 + np.exp(-a)),
                        "x * sigmoid(x) (ops::nn::Silu)."),
}
_FLOAT_UNITS["tract_transformers_silu"] = (*_FLOAT_UNITS["tract_core_silu"][:2],
                                           "Alias of tract_core_silu kept by tract for older files.")


def _register_float_unit(name: str) -> None:
    f64, vec, doc = _FLOAT_UNITS[name]
    op = define(name, FAMILY, _UNIT.format(name), domain=DOMAIN, doc=doc)
    op.shape(lambda x: tuple(x))

    @op.formal
    def formal(x):
        x = _floats(x)
        return _formal_unary(f64, x, x.dtype)

    @op.fast
    def fast(x):
        x = _floats(x)
        with np.errstate(all="ignore"):
            return np.asarray(vec(_wide(x))).astype(x.dtype)


for _name in _FLOAT_UNITS:
    _register_float_unit(_name)


# --- gelu approximation ------------------------------------------------------------------------------

def _register_gelu(name: str, doc: str) -> None:
    op = define(name, FAMILY, f"""
fragment {name}( input: tensor<scalar>, fast_impl: logical ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc=doc)
    op.shape(lambda x, fast_impl: tuple(x))

    @op.formal
    def formal(x, fast_impl):
        x = _floats(x)
        power = 2 if fast_impl else 3
        return _formal_unary(lambda v: _gelu_approx(v, power), x, x.dtype)

    @op.fast
    def fast(x, fast_impl):
        x = _floats(x)
        a = _wide(x)
        c = a.dtype.type(math.sqrt(2.0 / math.pi))
        with np.errstate(all="ignore"):
            inner = a + a.dtype.type(0.044715) * (a * a if fast_impl else a * a * a)
            return (a.dtype.type(0.5) * a * (1 + np.tanh(c * inner))).astype(x.dtype)


_register_gelu("tract_core_gelu_approx",
               "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^N))), N = 2 when fast_impl else 3 "
               "(ops::nn::GeluApproximate).  tract's header gives the result as tensor<?>.")
_register_gelu("tract_transformers_gelu_approx", "Alias of tract_core_gelu_approx kept by tract for older files.")


# --- predicates ---------------------------------------------------------------------------------------

is_nan = define("tract_core_is_nan", FAMILY, _UNIT.format("tract_core_is_nan"), domain=DOMAIN,
                doc="True where x is NaN (ops::math::IsNan); the result is a bool tensor.")
is_nan.shape(lambda x: tuple(x))
is_nan.etypes(lambda x: "bool")
is_nan.formal(lambda x: _formal_unary(math.isnan, _floats(x), np.bool_))
is_nan.fast(lambda x: np.isnan(_floats(x)))

is_inf = define("tract_core_is_inf", FAMILY, """
fragment tract_core_is_inf( input: tensor<scalar>, detect_positive: logical = true, detect_negative: logical = true )
    -> ( output: tensor<logical> );
""", domain=DOMAIN, doc="True where x is +inf (if detect_positive) or -inf (if detect_negative) "
                        "(ops::math::IsInf).  tract's header gives the result as tensor<?>.")
is_inf.shape(lambda x, detect_positive=True, detect_negative=True: tuple(x))
is_inf.etypes(lambda x, **_: "bool")


@is_inf.formal
def _is_inf_formal(x, detect_positive=True, detect_negative=True):
    def test(v: float) -> bool:
        return (v == math.inf and detect_positive) or (v == -math.inf and detect_negative)
    return _formal_unary(test, _floats(x), np.bool_)


@is_inf.fast
def _is_inf_fast(x, detect_positive=True, detect_negative=True):
    x = _floats(x)
    return (np.isposinf(x) & bool(detect_positive)) | (np.isneginf(x) & bool(detect_negative))


# --- bitwise and logical ---------------------------------------------------------------------------------

def _bits(op: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "biu":
        raise op_error(op, f"needs integer or bool tensors, got {x.dtype}")
    return x


bitnot = define("tract_core_bitnot", FAMILY, _UNIT.format("tract_core_bitnot"), domain=DOMAIN,
                doc="Bitwise not of an integer tensor, logical not of a bool tensor (ops::logic::BitNot).")
bitnot.shape(lambda x: tuple(x))


@bitnot.formal
def _bitnot_formal(x):
    x = _bits("tract_core_bitnot", x)
    if x.dtype == np.bool_:
        return _formal_unary(lambda v: not v, x, np.bool_)
    out = np.empty(x.shape, x.dtype)
    for index in np.ndindex(*x.shape):
        out[index] = wrap_int(~int(x[index]), x.dtype)  # two's complement within the element's width
    return out


@bitnot.fast
def _bitnot_fast(x):
    x = _bits("tract_core_bitnot", x)
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _binary_result(op: str, x: np.ndarray, y: np.ndarray) -> np.dtype:
    if x.dtype != y.dtype and x.ndim and y.ndim:
        raise op_error(op, f"operands have different element types ({x.dtype} and {y.dtype})")
    return x.dtype if x.ndim or not y.ndim else y.dtype


#: name -> (formal function of two Python ints/bools, numpy ufunc, doc, bool only)
_BITWISE = {
    "tract_core_bitand": (lambda a, b: a & b, np.bitwise_and, "Bitwise and (ops::logic::BitAnd).", False),
    "tract_core_bitor": (lambda a, b: a | b, np.bitwise_or, "Bitwise or (ops::logic::BitOr).", False),
    "tract_core_bitxor": (lambda a, b: a ^ b, np.bitwise_xor, "Bitwise exclusive or (ops::logic::BitXor).", False),
    "tract_core_xor": (lambda a, b: a != b, np.logical_xor, "Logical exclusive or of bool tensors (ops::logic::Xor).",
                       True),
}


def _register_bitwise(name: str) -> None:
    f, ufunc, doc, bool_only = _BITWISE[name]
    op = define(name, FAMILY, _BINARY.format(name), domain=DOMAIN,
                doc=doc + " Operands broadcast the NNEF way.")
    op.shape(lambda x, y: broadcast_shapes(name, x, y))

    def operands(x, y):
        x, y = _bits(name, x), _bits(name, y)
        if bool_only and (x.dtype != np.bool_ or y.dtype != np.bool_):
            raise op_error(name, f"needs bool tensors, got {x.dtype} and {y.dtype}")
        return x, y, _binary_result(name, x, y)

    @op.formal
    def formal(x, y):
        x, y, dt = operands(x, y)
        xb, yb = checked_broadcast(name, x, y)
        shape = np.broadcast_shapes(xb.shape, yb.shape)
        xb, yb = np.broadcast_to(xb, shape), np.broadcast_to(yb, shape)
        out = np.empty(shape, dt)
        for index in np.ndindex(*shape):
            a, b = xb[index].item(), yb[index].item()
            out[index] = f(a, b) if dt == np.bool_ else dt.type(f(int(a), int(b)))
        return out

    @op.fast
    def fast(x, y):
        x, y, dt = operands(x, y)
        return np.asarray(ufunc(*checked_broadcast(name, x, y))).astype(dt, copy=False)


for _name in _BITWISE:
    _register_bitwise(_name)


guard_family(FAMILY)
