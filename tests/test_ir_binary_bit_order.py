"""The bit order of packed BinaryConvolution filters (legacy ``BIN`` blobs, ``u1`` Consts).

Real files hold element ``i`` of the filter in bit ``i % 8`` of byte ``i // 8`` (least
significant bit first): the Model Optimizer packed them so (``PackBinaryWeights``: each run of
8 elements reversed, then ``np.packbits``; openvinotoolkit/openvino
``model-optimizer/extensions/back/PackBinaryWeights.py``, 2019 on, and
``tools/mo/openvino/tools/mo/back/PackBinaryWeights.py``) and the CPU plugin of the time read
them so (``(val >> (widx % 8)) & 1`` in
``inference-engine/thirdparty/mkl-dnn/src/cpu/ref_binary_convolution.cpp``).  OpenVINO's generic
``u1`` order (Constant API, reference implementation) is the reverse, most significant bit
first, and is *not* what these files hold.  ``nnefx.formats.ir.weights.unpack_binary_filter``
has the full list of sources.

The fixtures in ``tests/fixtures/ir/binary`` are written by hand: the same three bytes
``0x01 0x8E 0x35`` as a legacy v7 ``<weights>`` blob and as a v10 ``u1`` Const.  Expected
outputs come from the formal definition with the bits taken out of those bytes one at a time,
and each test also checks that the other bit order would give a different answer, so the tests
fail under it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx.formats.ir.weights import pack_binary_filter, unpack_binary_filter
from nnefx.runtime.session import Session

FIXTURES = Path(__file__).parent / "fixtures" / "ir" / "binary"
BYTES = bytes([0x01, 0x8E, 0x35])
FSHAPE = (2, 3, 2, 2)                       # [O, C, KY, KX]: 24 bits, 3 bytes
PADS = ((1, 0), (0, 1))                     # (begin, end) for y, x
RNG = np.random.default_rng(7)


def bit(data: bytes, i: int, lsb_first: bool) -> int:
    """Element ``i`` of the packed ``data``, one bit at a time."""
    shift = i % 8 if lsb_first else 7 - i % 8
    return (data[i // 8] >> shift) & 1


def filter_bits(data: bytes, shape, lsb_first: bool) -> np.ndarray:
    n = int(np.prod(shape))
    return np.array([bit(data, i, lsb_first) for i in range(n)], dtype=np.int64).reshape(shape)


def formal(x: np.ndarray, bits: np.ndarray, pads, pad_value: float) -> np.ndarray:
    """BinaryConvolution (xnor-popcount, stride 1, no dilation) from its definition: the sum of
    input sign (x > 0 is +1, else -1; a padded position is ``pad_value``) times weight sign
    (bit 1 is +1, bit 0 is -1) over each window."""
    n, c, h, w = x.shape
    o, _, ky, kx = bits.shape
    (pt, pb), (pl, pr) = pads
    oh, ow = h + pt + pb - ky + 1, w + pl + pr - kx + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for f in range(o):
            for yy in range(oh):
                for xx in range(ow):
                    total = 0.0
                    for ch in range(c):
                        for i in range(ky):
                            for j in range(kx):
                                y, z = yy + i - pt, xx + j - pl
                                if 0 <= y < h and 0 <= z < w:
                                    s = 1.0 if x[b, ch, y, z] > 0 else -1.0
                                else:
                                    s = pad_value
                                total += s * (1.0 if bits[f, ch, i, j] else -1.0)
                    out[b, f, yy, xx] = total
    return out.astype(np.float32)


def test_fixture_bytes_are_the_documented_ones():
    for name in ("binconv_v7.bin", "binconv_v10.bin"):
        assert (FIXTURES / name).read_bytes() == BYTES


@pytest.mark.parametrize("name", ["binconv_v7.xml", "binconv_v10.xml"])
@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_packed_filter_is_read_least_significant_bit_first(name, backend):
    x = RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)
    x.flat[::5] = 0.0                                   # 0 reads as -1
    want = formal(x, filter_bits(BYTES, FSHAPE, lsb_first=True), PADS, 1.0)
    other = formal(x, filter_bits(BYTES, FSHAPE, lsb_first=False), PADS, 1.0)
    assert not np.array_equal(want, other)              # the fixture tells the two orders apart
    (got,) = Session(nnefx.load(FIXTURES / name), backend).run({"data": x}).values()
    np.testing.assert_array_equal(got, want)


def test_unpack_and_pack_are_inverse_and_lsb_first():
    bits = RNG.integers(0, 2, 45).astype(np.uint8)     # not a whole number of bytes
    packed = pack_binary_filter(bits)
    assert len(packed) == 6 and packed[-1] >> 5 == 0   # zero bits after the end
    assert [bit(packed, i, True) for i in range(45)] == bits.tolist()
    np.testing.assert_array_equal(unpack_binary_filter(np.frombuffer(packed, np.uint8), 45), bits)
    np.testing.assert_array_equal(unpack_binary_filter(np.frombuffer(BYTES, np.uint8), 24).reshape(FSHAPE),
                                  filter_bits(BYTES, FSHAPE, lsb_first=True))


def test_writer_writes_the_model_optimizers_bytes_back(tmp_path):
    """Legacy fixture -> IR v11: the u1 Const holds the very bytes of the legacy blob."""
    model = nnefx.load(FIXTURES / "binconv_v7.xml")
    nnefx.save(model, tmp_path / "new.xml")
    assert BYTES in (tmp_path / "new.bin").read_bytes()
    x = RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)
    (want,) = Session(model).run({"data": x}).values()
    (got,) = Session(nnefx.load(tmp_path / "new.xml")).run({"data": x}).values()
    np.testing.assert_array_equal(got, want)


def test_openvino_cpu_plugin_reads_least_significant_bit_first(tmp_path):
    """OpenVINO's CPU plugin (16 channels: it needs a multiple of 8 per group) on a random filter
    stored from raw bytes: it computes the LSB-first filter, not the MSB-first one -- and nnefx
    reads the saved file the same way."""
    ov = pytest.importorskip("openvino")
    shape = (3, 16, 3, 3)
    bits = RNG.integers(0, 2, shape).astype(np.uint8)
    raw = pack_binary_filter(bits)
    tensor = ov.Tensor(ov.Type.u1, ov.Shape(list(shape)))
    np.asarray(tensor.data).reshape(-1)[:] = np.frombuffer(raw, np.uint8)
    p = ov.opset1.parameter([1, 16, 5, 6], np.float32, name="data")
    y = ov.opset1.binary_convolution(p, ov.op.Constant(tensor), [1, 1], [1, 1], [1, 1], [1, 1],
                                     "xnor-popcount", 1.0)
    path = str(tmp_path / "ov.xml")
    ov.save_model(ov.Model([y], [p], "ov_binconv"), path)
    x = RNG.integers(0, 2, (1, 16, 5, 6)).astype(np.float32)
    want = formal(x, filter_bits(raw, shape, lsb_first=True), ((1, 1), (1, 1)), 1.0)
    assert not np.array_equal(want, formal(x, filter_bits(raw, shape, lsb_first=False), ((1, 1), (1, 1)), 1.0))
    cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_array_equal(np.asarray(cm({"data": x})[cm.outputs[0]]), want)
    (got,) = Session(nnefx.load(path)).run({"data": x}).values()
    np.testing.assert_array_equal(got, want)
