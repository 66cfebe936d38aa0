"""ir_ extension operations: formal (element-by-element definitions) and fast kernels agree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

SETTINGS = settings(max_examples=40, deadline=None)


def both(name: str, *args, **kw):
    op = registry.get(name)
    return op.kernel("formal")(*args, **kw), op.kernel("fast")(*args, **kw)


def same(a, b, exact: bool = False) -> None:
    if isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            same(x, y, exact)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    if exact or a.dtype.kind in "iub":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


@SETTINGS
@given(shapes, st.data())
def test_gather(shape, data):
    rng = np.random.RandomState(data.draw(st.integers(0, 1000)))
    x = rng.randn(*shape).astype(np.float32)
    axis = data.draw(st.integers(0, len(shape) - 1))
    bd = data.draw(st.integers(0, axis))
    ishape = shape[:bd] + tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    idx = rng.randint(-shape[axis], shape[axis], size=ishape)
    same(*both("gather_axis", x, idx, axis=axis, batch_dims=bd), exact=True)


@SETTINGS
@given(shapes, st.data())
def test_gather_elements_top_k_cumsum_prod(shape, data):
    rng = np.random.RandomState(data.draw(st.integers(0, 1000)))
    x = np.round(rng.randn(*shape), 1).astype(np.float32)  # ties for top_k
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = rng.randint(-shape[axis], shape[axis], size=shape)
    same(*both("gather_elements", x, idx, axis=axis), exact=True)
    k = data.draw(st.integers(1, shape[axis]))
    for mode in ("max", "min"):
        for sort in ("value", "index"):
            same(both("top_k", x, k=k, axis=axis, mode=mode, sort=sort)[0],
                 both("top_k", x, k=k, axis=axis, mode=mode, sort=sort)[1], exact=True)
    for exclusive in (False, True):
        for reverse in (False, True):
            same(*both("cumulative_sum", x, axis=axis, exclusive=exclusive, reverse=reverse))
    axes = sorted(set(data.draw(st.lists(st.integers(0, len(shape) - 1), max_size=2))))
    same(*both("prod_reduce", x, axes=axes))


@SETTINGS
@given(st.lists(st.sampled_from([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.2, -3.7, 0.0]), min_size=1, max_size=9))
def test_round(values):
    x = np.array(values, np.float32)
    for mode in ("half_to_even", "half_away_from_zero"):
        same(*both("round_with_mode", x, mode=mode), exact=True)
    np.testing.assert_array_equal(registry.get("round_with_mode").kernel("formal")(np.array([0.5, 1.5, -2.5], np.float32)),
                                  [0.0, 2.0, -2.0])


@SETTINGS
@given(st.data())
def test_interpolate(data):
    rng = np.random.RandomState(data.draw(st.integers(0, 1000)))
    h, w = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    x = rng.randn(1, 2, h, w).astype(np.float32)
    sizes = [data.draw(st.integers(1, 7)), data.draw(st.integers(1, 7))]
    scales = [sizes[0] / h, sizes[1] / w]
    from nnefx.ops.ext import COORD_MODES, INTERP_MODES, NEAREST_MODES

    attrs = dict(axes=[2, 3], sizes=sizes, scales=scales, mode=data.draw(st.sampled_from(INTERP_MODES)),
                 coordinate_transformation_mode=data.draw(st.sampled_from(COORD_MODES)),
                 nearest_mode=data.draw(st.sampled_from(NEAREST_MODES)))
    same(*both("interpolate", x, **attrs))


@SETTINGS
@given(st.data())
def test_one_hot_and_einsum(data):
    rng = np.random.RandomState(data.draw(st.integers(0, 1000)))
    idx = rng.randint(-1, 5, size=(2, 3))
    axis = data.draw(st.integers(0, 2))
    same(*both("one_hot", idx, np.float32(2.0), np.float32(-1.0), depth=4, axis=axis), exact=True)
    a, b = rng.randn(2, 3, 4).astype(np.float32), rng.randn(2, 4, 2).astype(np.float32)
    eq = data.draw(st.sampled_from(["bij,bjk->bik", "bij,bjk->ik", "bij,bjk->b"]))
    same(*both("einsum", [a, b], equation=eq))


def test_erf_formal_and_fast():
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    same(*both("erf", x))


def test_gather_index_out_of_range_in_both():
    for backend in ("formal", "fast"):
        with pytest.raises(NNEFXError):
            registry.get("gather_axis").kernel(backend)(np.zeros(3, np.float32), np.array([3]), axis=0, batch_dims=0)
