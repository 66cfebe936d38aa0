"""Declaration-only fragments (custom primitives, ``KHR_enable_fragment_definitions``).

A document may declare an operation without a body and invoke it.  ``nnefx check`` accepts
it, its results' shapes stay unknown unless the caller registers a shape function (the
official tools' ``custom_shapes`` convention), saving writes the declaration back, and the
runtime refuses it with a located "no kernel" error.  Cross-checked against the official
``nnef`` package where it has a counterpart.
"""

from __future__ import annotations

import contextlib

import pytest

import nnefx
from nnefx import Graph, NNEFXError, Operation, Tensor
from nnefx.cli import main
from nnefx.semantics import fastpath
from nnefx.semantics.frontend import compile_document
from nnefx.semantics.shapes import infer_shapes
from nnefx.syntax.printer import print_graph

DOC = """version 1.0;
extension KHR_enable_fragment_definitions;
fragment shuffle<?>( input: tensor<?>, groups: integer = 2, scale: scalar[] = [1.0, 2.0] ) -> ( output: tensor<?> );
fragment halves( input: tensor<scalar> ) -> ( a: tensor<scalar>, b: tensor<scalar> );
graph Net( input ) -> ( output, low )
{
    input = external(shape = [1, 4, 8, 8]);
    r = relu(input);
    shuffled = shuffle(r, groups = 4);
    output = sigmoid(shuffled);
    (low, high) = halves(r);
}
"""


def shuffle_shape(input: list[int], groups: int, scale: list[float]) -> list[int]:
    assert input[1] % groups == 0, f"channels ({input[1]}) not divisible by groups ({groups})"
    return input


def halves_shape(input: list[int]) -> tuple[list[int], list[int]]:
    return [input[0], input[1] // 2, *input[2:]], [input[0], input[1] - input[1] // 2, *input[2:]]


CUSTOM = {"shuffle": shuffle_shape, "halves": halves_shape}


def shapes(graph: Graph) -> dict[str, tuple | None]:
    return {name: t.shape for name, t in graph.tensors.items()}


@pytest.mark.parametrize("fast", [True, False])
def test_accepted_with_unknown_result_shapes(fast):
    with fastpath.disabled() if not fast else contextlib.nullcontext():
        graph = compile_document(DOC, file="net.nnef")
    got = shapes(graph)
    assert got["r"] == (1, 4, 8, 8)
    assert got["shuffled"] is None and got["output"] is None  # unknown, propagated downstream
    assert got["low"] is None and got["high"] is None
    assert set(graph.declarations) == {"shuffle", "halves"}
    shuffle = next(op for op in graph.operations if op.op == "shuffle")
    assert shuffle.attribs == {"groups": 4, "scale": [1.0, 2.0]} and shuffle.dtype == "scalar"


def test_user_shape_functions_give_the_shapes():
    graph = compile_document(DOC, file="net.nnef", custom_shapes=CUSTOM)
    got = shapes(graph)
    assert got["shuffled"] == got["output"] == (1, 4, 8, 8)
    assert got["low"] == (1, 2, 8, 8) and got["high"] == (1, 2, 8, 8)


def test_same_shapes_as_the_official_custom_shapes():
    nnef = pytest.importorskip("nnef")
    theirs = nnef.parse_string(DOC)
    nnef.infer_shapes(theirs, custom_shapes=CUSTOM)
    ours = compile_document(DOC, custom_shapes=CUSTOM)
    for name, t in theirs.tensors.items():
        assert list(ours.tensors[name].shape) == t.shape, name


@pytest.mark.parametrize("custom, message", [
    ({"shuffle": lambda input, groups, scale: 1 / 0}, "shape function of 'shuffle' rejects its arguments"),
    ({"shuffle": lambda input, groups, scale: shuffle_shape(input, 3, scale)}, "not divisible by groups"),
    ({"shuffle": lambda input, groups, scale: (input, input)}, "returned 2 shapes for 1 results"),
    ({"shuffle": lambda input, groups, scale: [1, 0, 3]}, "not a list of positive extents"),
    ({"shuffle": lambda input, groups, scale: "abc"}, "not a list of positive extents"),
])
def test_a_failing_shape_function_is_reported_at_the_invocation(custom, message):
    with pytest.raises(NNEFXError, match=message) as info:
        compile_document(DOC, file="net.nnef", custom_shapes=custom)
    loc = info.value.location
    assert (loc.file, loc.line, loc.column) == ("net.nnef", 9, 16)


def test_runtime_refuses_with_a_located_no_kernel_error(tmp_path):
    path = tmp_path / "net.nnef"
    path.write_text(DOC)
    model = nnefx.load(str(path), custom_shapes=CUSTOM)
    with pytest.raises(NNEFXError, match="no kernel for 'shuffle'") as info:
        nnefx.Session(model)
    assert (info.value.location.line, info.value.location.column) == (9, 16)


def test_cli_check_accepts_and_run_refuses(tmp_path, capsys):
    path = tmp_path / "net.nnef"
    path.write_text(DOC)
    assert main(["check", str(path)]) == 0
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:9:16: error: no kernel for 'shuffle'" in err
    assert "Traceback" not in err


def test_saved_document_declares_what_it_invokes_and_reads_back(tmp_path):
    graph = compile_document(DOC, custom_shapes=CUSTOM)
    text = print_graph(graph)
    assert "extension KHR_enable_fragment_definitions;" in text
    assert ("fragment shuffle<?>( input: tensor<?>, groups: integer = 2, scale: scalar[] = [1.0, 2.0] ) "
            "-> ( output: tensor<?> );") in text
    again = compile_document(text, custom_shapes=CUSTOM)
    assert shapes(again) == shapes(graph) and again.declarations == graph.declarations
    nnef = pytest.importorskip("nnef")
    theirs = nnef.parse_string(text)                       # the official parser reads it too
    nnef.infer_shapes(theirs, custom_shapes=CUSTOM)
    assert theirs.tensors["low"].shape == [1, 2, 8, 8]


def test_printing_declarations_in_the_provisional_dialect_is_refused():
    graph = compile_document(DOC)
    with pytest.raises(NNEFXError, match="final dialect only"):
        print_graph(graph, dialect="provisional")


def test_undeclared_operations_are_still_unsupported():
    graph = Graph("g", ["x"], ["y"], {"x": Tensor("x", shape=(2,)), "y": Tensor("y")}, [
        Operation("external", {}, {"output": "x"}, {"shape": [2]}, "scalar"),
        Operation("mystery", {"input": "x"}, {"output": "y"}),
    ])
    with pytest.raises(NNEFXError, match="operation 'mystery' is not supported"):
        infer_shapes(graph)


def test_body_less_fragment_needs_the_extension():
    with pytest.raises(NNEFXError, match="fragment"):
        compile_document(DOC.replace("extension KHR_enable_fragment_definitions;\n", ""))
