"""The flat-document fast path must be invisible: same graph, same errors as the general pipeline.

For every document (the whole NNEF fixture corpus, the generated differential corpus, one
document per registered operation, and hypothesis-built flat documents with syntactic
noise and mutations) ``compile_document`` runs twice, with the fast path on and forced
off, and the two outcomes are compared field by field with Python types (``1 == 1.0 ==
True`` is not equal here), dict orders and source locations included; errors must have the
same message and location.  Separate checks make sure the fast path is actually *taken*
for the flat documents (otherwise the comparison would be vacuous).
"""

from __future__ import annotations

import math
import pathlib
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnefx.diagnostics import NNEFXError
from nnefx.graph import Graph
from nnefx.ops import registry
from nnefx.semantics import fastpath
from nnefx.semantics.frontend import compile_document

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _strict_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast-path bug must fail the test, not quietly fall back to the general pipeline."""
    monkeypatch.setattr(fastpath, "STRICT", True)


def _same(a: Any, b: Any, where: str) -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__} ({a!r} vs {b!r})"
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_graph(fast: Graph, full: Graph) -> None:
    _same(fast.name, full.name, "name")
    _same(fast.inputs, full.inputs, "inputs")
    _same(fast.outputs, full.outputs, "outputs")
    assert list(fast.tensors) == list(full.tensors)
    for name, t in full.tensors.items():
        u = fast.tensors[name]
        for field in ("name", "dtype", "shape", "data", "quant"):
            _same(getattr(u, field), getattr(t, field), f"tensor {name}.{field}")
    assert len(fast.operations) == len(full.operations)
    for i, (p, q) in enumerate(zip(fast.operations, full.operations, strict=True)):
        for field in ("op", "inputs", "outputs", "attribs", "dtype", "location"):
            _same(getattr(p, field), getattr(q, field), f"operation {i} ({q.op}).{field}")


def outcome(text: str, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", compile_document(text, **kw)
    except NNEFXError as exc:
        return "error", (type(exc), str(exc), exc.location)


def took_fast_path(text: str, **kw: Any) -> bool:
    options = dict(file=None, dialect=None, lowered=None, expand_all=False, atomic=None, input_shapes=None,
                   shapes=True)
    options.update({k: v for k, v in kw.items() if k in options})
    return fastpath.compile_if_flat(text, **options) is not None


def check(text: str, **kw: Any) -> str:
    """Compare the fast and the forced general pipeline; returns the verdict."""
    fast = outcome(text, **kw)
    with fastpath.disabled():
        full = outcome(text, **kw)
    assert fast[0] == full[0], f"fast path: {fast[1]!r}; general pipeline: {full[1]!r}"
    if fast[0] == "ok":
        assert_same_graph(fast[1], full[1])
    else:
        assert fast[1] == full[1]
    return fast[0]


# --- corpus ---------------------------------------------------------------------------------

def _corpus() -> list[tuple[str, str]]:
    docs = [(f"{p.parent.name}/{p.name}", p.read_text()) for p in sorted(FIXTURES.glob("*/*.nnef"))]
    docs += [(f"{p.parent.parent.name}/{p.parent.name}", p.read_text()) for p in sorted(FIXTURES.glob("*/*/graph.nnef"))]
    return docs


CORPUS = _corpus()


def _generated() -> list[tuple[str, str]]:
    try:
        from test_differential_corpus import generated_cases
    except Exception:  # the official package is missing: the generators live with its tests
        return []
    return generated_cases()


GENERATED = _generated()


@pytest.mark.parametrize("case_id,text", CORPUS, ids=[c for c, _ in CORPUS])
def test_fixture_corpus_same_as_general_pipeline(case_id: str, text: str) -> None:
    check(text)
    check(text, file="model/graph.nnef")


@pytest.mark.parametrize("case_id,text", CORPUS, ids=[c for c, _ in CORPUS])
def test_fixture_corpus_with_options(case_id: str, text: str) -> None:
    check(text, shapes=False)
    check(text, expand_all=True)
    check(text, lowered=["linear", "batch_normalization", "max_pool", "avg_pool", "softmax"])


@pytest.mark.skipif(not GENERATED, reason="differential generators need the official nnef package")
def test_generated_differential_corpus_same_as_general_pipeline() -> None:
    valid = taken = 0
    for _, text in GENERATED:
        if check(text) == "ok":
            valid += 1
            taken += took_fast_path(text)
    assert valid > len(GENERATED) // 2
    assert taken == valid  # every valid generated document is flat: the comparison is not vacuous


def test_fast_path_is_taken_for_every_valid_flat_fixture() -> None:
    flat = 0
    for case_id, text in CORPUS:
        if "fragment" in text or not re.match(r"\s*version\s+1\.0\s*;", text):
            continue
        with fastpath.disabled():
            if outcome(text)[0] != "ok":
                continue
        assert took_fast_path(text), case_id
        flat += 1
    assert flat >= 40


# --- one document per registered operation ---------------------------------------------------

HEADER = "version 1.0;\nextension nnefx_cvm, nnefx_ir, nnefx_ops;\n"


def _op_document(op: registry.OpDef) -> str | None:
    import numpy as np

    from _ops_samples import SAMPLES, nnef_literal

    if op.name not in SAMPLES or op.name in ("update", "constant"):
        return None
    args, attrs = SAMPLES[op.name]
    kinds = {np.dtype(np.float32): "scalar", np.dtype(np.float64): "scalar", np.dtype(np.int64): "integer",
             np.dtype(np.int32): "integer", np.dtype(np.bool_): "logical"}
    lines, refs, inputs = [], [], []
    for value in args:
        items = value if isinstance(value, list) else [value]
        names = []
        for item in items:
            arr = np.asarray(item)
            shape = list(arr.shape) or [1]
            name = f"t{len(inputs)}"
            inputs.append(name)
            lines.append(f"{name} = external<{kinds.get(arr.dtype, 'scalar')}>(shape = {shape});")
            names.append(name)
        refs.append("[" + ", ".join(names) + "]" if isinstance(value, list) else names[0])
    kwargs = [f"{k} = {nnef_literal(v)}" for k, v in attrs.items() if k != "dtype"]
    results = op.declaration.split("->", 1)[1].split("{")[0]
    outs = [f"r{k}" for k in range(results.count(":"))]
    if "[]" in results:  # a tensor-array result: unpack it into as many names as the sample gives
        return None
    call = f"{op.name}({', '.join(refs + kwargs)})"
    # the same statement twice with other names: the second one runs from the plan
    again = [f"s{k}" for k in range(len(outs))]
    lines.append(f"{', '.join(outs)} = {call};")
    lines.append(f"{', '.join(again)} = {call};")
    return (HEADER + f"graph G( {', '.join(inputs)} ) -> ( {', '.join(outs + again)} )\n{{\n    "
            + "\n    ".join(lines) + "\n}\n")


OP_DOCS = [(op.name, doc) for op in registry.all_ops() if (doc := _op_document(op)) is not None]


def test_every_registered_operation_same_as_general_pipeline() -> None:
    assert len(OP_DOCS) > 100
    verdicts = {name: check(doc) for name, doc in OP_DOCS}
    ok = [name for name, v in verdicts.items() if v == "ok"]
    assert len(ok) > 0.8 * len(OP_DOCS)
    for name, doc in OP_DOCS:
        if verdicts[name] == "ok":
            assert took_fast_path(doc), name


# --- targeted cases ---------------------------------------------------------------------------

def _doc(body: str, inputs: str = "x", outputs: str = "y", header: str = "version 1.0;\n") -> str:
    return f"{header}graph G( {inputs} ) -> ( {outputs} )\n{{\n{body}\n}}\n"


SAME_TEMPLATE = _doc("""    x = external(shape = [2, 3]);
    z = external(shape = [2, 3]);
    a = add(x, x);
    b = add(x, z);
    c = add(z, b);
    y = concat([a, b, c, a], axis = 0);""", "x, z")


def test_repeated_slots_do_not_alias() -> None:
    assert check(SAME_TEMPLATE) == "ok"
    assert took_fast_path(SAME_TEMPLATE)
    g = compile_document(SAME_TEMPLATE)
    assert g.operations[2].inputs == {"x": "x", "y": "x"}
    assert g.operations[3].inputs == {"x": "x", "y": "z"}
    assert g.operations[-1].inputs == {"values": ["a", "b", "c", "a"]}
    assert g.tensors["y"].shape == (8, 3)


def test_attribute_lists_are_not_shared_between_operations() -> None:
    text = _doc("""    x = external(shape = [1, 2, 8, 8]);
    a = max_pool(x, size = [1, 1, 3, 3], padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');
    y = max_pool(a, size = [1, 1, 3, 3], padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');""")
    g = compile_document(text)
    assert took_fast_path(text)
    first, second = g.operations[1].attribs, g.operations[2].attribs
    assert first == second
    assert first["size"] is not second["size"] and first["padding"] is not second["padding"]


@pytest.mark.parametrize("body", [
    # layout: comments, newlines inside statements, several statements on a line
    "  # leading comment\n  x = external(shape = [4]);  # trailing\n  y\n   =\n  relu(\n x\n );",
    "x = external(shape = [4]); t = relu(x); y = sigmoid(t);",
    # named tensor arguments in another order, literal tensor arguments
    "x = external(shape = [2, 4]);\n t = add(y = x, x = 1.5);\n y = select(true, t, x);",
    # generic externals, logical tensors
    "x = external<logical>(shape = [3]);\n t = not(x);\n y = select(t, 1.0, 2.0);",
    # tuple and array left-hand sides
    "x = external(shape = [4, 6]);\n [a, b] = split(x, axis = 1, ratios = [1, 2]);\n y = concat([b, a], axis = 1);",
    "x = external(shape = [4, 6]);\n (a, b) = moments(x, axes = [1]);\n y = add(a, b);",
    "x = external(shape = [4, 6]);\n a, b = moments(x, axes = [1]);\n y = add(a, b);",
    # string escapes and strings with odd characters
    "x = external(shape = [1]);\n v = variable(shape = [1], label = 'a\\\\b');\n y = add(x, v);",
    "x = external(shape = [1]);\n v = variable(shape = [1], label = \"it's\");\n y = add(x, v);",
    "x = external(shape = [1]);\n v = variable(shape = [1], label = 'w#1;)');\n y = add(x, v);",
    # errors: each must be the general pipeline's
    "x = external(shape = [4]);\n y = relu(q);",
    "x = external(shape = [4]);\n y = relu(x);\n y = relu(x);",
    "x = external(shape = [4]);\n y = relu(x, alpha = 1.0);",
    "x = external(shape = [4]);\n y = add(x, external);",
    "x = external(shape = [4]);\n y = conv(x, x);",
    "x = external(shape = [0]);\n y = relu(x);",
    "x = external(shape = [4]);\n v = variable(shape = [4], label = '');\n y = add(x, v);",
    "x = external(shape = [4]);\n v = variable(shape = [4], label = 'a');\n w = variable(shape = [5], label = 'A');"
    "\n y = add(x, v);",
    "x = external(shape = [4]);\n t = relu(x);\n y = update(t, x);",
    "x = external(shape = [4]);\n v = variable(shape = [4], label = 'v');\n y = update(v, x);",
    "x = external(shape = [4]);\n v = variable(shape = [4], label = 'v');\n u = update(v, x);\n y = relu(u);",
    "x = external(shape = [4]);\n y = relu(x)",
    "x = external(shape = [4]);\n y = relu(x);\n}",
    "x = external(shape = [4]);\n y = relu(x);\n z = relu(x);",
    "x = external(shape = [4]);\n x = relu(x);",
    "y = external(shape = [4]);\n x = relu(y);",
    "x = external(shape = [4]);\n y = relu(1e5x);",
    "x = external(shape = [4]);\n y = mul(x, 1.e5);",
    "x = external(shape = [4]);\n y = mul(x, -2);",
    "x = external(shape = [4]);\n y = mul(x, 2.0) ;  # the end",
    "x = external(shape = [4]);\n yield = relu(x);\n y = relu(x);",
    "x = external(shape = [4]);\n y = relu(x) + 1.0;",
    "x = external(shape = [4]);\n y = relu(relu(x));",
    "x = external(shape = [2, 2]);\n [a, b, c] = split(x, axis = 0, ratios = [1, 1]);\n y = relu(a);",
])
def test_targeted_documents(body: str) -> None:
    text = _doc(body)
    check(text)
    check(text, file="net.nnef")
    check(text.replace("\n", "\r\n"))


NUMBERS = _doc("""    x = external(shape = [2, 3]);
    z = external(shape = [3, 2]);
    a = reshape(x, shape = [3, 2]);
    b = reshape(x, shape = [6]);
    c = reshape(z, shape = [-1, 3]);
    d = mul(a, 2.0);
    e = mul(a, -0.0);
    f = mul(d, 0.0);
    g = mul(e, 1e999);
    h = pad(x, padding = [(1, 1), (0, 2)]);
    i = pad(x, padding = [(0, 0), (3, 0)]);
    k = constant(shape = [2], value = [1.0, 2.0]);
    l = constant(shape = [2], value = [1.0]);
    m = constant(shape = [3], value = [7.0]);
    n = clamp(x, -1.0, 1.0);
    o = clamp(x, 0.5, 100000000000000000000.0);
    p = slice(x, axes = [1], begin = [0], end = [2]);
    q = slice(x, axes = [1], begin = [1], end = [-1]);
    y = add(f, g);""", "x, z")


def test_statements_differing_in_numbers_only() -> None:
    """Numbers are filled into a compiled template: values, Python types (int, float, -0.0,
    inf) and the shapes that depend on them must all be the statement's own."""
    assert took_fast_path(NUMBERS)
    assert check(NUMBERS) == "ok"
    g = compile_document(NUMBERS)
    shapes = {n: t.shape for n, t in g.tensors.items()}
    assert shapes["a"] == (3, 2) and shapes["b"] == (6,) and shapes["c"] == (2, 3)
    assert shapes["h"] == (4, 5) and shapes["i"] == (2, 6) and shapes["p"] == (2, 2) and shapes["q"] == (2, 1)
    ops = {o.outputs[next(iter(o.outputs))]: o for o in g.operations}
    assert math.copysign(1.0, ops["e"].inputs["y"]) == -1.0 and math.copysign(1.0, ops["f"].inputs["y"]) == 1.0
    assert ops["g"].inputs["y"] == math.inf
    assert ops["k"].attribs["value"] == [1.0, 2.0] and ops["l"].attribs["value"] == [1.0]
    assert type(ops["m"].attribs["shape"][0]) is int and type(ops["m"].attribs["value"][0]) is float
    # an integer where a scalar is expected is the general pipeline's error, not a plan reuse
    check(NUMBERS.replace("d = mul(a, 2.0)", "d = mul(a, 2)"))
    check(NUMBERS.replace("p = slice(x, axes = [1], begin = [0], end = [2])",
                          "p = slice(x, axes = [1], begin = [0.0], end = [2])"))
    check(NUMBERS.replace("value = [7.0]", "value = [7]"))
    check(NUMBERS.replace("value = [7.0]", "value = [7.0, 8.0]"))


def test_variables_differing_in_their_shape() -> None:
    """nnef-tools writes one ``variable`` per weight, each with its own extents: after the
    first, a variable form's plans are derived by putting the new extents in place; every
    other extent (zero, negative, a real, a shared label with another shape) takes the
    general rules."""
    lines = ["x = external<scalar>(shape = [1, 3]);"]
    lines += [f"w{i} = variable<scalar>(shape = [{i + 1}, {(i * 7) % 5 + 1}, 3, 3], label = 'w{i}');"
              for i in range(12)]
    lines += [f"b{i} = variable(shape = [{i + 2}], label = 'b{i}');" for i in range(6)]
    lines += ["s = variable(shape = [2, 3], label = 's');", "t = variable(shape = [3, 2], label = 'S');",
              "y = add(x, x);"]
    text = _doc("\n".join(lines))
    g = compile_document(text.replace("label = 'S'", "label = 'u'"))
    assert g.tensors["w5"].shape == (6, 1, 3, 3) and g.operations[6].attribs["shape"] == [6, 1, 3, 3]
    assert g.tensors["b3"].shape == (5,) and g.tensors["t"].shape == (3, 2)
    assert g.operations[1].attribs["shape"] is not g.operations[2].attribs["shape"]
    assert took_fast_path(text.replace("label = 'S'", "label = 'u'"))
    check(text.replace("label = 'S'", "label = 'u'"))
    check(text)  # labels 's' and 'S' share data but not their shape: the general pipeline's error
    for bad in ("[0, 1, 3, 3]", "[-1, 1, 3, 3]", "[2.0, 1, 3, 3]", "[true, 1, 3, 3]", "[]", "[2, 1, 3, 3, 1]"):
        check(text.replace("[6, 1, 3, 3]", bad))


def test_unique_literals_document() -> None:
    """Every statement with its own literal (the fast path's worst case)."""
    body = ["x = external(shape = [2, 2]);"] + [f"t{i} = mul({'x' if i == 0 else f't{i - 1}'}, {1 + i / 7!r});"
                                                 for i in range(40)] + ["y = relu(t39);"]
    text = _doc("\n".join(body))
    assert took_fast_path(text)
    check(text)


def test_small_caches_give_the_same_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "_CACHE_LIMIT", 2)
    for text in (NUMBERS, SAME_TEMPLATE, OP_DOCS[0][1], CORPUS[-1][1]):
        check(text)
    assert took_fast_path(NUMBERS)


def test_operator_expressions_extension() -> None:
    header = "version 1.0;\nextension KHR_enable_operator_expressions;\n"
    for body in ("x = external(shape = [4]);\n y = mul(x, -2.0);", "x = external(shape = [4]);\n y = x * 2.0;",
                 "x = external(shape = [4]);\n y = relu(x + x);",
                 "x = external(shape = [4]);\n y = pad(x, padding = [(1 + 1, 2)]);"):
        check(_doc(body, header=header))
    assert took_fast_path(_doc("x = external(shape = [4]);\n y = mul(x, -2.0);", header=header))


def test_input_shapes_and_quantization() -> None:
    text = _doc("    x = external(shape = [0, 3]);\n    w = variable(shape = [4, 3], label = 'w');\n"
                "    y = linear(x, w);")
    assert took_fast_path(text)
    check(text)
    check(text, input_shapes={"x": (5, 3)})
    check(text, input_shapes={"x": (5, 3, 1)})
    check(text, input_shapes={"w": (4, 3)})
    quant = "\"x\": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n\"w\": zero_point_linear_quantize(" \
            "zero_point = 0, scale = 0.5, bits = 8, signed = true, symmetric = false);"
    check(text, quant=quant)
    check(text, quant="\"q\": linear_quantize(min = 0.0, max = 1.0, bits = 8);")


def test_provisional_documents_use_the_general_pipeline() -> None:
    prov = "version 1.0\ngraph G( x ) -> ( y )\n{\n  x = external(shape = [2]);\n  y = relu(x)\n}\n"
    assert not took_fast_path(prov)
    check(prov)


def test_statements_read_by_the_general_machinery() -> None:
    """Calls of document fragments (expanded), nested invocations and the like are read one
    by one by the general parser/checker/expander on the live graph: generated names,
    counters, reserved names and locations must be the general pipeline's."""
    frag = ("version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
            "fragment f( a: tensor<scalar> ) -> ( b: tensor<scalar> ) { t = relu(a); b = add(t, a); }\n"
            "graph G( x ) -> ( y, mul1 )\n{\n  x = external(shape = [2]);\n  r = f(x);\n  s = exp(relu(r));\n"
            "  mul1 = mul(s, 2.0);\n  q = f(mul(s, r));\n  y = f(q);\n}\n")
    assert took_fast_path(frag)
    assert check(frag) == "ok"
    check(frag, shapes=False)
    check(frag, expand_all=True)
    check(frag, input_shapes={"x": (2,)})
    check(frag.replace("y = f(q)", "y = f(q, 1.0)"))
    check(frag.replace("y = f(q)", "y = f(zz)"))
    check(frag.replace("y = f(q)", "y = f(relu1)"))  # a generated name is not a graph identifier
    check(frag.replace("s = exp(relu(r))", "s = exp(relu(r, 2))"))


def test_unexpected_fast_path_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise TypeError("a fast-path bug")

    monkeypatch.setattr(fastpath, "_body", broken)
    with pytest.raises(TypeError):
        compile_document(SAME_TEMPLATE)  # STRICT (set for these tests): the bug shows
    monkeypatch.setattr(fastpath, "STRICT", False)
    with fastpath.disabled():
        full = compile_document(SAME_TEMPLATE)
    assert_same_graph(compile_document(SAME_TEMPLATE), full)  # users get the general pipeline's result


FRAGMENT_HEADER = ("version 1.0;\nextension KHR_enable_fragment_definitions;\n"
                   "fragment f( a: tensor<scalar> ) -> ( b: tensor<scalar> ) { b = relu(a); }\n")


@pytest.mark.parametrize("header,fast", [
    (FRAGMENT_HEADER, True),  # defined, not used by the graph: the fast path reads the graph
    (FRAGMENT_HEADER.replace("relu(a)", "relu(q)"), False),  # an error in a fragment body
    (FRAGMENT_HEADER.replace("KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"), False),
    (FRAGMENT_HEADER + "fragment f( a: tensor<scalar> ) -> ( b: tensor<scalar> ) { b = a; }\n", False),
    (FRAGMENT_HEADER.replace("fragment f", "fragment relu"), False),
    (FRAGMENT_HEADER + "# graph G( x ) -> ( y ) {\n", True),
    ("version 1.0; # comment\nextension # split\n KHR_enable_fragment_definitions;\n", True),
])
def test_documents_with_a_prologue(header: str, fast: bool) -> None:
    text = header + "graph G( x ) -> ( y )\n{\n  x = external(shape = [2]);\n  y = relu(x);\n}\n"
    check(text)
    assert took_fast_path(text) is fast
    used = text.replace("y = relu(x)", "y = f(x)")
    if check(used) == "ok":
        assert took_fast_path(used) is fast  # the call is expanded by the general machinery


def test_switch_forces_the_general_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(fastpath, "compile_flat", lambda *a, **k: calls.append(1) or (_ for _ in ()).throw(
        fastpath.Bail("x")))
    with fastpath.disabled():
        compile_document(SAME_TEMPLATE)
    assert calls == []
    compile_document(SAME_TEMPLATE)
    assert calls == [1]


# --- hypothesis: flat documents with noise and mutations ---------------------------------------

_UNARY = ["relu", "sigmoid", "exp", "abs", "neg", "copy", "tanh"]
_BINARY = ["add", "mul", "sub", "max", "min"]
_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"version", "graph", "fragment", "tensor", "integer", "scalar", "logical", "string",
                        "shape_of", "length_of", "range_of", "for", "in", "yield", "if", "else", "true", "false",
                        "extension"})
_GAPS = st.sampled_from([" ", "", "  ", "\n", "\t", " # note\n", "\n\n    "])


@st.composite
def flat_documents(draw: st.DrawFn) -> str:
    """Mostly valid flat documents (operands are drawn among tensors of the same shape,
    tracked as shape classes), with layout noise and, in half of them, a mutation."""
    names = draw(st.lists(_NAMES, min_size=4, max_size=14, unique=True))
    gap = lambda: draw(_GAPS)  # noqa: E731
    c = draw(st.sampled_from([1, 2, 4]))
    label = draw(st.sampled_from(["w", "conv/w", "x.y-z", "b1/bias", "a b", ""]))
    statements = [f"{names[0]}{gap()}={gap()}external(shape = [2, {c}, 4, 4])",
                  f"{names[1]} = variable{gap()}(shape = [{c}, {c}, 1, 1], label = {label!r})"]
    shape_class = {names[0]: 0}
    for name in names[2:]:
        a = draw(st.sampled_from(sorted(shape_class)))
        b = draw(st.sampled_from(sorted(n for n, k in shape_class.items() if k == shape_class[a])))
        new_class = False
        kind = draw(st.integers(0, 10))
        if kind == 0:
            rhs = f"{draw(st.sampled_from(_UNARY))}({gap()}{a}{gap()})"
        elif kind == 1:
            rhs = f"{draw(st.sampled_from(_BINARY))}({a},{gap()}{b})"
        elif kind == 2:
            rhs = f"mul({a}, {draw(st.sampled_from(['0.5', '2.0', '-1.0', '1e-3', '2', 'true']))})"
        elif kind == 3:
            k = draw(st.sampled_from([3, 3, 1]))
            new_class = k == 1
            rhs = (f"max_pool({a}, size = [1, 1, {k}, 3], padding = [(0, 0), (0, 0), (1, 1), (1, 1)], "
                   f"border = {draw(st.sampled_from(['ignore', 'ignore', 'x']))!r})")
        elif kind == 4:
            stride = draw(st.sampled_from([1, 1, 2]))
            new_class = stride == 2
            rhs = f"conv({a}, {names[1]}, 0.0, stride = [{stride}, 1])"
        elif kind == 5:
            new_class = True
            rhs = f"concat([{a}, {b}], axis = {draw(st.sampled_from([0, 1, 3, 4]))})"
        elif kind == 6:
            rhs = f"{'add'}(y = {a}, x = {b})"
        elif kind == 7:
            p = draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
            new_class = any(p)
            rhs = f"pad({a}, padding = [(0, 0), (0, 0), ({p[0]}, {p[1]}), ({p[2]}, {p[3]})])"
        elif kind == 8:
            lo, hi = draw(st.integers(-3, 3)), draw(st.integers(-3, 4))
            new_class = True
            rhs = f"slice({a}, axes = [{draw(st.integers(0, 4))}], begin = [{lo}], end = [{hi}])"
        elif kind == 9:  # a document fragment (expanded into several operations)
            rhs = f"g({a}{draw(st.sampled_from(['', ', k = 2.0', ', k = 1']))})"
        else:  # nested invocations
            rhs = f"relu({draw(st.sampled_from(_UNARY))}({a}))"
        statements.append(f"{name} = {rhs}")
        shape_class[name] = len(shape_class) if new_class else shape_class[a]
    body = "".join(f"    {s};{draw(_GAPS)}" for s in statements)
    fragment = ("extension KHR_enable_fragment_definitions;\n"
                "fragment g( a: tensor<scalar>, k: scalar = 0.5 ) -> ( b: tensor<scalar> )\n"
                "{\n    t = mul(a, k);\n    b = relu(t);\n}\n") if "g(" in body or draw(st.booleans()) else ""
    text = f"version 1.0;\n{fragment}graph Net( {names[0]} ) -> ( {names[-1]} )\n{{\n{body}\n}}\n"
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    mutation = draw(st.integers(0, 5))
    if mutation == 1 and len(text) > 1:  # delete a character
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + 1:]
    elif mutation == 2:  # insert a character
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(list("(),;=[]'\"#x1 .-"))) + text[i:]
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_documents())
def test_generated_flat_documents_same_as_general_pipeline(text: str) -> None:
    check(text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_documents())
def test_generated_flat_documents_without_shapes(text: str) -> None:
    check(text, shapes=False)
