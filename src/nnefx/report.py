"""Human and JSON reports about a model (``nnefx inspect``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dims import Dim
from .graph import Graph, Model


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Dim):
        return str(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    return value


def graph_json(graph: Graph) -> dict[str, Any]:
    """The flat graph as the JSON ``nnefx inspect --json`` prints."""
    return {
        "name": graph.name,
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "tensors": {
            name: {"shape": None if t.shape is None else [None if d is None else _dim_json(d) for d in t.shape],
                   "dtype": t.dtype}
            for name, t in graph.tensors.items()
        },
        "operations": [
            {"op": op.op, "inputs": _jsonable(op.inputs), "outputs": _jsonable(op.outputs),
             "attribs": _jsonable(op.attribs)}
            for op in graph.operations
        ],
    }


def _dim_json(d: Any) -> Any:
    """An extent in JSON: an int, or a symbolic one (``nnefx.dims.Dim``) as its text."""
    return str(d) if isinstance(d, Dim) else int(d)


def _fmt_shape(shape: Any) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def summary_text(model: Model, cost: bool = False, ops: bool = False) -> str:
    """A readable summary: inputs, outputs, operation counts with their MACs/FLOPs, the model's
    compute totals, the variables table and (``ops``) one row per operation.

    ``cost`` adds the integer runtime's "ops" measure; a model it does not apply to gets a
    line saying why, never an aborted summary.
    """
    from .tools.cost import graph_cost, human, operations_table, totals_line

    g = model.graph
    lines = [f"graph {g.name} ({model.format}{', ' + model.source if model.source else ''})"]
    for title, names in (("inputs", g.inputs), ("outputs", g.outputs)):
        lines.append(f"{title}:")
        for name in names:
            t = g.tensors.get(name)
            lines.append(f"  {name}: {t.dtype if t else '?'} {_fmt_shape(t.shape if t else None)}")
    if g.symbols:
        lines.append("symbols: " + ", ".join(g.symbols))
        lines.extend(f"  assert {a}" for a in g.assertions)
    props = model.extras.get("properties") if isinstance(model.extras, dict) else None
    if props:
        lines.append("properties:")
        lines.extend(f"  {k}: {v}" for k, v in props.items())
    counts: dict[str, int] = {}
    for op in g.operations:
        counts[op.op] = counts.get(op.op, 0) + 1
    compute = graph_cost(g)
    kinds = compute.by_kind()
    lines.append(f"operations: {len(g.operations)}")
    # "name: count" stays as it was (scripts grep it); the compute columns are aligned after it
    width = max((len(f"{name}: {n}") for name, n in counts.items()), default=0)
    for name in sorted(counts):
        line = f"  {name}: {counts[name]}"
        if name in kinds:
            _, macs, flops = kinds[name]
            macs_text = f"MACs {human(macs):>6}" if macs != 0 else " " * 11
            line = f"{line.ljust(width + 2)}  {macs_text}  FLOPs {human(flops):>6}"
        lines.append(line.rstrip())
    lines.append(f"compute: {totals_line(compute)}")
    total_bytes = 0
    total_items = 0
    rows = []
    for op, t in g.variables():
        label = str(op.attribs.get("label", t.name))
        nbytes = int(t.data.nbytes) if t.data is not None else 0
        items = int(np.prod(t.shape)) if t.shape and all(isinstance(d, int) for d in t.shape) else 0
        total_bytes += nbytes
        total_items += items
        storage = str(t.data.dtype) if t.data is not None else "no data"
        if t.quant and t.data is not None and t.data.dtype.kind in "iu":
            storage += f" codes, {t.quant.get('op_name', 'quantized')}"  # graph.quant decodes them
        rows.append(f"  {label}: {t.dtype} ({storage}) {_fmt_shape(t.shape)} {nbytes} bytes")
    lines.append(f"variables: {len(rows)} ({total_items} items, {total_bytes} bytes)")
    lines.extend(rows)
    if ops:
        lines.append("per operation:")
        lines.extend("  " + line for line in operations_table(g, compute).splitlines())
    if cost:
        from .diagnostics import NNEFXError
        from .formats.cvm.cost import model_cost  # integer runtime's "ops" measure

        try:
            lines.append(f"cost: {model_cost(model)} ops")
        except NNEFXError as exc:
            lines.append(f"cost: unknown ({exc.message.removeprefix('cost: ')})")
        except Exception as exc:  # noqa: BLE001 -- the summary above stands whatever the measure meets
            lines.append(f"cost: unknown (the integer runtime's measure failed: {type(exc).__name__}: {exc})")
    return "\n".join(lines)
