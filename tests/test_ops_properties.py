"""Property tests: the fast kernels agree with the formal (arbiter) kernels on generated
shapes, attributes and values.

Stated bounds:

* integer and logical results, data movement (shape ops), comparisons, min/max, rounding,
  arg-reductions, arg-max pooling, quantizers: **bit-identical**;
* element-wise float functions: within **4 float32 ulp** for primitives, **16 ulp** for
  compounds (sigmoid, softplus, ...: several rounded steps) (NaN matches NaN, infinities match);
* accumulating float ops (reductions, conv, deconv, box, debox, pools, interpolation):
  |fast - formal| <= **1e-5 * S + 1e-6**, where S is the same operation applied to the
  absolute values (the sum of the magnitudes of the terms that make up each result).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def formal(name, *args, **attrs):
    return registry.get(name).kernel("formal")(*args, **attrs)


def fast(name, *args, **attrs):
    return registry.get(name).kernel("fast")(*args, **attrs)


def assert_ulp(a, b, ulps=4):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape and a.dtype == b.dtype
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    spacing = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(np.float32))
    with np.errstate(invalid="ignore"):
        close = np.abs(a.astype(np.float64) - b.astype(np.float64)) <= ulps * spacing.astype(np.float64)
    assert np.all(same | close), (a[~(same | close)], b[~(same | close)])


def assert_within(a, b, scale):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    err = np.abs(a.astype(np.float64) - b.astype(np.float64))
    assert np.all(err <= 1e-5 * np.abs(np.asarray(scale, np.float64)) + 1e-6), float(err.max())


def floats(lo=-100.0, hi=100.0, special=False):
    return st.floats(lo, hi, width=32, allow_nan=special, allow_infinity=special) if not special else \
        st.floats(width=32)


def f32(v):
    """The float32 value nearest ``v`` (hypothesis wants representable bounds)."""
    return float(np.float32(v))


def arrays(shape, lo=-100.0, hi=100.0):
    return hnp.arrays(np.float32, shape, elements=st.floats(f32(lo), f32(hi), width=32))


small_shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


# --- element-wise -------------------------------------------------------------------------

EXACT_UNARY = ["neg", "abs", "sign", "floor", "ceil", "round"]
DOMAINS = {"log": (2.0 ** -100, 1e6), "asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.5, 0.5), "acosh": (1, 1e6),
           "rcp": (-1e6, 1e6), "exp": (-80, 80), "sinh": (-80, 80), "cosh": (-80, 80)}  # float32-representable bounds
FLOAT_UNARY = ["rcp", "exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan",
               "asinh", "acosh", "atanh", "sqr", "sqrt", "rsqr", "rsqrt", "log2", "sigmoid", "relu", "gelu",
               "silu", "softplus"]


@pytest.mark.parametrize("name", EXACT_UNARY)
@SETTINGS
@given(x=hnp.arrays(np.float32, small_shapes, elements=st.floats(width=32)))
def test_exact_unary_functions_are_bit_identical(name, x):
    np.testing.assert_array_equal(fast(name, x), formal(name, x))


@pytest.mark.parametrize("name", FLOAT_UNARY)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_float_unary_functions_within_4_ulp(name, data):
    lo, hi = DOMAINS.get(name, (-50.0, 50.0))
    x = data.draw(hnp.arrays(np.float32, small_shapes, elements=st.floats(f32(lo), f32(hi), width=32)))
    if name in ("sqrt", "rsqrt", "log2", "rsqr"):
        x = np.abs(x) + np.float32(1e-3)
    # A compound's formal kernel rounds after every step of its body; the fused fast kernel
    # rounds differently, so compounds get a wider bound than single functions.
    assert_ulp(fast(name, x), formal(name, x), 16 if registry.get(name).compound else 4)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast the NNEF way (aligned from dimension 0)."""
    base = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    rank = draw(st.integers(0, len(base)))
    other = tuple(d if draw(st.booleans()) else 1 for d in base[:rank])
    return (base, other) if draw(st.booleans()) else (other, base)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "lt", "gt", "le", "ge", "eq", "ne",
                                  "min", "max"])
@SETTINGS
@given(shapes=broadcast_pair(), data=st.data())
def test_binary_broadcasting_kernels_agree(name, shapes, data):
    lo = 0.01 if name == "pow" else -10.0
    x = data.draw(arrays(shapes[0], lo, 10.0))
    y = data.draw(arrays(shapes[1], -3.0 if name == "pow" else -10.0, 3.0 if name == "pow" else 10.0))
    a, b = fast(name, x, y), formal(name, x, y)
    if name == "pow":
        assert_ulp(a, b, 4)
    else:
        np.testing.assert_array_equal(a, b)


@SETTINGS
@given(shapes=broadcast_pair(), data=st.data())
def test_logical_and_select_agree(shapes, data):
    c = data.draw(hnp.arrays(np.bool_, shapes[0]))
    d = data.draw(hnp.arrays(np.bool_, shapes[1]))
    for name in ("and", "or"):
        np.testing.assert_array_equal(fast(name, c, d), formal(name, c, d))
    t = data.draw(hnp.arrays(np.int64, shapes[1], elements=st.integers(-5, 5)))
    np.testing.assert_array_equal(fast("select", c, t, np.int64(7), dtype="integer"),
                                  formal("select", c, t, np.int64(7), dtype="integer"))


# --- reductions ---------------------------------------------------------------------------

@st.composite
def array_and_axes(draw, dtype=np.float32):
    shape = draw(small_shapes)
    axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1))))
    if dtype == np.bool_:
        x = draw(hnp.arrays(np.bool_, shape))
    else:
        x = draw(arrays(shape))
    return x, axes


@pytest.mark.parametrize("name", ["max_reduce", "min_reduce", "argmax_reduce", "argmin_reduce"])
@SETTINGS
@given(case=array_and_axes())
def test_extreme_reductions_are_bit_identical(name, case):
    x, axes = case
    np.testing.assert_array_equal(fast(name, x, axes=axes), formal(name, x, axes=axes))


@pytest.mark.parametrize("name", ["all_reduce", "any_reduce"])
@SETTINGS
@given(case=array_and_axes(np.bool_))
def test_logical_reductions_are_bit_identical(name, case):
    x, axes = case
    np.testing.assert_array_equal(fast(name, x, axes=axes), formal(name, x, axes=axes))


@SETTINGS
@given(case=array_and_axes(), normalize=st.booleans())
def test_sum_reduce_within_bound(case, normalize):
    x, axes = case
    assert_within(fast("sum_reduce", x, axes=axes, normalize=normalize),
                  formal("sum_reduce", x, axes=axes, normalize=normalize),
                  fast("sum_reduce", np.abs(x), axes=axes, normalize=normalize))


@SETTINGS
@given(case=array_and_axes())
def test_softmax_and_moments_within_bound(case):
    x, axes = case
    assert_within(fast("softmax", x, axes=axes), formal("softmax", x, axes=axes), 1.0)
    for a, b in zip(fast("moments", x, axes=axes), formal("moments", x, axes=axes), strict=True):
        assert_within(a, b, fast("mean_reduce", np.square(x), axes=axes) + 1.0)


# --- shape operations: exact ----------------------------------------------------------------

@SETTINGS
@given(x=hnp.arrays(np.int64, small_shapes, elements=st.integers(-9, 9)), data=st.data())
def test_data_movement_is_bit_identical(x, data):
    rank = x.ndim
    perm = data.draw(st.permutations(range(rank)))
    n = data.draw(st.integers(0, rank))
    axes = [a for a in perm if a < n] if n else []
    cases = [("transpose", dict(axes=axes)),
             ("tile", dict(repeats=[data.draw(st.integers(1, 3)) for _ in range(rank)])),
             ("reshape", dict(shape=[-1], axis_start=data.draw(st.integers(0, rank - 1)))),
             ("unsqueeze", dict(axes=sorted(data.draw(st.sets(st.integers(0, rank), max_size=2)))))]
    axis = data.draw(st.integers(0, rank - 1))
    cases.append(("concat", dict(axis=axis)))
    for name, attrs in cases:
        args = [[x, x]] if name == "concat" else [x]
        a = fast(name, *args, dtype="integer", **attrs)
        b = formal(name, *args, dtype="integer", **attrs)
        np.testing.assert_array_equal(a, b)
    for a, b in zip(fast("unstack", x, axis=axis, dtype="integer"), formal("unstack", x, axis=axis, dtype="integer"),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@SETTINGS
@given(x=hnp.arrays(np.float32, st.tuples(st.integers(1, 7), st.integers(1, 5)), elements=st.floats(-9, 9, width=32)),
       data=st.data())
def test_slice_matches_python_slicing(x, data):
    begin = [data.draw(st.integers(-9, 9)) for _ in range(2)]
    end = [data.draw(st.integers(-9, 9)) for _ in range(2)]
    stride = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in range(2)]
    try:
        b = formal("slice", x, axes=[0, 1], begin=begin, end=end, stride=stride, dtype="scalar")
    except NNEFXError:
        with pytest.raises(NNEFXError):
            fast("slice", x, axes=[0, 1], begin=begin, end=end, stride=stride, dtype="scalar")
        return
    a = fast("slice", x, axes=[0, 1], begin=begin, end=end, stride=stride, dtype="scalar")
    np.testing.assert_array_equal(a, b)
    shape = registry.get("slice").shape_rule(x.shape, axes=[0, 1], begin=begin, end=end, stride=stride)
    assert a.shape == shape


@SETTINGS
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                    elements=st.floats(-9, 9, width=32)),
       data=st.data(), border=st.sampled_from(["constant", "replicate", "reflect", "reflect-even"]))
def test_pad_is_bit_identical(x, data, border):
    padding = [(data.draw(st.integers(-1, 5)), data.draw(st.integers(-1, 5))) for _ in range(x.ndim)]
    try:
        b = formal("pad", x, padding=padding, border=border, value=2.5)
    except NNEFXError:
        return
    np.testing.assert_array_equal(fast("pad", x, padding=padding, border=border, value=2.5), b)


# --- sliding windows --------------------------------------------------------------------------

@st.composite
def conv_case(draw, reverse=False):
    n = draw(st.integers(1, 2))
    G = draw(st.integers(1, 2))
    cin, cout = G * draw(st.integers(1, 2)), G * draw(st.integers(1, 2))
    f = [draw(st.integers(1, 3)) for _ in range(n)]
    s = [draw(st.integers(1, 3)) for _ in range(n)]
    d = [draw(st.integers(1, 2)) for _ in range(n)]
    X = [draw(st.integers(max(1, (fi - 1) * di + 1 - 2), 6)) for fi, di in zip(f, d, strict=True)]
    pads = [] if draw(st.booleans()) else [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(n)]
    border = draw(st.sampled_from(["constant", "replicate", "reflect", "reflect-even"]))
    B = draw(st.integers(1, 2))
    x = draw(arrays((B, cin if not reverse else cout) + tuple(X), -4, 4))
    w = draw(arrays((cout, cin // G) + tuple(f), -4, 4)) if not reverse else draw(arrays((cout, cin // G) + tuple(f), -4, 4))
    bias = draw(arrays((1, cout if not reverse else cin), -4, 4))
    return x, w, bias, dict(border=border, padding=pads, stride=s, dilation=d, groups=G)


@SETTINGS
@given(case=conv_case())
def test_conv_fast_matches_formal(case):
    x, w, b, attrs = case
    try:
        expect = formal("conv", x, w, b, **attrs)
    except NNEFXError:
        return  # window larger than the padded input: both must refuse
    scale = fast("conv", np.abs(x), np.abs(w), np.abs(b), **attrs)
    assert_within(fast("conv", x, w, b, **attrs), expect, scale)


@SETTINGS
@given(case=conv_case(reverse=True))
def test_deconv_fast_matches_formal(case):
    x, w, b, attrs = case
    try:
        expect = formal("deconv", x, w, b, **attrs)
    except NNEFXError:
        with pytest.raises(NNEFXError):
            fast("deconv", x, w, b, **attrs)
        return
    scale = fast("deconv", np.abs(x), np.abs(w), np.abs(b), **attrs)
    assert_within(fast("deconv", x, w, b, **attrs), expect, scale)


@st.composite
def window_case(draw, borders):
    rank = draw(st.integers(1, 3))
    X = [draw(st.integers(1, 5)) for _ in range(rank)]
    size = [draw(st.integers(1, 3)) for _ in range(rank)]
    stride = [draw(st.integers(1, 3)) for _ in range(rank)]
    dilation = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [] if draw(st.booleans()) else [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(rank)]
    x = draw(arrays(tuple(X), -9, 9))
    return x, dict(size=size, stride=stride, dilation=dilation, padding=pads, border=draw(st.sampled_from(borders)))


ALL_BORDERS = ["ignore", "constant", "replicate", "reflect", "reflect-even"]


@pytest.mark.parametrize("name", ["box", "debox", "avg_pool", "rms_pool"])
@SETTINGS
@given(case=window_case(ALL_BORDERS), normalize=st.booleans())
def test_box_family_fast_matches_formal(name, case, normalize):
    x, attrs = case
    if name in ("box", "debox"):
        attrs = dict(attrs, normalize=normalize)
    try:
        expect = formal(name, x, **attrs)
    except NNEFXError:
        return
    assert_within(fast(name, x, **attrs), expect, fast(name, np.abs(x), **attrs))


@pytest.mark.parametrize("name", ["argmax_pool", "max_pool"])
@SETTINGS
@given(case=window_case(ALL_BORDERS))
def test_max_family_is_bit_identical(name, case):
    x, attrs = case
    try:
        expect = formal(name, x, **attrs)
    except NNEFXError:
        return
    np.testing.assert_array_equal(fast(name, x, **attrs), expect)


@SETTINGS
@given(case=window_case(["constant"]))
def test_max_pool_with_index_round_trips_through_desample(case):
    x, attrs = case
    try:
        out, index = formal("max_pool_with_index", x, **attrs)
    except NNEFXError:
        return
    fo, fi = fast("max_pool_with_index", x, **attrs)
    np.testing.assert_array_equal(fo, out)
    np.testing.assert_array_equal(fi, index)
    attrs = dict(attrs, output_shape=list(x.shape))
    try:
        back = formal("desample", out, index, **attrs)
    except NNEFXError:
        return
    assert_within(fast("desample", out, index, **attrs), back, fast("desample", np.abs(out), index, **attrs))


@SETTINGS
@given(x=arrays((1, 2, 3, 2), -9, 9), f1=st.integers(1, 3), f2=st.integers(1, 3),
       method=st.sampled_from(["symmetric", "asymmetric", "aligned"]),
       border=st.sampled_from(["constant", "replicate", "reflect", "reflect-even"]))
def test_multilinear_upsample_fast_matches_formal(x, f1, f2, method, border):
    attrs = dict(factor=[f1, f2], method=method, border=border)
    assert_within(fast("multilinear_upsample", x, **attrs), formal("multilinear_upsample", x, **attrs),
                  fast("multilinear_upsample", np.abs(x), **attrs))


# --- quantization: exact ----------------------------------------------------------------------

@SETTINGS
@given(x=arrays((3, 4), -20, 20), bits=st.integers(1, 8), signed=st.booleans(), symmetric=st.booleans(),
       lo=st.floats(-10, -0.5, width=32), hi=st.floats(0.5, 10, width=32), zp=st.integers(-3, 3),
       scale=st.floats(f32(0.01), 2, width=32))
def test_quantizers_are_bit_identical(x, bits, signed, symmetric, lo, hi, zp, scale):
    lo, hi, scale = np.float32(lo), np.float32(hi), np.float32(scale)
    np.testing.assert_array_equal(fast("min_max_linear_quantize", x, lo, hi, bits, signed, symmetric),
                                  formal("min_max_linear_quantize", x, lo, hi, bits, signed, symmetric))
    np.testing.assert_array_equal(fast("zero_point_linear_quantize", x, np.int64(zp), scale, bits, signed, symmetric),
                                  formal("zero_point_linear_quantize", x, np.int64(zp), scale, bits, signed, symmetric))
    np.testing.assert_array_equal(fast("logarithmic_quantize", x, hi, bits), formal("logarithmic_quantize", x, hi, bits))


# --- more families ------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), ta=st.booleans(), tb=st.booleans())
def test_matmul_fast_matches_formal(data, ta, tb):
    m, k, n = (data.draw(st.integers(1, 5)) for _ in range(3))
    batch = data.draw(st.lists(st.integers(1, 3), max_size=2))
    ba = tuple(d if data.draw(st.booleans()) else 1 for d in batch)
    bb = tuple(d if data.draw(st.booleans()) else 1 for d in batch)
    a = data.draw(arrays(ba + ((k, m) if ta else (m, k)), -4, 4))
    b = data.draw(arrays(bb + ((n, k) if tb else (k, n)), -4, 4))
    attrs = dict(transposeA=ta, transposeB=tb)
    assert_within(fast("matmul", a, b, **attrs), formal("matmul", a, b, **attrs),
                  fast("matmul", np.abs(a), np.abs(b), **attrs))


@SETTINGS
@given(x=hnp.arrays(np.float32, small_shapes, elements=st.floats(-1e6, 1e6, width=32)),
       target=st.sampled_from(["integer", "logical", "scalar"]))
def test_cast_is_bit_identical(x, target):
    np.testing.assert_array_equal(fast("cast", x, dtype=target), formal("cast", x, dtype=target))
    i = formal("cast", x, dtype="integer")
    np.testing.assert_array_equal(fast("cast", i, dtype=target), formal("cast", i, dtype=target))


@SETTINGS
@given(x=hnp.arrays(np.int64, small_shapes, elements=st.integers(-9, 9)), data=st.data())
def test_gather_is_bit_identical(x, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    idx = data.draw(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                               elements=st.integers(0, x.shape[axis] - 1)))
    np.testing.assert_array_equal(fast("gather", x, idx, axis=axis, dtype="integer"),
                                  formal("gather", x, idx, axis=axis, dtype="integer"))


@SETTINGS
@given(case=window_case(ALL_BORDERS), data=st.data())
def test_sample_is_bit_identical(case, data):
    x, attrs = case
    try:
        out_shape = registry.get("argmax_pool").shape_rule(x.shape, **attrs)
    except NNEFXError:
        return
    volume = int(np.prod(attrs["size"]))
    idx = data.draw(hnp.arrays(np.int64, out_shape, elements=st.integers(0, volume - 1)))
    np.testing.assert_array_equal(fast("sample", x, idx, **attrs), formal("sample", x, idx, **attrs))


@SETTINGS
@given(x=arrays((2, 2, 5, 6), -9, 9), data=st.data(), method=st.sampled_from(["symmetric", "asymmetric", "aligned"]))
def test_roi_kernels_fast_match_formal(x, data, method):
    n = data.draw(st.integers(1, 3))
    coords = st.floats(-2, 8, width=32)
    rois = np.array([[data.draw(coords) for _ in range(4)] for _ in range(n)], np.float32)
    bidx = np.array([data.draw(st.integers(0, 1)) for _ in range(n)])
    size = [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))]
    for name in ("avg_roi_pool", "max_roi_pool"):
        np.testing.assert_allclose(fast(name, x, rois, bidx, output_size=size),
                                   formal(name, x, rois, bidx, output_size=size), rtol=1e-6, atol=1e-6)
    assert_within(fast("roi_resample", x, rois, bidx, output_size=size, method=method),
                  formal("roi_resample", x, rois, bidx, output_size=size, method=method),
                  fast("roi_resample", np.abs(x), rois, bidx, output_size=size, method=method))


@SETTINGS
@given(case=window_case(["constant"]), data=st.data())
def test_desample_with_any_index_fast_matches_formal(case, data):
    x, attrs = case
    try:
        small = registry.get("argmax_pool").shape_rule(x.shape, **attrs)
    except NNEFXError:
        return
    volume = int(np.prod(attrs["size"]))
    idx = data.draw(hnp.arrays(np.int64, small, elements=st.integers(0, volume - 1)))
    y = data.draw(arrays(small, -9, 9))
    attrs = dict(attrs, output_shape=list(x.shape))
    assert_within(fast("desample", y, idx, **attrs), formal("desample", y, idx, **attrs),
                  fast("desample", np.abs(y), idx, **attrs))
