"""torch-to-nnef's default target, tract's NNEF dialect: exports of small random-initialised
torch models (static and dynamic axes, folder and .tgz) read, shaped (symbolically where an
axis is dynamic) and run by nnefx on both backends against torch within 1e-4 relative
(max |diff| / max |ref|), and against tract's Python bindings on the same file.
"""

from __future__ import annotations

import pytest

import nnefx
from nnefx import dims

torch = pytest.importorskip("torch")
pytest.importorskip("torch_to_nnef")

from _t2n import export, rel_err  # noqa: E402
from test_torch_to_nnef import Attention, Block  # noqa: E402

TOL = 1e-4


class SdpaAttention(Attention):
    """The same attention through torch's fused scaled_dot_product_attention."""

    def forward(self, x):
        q, k, v = (p(x).unsqueeze(1) for p in (self.q, self.k, self.v))
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v).squeeze(1)
        return self.norm(x + self.o(att))


class Encoder(torch.nn.Module):
    """A two-layer BERT-like encoder: embeddings + position, post-norm layers, GELU MLP."""

    def __init__(self, vocab=50, d=16, heads=2, layers=2, length=8):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(1, length, d) * 0.1)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=32, dropout=0.0, activation="gelu",
                                                 batch_first=True)
        self.layers = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, ids):
        return self.layers(self.tok(ids) + self.pos[:, : ids.shape[1]])


class Basic(torch.nn.Module):
    """ResNet's basic block (two 3x3 convolutions with batch norms, projected shortcut)."""

    def __init__(s, cin, cout, stride):
        super().__init__()
        s.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        s.b1 = torch.nn.BatchNorm2d(cout)
        s.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        s.b2 = torch.nn.BatchNorm2d(cout)
        s.down = None if stride == 1 and cin == cout else torch.nn.Sequential(
            torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))
    def forward(s, x):
        y = torch.relu(s.b1(s.c1(x)))
        y = s.b2(s.c2(y))
        return torch.relu(y + (x if s.down is None else s.down(x)))

class ResNet18(torch.nn.Module):
    """ResNet-18's topology (stem, 4 stages of 2 basic blocks, pooling, classifier); narrow
    channels keep the export within the test budget."""

    def __init__(s, width=64, classes=10):
        super().__init__()
        w = width
        s.stem = torch.nn.Sequential(torch.nn.Conv2d(3, w, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(w),
                                     torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1))
        layers, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            layers += [Basic(cin, cout, 1 if i == 0 else 2), Basic(cout, cout, 1)]
            cin = cout
        s.layers = torch.nn.Sequential(*layers)
        s.fc = torch.nn.Linear(cin, classes)
    def forward(s, x):
        return s.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(s.layers(s.stem(x)), 1), 1))


def _models():
    torch.manual_seed(0)
    models = {
        "mlp": (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                                    torch.nn.Softmax(-1)), (torch.randn(3, 8),), {0: "B"}),
        "resnet_block": (Block(bn=True), (torch.randn(2, 3, 12, 12),), {0: "B"}),
        "layer_norm": (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Tanh()),
                       (torch.randn(2, 3, 8),), {1: "S"}),
        "attention": (Attention(), (torch.randn(1, 5, 16),), None),
        "sdpa": (SdpaAttention(), (torch.randn(1, 5, 16),), None),
        "encoder": (Encoder(), (torch.randint(0, 50, (2, 8)),), None),
        "resnet18": (ResNet18(16), (torch.randn(1, 3, 32, 32),), {0: "B"}),
    }
    for model, _, _ in models.values():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
        model.eval()
    return models


MODELS = _models()
# every model static; the ones with a dynamic axis also dynamic; archives for every other case
CASES = [(name, dyn) for name, (_, _, axes) in MODELS.items() for dyn in ((False, True) if axes else (False,))]


def _case_id(case):
    return f"{case[0]}-{'dynamic' if case[1] else 'static'}"


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t2n_tract")
    out = {}
    for i, (name, dyn) in enumerate(CASES):
        model, args, axes = MODELS[name]
        with torch.no_grad():
            ref = model(*args).numpy()
        path = export(model, args, folder, f"{name}_{int(dyn)}", mode="tract", archive=i % 2 == 1,
                      dynamic_axes={"input_0": axes} if dyn else None)
        out[(name, dyn)] = (path, [a.numpy() for a in args], ref)
    return out


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_tract_export_runs_like_torch(exports, case):
    name, dyn = case
    path, args, ref = exports[case]
    model = nnefx.load(path)
    assert "torch_to_nnef_version" in model.extras["properties"]
    g = model.graph
    x = g.tensors[g.inputs[0]]
    if dyn:
        (axis, sym), = MODELS[name][2].items()
        assert g.symbols == [sym] and x.shape[axis] == dims.symbol(sym)
    else:
        assert g.symbols == [] and x.shape == args[0].shape
    inputs = {n: a for n, a in zip(g.inputs, args, strict=True)}
    for backend in ("fast", "formal"):
        got = nnefx.Session(model, backend=backend).run(inputs)[g.outputs[0]]
        assert rel_err(got, ref) < TOL, (backend, rel_err(got, ref))


@pytest.mark.parametrize("case", [c for c in CASES if c[1]], ids=_case_id)
def test_dynamic_axis_takes_other_sizes(exports, case):
    name, _ = case
    path, args, _ = exports[case]
    model, _, axes = MODELS[name]
    (axis, _sym), = axes.items()
    session = nnefx.Session(nnefx.load(path))
    for size in (1, 4):
        shape = list(args[0].shape)
        shape[axis] = size
        x = torch.randn(*shape)
        with torch.no_grad():
            ref = model(x).numpy()
        got = session.run({"input_0": x.numpy()})
        assert rel_err(next(iter(got.values())), ref) < TOL


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_tract_peer(exports, case):
    tract = pytest.importorskip("tract")
    path, args, ref = exports[case]
    theirs = tract.nnef().with_tract_transformers().load(str(path)).into_runnable().run(list(args))[0].to_numpy()
    assert rel_err(theirs, ref) < TOL
    ours = next(iter(nnefx.Session(nnefx.load(path)).run(
        {f"input_{i}": a for i, a in enumerate(args)}).values()))
    assert rel_err(ours, theirs) < TOL


def test_inspect_properties_of_an_export(exports):
    import subprocess
    import sys

    path, _, _ = exports[("mlp", True)]
    out = subprocess.run([sys.executable, "-m", "nnefx", "inspect", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "torch_to_nnef_version: " in out.stdout and "symbols: B" in out.stdout
