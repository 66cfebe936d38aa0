"""Bit-precision analysis of integer graphs: the runtime's only overflow guard.

Every tensor gets a precision ``p`` in 1..32 (it holds values in ``[-(2^(p-1)-1), 2^(p-1)-1]``).
Variables and inputs carry theirs; each operation's rule (``OpDef.extra["precision"]``,
defined beside the kernels in :mod:`nnefx.ops.integer`) derives its outputs' from its
inputs'.  A rule may refuse (conv2d/dense inputs above 8 bits, a left shift past 32 bits)
and any result outside 1..32 is refused: such a graph could overflow int32.  This is exactly
when the runtime refuses a model at load time.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Graph, Model
from ...graph import flat_values as _flat
from ...ops import registry
from ...ops.integer._int import bitlen

_INTRO = ("external", "variable", "constant")


def data_precision(arr: np.ndarray) -> int:
    """The smallest precision holding every value of ``arr`` (1 for all zeros)."""
    if arr.size == 0:
        return 1
    m = max(abs(int(arr.min())), abs(int(arr.max())))
    return bitlen(m) + 1


def infer_precisions(graph: Graph, known: dict[str, int] | None = None) -> dict[str, int]:
    """Precision of every tensor of ``graph``; ``known`` gives inputs' (and variables') precisions.

    Variables without a known precision get the smallest one holding their data.  Raises
    :class:`NNEFXError` at the operation's location when the graph could overflow int32.
    """
    prec: dict[str, int] = dict(known or {})
    for op in graph.operations:
        if op.op in _INTRO:
            name = op.output_names()[0]
            if name not in prec and op.op == "external":
                # Nothing is known about an input but its storage: int32, i.e. 32 bits.  A CVM
                # model's input is followed by its saturation clip, which sets the real precision.
                prec[name] = 32
            elif name not in prec:
                data = graph.tensors[name].data
                if data is None:
                    raise NNEFXError(f"precision of '{name}' is unknown (integer graphs need the bit "
                                     "precision of every input)", op.location)
                prec[name] = data_precision(np.asarray(data))
            continue
        entry = registry.get(op.op)
        rule = entry.extra.get("precision")
        if rule is None:
            raise NNEFXError(f"operation '{op.op}' is not part of the integer operator set "
                             "(no precision rule)", op.location)
        precs, shapes = [], []
        for v in _flat(op.inputs.values()):
            if isinstance(v, str):
                precs.append(prec[v])
                shapes.append(graph.tensors[v].shape)
            else:
                precs.append(0)
                shapes.append(())
        outs = op.output_names()
        out_shapes = [graph.tensors[n].shape for n in outs]
        try:
            result = rule(precs, shapes, out_shapes, **op.attribs)
        except NNEFXError as exc:
            raise NNEFXError(exc.message, op.location) from None
        for name, p in zip(outs, result, strict=True):
            if not 1 <= p <= 32:
                raise NNEFXError(f"operation '{op.op}': output '{name}' would need {p} bits of precision "
                                 "(allowed 1..32): the result could overflow int32", op.location)
            prec[name] = int(p)
    return prec


def model_precisions(model: Model) -> dict[str, int]:
    """Precisions for a loaded model: the CVM loader stores them; other models are analysed."""
    stored = model.extras.get("cvm", {}).get("precision")
    if stored is not None:
        return dict(stored)
    return infer_precisions(model.graph, model.extras.get("cvm", {}).get("input_precision"))
