"""Run a graph: the execution half of NNEF 1.0 §2.4.1 (graph compilation and execution).

A :class:`Session` compiles its graph once (:func:`~nnefx.runtime.planner.compile_plan`)
and then, per :meth:`Session.run`, feeds the ``external`` tensors, executes the plan, reads
the outputs and applies the ``update`` operations to the variables, so the next run sees the
new values (recurrent networks).  :meth:`Session.reset` restores the loaded values and
:meth:`Session.save` writes the current ones back to a model file.

The session is format-agnostic: it only knows NNEF's four tensor-introducing operations
(``external``, ``variable``, ``constant``, ``update``) and calls every other operation's
kernel from the registry.  Format-specific behaviour is expressed as operations in the graph
by the importers; integer widths come from ``Model.extras["storage"]`` (see
:mod:`nnefx.runtime.dtypes`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Graph, Model
from .dtypes import to_storage
from .planner import Plan, Resolver, check_result, compile_plan
from .profile import Profile
from .subgraphs import numeric_array


class TensorInfo(NamedTuple):
    """Name, declared shape (None for an unknown dimension) and NNEF data type of a tensor."""

    name: str
    shape: tuple | None
    dtype: str


class Session:
    """A compiled graph with its variable state, ready to run many times.

    ``backend`` is ``"fast"`` (vectorised kernels) or ``"formal"`` (the reference kernels
    that follow the mathematical definitions).  ``input_shapes`` substitutes other shapes for
    the declared input shapes (same rank; ``None`` = any extent), e.g. to feed batches to a
    model declared with batch 1; intermediate shapes are then not compared with the declared
    ones.  ``check_numerics`` stops at the first operation producing NaN or Inf.
    ``quantize`` applies the ``graph.quant`` entries of activations (simulated quantization,
    see :mod:`nnefx.runtime.quantize`); by default the graph runs in floating point.
    ``fold=False`` and ``release=False`` turn off constant folding and the early release of
    intermediate tensors (for debugging and for measuring what they save); ``fuse=False``
    runs every ``relu``/``add`` after a convolution as its own kernel (the fast backend
    otherwise fuses them into the convolution, same results).  ``variables``
    gives initial values by label, replacing or supplying the model's data (a lone ``.nnef``
    document has none); :meth:`assign` changes values later.
    """

    def __init__(self, model_or_graph: Model | Graph, backend: str = "fast", *,
                 input_shapes: Mapping[str, Any] | None = None, storage: Mapping[str, Any] | None = None,
                 fold: bool = True, check_numerics: bool = False, quantize: bool = False,
                 release: bool = True, variables: Mapping[str, Any] | None = None,
                 resolve: Resolver | None = None, fuse: bool = True, threads: int | None = None,
                 precision: str = "f32", device: str = "cpu", verify: bool | float = False):
        if isinstance(model_or_graph, Model):
            model = model_or_graph
        elif isinstance(model_or_graph, Graph):
            model = Model(model_or_graph)
        else:
            raise NNEFXError(f"Session needs a Model or a Graph, not {type(model_or_graph).__name__}")
        self.model = model
        self.backend = backend
        self.check_numerics = check_numerics
        merged_storage = dict(model.extras.get("storage") or {})
        merged_storage.update(storage or {})
        graph = model.graph
        if quantize:
            from ..ops import registry
            from .quantize import quantized_graph

            graph = quantized_graph(graph, resolve or registry.get)
        substitutes = {name: _shape_arg(name, shape) for name, shape in (input_shapes or {}).items()}
        self._input_shapes_given = dict(input_shapes or {})
        # Declared intermediate shapes only hold while the inputs have their declared shapes.
        same = all(name in graph.tensors and graph.tensors[name].shape is not None
                   and tuple(graph.tensors[name].shape) == shape for name, shape in substitutes.items())
        self._fold = fold
        self._compile_options = dict(storage=merged_storage, fold=fold, resolve=resolve, source=model.source,
                                     check_shapes=same, release=release, fuse=fuse)
        #: symbolic extents (tract_symbol): one plan per binding, made on first use
        self._symbolic = graph
        self._bound_plans: dict[tuple, Plan] = {}
        if graph.symbols:
            from .symbols import specialize

            graph = specialize(graph, {})
            self._compile_options["fold"] = False  # the unbound plan only describes inputs/outputs
        #: run-time values (deferred operations): one specialised graph and plan per value set
        from .values import description_graph, has_deferred

        self._deferred = has_deferred(graph)
        self._value_graphs: dict[tuple, Graph] = {}
        self._prefix_plans: dict[tuple, Plan] = {}
        if self._deferred:
            graph = description_graph(graph)
            self._compile_options["fold"] = False
        self._graph = graph
        self._initial_values = {str(k).lower(): v for k, v in (variables or {}).items()}
        self._values = dict(self._initial_values)
        self._values_changed = False
        from ..engines import NUMPY_BACKENDS, backend_names

        if backend not in backend_names():
            raise NNEFXError(f"unknown backend '{backend}' (expected one of {', '.join(backend_names())})")
        self._engine: Any = None
        #: Why this backend runs the graph (``auto`` says what it measured).
        self.backend_reason = "chosen by the caller"
        # Engines run their own compiled form; the numpy plan still describes inputs, outputs
        # and variables (the formal one: nothing to fold or fuse, cheap to build).
        plan_backend = backend if backend in NUMPY_BACKENDS else "formal"
        if plan_backend != backend:
            self._compile_options["fold"] = False
        self._set_plan(compile_plan(graph, plan_backend, variables=self._values, **self._compile_options))
        self._engine_options = dict(threads=threads, precision=precision, device=device)
        if precision != "f32" and backend in NUMPY_BACKENDS:
            raise NNEFXError(f"the {backend} backend computes in full precision only (asked for {precision})")
        #: engine runners of a graph with run-time values, one per value set (``_engine_for_values``)
        self._value_engines: dict[tuple, Any] = {}
        self._bound_values: tuple = ((), None)
        if self._deferred and backend not in NUMPY_BACKENDS:
            if backend == "auto":
                self.backend_reason = "operations specialised on run-time values run on the fast backend"
            else:
                self.backend_reason = "chosen by the caller; compiled once per set of run-time values"
        if backend not in NUMPY_BACKENDS and backend != "auto" and not self._deferred:
            if self._symbolic.symbols:
                raise NNEFXError(f"the {backend} backend runs graphs of fixed shapes; this one has symbolic extents "
                                 f"({', '.join(self._symbolic.symbols)}): give input_shapes when loading")
            from ..engines import EngineRunner, get

            self._engine = EngineRunner(get(backend), self._graph, **self._engine_options)
        self._verifier: Any = None
        if verify:
            from ..engines.verify import Verifier

            self._verifier = Verifier(self, bound=None if verify is True else float(verify))
        self._input_shapes = {spec.name: spec.shape for spec in self.plan.inputs}
        for name, shape in substitutes.items():
            if name not in self._input_shapes:
                raise NNEFXError(f"a shape is given for '{name}', which is not an input "
                                 f"(inputs: {', '.join(self._input_shapes) or 'none'})")
            declared = self._input_shapes[name]
            if declared is not None and len(declared) != len(shape):
                raise NNEFXError(f"input '{name}' is declared with rank {len(declared)}; "
                                 f"a substitute shape must have the same rank, got {list(shape)}")
            self._input_shapes[name] = shape
        self._var_of_key = {spec.key: spec for spec in self.plan.variables}
        self._state: dict[str, np.ndarray] = {}
        self.reset()

    # ---- description -----------------------------------------------------------------------

    @property
    def inputs(self) -> list[TensorInfo]:
        """The tensors :meth:`run` needs, in declaration order."""
        return [TensorInfo(s.name, self._input_shapes[s.name], s.dtype) for s in self.plan.inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        """The tensors :meth:`run` returns, in the graph's output order."""
        return [TensorInfo(name, shape, dtype) for name, _, dtype, shape in self.plan.outputs]

    @property
    def variables(self) -> dict[str, np.ndarray]:
        """Current variable values by label (read-only arrays; copy before changing)."""
        return {spec.label: self._state[spec.key] for spec in self.plan.variables}

    # ---- state -------------------------------------------------------------------------------

    def reset(self) -> None:
        """Give every variable its initial value again (loaded, or given to the constructor)."""
        if self._values_changed:
            self._values = dict(self._initial_values)
            self._replan()
            self._values_changed = False
        self._state = {spec.key: spec.initial for spec in self.plan.variables}

    def assign(self, values: Mapping[str, Any]) -> None:
        """Set variables (by label) to new values for the following runs.

        Variables that an ``update`` changes simply take the value.  The others were compiled
        into the plan as constants (and folded), so assigning one compiles the plan again.
        """
        updated = {u.key for u in self.plan.updates}
        replan: dict[str, Any] = {}
        new_state: dict[str, np.ndarray] = {}
        for label, value in values.items():
            key = str(label).lower()
            spec = self._var_of_key.get(key)
            if spec is None:
                raise NNEFXError(f"no variable of graph '{self.plan.graph.name}' has label '{label}'")
            if key not in updated:
                replan[key] = value
                continue
            array = to_storage(np.asarray(value), spec.dtype, self.plan.storage, f"value for variable '{spec.label}'",
                               etype=self.plan.graph.tensors[spec.name].etype)
            if array.shape != spec.shape:
                raise NNEFXError(f"variable '{spec.label}' has shape {list(spec.shape)}; the value given has "
                                 f"shape {list(array.shape)}")
            array = np.array(array, copy=True)
            array.setflags(write=False)
            new_state[key] = array
        if replan:
            values = {**self._values, **replan}
            plan = compile_plan(self._graph, self.backend, variables=values, **self._compile_options)
            self._values = values  # only once the new values compiled without error
            self._values_changed = True
            self._set_plan(plan)
            for key in replan:
                self._state[key] = self._var_of_key[key].initial
        self._state.update(new_state)

    def _replan(self) -> None:
        self._set_plan(compile_plan(self._graph, self.backend, variables=self._values, **self._compile_options))

    def _set_plan(self, plan: Plan) -> None:
        self.plan = plan
        self._bound_plans = {}
        self._value_graphs = {}
        self._prefix_plans = {}
        self._var_of_key = {spec.key: spec for spec in plan.variables}
        self._fetch_plans: dict[tuple[str, ...], Plan] = {}

    def _plan_fetching(self, names: tuple[str, ...]) -> Plan:
        if not all(isinstance(n, str) for n in names):
            raise NNEFXError("fetch takes a list of tensor names")
        plan = self._fetch_plans.get(names)
        if plan is None:
            plan = compile_plan(self._graph, self.backend, variables=self._values, fetch=names,
                                **self._compile_options)
            if len(self._fetch_plans) >= 16:
                self._fetch_plans.clear()
            self._fetch_plans[names] = plan
        return plan

    def save(self, path: str | os.PathLike, format: str | None = None) -> None:
        """Write the model with the *current* variable values to ``path`` (any writable format).

        Variables that an ``update`` changes or that were given values are written with their
        current (real) values; the others exactly as they were loaded.
        """
        from ..api import save

        graph = self.model.graph
        tensors = dict(graph.tensors)
        changed = {u.key for u in self.plan.updates} | set(self._values)
        for spec in self.plan.variables:
            # Variables neither updated nor given keep their loaded data (quantized codes stay codes).
            if spec.key in changed:
                tensors[spec.name] = dataclasses.replace(tensors[spec.name], data=np.array(self._state[spec.key]))
        new_graph = dataclasses.replace(graph, tensors=tensors)
        save(dataclasses.replace(self.model, graph=new_graph), path, format=format)

    # ---- running ------------------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any] | None = None, *, profile: Profile | None = None,
            fetch: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """Execute one cycle: feed ``inputs``, compute, apply updates; outputs by name, graph order.

        ``fetch`` adds intermediate tensors by name after the outputs (the plan for each set
        of fetched names is compiled once and kept).
        """
        start = time.perf_counter() if profile is not None else 0.0
        if isinstance(fetch, str):
            raise NNEFXError(f"fetch takes a list of tensor names, not the string '{fetch}'")
        plan = self._plan_fetching(tuple(fetch)) if fetch else self.plan
        inputs = {} if inputs is None else inputs
        if not isinstance(inputs, Mapping):
            raise NNEFXError("Session.run takes a mapping from input names to arrays")
        names = [s.name for s in plan.inputs]
        for name in inputs:
            if name not in names:
                raise NNEFXError(f"'{name}' is not an input of graph '{plan.graph.name}' "
                                 f"(inputs: {', '.join(names) or 'none'})")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise NNEFXError(f"missing input{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(repr(m) for m in missing)} of graph '{plan.graph.name}'")
        shapes = self._input_shapes
        if self._symbolic.symbols or self._deferred:
            plan, shapes = self._plan_bound(inputs, fetch)
        checked = {spec.name: self._check_input(spec.name, spec.dtype, inputs[spec.name], shapes, spec.etype)
                   if spec.kind == "tensor" else self._check_container(spec, inputs[spec.name])
                   for spec in plan.inputs}
        if self.backend == "auto" and self._engine is None and not fetch and not self._symbolic.symbols \
                and not self._deferred:
            from ..engines.auto import choose

            self._engine, self.backend_reason = choose(self, checked)
        if self._deferred and self.backend not in ("fast", "formal", "auto") and not fetch:
            self._engine = self._engine_for_values(inputs)
        if self._engine is not None and not fetch:
            outputs, engine_state = self._engine(checked, self._state)
            values: dict[Any, np.ndarray] = dict(outputs)
            for upd in plan.updates:
                values[("state", upd.key)] = engine_state[upd.key]
            slot_of = {u.key: ("state", u.key) for u in plan.updates}
            regs = values
        else:
            regs = plan.template.copy()
            for spec in plan.inputs:
                if spec.slot >= 0:
                    regs[spec.slot] = checked[spec.name]
            for var in plan.variables:
                if var.slot >= 0:
                    regs[var.slot] = self._state[var.key]
            _execute(plan, regs, profile, self.check_numerics)
            slot_of = None
        if self._verifier is not None and not fetch:
            self._verifier.check(checked, regs, slot_of, plan)

        new_state: dict[str, np.ndarray] = {}
        for upd in plan.updates:
            value = regs[upd.slot if slot_of is None else slot_of[upd.key]]
            var = self._var_of_key[upd.key]
            if value.shape != var.shape:
                raise NNEFXError(f"'update' of variable '{var.label}' (shape {list(var.shape)}) "
                                 f"got a value of shape {list(value.shape)}", _update_where(plan, upd))
            value = to_storage(value, var.dtype, plan.storage, f"new value of variable '{var.label}'",
                               _update_where(plan, upd), plan.graph.tensors[var.name].etype)
            if not value.flags.owndata:
                value = np.array(value, copy=True)  # a view of an input or of other state
            value.setflags(write=False)
            new_state[upd.key] = value
        self._state.update(new_state)

        result: dict[str, np.ndarray] = {}
        for name, slot, dtype, _ in plan.outputs:
            if slot_of is not None:
                result[name] = to_storage(regs[name], dtype, plan.storage, f"output '{name}' of {self.backend}",
                                          etype=plan.graph.tensors[name].etype)
                continue
            value = regs[slot]
            if value.__class__ is not np.ndarray:  # a sequence (list of arrays) or an optional (None or array)
                result[name] = _container_output(value)
                continue
            if not value.flags.writeable or not value.flags.owndata:
                value = np.array(value, copy=True)  # never hand out state or a view of the inputs
            result[name] = value
        if profile is not None:
            profile.runs += 1
            profile.total_seconds += time.perf_counter() - start
        return result

    def _plan_bound(self, inputs: Mapping[str, Any], fetch: Sequence[str]) -> tuple[Plan, dict]:
        """The plan for the symbol values and run-time values these inputs give, and the input
        shapes it expects.

        Symbols first (:mod:`.symbols`), then run-time values (:mod:`.values`): the graph
        specialised for both is compiled once per binding and kept (bounded caches)."""
        from .symbols import MAX_BINDINGS, bind_inputs, specialize

        graph = self._symbolic
        sym_key: tuple = ()
        if graph.symbols:
            values = bind_inputs(graph, inputs)
            sym_key = tuple(sorted(values.items()))
        key: tuple = (sym_key,)
        if self._deferred:
            from .values import bind_values

            if graph.symbols:
                graph = self._value_graphs.get(key) or specialize(graph, values)
                self._value_graphs[key] = graph
            arrays = {spec.name: spec for spec in self.plan.inputs}

            def given(name: str) -> np.ndarray | None:
                if name not in arrays:
                    return None
                return self._check_input(name, arrays[name].dtype, inputs[name], etype=arrays[name].etype)

            graph, key = bind_values(graph, given, lambda g, names, k: self._evaluate(g, names, k, inputs),
                                     self._value_graphs, key)
            self._bound_values = (key, graph)
        key = (key, tuple(fetch))
        plan = self._bound_plans.get(key)
        if plan is None:
            if not self._deferred:
                graph = specialize(self._symbolic, values)
            options = dict(self._compile_options, fold=self._fold)
            backend = self.backend if self.backend in ("fast", "formal") else "fast"
            plan = compile_plan(graph, backend, variables=self._values, fetch=tuple(fetch), **options)
            if len(self._bound_plans) >= MAX_BINDINGS:
                self._bound_plans.clear()
            self._bound_plans[key] = plan
        if not self._symbolic.symbols:
            return plan, self._input_shapes
        shapes = {spec.name: plan.graph.tensors[spec.name].shape for spec in plan.inputs}
        return plan, shapes

    def _engine_for_values(self, inputs: Mapping[str, Any]) -> Any:
        """The engine runner of the graph specialised on this run's values (bound by
        :meth:`_plan_bound`): compiled once per value set, at most ``MAX_VALUE_SETS`` kept."""
        from ..engines import EngineRunner, get
        from .values import MAX_VALUE_SETS, engine_graph

        key, graph = self._bound_values
        runner = self._value_engines.get(key)
        if runner is None:
            shaped = engine_graph(graph, lambda g, names: self._evaluate(g, names, ("engine", key), inputs))
            runner = EngineRunner(get(self.backend), shaped, **self._engine_options)
            if len(self._value_engines) >= MAX_VALUE_SETS:
                self._value_engines.clear()
            self._value_engines[key] = runner
        return runner

    def _evaluate(self, graph: Graph, names: list[str], key: tuple, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The values of tensors ``names`` of ``graph`` for these inputs: the part of the graph
        that computes them, run (its plan kept per ``key``, the values bound so far)."""
        from .values import MAX_VALUE_SETS, prefix_graph

        plan = self._prefix_plans.get(key)
        if plan is None:
            options = dict(self._compile_options, fold=self._fold, check_shapes=False)
            backend = self.backend if self.backend in ("fast", "formal") else "fast"
            plan = compile_plan(prefix_graph(graph, names), backend, variables=self._values, **options)
            if len(self._prefix_plans) >= MAX_VALUE_SETS:
                self._prefix_plans.clear()
            self._prefix_plans[key] = plan
        regs = plan.template.copy()
        for spec in plan.inputs:
            if spec.slot >= 0:
                regs[spec.slot] = self._check_input(spec.name, spec.dtype, inputs[spec.name], etype=spec.etype)
        for var in plan.variables:
            if var.slot >= 0:
                regs[var.slot] = self._state[var.key]
        _execute(plan, regs, None, self.check_numerics)
        return {name: regs[slot] for name, slot, _, _ in plan.outputs}

    def _check_input(self, name: str, dtype: str, value: Any, shapes: Mapping[str, Any] | None = None,
                     etype: str | None = None) -> np.ndarray:
        value = numeric_array(value, f"input '{name}'")
        shape = (shapes or self._input_shapes)[name]
        if shape is not None:
            if value.ndim != len(shape) or any(d is not None and d != v for d, v in zip(shape, value.shape, strict=True)):
                want = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
                raise NNEFXError(f"input '{name}' must have shape {want}, got {list(value.shape)}")
        array = to_storage(value, dtype, self.plan.storage, f"input '{name}'", etype=etype)
        view = array.view()
        view.setflags(write=False)  # kernels must not write into the caller's array
        return view

    def _check_container(self, spec: Any, value: Any) -> Any:
        """A sequence input (list of arrays) or optional input (None or its element), elements in
        the storage of their data type."""
        from ..graph import TensorSequence
        from .subgraphs import check_container

        value = check_container(value, spec.kind, f"input '{spec.name}'")
        if isinstance(value, TensorSequence):
            return TensorSequence(self._check_element(spec, v) for v in value)
        return None if value is None else self._check_element(spec, value)

    def _check_element(self, spec: Any, value: np.ndarray) -> np.ndarray:
        """An element in the sequence's own element type where the graph names one (ONNX
        sequences are typed), else in the storage of its data type."""
        etype = self.plan.graph.tensors[spec.name].etype
        what = f"an element of input '{spec.name}'"
        if etype is not None:
            from .. import etypes

            dtype = etypes.numpy_dtype(etypes.parse(etype))
            kinds = {"scalar": "fV", "integer": "iu", "logical": "b", "string": "OU"}[spec.dtype]
            if value.dtype.kind not in kinds:
                raise NNEFXError(f"{what} must be {spec.dtype} data, got {value.dtype}")
            array = value.astype(dtype, copy=False)
        else:
            array = to_storage(value, spec.dtype, self.plan.storage, what)
        view = array.view()
        view.setflags(write=False)
        return view

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.dtype}{list(i.shape) if i.shape else ''}" for i in self.inputs)
        return f"<Session '{self.plan.graph.name}' ({self.backend}) inputs: {ins}>"


def _container_output(value: Any) -> Any:
    """What :meth:`Session.run` returns for a sequence (a list of arrays) or an optional (None,
    or its element): copies, never state or views of the inputs."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return [np.array(v, copy=True) for v in value]
    return np.array(value, copy=True)


def _shape_arg(name: str, shape: Any) -> tuple:
    """A substitute input shape: a sequence of non-negative ints or None (any extent)."""
    try:
        dims = list(shape)
        result = tuple(None if d is None else int(d) for d in dims)
    except (TypeError, ValueError):
        raise NNEFXError(f"input_shapes['{name}'] must be a sequence of ints or None, got {shape!r}") from None
    if any(d is not None and d < 0 for d in result):
        raise NNEFXError(f"input_shapes['{name}'] has a negative extent: {list(shape)}")
    return result


def _update_where(plan: Plan, upd: Any) -> Any:
    from .planner import _op_location

    return _op_location(upd.op, upd.index, plan.source)


def _execute(plan: Plan, regs: list[Any], profile: Profile | None, check_numerics: bool) -> None:
    """The run loop: nothing here depends on the graph beyond what the plan precomputed.

    NNEF arithmetic may overflow to Inf or produce NaN (``log(-1)``) without being an error,
    so numpy's floating-point warnings are silenced for the whole run.
    """
    with np.errstate(all="ignore"):
        _loop(plan, regs, profile, check_numerics)


def _loop(plan: Plan, regs: list[Any], profile: Profile | None, check_numerics: bool) -> None:
    clock = time.perf_counter
    for step in plan.steps:
        args = [regs[a] if a.__class__ is int else [regs[x] for x in a] for a in step.args]
        if step.finite_inputs:
            _check_finite_args(step, args)
        try:
            if profile is None:
                results = step.kernel(*args, **step.kwargs)
            else:
                t0 = clock()
                results = step.kernel(*args, **step.kwargs)
                profile.add(step.label or step.kind, clock() - t0)
        except NNEFXError as exc:
            loc = exc.location if exc.location is not None and (exc.location.line or exc.location.field) \
                else step.where
            message = exc.message if f"'{step.kind}'" in exc.message else \
                f"in operation '{step.kind}': {exc.message}"
            raise NNEFXError(message, loc) from None
        except MemoryError:
            raise NNEFXError(f"operation '{step.kind}' ran out of memory", step.where) from None
        except Exception as exc:  # a kernel bug or an argument it cannot handle
            raise NNEFXError(f"operation '{step.kind}' failed: {type(exc).__name__}: {exc}", step.where) from None
        outs = step.outs
        if len(outs) == 1 and not (results.__class__ is tuple and len(results) == 1):
            results = (results,)
        elif results.__class__ is not tuple or len(results) != len(outs):
            raise NNEFXError(f"kernel of '{step.kind}' returned the wrong number of results", step.where)
        k = 0
        for slot, value, names in zip(outs, results, step.out_names, strict=True):
            if slot.__class__ is int:
                regs[slot] = _result(step, names, value, k, check_numerics)
                k += 1
            else:
                if not isinstance(value, (list, tuple)) or len(value) != len(slot):
                    raise NNEFXError(f"kernel of '{step.kind}' returned the wrong number of tensors "
                                     f"for '{names[0]}'...", step.where)
                for s, v, n in zip(slot, value, names, strict=True):
                    regs[s] = _result(step, n, v, k, check_numerics)
                    k += 1
        for slot in step.free:
            regs[slot] = None


def _result(step: Any, name: str, value: Any, k: int, check_numerics: bool) -> np.ndarray:
    storage, nnef_dtype = step.out_storage[k]
    shape = step.out_shapes[k]
    if value.__class__ is not np.ndarray or value.dtype != storage or (shape is not None and value.shape != shape):
        value = check_result(step.op, name, value, storage, nnef_dtype, shape, step.where)
    if check_numerics and value.dtype.kind == "f" and not np.isfinite(value).all():
        bad = np.argwhere(~np.isfinite(value))[0]
        raise NNEFXError(f"operation '{step.kind}' produced {value[tuple(bad)]} in '{name}' at index "
                         f"{list(int(i) for i in bad)}", step.where)
    return value


def _check_finite_args(step: Any, args: list[Any]) -> None:
    for position, arg in enumerate(args):
        for a in (arg if isinstance(arg, list) else [arg]):
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                raise NNEFXError(f"operation '{step.kind}' does not accept NaN or Inf, found in its "
                                 f"tensor argument #{position + 1}", step.where)
