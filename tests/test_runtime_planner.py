"""Planner: order checks, kernel lookup, folding, pruning, slot reuse, argument handling."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx import Graph, NNEFXError, Operation, Tensor
from nnefx.diagnostics import Location
from nnefx.runtime.planner import MAX_CONSTANT_ITEMS, compile_plan
from nnefx.runtime.session import Session
from nnefx.runtime.signature import tensor_params
from runtime_graphs import CALLS, Builder, accumulator_graph, resolve


def test_tensor_params_are_read_from_the_declaration():
    params = tensor_params("fragment conv( input: tensor<scalar>, filter: tensor<scalar>, "
                           "bias: tensor<scalar> = 0.0, border: string = 'constant', "
                           "padding: (integer,integer)[] = [], groups: integer = 1 ) -> ( output: tensor<scalar> );")
    assert [(p.name, p.dtype, p.is_array, p.has_default) for p in params] == [
        ("input", "scalar", False, False), ("filter", "scalar", False, False), ("bias", "scalar", False, True)]
    assert params[2].default == 0.0
    generic = tensor_params("fragment select<?>( condition: tensor<logical>, true_value: tensor<?>, "
                            "false_value: tensor<?> ) -> ( output: tensor<?> );")
    assert [p.dtype for p in generic] == ["logical", None, None]
    arrays = tensor_params("fragment concat( values: tensor<scalar>[], axis: integer ) -> ( value: tensor<scalar> );")
    assert arrays[0].is_array
    assert tensor_params("not a declaration") is None


def test_constants_and_variable_only_subgraphs_are_folded():
    b = Builder("fold")
    x = b.external("x", [3])
    w = b.variable("w", np.array([1.0, 2.0, 3.0], np.float32))
    k = b.constant("k", [3], [2.0])
    wk = b.op("mul", {"x": w, "y": k}, "wk", [3])            # foldable
    wk1 = b.op("add", {"x": wk, "y": 1.0}, "wk1", [3])       # foldable (literal)
    y = b.op("mul", {"x": x, "y": wk1}, "y", [3])            # needs x
    plan = compile_plan(b.output(y), resolve=resolve)
    assert plan.folded == 2 and [s.kind for s in plan.steps] == ["mul"]
    CALLS.clear()
    out = Session(b.graph, resolve=resolve).run({"x": np.ones(3, np.float32)})
    np.testing.assert_allclose(out["y"], [3.0, 5.0, 7.0])
    assert CALLS == {"mul": 2, "add": 1}  # folding ran mul+add once, the run one mul
    unfolded = compile_plan(b.graph, resolve=resolve, fold=False)
    assert unfolded.folded == 0 and len(unfolded.steps) == 3


def test_updated_variables_are_not_folded():
    plan = compile_plan(accumulator_graph(), resolve=resolve)
    assert plan.folded == 0 and [s.kind for s in plan.steps] == ["add"]
    assert [(u.key, u.variable) for u in plan.updates] == [("state/acc", "acc")]


def test_operations_feeding_nothing_are_dropped():
    b = Builder("dead")
    x = b.external("x", [2])
    b.op("tanh", {"x": x}, "unused", [2])
    y = b.op("neg", {"x": x}, "y", [2])
    plan = compile_plan(b.output(y), resolve=resolve)
    assert plan.pruned == 1 and [s.kind for s in plan.steps] == ["neg"]
    assert "1 unused dropped" in plan.summary()


def test_slots_are_reused_after_last_use():
    b = Builder("chain")
    t = b.external("x", [4])
    for i in range(20):
        t = b.op("neg" if i % 2 else "tanh", {"x": t}, f"t{i}", [4])
    plan = compile_plan(b.output(t), resolve=resolve)
    assert len(plan.steps) == 20
    assert plan.n_slots <= 3  # input + two alternating temporaries, however long the chain
    # every step frees its (dead) input
    assert all(len(s.free) == 1 for s in plan.steps)
    x = np.linspace(-1, 1, 4).astype(np.float32)
    ref = x
    for i in range(20):
        ref = -ref if i % 2 else np.tanh(ref)
    np.testing.assert_allclose(Session(b.graph, resolve=resolve).run({"x": x})[t], ref, rtol=1e-6)
    kept = compile_plan(b.graph, resolve=resolve, release=False)
    assert kept.n_slots == 21 and all(s.free == () for s in kept.steps)
    np.testing.assert_allclose(Session(b.graph, release=False, resolve=resolve).run({"x": x})[t], ref, rtol=1e-6)


def test_branching_graph_keeps_values_alive_until_last_reader():
    b = Builder("branch")
    x = b.external("x", [2])
    a = b.op("tanh", {"x": x}, "a", [2])
    c = b.op("neg", {"x": x}, "c", [2])
    d = b.op("add", {"x": a, "y": c}, "d", [2])
    e = b.op("mul", {"x": d, "y": a}, "e", [2])
    plan = compile_plan(b.output(e, d), resolve=resolve)
    x_in = np.array([0.5, -2.0], np.float32)
    out = Session(b.graph, resolve=resolve).run({"x": x_in})
    ta = np.tanh(x_in)
    np.testing.assert_allclose(out["d"], ta - x_in, rtol=1e-6)
    np.testing.assert_allclose(out["e"], (ta - x_in) * ta, rtol=1e-6)
    # x is freed after neg, c after add, a after mul; d (an output) never
    assert [len(s.free) for s in plan.steps] == [0, 1, 1, 1]


def test_tensor_array_arguments_and_results():
    b = Builder("arrays")
    x = b.external("x", [2, 4])
    parts = b.op("split", {"value": x}, ["p0", "p1"], [2, 2], result="values", axis=1, ratios=[1, 1])
    y = b.op("concat", {"values": [parts[1], parts[0], 3.0]}, "y", None, result="value", axis=1)
    g = b.output(y)
    with pytest.raises(NNEFXError, match="operation 'concat' failed"):
        Session(g, resolve=resolve).run({"x": np.zeros((2, 4), np.float32)})  # 3.0 is rank 0
    g.operations[-1].inputs["values"] = [parts[1], parts[0]]
    x_in = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = Session(g, resolve=resolve).run({"x": x_in})
    np.testing.assert_array_equal(out["y"], np.concatenate([x_in[:, 2:], x_in[:, :2]], axis=1))


def test_unused_result_of_a_multi_result_operation_is_freed():
    b = Builder("split")
    x = b.external("x", [2, 4])
    parts = b.op("split", {"value": x}, ["p0", "p1"], [2, 2], result="values", axis=1, ratios=[1, 1])
    y = b.op("neg", {"x": parts[0]}, "y", [2, 2])
    plan = compile_plan(b.output(y), resolve=resolve)
    split_step = plan.steps[0]
    assert split_step.outs[0][1] in split_step.free


def test_defaulted_tensor_argument_is_filled_in_and_arguments_reordered():
    b = Builder("lin")
    x = b.external("x", [1, 2])
    w = b.variable("w", np.array([[1.0, 2.0]], np.float32))
    bias = b.variable("bias", np.array([[10.0]], np.float32))
    # inputs given out of declaration order: the declaration decides positions
    y = b.op("linear", {"bias": bias, "filter": w, "input": x}, "y", [1, 1])
    z = b.op("linear", {"input": x, "filter": w}, "z", [1, 1])
    out = Session(b.output(y, z), resolve=resolve).run({"x": np.array([[1.0, 1.0]], np.float32)})
    assert out["y"].tolist() == [[13.0]] and out["z"].tolist() == [[3.0]]


def test_argument_errors_name_the_operation():
    b = Builder("args")
    x = b.external("x", [2])
    b.op("linear", {"filter": x}, "y", [2])
    with pytest.raises(NNEFXError, match="operation 'linear' is missing tensor argument 'input'"):
        compile_plan(b.output("y"), resolve=resolve)
    b = Builder("args2")
    x = b.external("x", [2])
    b.op("neg", {"x": x, "bogus": x}, "y", [2])
    with pytest.raises(NNEFXError, match="operation 'neg' has no tensor parameter 'bogus'"):
        compile_plan(b.output("y"), resolve=resolve)


def test_generic_operations_get_their_dtype():
    b = Builder("generic")
    c = b.external("c", [2], dtype="logical")
    y = b.op("select", {"condition": c, "true_value": 1.5, "false_value": -1}, "y", [2])
    plan = compile_plan(b.output(y), resolve=resolve)
    assert plan.steps[0].kwargs["dtype"] == "scalar"  # op.dtype unset: taken from the tensors
    out = Session(b.graph, resolve=resolve).run({"c": np.array([True, False])})
    assert out["y"].tolist() == [1.5, -1.0] and out["y"].dtype == np.float32


def test_order_and_reference_errors():
    b = Builder("order")
    x = b.external("x", [2])
    b.op("neg", {"x": "later"}, "y", [2])
    b.op("neg", {"x": x}, "later", [2])
    b.graph.operations[1].location = Location("o.nnef", 3, 5)
    with pytest.raises(NNEFXError) as info:
        compile_plan(b.output("y"), resolve=resolve)
    assert str(info.value) == ("o.nnef:3:5: error: operation 'neg' reads tensor 'later' before it is "
                               "defined (operations are not in topological order)")
    g = Graph("g", outputs=["nope"], tensors={})
    with pytest.raises(NNEFXError, match="names unknown tensor 'nope' as output"):
        compile_plan(g, resolve=resolve)
    g = Graph("g", outputs=["y"], tensors={"y": Tensor("y")})
    with pytest.raises(NNEFXError, match="graph output 'y' is never computed"):
        compile_plan(g, resolve=resolve)
    b = Builder("twice")
    x = b.external("x", [2])
    b.op("neg", {"x": x}, "y", [2])
    b.graph.operations.append(Operation("tanh", {"x": x}, {"y": "y"}))
    with pytest.raises(NNEFXError, match="tensor 'y' is written twice"):
        compile_plan(b.output("y"), resolve=resolve)


def test_update_rules():
    b = Builder("upd")
    x = b.external("x", [2])
    b.update(x, x, "r")
    with pytest.raises(NNEFXError, match="first argument of 'update' must be a variable, 'x' is not"):
        compile_plan(b.output("r"), resolve=resolve)
    b = Builder("upd2")
    x = b.external("x", [2])
    v = b.variable("v", np.zeros(2, np.float32))
    b.update(v, x, "r1")
    b.update(v, x, "r2")
    with pytest.raises(NNEFXError, match="variable 'v' is updated twice in one cycle"):
        compile_plan(b.output("r1"), resolve=resolve)
    b = Builder("upd3")
    x = b.external("x", [3])
    v = b.variable("v", np.zeros(2, np.float32))
    b.update(v, x, "r")
    with pytest.raises(NNEFXError, match=r"'update' of variable 'v' with shape \[2\] gets a value of shape \[3\]"):
        compile_plan(b.output("r"), resolve=resolve)


def test_unsupported_operation_fails_at_compile_time_with_location():
    b = Builder("unsupported")
    x = b.external("x", [2])
    b.op("frobnicate", {"x": x}, "y", [2])
    b.graph.operations[-1].location = Location("u.nnef", 7, 3)
    with pytest.raises(NNEFXError) as info:
        compile_plan(b.output("y"), resolve=resolve)
    assert str(info.value) == "u.nnef:7:3: error: unsupported operation 'frobnicate'"
    with pytest.raises(NNEFXError, match="unknown backend 'gpu'"):
        compile_plan(b.graph, "gpu", resolve=resolve)


def test_variable_and_constant_validation():
    b = Builder("var")
    b.variable("v", np.zeros(2, np.float32))
    b.graph.tensors["v"].data = None
    with pytest.raises(NNEFXError, match="variable 'v' has no data"):
        compile_plan(b.output("v"), resolve=resolve)
    b = Builder("var2")
    b.variable("v", np.zeros(2, np.float32))
    b.graph.operations[-1].attribs["shape"] = [3]
    with pytest.raises(NNEFXError, match=r"declared with shape \[3\] but its data has shape \[2\]"):
        compile_plan(b.output("v"), resolve=resolve)
    b = Builder("var3")
    b.variable("v1", np.zeros(2, np.float32), label="a")
    b.variable("v2", np.zeros(3, np.float32), label="A")
    with pytest.raises(NNEFXError, match="label 'A' share data but have shapes"):
        compile_plan(b.output("v1"), resolve=resolve)
    b = Builder("const")
    b.constant("k", [2, 2], [1.0, 2.0, 3.0])
    with pytest.raises(NNEFXError, match=r"constant 'k' of shape \[2, 2\] needs 4 values or 1, got 3"):
        compile_plan(b.output("k"), resolve=resolve)
    b = Builder("huge")
    b.constant("k", [MAX_CONSTANT_ITEMS, 2], [0.0])
    with pytest.raises(NNEFXError, match="too large"):
        compile_plan(b.output("k"), resolve=resolve)
    b = Builder("ok")
    b.constant("k", [2, 2], [1, 2, 3, 4], dtype="integer")
    out = Session(b.output("k"), resolve=resolve).run()
    assert out["k"].tolist() == [[1, 2], [3, 4]] and out["k"].dtype == np.int64
    out["k"][0, 0] = 99  # outputs are the caller's to change
    assert Session(b.graph, resolve=resolve).run()["k"][0, 0] == 1


def test_unknown_data_types_are_errors():
    b = Builder("dtype")
    x = b.external("x", [2], dtype="complex")
    b.op("neg", {"x": x}, "y", [2])
    g = b.output("y")
    with pytest.raises(NNEFXError, match="input 'x' has unknown data type 'complex'"):
        Session(g, resolve=resolve)
    g.operations[0].dtype = "scalar"
    g.tensors["y"].dtype = "extent"
    with pytest.raises(NNEFXError, match="tensor 'y' has unknown data type 'extent'"):
        compile_plan(g, resolve=resolve)
