"""Real networks exported by torch to ONNX, run by nnefx against onnxruntime.

A ResNet-18-shaped CNN, a MobileNet-style net (inverted residuals, depthwise convolutions,
hard-swish, squeeze-excitation), a small vision transformer, a BERT-shaped encoder (word,
position and type embeddings, masked multi-head self-attention, post-norm layers, GELU,
pooler) and a stacked bidirectional LSTM, each exported by both torch exporters (TorchScript:
opsets 17-20; dynamo: 18-20, the lowest it has implementations for) with a static batch and
with a dynamic batch axis run at two batch sizes.  Every output must match onnxruntime's within
1e-4 relative (max |diff| / max |reference|) on both nnefx backends, and the model converted
to NNEF must read back and give bit-identical results on the fast backend.  Random weights, small shapes: the
opsets are spread over the networks so each exporter meets each opset without exporting every
combination.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class _Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """ResNet-18's layout (7x7 stem, max pool, 4 stages of 2 basic blocks, pooled classifier), narrow."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for i, m in enumerate((1, 2, 4, 8)):
            blocks += [_Basic(cin, width * m, 1 if i == 0 else 2), _Basic(width * m, width * m, 1)]
            cin = width * m
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


class _Inverted(nn.Module):
    def __init__(self, cin, cout, stride, expand=2):
        super().__init__()
        h = cin * expand
        self.pw, self.b1 = nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h)
        self.dw, self.b2 = nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h)
        self.se1, self.se2 = nn.Conv2d(h, 4, 1), nn.Conv2d(4, h, 1)
        self.pj, self.b3 = nn.Conv2d(h, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = F.hardswish(self.b2(self.dw(F.hardswish(self.b1(self.pw(x))))))
        y = y * F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(y, 1)))))
        y = self.b3(self.pj(y))
        return x + y if self.residual else y


class MobileNet(nn.Module):
    """MobileNetV3's building blocks: depthwise separable inverted residuals, hard-swish, SE."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(_Inverted(8, 8, 1), _Inverted(8, 16, 2), _Inverted(16, 16, 1),
                                    _Inverted(16, 24, 2))
        self.head = nn.Sequential(nn.Linear(24, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


class ViT(nn.Module):
    """A vision transformer: patch embedding, class token, positions, pre-norm encoder layers."""

    def __init__(self, image=16, patch=4, dim=32, heads=4, depth=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], 1) + self.pos
        return self.head(self.norm(self.encoder(t))[:, 0])


class _BertLayer(nn.Module):
    def __init__(self, dim, heads, ff):
        super().__init__()
        self.heads, self.dk = heads, dim // heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(dim, ff), nn.Linear(ff, dim)

    def forward(self, x, bias):
        b, n, d = x.shape

        def heads(t):
            return t.view(b, n, self.heads, self.dk).transpose(1, 2)

        scores = torch.matmul(heads(self.q(x)), heads(self.k(x)).transpose(-1, -2)) / self.dk ** 0.5 + bias
        context = torch.matmul(torch.softmax(scores, -1), heads(self.v(x))).transpose(1, 2).reshape(b, n, d)
        x = self.ln1(x + self.o(context))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Bert(nn.Module):
    """BERT's encoder as transformers' BertModel lays it out, tiny: embeddings (word + position +
    token type, layer norm), additive attention mask from the 0/1 mask, post-norm layers, pooler."""

    def __init__(self, vocab=50, dim=32, heads=4, ff=64, depth=2, positions=16):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, dim), nn.Embedding(positions, dim), \
            nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList([_BertLayer(dim, heads, ff) for _ in range(depth)])
        self.pooler = nn.Linear(dim, dim)

    def forward(self, ids, mask):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(ids)))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


class LSTMNet(nn.Module):
    """Two stacked bidirectional LSTM layers (batch first) and a linear head; returns the last states too."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        y, (h, _) = self.lstm(x)
        return self.fc(y), h


def _images(size):
    return lambda rng, b: {"x": rng.standard_normal((b, 3, size, size)).astype(np.float32)}


def _tokens(rng, b):
    lengths = rng.integers(3, 8, (b, 1))
    lengths[0] = 7
    return {"ids": rng.integers(0, 50, (b, 7)).astype(np.int64),
            "mask": (np.arange(7)[None] < lengths).astype(np.int64)}


NETWORKS = {
    "resnet": (ResNet, _images(16)),
    "mobilenet": (MobileNet, _images(16)),
    "vit": (ViT, _images(16)),
    "bert": (Bert, _tokens),
    "lstm": (LSTMNet, lambda rng, b: {"x": rng.standard_normal((b, 5, 8)).astype(np.float32)}),
}


def _cases():
    # each network: both exporters, static and dynamic batch; the opsets rotate over the networks
    # so that every exporter is tried at each opset it supports
    for i, name in enumerate(NETWORKS):
        yield name, "torchscript", 17 + i % 4, False
        yield name, "torchscript", 17 + (i + 2) % 4, True
        yield name, "dynamo", 18 + i % 3, False
        yield name, "dynamo", 18 + (i + 1) % 3, True


def _net(name):
    torch.manual_seed(0)
    net = NETWORKS[name][0]().eval()
    with torch.no_grad():  # batch norms with statistics of their own, not the identity
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return net


def _export(name, exporter, opset, dynamic, path):
    net = _net(name)
    example = NETWORKS[name][1](np.random.default_rng(0), 2)
    args = tuple(torch.from_numpy(v) for v in example.values())
    kw = {}
    if dynamic and exporter == "dynamo":
        kw["dynamic_shapes"] = {k: {0: torch.export.Dim("batch", max=64)} for k in example}
    elif dynamic:
        kw["dynamic_axes"] = {k: {0: "batch"} for k in example}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, str(path), opset_version=opset, dynamo=exporter == "dynamo",
                          input_names=list(example), **kw)
    return path


def _relative(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want))) / max(float(np.max(np.abs(want))), 1e-30)


@pytest.mark.parametrize("name, exporter, opset, dynamic", list(_cases()),
                         ids=[f"{n}-{e}-{o}-{'dynamic' if d else 'static'}" for n, e, o, d in _cases()])
def test_torch_export_matches_onnxruntime(tmp_path, name, exporter, opset, dynamic):
    path = _export(name, exporter, opset, dynamic, tmp_path / f"{name}.onnx")
    declared = onnx.load(str(path)).opset_import
    assert any(i.domain in ("", "ai.onnx") and i.version == opset for i in declared)
    model = nnefx.load(str(path))
    reference = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if dynamic:
        assert all(model.graph.tensors[i].shape[0] is None for i in model.graph.inputs)
    nnefx.save(model, str(tmp_path / "nnef"))
    nnef = nnefx.load(str(tmp_path / "nnef"))
    rng = np.random.default_rng(1)
    for k, batch in enumerate((1, 3) if dynamic else (2,)):
        feeds = NETWORKS[name][1](rng, batch)
        want = reference.run(None, feeds)
        # the formal backend (the definition, float64 per item) at the first batch only: it is slow
        results = {}
        for backend in ("fast", "formal") if k == 0 else ("fast",):
            got = results[backend] = list(Session(model, backend).run(feeds).values())
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape and g.dtype == w.dtype
                assert _relative(g, w) <= 1e-4, (backend, batch, _relative(g, w))
        # NNEF declares one extent per input; another batch is given as a substitute shape
        renamed = dict(zip(nnef.graph.inputs, feeds.values(), strict=True))
        again = Session(nnef, input_shapes={k: v.shape for k, v in renamed.items()}).run(renamed)
        for g, a in zip(results["fast"], again.values(), strict=True):
            np.testing.assert_array_equal(a, g)
