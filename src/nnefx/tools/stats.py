"""Per-tensor statistics (``nnefx run --stats``): min, max, mean, std and NaN/Inf counts.

Statistics are taken over the finite values in float64 (so a single NaN does not hide the
range of the rest), with the NaN and infinity counts beside them; booleans count as 0/1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorStats:
    shape: tuple[int, ...]
    dtype: str
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan: int
    inf: int


def tensor_stats(array: np.ndarray) -> TensorStats:
    """Statistics of one array (``None`` where there is no finite value)."""
    a = np.asarray(array)
    values = a.astype(np.float64, copy=False) if a.dtype.kind in "biuf" else np.zeros(0)
    nan = int(np.isnan(values).sum()) if a.dtype.kind == "f" else 0
    inf = int(np.isinf(values).sum()) if a.dtype.kind == "f" else 0
    finite = values[np.isfinite(values)] if a.dtype.kind == "f" else values.reshape(-1)
    if finite.size == 0:
        return TensorStats(a.shape, str(a.dtype), None, None, None, None, nan, inf)
    return TensorStats(a.shape, str(a.dtype), float(finite.min()), float(finite.max()), float(finite.mean()),
                       float(finite.std()), nan, inf)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def stats_table(arrays: dict[str, np.ndarray]) -> str:
    """A table with one row per tensor: name, shape, min, max, mean, std, NaN, Inf."""
    header = ("tensor", "shape", "min", "max", "mean", "std", "NaN", "Inf")
    rows = [header]
    for name, array in arrays.items():
        s = tensor_stats(array)
        rows.append((name, "[" + ", ".join(str(d) for d in s.shape) + "]", _num(s.min), _num(s.max),
                     _num(s.mean), _num(s.std), str(s.nan), str(s.inf)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for r in rows:
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def computed_tensors(graph) -> list[str]:
    """Every tensor an operation computes (not inputs, variables or constants), graph order."""
    names: list[str] = []
    for op in graph.operations:
        if op.op in ("external", "variable", "constant", "update"):
            continue
        names.extend(n for n in op.output_names() if n not in names)
    return names


def resolve_fetch(graph, items: list[str]) -> list[str]:
    """``--fetch`` values (names, comma lists, ``*`` for every computed tensor) as names."""
    from ..diagnostics import NNEFXError

    wanted: list[str] = []
    for item in items:
        for name in (part.strip() for part in item.split(",")):
            if not name:
                continue
            found = computed_tensors(graph) if name == "*" else [name]
            for n in found:
                if n not in graph.tensors:
                    known = computed_tensors(graph)
                    hint = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
                    raise NNEFXError(f"--fetch names '{n}', which is not a tensor of graph '{graph.name}' "
                                     f"(computed tensors: {hint or 'none'}; '*' fetches them all)")
                if n not in wanted:
                    wanted.append(n)
    return wanted
