"""Compile-time evaluation: operators, strings, arrays, tuples, builtins and casts with the
exact results seed 001 §3.3.3 lists, lazy if/else, comprehensions, recursion limits."""

from __future__ import annotations

import math

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.semantics.frontend import compile_document

HDR = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def evaluate(expr: str, typ: str, fragments: str = ""):
    """Value of ``expr`` as the attribute of a body-less probe fragment."""
    text = (HDR + fragments + f"\nfragment probe( x: tensor<scalar>, v: {typ} ) -> ( y: tensor<scalar> );\n"
            f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [1]);\n    y = probe(x, v = {expr});\n}}\n")
    g = compile_document(text, shapes=False)
    return g.operations[-1].attribs["v"]


@pytest.mark.parametrize("expr,typ,value", [
    ("1 + 2 * 3", "integer", 7),
    ("(1 + 2) * 3", "integer", 9),
    ("2 ^ 10", "integer", 1024),
    ("2 ^ 3 ^ 2", "integer", 64),
    ("7 / 2", "integer", 3),
    ("(0 - 7) / 2", "integer", -3),
    ("-3 - 4", "integer", -7),
    ("1.5 * 2.0 - 0.5", "scalar", 2.5),
    ("1.0 / 4.0", "scalar", 0.25),
    ("2.0 ^ 0.5", "scalar", math.sqrt(2.0)),
    ("3 < 4 && 4 <= 4 && 5 > 4 && 5 >= 5", "logical", True),
    ("1 == 1 && 1 != 2 && 'a' == 'a' && [1, 2] == [1, 2]", "logical", True),
    ("!true || false", "logical", False),
    ("2 in [1, 2, 3]", "logical", True),
    ("'ab' + 'cd'", "string", "abcd"),
    ("'ab' * 3", "string", "ababab"),
    ("'hello'[1:3]", "string", "el"),
    ("'hello'[4]", "string", "o"),
    ("'hello'[:2] + 'hello'[3:]", "string", "helo"),
    ("[1, 2] + [3]", "integer[]", [1, 2, 3]),
    ("[1, 2] * 2", "integer[]", [1, 2, 1, 2]),
    ("[1, 2, 3][1]", "integer", 2),
    ("[1, 2, 3][0:2]", "integer[]", [1, 2]),
    ("[1, 2, 3][1:]", "integer[]", [2, 3]),
    ("[1, 2, 3][:2]", "integer[]", [1, 2]),
    ("[1, 2, 3][2:2]", "integer[]", []),
    ("[1, 2, 3][2:1]", "integer[]", []),
    ("[] + [1]", "integer[]", [1]),
    ("[[1], [2, 3]][1]", "integer[]", [2, 3]),
    ("(1, 2.0)[1]", "scalar", 2.0),
    ("length_of([4, 5, 6])", "integer", 3),
    ("length_of('abcd')", "integer", 4),
    ("range_of([4, 5, 6])", "integer[]", [0, 1, 2]),
    ("range_of('ab')", "integer[]", [0, 1]),
    ("scalar(true)", "scalar", 1.0),
    ("scalar(false)", "scalar", 0.0),
    ("scalar('2.5')", "scalar", 2.5),
    ("scalar('1e3')", "scalar", 1000.0),
    ("scalar(3)", "scalar", 3.0),
    ("integer(true)", "integer", 1),
    ("integer('42')", "integer", 42),
    ("integer(2.7)", "integer", 2),
    ("integer(-2.5)", "integer", -3),
    ("logical(0)", "logical", False),
    ("logical(5)", "logical", True),
    ("logical(0.0)", "logical", False),
    ("logical('')", "logical", False),
    ("logical('x')", "logical", True),
    ("string(12)", "string", "12"),
    ("string(1.5)", "string", "1.5"),
    ("string(true)", "string", "true"),
    ("string('s')", "string", "s"),
    ("1 if true else 2", "integer", 1),
    ("[1][5] if false else 0", "integer", 0),
    ("false && [1][5] == 1", "logical", False),
    ("[for i in [1, 2, 3] yield i * i]", "integer[]", [1, 4, 9]),
    ("[for i in [1, 2, 3] if i != 2 yield i]", "integer[]", [1, 3]),
    ("[for i in [1, 2], j in [10, 20] yield i + j]", "integer[]", [11, 22]),
    ("[for (a, b) in [(1, 2.0), (3, 4.0)] yield b]", "scalar[]", [2.0, 4.0]),
    ("[(1, 2), (3, 4)]", "(integer, integer)[]", [(1, 2), (3, 4)]),
])
def test_values(expr, typ, value):
    got = evaluate(expr, typ)
    if isinstance(value, float):
        assert got == pytest.approx(value) and isinstance(got, float)
    else:
        assert got == value and type(got) is type(value)


def test_recursion_with_lazy_select():
    frag = ("fragment sum_of( items: scalar[] ) -> ( sum: scalar )\n{\n"
            "    sum = items[0] + sum_of(items = items[1:]) if length_of(items) > 0 else 0.0;\n}\n")
    assert evaluate("sum_of(items = [1.0, 2.0, 3.5])", "scalar", frag) == 6.5


def test_tuple_results_unpack():
    frag = ("fragment pair( n: integer ) -> ( a: integer, b: integer[] )\n{\n    a = n * 2;\n    b = [n] * n;\n}\n"
            "fragment use( n: integer ) -> ( c: integer[] )\n{\n    p, q = pair(n = n);\n    c = q + [p];\n}\n")
    assert evaluate("use(n = 2)", "integer[]", frag) == [2, 2, 4]


@pytest.mark.parametrize("expr,typ,words", [
    ("1 / 0", "integer", "division by zero"),
    ("[1, 2][2]", "integer", "out of range"),
    ("[1, 2][1:5]", "integer[]", "out of bounds"),
    ("integer('x1')", "integer", "not a valid integer"),
    ("scalar('1.2.3')", "scalar", "not a valid numeric"),
    ("[1] * -1", "integer[]", "negative"),
    ("[1] * 100000000", "integer[]", "too long"),
    ("2 ^ 100000", "integer", "too large"),
    ("[for i in [1], j in [1, 2] yield i]", "integer[]", "different lengths"),
])
def test_evaluation_errors(expr, typ, words):
    with pytest.raises(NNEFXError) as info:
        evaluate(expr, typ)
    assert words in info.value.message
    assert info.value.location is not None and info.value.location.line is not None


def test_infinite_recursion_is_a_clear_error():
    frag = "fragment loop( n: integer ) -> ( m: integer )\n{\n    m = loop(n = n + 1);\n}\n"
    with pytest.raises(NNEFXError) as info:
        evaluate("loop(n = 0)", "integer", frag)
    assert "recursion too deep" in info.value.message and "loop" in info.value.message
    assert info.value.location.line is not None


def test_provisional_shape_of_and_extent_cast():
    text = ("version 1.0\nfragment f( x: tensor ) -> ( y: tensor )\n{\n"
            "  s = shape_of(x)\n  n = shape_of(1.0)\n  y = reshape(x, shape = s[1:2] + [extent(scalar(length_of(n)) / 2.0)])\n}\n"
            "graph G( x ) -> ( y )\n{\n  x = external(shape = [1, 3, 1])\n  y = f(x)\n}\n")
    g = compile_document(text)
    assert g.operations[-1].attribs["shape"] == [3, 1]
    assert g.tensors["y"].shape == (3, 1)


def test_exponential_work_is_refused_not_hung():
    frag = ("fragment f( n: integer ) -> ( m: integer )\n{\n"
            "    m = f(n = n - 1) + f(n = n - 1) if n > 0 else 1;\n}\n")
    with pytest.raises(NNEFXError) as info:
        evaluate("f(n = 60)", "integer", frag)
    assert "too expensive" in info.value.message and info.value.location.line is not None
    with pytest.raises(NNEFXError) as info:
        evaluate("[for i in range_of([0] * 1000) yield length_of([for j in range_of([0] * 1000) yield j])]",
                 "integer[]")
    assert "too expensive" in info.value.message
