"""The committed digits model: loads, runs on both backends, `nnefx run` and the demo work."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

import nnefx
from nnefx.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "digits")
MODEL = os.path.join(EXAMPLE, "model")

pytest.importorskip("sklearn")


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"digits_{name}", os.path.join(EXAMPLE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, EXAMPLE)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(EXAMPLE)
    return module


def test_model_is_accurate_on_held_out_images_and_backends_agree():
    _, _, images, labels = _module("digits_data").split()
    model = nnefx.load(MODEL)
    fast = nnefx.Session(model, "fast", input_shapes={"input": (None, 1, 8, 8)})
    assert [tuple(i) for i in fast.inputs] == [("input", (None, 1, 8, 8), "scalar")]
    probs = fast.run({"input": images})["probabilities"]
    assert probs.shape == (len(labels), 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert (probs.argmax(axis=1) == labels).mean() >= 0.97
    formal = nnefx.Session(model, "formal", input_shapes={"input": (None, 1, 8, 8)})
    np.testing.assert_allclose(formal.run({"input": images[:3]})["probabilities"], probs[:3], atol=1e-5)


def test_declared_batch_is_enforced_without_substitution():
    session = nnefx.Session(nnefx.load(MODEL))
    with pytest.raises(nnefx.NNEFXError, match=r"input 'input' must have shape \[1, 1, 8, 8\], got \[2, 1, 8, 8\]"):
        session.run({"input": np.zeros((2, 1, 8, 8), np.float32)})


def test_nnefx_run_on_the_model_folder(tmp_path, capsys):
    image = _module("digits_data").split()[2][:1]
    np.save(tmp_path / "image.npy", image)
    assert main(["run", MODEL, "-i", f"input={tmp_path / 'image.npy'}", "-o", str(tmp_path / "out"),
                 "--profile"]) == 0
    text = capsys.readouterr().out
    assert "output probabilities: scalar [1, 10]" in text and "\nconv" in text  # conv or conv+relu (fused)
    probs = np.load(tmp_path / "out" / "probabilities.npy")
    assert probs.shape == (1, 10) and abs(float(probs.sum()) - 1.0) < 1e-5
    assert main(["run", MODEL, "-i", f"nope={tmp_path / 'image.npy'}"]) == 1
    assert "error: --input names 'nope', which is not an input of the model" in capsys.readouterr().err


def test_demo_prints_accuracy_throughput_and_profile(capsys):
    pytest.importorskip("tqdm")
    assert _module("demo").main() == 0
    text = capsys.readouterr().out
    assert "examples/digits/model: ok: graph 'digits'" in text or "model: ok: graph 'digits'" in text
    accuracy = float(text.split("held-out images: ")[1].split("%")[0])
    assert accuracy >= 97.0
    assert "images/s" in text and "same predictions" in text
    assert "conv" in text.split("profile")[1]


def test_train_script_writes_exactly_the_committed_model(tmp_path):
    """The committed folder is what train.py's exporter writes for these weights, and torch
    computes the same probabilities as nnefx from it."""
    torch = pytest.importorskip("torch")
    train = _module("train")
    model = nnefx.load(MODEL)
    net = train.make_net()
    with torch.no_grad():
        for layer in ("conv1", "conv2", "fc"):
            module = getattr(net, layer)
            module.weight.copy_(torch.from_numpy(np.array(model.weights[f"{layer}/filter"])))
            module.bias.copy_(torch.from_numpy(np.array(model.weights[f"{layer}/bias"]).reshape(-1)))
    nnefx.save(train.build_model(net), tmp_path / "model")
    for root, _, files in os.walk(MODEL):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), MODEL)
            with open(os.path.join(MODEL, rel), "rb") as a, open(tmp_path / "model" / rel, "rb") as b:
                assert a.read() == b.read(), rel
    _, _, images, _ = _module("digits_data").split()
    with torch.no_grad():
        expected = torch.softmax(net(torch.from_numpy(images[:64])), dim=1).numpy()
    session = nnefx.Session(model, input_shapes={"input": (None, 1, 8, 8)})
    np.testing.assert_allclose(session.run({"input": images[:64]})["probabilities"], expected, atol=1e-5)
