"""Opset (v10/11) layer mappings, one layer at a time, against OpenVINO.

Every case builds a tiny model with OpenVINO's own Python opsets, lets OpenVINO write it as
IR v11 (so attribute spellings are exactly what files written today contain), then runs it
in OpenVINO and in nnefx on the same inputs and compares.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ir_netgen import assert_close, run_nnefx, run_openvino

ov = pytest.importorskip("openvino")
pytestmark = pytest.mark.peer

import openvino.opset1 as o1  # noqa: E402
import openvino.opset3 as o3  # noqa: E402
import openvino.opset4 as o4  # noqa: E402
import openvino.opset5 as o5  # noqa: E402
import openvino.opset6 as o6  # noqa: E402
import openvino.opset8 as o8  # noqa: E402
import openvino.opset11 as o11  # noqa: E402
import openvino.opset13 as o  # noqa: E402

R = np.random.RandomState(42)
F32 = np.float32


def rnd(*shape, lo=None):
    a = np.asarray(R.randn(*shape), dtype=F32)
    return np.abs(a) + lo if lo is not None else a


#: NNEFX_IR_TEST_BACKEND=formal runs every case on the formal kernels instead.
BACKEND = os.environ.get("NNEFX_IR_TEST_BACKEND", "fast")


def check(tmp_path, build, feeds: dict, *, dynamic: dict | None = None, rtol=1e-4, atol=1e-5, backend=BACKEND):
    params = []
    for name, arr in feeds.items():
        shape = list(arr.shape) if not dynamic or name not in dynamic else dynamic[name]
        params.append(o.parameter(shape, arr.dtype, name=name))
    outs = build(*params)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    outs = [x.output(0) if hasattr(x, "output") and x.get_output_size() == 1 else x for x in outs]
    for i, x in enumerate(outs):
        x.get_tensor().set_names({f"out{i}"})
    model = ov.Model(outs, params, "case")
    path = str(tmp_path / "case.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    want = run_openvino(path, feeds)
    got = run_nnefx(path, feeds, backend=backend)
    assert set(got) >= set(want)
    for k in want:
        assert_close(got[k], want[k], rtol=rtol, atol=atol)
    return path


def _runtime_reads_untyped_tensor_params() -> bool:
    """The runtime must read ``input: tensor<>`` (NNEF ``cast``, ``convert_element_type``) as a tensor."""
    from nnefx.runtime.signature import tensor_params

    params = tensor_params("fragment cast<?>( input: tensor<> ) -> ( output: tensor<?> );") or ()
    return any(p.name == "input" for p in params)


needs_untyped = pytest.mark.xfail(not _runtime_reads_untyped_tensor_params(),
                                  reason="runtime signature parser skips tensor<> parameters (cast)")


# --- element-wise -----------------------------------------------------------------------------------

UNARY = {
    "relu": o.relu, "sigmoid": o.sigmoid, "tanh": o.tanh, "exp": o.exp, "abs": o.absolute, "neg": o.negative,
    "floor": o.floor, "ceiling": o.ceiling, "sin": o.sin, "cos": o.cos, "erf": o.erf, "softplus": o4.softplus,
    "sign": o.sign, "hswish": o4.hswish, "hsigmoid": o.hsigmoid, "mish": o4.mish, "softsign": o.softsign,
    "swish": o4.swish, "atan": o.atan,
    "gelu_erf": lambda x: o.gelu(x, "erf"), "gelu_tanh": lambda x: o.gelu(x, "tanh"),
    "elu": lambda x: o.elu(x, 0.7), "clamp": lambda x: o.clamp(x, -0.5, 0.8),
    "swish_beta": lambda x: o4.swish(x, np.array(1.7, F32)),
    "hard_sigmoid": lambda x: o.hard_sigmoid(x, np.array(0.3, F32), np.array(0.4, F32)),
    "selu": lambda x: o.selu(x, np.array([1.6732], F32), np.array([1.0507], F32)),
    "softmax1": lambda x: o1.softmax(x, 1), "softmax8": lambda x: o8.softmax(x, -1),
    "log_softmax": lambda x: o.log_softmax(x, 2),
    "prelu": lambda x: o.prelu(x, np.array([0.1, 0.2, 0.3], F32)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(tmp_path, name):
    check(tmp_path, UNARY[name], {"x": rnd(2, 3, 4) * 2})


@pytest.mark.parametrize("name", ["log", "sqrt"])
def test_unary_positive(tmp_path, name):
    check(tmp_path, getattr(o, name), {"x": rnd(2, 5, lo=0.1)})


BINARY = {"add": o.add, "sub": o.subtract, "mul": o.multiply, "div": o.divide, "max": o.maximum,
          "min": o.minimum, "sqdiff": o.squared_difference}


@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((4, 1), (2, 1, 3)), ((1, 3, 1, 5), (2, 1, 4, 1)),
                                    ((3,), ())], ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_numpy_broadcasting(tmp_path, name, shapes):
    a, b = shapes
    check(tmp_path, BINARY[name], {"x": rnd(*a), "y": rnd(*b, lo=0.5)})


def test_binary_with_constant_operand(tmp_path):
    c = rnd(3, 1, lo=0.1)
    check(tmp_path, lambda x: o.power(o.add(x, c), np.array(1.5, F32)), {"x": rnd(2, 3, 4, lo=0.2)})


@pytest.mark.parametrize("fn", [o.equal, o.not_equal, o.less, o.less_equal, o.greater, o.greater_equal])
def test_comparisons(tmp_path, fn):
    x = np.round(rnd(2, 3, 4))
    check(tmp_path, fn, {"x": x, "y": np.round(rnd(3, 1))})


def test_logical_and_select(tmp_path):
    def build(a, b, x, y):
        c = o.logical_xor(o.logical_and(a, b), o.logical_not(o.logical_or(a, b)))
        return [c, o.select(c, x, y)]
    a = R.rand(2, 3) > 0.5
    b = R.rand(3) > 0.5
    check(tmp_path, build, {"a": a, "b": b, "x": rnd(2, 3), "y": rnd(1, 3)})


@needs_untyped
def test_integer_arithmetic_at_run_time(tmp_path):
    # Divide: OpenVINO's CPU plugin truncates negative integer quotients even with
    # m_pythondiv=true, where the operation's specification (and nnefx) floors; the
    # comparison therefore divides non-negative numerators (see test_integer_divide_floors).
    def build(i, j):
        return [o.floor_mod(i, j), o.divide(o.absolute(i), j), o.add(i, j), o.minimum(i, j), o.equal(i, j),
                o.convert(o.multiply(i, j), "f32"), o.negative(i), o.clamp(i, -3, 5)]
    check(tmp_path, build, {"i": R.randint(-20, 20, (2, 5)).astype(np.int64),
                            "j": R.randint(1, 5, (5,)).astype(np.int64)})


def test_integer_divide_floors(tmp_path):
    """Divide with m_pythondiv=true (the default) floors integer quotients, per the opset spec."""
    import nnefx
    from nnefx.runtime.session import Session

    i = o.parameter([4], np.int64, name="i")
    j = o.parameter([4], np.int64, name="j")
    path = str(tmp_path / "d.xml")
    ov.save_model(ov.Model([o.divide(i, j)], [i, j]), path)
    out = Session(nnefx.load(path)).run({"i": np.array([-7, 7, -7, 7]), "j": np.array([2, 2, -2, -2])})
    np.testing.assert_array_equal(list(out.values())[0], [-4, 3, 3, -4])


@needs_untyped
@pytest.mark.parametrize("dest", ["i32", "i64", "f16", "boolean", "u8"])
def test_convert(tmp_path, dest):
    x = (rnd(3, 4) * 5).astype(F32)
    x[0, 0] = 2.5
    x[0, 1] = -2.5
    check(tmp_path, lambda x: o.convert(x, dest), {"x": x})


# --- MatMul ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sa, sb, ta, tb", [((4,), (4, 3), False, False), ((2, 4), (4,), False, False),
                                            ((2, 1, 3, 4), (5, 4, 6), False, False),
                                            ((4, 3), (5, 4), True, True), ((7,), (7,), False, False),
                                            ((2, 3, 4), (4, 5), False, False)], ids=str)
def test_matmul(tmp_path, sa, sb, ta, tb):
    check(tmp_path, lambda a, b: o.matmul(a, b, ta, tb), {"a": rnd(*sa), "b": rnd(*sb)})


def test_matmul_constant_weights(tmp_path):
    w = rnd(6, 4)
    check(tmp_path, lambda a: o.matmul(a, w, False, True), {"a": rnd(2, 3, 4)})


# --- convolution and pooling --------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [
    dict(strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1]),
    dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[2, 1], dilations=[1, 2]),
    dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], auto_pad="same_upper"),
    dict(strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1], auto_pad="same_lower"),
    dict(strides=[1, 1], pads_begin=[3, 3], pads_end=[3, 3], dilations=[1, 1], auto_pad="valid"),
], ids=lambda k: k.get("auto_pad", "explicit") + str(k["strides"]))
def test_convolution(tmp_path, kw):
    w = rnd(4, 3, 3, 2)
    check(tmp_path, lambda x: o.convolution(x, w, **kw), {"x": rnd(2, 3, 8, 7)})


def test_conv1d_and_group_conv(tmp_path):
    w1 = rnd(5, 2, 3)
    wg = rnd(3, 2, 2, 3, 3)
    check(tmp_path, lambda x: o.convolution(x, w1, [2], [1], [1], [1]), {"x": rnd(1, 2, 9)})
    check(tmp_path, lambda x: o.group_convolution(x, wg, [1, 1], [1, 1], [1, 1], [1, 1]), {"x": rnd(2, 6, 5, 5)})


@pytest.mark.parametrize("kw", [dict(strides=[2, 2]), dict(strides=[2, 1], pads_begin=[1, 0], pads_end=[0, 1],
                                                           output_padding=[1, 0]),
                                dict(strides=[1, 1], dilations=[2, 2])], ids=str)
def test_deconvolution(tmp_path, kw):
    w = rnd(3, 4, 3, 3)
    check(tmp_path, lambda x: o.convolution_backprop_data(x, w, **kw), {"x": rnd(2, 3, 4, 5)})


def test_group_deconvolution(tmp_path):
    w = rnd(2, 2, 3, 3, 3)
    check(tmp_path, lambda x: o.group_convolution_backprop_data(x, w, [2, 2]), {"x": rnd(1, 4, 4, 4)})


@pytest.mark.parametrize("rounding", ["floor", "ceil"])
@pytest.mark.parametrize("pads", [([0, 0], [0, 0]), ([1, 0], [1, 1])], ids=str)
def test_max_pool(tmp_path, rounding, pads):
    check(tmp_path, lambda x: o1.max_pool(x, [2, 2], pads[0], pads[1], [3, 3], rounding), {"x": rnd(2, 3, 8, 9)})
    check(tmp_path, lambda x: o8.max_pool(x, [2, 1], [1, 2], pads[0], pads[1], [2, 2], rounding).output(0),
          {"x": rnd(1, 2, 9, 8)})


def test_max_pool_same_upper(tmp_path):
    check(tmp_path, lambda x: o1.max_pool(x, [2, 2], [0, 0], [0, 0], [3, 3], "floor", "same_upper"),
          {"x": rnd(1, 2, 7, 8)})


@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("rounding", ["floor", "ceil"])
@pytest.mark.parametrize("pads", [([0, 0], [0, 0]), ([1, 1], [1, 0])], ids=str)
def test_avg_pool(tmp_path, exclude, rounding, pads):
    check(tmp_path, lambda x: o.avg_pool(x, [2, 2], pads[0], pads[1], [3, 3], exclude, rounding),
          {"x": rnd(2, 3, 8, 9)})


# --- reductions and normalisation ----------------------------------------------------------------------

REDUCE = {"mean": o.reduce_mean, "sum": o.reduce_sum, "max": o.reduce_max, "min": o.reduce_min,
          "l1": o4.reduce_l1, "l2": o4.reduce_l2}


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("axes", [[1], [-1, 0], [0, 1, 2]], ids=str)
@pytest.mark.parametrize("name", list(REDUCE))
def test_reduce(tmp_path, name, axes, keep):
    check(tmp_path, lambda x: REDUCE[name](x, np.array(axes, np.int64), keep), {"x": rnd(2, 3, 4)})


def test_logical_reduce(tmp_path):
    check(tmp_path, lambda b: [o.reduce_logical_and(b, np.array([1]), False), o.reduce_logical_or(b, np.array([0]), True)],
          {"b": R.rand(3, 4) > 0.3})


@pytest.mark.parametrize("mode", ["inside_sqrt", "outside_sqrt"])
@pytest.mark.parametrize("normalize", [True, False])
def test_mvn6(tmp_path, mode, normalize):
    check(tmp_path, lambda x: o6.mvn(x, np.array([-1, 2], np.int64), normalize, 1e-3, mode), {"x": rnd(2, 3, 4, 5)})


def test_mvn1_and_normalize_l2_and_batchnorm(tmp_path):
    import openvino.opset2 as o2

    check(tmp_path, lambda x: o2.mvn(x, True, True, 1e-5), {"x": rnd(2, 3, 4, 5)})
    for mode in ("add", "max"):
        check(tmp_path, lambda x, m=mode: o.normalize_l2(x, np.array([1], np.int64), 1e-2, m), {"x": rnd(2, 3, 4)})
    g, b, m, v = rnd(3), rnd(3), rnd(3), rnd(3, lo=0.5)
    check(tmp_path, lambda x: o5.batch_norm_inference(x, g, b, m, v, 1e-3), {"x": rnd(2, 3, 4, 4)})


# --- shape operations ------------------------------------------------------------------------------------


def test_reshape_variants(tmp_path):
    check(tmp_path, lambda x: o.reshape(x, np.array([0, -1, 2], np.int64), True), {"x": rnd(2, 3, 4)})
    check(tmp_path, lambda x: o.reshape(x, np.array([4, 6], np.int64), False), {"x": rnd(2, 3, 4)})


def test_squeeze_unsqueeze_transpose_concat(tmp_path):
    def build(x, y):
        a = o.squeeze(x, np.array([-1, 1], np.int64))
        b = o.unsqueeze(a, np.array([0, -1], np.int64))
        c = o.transpose(y, np.array([2, 0, 1], np.int64))
        return [b, c, o.concat([y, o.multiply(y, np.float32(2.0))], -2), o.transpose(y, np.array([], np.int64))]
    check(tmp_path, build, {"x": rnd(2, 1, 3, 1), "y": rnd(2, 3, 4)})


def test_split_and_variadic_split(tmp_path):
    check(tmp_path, lambda x: list(o.split(x, np.array(-1, np.int64), 2).outputs()), {"x": rnd(2, 3, 4)})
    check(tmp_path, lambda x: list(o.variadic_split(x, np.array(1, np.int64), np.array([1, -1, 1])).outputs()),
          {"x": rnd(2, 5, 4)})


@pytest.mark.parametrize("case", [
    dict(begin=[0, 1], end=[2, -1], strides=[1, 1], begin_mask=[0, 0], end_mask=[0, 0]),
    dict(begin=[0, -1], end=[0, 0], strides=[1, -2], begin_mask=[1, 1], end_mask=[1, 1]),
    dict(begin=[1, 0, 0], end=[2, 3, 0], strides=[1, 1, 1], begin_mask=[0, 0, 0], end_mask=[0, 0, 1],
         shrink_axis_mask=[1, 0, 0]),
    dict(begin=[0, 0], end=[0, 2], strides=[1, 1], begin_mask=[0, 0], end_mask=[0, 0], new_axis_mask=[1, 0]),
    dict(begin=[0, -1], end=[0, 0], strides=[1, 1], begin_mask=[0, 0], end_mask=[0, 0],
         ellipsis_mask=[1, 0], shrink_axis_mask=[0, 1]),
    dict(begin=[-2, 5], end=[-100, -100], strides=[-1, -1], begin_mask=[0, 0], end_mask=[0, 0]),
], ids=["plain", "reverse", "shrink", "new_axis", "ellipsis", "clamped"])
def test_strided_slice(tmp_path, case):
    c = dict(case)
    b, e, s = (np.array(c.pop(k), np.int64) for k in ("begin", "end", "strides"))
    check(tmp_path, lambda x: o.strided_slice(x, b, e, s, **c), {"x": rnd(3, 6, 4)})


@pytest.mark.parametrize("start, stop, step, axes", [([1], [5], [2], [1]), ([-1, 0], [-10, 3], [-1, 1], [2, 0]),
                                                     ([0, 1, 0], [2, 3, 4], [1, 1, 3], None)], ids=str)
def test_slice8(tmp_path, start, stop, step, axes):
    args = [np.array(v, np.int64) for v in (start, stop, step)]
    ax = np.array(axes, np.int64) if axes is not None else None
    check(tmp_path, lambda x: o8.slice(x, *args, ax), {"x": rnd(3, 6, 4)})


def test_gather_variants(tmp_path):
    check(tmp_path, lambda x: o8.gather(x, np.array([[0, -1], [2, 1]], np.int64), np.array(1)), {"x": rnd(2, 3, 4)})
    check(tmp_path, lambda x: o8.gather(x, np.array(-1, np.int64), np.array(-1)), {"x": rnd(2, 3, 4)})
    check(tmp_path, lambda x, i: o8.gather(x, i, np.array(0)),
          {"x": rnd(5, 3), "i": np.array([[4, -5], [0, 2]], np.int64)})
    check(tmp_path, lambda x, i: o8.gather(x, i, np.array(1), 1),
          {"x": rnd(2, 4, 3), "i": np.array([[3, 0, 1], [-1, 2, 2]], np.int32)})


def test_broadcast_tile_pad(tmp_path):
    def build(x):
        a = o3.broadcast(x, np.array([2, 3, 4], np.int64))
        b = o3.broadcast(x, np.array([2, 1, 1], np.int64), broadcast_spec="BIDIRECTIONAL")
        c = o3.broadcast(o.reshape(x, np.array([3], np.int64), False), np.array([3, 2], np.int64),
                         np.array([0], np.int64), "EXPLICIT")
        return [a, b, c, o.tile(x, np.array([2, 1, 3], np.int64))]
    check(tmp_path, build, {"x": rnd(3, 1)})
    for mode in ("constant", "edge", "reflect", "symmetric"):
        check(tmp_path, lambda x, m=mode: o.pad(x, np.array([0, 1, 2], np.int64), np.array([1, 2, 0], np.int64), m,
                                                np.array(0.25, F32) if m == "constant" else None),
              {"x": rnd(2, 3, 4)})


def test_dynamic_shape_subgraph(tmp_path):
    """ShapeOf -> Gather -> Concat -> Reshape with a dynamic batch: folded to NNEF reshape(0, ...)."""
    def build(x):
        s = o3.shape_of(x)
        b = o8.gather(s, np.array([0], np.int64), np.array(0))
        t = o.concat([b, np.array([-1], np.int64)], 0)
        y = o.reshape(x, t, False)
        z = o3.broadcast(np.array([1.0], F32), o.concat([b, np.array([2], np.int64)], 0))
        return [y, z, o.add(s, np.array([0], np.int64))]
    path = check(tmp_path, build, {"x": rnd(3, 2, 4)}, dynamic={"x": [-1, 2, 4]})
    got = run_nnefx(path, {"x": rnd(5, 2, 4)})
    assert got["out0"].shape == (5, 8) and got["out1"].shape == (5, 2)
    np.testing.assert_array_equal(got["out2"], [5, 2, 4])


# --- attention, interpolation, recurrent cells -----------------------------------------------------------


@pytest.mark.parametrize("variant", ["plain", "causal", "bool_mask", "float_mask_scale"])
def test_sdpa(tmp_path, variant):
    q, k, v = rnd(2, 2, 4, 8), rnd(2, 2, 5, 8), rnd(2, 2, 5, 3)
    if variant == "plain":
        check(tmp_path, lambda q, k, v: o.scaled_dot_product_attention(q, k, v), {"q": q, "k": k, "v": v})
    elif variant == "causal":
        check(tmp_path, lambda q, k, v: o.scaled_dot_product_attention(q, k, v, causal=True),
              {"q": q, "k": k, "v": v})
    elif variant == "bool_mask":
        m = R.rand(4, 5) > 0.3
        m[:, 0] = True
        check(tmp_path, lambda q, k, v, m: o.scaled_dot_product_attention(q, k, v, m), {"q": q, "k": k, "v": v, "m": m})
    else:
        check(tmp_path, lambda q, k, v: o.scaled_dot_product_attention(q, k, v, rnd(1, 4, 5), np.array(0.3, F32)),
              {"q": q, "k": k, "v": v})


@pytest.mark.parametrize("mode, coord, nearest", [("nearest", "asymmetric", "floor"),
                                                  ("linear", "half_pixel", "round_prefer_floor"),
                                                  ("linear_onnx", "align_corners", "round_prefer_floor"),
                                                  ("linear_onnx", "asymmetric", "floor"),
                                                  ("nearest", "half_pixel", "round_prefer_ceil")])
def test_interpolate_upsampling(tmp_path, mode, coord, nearest):
    check(tmp_path, lambda x: o11.interpolate(x, np.array([2.0, 3.0], F32), mode, "scales",
                                              coordinate_transformation_mode=coord, nearest_mode=nearest,
                                              axes=np.array([2, 3], np.int64)), {"x": rnd(1, 2, 3, 4)})


def test_lstm_gru_rnn_cells(tmp_path):
    n, i, h = 2, 3, 4
    x, h0, c0 = rnd(n, i), rnd(n, h), rnd(n, h)
    check(tmp_path, lambda x, a, c: list(o4.lstm_cell(x, a, c, rnd(4 * h, i), rnd(4 * h, h), rnd(4 * h), h).outputs()),
          {"x": x, "a": h0, "c": c0})
    for lbr in (False, True):
        b = rnd((4 if lbr else 3) * h)
        check(tmp_path, lambda x, a, b=b, lbr=lbr: o3.gru_cell(x, a, rnd(3 * h, i), rnd(3 * h, h), b, h,
                                                              linear_before_reset=lbr), {"x": x, "a": h0})
    check(tmp_path, lambda x, a: o.rnn_cell(x, a, rnd(h, i), rnd(h, h), rnd(h), h, ["tanh"], [], [], 0.0),
          {"x": x, "a": h0})


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_sequence(tmp_path, direction):
    n, t, i, h = 3, 5, 2, 4
    d = 2 if direction == "bidirectional" else 1
    w, r, b = rnd(d, 4 * h, i), rnd(d, 4 * h, h), rnd(d, 4 * h)
    lens = np.array([5, 3, 1], np.int32)
    check(tmp_path, lambda x, a, c: list(o5.lstm_sequence(x, a, c, lens, w, r, b, h, direction).outputs()),
          {"x": rnd(n, t, i), "a": rnd(n, d, h), "c": rnd(n, d, h)})
    check(tmp_path, lambda x, a, c: list(o5.lstm_sequence(x, a, c, lens, w, r, b, h, direction).outputs()),
          {"x": rnd(n, t, i), "a": rnd(n, d, h), "c": rnd(n, d, h)}, backend="formal")


# --- refusals -----------------------------------------------------------------------------------------------


def test_unsupported_attribute_is_an_error_naming_the_layer(tmp_path):
    import nnefx
    from nnefx.diagnostics import NNEFXError

    x = o.parameter([1, 2, 3, 4], F32, name="x")
    y = o11.interpolate(x, np.array([1.5, 1.5], F32), "cubic", "scales", pads_begin=[0, 0, 1, 1],
                        pads_end=[0, 0, 1, 1], axes=np.array([2, 3], np.int64))
    path = str(tmp_path / "m.xml")
    ov.save_model(ov.Model([y], [x]), path)
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path)
    assert "(Interpolate)" in info.value.location.field and "layer" in info.value.location.field


# --- more layers: sequences, TopK, CumSum, Round, Einsum, DepthToSpace, general Interpolate -------------


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("lbr", [False, True])
def test_gru_sequence(tmp_path, direction, lbr):
    n, t, i, h = 3, 4, 2, 3
    d = 2 if direction == "bidirectional" else 1
    w, r, b = rnd(d, 3 * h, i), rnd(d, 3 * h, h), rnd(d, (4 if lbr else 3) * h)
    lens = np.array([4, 2, 3], np.int64)
    check(tmp_path, lambda x, a: list(o5.gru_sequence(x, a, lens, w, r, b, h, direction,
                                                     linear_before_reset=lbr).outputs()),
          {"x": rnd(n, t, i), "a": rnd(n, d, h)})


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_rnn_sequence(tmp_path, direction):
    n, t, i, h = 2, 5, 3, 4
    w, r, b = rnd(1, h, i), rnd(1, h, h), rnd(1, h)
    check(tmp_path, lambda x, a: list(o5.rnn_sequence(x, a, np.array([5, 3], np.int32), w, r, b, h,
                                                     direction).outputs()),
          {"x": rnd(n, t, i), "a": rnd(n, 1, h)})


def test_range_at_run_time(tmp_path):
    import openvino.opset4 as o4r

    def build(x):
        n = o8.gather(o3.shape_of(x), np.array(1, np.int64), np.array(0))
        return [o4r.range(np.array(0, np.int64), n, np.array(1, np.int64), "i64"),
                o4r.range(np.array(0.5, F32), o.convert(n, "f32"), np.array(0.75, F32), "f32")]
    path = check(tmp_path, build, {"x": rnd(2, 7)}, dynamic={"x": [2, -1]})
    got = run_nnefx(path, {"x": rnd(2, 4)})
    np.testing.assert_array_equal(got["out0"], [0, 1, 2, 3])


@pytest.mark.parametrize("mode, sort", [("max", "value"), ("min", "index"), ("min", "value"), ("max", "index")])
def test_top_k(tmp_path, mode, sort):
    x = np.round(rnd(3, 6) * 2) / 2  # ties
    check(tmp_path, lambda x: list(o11.topk(x, np.array(3, np.int64), -1, mode, sort, "i64", True).outputs()),
          {"x": x})


@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumsum(tmp_path, exclusive, reverse):
    check(tmp_path, lambda x: o3.cumsum(x, np.array(1, np.int64), exclusive, reverse), {"x": rnd(2, 5, 3)})


def test_reduce_prod_round_einsum(tmp_path):
    import openvino.opset7 as o7

    check(tmp_path, lambda x: [o.reduce_prod(x, np.array([1, 2], np.int64), False),
                               o5.round(x, "half_to_even"), o5.round(x, "half_away_from_zero")],
          {"x": np.array([[[0.5, -0.5, 1.5], [2.5, -1.5, 0.2]]], F32)})
    check(tmp_path, lambda a, b: o7.einsum([a, b], "bij,bjk->bik"), {"a": rnd(2, 3, 4), "b": rnd(2, 4, 5)})
    check(tmp_path, lambda a: o7.einsum([a], "ij->ji"), {"a": rnd(3, 4)})


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
def test_depth_space(tmp_path, mode):
    check(tmp_path, lambda x: o.depth_to_space(x, mode, 2), {"x": rnd(2, 8, 3, 2)})
    check(tmp_path, lambda x: o.space_to_depth(x, mode, 2), {"x": rnd(2, 3, 4, 6)})


@pytest.mark.parametrize("mode, coord, nearest, scales", [
    ("nearest", "asymmetric", "floor", [0.5, 0.75]),
    ("nearest", "half_pixel", "round_prefer_floor", [1.5, 0.6]),
    ("nearest", "tf_half_pixel_for_nn", "ceil", [2.0, 1.25]),
    ("linear_onnx", "half_pixel", "floor", [0.5, 1.5]),
    ("linear_onnx", "pytorch_half_pixel", "floor", [1.7, 0.25]),
    ("linear_onnx", "align_corners", "floor", [0.75, 2.5]),
    ("cubic", "half_pixel", "floor", [1.5, 2.0]),
    ("cubic", "asymmetric", "floor", [0.5, 1.0]),
])
def test_interpolate_general(tmp_path, mode, coord, nearest, scales):
    check(tmp_path, lambda x: o11.interpolate(x, np.array(scales, F32), mode, "scales",
                                              coordinate_transformation_mode=coord, nearest_mode=nearest,
                                              axes=np.array([2, 3], np.int64)), {"x": rnd(1, 2, 8, 8)})


def test_interpolate_sizes_with_dynamic_batch(tmp_path):
    check(tmp_path, lambda x: o11.interpolate(x, np.array([3, 5], np.int64), "nearest", "sizes",
                                              axes=np.array([2, 3], np.int64)),
          {"x": rnd(2, 2, 6, 8)}, dynamic={"x": [-1, 2, 6, 8]})


@pytest.mark.parametrize("levels", [2, 16, 256])
def test_fake_quantize(tmp_path, levels):
    lo, hi = np.array([[-1.0], [0.0], [-0.5]], F32), np.array([[1.0], [2.0], [0.5]], F32)
    check(tmp_path, lambda x: o.fake_quantize(x, lo, hi, np.array(-2.0, F32), np.array(3.0, F32), levels),
          {"x": rnd(2, 3, 5) * 1.5})


@pytest.mark.parametrize("etype, values", [("u1", [1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1]),
                                           ("u4", [1, 2, 3, 15, 7]), ("i4", [1, -2, 3, -8, 7]),
                                           ("bf16", [1.5, -2.25, 3.0])])
def test_packed_constants_written_by_openvino(tmp_path, etype, values):
    """Bit-packed and bf16 constants as OpenVINO itself lays them out in the .bin."""
    c = ov.op.Constant(getattr(ov.Type, etype), ov.Shape([len(values)]), values)
    check(tmp_path, lambda x: o.add(x, o.convert(c, "f32")), {"x": np.zeros(len(values), F32)})


@pytest.mark.parametrize("stride", [1, -1])
def test_tensor_iterator(tmp_path, stride):
    """A hand-written RNN as an opset TensorIterator: sliced, merged (back edge) and invariant inputs."""
    w_in, w_rec = rnd(3, 4), rnd(4, 4)

    def build(x, h0, bias):
        bx = o.parameter([2, 1, 3], F32, name="bx")
        bh = o.parameter([2, 4], F32, name="bh")
        bb = o.parameter([4], F32, name="bb")
        xt = o.squeeze(bx, np.array([1], np.int64))
        hn = o.tanh(o.add(o.add(o.matmul(xt, w_in, False, False), o.matmul(bh, w_rec, False, False)), bb))
        out_h, out_seq = o.result(hn), o.result(o.unsqueeze(hn, np.array([1], np.int64)))
        ti = o8.tensor_iterator()
        ti.set_body(ov.Model([out_h, out_seq], [bx, bh, bb], "body"))
        start, end = (0, -1) if stride > 0 else (-1, 0)
        ti.set_sliced_input(bx, x.output(0), start, stride, 1, end, 1)
        ti.set_merged_input(bh, h0.output(0), out_h.output(0))
        ti.set_invariant_input(bb, bias.output(0))
        return [ti.get_iter_value(out_h.output(0), -1),
                ti.get_concatenated_slices(out_seq.output(0), start, stride, 1, end, 1)]
    check(tmp_path, build, {"x": rnd(2, 5, 3), "h0": rnd(2, 4), "bias": rnd(4)})


@pytest.mark.parametrize("size, axes", [(5, [1]), (4, [1]), (3, [2, 3])])
def test_lrn(tmp_path, size, axes):
    check(tmp_path, lambda x: o.lrn(x, np.array(axes, np.int64), 1e-2, 0.75, 2.0, size), {"x": rnd(2, 6, 4, 5)})


def test_gather_elements_and_nd(tmp_path):
    import openvino.opset6 as o6g

    idx = np.array([[0, 2, -1], [1, 0, 2]], np.int64)
    check(tmp_path, lambda x: o6g.gather_elements(x, idx, 1), {"x": rnd(2, 3)})
    check(tmp_path, lambda x, i: o8.gather_nd(x, i), {"x": rnd(3, 4, 2), "i": np.array([[0, 1], [2, 3], [1, 0]], np.int32)})
    check(tmp_path, lambda x: o8.gather_nd(x, np.array([[1], [0]], np.int64), 1), {"x": rnd(2, 3, 4)})
    check(tmp_path, lambda x: o5.gather_nd(x, np.array([[[1], [0]], [[2], [2]]], np.int64), 1), {"x": rnd(2, 3, 4)})


def test_scatters_and_one_hot(tmp_path):
    import openvino.opset12 as o12

    check(tmp_path, lambda x, u: o3.scatter_update(x, np.array([2, 0], np.int64), u, np.array(1, np.int64)),
          {"x": rnd(2, 4, 3), "u": rnd(2, 2, 3)})
    check(tmp_path, lambda x, u: o.scatter_nd_update(x, np.array([[1, 0], [0, 3]], np.int64), u),
          {"x": rnd(2, 4, 3), "u": rnd(2, 3)})
    for red in ("none", "sum", "max", "mean"):
        check(tmp_path, lambda x, u, red=red: o12.scatter_elements_update(
            x, np.array([[1, 0, 1], [2, 2, 0]], np.int64), u, np.array(0, np.int64), red, True),
            {"x": rnd(3, 3), "u": rnd(2, 3)})
    check(tmp_path, lambda i: o.one_hot(i, np.array(4, np.int64), np.array(2.0, F32), np.array(-1.0, F32), 1),
          {"i": np.array([[0, 3], [1, 5]], np.int64)})


@pytest.mark.parametrize("encoding, sort, sigma", [("corner", True, 0.0), ("center", False, 0.0),
                                                   ("corner", True, 0.5)])
def test_non_max_suppression(tmp_path, encoding, sort, sigma):
    import openvino.opset9 as o9

    rng = np.random.RandomState(11)
    xy = rng.rand(2, 12, 2).astype(F32) * 4
    wh = rng.rand(2, 12, 2).astype(F32) + 0.5
    boxes = np.concatenate([xy, xy + wh], -1) if encoding == "corner" else np.concatenate([xy, wh], -1)
    scores = rng.rand(2, 3, 12).astype(F32)

    def build(b, s):
        nms = o9.non_max_suppression(b, s, np.array(4, np.int64), np.array(0.3, F32), np.array(0.2, F32),
                                     np.array(sigma, F32), encoding, sort, "i64")
        return list(nms.outputs())
    check(tmp_path, build, {"b": boxes, "s": scores})


@pytest.mark.parametrize("version", [1, 8])
def test_prior_box_and_detection_output(tmp_path, version):
    opset = o8 if version == 8 else o1
    pb = {"min_size": np.array([8.0], F32), "max_size": np.array([16.0], F32),
          "aspect_ratio": np.array([2.0], F32), "flip": True, "clip": False, "step": 8.0, "offset": 0.5,
          "variance": np.array([0.1, 0.1, 0.2, 0.2], F32), "scale_all_sizes": True}
    num_priors = 4 * 4 * 4  # 4x4 grid, 4 boxes per cell
    classes = 3

    def build(loc, conf):
        priors = opset.prior_box(o.constant(np.array([4, 4], np.int64)), o.constant(np.array([32, 32], np.int64)), pb)
        prior = o.unsqueeze(priors, np.array([0], np.int64))
        attrs = {"background_label_id": 0, "top_k": 20, "variance_encoded_in_target": False, "keep_top_k": [10],
                 "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "share_location": True,
                 "nms_threshold": 0.45, "confidence_threshold": 0.05, "clip_after_nms": False,
                 "clip_before_nms": False, "decrease_label_id": False, "normalized": True, "input_height": 1,
                 "input_width": 1, "objectness_score": 0.0}
        if version == 1:
            attrs["num_classes"] = classes
        return [priors, opset.detection_output(loc, conf, prior, attrs)]
    rng = np.random.RandomState(2)
    check(tmp_path, build, {"loc": (rng.randn(1, num_priors * 4) * 0.1).astype(F32),
                            "conf": rng.rand(1, num_priors * classes).astype(F32)})


def test_prior_box_clustered(tmp_path):
    attrs = {"width": np.array([4.0, 8.0], F32), "height": np.array([6.0, 3.0], F32), "clip": True,
             "step_widths": 8.0, "step_heights": 8.0, "offset": 0.5, "variance": np.array([0.1, 0.1, 0.2, 0.2], F32)}
    check(tmp_path, lambda x: [o.add(x, o1.prior_box_clustered(o.constant(np.array([3, 4], np.int64)),
                                                               o.constant(np.array([24, 32], np.int64)), attrs))],
          {"x": np.zeros((2, 96), F32)})


def test_layers_shared_with_the_legacy_catalog(tmp_path):
    import openvino.opset2 as o2

    rng = np.random.RandomState(4)
    check(tmp_path, lambda x: o1.region_yolo(x, 4, 2, 3, True, [0, 1, 2], 1, 3), {"x": rnd(1, 21, 3, 3)})
    check(tmp_path, lambda x: o1.region_yolo(x, 4, 2, 3, False, [0, 2], 1, 3), {"x": rnd(1, 14, 3, 3)})
    check(tmp_path, lambda x: o2.reorg_yolo(x, [2]), {"x": rnd(1, 4, 4, 6)})
    rois = np.array([[0, 1, 1, 6, 5], [0, 0, 0, 7, 7], [0, 2.5, 3, 4, 6.5]], F32)
    check(tmp_path, lambda x, r: o2.roi_pooling(x, r, [2, 3], 1.0, "max"), {"x": rnd(1, 3, 8, 8), "r": rois})
    check(tmp_path, lambda x, r: o2.roi_pooling(x, o.multiply(r, np.float32(0.125)), [2, 2], 1.0, "bilinear"),
          {"x": rnd(1, 3, 8, 8), "r": rois})
    check(tmp_path, lambda x, r: o1.psroi_pooling(x, r, 2, 2, 1.0, 1, 1, "average"),
          {"x": rnd(1, 8, 8, 8), "r": rois})
    check(tmp_path, lambda x, n: o1.reverse_sequence(x, n, 0, 1),
          {"x": rnd(3, 5, 2), "n": np.array([5, 2, 3], np.int32)})
    mask = np.ones((6, 2), F32)
    mask[4:, 1] = 0
    check(tmp_path, lambda x, m: o1.ctc_greedy_decoder(x, m, True),
          {"x": rng.rand(6, 2, 4).astype(F32), "m": mask})


def _loop_model(trip: int, condition: str):
    """y = 0.5 * y + i for i = 0, 1, ... (the counter feeds the body); condition kinds:
    'true' (constant), 'counter' (i < 2, known while loading), 'data' (depends on y)."""
    x = o.parameter([2, 3], F32, name="x")
    bi = o.parameter([], np.int64, name="it")
    bx = o.parameter([2, 3], F32, name="bx")
    y = o.add(o.multiply(bx, np.float32(0.5)), o.convert(bi, "f32"))
    if condition == "true":
        cond = o.constant(np.array(True))
    elif condition == "counter":
        cond = o.less(bi, np.array(2, np.int64))
    else:
        cond = o.less(o.reduce_sum(y, np.array([0, 1], np.int64), False), np.float32(100.0))
    ry, rc = o.result(y), o.result(cond)
    rs = o.result(o.unsqueeze(y, np.array([0], np.int64)))
    lp = o8.loop(o.constant(np.array(trip, np.int64)), o.constant(np.array(True)))
    lp.set_function(ov.Model([rc, ry, rs], [bi, bx], "body"))
    lp.set_special_body_ports([0, 0])
    lp.set_merged_input(bx, x.output(0), ry.output(0))
    return x, [lp.get_iter_value(ry.output(0), -1), lp.get_concatenated_slices(rs.output(0), 0, 1, 1, -1, 0)]


@pytest.mark.parametrize("trip, condition", [(4, "true"), (6, "counter"), (-1, "counter")])
def test_loop_unrolled(tmp_path, trip, condition):
    x, outs = _loop_model(trip, condition)
    path = str(tmp_path / "loop.xml")
    ov.save_model(ov.Model(outs, [x]), path)
    feeds = {"x": rnd(2, 3)}
    want = run_openvino(path, feeds)
    got = run_nnefx(path, feeds)
    for k in want:
        assert_close(got[k], want[k])


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_loop_with_run_time_condition_runs_as_a_loop(tmp_path, backend):
    """A condition computed from the data cannot be unrolled while loading: the layer runs as
    one onnx_loop over its body, with OpenVINO's values."""
    x, outs = _loop_model(5, "data")
    path = str(tmp_path / "loop.xml")
    ov.save_model(ov.Model(outs, [x]), path)
    feeds = {"x": rnd(2, 3)}
    want = run_openvino(path, feeds)
    got = run_nnefx(path, feeds, backend=backend)
    for k in want:
        assert got[k].shape == want[k].shape
        assert_close(got[k], want[k])


def _if_model(cond):
    tp, ep = o.parameter([2, 3], F32, name="tp"), o.parameter([2, 3], F32, name="ep")
    tr = o.result(o.multiply(o.exp(tp), np.float32(2.0)))
    er = o.result(o.add(ep, np.float32(1.0)))
    node = o8.if_op(cond)
    node.set_then_body(ov.Model([tr], [tp], "then"))
    node.set_else_body(ov.Model([er], [ep], "else"))
    return node, tp, ep, tr, er


@pytest.mark.parametrize("kind", ["run_time", "true", "false"])
def test_if(tmp_path, kind):
    x = o.parameter([2, 3], F32, name="x")
    params = [x]
    if kind == "run_time":
        c = o.parameter([], np.bool_, name="c")
        params.append(c)
    else:
        c = o.constant(np.array(kind == "true"))
    node, tp, ep, tr, er = _if_model(c)
    node.set_input(x.output(0), tp, ep)
    out = node.set_output(tr, er)
    path = str(tmp_path / "if.xml")
    ov.save_model(ov.Model([out], params), path)
    for value in ([True, False] if kind == "run_time" else [None]):
        feeds = {"x": rnd(2, 3)}
        if value is not None:
            feeds["c"] = np.array(value)
        want, got = run_openvino(path, feeds), run_nnefx(path, feeds)
        # (OpenVINO renames the output when it folds a constant-condition If: compare in order)
        for g, w in zip(got.values(), want.values(), strict=True):
            assert_close(g, w)


def test_integer_and_half_inputs(tmp_path):
    """u8 image inputs converted in the graph (OpenVINO pre-processing style) and f16 inputs."""
    check(tmp_path, lambda im: o.multiply(o.convert(im, "f32"), np.float32(1 / 255)),
          {"im": np.random.RandomState(0).randint(0, 256, (1, 3, 4, 4)).astype(np.uint8)})
    check(tmp_path, lambda h: o.convert(o.relu(h), "f32"), {"h": rnd(2, 5).astype(np.float16)}, rtol=1e-3)


@pytest.mark.parametrize("axis, group", [(1, 3), (-1, 2), (0, 2)])
def test_shuffle_channels(tmp_path, axis, group):
    check(tmp_path, lambda x: o.shuffle_channels(x, axis, group), {"x": rnd(4, 6, 3, 4)})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_pad12_negative_pads(tmp_path, mode):
    import openvino.opset12 as o12

    check(tmp_path, lambda x: o12.pad(x, np.array([0, -1, 2], np.int64), np.array([1, 2, -1], np.int64), mode,
                                      np.array(0.5, F32) if mode == "constant" else None), {"x": rnd(2, 5, 4)})


def test_v10_names_follow_openvino(tmp_path):
    """Unnamed tensors (IR v10): OpenVINO names outputs 'layer' or 'layer.<output index>'."""
    import re

    x = o.parameter([4, 6], F32, name="x")
    sp = o.split(x, np.array(1, np.int64), 3)
    ov.save_model(ov.Model([sp.output(0), sp.output(2), o.relu(x).output(0)], [x]), str(tmp_path / "m.xml"))
    text = (tmp_path / "m.xml").read_text().replace('version="11"', 'version="10"', 1)
    text = re.sub(r' (output_)?names="[^"]*"', "", text)
    (tmp_path / "v10.xml").write_text(text)
    (tmp_path / "v10.bin").write_bytes((tmp_path / "m.bin").read_bytes())
    feeds = {"x": rnd(4, 6)}
    want = run_openvino(str(tmp_path / "v10.xml"), feeds)
    got = run_nnefx(str(tmp_path / "v10.xml"), feeds)
    assert list(got) == list(want)
    for k in want:
        assert_close(got[k], want[k])


@pytest.mark.parametrize("size", [[1, 1], [2, 3], [4, 5], [3, 2]])
def test_adaptive_pools(tmp_path, size):
    check(tmp_path, lambda x: [o8.adaptive_avg_pool(x, np.array(size, np.int64)),
                               o8.adaptive_max_pool(x, np.array(size, np.int64), "i32").output(0)], {"x": rnd(2, 3, 5, 7)})


def test_group_normalization(tmp_path):
    import openvino.opset12 as o12

    check(tmp_path, lambda x: o12.group_normalization(x, rnd(6), rnd(6), 3, 1e-5), {"x": rnd(2, 6, 4, 3)},
          dynamic={"x": [-1, 6, 4, 3]})
