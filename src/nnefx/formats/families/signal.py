"""Signal transforms: how each operator is read from ONNX (and written, below).

ONNX DFT and STFT, read as the onnx-domain operations of :mod:`nnefx.ops.onnx.signal` (NNEF
has no Fourier transform) and written back as the same ONNX nodes.  The inputs that decide
the result's shape (``dft_length``, ``axis``, ``frame_step``, ``frame_length``) become the
operations' attributes, so they must be known when the model is loaded.

Specifications: ONNX operator docs: DFT-17/20, STFT-17.
"""

from __future__ import annotations

import numpy as np

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ._common import onnx_emit, onnx_ints, onnx_kept_etypes, onnx_need, onnx_present, onnx_write

# ================================================================================================
# Reading
# ================================================================================================


def _one_int(r, v, what: str, default: int) -> int:
    values = onnx_ints(r, v, what)
    if values is None:
        return default
    if len(values) != 1:
        raise r.error(f"{what} must hold one integer, got {len(values)}")
    return values[0]


@onnx_node("DFT")
def _onnx_dft(r, attrs, ins):
    x = onnx_need(r, ins, 0, "input")
    onnx_kept_etypes(r, ins[:1])
    length = _one_int(r, onnx_present(ins, 1), "dft_length", 0)
    if r.opset >= 20:   # DFT-20 takes the axis as an input (default -2)
        axis = _one_int(r, onnx_present(ins, 2), "axis", -2)
    else:
        axis = int(attrs.get("axis", 1))
    if length < 0:
        raise r.error(f"dft_length = {length} must not be negative")
    data = {"axis": axis, "dft_length": length, "inverse": bool(attrs.get("inverse", 0)),
            "onesided": bool(attrs.get("onesided", 0))}
    return onnx_emit(r, "onnx_dft", {"input": x}, data, results=[x.etype])[0]


@onnx_node("STFT")
def _onnx_stft(r, attrs, ins):
    x = onnx_need(r, ins, 0, "signal")
    window = onnx_present(ins, 2)
    onnx_kept_etypes(r, [x, window])
    step = _one_int(r, onnx_need(r, ins, 1, "frame_step"), "frame_step", 0)
    data = {"frame_step": step, "frame_length": _one_int(r, onnx_present(ins, 3), "frame_length", 0),
            "onesided": bool(attrs.get("onesided", 1))}
    return onnx_emit(r, "onnx_stft", {"signal": x, "window": window}, data, results=[x.etype])[0]


# ================================================================================================
# Writing
# ================================================================================================

@to_onnx("onnx_dft")
def dft_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    length = int(op.attribs.get("dft_length", 0))
    onnx_write(ctx, op, "DFT", [op.inputs["input"], ctx.const(np.asarray(length, np.int64)) if length else None,
                                ctx.const(np.asarray(int(op.attribs["axis"]), np.int64))], 20,
               inverse=int(bool(op.attribs.get("inverse", False))), onesided=int(bool(op.attribs.get("onesided", False))))


@to_onnx("onnx_stft")
def stft_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    length = int(op.attribs.get("frame_length", 0))
    onnx_write(ctx, op, "STFT", [op.inputs["signal"], ctx.const(np.asarray(int(op.attribs["frame_step"]), np.int64)),
                                 op.inputs.get("window"), ctx.const(np.asarray(length, np.int64)) if length else None],
               17, keep=("onesided",), onesided=int(bool(op.attribs.get("onesided", True))))
