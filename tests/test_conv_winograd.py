"""Winograd F(2×2, 3×3) in the fast ``conv`` kernel (``nnefx.ops.winograd``).

The path is normally taken only for ≥ 256 channels and ≥ 14×14 outputs; these tests lower the thresholds
(``winograd.MIN_CHANNELS`` / ``MIN_COLUMNS``) so that small, fast cases exercise it, and
check: agreement with the formal kernel within the documented bound on random shapes (odd
sizes, every padding 0..2 per side, batches, partial tiles), batch grouping with a partial
last chunk, the non-finite fallback (NaN/Inf stay local, as in the direct sum), fused
epilogues bit for bit, and the planner's per-step cache of constant filters.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnefx
import nnefx.ops.sliding as sliding
from nnefx.ops import registry, winograd
from nnefx.semantics.frontend import compile_document

RNG = np.random.default_rng(11)
CONV = registry.get("conv")


@pytest.fixture
def forced(monkeypatch):
    """Winograd for every eligible convolution, however small."""
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 1)
    monkeypatch.setattr(winograd, "MIN_COLUMNS", 0)
    monkeypatch.setattr(winograd, "MIN_TILES", 0)


@pytest.fixture
def calls(monkeypatch):
    """Count the Winograd calls (to prove the path under test is the one taken)."""
    seen = []
    real = winograd.conv3x3

    def spy(x, *args, **kwargs):
        seen.append(x.shape)
        return real(x, *args, **kwargs)

    monkeypatch.setattr(winograd, "conv3x3", spy)
    return seen


def within_bound(got, x, w, b, pads):
    """|fast - formal| <= 1e-5 * S + 1e-6, S = the conv of the magnitudes (tests/test_ops_properties)."""
    expect = CONV.formal_kernel(x, w, b, padding=pads)
    scale = CONV.formal_kernel(np.abs(x), np.abs(w), np.abs(b), padding=pads).astype(np.float64)
    err = np.abs(got.astype(np.float64) - expect.astype(np.float64))
    assert got.shape == expect.shape and got.dtype == np.float32
    assert np.all(err <= 1e-5 * scale + 1e-6), float(err.max())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(B=st.integers(1, 3), C=st.integers(1, 4), c=st.integers(1, 4), H=st.integers(1, 9), W=st.integers(1, 9),
       pads=st.tuples(*[st.integers(0, 2)] * 4), scalar_bias=st.booleans())
def test_matches_formal_on_random_shapes(forced, calls, B, C, c, H, W, pads, scalar_bias):
    pt, pb, pl, pr = pads
    if H + pt + pb < 3 or W + pl + pr < 3:
        return
    x = RNG.uniform(-4, 4, (B, C, H, W)).astype(np.float32)
    w = RNG.uniform(-4, 4, (c, C, 3, 3)).astype(np.float32)
    b = np.float32(RNG.uniform(-4, 4)) if scalar_bias else RNG.uniform(-4, 4, (1, c)).astype(np.float32)
    padding = [(pt, pb), (pl, pr)]
    before = len(calls)
    got = CONV.fast_kernel(x, w, b, padding=padding)
    assert len(calls) == before + 1
    within_bound(got, x, w, b, padding)


def test_every_padding_and_odd_extent(forced, calls):
    """Exhaustive paddings 0..2 per side on odd and even sizes: every phase/tile edge."""
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((1, 4)).astype(np.float32)
    for pads in np.ndindex(3, 3, 3, 3):
        padding = [pads[:2], pads[2:]]
        within_bound(CONV.fast_kernel(x, w, b, padding=padding), x, w, b, padding)
    assert len(calls) == 81


def test_not_taken_for_other_windows(forced, calls):
    """Stride, dilation, groups, borders other than constant, other filter sizes: im2col."""
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    w3 = RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)
    CONV.fast_kernel(x, w3, 0.0, stride=[2, 2])
    CONV.fast_kernel(x, w3, 0.0, dilation=[2, 2])
    CONV.fast_kernel(x, w3[:, :2], 0.0, groups=2)
    CONV.fast_kernel(x, w3, 0.0, border="reflect", padding=[(1, 1), (1, 1)])
    CONV.fast_kernel(x, RNG.standard_normal((4, 4, 3, 2)).astype(np.float32), 0.0)
    CONV.fast_kernel(x[:, :, 0], w3[:, :, 0], 0.0)  # 1-D
    assert calls == []


def test_thresholds_keep_small_layers_on_im2col(calls):
    pads = [(1, 1), (1, 1)]
    x = RNG.standard_normal((1, 128, 16, 16)).astype(np.float32)
    CONV.fast_kernel(x, RNG.standard_normal((128, 128, 3, 3)).astype(np.float32), 0.0, padding=pads)
    assert calls == []  # 128 channels: below MIN_CHANNELS
    x = RNG.standard_normal((1, 256, 7, 7)).astype(np.float32)
    w = RNG.standard_normal((256, 256, 3, 3)).astype(np.float32)
    CONV.fast_kernel(x, w, 0.0, padding=pads)
    assert calls == []  # 7×7: too few tiles
    CONV.fast_kernel(np.zeros((1, 256, 14, 14), np.float32), w, 0.0, padding=pads)
    assert len(calls) == 1


def test_grouped_items_with_partial_chunk_match_single(forced, monkeypatch):
    x = RNG.standard_normal((5, 3, 5, 7)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((1, 4)).astype(np.float32)
    padding = [(1, 1), (1, 1)]
    monkeypatch.setattr(winograd, "GROUP_COLUMNS", 2 * 3 * 5)  # 3×4(+1) tiles per item: 2 items per product
    assert winograd.group_size(5, 3, 4) == 2
    grouped = CONV.fast_kernel(x, w, b, padding=padding)
    monkeypatch.setattr(winograd, "GROUP_COLUMNS", 1)
    single = CONV.fast_kernel(x, w, b, padding=padding)
    np.testing.assert_array_equal(grouped, single)  # each item's sums are the same operations
    within_bound(grouped, x, w, b, padding)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf, 3e38])
def test_non_finite_values_stay_local(forced, special):
    """A NaN/Inf (or an overflow) spreads over whole tiles in Winograd: that item is redone directly."""
    x = RNG.standard_normal((3, 2, 8, 8)).astype(np.float32)
    x[1, 0, 3, 4] = special
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((1, 3)).astype(np.float32)
    padding = [(1, 1), (1, 1)]
    with np.errstate(all="ignore"):
        got = CONV.fast_kernel(x, w, b, padding=padding)
        expect = CONV.formal_kernel(x, w, b, padding=padding)
    assert np.array_equal(np.isnan(got), np.isnan(expect))
    assert np.array_equal(np.isinf(got), np.isinf(expect))
    finite = np.isfinite(expect) & (np.abs(expect) < 1e30)
    np.testing.assert_allclose(got[finite], expect[finite], rtol=1e-4, atol=1e-4)
    for i in (0, 2):  # the other items kept their Winograd results
        within_bound(got[i:i + 1], x[i:i + 1], w, b, padding)


@pytest.mark.parametrize("residual", [False, True])
def test_fused_epilogue_bit_for_bit(forced, calls, residual):
    x = RNG.standard_normal((3, 3, 6, 5)).astype(np.float32)
    x[0, 0, :3] = 0.0
    x[0, 1, :3] = -0.0
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = np.array([[0.0, 0.5, -1.0, 0.0]], np.float32)
    attrs = dict(padding=[(1, 1), (1, 1)])
    add, relu = registry.get("add").fast_kernel, registry.get("relu").fast_kernel
    y = CONV.fast_kernel(x, w, b, **attrs)
    skip = RNG.standard_normal(y.shape).astype(np.float32)
    kernel = sliding.fused_conv(CONV.fast_kernel, add, relu, residual=residual, relu=True)
    fused = kernel(x, w, b, skip, **attrs) if residual else kernel(x, w, b, **attrs)
    separate = relu(add(y, skip)) if residual else relu(y)
    assert np.array_equal(fused.view(np.uint32), separate.view(np.uint32))
    assert not np.any(np.signbit(fused) & (fused == 0))
    assert len(calls) == 2


def test_filter_transform_is_g_g_gt():
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    U = winograd.transform_filter(w)
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    for o in range(2):
        for i in range(3):
            expect = G @ w[o, i].astype(np.float64) @ G.T
            np.testing.assert_allclose(U[:, o, i].reshape(4, 4), expect, rtol=1e-6, atol=1e-7)


def test_resnet_layer_error_vs_float64():
    """The documented accuracy: a ResNet-18 layer (256 channels, 14×14) against float64."""
    x = RNG.standard_normal((1, 256, 14, 14)).astype(np.float32)
    w = (RNG.standard_normal((256, 256, 3, 3)) * np.sqrt(2 / (9 * 256))).astype(np.float32)
    pads = [(1, 1), (1, 1)]
    old = winograd.MIN_CHANNELS
    try:
        got = CONV.fast_kernel(x, w, 0.0, padding=pads)  # Winograd (≥ 256 channels, 7×7 tiles)
        winograd.MIN_CHANNELS = 10 ** 9
        im2col = CONV.fast_kernel(x, w, 0.0, padding=pads)
    finally:
        winograd.MIN_CHANNELS = old
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # (C, 14, 14, 3, 3)
    ref = np.einsum("chwij,ocij->ohw", cols, w.astype(np.float64))
    scale = np.abs(ref).max()
    err_w = np.abs(got[0] - ref).max() / scale
    err_i = np.abs(im2col[0] - ref).max() / scale
    assert err_w < 1e-5 and err_i < 1e-5
    assert not np.array_equal(got, im2col)  # really two different computations


TEXT = """version 1.0;
extension KHR_enable_operator_expressions;  # nested invocations below
graph g( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 4, 6, 6]);
    w = variable<scalar>(shape = [5, 4, 3, 3], label = 'w');
    b = variable<scalar>(shape = [1, 5], label = 'b');
    c = conv(x, w, b, padding = [(1, 1), (1, 1)]);
    y = relu(c);
}
"""


def test_planner_caches_constant_filter_transform(forced, monkeypatch):
    counted = []
    real = winograd.transform_filter
    monkeypatch.setattr(winograd, "transform_filter", lambda w: counted.append(1) or real(w))
    w = RNG.standard_normal((5, 4, 3, 3)).astype(np.float32)
    b = RNG.standard_normal((1, 5)).astype(np.float32)
    g = compile_document(TEXT)
    session = nnefx.Session(g, variables={"w": w, "b": b})
    prepared = [s for s in session.plan.steps if hasattr(s.kernel, "prepared")]
    assert len(prepared) == 1
    x = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
    outs = [session.run({"x": x})["y"] for _ in range(3)]
    assert len(counted) == 1  # transformed once, reused by the later runs
    assert all(np.array_equal(o, outs[0]) for o in outs)
    expect = nnefx.Session(g, backend="formal", variables={"w": w, "b": b}).run({"x": x})["y"]
    np.testing.assert_allclose(outs[0], expect, rtol=1e-4, atol=1e-4)
    # a new value for the variable: a new plan, a new transform, new results
    session.assign({"w": -w})
    y2 = session.run({"x": x})["y"]
    assert len(counted) == 2
    expect2 = nnefx.Session(g, backend="formal", variables={"w": -w, "b": b}).run({"x": x})["y"]
    np.testing.assert_allclose(y2, expect2, rtol=1e-4, atol=1e-4)


def test_planner_does_not_cache_updated_or_input_filters(forced):
    text = """version 1.0;
extension KHR_enable_operator_expressions;  # nested invocations below
graph g( x, f ) -> ( y )
{
    x = external<scalar>(shape = [1, 2, 5, 5]);
    f = external<scalar>(shape = [2, 2, 3, 3]);
    w = variable<scalar>(shape = [2, 2, 3, 3], label = 'w');
    y = conv(conv(x, w, padding = [(1, 1), (1, 1)]), f, padding = [(1, 1), (1, 1)]);
    w1 = update(w, mul(w, 2.0));
}
"""
    w = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    session = nnefx.Session(compile_document(text), variables={"w": w})
    assert not any(hasattr(s.kernel, "prepared") for s in session.plan.steps)
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    f = RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)
    first = session.run({"x": x, "f": f})["y"]
    f *= -1  # the same array object, new contents: must not reuse anything
    second = session.run({"x": x, "f": f})["y"]
    formal = nnefx.Session(compile_document(text), backend="formal", variables={"w": w})
    np.testing.assert_allclose(first, formal.run({"x": x, "f": -f})["y"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, formal.run({"x": x, "f": f})["y"], rtol=1e-4, atol=1e-4)


BLOCK = """version 1.0;
extension KHR_enable_operator_expressions;  # nested invocations below
graph g( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 256, 14, 13]);
    w1 = variable<scalar>(shape = [256, 256, 3, 3], label = 'w1');
    b1 = variable<scalar>(shape = [1, 256], label = 'b1');
    w2 = variable<scalar>(shape = [256, 256, 3, 3], label = 'w2');
    b2 = variable<scalar>(shape = [1, 256], label = 'b2');
    h = relu(conv(x, w1, b1, padding = [(1, 1), (1, 1)]));
    y = relu(add(conv(h, w2, b2, padding = [(1, 1), (1, 1)]), x));
}
"""


def test_residual_block_matches_torch(calls):
    """A ResNet basic block at the default thresholds (256 channels, odd width): Winograd, fused, vs torch."""
    torch = pytest.importorskip("torch")
    scale = np.sqrt(2 / (9 * 256))
    values = {"w1": (RNG.standard_normal((256, 256, 3, 3)) * scale).astype(np.float32),
              "b1": RNG.standard_normal((1, 256)).astype(np.float32) * 0.1,
              "w2": (RNG.standard_normal((256, 256, 3, 3)) * scale).astype(np.float32),
              "b2": RNG.standard_normal((1, 256)).astype(np.float32) * 0.1}
    x = RNG.standard_normal((2, 256, 14, 13)).astype(np.float32)
    session = nnefx.Session(compile_document(BLOCK), variables=values)
    got = session.run({"x": x})["y"]
    assert len(calls) == 2
    t = {k: torch.from_numpy(v) for k, v in values.items()}
    with torch.no_grad():
        h = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), t["w1"], t["b1"][0], padding=1))
        ref = torch.relu(torch.nn.functional.conv2d(h, t["w2"], t["b2"][0], padding=1) + torch.from_numpy(x)).numpy()
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 1e-4
