"""Quantization: how each operator is read from IR and ONNX (and written, below).

FakeQuantize.

Specifications: OpenVINO opset docs: FakeQuantize-1.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.lowering import (
    out,
)
from ..export.registry import to_ir
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..reading.context import NodeContext
from ..reading.registry import ANY, operator
from ..reading.values import dtype_of
from .elementwise import check_broadcast

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


@operator("FakeQuantize", ANY)
def _fake_quantize(ctx: NodeContext):
    ctx.expect_inputs(5)
    check_broadcast(ctx)
    levels = ctx.int("levels")
    if levels < 2:
        raise ctx.error(f"attribute 'levels' = {levels} must be >= 2")
    for i in range(5):
        if dtype_of(ctx.input(i)) != "scalar":
            raise ctx.error("FakeQuantize of integer tensors is not supported")
    ins = {name: ctx.tensor(i) for i, name in
           enumerate(("input", "input_low", "input_high", "output_low", "output_high"))}
    return ctx.result(ctx.emit1("ir_fake_quantize", ins, {"levels": levels}))


# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("ir_fake_quantize")
def ir_fake_quantize_to_ir(ctx: IRContext, op: Operation) -> None:
    # the limits broadcast numpy-style already (as in the IR layer it came from)
    refs = [op.inputs[k] for k in ("input", "input_low", "input_high", "output_low", "output_high")]
    ctx.bind(out(op), ctx.layer("FakeQuantize", refs, out_shape(ctx, op), attrs={"levels": int(op.attribs["levels"])}))
