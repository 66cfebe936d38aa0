"""A recurrent network stepped through time: variables carry state, ``update`` writes it.

An LSTM cell built with nnefx's graph builder (state ``h`` and ``c`` as variables updated
every run) is stepped against torch's ``LSTMCell`` on the same weights; ``reset`` must
bring the state back, and ``save`` must write the updated state as the new variables.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nnefx  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402

INPUT, HIDDEN, BATCH, STEPS = 5, 6, 2, 6


def _lstm_model(cell: torch.nn.LSTMCell):
    b = GraphBuilder("lstm_step")
    x = b.external("x", shape=(BATCH, INPUT))
    w_ih = b.variable("w_ih", cell.weight_ih.detach().numpy())
    w_hh = b.variable("w_hh", cell.weight_hh.detach().numpy())
    bias = b.variable("bias", (cell.bias_ih + cell.bias_hh).detach().numpy().reshape(1, -1))
    h = b.variable("state/h", np.zeros((BATCH, HIDDEN), np.float32))
    c = b.variable("state/c", np.zeros((BATCH, HIDDEN), np.float32))
    gates = b.op("add", b.op("linear", x, w_ih, bias), b.op("linear", h, w_hh))
    i, f, g, o = b.op("split", gates, axis=1, ratios=[1, 1, 1, 1], outputs=4)
    c_new = b.op("add", b.op("mul", b.op("sigmoid", f), c), b.op("mul", b.op("sigmoid", i), b.op("tanh", g)))
    h_new = b.op("mul", b.op("sigmoid", o), b.op("tanh", c_new))
    b.op("update", h, h_new)
    b.op("update", c, c_new)
    b.output(h_new, name="h_out")
    b.output(c_new, name="c_out")
    return b.build()


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_lstm_steps_match_torch_and_reset_restores_state(backend, tmp_path):
    torch.manual_seed(7)
    cell = torch.nn.LSTMCell(INPUT, HIDDEN)
    xs = torch.randn(STEPS, BATCH, INPUT)
    session = nnefx.Session(_lstm_model(cell), backend=backend)

    def run_all():
        h = c = torch.zeros(BATCH, HIDDEN)
        for t in range(STEPS):
            with torch.no_grad():
                h, c = cell(xs[t], (h, c))
            out = session.run({"x": xs[t].numpy()})
            np.testing.assert_allclose(out["h_out"], h.numpy(), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(out["c_out"], c.numpy(), rtol=1e-4, atol=1e-6)
        return h, c

    h_last, c_last = run_all()
    session.reset()
    run_all()  # the same sequence again from the initial state gives the same values

    session.save(tmp_path / "stepped")
    reloaded = nnefx.load(tmp_path / "stepped")
    np.testing.assert_allclose(reloaded.weights["state/h"], h_last.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(reloaded.weights["state/c"], c_last.numpy(), rtol=1e-4, atol=1e-6)
