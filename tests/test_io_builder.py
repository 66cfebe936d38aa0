"""GraphBuilder: programmatic NNEF graphs, checked by the front-end, saved as models."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx import NNEFXError
from nnefx.io.binary import read_tensor
from nnefx.io.builder import GraphBuilder


def dense_builder():
    b = GraphBuilder("net")
    x = b.external("input", shape=(1, 3))
    w = b.variable("fc/w", np.arange(12, dtype=np.float32).reshape(3, 4))
    bias = b.variable("fc/b", np.ones((1, 4), np.float32))
    y = b.add(b.matmul(x, w), bias)
    b.output(b.op("relu", y), name="output")
    return b


def test_build_gives_a_shaped_graph_with_data():
    model = dense_builder().build()
    g = model.graph
    assert g.inputs == ["input"] and g.outputs == ["output"]
    assert g.tensors["output"].shape == (1, 4)
    np.testing.assert_array_equal(model.weights["fc/w"], np.arange(12, dtype=np.float32).reshape(3, 4))
    assert [op.op for op in g.operations].count("variable") == 2


def test_text_is_valid_for_the_official_parser():
    nnef = pytest.importorskip("nnef")
    b = dense_builder()
    graph = nnef.parse_string(b.text())
    nnef.infer_shapes(graph)
    assert graph.tensors["output"].shape == [1, 4]
    assert "fc_w = variable<scalar>(shape = [3, 4], label = 'fc/w');" in b.text()


def test_built_model_saves_and_loads_back(tmp_path):
    model = dense_builder().build()
    nnefx.save(model, tmp_path / "m")
    assert read_tensor(tmp_path / "m" / "fc" / "w.dat")[0].shape == (3, 4)
    again = nnefx.load(tmp_path / "m")
    np.testing.assert_array_equal(again.weights["fc/b"], np.ones((1, 4), np.float32))
    assert again.graph.tensors["output"].shape == (1, 4)


def test_several_results_constants_and_renamed_outputs():
    b = GraphBuilder("multi")
    x = b.external("x", shape=(2, 4))
    halves = b.op("split", x, axis=1, ratios=[1, 1], outputs=2)
    assert isinstance(halves, list) and len(halves) == 2
    c = b.constant(np.array([[0.5, 2.0]], np.float32))
    b.output(b.mul(halves[0], c), name="left")
    b.output(halves[1], name="right")
    g = b.build().graph
    assert g.outputs == ["left", "right"]
    assert g.tensors["left"].shape == (2, 2) and g.tensors["right"].shape == (2, 2)


def test_quantized_variable_is_stored_as_codes(tmp_path):
    b = GraphBuilder("q")
    x = b.external("x", shape=(1, 2))
    quant = {"op_name": "zero_point_linear_quantize", "zero_point": 0, "scale": 0.5, "bits": 8,
             "signed": True, "symmetric": True}
    w = b.variable("w", np.array([[1, -2], [3, 4]], np.int8), quant=quant)
    b.output(b.matmul(x, w), name="y")
    model = b.build()
    assert model.graph.tensors["w"].dtype == "scalar"
    assert model.graph.tensors["w"].quant["scale"] == 0.5
    nnefx.save(model, tmp_path / "q")
    assert read_tensor(tmp_path / "q" / "w.dat")[1] == {"bits": 8, "signed": True}
    assert "zero_point_linear_quantize" in (tmp_path / "q" / "graph.quant").read_text()


@pytest.mark.parametrize("make, message", [
    (lambda b, x: b.op("relu", x, alpha=3), "'relu' has no parameter 'alpha' \\(parameters: x\\)"),
    (lambda b, x: b.op("conv", x, x, paddings=[]), "no parameter 'paddings'"),
    (lambda b, x: b.op("relu", x, x), "at most 1 arguments"),
    (lambda b, x: b.op("add", x, x, y=x), "'y' of 'add' is given twice"),
])
def test_unknown_parameters_are_refused_at_the_call(make, message):
    b = GraphBuilder("bad")
    x = b.external("x", shape=(1, 2))
    with pytest.raises(NNEFXError, match=message):
        make(b, x)


@pytest.mark.parametrize("make, message", [
    (lambda b, x: b.op("leaky_relu", x, alpha="a"), "alpha"),
    (lambda b, x: b.op("clamp", x, a=0.0, b=True), "clamp|b"),
    (lambda b, x: b.op("nosuch", x), "nosuch"),
    (lambda b, x: b.op("reshape", x, shape=[7]), "reshape"),
])
def test_bad_invocations_point_at_the_builder_call(make, message):
    b = GraphBuilder("bad")
    x = b.external("x", shape=(1, 2))
    b.output(make(b, x), name="y")
    with pytest.raises(NNEFXError, match=message) as info:
        b.build()
    assert "GraphBuilder op(" in info.value.message
    assert info.value.location.line == 6


def test_names_are_checked_up_front():
    b = GraphBuilder("g")
    b.external("x", shape=(1,))
    with pytest.raises(NNEFXError, match="already used"):
        b.external("x", shape=(1,))
    with pytest.raises(NNEFXError, match="not a valid NNEF identifier"):
        b.external("1x", shape=(1,))
    with pytest.raises(NNEFXError, match="no outputs"):
        b.text()
    lonely = GraphBuilder("lonely")
    lonely.output(lonely.constant(1.0))
    with pytest.raises(NNEFXError, match="no inputs"):
        lonely.text()
    b.output(b.constant(float("nan")))
    with pytest.raises(NNEFXError, match="finite"):
        b.text()


def test_inputs_renamed_as_outputs_become_copies():
    b = GraphBuilder("g")
    x = b.external("x", shape=(2, 4))
    b.output(x, name="same")
    g = b.build().graph
    assert g.inputs == ["x"] and g.outputs == ["same"]
    assert g.tensors["same"].shape == (2, 4)
    assert "same = copy(x);" in b.text()


def test_convolution_with_attributes():
    b = GraphBuilder("net")
    x = b.external("input", shape=(1, 3, 8, 8))
    w = b.variable("conv1/filter", np.zeros((4, 3, 3, 3), np.float32))
    y = b.op("conv", x, w, padding=[(1, 1), (1, 1)], stride=[2, 2])
    b.output(y, name="y")
    assert b.build().graph.tensors["y"].shape == (1, 4, 4, 4)
