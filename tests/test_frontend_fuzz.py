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
