"""Differential tests: IR v11 files written by OpenVINO (torch -> ONNX -> openvino) run in nnefx.

Each network is exported at test time into tmp_path with a dynamic batch dimension, saved
with FP32 weights and with OpenVINO's default FP16 weight compression, and run by OpenVINO
(CPU, f32 inference precision) and by nnefx (fast and formal backends) on the same inputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ir_netgen import assert_close, run_nnefx, run_openvino

torch = pytest.importorskip("torch")
ov = pytest.importorskip("openvino")
pytest.importorskip("onnx")

pytestmark = pytest.mark.peer

nn = torch.nn


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, groups=4, stride=2, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, groups=8, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = nn.functional.max_pool2d(x, 2)
        x = self.bn(self.c2(x))
        x = nn.functional.hardswish(self.dw(x)) + x
        x = nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        x = nn.functional.avg_pool2d(self.up(x), 2, ceil_mode=True)
        x = torch.sigmoid(x) * nn.functional.elu(x)
        return torch.softmax(self.fc(x.flatten(1)), -1)


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return torch.tanh(self.fc(y[:, -1])), y


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(16)
        self.ln2 = nn.LayerNorm(16)
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.att(h, h, h, need_weights=False)
        x = x + a
        return x + self.ff(self.ln2(x))


class Manual(nn.Module):
    """Hand-written attention and assorted tensor ops (Split, Gather, Slice, Reduce, Pad...)."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).split(8, dim=-1)
        s = torch.matmul(q, k.transpose(-1, -2)) / 8 ** 0.5
        y = torch.matmul(torch.softmax(s, dim=-1), v)
        y = nn.functional.pad(y, (1, 2), mode="constant", value=0.5)
        z = torch.cat([y[:, ::2], y[:, 1:2].exp()], dim=1)
        m = z.mean(dim=-1, keepdim=True) + z.amax(dim=1, keepdim=True)[:, :, :1]
        return z * torch.clamp(m, -1.0, 1.0), torch.log_softmax(y, dim=1), y.sum(dim=(1, 2))


class GRUNet(nn.Module):
    """Bidirectional GRU into a plain RNN (GRUSequence, RNNSequence)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 5, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(10, 3, batch_first=True)

    def forward(self, x):
        y, _ = self.gru(x)
        z, h = self.rnn(y)
        return z, h


class TokenNet(nn.Module):
    """Token and position embeddings (Gather of run-time ids, Range over a dynamic length),
    causal attention, argmax/top-k (TopK)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 8)
        self.pos = nn.Embedding(16, 8)
        self.out = nn.Linear(8, 6)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.tok(ids) + self.pos(pos)
        n = ids.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), 1)
        a = torch.softmax(h @ h.transpose(1, 2) / 8 ** 0.5 + mask, -1) @ h
        logits = self.out(a)
        return logits.argmax(-1), torch.topk(logits, 2, dim=-1).values


NETS = {
    "cnn": (CNN, (2, 3, 16, 16)),
    "lstm": (RNN, (2, 5, 4)),
    "transformer": (Block, (2, 5, 16)),
    "manual": (Manual, (2, 6, 8)),
    "gru": (GRUNet, (2, 5, 4)),
    "tokens": (TokenNet, (2, 6)),
}
OUTPUTS = {"cnn": 1, "transformer": 1, "lstm": 2, "manual": 3, "gru": 2, "tokens": 2}
DYNAMIC = {"tokens": {0: "batch", 1: "length"}}


def make_input(name: str, shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.RandomState(seed)
    if name == "tokens":
        return rng.randint(0, 20, size=shape).astype(np.int64)
    return rng.randn(*shape).astype(np.float32)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    cache: dict = {}

    def get(name: str, fp16: bool) -> str:
        key = (name, fp16)
        if key in cache:
            return cache[key]
        cls, shape = NETS[name]
        d = tmp_path_factory.mktemp(f"{name}{'16' if fp16 else '32'}")
        torch.manual_seed(0)
        model = cls().eval()
        with torch.no_grad():
            for p in model.parameters():  # non-trivial BN statistics etc.
                p.add_(0.01 * torch.randn_like(p))
            for b in model.buffers():
                if b.dtype.is_floating_point:
                    b.copy_(torch.rand_like(b) + 0.5)
        onnx_path = str(d / f"{name}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out_names = ["y", "z", "w"][:OUTPUTS[name]]
            torch.onnx.export(model, (torch.from_numpy(make_input(name, shape, 0)),), onnx_path, input_names=["x"],
                              output_names=out_names, dynamic_axes={"x": DYNAMIC.get(name, {0: "batch"})},
                              dynamo=False)
        om = ov.convert_model(onnx_path)
        xml = str(d / f"{name}.xml")
        ov.save_model(om, xml, compress_to_fp16=fp16)
        cache[key] = xml
        return xml

    return get


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", list(NETS))
def test_network_matches_openvino(exported, name, fp16):
    xml = exported(name, fp16)
    _, shape = NETS[name]
    for batch in (shape[0], 3):  # the batch dimension is dynamic in the file
        x = make_input(name, (batch,) + shape[1:], batch)
        want = run_openvino(xml, {"x": x})
        got = run_nnefx(xml, {"x": x})
        assert set(got) == set(want)
        for key in want:
            # FP16 weights are decompressed exactly in both; the computation is f32 in both.
            assert_close(got[key], want[key], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["cnn", "lstm", "gru", "tokens"])
def test_formal_backend_agrees(exported, name):
    xml = exported(name, False)
    _, shape = NETS[name]
    x = make_input(name, shape, 7)
    want = run_openvino(xml, {"x": x})
    got = run_nnefx(xml, {"x": x}, backend="formal")
    for key in want:
        assert_close(got[key], want[key], rtol=1e-4, atol=1e-5)


def test_dynamic_length(exported):
    xml = exported("tokens", False)
    for n in (3, 9):
        x = make_input("tokens", (2, n), n)
        want = run_openvino(xml, {"x": x})
        got = run_nnefx(xml, {"x": x})
        for key in want:
            assert_close(got[key], want[key])


def test_dynamic_batch_is_kept_and_can_be_fixed(exported):
    import nnefx

    xml = exported("transformer", False)
    model = nnefx.load(xml)
    assert model.graph.tensors["x"].shape == (None, 5, 16)
    fixed = nnefx.load(xml, shapes={"x": (4, 5, 16)})
    assert fixed.graph.tensors["x"].shape == (4, 5, 16)
    # with a static batch every shape computation folds: no run-time shape operations left
    assert not [op.op for op in fixed.graph.operations if op.op in ("tensor_shape", "reshape_to", "broadcast_to")]
    x = np.random.RandomState(0).randn(4, 5, 16).astype(np.float32)
    assert_close(run_nnefx(xml, {"x": x}, shapes={"x": (4, 5, 16)})["y"], run_openvino(xml, {"x": x})["y"])


@pytest.mark.parametrize("name", list(NETS))
def test_converted_to_nnef_runs_the_same(exported, name, tmp_path):
    """IR -> NNEF folder (nnefx convert) -> nnefx check -> load -> run == OpenVINO on the IR."""
    import nnefx
    from nnefx.cli import main
    from nnefx.runtime.session import Session

    xml = exported(name, False)
    folder = str(tmp_path / "nnef")
    assert main(["convert", xml, folder]) == 0
    assert main(["check", folder]) == 0
    model = nnefx.load(folder)
    _, shape = NETS[name]
    x = make_input(name, (3,) + shape[1:], 5)
    (inp,) = model.graph.inputs
    got = Session(model, input_shapes={inp: x.shape}).run({inp: x})
    want = run_openvino(xml, {"x": x})
    assert len(got) == len(want)
    for g, w in zip(got.values(), want.values(), strict=True):
        assert_close(g, w)


class TorchMisc(nn.Module):
    """Layers OpenVINO's PyTorch frontend emits as opset ops of their own (GroupNormalization,
    AdaptiveAvgPool, Interpolate, DepthToSpace, CumSum, TopK/argmax, tanh Gelu)."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x):
        y = self.gn(self.conv(x))
        z = nn.functional.adaptive_avg_pool2d(y, (3, 2))
        w = nn.functional.interpolate(y, scale_factor=2, mode="bilinear")
        return (z, w.mean(1), self.shuffle(y), torch.cumsum(y, 2), y.argmax(1),
                nn.functional.gelu(y, approximate="tanh"))


@pytest.mark.parametrize("name, fixed", [("cnn", True), ("gru", False), ("tokens", False), ("misc", True)])
def test_pytorch_frontend_files(tmp_path, name, fixed):
    """Files from ov.convert_model(torch module): every dim dynamic, unnamed outputs (compared in
    order); spatial extents some layers need are fixed with load(..., shapes=)."""
    cls, shape = (TorchMisc, (2, 4, 6, 6)) if name == "misc" else NETS[name]
    torch.manual_seed(0)
    model = cls().eval()
    x = make_input(name, shape, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        om = ov.convert_model(model, example_input=torch.from_numpy(x))
    path = str(tmp_path / f"{name}.xml")
    ov.save_model(om, path, compress_to_fp16=False)
    inp = om.inputs[0].get_any_name()
    cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = cm({inp: x})
    want = [np.asarray(res[o]) for o in cm.outputs]
    got = list(run_nnefx(path, {inp: x}, **({"shapes": {inp: x.shape}} if fixed else {})).values())
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
