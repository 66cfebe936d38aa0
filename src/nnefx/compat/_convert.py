"""Turning an nnefx :class:`~nnefx.graph.Graph` into the official package's graph layout.

What the official ``nnef`` package reports, and we reproduce (checked by
``tests/test_compat_nnef.py`` against the package itself):

* ``Operation.attribs``: every non-tensor parameter, defaults included, in declaration
  order; ``Operation.inputs``: every tensor parameter in declaration order.  Tensor
  references are :class:`Identifier`\\ s, string literals plain ``str``.
* Real numbers are stored in single precision by the official C++ parser, so ``0.1``
  reads back as ``0.10000000149011612``; we round reals through float32 the same way.
* ``Operation.dtype`` is the resolved generic type for generic operations, else None.
* ``Graph.tensors`` is a ``dict`` in name order; shapes stay ``None`` until
  :func:`infer_shapes`; ``data`` stays ``None`` until variables are loaded.
* ``Tensor.quantization``: ``{}`` or the ``graph.quant`` entry with the operation name
  under ``'op-name'`` and tensor-typed parameters as 0-d numpy arrays (float32 for
  ``tensor<scalar>``, int32 for ``tensor<integer>``), keys in name order.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from .. import graph as nx
from ..ops import registry
from . import _signature
from ._types import Graph, Identifier, Operation, Tensor


def _real(value: float) -> float:
    return float(np.float32(value))


def literal(value: Any) -> Any:
    """A parameter value with reals rounded to single precision, containers preserved."""
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (float, np.floating)):
        return _real(float(value))
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, tuple):
        return tuple(literal(v) for v in value)
    return value


def tensor_arg(value: Any) -> Any:
    """A tensor argument: names become :class:`Identifier`, literals keep their value."""
    if isinstance(value, str):
        return Identifier(value)
    if isinstance(value, list):
        return [tensor_arg(v) for v in value]
    if isinstance(value, tuple):
        return tuple(tensor_arg(v) for v in value)
    return literal(value)


def params_for(op_name: str, fragments: dict[str, str]) -> tuple[_signature.Param, ...] | None:
    declaration = fragments.get(op_name)
    if declaration is None:
        entry = registry.find(op_name)
        declaration = entry.declaration if entry is not None else None
    return _signature.params_of(declaration) if declaration else None


def convert_operation(op: nx.Operation, fragments: dict[str, str]) -> Operation:
    params = params_for(op.op, fragments)
    attribs: OrderedDict[str, Any] = OrderedDict()
    inputs: OrderedDict[str, Any] = OrderedDict()
    if params is None:
        for key, value in op.inputs.items():
            inputs[key] = tensor_arg(value)
        for key, value in op.attribs.items():
            attribs[key] = literal(value)
    else:
        for p in params:
            if p.is_tensor:
                if p.name in op.inputs:
                    inputs[p.name] = tensor_arg(op.inputs[p.name])
                elif p.name in op.attribs:
                    inputs[p.name] = tensor_arg(op.attribs[p.name])
                elif p.has_default:
                    inputs[p.name] = tensor_arg(p.default)
            elif p.name in op.attribs:
                attribs[p.name] = literal(op.attribs[p.name])
            elif p.name in op.inputs:
                attribs[p.name] = literal(op.inputs[p.name])
            elif p.has_default:
                attribs[p.name] = literal(p.default)
        known = {p.name for p in params}
        for key, value in op.attribs.items():
            if key not in known and key != "dtype":
                attribs[key] = literal(value)
    outputs = OrderedDict((k, tensor_arg(v)) for k, v in op.outputs.items())
    return Operation(op.op, attribs, inputs, outputs, op.dtype)


def convert_quant(quant: dict[str, Any] | None, fragments: dict[str, str]) -> dict[str, Any]:
    if not quant:
        return {}
    quant = dict(quant)
    name = quant.pop("op_name", None) or quant.pop("op-name", None)
    params = params_for(name, fragments) if name else None
    kinds = {p.name: p.type_text for p in params or ()}
    out: dict[str, Any] = {"op-name": name} if name else {}
    for key, value in quant.items():
        kind = kinds.get(key, "")
        if kind.startswith("tensor<integer>"):
            out[key] = np.array(value, dtype=np.int32)
        elif kind.startswith("tensor"):
            out[key] = np.array(value, dtype=np.float32)
        else:
            out[key] = literal(value)
    return dict(sorted(out.items()))


def convert_graph(g: nx.Graph, fragments: dict[str, str] | None = None,
                  rename: dict[str, str] | None = None) -> Graph:
    """The official-layout graph of ``g``; ``rename`` maps nnefx tensor names to reported ones."""
    fragments = fragments or {}
    operations = [convert_operation(op, fragments) for op in g.operations]
    if rename:
        operations = [_renamed(op, rename) for op in operations]
    tensors = {}
    for name, t in g.tensors.items():
        shown = rename.get(name, name) if rename else name
        tensors[shown] = Tensor(shown, t.dtype, None, None, convert_quant(t.quant, fragments))
    tensors = dict(sorted(tensors.items()))
    inputs = [rename.get(n, n) if rename else n for n in g.inputs]
    outputs = [rename.get(n, n) if rename else n for n in g.outputs]
    return Graph(g.name, tensors, operations, inputs, outputs)


def _renamed(op: Operation, rename: dict[str, str]) -> Operation:
    def sub(value: Any) -> Any:
        if isinstance(value, Identifier):
            return Identifier(rename.get(value, value))
        if isinstance(value, list):
            return [sub(v) for v in value]
        if isinstance(value, tuple):
            return tuple(sub(v) for v in value)
        return value

    return Operation(op.name, op.attribs, OrderedDict((k, sub(v)) for k, v in op.inputs.items()),
                     OrderedDict((k, sub(v)) for k, v in op.outputs.items()), op.dtype)


def official_names(g: nx.Graph, document_names: set[str]) -> dict[str, str]:
    """Names the official parser gives tensors created by lowering: op name + running count.

    The official parser numbers such tensors per producing operation across the whole
    graph (``exp1``, ``exp2``, ...); tensors the document names keep their names.
    """
    counters: dict[str, int] = {}
    taken = set(document_names)
    rename: dict[str, str] = {}
    for op in g.operations:
        for name in op.output_names():
            if name in document_names or name in rename:
                continue
            while True:
                counters[op.op] = counters.get(op.op, 0) + 1
                candidate = f"{op.op}{counters[op.op]}"
                if candidate not in taken:
                    break
            taken.add(candidate)
            rename[name] = candidate
    return rename
