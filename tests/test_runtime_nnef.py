"""End to end: NNEF text → front-end → Session, with the registry's kernels, both backends."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx import Model, NNEFXError
from nnefx.runtime.session import Session

frontend = pytest.importorskip("nnefx.semantics.frontend")

COUNTER = """version 1.0;

graph counter( x ) -> ( total, doubled )
{
    x = external<scalar>(shape = [1, 4]);
    acc = variable<scalar>(shape = [1, 4], label = 'state/acc');
    s = add(acc, x);
    total = update(acc, s);
    doubled = mul(acc, 2.0);
}
"""

LSTM = """version 1.0;

graph lstm( x ) -> ( h_out, c_out )
{
    x = external(shape = [1, 3]);
    h = variable(shape = [1, 4], label = 'cell/h');
    c = variable(shape = [1, 4], label = 'cell/c');
    W = variable(shape = [16, 3], label = 'cell/W');
    U = variable(shape = [16, 4], label = 'cell/U');
    b = variable(shape = [1, 16], label = 'cell/b');
    zx = linear(x, W, b);
    zh = linear(h, U);
    z = add(zx, zh);
    [zi, zf, zg, zo] = split(z, axis = 1, ratios = [1, 1, 1, 1]);
    i = sigmoid(zi);
    f = sigmoid(zf);
    g = tanh(zg);
    o = sigmoid(zo);
    fc = mul(f, c);
    ig = mul(i, g);
    c_new = add(fc, ig);
    tc = tanh(c_new);
    h_new = mul(o, tc);
    c_out = update(c, c_new);
    h_out = update(h, h_new);
}
"""


def compile_with(text: str, data: dict[str, np.ndarray], file: str = "test.nnef") -> Model:
    graph = frontend.compile_document(text, file=file)
    for op, tensor in graph.variables():
        tensor.data = data[op.attribs["label"]]
    return Model(graph, source=file)


def lstm_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"cell/h": np.zeros((1, 4), np.float32), "cell/c": np.zeros((1, 4), np.float32),
            "cell/W": rng.standard_normal((16, 3)).astype(np.float32),
            "cell/U": rng.standard_normal((16, 4)).astype(np.float32) * 0.5,
            "cell/b": rng.standard_normal((1, 16)).astype(np.float32) * 0.1}


def lstm_reference(w: dict[str, np.ndarray], xs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    def sig(v):
        return 1 / (1 + np.exp(-v))

    h = np.zeros((1, 4))
    c = np.zeros((1, 4))
    out = []
    for x in xs:
        z = x @ w["cell/W"].T.astype(np.float64) + w["cell/b"] + h @ w["cell/U"].T.astype(np.float64)
        i, f, g, o = np.split(z, 4, axis=1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        out.append((h, c))
    return out


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_counter_update_semantics(backend):
    model = compile_with(COUNTER, {"state/acc": np.zeros((1, 4), np.float32)})
    s = Session(model, backend)
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    first = s.run({"x": x})
    # inside the cycle 'acc' still reads the old value; 'total' (the update's result) the new one
    np.testing.assert_array_equal(first["total"], x)
    np.testing.assert_array_equal(first["doubled"], 0 * x)
    second = s.run({"x": x})
    np.testing.assert_array_equal(second["total"], 2 * x)
    np.testing.assert_array_equal(second["doubled"], 2 * x)
    s.reset()
    np.testing.assert_array_equal(s.run({"x": x})["total"], x)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_lstm_steps_match_numpy(backend):
    w = lstm_weights()
    s = Session(compile_with(LSTM, w), backend)
    assert [i.name for i in s.inputs] == ["x"] and [o.name for o in s.outputs] == ["h_out", "c_out"]
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3)).astype(np.float32) for _ in range(5)]
    for x, (h, c) in zip(xs, lstm_reference(w, xs), strict=True):
        out = s.run({"x": x})
        np.testing.assert_allclose(out["h_out"], h, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out["c_out"], c, rtol=1e-4, atol=1e-5)
    assert s.plan.folded == 0 and len(s.plan.updates) == 2


def test_fast_and_formal_agree_on_the_lstm():
    w = lstm_weights(1)
    fast, formal = Session(compile_with(LSTM, w), "fast"), Session(compile_with(LSTM, w), "formal")
    x = np.ones((1, 3), np.float32)
    for _ in range(3):
        a, b = fast.run({"x": x}), formal.run({"x": x})
        np.testing.assert_allclose(a["h_out"], b["h_out"], rtol=1e-5, atol=1e-6)


def test_saved_state_reloads(tmp_path):
    pytest.importorskip("nnefx.syntax.printer")
    import nnefx

    w = lstm_weights(2)
    s = Session(compile_with(LSTM, w))
    x = np.full((1, 3), 0.5, np.float32)
    s.run({"x": x})
    s.run({"x": x})
    s.save(tmp_path / "lstm")
    resumed = Session(nnefx.load(tmp_path / "lstm"))
    np.testing.assert_array_equal(resumed.variables["cell/h"], s.variables["cell/h"])
    np.testing.assert_allclose(resumed.run({"x": x})["h_out"], s.run({"x": x})["h_out"], rtol=1e-6)


def test_runtime_error_points_into_the_document():
    text = """version 1.0;

graph g( x ) -> ( y )
{
    x = external(shape = [1, 4]);
    y = reshape(x, shape = [2, 2]);
}
"""
    s = Session(Model(frontend.compile_document(text, file="r.nnef"), source="r.nnef"),
                input_shapes={"x": (None, 4)})
    assert s.run({"x": np.ones((1, 4), np.float32)})["y"].shape == (2, 2)
    with pytest.raises(NNEFXError) as info:
        s.run({"x": np.ones((3, 4), np.float32)})
    assert str(info.value).startswith("r.nnef:6:") and "'reshape'" in str(info.value)


def _quantized_model():
    from nnefx.io.builder import GraphBuilder

    b = GraphBuilder("q")
    x = b.external("x", shape=(2, 3))
    w = b.variable("w", np.array([[-3, 0, 5], [1, 2, 127]], np.int8),
                   quant={"op_name": "zero_point_linear_quantize", "zero_point": [1, 0], "scale": [0.5, 0.25],
                          "bits": 8, "signed": True, "symmetric": False})
    m = b.variable("m", np.array([[0, 255, 128]], np.uint8),
                   quant={"op_name": "min_max_linear_quantize", "min": -1.0, "max": 1.0, "bits": 8,
                          "signed": False, "symmetric": False})
    s = b.variable("s", np.array([[-127, 0, 127]], np.int8),
                   quant={"op_name": "min_max_linear_quantize", "min": -2.0, "max": 2.0, "bits": 8,
                          "signed": True, "symmetric": True})
    b.output(b.op("add", b.op("add", b.op("mul", x, w), m), s), name="y")
    return b.build()


def test_quantized_variables_are_read_through_graph_quant(tmp_path):
    pytest.importorskip("nnefx.io.builder")
    import nnefx

    # per-channel parameters align from dimension 0: row i uses zero_point[i], scale[i]
    w = (np.array([[-3, 0, 5], [1, 2, 127]]) - np.array([[1], [0]])) * np.array([[0.5], [0.25]])
    m = np.array([0, 255, 128]) / 255 * 2.0 - 1.0
    s = (np.array([-127, 0, 127]) + 127) / 254 * 4.0 - 2.0
    model = _quantized_model()
    out = Session(model).run({"x": np.ones((2, 3), np.float32)})["y"]
    np.testing.assert_allclose(out, w + m + s, rtol=1e-6)
    nnefx.save(model, tmp_path / "q")
    again = Session(nnefx.load(tmp_path / "q"))
    np.testing.assert_allclose(again.run({"x": np.ones((2, 3), np.float32)})["y"], out)
    again.save(tmp_path / "q2")  # nothing updated: the codes are written back unchanged
    assert nnefx.load(tmp_path / "q2").graph.tensors["w"].data.dtype == np.int8


def test_quantized_codes_without_a_known_algorithm_are_refused():
    model = _quantized_model()
    model.graph.tensors["w"].quant = None
    with pytest.raises(NNEFXError, match="variable 'w' holds quantized codes but no graph.quant entry"):
        Session(model)
    model.graph.tensors["w"].quant = {"op_name": "logarithmic_quantize", "max": 1.0, "bits": 8}
    with pytest.raises(NNEFXError, match="reading 'logarithmic_quantize' codes is not supported"):
        Session(model)
    model.graph.tensors["w"].quant = {"op_name": "zero_point_linear_quantize", "zero_point": 0}
    with pytest.raises(NNEFXError, match="lacks parameter 'scale'"):
        Session(model)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_quantize_applies_activation_hints(backend):
    from nnefx.io.builder import GraphBuilder

    b = GraphBuilder("fq")
    x = b.external("x", shape=(1, 4))
    w = b.variable("w", np.array([[0.3, -0.7, 1.26, 2.0]], np.float32))
    b.quantize(x, "zero_point_linear_quantize", zero_point=0, scale=0.5, bits=8, signed=True, symmetric=False)
    b.quantize(w, "min_max_linear_quantize", min=-1.0, max=1.0, bits=2, signed=False, symmetric=False)
    h = b.op("mul", x, w, name="h")
    b.quantize(h, "zero_point_linear_quantize", zero_point=1, scale=0.25, bits=4, signed=False, symmetric=False)
    b.output(b.op("add", h, 0.1, name="y"))
    model = b.build()
    x_in = np.array([[0.2, 1.3, -2.0, 3.1]], np.float32)
    np.testing.assert_allclose(Session(model, backend).run({"x": x_in})["y"], x_in * model.graph.tensors["w"].data + 0.1,
                               rtol=1e-6)
    # by hand: x -> [0, 1.5, -2, 3]; w (2 bits on [-1, 1]) -> [1/3, -1, 1, 1];
    # h = [0, -1.5, -2, 3] -> codes clamp(round(h / 0.25) + 1, 0, 15) = [1, 0, 0, 13] -> [0, -.25, -.25, 3]
    s = Session(model, backend, quantize=True)
    np.testing.assert_allclose(s.run({"x": x_in})["y"], [[0.1, -0.15, -0.15, 3.1]], rtol=1e-6)
    assert [i.name for i in s.inputs] == ["x"] and [o.name for o in s.outputs] == ["y"]
    assert s.plan.folded == 1  # the variable's quantization is done once, at compile time


def test_lone_document_runs_with_given_weights_and_saves_them(tmp_path):
    pytest.importorskip("nnefx.syntax.printer")
    import nnefx

    (tmp_path / "lstm.nnef").write_text(LSTM)
    model = nnefx.load(tmp_path / "lstm.nnef")  # structure only, no weights
    w = lstm_weights(4)
    s = Session(model, variables=w)
    x = np.ones((1, 3), np.float32)
    expected = lstm_reference(w, [x])[0][0]
    np.testing.assert_allclose(s.run({"x": x})["h_out"], expected, rtol=1e-4, atol=1e-5)
    s.save(tmp_path / "folder")
    again = Session(nnefx.load(tmp_path / "folder"))
    np.testing.assert_array_equal(again.variables["cell/W"], w["cell/W"])
    np.testing.assert_allclose(again.variables["cell/h"], expected, rtol=1e-4, atol=1e-5)
