"""Running the bodies of control-flow operations: the session's ``call`` hook.

An operation whose declaration lists ``call`` among its ``runtime_keywords`` (ONNX ``If``,
``Loop``, ``Scan``, ``SequenceMap``; tract's ``tract_core_scan``) names its bodies with string
attributes; the bodies are graphs of the enclosing graph's ``subgraphs`` table
(:attr:`nnefx.graph.Graph.subgraphs`).  The planner passes such an operation a
:class:`SubgraphCaller` as ``call``; the kernel runs a body with it as often as it needs:

* ``call(name, inputs)`` — inputs and results as dicts by tensor name (tract's scan);
* ``call.run(name, args)`` — inputs and results as lists in the body's input/output order
  (the ONNX operations: formal parameters, then the captured outer tensors).

Each body is compiled **once per enclosing plan**, on the same backend with the same
options, into a plan of its own (:func:`nnefx.runtime.planner.compile_plan`), before the first
run, so an unsupported operation inside a body is refused when the model is loaded, at its
location.  The body plans are generic in their input shapes: extents the body does not
declare stay unknown, every kernel re-runs its shape rule on the arrays it gets, and no
result shape is compared with a declared one unless the body declares it — so a loop whose
carried values grow, or a sequence whose elements differ in shape, runs through one plan.
A body input is checked against the rank and extents the body declares.

Bounds (files are hostile): bodies nest at most :data:`MAX_DEPTH` deep (a located error when
compiling deeper), and a loop runs at most :data:`MAX_ITERATIONS` iterations per execution
(the kernels raise a located error beyond it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Graph, TensorSequence

#: Deepest nesting of bodies (a body inside a body inside ...) a plan compiles.
MAX_DEPTH = 16
#: Most iterations one execution of a loop (ONNX ``Loop``, ``Scan``, ``SequenceMap``) may run.
MAX_ITERATIONS = 1 << 20


class SubgraphCaller:
    """The ``call`` hook of one plan: its graph's bodies compiled once, run on request."""

    def __init__(self, subgraphs: Mapping[str, Graph], options: dict[str, Any], depth: int, where: Any = None):
        self.subgraphs = subgraphs
        self.options = options
        self.depth = depth
        self.where = where
        self._plans: dict[str, Any] = {}
        self._bound: dict[str, _BoundBody] = {}

    def prepare(self, name: str, where: Any) -> None:
        """Compile body ``name`` now (load time), so its errors are reported before any run."""
        self.plan(name, where)

    def plan(self, name: str, where: Any = None) -> Any:
        plan = self._plans.get(name)
        if plan is not None:
            return plan
        body = self.subgraphs.get(name) if isinstance(name, str) else None
        if body is None:
            known = ", ".join(sorted(self.subgraphs)) or "none"
            raise NNEFXError(f"no body named '{name}' in the graph (bodies: {known})", where or self.where)
        if self.depth + 1 > MAX_DEPTH:
            raise NNEFXError(f"bodies nest more than {MAX_DEPTH} deep", where or self.where)
        from .planner import compile_plan
        from .values import description_graph, has_deferred

        if has_deferred(body):
            # nodes whose parameters the body computes (a Slice bound by the iteration number):
            # this plan only describes the body; each run binds the values (:class:`_BoundBody`)
            plan = compile_plan(description_graph(body), depth=self.depth + 1, check_shapes=True,
                                **dict(self.options, fold=False))
            self._bound[name] = _BoundBody(body, self.options, self.depth + 1)
        else:
            plan = compile_plan(body, depth=self.depth + 1, check_shapes=True, **self.options)
        self._plans[name] = plan
        return plan

    def signature(self, name: str) -> tuple[list[str], list[str]]:
        """The body's input and output names, in order."""
        plan = self.plan(name)
        return [s.name for s in plan.inputs], [o[0] for o in plan.outputs]

    def run(self, name: str, args: Sequence[Any]) -> list[Any]:
        """Run body ``name`` on ``args`` (one per body input, in order); its outputs, in order."""
        plan = self.plan(name)
        if len(args) != len(plan.inputs):
            raise NNEFXError(f"body '{name}' takes {len(plan.inputs)} inputs, got {len(args)}")
        tensors = self.subgraphs[name].tensors
        checked = {spec.name: _check_input(name, spec, value, tensors[spec.name].shape if spec.name in tensors
                                           else spec.shape)
                   for spec, value in zip(plan.inputs, args, strict=True)}
        bound = self._bound.get(name)
        if bound is not None:
            plan = bound.plan(checked)
        regs = plan.template.copy()
        for spec in plan.inputs:
            if spec.slot >= 0:
                regs[spec.slot] = checked[spec.name]
        from .session import _execute

        _execute(plan, regs, None, False)
        return [regs[slot] for _, slot, _, _ in plan.outputs]

    def __call__(self, name: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Run body ``name`` with inputs by name; its outputs by name."""
        ins, outs = self.signature(name)
        missing = [n for n in ins if n not in inputs]
        if missing:
            raise NNEFXError(f"body '{name}' needs input{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(repr(m) for m in missing)}")
        return dict(zip(outs, self.run(name, [inputs[n] for n in ins]), strict=True))


class _BoundBody:
    """A body with deferred operations (:mod:`nnefx.runtime.values`), as the session binds a
    graph's: per call, the values its deferred operations need are read from the body's
    inputs or computed by the part of the body that gives them, and the body specialised on
    them is compiled once per value set (at most :data:`~nnefx.runtime.values.MAX_VALUE_SETS`
    kept; a loop whose iterations bind other values compiles a plan per distinct value set)."""

    def __init__(self, body: Graph, options: dict[str, Any], depth: int):
        self.body, self.options, self.depth = body, options, depth
        self._graphs: dict[tuple, Graph] = {}
        self._plans: dict[tuple, Any] = {}
        self._prefix_plans: dict[tuple, Any] = {}

    def _compile(self, graph: Graph, cache: dict[tuple, Any], key: tuple, **extra: Any) -> Any:
        from .planner import compile_plan
        from .values import MAX_VALUE_SETS

        plan = cache.get(key)
        if plan is None:
            plan = compile_plan(graph, depth=self.depth, **dict(self.options, **extra))
            if len(cache) >= MAX_VALUE_SETS:
                cache.clear()
            cache[key] = plan
        return plan

    def plan(self, inputs: Mapping[str, Any]) -> Any:
        """The plan of the body bound for these (checked) inputs."""
        from .values import bind_values, prefix_graph

        def evaluate(graph: Graph, names: list[str], key: tuple) -> dict[str, Any]:
            plan = self._compile(prefix_graph(graph, names), self._prefix_plans, key, check_shapes=False)
            return _run_plan(plan, inputs)

        graph, key = bind_values(self.body, inputs.get, evaluate, self._graphs)
        return self._compile(graph, self._plans, key, check_shapes=True)


def _run_plan(plan: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    from .session import _execute

    regs = plan.template.copy()
    for spec in plan.inputs:
        if spec.slot >= 0:
            regs[spec.slot] = inputs[spec.name]
    _execute(plan, regs, None, False)
    return {name: regs[slot] for name, slot, _, _ in plan.outputs}


def _check_input(body: str, spec: Any, value: Any, shape: Any) -> Any:
    """A body input as its plan expects it: the declared kind, and the rank and extents the
    body declares (``shape``; None: not even the rank, as for an outer tensor of unknown rank
    the body reads — its ``external``'s placeholder shape says nothing)."""
    kind = getattr(spec, "kind", "tensor")
    if kind != "tensor":
        return check_container(value, kind, f"input '{spec.name}' of body '{body}'")
    if isinstance(value, TensorSequence) or value is None:
        raise NNEFXError(f"input '{spec.name}' of body '{body}' is a tensor; got "
                         f"{'an empty optional' if value is None else 'a sequence'}")
    value = np.asarray(value)
    if shape is not None and (value.ndim != len(shape) or
                              any(d is not None and d != v for d, v in zip(shape, value.shape, strict=True))):
        want = "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
        raise NNEFXError(f"input '{spec.name}' of body '{body}' is declared with shape {want}, got "
                         f"{list(value.shape)}")
    return value


def check_container(value: Any, kind: str, what: str) -> Any:
    """``value`` as the run-time form of a ``kind`` value (:data:`nnefx.graph.KINDS`), or a
    clear error: sequences are :class:`TensorSequence` of arrays, optionals ``None`` or the
    element."""
    if kind == "sequence":
        if isinstance(value, TensorSequence):
            return value
        if isinstance(value, (list, tuple)):
            return TensorSequence(numeric_array(v, what) for v in value)
        raise NNEFXError(f"{what} must be a sequence (a list of arrays), got {type(value).__name__}")
    if kind == "optional":
        if value is None:
            return None
        if isinstance(value, (TensorSequence, list, tuple)):
            raise NNEFXError(f"{what} must be an optional tensor (None or an array), got a sequence")
        return numeric_array(value, what)
    if kind == "optional_sequence":
        return None if value is None else check_container(value, "sequence", what)
    return numeric_array(value, what)


def numeric_array(value: Any, what: str) -> np.ndarray:
    """``value`` as a numeric array (or an array of ``str``: a string tensor's), or an error naming
    ``what`` (a Session input, a body input, a sequence element)."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value  # numbers, bools, or numpy str_ items (turned into str by to_storage)
    if isinstance(value, TensorSequence) or value is None:
        raise NNEFXError(f"{what} must be a tensor, got {'a sequence' if value is not None else 'None'}")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise NNEFXError(f"{what} is not array-like ({exc})") from None
    if array.dtype == object and not all(isinstance(v, str) for v in array.flat):  # str items: a string tensor
        raise NNEFXError(f"{what} is not a numeric or string array")
    return array
