"""Rewriting IR v11 files: OpenVINO writes a small network (``openvino.save_model``), nnefx reads
it (IR-only layers become ``ir_*`` operations), writes IR v11 again, and OpenVINO must compute
the same outputs from the rewritten file as from its own."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from test_ir_writer import close, run_openvino

ov = pytest.importorskip("openvino")
import openvino.opset3 as o3  # noqa: E402
import openvino.opset5 as o5  # noqa: E402
import openvino.opset8 as o8  # noqa: E402
import openvino.opset11 as o11  # noqa: E402
import openvino.opset13 as o  # noqa: E402

R = np.random.RandomState(5)
F32 = np.float32


def rnd(*shape):
    return R.randn(*shape).astype(F32)


def rewrite(tmp_path, build, feeds: dict, rtol=1e-4) -> str:
    params = [o.parameter(list(a.shape), a.dtype, name=n) for n, a in feeds.items()]
    outs = build(*params)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    outs = [x.output(0) if hasattr(x, "output") and x.get_output_size() == 1 else x for x in outs]
    for i, x in enumerate(outs):
        x.get_tensor().set_names({f"out{i}"})
    src = str(tmp_path / "src.xml")
    ov.save_model(ov.Model(outs, params, "case"), src, compress_to_fp16=False)
    want = run_openvino(src, feeds)
    new = str(tmp_path / "new.xml")
    nnefx.save(nnefx.load(src), new)
    got = run_openvino(new, feeds)
    assert set(got) == set(want)
    for k in want:
        close(got[k], want[k], rtol)
    return new


def ops_of(xml: str) -> list[str]:
    return [op.op for op in nnefx.load(xml).graph.operations]


@pytest.mark.parametrize("mode, sort", [("max", "value"), ("min", "index")])
def test_top_k_with_ties(tmp_path, mode, sort):
    x = np.round(rnd(3, 6) * 2) / 2
    rewrite(tmp_path, lambda x: list(o11.topk(x, np.array(3, np.int64), -1, mode, sort, "i64", True).outputs()),
            {"x": x})


def test_cumsum_reduce_prod_round_einsum(tmp_path):
    import openvino.opset7 as o7

    x = np.array([[[0.5, -0.5, 1.5], [2.5, -1.5, 0.2]]], F32)
    rewrite(tmp_path, lambda x: [o3.cumsum(x, np.array(2, np.int64), True, True),
                                 o.reduce_prod(x, np.array([1, 2], np.int64), False),
                                 o5.round(x, "half_to_even"), o5.round(x, "half_away_from_zero")], {"x": x})
    rewrite(tmp_path, lambda a, b: o7.einsum([a, b], "bij,bjk->bik"), {"a": rnd(2, 3, 4), "b": rnd(2, 4, 5)})


@pytest.mark.parametrize("kind", ["gru", "rnn"])
def test_gru_and_rnn_sequences(tmp_path, kind):
    n, t, i, h = 3, 4, 2, 3
    lens = np.array([4, 2, 3], np.int64)
    if kind == "gru":
        w, r, b = rnd(2, 3 * h, i), rnd(2, 3 * h, h), rnd(2, 4 * h)
        build = lambda x, a: list(o5.gru_sequence(x, a, lens, w, r, b, h, "bidirectional",  # noqa: E731
                                                  linear_before_reset=True).outputs())
        d = 2
    else:
        w, r, b = rnd(1, h, i), rnd(1, h, h), rnd(1, h)
        build = lambda x, a: list(o5.rnn_sequence(x, a, lens, w, r, b, h, "reverse").outputs())  # noqa: E731
        d = 1
    rewrite(tmp_path, build, {"x": rnd(n, t, i), "a": rnd(n, d, h)})


@pytest.mark.parametrize("mode, coord, nearest, scales", [
    ("nearest", "half_pixel", "round_prefer_floor", [1.5, 0.6]),
    ("linear_onnx", "pytorch_half_pixel", "floor", [1.7, 0.25]),
    ("cubic", "half_pixel", "floor", [1.5, 2.0]),
])
def test_general_interpolate(tmp_path, mode, coord, nearest, scales):
    rewrite(tmp_path, lambda x: o11.interpolate(x, np.array(scales, F32), mode, "scales",
                                                coordinate_transformation_mode=coord, nearest_mode=nearest,
                                                axes=np.array([2, 3], np.int64)), {"x": rnd(1, 2, 8, 8)})


def test_gathers_scatters_one_hot(tmp_path):
    import openvino.opset6 as o6
    import openvino.opset12 as o12

    idx = np.array([[0, 2, -1], [1, 0, 2]], np.int64)
    rewrite(tmp_path, lambda x: [o6.gather_elements(x, idx, 1),
                                 o8.gather_nd(x, np.array([[1], [0]], np.int64), 1)], {"x": rnd(2, 3)})
    rewrite(tmp_path, lambda x, u, v: [o3.scatter_update(x, np.array([2, 0], np.int64), u, np.array(1, np.int64)),
                                       o.scatter_nd_update(x, np.array([[1, 0], [0, 3]], np.int64), v)],
            {"x": rnd(2, 4, 3), "u": rnd(2, 2, 3), "v": rnd(2, 3)})
    rewrite(tmp_path, lambda x, u: o12.scatter_elements_update(
        x, np.array([[1, 0, 1], [2, 2, 0]], np.int64), u, np.array(0, np.int64), "mean", True),
        {"x": rnd(3, 3), "u": rnd(2, 3)})
    rewrite(tmp_path, lambda i: o.one_hot(i, np.array(4, np.int64), np.array(2.0, F32), np.array(-1.0, F32), 1),
            {"i": np.array([[0, 3], [1, 5]], np.int64)})


def test_integer_arithmetic_and_comparisons(tmp_path):
    a = np.array([[7, -7, 9], [3, -4, 0]], np.int64)
    b = np.array([2, 3, -4], np.int64)
    xml = rewrite(tmp_path, lambda a, b: [o.divide(a, b), o.floor_mod(a, b), o.mod(a, b), o.maximum(a, b),
                                          o.subtract(a, b), o.less(a, b)], {"a": a, "b": b})
    assert "integer_arith" in ops_of(xml) and "integer_compare" in ops_of(xml)


def test_deconvolution_with_output_padding(tmp_path):
    # OpenVINO's output_padding reads as a negative padding after in nnefx; written back as is
    w = rnd(3, 2, 3, 3)
    rewrite(tmp_path, lambda x: o.convolution_backprop_data(x, w, [2, 2], pads_begin=[1, 0], pads_end=[1, 1],
                                                            dilations=[1, 1], output_padding=[1, 1]),
            {"x": rnd(1, 3, 4, 5)})
