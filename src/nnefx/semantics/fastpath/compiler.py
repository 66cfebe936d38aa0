"""Compiling the statement forms of the NNEF fast path with the general front-end.

WHY a module of its own: this is where the fast path stays exact.  A statement form seen
for the first time is compiled by the very same parser, checker and expander as the general
pipeline (:meth:`Compiler.compile_template`), on a copy whose identifiers, strings and
numbers are unique markers; the single operation that comes out says where each slot and
number goes.  Each exact template then gets its :class:`~.fastpath.plans.StatementPlan`
(:meth:`Compiler.specialize`, or derived from the first plan by putting other numbers in
place: :meth:`Compiler._with_numbers`, :meth:`Compiler._with_shape`).  Shape rules run
through the ordinary shape pass on a scratch graph (:meth:`Compiler.shape_of`), memoised by
the caller.  A statement no plan can express is read by the general machinery on the live
graph with the expander state the general pipeline would have there
(:meth:`Compiler.delegate`).  The statement loop that drives a :class:`Compiler` over a
document is in :mod:`nnefx.semantics.fastpath`; the forms it shares between documents are
in :mod:`nnefx.semantics.fastpath.cache`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ...diagnostics import Location
from ...graph import Graph, Operation, Tensor
from ...syntax import ast
from ...syntax.lexer import EOF, Token, tokenize
from ...syntax.parser import EXT_OPERATORS, FINAL, Parser
from ..checker import Checker, Scope
from ..evaluator import TensorRef
from ..expander import MAX_STEPS, STEPS_PER_ASSIGNMENT, Expander, _graph_target
from ..shapes import _input_shape, infer_operation
from ..types import TensorT
from .cache import current_types, intern_type, shape_ids, share_form, shared_form
from .patterns import CLOSE, IDS, NUMBERS, STATEMENT
from .plans import (
    CONST,
    DEEP,
    INT,
    INT_SENTINEL,
    LIST,
    OUT_MARK,
    REAL,
    REAL_SENTINEL,
    SLOT_MARK,
    STR_MARK,
    STRING,
    Bail,
    StatementPlan,
    Template,
    attr_encodings,
    encode_out,
    encode_value,
    fill_flat,
    frozen_value,
    has_number,
    hashable_shapes,
    number_value,
    numeric_recipe,
    rebuild_value,
    slot_indexes,
)


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


class Compiler:
    """Per-document state: the fragment table, the type interning and the plan caches."""

    def __init__(self, text: str, file: str | None, table: dict[str, ast.Fragment], compositional: bool,
                 extensions: set[str], graph_name: str, expander_factory: Callable[..., Expander],
                 shapes: bool, context: tuple | None = None, *, cache_limit: int, form_cache_size: int):
        self.text = text
        self.file = file
        self.table = table
        self.compositional = compositional
        self.extensions = extensions
        self.graph_name = graph_name
        self.expander_factory = expander_factory
        self.shapes = shapes
        #: type id -> (checker type, TensorRef dtype); ids are small ints for cheap keys
        self.types = current_types()
        self.type_info = self.types.info
        #: what compiled forms depend on besides their own text (None: not shared), see
        #: ``fastpath.cache``
        self.context = None if context is None else (self.types, shapes, *context)
        #: most plans / memoised shape results kept at once (the caches are emptied when full)
        self.cache_limit = cache_limit
        #: most forms kept between documents (the bound of ``fastpath.cache``'s LRU)
        self.form_cache_size = form_cache_size
        self.shape_memo: dict[tuple, Any] = {}
        #: operations the plans emit
        self.emitted: set[str] = set()
        #: template pieces (numbers cut out) -> where each slot and number comes from
        self.forms: dict[tuple, list[int]] = {}
        #: compiled statement forms, numbers open (see :meth:`plan_for`)
        self.templates: dict[tuple, Template] = {}
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
        self.shape_ids = shape_ids
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
            if len(self.shape_keys) >= self.cache_limit:
                self.shape_keys.clear()
            sid = self.shape_keys[shape_key] = next(self.shape_ids)
        return sid

    def type_id(self, checker_type: Any, dtype: str) -> int:
        key = (checker_type, dtype)
        types = self.types
        tid = types.ids.get(key)
        if tid is None:
            tid = intern_type(types, key)
        return tid

    # --- compiling one template ---------------------------------------------------------

    def plan_for(self, m: re.Match, texts: list[str], slots: list[str], type_ids: tuple, lhs: list[str],
                 lhs_key: str | None) -> StatementPlan:
        """The plan of a statement whose exact template was not seen yet.

        Numbers are abstracted once more: the template without its numeric literals (and
        the kinds, integer or real, of those) names a :class:`Template` compiled once by
        the general pipeline; this statement's numbers are then filled into it, which gives
        the plan for its exact template (cached by the caller).
        """
        joined = "\x00".join(texts)
        if joined.count("\x00") != len(slots):
            raise Bail("NUL character in a statement")
        nparts = NUMBERS.split(joined)
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
        # when the literal has a fraction or an exponent, which is what number_value tests)
        values = [number_value(numbers[-1 - o]) if o < 0 else None for o in origin]
        merged_types = tuple([type_ids[o] if o >= 0 else REAL if type(v) is float else INT
                              for o, v in zip(origin, values, strict=True)])
        op_name, gen = m.group("op", "gen")
        key = (op_name, gen, pieces, lhs_key, merged_types)
        tmpl = self.templates.get(key)
        if tmpl is None:
            shared_key = None if self.context is None else (self.context, key)
            tmpl = None if shared_key is None else shared_form(shared_key)
            if tmpl is None:
                merged = [slots[o] if o >= 0 else numbers[-1 - o] for o in origin]
                start = m.start("one") if m.group("one") is not None else m.start("many")
                tmpl = self.compile_template(start, m.end(), m.start("op"), merged, merged_types, lhs)
                if shared_key is not None:
                    share_form(shared_key, tmpl, self.form_cache_size)
            else:
                self.emitted.add(tmpl.op.op)
            self.templates[key] = tmpl
        return self.specialize(tmpl, values, origin, type_ids, slots)

    def compile_template(self, start: int, end: int, op_offset: int, slots: list[str], type_ids: list[int],
                         lhs_names: list[str]) -> Template:
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
            if t == STRING:
                marks.append(STR_MARK + str(i))
            elif t == INT:
                marks.append(INT_SENTINEL - i)
            elif t == REAL:
                marks.append(REAL_SENTINEL * (1.0 + i * 2.0 ** -30))
            else:
                marks.append(SLOT_MARK + str(i))
        out_marks = [OUT_MARK + str(j) for j in range(len(lhs_names))]
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

        tmpl = Template()
        tmpl.fixed = None
        tmpl.shape_only = None
        tmpl.numeric = None
        self.emitted.add(op.op)
        tmpl.op = op
        tmpl.marks = {(type(mk), mk): i for i, mk in enumerate(marks)}
        tmpl.outputs = [(k, *encode_out(v)) for k, v in op.outputs.items()]
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
            if not isinstance(first, ast.Identifier) or not first.name.startswith(SLOT_MARK):
                raise Bail("update's first argument")
            tmpl.update_slot = int(first.name[2:])
        return tmpl

    def specialize(self, tmpl: Template, values: list[Any], origin: list[int], type_ids: tuple,
                   slots: list[str]) -> StatementPlan:
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
                values[i] = (STR_MARK if slots[o][0] in "'\"" else SLOT_MARK) + str(o)

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
                {k: encode_value(fill(v)) for k, v in op.inputs.items() if not has_number(v, marks)},
                {k: (encode_value(fill(v)), frozen_value(fill(v))) for k, v in op.attribs.items() if not has_number(v, marks)},
                [i for i, t in enumerate(type_ids) if t >= 0])
        fixed_inputs, fixed_attribs, ref_pos = fixed
        plan = StatementPlan()
        plan.op = op.op
        plan.dtype = op.dtype
        plan.inputs = [(k, *(fixed_inputs.get(k) or encode_value(fill(v)))) for k, v in op.inputs.items()]
        plan.attribs = {}
        plan.attr_copies = []
        plan.attr_fills = []
        attr_str_pos: list[int] = []
        attr_numbers = []
        for k, v in op.attribs.items():
            known = fixed_attribs.get(k)
            if known is None:
                value = fill(v)
                (kind, payload), frozen = encode_value(value), frozen_value(value)
            else:
                (kind, payload), frozen = known
            if kind == CONST:
                plan.attribs[k] = payload
            else:
                plan.attribs[k] = None  # keeps the key order
                if kind in (LIST, DEEP):
                    plan.attr_copies.append((k, kind, payload))
                else:
                    plan.attr_fills.append((k, kind, payload))
                    attr_str_pos.extend(slot_indexes(kind, payload))
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
                attribs = {k: (rebuild_value(kind, payload, ["''"] * len(type_ids)) if v is None else v)
                           for (k, v), (kind, payload) in zip(plan.attribs.items(), attr_encodings(plan),
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
                and len(plan.attr_copies) == 1 and plan.attr_copies[0][:2] == ("shape", LIST)
                and isinstance(op.attribs.get("shape"), list)
                and all(type(v) is int and (int, v) in marks for v in op.attribs["shape"])
                and not any(has_number(v, marks) for k, v in op.attribs.items() if k != "shape")):
            positions = [marks[(int, v)] for v in op.attribs["shape"]]
            tmpl.shape_only = (plan, positions, [(k, f) for k, f in attr_numbers if k != "shape"])
        if tmpl.numeric is None:
            tmpl.numeric = numeric_recipe(tmpl, plan, attr_numbers)
        return plan

    def _with_numbers(self, tmpl: Template, recipe: tuple, values: list[Any]) -> StatementPlan:
        """The plan :meth:`specialize` makes for ``values``, from the template's first plan
        with the numbers put in their places (see :func:`numeric_recipe`): what statements
        differing in a scalar (``mul(x, 0.37)``) or a flat list of numbers cost."""
        proto, in_spots, attr_spots, frozen_proto, _ = recipe
        plan = proto.clone()
        if in_spots:
            inputs = list(proto.inputs)
            for j, k, spot in in_spots:
                inputs[j] = (k, CONST, values[spot]) if type(spot) is int else (k, LIST, fill_flat(spot, values))
            plan.inputs = inputs
        if attr_spots:
            attribs = proto.attribs.copy()
            copies = list(proto.attr_copies)
            frozen = frozen_proto.copy()
            for k, j, spot in attr_spots:
                if type(spot) is int:
                    v = attribs[k] = values[spot]
                else:
                    v = fill_flat(spot, values)
                    copies[j] = (k, LIST, v)
                frozen[k] = frozen_value(v)
            plan.attribs = attribs
            plan.attr_copies = copies
        # the first plan may come from another document's compiler: look the id up here
        shape_key = (id(tmpl), tuple(frozen.items())) if attr_spots else (id(tmpl), recipe[4])
        plan.shape_key = self.shape_id(shape_key)
        return plan

    def _with_shape(self, tmpl: Template, proto: StatementPlan, extents: list[int], frozen_rest: list) -> StatementPlan:
        """``proto`` (a plan of variable form ``tmpl``) with other positive extents; what
        :meth:`specialize` computes for them, without filling and probing."""
        plan = proto.clone()
        plan.attr_copies = [("shape", LIST, extents)]
        plan.shape = tuple(extents)
        rest = dict(frozen_rest)
        shape_key = (id(tmpl), tuple([(k, frozen_value(extents) if k == "shape" else rest[k]) for k in proto.attribs]))
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
        key = ("delegated", op.op, op.dtype, tuple(op.inputs), frozen_value(list(attribs.items())) if attribs else None,
               hashable_shapes(shapes_in), tuple([len(v) if isinstance(v, list) else -1 for v in op.outputs.values()]))
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
            if len(memo) >= self.cache_limit:
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
            m = STATEMENT.match(text, pos)
            if m is None:
                break
            one = m.group("one")
            if one is not None:
                names.add(one)
            else:
                names.update(IDS.findall(m.group("many")))
            count += 1
            pos = m.end()
        if CLOSE.match(text, pos) is None:
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


def _leaf_of(slot: str, kind: int) -> tuple[str, ...]:
    if kind == STRING:
        return ("s", slot[1:-1])
    if kind in (INT, REAL):
        v = number_value(slot)
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
            if not (v.startswith(SLOT_MARK) or v.startswith(STR_MARK)):
                raise Bail("a slot was combined into another value")
            if tensor and v.startswith(STR_MARK):
                raise Bail("a string in a tensor parameter")
            if not tensor and v.startswith(SLOT_MARK):
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


def checker_first_arg(table: dict[str, ast.Fragment], inv: ast.Invocation) -> ast.Expr:
    from ..checker import match_arguments

    frag = table[inv.name]
    return match_arguments(frag, inv, FINAL)[frag.params[0].name].value

