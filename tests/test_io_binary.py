"""Tensor files: byte identity with the official ``nnef`` package, every layout, validation."""

from __future__ import annotations

import io
import os
import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnefx import NNEFXError
from nnefx.io.binary import dequantize, encode_tensor, read_header, read_tensor, write_tensor

nnef = pytest.importorskip("nnef")

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io")

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def ours(array, **kw) -> bytes:
    return b"".join(bytes(c) for c in encode_tensor(array, **kw))


def theirs(array, quantized=False) -> bytes:
    buf = io.BytesIO()
    # The official writer needs a real file (it calls tofile); go through a temp file.
    import tempfile

    with tempfile.TemporaryFile() as f:
        nnef.write_tensor(f, array, quantized=quantized)
        f.seek(0)
        buf.write(f.read())
    return buf.getvalue()


def peer_read(path):
    with open(path, "rb") as f:
        return nnef.read_tensor(f, return_quantization=True)


# min_side=0: zero-extent tensors (volume 0, no data bytes) are files the official package
# writes and reads; nnefx must agree byte for byte.
arrays = st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))


@settings(max_examples=40, deadline=None)
@given(arrays, st.booleans())
def test_writes_are_byte_identical_to_the_official_writer(array, quantized):
    if quantized and array.dtype.kind not in "iu":
        quantized = False
    assert ours(array, quant=quantized) == theirs(array, quantized)


@settings(max_examples=40, deadline=None)
@given(arrays)
def test_reads_of_official_files_give_identical_arrays(tmp_path_factory, array):
    path = str(tmp_path_factory.mktemp("t") / "x.dat")
    with open(path, "wb") as f:
        nnef.write_tensor(f, array)
    got, quant = read_tensor(path)
    want, _ = peer_read(path)
    assert quant is None
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (0, 4), (3, 0), (2, 0, 3), (1, 1, 1, 1, 1, 1, 1, 0)])
def test_zero_extent_tensors_match_the_official_package(tmp_path, dtype, shape):
    array = np.zeros(shape, dtype)
    data = ours(array)
    assert data == theirs(array)
    assert len(data) == 128 and data[4:8] == b"\0\0\0\0"  # header only, data_length 0
    path = tmp_path / "z.dat"
    path.write_bytes(data)
    for source in (str(path), data):
        got, quant = read_tensor(source)
        assert quant is None and got.shape == shape and got.dtype == array.dtype
    want, _ = peer_read(str(path))
    assert want.shape == shape and want.dtype == array.dtype


@pytest.mark.parametrize("kw", [dict(item_type="quint", bits=4), dict(item_type="bool", bits=1),
                                dict(header="legacy"), dict(header="provisional")])
def test_zero_extent_tensors_in_every_layout_round_trip(kw):
    dtype = np.uint8 if kw.get("item_type") == "quint" else np.bool_ if "item_type" in kw else np.int32
    got, _ = read_tensor(ours(np.zeros((2, 0, 5), dtype), **kw))
    assert got.shape == (2, 0, 5) and got.size == 0


def test_zero_extent_file_with_data_bytes_is_refused():
    data = bytearray(ours(np.zeros((0, 4), np.float32)))
    struct.pack_into("<I", data, 4, 4)
    with pytest.raises(NNEFXError, match="needs 0 bytes") as info:
        read_tensor(bytes(data) + b"\0" * 4, name="z.dat")
    assert info.value.location.field == "data_length"


def test_worked_examples_from_the_spec():
    data = ours(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert len(data) == 152
    assert data[:12].hex() == "4eef0100" "18000000" "02000000"
    assert data[12:20].hex() == "02000000" "03000000"
    assert data[44:52].hex() == "20000000" "00000000"
    assert data[128:136].hex() == "00000000" "0000803f"
    boolean = ours(np.array([1, 0, 1, 1, 0, 0, 0, 0, 1], bool))
    assert len(boolean) == 130 and boolean[128:].hex() == "b080" and boolean[48] == 5
    q = ours(np.array([-1, 2], np.int8), quant=True)
    assert q[44] == 8 and q[48] == 3 and q[128:].hex() == "ff02"
    assert read_tensor(q)[1] == {"bits": 8, "signed": True}


def test_large_files_are_memory_mapped_not_copied(tmp_path):
    path = tmp_path / "big.dat"
    array = np.arange(1 << 16, dtype=np.float32)
    write_tensor(path, array)
    got, _ = read_tensor(path)
    base = got
    while getattr(base, "base", None) is not None and not isinstance(base, memoryview):
        base = base.base
    import mmap

    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)
    got[0] = 42  # copy-on-write: the file is untouched
    assert read_tensor(path, mmap=False)[0][0] == 0
    np.testing.assert_array_equal(read_tensor(path, mmap=False)[0][1:], array[1:])


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 7, 12, 24, 33, 63, 64])
@pytest.mark.parametrize("signed", [True, False])
def test_sub_byte_and_odd_width_integers_round_trip(bits, signed):
    if bits == 1 and not signed:
        # 1.0 - 1.0.2 wrote bools as 1-bit code 1, so such a file reads as bool (as in Tools).
        got, _ = read_tensor(ours(np.array([1, 0, 1], np.uint8), item_type="uint", bits=1))
        assert got.dtype == np.bool_ and got.tolist() == [True, False, True]
        return
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    rng = random.Random(bits)
    values = [lo, hi] + [rng.randint(lo, hi) for _ in range(21)]
    array = np.array(values, dtype=np.int64 if signed else np.uint64)
    data = ours(array, item_type="int" if signed else "uint", bits=bits)
    assert len(data) == 128 + (len(values) * bits + 7) // 8
    got, _ = read_tensor(data)
    assert [int(v) for v in got] == values


def test_four_bit_packing_is_msb_first():
    data = ours(np.array([1, 2, 3, 15, 7], np.uint8), item_type="quint", bits=4)
    assert data[128:].hex() == "123f70"
    got, quant = read_tensor(data)
    assert got.tolist() == [1, 2, 3, 15, 7] and quant == {"bits": 4, "signed": False}


def test_values_that_do_not_fit_the_width_are_refused():
    with pytest.raises(NNEFXError, match="do not fit 4-bit"):
        ours(np.array([16], np.uint8), item_type="uint", bits=4)


@pytest.mark.parametrize("header", ["legacy", "provisional"])
@pytest.mark.parametrize("array", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                   np.array([-3, 4], np.int32), np.array([7, 9], np.uint16),
                                   np.array([True, False, True])])
def test_old_header_layouts_round_trip(header, array):
    got, quant = read_tensor(ours(array, header=header))
    assert got.dtype == array.dtype and quant is None
    np.testing.assert_array_equal(got, array)


def test_legacy_signed_integers_use_the_signedness_word():
    data = ours(np.array([-3, 4], np.int32), header="legacy")
    assert struct.unpack_from("<III", data, 44) == (32, 1, 1)
    # Old Python tools wrote the flag as float32 1.0: still non-zero, still signed.
    patched = bytearray(data)
    patched[52:56] = struct.pack("<f", 1.0)
    assert read_tensor(bytes(patched))[0].tolist() == [-3, 4]


def test_legacy_quantized_headers_carry_min_max():
    quant = {"op_name": "linear_quantize", "min": -1.0, "max": 1.0, "bits": 8}
    data = ours(np.array([0, 255], np.uint8), quant=quant, header="legacy")
    assert struct.unpack_from("<II2f", data, 44) == (8, 16, -1.0, 1.0)
    codes, got = read_tensor(data)
    assert got == quant
    np.testing.assert_allclose(dequantize(codes, got), [-1.0, 1.0])
    log = ours(np.array([0, 3], np.uint8), quant={"op_name": "logarithmic_quantize", "max": 4.0},
               item_type="uint", bits=2, header="legacy")
    codes, got = read_tensor(log)
    assert got["op_name"] == "logarithmic_quantize" and not got["signed"]
    # m = 2, r = 3: code 3 -> 2^(3+2-3) = 4, code 0 -> 0
    np.testing.assert_allclose(dequantize(codes, got), [0.0, 4.0])


def test_provisional_header_with_quantization_string():
    quant = {"op_name": "linear_quantize", "min": -1.0, "max": 1.0, "bits": 8}
    data = ours(np.array([[0, 128, 255]], np.uint8), quant=quant, header="provisional")
    text = b"linear_quantize(min = -1.0, max = 1.0, bits = 8)"
    assert struct.unpack_from("<I", data, 4)[0] == 16 + 8 + len(text)
    assert text in data
    codes, got = read_tensor(data)
    assert codes.shape == (1, 3) and got == quant
    assert read_header(data).layout == "provisional"


def test_provisional_file_from_the_official_private_writer(tmp_path):
    from nnef.binary import _write_tensor_provisional

    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "p.dat"
    with open(path, "wb") as f:
        _write_tensor_provisional(f, array)
    got, quant = read_tensor(path)
    np.testing.assert_array_equal(got, array)
    assert read_tensor(ours(array, header="provisional"))[0].tolist() == array.tolist()


def test_dequantize_zero_point_per_channel():
    codes = np.array([[0, 10], [0, 10]], np.int8)
    out = dequantize(codes, {"op_name": "zero_point_linear_quantize", "zero_point": [0, 5],
                             "scale": [0.5, 2.0], "bits": 8})
    np.testing.assert_allclose(out, [[0, 5], [-10, 10]])


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path):
    path = tmp_path / "w.dat"
    write_tensor(path, np.ones(3, np.float32))
    before = path.read_bytes()
    with pytest.raises(NNEFXError):
        write_tensor(path, np.ones(3, np.complex64))
    with pytest.raises(NNEFXError):
        write_tensor(path, np.ones((1,) * 9, np.float32))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["w.dat"]


def test_file_objects_are_accepted_both_ways(tmp_path):
    buf = io.BytesIO()
    write_tensor(buf, np.array([1, 2], np.int16))
    buf.seek(0)
    assert read_tensor(buf)[0].tolist() == [1, 2]
    with open(tmp_path / "t.dat", "w") as text_mode:
        text_mode.write("abc")
    with open(tmp_path / "t.dat") as text_mode, pytest.raises(NNEFXError, match="binary mode"):
        read_tensor(text_mode)


# ---------------------------------------------------------------------------------------------
# header validation: every field, each error names file and field


GOOD = ours(np.arange(6, dtype=np.float32).reshape(2, 3))


def patched(offset: int, fmt: str, value) -> bytes:
    data = bytearray(GOOD)
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize("data, field, message", [
    (b"", "magic", "only 0 bytes"),
    (b"PK\x03\x04" + GOOD[4:], "magic", "50 4B"),
    (patched(2, "<B", 2), "version", "2.0"),
    (patched(3, "<B", 1), "version", "1.1"),
    (GOOD[:60], "header", "shorter than the 128-byte header"),
    (GOOD[:140], "data_length", "truncated"),
    (GOOD + b"\0\0", "data", "trailing garbage"),
    (patched(8, "<I", 9), "rank", "rank is 9"),
    (patched(16, "<I", 0), "data_length", "needs 0 bytes"),
    (patched(16, "<I", 0xFFFFFFFF), "extents", "more than a tensor file"),
    (patched(4, "<I", 20), "data_length", None),
    (patched(44, "<I", 24), "bits_per_item", "bits_per_item is 24"),
    (patched(48, "<I", 9), "item_type", "item_type is 9"),
    (patched(48, "<I", 0x00010000), "item_type", "vendor"),
    (patched(48, "<I", 256), "item_type", "misprint"),
])
def test_lying_headers_are_reported_with_their_field(data, field, message):
    with pytest.raises(NNEFXError) as info:
        read_tensor(data, name="w.dat")
    loc = info.value.location
    assert loc is not None and loc.file == "w.dat" and loc.field == field
    if message:
        assert message in info.value.message


def test_size_mismatch_that_keeps_the_file_length_consistent_is_caught():
    data = bytearray(patched(12, "<I", 4))  # extents [4, 3] with 24 data bytes
    with pytest.raises(NNEFXError, match="needs 48 bytes") as info:
        read_tensor(bytes(data), name="w.dat")
    assert info.value.location.field == "data_length"


def test_strict_mode_checks_unused_extents_and_reserved_bytes():
    data = patched(40, "<I", 5)
    assert read_tensor(data)[0].shape == (2, 3)
    with pytest.raises(NNEFXError, match="beyond rank"):
        read_tensor(data, strict=True)
    with pytest.raises(NNEFXError, match="reserved"):
        read_tensor(patched(100, "<I", 1), strict=True)


def test_missing_file_is_an_error_with_location(tmp_path):
    with pytest.raises(NNEFXError) as info:
        read_tensor(tmp_path / "nope.dat")
    assert info.value.location.field == "file"


def test_shipped_fixture_files_read_back():
    for name, expect in [("float32_2x3.dat", np.arange(6, dtype=np.float32).reshape(2, 3)),
                         ("bool_9.dat", np.array([1, 0, 1, 1, 0, 0, 0, 0, 1], bool))]:
        got, _ = read_tensor(os.path.join(FIXTURES, name))
        np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("bits", [3, 12])
def test_odd_widths_across_chunk_boundaries(bits):
    values = np.random.default_rng(bits).integers(0, 1 << bits, 65536 + 9, dtype=np.uint64)
    data = ours(values, item_type="uint", bits=bits)
    assert len(data) == 128 + (values.size * bits + 7) // 8
    got, _ = read_tensor(data)
    np.testing.assert_array_equal(got.astype(np.uint64), values)


def test_zero_extent_variable_in_a_model_is_refused_where_it_is_declared(tmp_path):
    """The tensor file is readable, but NNEF spec §4.1 requires a variable's shape items to be
    positive; the official parser does not check (it loads the folder), nnefx refuses it at
    the declaration.  Documented in README ("Tensor files")."""
    import nnefx

    (tmp_path / "graph.nnef").write_text(
        "version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n"
        "    w = variable<scalar>(shape = [0, 4], label = 'w');\n    y = add(x, w);\n}\n")
    write_tensor(str(tmp_path / "w.dat"), np.zeros((0, 4), np.float32))
    assert nnef.load_graph(str(tmp_path)).tensors["w"].data.shape == (0, 4)
    with pytest.raises(NNEFXError, match="shape items must be positive") as info:
        nnefx.load(str(tmp_path))
    assert info.value.location.line == 5
