"""The optimizers of the ONNX training domain (``ops/onnx/training.py``).

Reading: ONNX ``Adagrad``, ``Adam`` and ``Momentum`` of ``ai.onnx.preview.training`` (opset 1)
update n tensors per node: inputs ``R, T``, then n tensors of each kind (``X``, ``G``, then
the states: ``H`` for Adagrad; ``V``, ``H`` for Adam; ``V`` for Momentum); outputs the n new
``X`` followed by the n new states of each kind.  Each tensor is one ``onnx_<optimizer>``
operation (the updates are independent: ONNX operator docs).

Writing: ONNX writes each operation back as its node (one tensor per node); IR has no
counterpart and refuses them, located.
"""

from __future__ import annotations

from typing import Any

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ..reading.values import Value
from ._common import onnx_emit, onnx_kept_etypes, onnx_need, onnx_write

_DOMAIN = "ai.onnx.preview.training"


def _read(r: Any, ins: list, op: str, states: tuple[str, ...], attribs: dict[str, Any]) -> list[Value]:
    """One ``op`` per optimized tensor; the node's outputs in ONNX order (all X, then each state)."""
    onnx_need(r, ins, 0, "R")
    onnx_need(r, ins, 1, "T")
    groups = 2 + len(states)  # X, G and the states
    rest = ins[2:]
    if not rest or len(rest) % groups or any(v is None for v in rest):
        raise r.error(f"{r.node.op_type} takes R, T and {groups} groups of n tensors (X, G, "
                      f"{', '.join(s.upper() for s in states)}); got {len(ins)} inputs")
    onnx_kept_etypes(r, ins, widened=(1,))
    n = len(rest) // groups
    results: list[list[Value]] = [[] for _ in range(1 + len(states))]
    for i in range(n):
        given = {"r": ins[0], "t": ins[1], "x": rest[i], "g": rest[n + i]}
        given.update({s: rest[(2 + k) * n + i] for k, s in enumerate(states)})
        outs = onnx_emit(r, op, given, attribs, results=[rest[i].etype] + [rest[(2 + k) * n + i].etype
                                                                          for k in range(len(states))])
        for k, v in enumerate(outs):
            results[k].append(v)
    return [v for group in results for v in group]


@onnx_node("Adagrad", domain=_DOMAIN)
def _adagrad(r, attrs, ins):
    attribs = {k: float(attrs[k]) for k in ("decay_factor", "epsilon", "norm_coefficient") if k in attrs}
    return _read(r, ins, "onnx_adagrad", ("h",), attribs)


@onnx_node("Adam", domain=_DOMAIN)
def _adam(r, attrs, ins):
    attribs = {k: float(attrs[k]) for k in ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post")
               if k in attrs}
    return _read(r, ins, "onnx_adam", ("v", "h"), attribs)


@onnx_node("Momentum", domain=_DOMAIN)
def _momentum(r, attrs, ins):
    attribs = {k: float(attrs[k]) for k in ("alpha", "beta", "norm_coefficient")}
    attribs["mode"] = str(attrs["mode"])
    return _read(r, ins, "onnx_momentum", ("v",), attribs)


# ================================================================================================
# Writing
# ================================================================================================

def _write(ctx: OnnxContext, op: Operation, op_type: str, states: tuple[str, ...], keep: tuple[str, ...] = (),
           **attrs: Any) -> None:
    """One optimized tensor as the ONNX node (n = 1): inputs R, T, X, G, states; outputs X', states'."""
    onnx_write(ctx, op, op_type, [op.inputs[k] for k in ("r", "t", "x", "g", *states)], 1, domain=_DOMAIN,
               keep=keep, **attrs)


@to_onnx("onnx_adagrad")
def adagrad_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _write(ctx, op, "Adagrad", ("h",), **{k: float(op.attribs[k]) for k in ("decay_factor", "epsilon",
                                                                           "norm_coefficient") if k in op.attribs})


@to_onnx("onnx_adam")
def adam_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _write(ctx, op, "Adam", ("v", "h"), **{k: float(op.attribs[k]) for k in (
        "alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post") if k in op.attribs})


@to_onnx("onnx_momentum")
def momentum_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # every attribute of Momentum is required in ONNX: written even where it is the default here
    _write(ctx, op, "Momentum", ("v",), keep=("alpha", "beta", "norm_coefficient", "mode"),
           alpha=float(op.attribs["alpha"]), beta=float(op.attribs["beta"]),
           norm_coefficient=float(op.attribs["norm_coefficient"]), mode=str(op.attribs.get("mode", "standard")))
