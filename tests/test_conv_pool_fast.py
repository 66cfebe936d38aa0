"""The fast max pool reduces one axis at a time (a box maximum is separable).

Maximum is exact, so the separable order must give the formal kernel's values exactly
(NaN where it has NaN; +0.0 and −0.0 compare equal), for any rank, window, stride,
dilation, padding and border — and a fresh array, never a view of the input.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

RNG = np.random.default_rng(5)
MAX_POOL = registry.get("max_pool")


@settings(max_examples=60, deadline=None)
@given(data=st.data(), rank=st.integers(1, 4), border=st.sampled_from(["constant", "ignore", "replicate", "reflect"]))
def test_separable_max_pool_equals_formal(data, rank, border):
    shape = [data.draw(st.integers(1, 6)) for _ in range(rank)]
    size = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    padding = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(rank)]
    x = RNG.standard_normal(shape).astype(np.float32)
    if x.size > 2 and data.draw(st.booleans()):
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = np.nan
    attrs = dict(size=size, stride=stride, dilation=dilation, padding=padding, border=border)
    try:
        expect = MAX_POOL.formal_kernel(x, **attrs)
    except NNEFXError:
        return
    got = MAX_POOL.fast_kernel(x, **attrs)
    assert got.shape == expect.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, expect)  # NaN positions match, values exact
    assert not np.shares_memory(got, x)


def test_unit_window_returns_a_copy():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    got = MAX_POOL.fast_kernel(x, size=[1, 1, 1])
    np.testing.assert_array_equal(got, x)
    assert not np.shares_memory(got, x)
