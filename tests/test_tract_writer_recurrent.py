"""nnefx's recurrent sequences written for tract (``dialect="tract"``) as ``tract_core_scan``
with a body fragment per direction: ONNX LSTM/GRU/RNN models (every direction, both layouts,
clip, GRU's linear_before_reset, RNN activations, a symbolic batch) run by tract and compared
with nnefx's formal backend on the source model; what tract's scan cannot say is refused, located."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

pytest.importorskip("tract")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from test_tract_writer import _check  # noqa: E402

I, H, T, N = 4, 3, 5, 2


def _onnx(tmp_path, kind, direction="forward", layout=0, batch=N, lens=None, h0=False, **attrs):
    rng = np.random.default_rng(len(kind) + layout + len(direction))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n)
             for n, s in (("W", (dirs, gates * H, I)), ("R", (dirs, gates * H, H)), ("B", (dirs, 2 * gates * H)))]
    names = ["X", "W", "R", "B"]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "L"))
        names.append("L")
    xs = [T, batch, I] if layout == 0 else [batch, T, I]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs)]
    if h0:  # the initial state as a graph input
        names += ["", "H0"] if lens is None else ["H0"]
        inputs.append(helper.make_tensor_value_info("H0", TensorProto.FLOAT,
                                                    [dirs, batch, H] if layout == 0 else [batch, dirs, H]))
    outs = ["Y", "Yh"] + (["Yc"] if kind == "LSTM" else [])
    node = helper.make_node(kind, names, outs, hidden_size=H, direction=direction, layout=layout, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    path = tmp_path / f"{kind}_{direction}_{layout}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), str(path))
    return nnefx.load(path)


CASES = {
    "lstm": ("LSTM", "forward", 0, {}),
    "lstm_bidi_bf": ("LSTM", "bidirectional", 1, {}),
    "lstm_clip": ("LSTM", "reverse", 0, {"clip": 0.5}),
    "gru_reverse": ("GRU", "reverse", 0, {}),
    "gru_bidi_lbr": ("GRU", "bidirectional", 0, {"linear_before_reset": 1}),
    "gru_bf_clip": ("GRU", "forward", 1, {"clip": 0.7}),
    "rnn": ("RNN", "bidirectional", 0, {}),
    "rnn_relu": ("RNN", "forward", 0, {"activations": ["Relu"]}),
    "rnn_sigmoid_bf": ("RNN", "reverse", 1, {"activations": ["Sigmoid"]}),
}


def test_recurrent_sequences_run_in_tract(tmp_path):
    models = {key: _onnx(tmp_path, kind, direction, layout, **attrs)
              for key, (kind, direction, layout, attrs) in CASES.items()}
    for model in models.values():
        assert any(op.op.endswith("_sequence") for op in model.graph.operations)
    _check(models, tmp_path)
    written = nnefx.load(tmp_path / "lstm_bidi_bf")
    assert sum(op.op == "tract_core_scan" for op in written.graph.operations) == 2
    assert len(written.graph.subgraphs) == 2


def test_symbolic_batch(tmp_path):
    """A symbolic batch (tract_symbol N) stays symbolic in the written scans; tract runs batch 3."""
    source = tmp_path / "gru_src"
    nnefx.save(_onnx(tmp_path, "GRU", "bidirectional", 1, batch=1, h0=True), source)
    text = (source / "graph.nnef").read_text()
    text = text.replace("extension nnefx_ops;", "extension nnefx_ops;\nextension tract_symbol N;")
    text = text.replace(f"shape = [1, {T}, {I}]", f"shape = [N, {T}, {I}]").replace(f"shape = [1, 2, {H}]",
                                                                                  f"shape = [N, 2, {H}]")
    (source / "graph.nnef").write_text(text)
    model = nnefx.load(source)
    assert model.graph.symbols == ["N"]
    rng = np.random.default_rng(3)
    feeds = {"gru_n": [rng.standard_normal((3, T, I)).astype(np.float32),
                       rng.standard_normal((3, 2, H)).astype(np.float32)]}
    _check({"gru_n": model}, tmp_path, feeds=feeds)
    assert "extension tract_symbol N;" in (tmp_path / "gru_n" / "graph.nnef").read_text()


def test_per_batch_lengths_are_refused_located(tmp_path):
    model = _onnx(tmp_path, "LSTM", lens=[T, 3])
    with pytest.raises(NNEFXError, match="sequence lengths \\[5, 3\\] shorter than the input's 5 steps") as info:
        nnefx.save(model, tmp_path / "out", dialect="tract")
    assert "lstm_sequence" in str(info.value) and info.value.location is not None
    assert not (tmp_path / "out").exists()
