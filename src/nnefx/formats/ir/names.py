"""NNEF-safe names for models read from IR files.

An IR model keeps OpenVINO's tensor names (``/att/Reshape_6_output_0``, ``c1.weight``) so
that a Session's results are keyed exactly like OpenVINO's.  NNEF documents need
identifiers (``[A-Za-z_][A-Za-z0-9_]*``, no keywords), so writing such a model as NNEF goes
through :func:`with_nnef_identifiers`, which renames deterministically and records the
original names in ``model.extras["original_names"]`` (new name -> IR name).
"""

from __future__ import annotations

import re
from typing import Any

from ...graph import Graph, Model, Operation, Tensor

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _keywords() -> set[str]:
    try:
        from ...syntax.parser import KEYWORDS

        return {k for words in KEYWORDS.values() for k in words}
    except ImportError:  # pragma: no cover - the front-end is part of the package
        return set()


def identifier(name: str, taken: set[str], keywords: set[str]) -> str:
    """``name`` if it is a usable identifier, else a sanitised, unique one."""
    if _IDENT.match(name) and name not in keywords and name not in taken:
        return name
    base = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "t"
    if base[0].isdigit() or base in keywords:
        base = "t_" + base
    new, k = base, 1
    while new in taken or new in keywords:
        k += 1
        new = f"{base}_{k}"
    return new


def needs_renaming(graph: Graph) -> bool:
    keywords = _keywords()
    names = list(graph.tensors) + [graph.name]
    return any(not _IDENT.match(n) or n in keywords for n in names)


def with_nnef_identifiers(model: Model) -> Model:
    """A copy of ``model`` whose graph and tensor names are all NNEF identifiers."""
    graph = model.graph
    if not needs_renaming(graph):
        return model
    keywords = _keywords()
    taken: set[str] = set()
    mapping: dict[str, str] = {}
    for name in graph.tensors:  # keep valid names first so they never change
        if _IDENT.match(name) and name not in keywords:
            mapping[name] = name
            taken.add(name)
    for name in graph.tensors:
        if name not in mapping:
            mapping[name] = identifier(name, taken, keywords)
            taken.add(mapping[name])

    def sub(v: Any) -> Any:
        if isinstance(v, str):
            return mapping.get(v, v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    new = Graph(identifier(graph.name, set(), keywords) if not _IDENT.match(graph.name) or graph.name in keywords
                else graph.name)
    new.inputs = [mapping[n] for n in graph.inputs]
    new.outputs = [mapping[n] for n in graph.outputs]
    for name, t in graph.tensors.items():
        new.tensors[mapping[name]] = Tensor(mapping[name], t.dtype, t.shape, t.data, t.quant, etype=t.etype, kind=t.kind)
    new.subgraphs = dict(graph.subgraphs)
    for op in graph.operations:
        new.operations.append(Operation(op.op, {k: sub(v) for k, v in op.inputs.items()},
                                        {k: sub(v) for k, v in op.outputs.items()}, dict(op.attribs),
                                        op.dtype, op.location))
    extras = dict(model.extras)
    extras["original_names"] = {v: k for k, v in mapping.items() if k != v}
    return Model(new, model.format, model.source, extras)
