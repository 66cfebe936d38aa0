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


_DOC = """version 1.0;
extension nnefx_cvm;

graph net( data ) -> ( y )
{
    data = external<integer>(shape = [1, 2, 4, 4]);
    x = %s;
    w = variable<integer>(shape = [3, 2, 3, 3], label = 'w');
    c = cvm_conv2d(x, w, channels = 3, kernel_size = [3, 3], padding = [1, 1], use_bias = false);
    s = cvm_cvm_right_shift(c, precision = 8, shift_bit = 6);
    y = cvm_relu(s);
}
"""


def test_hand_written_integer_network_precision_and_cost():
    from nnefx.formats.cvm import infer_precisions
    from nnefx.formats.cvm.precision import data_precision

    graph = compile_document(_DOC % "cvm_cvm_clip(data, precision = 8)", file="net.nnef")
    w = np.random.default_rng(0).integers(-127, 128, (3, 2, 3, 3)).astype(np.int32)
    for _, tensor in graph.variables():
        tensor.data = w
    assert data_precision(w) == 8
    prec = infer_precisions(graph)
    assert prec["x"] == 8 and prec["c"] == 8 + 8 + 5 and prec["y"] == 8
    model = nnefx.Model(graph)
    # saturation clip is free; conv base (2*3*3)*3 per output element; 5 per element stored
    assert model_cost(model) == 5 * 32 + 5 * 54 + (54 + 5) * 48 + 2 * (1 + 5) * 48
    x = np.random.default_rng(1).integers(-300, 300, (1, 2, 4, 4)).astype(np.int32)
    a = nnefx.Session(model, backend="formal").run({"data": x})["y"]
    b = nnefx.Session(model, backend="fast").run({"data": x})["y"]
    np.testing.assert_array_equal(a, b)


def test_unsaturated_32_bit_input_to_conv_is_refused():
    from nnefx.formats.cvm import infer_precisions

    graph = compile_document(_DOC % "cvm_relu(data)", file="net.nnef")
    for _, tensor in graph.variables():
        tensor.data = np.ones((3, 2, 3, 3), np.int32)
    with pytest.raises(nnefx.NNEFXError, match="at most 8 bits") as info:
        infer_precisions(graph)
    assert info.value.location is not None and info.value.location.line == 9


def test_node_names_become_valid_unique_nnef_identifiers():
    doc = json.loads((FIX / "ex04_reduce_chain.json").read_text())
    doc["nodes"][1]["name"] = "graph"      # NNEF keyword
    doc["nodes"][2]["name"] = "1x"         # starts with a digit
    doc["nodes"][3]["name"] = "data"       # clashes with the input
    model = nnefx.load("9model.json", json_text=json.dumps(doc))
    names = [op.output_names()[0] for op in model.graph.operations]
    assert len(set(names)) == len(names)
    graph = compile_document(print_graph(model.graph))
    out = nnefx.Session(nnefx.Model(graph), backend="fast").run(
        {"data": np.load(FIX / "ex04_reduce_chain.in.npy")})
    np.testing.assert_array_equal(out[graph.outputs[0]], np.load(FIX / "ex04_reduce_chain.out.npy"))


def test_cvm_where_is_usable_from_an_nnef_document():
    """Its result is not named like its third parameter (which NNEF forbids)."""
    import numpy as np

    import nnefx
    from nnefx.semantics.frontend import compile_document

    g = compile_document("""version 1.0;
extension nnefx_cvm;
graph G(c, a, b) -> (o) {
  c = external<integer>(shape = [2, 3]);
  a = external<integer>(shape = [2, 3]);
  b = external<integer>(shape = [2, 3]);
  o = cvm_where(c, a, b);
}""")
    c = np.array([[1, 0, 2], [0, 0, -1]], np.int32)
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = -a
    out = nnefx.Session(g).run({"c": c, "a": a, "b": b})["o"]
    np.testing.assert_array_equal(out, np.where(c != 0, a, b))
