"""Expansion: evaluate the checked graph body into a flat :class:`~nnefx.graph.Graph`.

What gets expanded (replaced by its body) and what stays one operation:

* fragments defined in the document are **always** expanded (custom compounds);
* fragments whose results are all attributes are always evaluated (compile-time functions);
* standard compound operations stay **atomic** (one registry operation) by default;
* names in ``lowered`` are expanded (the official parser's ``lowered=[...]`` meaning);
* ``expand_all=True`` expands every compound down to primitives, except names in ``atomic``;
* body-less fragments (primitives) are always emitted as operations.

Naming (deterministic): every identifier assigned in the graph body keeps its name; every
other tensor gets ``<op><n>`` with a per-operation counter starting at 1 that skips names
already taken (array results: ``<op><n>_<k>``, k from 1, the counter advancing per item),
like the official tools.  A compound's result takes the caller's name, or ``<compound><n>``
when the call is nested or bound to a fragment-local identifier; a result assigned directly
from another tensor or a literal becomes a ``copy``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation, Tensor
from ..syntax import ast
from . import evaluator as ev
from .checker import BINARY_FRAGMENTS, UNARY_FRAGMENTS, bind_generic, match_arguments
from .dialect import tract_integer_result, tract_loose
from .evaluator import TensorLiteral, TensorRef, is_tensor_value, value_type
from .types import ArrayT, TensorT, TupleT, Type, can_cast, convert_value

#: Deepest nesting of fragment invocations during expansion (recursion guard).
MAX_EXPANSION_DEPTH = 200
#: Most operations one document may expand to.
MAX_OPERATIONS = 2_000_000
#: Evaluation steps (invocations + comprehension items) one document may take: this many,
#: plus :data:`STEPS_PER_ASSIGNMENT` per graph-body assignment, so a hostile document
#: (exponential recursion, nested comprehensions) fails within seconds instead of hanging.
MAX_STEPS = 100_000
STEPS_PER_ASSIGNMENT = 200

#: Per-dimension attributes of sliding-window operations (completed in the provisional dialect).
_WINDOW_ATTRIBS = ("size", "stride", "dilation", "padding")
#: Sliding-window operations whose arrays cover only the spatial dimensions.
_SPATIAL_WINDOW_OPS = frozenset({"conv", "deconv", "separable_conv", "separable_deconv"})

#: Result-array lengths of primitives, known from their attributes.
_ARRAY_RESULT_LENGTH = {"split": lambda a: len(a.get("ratios", []))}


class Expander:
    def __init__(self, fragments: dict[str, ast.Fragment], dialect: str, *, lowered: Iterable[str] | None = None,
                 expand_all: bool = False, atomic: Iterable[str] | None = None):
        self.fragments = fragments
        self.dialect = dialect
        self.lowered = set(lowered or ())
        self.expand_all = expand_all
        self.atomic = set(atomic or ())
        self.graph: Graph | None = None
        self.counters: dict[str, int] = defaultdict(int)
        self.reserved: set[str] = set()
        self.generic: str | None = None
        self.depth = 0
        self.doc_loc: Location | None = None
        self._matches: dict[int, dict[str, ast.Argument]] = {}
        self._shaped = 0
        self.steps = 0
        self.max_steps = MAX_STEPS
        #: symbolic extents the graph body may name (tract_symbol), as :class:`nnefx.dims.Dim`
        self.symbols: dict[str, Any] = {}
        #: departures from NNEF 1.0.5 accepted (:class:`nnefx.semantics.dialect.Tolerance`)
        self.tolerance: Any = None

    # --- entry ---------------------------------------------------------------------------

    def expand_graph(self, gdef: ast.GraphDef) -> Graph:
        graph = Graph(name=gdef.name, inputs=[p.name for p in gdef.params],
                      outputs=[r.name for r in gdef.results])
        self.graph = graph
        self.max_steps = MAX_STEPS + STEPS_PER_ASSIGNMENT * len(gdef.body)
        for a in gdef.body:
            self.reserved.update(_names(a.lhs))
        self.reserved.update(graph.inputs)
        env: dict[str, Any] = dict(self.symbols)
        for a in gdef.body:
            self.doc_loc = a.rhs.loc
            target = _graph_target(a.lhs)
            value = self.eval(a.rhs, env, target)
            self.bind(a.lhs, value, env, target, tensor=True)
        return graph

    # --- naming --------------------------------------------------------------------------

    def fresh(self, op: str) -> str:
        while True:
            self.counters[op] += 1
            name = f"{op}{self.counters[op]}"
            if name not in self.reserved and name not in self.graph.tensors:  # type: ignore[union-attr]
                return name

    # --- binding ---------------------------------------------------------------------------

    def bind(self, lhs: ast.Expr, value: Any, env: dict[str, Any], target: Any, tensor: bool) -> None:
        if isinstance(lhs, ast.Identifier):
            if isinstance(target, (str, list)) and tensor:
                value = self.materialize(value, target, lhs.loc)
            env[lhs.name] = value
            return
        if isinstance(lhs, ast.TupleExpr):
            if not isinstance(value, tuple) or len(value) != len(lhs.items):
                raise NNEFXError(f"cannot unpack {_describe(value)} into {len(lhs.items)} identifiers", lhs.loc)
            targets = target if isinstance(target, tuple) else (None,) * len(lhs.items)
            for item, v, t in zip(lhs.items, value, targets, strict=False):
                self.bind(item, v, env, t, tensor)
            return
        if isinstance(lhs, ast.ArrayExpr):
            if not isinstance(value, list) or len(value) != len(lhs.items):
                raise NNEFXError(f"cannot unpack {_describe(value)} into an array of {len(lhs.items)} identifiers",
                                 lhs.loc)
            targets = target if isinstance(target, list) else [None] * len(lhs.items)
            for item, v, t in zip(lhs.items, value, targets, strict=False):
                self.bind(item, v, env, t, tensor)
            return
        raise NNEFXError("invalid left-hand side", lhs.loc)

    def materialize(self, value: Any, target: Any, loc: Location) -> Any:
        """Make ``value`` the tensor named ``target`` (emitting ``copy`` where it is not)."""
        if isinstance(target, list):
            if not isinstance(value, list) or len(value) != len(target):
                raise NNEFXError(f"expected an array of {len(target)} tensors, found {_describe(value)}", loc)
            return [self.materialize(v, t, loc) for v, t in zip(value, target, strict=False)]
        if target is None or (isinstance(value, TensorRef) and value.name == target):
            return value
        if not isinstance(value, (TensorRef, TensorLiteral, bool, int, float)):
            raise NNEFXError(f"expected a tensor, found {_describe(value)}", loc)
        dtype = value_type(value)
        dt = dtype.dtype if isinstance(dtype, TensorT) else dtype.name  # type: ignore[attr-defined]
        frag = self.fragments.get("copy") or self.fragments.get("idn")
        if frag is None:
            raise NNEFXError("operation 'copy' is not available", loc)
        return self.emit(frag, {frag.params[0].name: value}, dt, target, loc)

    # --- expressions ---------------------------------------------------------------------

    def eval(self, e: ast.Expr, env: dict[str, Any], target: Any = None) -> Any:
        return getattr(self, "e_" + type(e).__name__)(e, env, target)

    def e_Literal(self, e: ast.Literal, env, target) -> Any:
        return e.value

    def e_Identifier(self, e: ast.Identifier, env, target) -> Any:
        try:
            return env[e.name]
        except KeyError:
            raise NNEFXError(f"undefined identifier '{e.name}'", e.loc) from None

    def e_ArrayExpr(self, e: ast.ArrayExpr, env, target) -> Any:
        if isinstance(target, list) and len(target) == len(e.items):
            return [self.eval(x, env, t) for x, t in zip(e.items, target, strict=False)]
        return [self.eval(x, env) for x in e.items]

    def e_TupleExpr(self, e: ast.TupleExpr, env, target) -> Any:
        if isinstance(target, tuple) and len(target) == len(e.items):
            return tuple(self.eval(x, env, t) for x, t in zip(e.items, target, strict=False))
        return tuple(self.eval(x, env) for x in e.items)

    def e_Unary(self, e: ast.Unary, env, target) -> Any:
        v = self.eval(e.operand, env)
        if is_tensor_value(v):
            return self.operator_call(UNARY_FRAGMENTS[e.op], [v], e.loc, target)
        return ev.unary(e.op, v, e.loc)

    def e_Binary(self, e: ast.Binary, env, target) -> Any:
        left = self.eval(e.left, env)
        if e.op in ("&&", "||") and isinstance(left, bool):
            if e.op == "&&" and not left:
                return False
            if e.op == "||" and left:
                return True
        right = self.eval(e.right, env)
        if e.op != "in" and (is_tensor_value(left) or is_tensor_value(right)):
            return self.operator_call(BINARY_FRAGMENTS[e.op], [left, right], e.loc, target)
        return ev.binary(e.op, left, right, e.loc)

    def operator_call(self, name: str, values: list[Any], loc: Location, target: Any) -> Any:
        frag = self.fragments.get(name)
        if frag is None:
            raise NNEFXError(f"operator maps to '{name}', which is not available", loc)
        args = {p.name: v for p, v in zip(frag.params, values, strict=False)}
        return self.call(frag, args, None, target, loc, {})

    def e_Select(self, e: ast.Select, env, target) -> Any:
        cond = self.eval(e.condition, env)
        if not isinstance(cond, bool):
            raise NNEFXError("the condition of 'if ... else' must be a logical value", e.condition.loc)
        return self.eval(e.then if cond else e.otherwise, env, target)

    def e_Comprehension(self, e: ast.Comprehension, env, target) -> Any:
        iterables = []
        for it in e.iterators:
            seq = self.eval(it.iterable, env)
            if not isinstance(seq, list):
                raise NNEFXError(f"a comprehension iterates over an array, found {_describe(seq)}", it.iterable.loc)
            iterables.append(seq)
        n = len(iterables[0])
        for it, seq in zip(e.iterators, iterables, strict=False):
            if len(seq) != n:
                raise NNEFXError(f"comprehension iterables have different lengths ({n} and {len(seq)})", it.loc)
        out = []
        for k in range(n):
            self.step(e.loc)
            inner = dict(env)
            for it, seq in zip(e.iterators, iterables, strict=False):
                item = seq[k]
                if len(it.names) == 1:
                    inner[it.names[0]] = item
                else:
                    if not isinstance(item, tuple) or len(item) != len(it.names):
                        raise NNEFXError(f"cannot unpack {_describe(item)} into {len(it.names)} loop variables",
                                         it.loc)
                    inner.update(zip(it.names, item, strict=False))
            if e.condition is not None and not self.eval(e.condition, inner):
                continue
            out.append(self.eval(e.body, inner))
        return out

    def e_Subscript(self, e: ast.Subscript, env, target) -> Any:
        base = self.eval(e.base, env)
        begin = self.eval(e.begin, env) if e.begin is not None else None
        stop = self.eval(e.stop, env) if e.stop is not None else None
        if not isinstance(base, (list, tuple, str)):
            raise NNEFXError(f"cannot subscript {_describe(base)}", e.base.loc)
        return ev.subscript(base, begin, stop, e.is_range, e.loc)

    def e_Builtin(self, e: ast.Builtin, env, target) -> Any:
        v = self.eval(e.arg, env)
        if e.name == "shape_of":
            return self.shape_of(v, e.loc)
        if e.name == "length_of":
            return len(v)
        if e.name == "range_of":
            return list(range(len(v)))
        if isinstance(v, (TensorRef, TensorLiteral, list, tuple)):
            raise NNEFXError(f"{e.name}() expects a primitive value, found {_describe(v)}", e.arg.loc)
        return ev.cast(e.name, v, e.loc)

    def shape_of(self, v: Any, loc: Location) -> list[int]:
        minimum = 2 if self.dialect == "provisional" else 0
        if isinstance(v, TensorLiteral):
            return [1] * minimum
        if not isinstance(v, TensorRef):
            return [1] * minimum
        shape = self._current_shape(v.name)
        if shape is None or any(d is None for d in shape):
            raise NNEFXError(f"shape_of('{v.name}') needs a fully known shape, but it depends on an input "
                             "with unspecified extents", loc)
        return list(shape) + [1] * max(0, minimum - len(shape))

    def _current_shape(self, name: str) -> tuple | None:
        """Shape of ``name`` from the operations emitted so far (lazy shape inference)."""
        from .shapes import infer_operation

        graph = self.graph
        assert graph is not None
        while self._shaped < len(graph.operations):
            infer_operation(graph, graph.operations[self._shaped], None)
            self._shaped += 1
        return graph.tensors[name].shape

    def _complete_windows(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any],
                          loc: Location) -> None:
        """Provisional sliding-window arrays may be shorter than the rank: missing trailing
        ``size``/``stride``/``dilation`` items are 1 (seed-era rule, nnef-operators.md §12)."""
        present = [k for k in _WINDOW_ATTRIBS if isinstance(attribs.get(k), list) and attribs[k]]
        if not present or not inputs:
            return
        first = next(iter(inputs.values()))
        if not isinstance(first, str):
            return
        try:
            shape = self._current_shape(first)
        except NNEFXError:
            return
        if shape is None:
            return
        rank = len(shape) - (2 if op in _SPATIAL_WINDOW_OPS else 0)
        for k in present:
            items = attribs[k]
            if len(items) >= rank:
                continue
            if k == "padding":
                raise NNEFXError(f"'{op}': padding lists {len(items)} of {rank} dimensions; nnefx cannot mix "
                                 "explicit and automatic padding (give all or none)", self._loc(loc))
            attribs[k] = items + [1] * (rank - len(items))

    def e_Invocation(self, e: ast.Invocation, env, target) -> Any:
        frag = self.fragments.get(e.name)
        if frag is None:
            raise NNEFXError(f"undefined operation '{e.name}'", e.loc)
        bound = self._matches.get(id(e))
        if bound is None:
            bound = match_arguments(frag, e, self.dialect)
            self._matches[id(e)] = bound
        args = {}
        locs = {}
        for pname, arg in bound.items():
            args[pname] = self.eval(arg.value, env)
            locs[pname] = arg.value.loc
        return self.call(frag, args, e.generic, target, e.loc, locs)

    # --- calls ---------------------------------------------------------------------------

    def step(self, loc: Location) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise NNEFXError(f"expansion takes more than {self.max_steps} steps (invocations and comprehension "
                             "items); the document is too expensive to expand", self._loc(loc))

    def call(self, frag: ast.Fragment, args: dict[str, Any], explicit: str | None, target: Any, loc: Location,
             locs: dict[str, Location]) -> Any:
        self.step(loc)
        for p in frag.params:
            if p.name not in args:
                if p.default is None:
                    raise NNEFXError(f"missing argument for parameter '{p.name}' of '{frag.name}'", loc)
                args[p.name] = self.eval(p.default, {})
        if self.tolerance is not None and frag.body is None:
            self._fold_load_time(frag, args, loc, locs)
        types = {name: value_type(v) for name, v in args.items()}
        lenient = "scalar" if self.dialect == "provisional" else None
        g = bind_generic(frag, explicit, types, loc, self.generic, lenient)
        prov = self.dialect == "provisional"
        for p in frag.params:
            want = p.type.type.bind(g)
            if not can_cast(types[p.name], want) and not (
                    self.tolerance is not None and self.tolerance.mode == "tract" and tract_loose(frag, types[p.name], want)):
                raise NNEFXError(f"argument '{p.name}' of '{frag.name}' expects {want}, found {types[p.name]}",
                                 locs.get(p.name, loc))
            if prov:
                args[p.name] = convert_value(args[p.name], want)
        if self._expands(frag) or self.tolerance is not None and self._tolerated_expansion(frag, args, loc):
            return self.expand(frag, args, g, self._name_results(frag, g, target), loc)
        return self.emit(frag, args, g, target, loc)

    def _fold_load_time(self, frag: ast.Fragment, args: dict[str, Any], loc: Location,
                        locs: dict[str, Location]) -> None:
        """Integer attributes of a primitive given as tensors (tract's dialect) take the
        value those tensors have at load (:mod:`nnefx.semantics.loadtime`)."""
        from .loadtime import load_time_value, to_attribute

        for p in frag.params:
            t, v = p.type.type, args.get(p.name)
            if t.is_tensor() or not (isinstance(v, TensorRef) or isinstance(v, list)
                                      and any(isinstance(x, TensorRef) for x in v)):
                continue
            where = self._loc(locs.get(p.name, loc))
            array = isinstance(t, ArrayT)

            def fold(x: Any, array: bool = array, where: Location = where, pname: str = p.name) -> Any:
                if not isinstance(x, TensorRef):
                    return x
                value = load_time_value(self.graph, x.name, self._current_shape, where)  # type: ignore[arg-type]
                try:
                    return to_attribute(value, array)
                except ValueError as exc:
                    raise NNEFXError(f"argument '{pname}' of '{frag.name}': {exc}", where) from None

            if isinstance(v, TensorRef):
                args[p.name] = fold(v)
            else:
                items = [fold(x, False) for x in v]
                args[p.name] = items

    def _tolerated_expansion(self, frag: ast.Fragment, args: dict[str, Any], loc: Location) -> bool:
        """tract (and lenient mode) apply ``linear`` to inputs of any rank: its NNEF definition
        (``matmul(input, filter, transposeB = true) + bias``, §4.9.2) broadcasts the batch
        dimensions, so such a call is expanded through that definition."""
        if frag.name != "linear" or frag.origin != "stdlib" or frag.body is None:
            return False
        x = args.get("input")
        shape = self._current_shape(x.name) if isinstance(x, TensorRef) else None
        if shape is None or len(shape) == 2:
            return False
        self.tolerance.allow("batched-linear", f"'linear' on an input of rank {len(shape)} (NNEF 1.0.5 §4.9.2 "
                             "declares rank 2); expanded through its definition", self._loc(loc))
        return True

    def _name_results(self, frag: ast.Fragment, g: str | None, target: Any) -> Any:
        """Unnamed single-tensor results of an expanded compound are named after it
        (``<fragment><n>``), as the official tools do; their body then writes that name."""
        results = frag.results
        if len(results) == 1:
            items = [target]
        elif isinstance(target, tuple) and len(target) == len(results):
            items = list(target)
        else:
            items = [None] * len(results)
        named = []
        for r, t in zip(results, items, strict=False):
            if t is None and isinstance(r.type.type.bind(g), TensorT):
                t = self.fresh(frag.emit_as or frag.name)
            named.append(t)
        return named[0] if len(results) == 1 else tuple(named)

    def _expands(self, frag: ast.Fragment) -> bool:
        if frag.body is None:
            return False
        if frag.origin == "document":
            return True
        if not any(r.type.type.is_tensor() for r in frag.results):
            return True
        if frag.name in self.lowered:
            return True
        return self.expand_all and frag.name not in self.atomic

    def expand(self, frag: ast.Fragment, args: dict[str, Any], g: str | None, target: Any, loc: Location) -> Any:
        self.depth += 1
        if self.depth > MAX_EXPANSION_DEPTH:
            self.depth = 0
            raise NNEFXError(f"fragment recursion too deep while expanding '{frag.name}' (more than "
                             f"{MAX_EXPANSION_DEPTH} nested invocations); is a recursion missing its base case?",
                             self._loc(loc))
        saved_generic, saved_loc = self.generic, self.doc_loc
        if frag.origin == "document":
            self.doc_loc = loc
        self.generic = g
        env = {}
        for p in frag.params:
            env[frag.param_map.get(p.name, p.name)] = _as_tensor(args[p.name], p.type.type.bind(g))
        results = frag.results
        if len(results) == 1:
            rtargets = {results[0].name: target}
        elif isinstance(target, tuple) and len(target) == len(results):
            rtargets = {r.name: t for r, t in zip(results, target, strict=False)}
        else:
            rtargets = {r.name: None for r in results}
        rtypes = {r.name: r.type.type for r in results}
        try:
            for a in frag.body or ():
                tgt = _fragment_target(a.lhs, rtargets)
                value = self.eval(a.rhs, env, tgt)
                self._bind_fragment(a.lhs, value, env, rtargets, rtypes)
        except NNEFXError as exc:
            where = exc.location
            if where is not None and where.file is not None and where.file.startswith("<stdlib"):
                # An error inside a standard body is the caller's argument's fault: point there.
                exc.message = f"in standard operation '{frag.name}' ({where}): {exc.message}"
                exc.args = (exc.message,)
                exc.location = self._loc(loc) if not (loc.file or "").startswith("<stdlib") else self.doc_loc
            raise
        out = [env[r.name] for r in results]
        self.generic, self.doc_loc = saved_generic, saved_loc
        self.depth -= 1
        return out[0] if len(out) == 1 else tuple(out)

    def _bind_fragment(self, lhs: ast.Expr, value: Any, env: dict[str, Any], rtargets: dict[str, Any],
                       rtypes: dict[str, Any]) -> None:
        if isinstance(lhs, ast.Identifier):
            t = rtargets.get(lhs.name)
            if t is not None and rtypes[lhs.name].is_tensor():
                value = self.materialize(value, t, lhs.loc)
            env[lhs.name] = value
            return
        items = getattr(lhs, "items", None)
        kind = tuple if isinstance(lhs, ast.TupleExpr) else list
        if items is None or not isinstance(value, kind) or len(value) != len(items):
            raise NNEFXError(f"cannot unpack {_describe(value)} into {len(items or [])} identifiers", lhs.loc)
        for item, v in zip(items, value, strict=False):
            self._bind_fragment(item, v, env, rtargets, rtypes)

    def _loc(self, loc: Location) -> Location:
        if loc.file is not None and loc.file.startswith("<stdlib") and self.doc_loc is not None:
            return self.doc_loc
        return loc

    def emit(self, frag: ast.Fragment, args: dict[str, Any], g: str | None, target: Any, loc: Location) -> Any:
        graph = self.graph
        assert graph is not None
        if len(graph.operations) >= MAX_OPERATIONS:
            raise NNEFXError(f"the document expands to more than {MAX_OPERATIONS} operations", self._loc(loc))
        op_name = frag.emit_as or frag.name
        if op_name == "tract_core_scan" and frag.param("scan_inputs") is None:
            from .tract_scan import lower_scan

            return lower_scan(self, args, target, loc)
        inputs: dict[str, Any] = {}
        attribs: dict[str, Any] = {}
        for p in frag.params:
            pname = frag.param_map.get(p.name, p.name)
            v = args[p.name]
            if p.type.type.is_tensor():
                inputs[pname] = _to_graph(v)
            else:
                attribs[pname] = _to_graph(v)
        attribs.update(frag.fixed_attribs)
        if self.dialect == "provisional":
            self._complete_windows(op_name, inputs, attribs, loc)
        # add of integer tensors in tract's dialect is an integer tensor (carry_etypes computes it so)
        forced = "integer" if self.tolerance is not None and self.tolerance.mode == "tract" and \
            tract_integer_result(frag, [value_type(v) for v in args.values()]) else None
        outputs: dict[str, Any] = {}
        values = []
        results = frag.results
        targets = [target] if len(results) == 1 else (list(target) if isinstance(target, tuple)
                                                        and len(target) == len(results) else [None] * len(results))
        for r, t in zip(results, targets, strict=False):
            rt = r.type.type.bind(g)
            if isinstance(rt, TensorT):
                name = t if isinstance(t, str) and t not in graph.tensors else self.fresh(op_name)
                dtype = forced or (rt.dtype if rt.dtype not in (None, "?") else (g if g not in (None, "?") else "scalar"))
                graph.tensors[name] = Tensor(name=name, dtype=dtype)
                outputs[r.name] = name
                values.append(TensorRef(name, dtype))
            elif isinstance(rt, ArrayT) and isinstance(rt.item, TensorT):
                if isinstance(t, list):
                    count = len(t)
                elif op_name in _ARRAY_RESULT_LENGTH:
                    count = _ARRAY_RESULT_LENGTH[op_name](attribs)
                else:
                    raise NNEFXError(f"the number of results of '{frag.name}' is not known before shape inference; "
                                     f"unpack them into an array of identifiers ([a, b, ...] = {frag.name}(...))",
                                     self._loc(loc))
                item = rt.item
                dtype = item.dtype if item.dtype not in (None, "?") else (g if g not in (None, "?") else "scalar")
                names = []
                for k in range(count):
                    tk = t[k] if isinstance(t, list) else None
                    name = tk if isinstance(tk, str) and tk not in graph.tensors else f"{self.fresh(op_name)}_{k + 1}"
                    graph.tensors[name] = Tensor(name=name, dtype=dtype)
                    names.append(name)
                outputs[r.name] = names
                values.append([TensorRef(n, dtype) for n in names])
            else:
                raise NNEFXError(f"'{frag.name}' has a non-tensor result and no body to compute it", self._loc(loc))
        graph.operations.append(Operation(op=op_name, inputs=inputs, outputs=outputs, attribs=attribs,
                                          dtype=g if frag.generic else None, location=self._loc(loc)))
        return values[0] if len(values) == 1 else tuple(values)


def _as_tensor(v: Any, t: Type) -> Any:
    """Wrap literals bound to tensor-typed parameters as :class:`TensorLiteral`."""
    if isinstance(t, TensorT) and isinstance(v, (bool, int, float)):
        dt = value_type(v)
        return TensorLiteral(v, dt.name)  # type: ignore[attr-defined]
    if isinstance(t, ArrayT) and isinstance(v, list):
        return [_as_tensor(x, t.item) for x in v]
    if isinstance(t, TupleT) and isinstance(v, tuple):
        return tuple(_as_tensor(x, i) for x, i in zip(v, t.items, strict=False))
    return v


def _to_graph(v: Any) -> Any:
    if isinstance(v, TensorRef):
        return v.name
    if isinstance(v, TensorLiteral):
        return v.value
    if isinstance(v, list):
        return [_to_graph(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_to_graph(x) for x in v)
    return v


def _describe(v: Any) -> str:
    if isinstance(v, TensorRef):
        return f"tensor '{v.name}'"
    if isinstance(v, TensorLiteral):
        return f"constant tensor {v.value!r}"
    if isinstance(v, list):
        return f"an array of {len(v)} items"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)} items"
    return f"{value_type(v)} value {v!r}"


def _names(lhs: ast.Expr) -> list[str]:
    if isinstance(lhs, ast.Identifier):
        return [lhs.name]
    return [n for item in getattr(lhs, "items", []) for n in _names(item)]


def _graph_target(lhs: ast.Expr) -> Any:
    if isinstance(lhs, ast.Identifier):
        return lhs.name
    if isinstance(lhs, ast.TupleExpr):
        return tuple(_graph_target(i) for i in lhs.items)
    if isinstance(lhs, ast.ArrayExpr):
        return [_graph_target(i) for i in lhs.items]
    return None


def _fragment_target(lhs: ast.Expr, rtargets: dict[str, Any]) -> Any:
    if isinstance(lhs, ast.Identifier):
        return rtargets.get(lhs.name)
    if isinstance(lhs, ast.TupleExpr):
        return tuple(_fragment_target(i, rtargets) for i in lhs.items)
    if isinstance(lhs, ast.ArrayExpr):
        return [_fragment_target(i, rtargets) for i in lhs.items]
    return None
