"""The CVM params binary: a list of named int32/int8 NDArrays (all integers little-endian).

Layout: ``u64 list magic, u64 reserved, u64 N, N x (u64 len, name bytes), u64 N,
N x NDArray``; an NDArray is ``u64 magic, u64 reserved, i32 device_type, i32 device_id,
i32 ndim, u8 code, u8 bits, u16 lanes, i64 shape[ndim], i64 nbytes, data``.

Every count and size is checked against the bytes that are really there before anything is
allocated, so a lying header gives an error naming the field, never a huge allocation.
Bytes after the last array are ignored: the runtime's own ``save_param_dict`` can leave a
stale tail from an earlier, larger save.
"""

from __future__ import annotations

import struct

import numpy as np

from ...diagnostics import Location, NNEFXError

LIST_MAGIC = 0xF7E58D4F05049CB7
ARRAY_MAGIC = 0xDD5E40F096B4A13F
MAX_NDIM = 32


class _Reader:
    def __init__(self, data: bytes, file: str | None):
        self.data = data
        self.pos = 0
        self.file = file

    def fail(self, field: str, message: str) -> NNEFXError:
        return NNEFXError(f"{message} (at byte {self.pos})", Location(self.file, field=field))

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(field, f"truncated params file: needs {n} bytes, "
                                   f"{len(self.data) - self.pos} left")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u64(self, field: str) -> int:
        return struct.unpack("<Q", self.take(8, field))[0]

    def i64(self, field: str) -> int:
        return struct.unpack("<q", self.take(8, field))[0]

    def i32(self, field: str) -> int:
        return struct.unpack("<i", self.take(4, field))[0]

    def left(self) -> int:
        return len(self.data) - self.pos


def read_params(data: bytes, file: str | None = None) -> dict[str, np.ndarray]:
    """Decode a params blob into ``{name: int32 array}`` (int8 arrays are sign-extended)."""
    r = _Reader(data, file)
    if r.u64("magic") != LIST_MAGIC:
        raise NNEFXError("not a CVM params file (bad list magic)", Location(file, field="magic"))
    r.u64("reserved")
    n = r.u64("names.count")
    if n > r.left() // 8:
        raise r.fail("names.count", f"claims {n} names, more than the file can hold")
    names = []
    for i in range(n):
        length = r.u64(f"names[{i}].length")
        raw = r.take(length, f"names[{i}]")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise r.fail(f"names[{i}]", "name is not valid UTF-8") from None
    count = r.u64("arrays.count")
    if count != n:
        raise r.fail("arrays.count", f"{count} arrays for {n} names")
    result: dict[str, np.ndarray] = {}
    for i, name in enumerate(names):
        f = f"arrays[{i}] '{name}'"
        if r.u64(f + ".magic") != ARRAY_MAGIC:
            raise r.fail(f + ".magic", "bad array magic")
        r.u64(f + ".reserved")
        device_type, device_id = r.i32(f + ".device_type"), r.i32(f + ".device_id")
        if device_type != 1 or device_id != 0:
            raise r.fail(f + ".device", f"array must be on the CPU (device {device_type}:{device_id})")
        ndim = r.i32(f + ".ndim")
        if not 0 <= ndim <= MAX_NDIM:
            raise r.fail(f + ".ndim", f"invalid rank {ndim}")
        code, bits, lanes = struct.unpack("<BBH", r.take(4, f + ".dtype"))
        if code != 0 or bits not in (8, 32) or lanes != 1:
            raise r.fail(f + ".dtype", f"unsupported data type (code {code}, bits {bits}, lanes {lanes}); "
                                       "only int8 and int32 are allowed")
        shape = tuple(r.i64(f"{f}.shape[{k}]") for k in range(ndim))
        if any(d < 0 for d in shape):
            raise r.fail(f + ".shape", f"negative dimension in {shape}")
        items = 1
        for d in shape:
            items *= d
        nbytes = r.i64(f + ".nbytes")
        if nbytes != items * bits // 8:
            raise r.fail(f + ".nbytes", f"size {nbytes} does not match shape {shape} x {bits // 8} bytes")
        raw = r.take(nbytes, f + ".data")
        arr = np.frombuffer(raw, dtype="<i1" if bits == 8 else "<i4").reshape(shape).astype(np.int32)
        if name in result:
            raise r.fail(f, f"parameter '{name}' appears twice")
        result[name] = arr
    return result


def write_params(params: dict[str, np.ndarray]) -> bytes:
    """Encode ``{name: int array}`` as int32 NDArrays (used by tests and the benchmark builder)."""
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(params))]
    for name in params:
        raw = name.encode("utf-8")
        out.append(struct.pack("<Q", len(raw)) + raw)
    out.append(struct.pack("<Q", len(params)))
    for arr in params.values():
        a = np.ascontiguousarray(arr, dtype="<i4")
        out.append(struct.pack("<QQiii", ARRAY_MAGIC, 0, 1, 0, a.ndim) + struct.pack("<BBH", 0, 32, 1))
        out.append(b"".join(struct.pack("<q", d) for d in a.shape))
        out.append(struct.pack("<q", a.nbytes) + a.tobytes())
    return b"".join(out)
