"""Real files from today's exporter: torch-to-nnef (0.24) exports of small random-initialised
torch models, read, checked, shaped and run by nnefx on both backends against torch (within
1e-4 relative: max |diff| / max |ref|), and against tract where tract loads the same file.

This module covers torch-to-nnef's ``KhronosNNEF`` target (plain NNEF 1.0.5 with the known
deviations: strict loading refuses each at its position, ``lenient=True`` accepts them).
"""

from __future__ import annotations

import math
import warnings

import pytest

import nnefx
from nnefx.diagnostics import NNEFXError, NNEFXWarning

torch = pytest.importorskip("torch")
pytest.importorskip("torch_to_nnef")

from _t2n import export, rel_err  # noqa: E402

TOL = 1e-4


class Block(torch.nn.Module):
    """A ResNet basic block with a strided projection, then pooling and a classifier.

    ``bn=False`` leaves the batch normalizations out: torch-to-nnef 0.24's KhronosNNEF target
    writes their statistics unsqueezed to ``[1, 1, 1, C]`` (aligned with the last axis, not
    the channels), a file both nnefx and tract refuse (see the test below)."""

    def __init__(self, bn=True):
        super().__init__()
        norm = (lambda c: torch.nn.BatchNorm2d(c)) if bn else (lambda c: torch.nn.Identity())
        self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=not bn)
        self.bn1 = norm(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=not bn)
        self.bn2 = norm(8)
        self.down = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1, stride=2, bias=not bn), norm(8))
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)) + self.down(x))
        y = torch.nn.functional.max_pool2d(y, 2)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Attention(torch.nn.Module):
    """Eager single-head self-attention with a residual and layer norm (an encoder's core)."""

    def __init__(self, d=16):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.o = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)
        self.d = d

    def forward(self, x):
        att = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) / math.sqrt(self.d), dim=-1)
        return self.norm(x + self.o(att @ self.v(x)))


def _models():
    torch.manual_seed(0)
    models = {
        "mlp": (torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4),
                                    torch.nn.Softmax(-1)), (torch.randn(3, 8),)),
        "resnet_block": (Block(bn=False), (torch.randn(2, 3, 12, 12),)),
        "layer_norm": (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Tanh()),
                       (torch.randn(2, 3, 8),)),
        "pad_conv": (torch.nn.Sequential(torch.nn.ZeroPad2d((1, 2, 0, 1)), torch.nn.Conv2d(2, 4, 3),
                                         torch.nn.Sigmoid()), (torch.randn(1, 2, 7, 6),)),
        "attention": (Attention(), (torch.randn(1, 5, 16),)),
    }
    for model, _ in models.values():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):   # non-trivial running statistics
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
        model.eval()
    return models


MODELS = _models()
CASES = [(name, archive) for i, name in enumerate(MODELS) for archive in ((False, True) if i < 2 else (i % 2 == 0,))]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t2n_khronos")
    out = {}
    for name, archive in CASES:
        model, args = MODELS[name]
        with torch.no_grad():
            ref = model(*args).numpy()
        path = export(model, args, folder, f"{name}_{'tgz' if archive else 'dir'}", mode="khronos", archive=archive)
        out[(name, archive)] = (path, [a.numpy() for a in args], ref)
    return out


def _load_lenient(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = nnefx.load(path, lenient=True)
    return model, [w.message for w in caught if isinstance(w.message, NNEFXWarning)]


@pytest.mark.parametrize("name, archive", CASES, ids=[f"{n}-{'tgz' if a else 'folder'}" for n, a in CASES])
def test_khronos_export_runs_leniently_like_torch(exports, name, archive):
    path, args, ref = exports[(name, archive)]
    model, found = _load_lenient(path)
    for w in found:
        assert w.location is not None and w.location.line, w
    inputs = {f"input_{i}": a for i, a in enumerate(args)}
    out = model.graph.outputs[0]
    assert model.graph.tensors[out].shape == ref.shape
    for backend in ("fast", "formal"):
        got = nnefx.Session(model, backend=backend).run(inputs)[out]
        assert rel_err(got, ref) < TOL, (backend, rel_err(got, ref))


#: which Khronos exports use a deviation (softmax's axes positional, epsilon as a tensor,
#: integer[][] padding): the others are plain NNEF 1.0.5
DEVIATING = {"mlp": True, "resnet_block": False, "layer_norm": True, "pad_conv": True, "attention": True}


@pytest.mark.parametrize("name", list(MODELS))
def test_khronos_export_strictly(exports, name):
    """Strict loading refuses a deviating file at one of the deviations lenient mode warns
    about (the checker's before the expander's) and reads a conforming one as it is."""
    archive = next(a for n, a in CASES if n == name)
    path, args, ref = exports[(name, archive)]
    _, found = _load_lenient(path)
    assert bool(found) == DEVIATING[name], [str(w) for w in found]
    if not found:
        got = nnefx.Session(nnefx.load(path)).run({f"input_{i}": a for i, a in enumerate(args)})
        assert rel_err(next(iter(got.values())), ref) < TOL
        return
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path)
    where = {(w.location.line, w.location.column) for w in found}
    assert (info.value.location.line, info.value.location.column) in where


@pytest.mark.parametrize("name", ["mlp", "resnet_block"])
def test_tract_agrees_on_khronos_exports(exports, name):
    tract = pytest.importorskip("tract")
    path, args, ref = exports[(name, False)]
    got = tract.nnef().load(str(path)).into_runnable().run(list(args))[0].to_numpy()
    assert rel_err(got, ref) < TOL
    ours = nnefx.Session(_load_lenient(path)[0]).run({f"input_{i}": a for i, a in enumerate(args)})
    assert rel_err(next(iter(ours.values())), got) < TOL


def test_khronos_batch_norm_export_refused_like_tract(tmp_path):
    """torch-to-nnef 0.24 (KhronosNNEF) writes BatchNorm2d statistics as [1, 1, 1, C]: with
    W != C the file is invalid; nnefx says where (the batch normalization's subtraction), as
    tract refuses it too."""
    torch.manual_seed(1)
    model = Block(bn=True).eval()
    x = torch.randn(1, 3, 12, 12)
    path = export(model, (x,), tmp_path, "bn", mode="khronos")
    with pytest.raises(NNEFXError, match=r"cannot be broadcast") as info:
        _load_lenient(path)
    assert info.value.location.line is not None
    text = (path / "graph.nnef").read_text().splitlines()[info.value.location.line - 1]
    assert "batch_normalization" in text
    tract = pytest.importorskip("tract")
    with pytest.raises(Exception, match="broadcast"):
        tract.nnef().load(str(path)).into_runnable().run([x.numpy()])
