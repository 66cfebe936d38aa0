"""ONNX import: torch-exported networks and single-node graphs vs onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402


def _ort(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _compare(path, feeds, tmp_path, rtol=1e-4, atol=1e-5):
    want = _ort(path, feeds)
    model = nnefx.load(str(path))
    got = Session(model).run(feeds)
    for w, g in zip(want, got.values(), strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)
    out = tmp_path / "nnef_out"
    nnefx.save(model, str(out))
    again = nnefx.load(str(out))
    feeds2 = dict(zip(again.graph.inputs, feeds.values(), strict=True))
    got2 = Session(again).run(feeds2)
    for w, g in zip(want, got2.values(), strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)
    return model


def _export(net, args, path, opset):
    net.eval()
    torch.onnx.export(net, args, str(path), opset_version=opset, dynamo=False,
                      input_names=["input"], output_names=["output"])


class _CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=4)
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.avg = torch.nn.AvgPool2d(3, stride=1, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = self.avg(self.pool(torch.nn.functional.leaky_relu(self.c2(y), 0.1)))
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.fc(y), dim=-1)


class _Mobile(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pw = torch.nn.Conv2d(4, 8, 1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.bil = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.tr = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.pw(x))
        y = torch.nn.functional.hardswish(self.dw(y))
        return self.up(y) + self.bil(y), self.tr(y)


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)
        self.att = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.ff = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.att(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(self.ln(x))


@pytest.mark.parametrize("opset", [13, 17])
def test_cnn(tmp_path, opset):
    torch.manual_seed(0)
    net = _CNN()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 1.5)
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    path = tmp_path / "cnn.onnx"
    _export(net, torch.from_numpy(x), path, opset)
    model = _compare(path, {"input": x}, tmp_path)
    assert model.graph.inputs == ["input"] and model.graph.outputs == ["output"]


@pytest.mark.parametrize("opset", [13, 18])
def test_mobilenet_like(tmp_path, opset):
    torch.manual_seed(1)
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    path = tmp_path / "m.onnx"
    net = _Mobile().eval()
    torch.onnx.export(net, torch.from_numpy(x), str(path), opset_version=opset, dynamo=False,
                      input_names=["input"])
    _compare(path, {"input": x}, tmp_path)


@pytest.mark.parametrize("opset", [14, 17])
def test_transformer_block(tmp_path, opset):
    torch.manual_seed(2)
    x = np.random.default_rng(2).standard_normal((2, 5, 16)).astype(np.float32)
    path = tmp_path / "t.onnx"
    _export(_Block(), torch.from_numpy(x), path, opset)
    _compare(path, {"input": x}, tmp_path)


class _Misc(torch.nn.Module):
    """Exporter patterns beyond the three networks: pooling corner cases, resampling, indexing."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 6)
        self.inorm = torch.nn.InstanceNorm2d(1, affine=True)

    def forward(self, x):
        F = torch.nn.functional
        a = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)
        b = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        u = F.interpolate(a + b, size=(6, 6), mode="bilinear", align_corners=True)
        v = F.pixel_shuffle(torch.cat([u, u], 1), 2)[:, :, 1:, ::2]
        idx = (x[:, 0, 0, :6].abs() * 3).long().clamp(0, 9)
        e = self.emb(idx).sum(-1)
        w = torch.where(v > 0, v, v * 0.1).cumsum(-1)
        return self.inorm(w).mean((2, 3)) + e[:, :1]


@pytest.mark.parametrize("opset", [13, 17])
def test_exporter_patterns(tmp_path, opset):
    torch.manual_seed(3)
    x = np.random.default_rng(3).standard_normal((2, 2, 8, 8)).astype(np.float32)
    path = tmp_path / "misc.onnx"
    _export(_Misc(), torch.from_numpy(x), path, opset)
    _compare(path, {"input": x}, tmp_path)


class _Causal(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return torch.nn.functional.gelu(y.transpose(1, 2).reshape(2, 5, 16), approximate="tanh")


@pytest.mark.parametrize("opset", [17, 18])
def test_causal_attention(tmp_path, opset):
    torch.manual_seed(4)
    x = np.random.default_rng(4).standard_normal((2, 5, 16)).astype(np.float32)
    path = tmp_path / "causal.onnx"
    _export(_Causal(), torch.from_numpy(x), path, opset)
    _compare(path, {"input": x}, tmp_path)


def test_corrupt_bytes(tmp_path):
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07\xff\xff\xff garbage \x00\x01")
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert "bad.onnx" in str(e.value)
