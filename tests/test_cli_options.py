"""CLI options shared by every format: --shape sets input shapes, --fp16 for IR output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnefx.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
CNN = FIXTURES / "ir" / "opset" / "cnn.xml"


def test_shape_option_fixes_a_dynamic_ir_input(capsys):
    assert main(["inspect", str(CNN), "--shape", "x=2,3,16,16"]) == 0
    out = capsys.readouterr().out
    assert "x: scalar [2, 3, 16, 16]" in out and "y: scalar [2, 10]" in out


def test_shape_option_replaces_an_nnef_external_shape(tmp_path, capsys):
    doc = tmp_path / "g.nnef"
    doc.write_text("version 1.0;\ngraph G(x) -> (y) {\n  x = external<scalar>(shape = [1, 4]);\n"
                   "  y = relu(x);\n}\n")
    assert main(["inspect", str(doc), "--shape", "x=1,4"]) == 0
    assert "y: scalar [1, 4]" in capsys.readouterr().out
    # As the official tools' external_shapes: the given shape replaces the declared one.
    assert main(["inspect", str(doc), "--shape", "x=3,5"]) == 0
    assert "y: scalar [3, 5]" in capsys.readouterr().out
    assert main(["inspect", str(doc), "--shape", "z=1,4"]) == 1  # not an input of the graph


@pytest.mark.parametrize("bad", ["x", "x=", "x=a,b", "x=1,0", "=1,2"])
def test_malformed_shape_option_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as info:
        main(["check", str(CNN), "--shape", bad])
    assert info.value.code == 2


def test_fp16_conversion_keeps_weights_behind_convert_layers(tmp_path):
    openvino = pytest.importorskip("openvino")
    out = tmp_path / "cnn16.xml"
    assert main(["convert", str(CNN), str(out), "--fp16", "--shape", "x=2,3,16,16"]) == 0
    assert 'element_type="f16"' in out.read_text() and '"Convert"' in out.read_text()
    x = np.load(FIXTURES / "ir" / "opset" / "cnn.x.npy")[:1].repeat(2, axis=0)
    compiled = openvino.Core().compile_model(str(out), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    y = compiled({"x": x})[compiled.output(0)]
    assert y.shape == (2, 10)
    expected = np.load(FIXTURES / "ir" / "opset" / "cnn.y.npy")[:1]
    # FP16 weights: agreement within half precision of the FP32 reference.
    assert np.max(np.abs(y[0] - expected[0])) <= 1e-2 * max(1.0, float(np.max(np.abs(expected))))


def test_inspect_json_of_an_nnef_model_is_fully_expanded(tmp_path, capsys):
    import json

    doc = tmp_path / "g.nnef"
    doc.write_text("version 1.0;\ngraph G(x) -> (y) {\n  x = external<scalar>(shape = [1, 4]);\n"
                   "  r = relu(x);\n  y = softmax(r, axes = [1]);\n}\n")
    assert main(["inspect", str(doc), "--json"]) == 0
    ops = [o["op"] for o in json.loads(capsys.readouterr().out)["operations"]]
    # relu = max(x, 0.0) = select(x > 0.0, x, 0.0); softmax = exp(x - max) / sum
    assert ops == ["external", "gt", "select", "max_reduce", "sub", "exp", "sum_reduce", "div"]
    assert main(["inspect", str(doc)]) == 0
    assert "softmax: 1" in capsys.readouterr().out  # the summary keeps standard compounds atomic
