"""Quantization: how each operator is read from IR and ONNX (and written, below).

FakeQuantize; QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear; the integer products
MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv (``ops/onnx/qlinear.py``).

Specifications: OpenVINO opset docs: FakeQuantize-1; ONNX operator docs of the operators above.
"""

from __future__ import annotations

import numpy as np

from ... import etypes
from ...etypes import numpy_dtype
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
from ..reading.values import Value, const, dtype_of, nnef_dtype
from ._common import onnx_emit, onnx_kept_etypes, onnx_need, onnx_present, onnx_write
from .elementwise import check_broadcast
from .sliding_conv import _onnx_conv_pads, _onnx_kernel

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
#: ``output_dtype`` when no zero point gives it): 8/16-bit integers, 4- and 2-bit integers,
#: float8 and float4 (the ONNX operator docs' ``T2`` of QuantizeLinear-25)
_CODES = {2: "u8", 3: "i8", 4: "u16", 5: "i16", 17: "f8e4m3fn", 18: "f8e4m3fnuz", 19: "f8e5m2", 20: "f8e5m2fnuz",
          21: "u4", 22: "i4", 23: "f4e2m1", 25: "u2", 26: "i2"}


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
        zero = const(np.zeros((), numpy_dtype(_CODES[code])))
    elif zero.etype not in _CODES.values():
        raise r.error(f"zero point of element type {zero.etype} is not a QuantizeLinear code type")
    # the zero point reaches the kernel in its stored type (``stored_inputs``): it names the
    # code type, float8 / 4-bit / 2-bit included
    onnx_kept_etypes(r, [x, scale], outputs=(zero.etype,), narrow=True)
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


# --- ONNX MatMulInteger / ConvInteger / QLinearMatMul / QLinearConv (ops/onnx/qlinear.py) -------

def _codes(r, *values: Value | None) -> None:
    """Refuse, at the node, codes that are not int8/uint8 (QLinearMatMul-21's float8 codes)."""
    for v in values:
        if v is not None and v.etype not in ("i8", "u8"):
            raise r.error(f"{r.node.op_type} of {v.etype} codes is not supported (int8 and uint8 codes are)")


def _same_codes(r, x: Value, zero: Value | None, what: str) -> None:
    if zero is not None and zero.etype != x.etype:
        raise r.error(f"{what}'s element type {zero.etype} differs from its input's {x.etype}")


def _onnx_conv_window(r, attrs, x: Value, w: Value) -> dict:
    """ONNX Conv attributes as the operations' ``pads``/``strides``/``dilations``/``group``."""
    if x.shape is None or w.shape is None:
        raise r.error(f"{r.node.op_type} needs known input and filter ranks")
    n = len(x.shape) - 2
    kernel = _onnx_kernel(r, attrs, w, n)
    strides = [int(v) for v in attrs.get("strides", [1] * n)]
    dil = [int(v) for v in attrs.get("dilations", [1] * n)]
    pads = _onnx_conv_pads(r, attrs, x.shape[2:], kernel, strides, dil)
    return {"dilations": dil, "group": int(attrs.get("group", 1)), "pads": [p for p, _ in pads] + [q for _, q in pads],
            "strides": strides}


def _integer_inputs(r, ins, names: tuple) -> dict:
    """The two code tensors (required) and their zero points (optional) of an integer product."""
    given = {k: onnx_need(r, ins, i, k) if i < 2 else onnx_present(ins, i) for i, k in enumerate(names)}
    _codes(r, *given.values())
    for code, zero in ((names[0], names[2]), (names[1], names[3])):
        _same_codes(r, given[code], given[zero], zero)
    return given


@onnx_node("MatMulInteger")
def _onnx_matmul_integer(r, attrs, ins):
    given = _integer_inputs(r, ins, ("A", "B", "a_zero_point", "b_zero_point"))
    return onnx_emit(r, "onnx_matmul_integer", given, {}, results=["i32"])[0]


@onnx_node("ConvInteger")
def _onnx_conv_integer(r, attrs, ins):
    given = _integer_inputs(r, ins, ("x", "w", "x_zero_point", "w_zero_point"))
    return onnx_emit(r, "onnx_conv_integer", given, _onnx_conv_window(r, attrs, given["x"], given["w"]),
                     results=["i32"])[0]


_QLINEAR_INPUTS = ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point")
_QCONV_INPUTS = ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point")


def _qlinear_inputs(r, ins, names) -> dict:
    given = {k: onnx_need(r, ins, i, k) for i, k in enumerate(names)}
    _codes(r, *(given[k] for k in names if "scale" not in k))
    for k in (names[0], names[3]):
        _same_codes(r, given[k], given[f"{k}_zero_point"], f"{k}_zero_point")
    scales = [given[k] for k in names if k.endswith("scale")]
    onnx_kept_etypes(r, scales, narrow=True)  # float16 / bfloat16 scales reach the kernel exactly (widened)
    for v in scales:
        if v.etype not in ("f32", "f16", "bf16"):
            raise r.error(f"scales must be float, float16 or bfloat16, got {v.etype}")
    return given


@onnx_node("QLinearMatMul")
def _onnx_qlinear_matmul(r, attrs, ins):
    given = _qlinear_inputs(r, ins, _QLINEAR_INPUTS)
    return onnx_emit(r, "onnx_qlinear_matmul", given, {}, results=[given["y_zero_point"].etype])[0]


@onnx_node("QLinearConv")
def _onnx_qlinear_conv(r, attrs, ins):
    given = _qlinear_inputs(r, ins, _QCONV_INPUTS)
    bias = onnx_present(ins, 8)
    if bias is not None and bias.etype != "i32":
        raise r.error(f"the bias B must be int32, got {bias.etype}")
    given["B"] = bias
    return onnx_emit(r, "onnx_qlinear_conv", given, _onnx_conv_window(r, attrs, given["x"], given["w"]),
                     results=[given["y_zero_point"].etype])[0]


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

#: the code types of QuantizeLinear/DequantizeLinear (ONNX operator docs, opset 25: ``T3`` of
#: QuantizeLinear, ``T1`` of DequantizeLinear, which also reads int32); the model is written in
#: the opset that added the type (``writer.ETYPE_OPSETS``: float8 19, 4-bit 21, float4 23, 2-bit 25)
_ONNX_CODES = ("i8", "u8", "i16", "u16", "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "i4", "u4", "f4e2m1",
               "i2", "u2")


def _codes_type(ctx: OnnxContext, value, codes: tuple[str, ...] = _ONNX_CODES) -> None:
    dt = ctx.dtype(value)
    if etypes.from_numpy(dt) not in codes:
        raise ctx.fail(f"quantized codes held as {dt.name} have no QuantizeLinear/DequantizeLinear form "
                       f"(ONNX codes are {', '.join(codes)})")


def _scale_type(ctx: OnnxContext, scale, data) -> None:
    """Before opset 23 the scale has the (float) data's element type; another one needs 23."""
    if ctx.dtype(scale) != ctx.dtype(data):
        ctx.e.need_opset(23)


@to_onnx("onnx_quantize_linear")
def quantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.outputs["output"])
    _scale_type(ctx, op.inputs["scale"], op.inputs["input"])
    onnx_write(ctx, op, "QuantizeLinear", [op.inputs[k] for k in ("input", "scale", "zero_point")], 21,
               axis=int(op.attribs.get("axis", 1)), block_size=int(op.attribs.get("block_size", 0)) or None,
               saturate=None if op.attribs.get("saturate", True) else 0)


@to_onnx("onnx_dequantize_linear")
def dequantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.inputs["input"], _ONNX_CODES + ("i32",))
    _scale_type(ctx, op.inputs["scale"], op.outputs["output"])
    # a zero point of another type than the codes (the reader's 0 for a left-out one) is
    # written only where it is not 0: ONNX's left-out zero point is 0 in the codes' type
    zero = op.inputs["zero_point"]
    known = ctx.data(zero)
    if ctx.dtype(zero) != ctx.dtype(op.inputs["input"]):
        if known is None or np.any(np.asarray(known) != 0):
            raise ctx.fail(f"the zero point's element type {ctx.dtype(zero)} differs from the codes' "
                           f"{ctx.dtype(op.inputs['input'])}")
        zero = None
    onnx_write(ctx, op, "DequantizeLinear", [op.inputs["input"], op.inputs["scale"], zero], 21,
               axis=int(op.attribs.get("axis", 1)), block_size=int(op.attribs.get("block_size", 0)) or None)


@to_onnx("onnx_dynamic_quantize_linear")
def dynamic_quantize_linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _codes_type(ctx, op.outputs["output"])
    onnx_write(ctx, op, "DynamicQuantizeLinear", [op.inputs["input"]], 11)


def _codes_to_onnx(ctx: OnnxContext, op: Operation, op_type: str, names: tuple) -> None:
    """Refuse codes an ONNX file cannot hold for ``op_type``: tensors held in another type than
    int8/uint8 (an NNEF text's int64), zero points given as literals other than an omitted 0."""
    for k in names:
        v = op.inputs.get(k)
        if isinstance(v, str):
            dt = ctx.dtype(v)
            if dt.name not in ("int8", "uint8"):
                raise ctx.fail(f"{op_type} codes held as {dt.name} ('{k}') have no ONNX form (int8 or uint8)")
        elif v is not None and not (k.endswith("zero_point") and op_type in ("MatMulInteger", "ConvInteger")
                                    and np.all(np.asarray(v) == 0)):
            raise ctx.fail(f"{op_type} input '{k}' is a literal, which has no int8/uint8 code type in ONNX")


@to_onnx("onnx_matmul_integer")
def matmul_integer_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    names = ("A", "B", "a_zero_point", "b_zero_point")
    _codes_to_onnx(ctx, op, "MatMulInteger", names)
    onnx_write(ctx, op, "MatMulInteger", [op.inputs.get(k) for k in names], 10)


def _window_to_onnx(op: Operation) -> dict:
    return {"dilations": [int(v) for v in op.attribs.get("dilations", [])] or None,
            "group": int(op.attribs.get("group", 1)),
            "pads": [int(v) for v in op.attribs.get("pads", [])] or None,
            "strides": [int(v) for v in op.attribs.get("strides", [])] or None}


@to_onnx("onnx_conv_integer")
def conv_integer_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    names = ("x", "w", "x_zero_point", "w_zero_point")
    _codes_to_onnx(ctx, op, "ConvInteger", names)
    onnx_write(ctx, op, "ConvInteger", [op.inputs.get(k) for k in names], 10, **_window_to_onnx(op))


def _qlinear_to_onnx(ctx: OnnxContext, op: Operation, op_type: str, names: tuple, **attrs) -> None:
    _codes_to_onnx(ctx, op, op_type, tuple(k for k in names if "scale" not in k))
    # float16 / bfloat16 scales: QLinearMatMul-21 (QLinearConv has float scales only)
    wide = any(isinstance(op.inputs[k], str) and ctx.dtype(op.inputs[k]).name != "float32"
               for k in names if k.endswith("scale"))
    if wide and op_type == "QLinearConv":
        raise ctx.fail("QLinearConv scales other than float32 have no ONNX form")
    onnx_write(ctx, op, op_type, [op.inputs[k] for k in names] + ([op.inputs.get("B")] if "B" in op.inputs else []),
               21 if wide else 10, **attrs)


@to_onnx("onnx_qlinear_matmul")
def qlinear_matmul_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _qlinear_to_onnx(ctx, op, "QLinearMatMul", _QLINEAR_INPUTS)


@to_onnx("onnx_qlinear_conv")
def qlinear_conv_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _qlinear_to_onnx(ctx, op, "QLinearConv", _QCONV_INPUTS, **_window_to_onnx(op))
