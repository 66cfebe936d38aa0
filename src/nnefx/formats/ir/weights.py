"""The IR ``.bin`` file: raw little-endian tensors addressed by (offset, size).

The file is memory-mapped read-only, so a model with large weights costs no copy until a
tensor is actually used, and every slice is bounds-checked against the real file size
first: a lying ``offset``/``size`` gives an :class:`NNEFXError` naming the layer, never a
short read or an out-of-bounds view.  ``size`` must also agree exactly with the element
count times the element size (bit-packed types: ``ceil(count * bits / 8)``).

Element types are accepted in both spellings: v10/11 ``element_type`` (``f32``, ``u1``,
...) and legacy ``precision`` (``FP32``, ``U8``, ``BOOL``, ...).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ...diagnostics import Location, NNEFXError
from ..reading.values import PRECISIONS, element_type  # noqa: F401 - the IR's spellings, re-exported

#: element type -> (numpy dtype or None for bit-packed, bits per element)
ELEMENT_TYPES: dict[str, tuple[str | None, int]] = {
    "f64": ("<f8", 64), "f32": ("<f4", 32), "f16": ("<f2", 16), "bf16": (None, 16),
    "i64": ("<i8", 64), "i32": ("<i4", 32), "i16": ("<i2", 16), "i8": ("i1", 8),
    "u64": ("<u8", 64), "u32": ("<u4", 32), "u16": ("<u2", 16), "u8": ("u1", 8),
    "boolean": ("u1", 8), "u1": (None, 1), "u4": (None, 4), "i4": (None, 4),
}

def nnef_dtype(etype: str) -> str:
    """The NNEF data type an IR element type maps onto."""
    if etype in ("f64", "f32", "f16", "bf16"):
        return "scalar"
    if etype == "boolean":
        return "logical"
    return "integer"


def numpy_dtype(etype: str) -> np.dtype:
    """The numpy dtype values of ``etype`` are held in after decoding."""
    if etype == "bf16":
        return np.dtype(np.float32)
    if etype in ("u1", "u4"):
        return np.dtype(np.uint8)
    if etype == "i4":
        return np.dtype(np.int8)
    if etype == "boolean":
        return np.dtype(np.bool_)
    return np.dtype(ELEMENT_TYPES[etype][0]).newbyteorder("=")


def byte_size(etype: str, count: int) -> int:
    bits = ELEMENT_TYPES[etype][1]
    return math.ceil(count * bits / 8)


class Weights:
    """A read-only, memory-mapped ``.bin`` file (or an empty one when there is none)."""

    def __init__(self, path: str | None):
        self.path = path
        self._map: np.ndarray | None = None
        self.size = 0
        if path is not None and os.path.exists(path):
            try:
                self.size = os.path.getsize(path)
            except OSError as exc:
                raise NNEFXError(f"cannot read weights file: {exc.strerror}", Location(path)) from None
            if self.size:
                try:
                    self._map = np.memmap(path, dtype=np.uint8, mode="r")
                except (OSError, ValueError) as exc:
                    raise NNEFXError(f"cannot map weights file: {exc}", Location(path)) from None
        self.exists = path is not None and os.path.exists(path)

    def raw(self, offset: int, size: int, loc: Location) -> np.ndarray:
        """Bytes [offset, offset+size) of the file, checked against its real size."""
        if not self.exists:
            raise NNEFXError(f"a layer needs weights but the weights file '{self.path}' does not exist", loc)
        if offset < 0 or size < 0 or offset + size > self.size:
            raise NNEFXError(f"blob at offset {offset} with size {size} lies past the end of the weights "
                             f"file ({self.size} bytes)", loc)
        if size == 0:
            return np.zeros(0, np.uint8)
        assert self._map is not None
        return self._map[offset:offset + size]

    def tensor(self, offset: int, size: int, etype: str, shape: tuple, loc: Location) -> np.ndarray:
        """Decode a tensor of ``shape`` (ints) and element type ``etype`` from the file."""
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        expected = byte_size(etype, count)
        if size != expected and not (count == 0 and size <= 8):  # OpenVINO writes 1 byte for empty data
            raise NNEFXError(f"blob size {size} does not match {count} elements of {etype} "
                             f"({expected} bytes) for shape {list(shape)}", loc)
        data = self.raw(offset, size, loc)
        if count == 0:
            return np.zeros(shape, numpy_dtype(etype))
        return decode(data, etype, count).reshape(shape)


def unpack_binary_filter(data: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` 0/1 values of a packed BinaryConvolution filter (uint8 result).

    Element ``i`` is bit ``i % 8`` of byte ``i // 8`` -- least significant bit first -- in
    every IR version.  That is the order of every producer and runtime of real files, unlike
    the generic ``u1`` element order (:func:`decode`, most significant bit first):

    * the Model Optimizer (``PackBinaryWeights``, openvinotoolkit/openvino
      ``model-optimizer/extensions/back/PackBinaryWeights.py`` from 2019, later
      ``tools/mo/openvino/tools/mo/back/PackBinaryWeights.py``) reverses each run of 8
      elements before ``np.packbits`` -- the only writer of packed binary weights in
      legacy (v5-v7), v10 and MO-made v11 files;
    * OpenVINO's own ``ConvToBinaryConv`` pass sets ``1 << j`` for element ``i + j``;
    * the CPU plugin reads bit ``widx % 8`` (``(val >> bit) & 1``) in its reference path
      (``inference-engine/thirdparty/mkl-dnn/src/cpu/ref_binary_convolution.cpp``, 2019;
      ``mkldnn_bin_conv_node.cpp``) and its JIT kernels, and so does the GPU plugin's
      binary weight reorder; OpenVINO 2026.4's CPU plugin agrees exactly with this order
      on random filters (``tests/test_ir_binary_bit_order.py``).

    Only OpenVINO's reference implementation (added in 2021) and its ``u1`` Constant API read
    most significant bit first; nnefx follows the files and the plugins.
    """
    bits = np.unpackbits(np.asarray(data, dtype=np.uint8), bitorder="little")
    return bits[:count].astype(np.uint8)


def pack_binary_filter(bits: np.ndarray) -> bytes:
    """Pack 0/1 (or boolean) values as a BinaryConvolution filter: the inverse of
    :func:`unpack_binary_filter` (least significant bit first, zero bits after the end)."""
    return np.packbits(np.asarray(bits, dtype=bool).reshape(-1), bitorder="little").tobytes()


def decode(data: np.ndarray, etype: str, count: int) -> np.ndarray:
    """Decode ``count`` elements of ``etype`` from uint8 ``data`` (little-endian)."""
    dt, bits = ELEMENT_TYPES[etype]
    if dt is not None:
        arr = np.frombuffer(data, dtype=dt, count=count)  # a view: memory-mapped weights are not copied
        if etype == "boolean":
            return arr != 0
        return arr.astype(arr.dtype.newbyteorder("="), copy=False)
    b = np.asarray(data, dtype=np.uint8)
    if etype == "bf16":
        u16 = np.frombuffer(b.tobytes(), dtype="<u2", count=count).astype(np.uint32)
        return (u16 << 16).view(np.float32)
    if etype == "u1":
        # OpenVINO's u1 element order is most significant bit first: element i is bit 7 - i % 8
        # of byte i // 8.  BinaryConvolution filters are the exception (unpack_binary_filter).
        return np.unpackbits(b, bitorder="big")[:count].astype(np.uint8)
    # u4 / i4: element i is the low nibble of byte i // 2 when i is even, the high one when odd.
    lo = b & 0x0F
    hi = b >> 4
    vals = np.stack([lo, hi], axis=1).reshape(-1)[:count]
    if etype == "i4":
        return np.where(vals >= 8, vals.astype(np.int16) - 16, vals).astype(np.int8)
    return vals.astype(np.uint8)
