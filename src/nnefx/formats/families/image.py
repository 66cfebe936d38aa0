"""Image decoding: how ONNX ImageDecoder is read and written back.

Read as :mod:`nnefx.ops.onnx.image`'s ``onnx_image_decoder`` (Pillow, the ``images``
extra) and written back as the same node.

Specification: ONNX operator docs, ImageDecoder-20.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ._common import onnx_emit, onnx_need, onnx_write


@onnx_node("ImageDecoder")
def _onnx_image_decoder(r, attrs, ins):
    x = onnx_need(r, ins, 0, "encoded_stream")
    if x.etype != "u8":
        raise r.error(f"input 0 (encoded_stream) must be a uint8 tensor, not {x.etype}")
    return onnx_emit(r, "onnx_image_decoder", {"encoded_stream": x},
                     {"pixel_format": str(attrs.get("pixel_format", "RGB"))}, results=["u8"])[0]


@to_onnx("onnx_image_decoder")
def image_decoder_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "ImageDecoder", [op.inputs["encoded_stream"]], 20,
               pixel_format=str(op.attribs.get("pixel_format", "RGB")))
