"""What the NNEF fast path builds operations from: plans, templates and value recipes.

WHY a module of its own: these are the data the fast path's two halves exchange.  The
statement-form compiler (:mod:`nnefx.semantics.fastpath.compiler`) turns a statement form
into a :class:`Template` and each exact template into a :class:`StatementPlan`; the per-document
statement loop (:mod:`nnefx.semantics.fastpath`) only *reads* plans, rebuilding every
argument and attribute value from its (kind, payload) recipe for each statement.  Keeping
the recipe encoding (:func:`encode_value`) next to its decoding (:func:`rebuild_value`, :func:`clone_constant`)
and to the substitution recipes of derived plans (:func:`numeric_recipe`) keeps the one
representation both halves rely on in one place.  :class:`Bail`, the fast path's "not for
me" signal, lives here because every fast-path module raises it.
"""

from __future__ import annotations

from typing import Any


class Bail(Exception):
    """The fast path does not handle this document; run the general pipeline."""


SLOT_MARK, STR_MARK, OUT_MARK = "\x00i", "\x00s", "\x00o"
#: Numbers stand in a compiled template as values no document writes (checked).
INT_SENTINEL, REAL_SENTINEL = -(10 ** 60), -1.2345e300
#: Slot kinds next to type ids (which are >= 0) in keys.
STRING, INT, REAL = -1, -2, -3

# Instantiation of a value: (kind, payload); kind 0 = slot index, 1 = immutable constant,
# 2 = flat list constant (copied per operation), 3 = nested constant holding lists (deep
# copied), 4 = list tree, 5 = tuple tree (payload: list of item instantiations).
SLOT, CONST, LIST, DEEP, _LTREE, _TTREE = 0, 1, 2, 3, 4, 5

#: Plan-cache entry of a statement form the general machinery reads (see ``delegate``).
DELEGATE = object()


class StatementPlan:
    """How to build the operation of every statement with one exact template (numbers
    included); made by :meth:`Compiler.specialize`."""

    __slots__ = ("op", "dtype", "inputs", "attribs", "attr_copies", "attr_fills", "outputs", "tensors",
                 "out_types", "ref_pos", "attr_str_pos", "is_external", "is_variable", "update_slot",
                 "shape_kind", "shape", "nout", "out_flat", "shape_key")

    def clone(self) -> StatementPlan:
        """A copy sharing every field (derived plans replace some; spelled out because a
        loop over ``__slots__`` costs four times as much)."""
        p = StatementPlan()
        p.op, p.dtype, p.inputs, p.attribs, p.attr_copies = self.op, self.dtype, self.inputs, self.attribs, \
            self.attr_copies
        p.attr_fills, p.outputs, p.tensors, p.out_types, p.ref_pos = self.attr_fills, self.outputs, self.tensors, \
            self.out_types, self.ref_pos
        p.attr_str_pos, p.is_external, p.is_variable, p.update_slot = self.attr_str_pos, self.is_external, \
            self.is_variable, self.update_slot
        p.shape_kind, p.shape, p.nout, p.out_flat, p.shape_key = self.shape_kind, self.shape, self.nout, \
            self.out_flat, self.shape_key
        return p


class Template:
    """A statement form compiled by the general pipeline, numbers still open; made by
    :meth:`Compiler.compile_template`."""

    __slots__ = ("op", "marks", "outputs", "out_flat", "tensors", "out_types", "update_slot", "fixed", "shape_only",
                 "numeric")


def encode_value(v: Any) -> tuple[int, Any]:
    """How to rebuild ``v`` (which may contain markers) for another statement."""
    if isinstance(v, str):
        if v.startswith(SLOT_MARK) or v.startswith(STR_MARK):
            return (SLOT, int(v[2:]))
        if "\x00" in v:
            raise Bail("a slot was combined into another value")
        return (CONST, v)
    if isinstance(v, (list, tuple)):
        items = [encode_value(x) for x in v]
        if all(k == CONST for k, _ in items):
            if isinstance(v, tuple):
                return (CONST, v) if not _has_list(v) else (DEEP, v)
            return (DEEP, v) if any(_has_list(x) for x in v) else (LIST, v)
        return (_LTREE if isinstance(v, list) else _TTREE, items)
    if isinstance(v, (bool, int, float)) or v is None:
        return (CONST, v)
    raise Bail(f"unexpected value {v!r} in an operation")


def _has_list(v: Any) -> bool:
    if isinstance(v, list):
        return True
    if isinstance(v, tuple):
        return any(_has_list(x) for x in v)
    return False


def clone_constant(v: Any) -> Any:
    """A fresh copy of a constant made of lists/tuples (the general pipeline builds new
    lists for every operation; sharing them would let one operation's edits leak)."""
    if isinstance(v, list):
        return [clone_constant(x) for x in v]
    if isinstance(v, tuple):
        return tuple(clone_constant(x) for x in v)
    return v


def rebuild_value(kind: int, payload: Any, slots: list[str]) -> Any:
    if kind == SLOT:
        s = slots[payload]
        return s[1:-1] if s[0] in "'\"" else s
    if kind == CONST:
        return payload
    if kind == LIST:
        return payload.copy()
    if kind == DEEP:
        return clone_constant(payload)
    items = [rebuild_value(k, p, slots) for k, p in payload]
    return items if kind == _LTREE else tuple(items)


def hashable_shapes(shapes: list) -> tuple:
    """Input shapes as ``_input_shape`` gives them, hashable: a shape (ints and None), None
    or a tuple of those as they are, a list marked as such (which of these an input is
    follows from the operation's declaration, which is in the key too); a list inside a
    tuple stays a list (unhashable: the caller does not memoise that)."""
    return tuple([("list", hashable_shapes(v)) if type(v) is list else v for v in shapes])


def numeric_recipe(tmpl: Template, plan: StatementPlan, attr_numbers: list[tuple[str, Any]]) -> tuple | bool:
    """Where the numbers of template ``tmpl`` land in its plan ``plan``, when each is a whole
    input or attribute value or an item of a flat list of plain constants (``mul(x, 0.5)``,
    ``axes = [0, 2]``); then other numbers give their plans by substitution
    (:meth:`Compiler._with_numbers`).  False when a number sits deeper (tuples, lists
    holding slots) or the plan's shape comes from a probe (variables, constants,
    externals): :meth:`Compiler.specialize` fills those in full."""
    if plan.shape_kind == 1:
        return False
    marks = tmpl.marks
    in_spots = []
    for j, (k, v) in enumerate(tmpl.op.inputs.items()):
        spot = _number_spot(v, marks)
        if spot is False or spot is not None and plan.inputs[j][:2] != (k, CONST if type(spot) is int else LIST):
            return False
        if spot is not None:
            in_spots.append((j, k, spot))
    copies = {k: j for j, (k, _, _) in enumerate(plan.attr_copies)}
    fills = {k for k, _, _ in plan.attr_fills}
    attr_spots = []
    for k, v in tmpl.op.attribs.items():
        spot = _number_spot(v, marks)
        if spot is False:
            return False
        if spot is not None:
            if k in fills or (k in copies if type(spot) is int else plan.attr_copies[copies[k]][1] != LIST
                                  if k in copies else True):
                return False
            attr_spots.append((k, copies.get(k, -1), spot))
    if not in_spots and not attr_spots:
        return False
    return (plan, in_spots, attr_spots, dict(attr_numbers), tuple(attr_numbers))


def _number_spot(v: Any, marks: dict) -> Any:
    """For :func:`numeric_recipe`: None when template value ``v`` holds no number marker;
    the marker's index when ``v`` is one; a list of (is marker, index or constant) when
    ``v`` is a flat list of markers and plain constants; else False."""
    if type(v) is int or type(v) is float:
        return marks.get((type(v), v))
    if not has_number(v, marks):
        return None
    if type(v) is not list:
        return False
    items = []
    for x in v:
        if (type(x) is int or type(x) is float) and (type(x), x) in marks:
            items.append((True, marks[(type(x), x)]))
        elif x is None or type(x) in (bool, int, float) or type(x) is str and "\x00" not in x:
            items.append((False, x))
        else:
            return False
    return items


def fill_flat(spots: list[tuple[bool, Any]], values: list[Any]) -> list:
    return [values[x] if is_mark else x for is_mark, x in spots]


def has_number(v: Any, marks: dict) -> bool:
    """Whether template value ``v`` holds a number marker."""
    if isinstance(v, (list, tuple)):
        return any(has_number(x, marks) for x in v)
    return (type(v) is int or type(v) is float) and (type(v), v) in marks


def attr_encodings(plan: StatementPlan) -> list[tuple[int, Any]]:
    """(kind, payload) per attribute of ``plan``, in attribute order."""
    special = {k: (kind, payload) for k, kind, payload in plan.attr_copies + plan.attr_fills}
    return [special.get(k, (CONST, v)) for k, v in plan.attribs.items()]


def frozen_value(v: Any) -> Any:
    """Hashable, type-exact image of a plain value (``1``, ``1.0``, ``True`` and ``-0.0``
    all differ)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, *[frozen_value(x) for x in v])
    return (type(v).__name__, repr(v))


def number_value(text: str) -> int | float:
    """The value of a numeric literal as the parser computes it (``parse_literal``)."""
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)


def encode_out(v: Any) -> tuple[int, Any]:
    if isinstance(v, str) and v.startswith(OUT_MARK):
        return (SLOT, int(v[2:]))
    if isinstance(v, list):
        return (_LTREE, [encode_out(x) for x in v])
    raise Bail("unexpected result")


def slot_indexes(kind: int, payload: Any) -> list[int]:
    if kind == SLOT:
        return [payload]
    if kind in (_LTREE, _TTREE):
        return [i for k, p in payload for i in slot_indexes(k, p)]
    return []

