"""Fast path of the NNEF front-end for flat graph documents (what exporters write).

WHY: the general pipeline (tokens → syntax tree → checker → expander → shape pass) costs
about 120 µs per operation in pure Python, six times the official C++ parser.  Real
documents are flat and very repetitive: ``lhs = op(args);`` statements whose arguments
differ only in the tensor names and string literals (labels) they mention, while the rest
(``padding = [(1, 1), (1, 1)], stride = [1, 1]``) repeats thousands of times.

How: one compiled regular expression cuts the document into statements.  Each statement's
argument text is split (also by a regular expression, i.e. at C speed) into a *template*
(everything but identifiers and plain string literals) and its *slots* (the identifiers and
strings).  A statement whose exact template (and slot types) was seen before just fills
its slots into that template's *plan*.  Otherwise its numbers are cut out as well, and the
resulting statement *form* is compiled once by the very same parser, checker and expander
as the general pipeline, on a copy whose slots and numbers are replaced by unique markers;
the single operation this emits says where each slot and number goes, and filling in this
statement's numbers gives the plan for its exact template.  (Numbers never change what the
checker or the expander do with a flat statement, only which values pass through; their
kind, integer or real, is part of the form.)  Shape rules are pure functions of the input
shapes and the attributes, so their results are memoised per (form, attribute values,
input shapes), computed by the ordinary :func:`~nnefx.semantics.shapes.infer_operation`.
When a form's numbers are whole argument/attribute values or items of flat lists
(``mul(x, 0.37)``, ``axes = [0, 2]``, a variable's ``shape``), the plans after its first are
derived from the first by putting the numbers in place (:meth:`_Compiler._with_numbers`,
:meth:`_Compiler._with_shape`).  Compiled forms are kept between documents (an LRU of
``FORM_CACHE_SIZE``, keyed on everything a form depends on: see "what documents share"
below), because the documents of one exporter repeat the same dozen forms.

Exactness: the fast path produces the same :class:`~nnefx.graph.Graph` as the general
pipeline (same tensors, dtypes, shapes, attributes with the same Python types, operation
order and source locations); ``tests/test_frontend_fastpath.py`` compares the two field by
field over the whole fixture corpus and generated documents.  Anything it does not fully
understand — the provisional dialect, comments inside an argument list, string escapes,
expressions outside ``lhs = op(args);`` statements — and *every* error make it give up
(:class:`Bail`), and the caller runs the general pipeline from the start, so diagnostics are
exactly those of the general pipeline.  Fragment definitions before the graph are read and
checked by the general parser and checker themselves (:func:`_prologue`), and a statement
no plan can express (a call of a document-defined fragment, which ``compile_document``
expands into several operations; a nested invocation; an identifier inside an expression)
is read on its own by the general parser, checker and expander, working on the live graph
with the expander state the general pipeline would have at that statement
(:meth:`_Compiler.delegate`).

Switch: ``nnefx.semantics.fastpath.ENABLED = False`` (or ``with disabled():``) forces the
general pipeline, for differential tests and for bisecting a suspected fast-path bug.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation, Tensor
from ..syntax import ast
from ..syntax.lexer import EOF, NAME, Token, tokenize
from ..syntax.parser import (
    EXT_FRAGMENTS,
    EXT_OPERATORS,
    FINAL,
    KEYWORDS,
    Parser,
    deep_recursion,
    detect_dialect,
)
from .checker import Checker, Scope
from .evaluator import TensorRef
from .expander import MAX_OPERATIONS, MAX_STEPS, STEPS_PER_ASSIGNMENT, Expander, _graph_target
from .shapes import _input_shape, infer_operation
from .stdlib import KNOWN_EXTENSIONS, library, visible_fragments
from .types import TensorT

#: Global switch: False forces the general pipeline everywhere.
ENABLED = True
#: Re-raise unexpected exceptions of the fast path instead of falling back (tests).
STRICT = False


@contextmanager
def disabled() -> Iterator[None]:
    """Run the enclosed code with the fast path switched off (tests, bisecting)."""
    global ENABLED
    old = ENABLED
    ENABLED = False
    try:
        yield
    finally:
        ENABLED = old


class Bail(Exception):
    """The fast path does not handle this document; run the general pipeline."""


_KEYWORDS = KEYWORDS[FINAL]

# --- the regular expressions -----------------------------------------------------------
#
# Whitespace is what the lexer skips: blanks and newlines (``\r`` is normalised away
# first) and ``#`` comments.  Everything the expressions accept is re-validated by the real
# parser the first time a template is seen, so they only need to be no more lenient than
# the grammar about *where statements end* and *what a slot is*.

_B = r"[ \t\n\v\f]"
# A comment always runs to the end of its line (the lookahead stops backtracking into it).
# No nested repetition anywhere (``(?:[ ]+)*`` backtracks exponentially on a failing match).
_WS = r"(?:[ \t\n\v\f]|\#[^\n]*(?![^\n]))*"
_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_END_ID = r"(?![A-Za-z0-9_])"
# Plain string literals: printable ASCII (and tab), no quote of their kind, no backslash.
_STR = r"""'[\t -&(-\[\]-~]*'|"[\t !#-\[\]-~]*\""""

_HEADER = re.compile(
    rf"{_WS}version{_END_ID}{_WS}(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?![A-Za-z0-9_.]){_WS}(?P<semi>;)?"
    rf"(?P<exts>(?:{_WS}extension{_END_ID}[^;'\"#]*;)*)"
    rf"{_WS}graph{_END_ID}{_WS}(?P<name>{_ID}){_WS}\((?P<ins>[^;'\"#()]*)\){_WS}->{_WS}"
    rf"\((?P<outs>[^;'\"#()]*)\){_WS}\{{", re.ASCII)
_NAME_LIST = re.compile(rf"{_B}*{_ID}{_END_ID}(?:{_B}*,{_B}*{_ID}{_END_ID})*{_B}*\Z", re.ASCII)
_EXT_LIST = re.compile(rf"{_B}*{_ID}{_END_ID}(?:{_B}*(?:,{_B}*)?{_ID}{_END_ID})*{_B}*\Z", re.ASCII)
_IDS = re.compile(_ID, re.ASCII)

_STATEMENT = re.compile(
    rf"{_WS}(?:(?P<one>{_ID}){_WS}|(?P<many>[\[(A-Za-z_][A-Za-z0-9_ \t\n\v\f,\[\]()]*))=(?!=)"
    rf"{_WS}(?P<op>{_ID}){_WS}(?:<{_B}*(?P<gen>{_ID}){_B}*>{_WS})?"
    # the argument list as "unrolled loop" (plain run, then string + plain run, repeated):
    # the same language as (?:[^;'"#]|STR)*, matched twice as fast (no backtracking state
    # per character), still without nested ambiguity
    rf"\((?P<args>[^;'\"#]*(?:(?:{_STR})[^;'\"#]*)*)\){_WS};", re.ASCII)
_CLOSE = re.compile(rf"{_WS}\}}{_WS}\Z", re.ASCII)
# After fragment definitions: the graph keyword opening a line, then the same graph header.
_GRAPH_LINE = re.compile(rf"^[ \t\v\f]*(?P<graph>graph){_END_ID}", re.ASCII | re.MULTILINE)
_GRAPH_HEADER = re.compile(
    rf"graph{_WS}(?P<name>{_ID}){_WS}\((?P<ins>[^;'\"#()]*)\){_WS}->{_WS}\((?P<outs>[^;'\"#()]*)\){_WS}\{{",
    re.ASCII)

# Slots: plain string literals, and identifiers that are not named-argument names, not the
# logical literals and not the tail of a number (``1e5``).
_SLOTS = re.compile(
    rf"({_STR}|(?<![A-Za-z0-9_.])(?!(?:true|false){_END_ID}){_ID}{_END_ID}(?!{_B}*=(?!=)))", re.ASCII)


# --- plans ---------------------------------------------------------------------------------

_SLOT_MARK, _STR_MARK, _OUT_MARK = "\x00i", "\x00s", "\x00o"
#: Numbers stand in a compiled template as values no document writes (checked).
_INT_SENTINEL, _REAL_SENTINEL = -(10 ** 60), -1.2345e300
#: Most plans / memoised shape results kept at once (each cache is emptied when full; the
#: compiled templates, one per statement form, are kept).
_CACHE_LIMIT = 4096
#: Slot kinds next to type ids (which are >= 0) in keys.
_STRING, _INT, _REAL = -1, -2, -3


# Numeric literals in a template (identifiers and strings already cut out as ``\x00``).
_NUMBERS = re.compile(r"(?<![A-Za-z0-9_.])(-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)(?![A-Za-z0-9_.])", re.ASCII)

# Instantiation of a value: (kind, payload); kind 0 = slot index, 1 = immutable constant,
# 2 = flat list constant (copied per operation), 3 = nested constant holding lists (deep
# copied), 4 = list tree, 5 = tuple tree (payload: list of item instantiations).
_SLOT, _CONST, _LIST, _DEEP, _LTREE, _TTREE = 0, 1, 2, 3, 4, 5

#: Plan-cache entry of a statement form the general machinery reads (see ``delegate``).
_DELEGATE = object()


class _Plan:
    """How to build the operation of every statement with one exact template (numbers
    included); made by :meth:`_Compiler.specialize`."""

    __slots__ = ("op", "dtype", "inputs", "attribs", "attr_copies", "attr_fills", "outputs", "tensors",
                 "out_types", "ref_pos", "attr_str_pos", "is_external", "is_variable", "update_slot",
                 "shape_kind", "shape", "nout", "out_flat", "shape_key")

    def clone(self) -> _Plan:
        """A copy sharing every field (derived plans replace some; spelled out because a
        loop over ``__slots__`` costs four times as much)."""
        p = _Plan()
        p.op, p.dtype, p.inputs, p.attribs, p.attr_copies = self.op, self.dtype, self.inputs, self.attribs, \
            self.attr_copies
        p.attr_fills, p.outputs, p.tensors, p.out_types, p.ref_pos = self.attr_fills, self.outputs, self.tensors, \
            self.out_types, self.ref_pos
        p.attr_str_pos, p.is_external, p.is_variable, p.update_slot = self.attr_str_pos, self.is_external, \
            self.is_variable, self.update_slot
        p.shape_kind, p.shape, p.nout, p.out_flat, p.shape_key = self.shape_kind, self.shape, self.nout, \
            self.out_flat, self.shape_key
        return p


class _Template:
    """A statement form compiled by the general pipeline, numbers still open; made by
    :meth:`_Compiler.compile_template`."""

    __slots__ = ("op", "marks", "outputs", "out_flat", "tensors", "out_types", "update_slot", "fixed", "shape_only",
                 "numeric")


# --- what documents share --------------------------------------------------------------
#
# Compiling a statement form costs about 100 µs (the general parser, checker and expander on
# one statement), and a real exporter document has a dozen forms that every document of
# that exporter repeats.  Compiled forms are therefore kept between documents, keyed on all
# they depend on: the form itself (operation, template text without identifiers, strings
# and numbers, slot kinds and types), the standard library build (a new registry rebuilds
# it), the document's extensions (or, with fragment definitions, its whole prologue text and
# file name), the expansion options (expander class, ``lowered``, ``expand_all``,
# ``atomic``), whether shapes are inferred, and the type interning whose ids the key and
# the form use.  A form is a pure function of those: its checks and expansion see nothing
# else of the document (tests: ``test_frontend_fastpath.py``, forms shared between
# documents).  Errors are never cached (a form that fails is not stored).

#: Most compiled statement forms kept between documents (least recently used leave first).
FORM_CACHE_SIZE = 512
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
_shape_ids = itertools.count()
_forms: dict[tuple, _Template] = {}


def clear_caches() -> None:
    """Forget every compiled statement form and type id (benchmarks of a first document,
    tests); documents read afterwards compile their forms again."""
    global _types
    with _lock:
        _forms.clear()
        _types = _Types()


def _shared_form(key: tuple) -> _Template | None:
    with _lock:
        tmpl = _forms.pop(key, None)
        if tmpl is not None:
            _forms[key] = tmpl  # most recently used last
        return tmpl


def _share_form(key: tuple, tmpl: _Template) -> None:
    with _lock:
        _forms[key] = tmpl
        while len(_forms) > FORM_CACHE_SIZE:
            del _forms[next(iter(_forms))]


def _encode(v: Any) -> tuple[int, Any]:
    """How to rebuild ``v`` (which may contain markers) for another statement."""
    if isinstance(v, str):
        if v.startswith(_SLOT_MARK) or v.startswith(_STR_MARK):
            return (_SLOT, int(v[2:]))
        if "\x00" in v:
            raise Bail("a slot was combined into another value")
        return (_CONST, v)
    if isinstance(v, (list, tuple)):
        items = [_encode(x) for x in v]
        if all(k == _CONST for k, _ in items):
            if isinstance(v, tuple):
                return (_CONST, v) if not _has_list(v) else (_DEEP, v)
            return (_DEEP, v) if any(_has_list(x) for x in v) else (_LIST, v)
        return (_LTREE if isinstance(v, list) else _TTREE, items)
    if isinstance(v, (bool, int, float)) or v is None:
        return (_CONST, v)
    raise Bail(f"unexpected value {v!r} in an operation")


def _has_list(v: Any) -> bool:
    if isinstance(v, list):
        return True
    if isinstance(v, tuple):
        return any(_has_list(x) for x in v)
    return False


def _clone(v: Any) -> Any:
    """A fresh copy of a constant made of lists/tuples (the general pipeline builds new
    lists for every operation; sharing them would let one operation's edits leak)."""
    if isinstance(v, list):
        return [_clone(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_clone(x) for x in v)
    return v


def _build(kind: int, payload: Any, slots: list[str]) -> Any:
    if kind == _SLOT:
        s = slots[payload]
        return s[1:-1] if s[0] in "'\"" else s
    if kind == _CONST:
        return payload
    if kind == _LIST:
        return payload.copy()
    if kind == _DEEP:
        return _clone(payload)
    items = [_build(k, p, slots) for k, p in payload]
    return items if kind == _LTREE else tuple(items)


def _leaves(node: ast.Node, out: list[tuple[str, str]]) -> None:
    """Identifier, string and number leaves under argument/lvalue ``node`` in source order;
    bails when one sits under anything but array/tuple literals (its value could matter)."""
    if isinstance(node, ast.Identifier):
        out.append(("i", node.name))
    elif isinstance(node, ast.Literal):
        if node.kind == "string":
            out.append(("s", node.value))
        elif node.kind in ("integer", "scalar"):
            out.append(("n", type(node.value).__name__, repr(node.value)))
    elif isinstance(node, (ast.ArrayExpr, ast.TupleExpr)):
        for item in node.items:
            _leaves(item, out)
    elif _negative_number(node):  # ``-2`` with operator expressions enabled
        value = -node.operand.value  # type: ignore[attr-defined]
        out.append(("n", type(value).__name__, repr(value)))
    elif _has_leaf(node):
        raise Bail("an identifier or string inside an expression")


def _identifier_names(node: ast.Node) -> set[str]:
    """Every identifier named anywhere under ``node``."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Identifier):
            out.add(n.name)
        stack.extend(ast.iter_children(n))
    return out


def _negative_number(node: ast.Node) -> bool:
    return (isinstance(node, ast.Unary) and node.op == "-" and isinstance(node.operand, ast.Literal)
            and node.operand.kind in ("integer", "scalar"))


def _has_leaf(node: ast.Node) -> bool:
    if isinstance(node, ast.Identifier) or isinstance(node, ast.Literal) and node.kind != "logical":
        return True
    return any(_has_leaf(c) for c in ast.iter_children(node))


def _rename(node: ast.Node, marks: Iterator[Any]) -> None:
    """Replace the leaves found by :func:`_leaves` (same order) by unique markers."""
    if isinstance(node, ast.Identifier):
        node.name = next(marks)
    elif isinstance(node, ast.Literal):
        if node.kind != "logical":
            node.value = next(marks)
    elif isinstance(node, (ast.ArrayExpr, ast.TupleExpr)):
        for item in node.items:
            _rename(item, marks)
    elif _negative_number(node):  # evaluates to -(-marker), i.e. the marker
        node.operand.value = -next(marks)  # type: ignore[attr-defined]


class _Compiler:
    """Per-document state: the fragment table, the type interning and the plan caches."""

    def __init__(self, text: str, file: str | None, table: dict[str, ast.Fragment], compositional: bool,
                 extensions: set[str], graph_name: str, expander_factory: Callable[..., Expander],
                 shapes: bool, context: tuple | None = None):
        self.text = text
        self.file = file
        self.table = table
        self.compositional = compositional
        self.extensions = extensions
        self.graph_name = graph_name
        self.expander_factory = expander_factory
        self.shapes = shapes
        #: type id -> (checker type, TensorRef dtype); ids are small ints for cheap keys
        self.types = _types
        self.type_info = self.types.info
        #: what compiled forms depend on besides their own text (None: not shared), see
        #: ``FORM_CACHE_SIZE``
        self.context = None if context is None else (self.types, shapes, *context)
        self.shape_memo: dict[tuple, Any] = {}
        #: operations the plans emit
        self.emitted: set[str] = set()
        #: template pieces (numbers cut out) -> where each slot and number comes from
        self.forms: dict[tuple, list[int]] = {}
        #: compiled statement forms, numbers open (see :meth:`plan_for`)
        self.templates: dict[tuple, _Template] = {}
        #: statement-by-statement reading (see :meth:`delegate`)
        self.input_shapes: dict[str, tuple] | None = None
        self.expander: Expander | None = None
        self.checker: Checker | None = None
        self.delegated = 0
        self.planned_synced = 0
        #: (template, attribute values) -> small int naming it in shape memo keys
        self.shape_keys: dict[tuple, int] = {}
        #: process-wide, so that an id never names two things even in plans derived from
        #: a shared form's first plan (made by another document's compiler)
        self.shape_ids = _shape_ids
        #: the graph :meth:`shape_of` runs the shape pass on (made on first use)
        self.scratch: Graph | None = None

    def parse_statement(self, tokens: list) -> ast.Assignment:
        """One statement's tokens as the general parser reads them inside this document's
        graph body (its extensions, its flat/compositional mode); a statement whose tokens do
        not end with it was cut at the wrong place."""
        parser = Parser(tokens, self.file, FINAL)
        parser.extensions = self.extensions
        parser.compositional = self.compositional
        parser.flat_reason = f"enable them with 'extension {EXT_OPERATORS};'"
        assign = parser.parse_assignment()
        if parser.tok.kind != EOF:
            raise Bail("statement boundary differs")
        return assign

    def shape_id(self, shape_key: tuple) -> int:
        """The small int that names ``(template, attribute values)`` in shape memo keys (an int
        hashes fast); ids are never reused, so clearing the table when it is full is safe."""
        sid = self.shape_keys.get(shape_key)
        if sid is None:
            if len(self.shape_keys) >= _CACHE_LIMIT:
                self.shape_keys.clear()
            sid = self.shape_keys[shape_key] = next(self.shape_ids)
        return sid

    def type_id(self, checker_type: Any, dtype: str) -> int:
        key = (checker_type, dtype)
        types = self.types
        tid = types.ids.get(key)
        if tid is None:
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

    # --- compiling one template ---------------------------------------------------------

    def plan_for(self, m: re.Match, texts: list[str], slots: list[str], type_ids: tuple, lhs: list[str],
                 lhs_key: str | None) -> _Plan:
        """The plan of a statement whose exact template was not seen yet.

        Numbers are abstracted once more: the template without its numeric literals (and
        the kinds, integer or real, of those) names a :class:`_Template` compiled once by
        the general pipeline; this statement's numbers are then filled into it, which gives
        the plan for its exact template (cached by the caller).
        """
        joined = "\x00".join(texts)
        if joined.count("\x00") != len(slots):
            raise Bail("NUL character in a statement")
        nparts = _NUMBERS.split(joined)
        pieces, numbers = tuple(nparts[0::2]), nparts[1::2]
        origin = self.forms.get(pieces)
        if origin is None:
            origin = []  # merged slot -> index into ``slots`` (or -1 - number index)
            si = 0
            for k, piece in enumerate(pieces):
                for _ in range(piece.count("\x00")):
                    origin.append(si)
                    si += 1
                if k < len(numbers):
                    origin.append(-1 - k)
            self.forms[pieces] = origin
        # the numbers' values, and their kinds from the values' types (the lexer's rule: real
        # when the literal has a fraction or an exponent, which is what _number tests)
        values = [_number(numbers[-1 - o]) if o < 0 else None for o in origin]
        merged_types = tuple([type_ids[o] if o >= 0 else _REAL if type(v) is float else _INT
                              for o, v in zip(origin, values, strict=True)])
        op_name, gen = m.group("op", "gen")
        key = (op_name, gen, pieces, lhs_key, merged_types)
        tmpl = self.templates.get(key)
        if tmpl is None:
            shared_key = None if self.context is None else (self.context, key)
            tmpl = None if shared_key is None else _shared_form(shared_key)
            if tmpl is None:
                merged = [slots[o] if o >= 0 else numbers[-1 - o] for o in origin]
                start = m.start("one") if m.group("one") is not None else m.start("many")
                tmpl = self.compile_template(start, m.end(), m.start("op"), merged, merged_types, lhs)
                if shared_key is not None:
                    _share_form(shared_key, tmpl)
            else:
                self.emitted.add(tmpl.op.op)
            self.templates[key] = tmpl
        return self.specialize(tmpl, values, origin, type_ids, slots)

    def compile_template(self, start: int, end: int, op_offset: int, slots: list[str], type_ids: list[int],
                         lhs_names: list[str]) -> _Template:
        """Compile the statement ``text[start:end]`` with the general pipeline's parser,
        checker and expander, its slots replaced by unique markers; ``slots`` (identifiers,
        strings and numbers, in source order) and ``lhs_names`` are what the regular
        expressions found, verified here against the syntax tree."""
        source = self.text[start:end]
        assign = self.parse_statement(tokenize(source, self.file))
        rhs = assign.rhs
        if not isinstance(rhs, ast.Invocation):
            raise Bail("right-hand side is not an invocation")
        found: list[tuple[str, ...]] = []
        for arg in rhs.args:
            _leaves(arg.value, found)
        if found != [_leaf_of(s, t) for s, t in zip(slots, type_ids, strict=True)]:
            raise Bail("slots differ from the syntax tree")
        lhs_found: list[tuple[str, ...]] = []
        _leaves(assign.lhs, lhs_found)
        if lhs_found != [("i", n) for n in lhs_names]:
            raise Bail("left-hand side differs from the syntax tree")
        # where the invocation is, relative to the statement, to check the emitted location
        before = source[:op_offset - start]
        op_line = before.count("\n") + 1
        op_col = op_offset - start - (before.rfind("\n") + 1) + 1

        marks: list[Any] = []
        for i, t in enumerate(type_ids):
            if t == _STRING:
                marks.append(_STR_MARK + str(i))
            elif t == _INT:
                marks.append(_INT_SENTINEL - i)
            elif t == _REAL:
                marks.append(_REAL_SENTINEL * (1.0 + i * 2.0 ** -30))
            else:
                marks.append(_SLOT_MARK + str(i))
        out_marks = [_OUT_MARK + str(j) for j in range(len(lhs_names))]
        it = iter(marks)
        for arg in rhs.args:
            _rename(arg.value, it)
        _rename(assign.lhs, iter(out_marks))

        # checker, exactly as Checker.check_graph does for one assignment
        checker = Checker(self.table, FINAL)
        checker.in_graph = True
        checker.generic = None
        scope = Scope()
        env: dict[str, Any] = {}
        for mark, tid in zip(marks, type_ids, strict=True):
            if tid >= 0:
                ctype, dtype = self.type_info[tid]
                scope.types[mark] = ctype
                scope.assigned.add(mark)
                env[mark] = TensorRef(mark, dtype)
        checker.variables = set(env)  # 'update' is re-checked per statement below
        rt = checker.type_of(rhs, scope)
        checker.bind_lhs(assign.lhs, rt, scope, {})
        out_types = []
        for mark in out_marks:
            t = scope.types[mark]
            if not isinstance(t, TensorT):
                raise Bail("graph identifiers must be single tensors")
            out_types.append(t)

        # expander, exactly as Expander.expand_graph does for one assignment
        expander = self.expander_factory(self.table)
        graph = Graph(name=self.graph_name)
        expander.graph = graph
        expander.reserved.update(out_marks)
        expander.doc_loc = rhs.loc
        target = _graph_target(assign.lhs)
        value = expander.eval(rhs, env, target)
        expander.bind(assign.lhs, value, env, target, tensor=True)
        if len(graph.operations) != 1:
            raise Bail("the statement expands to several operations")
        op = graph.operations[0]
        if op.location != Location(self.file, op_line, op_col):
            raise Bail("unexpected operation location")
        if list(graph.tensors) != _flat_names(op.outputs) or sorted(graph.tensors) != sorted(out_marks):
            raise Bail("results are not exactly the left-hand side identifiers")
        seen: list[int] = []
        number_marks = {(type(mk), mk): i for i, mk in enumerate(marks) if not isinstance(mk, str)}
        _count_marks(list(op.inputs.values()), number_marks, seen, tensor=True)
        _count_marks(list(op.attribs.values()), number_marks, seen, tensor=False)
        if sorted(seen) != list(range(len(marks))):
            raise Bail("a slot is not passed through exactly once")

        tmpl = _Template()
        tmpl.fixed = None
        tmpl.shape_only = None
        tmpl.numeric = None
        self.emitted.add(op.op)
        tmpl.op = op
        tmpl.marks = {(type(mk), mk): i for i, mk in enumerate(marks)}
        tmpl.outputs = [(k, *_encode_out(v)) for k, v in op.outputs.items()]
        tmpl.out_flat = [int(name[2:]) for name in op.output_names()]
        index = {mk: j for j, mk in enumerate(out_marks)}
        tmpl.tensors = [(index[name], t.dtype) for name, t in graph.tensors.items()]
        tmpl.out_types = [0] * len(out_marks)
        for j, mk in enumerate(out_marks):
            ref = env[mk]
            if not isinstance(ref, TensorRef) or ref.name != mk or graph.tensors[mk].dtype != ref.dtype:
                raise Bail("left-hand side not bound to its own tensor")
            tmpl.out_types[j] = self.type_id(out_types[j], ref.dtype)
        tmpl.update_slot = None
        if rhs.name == "update":
            first = checker_first_arg(self.table, rhs)
            if not isinstance(first, ast.Identifier) or not first.name.startswith(_SLOT_MARK):
                raise Bail("update's first argument")
            tmpl.update_slot = int(first.name[2:])
        return tmpl

    def specialize(self, tmpl: _Template, values: list[Any], origin: list[int], type_ids: tuple,
                   slots: list[str]) -> _Plan:
        """The plan of one exact template: ``tmpl`` with its numbers filled in (``values``
        holds, per template slot, the number, or None for a statement slot)."""
        op = tmpl.op
        marks = tmpl.marks
        quick = tmpl.shape_only
        if quick is not None:
            # a variable form whose numbers are exactly its 'shape' (nnef-tools writes one
            # such statement per weight): the first plan with the new extents in place
            proto, positions, frozen_rest = quick
            extents = [values[i] for i in positions]
            if all(type(d) is int and d > 0 for d in extents):  # else the general rules decide
                return self._with_shape(tmpl, proto, extents, frozen_rest)
        numeric = tmpl.numeric
        if numeric:
            return self._with_numbers(tmpl, numeric, values)
        for i, o in enumerate(origin):  # the statement slots' markers
            if o >= 0:
                values[i] = (_STR_MARK if slots[o][0] in "'\"" else _SLOT_MARK) + str(o)

        def fill(v: Any) -> Any:
            if isinstance(v, list):
                return [fill(x) for x in v]
            if isinstance(v, tuple):
                return tuple(fill(x) for x in v)
            i = marks.get((type(v), v)) if isinstance(v, (str, int, float)) else None
            return v if i is None else values[i]

        fixed = tmpl.fixed
        if fixed is None:
            # what does not depend on the numbers is the same for every plan of the template
            # (slot markers follow the statement form): encode it once
            fixed = tmpl.fixed = (
                {k: _encode(fill(v)) for k, v in op.inputs.items() if not _has_number(v, marks)},
                {k: (_encode(fill(v)), _frozen(fill(v))) for k, v in op.attribs.items() if not _has_number(v, marks)},
                [i for i, t in enumerate(type_ids) if t >= 0])
        fixed_inputs, fixed_attribs, ref_pos = fixed
        plan = _Plan()
        plan.op = op.op
        plan.dtype = op.dtype
        plan.inputs = [(k, *(fixed_inputs.get(k) or _encode(fill(v)))) for k, v in op.inputs.items()]
        plan.attribs = {}
        plan.attr_copies = []
        plan.attr_fills = []
        attr_str_pos: list[int] = []
        attr_numbers = []
        for k, v in op.attribs.items():
            known = fixed_attribs.get(k)
            if known is None:
                value = fill(v)
                (kind, payload), frozen = _encode(value), _frozen(value)
            else:
                (kind, payload), frozen = known
            if kind == _CONST:
                plan.attribs[k] = payload
            else:
                plan.attribs[k] = None  # keeps the key order
                if kind in (_LIST, _DEEP):
                    plan.attr_copies.append((k, kind, payload))
                else:
                    plan.attr_fills.append((k, kind, payload))
                    attr_str_pos.extend(_slot_indexes(kind, payload))
            attr_numbers.append((k, frozen))
        plan.attr_str_pos = sorted(set(attr_str_pos))
        plan.ref_pos = ref_pos
        plan.outputs = tmpl.outputs
        plan.out_flat = tmpl.out_flat
        plan.tensors = tmpl.tensors
        plan.out_types = tmpl.out_types
        plan.nout = len(tmpl.out_types)
        plan.is_external = op.op == "external"
        plan.is_variable = op.op == "variable"
        plan.update_slot = None if tmpl.update_slot is None else origin[tmpl.update_slot]
        # results of shape rules are shared by the plans of one template whose attributes
        # (string slots aside, which are part of the memo key) are equal
        shape_key = (id(tmpl), tuple(attr_numbers))
        plan.shape_key = self.shape_id(shape_key)
        plan.shape_kind = 0
        plan.shape = None
        if self.shapes:
            if op.op in ("variable", "constant", "external"):
                # their shape depends on the 'shape' (and 'value') attribute only, which the
                # plan fixes: compute it once
                attribs = {k: (_build(kind, payload, ["''"] * len(type_ids)) if v is None else v)
                           for (k, v), (kind, payload) in zip(plan.attribs.items(), _attr_encodings(plan),
                                                                strict=True)}
                graph = Graph(name=self.graph_name)
                name = "\x00o0"
                graph.tensors[name] = Tensor(name=name)
                probe = Operation(op.op, {}, {"output": name}, attribs, op.dtype, op.location)
                infer_operation(graph, probe, None)
                plan.shape_kind = 1
                plan.shape = graph.tensors[name].shape
            else:
                plan.shape_kind = 2
        if (plan.is_variable and tmpl.shape_only is None and plan.shape_kind == 1 and not plan.inputs
                and len(plan.attr_copies) == 1 and plan.attr_copies[0][:2] == ("shape", _LIST)
                and isinstance(op.attribs.get("shape"), list)
                and all(type(v) is int and (int, v) in marks for v in op.attribs["shape"])
                and not any(_has_number(v, marks) for k, v in op.attribs.items() if k != "shape")):
            positions = [marks[(int, v)] for v in op.attribs["shape"]]
            tmpl.shape_only = (plan, positions, [(k, f) for k, f in attr_numbers if k != "shape"])
        if tmpl.numeric is None:
            tmpl.numeric = _numeric_recipe(tmpl, plan, attr_numbers)
        return plan

    def _with_numbers(self, tmpl: _Template, recipe: tuple, values: list[Any]) -> _Plan:
        """The plan :meth:`specialize` makes for ``values``, from the template's first plan
        with the numbers put in their places (see :func:`_numeric_recipe`): what statements
        differing in a scalar (``mul(x, 0.37)``) or a flat list of numbers cost."""
        proto, in_spots, attr_spots, frozen_proto, _ = recipe
        plan = proto.clone()
        if in_spots:
            inputs = list(proto.inputs)
            for j, k, spot in in_spots:
                inputs[j] = (k, _CONST, values[spot]) if type(spot) is int else (k, _LIST, _fill_flat(spot, values))
            plan.inputs = inputs
        if attr_spots:
            attribs = proto.attribs.copy()
            copies = list(proto.attr_copies)
            frozen = frozen_proto.copy()
            for k, j, spot in attr_spots:
                if type(spot) is int:
                    v = attribs[k] = values[spot]
                else:
                    v = _fill_flat(spot, values)
                    copies[j] = (k, _LIST, v)
                frozen[k] = _frozen(v)
            plan.attribs = attribs
            plan.attr_copies = copies
        # the first plan may come from another document's compiler: look the id up here
        shape_key = (id(tmpl), tuple(frozen.items())) if attr_spots else (id(tmpl), recipe[4])
        plan.shape_key = self.shape_id(shape_key)
        return plan

    def _with_shape(self, tmpl: _Template, proto: _Plan, extents: list[int], frozen_rest: list) -> _Plan:
        """``proto`` (a plan of variable form ``tmpl``) with other positive extents; what
        :meth:`specialize` computes for them, without filling and probing."""
        plan = proto.clone()
        plan.attr_copies = [("shape", _LIST, extents)]
        plan.shape = tuple(extents)
        rest = dict(frozen_rest)
        shape_key = (id(tmpl), tuple([(k, _frozen(extents) if k == "shape" else rest[k]) for k in proto.attribs]))
        plan.shape_key = self.shape_id(shape_key)
        return plan

    # --- statements the general machinery reads one by one -----------------------------

    def delegate(self, m: re.Match, lhs: list[str], op_line: int, types: dict[str, int], variables: set[str],
                 externals: set[str], graph_inputs: set[str], graph: Graph, planned: int) -> None:
        """Read one statement no plan can express (a call of a document fragment, which
        ``compile_document`` expands; a nested invocation; ...) with the general parser,
        checker and expander, on the live graph: one persistent :class:`Expander` holds the
        name counters, the reserved names and the step count exactly as
        :meth:`Expander.expand_graph` would at this statement.  ``planned`` = statements
        built from plans so far (one expansion step each in the general pipeline)."""
        if self.input_shapes:
            # the expander's lazy shape inference ignores input_shapes, the fast path's shapes
            # do not: the general pipeline sorts that out with a final pass
            raise Bail("statement by statement with input_shapes")
        text = self.text
        stmt_start = m.start("one") if m.group("one") is not None else m.start("many")
        ex = self.expander
        if ex is None:
            rest, count = self.prescan(stmt_start)
            ex = self.expander = self.expander_factory(self.table)
            ex.graph = graph
            ex.reserved.update(types)
            ex.reserved.update(rest)
            ex.reserved.update(graph.inputs)
            ex.max_steps = MAX_STEPS + STEPS_PER_ASSIGNMENT * (planned + self.delegated + count)
            self.checker = Checker(self.table, FINAL)
            self.checker.in_graph = True
            self.checker.generic = None
        ex.steps += planned - self.planned_synced
        self.planned_synced = planned
        ex._matches.clear()  # keyed by id() of syntax nodes, and earlier statements' nodes are gone
        self.delegated += 1
        # the statement's tokens, moved to their place in the document
        stmt_line = op_line - text.count("\n", stmt_start, m.start("op"))
        column = stmt_start - (text.rfind("\n", 0, stmt_start) + 1)
        tokens = [Token(t.kind, t.value, t.line + stmt_line - 1, t.column + (column if t.line == 1 else 0), t.real,
                        t.end_line + stmt_line - 1, t.end_column + (column if t.end_line == 1 else 0))
                  for t in tokenize(text[stmt_start:m.end()], self.file)]
        assign = self.parse_statement(tokens)
        found: list[tuple[str, ...]] = []
        _leaves(assign.lhs, found)
        if found != [("i", n) for n in lhs]:
            raise Bail("left-hand side differs from the syntax tree")
        for name in lhs:
            if name in types:
                raise Bail(f"'{name}' assigned twice")
        if len(set(lhs)) != len(lhs):
            raise Bail("left-hand side repeats a name")
        # Checker.check_graph for this assignment (the names it reads, with their types)
        names = _identifier_names(assign.rhs)
        scope = Scope()
        env: dict[str, Any] = {}
        for name in names:
            tid = types.get(name)
            if tid is not None:
                scope.types[name] = self.type_info[tid][0]
                scope.assigned.add(name)
                env[name] = TensorRef(name, graph.tensors[name].dtype)
        checker = self.checker
        checker.variables = variables
        rt = checker.type_of(assign.rhs, scope)
        checker.bind_lhs(assign.lhs, rt, scope, {})
        rhs = assign.rhs
        is_external = isinstance(rhs, ast.Invocation) and rhs.name == "external"
        for name in lhs:
            if (name in graph_inputs) is not is_external:
                raise Bail("graph inputs must be (exactly) the externals")
            if not isinstance(scope.types[name], TensorT):
                raise Bail("graph identifiers must be single tensors")
        # Expander.expand_graph for this assignment
        before = len(graph.operations)
        ex.doc_loc = rhs.loc
        target = _graph_target(assign.lhs)
        value = ex.eval(rhs, env, target)
        ex.bind(assign.lhs, value, env, target, tensor=True)
        for name in lhs:
            ref = env[name]
            if not isinstance(ref, TensorRef) or ref.name != name:
                raise Bail("left-hand side not bound to its own tensor")
            types[name] = self.type_id(scope.types[name], ref.dtype)
        if isinstance(rhs, ast.Invocation) and rhs.name == "variable":
            variables.update(lhs)
        if is_external:
            externals.update(lhs)
        for op in graph.operations[before:]:
            self.emitted.add(op.op)
            if self.shapes:
                self.infer_delegated(graph, op)

    def infer_delegated(self, graph: Graph, op: Operation) -> None:
        """``infer_operation`` for an operation a delegated statement emitted, memoised like
        the plans' shape results: a registry shape rule sees only the operation's name,
        generic type, attributes and input shapes (literals are rank 0), so those (type-exact)
        are the key; the first result of each key is the ordinary shape pass's."""
        if op.op in ("external", "variable", "constant", "update"):
            infer_operation(graph, op, None)  # shaped from their own attributes, not a rule
            return
        tensors = graph.tensors
        try:
            shapes_in = _input_shape(graph, list(op.inputs.values()))
        except KeyError:  # an unknown tensor: the shape pass reports it
            infer_operation(graph, op, None)
            return
        attribs = op.attribs
        key = ("delegated", op.op, op.dtype, tuple(op.inputs), _frozen(list(attribs.items())) if attribs else None,
               _hashable_shapes(shapes_in), tuple([len(v) if isinstance(v, list) else -1 for v in op.outputs.values()]))
        names = op.output_names()
        memo = self.shape_memo
        try:
            result = memo.get(key)
        except TypeError:  # a list inside a tuple argument: not memoised
            infer_operation(graph, op, None)
            return
        if result is None:
            before = repr(op.attribs)  # as in shape_of: a rule editing its attributes is not replayed
            infer_operation(graph, op, None)
            if repr(op.attribs) != before:
                raise Bail("a shape rule changed its attributes")
            if len(memo) >= _CACHE_LIMIT:
                memo.clear()
            memo[key] = [tensors[n].shape for n in names]
            return
        for name, shape in zip(names, result, strict=True):
            tensors[name].shape = shape

    def prescan(self, pos: int) -> tuple[set[str], int]:
        """Left-hand side names and number of the statements from ``pos`` on (the expander
        reserves every name the graph body assigns, later ones included)."""
        names: set[str] = set()
        count = 0
        text = self.text
        while True:
            m = _STATEMENT.match(text, pos)
            if m is None:
                break
            one = m.group("one")
            if one is not None:
                names.add(one)
            else:
                names.update(_IDS.findall(m.group("many")))
            count += 1
            pos = m.end()
        if _CLOSE.match(text, pos) is None:
            raise Bail("not a flat statement, or text after the graph")
        return names, count

    def shape_of(self, op: Operation, refs: list[str], shapes_in: tuple) -> list:
        """Result shapes of ``op`` (in output order), by the ordinary shape pass on a scratch
        graph holding just its inputs; memoised by the caller."""
        graph = self.scratch
        if graph is None:
            graph = self.scratch = Graph(name=self.graph_name)
        tensors = graph.tensors
        tensors.clear()  # (one scratch graph per document: the rule sees only these tensors)
        for name, shape in zip(refs, shapes_in, strict=True):
            tensors[name] = Tensor(name, "scalar", shape)
        names = op.output_names()
        for name in names:
            tensors[name] = Tensor(name)
        # The rule sees the operation's own attribute values: one that edits them in place
        # (which the memo could not replay) is caught by comparing their text before and
        # after (``repr`` tells 1, 1.0, True and lists from tuples apart), and the fast
        # result is then thrown away as a whole.
        before = repr(op.attribs)
        infer_operation(graph, op, None)
        if repr(op.attribs) != before:
            raise Bail("a shape rule changed its attributes")
        return [tensors[name].shape for name in names]


def _hashable_shapes(shapes: list) -> tuple:
    """Input shapes as ``_input_shape`` gives them, hashable: a shape (ints and None), None
    or a tuple of those as they are, a list marked as such (which of these an input is
    follows from the operation's declaration, which is in the key too); a list inside a
    tuple stays a list (unhashable: the caller does not memoise that)."""
    return tuple([("list", _hashable_shapes(v)) if type(v) is list else v for v in shapes])


def _numeric_recipe(tmpl: _Template, plan: _Plan, attr_numbers: list[tuple[str, Any]]) -> tuple | bool:
    """Where the numbers of template ``tmpl`` land in its plan ``plan``, when each is a whole
    input or attribute value or an item of a flat list of plain constants (``mul(x, 0.5)``,
    ``axes = [0, 2]``); then other numbers give their plans by substitution
    (:meth:`_Compiler._with_numbers`).  False when a number sits deeper (tuples, lists
    holding slots) or the plan's shape comes from a probe (variables, constants,
    externals): :meth:`_Compiler.specialize` fills those in full."""
    if plan.shape_kind == 1:
        return False
    marks = tmpl.marks
    in_spots = []
    for j, (k, v) in enumerate(tmpl.op.inputs.items()):
        spot = _number_spot(v, marks)
        if spot is False or spot is not None and plan.inputs[j][:2] != (k, _CONST if type(spot) is int else _LIST):
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
            if k in fills or (k in copies if type(spot) is int else plan.attr_copies[copies[k]][1] != _LIST
                                  if k in copies else True):
                return False
            attr_spots.append((k, copies.get(k, -1), spot))
    if not in_spots and not attr_spots:
        return False
    return (plan, in_spots, attr_spots, dict(attr_numbers), tuple(attr_numbers))


def _number_spot(v: Any, marks: dict) -> Any:
    """For :func:`_numeric_recipe`: None when template value ``v`` holds no number marker;
    the marker's index when ``v`` is one; a list of (is marker, index or constant) when
    ``v`` is a flat list of markers and plain constants; else False."""
    if type(v) is int or type(v) is float:
        return marks.get((type(v), v))
    if not _has_number(v, marks):
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


def _fill_flat(spots: list[tuple[bool, Any]], values: list[Any]) -> list:
    return [values[x] if is_mark else x for is_mark, x in spots]


def _has_number(v: Any, marks: dict) -> bool:
    """Whether template value ``v`` holds a number marker."""
    if isinstance(v, (list, tuple)):
        return any(_has_number(x, marks) for x in v)
    return (type(v) is int or type(v) is float) and (type(v), v) in marks


def _attr_encodings(plan: _Plan) -> list[tuple[int, Any]]:
    """(kind, payload) per attribute of ``plan``, in attribute order."""
    special = {k: (kind, payload) for k, kind, payload in plan.attr_copies + plan.attr_fills}
    return [special.get(k, (_CONST, v)) for k, v in plan.attribs.items()]


def _frozen(v: Any) -> Any:
    """Hashable, type-exact image of a plain value (``1``, ``1.0``, ``True`` and ``-0.0``
    all differ)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, *[_frozen(x) for x in v])
    return (type(v).__name__, repr(v))


def _number(text: str) -> int | float:
    """The value of a numeric literal as the parser computes it (``parse_literal``)."""
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)


def _leaf_of(slot: str, kind: int) -> tuple[str, ...]:
    if kind == _STRING:
        return ("s", slot[1:-1])
    if kind in (_INT, _REAL):
        v = _number(slot)
        return ("n", type(v).__name__, repr(v))
    return ("i", slot)


def _count_marks(v: Any, number_marks: dict[tuple[type, Any], int], seen: list[int], tensor: bool) -> None:
    """Record which template markers ``v`` holds (``number_marks``: (type, number marker) ->
    its index); strings are never tensor arguments."""
    if isinstance(v, (list, tuple)):
        for x in v:
            _count_marks(x, number_marks, seen, tensor)
        return
    if isinstance(v, str):
        if "\x00" in v:
            if not (v.startswith(_SLOT_MARK) or v.startswith(_STR_MARK)):
                raise Bail("a slot was combined into another value")
            if tensor and v.startswith(_STR_MARK):
                raise Bail("a string in a tensor parameter")
            if not tensor and v.startswith(_SLOT_MARK):
                raise Bail("a tensor in an attribute")
            seen.append(int(v[2:]))
        return
    if type(v) is int or type(v) is float:
        i = number_marks.get((type(v), v))
        if i is not None:
            seen.append(i)


def _flat_names(outputs: dict[str, Any]) -> list[str]:
    out = []
    for v in outputs.values():
        if isinstance(v, list):
            out.extend(v)
        else:
            out.append(v)
    return out


def _encode_out(v: Any) -> tuple[int, Any]:
    if isinstance(v, str) and v.startswith(_OUT_MARK):
        return (_SLOT, int(v[2:]))
    if isinstance(v, list):
        return (_LTREE, [_encode_out(x) for x in v])
    raise Bail("unexpected result")


def _slot_indexes(kind: int, payload: Any) -> list[int]:
    if kind == _SLOT:
        return [payload]
    if kind in (_LTREE, _TTREE):
        return [i for k, p in payload for i in _slot_indexes(k, p)]
    return []


def checker_first_arg(table: dict[str, ast.Fragment], inv: ast.Invocation) -> ast.Expr:
    from .checker import match_arguments

    frag = table[inv.name]
    return match_arguments(frag, inv, FINAL)[frag.params[0].name].value


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same Python types, recursively (``1 == 1.0 == True`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


class _TypeIds(dict):
    """Tensor name -> type id; string slots map to -1, unknown identifiers bail."""

    def __missing__(self, key: str) -> int:
        if key[0] in "'\"":
            return -1
        raise Bail(f"identifier '{key}' is not defined before use")


# --- the document ----------------------------------------------------------------------


def compile_flat(text: str, *, file: str | None = None, dialect: str | None = None,
                 expander_factory: Callable[..., Expander] | None = None,
                 input_shapes: dict[str, tuple] | None = None, shapes: bool = True,
                 expander_key: tuple | None = None) -> tuple[Graph, dict[str, ast.Fragment]]:
    """Compile a flat final-dialect document; raises :class:`Bail` when the general pipeline
    must run instead (unsupported form or any error).  Returns the graph (shaped unless
    ``shapes`` is False, quantization not attached) and the fragment table.

    ``expander_key`` names what ``expander_factory`` makes (hashable; equal keys must make
    equal expanders): given, statement forms compiled for other documents with the same
    key (and library, extensions or prologue, shapes flag) are reused, see
    ``FORM_CACHE_SIZE``; None (a custom factory) compiles every form afresh."""
    if dialect not in (None, FINAL):
        raise Bail("only the final dialect")
    if file is not None and file.startswith("<stdlib"):
        raise Bail("file name reserved for the standard library")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            raise Bail("lone carriage returns")
    head = _HEADER.match(text)
    if head is not None:
        if head.group("semi") is None or int(head.group("major")) != 1:
            raise Bail("version statement")
        ext_names: list[str] = []
        exts = head.group("exts")
        if exts:
            for part in re.findall(r"extension(?![A-Za-z0-9_])([^;]*);", _strip_comments(exts)):
                if not _EXT_LIST.match(part):
                    raise Bail("extension list")
                ext_names.extend(_IDS.findall(part))
        for name in ext_names:
            if name not in KNOWN_EXTENSIONS or name in _KEYWORDS:
                raise Bail("extension")
        table = visible_fragments(FINAL, ext_names)
        context: tuple | None = (library(), frozenset(ext_names))
    else:  # fragment definitions before the graph: the general parser and checker read them
        ext_names, table, head = _prologue(text, file)
        context = (library(), text[:head.start()], file)  # the prologue decides the table
    gname = head.group("name")
    ins, outs = head.group("ins"), head.group("outs")
    if not _NAME_LIST.match(ins) or not _NAME_LIST.match(outs):
        raise Bail("graph parameter list")
    inputs, outputs = _IDS.findall(ins), _IDS.findall(outs)
    if (gname in _KEYWORDS or any(n in _KEYWORDS for n in inputs) or any(n in _KEYWORDS for n in outputs)
            or len(set(inputs)) != len(inputs) or len(set(outputs)) != len(outputs)
            or set(inputs) & set(outputs)):
        raise Bail("graph parameters")
    if expander_factory is None:
        def expander_factory(t: dict[str, ast.Fragment]) -> Expander:
            return Expander(t, FINAL)
        expander_key = (Expander, (), False, ())
    compiler = _Compiler(text, file, table, EXT_OPERATORS in ext_names, set(ext_names), gname, expander_factory,
                         shapes, None if expander_key is None else (*context, expander_key))
    graph = Graph(name=gname, inputs=list(inputs), outputs=list(outputs))
    compiler.input_shapes = input_shapes if shapes else None
    _body(compiler, graph, head.end(), set(inputs), input_shapes if shapes else None)
    if shapes and input_shapes:
        externals = {n for op in graph.operations if op.op == "external" for n in op.output_names()}
        for name in input_shapes:
            if name not in externals:
                raise Bail("input_shapes names a non-input")
    return graph, table


def _prologue(text: str, file: str | None) -> tuple[list[str], dict[str, ast.Fragment], re.Match]:
    """Version, extensions and fragment definitions, read by the general parser and checked
    as ``check_document`` does; returns the extension names, the fragment table and the
    match of the graph header.  The graph keyword is looked for at the start of a line, and
    the text before it must be exactly the prologue (else :class:`Bail`)."""
    from .frontend import fragment_table  # frontend imports this module

    graph = _GRAPH_LINE.search(text)
    if graph is None:
        raise Bail("no graph header at the start of a line")
    head = _GRAPH_HEADER.match(text, graph.start("graph"))
    if head is None:
        raise Bail("graph header")
    tokens = tokenize(text[:graph.start("graph")], file)
    if detect_dialect(tokens) != FINAL:
        raise Bail("only the final dialect")
    parser = Parser(tokens, file, FINAL)
    start = parser.tok
    doc = ast.Document(loc=parser.loc(start), dialect=FINAL, version=parser.parse_version())
    while parser.is_kw("extension"):
        doc.extensions.append(parser.parse_extension())
    parser.extensions = set(doc.extension_names())
    while parser.tok.kind == NAME and parser.tok.value == "fragment":
        if EXT_FRAGMENTS not in parser.extensions:
            raise Bail("fragments without their extension")
        parser.compositional = EXT_OPERATORS in parser.extensions
        parser.flat_reason = f"enable them with 'extension {EXT_OPERATORS};'"
        doc.fragments.append(parser.parse_fragment(require_body=False))
    if parser.tok.kind != EOF:
        raise Bail("the prologue does not end where the graph starts")
    table = fragment_table(doc)
    checker = Checker(table, FINAL)
    with deep_recursion():
        for frag in doc.fragments:
            checker.check_fragment_body(frag)
    return doc.extension_names(), table, head


def _strip_comments(s: str) -> str:
    return re.sub(r"#[^\n]*", " ", s)


def _body(c: _Compiler, graph: Graph, pos: int, graph_inputs: set[str],
          input_shapes: dict[str, tuple] | None) -> None:
    """The statement loop; kept in one function with local names because it runs once per
    operation."""
    text, file = c.text, c.file
    match = _STATEMENT.match
    split = _SLOTS.split
    findall = _IDS.findall
    count, rfind = text.count, text.rfind
    plans: dict[tuple, _Plan] = {}
    types = _TypeIds()
    tensors = graph.tensors
    operations = graph.operations
    append = operations.append
    keywords = _KEYWORDS
    variables: set[str] = set()
    externals: set[str] = set()
    shape_memo = c.shape_memo
    shapes = c.shapes
    line, line_start, last = 1, 0, 0
    plan_for = c.plan_for
    n = delegated = 0
    while True:
        m = match(text, pos)
        if m is None:
            break
        one, op_name, gen, args = m.group("one", "op", "gen", "args")
        parts = split(args)
        slots = parts[1::2]
        if one is not None:
            lhs = [one]
            lhs_key = None
        else:
            many = m.group("many")
            lhs = findall(many)
            lhs_key = _IDS.sub("", many)
        op_start = m.start("op")
        nl = count("\n", last, op_start)
        if nl:
            line += nl
            line_start = rfind("\n", last, op_start) + 1
        last = op_start
        pos = m.end()
        try:
            type_ids = tuple(map(types.__getitem__, slots))
        except Bail:  # e.g. a nested invocation's name: the general machinery reads the statement
            c.delegate(m, lhs, line, types, variables, externals, graph_inputs, graph, n - delegated)
            delegated += 1
            n += 1
            continue
        texts = parts[0::2]
        key = (op_name, gen, tuple(texts), lhs_key, type_ids)
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= _CACHE_LIMIT:  # bounded memory when statements rarely repeat
                plans.clear()
            try:
                plan = plan_for(m, texts, slots, type_ids, lhs, lhs_key)
            except (Bail, NNEFXError):
                plan = _DELEGATE
            plans[key] = plan
        if plan is _DELEGATE:
            c.delegate(m, lhs, line, types, variables, externals, graph_inputs, graph, n - delegated)
            delegated += 1
            n += 1
            continue
        # per-statement rules of Checker.check_graph
        for name in lhs:
            if name in types or name in keywords:
                raise Bail(f"'{name}' assigned twice or a keyword")
            if (name in graph_inputs) is not plan.is_external:
                raise Bail("graph inputs must be (exactly) the externals")
        if len(lhs) > 1 and len(set(lhs)) != len(lhs):
            raise Bail("left-hand side repeats a name")
        if plan.update_slot is not None and slots[plan.update_slot] not in variables:
            raise Bail("update of a non-variable")
        if plan.is_variable:
            variables.update(lhs)
        elif plan.is_external:
            externals.update(lhs)
        # the operation
        inputs = {}
        for pname, kind, payload in plan.inputs:
            inputs[pname] = slots[payload] if kind == 0 else payload if kind == 1 else _build(kind, payload, slots)
        attribs = plan.attribs.copy()
        for k, kind, payload in plan.attr_copies:
            attribs[k] = payload.copy() if kind == 2 else _clone(payload)
        for k, kind, payload in plan.attr_fills:
            if kind == _SLOT:  # a string attribute (label, border): _build's first case, inline
                v = slots[payload]
                attribs[k] = v[1:-1] if v[0] in "'\"" else v
            else:
                attribs[k] = _build(kind, payload, slots)
        outputs = {}
        for rname, kind, payload in plan.outputs:
            outputs[rname] = lhs[payload] if kind == 0 else [lhs[p] for _, p in payload]
        op = Operation(plan.op, inputs, outputs, attribs, plan.dtype, Location(file, line, op_start - line_start + 1))
        append(op)
        for j, dtype in plan.tensors:
            name = lhs[j]
            tensors[name] = Tensor(name, dtype)
        if one is not None:
            types[one] = plan.out_types[0]
        else:
            out_types = plan.out_types
            for j, name in enumerate(lhs):
                types[name] = out_types[j]
        n += 1
        if not shapes:
            continue
        kind = plan.shape_kind
        if kind == 1:
            if input_shapes and plan.is_external and lhs[0] in input_shapes:
                infer_operation(graph, op, input_shapes)
            else:
                tensors[lhs[0]].shape = plan.shape
            continue
        ref_pos = plan.ref_pos
        skey = (plan.shape_key, tuple([tensors[slots[i]].shape for i in ref_pos]),
                tuple([slots[i] for i in plan.attr_str_pos]) if plan.attr_str_pos else None)
        result = shape_memo.get(skey)
        if result is None:
            if len(shape_memo) >= _CACHE_LIMIT:
                shape_memo.clear()
            result = shape_memo[skey] = c.shape_of(op, [slots[i] for i in ref_pos], skey[1])
        out_flat = plan.out_flat
        if len(out_flat) == 1 and len(result) == 1:  # (the zip below, for the usual single result)
            tensors[lhs[out_flat[0]]].shape = result[0]
        else:
            for j, shape in zip(out_flat, result, strict=True):
                tensors[lhs[j]].shape = shape
    if n == 0:
        raise Bail("empty body")
    ex = c.expander
    if ex is not None and ex.steps + (n - delegated - c.planned_synced) > ex.max_steps:
        raise Bail("expansion step limit")  # the general pipeline reports where
    if len(operations) >= MAX_OPERATIONS:
        raise Bail("too many operations")
    if _CLOSE.match(text, pos) is None:
        raise Bail("not a flat statement, or text after the graph")
    for name in graph_inputs:
        if name not in externals:
            raise Bail("graph input never defined")
    for name in graph.outputs:
        if name not in types:
            raise Bail("graph output never assigned")
    if "update" in c.emitted or delegated:
        # the general pipeline's structure check: results of 'update' are not readable
        # tensors (the statement loop lets later statements read them)
        graph.validate_structure()


def compile_if_flat(text: str, *, file: str | None, dialect: str | None, lowered: Iterable[str] | None,
                    expand_all: bool, atomic: Iterable[str] | None, input_shapes: dict[str, tuple] | None,
                    shapes: bool, expander_class: type[Expander] = Expander,
                    ) -> tuple[Graph, dict[str, ast.Fragment]] | None:
    """:func:`compile_flat` with the expansion options of ``compile_document``; None when
    the general pipeline must run (the fast path is switched off, or it bailed)."""
    if not ENABLED:
        return None
    low = list(lowered or ())
    atom = list(atomic or ())

    def factory(table: dict[str, ast.Fragment]) -> Expander:
        return expander_class(table, FINAL, lowered=low, expand_all=expand_all, atomic=atom)

    key: tuple | None = (expander_class, tuple(low), bool(expand_all), tuple(atom))
    try:
        hash(key)
    except TypeError:  # unhashable names in lowered/atomic: the expander reports them
        key = None
    try:
        return compile_flat(text, file=file, dialect=dialect, expander_factory=factory, input_shapes=input_shapes,
                            shapes=shapes, expander_key=key)
    except (Bail, NNEFXError, RecursionError):
        return None
    except Exception:
        # a fast-path bug: the general pipeline still gives the right answer; tests set
        # STRICT so that such bugs fail loudly instead
        if STRICT:
            raise
        return None


__all__ = ["Bail", "ENABLED", "FORM_CACHE_SIZE", "clear_caches", "compile_flat", "compile_if_flat", "disabled"]
