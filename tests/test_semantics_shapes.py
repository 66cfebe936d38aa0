"""Shape and data-type propagation, unspecified input extents, shape-rule errors."""

from __future__ import annotations

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.semantics.frontend import compile_document
from nnefx.semantics.shapes import infer_shapes

PROV = """version 1.0
graph G( x ) -> ( y, z )
{
    x = external(shape = [0, 10])
    w = variable(shape = [4, 10], label = 'w')
    y = linear(x, w)
    z = gt(y, 0.0)
}
"""


def test_unspecified_extents_stay_unknown_until_given():
    g = compile_document(PROV)
    assert g.tensors["x"].shape == (None, 10) and g.tensors["w"].shape == (4, 10)
    assert g.tensors["z"].dtype == "logical"
    infer_shapes(g, {"x": (3, 10)})
    assert g.tensors["y"].shape == (3, 4) and g.tensors["z"].shape == (3, 4)


def test_given_shapes_are_checked_then():
    g = compile_document(PROV)
    with pytest.raises(NNEFXError) as info:
        infer_shapes(g, {"x": (3, 9)})
    assert info.value.location.line == 6
    with pytest.raises(NNEFXError) as info:
        infer_shapes(g, {"x": (3, 10, 1)})
    assert "rank" in info.value.message
    with pytest.raises(NNEFXError) as info:
        infer_shapes(g, {"nope": (1,)})
    assert "which is not an input of graph" in info.value.message


def test_input_shapes_through_compile_document():
    g = compile_document(PROV, input_shapes={"x": (2, 10)})
    assert g.tensors["z"].shape == (2, 4)


def test_shape_rule_errors_point_at_the_operation():
    text = "version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [2, 3]);\n    y = add(x, x);\n" \
           "    z = matmul(x, x);\n}\n".replace("-> ( y )", "-> ( z )")
    with pytest.raises(NNEFXError) as info:
        compile_document(text, file="m.nnef")
    assert (info.value.location.file, info.value.location.line, info.value.location.column) == ("m.nnef", 6, 9)
    assert "matmul" in info.value.message


def test_variable_shape_must_be_known_and_positive():
    text = "version 1.0\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [1])\n  y = variable(shape = [0, 2], label = 'v')\n}\n"
    with pytest.raises(NNEFXError) as info:
        compile_document(text)
    assert "positive" in info.value.message and info.value.location.line == 5


def test_constant_value_count_checked():
    text = "version 1.0;\ngraph G( x ) -> ( c )\n{\n    x = external(shape = [1]);\n    c = constant(shape = [2, 2], value = [1.0, 2.0]);\n}\n"
    with pytest.raises(NNEFXError) as info:
        compile_document(text)
    assert "needs 1 or 4 values" in info.value.message


def test_custom_primitive_results_have_unknown_shapes():
    text = ("version 1.0;\nextension KHR_enable_fragment_definitions;\n"
            "fragment mystery( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
            "graph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = mystery(x);\n}\n")
    g = compile_document(text)
    assert g.tensors["x"].shape == (1,) and g.tensors["y"].shape is None
    g = compile_document(text, shapes=False)
    assert g.operations[-1].op == "mystery" and g.tensors["y"].shape is None


def test_update_keeps_variable_shape():
    text = ("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n"
            "    v = variable(shape = [2], label = 'state');\n    y = add(v, x);\n    u = update(v, y);\n}\n")
    g = compile_document(text)
    assert g.operations[-1].op == "update" and g.operations[-1].inputs == {"variable": "v", "value": "y"}
    assert g.tensors["u"].shape == (2,)


@pytest.mark.parametrize("label,ok", [("conv1/filter", True), ("a-b_c.d\\\\e", True), ("", False), ("a b", False),
                                      ("w:1", False)])
def test_variable_labels(label, ok):
    text = ("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n"
            f"    v = variable(shape = [1], label = '{label}');\n    y = add(x, v);\n}}\n")
    if ok:
        compile_document(text)
    else:
        with pytest.raises(NNEFXError) as info:
            compile_document(text)
        assert info.value.location.line == 5 and "label" in info.value.message


def test_shared_labels_need_equal_shapes():
    text = ("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n"
            "    v = variable(shape = [2], label = 'w');\n    u = variable(shape = [2], label = 'W');\n"
            "    y = add(v, u);\n}\n")
    compile_document(text)
    with pytest.raises(NNEFXError) as info:
        compile_document(text.replace("shape = [2], label = 'W'", "shape = [1, 2], label = 'W'"))
    assert info.value.location.line == 6 and "share data" in info.value.message
