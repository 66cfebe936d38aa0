"""Integer networks as NNEF documents (nnefx extension ``nnefx_cvm``): every CVM example
printed as NNEF, compiled back by the front-end, saved as a model folder and reloaded runs to
the runtime's outputs, with the same cost and output precision."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx.formats.cvm import model_cost, model_precisions
from nnefx.semantics.frontend import compile_document
from nnefx.syntax.printer import print_graph

FIX = Path(__file__).parent / "fixtures" / "cvm"
INDEX = {e["name"]: e for e in json.loads((FIX / "index.json").read_text())}


def _expected(name):
    n = len(INDEX[name]["heads"])
    files = [f"{name}.out.npy"] if n == 1 else [f"{name}.out{i}.npy" for i in range(n)]
    return [np.load(FIX / f) for f in files]


def _check_runs(model, name, backend="fast"):
    out = nnefx.Session(model, backend=backend).run({"data": np.load(FIX / f"{name}.in.npy")})
    for tensor, expected in zip(model.graph.outputs, _expected(name), strict=True):
        np.testing.assert_array_equal(out[tensor], expected)


@pytest.mark.parametrize("name", sorted(INDEX))
def test_printed_nnef_compiles_back_and_runs(name):
    model = nnefx.load(str(FIX / f"{name}.json"), params=str(FIX / f"{name}.params"))
    text = print_graph(model.graph)
    assert "extension nnefx_cvm;" in text and "external<integer>" in text
    graph = compile_document(text, file=f"{name}.nnef")
    assert [op.op for op in graph.operations] == [op.op for op in model.graph.operations]
    for op, tensor in graph.variables():
        tensor.data = model.weights[op.attribs["label"]]
    again = nnefx.Model(graph, extras={"storage": {"integer": "int32"}})
    _check_runs(again, name, "formal")
    assert model_cost(again) == INDEX[name]["ops"]


@pytest.mark.parametrize("name", sorted(INDEX))
def test_saved_model_folder_reloads_and_runs(name, tmp_path):
    model = nnefx.load(str(FIX / f"{name}.json"), params=str(FIX / f"{name}.params"))
    nnefx.save(model, tmp_path / name)
    again = nnefx.load(tmp_path / name)
    _check_runs(again, name)
    prec = model_precisions(again)
    assert max(prec[n] for n in again.graph.outputs) == INDEX[name]["output_precision"]
