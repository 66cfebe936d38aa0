"""What the NNEF fast path keeps between documents: compiled statement forms, type ids.

WHY a module of its own: this is the fast path's only process-wide mutable state, shared by
every document (and thread) that goes through it, and the reason its results could depend
on what was read before; keeping it in one small module, with its lock, makes that
dependency reviewable in one place.

Compiling a statement form costs about 100 µs (the general parser, checker and expander on
one statement), and a real exporter document has a dozen forms that every document of that
exporter repeats.  Compiled forms are therefore kept between documents, keyed on all they
depend on: the form itself (operation, template text without identifiers, strings and
numbers, slot kinds and types), the standard library build (a new registry rebuilds it),
the document's extensions (or, with fragment definitions, its whole prologue text and file
name), the expansion options (expander class, ``lowered``, ``expand_all``, ``atomic``),
whether shapes are inferred, and the type interning whose ids the key and the form use.  A
form is a pure function of those: its checks and expansion see nothing else of the document
(tests: ``test_frontend_cache.py``).  Errors are never cached (a form that fails is
not stored).  The LRU's bound is ``nnefx.semantics.fastpath.FORM_CACHE_SIZE``, read by each
document's compiler when it starts (so setting it there takes effect).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from .plans import Template

#: Most (checker type, dtype) pairs one interning holds before a fresh one is started.
_TYPE_LIMIT = 256


class _Types:
    """Interning of (checker type, dtype) pairs as small ints (cheap keys); shared by the
    compilers that start while it is current."""

    __slots__ = ("info", "ids")

    def __init__(self) -> None:
        self.info: list[tuple[Any, str]] = []
        self.ids: dict[tuple[Any, str], int] = {}


_lock = threading.Lock()
_types = _Types()
#: Process-wide, so that a shape id never names two things, even in plans derived from a
#: shared form's first plan (made by another document's compiler).
shape_ids = itertools.count()
_forms: dict[tuple, Template] = {}


def clear_caches() -> None:
    """Forget every compiled statement form and type id (benchmarks of a first document,
    tests); documents read afterwards compile their forms again."""
    global _types
    with _lock:
        _forms.clear()
        _types = _Types()


def current_types() -> _Types:
    """The type interning a compiler starting now uses (for the whole of its document)."""
    return _types


def intern_type(types: _Types, key: tuple[Any, str]) -> int:
    """The id of ``key`` in ``types``, added when missing.  When the current interning is
    full, later documents start a fresh one (and an empty form cache, whose keys hold the
    old ids); the document that filled it keeps using its own."""
    global _types
    with _lock:
        tid = types.ids.get(key)
        if tid is None:
            if len(types.info) >= _TYPE_LIMIT and _types is types:
                # many distinct types in one process: later documents start a fresh
                # interning (and form cache); this document keeps using its own
                _types = _Types()
                _forms.clear()
            tid = types.ids[key] = len(types.info)
            types.info.append(key)
    return tid


def shared_form(key: tuple) -> Template | None:
    """The form compiled under ``key`` by an earlier document, None if none is kept."""
    with _lock:
        tmpl = _forms.pop(key, None)
        if tmpl is not None:
            _forms[key] = tmpl  # most recently used last
        return tmpl


def share_form(key: tuple, tmpl: Template, limit: int) -> None:
    """Keep ``tmpl`` for later documents; the least recently used leave beyond ``limit``."""
    with _lock:
        _forms[key] = tmpl
        while len(_forms) > limit:
            del _forms[next(iter(_forms))]
