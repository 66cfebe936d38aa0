"""Legacy ``BinaryConvolution`` layers written as IR v11 ``BinaryConvolution-1``.

Each legacy net is read by nnefx, written as IR v11, compiled and run by OpenVINO's CPU plugin,
and compared exactly (every value is a sum of +-1 and +-pad_value terms) with nnefx's fast and
formal kernels; the written file is read back by nnefx and run again.

One limit of OpenVINO's CPU plugin (2026.4) shapes the OpenVINO comparisons, a checked fact,
not an assumption (see the writer's docstring): with a number of input channels per group that
is not a multiple of 8, the plugin's results are not a function of the data (equal inputs give
unequal outputs), so those nets are checked by read-back and by the written bits only.

The bit order is no limit: filters are packed least significant bit first, as the Model
Optimizer packed them and the CPU plugin reads them (``weights.unpack_binary_filter`` cites the
sources; OpenVINO's ``u1`` Constant API and reference implementation number the bits the other
way), so the OpenVINO runs use random filters.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import nnefx
from _export_helpers import property_settings
from nnefx.cli import main
from nnefx.runtime.session import Session
from test_ir_legacy_util import LegacyNet

ov = pytest.importorskip("openvino")

RNG = np.random.default_rng(2026)


def bits_of(shape) -> np.ndarray:
    return RNG.integers(0, 2, shape).astype(np.uint8)


def csv(values) -> str:
    return ",".join(str(int(v)) for v in values)


def binconv_net(shape, out_c, kernel, strides, pads_begin, pads_end, dilations, pad_value, group=1,
                runtime_filter=False) -> tuple[LegacyNet, np.ndarray]:
    """A legacy net with one BinaryConvolution layer named ``out``; returns it and its bits."""
    spatial = [(x + p + q - ((k - 1) * d + 1)) // s + 1
               for x, k, s, p, q, d in zip(shape[2:], kernel, strides, pads_begin, pads_end, dilations, strict=True)]
    bits = bits_of((out_c, shape[1] // group, *kernel))
    net = LegacyNet("binconv")
    x = net.input("data", shape)
    data = {"kernel": csv(kernel), "output": str(out_c), "strides": csv(strides), "pads_begin": csv(pads_begin),
            "pads_end": csv(pads_end), "dilations": csv(dilations), "group": str(group),
            "pad_value": repr(float(pad_value)), "mode": "xnor-popcount"}
    if runtime_filter:
        w = net.input("filter", list(bits.shape))
        net.add("BinaryConvolution", [x, w], [[shape[0], out_c, *spatial]], data, name="out")
    else:
        net.add("BinaryConvolution", [x], [[shape[0], out_c, *spatial]], data, blobs={"weights": (bits, "BIN")},
                name="out")
    return net, bits


def write(net: LegacyNet, tmp_path, **opts) -> tuple[nnefx.Model, str]:
    model = nnefx.load(net.save(tmp_path, "old"))
    new = str(tmp_path / "new.xml")
    nnefx.save(model, new, **opts)
    return model, new


def run_nnefx(model, feeds, backend="fast") -> np.ndarray:
    (res,) = Session(model, backend).run(feeds).values()
    return res


def run_openvino(xml: str, feeds: dict) -> np.ndarray:
    cm = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    (out,) = cm.outputs
    return np.asarray(cm(feeds)[out])


# (shape, out_c, kernel, strides, pads_begin, pads_end, dilations, pad_value, group)
OPENVINO_CASES = [
    ((2, 8, 7, 6), 4, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1.0, 1),
    ((2, 8, 7, 6), 4, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), -1.0, 1),
    ((1, 16, 7, 6), 5, (3, 2), (2, 1), (1, 2), (2, 0), (1, 2), 0.0, 1),      # nnefx's default pad_value
    ((1, 16, 9, 8), 3, (2, 3), (2, 3), (0, 1), (1, 2), (2, 1), 0.5, 1),
    ((2, 16, 6, 6), 6, (3, 3), (1, 2), (1, 1), (0, 1), (2, 1), -1.0, 2),     # groups: split, convolve, concat
    ((1, 24, 5, 5), 6, (1, 1), (1, 1), (0, 0), (0, 0), (1, 1), 0.25, 3),     # no padding: pad_value unused
    ((1, 8, 5, 5), 2, (5, 5), (1, 1), (3, 3), (3, 3), (1, 1), -2.0, 1),      # windows entirely in the padding
    ((2, 8, 11), 3, (3,), (2,), (2,), (1,), (2,), -1.0, 1),                  # 1-D: written with a unit height
    ((1, 16, 9), 4, (2,), (1,), (0,), (3,), (3,), 0.0, 2),
]


@pytest.mark.parametrize("case", OPENVINO_CASES, ids=[f"c{i}" for i in range(len(OPENVINO_CASES))])
def test_openvino_runs_the_written_binary_convolution(tmp_path, case):
    shape, out_c, kernel, strides, pb, pe, dil, pad_value, group = case
    net, _ = binconv_net(shape, out_c, kernel, strides, pb, pe, dil, pad_value, group)
    model, new = write(net, tmp_path)
    x = RNG.normal(size=shape).astype(np.float32)
    x.flat[::7] = 0.0                                   # 0 reads as -1 (only x > 0 is +1)
    feeds = {"data": x}
    want = run_nnefx(model, feeds, "fast")
    np.testing.assert_array_equal(run_nnefx(model, feeds, "formal"), want)
    np.testing.assert_array_equal(run_openvino(new, feeds), want)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(new), feeds), want)
    text = open(new).read()
    assert text.count('type="BinaryConvolution"') == group
    assert 'mode="xnor-popcount"' in text and 'pad_value="1.0"' in text and 'element_type="u1"' in text


@st.composite
def geometries(draw) -> tuple:
    """Random 2-D binary convolutions OpenVINO's CPU plugin can run (8 or 16 channels a group,
    width paddings below the output width)."""
    group = draw(st.integers(1, 2))
    c = 8 * group * draw(st.integers(1, 2))
    out_c = group * draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    s = [draw(st.integers(1, 3)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)]
    pb = [draw(st.integers(0, k[i])) for i in range(2)]
    pe = [draw(st.integers(0, k[i])) for i in range(2)]
    x = [draw(st.integers(max(1, (k[i] - 1) * d[i] + 1 - pb[i] - pe[i]), 8)) for i in range(2)]
    # the CPU plugin refuses ("unsupported parameters") a width padding not below the output width
    assume(max(pb[1], pe[1]) < (x[1] + pb[1] + pe[1] - (k[1] - 1) * d[1] - 1) // s[1] + 1)
    pad_value = draw(st.sampled_from([1.0, 0.0, -1.0, 0.5, -0.25, 3.0]))
    return (draw(st.integers(1, 2)), c, *x), out_c, tuple(k), s, pb, pe, d, pad_value, group


@property_settings(25)
@given(geometries())
def test_random_geometries_agree_with_openvino(tmp_path_factory, g):
    shape, out_c, kernel, strides, pb, pe, dil, pad_value, group = g
    tmp_path = tmp_path_factory.mktemp("bc")
    net, _ = binconv_net(shape, out_c, kernel, strides, pb, pe, dil, pad_value, group)
    model, new = write(net, tmp_path)
    feeds = {"data": RNG.normal(size=shape).astype(np.float32)}
    want = run_nnefx(model, feeds, "fast")
    np.testing.assert_array_equal(run_nnefx(model, feeds, "formal"), want)
    np.testing.assert_array_equal(run_openvino(new, feeds), want)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(new), feeds), want)


def test_the_written_filter_bits_are_packed_lsb_first(tmp_path):
    """Random bits, 5 input channels (45 bits a filter, so bytes straddle filters): the written
    bytes hold element i in bit i % 8 of byte i // 8; OpenVINO's u1 Constant API, which numbers
    bits from the most significant end, shows each byte's 8 bits reversed."""
    net, bits = binconv_net((1, 5, 6, 7), 3, (3, 2), (1, 2), (1, 0), (2, 1), (2, 1), -1.0)
    model, new = write(net, tmp_path)
    expected = np.packbits(bits.reshape(-1), bitorder="little")
    assert expected.tobytes() in (tmp_path / "new.bin").read_bytes()
    consts = [op for op in ov.Core().read_model(new).get_ordered_ops()
              if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.u1]
    assert len(consts) == 1
    assert list(consts[0].get_output_shape(0)) == list(bits.shape)
    as_msb = np.unpackbits(expected, bitorder="big")[:bits.size]
    np.testing.assert_array_equal(np.asarray(consts[0].get_vector()).reshape(-1), as_msb)
    x = RNG.normal(size=(1, 5, 6, 7)).astype(np.float32)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(new), {"data": x}), run_nnefx(model, {"data": x}))


@pytest.mark.parametrize("pad_value", [0.0, -1.0, 0.75])
def test_read_back_without_openvino_channel_limits(tmp_path, pad_value):
    """Channel counts the CPU plugin cannot run (3 per group) still round-trip exactly."""
    net, _ = binconv_net((2, 6, 6, 5), 4, (2, 3), (1, 1), (1, 2), (0, 1), (1, 2), pad_value, group=2)
    model, new = write(net, tmp_path)
    x = RNG.normal(size=(2, 6, 6, 5)).astype(np.float32)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(new), {"data": x}, "formal"),
                                  run_nnefx(model, {"data": x}, "fast"))


def test_compressed_weights_keep_the_correction_exact(tmp_path):
    net, _ = binconv_net((1, 8, 6, 6), 4, (3, 3), (1, 1), (2, 1), (1, 2), (1, 1), 0.0)
    model, new = write(net, tmp_path, compress_to_fp16=True)
    x = RNG.normal(size=(1, 8, 6, 6)).astype(np.float32)
    want = run_nnefx(model, {"data": x})
    np.testing.assert_array_equal(run_openvino(new, {"data": x}), want)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(new), {"data": x}), want)


def refused(net: LegacyNet, tmp_path) -> str:
    old = net.save(tmp_path, "old")
    new = tmp_path / "new.xml"
    assert main(["convert", old, str(new)]) == 1
    with pytest.raises(nnefx.NNEFXError) as e:
        nnefx.save(nnefx.load(old), str(new))
    assert not new.exists() and not (tmp_path / "new.bin").exists()
    text = str(e.value)
    assert "ir_binary_convolution" in text and "old.xml" in text and "'out' (BinaryConvolution)" in text
    return text


def test_3d_binary_convolution_is_refused(tmp_path):
    net, _ = binconv_net((1, 8, 4, 4, 4), 2, (2, 2, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1.0)
    assert "3-D binary convolution has no opset form" in refused(net, tmp_path)


def test_pad_value_without_exact_correction_is_refused(tmp_path):
    net, _ = binconv_net((1, 8, 6, 6), 2, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 0.3)
    assert "pad_value 0.3 has no exact opset form" in refused(net, tmp_path)


def test_run_time_filter_is_refused(tmp_path):
    net, _ = binconv_net((1, 8, 6, 6), 2, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1.0, runtime_filter=True)
    assert "the filter must be load-time data" in refused(net, tmp_path)


# --- reading BinaryConvolution-1 ---------------------------------------------------------------

def lsb_packed_u1(bits: np.ndarray):
    """An OpenVINO u1 Constant whose bytes hold ``bits`` least significant bit first (the Model
    Optimizer's packing; ``ov.op.Constant(u1, values)`` would pack them the other way)."""
    tensor = ov.Tensor(ov.Type.u1, ov.Shape(list(bits.shape)))
    raw = np.asarray(tensor.data).reshape(-1)
    raw[:] = np.packbits(bits.reshape(-1), bitorder="little")
    return ov.op.Constant(tensor)


def openvino_binconv(tmp_path, pads, pad_value, c=8) -> str:
    bits = bits_of((3, c, 3, 3))
    x = ov.opset1.parameter([1, c, 5, 6], np.float32, name="x")
    w = lsb_packed_u1(bits)
    y = ov.opset1.binary_convolution(x, w, [1, 1], pads, pads, [1, 1], "xnor-popcount", pad_value)
    path = str(tmp_path / "ov.xml")
    ov.save_model(ov.Model([y], [x], "ovbin"), path)
    return path


def test_openvino_written_binary_convolution_reads_and_runs(tmp_path):
    path = openvino_binconv(tmp_path, [1, 1], 1.0)
    x = RNG.integers(0, 2, (1, 8, 5, 6)).astype(np.float32)    # the 0/1 input the layer is defined for
    model = nnefx.load(path)
    np.testing.assert_array_equal(run_nnefx(model, {"x": x}), run_openvino(path, {"x": x}))
    np.testing.assert_array_equal(run_nnefx(model, {"x": x}, "formal"), run_openvino(path, {"x": x}))


def test_ambiguous_openvino_pad_value_is_refused_when_it_matters(tmp_path):
    with pytest.raises(nnefx.NNEFXError, match=r"pad_value 0 with padding is ambiguous") as e:
        nnefx.load(openvino_binconv(tmp_path, [1, 1], 0.0))
    assert "ov.xml" in str(e.value) and "(BinaryConvolution)" in str(e.value)
    path = openvino_binconv(tmp_path, [0, 0], 0.0)               # no padding: pad_value is unused
    x = RNG.integers(0, 2, (1, 8, 5, 6)).astype(np.float32)
    np.testing.assert_array_equal(run_nnefx(nnefx.load(path), {"x": x}), run_openvino(path, {"x": x}))
