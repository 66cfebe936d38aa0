"""The graph-to-graph rewrite behind ``dialect="tract"``: one rule per operation tract lacks.

The rewrite walks the shaped graph in order.  Tensors whose value does not depend on any
input (constants, and operations over them or over static shapes such as ``tensor_shape``)
are folded once with nnefx's formal backend and written as ``variable`` data, which is how
tract stores constants.  Every other operation is kept when tract's standard library has it,
or replaced by its rule in :data:`RULES` (:mod:`.rules`); an operation with neither is a
located error naming it.  Nothing is approximated: a rule exists only where tract computes
the same values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Graph, Model, Operation, Tensor

#: standard NNEF operations tract's own standard library (``nnef/src/ops/nnef/``) does not
#: provide; ``constant`` has a rule (variable data), the rest are refused (tract: "No
#: definition for operator").
TRACT_UNKNOWN = ("constant", "split", "selu", "silu")

Rule = Callable[["Rewriter", Operation], None]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register the rewrite of operations ``names`` into what tract reads."""
    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return deco


class Rewriter:
    """Builds the tract graph: ``emit`` operations, ``constant`` arrays as variables."""

    def __init__(self, source: Graph, folded: dict[str, np.ndarray]):
        self.source = source
        self.folded = folded
        self.graph = Graph(source.name, list(source.inputs), list(source.outputs), {}, [])
        # scan bodies come from tract documents (tract_core_scan is tract's own): kept as read
        self.graph.subgraphs = dict(source.subgraphs)
        self._names = set(source.tensors)
        self._written: set[str] = set()

    # -- names and tensors ------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def tensor(self, name: str) -> Tensor:
        return self.source.tensors[name]

    def shape(self, name: str, op: Operation | None = None) -> tuple[int, ...]:
        """The static shape of source tensor ``name`` (a located error naming ``op`` if not known)."""
        t = self.tensor(name)
        if t.shape is None or any(not isinstance(d, int) for d in t.shape):
            what = f"cannot write operation '{op.op}' for tract: " if op is not None else ""
            raise NNEFXError(f"{what}the shape of '{name}' is not static (tract's forms of it take numbers)",
                             op.location if op is not None else None)
        return tuple(t.shape)

    def value(self, name: Any) -> np.ndarray | None:
        """The folded value of a tensor argument (``None`` when it depends on an input)."""
        if isinstance(name, str):
            return self.folded.get(name)
        return np.asarray(name)

    def _declare(self, name: str, like: Tensor | None, **fields: Any) -> None:
        t = copy.copy(like) if like is not None else Tensor(name)
        t.name = name
        for k, v in fields.items():
            setattr(t, k, v)
        self.graph.tensors[name] = t

    def emit(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any], result: str, *,
             like: Operation, dtype: str | None = None, extra: dict[str, str] | None = None) -> str:
        """Append ``result = op(inputs, attribs)``; ``result`` named as in the source or fresh."""
        outs = {"output": result} if extra is None else extra
        new = Operation(op, dict(inputs), outs, dict(attribs), dtype=dtype, location=like.location)
        for n in new.output_names():
            if n not in self.graph.tensors:
                src = self.source.tensors.get(n)
                self._declare(n, src)
        self.graph.operations.append(new)
        return result

    def keep(self, op: Operation) -> None:
        """Write ``op`` as it is (tract has it)."""
        self.graph.operations.append(op)
        for n in op.output_names():
            self._declare(n, self.source.tensors.get(n))

    def temp(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any], *, like: Operation,
             dtype: str = "scalar", shape: tuple | None = None, etype: str | None = None) -> str:
        """An intermediate result of a rule (a fresh tensor)."""
        name = self.fresh(f"{like.output_names()[0]}_t")
        self._declare(name, None, dtype=dtype, shape=shape, etype=etype)
        self.graph.operations.append(Operation(op, dict(inputs), {"output": name}, dict(attribs),
                                               dtype=None, location=like.location))
        return name

    def constant(self, name: str, array: np.ndarray, like: Operation, *, fresh: bool = False) -> str:
        """``array`` as a tract constant: a ``variable`` whose data is the array."""
        if fresh:
            name = self.fresh(f"{name}_c")
        array = np.ascontiguousarray(array).reshape(np.shape(array))  # (ascontiguousarray makes rank 0 rank 1)
        if array.size == 0:
            raise NNEFXError(f"cannot write operation '{like.op}' for tract: it reads an empty constant '{name}' "
                             f"(shape {list(array.shape)}), and a variable's extents are positive (NNEF spec, "
                             "variable)", like.location)
        kind = array.dtype.kind
        dtype = "logical" if kind == "b" else "integer" if kind in "iu" else "scalar"
        src = self.source.tensors.get(name)
        self._declare(name, src, dtype=dtype, shape=tuple(array.shape), data=array, quant=None)
        label = "nnefx_constants/" + "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
        self.graph.operations.append(Operation("variable", {}, {"output": name},
                                               {"shape": list(array.shape), "label": label},
                                               dtype=dtype, location=like.location))
        self._written.add(name)
        return name

    def arg(self, value: Any, like: Operation) -> Any:
        """A tensor argument as the tract graph refers to it (folded values written once)."""
        if isinstance(value, list):
            return [self.arg(v, like) for v in value]
        if isinstance(value, str) and value in self.folded and value not in self._written \
                and value not in self.graph.tensors:
            self.constant(value, self.folded[value], like)
        return value


def _foldable(graph: Graph) -> set[str]:
    """Tensors whose value no input changes: constants and what is computed from them alone,
    and the shapes of tensors whose shape is static."""
    from ...ops import registry

    known: set[str] = set()
    for op in graph.operations:
        if op.op in ("external", "variable") or op.op == "update":
            continue
        if op.op == "tensor_shape" or op.op == "tract_core_shape_of":
            t = graph.tensors.get(next(iter(op.inputs.values())))
            if t is not None and t.shape is not None and all(isinstance(d, int) for d in t.shape):
                known.update(op.output_names())
            continue
        entry = registry.find(op.op)
        if entry is None or entry.extra.get("stateful") or op.op.startswith(("tract_core_external",)):
            continue
        if all(n in known for n in op.input_names()):
            known.update(op.output_names())
    return known


def _fold_values(model: Model, wanted: list[str]) -> dict[str, np.ndarray]:
    """The values of ``wanted`` (all input-independent) from one formal run on zero inputs."""
    from ...runtime.session import Session

    if not wanted:
        return {}
    graph = copy.copy(model.graph)
    graph.outputs = list(wanted)
    sub = Model(graph, format=model.format, source=model.source, extras=model.extras)
    session = Session(sub, backend="formal")
    from ... import etypes

    feed = {}
    for info in session.inputs:
        shape = tuple(d if isinstance(d, int) else 1 for d in (info.shape or ()))
        et = etypes.of(model.graph.tensors[info.name])
        # (a text input is fed empty strings: zeros of an object array are not text)
        feed[info.name] = np.full(shape, "", dtype=object) if et == "string" else np.zeros(shape, etypes.numpy_dtype(et))
    out = session.run(feed)
    return {k: np.asarray(v) for k, v in out.items()}


def _untyped_generics(graph: Graph) -> None:
    """A standard generic operation reading what a ``tract_core_*`` operation computes is
    written without its ``<integer>``/``<logical>``: tract's headers declare every result
    ``tensor<scalar>`` and type it by its datum type (a ``tract_core_cast`` to u8, a gather of
    i32 data), so the operation's type is the one inferred from its arguments, as tract (and
    nnefx reading tract's dialect) infer it — ``copy<integer>`` of such a result would not check."""
    from ...ops import registry

    made = set()
    for k, op in enumerate(graph.operations):
        entry = registry.find(op.op)
        if entry is None:
            continue
        if entry.domain == "tract":
            made.update(op.output_names())
        elif op.dtype not in (None, "scalar") and op.op not in ("external", "variable", "constant") \
                and any(n in made for n in op.input_names()):
            graph.operations[k] = copy.copy(op)   # (kept operations are the source graph's own)
            graph.operations[k].dtype = None


def to_tract(model: Model) -> Model:
    """``model`` with every operation in a form tract reads and computes the same way."""
    from ...ops import registry
    from ...syntax.printer import refuse_deferred

    graph = model.graph
    refuse_deferred(graph, "NNEF for tract")   # (before folding runs the graph)
    foldable = _foldable(graph)
    # fold what a kept operation reads (not the constants tract could read as they are: all
    # of them become variables anyway, so fold every foldable tensor some operation reads)
    needed: list[str] = []
    for op in graph.operations:
        if all(n in foldable for n in op.output_names()) and op.output_names():
            continue
        for n in op.input_names():
            if n in foldable and n not in needed:
                needed.append(n)
    needed += [n for n in graph.outputs if n in foldable and n not in needed]
    folded = _fold_values(model, needed)
    rw = Rewriter(graph, folded)
    for op in graph.operations:
        outs = op.output_names()
        if outs and all(n in foldable for n in outs):
            for n in outs:
                if n in graph.outputs:
                    rw.arg(n, op)
            continue
        for n in op.input_names():
            rw.arg(n, op)
        fn = RULES.get(op.op)
        if fn is not None:
            fn(rw, op)
            continue
        entry = registry.find(op.op)
        if entry is None or op.op in TRACT_UNKNOWN or entry.domain not in ("nnef", "tract"):
            raise NNEFXError(f"cannot write operation '{op.op}' for tract: it has no exact form in tract's "
                             "operations (standard NNEF, tract_core)", op.location)
        rw.keep(op)
    for n in graph.inputs:
        rw._declare(n, graph.tensors.get(n)) if n not in rw.graph.tensors else None
    new_graph = rw.graph
    # folded values a rule took as numbers (a reshape's target) need no variable of their own
    used = {n for op in new_graph.operations for n in op.input_names()} | set(new_graph.outputs)
    # (and weights a rule wrote in another form: the recurrent sequences' W, R, B)
    dropped = {n for n in rw._written if n not in used}
    dropped |= {n for op in new_graph.operations if op.op == "variable" for n in op.output_names() if n not in used}
    new_graph.operations = [op for op in new_graph.operations
                            if not (op.op == "variable" and set(op.output_names()) <= dropped)]
    for n in dropped:
        new_graph.tensors.pop(n, None)
    _untyped_generics(new_graph)
    for attr in ("symbols", "assertions"):
        if hasattr(graph, attr):
            setattr(new_graph, attr, getattr(graph, attr))
    # Marked as tract's dialect: the NNEF writers skip nnefx's read-back check, whose standard
    # meaning tract's operations do not share (tests check these files with tract itself).
    return Model(new_graph, format=model.format, source=model.source,
                 extras={**dict(model.extras or {}), "dialect": "tract"})


from . import rules, rules_cvm, rules_recurrent  # noqa: E402,F401  (registers the rules)
