"""Hostile and random input: only NNEFXError with a location may come out, never another
exception, a RecursionError or a hang."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnefx.diagnostics import NNEFXError
from nnefx.semantics.frontend import compile_document

FIXTURES = Path(__file__).parent / "fixtures" / "nnef"
SEEDS = [p.read_text() for p in sorted(FIXTURES.glob("*.nnef"))]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOKENS = ["version", "1.0", ";", "graph", "fragment", "G", "x", "y", "(", ")", "[", "]", "{", "}", "->", ",", "=",
          ":", "external", "relu", "shape", "tensor", "<", ">", "scalar", "integer", "extent", "?", "1", "2.5",
          "'s'", "+", "-", "*", "if", "else", "for", "in", "yield", "true", "extension",
          "KHR_enable_operator_expressions", "\n", " ", "#c\n"]


def compile_ok_or_located(text: str) -> None:
    try:
        compile_document(text, file="fuzz.nnef")
    except NNEFXError as exc:
        assert exc.location is not None and exc.location.file == "fuzz.nnef", exc
        assert exc.location.line is not None or "deep" in exc.message, exc


@SETTINGS
@given(st.sampled_from(SEEDS), st.data())
def test_truncated_documents(text, data):
    cut = data.draw(st.integers(0, len(text)))
    compile_ok_or_located(text[:cut])


@SETTINGS
@given(st.sampled_from(SEEDS), st.data())
def test_mutated_documents(text, data):
    chars = list(text)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, max(0, len(chars) - 1)))
        action = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        ch = data.draw(st.sampled_from(list("()[]{};:,=<>?-+*/^!&|#'\"0123456789.eaxz_ \n\t\x00\xff")))
        if action == "delete" and chars:
            del chars[i]
        elif action == "insert":
            chars.insert(i, ch)
        elif chars:
            chars[i] = ch
    compile_ok_or_located("".join(chars))


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_token_soup(tokens):
    compile_ok_or_located(" ".join(tokens))


@SETTINGS
@given(st.integers(1, 3000), st.sampled_from(["(", "[", "-", "!", "f(", "[for i in "]))
def test_random_deep_nesting(depth, opener):
    closer = {"(": ")", "[": "]", "-": "", "!": "", "f(": ")", "[for i in ": " yield i]"}[opener]
    expr = opener * depth + "1" + closer * depth
    text = ("version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
            f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [{expr}]);\n    y = copy(x);\n}}\n")
    compile_ok_or_located(text)


@SETTINGS
@given(st.integers(1, 3000))
def test_long_operator_chains(n):
    expr = " + ".join(["1"] * n)
    text = ("version 1.0;\nextension KHR_enable_operator_expressions;\n"
            f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [{expr}]);\n    y = copy(x);\n}}\n")
    compile_ok_or_located(text)


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes(data):
    compile_ok_or_located(data.decode("latin-1"))


# --- generated valid documents: precedence and evaluation against a reference -------------

_PREC = {"||": 2, "&&": 2, "<": 3, "==": 3, "+": 4, "-": 4, "*": 5}


def _int_trees():
    leaf = st.integers(0, 9).map(lambda v: ("lit", v))
    return st.recursive(leaf, lambda kids: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*"]), kids, kids),
        st.tuples(st.just("neg"), kids)), max_leaves=12)


def _value(t):
    if t[0] == "lit":
        return t[1]
    if t[0] == "neg":
        return -_value(t[1])
    a, b = _value(t[1]), _value(t[2])
    return {"+": a + b, "-": a - b, "*": a * b}[t[0]]


def _text(t, parent_prec=0, right=False):
    """Print with the fewest parentheses the NNEF precedence rules allow (left-assoc)."""
    if t[0] == "lit":
        return str(t[1])
    if t[0] == "neg":
        return "-" + _text(t[1], 7)
    p = _PREC[t[0]]
    s = f"{_text(t[1], p)} {t[0]} {_text(t[2], p, right=True)}"
    if p < parent_prec or (p == parent_prec and right):
        return f"({s})"
    return s


@SETTINGS
@given(_int_trees())
def test_generated_integer_expressions_evaluate_like_the_reference(tree):
    text = ("version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
            "fragment probe( x: tensor<scalar>, v: integer ) -> ( y: tensor<scalar> );\n"
            f"graph G( x ) -> ( y )\n{{\n    x = external(shape = [1]);\n    y = probe(x, v = {_text(tree)});\n}}\n")
    g = compile_document(text, shapes=False)
    assert g.operations[-1].attribs["v"] == _value(tree)


# --- generated valid flat graphs: print -> compile round trip ---------------------------------

_UNARY = ["relu", "exp", "neg", "abs", "sigmoid", "copy", "tanh"]
_BINARY = ["add", "sub", "mul", "max", "min"]


@st.composite
def _flat_graphs(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 4)) for _ in range(rank)]
    lines = [f"x = external(shape = {shape});"]
    names = ["x"]
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "literal", "reduce", "nested"]))
        a = draw(st.sampled_from(names))
        if kind == "unary":
            rhs = f"{draw(st.sampled_from(_UNARY))}({a})"
        elif kind == "binary":
            rhs = f"{draw(st.sampled_from(_BINARY))}({a}, {draw(st.sampled_from(names))})"
        elif kind == "literal":
            v = draw(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32))
            rhs = f"add({a}, {float(v)!r})".replace("e+", "e")
        elif kind == "reduce":
            rhs = f"sum_reduce({a}, axes = [{draw(st.integers(0, rank - 1))}], normalize = {draw(st.booleans())!s}"
            rhs = rhs.replace("True", "true").replace("False", "false") + ")"
        else:
            rhs = f"relu(add({a}, mul({a}, 2.0)))"
        name = f"t{i}"
        lines.append(f"{name} = {rhs};")
        names.append(name)
    out = names[-1]
    body = "\n    ".join(lines)
    # nested invocations ("nested") need the extension; the printed graph is flat
    return f"version 1.0;\nextension KHR_enable_operator_expressions;\ngraph G( x ) -> ( {out} )\n{{\n    {body}\n}}\n"


@SETTINGS
@given(_flat_graphs(), st.booleans())
def test_generated_graphs_round_trip_through_the_printer(text, expand_all):
    from nnefx.syntax.printer import print_graph

    g = compile_document(text, expand_all=expand_all)
    printed = print_graph(g)
    g2 = compile_document(printed)
    assert [(op.op, op.inputs, op.outputs, op.attribs, op.dtype) for op in g2.operations] == \
        [(op.op, op.inputs, op.outputs, op.attribs, op.dtype) for op in g.operations]
    assert {n: (t.shape, t.dtype) for n, t in g2.tensors.items()} == {n: (t.shape, t.dtype) for n, t in g.tensors.items()}
    assert print_graph(g2) == printed
    try:
        import nnef
    except ImportError:
        return
    theirs = nnef.parse_string(printed)
    nnef.infer_shapes(theirs)
    assert {n: tuple(t.shape) for n, t in theirs.tensors.items()} == {n: t.shape for n, t in g.tensors.items()}
