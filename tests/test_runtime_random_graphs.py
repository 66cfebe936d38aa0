"""Random graphs: the planned run (folding, pruning, slot reuse) equals naive evaluation."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnefx.runtime.session import Session
from runtime_graphs import Builder, resolve

UNARY = {"tanh": np.tanh, "neg": np.negative, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


@st.composite
def graphs(draw):
    """(builder graph, naive evaluator, input names, updated variable names)."""
    b = Builder("random")
    shape = (2, 3)
    names: list[str] = []
    kinds: dict[str, tuple] = {}
    for i in range(draw(st.integers(1, 2))):
        names.append(b.external(f"x{i}", list(shape)))
        kinds[names[-1]] = ("input",)
    for i in range(draw(st.integers(0, 2))):
        value = draw(st.floats(-2, 2, allow_nan=False, width=32))
        values = [value, value / 2, -value] * 2  # full shape, so any tensor may feed an update
        names.append(b.constant(f"k{i}", list(shape), values))
        kinds[names[-1]] = ("const", np.array(values, np.float32).reshape(shape))
    variables = []
    for i in range(draw(st.integers(0, 2))):
        data = np.full(shape, draw(st.floats(-1, 1, allow_nan=False, width=32)), np.float32)
        names.append(b.variable(f"v{i}", data))
        kinds[names[-1]] = ("var", data)
        variables.append(names[-1])
    for i in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            kind = draw(st.sampled_from(sorted(UNARY)))
            a = draw(st.sampled_from(names))
            names.append(b.op(kind, {"x": a}, f"t{i}", None))
            kinds[names[-1]] = (kind, a)
        else:
            kind = draw(st.sampled_from(sorted(BINARY)))
            a, c = draw(st.sampled_from(names)), draw(st.sampled_from(names + [0.5]))
            names.append(b.op(kind, {"x": a, "y": c}, f"t{i}", None, result="z"))
            kinds[names[-1]] = (kind, a, c)
    updates = {}
    for v in variables:
        if draw(st.booleans()):
            value = draw(st.sampled_from([n for n in names if n.startswith("t")] + variables))
            updates[v] = value
            b.update(v, value, f"{v}_new")
    computed = [n for n in names if n.startswith("t")]
    outputs = draw(st.lists(st.sampled_from(computed + names[:1]), min_size=1, max_size=3, unique=True))
    return b.output(*outputs), kinds, updates


def evaluate(kinds, feeds, state, name, memo):
    if name in memo:
        return memo[name]
    if isinstance(name, float):
        return np.float64(name)
    k = kinds[name]
    if k[0] == "input":
        v = feeds[name].astype(np.float64)
    elif k[0] == "const":
        v = k[1].astype(np.float64)
    elif k[0] == "var":
        v = state[name].astype(np.float64)
    elif k[0] in UNARY:
        v = UNARY[k[0]](evaluate(kinds, feeds, state, k[1], memo))
    else:
        v = BINARY[k[0]](evaluate(kinds, feeds, state, k[1], memo), evaluate(kinds, feeds, state, k[2], memo))
    memo[name] = v
    return v


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.booleans(), st.sampled_from(["fast", "formal"]))
def test_planned_runs_equal_naive_evaluation(case, fold, backend):
    graph, kinds, updates = case
    session = Session(graph, backend, fold=fold, resolve=resolve)
    rng = np.random.default_rng(0)
    state = {n: k[1] for n, k in kinds.items() if k[0] == "var"}
    for _ in range(3):  # several cycles: updates must carry over
        feeds = {i.name: rng.standard_normal((2, 3)).astype(np.float32) for i in session.inputs}
        out = session.run(feeds)
        memo: dict = {}
        for name in graph.outputs:
            expected = evaluate(kinds, feeds, state, name, memo)
            np.testing.assert_allclose(out[name], np.broadcast_to(expected, out[name].shape),
                                       rtol=1e-4, atol=1e-5)
        state = {**state, **{v: evaluate(kinds, feeds, state, value, memo) for v, value in updates.items()}}
        for v in updates:
            np.testing.assert_allclose(session.variables[v], state[v], rtol=1e-4, atol=1e-5)
