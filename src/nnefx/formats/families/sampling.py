"""Grid sampling: how each operator is read from ONNX (and written, below).

ONNX GridSample and AffineGrid, read as the onnx-domain operations of
:mod:`nnefx.ops.onnx.sampling` and written back as the same ONNX nodes (opset 20, where both
take N-D inputs and GridSample's modes are named ``linear`` / ``cubic``).

Specifications: ONNX operator docs: GridSample-16/20, AffineGrid-20.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ._common import onnx_emit, onnx_ints, onnx_kept_etypes, onnx_need, onnx_write

# ================================================================================================
# Reading
# ================================================================================================

#: GridSample-16's mode names and their GridSample-20 meaning
_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}


@onnx_node("GridSample")
def _onnx_grid_sample(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    mode = str(attrs.get("mode", "linear" if r.opset >= 20 else "bilinear"))
    if mode not in _MODES:
        raise r.error(f"attribute 'mode' = '{mode}' is not a GridSample mode")
    padding = str(attrs.get("padding_mode", "zeros"))
    if padding not in ("zeros", "border", "reflection"):
        raise r.error(f"attribute 'padding_mode' = '{padding}' is not zeros, border or reflection")
    data = {"mode": _MODES[mode], "padding_mode": padding, "align_corners": bool(attrs.get("align_corners", 0))}
    return onnx_emit(r, "onnx_grid_sample", {"input": x, "grid": onnx_need(r, ins, 1, "grid")}, data,
                     results=[x.etype])[0]


@onnx_node("AffineGrid")
def _onnx_affine_grid(r, attrs, ins):
    theta = onnx_need(r, ins, 0, "theta")
    onnx_kept_etypes(r, ins[:1])
    size = onnx_ints(r, onnx_need(r, ins, 1, "size"), "size")
    return onnx_emit(r, "onnx_affine_grid", {"theta": theta},
                     {"size": size, "align_corners": bool(attrs.get("align_corners", 0))}, results=[theta.etype])[0]


# ================================================================================================
# Writing
# ================================================================================================

@to_onnx("onnx_grid_sample")
def grid_sample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "GridSample", [op.inputs["input"], op.inputs["grid"]], 20, mode=str(op.attribs.get("mode", "linear")),
               padding_mode=str(op.attribs.get("padding_mode", "zeros")),
               align_corners=int(bool(op.attribs.get("align_corners", False))))


@to_onnx("onnx_affine_grid")
def affine_grid_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "AffineGrid", [op.inputs["theta"], ctx.ints(op.attribs["size"])], 20,
               align_corners=int(bool(op.attribs.get("align_corners", False))))
