"""What every engine backend shares: a stateless graph per input shape, built through an exporter.

An engine (onnxruntime, OpenVINO, torch) runs a *pure function* of its inputs, compiled for
fixed input shapes.  NNEF graphs may have state (variables an ``update`` changes between
runs) and a :class:`~nnefx.runtime.session.Session` may accept several input shapes, so:

* :func:`stateless_graph` turns every updated variable into an extra input (its current
  value) and every ``update`` into an extra output (the new value); the Session keeps the
  state between steps exactly as it does for the numpy backends;
* :class:`EngineRunner` compiles one engine model per concrete set of input shapes (shapes
  re-inferred through the registry's shape rules) and keeps them (a few), so a job that
  alternates two batch sizes compiles twice, not every run.

Engines say what they cannot run *before* compiling (:meth:`Engine.problems`): each
operation the exporter has no exact form for, with its position, so ``nnefx query`` can list
them all rather than the first.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Model, Operation, Tensor
from .loaded import MAX_THREADS, contiguous  # noqa: F401 - shared with the loaded models

#: Prefixes of the names the stateless form gives state inputs and outputs.
STATE_IN = "nnefx_state_in__"
STATE_OUT = "nnefx_state_out__"
#: Compiled shape variants kept per runner.
MAX_VARIANTS = 4


@dataclass(frozen=True)
class Problem:
    """One reason an engine cannot run a graph: the operation, where it is, and why."""

    operation: str
    location: Location | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location is not None and str(self.location) else ""
        return f"{where}{self.operation}: {self.reason}"


@dataclass
class StatelessGraph:
    """A graph whose state travels as inputs/outputs, with the names to feed and read."""

    graph: Graph
    #: variable key (lower-case label) -> (state input name, state output name)
    state: dict[str, tuple[str, str]] = field(default_factory=dict)


def variable_key(op: Operation, tensor: str) -> str:
    return str(op.attribs.get("label", tensor)).lower()


def stateless_graph(graph: Graph) -> StatelessGraph:
    """``graph`` with updated variables as inputs and their updates as outputs (a new graph)."""
    updates = [op for op in graph.operations if op.op == "update"]
    if not updates:
        return StatelessGraph(graph)
    updated = {op.inputs["variable"]: op for op in updates}
    g = copy.copy(graph)
    g.tensors = dict(graph.tensors)
    g.inputs = list(graph.inputs)
    g.outputs = list(graph.outputs)
    ops: list[Operation] = []
    state: dict[str, tuple[str, str]] = {}
    for op in graph.operations:
        if op.op == "update":
            continue
        if op.op == "variable" and op.output_names()[0] in updated:
            name = op.output_names()[0]
            t = graph.tensors[name]
            key = variable_key(op, name)
            new_in = STATE_IN + _safe(name)
            new_out = STATE_OUT + _safe(name)
            g.tensors[new_in] = Tensor(new_in, t.dtype, t.shape, etype=t.etype)
            ops.append(Operation("external", outputs={"output": new_in},
                                 attribs={"shape": list(t.shape or ())}, dtype=t.dtype, location=op.location))
            ops.append(Operation("copy", inputs={"x": new_in}, outputs={"y": name}, dtype=t.dtype,
                                 location=op.location))
            g.tensors[new_out] = Tensor(new_out, t.dtype, t.shape, etype=t.etype)
            state[key] = (new_in, new_out)
            g.inputs.append(new_in)
            g.outputs.append(new_out)
            continue
        ops.append(op)
    # The update values are read after the whole cycle: copy each to its state output at the end.
    for name, upd in updated.items():
        key = variable_key(_variable_op(graph, name), name)
        ops.append(Operation("copy", inputs={"x": upd.inputs["value"]}, outputs={"y": state[key][1]},
                             dtype=graph.tensors[name].dtype, location=upd.location))
    g.operations = ops
    return StatelessGraph(g, state)


def _variable_op(graph: Graph, name: str) -> Operation:
    for op in graph.operations:
        if op.op == "variable" and op.output_names()[0] == name:
            return op
    raise NNEFXError(f"'update' of '{name}', which is not a variable")


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def with_input_shapes(graph: Graph, shapes: Mapping[str, tuple]) -> Graph:
    """A copy of ``graph`` whose inputs have ``shapes``, every other shape inferred again."""
    from ..semantics.shapes import infer_shapes

    declared = {n: graph.tensors[n].shape for n in graph.inputs}
    if all(declared[n] is not None and tuple(declared[n]) == tuple(s) for n, s in shapes.items()):
        return graph
    g = copy.copy(graph)
    keep = set()
    for op in graph.operations:
        if op.op in ("variable", "constant"):
            keep.update(op.output_names())
    g.tensors = {n: (t if n in keep else Tensor(t.name, t.dtype, None, t.data, t.quant, t.etype))
                 for n, t in graph.tensors.items()}
    g.operations = [copy.copy(op) for op in graph.operations]
    for op in g.operations:
        if op.op == "external" and op.output_names()[0] in shapes:
            op.attribs = {**op.attribs, "shape": [int(d) for d in shapes[op.output_names()[0]]]}
    infer_shapes(g, {n: tuple(s) for n, s in shapes.items() if n in g.inputs})
    return g


class Engine:
    """One engine backend: availability, what stops it, and how to build a runner."""

    name = ""
    #: The ``pip install nnefx[EXTRA]`` that brings the engine.
    extra = ""
    #: The format an engine model is exported to (for messages).
    via = ""

    def available(self) -> bool:
        try:
            self.module()
        except NNEFXError:
            return False
        return True

    def module(self) -> Any:
        raise NotImplementedError

    def version(self) -> str:
        return str(getattr(self.module(), "__version__", "?"))

    def require(self) -> Any:
        return self.module()

    def _import(self, name: str) -> Any:
        from .loaded import import_package

        return import_package(self.name, name, self.extra)

    def problems(self, graph: Graph) -> list[Problem]:
        """Every operation of ``graph`` this engine cannot run, with the reason (empty: it can)."""
        raise NotImplementedError

    def compile(self, graph: Graph, *, threads: int, precision: str, device: str) -> Any:
        """An engine model for ``graph`` (stateless, shapes known): a callable inputs -> outputs."""
        raise NotImplementedError


def exporter_problems(graph: Graph, save: Any, suffix: str, fmt: str) -> list[Problem]:
    """Try the exporter on each operation alone, so that *every* refusal is listed.

    The whole graph is tried first (the common case: it exports, no problem); only when it
    fails is each operation exported in a one-operation graph of its own.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nnefx-query-") as tmp:
        try:
            save(Model(graph), os.path.join(tmp, "model" + suffix))
            return []
        except NNEFXError as whole:
            first = whole
        found: list[Problem] = []
        for op in graph.operations:
            if op.op in ("external", "variable", "constant", "copy"):
                continue
            try:
                save(Model(_isolate(graph, op)), os.path.join(tmp, "op" + suffix))
            except NNEFXError as exc:
                found.append(Problem(op.op, op.location, _reason(exc.message, fmt)))
        if not found:
            found.append(Problem("graph", first.location, _reason(first.message, fmt)))
        return found


def _isolate(graph: Graph, op: Operation) -> Graph:
    """``op`` alone: its weights as they are, its other tensor inputs as externals."""
    producers = graph.producers()
    sub = Graph(name=graph.name)
    for name in dict.fromkeys(op.input_names()):
        t = graph.tensors[name]
        sub.tensors[name] = t
        source = producers.get(name)
        if source is not None and source.op in ("variable", "constant"):
            sub.operations.append(source)
            continue
        sub.operations.append(Operation("external", outputs={"output": name},
                                        attribs={"shape": list(t.shape or ())}, dtype=t.dtype))
        sub.inputs.append(name)
    sub.operations.append(op)
    for name in op.output_names():
        sub.tensors[name] = graph.tensors[name]
        sub.outputs.append(name)
    return sub


def _reason(message: str, fmt: str) -> str:
    prefix = "cannot write operation "
    if message.startswith(prefix) and ":" in message:
        return message.split(":", 1)[1].strip() + f" (no exact {fmt} form)"
    return message


class EngineRunner:
    """A stateless graph compiled by an engine, one variant per concrete input shapes."""

    def __init__(self, engine: Engine, graph: Graph, *, threads: int | None = None, precision: str = "f32",
                 device: str = "cpu"):
        self.engine = engine
        engine.require()
        self.stateless = stateless_graph(graph)
        if threads is not None and not 1 <= threads <= MAX_THREADS:
            raise NNEFXError(f"threads must be from 1 to {MAX_THREADS}, got {threads}")
        self.threads = threads or os.cpu_count() or 1
        self.precision = precision
        self.device = device
        self._variants: dict[tuple, Any] = {}
        g = self.stateless.graph
        shapes = {n: g.tensors[n].shape for n in g.inputs}
        if all(s is not None and None not in s for s in shapes.values()):
            # Compile the declared shapes now: a graph the engine cannot run fails here, before
            # any run, with the exporter's located message (and nothing is exported twice).
            feeds = {n: np.empty(shapes[n], np.uint8) for n in g.inputs}
            check_bounds(g)  # a bound of nnefx's, not a gap in the engine: no pointer to nnefx query
            try:
                self._compiled(g, feeds, self._variants)
            except NNEFXError as exc:
                raise NNEFXError(f"backend '{engine.name}' cannot run this graph: {exc.message} "
                                 "(nnefx query lists every operation that stops it)", exc.location) from None
            return
        problems = engine.problems(g)
        if problems:
            raise NNEFXError(f"backend '{engine.name}' cannot run this graph: {problems[0]}"
                             + (f" (and {len(problems) - 1} more; see nnefx query)" if len(problems) > 1 else ""),
                             problems[0].location)

    def _feeds(self, inputs: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = dict(inputs)
        for key, (state_in, _) in self.stateless.state.items():
            feeds[state_in] = state[key]
        return feeds

    def _compiled(self, graph: Graph, feeds: Mapping[str, np.ndarray], cache: dict, tag: str = "") -> Any:
        signature = (tag,) + tuple((n, tuple(feeds[n].shape)) for n in graph.inputs)
        compiled = cache.get(signature)
        if compiled is None:
            shaped = with_input_shapes(graph, {n: tuple(feeds[n].shape) for n in graph.inputs})
            check_bounds(shaped)
            compiled = self.engine.compile(shaped, threads=self.threads, precision=self.precision,
                                           device=self.device)
            if len(cache) >= MAX_VARIANTS:
                cache.pop(next(iter(cache)))
            cache[signature] = compiled
        return compiled

    def trace(self, inputs: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every tensor the graph computes, by name, as the engine computes it (for diagnosis:
        a variant whose outputs are all intermediate tensors, compiled on demand)."""
        g = self.stateless.graph
        produced = [n for op in g.operations if op.op not in ("external", "variable", "constant")
                    for n in op.output_names()]
        wide = copy.copy(g)
        wide.outputs = list(dict.fromkeys(produced))
        feeds = self._feeds(inputs, state)
        return self._compiled(wide, feeds, {}, "trace")({n: feeds[n] for n in g.inputs})

    def __call__(self, inputs: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray]
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Outputs by graph output name and new values by variable key."""
        feeds = self._feeds(inputs, state)
        g = self.stateless.graph
        compiled = self._compiled(g, feeds, self._variants)
        try:
            results = compiled({n: feeds[n] for n in g.inputs})
        except NNEFXError:
            raise
        except Exception as exc:  # noqa: BLE001 - each engine raises its own types (RuntimeError, ORT's)
            raise engine_failure(self.engine.name, exc) from None
        outputs = {n: results[n] for n in g.outputs if not n.startswith(STATE_OUT)}
        new_state = {key: results[out] for key, (_, out) in self.stateless.state.items()}
        return outputs, new_state


def check_bounds(graph: Graph) -> None:
    """Refuse, before an engine allocates or runs anything, what the numpy backends refuse by
    their bounds: a tensor larger than the registry contract's bound (an engine asked for
    terabytes fails in its own words, or, where memory is overcommitted, gets the process
    killed), and a loop that nothing stops before more iterations than one loop may run (an
    engine would run all of them)."""
    from ..ops.contract import MAX_ELEMENTS
    from ..runtime.subgraphs import MAX_ITERATIONS

    for op in graph.operations:
        if op.op == "onnx_loop" and not op.inputs.get("cond") and not op.inputs.get("max_trip"):
            raise NNEFXError("operation 'onnx_loop' has neither a trip count nor a condition: it never stops",
                             op.location)
        if op.op == "onnx_loop":
            # An engine runs a loop to its end: nothing nnefx can do stops it midway.  So an
            # engine takes a loop only where a trip count known now bounds it; a loop that a
            # run-time count or its body's condition ends runs on the numpy backends, which stop
            # it at the bound.
            trip_input = op.inputs.get("max_trip")
            trips = _constant_value(graph, trip_input[0]) if trip_input else None
            if trips is None or trips.size != 1:
                raise NNEFXError("operation 'onnx_loop': its trip count is not known when the model is loaded, so "
                                 "an engine could not be stopped; the numpy backends run it (at most "
                                 f"{MAX_ITERATIONS} iterations)", op.location)
            if int(trips.reshape(-1)[0]) > MAX_ITERATIONS:
                raise NNEFXError(f"operation 'onnx_loop': its trip count {int(trips.reshape(-1)[0])} is more than "
                                 f"the {MAX_ITERATIONS} iterations one loop may run", op.location)
        for name in op.output_names():
            t = graph.tensors.get(name)
            if t is None or not t.shape or any(not isinstance(d, int) for d in t.shape):
                continue
            n = 1
            for d in t.shape:
                n *= d
            if n > MAX_ELEMENTS:
                raise NNEFXError(f"operation '{op.op}': result shape {list(t.shape)} has {n} elements, more than "
                                 f"the {MAX_ELEMENTS} nnefx supports", op.location)


def _constant_value(graph: Graph, name: str) -> np.ndarray | None:
    """The value of tensor ``name`` where a ``constant`` operation gives it, else None."""
    from ..formats.export.context import constant_array

    for op in graph.operations:
        if op.op == "constant" and name in op.output_names():
            shape = graph.tensors[name].shape
            return None if shape is None or None in shape else constant_array(op, tuple(shape))
    return None


def engine_failure(engine: str, exc: BaseException) -> NNEFXError:
    """An engine's own exception while it ran (an allocation it could not make, a check of its
    own) as the one error type: the backend named, the engine's first line kept."""
    if isinstance(exc, MemoryError):
        return NNEFXError(f"backend '{engine}' ran out of memory on this run")
    first = str(exc).strip().splitlines()
    return NNEFXError(f"backend '{engine}' failed on this run: {type(exc).__name__}: "
                      + (first[0] if first else "no message") + (" ..." if len(first) > 1 else ""))


def output_dtype(graph: Graph, name: str) -> np.dtype:
    from ..runtime.dtypes import DEFAULT_STORAGE

    return DEFAULT_STORAGE[graph.tensors[name].dtype]


def ordered(names: Sequence[str], values: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    return dict(zip(names, values, strict=True))
