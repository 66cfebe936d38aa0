"""Writing CVM models: every example survives load -> save -> load with the same outputs,
cost and output precision; NNEF integer networks convert to CVM; non-integer graphs are
refused with a located error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx.cli import main
from nnefx.formats.cvm import model_cost

FIX = Path(__file__).parent / "fixtures" / "cvm"
INDEX = {e["name"]: e for e in json.loads((FIX / "index.json").read_text())}


def _expected(name):
    n = len(INDEX[name]["heads"])
    files = [f"{name}.out.npy"] if n == 1 else [f"{name}.out{i}.npy" for i in range(n)]
    return [np.load(FIX / f) for f in files]


def _outputs(model, name):
    out = nnefx.Session(model, backend="fast").run({"data": np.load(FIX / f"{name}.in.npy")})
    return [out[n] for n in model.graph.outputs]


@pytest.mark.parametrize("name", sorted(INDEX))
def test_cvm_save_load_roundtrip(name, tmp_path):
    model = nnefx.load(str(FIX / f"{name}.json"))
    target = tmp_path / "again.json"
    nnefx.save(model, target)
    assert (tmp_path / "again.params").exists()
    again = nnefx.load(str(target))
    for got, want in zip(_outputs(again, name), _expected(name), strict=True):
        np.testing.assert_array_equal(got, want)
    assert model_cost(again) == INDEX[name]["ops"]
    assert again.extras["cvm"]["output_precision"] == INDEX[name]["output_precision"]


@pytest.mark.parametrize("name", ["ex01_conv_pool_dense", "ex03_gvc_nms", "ex07_lut_take"])
def test_nnef_folder_converts_to_cvm_with_the_cli(name, tmp_path, capsys):
    folder = tmp_path / "nnef"
    assert main(["convert", str(FIX / f"{name}.json"), str(folder)]) == 0
    target = tmp_path / "back.json"
    assert main(["convert", str(folder), str(target)]) == 0
    again = nnefx.load(str(target))
    for got, want in zip(_outputs(again, name), _expected(name), strict=True):
        np.testing.assert_array_equal(got, want)
    assert model_cost(again) == INDEX[name]["ops"]


def test_graph_without_cvm_counterpart_is_refused(tmp_path):
    from nnefx.semantics.frontend import compile_document

    graph = compile_document("version 1.0;\ngraph g( x ) -> ( y )\n{\n"
                             "    x = external<scalar>(shape = [2]);\n    y = relu(x);\n}\n", file="g.nnef")
    with pytest.raises(nnefx.NNEFXError, match="'relu' has no CVM counterpart") as info:
        nnefx.save(nnefx.Model(graph), tmp_path / "g.json")
    assert info.value.location.line == 5
    assert not (tmp_path / "g.json").exists()
