"""Matrix multiplication in the formats.

Covers NNEF ``matmul`` (§4.7) / ``linear`` (§4.9.2) and ``einsum``.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export.lowering import (
    aligned,
    binop,
    is_zero,
    out,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext

# ================================================================================================
# Writing
# ================================================================================================

# --- ONNX helpers ----------------------------------------------------------------------------

def _transposed(ctx: OnnxContext, value: Any) -> str:
    ref = ctx.ref(value)
    dims = ctx.dims(ref)
    r = len(dims)
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return ctx.node("Transpose", [ref], tuple(dims[p] for p in perm), perm=perm)


# --- writers --------------------------------------------------------------------------------------

@to_ir("matmul")
def matmul_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("MatMul", [op.inputs["A"], op.inputs["B"]], out_shape(ctx, op),
                                attrs={"transpose_a": bool(op.attribs.get("transposeA", False)),
                                       "transpose_b": bool(op.attribs.get("transposeB", False))}))


@to_onnx("matmul")
def matmul_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    a, b = op.inputs["A"], op.inputs["B"]
    if op.attribs.get("transposeA", False):
        a = _transposed(ctx, a)
    if op.attribs.get("transposeB", False):
        b = _transposed(ctx, b)
    ctx.bind(out(op), ctx.node("MatMul", [a, b], ctx.dims(out(op)), dtype=ctx.dtype(a)))


@to_ir("linear")
def linear_to_ir(ctx: IRContext, op: Operation) -> None:
    shape = out_shape(ctx, op)
    y = ctx.layer("MatMul", [op.inputs["input"], op.inputs["filter"]], shape,
                  attrs={"transpose_a": False, "transpose_b": True})
    bias = op.inputs.get("bias", 0.0)
    data = ctx.data(bias)
    if data is None or np.any(np.asarray(data) != 0):
        y = binop(ctx, "add", y, aligned(ctx, bias, len(shape), ctx.etype(y)))
    ctx.bind(out(op), y)


@to_onnx("linear")
def linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # matmul(input, filter, transposeB = true) + bias
    x, w = op.inputs["input"], op.inputs["filter"]
    bias = op.inputs.get("bias", 0.0)
    shape = ctx.dims(out(op))
    if ctx.rank(x) != 2 or ctx.rank(w) != 2:
        raise ctx.fallback("Gemm takes matrices only")
    if is_zero(ctx, bias):
        ctx.bind(out(op), ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1))
        return
    bdims = ctx.dims(bias) if isinstance(bias, str) else ()
    if len(bdims) <= 2 and all(d == 1 or d == s for d, s in zip(bdims[::-1], shape[::-1], strict=False)):
        # a bias that broadcasts towards [N, M] (NNEF's [1, M], a scalar) is Gemm's C
        ctx.bind(out(op), ctx.node("Gemm", [x, w, aligned(ctx, bias, 2, ctx.dtype(x))], shape,
                                   dtype=ctx.dtype(x), transB=1))
        return
    y = ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1)
    ctx.bind(out(op), binop(ctx, "add", y, aligned(ctx, bias, len(shape), ctx.dtype(x))))


@to_ir("einsum")
def ir_einsum_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Einsum", list(op.inputs["inputs"]), out_shape(ctx, op), version="opset7",
                                attrs={"equation": str(op.attribs["equation"])}))


@to_onnx("einsum")
def ir_einsum_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    refs = [ctx.ref(v) for v in op.inputs["inputs"]]
    ctx.bind(out(op), ctx.node("Einsum", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0]),
                               equation=str(op.attribs["equation"])))
