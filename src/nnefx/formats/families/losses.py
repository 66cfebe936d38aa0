"""Losses: how each operator is read from ONNX (and written, below).

ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, read as the onnx-domain
operations of :mod:`nnefx.ops.onnx.losses` (NNEF has no loss) and written back as the same
ONNX nodes.

Specifications: ONNX operator docs: NegativeLogLikelihoodLoss-13/22, SoftmaxCrossEntropyLoss-13.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ._common import onnx_emit, onnx_kept_etypes, onnx_need, onnx_present, onnx_write

# ================================================================================================
# Reading
# ================================================================================================

_LOSSES = {"NegativeLogLikelihoodLoss": ("onnx_negative_log_likelihood_loss", ("input", "target", "weight")),
           "SoftmaxCrossEntropyLoss": ("onnx_softmax_cross_entropy_loss", ("scores", "labels", "weights"))}


@onnx_node(*_LOSSES)
def _onnx_loss(r, attrs, ins):
    op, params = _LOSSES[r.node.op_type]
    x = onnx_need(r, ins, 0, params[0])
    onnx_kept_etypes(r, ins, widened=(1,))
    reduction = str(attrs.get("reduction", "mean"))
    if reduction not in ("none", "sum", "mean"):
        raise r.error(f"attribute 'reduction' must be none, sum or mean; got '{reduction}'")
    data = {"reduction": reduction, "ignore_index": [int(attrs["ignore_index"])] if "ignore_index" in attrs else []}
    given = {params[0]: x, params[1]: onnx_need(r, ins, 1, params[1]), params[2]: onnx_present(ins, 2)}
    n = 2 if op == "onnx_softmax_cross_entropy_loss" else 1
    return onnx_emit(r, op, given, data, results=[x.etype] * n)


# ================================================================================================
# Writing
# ================================================================================================

@to_onnx("onnx_negative_log_likelihood_loss", "onnx_softmax_cross_entropy_loss")
def loss_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    kind = next(k for k, (name, _) in _LOSSES.items() if name == op.op)
    params = _LOSSES[kind][1]
    ignore = list(op.attribs.get("ignore_index", []))
    onnx_write(ctx, op, kind, [op.inputs.get(p) for p in params], 13,
               reduction=str(op.attribs.get("reduction", "mean")), ignore_index=int(ignore[0]) if ignore else None)

