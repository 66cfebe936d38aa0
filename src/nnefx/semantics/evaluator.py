"""Compile-time evaluation of attribute (meta-parameter) expressions.

Values are plain Python objects: ``int`` (integer / provisional extent), ``float`` (scalar),
``bool`` (logical), ``str`` (string), ``list`` (array), ``tuple`` (tuple).  Tensors flowing
through expressions are :class:`TensorRef` objects (or literals standing for constant
tensors).  Types were checked statically, so these functions only guard what depends on
values: division by zero, invalid casts, out-of-range subscripts and runaway sizes.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..dims import Dim, UnknownDim
from .types import EMPTY, INTEGER, LOGICAL, SCALAR, STRING, ArrayT, TensorT, TupleT, Type, common_type

#: Largest array or string a compile-time expression may build.
MAX_ITEMS = 1_000_000
#: Largest integer magnitude (bits) a compile-time expression may build.
MAX_INT_BITS = 4096

_INT_RE = re.compile(r"-?[0-9]+\Z")
_REAL_RE = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?\Z")


@dataclass(frozen=True)
class TensorRef:
    """A tensor flowing through an expression: its graph name and data type."""

    name: str
    dtype: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TensorLiteral:
    """A literal bound to a tensor parameter: a constant tensor of singleton shape.

    Operators on it map to fragments (``add``, ...) like on any tensor, so a compound's
    body expands the same way whether it receives an identifier or a literal.
    """

    value: bool | int | float
    dtype: str


def is_tensor_value(v: Any) -> bool:
    return isinstance(v, (TensorRef, TensorLiteral))


def value_type(v: Any) -> Type:
    """The NNEF type of a concrete value."""
    if isinstance(v, (TensorRef, TensorLiteral)):
        return TensorT(v.dtype)
    # the shared (frozen, compared by value) primitive types: no new object per value
    if isinstance(v, bool):
        return LOGICAL
    if isinstance(v, (int, Dim)):
        return INTEGER
    if isinstance(v, float):
        return SCALAR
    if isinstance(v, str):
        return STRING
    if isinstance(v, tuple):
        return TupleT(tuple(value_type(x) for x in v))
    if isinstance(v, list):
        if not v:
            return EMPTY
        t = value_type(v[0])
        for x in v[1:]:
            c = common_type(t, value_type(x))
            t = c if c is not None else t
        return ArrayT(t)
    raise TypeError(f"not an NNEF value: {v!r}")


def _check_int(v: int, loc: Location | None) -> int:
    if v.bit_length() > MAX_INT_BITS:
        raise NNEFXError(f"integer value too large (more than {MAX_INT_BITS} bits)", loc)
    return v


def _int_div(a: int, b: int, loc: Location | None) -> int:
    if b == 0:
        raise NNEFXError("integer division by zero", loc)
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _int_pow(a: int, b: int, loc: Location | None) -> int:
    if b < 0:
        if a == 0:
            raise NNEFXError("zero raised to a negative power", loc)
        if abs(a) == 1:
            return a ** (-b) if a == -1 else 1
        return 0
    if abs(a) > 1 and b * math.log2(abs(a)) > MAX_INT_BITS:
        raise NNEFXError(f"integer power too large (more than {MAX_INT_BITS} bits)", loc)
    return a ** b


def _float_op(op: str, a: float, b: float) -> float:
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0.0:
                if a == 0.0 or math.isnan(a):
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
        if op == "^":
            try:
                return math.pow(a, b)
            except ValueError:
                return math.nan
    except OverflowError:
        return math.inf
    raise AssertionError(op)


def binary(op: str, a: Any, b: Any, loc: Location | None) -> Any:
    """``a op b`` on attribute values (short-circuit operators are handled by the caller)."""
    if isinstance(a, Dim) or isinstance(b, Dim):
        return _dim_binary(op, a, b, loc)
    if op == "in":
        return any(_equal(a, x) for x in b)
    if op in ("==", "!="):
        eq = _equal(a, b)
        return eq if op == "==" else not eq
    if op in ("<", "<=", ">", ">="):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if op == "&&":
        return bool(a and b)
    if op == "||":
        return bool(a or b)
    if isinstance(a, (list, str)) and op == "+":
        if len(a) + len(b) > MAX_ITEMS:
            raise NNEFXError(f"result too long (more than {MAX_ITEMS} items)", loc)
        return a + b
    if isinstance(a, (list, str)) and op == "*":
        if b < 0:
            raise NNEFXError(f"cannot repeat {'a string' if isinstance(a, str) else 'an array'} a negative "
                             f"number of times ({b})", loc)
        if len(a) * b > MAX_ITEMS:
            raise NNEFXError(f"result too long (more than {MAX_ITEMS} items)", loc)
        return a * b
    if isinstance(a, float) or isinstance(b, float):
        return _float_op(op, float(a), float(b))
    if op == "+":
        return _check_int(a + b, loc)
    if op == "-":
        return _check_int(a - b, loc)
    if op == "*":
        return _check_int(a * b, loc)
    if op == "/":
        return _int_div(a, b, loc)
    if op == "^":
        return _int_pow(a, b, loc)
    raise NNEFXError(f"operator '{op}' cannot be evaluated on {a!r} and {b!r}", loc)


#: attribute operators on symbolic extents (``/`` is exact integer division there)
_DIM_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv,
            "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _dim_binary(op: str, a: Any, b: Any, loc: Location | None) -> Any:
    """Integer arithmetic on symbolic extents (tract_symbol): exact or a located error."""
    fn = _DIM_OPS.get(op)
    if fn is None:
        raise NNEFXError(f"operator '{op}' cannot be evaluated on symbolic extent {a} and {b}", loc)
    try:
        return fn(a, b)
    except UnknownDim as exc:
        raise NNEFXError(f"cannot evaluate at load time: {exc}", loc) from None


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=False))
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return False
    return a == b


def unary(op: str, a: Any, loc: Location | None) -> Any:
    if op == "-":
        return -a
    if op == "+":
        return a
    if op == "!":
        return not a
    raise NNEFXError(f"unknown unary operator '{op}'", loc)


def literal_string(v: Any) -> str:
    """The literal spelling of a primitive value (``string(x)``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return v
    raise NNEFXError(f"string() expects a primitive value, found {v!r}")


def cast(name: str, v: Any, loc: Location | None) -> Any:
    """The explicit casts ``integer()``/``scalar()``/``logical()``/``string()`` (NNEF 1.0 §3.3.3)."""
    if name == "string":
        return literal_string(v)
    if name == "logical":
        if isinstance(v, str):
            return v != ""
        return bool(v)
    if name == "scalar":
        if isinstance(v, str):
            if not _REAL_RE.match(v):
                raise NNEFXError(f"scalar('{v}'): the string is not a valid numeric literal", loc)
            return float(v)
        return 1.0 if v is True else 0.0 if v is False else float(v)
    if name == "integer":
        if isinstance(v, str):
            if not _INT_RE.match(v):
                raise NNEFXError(f"integer('{v}'): the string is not a valid integer literal", loc)
            return _check_int(int(v), loc)
        if isinstance(v, bool):
            return 1 if v else 0
        if isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                raise NNEFXError(f"integer({v}): not a finite number", loc)
            return math.floor(v)
        return int(v)
    raise NNEFXError(f"unknown builtin '{name}'", loc)


def subscript(base: Any, begin: Any, stop: Any, is_range: bool, loc: Location | None) -> Any:
    n = len(base)
    if not is_range:
        if not 0 <= begin < n:
            raise NNEFXError(f"index {begin} is out of range for {'a string' if isinstance(base, str) else 'an array'} "
                             f"of length {n}", loc)
        item = base[begin]
        return item
    b = 0 if begin is None else begin
    e = n if stop is None else stop
    if b < 0 or b > n or e < 0 or e > n:
        raise NNEFXError(f"range [{b}:{e}] is out of bounds for length {n}", loc)
    if b >= e:
        return "" if isinstance(base, str) else []
    return base[b:e]
