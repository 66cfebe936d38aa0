"""Quantization: how each operator is read from IR and ONNX (and written, below).

FakeQuantize.

Specifications: OpenVINO opset docs: FakeQuantize-1.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
from ..export.lowering import (
    out,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import const, dtype_of, nnef_dtype
from ._common import onnx_emit, onnx_kept_etypes, onnx_need, onnx_present, onnx_write
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


# --- ONNX QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear (ops/onnx/quantization.py) ----

#: ONNX ``TensorProto`` codes of the element types a quantized code may have (QuantizeLinear's
#: ``output_dtype`` when no zero point gives it) that nnefx reads
_CODES = {2: ("u8", np.uint8), 3: ("i8", np.int8), 4: ("u16", np.uint16), 5: ("i16", np.int16)}


def _block(r, attrs) -> dict:
    return {"axis": int(attrs.get("axis", 1)), "block_size": int(attrs.get("block_size", 0))}


@onnx_node("QuantizeLinear")
def _onnx_quantize_linear(r, attrs, ins):
    x, scale = onnx_need(r, ins, 0, "x"), onnx_need(r, ins, 1, "y_scale")
    if "precision" in attrs:
        raise r.error("attribute 'precision' (QuantizeLinear-25) is not supported")
    zero = onnx_present(ins, 2)
    if zero is None:
        code = int(attrs.get("output_dtype", 0)) or 2
        if code not in _CODES:
            raise r.error(f"output_dtype = {code} is not a supported code type")
        zero = const(np.zeros((), _CODES[code][1]))
    onnx_kept_etypes(r, [x, scale], outputs=(zero.etype,))
    data = dict(_block(r, attrs), saturate=bool(attrs.get("saturate", 1)))
    return onnx_emit(r, "onnx_quantize_linear", {"input": x, "scale": scale, "zero_point": zero}, data,
                     results=[zero.etype], dtype=nnef_dtype(zero.etype))[0]


@onnx_node("DequantizeLinear")
def _onnx_dequantize_linear(r, attrs, ins):
    x, scale = onnx_need(r, ins, 0, "x"), onnx_need(r, ins, 1, "x_scale")
    zero = onnx_present(ins, 2)
    if zero is None:
        zero = const(np.zeros((), np.float32 if x.etype == "f32" else np.int64))
    elif zero.etype != x.etype:
        raise r.error(f"the zero point's element type {zero.etype} differs from the input's {x.etype}")
    # the codes and zero point are read as numbers: integers held as int64 mean the same, and
    # float8/4-bit codes reach the kernel widened to exact wider values
    onnx_kept_etypes(r, [x, scale, zero], widened=(0, 2), narrow=True)
    code = int(attrs.get("output_dtype", 0))
    if code and code != 1:
        raise r.error(f"output_dtype = {code} (other than float) is not supported")
    return onnx_emit(r, "onnx_dequantize_linear", {"input": x, "scale": scale, "zero_point": zero}, _block(r, attrs),
                     results=[scale.etype], dtype=nnef_dtype(x.etype))[0]


@onnx_node("DynamicQuantizeLinear")
def _onnx_dynamic_quantize_linear(r, attrs, ins):
    x = onnx_need(r, ins, 0, "x")
    onnx_kept_etypes(r, [x], outputs=("u8", x.etype, "u8"))  # uint8 codes (refused until kept)
    return onnx_emit(r, "onnx_dynamic_quantize_linear", {"input": x}, {}, results=["u8", x.etype, "u8"])


# ================================================================================================
# Writing
# ================================================================================================

# --- writers --------------------------------------------------------------------------------------

@to_ir("ir_fake_quantize")
def ir_fake_quantize_to_ir(ctx: IRContext, op: Operation) -> None:
    # the limits broadcast numpy-style already (as in the IR layer it came from)
    refs = [op.inputs[k] for k in ("input", "input_low", "input_high", "output_low", "output_high")]
    ctx.bind(out(op), ctx.layer("FakeQuantize", refs, out_shape(ctx, op), attrs={"levels": int(op.attribs["levels"])}))


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

#: the code types QuantizeLinear/DequantizeLinear-21 have that a graph's integer storage can be
_ONNX_CODES = ("int8", "uint8", "int16", "uint16", "int32")


def _codes_type(ctx: OnnxContext, value) -> None:
    dt = ctx.dtype(value)
    if dt.name not in _ONNX_CODES:
        raise ctx.fail(f"quantized codes held as {dt.name} have no QuantizeLinear/DequantizeLinear form "
                       f"(ONNX codes are {', '.join(_ONNX_CODES)}, float8 or 4-bit)")


@to_onnx("onnx_quantize_linear")
def quantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.outputs["output"])
    onnx_write(ctx, op, "QuantizeLinear", [op.inputs[k] for k in ("input", "scale", "zero_point")], 21,
               axis=int(op.attribs.get("axis", 1)), block_size=int(op.attribs.get("block_size", 0)) or None,
               saturate=None if op.attribs.get("saturate", True) else 0)


@to_onnx("onnx_dequantize_linear")
def dequantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.inputs["input"])
    onnx_write(ctx, op, "DequantizeLinear", [op.inputs[k] for k in ("input", "scale", "zero_point")], 21,
               axis=int(op.attribs.get("axis", 1)), block_size=int(op.attribs.get("block_size", 0)) or None)


@to_onnx("onnx_dynamic_quantize_linear")
def dynamic_quantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.outputs["output"])
    onnx_write(ctx, op, "DynamicQuantizeLinear", [op.inputs["input"]], 11)
