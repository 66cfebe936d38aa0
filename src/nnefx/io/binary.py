"""NNEF tensor files (``.dat``): reading and writing every header layout and item type.

Layouts (``/work/shared/spec/nnef-binary.md`` §2–§8):

* **final** (NNEF 1.0 … 1.0.5): a fixed 128-byte little-endian header, item-type codes 0–5
  (float, unsigned, quantized unsigned, quantized signed, signed, bool).  This is what
  :func:`write_tensor` writes by default, byte-identical to the official ``nnef`` package.
* **legacy** (1.0 – 1.0.2 files): the same 128 bytes, but integers are code 1 with a
  signedness word at offset 52, bools are code 1 with one bit, and quantized data is code
  16 (linear) / 17 (logarithmic) with float32 ``min``/``max`` at offsets 52/56.
* **provisional** (2017): a variable-length header ending with an optional
  quantization-algorithm string.

Why the reader is strict: a ``.dat`` file is untrusted input.  Every header field is
checked against the file size *before* anything is allocated, so a lying header gives an
:class:`~nnefx.diagnostics.NNEFXError` naming the file, the field and its value, never a
``MemoryError`` or a garbage array.  Large tensors are memory-mapped copy-on-write
(``mmap.ACCESS_COPY``): loading a model costs address space, not RAM, and a caller may
still modify the array without touching the file.

Quantized data is returned as the raw integer codes plus a ``quant`` dict describing what
the header says about it (since 1.0.3 only ``{"bits", "signed"}``; legacy and provisional
headers also carry the algorithm and its parameters).  :func:`dequantize` turns codes into
real values given a ``graph.quant`` entry.
"""

from __future__ import annotations

import mmap as _mmap
import os
import re
import stat
import struct
from collections.abc import Iterable
from enum import IntEnum
from typing import Any, BinaryIO

import numpy as np

from ..diagnostics import Location, NNEFXError
from . import files, tract_items

HEADER_SIZE = 128
MAX_RANK = 8
MAGIC = b"\x4e\xef"
#: Files with at least this many bytes are memory-mapped instead of read.
MMAP_THRESHOLD = 1 << 16
_U32_MAX = (1 << 32) - 1
#: Refuse to decode a provisional quantization string longer than this.
_MAX_QUANT_STRING = 4096


class ItemType(IntEnum):
    """Khronos item-type codes (low 16 bits of the header word at offset 48)."""

    FLOAT = 0
    UINT = 1
    QUINT = 2
    QINT = 3
    INT = 4
    BOOL = 5
    #: 1.0 – 1.0.2 only: linearly / logarithmically quantized, float32 min/max parameters.
    LEGACY_LINEAR = 16
    LEGACY_LOG = 17


_ITEM_NAMES = {"float": ItemType.FLOAT, "uint": ItemType.UINT, "quint": ItemType.QUINT,
               "qint": ItemType.QINT, "int": ItemType.INT, "bool": ItemType.BOOL}

#: Provisional data-type byte: 0 float, 1 quantized (unsigned), 2 signed int, 3 unsigned int.
_PROV_CODES = {0: ItemType.FLOAT, 1: ItemType.QUINT, 2: ItemType.INT, 3: ItemType.UINT}
_PROV_CODES_INV = {ItemType.FLOAT: 0, ItemType.QUINT: 1, ItemType.INT: 2, ItemType.UINT: 3,
                   ItemType.BOOL: 3}


def _err(message: str, file: str | None, field: str) -> NNEFXError:
    return NNEFXError(message, Location(file, field=field))


# --------------------------------------------------------------------------------------------
# dtype <-> item type


def item_type_of(dtype: np.dtype) -> tuple[ItemType, int]:
    """The (item type, bits) the official tools write for a numpy dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return ItemType.BOOL, 1
    if dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        return ItemType.FLOAT, dtype.itemsize * 8
    if dtype.kind == "i" and dtype.itemsize in (1, 2, 4, 8):
        return ItemType.INT, dtype.itemsize * 8
    if dtype.kind == "u" and dtype.itemsize in (1, 2, 4, 8):
        return ItemType.UINT, dtype.itemsize * 8
    raise NNEFXError(f"numpy dtype '{dtype}' cannot be stored in an NNEF tensor file "
                     "(supported: float16/32/64, int8-64, uint8-64, bool)")


def _int_dtype(bits: int, signed: bool) -> np.dtype:
    """The smallest little-endian numpy integer dtype holding ``bits``-bit items."""
    for size in (1, 2, 4, 8):
        if bits <= size * 8:
            return np.dtype(("<i" if signed else "<u") + str(size))
    raise AssertionError(bits)


def nnef_dtype_of(item_type: ItemType) -> str:
    """The NNEF data type a stored item type belongs to (spec 5.2.1)."""
    if item_type in (ItemType.FLOAT, ItemType.QUINT, ItemType.QINT, ItemType.LEGACY_LINEAR,
                     ItemType.LEGACY_LOG):
        return "scalar"
    if item_type in (ItemType.UINT, ItemType.INT):
        return "integer"
    return "logical"


# --------------------------------------------------------------------------------------------
# header


class Header:
    """A decoded header: where the data is and how to interpret it."""

    __slots__ = ("layout", "version", "data_offset", "data_length", "shape", "bits", "item_type",
                 "quant", "vendor_type")

    def __init__(self, layout: str, version: tuple[int, int], data_offset: int, data_length: int,
                 shape: tuple[int, ...], bits: int, item_type: ItemType, quant: dict[str, Any] | None,
                 vendor_type: int = 0):
        #: tract's vendor item type (layout ``"tract"``, see :mod:`nnefx.io.tract_items`)
        self.vendor_type = vendor_type
        self.layout = layout
        self.version = version
        self.data_offset = data_offset
        self.data_length = data_length
        self.shape = shape
        self.bits = bits
        self.item_type = item_type
        self.quant = quant

    @property
    def volume(self) -> int:
        v = 1
        for d in self.shape:
            v *= d
        return v

    @property
    def nnef_dtype(self) -> str:
        return nnef_dtype_of(self.item_type)

    @property
    def numpy_dtype(self) -> np.dtype:
        t = self.item_type
        if t == ItemType.BOOL:
            return np.dtype(np.bool_)
        if t == ItemType.FLOAT:
            return np.dtype("<f" + str(self.bits // 8))
        signed = t in (ItemType.INT, ItemType.QINT)
        return _int_dtype(self.bits, signed)


def _check_bits(item_type: ItemType, bits: int, file: str | None) -> None:
    if item_type == ItemType.FLOAT:
        ok = bits in (16, 32, 64)
        need = "16, 32 or 64"
    elif item_type == ItemType.BOOL:
        ok = bits in (1, 8)
        need = "1 or 8"
    else:
        ok = 1 <= bits <= 64
        need = "1 to 64"
    if not ok:
        raise _err(f"bits_per_item is {bits}, but item type {item_type.name.lower()} ({int(item_type)}) "
                   f"needs {need}", file, "bits_per_item")


def _check_shape(extents: Iterable[int], file: str | None) -> tuple[int, ...]:
    """The stored shape.  An extent of 0 is read (an empty tensor, no data bytes): the official
    tools write and read such files, though the specification's ``variable`` requires positive
    extents (NNEF spec §4.1), which the front-end still checks for declared shapes."""
    return tuple(int(e) for e in extents)


def _check_length(header: Header, file: str | None) -> None:
    volume = header.volume
    need = (volume * header.bits + 7) // 8
    if header.data_length != need:
        if need > _U32_MAX:
            raise _err(f"extents {list(header.shape)} hold {volume} items of {header.bits} bits "
                       f"({need} bytes), more than a tensor file can describe", file, "extents")
        raise _err(f"data_length is {header.data_length}, but shape {list(header.shape)} of "
                   f"{header.bits}-bit items needs {need} bytes", file, "data_length")


def _u32(buf: memoryview, offset: int) -> int:
    return struct.unpack_from("<I", buf, offset)[0]


def parse_header(buf: memoryview, file: str | None = None, *, strict: bool = False) -> Header:
    """Decode and validate the header at the start of ``buf`` (the whole file's bytes).

    Every size is checked against ``len(buf)`` here, so callers can slice data safely.
    With ``strict`` non-zero extents beyond the rank and non-zero reserved bytes are errors
    (by default they are ignored, as the official readers do).
    """
    size = len(buf)
    if size < 4:
        raise _err(f"file has only {size} bytes; not an NNEF tensor file", file, "magic")
    if bytes(buf[0:2]) != MAGIC:
        raise _err(f"magic is {bytes(buf[0:2]).hex(' ').upper() or '-'}, expected 4E EF; "
                   "not an NNEF tensor file", file, "magic")
    version = (buf[2], buf[3])
    if version != (1, 0):
        raise _err(f"version is {version[0]}.{version[1]}; only tensor file version 1.0 exists",
                   file, "version")
    if size < 12:
        raise _err(f"file has only {size} bytes; the header is truncated", file, "header")
    first, rank = _u32(buf, 4), _u32(buf, 8)
    if size >= HEADER_SIZE and first + HEADER_SIZE == size:
        return _parse_final(buf, file, strict)
    if rank <= MAX_RANK and size >= 16 + 4 * rank:
        # A final header has zeros where a provisional one has its bits-per-item byte
        # (unused extents), which tells the two apart when the sizes happen to agree.
        bits, qlen = struct.unpack_from("<BH", buf, 13 + 4 * rank)
        if bits and first == 16 + 4 * rank + qlen and first <= size:
            return _parse_provisional(buf, file)
    if size < HEADER_SIZE:
        raise _err(f"file has only {size} bytes, shorter than the 128-byte header", file, "header")
    return _parse_final(buf, file, strict)


def _parse_final(buf: memoryview, file: str | None, strict: bool) -> Header:
    size = len(buf)
    data_length, rank = _u32(buf, 4), _u32(buf, 8)
    if rank > MAX_RANK:
        raise _err(f"rank is {rank}; at most {MAX_RANK} is allowed", file, "rank")
    extents = struct.unpack_from("<8I", buf, 12)
    shape = _check_shape(extents[:rank], file)
    if strict:
        for i in range(rank, MAX_RANK):
            if extents[i]:
                raise _err(f"extents[{i}] is {extents[i]} beyond rank {rank}; must be 0", file,
                           f"extents[{i}]")
    bits, code = _u32(buf, 44), _u32(buf, 48)
    vendor, type_code = code >> 16, code & 0xFFFF
    if vendor == tract_items.VENDOR:
        tract_items.check(type_code, bits, shape, data_length, size - HEADER_SIZE, file)
        return Header("tract", (1, 0), HEADER_SIZE, data_length, shape, bits, ItemType.FLOAT, None, type_code)
    if vendor:
        raise _err(f"item_type 0x{code:08X} is vendor-specific (vendor 0x{vendor:04X}); only Khronos "
                   "item types are supported", file, "item_type")
    param0 = _u32(buf, 52)
    quant: dict[str, Any] | None = None
    if type_code in (256, 257):
        raise _err(f"item_type is {type_code} (0x{type_code:X}): the NNEF 1.0.3 misprint of a binary "
                   f"code; write {type_code - 252} instead", file, "item_type")
    try:
        item_type = ItemType(type_code)
    except ValueError:
        raise _err(f"item_type is {type_code}; known codes are 0-5 (and legacy 16, 17)", file,
                   "item_type") from None
    if item_type == ItemType.UINT and bits == 1:
        item_type = ItemType.BOOL            # 1.0 - 1.0.2 stored bools this way
    elif item_type == ItemType.UINT and param0 != 0:
        item_type = ItemType.INT             # 1.0 - 1.0.2 signedness flag
    _check_bits(item_type, bits, file)
    if item_type in (ItemType.QUINT, ItemType.QINT):
        quant = {"bits": bits, "signed": item_type == ItemType.QINT}
    elif item_type in (ItemType.LEGACY_LINEAR, ItemType.LEGACY_LOG):
        lo, hi = struct.unpack_from("<2f", buf, 52)
        if not (np.isfinite(lo) and np.isfinite(hi)) or not lo < hi:
            raise _err(f"quantization range min={lo}, max={hi} is not a finite increasing range", file,
                       "parameters")
        if item_type == ItemType.LEGACY_LOG:
            if not (lo == 0.0 or lo == -hi):
                raise _err(f"logarithmic quantization needs min = 0 or min = -max, got min={lo}, "
                           f"max={hi}", file, "parameters")
            quant = {"op_name": "logarithmic_quantize", "max": float(hi), "bits": bits,
                     "signed": lo != 0.0}
        else:
            quant = {"op_name": "linear_quantize", "min": float(lo), "max": float(hi), "bits": bits}
    if strict and any(buf[84:128]):
        raise _err("reserved bytes 84-127 are not zero", file, "reserved")
    header = Header("final", (1, 0), HEADER_SIZE, data_length, shape, bits, item_type, quant)
    _check_length(header, file)
    available = size - HEADER_SIZE
    if available < data_length:
        raise _err(f"file is truncated: header says {data_length} data bytes, file has {available}",
                   file, "data_length")
    if available > data_length:
        raise _err(f"{available - data_length} bytes of trailing garbage after the {data_length} data "
                   "bytes", file, "data")
    return header


_QUANT_ARG = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([^,]+?)\s*(?:,|$)")


def _parse_quant_string(text: str, file: str | None) -> dict[str, Any]:
    """Parse ``name(key = literal, ...)`` from a provisional header (numbers, bools, strings)."""
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*", text, re.S)
    if not m:
        raise _err(f"quantization string {text!r} is not of the form name(key = value, ...)", file,
                   "quantization")
    result: dict[str, Any] = {"op_name": m.group(1)}
    args = m.group(2).strip()
    pos = 0
    while pos < len(args):
        am = _QUANT_ARG.match(args, pos)
        if not am or am.end() == pos:
            raise _err(f"cannot read the arguments of quantization string {text!r}", file, "quantization")
        key, raw = am.group(1), am.group(2)
        if raw in ("true", "false"):
            value: Any = raw == "true"
        elif len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            value = raw[1:-1]
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    raise _err(f"argument {key} = {raw!r} of the quantization string is not a literal",
                               file, "quantization") from None
        result[key] = value
        pos = am.end()
    return result


def _parse_provisional(buf: memoryview, file: str | None) -> Header:
    size = len(buf)
    offset, rank = _u32(buf, 4), _u32(buf, 8)
    shape = _check_shape(struct.unpack_from(f"<{rank}I", buf, 12), file)
    pos = 12 + 4 * rank
    code, bits, qlen = struct.unpack_from("<BBH", buf, pos)
    if code not in _PROV_CODES:
        raise _err(f"data type byte is {code}; the provisional format knows 0-3", file, "item_type")
    item_type = _PROV_CODES[code]
    if item_type == ItemType.UINT and bits == 1:
        item_type = ItemType.BOOL
    _check_bits(item_type, bits, file)
    quant: dict[str, Any] | None = None
    if qlen:
        if qlen > _MAX_QUANT_STRING:
            raise _err(f"quantization string length {qlen} is absurd", file, "quantization")
        try:
            text = bytes(buf[pos + 4:pos + 4 + qlen]).decode("ascii")
        except UnicodeDecodeError:
            raise _err("quantization string is not ASCII", file, "quantization") from None
        quant = _parse_quant_string(text, file)
        quant.setdefault("bits", bits)
    elif item_type == ItemType.QUINT:
        quant = {"bits": bits, "signed": False}
    header = Header("provisional", (1, 0), offset, 0, shape, bits, item_type, quant)
    header.data_length = (header.volume * bits + 7) // 8
    available = size - offset
    if available < header.data_length:
        raise _err(f"file is truncated: shape {list(shape)} needs {header.data_length} data bytes, "
                   f"file has {available}", file, "data")
    if available > header.data_length:
        raise _err(f"{available - header.data_length} bytes of trailing garbage after the data", file,
                   "data")
    return header


# --------------------------------------------------------------------------------------------
# data


#: Items per step when (un)packing odd widths: bounds the 64-byte-per-item scratch space
#: to 4 MiB.  A multiple of 8, so every full chunk ends on a byte boundary.
_CHUNK = 1 << 16


def _unpack_items(raw: np.ndarray, count: int, bits: int, signed: bool) -> np.ndarray:
    """Decode a continuous MSB-first stream of ``bits``-bit items (any width 1-64)."""
    out = np.empty(count, dtype=_int_dtype(bits, signed))
    for start in range(0, count, _CHUNK):
        n = min(_CHUNK, count - start)
        first_bit = start * bits
        byte0, skip = divmod(first_bit, 8)
        nbytes = (skip + n * bits + 7) // 8
        stream = np.unpackbits(raw[byte0:byte0 + nbytes])[skip:skip + n * bits].reshape(n, bits)
        wide = np.zeros((n, 64), dtype=np.uint8)
        wide[:, 64 - bits:] = stream
        values = np.packbits(wide, axis=1).view(">u8").ravel().astype(np.uint64)
        if signed:
            signed_values = values.view(np.int64).copy()
            if bits < 64:
                signed_values -= ((signed_values >> (bits - 1)) & 1) << bits
            out[start:start + n] = signed_values
        else:
            out[start:start + n] = values
    return out


def _pack_items(values: np.ndarray, bits: int) -> bytes:
    """Encode integers as a continuous MSB-first stream of ``bits``-bit items."""
    flat = values.ravel()
    parts: list[bytes] = []
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start:start + _CHUNK].astype(np.int64).view(np.uint64).astype(">u8")
        bitrows = np.unpackbits(chunk.view(np.uint8).reshape(-1, 8), axis=1)[:, 64 - bits:]
        parts.append(np.packbits(bitrows.ravel()).tobytes())
    return b"".join(parts)


def decode_data(buf: memoryview | bytes | bytearray | _mmap.mmap, header: Header,
                file: str | None = None) -> np.ndarray:
    """The tensor stored in ``buf`` (the whole file) as described by ``header``.

    Byte-aligned items are a zero-copy ``np.frombuffer`` view of ``buf`` (an mmap stays
    mapped as long as the array lives); bit-packed items are unpacked into a new array.
    """
    if header.layout == "tract":
        return tract_items.decode(buf, header.data_offset, header.vendor_type, header.shape, file)
    count = header.volume
    start = header.data_offset
    t, bits = header.item_type, header.bits
    if t == ItemType.BOOL:
        raw = np.frombuffer(buf, dtype=np.uint8, count=header.data_length, offset=start)
        if bits == 8:
            data = raw != 0
        else:
            data = np.unpackbits(raw, count=count).view(np.bool_)
    elif t == ItemType.FLOAT or bits in (8, 16, 32, 64):
        data = np.frombuffer(buf, dtype=header.numpy_dtype, count=count, offset=start)
    else:
        raw = np.frombuffer(buf, dtype=np.uint8, count=header.data_length, offset=start)
        data = _unpack_items(raw, count, bits, t in (ItemType.INT, ItemType.QINT))
    return data.reshape(header.shape)


# --------------------------------------------------------------------------------------------
# public API: reading


def _open_buffer(path: str, mmap: bool) -> memoryview | _mmap.mmap:
    f = open_regular(path)
    with f:
        size = os.fstat(f.fileno()).st_size
        if mmap and size >= MMAP_THRESHOLD:
            # ACCESS_COPY: pages stay backed by the file until written; writes stay private.
            return _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)
        buf = alloc_buffer(size)
        got = f.readinto(buf)
        if got != size:
            raise _err(f"read {got} of {size} bytes", path, "file")
        return buf


def open_regular(path: str) -> BinaryIO:
    """Open ``path`` for reading, refusing anything but a regular file.

    ``O_NONBLOCK`` keeps a FIFO planted in a model folder from blocking the loader forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise _err(f"cannot open: {exc.strerror or exc}", path, "file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _err("not a regular file", path, "file")
    return os.fdopen(fd, "rb")


def alloc_buffer(size: int) -> memoryview:
    """A writable, uninitialised byte buffer (``bytearray(n)`` would zero-fill it first)."""
    return memoryview(np.empty(size, dtype=np.uint8))


def read_tensor(source: str | os.PathLike | bytes | bytearray | memoryview | BinaryIO, *,
                mmap: bool = True, strict: bool = False, name: str | None = None
                ) -> tuple[np.ndarray, dict[str, Any] | None]:
    """Read one tensor file; returns ``(array, quant)``.

    ``source`` is a path, the file's bytes, or a binary file object (read to its end).
    ``quant`` is None for plain data, else what the header says about quantization (see the
    module docstring); the array then holds the raw integer codes.  ``name`` is the file name
    used in error locations when ``source`` is not a path.  Big files are memory-mapped
    copy-on-write unless ``mmap=False``.
    """
    if isinstance(source, (str, os.PathLike)):
        file = name or os.fspath(source)
        buf = _open_buffer(os.fspath(source), mmap)
    elif isinstance(source, (bytes, bytearray, memoryview, _mmap.mmap)):
        file, buf = name, source
    else:
        file = name or getattr(source, "name", None)
        file = file if isinstance(file, str) else None
        try:
            content = source.read()
        except (OSError, ValueError) as exc:
            raise _err(f"cannot read tensor file: {exc}", file, "file") from None
        if not isinstance(content, (bytes, bytearray)):
            raise NNEFXError("tensor files must be opened in binary mode", Location(file, field="file"))
        buf = content
    view = memoryview(buf)
    header = parse_header(view, file, strict=strict)
    return decode_data(buf, header, file), (dict(header.quant) if header.quant else None)


def read_header(source: str | os.PathLike | bytes | bytearray | memoryview, *, name: str | None = None
                ) -> Header:
    """Validate a tensor file and return its header without decoding the data."""
    if isinstance(source, (str, os.PathLike)):
        return parse_header(memoryview(_open_buffer(os.fspath(source), True)), name or os.fspath(source))
    return parse_header(memoryview(source), name)


# --------------------------------------------------------------------------------------------
# public API: writing


def _resolve_item_type(array: np.ndarray, item_type: Any, quant: Any, file: str | None
                       ) -> tuple[ItemType, int]:
    if item_type is None:
        try:
            base, bits = item_type_of(array.dtype)
        except NNEFXError as exc:
            exc.location = Location(file, field="dtype")
            raise
    else:
        if isinstance(item_type, str):
            if item_type.lower() not in _ITEM_NAMES:
                raise _err(f"unknown item type '{item_type}' (use {', '.join(_ITEM_NAMES)})", file,
                           "item_type")
            base = _ITEM_NAMES[item_type.lower()]
        else:
            try:
                base = ItemType(int(item_type))
            except ValueError:
                raise _err(f"unknown item type {item_type}", file, "item_type") from None
        bits = 1 if base == ItemType.BOOL else (
            array.dtype.itemsize * 8 if array.dtype != np.bool_ else 8)
    if quant:
        if base == ItemType.INT:
            base = ItemType.QINT
        elif base == ItemType.UINT:
            base = ItemType.QUINT
        elif base not in (ItemType.QINT, ItemType.QUINT, ItemType.LEGACY_LINEAR, ItemType.LEGACY_LOG):
            raise _err(f"a quantized tensor must hold integer codes, not {array.dtype}", file, "dtype")
    return base, bits


def encode_tensor(array: Any, *, item_type: Any = None, bits: int | None = None, quant: Any = None,
                  version: tuple[int, int] = (1, 0), header: str = "final", file: str | None = None
                  ) -> list[bytes | memoryview]:
    """The bytes of a tensor file as chunks (header, data) ready to write without copying.

    ``header`` is ``"final"`` (default; what the official tools write), ``"legacy"`` (1.0 –
    1.0.2 codes: signed ints as code 1 + flag, bools as code 1, quantized as 16/17 with the
    ``min``/``max`` of ``quant``) or ``"provisional"`` (variable-length header; ``quant``'s
    algorithm is written as its string).
    """
    array = np.asarray(array)
    if array.ndim > MAX_RANK:
        raise _err(f"rank {array.ndim} exceeds the maximum of {MAX_RANK}", file, "rank")
    for i, e in enumerate(array.shape):
        if not 0 <= e <= _U32_MAX:
            raise _err(f"extent {e} of dimension {i} cannot be stored (must be 0 to 2^32-1)", file,
                       f"extents[{i}]")
    itype, default_bits = _resolve_item_type(array, item_type, quant, file)
    if header == "legacy" and itype in (ItemType.QINT, ItemType.QUINT) and isinstance(quant, dict):
        name = str(quant.get("op_name", "linear_quantize"))
        itype = ItemType.LEGACY_LOG if name.startswith("log") else ItemType.LEGACY_LINEAR
    bits = default_bits if bits is None else int(bits)
    _check_bits(itype, bits, file)
    if itype == ItemType.BOOL:
        data: bytes | memoryview = np.packbits(np.asarray(array, dtype=np.bool_)).data if bits == 1 \
            else np.ascontiguousarray(array, dtype=np.bool_).view(np.uint8).data
    elif itype == ItemType.FLOAT:
        data = np.ascontiguousarray(array, dtype=f"<f{bits // 8}").data
    else:
        if array.dtype.kind not in "iub":
            raise _err(f"item type {itype.name.lower()} needs integer data, got {array.dtype}", file, "dtype")
        # Legacy quantized codes (16/17) are unsigned bit patterns.
        signed = itype in (ItemType.INT, ItemType.QINT)
        lo = -(1 << (bits - 1)) if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        if array.size and (int(array.min()) < lo or int(array.max()) > hi):
            raise _err(f"values {int(array.min())}..{int(array.max())} do not fit {bits}-bit "
                       f"{'signed' if signed else 'unsigned'} items", file, "bits_per_item")
        if bits in (8, 16, 32, 64):
            data = np.ascontiguousarray(array, dtype=("<i" if signed else "<u") + str(bits // 8)).data
        else:
            data = _pack_items(np.asarray(array), bits)
    volume = int(np.prod(array.shape, dtype=object)) if array.ndim else 1
    data_length = (volume * bits + 7) // 8
    if data_length > _U32_MAX:
        raise _err(f"{data_length} data bytes exceed the 4 GiB limit of a tensor file", file, "data_length")
    if header == "provisional":
        return [_provisional_header(array.shape, itype, bits, quant, version, file), data]
    if header not in ("final", "legacy"):
        raise NNEFXError(f"unknown header layout '{header}' (final, legacy, provisional)")
    code, params = int(itype), b""
    if header == "legacy":
        if itype == ItemType.BOOL:
            if bits != 1:
                raise _err("legacy headers store bools as 1-bit items only", file, "bits_per_item")
            code = int(ItemType.UINT)
        elif itype == ItemType.INT:
            code, params = int(ItemType.UINT), struct.pack("<I", 1)
        elif itype in (ItemType.QINT, ItemType.QUINT):
            raise _err("legacy quantized headers need quant={'op_name', 'min', 'max'}", file, "parameters")
        elif itype in (ItemType.LEGACY_LINEAR, ItemType.LEGACY_LOG):
            assert isinstance(quant, dict)
            hi = float(quant["max"])
            lo = float(quant.get("min", -hi if quant.get("signed") else 0.0))
            params = struct.pack("<2f", lo, hi)
    elif itype in (ItemType.LEGACY_LINEAR, ItemType.LEGACY_LOG):
        raise _err("item types 16/17 exist only in legacy headers (header='legacy')", file, "item_type")
    head = bytearray(HEADER_SIZE)
    head[0:2] = MAGIC
    head[2], head[3] = version
    struct.pack_into("<II", head, 4, data_length, array.ndim)
    struct.pack_into(f"<{array.ndim}I", head, 12, *array.shape)
    struct.pack_into("<II", head, 44, bits, code)
    head[52:52 + len(params)] = params
    return [bytes(head), data]


def _quant_string(quant: Any) -> str:
    if not isinstance(quant, dict) or "op_name" not in quant:
        return ""
    args = []
    for key, value in quant.items():
        if key in ("op_name",):
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else (
            f"'{value}'" if isinstance(value, str) else repr(value))
        args.append(f"{key} = {text}")
    return f"{quant['op_name']}({', '.join(args)})"


def _provisional_header(shape: tuple[int, ...], itype: ItemType, bits: int, quant: Any,
                        version: tuple[int, int], file: str | None) -> bytes:
    if itype == ItemType.QINT:
        raise _err("the provisional format has no signed quantized type", file, "item_type")
    if itype not in _PROV_CODES_INV:
        raise _err(f"item type {itype.name.lower()} has no provisional code", file, "item_type")
    text = _quant_string(quant).encode("ascii") if itype == ItemType.QUINT else b""
    rank = len(shape)
    length = 16 + 4 * rank + len(text)
    return (MAGIC + bytes(version) + struct.pack(f"<II{rank}I", length, rank, *shape)
            + struct.pack("<BBH", _PROV_CODES_INV[itype], bits, len(text)) + text)


def write_tensor(target: str | os.PathLike | BinaryIO, array: Any, *, item_type: Any = None,
                 bits: int | None = None, quant: Any = None, version: tuple[int, int] = (1, 0),
                 header: str = "final") -> None:
    """Write ``array`` as a tensor file.

    With defaults the bytes equal what ``nnef.write_tensor`` writes for the same array.
    ``item_type`` (``"float"``, ``"uint"``, ``"int"``, ``"qint"``, ``"quint"``, ``"bool"`` or a
    code) and ``bits`` override the dtype-derived choice (e.g. 4-bit codes); a truthy
    ``quant`` stores integers as quantized codes.  Paths are written atomically: a temporary
    file beside the target, then ``os.replace``.
    """
    file = os.fspath(target) if isinstance(target, (str, os.PathLike)) else None
    chunks = encode_tensor(array, item_type=item_type, bits=bits, quant=quant, version=version,
                           header=header, file=file)
    if file is None:
        for chunk in chunks:
            target.write(chunk)  # type: ignore[union-attr]
        return
    write_atomic(file, chunks)


def write_atomic(path: str, chunks: Iterable[bytes | memoryview]) -> None:
    """Write ``chunks`` to ``path`` through a temporary file in the same folder + rename
    (the file gets the umask's permissions, or the replaced file's: :mod:`nnefx.io.files`)."""
    try:
        files.write_atomic(path, chunks)
    except OSError as exc:
        raise _err(f"cannot write: {exc.strerror or exc}", path, "file") from None


# --------------------------------------------------------------------------------------------
# dequantization


def dequantize(codes: np.ndarray, quant: dict[str, Any]) -> np.ndarray:
    """Real values (float32) of stored quantized codes, given a quantization entry.

    ``quant`` is a ``graph.quant`` entry (``op_name`` + parameters) or what a legacy /
    provisional header says.  Formulas: nnef-binary.md §4 and §7.  Per-channel parameter
    arrays align from dimension 0 (NNEF broadcasting).
    """
    name = quant.get("op_name")
    q = np.asarray(codes).astype(np.float64)

    def param(key: str, default: Any = None) -> np.ndarray:
        if key not in quant:
            if default is None:
                raise NNEFXError(f"quantization '{name}' lacks parameter '{key}'")
            return np.asarray(default, np.float64)
        value = np.asarray(quant[key], np.float64)
        if value.ndim and q.ndim:  # align from dimension 0
            value = value.reshape(value.shape + (1,) * (q.ndim - value.ndim))
        return value

    bits = int(quant.get("bits", 8))
    if name == "zero_point_linear_quantize":
        out = (q - param("zero_point", 0)) * param("scale")
    elif name in ("linear_quantize", "min_max_linear_quantize"):
        signed = bool(quant.get("signed", False))
        symmetric = bool(quant.get("symmetric", False))
        if signed:
            q = q + (2 ** (bits - 1) - int(symmetric))
        r = 2 ** bits - 1 - int(signed and symmetric)
        lo, hi = param("min"), param("max")
        out = q * (hi - lo) / r + lo
    elif name == "logarithmic_quantize":
        # Legacy mapping (nnef-binary.md §4): x = 2^(q + m - r), m = ceil(log2 max), r = 2^b - 1;
        # the all-zeros code stands for 0.  Signed codes keep the sign in the top bit.
        hi = float(quant["max"])
        signed = bool(quant.get("signed", False))
        mag_bits = bits - 1 if signed else bits
        r = 2 ** mag_bits - 1
        m = int(np.ceil(np.log2(hi)))
        qi = np.asarray(codes).astype(np.int64)
        sign = np.where((qi >> mag_bits) & 1, -1.0, 1.0) if signed else 1.0
        mag = (qi & r).astype(np.float64)
        out = np.where(mag == 0, 0.0, np.exp2(mag + m - r)) * sign
    else:
        raise NNEFXError(f"cannot dequantize with unknown algorithm '{name}'")
    return np.asarray(out, dtype=np.float32)
