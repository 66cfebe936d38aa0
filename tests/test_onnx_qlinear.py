"""The integer products of the ``onnx`` domain (MatMulInteger, ConvInteger, QLinearMatMul,
QLinearConv): both kernels bit-identical to each other and to ``onnx.reference`` on random
shapes and attributes (1-D to 3-D convolutions, groups, per-channel zero points and scales,
padding, strides, dilations, batch-broadcast matrix products), the int32 wrap-around of an
accumulator that overflows, and the located refusals.  The node suite's own cases run in
``test_onnx_domain_ops.py``."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

pytest.importorskip("onnx")
from onnx.reference.ops.op_conv import _conv_implementation  # noqa: E402

BACKENDS = ("formal", "fast")


def _kernel(name, backend):
    return registry.get(name).kernel(backend)


def _reference_conv(x, w, x_zero, w_zero, bias, window):
    """ConvInteger's definition through onnx.reference's convolution, in int64 (exact)."""
    shifted_w = w.astype(np.int64) - (w_zero.reshape(-1, *[1] * (w.ndim - 1)) if np.size(w_zero) > 1 else w_zero)
    acc = _conv_implementation(x.astype(np.int64) - x_zero, shifted_w, None, None, window["dilations"],
                               window["group"], list(w.shape[2:]), window["pads"], window["strides"])
    if bias is not None:
        acc = acc + bias.reshape(1, -1, *[1] * (x.ndim - 2))
    return acc.astype(np.int64)


def _conv_cases(count):
    rng = np.random.default_rng(7)
    made = 0
    while made < count:
        n = int(rng.integers(1, 4))
        group = int(rng.choice([1, 2]))
        channels, maps = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
        spatial = [int(rng.integers(3, 6)) for _ in range(n)]
        kernel = [int(rng.integers(1, 4)) for _ in range(n)]
        window = {"pads": [int(rng.integers(0, 3)) for _ in range(2 * n)],
                  "strides": [int(rng.integers(1, 3)) for _ in range(n)],
                  "dilations": [int(rng.integers(1, 3)) for _ in range(n)], "group": group}
        if any(spatial[d] + window["pads"][d] + window["pads"][d + n] < window["dilations"][d] * (kernel[d] - 1) + 1
               for d in range(n)):
            continue
        made += 1
        x = rng.integers(0, 256, (2, channels, *spatial)).astype(np.uint8)
        w = rng.integers(-128, 128, (maps, channels // group, *kernel)).astype(np.int8)
        x_zero = np.uint8(rng.integers(0, 256))
        w_zero = rng.integers(-128, 128, (maps,)).astype(np.int8) if made % 2 else np.int8(rng.integers(-128, 128))
        yield made, x, w, x_zero, w_zero, window, rng


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_integer_and_qlinear_conv_match_the_definition(backend):
    for made, x, w, x_zero, w_zero, window, rng in _conv_cases(12):
        want = _reference_conv(x, w, x_zero, w_zero, None, window).astype(np.int32)
        got = _kernel("onnx_conv_integer", backend)(x, w, x_zero, w_zero, **window)
        assert got.dtype == np.int32 and np.array_equal(got, want)
        bias = rng.integers(-3000, 3000, (w.shape[0],)).astype(np.int32)
        x_scale, y_scale = np.float32(rng.uniform(0.01, 0.1)), np.float32(rng.uniform(0.5, 2))
        w_scale = rng.uniform(0.01, 0.1, np.shape(w_zero)).astype(np.float32)
        y_zero = np.uint8(rng.integers(0, 256))
        acc = _reference_conv(x, w, x_zero, w_zero, bias, window)
        per = w_scale.reshape(1, -1, *[1] * (x.ndim - 2)) if w_scale.size > 1 else w_scale
        multiplier = np.float64(x_scale) * per.astype(np.float64) / np.float64(y_scale)
        want = np.clip(np.rint(acc * multiplier + float(y_zero)), 0, 255).astype(np.uint8)
        got = _kernel("onnx_qlinear_conv", backend)(x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias,
                                                    **window)
        assert got.dtype == np.uint8 and np.array_equal(got, want), made


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_integer_and_qlinear_matmul_match_the_definition(backend):
    rng = np.random.default_rng(3)
    # (a, b, a zero-point shape, b zero-point shape): per tensor, per row of a, per column of b,
    # batch broadcasting, 1-D operands
    layouts = [((3, 4), (4, 5), (), ()), ((3, 4), (4, 5), (3,), (5,)), ((2, 3, 4), (4, 5), (2, 3, 1), (1, 5)),
               ((2, 1, 3, 4), (3, 4, 2), (), (3, 1, 2)), ((4,), (2, 4, 5), (), (5,)), ((3, 4), (4,), (3,), ())]
    for sa, sb, za, zb in layouts:
        a = rng.integers(-128, 128, sa).astype(np.int8)
        b = rng.integers(0, 256, sb).astype(np.uint8)
        a_zero = rng.integers(-128, 128, za).astype(np.int8)
        b_zero = rng.integers(0, 256, zb).astype(np.uint8)
        rows = a_zero.reshape(-1, 1) if len(za) == 1 else a_zero
        cols = b_zero.reshape(1, -1) if len(zb) == 1 else b_zero
        acc = np.matmul(a.astype(np.int64) - rows, b.astype(np.int64) - cols)
        got = _kernel("onnx_matmul_integer", backend)(a, b, a_zero, b_zero)
        assert got.dtype == np.int32 and np.array_equal(got, acc), (sa, sb)
        a_scale = rng.uniform(0.01, 0.1, za).astype(np.float16)
        b_scale = rng.uniform(0.01, 0.1, zb).astype(np.float16)
        y_scale, y_zero = np.float16(0.37), np.int8(-5)
        ra = a_scale.reshape(-1, 1) if len(za) == 1 else a_scale
        cb = b_scale.reshape(1, -1) if len(zb) == 1 else b_scale
        scales = ra.astype(np.float64) * cb.astype(np.float64)
        if len(sa) == 1 or len(sb) == 1:  # the product's 2-D form, then the dropped axis
            scales = np.broadcast_to(scales, np.matmul(np.zeros(sa)[..., None, :] if len(sa) == 1 else np.zeros(sa),
                                                       np.zeros(sb)[..., None] if len(sb) == 1 else np.zeros(sb)
                                                       ).shape).reshape(acc.shape)
        want = np.clip(np.rint(acc * (scales / np.float64(y_scale)) - 5), -128, 127).astype(np.int8)
        got = _kernel("onnx_qlinear_matmul", backend)(a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero)
        assert got.dtype == np.int8 and np.array_equal(got, want), (sa, sb)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_accumulator_wraps_in_32_bits(backend):
    """255 * 255 * 40000 overflows int32: the exact sum wraps modulo 2^32 (ONNX: "the
    accumulation may overflow if and only if in 32 bits"); the fast kernel's float64 product
    is exact up to 2^53, beyond which it takes the int64 product."""
    k = 40000 if backend == "fast" else 2000
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 1), 255, np.uint8)
    zero = np.uint8(0)
    exact = 255 * 255 * k
    want = (exact + 2**31) % 2**32 - 2**31
    assert int(_kernel("onnx_matmul_integer", backend)(a, b, zero, zero)[0, 0]) == want
    x = np.full((1, 1, k), 255, np.uint8)
    w = np.full((1, 1, k), 255, np.uint8)
    assert int(_kernel("onnx_conv_integer", backend)(x, w, zero, zero)[0, 0, 0]) == want


def test_wide_operands_take_the_exact_integer_product():
    from nnefx.ops.onnx.qlinear import _int_matmul_fast

    a = np.full((1, 3), 2**40, np.int64)
    b = np.full((3, 1), 2**14, np.int64)
    assert int(_int_matmul_fast(a, b)[0, 0]) == 3 * 2**54  # past float64's 2^53: int64 product


def test_refusals_name_the_operation_and_the_shape():
    x = np.zeros((1, 2, 4, 4), np.uint8)
    w = np.zeros((4, 2, 3, 3), np.int8)
    zero8 = np.uint8(0)
    with pytest.raises(NNEFXError, match=r"onnx_conv_integer.*w_zero_point of shape \[3\] is neither per tensor nor "
                                         r"per output channel \(\[4\]\)"):
        _kernel("onnx_conv_integer", "fast")(x, w, zero8, np.zeros(3, np.int8))
    with pytest.raises(NNEFXError, match="channels do not split"):
        _kernel("onnx_conv_integer", "formal")(x, w, zero8, np.int8(0), group=2)
    with pytest.raises(NNEFXError, match=r"a_zero_point of shape \[4\] is neither per tensor nor per row"):
        _kernel("onnx_matmul_integer", "fast")(np.zeros((3, 4), np.int8), np.zeros((4, 2), np.int8),
                                                np.zeros(4, np.int8))
    with pytest.raises(NNEFXError, match="QLinear results are int8 or uint8 codes"):
        _kernel("onnx_qlinear_matmul", "fast")(np.zeros((3, 4), np.int8), 0.1, np.int8(0), np.zeros((4, 2), np.int8),
                                                0.1, np.int8(0), 0.1, np.int64(0))


def test_float8_codes_are_refused_at_the_node(tmp_path):
    """QLinearMatMul-21 allows float8 codes; nnefx reads int8/uint8 codes only, and says so."""
    import onnx
    from onnx import TensorProto, helper

    import nnefx

    f8 = TensorProto.FLOAT8E4M3FN
    names = ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point")
    types = (f8, TensorProto.FLOAT, f8, f8, TensorProto.FLOAT, f8, TensorProto.FLOAT, f8)
    shapes = ((2, 3), (), (), (3, 2), (), (), (), ())
    graph = helper.make_graph([helper.make_node("QLinearMatMul", list(names), ["y"])], "g",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(names, types, shapes,
                                                                                          strict=True)],
                              [helper.make_tensor_value_info("y", f8, (2, 2))])
    path = tmp_path / "f8.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    with pytest.raises(NNEFXError, match=r"\[node 0 '' \(QLinearMatMul\)\]: error: QLinearMatMul of f8e4m3fn codes "
                                         r"is not supported"):
        nnefx.load(str(path))


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_linear_keeps_narrow_code_types(backend, tmp_path):
    """QuantizeLinear to float8, 4-bit, 2-bit and float4 codes is read (its zero point reaches
    the kernel in its stored type, naming the code type) and returns those codes exactly."""
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case.node import _NodeTestCases, quantizelinear  # noqa: F401  (registers the cases)

    import nnefx

    names = ("e4m3fn", "e5m2", "uint4", "int4", "uint2", "int2", "float4e2m1")
    cases = {c.name: c for c in _NodeTestCases if c.name in {f"test_quantizelinear_{n}" for n in names}}.values()
    assert len(cases) == len(names), [c.name for c in cases]
    for case in cases:
        onnx.save(case.model, str(tmp_path / "q.onnx"))
        session = nnefx.Session(nnefx.load(str(tmp_path / "q.onnx")), backend=backend)
        inputs, expected = case.data_sets[0]
        feeds = {vi.name: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)
                 for vi, v in zip(case.model.graph.input, inputs, strict=True)}
        (value,) = session.run(feeds).values()
        want = numpy_helper.to_array(expected[0]) if isinstance(expected[0], onnx.TensorProto) else expected[0]
        assert value.dtype == want.dtype and value.shape == want.shape, case.name
        assert np.array_equal(value.astype(np.float64), want.astype(np.float64), equal_nan=True), case.name


def test_cost_counts_the_integer_products(tmp_path):
    """``nnefx inspect``'s cost rules: an integer convolution counts as ``conv``, an integer
    matrix product as ``matmul``; the QLinear ones add a quantizer's 4 operations per item."""
    import onnx
    from onnx import TensorProto, helper

    import nnefx
    from nnefx.tools.cost import operation_cost

    u8, f32 = TensorProto.UINT8, TensorProto.FLOAT
    inputs = [("x", u8, (1, 4, 6, 6)), ("xs", f32, ()), ("xz", u8, ()), ("w", u8, (8, 4, 3, 3)), ("ws", f32, ()),
              ("wz", u8, ()), ("ys", f32, ()), ("yz", u8, ())]
    node = helper.make_node("QLinearConv", [n for n, _, _ in inputs], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info("y", u8, (1, 8, 4, 4))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "q.onnx"))
    graph = nnefx.load(str(tmp_path / "q.onnx")).graph
    (op,) = [o for o in graph.operations if o.op == "onnx_qlinear_conv"]
    cost = operation_cost(graph, op)
    macs = 1 * 8 * 4 * 4 * (4 * 3 * 3)
    assert cost.macs == macs and cost.flops == 2 * macs + 4 * 128
