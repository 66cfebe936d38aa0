"""Quantization: how each operator is read from IR and ONNX (and written, below).

FakeQuantize.

Specifications: OpenVINO opset docs: FakeQuantize-1.
"""

from __future__ import annotations

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
