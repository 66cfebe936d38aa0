"""Semantic rules of seed 001 §3.3 (and the final-dialect equivalents): each violation is
an NNEFXError at the offending token.  ``@@`` in a test document marks the expected spot."""

from __future__ import annotations

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.semantics.frontend import compile_document

HDR = "version 1.0;\nextension KHR_enable_fragment_definitions;\nextension KHR_enable_operator_expressions;\n"


def expect_error(marked: str, *words: str, **kw) -> NNEFXError:
    index = marked.index("@@")
    text = marked.replace("@@", "", 1)
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    with pytest.raises(NNEFXError) as info:
        compile_document(text, file="doc.nnef", shapes=False, **kw)
    e = info.value
    assert e.location is not None and e.location.file == "doc.nnef"
    assert (e.location.line, e.location.column) == (line, col), f"{e} (expected {line}:{col})"
    for w in words:
        assert w in e.message, e.message
    return e


def graph(body: str, inputs: str = "x", outputs: str = "y") -> str:
    return f"graph G( {inputs} ) -> ( {outputs} )\n{{\n    x = external(shape = [2, 3]);\n{body}\n}}\n"


# --- declarations ---------------------------------------------------------------------------

def test_duplicate_fragment_names():
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
                 "@@fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n" + graph("    y = f(x);"),
                 "already defined")
    expect_error(HDR + "@@fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n" + graph("    y = relu(x);"),
                 "standard operation")


def test_duplicate_parameter_and_result_names():
    expect_error(HDR + "fragment f( x: tensor<scalar>, @@x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
                 + graph("    y = f(x, x);"), "declared twice")
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( @@x: tensor<scalar> );\n" + graph("    y = f(x);"),
                 "reuses")


def test_default_value_type_must_match():
    expect_error(HDR + "fragment f( x: tensor<scalar>, n: integer = @@1.5 ) -> ( y: tensor<scalar> );\n"
                 + graph("    y = f(x);"), "scalar", "integer")


def test_tensor_parameters_come_first_in_final():
    expect_error(HDR + "fragment f( n: integer, @@x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
                 + graph("    y = f(x, n = 1);"), "tensor parameter")


def test_generic_declaration_rules():
    expect_error(HDR + "@@fragment f<?>( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n" + graph("    y = f(x);"),
                 "uses '?' in no")
    expect_error(HDR + "@@fragment f( x: tensor<?> ) -> ( y: tensor<?> );\n" + graph("    y = f(x);"),
                 "not declared generic")


def test_unknown_extension():
    expect_error("version 1.0;\n@@extension KHR_bogus;\n" + graph("    y = relu(x);"), "unknown extension")


# --- invocations ----------------------------------------------------------------------------

@pytest.mark.parametrize("call,words", [
    ("@@nonexistent(x)", ("undefined operation",)),
    ("relu(x, @@x)", ("too many arguments",)),
    ("@@softmax(axes = [1])", ("missing argument", "'x'")),
    ("conv(x, filter = x, @@x)", ("positional argument after a named",)),
    ("relu(@@y = x)", ("no parameter named 'y'",)),
    ("sum_reduce(x, axes = [1], @@axes = [1])", ("more than once",)),
    ("softmax(x, @@x = x)", ("more than once",)),
    ("softmax(x, @@[1])", ("must be named",)),
    ("add(x, @@1)", ("expects tensor<scalar>", "integer")),
    ("add(x, @@true)", ("expects tensor<scalar>", "logical")),
    ("softmax(x, axes = @@[1.0])", ("expects integer[]",)),
    ("@@select(x > 1.0, constant<integer>(shape = [1], value = [1]), x)", ("ambiguous",)),
    ("add(x, @@constant(shape = [2], value = [1, 2]))", ("expects scalar[]", "integer[]")),
    ("@@relu<scalar>(x)", ("not generic",)),
])
def test_invocation_rules(call, words):
    text = HDR + graph(f"    y = {call};")
    # the constant case points at the value argument inside the nested call
    if "constant(shape = [2]" in call:
        text = text.replace("@@constant(shape = [2], value = [1, 2])", "constant(shape = [2], value = @@[1, 2])")
    expect_error(text, *words)


def test_external_and_variable_only_in_graph():
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = @@external(shape = [1]);\n}\n"
                 + graph("    y = f(x);"), "only be used in the graph")


# --- assignments and identifiers ------------------------------------------------------------

def test_parameters_are_read_only():
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    @@x = relu(x);\n    y = x;\n}\n"
                 + graph("    y = f(x);"), "read-only")


def test_results_assigned_exactly_once():
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( @@y: tensor<scalar>, z: tensor<scalar> )\n{\n    z = relu(x);\n}\n"
                 + graph("    y, w = f(x);"), "never assigned")
    expect_error(HDR + "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = relu(x);\n    @@y = x;\n}\n"
                 + graph("    y = f(x);"), "more than once")


def test_define_before_use_and_single_assignment():
    expect_error(HDR + graph("    y = add(x, @@t);\n    t = relu(x);"), "undefined identifier 't'")
    expect_error(HDR + graph("    y = relu(x);\n    @@y = relu(x);"), "more than once")


def test_graph_inputs_and_externals_correspond():
    expect_error(HDR + "graph G( x, @@z ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(x);\n}\n",
                 "never defined")
    expect_error(HDR + "graph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    @@z = external(shape = [1]);\n"
                 "    y = add(x, z);\n}\n", "not an input")
    expect_error(HDR + "graph G( x ) -> ( y )\n{\n    @@x = variable(shape = [1], label = 'a');\n    y = relu(x);\n}\n",
                 "must be defined by an 'external'")


def test_graph_outputs_must_be_assigned():
    expect_error(HDR + "graph G( x ) -> ( @@y )\n{\n    x = external(shape = [1]);\n    z = relu(x);\n}\n",
                 "never assigned")


def test_graph_identifiers_are_single_tensors():
    expect_error(HDR + graph("    @@n = 3;\n    y = relu(x);"), "single tensors")
    expect_error(HDR + graph("    y = relu(x);\n    @@ys = copy_n(x, times = 2);", outputs="y"), "single tensors")


def test_tuple_unpacking_arity():
    expect_error(HDR + graph("    @@y, z, w = moments(x, axes = [1]);"), "unpacks 3")


# --- expressions ----------------------------------------------------------------------------

@pytest.mark.parametrize("expr,words", [
    ("@@1.0 + 2", ("no implicit integer/scalar",)),
    ("[1, @@2.0]", ("incompatible",)),
    ("1 if @@1 else 2", ("must be a logical",)),
    ("@@1 < 'a'", ("two integers or two scalars",)),
    ("@@3[0]", ("only arrays",)),
    ("[1, 2][@@0.5]", ("must be integers",)),
    ("length_of(@@3)", ("array or a string",)),
    ("integer(@@[1])", ("non-tensor primitive",)),
    ("@@!1", ("logical",)),
    ("@@true && 1", ("two logical",)),
    ("(1, 2)[@@2]", ("out of range",)),
])
def test_expression_type_errors(expr, words):
    marked = HDR + "fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    v = " + expr + ";\n    y = x;\n}\n" \
        + graph("    y = f(x);")
    expect_error(marked, *words)


def test_operator_on_tensor_checks_fragment_types():
    expect_error(HDR + graph("    y = x + (@@x > 1.0);"), "does not convert", "tensor<logical>")


def test_logical_tensor_cannot_stand_for_scalar():
    expect_error(HDR + graph("    c = gt(x, 0.0);\n    y = relu(@@c);"), "expects tensor<scalar>", "tensor<logical>")


def test_update_needs_variable_identifier():
    expect_error(HDR + graph("    v = variable(shape = [2, 3], label = 'v');\n    y = update(@@relu(v), x);"),
                 "identifier of a variable")


# --- provisional leniencies and rules -------------------------------------------------------

def test_provisional_rules_apply_too():
    expect_error("version 1.0\nfragment f( x: tensor ) -> ( y: tensor )\n{\n  @@x = relu(x)\n  y = x\n}\n"
                 "graph G( x ) -> ( y )\n{\n  x = external(shape = [1])\n  y = f(x)\n}\n", "read-only")
    expect_error("version 1.0\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [1])\n  y = matmul(x, x, @@transposeA = true)\n}\n",
                 "no parameter named 'transposeA'")


def test_graph_name_cannot_be_input_and_output():
    expect_error(HDR + "graph G( x ) -> ( @@x )\n{\n    x = external(shape = [1]);\n}\n", "both an input and an output")


def test_update_target_must_come_from_variable():
    expect_error(HDR + graph("    y = update(@@x, x);"), "introduced by 'variable'")


def test_graph_only_operations_inside_fragments_per_dialect():
    # final (1.0.1 and later): external, variable and update are graph-body operations only
    for op, args in (("variable", "shape = [1], label = 'w'"), ("external", "shape = [1]")):
        expect_error(HDR + f"fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{{\n"
                     f"    w = @@{op}<scalar>({args});\n    y = add(x, w);\n}}\n" + graph("    y = f(x);"),
                     op, "graph body")
    # the provisional seed (001 §3.3) forbids only 'external' there; a fragment may make a variable
    prov_graph = "graph G( x ) -> ( y )\n{\n  x = external(shape = [2])\n  y = f(x)\n}\n"
    expect_error("version 1.0\nfragment f( x: tensor ) -> ( y: tensor )\n{\n  w = @@external(shape = [2])\n"
                 "  y = add(x, w)\n}\n" + prov_graph, "external", "graph body")
    g = compile_document("version 1.0\nfragment f( x: tensor ) -> ( y: tensor )\n{\n"
                         "  w = variable(shape = [2], label = 'w')\n  y = add(x, w)\n}\n" + prov_graph)
    assert [(op.op, op.attribs.get("label")) for op in g.operations if op.op == "variable"] == [("variable", "w")]
