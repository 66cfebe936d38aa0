"""Symbolic dimensions: extents known by name before they are known by value.

A graph's shapes are tuples whose items are an ``int`` (known), ``None`` (unknown) or a
:class:`Dim` (known *symbolically*: a polynomial with integer coefficients over named
symbols, such as ``B`` or ``2*S+1``).  Symbols come from the file: tract's
``extension tract_symbol B;`` (and the identifiers of an ``external`` shape), ONNX
``dim_param`` strings.  They stay symbolic through shape propagation and are bound to
numbers when a :class:`~nnefx.runtime.session.Session` sees its inputs.

Soundness is the point of this module: a question about a symbolic extent that cannot be
answered before the symbols are bound (``B == 1``? ``B < C``? ``(B + 1) // 2``?) raises
:class:`UnknownDim` instead of guessing.  The shape pass catches it and reruns the rule
with ``None`` in place of the symbols, so a rule that cannot reason about symbols gives an
unknown extent, never a wrong number.  What *is* decidable is answered: ``B == B`` (the
same symbol has the same value), ``B + 1 != B``, ``2*B // 2 == B``, ``B*8 % 4 == 0``.

Symbols are assumed to stand for non-negative integers (they are extents).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Union

import numpy as np

from .diagnostics import Location, NNEFXError

#: monomial (sorted tuple of symbol names, repeated for powers) -> coefficient
_Terms = tuple[tuple[tuple[str, ...], int], ...]
Extent = Union[int, None, "Dim"]

#: longest expression :func:`parse_dim` reads (files are hostile)
MAX_EXPRESSION = 512
#: most terms one symbolic dimension may hold (products of sums grow quickly)
MAX_TERMS = 64


class UnknownDim(TypeError):
    """A question about a symbolic extent that has no answer until its symbols are bound.

    A ``TypeError`` so code that treats extents as numbers fails the way it would on a
    ``None`` extent (and shape rules' callers already turn that into "unknown")."""


class Dim:
    """A symbolic extent: ``sum(coeff * product(symbols))``.  Immutable and hashable.

    Build with :func:`symbol` and ordinary arithmetic (``+ - *`` with ints and other dims;
    ``//`` and ``%`` by a positive int where the result is exact).  An expression without
    symbols is returned as a plain ``int``, so ``Dim`` values are always genuinely symbolic.
    """

    __slots__ = ("_terms", "_hash")

    def __init__(self, terms: _Terms):
        self._terms = terms
        self._hash = hash(terms)

    # --- construction ---------------------------------------------------------------------

    @staticmethod
    def _make(acc: dict[tuple[str, ...], int]) -> int | Dim:
        items = tuple(sorted((m, c) for m, c in acc.items() if c != 0))
        if not items:
            return 0
        if len(items) > MAX_TERMS:
            raise NNEFXError(f"symbolic dimension too large (more than {MAX_TERMS} terms)")
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        return Dim(items)

    @property
    def terms(self) -> _Terms:
        return self._terms

    def _acc(self) -> dict[tuple[str, ...], int]:
        return dict(self._terms)

    @property
    def constant(self) -> int:
        for m, c in self._terms:
            if m == ():
                return c
        return 0

    # --- arithmetic ---------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        o = _terms_of(other)
        if o is None:
            return NotImplemented
        acc = self._acc()
        for m, c in o:
            acc[m] = acc.get(m, 0) + c
        return Dim._make(acc)

    __radd__ = __add__

    def __neg__(self) -> Any:
        return Dim._make({m: -c for m, c in self._terms})

    def __pos__(self) -> Dim:
        return self

    def __sub__(self, other: Any) -> Any:
        return NotImplemented if _terms_of(other) is None else self + (-other)

    def __rsub__(self, other: Any) -> Any:
        return NotImplemented if _terms_of(other) is None else (-self) + other

    def __mul__(self, other: Any) -> Any:
        o = _terms_of(other)
        if o is None:
            return NotImplemented
        acc: dict[tuple[str, ...], int] = {}
        for m1, c1 in self._terms:
            for m2, c2 in o:
                m = tuple(sorted(m1 + m2))
                acc[m] = acc.get(m, 0) + c1 * c2
        return Dim._make(acc)

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        if isinstance(other, Dim):
            # exact quotient by a dim: self == k * other for an int k
            q = _exact_ratio(self, other)
            if q is None:
                raise UnknownDim(f"{self} // {other} is not known until the symbols are bound")
            return q
        if not _is_int(other):
            return NotImplemented
        if other > 0 and all(c % other == 0 for _, c in self._terms):
            return Dim._make({m: c // other for m, c in self._terms})
        raise UnknownDim(f"{self} // {other} is not known until the symbols are bound")

    def __rfloordiv__(self, other: Any) -> Any:
        raise UnknownDim(f"{other} // {self} is not known until the symbols are bound")

    def __mod__(self, other: Any) -> Any:
        if not _is_int(other):
            if isinstance(other, Dim) and _exact_ratio(self, other) is not None:
                return 0
            raise UnknownDim(f"{self} % {other} is not known until the symbols are bound")
        if other > 0 and all(c % other == 0 for m, c in self._terms if m != ()):
            return self.constant % other
        raise UnknownDim(f"{self} % {other} is not known until the symbols are bound")

    def __rmod__(self, other: Any) -> Any:
        raise UnknownDim(f"{other} % {self} is not known until the symbols are bound")

    def __truediv__(self, other: Any) -> Any:
        raise UnknownDim(f"{self} / {other}: symbolic extents divide only exactly (use //)")

    __rtruediv__ = __truediv__

    # --- comparisons: answered only when decidable ----------------------------------------

    def _difference(self, other: Any) -> int | Dim | None:
        o = _terms_of(other)
        if o is None:
            return None
        return self - (other if isinstance(other, Dim) else int(other))

    def __eq__(self, other: Any) -> Any:
        if other is self:
            return True
        d = self._difference(other)
        if d is None:
            return NotImplemented
        if isinstance(d, int):
            return d == 0
        raise UnknownDim(f"whether {self} == {other} is not known until the symbols are bound")

    def __ne__(self, other: Any) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def _compare(self, other: Any, op: str) -> bool:
        d = self._difference(other)
        if d is None:
            raise TypeError(f"cannot compare {self} with {other!r}")
        if isinstance(d, int):
            return {"<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0}[op]
        # non-negative symbols: a difference whose coefficients are all >= 0 is >= its constant
        if all(c >= 0 for _, c in d.terms) and op in (">=", ">"):
            if d.constant > 0 or op == ">=":
                return True
        raise UnknownDim(f"whether {self} {op} {other} is not known until the symbols are bound")

    def __lt__(self, other: Any) -> bool:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> bool:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> bool:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> bool:
        return self._compare(other, ">=")

    def __hash__(self) -> int:
        return self._hash

    def __bool__(self) -> bool:
        raise UnknownDim(f"whether {self} is zero is not known until the symbols are bound")

    def __int__(self) -> int:
        raise UnknownDim(f"the value of {self} is not known until the symbols are bound")

    __index__ = __int__

    def __float__(self) -> float:
        raise UnknownDim(f"the value of {self} is not known until the symbols are bound")

    # --- meaning -----------------------------------------------------------------------

    def symbols(self) -> set[str]:
        return {s for m, _ in self._terms for s in m}

    def substitute(self, values: Mapping[str, int | Dim]) -> int | Dim:
        """The extent with the symbols of ``values`` replaced (an ``int`` once all are)."""
        total: Any = 0
        for m, c in self._terms:
            term: Any = c
            for s in m:
                term = term * values[s] if s in values else term * symbol(s)
            total = total + term
        return total

    def __str__(self) -> str:
        parts = []
        for m, c in sorted(self._terms, key=lambda t: (-len(t[0]), t[0])):
            body = "*".join(m)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            sign = "-" if c < 0 else "+"
            parts.append((sign, text))
        out = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, text in parts[1:]:
            out += f" {sign} {text}"
        return out

    def __repr__(self) -> str:
        return f"Dim('{self}')"

    def __reduce__(self) -> Any:
        return (Dim, (self._terms,))


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _terms_of(v: Any) -> _Terms | None:
    if isinstance(v, Dim):
        return v.terms
    if _is_int(v):
        return (((), int(v)),) if int(v) else ()
    return None


def _exact_ratio(a: Dim, b: Dim) -> int | None:
    ta, tb = dict(a.terms), dict(b.terms)
    if set(ta) != set(tb):
        return None
    ratios = {(ta[m] // tb[m]) if ta[m] % tb[m] == 0 else None for m in ta}
    if len(ratios) == 1:
        (r,) = ratios
        return r
    return None


def symbol(name: str) -> Dim:
    """The symbolic extent named ``name``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise NNEFXError(f"invalid symbol name {name!r} (letters, digits and _, not starting with a digit)")
    return Dim((((name,), 1),))


def is_symbolic(d: Any) -> bool:
    return isinstance(d, Dim)


def has_symbols(shape: Iterable[Any] | None) -> bool:
    return shape is not None and any(isinstance(d, Dim) for d in shape)


def symbols_of(shape: Iterable[Any] | None) -> set[str]:
    out: set[str] = set()
    for d in shape or ():
        if isinstance(d, Dim):
            out |= d.symbols()
    return out


def concrete(shape: tuple | None) -> tuple | None:
    """``shape`` with every symbolic extent replaced by ``None`` (for code that needs ints)."""
    if shape is None:
        return None
    return tuple(None if isinstance(d, Dim) else d for d in shape)


def substitute(shape: tuple | None, values: Mapping[str, int | Dim]) -> tuple | None:
    if shape is None:
        return None
    return tuple(d.substitute(values) if isinstance(d, Dim) else d for d in shape)


def substitute_in(value: Any, values: Mapping[str, int | Dim]) -> Any:
    """``value`` (an extent, or lists/tuples of them, as in an attribute) with ``values``
    written for its symbols."""
    if isinstance(value, Dim):
        return value.substitute(values)
    if isinstance(value, list):
        return [substitute_in(x, values) for x in value]
    if isinstance(value, tuple):
        return tuple(substitute_in(x, values) for x in value)
    return value


def fmt(d: Any) -> str:
    return "?" if d is None else str(d)


def fmt_shape(shape: tuple | None) -> str:
    return "?" if shape is None else "[" + ", ".join(fmt(d) for d in shape) + "]"


def bind(declared: tuple, actual: tuple, bindings: dict[str, int], what: str,
         loc: Location | None = None, origin: dict[str, str] | None = None) -> None:
    """Bind the symbols of ``declared`` from the concrete ``actual`` shape (same rank).

    Symbols already bound must agree; a mismatch names the symbol and both values
    (``origin`` remembers which input bound each symbol first).  A dimension such as
    ``B + 1`` binds ``B``; one that cannot be solved (``B*C``) is checked once its symbols
    are bound by other dimensions.
    """
    origin = origin if origin is not None else {}
    pending = []
    for axis, (d, n) in enumerate(zip(declared, actual, strict=False)):
        if isinstance(d, Dim):
            pending.append((axis, d, int(n)))
    progress = True
    while pending and progress:
        progress = False
        rest = []
        for axis, d, n in pending:
            value = d.substitute(bindings)
            if isinstance(value, int):
                if value != n:
                    _mismatch(d, value, n, axis, what, bindings, origin, loc)
                progress = True
                continue
            free = value.symbols()
            if len(free) == 1:
                (s,) = free
                lin = dict(value.terms)
                coeff = lin.get((s,), 0)
                if coeff and set(lin) <= {(), (s,)}:
                    num = n - lin.get((), 0)
                    if num % coeff != 0 or num // coeff < 0:
                        raise NNEFXError(f"{what}: dimension {axis} is {n}, which no value of symbol '{s}' "
                                         f"makes equal to {d}", loc)
                    bindings[s] = num // coeff
                    origin.setdefault(s, f"{what}, dimension {axis}")
                    progress = True
                    continue
            rest.append((axis, d, n))
        pending = rest
    # dimensions whose symbols no input binds alone (B*C with neither known) stay unchecked


def _mismatch(d: Dim, expected: int, n: int, axis: int, what: str, bindings: dict[str, int],
              origin: dict[str, str], loc: Location | None) -> None:
    syms = sorted(d.symbols())
    if len(syms) == 1 and d == symbol(syms[0]):
        s = syms[0]
        raise NNEFXError(f"{what}: dimension {axis} binds symbol '{s}' to {n}, but '{s}' is already {expected} "
                         f"(from {origin.get(s, 'an earlier input')})", loc)
    bound = ", ".join(f"{s} = {bindings[s]}" for s in syms if s in bindings)
    raise NNEFXError(f"{what}: dimension {axis} is {n} but {d} = {expected} with {bound}", loc)


# --- parsing: "2*B + 1", "S >= 0", "min(S, 8)" ------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(>=|<=|==|[-+*/%()<>=,]))")


def _tokens(text: str, loc: Location | None) -> list[str]:
    if len(text) > MAX_EXPRESSION:
        raise NNEFXError(f"symbolic expression too long (more than {MAX_EXPRESSION} characters)", loc)
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise NNEFXError(f"cannot read symbolic expression {text!r} at character {pos + 1}", loc)
        out.append(m.group(m.lastindex))
        pos = m.end()
    return out


class _ExprParser:
    def __init__(self, text: str, loc: Location | None, known: set[str] | None):
        self.toks = _tokens(text, loc)
        self.pos = 0
        self.text = text
        self.loc = loc
        self.known = known

    def error(self, msg: str) -> NNEFXError:
        return NNEFXError(f"in symbolic expression {self.text.strip()!r}: {msg}", self.loc)

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> str:
        t = self.peek()
        if t is None:
            raise self.error("unexpected end")
        self.pos += 1
        return t

    def sum(self) -> int | Dim:
        v = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            r = self.product()
            v = v + r if op == "+" else v - r
        return v

    def product(self) -> int | Dim:
        v = self.unary()
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            r = self.unary()
            if op == "*":
                v = v * r
            else:
                try:
                    v = (v // r) if op == "/" else (v % r)
                except (UnknownDim, ZeroDivisionError):
                    raise self.error(f"'{op}' by {r} is not exact") from None
        return v

    def unary(self) -> int | Dim:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        return self.atom()

    def atom(self) -> int | Dim:
        t = self.take()
        if t == "(":
            v = self.sum()
            if self.take() != ")":
                raise self.error("expected ')'")
            return v
        if t.isdigit():
            return int(t)
        if _NAME.fullmatch(t):
            if self.known is not None and t not in self.known:
                raise self.error(f"unknown symbol '{t}' (declared: {', '.join(sorted(self.known)) or 'none'})")
            return symbol(t)
        raise self.error(f"unexpected '{t}'")

    def done(self) -> None:
        if self.peek() is not None:
            raise self.error(f"unexpected '{self.peek()}'")


def parse_dim(text: str, loc: Location | None = None, known: set[str] | None = None) -> int | Dim:
    """Read an extent expression (``B``, ``2*S+1``); ``known`` limits the symbols allowed."""
    p = _ExprParser(text, loc, known)
    v = p.sum()
    p.done()
    return v


class Assertion:
    """A constraint between extents (tract's ``tract_assert S >= 1``, ``B == 2*T``)."""

    OPS = ("==", ">=", "<=", ">", "<", "=")

    def __init__(self, left: int | Dim, op: str, right: int | Dim, text: str, loc: Location | None = None):
        self.left, self.op, self.right, self.text, self.loc = left, op, right, text.strip(), loc

    def symbols(self) -> set[str]:
        return symbols_of((self.left, self.right))

    def holds(self, values: Mapping[str, int]) -> bool | None:
        """True/False once both sides are numbers under ``values``; None while symbols are free."""
        a = self.left.substitute(values) if isinstance(self.left, Dim) else self.left
        b = self.right.substitute(values) if isinstance(self.right, Dim) else self.right
        if isinstance(a, Dim) or isinstance(b, Dim):
            try:
                return {"==": a == b, "=": a == b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[self.op]
            except UnknownDim:
                return None
        return {"==": a == b, "=": a == b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[self.op]

    def __str__(self) -> str:
        return self.text


def parse_assertion(text: str, loc: Location | None = None, known: set[str] | None = None) -> Assertion:
    """Read ``LEFT OP RIGHT`` with OP one of ``== = >= <= > <``."""
    p = _ExprParser(text, loc, known)
    left = p.sum()
    op = p.peek()
    if op not in Assertion.OPS:
        raise p.error("expected a comparison (==, >=, <=, >, <)")
    p.take()
    right = p.sum()
    p.done()
    return Assertion(left, op, right, text, loc)


__all__ = ["Assertion", "Dim", "Extent", "UnknownDim", "bind", "concrete", "fmt", "fmt_shape", "has_symbols",
           "is_symbolic", "parse_assertion", "parse_dim", "substitute", "substitute_in", "symbol", "symbols_of"]
