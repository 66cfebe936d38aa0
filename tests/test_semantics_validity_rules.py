"""Generic deduction inside generic fragments and four validity rules, each with its
accepted neighbours.

Rules (NNEF spec §2.2 flat grammar, §3.3 invocations and assignments, §4 types; the
provisional 1.0 chapter's §3.2.4, §3.3.1 and §3.3.2 for the provisional dialect):

1. a flat body (the provisional graph body; a final body without
   ``KHR_enable_operator_expressions``) passes identifiers and literals to invocations,
   never other invocations;
2. only tensor parameters may be bound by position;
3. an invocation with several results is unpacked into as many identifiers;
4. no implicit conversion turns an ``extent`` (integer) into a ``scalar``.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnefx import NNEFXError
from nnefx.graph import Model
from nnefx.runtime.session import Session
from nnefx.semantics.frontend import compile_document

FINAL = "version 1.0;\n"
FRAGMENTS = "version 1.0;\nextension KHR_enable_fragment_definitions;\n"
OPERATORS = "version 1.0;\nextension KHR_enable_operator_expressions;\n"
BOTH = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
PROV = "version 1.0\n"


def located(text: str, message: str) -> tuple[int, int]:
    with pytest.raises(NNEFXError, match=message) as info:
        compile_document(text, file="t.nnef")
    loc = info.value.location
    assert loc is not None and loc.file == "t.nnef" and loc.line is not None
    return loc.line, loc.column


# ---------------------------------------------------------------- generic deduction

CAT = """fragment cat2<?>( a: tensor<?>, b: tensor<?> ) -> ( y: tensor<?> )
{
    y = concat([a, b], axis = 1);
}
"""


@pytest.mark.parametrize("dtype, value", [("scalar", 1.5), ("integer", 7), ("logical", True)])
def test_generic_parameter_is_deduced_from_the_enclosing_fragments_type(dtype, value):
    text = FRAGMENTS + CAT + (f"graph G( x ) -> ( y )\n{{\n    x = external<{dtype}>(shape = [2, 1]);\n"
                              "    y = cat2(x, x);\n}\n")
    g = compile_document(text)
    concat = g.operations[-1]
    assert concat.op == "concat" and concat.dtype == dtype and g.tensors["y"].dtype == dtype
    assert g.tensors["y"].shape == (2, 2)
    x = np.full((2, 1), value)
    out = Session(Model(g)).run({"x": x})["y"]
    np.testing.assert_array_equal(out, np.concatenate([x, x], axis=1))


@pytest.mark.parametrize("body", [
    "y = stack(a, axis = 0);",                    # tensor<?>[] parameter passed through
    "y = concat([a[0], a[1]], axis = 0);",        # items of a tensor<?>[] parameter
    "y = concat<?>(a, axis = 0);",                # explicit forwarding, as before
])
def test_other_generic_forms_are_deduced(body):
    text = BOTH + (f"fragment f<?>( a: tensor<?>[] ) -> ( y: tensor<?> )\n{{\n    {body}\n}}\n"
                   "graph G( x ) -> ( y )\n{\n    x = external<integer>(shape = [2]);\n    y = f([x, x]);\n}\n")
    assert compile_document(text).tensors["y"].dtype == "integer"


def test_conflicting_candidates_are_still_ambiguous():
    text = FRAGMENTS + ("fragment pick<?>( c: tensor<logical>, a: tensor<?> ) -> ( y: tensor<?> )\n"
                        "{\n    y = select(c, a, 1.0);\n}\n"
                        "graph G( x, c ) -> ( y )\n{\n    x = external(shape = [2]);\n"
                        "    c = external<logical>(shape = [2]);\n    y = pick(c, x);\n}\n")
    assert located(text, "ambiguous candidates '\\?' vs 'scalar'") == (5, 9)


def test_generic_deduction_agrees_with_the_official_parser():
    nnef = pytest.importorskip("nnef")
    text = FRAGMENTS + CAT + ("graph G( x ) -> ( y )\n{\n    x = external<integer>(shape = [2, 1]);\n"
                              "    y = cat2(x, x);\n}\n")
    theirs = nnef.parse_string(text, lowered=["cat2"])
    assert [(op.name, op.dtype) for op in theirs.operations][-1] == ("concat", "integer")
    assert compile_document(text).operations[-1].dtype == "integer"


# ---------------------------------------------------------------- 1. no chains in a flat body

@pytest.mark.parametrize("header", [FINAL, PROV])
def test_chained_invocation_in_a_flat_graph_body_is_located(header):
    end = ";" if header == FINAL else ""
    text = header + f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [2]){end}\n    y = relu(neg(x)){end}\n}}\n"
    assert located(text, "the invocation of 'neg' is an argument of 'relu': chained invocations") == (5, 14)


def test_chain_inside_an_array_argument_is_located():
    text = FINAL + "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = concat([x, neg(x)], axis = 0);\n}\n"
    assert located(text, "'neg' is an argument of 'concat'") == (5, 20)


def test_chain_in_a_flat_fragment_body_is_located():
    text = FRAGMENTS + ("fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = relu(neg(x));\n}\n"
                        "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = f(x);\n}\n")
    assert located(text, "chained invocations") == (5, 14)


@pytest.mark.parametrize("text", [
    # with operator expressions a chain is fine, in the graph and in fragments
    OPERATORS + "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = relu(neg(x));\n}\n",
    BOTH + ("fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = relu(neg(x));\n}\n"
            "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = f(x);\n}\n"),
    # provisional fragment bodies are compositional
    PROV + ("fragment f( x: tensor ) -> ( y: tensor )\n{\n    y = relu(neg(x))\n}\n"
            "graph G( x ) -> ( y )\n{\n    x = external(shape = [2])\n    y = f(x)\n}\n"),
    # flat: identifiers, literals, arrays and tuples of them
    FINAL + "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    t = neg(x);\n"
            "    y = concat([x, t], axis = 0);\n}\n",
])
def test_chains_where_they_are_allowed_and_flat_neighbours(text):
    compile_document(text)


# ---------------------------------------------------------------- 2. attributes are named

@pytest.mark.parametrize("header", [FINAL, PROV])
def test_positional_attribute_argument_is_located(header):
    end = ";" if header == FINAL else ""
    text = header + (f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [2, 3]){end}\n"
                     f"    y = softmax(x, [1]){end}\n}}\n")
    assert located(text, "argument 2 of 'softmax' must be named: parameter 'axes'") == (5, 20)


def test_positional_attribute_of_a_compile_time_fragment_is_located():
    # the provisional chapter's own recursion example calls sum_of(items[1:]) by position
    text = PROV + ("fragment sum_of( items: scalar[] ) -> ( sum: scalar )\n{\n"
                   "    sum = items[0] + sum_of(items[1:]) if length_of(items) > 0 else 0.0\n}\n"
                   "fragment f( x: tensor, a: scalar[] ) -> ( y: tensor )\n{\n    y = mul(x, sum_of(items = a))\n}\n"
                   "graph G( x ) -> ( y )\n{\n    x = external(shape = [2])\n    y = f(x, a = [1.0, 2.0])\n}\n")
    assert located(text, "argument 1 of 'sum_of' must be named") == (4, 29)
    g = compile_document(text.replace("sum_of(items[1:])", "sum_of(items = items[1:])"))
    assert g.operations[-1].inputs["y"] == 3.0


@pytest.mark.parametrize("header", [FINAL, PROV])
def test_positional_tensor_arguments_and_named_attributes_are_accepted(header):
    end = ";" if header == FINAL else ""
    text = header + (f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [2, 3]){end}\n"
                     f"    t = add(x, x){end}\n    y = softmax(t, axes = [1]){end}\n}}\n")
    assert compile_document(text).tensors["y"].shape == (2, 3)


# ---------------------------------------------------------------- 3. several results, one identifier

TWO = """fragment two( x: tensor<scalar> ) -> ( a: tensor<scalar>, b: tensor<scalar> )
{
    a = relu(x);
    b = neg(x);
}
"""


def test_several_results_to_one_identifier_in_a_fragment_is_located():
    text = FRAGMENTS + TWO + ("fragment one( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    t = two(x);\n"
                              "    y = relu(x);\n}\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n"
                              "    y = one(x);\n}\n")
    assert located(text, "'two' has 2 results \\(a, b\\) but they are assigned to the single identifier 't'") == (10, 5)


def test_several_results_to_one_identifier_in_the_graph_is_located():
    text = FINAL + ("graph G( x ) -> ( y )\n{\n    x = external(shape = [1, 1, 4, 4]);\n"
                    "    y = max_pool_with_index(x, size = [1, 1, 2, 2]);\n}\n")
    assert located(text, "'max_pool_with_index' has 2 results") == (5, 5)


@pytest.mark.parametrize("lhs", ["(p, q)", "p, q"])
def test_results_unpacked_into_a_tuple_are_accepted(lhs):
    text = FRAGMENTS + TWO + (f"fragment one( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{{\n    {lhs} = two(x);\n"
                              "    y = add(p, q);\n}\ngraph G( x ) -> ( y, i )\n{\n"
                              "    x = external(shape = [1, 1, 4, 4]);\n    y = one(x);\n"
                              "    (m, i) = max_pool_with_index(x, size = [1, 1, 2, 2]);\n}\n")
    g = compile_document(text)
    assert g.tensors["i"].shape == (1, 1, 4, 4)


def test_an_array_result_may_still_go_to_one_identifier_in_a_fragment():
    # one result of array type is not "several results"
    text = BOTH + ("fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n"
                   "    parts = split(x, axis = 0, ratios = [1, 1]);\n    y = add(parts[0], parts[1]);\n}\n"
                   "graph G( x ) -> ( y )\n{\n    x = external(shape = [4]);\n    y = f(x);\n}\n")
    assert compile_document(text).tensors["y"].shape == (2,)


# ---------------------------------------------------------------- 4. extent is not scalar

def test_extent_literal_for_a_scalar_attribute_is_located_in_the_provisional_dialect():
    # the provisional chapter's own example writes bar(input, alpha = 2)
    text = PROV + ("fragment bar( input: tensor, alpha: scalar = 0.5 ) -> ( output: tensor )\n{\n"
                   "    output = mul(input, alpha)\n}\n"
                   "graph G( x ) -> ( y )\n{\n    x = external(shape = [2])\n    y = bar(x, alpha = 2)\n}\n")
    assert located(text, "argument 'alpha' of 'bar' expects scalar, found integer") == (9, 24)
    g = compile_document(text.replace("alpha = 2)", "alpha = 2.0)"))
    assert g.operations[-1].inputs["y"] == 2.0


def test_extent_parameter_used_as_a_scalar_is_located_in_the_provisional_dialect():
    text = PROV + ("fragment f( x: tensor, n: extent ) -> ( y: tensor )\n{\n    y = mul(x, n)\n}\n"
                   "graph G( x ) -> ( y )\n{\n    x = external(shape = [2])\n    y = f(x, n = 2)\n}\n")
    assert located(text, "argument 'y' of 'mul' expects tensor<scalar>, found integer") == (4, 16)
    # the explicit conversion is the accepted neighbour
    g = compile_document(text.replace("mul(x, n)", "mul(x, scalar(n))"))
    assert g.operations[-1].inputs["y"] == 2.0


def test_extent_for_a_scalar_is_refused_in_the_final_dialect_too():
    text = FINAL + "graph G( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = mul(x, 2);\n}\n"
    assert located(text, "expects tensor<scalar>, found integer") == (5, 16)
    compile_document(text.replace("mul(x, 2)", "mul(x, 2.0)"))
