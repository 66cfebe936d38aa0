"""Engine backends (onnxruntime, OpenVINO, torch) against the formal backend: every standard
operation's sample, state across steps, shape variants, auto, verify, and their errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from nnefx import engines
from nnefx.diagnostics import NNEFXError
from nnefx.io.builder import GraphBuilder
from nnefx.runtime.session import Session
from nnefx.semantics.frontend import compile_document

pytest.importorskip("onnx")
from test_onnx_export import NOT_OPERATIONS, SAMPLES, _document  # noqa: E402

DIGITS = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")
INSTALLED = [name for name, e in engines.engines().items() if e.available()]

#: (engine, operation) pairs an engine is known not to run, each with the reason its query gives.
#: The test asserts the refusal is reported (never a wrong answer); the list only documents.
CASES = [(engine, op) for engine in INSTALLED for op in sorted(set(SAMPLES) - NOT_OPERATIONS)]


@pytest.mark.parametrize("engine,name", CASES)
def test_each_operation_agrees_with_formal_or_is_refused(engine, name):
    text, feeds = _document(name)
    graph = compile_document(text, file="op.nnef")
    problems = engines.get(engine).problems(graph)
    if problems:
        with pytest.raises(NNEFXError, match=f"backend '{engine}' cannot run this graph"):
            Session(graph, engine)
        assert all(p.reason for p in problems)
        return
    session = Session(graph, engine, verify=True)
    session.run(feeds)
    assert session.verification and all(c.ok for c in session.verification)


def _common_network():
    """The operations of real networks, with ordinary attributes (windows over spatial dims only)."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("common")
    x = b.external("x", [2, 3, 8, 8])
    w = b.variable("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3)
    y = b.conv(x, w, padding=[(1, 1), (1, 1)])
    y = b.batch_normalization(y, b.variable("m", rng.standard_normal((1, 4)).astype(np.float32)),
                              b.variable("v", rng.random((1, 4), dtype=np.float32) + 0.5),
                              b.variable("o", rng.standard_normal((1, 4)).astype(np.float32)),
                              b.variable("s", rng.random((1, 4), dtype=np.float32) + 0.5), epsilon=1e-5)
    y = b.relu(y)
    y = b.avg_pool(y, size=[1, 1, 2, 2], stride=[1, 1, 2, 2])
    z = b.max_pool(y, size=[1, 1, 3, 3], stride=[1, 1, 1, 1], border="ignore")
    y = b.concat([y, z], axis=1)
    y = b.reshape(y, shape=[2, 8, 16])
    y = b.transpose(y, axes=[0, 2, 1])
    att = b.softmax(b.matmul(y, y, transposeB=True), axes=[2])
    y = b.add(b.matmul(att, y), b.mul(b.sigmoid(y), b.tanh(y)))
    y = b.sub(y, b.mean_reduce(y, axes=[2]))
    y = b.div(y, b.sqrt(b.add(b.sum_reduce(b.sqr(y), axes=[2]), 1.0)))
    y = b.clamp(b.slice(y, axes=[1], begin=[2], end=[14]), -0.5, 0.5)
    y = b.linear(b.reshape(y, shape=[2, 96]), b.variable("fc", rng.standard_normal((5, 96)).astype(np.float32)))
    b.output(b.exp(y), "out")
    return b.build()


@pytest.mark.parametrize("engine", INSTALLED)
def test_engines_run_the_common_operations(engine):
    model = _common_network()
    assert engines.get(engine).problems(model.graph) == []
    session = Session(model, engine, verify=True)
    session.run({"x": np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)})
    assert all(c.ok for c in session.verification)


@pytest.mark.parametrize("engine", INSTALLED)
def test_digits_outputs_and_variable_batches(engine):
    model = nnefx.load(DIGITS)
    rng = np.random.default_rng(0)
    session = Session(model, engine, input_shapes={"input": (None, 1, 8, 8)}, verify=True)
    for batch in (1, 5, 1):
        out = session.run({"input": rng.random((batch, 1, 8, 8), dtype=np.float32)})["probabilities"]
        assert out.shape == (batch, 10) and out.dtype == np.float32
    assert len(session._engine._variants) == 2


def _counter():
    """A stateful graph: s <- s * 0.5 + x each step; y = s + 1."""
    b = GraphBuilder("counter")
    x = b.external("x", [2, 3])
    s = b.variable("s", np.ones((2, 3), np.float32))
    new = b.add(b.mul(s, 0.5), x)
    b.op("update", s, new)
    b.output(b.add(new, 1.0), "y")
    return b.build()


@pytest.mark.parametrize("engine", INSTALLED)
def test_state_is_carried_between_steps(engine):
    model = _counter()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ref, eng = Session(model, "formal"), Session(model, engine, verify=True)
    for _ in range(3):
        np.testing.assert_allclose(eng.run({"x": x})["y"], ref.run({"x": x})["y"], rtol=1e-6)
    np.testing.assert_allclose(eng.variables["s"], ref.variables["s"], rtol=1e-6)
    eng.reset()
    np.testing.assert_array_equal(eng.variables["s"], np.ones((2, 3), np.float32))


def test_auto_picks_a_measured_backend_and_says_why():
    model = nnefx.load(DIGITS)
    x = np.random.default_rng(1).random((1, 1, 8, 8), dtype=np.float32)
    session = Session(model, "auto")
    out = session.run({"input": x})["probabilities"]
    assert session.backend_reason.startswith("auto: ")
    chosen = session.backend_reason.split()[1].rstrip(",")
    assert chosen in ["fast", *INSTALLED]
    assert "fastest on the first inputs" in session.backend_reason
    np.testing.assert_allclose(out, Session(model, "formal").run({"input": x})["probabilities"], rtol=1e-4, atol=1e-6)


def test_verify_reports_a_disagreement(monkeypatch):
    if "onnxruntime" not in INSTALLED:
        pytest.skip("onnxruntime is not installed")
    from nnefx.engines import onnxruntime as ort_engine

    original = ort_engine.OrtModel.__call__

    def wrong(self, feeds):
        out = original(self, feeds)
        return {k: v + 0.01 for k, v in out.items()}

    monkeypatch.setattr(ort_engine.OrtModel, "__call__", wrong)
    session = Session(nnefx.load(DIGITS), "onnxruntime", verify=True)
    with pytest.raises(NNEFXError, match=r"disagrees with the formal backend: probabilities: .*bound 0.0001"):
        session.run({"input": np.zeros((1, 1, 8, 8), np.float32)})


def test_errors_name_the_backend_and_what_to_install(monkeypatch):
    with pytest.raises(NNEFXError, match="unknown backend 'tensorrt'"):
        Session(nnefx.load(DIGITS), "tensorrt")
    engine = engines.get("openvino")
    monkeypatch.setattr(type(engine), "module", lambda self: self._import("openvino_not_installed"))
    monkeypatch.setattr(engines, "get", lambda name: engine)
    with pytest.raises(NNEFXError, match=r"pip install 'nnefx\[openvino\]'"):
        Session(nnefx.load(DIGITS), "openvino")


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed")
def test_torch_reduced_precision_reports_its_error():
    session = Session(nnefx.load(DIGITS), "torch", precision="bf16", verify=True,
                      input_shapes={"input": (4, 1, 8, 8)})
    session.run({"input": np.random.default_rng(2).random((4, 1, 8, 8), dtype=np.float32)})
    (comparison,) = session.verification
    assert 0 < comparison.max_rel <= comparison.bound == 5e-2


def test_cuda_device_is_refused_cleanly_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        session = Session(nnefx.load(DIGITS), "torch", device="cuda", verify=True)
        session.run({"input": np.zeros((1, 1, 8, 8), np.float32)})
        assert session.verification[0].ok
    else:
        with pytest.raises(NNEFXError, match="no CUDA device"):
            Session(nnefx.load(DIGITS), "torch", device="cuda").run({"input": np.zeros((1, 1, 8, 8), np.float32)})
