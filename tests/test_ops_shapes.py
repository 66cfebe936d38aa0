"""Shape rules: NNEF broadcasting, unknown extents, window arithmetic, and clear errors.

Also pins the numeric conventions the kernels document (round ties, cast floor, border
modes) on hand-checked values.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry


def shape(name, *shapes, **attribs):
    return registry.get(name).shape_rule(*shapes, **attribs)


def run(name, backend, *args, **attribs):
    return registry.get(name).kernel(backend)(*args, **attribs)


BACKENDS = ["formal", "fast"]


# --- broadcasting ---------------------------------------------------------------------------

def test_broadcast_aligns_from_dimension_zero_with_trailing_ones():
    assert shape("add", (1, 3, 10, 10), (3,)) == (3, 3, 10, 10)
    assert shape("add", (2, 3), (1, 3, 4)) == (2, 3, 4)
    assert shape("select", (2, 1), (1, 3), (2, 3, 5)) == (2, 3, 5)
    with pytest.raises(NNEFXError, match="operation 'mul'.*cannot be broadcast"):
        shape("mul", (2, 3), (3,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_kernels_pad_trailing_ones(backend):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([10.0, 20.0], np.float32)  # shape [2] lines up with dimension 0
    np.testing.assert_array_equal(run("add", backend, x, y), x + y[:, None])
    with pytest.raises(NNEFXError, match="'sub'"):
        run("sub", backend, x, np.ones(3, np.float32))


def test_unknown_extents_propagate():
    assert shape("add", (None, 3), (1, 3)) == (None, 3)
    assert shape("add", (None, 1), (4, 3)) == (4, 3)
    assert shape("conv", (None, 3, None, 8), (16, 3, 3, 3), (1, 16), stride=[2, 2]) == (None, 16, None, 4)
    assert shape("reshape", (None, 3, 4), shape=[0, -1]) == (None, 12)
    assert shape("reshape", (2, None, 4), shape=[-1]) == (None,)
    assert shape("sum_reduce", (None, 5), axes=[1]) == (None, 1)
    assert shape("concat", [(2, None), (2, 3)], axis=1) == (2, None)
    assert shape("slice", (None, 6), axes=[0, 1], begin=[0, 1], end=[2, 5]) == (None, 4)
    assert shape("matmul", (None, 2, 3), (1, 3, 4)) == (None, 2, 4)
    assert shape("nearest_upsample", (1, 2, None, 3), factor=[2, 2]) == (1, 2, None, 6)


# --- windows --------------------------------------------------------------------------------

def test_automatic_padding_gives_ceil_of_extent_over_stride():
    assert shape("conv", (1, 1, 7, 7), (4, 1, 3, 3), (), stride=[2, 2]) == (1, 4, 4, 4)
    assert shape("box", (1, 1, 7, 6), size=[1, 1, 3, 3], stride=[1, 1, 2, 2]) == (1, 1, 4, 3)
    assert shape("deconv", (1, 4, 4, 4), (4, 2, 3, 3), (), stride=[2, 2]) == (1, 2, 8, 8)
    assert shape("max_pool", (1, 1, 5, 5), size=[1, 1, 2, 2], stride=[1, 1, 2, 2],
                 padding=[(0, 0)] * 4) == (1, 1, 2, 2)


def test_explicit_padding_and_dilation_follow_the_down_scaling_formula():
    # x = floor((p + X + q - ((f - 1) * d + 1)) / s) + 1
    assert shape("conv", (1, 2, 10, 9), (3, 2, 3, 2), (), padding=[(1, 2), (0, 0)], stride=[3, 2],
                 dilation=[2, 3]) == (1, 3, 3, 3)
    assert shape("deconv", (1, 3, 3, 3), (3, 2, 3, 2), (), padding=[(1, 2), (0, 0)], stride=[3, 2],
                 dilation=[2, 3]) == (1, 2, 8, 8)


def test_conv_arrays_are_spatial_and_pool_arrays_full_rank():
    with pytest.raises(NNEFXError, match=r"attribute 'stride' = \[1, 1, 2, 2\]"):
        shape("conv", (1, 1, 8, 8), (1, 1, 3, 3), (), stride=[1, 1, 2, 2])
    with pytest.raises(NNEFXError, match=r"attribute 'size' = \[3, 3\] must have 4 items"):
        shape("max_pool", (1, 1, 8, 8), size=[3, 3])


def test_deconv_output_shape_must_down_scale_to_the_input():
    assert shape("deconv", (1, 2, 4, 4), (2, 1, 3, 3), (), stride=[2, 2], output_shape=[1, 1, 7, 8]) == (1, 1, 7, 8)
    with pytest.raises(NNEFXError, match="operation 'deconv': attribute 'output_shape'"):
        shape("deconv", (1, 2, 4, 4), (2, 1, 3, 3), (), stride=[2, 2], output_shape=[1, 1, 12, 8])


def test_groups_and_bias_are_checked():
    assert shape("conv", (1, 6, 5, 5), (6, 1, 3, 3), (), groups=0) == (1, 6, 5, 5)
    with pytest.raises(NNEFXError, match="operation 'conv'.*needs 2\\*2 = 4 input channels"):
        shape("conv", (1, 6, 5, 5), (4, 2, 3, 3), (), groups=2)
    with pytest.raises(NNEFXError, match="operation 'conv': bias"):
        shape("conv", (1, 2, 5, 5), (4, 2, 3, 3), (1, 3))
    with pytest.raises(NNEFXError, match=r"attribute 'groups' = -1"):
        shape("conv", (1, 2, 5, 5), (4, 2, 3, 3), (), groups=-1)


# --- shape operations --------------------------------------------------------------------------

def test_slice_extent_is_ceil_and_legacy_end_zero_means_to_the_end():
    assert shape("slice", (5,), axes=[0], begin=[0], end=[5], stride=[2]) == (3,)
    assert shape("slice", (7, 4), axes=[0], begin=[2], end=[0]) == (5, 4)
    assert shape("slice", (7,), axes=[0], begin=[-1], end=[-8], stride=[-3]) == (3,)
    x = np.arange(7, dtype=np.float32)
    for backend in BACKENDS:
        np.testing.assert_array_equal(run("slice", backend, x, axes=[0], begin=[-1], end=[-8], stride=[-3],
                                          dtype="scalar"), [6, 3, 0])
    with pytest.raises(NNEFXError, match=r"attribute 'stride' = \[0\] must not contain 0"):
        shape("slice", (5,), axes=[0], begin=[0], end=[5], stride=[0])


def test_reshape_squeeze_transpose_validation_names_the_attribute():
    assert shape("reshape", (2, 3, 4), shape=[4, 3], axis_start=1, axis_count=2) == (2, 4, 3)
    with pytest.raises(NNEFXError, match=r"operation 'reshape': attribute 'shape' = \[5, -1\]"):
        shape("reshape", (2, 3, 4), shape=[5, -1])
    with pytest.raises(NNEFXError, match=r"operation 'squeeze': attribute 'axes' = \[0\]"):
        shape("squeeze", (2, 1), axes=[0])
    with pytest.raises(NNEFXError, match=r"operation 'transpose': attribute 'axes' = \[0, 2\]"):
        shape("transpose", (2, 3, 4), axes=[0, 2])
    assert shape("transpose", (2, 3, 4), axes=[1, 0]) == (3, 2, 4)
    assert shape("unsqueeze", (2, 3), axes=[0, 3]) == (1, 2, 3, 1)
    with pytest.raises(NNEFXError, match=r"operation 'split': attribute 'ratios' = \[1, 1\]"):
        shape("split", (2, 5), axis=1, ratios=[1, 1])
    with pytest.raises(NNEFXError, match=r"operation 'sum_reduce': attribute 'axes' = \[2\]"):
        shape("sum_reduce", (2, 5), axes=[2])
    with pytest.raises(NNEFXError, match=r"operation 'pad': attribute 'border' = 'ignore'"):
        shape("pad", (2, 5), padding=[(0, 0), (1, 1)], border="ignore")


def test_runtime_index_errors_are_nnefx_errors():
    x = np.zeros((3, 4), np.float32)
    for backend in BACKENDS:
        with pytest.raises(NNEFXError, match="operation 'gather': index 4 is outside"):
            run("gather", backend, x, np.array([0, 4]), axis=1, dtype="scalar")
        with pytest.raises(NNEFXError, match="operation 'cast'"):
            run("cast", backend, np.array([np.nan], np.float32), dtype="integer")
        with pytest.raises(NNEFXError, match="operation 'sample'"):
            run("sample", backend, x, np.full((3, 2), 9), size=[1, 2], stride=[1, 2])


def test_attribute_validation_of_other_families():
    with pytest.raises(NNEFXError, match=r"attribute 'bits' = 0"):
        shape("linear_quantize", (2, 3), (), (), bits=0)
    with pytest.raises(NNEFXError, match=r"attribute 'method' = 'cubic'"):
        shape("multilinear_upsample", (1, 1, 2, 2), factor=[2, 2], method="cubic")
    with pytest.raises(NNEFXError, match=r"attribute 'factor' = \[2, 2\].*divide"):
        shape("area_downsample", (1, 1, 5, 4), factor=[2, 2])
    with pytest.raises(NNEFXError, match=r"attribute 'times' = 0"):
        shape("copy_n", (2,), times=0)
    with pytest.raises(NNEFXError, match=r"attribute 'shape' = \[2, 0\]"):
        shape("external", shape=[2, 0])
    with pytest.raises(NNEFXError, match=r"attribute 'value'"):
        shape("constant", shape=[2, 2], value=[1.0, 2.0])
    with pytest.raises(NNEFXError, match="operation 'matmul': inner dimensions differ"):
        shape("matmul", (2, 3), (4, 5))
    assert shape("roi_resample", (2, 3, 8, 8), (5, 4), (5, 1), output_size=[2, 2]) == (5, 3, 2, 2)


# --- numeric conventions ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_round_is_floor_of_x_plus_half(backend):
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -1.2], np.float32)
    np.testing.assert_array_equal(run("round", backend, x), [-2, 0, 1, 2, 3, 0, -1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_scalar_to_integer_is_floor(backend):
    x = np.array([-1.5, -0.0, 2.7, 3.0], np.float32)
    np.testing.assert_array_equal(run("cast", backend, x, dtype="integer"), [-2, 0, 2, 3])
    np.testing.assert_array_equal(run("cast", backend, np.array([0, 2, -1]), dtype="logical"), [False, True, True])
    np.testing.assert_array_equal(run("cast", backend, np.array([True, False]), dtype="scalar"), [1.0, 0.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_border_zeros_take_part_and_ignore_skips(backend):
    x = -np.ones((1, 1, 2, 2), np.float32)
    pool = dict(size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)])
    np.testing.assert_array_equal(run("max_pool", backend, x, border="constant", **pool), np.zeros((1, 1, 2, 2)))
    np.testing.assert_array_equal(run("max_pool", backend, x, border="ignore", **pool), -np.ones((1, 1, 2, 2)))
    # avg: constant divides by the window volume 9, ignore by the 4 in-range positions
    np.testing.assert_allclose(run("avg_pool", backend, x, border="constant", **pool), np.full((1, 1, 2, 2), -4 / 9))
    np.testing.assert_allclose(run("avg_pool", backend, x, border="ignore", **pool), -np.ones((1, 1, 2, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_border_modes(backend):
    x = np.array([1, 2, 3], np.float32)
    got = {b: run("pad", backend, x, padding=[(2, 2)], border=b, value=9.0).tolist()
           for b in ("constant", "replicate", "reflect", "reflect-even")}
    assert got == {"constant": [9, 9, 1, 2, 3, 9, 9], "replicate": [1, 1, 1, 2, 3, 3, 3],
                   "reflect": [3, 2, 1, 2, 3, 2, 1], "reflect-even": [2, 1, 1, 2, 3, 3, 2]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_argmax_pool_index_is_window_relative_row_major(backend):
    x = np.array([[[[1, 5, 2, 2], [7, 0, 2, 9]]]], np.float32)
    idx = run("argmax_pool", backend, x, size=[1, 1, 2, 2], stride=[1, 1, 2, 2], padding=[(0, 0)] * 4)
    np.testing.assert_array_equal(idx, [[[[2, 3]]]])
    ties = run("argmax_pool", backend, np.ones((1, 1, 2, 2), np.float32), size=[1, 1, 2, 2],
               padding=[(0, 0)] * 4)
    np.testing.assert_array_equal(ties, [[[[0]]]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_axis_arg_reduce_uses_row_major_index(backend):
    x = np.zeros((2, 3, 4), np.float32)
    x[1, 2, 1] = 5.0
    np.testing.assert_array_equal(run("argmax_reduce", backend, x, axes=[1, 2])[1].ravel(), [2 * 4 + 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_point_quantize_uses_the_spec_lower_bound(backend):
    x = np.array([-10.0, -1.0, 0.26, 10.0], np.float32)
    y = run("zero_point_linear_quantize", backend, x, np.int64(0), np.float32(0.5), bits=3, signed=True,
            symmetric=False)
    # r = 2^2 - 1 = 3; q in [-4, 3]; y = q * 0.5
    np.testing.assert_array_equal(y, [-2.0, -1.0, 0.5, 1.5])


@pytest.mark.parametrize("extent,begin,end,stride", [(1, 0, -2, 1), (4, 4, 0, -1), (1, 0, 1, -1), (5, -9, 3, 2)])
def test_slice_refuses_ranges_invalid_after_normalisation(extent, begin, end, stride):
    # normalise: negative + extent, then clamp into [-1, extent]; positive stride needs
    # 0 <= begin <= end, negative stride end <= begin < extent
    with pytest.raises(NNEFXError, match="operation 'slice': axis 0"):
        shape("slice", (extent,), axes=[0], begin=[begin], end=[end], stride=[stride])


def test_slice_empty_and_full_reverse_ranges_are_valid():
    assert shape("slice", (4,), axes=[0], begin=[2], end=[2], stride=[1]) == (0,)
    assert shape("slice", (4,), axes=[0], begin=[3], end=[-5], stride=[-1]) == (4,)
