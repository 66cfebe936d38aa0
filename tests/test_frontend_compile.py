"""compile_document end to end: the seeds' examples, graph.quant, printing and round trips
(also against the official ``nnef`` parser when it is installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.graph import Graph
from nnefx.semantics.frontend import compile_document
from nnefx.syntax.printer import print_graph, print_quant

FIXTURES = Path(__file__).parent / "fixtures" / "nnef"


def load(name: str) -> str:
    return (FIXTURES / name).read_text()


def signature(g: Graph):
    return ([(op.op, op.inputs, op.outputs, op.attribs, op.dtype) for op in g.operations],
            {n: (t.dtype, t.shape, t.quant) for n, t in g.tensors.items()}, g.inputs, g.outputs)


def test_seed_barfoo():
    g = compile_document(load("seed_barfoo.nnef"), file="seed_barfoo.nnef")
    assert [op.op for op in g.operations] == ["external", "mul", "copy", "copy", "box"]
    assert g.operations[1].inputs == {"x": "input", "y": 2.0}
    assert g.operations[4].attribs["size"] == [1, 5]
    assert g.tensors["output"].shape == (1, 10)


def test_seed_barfoo_literal_form_violates_the_graph_identifier_rule():
    text = load("seed_barfoo.nnef").replace("intermediate, [extra1, extra2]", "intermediate, extra")
    with pytest.raises(NNEFXError) as info:
        compile_document(text, file="x.nnef")
    assert (info.value.location.line, info.value.location.column) == (21, 19)
    assert "single tensors" in info.value.message


def test_seed_foobar_lazy_branch():
    g = compile_document(load("seed_foobar.nnef"))
    assert [(op.op, op.output_names()) for op in g.operations] == [
        ("external", ["input"]), ("relu", ["hidden"]), ("mul", ["output"])]
    assert g.operations[2].inputs["y"] == pytest.approx(3.14)


def test_seed_sum_of_and_comprehension():
    g = compile_document(load("seed_sum_of.nnef"))
    # c = [4, -10, 18]; positive = [4, 18]; sum = 22
    assert g.operations[-1].op == "mul" and g.operations[-1].inputs["y"] == 22.0


def test_seed_variable_label():
    g = compile_document(load("seed_variable_label.nnef"))
    var = g.operations[1]
    assert var.op == "variable" and var.attribs["label"] == "block1/conv1/weights"
    assert var.output_names() == ["variable42"]


def test_final_fixture_with_quant():
    g = compile_document(load("final_fc.nnef"), quant=load("final_fc.quant"))
    assert g.tensors["fc"].quant == {"op_name": "zero_point_linear_quantize", "zero_point": 0,
                                     "scale": [[0.5, 0.25, 0.5, 0.25, 0.5]], "bits": 8, "signed": True,
                                     "symmetric": False}
    assert g.tensors["output"].quant == {"op_name": "linear_quantize", "min": 0.0, "max": 1.0, "bits": 8}
    assert g.tensors["w"].quant is None
    text = print_quant(g)
    g2 = compile_document(load("final_fc.nnef"), quant=text)
    assert signature(g2) == signature(g)


@pytest.mark.parametrize("quant,words,line", [
    ('"nope": linear_quantize(min = 0.0, max = 1.0, bits = 8);', "does not define", 1),
    ('"fc": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n"fc": linear_quantize(min = 0.0, max = 1.0, bits = 8);',
     "quantized twice", 2),
    ('"fc": bogus_quantize(bits = 8);', "unknown quantization", 1),
    ('"fc": linear_quantize(min = 0.0, max = 1.0);', "needs argument 'bits'", 1),
    ('"fc": linear_quantize(x = 0.0, min = 0.0, max = 1.0, bits = 8);', "no quantization parameter", 1),
    ('"fc": linear_quantize(min = 0.0, max = 1.0, bits = 8.5);', "expects integer", 1),
    ('"fc": linear_quantize(min = [[0.0], [0.0, 1.0]], max = 1.0, bits = 8);', "rectangular", 1),
    ('\n"fc": linear_quantize(min = [[0.0, 0.0]], max = 1.0, bits = 8);', "does not broadcast", 2),
])
def test_quant_errors(quant, words, line):
    with pytest.raises(NNEFXError) as info:
        compile_document(load("final_fc.nnef"), quant=quant, quant_file="graph.quant")
    assert words in info.value.message
    assert info.value.location.line == line and info.value.location.file == "graph.quant"


@pytest.mark.parametrize("name,kw", [("final_fc.nnef", {}), ("final_fc.nnef", {"lowered": ["linear", "softmax"]}),
                                     ("final_fc.nnef", {"expand_all": True}), ("seed_barfoo.nnef", {}),
                                     ("seed_sum_of.nnef", {}), ("final_compositional.nnef", {}),
                                     ("seed_variable_label.nnef", {})])
def test_print_round_trip(name, kw):
    g = compile_document(load(name), **kw)
    text = print_graph(g)
    g2 = compile_document(text)
    assert signature(g2) == signature(g)
    assert print_graph(g2) == text
    prov = print_graph(g, dialect="provisional")
    assert signature(compile_document(prov)) == signature(g)


def test_printer_formats():
    text = ("version 1.0;\ngraph G( x ) -> ( y, z )\n{\n    x = external(shape = [2, 2]);\n"
            "    y = pad(x, padding = [(0, 1), (-1, 0)], border = 'reflect');\n    z = add(x, -1.0e-07);\n}\n")
    g = compile_document(text)
    out = print_graph(g)
    assert "padding = [(0, 1), (-1, 0)]" in out and "border = 'reflect'" in out
    assert "add(x, -1.0e-07)" in out
    assert out.startswith("version 1.0;\n")
    try:
        import nnef
    except ImportError:
        nnef = None
    if nnef is not None:  # negative literals as the official parser reads them
        parsed = nnef.parse_string(out)
        assert parsed.operations[1].attribs["padding"] == [(0, 1), (-1, 0)]
    g.operations[-1].inputs["y"] = float("nan")
    with pytest.raises(NNEFXError):
        print_graph(g)


def test_official_parser_accepts_printed_graphs():
    nnef = pytest.importorskip("nnef")
    for name in ("final_fc.nnef", "seed_barfoo.nnef", "final_compositional.nnef"):
        g = compile_document(load(name), expand_all=True)
        parsed = nnef.parse_string(print_graph(g))
        nnef.infer_shapes(parsed)
        assert {n: tuple(t.shape) for n, t in parsed.tensors.items()} == {n: t.shape for n, t in g.tensors.items()}
        assert [op.name for op in parsed.operations] == [op.op for op in g.operations]


def test_official_parser_agrees_on_lowering():
    nnef = pytest.importorskip("nnef")
    text = load("final_compositional.nnef")
    ours = compile_document(text)
    theirs = nnef.parse_string(text, lowered=["scale_shift", "ident"])
    assert [(op.name, dict(op.inputs), dict(op.outputs), dict(op.attribs), op.dtype) for op in theirs.operations] == \
        [(op.op, op.inputs, op.outputs, op.attribs, op.dtype) for op in ours.operations]


def test_errors_carry_the_file_name():
    with pytest.raises(NNEFXError) as info:
        compile_document("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(z);\n}\n",
                         file="net/graph.nnef")
    assert str(info.value) == "net/graph.nnef:5:14: error: undefined identifier 'z' (identifiers must be assigned before use)"


def test_printer_refuses_what_the_dialect_cannot_say():
    g = compile_document("version 1.0\ngraph G( yield ) -> ( y )\n{\n  yield = external(shape = [1])\n  y = relu(yield)\n}\n")
    with pytest.raises(NNEFXError) as info:
        print_graph(g)
    assert "keyword" in info.value.message
    assert "yield = external(shape = [1])" in print_graph(g, dialect="provisional")
    g = compile_document("version 1.0;\ngraph G( x ) -> ( x2 )\n{\n    x = external<integer>(shape = [1]);\n"
                         "    x2 = copy(x);\n}\n")
    with pytest.raises(NNEFXError):
        print_graph(g, dialect="provisional")
    assert "external<integer>(shape = [1])" in print_graph(g)


def test_extension_operations_print_their_extension():
    text = "version 1.0;\nextension nnefx_cvm;\ngraph G( x ) -> ( y )\n{\n    x = external<integer>(shape = [4]);\n" \
           "    y = cvm_relu(x);\n}\n"
    g = compile_document(text)
    out = print_graph(g)
    assert "extension nnefx_cvm;" in out
    assert signature(compile_document(out)) == signature(g)
