"""Statement forms compiled for one document and reused by the next must change nothing.

The fast path keeps compiled statement forms between documents (``fastpath._forms``, an
LRU bounded by ``FORM_CACHE_SIZE``), keyed on everything a form depends on besides its
own text: the standard library build, the extensions or the prologue (fragment
definitions), the expansion options and the shapes flag.  These tests read documents
that share forms but differ in those, one after the other, and compare every result with
the general pipeline (``check``); and they make sure forms *are* shared where they may be
(otherwise the comparison would prove nothing) and that the cache stays bounded.
Also here: plans derived by substituting numbers (``_with_numbers``).
"""

from __future__ import annotations

from typing import Any

import pytest

from nnefx.semantics import fastpath
from nnefx.semantics.frontend import compile_document
from test_frontend_fastpath import _doc, check, took_fast_path


@pytest.fixture(autouse=True)
def _strict_and_cold(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(fastpath, "STRICT", True)
    fastpath.clear_caches()
    yield
    fastpath.clear_caches()


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = fastpath.Compiler.compile_template

    def counting(self: Any, *args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return original(self, *args, **kw)

    monkeypatch.setattr(fastpath.Compiler, "compile_template", counting)
    return calls


BODY = """    x = external(shape = [1, 4, 8, 8]);
    w = variable(shape = [4, 4, 3, 3], label = 'w');
    c = conv(x, w, 0.0, padding = [(1, 1), (1, 1)]);
    y = relu(c);"""


def test_forms_are_shared_between_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_compiles(monkeypatch)
    first = compile_document(_doc(BODY))
    n = calls[0]
    assert n == 4 and len(fastpath._forms) == 4
    # other names, labels and numbers, same forms: nothing compiled again, same graph as
    # the general pipeline
    other = _doc(BODY.replace("w", "k").replace("[4, 4, 3, 3]", "[6, 4, 3, 3]").replace("c =", "q =")
                 .replace("(c)", "(q)").replace("(1, 1)", "(2, 2)"))
    assert check(other) == "ok"
    g = compile_document(other)
    assert calls[0] == n
    assert g.tensors["y"].shape == (1, 6, 10, 10) and first.tensors["y"].shape == (1, 4, 8, 8)
    assert took_fast_path(other)


def test_same_form_with_other_fragment_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """``y = f(x);`` is one form, but what it emits depends on the document's definition
    of ``f``: the prologue is part of the key."""
    calls = _count_compiles(monkeypatch)
    texts = []
    for body in ("b = relu(a);", "b = sigmoid(a);", "b = relu(a);", "b = mul(a, 2.0);"):
        texts.append("version 1.0;\nextension KHR_enable_fragment_definitions;\n"
                     f"fragment f( a: tensor<scalar> ) -> ( b: tensor<scalar> ) {{ {body} }}\n"
                     "graph G( x ) -> ( y )\n{\n  x = external(shape = [2, 3]);\n  y = f(x);\n}\n")
    graphs = []
    for text in texts:
        assert check(text) == "ok"
        assert took_fast_path(text)
        graphs.append(compile_document(text))
    assert [g.operations[1].op for g in graphs] == ["relu", "sigmoid", "relu", "mul"]
    assert graphs[3].operations[1].inputs["y"] == 2.0
    # the calls of f are read by the general machinery (the form is tried, not kept); the
    # external statement's form is kept once per distinct prologue
    assert len(fastpath._forms) == 3
    before = calls[0]
    compile_document(texts[1])
    assert calls[0] == before + 1 and len(fastpath._forms) == 3


def test_same_form_with_other_options_and_extensions() -> None:
    """Expansion options (``lowered``, ``expand_all``, the compat expander), extensions
    and the shapes flag are part of the key: reading the same statements under each, in
    turn, gives each time what the general pipeline gives."""
    body = """    x = external(shape = [2, 3]);
    w = variable(shape = [4, 3], label = 'w');
    b = variable(shape = [1, 4], label = 'b');
    l = linear(x, w, b);
    s = softmax(l);
    y = relu(s);"""
    plain = _doc(body)
    ext = _doc(body, header="version 1.0;\nextension KHR_enable_operator_expressions;\n")
    for text, kw in [(plain, {}), (plain, {"lowered": ["linear"]}), (plain, {}), (plain, {"expand_all": True}),
                     (plain, {"expand_all": True, "atomic": ["softmax"]}), (plain, {"shapes": False}), (plain, {}),
                     (ext, {}), (plain, {"lowered": ["softmax"]}), (plain, {})]:
        assert check(text, **kw) == "ok", kw
    import nnefx.compat.nnef as compat

    graph = compat.parse_string(plain)
    compat.infer_shapes(graph)
    assert graph.tensors["y"].shape == [2, 4]
    assert check(plain) == "ok"
    # 'relu' is a standard compound whose body is one 'max': lowered or expanded, the same
    # statement form compiles to another single operation
    small = _doc("    x = external(shape = [2, 3]);\n    y = relu(x);")
    seen = []
    for kw in ({}, {"lowered": ["relu"]}, {}, {"expand_all": True}, {"expand_all": True, "atomic": ["relu"]},
               {"lowered": ["relu"]}):
        assert check(small, **kw) == "ok"
        assert took_fast_path(small, **kw)
        seen.append(compile_document(small, **kw).operations[1].op)
    assert seen == ["relu", "max", "relu", "gt", "relu", "max"]  # expand_all: max expands further
    assert len([k for k in fastpath._forms if k[1][0] == "relu"]) >= 3


def test_plans_derived_from_another_documents_first_plan() -> None:
    """A shared form's first plan was made by another document's compiler: the shape-memo
    ids of plans derived from it must not collide with this document's (regression: the
    second reading gave 'y' the shape of 'm0')."""
    text = _doc("""    x = external(shape = [2, 3, 4]);
    m0 = mul(x, 2.0);
    m1 = mul(x, 0.5);
    y = sum_reduce(x, axes = [0, 2]);
    z = sum_reduce(x, axes = [1]);""", outputs="y, z")
    for _ in range(3):
        assert check(text) == "ok"
        g = compile_document(text)
        assert g.tensors["y"].shape == (1, 3, 1) and g.tensors["z"].shape == (2, 1, 4)


def test_a_new_library_build_compiles_forms_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_compiles(monkeypatch)
    compile_document(_doc(BODY))
    n = calls[0]
    compile_document(_doc(BODY))
    assert calls[0] == n
    monkeypatch.setattr(fastpath, "library", lambda: object())  # as after a registry change
    compile_document(_doc(BODY))
    assert calls[0] == 2 * n


def test_form_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "FORM_CACHE_SIZE", 3)
    calls = _count_compiles(monkeypatch)
    ops = ["relu", "sigmoid", "tanh", "exp", "abs", "neg", "sqr", "sign"]
    lines = ["x = external(shape = [2, 3]);"] + [f"t{i} = {op}({'x' if i == 0 else f't{i - 1}'});"
                                                  for i, op in enumerate(ops)] + ["y = copy(t7);"]
    text = _doc("\n".join(lines))
    assert check(text) == "ok"
    assert len(fastpath._forms) <= 3
    n = calls[0]
    compile_document(text)
    assert len(fastpath._forms) <= 3
    assert calls[0] > n  # most forms were evicted: compiled again, with the same result
    assert check(text) == "ok"
    fastpath.clear_caches()
    assert not fastpath._forms


def test_plans_derived_by_substituting_numbers() -> None:
    """Statements differing in a scalar argument, a scalar attribute or the items of a flat
    list take the first plan of their form with the numbers in place: values, Python
    types, fresh lists, shapes and the general pipeline's errors must all be the
    statement's own."""
    lines = ["x = external(shape = [2, 3, 4]);"]
    for i, (a, b) in enumerate([(6, 4), (3, 8), (24, 1), (-1, 2), (0, 12), (2, -1)]):
        lines.append(f"r{i} = reshape(x, shape = [{a}, {b}]);")
    for i, alpha in enumerate(["0.1", "0.25", "-0.0", "1e3", "0.0"]):
        lines.append(f"l{i} = leaky_relu(x, alpha = {alpha});")
    for i, (axes, begin, end) in enumerate([("[1]", "[0]", "[2]"), ("[2]", "[1]", "[-1]"), ("[0]", "[1]", "[2]"),
                                            ("[1]", "[0]", "[0]")]):
        lines.append(f"s{i} = slice(x, axes = {axes}, begin = {begin}, end = {end});")
    for i, v in enumerate(["2.0", "0.5", "-3.0", "1e-9"]):
        lines.append(f"m{i} = mul(x, {v});")
    lines.append("y = sum_reduce(x, axes = [0, 2]);")
    lines.append("z = sum_reduce(x, axes = [1]);")
    text = _doc("\n".join(lines), outputs="y, z")
    assert took_fast_path(text)
    assert check(text) == "ok"
    g = compile_document(text)
    ops = {o.outputs["output" if "output" in o.outputs else next(iter(o.outputs))]: o for o in g.operations}
    assert [g.tensors[f"r{i}"].shape for i in range(6)] == [(6, 4), (3, 8), (24, 1), (12, 2), (2, 12), (2, 12)]
    assert ops["r3"].attribs["shape"] == [-1, 2] and ops["r3"].attribs["shape"] is not ops["r4"].attribs["shape"]
    assert [ops[f"l{i}"].attribs["alpha"] for i in range(5)] == [0.1, 0.25, -0.0, 1000.0, 0.0]
    assert str(ops["l2"].attribs["alpha"]) == "-0.0"
    assert [g.tensors[f"s{i}"].shape for i in range(4)] == [(2, 2, 4), (2, 3, 2), (1, 3, 4), (2, 3, 4)]  # end 0: to the end
    assert [ops[f"m{i}"].inputs["y"] for i in range(4)] == [2.0, 0.5, -3.0, 1e-9]
    assert g.tensors["y"].shape == (1, 3, 1) and g.tensors["z"].shape == (2, 1, 4)
    # invalid numbers in a derived plan: the general pipeline's errors
    for bad in ("shape = [5, 5]", "shape = [-1, -1]", "shape = [2.0, 12]"):
        assert check(text.replace("shape = [0, 12]", bad)) == "error"
    assert check(text.replace("axes = [0, 2]", "axes = [0, 7]")) == "error"
    assert check(text.replace("alpha = 1e3", "alpha = 1")) == "error"


def test_shapes_of_delegated_statements_are_memoised_by_input_shapes() -> None:
    """Calls of a document fragment are expanded by the general machinery and their
    operations shaped through a memo keyed on operation, attributes and input shapes: calls
    on tensors of other shapes, and with other attribute values, get their own shapes."""
    text = ("version 1.0;\nextension KHR_enable_fragment_definitions;\n"
            "fragment f( a: tensor<scalar>, k: integer ) -> ( b: tensor<scalar> )\n"
            "{ t = mul(a, 0.5); u = sum_reduce(t, axes = [k]); b = sigmoid(u); }\n"
            "graph G( x, z ) -> ( y, w, v, q )\n{\n  x = external(shape = [2, 3, 4]);\n"
            "  z = external(shape = [5, 6]);\n  y = f(x, k = 1);\n  w = f(z, k = 1);\n  v = f(x, k = 2);\n"
            "  q = f(x, k = 1);\n}\n")
    assert took_fast_path(text)
    assert check(text) == "ok"
    g = compile_document(text)
    assert [g.tensors[n].shape for n in ("y", "w", "v", "q")] == [(2, 1, 4), (5, 1), (2, 3, 1), (2, 1, 4)]
    assert check(text.replace("w = f(z, k = 1)", "w = f(z, k = 2)")) == "error"  # axis 2 of a rank-2 tensor
