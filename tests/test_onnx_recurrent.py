"""ONNX LSTM / GRU / RNN nodes read by nnefx, against onnxruntime and torch.

The readers map them onto the IR sequence operations (batch-first, LSTM gates f,i,c,o, one
summed bias): layouts, directions, sequence lengths, clipping, omitted optional inputs,
run-time weights and GRU's linear_before_reset are all covered here, each compared with
onnxruntime on the same node (the ONNX reference evaluator for batch-first nodes, which
onnxruntime refuses).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

RNG = np.random.default_rng(11)
F = TensorProto.FLOAT
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _node_model(kind, *, n=3, t=5, i=4, h=3, direction="forward", layout=0, lens=None, runtime=(),
                omit=(), attrs=None, peepholes=False):
    """One ``kind`` node; inputs named in ``runtime`` are graph inputs, the rest initializers."""
    d = 2 if direction == "bidirectional" else 1
    g = GATES[kind]
    x = _rand(n, t, i) if layout else _rand(t, n, i)
    state = (n, d, h) if layout else (d, n, h)
    values = {"X": x, "W": _rand(d, g * h, i), "R": _rand(d, g * h, h), "B": _rand(d, 2 * g * h),
              "sequence_lens": None if lens is None else np.asarray(lens, np.int32),
              "initial_h": _rand(*state)}
    if kind == "LSTM":
        values["initial_c"] = _rand(*state)
        values["P"] = _rand(d, 3 * h) if peepholes else None
    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][: 8 if kind == "LSTM" else 6]
    names, inits, vis, feeds = [], [], [], {}
    for key in order:
        arr = values.get(key)
        if arr is None or key in omit:
            names.append("")
            continue
        names.append(key)
        if key == "X" or key in runtime:
            vis.append(helper.make_tensor_value_info(key, F if arr.dtype == np.float32 else TensorProto.INT32,
                                                     list(arr.shape)))
            feeds[key] = arr
        else:
            inits.append(numpy_helper.from_array(arr, key))
    outs = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    node = helper.make_node(kind, names, outs, hidden_size=h, direction=direction, layout=layout, **(attrs or {}))
    graph = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(o, F, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


def _agree(model, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    if any(a.name == "layout" and a.i == 1 for a in model.graph.node[0].attribute):
        # onnxruntime refuses batch-first recurrent nodes: the ONNX reference evaluator judges
        # (it ignores 'clip', so clipping is checked on time-first nodes only)
        from onnx.reference import ReferenceEvaluator
        outs = ReferenceEvaluator(model).run(None, feeds)
    else:
        outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    want = dict(zip([o.name for o in model.graph.output], outs, strict=True))
    m = nnefx.load(path)
    for backend in ("fast", "formal"):
        got = Session(m, backend).run(feeds)
        assert sorted(got) == sorted(want)
        for k, v in want.items():
            np.testing.assert_allclose(got[k], v, rtol=rtol, atol=atol, err_msg=f"{k} ({backend})")


CASES = [
    ("LSTM", {}),
    ("LSTM", {"direction": "reverse", "lens": [5, 2, 4]}),
    ("LSTM", {"direction": "bidirectional", "layout": 1}),
    ("LSTM", {"direction": "bidirectional", "attrs": {"clip": 0.8}}),
    ("LSTM", {"omit": ("B", "initial_h", "initial_c")}),
    ("LSTM", {"runtime": ("W", "R", "B", "initial_h"), "direction": "bidirectional"}),
    ("LSTM", {"peepholes": True}),
    ("LSTM", {"peepholes": True, "direction": "bidirectional", "lens": [5, 2, 4], "attrs": {"clip": 0.7}}),
    ("LSTM", {"peepholes": True, "direction": "reverse", "runtime": ("P",)}),
    ("LSTM", {"peepholes": True, "layout": 1}),
    ("GRU", {}),
    ("GRU", {"direction": "bidirectional", "attrs": {"linear_before_reset": 1}, "lens": [1, 5, 3]}),
    ("GRU", {"runtime": ("B",), "attrs": {"linear_before_reset": 1}, "layout": 1}),
    ("RNN", {"attrs": {"activations": ["Relu"]}, "lens": [4, 4, 2]}),
    ("RNN", {"direction": "bidirectional", "runtime": ("W", "B")}),
]


@pytest.mark.parametrize("kind, options", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_recurrent_nodes_agree_with_onnxruntime(tmp_path, kind, options):
    model, feeds = _node_model(kind, **options)
    _agree(model, feeds, tmp_path)


@pytest.mark.parametrize("attrs, message", [
    ({"activations": ["Tanh", "Tanh", "Tanh"]}, "activations"),
    ({"input_forget": 1}, "input_forget"),
    ({"layout": 2}, "layout"),
])
def test_unsupported_lstm_forms_are_refused_at_the_node(tmp_path, attrs, message):
    layout = attrs.pop("layout", 0)
    model, _ = _node_model("LSTM", attrs=attrs)
    model.graph.node[0].name = "the_lstm"
    if layout:
        for a in model.graph.node[0].attribute:
            if a.name == "layout":
                a.i = layout
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path)
    assert message in info.value.message
    assert "the_lstm" in str(info.value.location)


def test_lstm_peepholes_written_back(tmp_path):
    """Peepholes are written back as ONNX LSTM's P (onnxruntime agrees) and as NNEF that
    reads back identical; IR's LSTMSequence-5 has none: refused at the operation."""
    model, feeds = _node_model("LSTM", peepholes=True, direction="bidirectional")
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    m = nnefx.load(path)
    want = Session(m, "formal").run(feeds)
    nnefx.save(m, str(tmp_path / "back.onnx"))
    back = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
    for w, b in zip(want.values(), back, strict=True):
        np.testing.assert_allclose(b, w, rtol=1e-5, atol=1e-6)
    nnefx.save(m, str(tmp_path / "folder"))
    again = Session(nnefx.load(str(tmp_path / "folder")), "formal").run(feeds)
    for k, v in want.items():
        np.testing.assert_array_equal(again[k], v)
    with pytest.raises(NNEFXError, match="peepholes"):
        nnefx.save(m, str(tmp_path / "m.xml"))


def test_torch_lstm_and_gru_exports(tmp_path):
    """torch's own ONNX exports (time-first LSTM with initial states, batch-first bidirectional
    GRU) read by nnefx agree with torch."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 6, num_layers=2)
            self.gru = torch.nn.GRU(6, 5, batch_first=True, bidirectional=True)

        def forward(self, x, h0, c0):
            y, _ = self.lstm(x, (h0, c0))
            z, hn = self.gru(y.transpose(0, 1))
            return z, hn

    net = Net().eval()
    args = (torch.randn(7, 2, 4), torch.randn(2, 2, 6), torch.randn(2, 2, 6))
    path = tmp_path / "rnn.onnx"
    torch.onnx.export(net, args, str(path), opset_version=17, dynamo=False, input_names=["x", "h0", "c0"],
                      output_names=["z", "hn"])
    with torch.no_grad():
        want = [t.numpy() for t in net(*args)]
    got = Session(nnefx.load(str(path)), "fast").run({k: a.numpy() for k, a in zip(["x", "h0", "c0"], args,
                                                                                     strict=True)})
    np.testing.assert_allclose(got["z"], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["hn"], want[1], rtol=1e-5, atol=1e-5)
