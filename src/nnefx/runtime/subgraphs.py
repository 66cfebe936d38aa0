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

A body with deferred operations (nodes whose parameters or extents the body computes: a
``Slice`` bounded by the iteration number) runs in stages (:class:`_StagedBody`): the
operations between the deferred ones are compiled once, and each deferred operation is built,
as a call reaches it, on the values and shapes that call gave its inputs — a small plan per
value set, kept (:data:`MAX_NODE_PLANS`), so a loop binding other values every iteration
neither recompiles the whole body nor runs part of it twice.

Bounds (files are hostile): bodies nest at most :data:`MAX_DEPTH` deep (a located error when
compiling deeper), and a loop runs at most :data:`MAX_ITERATIONS` iterations per execution
(the kernels raise a located error beyond it).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Graph, TensorSequence, ValueNeeded

#: Deepest nesting of bodies (a body inside a body inside ...) a plan compiles.
MAX_DEPTH = 16
#: Most iterations one execution of a loop (ONNX ``Loop``, ``Scan``, ``SequenceMap``) may run.
MAX_ITERATIONS = 1 << 20
#: Plans kept per deferred operation of a body, one per value set and input shapes (a loop may
#: bind other values every iteration: each such plan holds only the node's few operations).
MAX_NODE_PLANS = 256


class SubgraphCaller:
    """The ``call`` hook of one plan: its graph's bodies compiled once, run on request."""

    def __init__(self, subgraphs: Mapping[str, Graph], options: dict[str, Any], depth: int, where: Any = None):
        self.subgraphs = subgraphs
        self.options = options
        self.depth = depth
        self.where = where
        self._plans: dict[str, Any] = {}
        self._bound: dict[str, _StagedBody] = {}

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
            # this plan only describes the body; it runs in stages that bind the values (:class:`_StagedBody`)
            plan = compile_plan(description_graph(body), depth=self.depth + 1, check_shapes=True,
                                **dict(self.options, fold=False))
            self._bound[name] = _StagedBody(body, self.options, self.depth + 1)
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
            return bound.run(checked)
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


class _StagedBody:
    """A body with deferred operations (:mod:`nnefx.runtime.values`), run in stages.

    The body is cut at its deferred operations: the runs of ordinary operations between them
    are compiled once, at load, into plans generic in their input shapes (as every body
    plan is); each deferred operation is built when a call reaches it, from the values and
    shapes of its inputs *as that call computed them* (no part of the body runs twice to find
    them), into a plan of its own few operations, kept per value set and input shapes (at most
    :data:`MAX_NODE_PLANS` per node, least recently used dropped first).  A loop whose every
    iteration binds other values (a ``Slice`` bounded by the iteration number) thus compiles
    only that node's operations per iteration, not the whole body."""

    def __init__(self, body: Graph, options: dict[str, Any], depth: int):
        from ..graph import DEFERRED

        self.body, self.options, self.depth = body, options, depth
        ops = [op for op in body.operations if op.op != "external"]
        later: set[str] = set(body.outputs)  # what the operations after a point (or the outputs) read
        needed: list[set[str]] = [set() for _ in ops]
        for k in range(len(ops) - 1, -1, -1):
            needed[k] = set(later)
            later.update(ops[k].input_names())
        self.stages: list[tuple[str, Any, list[str], list[str]]] = []
        run: list[int] = []
        for k, op in enumerate(ops + [None]):
            if op is not None and op.op != DEFERRED:
                run.append(k)
                continue
            if run:
                self.stages.append(self._segment([ops[i] for i in run], needed[run[-1]]))
                run = []
            if op is not None:
                self.stages.append(("node", op, list(dict.fromkeys(op.input_names())), op.output_names()))
        self._plans: dict[int, OrderedDict[tuple, Any]] = {}

    def _segment(self, ops: list[Any], later: set[str]) -> tuple[str, Any, list[str], list[str]]:
        """A run of ordinary operations as a plan: its inputs are the tensors it reads that it
        does not compute, its outputs those it computes that later operations read."""
        from ..graph import Operation
        from .planner import compile_plan

        made = {n for op in ops for n in op.output_names()}
        inputs = list(dict.fromkeys(n for op in ops for n in op.input_names() if n not in made))
        outputs = [n for op in ops for n in op.output_names() if n in later]
        tensors = self.body.tensors
        externals = [Operation("external", {}, {"output": n},
                               {"shape": [1 if d is None else d for d in tensors[n].shape or ()]},
                               dtype=tensors[n].dtype) for n in inputs]
        graph = dataclasses.replace(self.body, inputs=inputs, outputs=outputs, operations=externals + ops)
        plan = compile_plan(graph, depth=self.depth, check_shapes=True, **self.options)
        return ("plan", plan, inputs, outputs)

    def run(self, inputs: Mapping[str, Any]) -> list[Any]:
        """The body's outputs for these (checked) inputs."""
        env = dict(inputs)
        for k, (kind, what, ins, outs) in enumerate(self.stages):
            plan = what if kind == "plan" else self._node_plan(k, what, env)
            results = _run_plan(plan, {n: env[n] for n in ins})
            env.update((n, results[n]) for n in outs if n in results)
        return [env[n] for n in self.body.outputs]

    def _node_plan(self, k: int, op: Any, env: Mapping[str, Any]) -> Any:
        """The plan of deferred operation ``op`` (stage ``k``) built for the values and shapes
        its inputs have in ``env``."""
        from .values import fingerprint, node_of

        node = node_of(op)
        names = list(dict.fromkeys(op.input_names()))
        # the extents of the inputs it was deferred for (others: built as generic as the body)
        shapes = tuple((n, np.shape(env[n])) for n in node.shapes if isinstance(env.get(n), np.ndarray))
        cache = self._plans.setdefault(k, OrderedDict())
        while True:
            key = (shapes, tuple(_digest(fingerprint(n, env[n], op)) for n in node.values))
            plan = cache.get(key)
            if plan is not None:
                cache.move_to_end(key)
                return plan
            try:
                plan = self._build(op, node, names, env)
            except ValueNeeded as need:
                # the build asks for the value of another of its inputs (kept for later calls)
                if need.tensor in names and need.tensor not in node.values:
                    node.values.append(need.tensor)
                    continue
                raise NNEFXError(need.message, need.location) from None
            if len(cache) >= MAX_NODE_PLANS:
                cache.popitem(last=False)
            cache[key] = plan
            return plan

    def _build(self, op: Any, node: Any, names: list[str], env: Mapping[str, Any]) -> Any:
        from ..graph import Graph, Operation
        from .planner import compile_plan

        tensors = {}
        externals = []
        for n in names:
            t = self.body.tensors[n]
            if n in node.shapes and t.kind == "tensor" and isinstance(env[n], np.ndarray):
                t = dataclasses.replace(t, shape=tuple(env[n].shape))
            tensors[n] = t
            externals.append(Operation("external", {}, {"output": n},
                                       {"shape": [1 if d is None else d for d in t.shape or ()]}, dtype=t.dtype))
        for n in op.output_names():
            tensors[n] = dataclasses.replace(self.body.tensors[n])
        graph = Graph(self.body.name, inputs=list(names), outputs=op.output_names(), tensors=tensors,
                      operations=externals, subgraphs=self.body.subgraphs)
        graph.operations = externals + node.build(graph, {n: env[n] for n in node.values})
        return compile_plan(graph, depth=self.depth, check_shapes=True, **self.options)


def _digest(fingerprint: tuple) -> tuple:
    """A value's cache-key entry with its bytes as a 128-bit BLAKE2 digest: a node's many kept
    plans do not keep up to :data:`~nnefx.runtime.values.MAX_VALUE_ITEMS` items each alive."""
    *head, data = fingerprint
    return (*head, hashlib.blake2b(data, digest_size=16).digest())


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
