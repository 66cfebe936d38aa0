"""ONNX ImageDecoder as an operation of the ``onnx`` domain: an encoded image (a 1-D uint8
tensor holding a BMP, JPEG, JPEG 2000, TIFF, PNG, WebP or PNM file) decoded to an
[H, W, 3] RGB or BGR, or an [H, W, 1] grayscale uint8 tensor.

Decoding is Pillow's (the optional extra ``nnefx[images]``; without it the operation is
refused naming the extra), which is also what onnx's reference implementation and the node
suite's expected pixels use.  Files are hostile: only the formats the operator lists are
opened (Pillow's other plugins, some of which start external programs, never see the
bytes), and the image's size is checked against :data:`MAX_PIXELS` before any pixel is
decoded.  Grayscale is ITU-R 601-2 luma of the RGB pixels (Pillow's ``L`` conversion).  A
file of several frames (TIFF pages) gives its first.  The result's extents depend on the
bytes, so the shape rule leaves H and W unknown.

Specification: ONNX operator docs, ImageDecoder-20.
"""

from __future__ import annotations

import io
import warnings

import numpy as np

from ...diagnostics import NNEFXError
from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_image"
OP = "onnx_image_decoder"
#: Pillow format names of the formats ImageDecoder-20 lists (PNM is Pillow's ``PPM`` plugin).
FORMATS = ("BMP", "JPEG", "JPEG2000", "TIFF", "PNG", "WEBP", "PPM")
#: Most pixels one image may have (files are hostile: decoding allocates H × W × 3 bytes).
MAX_PIXELS = 1 << 26
_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}

onnx_image_decoder = define(OP, FAMILY, """
fragment onnx_image_decoder( encoded_stream: tensor<integer>, pixel_format: string = 'RGB' )
    -> ( image: tensor<integer> );
""", domain="onnx", doc="ONNX ImageDecoder: a BMP/JPEG/JPEG 2000/TIFF/PNG/WebP/PNM file held in a 1-D uint8 "
                        "tensor decoded to [H, W, 3] RGB or BGR or [H, W, 1] grayscale uint8 pixels (Pillow).")


def _channels(pixel_format: str) -> int:
    if pixel_format not in _CHANNELS:
        raise attr_error(OP, "pixel_format", pixel_format, f"must be one of {', '.join(_CHANNELS)}")
    return _CHANNELS[pixel_format]


def pillow():
    """Pillow's ``Image`` module, or the refusal that names the extra to install."""
    try:
        from PIL import Image
    except ImportError:
        raise NNEFXError(f"operation '{OP}' (ONNX ImageDecoder) needs the Pillow package: "
                         "pip install nnefx[images]") from None
    return Image


@onnx_image_decoder.shape
def _decoder_shape(x, pixel_format="RGB"):
    channels = _channels(pixel_format)
    if len(x) != 1:
        raise op_error(OP, f"the encoded stream must be 1-D, not of rank {len(x)}")
    return (None, None, channels)


@onnx_image_decoder.formal
def _decoder(x, pixel_format="RGB"):
    channels = _channels(pixel_format)
    data = np.asarray(x)
    if data.ndim != 1 or data.dtype != np.uint8:
        raise op_error(OP, f"the encoded stream must be a 1-D uint8 tensor, not {data.dtype}{list(data.shape)}")
    Image = pillow()
    try:
        with warnings.catch_warnings():  # Pillow's bomb warning: the size is checked here instead
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data.tobytes()), formats=list(FORMATS))
        with img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                raise op_error(OP, f"the image has {width} x {height} pixels (more than {MAX_PIXELS})")
            img.seek(0)
            decoded = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)
    except NNEFXError:
        raise
    except Image.UnidentifiedImageError:
        raise op_error(OP, f"the encoded stream is no image of a format ImageDecoder reads ({', '.join(FORMATS)}; "
                           "PPM: the PNM family)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise op_error(OP, f"the image cannot be decoded ({type(exc).__name__}: {exc})") from None
    if channels == 1:
        return decoded.reshape(decoded.shape[0], decoded.shape[1], 1)
    return np.ascontiguousarray(decoded[:, :, ::-1]) if pixel_format == "BGR" else decoded


onnx_image_decoder.fast(_decoder)  # decoding is Pillow's in both: one kernel is the definition and the fast form
onnx_image_decoder.etypes(lambda x, **_: "u8")
