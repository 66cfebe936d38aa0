"""What every exporter (IR v11, ONNX) needs besides its own format.

Both writers walk a flat :class:`~nnefx.graph.Graph`, keep only the operations the outputs
(and, where the format has state, the updates) depend on, look each operation up in a
table of per-operation exporters, and write a compound operation without an exporter of
its own through its NNEF definition.  These three steps are the same whatever the target
format, so they live here once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..graph import Graph, Operation, Tensor

F = TypeVar("F", bound=Callable[..., Any])


class ExporterTable(Generic[F]):
    """Operation name -> the function that writes it in one target format."""

    def __init__(self) -> None:
        self._table: dict[str, F] = {}

    def exporter(self, *names: str) -> Callable[[F], F]:
        """Decorator: ``fn`` writes the operations ``names``."""
        def deco(fn: F) -> F:
            for n in names:
                self._table[n] = fn
            return fn
        return deco

    def find(self, op: str) -> F | None:
        return self._table.get(op)

    def names(self) -> list[str]:
        return sorted(self._table)


def reachable_operations(graph: Graph, *, keep_updates: bool = False) -> set[int]:
    """Indices of the operations the graph outputs depend on (the rest is not written);
    with ``keep_updates`` also those the ``update`` operations depend on (stateful targets)."""
    producer: dict[str, int] = {}
    for k, op in enumerate(graph.operations):
        if op.op != "update":
            for n in op.output_names():
                producer[n] = k
    need: set[int] = set()
    stack = [producer[n] for n in graph.outputs if n in producer]
    if keep_updates:
        stack += [k for k, op in enumerate(graph.operations) if op.op == "update"]
    while stack:
        k = stack.pop()
        if k in need:
            continue
        need.add(k)
        stack.extend(producer[n] for n in graph.operations[k].input_names() if n in producer)
    return need


def single_operation_graph(graph: Graph, op: Operation,
                           shape_of: Callable[[str], tuple]) -> tuple[Graph, dict[str, str]]:
    """``op`` alone as a graph whose externals stand for its tensor inputs.

    Printed and compiled with ``expand_all=True``, it expands the operation through its
    fragment body exactly as any NNEF document would be, which is how an exporter writes a
    compound it has no direct form for.  Returns the graph and the map from ``graph``'s
    tensor names to the local ones (``t0``, ``t1``, ...).  ``shape_of`` gives each input's
    shape; whatever it raises propagates.
    """
    local: dict[str, str] = {}
    sub = Graph(name="g")

    def ident(name: str) -> str:
        if name not in local:
            local[name] = f"t{len(local)}"
        return local[name]

    def dtype_of(name: str) -> str:
        return graph.tensors[name].dtype if name in graph.tensors else "scalar"

    for name in op.input_names():
        if name in local:
            continue
        n = ident(name)
        shape = tuple(shape_of(name))
        sub.inputs.append(n)
        sub.tensors[n] = Tensor(n, dtype_of(name), shape)
        sub.operations.append(Operation("external", {}, {"output": n}, {"shape": list(shape)},
                                        dtype=dtype_of(name)))

    def rename(v: Any) -> Any:
        if isinstance(v, str):
            return ident(v)
        if isinstance(v, list):
            return [rename(x) for x in v]
        if isinstance(v, tuple):
            return tuple(rename(x) for x in v)
        return v

    outs = {k: rename(v) for k, v in op.outputs.items()}
    for n in op.output_names():
        sub.tensors[ident(n)] = Tensor(ident(n), dtype_of(n))
    sub.operations.append(Operation(op.op, {k: rename(v) for k, v in op.inputs.items()}, outs, dict(op.attribs),
                                    dtype=op.dtype))
    sub.outputs = [ident(n) for n in op.output_names()]
    return sub, local
