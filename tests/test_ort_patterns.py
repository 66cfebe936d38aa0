"""The onnxruntime pattern pass removes only nodes whose removal changes no value or shape."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nnefx.engines.ort_patterns import simplify_for_onnxruntime  # noqa: E402


def _model(nodes, x_shape, initializers, out="y", opset=18, extra_inputs=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape), *extra_inputs],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _run(data, x):
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _ops(data):
    return [n.op_type for n in onnx.load_from_string(data).graph.node]


RNG = np.random.default_rng(3)
W = RNG.standard_normal((4, 5)).astype(np.float32)
B = RNG.standard_normal(5).astype(np.float32)


def test_bias_and_weight_unsqueezes_are_removed_with_identical_results():
    nodes = [helper.make_node("Identity", ["b"], ["b_copy"]),
             helper.make_node("Unsqueeze", ["w", "ax0"], ["w3"]),
             helper.make_node("MatMul", ["x", "w3"], ["p"]),
             helper.make_node("Unsqueeze", ["b_copy", "ax01"], ["b3"]),
             helper.make_node("Add", ["p", "b3"], ["y"])]
    data = _model(nodes, [2, 3, 4], {"w": W, "b": B, "ax0": np.array([0]), "ax01": np.array([0, 1])})
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    simpler = simplify_for_onnxruntime(data)
    assert _ops(simpler) == ["MatMul", "Add"]
    want, got = _run(data, x), _run(simpler, x)
    assert got.shape == want.shape == (2, 3, 5)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("case", ["lower-rank-partner", "inner-axis", "vector-matmul", "graph-output", "not-broadcasting"])
def test_unsqueezes_that_matter_are_kept(case):
    inits = {"b": B, "ax": np.array([0])}
    x_shape = [3, 5]
    if case == "lower-rank-partner":  # [5] + [1, 5] is [1, 5], not [5]
        nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]), helper.make_node("Add", ["x", "b2"], ["y"])]
        x_shape = [5]
    elif case == "inner-axis":  # [5] -> [5, 1] broadcasts differently
        inits["ax"] = np.array([1])
        nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]), helper.make_node("Add", ["x", "b2"], ["y"])]
        x_shape = [5, 5]
    elif case == "vector-matmul":  # a 1-D MatMul operand is a vector, not a matrix
        nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]), helper.make_node("MatMul", ["b2", "x"], ["y"])]
        x_shape = [5, 2]
    elif case == "graph-output":
        nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["y"])]
    else:  # Concat does not broadcast: ranks must match
        nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]),
                 helper.make_node("Concat", ["x", "b2"], ["y"], axis=0)]
    data = _model(nodes, x_shape, inits)
    assert simplify_for_onnxruntime(data) is data


def test_names_read_inside_a_subgraph_are_kept():
    branch = helper.make_graph([helper.make_node("Add", ["x", "b2"], ["z"])], "then", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["z2"])], "else", [],
                              [helper.make_tensor_value_info("z2", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]),
             helper.make_node("Add", ["x", "b2"], ["s"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)]
    data = _model(nodes, [3, 5], {"b": B, "ax": np.array([0]), "c": np.array(True)})
    assert "Unsqueeze" in _ops(simplify_for_onnxruntime(data))


def test_two_unsqueezed_operands_of_one_node_keep_the_result_shape():
    # Add(Unsqueeze(a), Unsqueeze(b)) is [1, 5]; removing both would make it [5].
    nodes = [helper.make_node("Unsqueeze", ["b", "ax"], ["b2"]),
             helper.make_node("Unsqueeze", ["c", "ax"], ["c2"]),
             helper.make_node("Add", ["b2", "c2"], ["s"]),
             helper.make_node("Add", ["x", "s"], ["y"])]
    data = _model(nodes, [5], {"b": B, "c": B[::-1].copy(), "ax": np.array([0])})
    x = RNG.standard_normal(5).astype(np.float32)
    simpler = simplify_for_onnxruntime(data)
    assert _run(simpler, x).shape == _run(data, x).shape == (1, 5)
    np.testing.assert_allclose(_run(simpler, x), _run(data, x), rtol=1e-6)
