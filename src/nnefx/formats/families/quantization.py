"""Quantization in the formats.

Covers the opset ``FakeQuantize`` layer (``ir_fake_quantize``).

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.lowering import (
    out,
)
from ..export.registry import to_ir
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext

# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("ir_fake_quantize")
def ir_fake_quantize_to_ir(ctx: IRContext, op: Operation) -> None:
    # the limits broadcast numpy-style already (as in the IR layer it came from)
    refs = [op.inputs[k] for k in ("input", "input_low", "input_high", "output_low", "output_high")]
    ctx.bind(out(op), ctx.layer("FakeQuantize", refs, out_shape(ctx, op), attrs={"levels": int(op.attribs["levels"])}))
