"""The NNEF type system (final 1.0.5 model; the provisional dialect maps onto it).

Types are small immutable values:

* :class:`Prim` — ``integer`` / ``scalar`` / ``logical`` / ``string`` or the generic ``?``;
* :class:`TensorT` — a tensor with its data type (``None`` = unbound ``tensor<>``);
* :class:`ArrayT`, :class:`TupleT`, and :data:`EMPTY` (the type of the literal ``[]``).

The provisional ``extent`` *is* ``integer``; the provisional untyped ``tensor`` is the unbound
``tensor<>`` with *lenient* conversions (any tensor goes to and from it), which is how the
provisional spec's hidden tensor data types behave (NNEF 1.0 §3.3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

PRIMS = ("integer", "scalar", "logical", "string")
GENERIC = "?"


class Type:
    """Base of all types."""

    def is_tensor(self) -> bool:
        """True when this type contains a tensor anywhere (then it is not an attribute)."""
        return False

    def has_generic(self) -> bool:
        return False

    def bind(self, dtype: str | None) -> Type:
        """This type with the generic ``?`` replaced by ``dtype``."""
        return self


@dataclass(frozen=True)
class Prim(Type):
    name: str

    def __str__(self) -> str:
        return self.name

    def has_generic(self) -> bool:
        return self.name == GENERIC

    def bind(self, dtype: str | None) -> Type:
        return Prim(dtype) if self.name == GENERIC and dtype else self


@dataclass(frozen=True)
class TensorT(Type):
    dtype: str | None  # scalar / integer / logical / "?" / None (unbound)
    #: Provisional untyped ``tensor``: converts to and from any tensor type.
    lenient: bool = False

    def __str__(self) -> str:
        if self.lenient:
            return "tensor"
        return f"tensor<{self.dtype or ''}>"

    def is_tensor(self) -> bool:
        return True

    def has_generic(self) -> bool:
        return self.dtype == GENERIC

    def bind(self, dtype: str | None) -> Type:
        return TensorT(dtype) if self.dtype == GENERIC and dtype else self


@dataclass(frozen=True)
class ArrayT(Type):
    item: Type

    def __str__(self) -> str:
        return f"{self.item}[]"

    def is_tensor(self) -> bool:
        return self.item.is_tensor()

    def has_generic(self) -> bool:
        return self.item.has_generic()

    def bind(self, dtype: str | None) -> Type:
        return ArrayT(self.item.bind(dtype))


@dataclass(frozen=True)
class TupleT(Type):
    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(t) for t in self.items) + ")"

    def is_tensor(self) -> bool:
        return any(t.is_tensor() for t in self.items)

    def has_generic(self) -> bool:
        return any(t.has_generic() for t in self.items)

    def bind(self, dtype: str | None) -> Type:
        return TupleT(tuple(t.bind(dtype) for t in self.items))


@dataclass(frozen=True)
class EmptyArrayT(Type):
    def __str__(self) -> str:
        return "[]"


EMPTY = EmptyArrayT()
INTEGER, SCALAR, LOGICAL, STRING = Prim("integer"), Prim("scalar"), Prim("logical"), Prim("string")


def can_cast(src: Type, dst: Type) -> bool:
    """Whether a value of type ``src`` may stand where ``dst`` is expected (implicit casts).

    The complete list of the final spec: primitive ``T`` → ``tensor<T>``; anything →
    ``?``-typed slots (handled by binding first); any tensor → ``tensor<>``; arrays and
    tuples item-wise; ``[]`` → any array.  Provisional lenient tensors convert freely.
    No rule converts an integer (``extent``) to a scalar, in either dialect (provisional
    1.0 §3.3.2 lists the same conversions); the provisional chapter's own example
    ``bar(input, alpha = 2)`` breaks this and is refused.
    """
    if src == dst:
        return True
    if isinstance(dst, TensorT):
        if isinstance(src, TensorT):
            if dst.dtype is None or src.lenient or dst.lenient:
                return True
            if src.dtype is None:
                return False
            return src.dtype == dst.dtype or dst.dtype == GENERIC
        if isinstance(src, Prim) and src.name in ("scalar", "integer", "logical"):
            return dst.dtype in (None, GENERIC, src.name) or dst.lenient
        return False
    if isinstance(dst, Prim):
        if dst.name == GENERIC:
            return isinstance(src, Prim)
        return isinstance(src, Prim) and src.name == dst.name
    if isinstance(dst, ArrayT):
        if isinstance(src, EmptyArrayT):
            return True
        return isinstance(src, ArrayT) and can_cast(src.item, dst.item)
    if isinstance(dst, TupleT):
        return (isinstance(src, TupleT) and len(src.items) == len(dst.items)
                and all(can_cast(s, d) for s, d in zip(src.items, dst.items, strict=False)))
    if isinstance(dst, EmptyArrayT):
        return isinstance(src, EmptyArrayT)
    return False


def common_type(a: Type, b: Type) -> Type | None:
    """The type both ``a`` and ``b`` convert to (one of the two), or None."""
    if can_cast(a, b):
        return b
    if can_cast(b, a):
        return a
    if isinstance(a, ArrayT) and isinstance(b, ArrayT):
        item = common_type(a.item, b.item)
        return ArrayT(item) if item is not None else None
    if isinstance(a, TupleT) and isinstance(b, TupleT) and len(a.items) == len(b.items):
        items = [common_type(x, y) for x, y in zip(a.items, b.items, strict=False)]
        if all(t is not None for t in items):
            return TupleT(tuple(items))  # type: ignore[arg-type]
    return None


def deduce_generic(param: Type, arg: Type, found: set[str]) -> None:
    """Collect the data types ``arg`` offers for the ``?`` in ``param`` into ``found``.

    Inside a generic fragment's body an argument may itself have the enclosing ``?`` type
    (``tensor<?>``, ``tensor<?>[]``, ``?``): it offers ``?``, i.e. the caller's bound type, at
    any nesting (NNEF spec §2.4, generic fragments: the parameter is deduced from the
    arguments' types), so ``concat([a, b], axis = 1)`` binds ``concat``'s ``?`` to the
    fragment's own."""
    if isinstance(param, TensorT) and param.dtype == GENERIC:
        if isinstance(arg, TensorT) and arg.dtype is not None and not arg.lenient:
            found.add(arg.dtype)
        elif isinstance(arg, Prim) and arg.name in ("scalar", "integer", "logical", GENERIC):
            found.add(arg.name)
    elif isinstance(param, Prim) and param.name == GENERIC:
        if isinstance(arg, Prim):
            found.add(arg.name)
    elif isinstance(param, ArrayT) and isinstance(arg, ArrayT):
        deduce_generic(param.item, arg.item, found)
    elif isinstance(param, TupleT) and isinstance(arg, TupleT) and len(param.items) == len(arg.items):
        for p, a in zip(param.items, arg.items, strict=False):
            deduce_generic(p, a, found)


def tensor_dtype(t: Type) -> str | None:
    """The data type of a (single) tensor type, or of a primitive standing for one."""
    if isinstance(t, TensorT):
        return t.dtype
    if isinstance(t, Prim) and t.name in ("scalar", "integer", "logical"):
        return t.name
    return None


def convert_value(v, want: Type):
    """``v`` converted to ``want`` where an implicit integer → scalar conversion applies."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and (want == Prim("scalar") or (isinstance(want, TensorT) and want.dtype == "scalar")):
        return float(v)
    if isinstance(v, list) and isinstance(want, ArrayT):
        return [convert_value(x, want.item) for x in v]
    if isinstance(v, tuple) and isinstance(want, TupleT) and len(v) == len(want.items):
        return tuple(convert_value(x, t) for x, t in zip(v, want.items, strict=False))
    return v
