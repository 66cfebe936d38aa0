"""Static semantic checks (NNEF 1.0 §3.3 and their final-dialect equivalents).

The checker walks fragment bodies and the graph body *without* evaluating anything: it
resolves every identifier, matches every invocation's arguments against the callee's
declaration, binds generics, and computes every expression's type, reporting the first
violation at the offending token.  Values (array lengths, indices, recursion) are checked
later by the expander, which evaluates.

Argument matching and generic binding live here as plain functions because the expander
repeats them on concrete values (the provisional untyped ``tensor`` only gets its data type
once a real tensor flows into it).
"""

from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..syntax import ast
from .dialect import tract_integer_result, tract_loose
from .types import (
    EMPTY,
    GENERIC,
    INTEGER,
    LOGICAL,
    SCALAR,
    STRING,
    ArrayT,
    EmptyArrayT,
    Prim,
    TensorT,
    TupleT,
    Type,
    can_cast,
    common_type,
    deduce_generic,
)

#: Operator → fragment it maps to when an operand is a tensor.
BINARY_FRAGMENTS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "<": "lt", ">": "gt",
                    "<=": "le", ">=": "ge", "==": "eq", "!=": "ne", "&&": "and", "||": "or"}
UNARY_FRAGMENTS = {"-": "neg", "+": "copy", "!": "not"}

#: Invocations allowed only in the graph body, per dialect: the provisional seed (001 §3.3)
#: forbids only ``external`` inside fragments; NNEF 1.0.1 and later also forbid ``variable``
#: and ``update`` (a fragment expanded twice would otherwise make two variables of one label).
GRAPH_ONLY = {"provisional": ("external",), "final": ("external", "variable", "update")}

_NUMERIC = (INTEGER, SCALAR)


#: literal kind -> its (frozen, compared by value) primitive type, shared
_LITERAL_TYPES = {t.name: t for t in (INTEGER, SCALAR, LOGICAL, STRING)}


def literal_type(kind: str) -> Type:
    t = _LITERAL_TYPES.get(kind)
    return Prim(kind) if t is None else t


def match_arguments(frag: ast.Fragment, inv: ast.Invocation, dialect: str = "final",
                    tolerance: Any = None) -> dict[str, ast.Argument]:
    """Map parameter names to the invocation's arguments (NNEF spec §2.4 invocations;
    provisional 1.0 §3.3.1): only tensor parameters may be bound positionally, in both
    dialects.  (The provisional chapter's own recursion example, ``sum_of(items[1:])``,
    breaks this rule; nnefx follows the rule, as the official parser does for the same call
    in the final dialect.)  With a ``tolerance`` (:class:`nnefx.semantics.dialect.Tolerance`:
    tract's dialect, or ``lenient=True``) a positional attribute and surplus positional
    arguments are accepted too; the invocation is then rewritten in place (positional
    arguments named, surplus ones dropped) so later passes see standard NNEF.
    """
    bound: dict[str, ast.Argument] = {}
    positional_done = False
    if len(inv.args) > len(frag.params):
        extra = inv.args[len(frag.params)]
        if tolerance is not None and all(a.name is None for a in inv.args[len(frag.params):]):
            tolerance.allow("extra-argument", f"'{inv.name}' takes {len(frag.params)} arguments, found "
                            f"{len(inv.args)}; the surplus positional ones are ignored", extra.loc)
            del inv.args[len(frag.params):]
        else:
            raise NNEFXError(f"too many arguments for '{inv.name}': it takes at most {len(frag.params)}, "
                             f"found {len(inv.args)}", extra.loc)
    rename = False
    for i, arg in enumerate(inv.args):
        if arg.name is None:
            if positional_done:
                raise NNEFXError(f"positional argument after a named argument in the call of '{inv.name}' "
                                 "(positional arguments must come first)", arg.loc)
            param = frag.params[i]
            if not param.type.type.is_tensor():
                if tolerance is None:
                    raise NNEFXError(f"argument {i + 1} of '{inv.name}' must be named: parameter '{param.name}' "
                                     f"has non-tensor type {param.type.type} (write {param.name} = ...)", arg.loc)
                tolerance.allow("positional-attribute", f"argument {i + 1} of '{inv.name}' is attribute "
                                f"'{param.name}', passed positionally", arg.loc)
                rename = True
            bound[param.name] = arg
        else:
            positional_done = True
            param = frag.param(arg.name)
            if param is None:
                names = ", ".join(p.name for p in frag.params)
                raise NNEFXError(f"'{inv.name}' has no parameter named '{arg.name}' (expected one of: {names})",
                                 arg.loc)
            if arg.name in bound:
                raise NNEFXError(f"parameter '{arg.name}' of '{inv.name}' is given more than once", arg.loc)
            bound[arg.name] = arg
    for p in frag.params:
        if p.name not in bound and p.default is None:
            raise NNEFXError(f"missing argument for parameter '{p.name}' of '{inv.name}' (it has no default)",
                             inv.loc)
    if rename:
        for i, arg in enumerate(inv.args):
            if arg.name is None:
                arg.name = frag.params[i].name
    return bound


def bind_generic(frag: ast.Fragment, explicit: str | None, arg_types: dict[str, Type], loc: Location,
                 context_generic: str | None, lenient_default: str | None = None) -> str | None:
    """The data type bound to ``?`` for one call of ``frag`` (None if not generic)."""
    if not frag.generic:
        if explicit is not None:
            raise NNEFXError(f"'{frag.name}' is not generic; it takes no <{explicit}>", loc)
        return None
    if explicit is not None:
        if explicit == GENERIC:
            if context_generic is None:
                raise NNEFXError(f"'{frag.name}<?>' is only valid inside a generic fragment", loc)
            return context_generic
        return explicit
    if frag.generic_default is not None:
        return frag.generic_default
    found: set[str] = set()
    for p in frag.params:
        t = arg_types.get(p.name)
        if t is not None:
            deduce_generic(p.type.type, t, found)
    if len(found) == 1:
        return found.pop()
    if len(found) > 1:
        raise NNEFXError(f"cannot deduce the generic type of '{frag.name}': ambiguous candidates "
                         + " vs ".join(f"'{f}'" for f in sorted(found)), loc)
    if lenient_default is not None:
        return lenient_default
    raise NNEFXError(f"cannot deduce the generic type of '{frag.name}' from its arguments; "
                     f"write {frag.name}<scalar>(...) or another data type", loc)


def result_type(frag: ast.Fragment, generic: str | None) -> Type:
    types = [r.type.type.bind(generic) for r in frag.results]
    return types[0] if len(types) == 1 else TupleT(tuple(types))


def _walk_types(t: Type):
    yield t
    if isinstance(t, ArrayT):
        yield from _walk_types(t.item)
    elif isinstance(t, TupleT):
        for i in t.items:
            yield from _walk_types(i)


def check_declaration(frag: ast.Fragment, dialect: str) -> None:
    """Rules on one declaration: unique names, types, defaults, generics."""
    names: dict[str, Location] = {}
    seen_attribute = False
    uses_generic = False
    for p in frag.params:
        if p.name in names:
            raise NNEFXError(f"parameter '{p.name}' of fragment '{frag.name}' is declared twice", p.loc)
        names[p.name] = p.loc
        t = p.type.type
        uses_generic |= t.has_generic()
        _check_type_form(p.type)
        if t.is_tensor():
            if seen_attribute and dialect == "final":
                raise NNEFXError(f"tensor parameter '{p.name}' of fragment '{frag.name}' follows an attribute "
                                 "parameter (tensor parameters must come first)", p.loc)
        else:
            seen_attribute = True
        if p.default is not None:
            dt = static_literal_type(p.default)
            target = t
            if not can_cast(dt, target):
                raise NNEFXError(f"default value of parameter '{p.name}' has type {dt}, which does not convert "
                                 f"to the parameter type {t}", p.default.loc)
    for r in frag.results:
        if r.name in names:
            raise NNEFXError(f"result '{r.name}' of fragment '{frag.name}' reuses the name of a "
                             "parameter or another result", r.loc)
        names[r.name] = r.loc
        _check_type_form(r.type)
        uses_generic |= r.type.type.has_generic()
    if frag.generic and not uses_generic:
        raise NNEFXError(f"generic fragment '{frag.name}' uses '?' in no parameter or result type", frag.loc)
    if uses_generic and not frag.generic:
        raise NNEFXError(f"fragment '{frag.name}' uses the generic type '?' but is not declared generic "
                         f"(write 'fragment {frag.name}<?>(...)')", frag.loc)


def _check_type_form(node: ast.TypeNode) -> None:
    for t in _walk_types(node.type):
        if isinstance(t, TupleT):
            kinds = {i.is_tensor() for i in t.items}
            if len(kinds) > 1:
                raise NNEFXError(f"tuple type {t} mixes tensor and non-tensor items", node.loc)


def static_literal_type(expr: ast.Expr) -> Type:
    """Type of a literal expression (default values, quantization arguments)."""
    if isinstance(expr, ast.Literal):
        return literal_type(expr.kind)
    if isinstance(expr, ast.ArrayExpr):
        if not expr.items:
            return EMPTY
        t = static_literal_type(expr.items[0])
        for item in expr.items[1:]:
            it = static_literal_type(item)
            c = common_type(t, it)
            if c is None:
                raise NNEFXError(f"array items have incompatible types {t} and {it}", item.loc)
            t = c
        return ArrayT(t) if not isinstance(t, EmptyArrayT) else ArrayT(t)
    if isinstance(expr, ast.TupleExpr):
        return TupleT(tuple(static_literal_type(i) for i in expr.items))
    raise NNEFXError("expected a literal value", expr.loc)


@dataclass
class Scope:
    """Names visible in one body: parameters, locals, loop variables."""

    types: dict[str, Type] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)


def _external_generic(e: ast.Expr) -> None:
    """``tract_core_external(datum_type = 'i8', ...)`` without ``<integer>`` is an integer
    input: tract types the tensor by its datum type (``nnef/src/ops/core/source.rs``), so the
    operations reading it are checked and typed for integers, not for the declaration's
    default ``scalar``."""
    from .. import etypes

    if not isinstance(e, ast.Invocation) or e.name != "tract_core_external" or e.generic is not None:
        return
    for arg in e.args:
        if arg.name == "datum_type" and isinstance(arg.value, ast.Literal) and isinstance(arg.value.value, str):
            try:
                abstract = etypes.abstract(etypes.parse(arg.value.value))
            except NNEFXError:
                return   # the declaration's own check names the bad datum type
            if abstract is not None and abstract != "scalar":
                e.generic = abstract


class Checker:
    """Type-checks bodies against a fragment table (name → declaration)."""

    def __init__(self, fragments: dict[str, ast.Fragment], dialect: str, *, tolerance: Any = None,
                 symbols: Any = ()):
        self.fragments = fragments
        self.dialect = dialect
        #: departures from NNEF 1.0.5 accepted (tract's dialect, lenient mode); None: strict
        self.tolerance = tolerance
        #: symbolic dimensions declared by the document, integer identifiers of the graph body
        self.symbols = tuple(symbols)
        self.generic: str | None = None
        self.in_graph = False
        #: identifiers introduced by ``variable`` in the graph body
        self.variables: set[str] = set()

    # --- entry points -------------------------------------------------------------------

    def check_fragment_body(self, frag: ast.Fragment) -> None:
        if frag.body is None:
            return
        self.in_graph = False
        self.generic = GENERIC if frag.generic else None
        scope = Scope()
        for p in frag.params:
            scope.types[p.name] = p.type.type
            scope.params.add(p.name)
        declared = {r.name: r for r in frag.results}
        scope.results = set(declared)
        for a in frag.body:
            rt = self.type_of(a.rhs, scope)
            self.check_result_count(a)
            self._tuple_from_array(a, rt)
            self.bind_lhs(a.lhs, rt, scope, declared)
        for r in frag.results:
            if r.name not in scope.assigned:
                raise NNEFXError(f"result '{r.name}' of fragment '{frag.name}' is never assigned", r.loc)

    def check_graph(self, graph: ast.GraphDef) -> None:
        self.in_graph = True
        self.generic = None
        scope = Scope()
        for name in self.symbols:
            scope.types[name] = INTEGER
        params = {}
        for p in graph.params:
            if p.name in params:
                raise NNEFXError(f"graph input '{p.name}' is listed twice", p.loc)
            params[p.name] = p
        outs = set()
        for r in graph.results:
            if r.name in outs:
                raise NNEFXError(f"graph output '{r.name}' is listed twice", r.loc)
            if r.name in params:
                raise NNEFXError(f"'{r.name}' is both an input and an output of graph '{graph.name}'", r.loc)
            outs.add(r.name)
        self.variables = set()
        externals: set[str] = set()
        for a in graph.body:
            if self.tolerance is not None:
                _external_generic(a.rhs)
            rt = self.type_of(a.rhs, scope)
            self.check_result_count(a)
            self._tuple_from_array(a, rt)
            self.bind_lhs(a.lhs, rt, scope, {})
            is_external = isinstance(a.rhs, ast.Invocation) and (
                a.rhs.name == "external" or self.tolerance is not None and a.rhs.name == "tract_core_external")
            if isinstance(a.rhs, ast.Invocation) and a.rhs.name == "variable":
                self.variables.update(i.name for i in _identifiers(a.lhs))
            for ident in _identifiers(a.lhs):
                if is_external:
                    externals.add(ident.name)
                    if ident.name not in params and self.dialect == "final":
                        raise NNEFXError(f"'{ident.name}' is defined by 'external' but is not an input of "
                                         f"graph '{graph.name}'", ident.loc)
                elif ident.name in params:
                    raise NNEFXError(f"graph input '{ident.name}' must be defined by an 'external' operation",
                                     ident.loc)
                t = scope.types[ident.name]
                if not isinstance(t, TensorT):
                    raise NNEFXError(f"identifier '{ident.name}' in the graph body has type {t}; graph "
                                     "identifiers must be single tensors", ident.loc)
        for p in graph.params:
            if p.name not in externals:
                raise NNEFXError(f"graph input '{p.name}' is never defined (expected '{p.name} = external(...)')",
                                 p.loc)
        for r in graph.results:
            if r.name not in scope.assigned:
                raise NNEFXError(f"graph output '{r.name}' is never assigned", r.loc)

    # --- assignments --------------------------------------------------------------------

    def check_result_count(self, a: ast.Assignment) -> None:
        """An invocation with several results is assigned to as many identifiers (a tuple),
        never to one (NNEF spec §3.3 assignments: the left-hand side mirrors the results;
        provisional 1.0 §3.3.1).  The official parser only enforces it in the graph body."""
        if isinstance(a.rhs, ast.Invocation) and isinstance(a.lhs, ast.Identifier):
            frag = self.fragments.get(a.rhs.name)
            if frag is not None and len(frag.results) > 1:
                names = ", ".join(r.name for r in frag.results)
                raise NNEFXError(f"'{a.rhs.name}' has {len(frag.results)} results ({names}) but they are assigned "
                                 f"to the single identifier '{a.lhs.name}'; unpack them into a tuple of "
                                 f"identifiers: ({names}) = {a.rhs.name}(...)", a.lhs.loc)

    def _tuple_from_array(self, a: ast.Assignment, t: Type) -> None:
        """tract unpacks an array result into a tuple of identifiers (``(h, c) = scan(...)``,
        its ``Value`` coercion): the left-hand side is rewritten as the array it means."""
        if self.tolerance is not None and isinstance(a.lhs, ast.TupleExpr) and isinstance(t, ArrayT):
            self.tolerance.allow("tuple-from-array", f"a tuple of {len(a.lhs.items)} identifiers receives an "
                                 f"array ({t})", a.lhs.loc)
            a.lhs = ast.ArrayExpr(loc=a.lhs.loc, end=a.lhs.end, items=list(a.lhs.items))

    def bind_lhs(self, lhs: ast.Expr, t: Type, scope: Scope, declared: dict[str, ast.Result]) -> None:
        if isinstance(lhs, ast.Identifier):
            name = lhs.name
            if name in scope.params:
                raise NNEFXError(f"parameter '{name}' cannot be assigned (parameters are read-only)", lhs.loc)
            if name in scope.assigned:
                raise NNEFXError(f"identifier '{name}' is assigned more than once", lhs.loc)
            if name in declared:
                want = declared[name].type.type
                if not can_cast(t, want):
                    raise NNEFXError(f"result '{name}' is declared {want} but is assigned a value of type {t}",
                                     lhs.loc)
                t = want
            scope.assigned.add(name)
            scope.types[name] = t
            return
        if isinstance(lhs, ast.TupleExpr):
            if not isinstance(t, TupleT) or len(t.items) != len(lhs.items):
                n = len(t.items) if isinstance(t, TupleT) else 1
                raise NNEFXError(f"the left-hand side unpacks {len(lhs.items)} values but the right-hand side "
                                 f"gives {n} (type {t})", lhs.loc)
            for item, it in zip(lhs.items, t.items, strict=False):
                self.bind_lhs(item, it, scope, declared)
            return
        if isinstance(lhs, ast.ArrayExpr):
            if isinstance(t, EmptyArrayT):
                if lhs.items:
                    raise NNEFXError("cannot unpack an empty array into identifiers", lhs.loc)
                return
            if not isinstance(t, ArrayT):
                raise NNEFXError(f"the left-hand side is an array but the right-hand side has type {t}", lhs.loc)
            for item in lhs.items:
                self.bind_lhs(item, t.item, scope, declared)
            return
        raise NNEFXError("the left-hand side of an assignment must be an identifier, or an array or tuple "
                         "of identifiers", lhs.loc)

    # --- expressions --------------------------------------------------------------------

    def type_of(self, e: ast.Expr, scope: Scope) -> Type:
        method = getattr(self, "t_" + type(e).__name__)
        return method(e, scope)

    def t_Literal(self, e: ast.Literal, scope: Scope) -> Type:
        return literal_type(e.kind)

    def t_Identifier(self, e: ast.Identifier, scope: Scope) -> Type:
        t = scope.types.get(e.name)
        if t is None:
            if e.name in scope.results:
                raise NNEFXError(f"result '{e.name}' is used before it is assigned", e.loc)
            raise NNEFXError(f"undefined identifier '{e.name}' (identifiers must be assigned before use)", e.loc)
        return t

    def t_ArrayExpr(self, e: ast.ArrayExpr, scope: Scope) -> Type:
        if not e.items:
            return EMPTY
        t = self.type_of(e.items[0], scope)
        for item in e.items[1:]:
            it = self.type_of(item, scope)
            c = common_type(t, it)
            if c is None:
                raise NNEFXError(f"array items have incompatible types {t} and {it}", item.loc)
            t = c
        return ArrayT(t)

    def t_TupleExpr(self, e: ast.TupleExpr, scope: Scope) -> Type:
        return TupleT(tuple(self.type_of(i, scope) for i in e.items))

    def t_Unary(self, e: ast.Unary, scope: Scope) -> Type:
        t = self.type_of(e.operand, scope)
        if isinstance(t, TensorT):
            return self.operator_call(UNARY_FRAGMENTS[e.op], [t], e, [e.operand])
        if e.op in "+-" and t in _NUMERIC:
            return t
        if e.op == "!" and t == LOGICAL:
            return t
        want = "logical" if e.op == "!" else "integer or scalar"
        raise NNEFXError(f"unary '{e.op}' expects {want} or a tensor, found {t}", e.loc)

    def t_Binary(self, e: ast.Binary, scope: Scope) -> Type:
        lt = self.type_of(e.left, scope)
        rt = self.type_of(e.right, scope)
        return binary_result_type(e, lt, rt, self.operator_call)

    def operator_call(self, name: str, types: list[Type], e: ast.Expr,
                      operands: list[ast.Expr] | None = None) -> Type:
        frag = self.fragments.get(name)
        if frag is None:
            raise NNEFXError(f"operator maps to '{name}', which is not declared", e.loc)
        arg_types = {p.name: t for p, t in zip(frag.params, types, strict=False)}
        g = bind_generic(frag, None, arg_types, e.loc, self.generic, self._lenient())
        for i, (p, t) in enumerate(zip(frag.params, types, strict=False)):
            want = p.type.type.bind(g)
            if not can_cast(t, want):
                where = operands[i].loc if operands else e.loc
                raise NNEFXError(f"operand of type {t} does not convert to {want} expected by '{name}'", where)
        return result_type(frag, g)

    def _coerce(self, frag: ast.Fragment, p: ast.Param, arg: ast.Argument, got: Type, want: Type,
                e: ast.Invocation, scope: Scope) -> bool:
        """Accept ``got`` for ``want`` the way tract coerces values (nnef/src/deser.rs
        ``CoerceFrom``), rewriting the argument into standard NNEF; False if no rule applies."""
        value = arg.value
        tol = self.tolerance
        if tol.mode == "tract" and tract_loose(frag, got, want):
            return True
        if frag.body is None and _integers_from_tensors(got, want):
            # a primitive's integer attribute computed from shapes (``tile(x, repeats =
            # [1, batch, 1])`` with ``batch`` sliced from ``tract_core_shape_of``): tract reads
            # the value at load; the expander does too, or refuses it located
            tol.allow("load-time-attribute", f"argument '{p.name}' of '{e.name}' is declared {want} but "
                      f"receives {got}; its value must be known when the model loads", value.loc)
            return True
        if isinstance(want, ArrayT):
            item = want.item
            if isinstance(item, TupleT) and isinstance(value, ast.ArrayExpr) and all(
                    isinstance(x, ast.ArrayExpr) and len(x.items) == len(item.items) for x in value.items):
                new = ast.ArrayExpr(loc=value.loc, end=value.end, items=[
                    ast.TupleExpr(loc=x.loc, end=x.end, items=list(x.items)) for x in value.items])
                kind = "nested-array-padding"
            elif isinstance(value, ast.TupleExpr):
                new = ast.ArrayExpr(loc=value.loc, end=value.end, items=list(value.items))
                kind = "scalar-for-array"
            elif not isinstance(got, (ArrayT, EmptyArrayT, TupleT)):
                new = ast.ArrayExpr(loc=value.loc, end=value.end, items=[value])
                kind = "scalar-for-array"
            else:
                return False
            if not can_cast(self.type_of(new, scope), want):
                return False
            tol.allow(kind, f"argument '{p.name}' of '{e.name}' expects {want}, found {got}", value.loc)
            arg.value = new
            return True
        if isinstance(want, Prim) and isinstance(got, TensorT) and frag.body is not None \
                and can_cast(TensorT(got.dtype), TensorT(want.name)):
            # an attribute of a compound receives a tensor (tract reads its value at load):
            # the parameter becomes a tensor inside the compound (its body is checked again
            # with that type).  A standard compound is not changed: this call uses a private
            # copy, expanded through its definition.
            tol.allow("tensor-for-attribute", f"argument '{p.name}' of '{e.name}' is declared {want} but "
                      f"receives a tensor; '{p.name}' is treated as {TensorT(want.name)} in "
                      f"'{frag.emit_as or frag.name}'", value.loc)
            if frag.origin == "stdlib":
                alias = _copy.copy(frag)
                alias.params = [_copy.copy(x) for x in frag.params]
                alias.name = f"{frag.name}__{len(self.fragments)}"
                alias.emit_as = frag.name
                alias.origin = "document"
                self.fragments[alias.name] = alias
                e.name = alias.name
                frag = alias
                p = alias.param(p.name)
            p.type = ast.TypeNode(loc=p.type.loc, end=p.type.end, type=TensorT(want.name))
            saved = (self.in_graph, self.generic)
            self.check_fragment_body(frag)
            self.in_graph, self.generic = saved
            return True
        return False

    def _lenient(self) -> str | None:
        return "scalar" if self.dialect == "provisional" else None

    def t_Select(self, e: ast.Select, scope: Scope) -> Type:
        ct = self.type_of(e.condition, scope)
        if ct != LOGICAL:
            raise NNEFXError(f"the condition of 'if ... else' must be a logical value known at compile time, "
                             f"found {ct} (use select() for tensors)", e.condition.loc)
        a = self.type_of(e.then, scope)
        b = self.type_of(e.otherwise, scope)
        c = common_type(a, b)
        if c is None:
            raise NNEFXError(f"the branches of 'if ... else' have incompatible types {a} and {b}", e.loc)
        return c

    def t_Comprehension(self, e: ast.Comprehension, scope: Scope) -> Type:
        inner = Scope(dict(scope.types), scope.params, scope.results, scope.assigned)
        for it in e.iterators:
            t = self.type_of(it.iterable, scope)
            if isinstance(t, EmptyArrayT):
                item: Type = EMPTY
            elif isinstance(t, ArrayT):
                item = t.item
            else:
                raise NNEFXError(f"a comprehension iterates over an array, found {t}", it.iterable.loc)
            if len(it.names) == 1:
                inner.types[it.names[0]] = item
            else:
                if not isinstance(item, TupleT) or len(item.items) != len(it.names):
                    raise NNEFXError(f"cannot unpack items of type {item} into {len(it.names)} loop variables",
                                     it.loc)
                for n, t2 in zip(it.names, item.items, strict=False):
                    inner.types[n] = t2
        if e.condition is not None:
            ct = self.type_of(e.condition, inner)
            if ct != LOGICAL:
                raise NNEFXError(f"the comprehension filter must be logical, found {ct}", e.condition.loc)
        return ArrayT(self.type_of(e.body, inner))

    def t_Subscript(self, e: ast.Subscript, scope: Scope) -> Type:
        bt = self.type_of(e.base, scope)
        for idx in (e.begin, e.stop):
            if idx is not None:
                it = self.type_of(idx, scope)
                if it != INTEGER:
                    raise NNEFXError(f"subscript indices must be integers, found {it}", idx.loc)
        if isinstance(bt, TupleT):
            if e.is_range or not isinstance(e.begin, ast.Literal):
                raise NNEFXError("tuples can only be subscripted with an integer literal", e.loc)
            k = e.begin.value
            if not 0 <= k < len(bt.items):
                raise NNEFXError(f"tuple index {k} is out of range for a tuple of {len(bt.items)} items", e.begin.loc)
            return bt.items[k]
        if isinstance(bt, ArrayT):
            return bt if e.is_range else bt.item
        if isinstance(bt, EmptyArrayT):
            if e.is_range:
                return bt
            raise NNEFXError("cannot take an item of an empty array", e.loc)
        if bt == STRING:
            return STRING
        raise NNEFXError(f"only arrays, tuples and strings can be subscripted, found {bt}", e.base.loc)

    def t_Builtin(self, e: ast.Builtin, scope: Scope) -> Type:
        t = self.type_of(e.arg, scope)
        if e.name == "shape_of":
            return ArrayT(INTEGER)
        if e.name in ("length_of", "range_of"):
            if not (isinstance(t, (ArrayT, EmptyArrayT)) or t == STRING):
                raise NNEFXError(f"{e.name}() expects an array or a string, found {t}", e.arg.loc)
            return INTEGER if e.name == "length_of" else ArrayT(INTEGER)
        if not isinstance(t, Prim):
            raise NNEFXError(f"{e.name}() expects a non-tensor primitive value, found {t}", e.arg.loc)
        return Prim(e.name)

    def t_Invocation(self, e: ast.Invocation, scope: Scope) -> Type:
        frag = self.fragments.get(e.name)
        if frag is None:
            from .stdlib import broken_reason

            reason = broken_reason(e.name)
            if reason is not None:
                raise NNEFXError(f"standard operation '{e.name}' is unavailable: its declaration is invalid "
                                 f"({reason})", e.loc)
            raise NNEFXError(f"undefined operation '{e.name}'", e.loc)
        if not self.in_graph and e.name in GRAPH_ONLY[self.dialect]:
            raise NNEFXError(f"'{e.name}' can only be used in the graph body, not inside fragments", e.loc)
        bound = match_arguments(frag, e, self.dialect, self.tolerance)
        arg_types: dict[str, Type] = {}
        for p in frag.params:
            if p.name in bound:
                arg_types[p.name] = self.type_of(bound[p.name].value, scope)
            elif p.default is not None:
                arg_types[p.name] = static_literal_type(p.default)
        g = bind_generic(frag, e.generic, arg_types, e.loc, self.generic, self._lenient())
        for p in frag.params:
            if p.name in bound:
                want = p.type.type.bind(g)
                got = arg_types[p.name]
                if not can_cast(got, want):
                    if self.tolerance is not None and self._coerce(frag, p, bound[p.name], got, want, e, scope):
                        continue
                    raise NNEFXError(f"argument '{p.name}' of '{e.name}' expects {want}, found {got}",
                                     bound[p.name].value.loc)
        if self.tolerance is not None and self.tolerance.mode == "tract" \
                and tract_integer_result(frag, list(arg_types.values())):
            return TensorT("integer")
        if e.name == "update" and self.in_graph:
            first = bound[frag.params[0].name].value
            if not isinstance(first, ast.Identifier) or first.name not in self.variables:
                raise NNEFXError("the first argument of 'update' must be the identifier of a variable "
                                 "(a tensor introduced by 'variable')", first.loc)
        return result_type(frag, g)


def _integers_from_tensors(got: Type, want: Type) -> bool:
    """``got`` holds integer tensors where ``want`` is ``integer`` or ``integer[]``."""
    if want == INTEGER:
        return isinstance(got, TensorT) and got.dtype == "integer"
    if isinstance(want, ArrayT) and want.item == INTEGER:
        if isinstance(got, TensorT):
            return got.dtype == "integer"
        return isinstance(got, ArrayT) and isinstance(got.item, TensorT) and got.item.dtype == "integer"
    return False


def binary_result_type(e: ast.Binary, lt: Type, rt: Type, operator_call) -> Type:
    """Result type of ``lt op rt`` (attribute rules of NNEF 1.0 §3.3.2, Table 1, or the tensor fragment)."""
    op = e.op
    if op == "in":
        if not isinstance(rt, (ArrayT, EmptyArrayT)):
            raise NNEFXError(f"the right operand of 'in' must be an array, found {rt}", e.right.loc)
        if isinstance(rt, ArrayT) and common_type(lt, rt.item) is None:
            raise NNEFXError(f"'in' compares {lt} with items of type {rt.item}", e.loc)
        return LOGICAL
    if isinstance(lt, TensorT) or isinstance(rt, TensorT):
        return operator_call(BINARY_FRAGMENTS[op], [lt, rt], e, [e.left, e.right])
    if op in ("+", "-", "*", "/", "^"):
        if lt == rt and lt in _NUMERIC:
            return lt
        if op == "+" and lt == rt == STRING:
            return STRING
        if op == "+" and isinstance(lt, (ArrayT, EmptyArrayT)) and isinstance(rt, (ArrayT, EmptyArrayT)):
            c = common_type(lt, rt)
            if c is None:
                raise NNEFXError(f"cannot concatenate arrays of types {lt} and {rt}", e.loc)
            return c
        if op == "*" and rt == INTEGER and (isinstance(lt, (ArrayT, EmptyArrayT)) or lt == STRING):
            return lt
        raise NNEFXError(f"operator '{op}' is not defined for {lt} and {rt} (operands must have the same "
                         "numeric type; no implicit integer/scalar conversion)", e.loc)
    if op in ("<", "<=", ">", ">="):
        if lt == rt and lt in _NUMERIC:
            return LOGICAL
        raise NNEFXError(f"comparison '{op}' needs two integers or two scalars, found {lt} and {rt}", e.loc)
    if op in ("==", "!="):
        if common_type(lt, rt) is None:
            raise NNEFXError(f"'{op}' compares values of different types {lt} and {rt}", e.loc)
        return LOGICAL
    if op in ("&&", "||"):
        if lt == rt == LOGICAL:
            return LOGICAL
        raise NNEFXError(f"'{op}' needs two logical values, found {lt} and {rt}", e.loc)
    raise NNEFXError(f"unknown operator '{op}'", e.loc)


def _identifiers(lhs: ast.Expr) -> list[ast.Identifier]:
    if isinstance(lhs, ast.Identifier):
        return [lhs]
    out: list[ast.Identifier] = []
    for item in getattr(lhs, "items", []):
        out.extend(_identifiers(item))
    return out
