"""``nnefx query`` / :func:`nnefx.query`: can each backend run this graph, and if not, what stops it.

Asked before anything is compiled: the numpy backends need a kernel for every operation;
an engine needs to be installed and its exporter needs an exact form for every operation
(each refusal listed with its position, not only the first).
"""

from __future__ import annotations

from typing import Any

from ..graph import DEFERRED, Graph, Model, deferred_operations
from .base import Problem


def query(model: Model | Graph, backends: list[str] | None = None) -> dict[str, list[Problem]]:
    """Per backend, the problems that stop it (an empty list: it can run the graph)."""
    from . import NUMPY_BACKENDS, engines, get

    graph = model.graph if isinstance(model, Model) else model
    names = backends or [*NUMPY_BACKENDS, *engines()]
    result: dict[str, list[Problem]] = {}
    for name in names:
        if name in NUMPY_BACKENDS:
            result[name] = _numpy_problems(graph, name)
            continue
        engine = get(name)
        if not engine.available():
            result[name] = [Problem("backend", None, f"not installed: pip install 'nnefx[{engine.extra}]'")]
            continue
        if graph.symbols:   # engines compile fixed shapes: symbolic extents (tract_symbol) are theirs to refuse
            result[name] = [Problem("backend", None, f"the graph has symbolic extents ({', '.join(graph.symbols)}); "
                                    "load it with input_shapes to run it on this backend")]
            continue
        deferred = deferred_operations(graph)
        if deferred:  # engines compile graphs whose operations are fixed (as Session says)
            result[name] = [Problem(op.op, op.location, f"{op.attribs['node'].kind} takes values at run time, "
                                    "which only the fast and formal backends bind") for op in deferred]
            continue
        from .base import stateless_graph

        result[name] = engine.problems(stateless_graph(graph).graph)
    return result


def _numpy_problems(graph: Graph, backend: str) -> list[Problem]:
    from ..ops import registry

    found = []
    for op in graph.operations:
        if op.op in ("external", "variable", "constant", "update"):
            continue
        if op.op == DEFERRED:  # bound per run: its registry operations are known only then
            continue
        entry = registry.find(op.op)
        if entry is None:
            found.append(Problem(op.op, op.location, "unknown operation"))
        elif (entry.formal_kernel if backend == "formal" else entry.fast_kernel or entry.formal_kernel) is None:
            found.append(Problem(op.op, op.location, f"no {backend} kernel"))
    return found


def report(results: dict[str, list[Problem]], engine_versions: dict[str, Any] | None = None) -> str:
    lines = []
    for name, problems in results.items():
        if not problems:
            lines.append(f"{name}: can run the graph")
        elif problems[0].operation == "backend":
            lines.append(f"{name}: {problems[0].reason}")
        else:
            ops = sorted({p.operation for p in problems})
            lines.append(f"{name}: cannot run the graph: {len(problems)} operation{'s' * (len(problems) != 1)} "
                         f"({', '.join(ops)})")
            lines += [f"  {p}" for p in problems]
    return "\n".join(lines)
