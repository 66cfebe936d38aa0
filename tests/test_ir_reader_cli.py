"""``nnefx run``/``convert``/``check``/``inspect`` on IR files, and IR -> NNEF -> run round trips."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from ir_netgen import assert_close, run_openvino
from nnefx.cli import main
from nnefx.runtime.session import Session

ov = pytest.importorskip("openvino")
import openvino.opset8 as o8  # noqa: E402
import openvino.opset13 as o  # noqa: E402


@pytest.fixture()
def ir_model(tmp_path):
    """A small CNN with OpenVINO-style names (not NNEF identifiers) and a dynamic batch."""
    rng = np.random.RandomState(0)
    x = o.parameter([-1, 3, 8, 8], np.float32, name="input.1")
    c = o.convolution(x, rng.randn(4, 3, 3, 3).astype(np.float32), [1, 1], [1, 1], [1, 1], [1, 1])
    c = o.add(c, rng.randn(1, 4, 1, 1).astype(np.float32))
    p = o8.max_pool(o.relu(c), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]).output(0)
    s = o8.softmax(o.reshape(p, np.array([0, -1], np.int64), True), -1)
    s.output(0).get_tensor().set_names({"/head/Softmax_output_0"})
    path = str(tmp_path / "model.xml")
    ov.save_model(ov.Model([s], [x], "my-net"), path, compress_to_fp16=False)
    return path


def test_run_with_given_input(ir_model, tmp_path, capsys):
    x = np.random.RandomState(1).randn(2, 3, 8, 8).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    assert main(["run", ir_model, "-i", f"input.1={tmp_path / 'x.npy'}", "-o", str(out)]) == 0
    files = os.listdir(out)
    assert len(files) == 1
    got = np.load(out / files[0])
    assert_close(got, run_openvino(ir_model, {"input.1": x})["/head/Softmax_output_0"])


def test_run_random_inputs_both_backends(ir_model, capsys):
    assert main(["run", ir_model]) == 0
    assert main(["run", ir_model, "--backend", "formal"]) == 0
    assert "/head/Softmax_output_0" in capsys.readouterr().out


def test_convert_to_nnef_then_check_and_run(ir_model, tmp_path, capsys):
    folder = str(tmp_path / "model_nnef")
    assert main(["convert", ir_model, folder]) == 0
    assert main(["check", folder]) == 0
    text = open(os.path.join(folder, "graph.nnef")).read()
    assert "input_1" in text and "head_Softmax_output_0" in text
    model = nnefx.load(folder)
    x = np.random.RandomState(2).randn(3, 3, 8, 8).astype(np.float32)
    (inp,) = model.graph.inputs
    got = Session(model, input_shapes={inp: x.shape}).run({inp: x})
    want = run_openvino(ir_model, {"input.1": x})["/head/Softmax_output_0"]
    assert_close(got[model.graph.outputs[0]], want)


def test_convert_to_single_document_and_archive(ir_model, tmp_path):
    for target in ("m.tgz", "m.nnef"):
        path = str(tmp_path / target)
        assert main(["convert", ir_model, path]) == 0
        assert main(["check", path]) == 0


def test_inspect_json_keeps_openvino_names(ir_model, capsys):
    assert main(["inspect", ir_model, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"input.1"' in out and '"/head/Softmax_output_0"' in out
