"""torch-to-nnef's recurrent layers in tract mode: ``nn.LSTM`` / ``nn.GRU`` written through
``tract_core_scan`` (torch-to-nnef's ``lstm`` / ``gru`` fragments, a body fragment run once per
time step).  Stacked and bidirectional layers, batch first both ways, static and dynamic
(``tract_symbol``) sequence length: read, shaped symbolically, run on both backends against
torch within 1e-4 relative, and against tract's Python bindings on the same folder.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx import dims

torch = pytest.importorskip("torch")
pytest.importorskip("torch_to_nnef")

from _t2n import export, rel_err  # noqa: E402

TOL = 1e-4


class Outputs(torch.nn.Module):
    """The layer's sequence output and its last hidden state(s), as one model's results."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, state = self.rnn(x)
        h = state[0] if isinstance(state, tuple) else state
        return y, h


#: name -> (layer, batch first); sequence length 5, batch 2, features 4, hidden 3
LAYERS = {
    "lstm2": (lambda: torch.nn.LSTM(4, 3, 2), False),
    "lstm_bf": (lambda: torch.nn.LSTM(4, 3, 1, batch_first=True), True),
    "lstm_bidi": (lambda: torch.nn.LSTM(4, 3, 1, bidirectional=True), False),
    "gru2_bf": (lambda: torch.nn.GRU(4, 3, 2, batch_first=True), True),
    "gru": (lambda: torch.nn.GRU(4, 3, 1), False),
    "gru_bidi2_bf": (lambda: torch.nn.GRU(4, 3, 2, batch_first=True, bidirectional=True), True),
}
CASES = [(name, dyn) for name in LAYERS for dyn in (False, True)]


def _input(batch_first: bool, seq: int, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, seq, 4) if batch_first else torch.randn(seq, batch, 4)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t2n_rnn")
    torch.manual_seed(0)
    out = {}
    for i, (name, dyn) in enumerate(CASES):
        make, bf = LAYERS[name]
        model = Outputs(make()).eval()
        x = _input(bf, 5)
        with torch.no_grad():
            refs = [r.numpy() for r in model(x)]
        axes = {"input_0": {1 if bf else 0: "S"}} if dyn else None
        path = export(model, (x,), folder, f"{name}_{int(dyn)}", archive=i % 3 == 2, dynamic_axes=axes,
                      output_names=["y", "h"])
        out[(name, dyn)] = (model, path, x.numpy(), refs)
    return out


def _id(case):
    return f"{case[0]}-{'dynamic' if case[1] else 'static'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_recurrent_export_runs_like_torch(exports, case):
    name, dyn = case
    _, path, x, refs = exports[case]
    model = nnefx.load(path)
    g = model.graph
    assert any(op.op == "tract_core_scan" for op in g.operations)
    seq_axis = 1 if LAYERS[name][1] else 0
    if dyn:
        assert g.symbols == ["S"] and g.tensors["input_0"].shape[seq_axis] == dims.symbol("S")
    y_shape = g.tensors[g.outputs[0]].shape
    assert y_shape[seq_axis] == (dims.symbol("S") if dyn else 5) and y_shape[2] == refs[0].shape[2]
    for backend in ("fast", "formal"):
        got = nnefx.Session(model, backend=backend).run({"input_0": x})
        for out, ref in zip(g.outputs, refs, strict=True):
            assert rel_err(got[out], ref) < TOL, (backend, out, rel_err(got[out], ref))


@pytest.mark.parametrize("name", list(LAYERS))
def test_dynamic_sequence_length_takes_other_lengths(exports, name):
    model, path, _, _ = exports[(name, True)]
    session = nnefx.Session(nnefx.load(path))
    for seq in (1, 7):
        x = _input(LAYERS[name][1], seq)
        with torch.no_grad():
            refs = [r.numpy() for r in model(x)]
        got = session.run({"input_0": x.numpy()})
        for out, ref in zip(("y", "h"), refs, strict=True):
            assert rel_err(got[out], ref) < TOL, (seq, out)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_tract_peer(exports, case):
    tract = pytest.importorskip("tract")
    _, path, x, refs = exports[case]
    theirs = [r.to_numpy() for r in tract.nnef().load(str(path)).into_runnable().run([x])]
    ours = nnefx.Session(nnefx.load(path)).run({"input_0": x})
    for t, ref, out in zip(theirs, refs, ("y", "h"), strict=True):
        assert rel_err(t, ref) < TOL
        assert rel_err(ours[out], t) < TOL


def test_scan_body_errors_are_located(tmp_path):
    """A scan naming a body the document lacks, or a parameter the body lacks: located."""
    text = """version 1.0;
extension tract_registry tract_core;

fragment step( h: tensor<scalar>, x: tensor<scalar> ) -> ( h_next: tensor<scalar> )
{
  h_next = h + x;
}

graph g( x ) -> ( y )
{
  x = external<scalar>(shape = [4, 2]);
  h = constant<scalar>(shape = [1, 2], value = [0.0]);
  [y] = tract_core_scan(body = "BODY", scan = [("x", x, 0, 1)], full = [], state = [("h", h, "h_next")],
                        output = [("h_next", "full", 0, 1)]);
}
"""
    def load(body_text):
        path = tmp_path / "scan.nnef"
        path.write_text(body_text)
        return nnefx.load(path)

    good = load(text.replace("BODY", "step"))
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    for backend in ("fast", "formal"):
        (y,) = nnefx.Session(good, backend=backend).run({"x": x}).values()
        assert np.array_equal(y, np.cumsum(x, axis=0))  # the running sum, step by step
    with pytest.raises(nnefx.NNEFXError) as info:
        load(text.replace("BODY", "nothing"))
    assert "body 'nothing'" in str(info.value) and info.value.location.line == 13
    with pytest.raises(nnefx.NNEFXError) as info:
        load(text.replace("BODY", "step").replace('("x", x', '("z", x'))
    assert "no parameter 'z'" in str(info.value) and info.value.location.line == 13


@pytest.mark.parametrize("name", ["lstm_bidi", "gru2_bf"])
@pytest.mark.parametrize("dialect", [None, "tract"])
def test_written_back_with_bodies(exports, tmp_path, name, dialect):
    """Saved as NNEF (standard writer, or for tract), the scans are written in tract's form with
    their body fragments: nnefx and tract read the file back and compute the same."""
    _, path, x, refs = exports[(name, True)]
    out = tmp_path / "rnn.nnef.tgz"
    nnefx.save(nnefx.load(path), out, **({"dialect": dialect} if dialect else {}))
    again = nnefx.load(out)
    assert again.graph.symbols == ["S"] and list(again.graph.subgraphs)
    got = nnefx.Session(again).run({"input_0": x})
    for o, ref in zip(("y", "h"), refs, strict=True):
        assert rel_err(got[o], ref) < TOL
    tract = pytest.importorskip("tract")
    theirs = tract.nnef().load(str(out)).into_runnable().run([x])
    for t, ref in zip(theirs, refs, strict=True):
        assert rel_err(t.to_numpy(), ref) < TOL


def test_dynamic_batch_and_length(tmp_path):
    """Both axes symbolic: the initial states' ``tile`` repeats come from the input's shape
    (``tract_core_shape_of``) and stay symbolic until a run binds them."""
    torch.manual_seed(1)
    model = Outputs(torch.nn.LSTM(4, 3, 1)).eval()
    path = export(model, (torch.randn(5, 2, 4),), tmp_path, "lstm_sb",
                  dynamic_axes={"input_0": {0: "S", 1: "B"}}, output_names=["y", "h"])
    loaded = nnefx.load(path)
    assert loaded.graph.symbols == ["S", "B"]
    assert loaded.graph.tensors["y"].shape == (dims.symbol("S"), dims.symbol("B"), 3)
    session = nnefx.Session(loaded)
    for shape in ((5, 2, 4), (3, 6, 4)):
        x = torch.randn(*shape)
        with torch.no_grad():
            refs = [r.numpy() for r in model(x)]
        got = session.run({"input_0": x.numpy()})
        assert all(rel_err(got[o], r) < TOL for o, r in zip(("y", "h"), refs, strict=True))


def test_attribute_from_data_is_refused_located(tmp_path):
    """An integer attribute whose tensor depends on an input's data cannot be read at load."""
    path = tmp_path / "g.nnef"
    path.write_text("""version 1.0;
extension tract_registry tract_core;

graph g( x, n ) -> ( y )
{
  x = external<scalar>(shape = [1, 2]);
  n = external<integer>(shape = []);
  y = tile(x, repeats = [1, n]);
}
""")
    with pytest.raises(nnefx.NNEFXError, match="'n' is computed at run time") as info:
        nnefx.load(path)
    assert info.value.location.line == 8
