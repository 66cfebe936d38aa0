"""Planner fusion of conv → (add) → relu: same results as the separate kernels, bit for bit.

Every case runs one graph three ways — fused fast backend, unfused fast backend, formal
backend — and checks fused == unfused exactly and both close to formal.  The cases pin down
when fusion must NOT happen (an intermediate that is an output, fetched, read twice or read
by another op), the broadcasting fallback, operand order and late-computed skip operands.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnefx
from nnefx.runtime.profile import Profile
from nnefx.semantics.frontend import compile_document

RNG = np.random.default_rng(7)


def graph(body: str, outputs: str, externals: dict[str, list[int]], variables: dict[str, list[int]]) -> str:
    names = ", ".join(externals)
    lines = [f"    {n} = external<scalar>(shape = {list(s)});" for n, s in externals.items()]
    lines += [f"    {n} = variable<scalar>(shape = {list(s)}, label = '{n}');" for n, s in variables.items()]
    return f"version 1.0;\ngraph g( {names} ) -> ( {outputs} )\n{{\n" + "\n".join(lines) + "\n" + body + "\n}\n"


def data(shapes: dict[str, list[int]], special: bool = False) -> dict[str, np.ndarray]:
    out = {}
    for name, shape in shapes.items():
        a = RNG.standard_normal(shape).astype(np.float32)
        if special and a.size > 4:
            flat = a.reshape(-1)
            flat[:4] = [np.nan, -0.0, 0.0, -np.inf]
        out[name] = a
    return out


def sessions(text: str, values: dict[str, np.ndarray], **kw):
    g = compile_document(text)
    fused = nnefx.Session(g, variables=values, **kw)
    plain = nnefx.Session(g, variables=values, fuse=False, **kw)
    formal = nnefx.Session(g, backend="formal", variables=values, **kw)
    return fused, plain, formal


def check(text, externals, variables, *, expect_labels, special=False, fetch=(), formal=True):
    values = data(variables)
    fused, plain, ref = sessions(text, values)
    labels = [s.label for s in fused.plan.steps]
    assert labels == expect_labels, labels
    feeds = data(externals, special)
    a = fused.run(feeds, fetch=fetch)
    b = plain.run(feeds, fetch=fetch)
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape
        # bit for bit, NaN included; -0.0 vs +0.0 distinguished
        assert np.array_equal(a[name].view(np.uint32), b[name].view(np.uint32)), name
    if formal:
        c = ref.run(feeds, fetch=fetch)
        for name in a:
            np.testing.assert_allclose(a[name], c[name], rtol=1e-4, atol=1e-4, equal_nan=True)
    return fused, feeds, a


X = {"x": [2, 3, 7, 6]}
W = {"w": [4, 3, 3, 3], "b": [1, 4]}
PAD = "padding = [(1, 1), (1, 1)]"


def test_conv_relu():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    r = relu(c);", "r", X, W)
    check(text, X, W, expect_labels=["conv+relu"], special=True)


@pytest.mark.parametrize("order", ["c, s", "s, c"])
def test_conv_add_relu_either_operand_order(order):
    ext = {**X, "s": [2, 4, 7, 6]}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add({order});\n    r = relu(a);", "r", ext, W)
    check(text, ext, W, expect_labels=["conv+add+relu"], special=True)


def test_conv_add_without_relu():
    ext = {**X, "s": [2, 4, 7, 6]}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = exp(a);", "r", ext, W)
    check(text, ext, W, expect_labels=["conv+add", "exp"])


@pytest.mark.parametrize("skip_shape", [[1, 4, 1, 1], [2, 4, 1, 1], [1, 4, 7, 6]])
def test_broadcast_skip_falls_back_to_separate_kernels(skip_shape):
    ext = {**X, "s": skip_shape}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = relu(a);", "r", ext, W)
    check(text, ext, W, expect_labels=["conv+add+relu"])


def test_literal_skip_falls_back():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, 0.5);\n    r = relu(a);", "r", X, W)
    check(text, X, W, expect_labels=["conv+add+relu"])


def test_skip_computed_after_the_conv_moves_the_step():
    # ResNet's down-sampling blocks: the shortcut conv comes after the main conv.
    ext = {"x": [2, 3, 8, 8]}
    var = {"w": [4, 3, 3, 3], "b": [1, 4], "v": [4, 3, 1, 1]}
    body = (f"    c = conv(x, w, b, {PAD}, stride = [2, 2]);\n"
            "    s = conv(x, v, 0.0, stride = [2, 2]);\n"
            "    a = add(c, s);\n    r = relu(a);")
    check(graph(body, "r", ext, var), ext, var, expect_labels=["conv", "conv+add+relu"])


def test_conv_output_that_is_a_graph_output_is_not_fused():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    r = relu(c);", "c, r", X, W)
    check(text, X, W, expect_labels=["conv", "relu"], special=True)


def test_add_output_that_is_a_graph_output_keeps_its_relu_separate():
    ext = {**X, "s": [2, 4, 7, 6]}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = relu(a);", "a, r", ext, W)
    check(text, ext, W, expect_labels=["conv+add", "relu"])


def test_fetched_intermediate_is_not_fused():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    r = relu(c);", "r", X, W)
    values = data(W)
    fused, plain, _ = sessions(text, values)
    feeds = data(X)
    a = fused.run(feeds, fetch=["c"])
    b = plain.run(feeds, fetch=["c"])
    assert np.array_equal(a["c"], b["c"]) and np.array_equal(a["r"], b["r"])
    assert (a["c"] < 0).any()  # the conv result really was fetched before the ReLU
    assert [s.label for s in fused.plan.steps] == ["conv+relu"]  # the plain plan still fuses


def test_conv_read_by_two_operations_is_not_fused():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    r = relu(c);\n    e = exp(c);\n    o = add(r, e);", "o", X, W)
    check(text, X, W, expect_labels=["conv", "relu", "exp", "add"])


def test_relu_reading_the_add_twice_is_not_fused():
    ext = {**X, "s": [2, 4, 7, 6]}
    body = f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = relu(a);\n    o = mul(r, a);"
    check(graph(body, "o", ext, W), ext, W, expect_labels=["conv+add", "relu", "mul"])


def test_add_of_a_conv_with_itself_is_not_fused():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, c);\n    r = relu(a);", "r", X, W)
    check(text, X, W, expect_labels=["conv", "add", "relu"])


def test_skip_that_is_an_input_is_not_modified():
    ext = {**X, "s": [2, 4, 7, 6]}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = relu(a);", "r", ext, W)
    fused, plain, _ = sessions(text, data(W))
    feeds = data(ext)
    before = {k: v.copy() for k, v in feeds.items()}
    fused.run(feeds)
    for k in feeds:
        assert np.array_equal(feeds[k], before[k])


def test_pointwise_strided_and_grouped_convolutions():
    ext = {"x": [3, 4, 9, 9], "s": [3, 6, 5, 5]}
    var = {"w": [6, 2, 1, 1], "b": [1, 6]}
    body = "    c = conv(x, w, b, stride = [2, 2], groups = 2);\n    a = add(s, c);\n    r = relu(a);"
    check(graph(body, "r", ext, var), ext, var, expect_labels=["conv+add+relu"], special=True)


def test_profile_and_summary_name_fused_steps():
    ext = {**X, "s": [2, 4, 7, 6]}
    text = graph(f"    c = conv(x, w, b, {PAD});\n    a = add(c, s);\n    r = relu(a);", "r", ext, W)
    fused, _, _ = sessions(text, data(W))
    assert "2 fused" in fused.plan.summary()
    p = Profile()
    fused.run(data(ext), profile=p)
    assert [r[0] for r in p.rows()] == ["conv+add+relu"]


def test_formal_backend_never_fuses():
    text = graph(f"    c = conv(x, w, b, {PAD});\n    r = relu(c);", "r", X, W)
    _, _, formal = sessions(text, data(W))
    assert [s.label for s in formal.plan.steps] == ["conv", "relu"]


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 3), cin=st.integers(1, 4), cout=st.integers(1, 5), size=st.integers(1, 7),
       k=st.sampled_from([1, 2, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1),
       residual=st.booleans(), relu=st.booleans(), skip_first=st.booleans(),
       border=st.sampled_from(["constant", "replicate"]))
def test_fused_equals_unfused(batch, cin, cout, size, k, stride, pad, residual, relu, skip_first, border):
    if not residual and not relu:
        relu = True
    out = (size + 2 * pad - k) // stride + 1
    if out < 1:
        return
    ext = {"x": [batch, cin, size, size]}
    var = {"w": [cout, cin, k, k], "b": [1, cout]}
    body = f"    c = conv(x, w, b, border = '{border}', padding = [({pad}, {pad}), ({pad}, {pad})], stride = [{stride}, {stride}]);\n"
    last = "c"
    if residual:
        ext["s"] = [batch, cout, out, out]
        body += "    a = add(s, c);\n" if skip_first else "    a = add(c, s);\n"
        last = "a"
    if relu:
        body += f"    r = relu({last});\n"
        last = "r"
    labels = ["conv" + ("+add" if residual else "") + ("+relu" if relu else "")]
    check(graph(body, last, ext, var), ext, var, expect_labels=labels, special=True, formal=False)


def test_fused_kernel_falls_back_only_when_the_skip_needs_broadcasting():
    from nnefx.ops import registry
    from nnefx.ops.sliding import fused_conv

    calls: list[str] = []
    add, relu = registry.get("add").fast_kernel, registry.get("relu").fast_kernel

    def counted(name, fn):
        def run(*args):
            calls.append(name)
            return fn(*args)
        return run

    kernel = fused_conv(registry.get("conv").fast_kernel, counted("add", add), counted("relu", relu),
                        residual=True, relu=True)
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((1, 4)).astype(np.float32)
    full = RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)  # default padding: same size
    expect = relu(add(registry.get("conv").fast_kernel(x, w, b), full))
    assert np.array_equal(kernel(x, w, b, full), expect) and calls == []
    col = RNG.standard_normal((1, 4, 1, 1)).astype(np.float32)
    expect = relu(add(col, registry.get("conv").fast_kernel(x, w, b)))
    assert np.array_equal(kernel(x, w, b, col, skip_first=True), expect) and calls == ["add", "relu"]
    # the context is reset: a plain conv call afterwards applies no epilogue
    plain = registry.get("conv").fast_kernel(x, w, b)
    assert (plain < 0).any()


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 2), cin=st.integers(1, 5), cout=st.integers(1, 6), h=st.integers(1, 9),
       w=st.integers(1, 16), fh=st.integers(1, 4), fw=st.integers(1, 4), dil=st.integers(1, 2),
       pads=st.tuples(*[st.integers(0, 3)] * 4), groups=st.sampled_from([1, "depthwise"]),
       bias=st.booleans(), relu=st.booleans(), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_wide_row_convolution_matches_the_classic_path_and_formal(batch, cin, cout, h, w, fh, fw, dil, pads,
                                                                  groups, bias, relu, stride):
    """The 'wide rows' im2col (phases for strides) against the classic gather (forced either way) and formal."""
    import nnefx.ops.sliding_conv as sliding
    from nnefx.ops import registry

    if groups == "depthwise":
        groups, cout = cin, cin
    else:
        groups = 1
    pt, pb, pl, pr = pads
    if h + pt + pb - (fh - 1) * dil < 1 or w + pl + pr - (fw - 1) * dil < 1:
        return
    x = RNG.standard_normal((batch, cin, h, w)).astype(np.float32)
    x.reshape(-1)[0] = np.nan if x.size > 3 else x.reshape(-1)[0]
    f = RNG.standard_normal((cout, cin // groups, fh, fw)).astype(np.float32)
    b = RNG.standard_normal((1, cout)).astype(np.float32) if bias else np.float32(0.0)
    attrs = dict(padding=[(pt, pb), (pl, pr)], dilation=[dil, dil], groups=groups, stride=list(stride))
    conv = registry.get("conv")
    old = sliding._WIDE_MIN_WIDTH
    try:
        sliding._WIDE_MIN_WIDTH = 1
        wide = conv.fast_kernel(x, f, b, **attrs)
        fused = sliding.fused_conv(conv.fast_kernel, None, registry.get("relu").fast_kernel,
                                   residual=False, relu=True)(x, f, b, **attrs) if relu else None
        sliding._WIDE_MIN_WIDTH = 10 ** 9
        classic = conv.fast_kernel(x, f, b, **attrs)
    finally:
        sliding._WIDE_MIN_WIDTH = old
    assert_same_sum(wide, classic, x, f, b, conv.fast_kernel, attrs)
    assert np.array_equal(np.isnan(wide), np.isnan(classic))
    if relu:
        assert np.array_equal(fused.view(np.uint32), registry.get("relu").fast_kernel(wide).view(np.uint32))
    if x.size <= 400:
        np.testing.assert_allclose(wide, conv.formal_kernel(x, f, b, **attrs), rtol=1e-4, atol=1e-4, equal_nan=True)


def assert_same_sum(a, b, x, f, bias, conv, attrs, err_msg="", extra=0.0):
    """Two float32 evaluations of one convolution agree within twice the fast kernels' documented
    bound 1e-5·S + 1e-6 (S = the convolution of the magnitudes): each may differ from the exact
    sum by that much, in a different order of additions.  A plain rtol fails on outputs that
    cancel (a −0.18 sum of 147 terms of magnitude ≈ 1 differed by 1.2e-5)."""
    scale = conv(np.abs(np.nan_to_num(x)), np.abs(f), np.abs(bias), **attrs).astype(np.float64) + np.abs(extra)
    finite = np.isfinite(a) & np.isfinite(b)
    assert np.array_equal(np.isnan(a), np.isnan(b)), err_msg
    err = np.abs(a[finite].astype(np.float64) - b[finite].astype(np.float64))
    assert np.all(err <= 2 * (1e-5 * scale[finite] + 1e-6)), f"{err_msg} max error {float(err.max(initial=0))}"


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (3, 2), (2, 3), (3, 3)])
@pytest.mark.parametrize("filt", [(3, 3), (2, 3), (7, 7)])
def test_wide_rows_every_phase_and_padding(stride, filt):
    """Exhaustive over paddings 0..2 on each side: every phase/offset mapping is exercised."""
    import nnefx.ops.sliding_conv as sliding
    from nnefx.ops import registry

    conv = registry.get("conv").fast_kernel
    x = RNG.standard_normal((2, 3, 11, 13)).astype(np.float32)
    f = RNG.standard_normal((4, 3) + filt).astype(np.float32)
    b = RNG.standard_normal((1, 4)).astype(np.float32)
    old = sliding._WIDE_MIN_WIDTH
    try:
        for pads in np.ndindex(3, 3, 3, 3):
            attrs = dict(padding=[pads[:2], pads[2:]], stride=list(stride))
            sliding._WIDE_MIN_WIDTH = 1
            wide = conv(x, f, b, **attrs)
            sliding._WIDE_MIN_WIDTH = 10 ** 9
            classic = conv(x, f, b, **attrs)
            assert_same_sum(wide, classic, x, f, b, conv, attrs, err_msg=str(attrs))
    finally:
        sliding._WIDE_MIN_WIDTH = old


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(2, 7), cin=st.integers(1, 6), cout=st.integers(1, 6), h=st.integers(1, 8),
       w=st.integers(1, 8), k=st.sampled_from([1, 2, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1),
       depthwise=st.booleans(), relu=st.booleans(), border=st.sampled_from(["constant", "reflect"]))
def test_grouped_batch_items_match_item_by_item_and_formal(batch, cin, cout, h, w, k, stride, pad, depthwise,
                                                          relu, border):
    """Small images: several batch items share one product (forced on and off)."""
    import nnefx.ops.sliding_conv as sliding
    from nnefx.ops import registry

    if depthwise:
        cout = cin
    if border == "reflect" and (pad >= h or pad >= w):
        return
    x = RNG.standard_normal((batch, cin, h, w)).astype(np.float32)
    f = RNG.standard_normal((cout, 1 if depthwise else cin, k, k)).astype(np.float32)
    b = RNG.standard_normal((1, cout)).astype(np.float32)
    attrs = dict(padding=[(pad, pad), (pad, pad)], stride=[stride, stride], groups=cin if depthwise else 1,
                 border=border)
    if (h + 2 * pad - k) // stride + 1 < 1 or (w + 2 * pad - k) // stride + 1 < 1:
        return
    conv = registry.get("conv")
    skip = RNG.standard_normal(registry.get("conv").fast_kernel(x, f, b, **attrs).shape).astype(np.float32)
    kernel = sliding.fused_conv(conv.fast_kernel, registry.get("add").fast_kernel, registry.get("relu").fast_kernel,
                                residual=True, relu=relu)
    old = sliding._PRODUCT_COLUMNS, sliding._GROUP_MIN_MACS
    try:
        sliding._PRODUCT_COLUMNS, sliding._GROUP_MIN_MACS = 1024, 0
        grouped, grouped_fused = conv.fast_kernel(x, f, b, **attrs), kernel(x, f, b, skip, **attrs)
        sliding._PRODUCT_COLUMNS = 0
        single, single_fused = conv.fast_kernel(x, f, b, **attrs), kernel(x, f, b, skip, **attrs)
    finally:
        sliding._PRODUCT_COLUMNS, sliding._GROUP_MIN_MACS = old
    assert_same_sum(grouped, single, x, f, b, conv.fast_kernel, attrs)
    assert_same_sum(grouped_fused, single_fused, x, f, b, conv.fast_kernel, attrs, extra=skip)  # + skip, relu
    np.testing.assert_allclose(grouped, conv.formal_kernel(x, f, b, **attrs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias", [-0.0, 0.0, "none", "mixed"])
@pytest.mark.parametrize("residual", [False, True])
def test_negative_zero_outputs_become_positive_zero(bias, residual):
    """Products of zeros and negative weights are -0.0; relu (fused or not) must give +0.0."""
    x = np.zeros((2, 3, 13, 13), np.float32)
    x[0, 0, 0, :3] = [np.nan, 1.0, -np.inf]
    values = {"w": -np.abs(RNG.standard_normal((4, 3, 3, 3))).astype(np.float32)}
    if bias == "mixed":
        values["b"] = np.array([[-0.0, 0.0, -0.0, 1.0]], np.float32)
    elif bias != "none":
        values["b"] = np.full((1, 4), bias, np.float32)
    ext = {"x": [2, 3, 13, 13]}
    var = {"w": [4, 3, 3, 3]} | ({"b": [1, 4]} if "b" in values else {})
    b_arg = "b" if "b" in values else "0.0"
    body = f"    c = conv(x, w, {b_arg}, {PAD});\n"
    feeds = {"x": x}
    if residual:
        ext["s"] = [2, 4, 13, 13]
        feeds["s"] = np.full((2, 4, 13, 13), -0.0, np.float32)
        body += "    a = add(c, s);\n    r = relu(a);"
    else:
        body += "    r = relu(c);"
    g = compile_document(graph(body, "r", ext, var))
    fused = nnefx.Session(g, variables=values)
    plain = nnefx.Session(g, variables=values, fuse=False)
    assert fused.plan.fused == (2 if residual else 1)
    a, b = fused.run(feeds)["r"], plain.run(feeds)["r"]
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not np.signbit(a).any()  # every zero is +0.0 and NaN became +0.0


def test_epilogue_relu_maps_negative_zero_unless_excluded():
    from nnefx.ops.sliding import ConvEpilogue

    y = np.array([[-0.0, 0.0, np.nan, -1.0, 2.0, -np.inf, np.inf]], np.float32)
    e = ConvEpilogue(None, relu=True)
    e.apply(0, a := y[0].copy())
    assert a.tolist() == [0.0, 0.0, 0.0, 0.0, 2.0, 0.0, np.inf] and not np.signbit(a).any()
    skip = np.full((1, 7), -0.0, np.float32)
    e = ConvEpilogue(skip, relu=False)
    e.apply(0, a := y[0].copy())
    assert np.array_equal(a, y[0] + skip[0], equal_nan=True)
