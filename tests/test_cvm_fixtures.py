"""The 13 CVM example models with the real runtime's outputs: reproduced bit for bit by both
backends through nnefx.Session and through ``nnefx run``; "ops" cost and output precision
equal the runtime's figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx.cli import main
from nnefx.formats.cvm import model_cost, model_precisions

FIX = Path(__file__).parent / "fixtures" / "cvm"
INDEX = json.loads((FIX / "index.json").read_text())
NAMES = [e["name"] for e in INDEX]
BY_NAME = {e["name"]: e for e in INDEX}


def _load(name):
    return nnefx.load(str(FIX / f"{name}.json"), params=str(FIX / f"{name}.params"))


def _expected(name):
    n = len(BY_NAME[name]["heads"])
    if n == 1:
        return [np.load(FIX / f"{name}.out.npy")]
    return [np.load(FIX / f"{name}.out{i}.npy") for i in range(n)]


def test_all_thirteen_examples_are_present():
    assert len(NAMES) == 13


@pytest.mark.parametrize("backend", ["formal", "fast"])
@pytest.mark.parametrize("name", NAMES)
def test_session_reproduces_runtime_bit_for_bit(name, backend):
    model = _load(name)
    session = nnefx.Session(model, backend=backend)
    outputs = session.run({"data": np.load(FIX / f"{name}.in.npy")})
    got = [outputs[n] for n in model.graph.outputs]
    expected = _expected(name)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == np.int32
        assert g.shape == e.shape
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", NAMES)
def test_cost_equals_runtime_ops(name):
    assert model_cost(_load(name)) == BY_NAME[name]["ops"]


@pytest.mark.parametrize("name", NAMES)
def test_output_precision_equals_runtime(name):
    model = _load(name)
    prec = model_precisions(model)
    assert max(prec[n] for n in model.graph.outputs) == BY_NAME[name]["output_precision"]
    assert model.extras["cvm"]["output_precision"] == BY_NAME[name]["output_precision"]


@pytest.mark.parametrize("backend", ["formal", "fast"])
@pytest.mark.parametrize("name", NAMES)
def test_cli_run_reproduces_runtime(name, backend, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", str(FIX / f"{name}.json"), "--params", str(FIX / f"{name}.params"),
               "--input", f"data={FIX / f'{name}.in.npy'}", "--backend", backend, "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    model = _load(name)
    for tensor, expected in zip(model.graph.outputs, _expected(name), strict=True):
        np.testing.assert_array_equal(np.load(out / f"{tensor}.npy"), expected)


def test_cli_inspect_cost_prints_runtime_ops(capsys):
    name = "ex01_conv_pool_dense"
    assert main(["inspect", str(FIX / f"{name}.json"), "--params", str(FIX / f"{name}.params"), "--cost"]) == 0
    assert "cost: 22734 ops" in capsys.readouterr().out


def test_params_file_defaults_to_sibling():
    model = nnefx.load(str(FIX / "ex01_conv_pool_dense.json"))
    assert model.weights["c_w"].shape == (4, 3, 3, 3)


def test_input_saturation_is_an_explicit_graph_operation():
    model = _load("ex02_groupconv_ceilpool")
    first = model.graph.operations[1]
    assert first.op == "cvm_cvm_clip" and first.attribs == {"precision": 6}
    assert first.inputs == {"x": "data"}
    # the example's data exceed +-31 and still reproduce the runtime (saturated, not refused)
    x = np.load(FIX / "ex02_groupconv_ceilpool.in.npy")
    assert np.abs(x).max() > 31


def test_max_default_axis_departure_is_followed():
    """ex05: max(axis=()) starts at 0 (runtime), max over all listed axes is the true max."""
    model = _load("ex05_max_default_axis")
    outs = nnefx.Session(model, backend="formal").run({"data": np.load(FIX / "ex05_max_default_axis.in.npy")})
    first, second = (outs[n] for n in model.graph.outputs)
    assert first.tolist() == [0] and second[0] < 0


def test_int8_params_are_sign_extended():
    model = _load("ex12_dense_int8_params")
    assert all(w.dtype == np.int32 for w in model.weights.values())
    assert min(int(w.min()) for w in model.weights.values()) < 0


def test_graph_operations_use_prefixed_names_and_heads_order():
    model = _load("ex03_gvc_nms")
    ops = [op.op for op in model.graph.operations]
    assert ops == ["external", "cvm_cvm_clip", "cvm_get_valid_counts", "cvm_non_max_suppression"]
    gvc = model.graph.operations[2]
    assert model.graph.outputs == [model.graph.operations[3].outputs["y"], gvc.outputs["valid_count"]]


@pytest.mark.parametrize("name", NAMES)
def test_model_api_bytes_match_runtime(name):
    """Input bytes as the runtime's model API takes them, output bytes as it writes them."""
    from nnefx.formats.cvm.api import input_from_bytes, pack_outputs

    model = _load(name)
    x = np.load(FIX / f"{name}.in.npy")
    in_type = BY_NAME[name]["model_api"]["in_type"] if isinstance(BY_NAME[name]["model_api"], dict) else None
    outputs = nnefx.Session(model, backend="fast").run(
        {"data": input_from_bytes(model, x.astype("<i1" if in_type == 1 else "<i4").tobytes())
         if in_type else x})
    heads = [outputs[n] for n in model.graph.outputs]
    api_file = FIX / f"{name}.api_out.bin"
    if not api_file.exists():  # ex03: the runtime's model API fails (heads not row-compatible)
        with pytest.raises(nnefx.NNEFXError, match="row counts"):
            pack_outputs(model, heads)
        return
    assert pack_outputs(model, heads) == api_file.read_bytes()


def test_model_api_argmax_packing_follows_the_runtime_loop():
    """"argmax": one int32 slot per row, heads in order, but only ceil(rows / Y) slots of each
    head are written (the runtime steps its row counter by Y); values compared as int8."""
    from nnefx.formats.cvm.api import pack_outputs

    model = _load(NAMES[0])
    model.extras["cvm"] = dict(model.extras["cvm"], postprocess="argmax")
    a = np.array([[1, 5, 5], [7, 0, 2], [0, 0, 9], [3, 3, 3], [2, 1, 0]], np.int32)    # 5 rows, Y = 3
    b = np.array([[300, 2], [-1, 4]], np.int32)     # 300 truncates to int8 44: still the maximum
    c = np.array([[255, 1]], np.int32)              # 255 truncates to -1: index 1 wins
    got = np.frombuffer(pack_outputs(model, [a, b, c]), "<i4")
    assert got.tolist() == [1, 0, 0, 0, 0, 0, 0, 1]
    before = np.full(8, -7, "<i4").tobytes()
    kept = np.frombuffer(pack_outputs(model, [a, b, c], buffer=before), "<i4")
    assert kept.tolist() == [1, 0, -7, -7, -7, 0, -7, 1]
    with pytest.raises(nnefx.NNEFXError, match="must be 32 bytes"):
        pack_outputs(model, [a, b, c], buffer=bytes(4))
