"""tract's vendor item types in NNEF tensor files (vendor code ``'TR'``).

The standard 128-byte header with ``item_type_vendor = 0x5452`` (``'T' << 8 | 'R'``) marks
types NNEF lacks (tract ``nnef/src/tensors.rs``, ``read_tensor``):

* ``0x1000`` **string**: per item a little-endian u32 byte length then UTF-8 bytes.
  ``bits_per_item`` is ``0xFFFFFFFF``; tract's writer fills ``data_size_bytes`` with a
  meaningless number, so the items themselves say where the data ends.
* **block quantization** (``item_type & 0x2000`` or ``& 0x3000``, ``bits_per_item`` =
  ``0xFFFFFFFF``), a rank >= 2 tensor read as ``[M, K]`` with ``M`` the first extent and
  ``K`` the product of the others, ``K % 32 == 0`` (tract ``read_block_quant_value``):

  - ``0x3040`` Q4_0 in GGML's layout: per block of 32 values an f16 scale ``d`` then 16
    bytes; byte ``j`` holds value ``j`` in its low nibble and value ``j + 16`` in its high
    nibble; a value is ``(nibble - 8) * d`` (linalg ``block_quant/q4_0.rs``).
  - ``0x2040`` the older tract layout of Q4_0: the same, except the 32 nibbles are the
    values in order, low nibble first (tract ``tract_to_gguf_q4_0_packing`` converts it).
  - ``0x3080`` (and ``0x3081``, which tract's writer emits) Q8_1: per block an f16 scale
    ``d``, an f16 sum (unused), then 32 signed bytes; a value is ``q * d``.

Block-quantized tensors decode to their exact float32 values (an f16 scale times a small
integer is exact in float32); strings to a numpy array of Python ``str`` objects.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError

VENDOR = (ord("T") << 8) | ord("R")
STRING = 0x1000
Q4_0 = 0x3040
Q4_0_OLD = 0x2040
Q8_1 = (0x3080, 0x3081)
BLOCK = 32
#: (bytes per block, name) per block-quantized item type
_BLOCK_FORMATS = {Q4_0: (18, "Q4_0"), Q4_0_OLD: (18, "Q4_0 (older tract layout)"),
                  0x3080: (36, "Q8_1"), 0x3081: (36, "Q8_1")}
#: most string items / bytes one file may describe (files are hostile)
MAX_STRING_ITEMS = 1 << 24


def _err(message: str, file: str | None, field: str) -> NNEFXError:
    return NNEFXError(message, Location(file, field=field))


def describe(code: int) -> str:
    if code == STRING:
        return "string"
    fmt = _BLOCK_FORMATS.get(code)
    return fmt[1] if fmt else f"0x{code:04X}"


def check(code: int, bits: int, shape: tuple[int, ...], data_length: int, available: int,
          file: str | None) -> None:
    """Validate a tract-typed header against the file's size (raises a located error)."""
    if code == STRING:
        volume = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if volume > MAX_STRING_ITEMS:
            raise _err(f"string tensor of {volume} items is too large", file, "extents")
        if volume * 4 > available:
            raise _err(f"file is truncated: {volume} strings need at least {volume * 4} bytes, "
                       f"the file has {available}", file, "data")
        return
    fmt = _BLOCK_FORMATS.get(code)
    if fmt is None:
        raise _err(f"item_type 0x{code:04X} of vendor 'TR' is not a tract item type nnefx knows (string 0x1000, "
                   "Q4_0 0x3040 / 0x2040, Q8_1 0x3080)", file, "item_type")
    block_bytes, name = fmt
    if bits != 0xFFFFFFFF:
        raise _err(f"bits_per_item is {bits}; tract's block-quantized {name} has 0xFFFFFFFF", file, "bits_per_item")
    if len(shape) < 2:
        raise _err(f"a {name} tensor has rank >= 2 (read as [M, K]); this one has rank {len(shape)}", file, "rank")
    m, k = shape[0], int(np.prod(shape[1:], dtype=np.int64))
    if k % BLOCK:
        raise _err(f"{name} rows hold {k} values, not a multiple of the {BLOCK}-value block", file, "extents")
    need = m * (k // BLOCK) * block_bytes
    if data_length != need:
        raise _err(f"data_length is {data_length}, but {name} [{m}, {k}] needs {need} bytes "
                   f"({block_bytes} per block of {BLOCK})", file, "data_length")
    if available < need:
        raise _err(f"file is truncated: {name} [{m}, {k}] needs {need} data bytes, the file has {available}",
                   file, "data_length")
    if available > need:
        raise _err(f"{available - need} bytes of trailing garbage after the {need} data bytes", file, "data")


def decode(buf: Any, offset: int, code: int, shape: tuple[int, ...], file: str | None) -> np.ndarray:
    """The values of a tract-typed tensor whose header :func:`check` accepted."""
    raw = np.frombuffer(buf, dtype=np.uint8, offset=offset)
    if code == STRING:
        return _strings(raw, shape, file)
    m = shape[0]
    k = int(np.prod(shape[1:], dtype=np.int64))
    nblocks = m * (k // BLOCK)
    if code in Q8_1:
        blocks = raw[: nblocks * 36].reshape(nblocks, 36)
        d = blocks[:, 0:2].copy().view("<f2").astype(np.float32)
        q = blocks[:, 4:].view(np.int8).astype(np.float32)
        values = q * d
    else:
        blocks = raw[: nblocks * 18].reshape(nblocks, 18)
        d = blocks[:, 0:2].copy().view("<f2").astype(np.float32)
        qs = blocks[:, 2:]
        lo = (qs & 0x0F).astype(np.int8) - 8
        hi = (qs >> 4).astype(np.int8) - 8
        if code == Q4_0:       # byte j: value j (low nibble), value j + 16 (high nibble)
            codes = np.concatenate([lo, hi], axis=1)
        else:                  # older layout: the nibbles in order, low first
            codes = np.stack([lo, hi], axis=2).reshape(nblocks, BLOCK)
        values = codes.astype(np.float32) * d
    return values.reshape(shape)


def _strings(raw: np.ndarray, shape: tuple[int, ...], file: str | None) -> np.ndarray:
    volume = int(np.prod(shape, dtype=np.int64)) if shape else 1
    data = raw.tobytes()
    out = np.empty(volume, dtype=object)
    pos = 0
    for i in range(volume):
        if pos + 4 > len(data):
            raise _err(f"file is truncated in string item {i}", file, "data")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + n > len(data):
            raise _err(f"string item {i} claims {n} bytes, past the end of the file", file, "data")
        try:
            out[i] = data[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _err(f"string item {i} is not UTF-8 (byte {exc.start})", file, "data") from None
        pos += n
    if pos != len(data):
        raise _err(f"{len(data) - pos} bytes of trailing garbage after the {volume} strings", file, "data")
    return out.reshape(shape)


def encode_strings(values: Any) -> bytes:
    """The header and data of a string tensor as tract writes it (tests, writers)."""
    arr = np.asarray(values, dtype=object)
    header = bytearray(128)
    header[0:4] = b"\x4e\xef\x01\x00"
    struct.pack_into("<II", header, 4, 24 * arr.size, arr.ndim)
    struct.pack_into(f"<{arr.ndim}I", header, 12, *arr.shape)
    struct.pack_into("<IHH", header, 44, 0xFFFFFFFF, STRING, VENDOR)
    body = b"".join(struct.pack("<I", len(s.encode())) + s.encode() for s in arr.ravel())
    return bytes(header) + body


def encode_block_quant(codes: np.ndarray, scales: np.ndarray, shape: tuple[int, ...], code: int = Q4_0) -> bytes:
    """A Q4_0 / Q8_1 file from integer codes (``[M*K]`` in value order; Q4_0 codes 0..15 with
    zero point 8, Q8_1 codes -128..127) and one scale per block (tests, writers)."""
    codes = np.asarray(codes).reshape(-1, BLOCK)
    d = np.asarray(scales, dtype="<f2").reshape(-1, 1).view(np.uint8)
    if code in Q8_1:
        body = np.concatenate([d, np.zeros_like(d), codes.astype(np.int8).view(np.uint8)], axis=1)
    elif code == Q4_0:
        c = codes.astype(np.uint8)
        body = np.concatenate([d, (c[:, :16] | (c[:, 16:] << 4)).astype(np.uint8)], axis=1)
    else:
        c = codes.astype(np.uint8)
        body = np.concatenate([d, (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)], axis=1)
    data = body.astype(np.uint8).tobytes()
    header = bytearray(128)
    header[0:4] = b"\x4e\xef\x01\x00"
    struct.pack_into("<II", header, 4, len(data), len(shape))
    struct.pack_into(f"<{len(shape)}I", header, 12, *shape)
    struct.pack_into("<IHH", header, 44, 0xFFFFFFFF, code, VENDOR)
    return bytes(header) + data
