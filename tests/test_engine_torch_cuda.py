"""The torch backend on a CUDA device against the formal backend.

Every test here needs a GPU that torch can see; without one the module is skipped (CI has
none: these run on a GPU machine, and BENCHMARKS.md records where and when they last passed).
Full precision on the GPU means float32 products (TensorFloat-32 is switched off while the
model runs), so the bound is the CPU's; ``f16``/``bf16`` are opt-in and their error against
formal is reported in ``Session.verification``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)
pytest.importorskip("onnx")

import nnefx  # noqa: E402
from nnefx import engines  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402
from nnefx.semantics.frontend import compile_document  # noqa: E402
from test_engines import _counter  # noqa: E402
from test_onnx_export import NOT_OPERATIONS, SAMPLES, _document  # noqa: E402

DIGITS = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - NOT_OPERATIONS))
def test_each_operation_on_the_gpu_agrees_with_formal_or_is_refused(name):
    text, feeds = _document(name)
    graph = compile_document(text, file="op.nnef")
    if engines.get("torch").problems(graph):
        with pytest.raises(NNEFXError, match="backend 'torch' cannot run this graph"):
            Session(graph, "torch", device="cuda")
        return
    session = Session(graph, "torch", device="cuda", verify=True)
    session.run(feeds)
    assert session.verification and all(c.ok for c in session.verification)


def _conv_net() -> GraphBuilder:
    rng = np.random.default_rng(5)
    b = GraphBuilder("gpu")
    x = b.external("x", [4, 16, 32, 32])
    y = x
    for i in range(3):
        w = b.variable(f"w{i}", (rng.standard_normal((16, 16, 3, 3)) * 0.25).astype(np.float32))
        y = b.relu(b.conv(y, w, padding=[(1, 1), (1, 1)]))
    b.output(b.mean_reduce(y, axes=[2, 3]))
    return b


def test_full_precision_convolutions_are_float32_not_tf32():
    """cuDNN would use TF32 by default; nnefx's f32 must stay within the CPU's 1e-4 bound."""
    graph = _conv_net().build()
    x = np.random.default_rng(0).standard_normal((4, 16, 32, 32)).astype(np.float32)
    session = Session(graph, "torch", device="cuda", verify=True)
    session.run({"x": x})
    (c,) = session.verification
    assert c.bound == 1e-4 and c.ok, str(c)
    # the process's own TF32 settings are left as they were
    assert torch.backends.cudnn.allow_tf32 is True


@pytest.mark.parametrize("precision,bound", [("f16", 1e-2), ("bf16", 5e-2)])
def test_reduced_precision_on_the_gpu_reports_its_error(precision, bound):
    graph = _conv_net().build()
    x = np.random.default_rng(1).standard_normal((4, 16, 32, 32)).astype(np.float32)
    session = Session(graph, "torch", device="cuda", precision=precision, verify=True)
    (out,) = session.run({"x": x}).values()
    assert out.dtype == np.float32
    (c,) = session.verification
    assert c.bound == bound and 0 < c.max_rel <= bound, str(c)


def test_digits_network_on_the_gpu_matches_formal_at_two_batch_sizes():
    model = nnefx.load(DIGITS)
    for batch in (1, 5):
        session = Session(model, "torch", device="cuda", verify=True, input_shapes={"input": (batch, 1, 8, 8)})
        x = np.random.default_rng(batch).random((batch, 1, 8, 8), dtype=np.float32)
        session.run({"input": x})
        assert all(c.ok for c in session.verification)


def test_variables_carry_across_steps_on_the_gpu():
    """s <- s * 0.5 + x each step, the state kept by the Session between GPU runs."""
    model = _counter()
    gpu, cpu = Session(model, "torch", device="cuda", verify=True), Session(model, "formal")
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_allclose(gpu.run({"x": x})["y"], cpu.run({"x": x})["y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gpu.variables["s"], cpu.variables["s"], rtol=1e-6, atol=1e-6)


def test_runs_replay_one_captured_cuda_graph_with_each_runs_inputs():
    """After the first run the network is one replayed CUDA graph; every later run must see its
    own inputs (a stale input buffer would repeat the first result: verify would catch it)."""
    graph = _conv_net().build()
    session = Session(graph, "torch", device="cuda", verify=True)
    rng = np.random.default_rng(7)
    outs = []
    for _ in range(3):
        (out,) = session.run({"x": rng.standard_normal((4, 16, 32, 32)).astype(np.float32)}).values()
        outs.append(out)
        assert all(c.ok for c in session.verification)
    (model,) = session._engine._variants.values()
    assert isinstance(model.replay, torch.cuda.CUDAGraph), model.replay_refused
    assert not np.array_equal(outs[0], outs[1])
