"""Session: feeding inputs, variables and updates, reset, validation and errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx import Model, NNEFXError
from nnefx.diagnostics import Location
from nnefx.runtime.profile import Profile
from nnefx.runtime.session import Session
from runtime_graphs import CALLS, Builder, accumulator_graph, gated_cell_graph, gated_cell_reference, resolve


def simple_graph() -> Model:
    b = Builder("simple")
    x = b.external("x", [2, 3])
    k = b.constant("k", [1, 3], [1.0, 2.0, 3.0])
    y = b.op("add", {"x": x, "y": 0.5}, "y1", [2, 3])
    z = b.op("mul", {"x": y, "y": k}, "z", [2, 3])
    n = b.op("neg", {"x": z}, "n", [2, 3])
    return Model(b.output(z, n), source="simple.nnef")


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_run_computes_outputs_in_graph_order(backend):
    s = Session(simple_graph(), backend, resolve=resolve)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = s.run({"x": x})
    assert list(out) == ["z", "n"]
    expected = (x + 0.5) * np.array([[1, 2, 3]], np.float32)
    np.testing.assert_allclose(out["z"], expected)
    np.testing.assert_allclose(out["n"], -expected)
    assert out["z"].dtype == np.float32  # formal 'add' returns float64; storage is float32


def test_backend_chooses_the_kernel():
    x = np.ones((2, 3), np.float32)
    CALLS.clear()
    Session(simple_graph(), "fast", resolve=resolve).run({"x": x})
    assert "add_formal" not in CALLS and CALLS["add"] == 1
    CALLS.clear()
    Session(simple_graph(), "formal", resolve=resolve).run({"x": x})
    assert CALLS["add_formal"] == 1 and "add" not in CALLS


def test_inputs_and_outputs_describe_the_graph():
    s = Session(simple_graph(), resolve=resolve)
    assert [tuple(i) for i in s.inputs] == [("x", (2, 3), "scalar")]
    assert [(o.name, o.shape, o.dtype) for o in s.outputs] == [("z", (2, 3), "scalar"), ("n", (2, 3), "scalar")]


def test_input_validation_errors_are_clear():
    s = Session(simple_graph(), resolve=resolve)
    with pytest.raises(NNEFXError, match=r"input 'x' must have shape \[2, 3\], got \[3, 2\]"):
        s.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(NNEFXError, match=r"input 'x' must be scalar \(floating-point\) data, got int64"):
        s.run({"x": np.zeros((2, 3), np.int64)})
    with pytest.raises(NNEFXError, match="missing input 'x'"):
        s.run({})
    with pytest.raises(NNEFXError, match=r"'y' is not an input of graph 'simple' \(inputs: x\)"):
        s.run({"x": np.zeros((2, 3)), "y": 1})
    with pytest.raises(NNEFXError, match="not a numeric or string array"):
        s.run({"x": np.array([[object()] * 3] * 2)})
    # float64 data is narrowed to the float32 storage
    assert s.run({"x": np.zeros((2, 3))})["z"].dtype == np.float32


def test_integer_and_logical_inputs_follow_storage():
    b = Builder("sel")
    c = b.external("c", [3], dtype="logical")
    i = b.external("i", [3], dtype="integer")
    j = b.op("select", {"condition": c, "true_value": i, "false_value": 7}, "j", [3], dtype="integer",
             op_dtype="integer")
    g = b.output(j)
    s = Session(g, resolve=resolve)
    out = s.run({"c": np.array([True, False, True]), "i": np.array([1, 2, 3], np.int32)})
    assert out["j"].tolist() == [1, 7, 3] and out["j"].dtype == np.int64
    with pytest.raises(NNEFXError, match="must be logical"):
        s.run({"c": np.array([1, 0, 1]), "i": np.array([1, 2, 3])})
    with pytest.raises(NNEFXError, match="must be integer"):
        s.run({"c": np.array([True, False, True]), "i": np.array([1.0, 2.0, 3.0])})
    narrow = Session(g, storage={"integer": "int32"}, resolve=resolve)
    assert narrow.run({"c": np.ones(3, bool), "i": np.array([4, 5, 6])})["j"].dtype == np.int32
    with pytest.raises(NNEFXError, match="outside the int32 range"):
        narrow.run({"c": np.ones(3, bool), "i": np.array([1, 2, 2**40])})
    via_model = Session(Model(g, extras={"storage": {"integer": "int32"}}), resolve=resolve)
    assert via_model.plan.storage["integer"] == np.int32


def test_input_shapes_substitute_declared_shapes():
    b = Builder("batch")
    x = b.external("x", [1, 4])
    w = b.variable("w", np.eye(4, dtype=np.float32)[:2])
    y = b.op("linear", {"input": x, "filter": w}, "y", [1, 2])
    g = b.output(y)
    with pytest.raises(NNEFXError, match=r"must have shape \[1, 4\]"):
        Session(g, resolve=resolve).run({"x": np.ones((5, 4), np.float32)})
    s = Session(g, input_shapes={"x": (None, 4)}, resolve=resolve)
    assert s.inputs[0].shape == (None, 4)
    assert s.run({"x": np.ones((5, 4), np.float32)})["y"].shape == (5, 2)
    with pytest.raises(NNEFXError, match="same rank"):
        Session(g, input_shapes={"x": (None,)}, resolve=resolve)
    with pytest.raises(NNEFXError, match="not an input"):
        Session(g, input_shapes={"w": (None, 4)}, resolve=resolve)
    with pytest.raises(NNEFXError, match="must be a sequence of ints or None"):
        Session(g, input_shapes={"x": ("a", 4)}, resolve=resolve)
    with pytest.raises(NNEFXError, match="negative extent"):
        Session(g, input_shapes={"x": (-1, 4)}, resolve=resolve)
    # substituting the declared shape keeps the result shape checks
    assert Session(g, input_shapes={"x": [1, 4]}, resolve=resolve).plan.steps[0].out_shapes == [(1, 2)]
    assert s.plan.steps[0].out_shapes == [None]


def test_accumulator_update_is_seen_by_the_next_run_and_reset_restores():
    s = Session(accumulator_graph(), resolve=resolve)
    x = np.ones((2, 3), np.float32)
    for step in range(1, 4):
        out = s.run({"x": x * step})
        np.testing.assert_allclose(out["acc_new"], np.full((2, 3), sum(range(1, step + 1))))
    np.testing.assert_allclose(s.variables["state/acc"], np.full((2, 3), 6.0))
    s.reset()
    np.testing.assert_allclose(s.variables["state/acc"], 0.0)
    np.testing.assert_allclose(s.run({"x": x})["acc_new"], 1.0)


def test_update_does_not_alias_inputs_or_outputs():
    # acc' = x: the state must not share memory with the caller's array or the returned output
    b = Builder("set")
    x = b.external("x", [2])
    acc = b.variable("acc", np.zeros(2, np.float32))
    b.update(acc, x, "acc_new")
    s = Session(b.output("acc_new"), resolve=resolve)
    x_in = np.array([1.0, 2.0], np.float32)
    out = s.run({"x": x_in})
    x_in[:] = 9
    out["acc_new"][:] = 7
    np.testing.assert_allclose(s.variables["acc"], [1.0, 2.0])
    assert out["acc_new"].flags.writeable


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_gated_cell_matches_a_numpy_recurrence(backend):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3))
    u = rng.standard_normal((4, 4))
    xs = [rng.standard_normal((1, 3)).astype(np.float32) for _ in range(6)]
    s = Session(gated_cell_graph(w, u), backend, resolve=resolve)
    expected = gated_cell_reference(w, u, xs)
    for x, h in zip(xs, expected, strict=True):
        np.testing.assert_allclose(s.run({"x": x})["h_next"], h, rtol=1e-5, atol=1e-6)
    s.reset()
    np.testing.assert_allclose(s.run({"x": xs[0]})["h_next"], expected[0], rtol=1e-5, atol=1e-6)


def test_two_updates_swap_variables():
    b = Builder("swap")
    a = b.variable("a", np.array([1.0], np.float32))
    c = b.variable("c", np.array([2.0], np.float32))
    b.update(a, c, "a2")
    b.update(c, a, "c2")
    s = Session(b.output("a2", "c2"), resolve=resolve)
    out = s.run()
    assert (out["a2"][0], out["c2"][0]) == (2.0, 1.0)
    out = s.run()
    assert (out["a2"][0], out["c2"][0]) == (1.0, 2.0)


def test_variables_with_equal_labels_share_state():
    b = Builder("shared")
    x = b.external("x", [2])
    v1 = b.variable("v1", np.zeros(2, np.float32), label="Shared/V")
    v2 = b.variable("v2", np.zeros(2, np.float32), label="shared/v")
    s1 = b.op("add", {"x": v1, "y": x}, "s1", [2])
    b.update(v1, s1, "v1_new")
    b.op("neg", {"x": v2}, "read", [2])
    s = Session(b.output("read"), resolve=resolve)
    s.run({"x": np.ones(2, np.float32)})
    np.testing.assert_allclose(s.run({"x": np.ones(2, np.float32)})["read"], [-1.0, -1.0])


def test_profile_counts_kernel_calls_per_kind():
    s = Session(simple_graph(), resolve=resolve)
    p = Profile()
    for _ in range(3):
        s.run({"x": np.ones((2, 3), np.float32)}, profile=p)
    assert p.runs == 3
    assert {k: int(v[0]) for k, v in p.by_kind.items()} == {"add": 3, "mul": 3, "neg": 3}
    table = p.table()
    assert table.splitlines()[0].split()[:2] == ["operation", "calls"]
    assert "(runtime overhead)" in table


def test_kernel_errors_name_the_operation_and_its_location():
    b = Builder("bad")
    x = b.external("x", [2])
    b.op("fail", {"x": x}, "y", [2])
    g = b.output("y")
    g.operations[-1].location = Location("bad.nnef", 4, 9)
    s = Session(g, "formal", resolve=resolve)
    with pytest.raises(NNEFXError) as info:
        s.run({"x": np.ones(2, np.float32)})
    assert str(info.value) == ("bad.nnef:4:9: error: operation 'fail' failed: IndexError: "
                               "index 7 is out of bounds")
    b = Builder("bad2")
    x = b.external("x", [2])
    b.op("fail_nnefx", {"x": x}, "y", [2])
    s = Session(Model(b.output("y"), source="m.nnef"), "formal", resolve=resolve)
    with pytest.raises(NNEFXError) as info:
        s.run({"x": np.ones(2, np.float32)})
    assert str(info.value) == ("m.nnef: [operation #1 'fail_nnefx' -> y]: error: in operation "
                               "'fail_nnefx': size must be positive")


def test_kernels_cannot_write_into_the_callers_array():
    b = Builder("inplace")
    x = b.external("x", [2])
    b.op("inplace", {"x": x}, "y", [2])
    s = Session(b.output("y"), "formal", resolve=resolve)
    x_in = np.ones(2, np.float32)
    with pytest.raises(NNEFXError, match="operation 'inplace' failed"):
        s.run({"x": x_in})
    assert x_in.tolist() == [1.0, 1.0]


def test_results_of_wrong_kind_or_shape_are_errors():
    b = Builder("kind")
    x = b.external("x", [2])
    b.op("to_int", {"x": x}, "y", [2])
    s = Session(b.output("y"), resolve=resolve)
    with pytest.raises(NNEFXError, match="operation 'to_int' produced int64 data for scalar result 'y'"):
        s.run({"x": np.ones(2, np.float32)})
    b = Builder("shape")
    x = b.external("x", [2, 3])
    b.op("flatten", {"x": x}, "y", [2, 4])
    s = Session(b.output("y"), resolve=resolve)
    with pytest.raises(NNEFXError, match=r"produced shape \[2, 3\] for 'y', declared \[2, 4\]"):
        s.run({"x": np.ones((2, 3), np.float32)})


def test_check_numerics_and_finite_inputs():
    b = Builder("nan")
    x = b.external("x", [2])
    b.op("log", {"x": x}, "y", [2])
    g = b.output("y")
    out = Session(g, resolve=resolve).run({"x": np.array([-1.0, 1.0], np.float32)})
    assert np.isnan(out["y"][0])  # NNEF allows NaN results; no warning either
    with pytest.raises(NNEFXError, match=r"operation 'log' produced nan in 'y' at index \[0\]"):
        Session(g, check_numerics=True, resolve=resolve).run({"x": np.array([-1.0, 1.0], np.float32)})
    b = Builder("finite")
    x = b.external("x", [2])
    b.op("finite_log", {"x": x}, "y", [2])
    s = Session(b.output("y"), "formal", resolve=resolve)
    with pytest.raises(NNEFXError, match="'finite_log' does not accept NaN or Inf"):
        s.run({"x": np.array([np.inf, 1.0], np.float32)})


def test_session_rejects_other_objects():
    with pytest.raises(NNEFXError, match="needs a Model or a Graph"):
        Session("model.nnef")


def test_save_writes_current_variable_values(tmp_path):
    pytest.importorskip("nnefx.io.container")
    pytest.importorskip("nnefx.syntax.printer")  # the folder writer prints graph.nnef
    import nnefx

    s = Session(accumulator_graph(), resolve=resolve)
    s.run({"x": np.full((2, 3), 2.5, np.float32)})
    s.save(tmp_path / "m")
    loaded = nnefx.load(tmp_path / "m")
    np.testing.assert_allclose(loaded.weights["state/acc"], 2.5)


def test_variables_are_used_in_place_but_read_only():
    b = Builder("weights")
    w = b.variable("w", np.ones(3, np.float32))
    b.op("inplace", {"x": w}, "y", [3])
    g = b.output("y")
    data = g.tensors["w"].data
    s = Session(g, "formal", fold=False, resolve=resolve)
    assert np.shares_memory(s.variables["w"], data)  # no copy of the weights
    assert data.flags.writeable  # the model's own array is untouched
    with pytest.raises(NNEFXError, match="operation 'inplace' failed: ValueError"):
        s.run()
    assert data.tolist() == [1.0, 1.0, 1.0]


def test_initial_values_can_be_given_and_assigned():
    b = Builder("given")
    x = b.external("x", [2])
    w = b.variable("w", np.zeros(2, np.float32), label="Layer/W")
    acc = b.variable("acc", np.zeros(2, np.float32))
    t = b.op("mul", {"x": x, "y": w}, "t", [2], result="z")
    s1 = b.op("add", {"x": acc, "y": t}, "s1", [2], result="z")
    b.update(acc, s1, "acc_new")
    g = b.output("acc_new")
    g.tensors["w"].data = None  # like a lone .nnef document: no weights
    with pytest.raises(NNEFXError, match="variable 'Layer/W' has no data"):
        Session(g, resolve=resolve)
    s = Session(g, variables={"layer/w": [2.0, 3.0]}, resolve=resolve)
    one = np.ones(2, np.float32)
    assert s.run({"x": one})["acc_new"].tolist() == [2.0, 3.0]
    s.assign({"LAYER/W": np.array([10.0, 20.0]), "acc": [100.0, 100.0]})  # re-plans for the folded 'w'
    assert s.run({"x": one})["acc_new"].tolist() == [110.0, 120.0]
    assert s.run({"x": one})["acc_new"].tolist() == [120.0, 140.0]
    s.reset()  # back to the values given to the constructor
    assert s.variables["Layer/W"].tolist() == [2.0, 3.0] and s.variables["acc"].tolist() == [0.0, 0.0]
    assert s.run({"x": one})["acc_new"].tolist() == [2.0, 3.0]
    with pytest.raises(NNEFXError, match="no variable of graph 'given' has label 'nope'"):
        s.assign({"nope": 1.0})
    with pytest.raises(NNEFXError, match=r"variable 'acc' has shape \[2\]; the value given has shape \[3\]"):
        s.assign({"acc": [1.0, 2.0, 3.0]})
    with pytest.raises(NNEFXError, match=r"variable 'Layer/W' has shape \[2\]; the value given has shape \[1\]"):
        s.assign({"layer/w": [1.0]})
    assert s.variables["Layer/W"].tolist() == [2.0, 3.0]  # a failed assign changes nothing
    with pytest.raises(NNEFXError, match="must be scalar"):
        Session(g, variables={"layer/w": [True, False]}, resolve=resolve)
    with pytest.raises(NNEFXError, match="no variable of graph 'given' has label 'other'"):
        Session(g, variables={"other": [1.0, 2.0]}, resolve=resolve)


def test_fetch_returns_intermediate_tensors():
    b = Builder("fetch")
    x = b.external("x", [2])
    k = b.constant("k", [2], [3.0])
    k2 = b.op("mul", {"x": k, "y": 2.0}, "k2", [2], result="z")       # folded
    a = b.op("add", {"x": x, "y": k2}, "a", [2], result="z")
    b.op("tanh", {"x": a}, "dead", [2])                                # pruned unless fetched
    y = b.op("neg", {"x": a}, "y", [2])
    s = Session(b.output(y), resolve=resolve)
    x_in = np.array([1.0, 2.0], np.float32)
    assert list(s.run({"x": x_in})) == ["y"] and s.plan.pruned == 1
    out = s.run({"x": x_in}, fetch=["a", "dead", "k2", "x"])
    assert list(out) == ["y", "a", "dead", "k2", "x"]
    assert out["a"].tolist() == [7.0, 8.0] and out["k2"].tolist() == [6.0, 6.0]
    np.testing.assert_allclose(out["dead"], np.tanh([7.0, 8.0]), rtol=1e-6)
    assert out["x"].tolist() == [1.0, 2.0] and out["x"] is not x_in
    with pytest.raises(NNEFXError, match="cannot fetch 'nope'"):
        s.run({"x": x_in}, fetch=["nope"])
    with pytest.raises(NNEFXError, match="not the string 'a'"):
        s.run({"x": x_in}, fetch="a")


def test_later_operations_read_the_updated_value_through_the_result():
    b = Builder("reads")
    x = b.external("x", [2])
    acc = b.variable("acc", np.zeros(2, np.float32))
    s1 = b.op("add", {"x": acc, "y": x}, "s1", [2], result="z")
    new = b.update(acc, s1, "acc_new")
    old_twice = b.op("mul", {"x": acc, "y": 2.0}, "old_twice", [2], result="z")
    new_twice = b.op("mul", {"x": new, "y": 2.0}, "new_twice", [2], result="z")
    s = Session(b.output(old_twice, new_twice), resolve=resolve)
    one = np.ones(2, np.float32)
    out = s.run({"x": one})
    assert out["old_twice"].tolist() == [0.0, 0.0] and out["new_twice"].tolist() == [2.0, 2.0]
    out = s.run({"x": one})
    assert out["old_twice"].tolist() == [2.0, 2.0] and out["new_twice"].tolist() == [4.0, 4.0]
