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
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import graph as nx
from ._types import Graph, Identifier, Operation, Tensor

#: What :func:`convert_quant` needs to know of a quantization operation's parameters:
#: name -> element type of a tensor parameter (``"scalar"``, ``"integer"``, ...), or None
#: for a non-tensor parameter.
ParamKinds = Mapping[str, Mapping[str, "str | None"]]


_float32 = np.float32


def _real(value: float) -> float:
    return float(_float32(value))


def literal(value: Any) -> Any:
    """A parameter value with reals rounded to single precision, containers preserved."""
    t = type(value)  # exact-type dispatch first: this runs for every attribute of every operation
    if t is int or t is str or t is bool:
        return value
    if t is float:
        return float(_float32(value))
    if t is list:
        return [v if type(v) is int else literal(v) for v in value]
    if t is tuple:
        return tuple([v if type(v) is int else literal(v) for v in value])
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return _real(float(value))
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, tuple):
        return tuple(literal(v) for v in value)
    return value


def tensor_arg(value: Any) -> Any:
    """A tensor argument: names become :class:`Identifier`, literals keep their value."""
    if type(value) is str:
        return Identifier(value)
    if isinstance(value, str):
        return Identifier(value)
    if isinstance(value, list):
        return [tensor_arg(v) for v in value]
    if isinstance(value, tuple):
        return tuple(tensor_arg(v) for v in value)
    return literal(value)


def convert_operation(op: nx.Operation) -> Operation:
    """The official layout of one operation.

    nnefx's front-end already emits every parameter (defaults filled in) in declaration
    order, tensor parameters in ``inputs`` and the others in ``attribs``, which is the
    official layout; only value representations change here.
    """
    attribs = OrderedDict(zip(op.attribs, map(literal, op.attribs.values()), strict=True))
    inputs = OrderedDict(zip(op.inputs, map(tensor_arg, op.inputs.values()), strict=True))
    outputs = OrderedDict(zip(op.outputs, map(tensor_arg, op.outputs.values()), strict=True))
    return Operation(op.op, attribs, inputs, outputs, op.dtype)


def convert_quant(quant: dict[str, Any] | None, kinds: ParamKinds) -> dict[str, Any]:
    if not quant:
        return {}
    quant = dict(quant)
    name = quant.pop("op_name", None)
    params = kinds.get(name, {}) if name else {}
    out: dict[str, Any] = {"op-name": name} if name else {}
    for key, value in quant.items():
        element = params.get(key)
        if element == "integer":
            out[key] = np.array(value, dtype=np.int32)
        elif element == "logical":
            out[key] = np.array(value, dtype=np.bool_)
        elif element is not None:
            out[key] = np.array(value, dtype=np.float32)
        else:
            out[key] = literal(value)
    return dict(sorted(out.items()))


def convert_graph(g: nx.Graph, kinds: ParamKinds) -> Graph:
    """The official-layout graph of ``g`` (shapes and data left for later passes)."""
    operations = [convert_operation(op) for op in g.operations]
    tensors = {name: Tensor(name, t.dtype, None, None, convert_quant(t.quant, kinds) if t.quant else {})
               for name, t in sorted(g.tensors.items())}
    return Graph(g.name, tensors, operations, list(g.inputs), list(g.outputs))
