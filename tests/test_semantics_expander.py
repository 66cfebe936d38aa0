"""Expansion: what is expanded, deterministic naming, provisional spellings mapped back."""

from __future__ import annotations

import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.semantics.frontend import compile_document

HDR = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"

FC = """version 1.0;
graph G( input ) -> ( output )
{
    input = external(shape = [1, 10]);
    w = variable(shape = [5, 10], label = 'fc/w');
    b = variable(shape = [1, 5], label = 'fc/b');
    fc = linear(input, w, b);
    output = softmax(fc);
}
"""


def ops(g):
    return [(op.op, op.outputs, op.inputs) for op in g.operations]


def test_standard_compounds_stay_atomic_by_default():
    g = compile_document(FC)
    assert [op.op for op in g.operations] == ["external", "variable", "variable", "linear", "softmax"]
    assert g.operations[4].attribs == {"axes": [1]}  # default filled in


def test_lowered_matches_the_official_worked_example():
    g = compile_document(FC, lowered=["linear", "softmax", "max"])
    assert [(op.op, op.output_names()) for op in g.operations[3:]] == [
        ("matmul", ["matmul1"]), ("add", ["fc"]), ("max_reduce", ["max_reduce1"]), ("sub", ["sub1"]),
        ("exp", ["exp1"]), ("sum_reduce", ["sum_reduce1"]), ("div", ["output"])]
    assert g.operations[3].attribs == {"transposeA": False, "transposeB": True}
    assert g.tensors["max_reduce1"].shape == (1, 1) and g.tensors["output"].shape == (1, 5)


def test_expand_all_and_atomic():
    g = compile_document(FC, expand_all=True)
    assert "linear" not in [op.op for op in g.operations] and "softmax" not in [op.op for op in g.operations]
    g = compile_document(FC, expand_all=True, atomic=["softmax"])
    assert [op.op for op in g.operations][-1] == "softmax"


def test_custom_fragments_always_expand_and_results_take_caller_names():
    text = HDR + """
fragment block( x: tensor<scalar>, k: scalar ) -> ( y: tensor<scalar>, z: tensor<scalar> )
{
    t = relu(x);
    y = t * k;
    z = t;
}
graph G( x ) -> ( a, b )
{
    x = external(shape = [2, 2]);
    a, b = block(x, k = 2.0);
}
"""
    g = compile_document(text)
    assert ops(g)[1:] == [("relu", {"y": "relu1"}, {"x": "x"}), ("mul", {"z": "a"}, {"x": "relu1", "y": 2.0}),
                          ("copy", {"y": "b"}, {"x": "relu1"})]
    assert g.operations[3].dtype == "scalar"
    assert all(op.location is not None and op.location.line is not None for op in g.operations)


def test_generated_names_skip_graph_identifiers():
    text = HDR + """
graph G( x ) -> ( relu1 )
{
    x = external(shape = [2]);
    relu2 = relu(relu(x));
    relu1 = relu(relu2);
}
"""
    g = compile_document(text)
    assert [op.output_names()[0] for op in g.operations] == ["x", "relu3", "relu2", "relu1"]


def test_array_results_and_copy_n():
    text = HDR + """
graph G( x ) -> ( a, b, c )
{
    x = external(shape = [4, 2]);
    [a, b] = split(x, axis = 0, ratios = [1, 3]);
    c = concat(copy_n(b, times = 2), axis = 1);
    [d, e] = copy_n(a, times = 2);
}
""".replace("-> ( a, b, c )", "-> ( a, b, c, d, e )")
    g = compile_document(text, lowered=["copy_n"])
    assert g.tensors["a"].shape == (1, 2) and g.tensors["b"].shape == (3, 2)
    assert [op.op for op in g.operations] == ["external", "split", "concat", "copy", "copy"]
    assert g.operations[2].inputs["values"] == ["b", "b"]
    assert [op.outputs for op in g.operations[3:]] == [{"y": "d"}, {"y": "e"}]
    assert g.tensors["c"].shape == (3, 4) and g.tensors["e"].shape == (1, 2)


def test_split_into_single_identifier_is_invalid_in_graph_but_fine_nested():
    text = HDR + """
graph G( x ) -> ( c )
{
    x = external(shape = [4, 2]);
    c = concat(split(x, axis = 0, ratios = [1, 1]), axis = 1);
}
"""
    g = compile_document(text)
    assert g.operations[1].output_names() == ["split1_1", "split2_2"] and g.tensors["c"].shape == (2, 4)


def test_generic_binding_and_explicit_types():
    text = HDR + """
graph G( x ) -> ( y, z )
{
    x = external<integer>(shape = [2]);
    c = constant<integer>(shape = [2], value = [1, 2]);
    m = constant<logical>(shape = [2], value = [true, false]);
    y = select(m, x, c);
    z = cast<scalar>(y);
}
"""
    g = compile_document(text)
    sel = g.operations[3]
    assert sel.op == "select" and sel.dtype == "integer" and g.tensors["y"].dtype == "integer"
    assert g.tensors["x"].dtype == "integer" and g.tensors["z"].dtype == "scalar"


def test_provisional_spellings_map_to_final_operations():
    text = """version 1.0
graph G( a, b ) -> ( c, d, e )
{
    a = external(shape = [2, 3])
    b = external(shape = [4, 3])
    c = matmul(a, b, trA = false, trB = true)
    d = transpose(c, perm = [1, 0])
    e = idn(d)
}
"""
    g = compile_document(text)
    assert [(op.op, op.attribs) for op in g.operations[2:]] == [
        ("matmul", {"transposeA": False, "transposeB": True}), ("transpose", {"axes": [1, 0]}), ("copy", {})]
    assert g.tensors["d"].shape == (4, 2)


def test_provisional_planewise_conv_is_grouped_conv():
    text = """version 1.0
graph G( x ) -> ( y )
{
    x = external(shape = [1, 3, 8, 8])
    w = variable(shape = [3, 1, 3, 3], label = 'w')
    y = planewise_conv(x, w)
}
"""
    g = compile_document(text)
    assert g.operations[-1].op == "conv" and g.operations[-1].attribs["groups"] == 0
    assert g.tensors["y"].shape == (1, 3, 8, 8)


def test_extension_operations_need_their_extension():
    body = "graph G( x ) -> ( y )\n{\n    x = external<integer>(shape = [4]);\n    y = cvm_relu(x);\n}\n"
    with pytest.raises(NNEFXError) as info:
        compile_document("version 1.0;\n" + body)
    assert "undefined operation 'cvm_relu'" in info.value.message
    g = compile_document("version 1.0;\nextension nnefx_cvm;\n" + body, shapes=False)
    assert g.operations[-1].op == "cvm_relu"


def test_expansion_is_deterministic():
    a = compile_document(FC, expand_all=True)
    b = compile_document(FC, expand_all=True)
    assert ops(a) == ops(b)


NESTED = HDR + """
fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
  n = 1 + 2;
  t = add(add(x, x), x);
  u = t * 2.0;
  v = relu(u) + exp(u);
  y = v;
}
graph G( x ) -> ( y, z )
{
  x = external(shape = [1]);
  y = f(x);
  z = add(relu(x), f(x));
}
"""


def test_nested_compound_results_are_named_after_the_compound():
    g = compile_document(NESTED)
    assert [(op.op, op.output_names()[0]) for op in g.operations] == [
        ("external", "x"), ("add", "add1"), ("add", "add2"), ("mul", "mul1"), ("relu", "relu1"), ("exp", "exp1"),
        ("add", "add3"), ("copy", "y"), ("relu", "relu2"), ("add", "add4"), ("add", "add5"), ("mul", "mul2"),
        ("relu", "relu3"), ("exp", "exp2"), ("add", "add6"), ("copy", "f1"), ("add", "z")]


def test_naming_matches_the_official_parser():
    nnef = pytest.importorskip("nnef")
    theirs = nnef.parse_string(NESTED, lowered=["f"])
    ours = compile_document(NESTED)
    assert [(op.name, dict(op.inputs), dict(op.outputs)) for op in theirs.operations] == \
        [(op.op, op.inputs, op.outputs) for op in ours.operations]


def test_literals_bound_to_tensor_parameters_stay_tensors():
    text = HDR + """
fragment g( a: tensor<scalar>, b: tensor<scalar> ) -> ( y: tensor<scalar> )
{
  y = a - b;
}
graph G( x ) -> ( y )
{
  x = external(shape = [1]);
  y = g(1.0, 0.5);
}
"""
    g = compile_document(text)
    assert [(op.op, op.inputs) for op in g.operations][1:] == [("sub", {"x": 1.0, "y": 0.5})]
    assert g.tensors["y"].shape == ()


def test_provisional_short_window_arrays_are_completed_with_ones():
    text = """version 1.0
graph G( x ) -> ( y, z )
{
    x = external(shape = [1, 3, 8, 8])
    w = variable(shape = [4, 3, 3, 3], label = 'w')
    y = conv(x, w, stride = [2])
    z = max_pool(x, size = [1, 1, 2], stride = [1, 1, 2])
}
"""
    g = compile_document(text)
    assert g.operations[2].attribs["stride"] == [2, 1]
    assert g.operations[3].attribs["size"] == [1, 1, 2, 1] and g.operations[3].attribs["stride"] == [1, 1, 2, 1]
    assert g.tensors["y"].shape == (1, 4, 4, 8) and g.tensors["z"].shape == (1, 3, 4, 8)
    with pytest.raises(NNEFXError) as info:
        compile_document(text.replace("stride = [2])", "padding = [(1, 1)])"))
    assert "padding" in info.value.message and info.value.location.line == 6


COMPOUNDS_DOC = """version 1.0;
graph G( x ) -> ( a1, a2, a3, a4, a5, a6, a7, a8, a9, b2, b3, b4, b5, b6, b7, b8, b9, c1, c2, c3, c4, c5, c6,
                  c8, c9, d1, d2, d3, d4, d5, d6, d8, d9, e1, e2, e3, e4, e5, e6 )
{
    x = external(shape = [1, 4, 8, 8]);
    w = variable(shape = [4, 1, 3, 3], label = 'w');
    pw = variable(shape = [6, 4, 1, 1], label = 'pw');
    m = variable(shape = [1, 4], label = 'm');
    a1 = max_pool(x, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore');
    a2 = avg_pool(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);
    a3 = rms_pool(x, size = [1, 1, 2, 2]);
    a4 = batch_normalization(x, m, m, m, m, epsilon = 0.001);
    a5 = l2_normalization(x, axes = [1], bias = 1.0);
    (a6, a7) = moments(x, axes = [2, 3]);
    a8 = add_n([x, a4, a5]);
    a9 = separable_conv(x, w, pw);
    b2 = clamp(x, 0.0, 1.0);
    b3 = leaky_relu(x, alpha = 0.1);
    b4 = elu(x);
    b5 = prelu(x, m);
    b6 = local_response_normalization(x, size = [1, 3, 1, 1]);
    b7 = nearest_upsample(x, factor = [2, 2]);
    b8 = area_downsample(x, factor = [2, 2]);
    (b9, c1) = max_pool_with_index(x, size = [1, 1, 2, 2], stride = [1, 1, 2, 2]);
    c2 = mean_reduce(x, axes = [1]);
    c3 = gelu(x);
    c4 = silu(x);
    c5 = softplus(x);
    c6 = min_max_linear_quantize(x, min = 0.0, max = 1.0, bits = 8, signed = false, symmetric = false);
    c8 = linear_quantize(x, min = 0.0, max = 1.0, bits = 8);
    c9 = local_contrast_normalization(x, size = [1, 1, 3, 3]);
    d1 = sigmoid(x);
    d2 = selu(x);
    d3 = nearest_downsample(x, factor = [2, 2]);
    d4 = local_variance_normalization(x, size = [1, 1, 3, 3]);
    d5 = local_mean_normalization(x, size = [1, 1, 3, 3]);
    d6 = l1_normalization(x, axes = [1]);
    d8 = softmax(x);
    d9 = rsqrt(x); e1 = log2(x); e2 = sqr(x); e3 = rsqr(x); e4 = sqrt(x); e5 = min(x, a2); e6 = max(x, 1.0);
}
"""


def test_every_standard_compound_expands_like_the_official_parser():
    nnef = pytest.importorskip("nnef")
    from nnefx.ops import registry

    compounds = [op.name for op in registry.all_ops("nnef") if op.compound]
    ours = compile_document(COMPOUNDS_DOC, lowered=compounds, shapes=False)
    assert not {op.op for op in ours.operations} & set(compounds)
    theirs = nnef.parse_string(COMPOUNDS_DOC, lowered=compounds)

    def norm(v):
        if hasattr(v, "tolist"):
            return v.tolist()
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(norm(x) for x in v)
        return round(v, 5) if isinstance(v, float) else v

    assert [(op.name, norm(dict(op.inputs)), norm(dict(op.outputs)), norm(dict(op.attribs)), op.dtype)
            for op in theirs.operations] == \
        [(op.op, norm(op.inputs), norm(op.outputs), norm(op.attribs), op.dtype) for op in ours.operations]
