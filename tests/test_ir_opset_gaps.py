"""Opset layers mapped last: GRN (opset1), Roll (opset7), IsNaN/IsInf/IsFinite (opset10),
Identity (opset16), each against OpenVINO's CPU plugin on both nnefx backends."""

from __future__ import annotations

import numpy as np
import pytest

from test_ir_opset import check, rnd

ov = pytest.importorskip("openvino")
pytestmark = pytest.mark.peer

import openvino.opset1 as o1  # noqa: E402
import openvino.opset7 as o7  # noqa: E402
import openvino.opset10 as o10  # noqa: E402

import nnefx  # noqa: E402
from nnefx import NNEFXError  # noqa: E402

BACKENDS = ["formal", "fast"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, bias", [((2, 5), 0.0), ((1, 3, 4), 1e-4), ((2, 6, 3, 5), 2.5), ((1, 1, 2, 2), 0.5)])
def test_grn(tmp_path, backend, shape, bias):
    check(tmp_path, lambda x: o1.grn(x, bias), {"x": rnd(*shape)}, backend=backend)


def test_grn_negative_bias_is_refused_at_the_layer(tmp_path):
    x = o1.parameter([1, 3, 2, 2], np.float32, name="x")
    path = str(tmp_path / "g.xml")
    ov.save_model(ov.Model([o1.grn(x, 1.0)], [x]), path)
    text = open(path).read().replace('bias="1"', 'bias="-1"')
    assert 'bias="-1"' in text
    open(path, "w").write(text)
    with pytest.raises(NNEFXError, match="bias = -1.0 must be a non-negative number") as info:
        nnefx.load(path)
    assert "(GRN)" in info.value.location.field


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shift, axes", [([2], [1]), ([-1, 3], [0, 2]), ([5, 2], [1, 1]),
                                         ([0], [2]), ([7], [-1]), (-2, 2)])
def test_roll(tmp_path, backend, shift, axes):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    check(tmp_path, lambda p: o7.roll(p, np.array(shift, np.int64), np.array(axes, np.int64)), {"x": x},
          backend=backend)


def test_roll_integers(tmp_path):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(tmp_path, lambda p: o7.roll(p, np.array([1, -1], np.int64), np.array([0, 1], np.int64)), {"x": x})


SPECIAL = np.array([[0.0, -0.0, 1.5, -2.0], [np.inf, -np.inf, np.nan, 3.4028235e38],
                    [-3.4028235e38, 1.2e-38, np.nan, 7.0]], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build", [
    lambda x: o10.is_nan(x),
    lambda x: o10.is_finite(x),
    lambda x: o10.is_inf(x),
    lambda x: o10.is_inf(x, {"detect_negative": False}),
    lambda x: o10.is_inf(x, {"detect_positive": False}),
    lambda x: o10.is_inf(x, {"detect_positive": False, "detect_negative": False}),
], ids=["nan", "finite", "inf", "inf_pos", "inf_neg", "inf_none"])
def test_is_nan_inf_finite(tmp_path, backend, build):
    check(tmp_path, build, {"x": SPECIAL}, backend=backend)


def test_subnormals_are_finite(tmp_path):
    """OpenVINO opset10 IsFinite: true unless NaN or infinite, so for subnormals too (OpenVINO's
    CPU plugin answers false for them, as if they were not numbers; nnefx follows the spec)."""
    from nnefx.runtime.session import Session

    x = o10.parameter([3], np.float32, name="x")
    path = str(tmp_path / "f.xml")
    ov.save_model(ov.Model([o10.is_finite(x), o10.is_inf(x), o10.is_nan(x)], [x]), path)
    feeds = {"x": np.array([1e-45, -1e-40, 1.0], np.float32)}
    for backend in BACKENDS:
        out = list(Session(nnefx.load(path), backend).run(feeds).values())
        assert out[0].tolist() == [True, True, True] and not out[1].any() and not out[2].any()


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_identity(tmp_path, dtype):
    import openvino.opset16 as o16

    x = (rnd(2, 3) * 4).astype(dtype)
    check(tmp_path, lambda p: o1.relu(o16.identity(p)) if dtype == np.float32 else o16.identity(p), {"x": x})


@pytest.mark.parametrize("args", [(3, 3, 0, None), (2, 4, 1, None), (4, 2, -1, [2]), (3, 2, 5, [2, 1])])
def test_eye_is_folded_while_loading(tmp_path, args):
    import openvino.opset9 as o9

    rows, cols, k, batch = args
    x = o9.parameter([1], np.float32, name="x")
    eye = o9.eye(np.array(rows, np.int64), np.array(cols, np.int64), np.array(k, np.int64), "f32",
                 None if batch is None else np.array(batch, np.int64))
    path = str(tmp_path / "e.xml")
    ov.save_model(ov.Model([o1.add(eye, x)], [x]), path, compress_to_fp16=False)
    feeds = {"x": np.array([0.5], np.float32)}
    from ir_netgen import assert_close, run_nnefx, run_openvino

    want = run_openvino(path, feeds)
    got = run_nnefx(path, feeds)
    for key in want:
        assert_close(got[key], want[key], rtol=0, atol=0)


def test_eye_of_run_time_extents_is_refused(tmp_path):
    import openvino.opset9 as o9

    n = o9.parameter([], np.int64, name="n")
    path = str(tmp_path / "e.xml")
    ov.save_model(ov.Model([o9.eye(n, n, np.array(0, np.int64), output_type="f32")], [n]), path)
    with pytest.raises(NNEFXError, match="Eye needs its rows") as info:
        nnefx.load(path)
    assert "(Eye)" in info.value.location.field


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
def test_bitwise_on_booleans(tmp_path, name):
    import openvino.opset13 as o13

    a = np.array([[True, False, True, False]])
    b = np.array([[True], [False]])
    check(tmp_path, lambda p, q: getattr(o13, name)(p, q), {"a": a, "b": b})
    check(tmp_path, lambda p: o13.bitwise_not(p), {"a": a})


def test_bitwise_on_integers_is_refused(tmp_path):
    import openvino.opset13 as o13

    a = o13.parameter([2], np.int32, name="a")
    path = str(tmp_path / "b.xml")
    ov.save_model(ov.Model([o13.bitwise_and(a, a)], [a]), path)
    with pytest.raises(NNEFXError, match="BitwiseAnd is supported on boolean tensors only"):
        nnefx.load(path)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, blocks, begin, end", [
    ((1, 2, 4, 6), [1, 1, 2, 3], [0, 0, 0, 0], [0, 0, 0, 0]),
    ((2, 3, 3, 5), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 1]),
    ((1, 4, 6), [1, 2, 3], [0, 0, 1], [0, 2, 2]),
])
def test_space_to_batch_and_back(tmp_path, backend, shape, blocks, begin, end):
    import openvino.opset2 as o2

    b, lo, hi = (np.array(v, np.int64) for v in (blocks, begin, end))
    check(tmp_path, lambda p: o2.space_to_batch(p, b, lo, hi), {"x": rnd(*shape)}, backend=backend)
    check(tmp_path, lambda p: o2.batch_to_space(o2.space_to_batch(p, b, lo, hi), b, lo, hi), {"x": rnd(*shape)},
          backend=backend)


@pytest.mark.parametrize("shape, blocks, begin, end", [
    ((4, 2, 3, 3), [1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 0, 2]),
    ((6, 3, 2), [1, 3, 2], [0, 1, 0], [0, 1, 1]),
])
def test_batch_to_space(tmp_path, shape, blocks, begin, end):
    import openvino.opset2 as o2

    b, lo, hi = (np.array(v, np.int64) for v in (blocks, begin, end))
    check(tmp_path, lambda p: o2.batch_to_space(p, b, lo, hi), {"x": rnd(*shape)})
