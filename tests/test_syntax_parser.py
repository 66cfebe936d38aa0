"""Lexer and parser: both dialects, every grammar form, locations on errors and nodes."""

from __future__ import annotations

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.syntax import ast
from nnefx.syntax.lexer import NUMBER, STRING, tokenize
from nnefx.syntax.parser import MAX_DEPTH, detect_dialect, parse_document, parse_library, parse_quant

FINAL_HDR = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def err(text: str, **kw) -> NNEFXError:
    with pytest.raises(NNEFXError) as info:
        parse_document(text, file="t.nnef", **kw)
    return info.value


def pos(e: NNEFXError) -> tuple[int, int]:
    assert e.location is not None and e.location.file == "t.nnef"
    return e.location.line, e.location.column


# --- lexer ----------------------------------------------------------------------------------

def test_numeric_literals():
    toks = tokenize("0 12 1.5 1. 2e3 2E-3 7.25e+2")
    nums = [(t.value, t.real) for t in toks if t.kind == NUMBER]
    assert nums == [("0", False), ("12", False), ("1.5", True), ("1.", True), ("2e3", True), ("2E-3", True),
                    ("7.25e+2", True)]


def test_strings_comments_and_positions():
    toks = tokenize("# comment\n  'abc' \"d'e\" # trailing\n  x")
    assert [(t.kind, t.value, t.line, t.column) for t in toks[:3]] == [
        (STRING, "abc", 2, 3), (STRING, "d'e", 2, 9), ("name", "x", 3, 3)]


def test_string_escapes_and_operators():
    toks = tokenize(r"'a\'b' -> <= >= == != && || ! ^")
    assert toks[0].value == "a'b"
    assert [t.value for t in toks[1:-1]] == ["->", "<=", ">=", "==", "!=", "&&", "||", "!", "^"]


@pytest.mark.parametrize("text,line,col", [("x = 'abc", 1, 5), ("a\n  $", 2, 3), ("1e+", 1, 2), ("12ab", 1, 1),
                                           ("'\u00e9'", 1, 2)])
def test_lexer_errors_have_positions(text, line, col):
    with pytest.raises(NNEFXError) as info:
        tokenize(text, "f")
    assert (info.value.location.line, info.value.location.column) == (line, col)


def test_crlf_counts_one_line():
    toks = tokenize("a\r\nb\rc")
    assert [(t.line, t.column) for t in toks[:3]] == [(1, 1), (2, 1), (3, 1)]


# --- dialect detection ----------------------------------------------------------------------

@pytest.mark.parametrize("text,dialect", [
    ("version 1.0\ngraph g(x) -> (y) { x = external(shape = [1]) }", "provisional"),
    ("version 1.0;\ngraph g(x) -> (y) { x = external(shape = [1]); }", "final"),
    ("# hdr\nversion 1.0 ; graph", "final"),
    ("nothing", "final"),
])
def test_detect_dialect(text, dialect):
    assert detect_dialect(text) == dialect


def test_forced_dialect_reports_missing_semicolon():
    e = err("version 1.0\ngraph g(x) -> (y) { x = external(shape = [1]) }", dialect="final")
    assert pos(e) == (2, 1)
    assert "';'" in e.message


# --- provisional grammar --------------------------------------------------------------------

PROV = """version 1.0
fragment f( x: tensor, n: extent[] = [1, 2], t: (extent, scalar) = (1, 2.0), s: string = 'a' )
  -> ( y: tensor, z: tensor[] )
{
  a = [i * 2 for i in n if i > 1]
  b = n[1:] + n[:1] + n[0:1]
  c = extent(1.5) if !(length_of(n) == 0) && true || false else -1
  d, e = t
  y = add(x, scalar(c))
  z = [x, y]
}
graph g( input ) -> ( output )
{
  input = external(shape = [1, 0])
  output, [o1, o2] = f(input)
}
"""


def test_provisional_document_structure():
    doc = parse_document(PROV)
    assert doc.dialect == "provisional" and doc.version == (1, 0)
    frag = doc.fragments[0]
    assert [p.name for p in frag.params] == ["x", "n", "t", "s"]
    assert str(frag.params[1].type.type) == "integer[]"
    assert str(frag.params[0].type.type) == "tensor"
    body = frag.body
    comp = body[0].rhs
    assert isinstance(comp, ast.Comprehension) and comp.condition is not None
    assert isinstance(body[1].rhs, ast.Binary)
    sel = body[2].rhs
    assert isinstance(sel, ast.Select) and isinstance(sel.then, ast.Builtin) and sel.then.name == "integer"
    assert isinstance(body[3].rhs, ast.Identifier) and isinstance(body[3].lhs, ast.TupleExpr)
    assert isinstance(doc.graph.body[1].lhs, ast.TupleExpr)


def test_every_node_has_a_location():
    doc = parse_document(PROV)
    count = 0
    stack: list[ast.Node] = [doc]
    while stack:
        node = stack.pop()
        assert node.loc is not None and node.loc.line >= 1 and node.loc.column >= 1, node
        assert node.end is not None, node
        count += 1
        stack.extend(ast.iter_children(node))
    assert count > 60


def test_provisional_graph_body_is_flat():
    e = err("version 1.0\ngraph g(x) -> (y)\n{\n x = external(shape = [1])\n y = add(x, 1.0 + 2.0)\n}")
    assert pos(e) == (5, 17) and "flat" in e.message


def test_provisional_negative_literal_allowed_in_flat_body():
    doc = parse_document("version 1.0\ngraph g(x) -> (y)\n{\n x = external(shape = [1])\n y = add(x, -2.5)\n}")
    lit = doc.graph.body[1].rhs.args[1].value
    assert isinstance(lit, ast.Literal) and lit.value == -2.5


def test_provisional_rejects_final_forms():
    e = err("version 1.0\nfragment f<?>( x: tensor ) -> ( y: tensor ) { y = x }\ngraph g(x) -> (x) { x = external(shape=[1]) }")
    assert pos(e) == (2, 11)
    e = err("version 1.0\nfragment f( x: tensor ) -> ( y: tensor ) { y = [for i in x yield i] }\n"
            "graph g(x) -> (x) { x = external(shape=[1]) }")
    assert pos(e) == (2, 49)


# --- final grammar --------------------------------------------------------------------------

FINAL = FINAL_HDR + """
fragment f<? = scalar>( x: tensor<?>, n: integer[] = [], m: ?[] = [] ) -> ( y: tensor<?> );
fragment g( x: tensor<>, k: (integer, scalar)[] ) -> ( y: tensor<scalar> )
{
    a = [for (i, s) in k, j in range_of(k) if i in [1, 2] yield s];
    b = a[:] if length_of(a) > 0 else [];
    y = f<scalar>(x, n = [1]) + 1.0;
}
graph G( input ) -> ( output )
{
    input = external<scalar>(shape = [1, 2]);
    output = g(input, k = [(1, 2.0), (3, 4.0)]);
}
"""


def test_final_document_structure():
    doc = parse_document(FINAL)
    assert doc.dialect == "final" and doc.extension_names() == [
        "KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"]
    f = doc.fragments[0]
    assert f.generic and f.generic_default == "scalar" and f.body is None
    assert str(f.params[0].type.type) == "tensor<?>" and str(f.params[2].type.type) == "?[]"
    comp = doc.fragments[1].body[0].rhs
    assert isinstance(comp, ast.Comprehension) and len(comp.iterators) == 2
    assert comp.iterators[0].names == ["i", "s"]
    assert isinstance(comp.condition, ast.Binary) and comp.condition.op == "in"
    inv = doc.fragments[1].body[2].rhs.left
    assert isinstance(inv, ast.Invocation) and inv.generic == "scalar"
    assert doc.graph.body[0].rhs.generic == "scalar"


def test_precedence_and_associativity():
    doc = parse_document(FINAL_HDR + "graph G(x) -> (y) { x = external(shape=[1]); y = f(a = 1 + 2 * 3 ^ 2 - 4 < 5 && !b || c); }")
    e = doc.graph.body[1].rhs.args[0].value
    # ((((1 + (2 * (3 ^ 2))) - 4) < 5) && !b) || c : && and || share a level, left-assoc
    assert e.op == "||" and e.left.op == "&&" and e.left.left.op == "<"
    sub = e.left.left.left
    assert sub.op == "-" and sub.left.op == "+" and sub.left.right.op == "*" and sub.left.right.right.op == "^"
    assert isinstance(e.left.right, ast.Unary)
    doc = parse_document(FINAL_HDR + "graph G(x) -> (y) { x = external(shape=[1]); y = f(a = -a - b); }")
    e = doc.graph.body[1].rhs.args[0].value
    assert e.op == "-" and isinstance(e.left, ast.Unary)


def test_subscripts_and_open_ranges():
    doc = parse_document(FINAL_HDR + "graph G(x) -> (y) { x = external(shape=[1]); y = f(a = b[1], c = b[:2], d = b[1:], e = b[:]); }")
    args = doc.graph.body[1].rhs.args
    assert [(a.value.is_range, a.value.begin is None, a.value.stop is None) for a in args] == [
        (False, False, True), (True, True, False), (True, False, True), (True, True, True)]


def test_select_binds_lowest_and_comprehension_if_is_a_filter():
    doc = parse_document(FINAL_HDR + "graph G(x) -> (y) { x = external(shape=[1]); y = f(a = [for i in r if c yield i if d else 0]); }")
    comp = doc.graph.body[1].rhs.args[0].value
    assert isinstance(comp.condition, ast.Identifier) and isinstance(comp.body, ast.Select)


def test_tuples_with_and_without_parentheses():
    doc = parse_document(FINAL_HDR + "graph G(x) -> (y) { x = external(shape=[1]); (a, b) = f(x); c, [d, e] = g(x); y = h(t = (1, (2, 3))); }")
    assert isinstance(doc.graph.body[1].lhs, ast.TupleExpr)
    assert isinstance(doc.graph.body[2].lhs.items[1], ast.ArrayExpr)
    t = doc.graph.body[3].rhs.args[0].value
    assert isinstance(t, ast.TupleExpr) and isinstance(t.items[1], ast.TupleExpr)


def test_final_gating_of_fragments_and_operators():
    e = err("version 1.0;\nfragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> );\ngraph G(x) -> (x) { x = external(shape=[1]); }")
    assert pos(e) == (2, 1) and "KHR_enable_fragment_definitions" in e.message
    e = err("version 1.0;\ngraph G(x) -> (y) {\n x = external(shape=[1]);\n y = relu(x) + 1.0;\n}")
    assert pos(e) == (4, 14) and "KHR_enable_operator_expressions" in e.message


def test_final_requires_tensor_type_arguments():
    e = err("version 1.0;\nextension KHR_enable_fragment_definitions;\nfragment f( x: tensor ) -> ( y: tensor<scalar> );\n"
            "graph G(x) -> (x) { x = external(shape=[1]); }")
    assert pos(e) == (3, 23)


def test_extent_is_an_identifier_in_final_and_integer_in_provisional():
    parse_document("version 1.0;\ngraph G(extent) -> (extent) { extent = external(shape=[1]); }")
    parse_document("version 1.0\ngraph G(integer) -> (integer) { integer = external(shape=[1]) }")
    e = err("version 1.0\ngraph G(extent) -> (extent) { extent = external(shape=[1]) }")
    assert pos(e) == (2, 9) and "keyword" in e.message


@pytest.mark.parametrize("text,line,col", [
    ("graph G(x) -> (x) {}", 1, 1),
    ("version 1;", 1, 9),
    ("version 2.0;", 1, 9),
    ("version 1.0;\ngraph G(x) -> (x) { }", 2, 21),
    ("version 1.0;\ngraph G(x) -> (x) { x = external(shape = [1]) }", 2, 47),
    ("version 1.0;\ngraph G(x) -> (x) { x = external(shape = [1,]); }", 2, 45),
    ("version 1.0;\ngraph G(x) -> (x) { x = external(shape = [1]); } extra", 2, 50),
    ("version 1.0;\ngraph G(x) -> (x) { 1 = external(shape = [1]); }", 2, 21),
    ("version 1.0;\ngraph G(x) -> (x) { x = external(); }", 2, 34),
    ("version 1.0;\ngraph G(x) -> (x) {\n x = external(shape = [1]);", 3, 28),
])
def test_syntax_errors_point_at_the_token(text, line, col):
    assert pos(err(text)) == (line, col)


def test_deep_nesting_is_an_error_not_a_recursion_error():
    depth = MAX_DEPTH + 50
    expr = "[" * depth + "1" + "]" * depth
    e = err(f"version 1.0;\ngraph G(x) -> (x) {{ x = external(shape = {expr}); }}")
    assert pos(e)[0] == 2 and "deep" in e.message
    chain = " + ".join(["1"] * (MAX_DEPTH + 10))
    e = err(FINAL_HDR + f"graph G(x) -> (x) {{ x = external(shape = [{chain}]); }}")
    assert "deep" in e.message
    neg = "-" * (MAX_DEPTH + 10) + "1"
    e = err(FINAL_HDR + f"graph G(x) -> (x) {{ x = external(shape = [{neg}]); }}")
    assert "deep" in e.message


def test_library_and_quant():
    frags = parse_library("fragment a( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
                          "fragment b( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = a(x); }")
    assert [f.name for f in frags] == ["a", "b"] and frags[1].body is not None
    q = parse_quant('"a": linear_quantize(min = -1.0, max = [[1.0], [2.0]], bits = 8);\n'
                    "'b': logarithmic_quantize(max = 1.0, bits = 4)")
    assert [(e.tensor, e.op) for e in q.entries] == [("a", "linear_quantize"), ("b", "logarithmic_quantize")]
    assert q.entries[0].args[0].value.value == -1.0
    with pytest.raises(NNEFXError) as info:
        parse_quant('"a": linear_quantize(min = x);', file="g.quant")
    assert (info.value.location.line, info.value.location.column) == (1, 28)


def test_flat_assignments_take_invocations_only():
    e = err("version 1.0;\ngraph G( x ) -> ( y ) { x = external(shape = [1]); y = x; }")
    assert pos(e) == (2, 56) and "invocation" in e.message
    e = err("version 1.0\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [1])\n  y = 1.0\n}")
    assert pos(e) == (5, 7)
    parse_document(FINAL_HDR + "graph G( x ) -> ( y ) { x = external(shape = [1]); y = x; }")


def test_unparenthesised_rvalue_tuples_are_provisional_only():
    e = err(FINAL_HDR + "graph G( x ) -> ( y, z ) { x = external(shape = [1]); y, z = relu(x), exp(x); }")
    assert "';'" in e.message
    doc = parse_document("version 1.0\nfragment f( x: tensor ) -> ( y: tensor, z: tensor )\n{\n  y, z = x, x\n}\n"
                         "graph G( x ) -> ( y, z )\n{\n  x = external(shape = [1])\n  y, z = f(x)\n}\n")
    assert isinstance(doc.fragments[0].body[0].rhs, ast.TupleExpr)


def test_dialect_detection_after_a_long_comment_header():
    header = "# " + "x" * 6000 + "\n"
    doc = parse_document(header + "version 1.0\ngraph G( x ) -> ( x2 )\n{\n  x = external(shape = [1])\n  x2 = copy(x)\n}\n")
    assert doc.dialect == "provisional"


def test_provisional_array_lvalue_after_a_statement_without_semicolon():
    # ';' is optional in the provisional dialect: '[a, b] = ...' on the next line begins a new
    # assignment (a subscript is never followed by '='), in the flat graph body and in fragments
    text = ("version 1.0\nfragment f( x: tensor ) -> ( y: tensor[] )\n{\n  t = x\n  [u, v] = [x, x]\n"
            "  y = [u, v]\n}\ngraph G( x ) -> ( a, b )\n{\n  x = external(shape = [1])\n  [a, b] = f(x)\n}\n")
    doc = parse_document(text)
    assert [type(s.lhs).__name__ for s in doc.graph.body] == ["Identifier", "ArrayExpr"]
    assert len(doc.fragments[0].body) == 3
    # a real subscript in the flat body is still refused where it stands
    e = err("version 1.0\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [1])\n  y = split(x, axis = 0)[0]\n}")
    assert pos(e) == (5, 25) and "subscript" in e.message
