"""Run-time values: graphs specialised on the values of tensors computed while they run.

A node whose parameters arrive as tensors (ONNX ``Resize`` scales, ``Slice`` starts,
``ReduceSum`` axes, ...) is a :class:`~nnefx.graph.Deferred` operation in the graph when the
values are not known at load (when they are, the reader folds them as always).  Like a
symbolic extent (:mod:`nnefx.runtime.symbols`), such a value is *bound* when a session
runs: :func:`bind_values` reads the values the deferred operations need — straight from the
inputs, or by running the part of the graph that computes them (a plan cached per value
set) — and writes each deferred operation as its ordinary registry operations, built for
those values (:func:`specialize_values`; shapes become concrete).  Deferred operations whose
values depend on another's results are bound in later rounds.  The session compiles the
result like any graph and keeps one plan per value set (:data:`MAX_VALUE_SETS`).

Until bound, the graph is *described* (inputs, outputs, variables, the ``Session``
properties) by :func:`description_graph`, whose deferred results are placeholders: that
plan is never run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import DEFERRED, Deferred, Graph, Operation, ValueNeeded, reachable_operations

#: specialised graphs (and plans) kept per session, one per distinct set of run-time values
MAX_VALUE_SETS = 16
#: most items a run-time parameter may have (its bytes are part of the cache key)
MAX_VALUE_ITEMS = 1 << 16

#: a cache key: per round, the (tensor, dtype, shape, bytes) of each value bound
Key = tuple


def has_deferred(graph: Graph) -> bool:
    return any(op.op == DEFERRED for op in graph.operations)


def node_of(op: Operation) -> Deferred:
    return op.attribs["node"]


def description_graph(graph: Graph) -> Graph:
    """``graph`` with each deferred operation replaced by placeholder ``constant``\\ s for its
    results (rank 0, zero): a plan of it names the inputs, outputs and variables, and is
    never run."""
    ops: list[Operation] = []
    for op in graph.operations:
        if op.op != DEFERRED:
            ops.append(op)
            continue
        for name in op.output_names():
            dtype = graph.tensors[name].dtype
            zero = {"scalar": 0.0, "integer": 0, "logical": False}.get(dtype, 0.0)
            ops.append(Operation("constant", {}, {"output": name}, {"shape": [], "value": [zero]}, dtype=dtype,
                                 location=op.location))
    return dataclasses.replace(graph, operations=ops)


def ready_operations(graph: Graph) -> list[Operation]:
    """The deferred operations whose values no deferred operation computes (bound in this round)."""
    downstream: set[str] = set()
    ready = []
    for op in graph.operations:
        if op.op == DEFERRED:
            node = node_of(op)
            if not any(n in downstream for n in node.values + node.shapes):
                ready.append(op)
            downstream.update(op.output_names())
        elif any(n in downstream for n in op.input_names()):
            downstream.update(op.output_names())
    return ready


def prefix_graph(graph: Graph, names: Sequence[str]) -> Graph:
    """The operations of ``graph`` that compute ``names`` (and every ``external``), with
    ``names`` as the outputs: what runs to find a round's values."""
    producers = {}
    for i, op in enumerate(graph.operations):
        if op.op != "update":
            for n in op.output_names():
                producers[n] = i
    keep: set[int] = set()
    todo = [n for n in names if n in producers]
    while todo:
        i = producers[todo.pop()]
        if i in keep:
            continue
        keep.add(i)
        todo.extend(n for n in graph.operations[i].input_names() if n in producers)
    ops = [op for i, op in enumerate(graph.operations) if i in keep or op.op == "external"]
    return dataclasses.replace(graph, outputs=list(names), operations=ops)


def fingerprint(name: str, value: np.ndarray, op: Operation) -> tuple:
    """What identifies ``value`` in a cache key (refused beyond :data:`MAX_VALUE_ITEMS`)."""
    a = np.ascontiguousarray(value)
    if a.size > MAX_VALUE_ITEMS:
        node = node_of(op)
        raise NNEFXError(f"{node.kind}: the run-time value '{name}' has {a.size} items (at most {MAX_VALUE_ITEMS} "
                         "are bound as parameters)", op.location)
    return (name, a.dtype.str, a.shape, a.tobytes())


def specialize_values(graph: Graph, ready: Sequence[Operation], values: Mapping[str, np.ndarray],
                      shapes: Mapping[str, tuple[int, ...]] | None = None) -> Graph:
    """A copy of ``graph`` with each of the ``ready`` deferred operations built for ``values``,
    the tensors of ``shapes`` (whose extents only this run told) declared with those shapes."""
    chosen = {id(op) for op in ready}
    new = dataclasses.replace(graph, tensors=dict(graph.tensors))
    for name, shape in (shapes or {}).items():
        new.tensors[name] = dataclasses.replace(new.tensors[name], shape=tuple(int(d) for d in shape))
    ops: list[Operation] = []
    for op in graph.operations:
        if id(op) in chosen:
            node = node_of(op)
            try:
                ops.extend(node.build(new, {n: values[n] for n in node.values}))
            except ValueNeeded as need:
                need.deferred = op  # type: ignore[attr-defined]
                raise
        else:
            ops.append(op)
    new.operations = ops
    return new


Evaluate = Callable[[Graph, list[str], Key], dict[str, np.ndarray]]


def bind_values(graph: Graph, given: Callable[[str], np.ndarray | None], evaluate: Evaluate,
                cache: dict[Key, Graph], base: Key = ()) -> tuple[Graph, Key]:
    """``graph`` with every deferred operation built for the values this run gives, and the
    key of that value set.

    ``given(name)`` is an input's array (None for a tensor that is not an input);
    ``evaluate(graph, names, key)`` computes other tensors (the caller caches its plan per
    ``key``); ``cache`` keeps specialised graphs per key (bounded by :data:`MAX_VALUE_SETS`),
    ``base`` prefixes the keys (the binding of the graph's symbols).
    """
    key: Key = base
    rounds = 0
    while True:
        ready = ready_operations(graph)
        if not ready:
            return graph, key
        rounds += 1
        if rounds > len(graph.operations) + 8:  # each round binds at least one operation or asks for a value
            raise NNEFXError(f"internal: run-time values of {node_of(ready[0]).kind} never settle", ready[0].location)
        names = list(dict.fromkeys(n for op in ready for n in node_of(op).values))
        # tensors whose extents a build needs and only a run tells (a body input, what a
        # Range or a Reshape to a computed shape gives): measured on this run's arrays
        measured = [n for n in dict.fromkeys(n for op in ready for n in node_of(op).shapes)
                    if not _known(graph.tensors[n].shape)]
        vals: dict[str, np.ndarray] = {}
        rest = []
        for n in dict.fromkeys(names + measured):
            a = given(n)
            if a is None:
                rest.append(n)
            else:
                vals[n] = a
        if rest:
            vals.update(evaluate(graph, rest, key + (tuple(rest),)))
        shapes = {n: tuple(np.shape(vals[n])) for n in measured}
        owner = {n: op for op in ready for n in node_of(op).values}
        round_key = key + (tuple(fingerprint(n, vals[n], owner[n]) for n in names), tuple(shapes.items()))
        hit = cache.get(round_key)
        if hit is None:
            try:
                hit = specialize_values(graph, ready, vals, shapes)
            except ValueNeeded as need:
                _ask_for(need)
                continue
            if len(cache) >= MAX_VALUE_SETS:
                cache.clear()
            cache[round_key] = hit
        graph, key = hit, round_key


def engine_graph(graph: Graph, evaluate: Callable[[Graph, list[str]], dict[str, np.ndarray]]) -> Graph:
    """A graph bound on its run-time values as an engine takes it: what no input value changes
    any more — constants, what is computed from them, and the shapes of tensors whose shape
    the binding made known — written as constants (computed by ``evaluate``, which runs the
    part of the graph that gives them), shapes inferred again.  Engines whose exporters need
    load-time parameters (IR, torch) then see what a file with those values would have given.
    Shapes are inferred from the declared input shapes, so nothing folded depends on an extent
    a run could change."""
    from ..graph import Tensor
    from ..ops import registry
    from ..semantics.shapes import infer_shapes

    def reshaped(g: Graph) -> Graph:
        keep = {n for op in g.operations if op.op in ("variable", "constant", "external") for n in op.output_names()}
        g.tensors = {n: t if n in keep else Tensor(t.name, t.dtype, None, t.data, t.quant, t.etype, kind=t.kind)
                     for n, t in g.tensors.items()}
        return infer_shapes(g)

    g = reshaped(dataclasses.replace(graph, tensors=dict(graph.tensors), operations=list(graph.operations)))
    known: set[str] = set()
    for op in g.operations:
        if op.op in ("external", "variable", "update"):
            continue
        if op.op == "tensor_shape":
            t = g.tensors[op.inputs["input"]]
            if t.shape is not None and all(isinstance(d, int) for d in t.shape):
                known.update(op.output_names())
            continue
        entry = registry.find(op.op)
        if entry is None or entry.extra.get("stateful") or entry.extra.get("runtime_keywords"):
            continue
        if all(n in known for n in op.input_names()):
            known.update(op.output_names())
    wanted = [n for op in g.operations if op.op != "constant" and not set(op.output_names()) <= known
              for n in op.input_names() if n in known]
    wanted += [n for n in g.outputs if n in known]
    wanted = [n for n in dict.fromkeys(wanted) if g.tensors[n].kind == "tensor" and not _large(g.tensors[n].shape)]
    if not wanted:
        return g
    values = evaluate(g, wanted)
    producers = {n: i for i, op in enumerate(g.operations) for n in op.output_names()}
    ops = list(g.operations)
    for name in wanted:
        a = np.asarray(values[name])
        if a.size > MAX_VALUE_ITEMS or len(ops[producers[name]].output_names()) != 1:
            continue  # left to the engine
        t = g.tensors[name]
        ops[producers[name]] = Operation("constant", {}, {"output": name},
                                         {"shape": list(a.shape), "value": a.reshape(-1).tolist()},
                                         dtype=t.dtype, location=ops[producers[name]].location)
        g.tensors[name] = Tensor(name, t.dtype, tuple(a.shape), a, t.quant, t.etype)
    g.operations = _reachable(g, ops)
    return reshaped(g)


def _known(shape: Any) -> bool:
    """Whether ``shape`` is concrete: a rank and every extent an integer."""
    return shape is not None and all(isinstance(d, (int, np.integer)) for d in shape)


def _large(shape: Any) -> bool:
    """Whether a tensor of ``shape`` is known to be too large to become a constant."""
    return shape is not None and all(isinstance(d, int) for d in shape) and \
        int(np.prod(shape, dtype=np.int64)) > MAX_VALUE_ITEMS


def _reachable(graph: Graph, ops: list[Operation]) -> list[Operation]:
    """``ops`` that the outputs and updates need (and every ``external``), in order."""
    need = reachable_operations(dataclasses.replace(graph, operations=ops), keep_updates=True)
    return [op for i, op in enumerate(ops) if i in need or op.op == "external"]


def _ask_for(need: ValueNeeded) -> None:
    """A build asked for the value of another of its inputs: remember it (for this run and the
    next); anything else it cannot have is its refusal."""
    name, op = need.tensor, getattr(need, "deferred", None)
    if op is not None and name is not None and name in op.input_names() and name not in node_of(op).values:
        node_of(op).values.append(name)
        return
    raise NNEFXError(need.message, need.location)


__all__ = ["MAX_VALUE_ITEMS", "MAX_VALUE_SETS", "bind_values", "description_graph", "has_deferred",
           "prefix_graph", "ready_operations", "specialize_values"]

