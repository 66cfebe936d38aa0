"""Control flow for formats without it: bodies inlined where the graph decides them at load time.

NNEF (1.0.5) has no conditionals, loops, sequences or optionals.  Before an NNEF document is
printed, :func:`lower_control_flow` rewrites what can be said without them and refuses the rest:

* ``onnx_if`` whose condition is a load-time constant (a ``constant`` operation, or a variable
  no ``update`` changes) becomes the taken branch's operations;
* ``onnx_loop`` with a constant trip count that nothing else can stop (no condition input, or
  a constant true one that the body passes through unchanged) becomes that many copies of the
  body, each with its iteration number as a constant; scan outputs are ``stack``\\ ed;
* ``onnx_scan`` (not Scan-8's batched form) over inputs of static extents becomes one copy of
  the body per step, fed ``slice`` + ``squeeze``\\ d items, its scan outputs ``stack``\\ ed along
  their axes (reversed where the direction says so);
* anything else of the control-flow, sequence and optional operations, any other ``onnx_``
  operation that names a body (FlexAttention's ``score_mod``), and any graph input
  or output that is a sequence or an optional, is a located error naming the operation:
  ``cannot write operation 'onnx_loop' as NNEF: ...``.

Bounds: at most :data:`MAX_STEPS` body copies per operation and :data:`MAX_OPERATIONS`
operations in the rewritten graph (an unrolled loop must not turn a small file into a huge
one); bodies nested in bodies are rewritten in turn, at most :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Operation, Tensor

#: Most body copies one loop or scan is unrolled into.
MAX_STEPS = 1024
#: Most operations the rewritten graph may have.
MAX_OPERATIONS = 200_000
#: Deepest nesting of bodies rewritten.
MAX_DEPTH = 16

#: Operations that carry bodies (attributes naming ``Graph.subgraphs``).
CONTROL = ("onnx_if", "onnx_loop", "onnx_scan", "onnx_sequence_map")
#: Operations on sequences and optionals.
CONTAINERS = ("onnx_sequence_construct", "onnx_sequence_empty", "onnx_sequence_insert", "onnx_sequence_erase",
              "onnx_sequence_at", "onnx_sequence_length", "onnx_concat_from_sequence", "onnx_split_to_sequence",
              "onnx_optional", "onnx_optional_has_element", "onnx_optional_get_element", "onnx_identity")


def needs_lowering(graph: Graph) -> bool:
    return bool(graph.subgraphs) or any(op.op in CONTROL or op.op in CONTAINERS for op in graph.operations) or \
        any(t.kind != "tensor" for t in graph.tensors.values())


def lower_control_flow(graph: Graph, fmt: str = "NNEF", keep: tuple[str, ...] = ()) -> Graph:
    """``graph`` without control flow (a new graph; ``graph`` itself when it has none), or a
    located :class:`NNEFXError` for the first operation ``fmt`` cannot express.

    ``keep`` names the control-flow operations the format has layers for (IR's If and Loop):
    those are still inlined where that is exact (a load-time condition, a constant trip count)
    and otherwise kept, with their bodies, for the format's writer."""
    if not needs_lowering(graph):
        return graph
    for name in [*graph.inputs, *graph.outputs]:
        kind = graph.tensors[name].kind
        if kind != "tensor":
            raise NNEFXError(f"cannot write graph '{graph.name}' as {fmt}: '{name}' is a {kind.replace('_', ' ')}, "
                             f"and {fmt} graphs take and return tensors only", Location(field=name))
    out = dataclasses.replace(graph, tensors=dict(graph.tensors), operations=[], subgraphs=dict(graph.subgraphs))
    _Lowering(out, fmt, keep).run(graph.operations, 0)
    used = {v for op in out.operations for v in op.attribs.values() if isinstance(v, str)}
    out.subgraphs = {k: v for k, v in out.subgraphs.items() if k in used}
    return out


class _Lowering:
    def __init__(self, graph: Graph, fmt: str, keep: tuple[str, ...] = ()):
        self.g = graph
        self.fmt = fmt
        self.keep = keep
        self.consts: dict[str, np.ndarray] = {}
        self.updated = {op.inputs.get("variable") for op in graph.operations if op.op == "update"}
        self.counter = 0
        #: how the refusals say what the format lacks (NNEF has none of it; nnefx writes IR
        #: without OpenVINO's If/Loop/TensorIterator)
        self._lacks = "NNEF has no" if fmt == "NNEF" else f"nnefx writes {fmt} without"

    # --- bookkeeping ------------------------------------------------------------------------
    def fail(self, op: Operation, message: str) -> NNEFXError:
        return NNEFXError(f"cannot write operation '{op.op}' as {self.fmt}: {message}",
                          op.location or Location(field=self.g.name))

    def emit(self, op: Operation) -> None:
        if len(self.g.operations) >= MAX_OPERATIONS:
            raise self.fail(op, f"unrolling it makes more than {MAX_OPERATIONS} operations")
        self.g.operations.append(op)
        if op.op == "constant":
            name = op.output_names()[0]
            shape = tuple(op.attribs.get("shape", ()))
            value = np.asarray(op.attribs.get("value", 0))
            self.consts[name] = np.broadcast_to(value.reshape(-1)[0], shape) if value.size == 1 else \
                value.reshape(shape)
        elif op.op == "variable" and op.output_names()[0] not in self.updated:
            data = self.g.tensors[op.output_names()[0]].data
            if data is not None:
                self.consts[op.output_names()[0]] = np.asarray(data)

    def fresh(self, hint: str, like: Tensor) -> str:
        name = hint
        while name in self.g.tensors:
            self.counter += 1
            name = f"{hint}_{self.counter}"
        self.g.tensors[name] = dataclasses.replace(like, name=name)
        return name

    def constant(self, hint: str, value: Any, dtype: str, location: Any) -> str:
        name = self.fresh(hint, Tensor(hint, dtype, ()))
        self.emit(Operation("constant", {}, {"output": name}, {"shape": [], "value": [value]}, dtype=dtype,
                            location=location))
        return name

    def const_of(self, name: Any) -> np.ndarray | None:
        if isinstance(name, (bool, int, float)):
            return np.asarray(name)
        return self.consts.get(name) if isinstance(name, str) else None

    # --- the rewrite ------------------------------------------------------------------------
    def run(self, operations: list[Operation], depth: int) -> None:
        lowerings = {"onnx_if": self.lower_if, "onnx_loop": self.lower_loop, "onnx_scan": self.lower_scan}
        for op in operations:
            if op.op in lowerings and op.op in self.keep:
                # inlined where that is exact, else kept (the format writes the layer itself)
                mark = len(self.g.operations)
                try:
                    lowerings[op.op](op, depth)
                except NNEFXError:
                    del self.g.operations[mark:]
                    self.emit(op)
            elif op.op in lowerings:
                lowerings[op.op](op, depth)
            elif op.op in CONTROL or op.op in CONTAINERS:
                raise self.fail(op, f"{self._lacks} sequences or optionals")
            elif op.op.startswith("onnx_") and any(isinstance(v, str) and v in self.g.subgraphs
                                                   for v in op.attribs.values()):
                # an ONNX operation applying a body (FlexAttention's score_mod): no form to inline
                # it in (tract's scan bodies, by contrast, are printed as fragments)
                bodies = ", ".join(k for k, v in op.attribs.items() if isinstance(v, str) and v in self.g.subgraphs)
                raise self.fail(op, f"{self.fmt} has no operation that applies a body graph (its {bodies})")
            else:
                self.emit(op)

    def inline(self, op: Operation, name: str, args: list[str], depth: int, prefix: str) -> list[str]:
        """Copy body ``name`` into the graph with its inputs read from ``args``; its outputs."""
        if depth >= MAX_DEPTH:
            raise self.fail(op, f"its bodies nest more than {MAX_DEPTH} deep")
        body = self.g.subgraphs.get(name)
        if body is None:
            raise self.fail(op, f"the graph has no body named '{name}'")
        if len(args) != len(body.inputs):
            raise self.fail(op, f"body '{name}' takes {len(body.inputs)} inputs, got {len(args)}")
        rename = dict(zip(body.inputs, args, strict=True))
        subs = {}
        for key, sub in body.subgraphs.items():  # bodies inside the body: filed beside ours
            new = key
            while new in self.g.subgraphs:
                self.counter += 1
                new = f"{key}_{self.counter}"
            self.g.subgraphs[new] = sub
            subs[key] = new
        copies = []
        for inner in body.operations:
            if inner.op == "external":
                continue
            outputs = _map(inner.outputs, lambda n: rename.setdefault(n, self.fresh(f"{prefix}{n}", body.tensors[n])))
            attribs = {k: subs.get(v, v) if isinstance(v, str) and k != "label" else v
                       for k, v in inner.attribs.items()}
            if inner.op == "variable":
                attribs["label"] = f"{prefix}{inner.attribs.get('label', inner.output_names()[0])}"
            copies.append(dataclasses.replace(inner, inputs=_map(inner.inputs, lambda n: rename.get(n, n)),
                                              outputs=outputs, attribs=attribs,
                                              location=inner.location or op.location))
        self.run(copies, depth + 1)
        return [rename.get(n, n) for n in body.outputs]

    def bind_outputs(self, op: Operation, values: list[str]) -> None:
        outs = op.output_names()
        if len(outs) != len(values):
            raise self.fail(op, f"its body gives {len(values)} values for {len(outs)} results")
        for out, value in zip(outs, values, strict=True):
            if self.g.tensors[value].kind != "tensor":
                raise self.fail(op, f"result '{out}' is a {self.g.tensors[value].kind}, which {self.fmt} cannot hold")
            self.emit(Operation("copy", {"x": value}, {"y": out}, {}, dtype=self.g.tensors[out].dtype,
                                location=op.location))

    def lower_if(self, op: Operation, depth: int) -> None:
        cond = self.const_of(op.inputs["cond"])
        if cond is None or cond.size != 1:
            raise self.fail(op, f"its condition is computed at run time, and {self._lacks} conditionals "
                                "(only an If whose condition is known when the model is loaded is written, as "
                                "the branch it takes)")
        branch = op.attribs["then_branch"] if bool(cond.reshape(-1)[0]) else op.attribs["else_branch"]
        prefix = f"{op.output_names()[0]}_"
        self.bind_outputs(op, self.inline(op, branch, list(op.inputs["captured"]), depth, prefix))

    def lower_loop(self, op: Operation, depth: int) -> None:
        trips = [self.const_of(n) for n in op.inputs["max_trip"]]
        if not trips or trips[0] is None or trips[0].size != 1:
            raise self.fail(op, f"its trip count is not known when the model is loaded, and {self._lacks} "
                                "loops (only a Loop with a constant trip count is written, unrolled)")
        n = int(trips[0].reshape(-1)[0])
        if op.inputs["cond"]:
            cond = self.const_of(op.inputs["cond"][0])
            if cond is None or not bool(cond.reshape(-1)[0]) or not _passes_condition(self.g.subgraphs.get(
                    op.attribs["body"])):
                raise self.fail(op, f"its condition may stop it early, and {self._lacks} loops (only a Loop "
                                    "with a constant trip count is written, unrolled)")
        if n > MAX_STEPS:
            raise self.fail(op, f"unrolling its {n} iterations is more than the {MAX_STEPS} nnefx writes")
        carried = list(op.inputs["initial"])
        n_scan = len(op.output_names()) - len(carried)
        if n <= 0 and n_scan:
            raise self.fail(op, "it runs no iteration, so its scan outputs have no values to stack")
        scans: list[list[str]] = [[] for _ in range(n_scan)]
        loc = op.location
        for i in range(max(n, 0)):
            prefix = f"{op.output_names()[0]}_{i}_"
            args = [self.constant(f"{prefix}i", i, "integer", loc), self.constant(f"{prefix}cond", True, "logical", loc),
                    *carried, *op.inputs["captured"]]
            results = self.inline(op, op.attribs["body"], args, depth, prefix)
            carried = results[1:1 + len(carried)]
            for k, value in enumerate(results[1 + len(carried):]):
                scans[k].append(value)
        stacked = []
        for k, parts in enumerate(scans):
            out = op.output_names()[len(carried) + k]
            name = self.fresh(f"{out}_stacked", self.g.tensors[out])
            self.emit(Operation("stack", {"values": parts}, {"value": name}, {"axis": 0},
                                dtype=self.g.tensors[out].dtype, location=loc))
            stacked.append(name)
        self.bind_outputs(op, carried + stacked)

    def lower_scan(self, op: Operation, depth: int) -> None:
        if op.attribs.get("batched"):
            raise self.fail(op, f"the batched form (Scan-8) is not unrolled for {self.fmt}")
        scanned = list(op.inputs["scanned"])
        shapes = [self.g.tensors[x].shape for x in scanned]
        if any(s is None or any(not isinstance(d, int) for d in s) for s in shapes):
            raise self.fail(op, f"its scanned inputs have extents known only at run time, and {self._lacks} "
                                "loops (only a Scan over static extents is written, unrolled)")
        axes = list(op.attribs.get("scan_input_axes") or [0] * len(scanned))
        dirs = list(op.attribs.get("scan_input_directions") or [0] * len(scanned))
        axes = [a + len(s) if a < 0 else a for a, s in zip(axes, shapes, strict=True)]
        steps = {s[a] for a, s in zip(axes, shapes, strict=True)}
        if len(steps) != 1:
            raise self.fail(op, f"its scanned inputs have different lengths ({sorted(steps)})")
        n = steps.pop()
        if n > MAX_STEPS:
            raise self.fail(op, f"unrolling its {n} steps is more than the {MAX_STEPS} nnefx writes")
        if n == 0:
            raise self.fail(op, "it scans no step, so its scan outputs have no values to stack")
        states = list(op.inputs["initial"])
        n_out = len(op.output_names()) - len(states)
        parts: list[list[str]] = [[] for _ in range(n_out)]
        loc = op.location
        for t in range(n):
            prefix = f"{op.output_names()[0]}_{t}_"
            items = []
            for x, axis, direction, shape in zip(scanned, axes, dirs, shapes, strict=True):
                k = n - 1 - t if direction else t
                like = Tensor(x, self.g.tensors[x].dtype, tuple(1 if j == axis else d for j, d in enumerate(shape)))
                piece = self.fresh(f"{prefix}{x}_slice", like)
                self.emit(Operation("slice", {"input": x}, {"output": piece},
                                    {"axes": [axis], "begin": [k], "end": [k + 1]}, dtype=like.dtype, location=loc))
                item = self.fresh(f"{prefix}{x}_item", dataclasses.replace(
                    like, shape=tuple(d for j, d in enumerate(shape) if j != axis)))
                self.emit(Operation("squeeze", {"input": piece}, {"output": item}, {"axes": [axis]},
                                    dtype=like.dtype, location=loc))
                items.append(item)
            results = self.inline(op, op.attribs["body"], [*states, *items, *op.inputs["captured"]], depth, prefix)
            states = results[:len(states)]
            for k, value in enumerate(results[len(states):]):
                parts[k].append(value)
        out_axes = list(op.attribs.get("scan_output_axes") or [0] * n_out)
        out_dirs = list(op.attribs.get("scan_output_directions") or [0] * n_out)
        stacked = []
        for k, values in enumerate(parts):
            out = op.output_names()[len(states) + k]
            rank = self.g.tensors[values[0]].rank
            axis = out_axes[k]
            if axis < 0:
                if rank is None:
                    raise self.fail(op, f"scan output {k} has an unknown rank, so its axis {axis} is not known")
                axis += rank + 1
            name = self.fresh(f"{out}_stacked", self.g.tensors[out])
            self.emit(Operation("stack", {"values": values[::-1] if out_dirs[k] else values}, {"value": name},
                                {"axis": axis}, dtype=self.g.tensors[out].dtype, location=loc))
            stacked.append(name)
        self.bind_outputs(op, states + stacked)


def _passes_condition(body: Graph | None) -> bool:
    """Whether a loop body returns its condition input unchanged (so a true condition stays true)."""
    if body is None or len(body.inputs) < 2 or not body.outputs:
        return False
    source = body.outputs[0]
    producers = body.producers()
    while source in producers and producers[source].op == "copy":
        source = producers[source].inputs["x"]
    return source == body.inputs[1]


def _map(values: dict[str, Any], fn: Any) -> dict[str, Any]:
    def one(v: Any) -> Any:
        if isinstance(v, str):
            return fn(v)
        if isinstance(v, list):
            return [one(x) for x in v]
        if isinstance(v, tuple):
            return tuple(one(x) for x in v)
        return v

    return {k: one(v) for k, v in values.items()}
