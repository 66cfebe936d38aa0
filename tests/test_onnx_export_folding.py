"""The ONNX writer folds chains that do not depend on the inputs into load-time data.

nnef-tools writes every bias and layer-norm scale through ``unsqueeze`` (and shared
weights through ``copy``); the writer folds those relabellings of a variable into the
data they read, so a convolution takes its bias as ``Conv``'s ``B``, a product reads a
``[K, N]`` weight and an addition a 1-D bias: the forms onnxruntime's fusions match, as
in the frameworks' own exports.  Every case runs against the fast backend.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
sys.path.insert(0, os.path.dirname(__file__))

from _export_helpers import run_ort, save_onnx  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _export(model, feeds, tmp_path):
    """The exported model, after checking that onnxruntime's results are the fast backend's."""
    want = Session(model, "fast").run(feeds)
    path = save_onnx(model, str(tmp_path / "model.onnx"))
    got = run_ort(path, feeds)
    assert list(got) == list(want)
    for k in want:
        assert got[k].shape == want[k].shape
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)
    return onnx.load(path)


def _types(m):
    return [n.op_type for n in m.graph.node]


def _initializer_shapes(m):
    return {i.name: list(i.dims) for i in m.graph.initializer}


def test_unsqueezed_conv_bias_becomes_conv_b(tmp_path):
    b = GraphBuilder("conv")
    x = b.external("x", shape=(1, 3, 6, 6))
    bias = b.op("unsqueeze", b.op("copy", b.variable("b", rand(4))), axes=[0])   # [1, 4], as nnef-tools writes
    y = b.op("conv", x, b.variable("w", rand(4, 3, 3, 3)), bias, padding=[(1, 1), (1, 1)])
    b.output(b.op("relu", y), name="y")
    m = _export(b.build(), {"x": rand(1, 3, 6, 6)}, tmp_path)
    assert _types(m) == ["Conv", "Relu"]
    (conv,) = [n for n in m.graph.node if n.op_type == "Conv"]
    assert len(conv.input) == 3 and _initializer_shapes(m)[conv.input[2]] == [4]


def test_encoder_weights_and_biases_keep_engine_forms(tmp_path):
    b = GraphBuilder("linear")
    x = b.external("x", shape=(2, 5, 8))
    w = b.op("unsqueeze", b.variable("w", rand(8, 6)), axes=[0])           # [1, 8, 6]
    bias = b.op("unsqueeze", b.variable("bias", rand(6)), axes=[0, 1])     # [1, 1, 6]
    y = b.op("add", b.op("matmul", x, w), bias)
    scale = b.op("unsqueeze", b.op("copy", b.variable("g", rand(6))), axes=[0, 1])
    b.output(b.op("mul", y, scale), name="y")
    m = _export(b.build(), {"x": rand(2, 5, 8)}, tmp_path)
    assert _types(m) == ["MatMul", "Add", "Mul"]
    shapes = _initializer_shapes(m)
    assert sorted(shapes.values()) == [[6], [6], [8, 6]]


def test_leading_units_stay_where_they_shape_the_result(tmp_path):
    # [1, 6] + [1, 6] (both load-time data) against x of rank 1 (NNEF aligns it as [6, 1]):
    # the result is [6, 6], which a [6] would not give; a
    # product of two load-time operands keeps the batch dimension they give it
    b = GraphBuilder("ranks")
    x = b.external("x", shape=(6,))
    u = b.op("unsqueeze", b.variable("u", rand(6)), axes=[0])
    v = b.op("unsqueeze", b.variable("v", rand(6)), axes=[0])
    b.output(b.op("add", b.op("add", u, v), x), name="s")
    b.output(b.op("add", x, u), name="t")
    b.output(b.op("add", u, v), name="uv")
    m1 = b.op("unsqueeze", b.variable("m1", rand(6, 6)), axes=[0])
    m2 = b.op("unsqueeze", b.variable("m2", rand(6, 3)), axes=[0])
    b.output(b.op("matmul", m1, m2), name="p")
    b.output(b.op("matmul", m1, b.external("z", shape=(2, 6, 3))), name="q")
    m = _export(b.build(), {"x": rand(6), "z": rand(2, 6, 3)}, tmp_path)
    assert [list(d.dim_value for d in o.type.tensor_type.shape.dim) for o in m.graph.output] == \
        [[6, 6], [6, 6], [1, 6], [1, 6, 3], [2, 6, 3]]


def test_folded_values_as_outputs_and_shared_data(tmp_path):
    b = GraphBuilder("shared")
    x = b.external("x", shape=(3, 4))
    w = b.variable("w", rand(3, 4))
    b.output(b.op("reshape", w, shape=[4, 3]), name="r")          # a folded graph output
    b.output(b.op("add", x, b.op("copy", w)), name="a")
    b.output(b.op("mul", x, w), name="m")
    m = _export(b.build(), {"x": rand(3, 4)}, tmp_path)
    assert "Identity" in _types(m) and "Reshape" not in _types(m) and "Unsqueeze" not in _types(m)
    # w and its copy are one initializer; the reshaped output is its own
    assert sorted(_initializer_shapes(m).values()) == [[3, 4], [4, 3]]


def test_chains_over_inputs_are_not_folded(tmp_path):
    b = GraphBuilder("live")
    x = b.external("x", shape=(4,))
    b.output(b.op("add", b.op("unsqueeze", x, axes=[0]), b.variable("c", rand(1, 4))), name="y")
    m = _export(b.build(), {"x": rand(4)}, tmp_path)
    assert "Unsqueeze" in _types(m)


def test_spatial_mean_becomes_global_average_pool(tmp_path):
    """A mean over every axis from 2 on is written as GlobalAveragePool (which onnxruntime's
    NCHWc pass keeps blocked); any other mean stays a ReduceMean."""
    b = GraphBuilder("gap")
    x = b.external("x", shape=(2, 3, 4, 5))
    b.output(b.op("mean_reduce", x, axes=[2, 3]), name="gap")
    b.output(b.op("mean_reduce", x, axes=[3, 2]), name="gap_unordered")
    b.output(b.op("mean_reduce", x, axes=[1, 2, 3]), name="with_channels")
    b.output(b.op("mean_reduce", x, axes=[3]), name="last")
    m = _export(b.build(), {"x": rand(2, 3, 4, 5)}, tmp_path)
    assert _types(m) == ["GlobalAveragePool", "GlobalAveragePool", "ReduceMean", "ReduceMean"]


def test_mean_of_an_empty_spatial_axis_stays_reduce_mean(tmp_path):
    b = GraphBuilder("empty")
    x = b.external("x", shape=(2, 3, 0))
    b.output(b.op("mean_reduce", x, axes=[2]), name="y")
    path = save_onnx(b.build(), str(tmp_path / "model.onnx"))
    assert _types(onnx.load(path)) == ["ReduceMean"]


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_conv_b_keeps_a_float16_convolution_float16(tmp_path, op):
    # ONNX binds Conv's X, W and B to one type: a float16 network's B written as float32 was
    # refused by onnxruntime ("bound to different types").
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(rand(3, 3, 3, 3).astype(np.float16), "w")
    bias = numpy_helper.from_array(rand(3).astype(np.float16), "b")
    g = helper.make_graph([helper.make_node(op, ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 3, 5, 5])], [w, bias])
    src = tmp_path / "src.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    import nnefx
    feeds = {"x": rand(1, 3, 5, 5).astype(np.float16)}
    m = _export(nnefx.load(str(src)), feeds, tmp_path)
    (node,) = [n for n in m.graph.node if n.op_type == op]
    assert len(node.input) == 3
    assert {i.name: i.data_type for i in m.graph.initializer}[node.input[2]] == TensorProto.FLOAT16
