"""The integer operator set: formal == fast bit for bit over random shapes, attributes and
values up to the precision limits (hypothesis), consistent refusal of invalid attributes,
and the documented arithmetic (rounding shifts, C division, clamped gathers, NMS overlap)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnefx import NNEFXError
from nnefx.ops import registry
from nnefx.ops.integer._int import INT32_MAX, INT32_MIN, alpha, round_shift_right, trunc_div
from nnefx.ops.integer.vision import iou_int

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RUNTIME_OPS = """sum max broadcast_add broadcast_sub broadcast_mul broadcast_div broadcast_max
broadcast_greater conv2d dense relu max_pool2d upsampling abs cvm_precision elemwise_add elemwise_sub
negative clip cvm_clip cvm_right_shift cvm_left_shift repeat tile flatten concatenate transpose
strided_slice slice_like take cvm_lut expand_dims reshape squeeze where get_valid_counts
non_max_suppression""".split()


# --- helpers -------------------------------------------------------------------------------------

@st.composite
def values(draw, shape, max_precision=33):
    """int32 array of ``shape``; precision 33 stands for the full int32 range (INT32_MIN too)."""
    p = draw(st.integers(1, max_precision))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if p == 33:
        a = rng.integers(INT32_MIN, INT32_MAX, size=shape, endpoint=True, dtype=np.int64)
        a.reshape(-1)[: min(a.size, 2)] = [INT32_MIN, INT32_MAX][: min(a.size, 2)]
    else:
        lim = alpha(p)
        a = rng.integers(-lim, lim, size=shape, endpoint=True, dtype=np.int64)
    return a.astype(np.int32)


def shapes(min_rank=1, max_rank=4, max_dim=4):
    return st.lists(st.integers(1, max_dim), min_size=min_rank, max_size=max_rank).map(tuple)


def check(name, *inputs, **attribs):
    """formal and fast agree bit for bit (or both refuse); the result has the rule's shape."""
    entry = registry.get(name)
    try:
        expected = entry.kernel("formal")(*inputs, **attribs)
    except NNEFXError as exc:
        assert name in exc.message
        with pytest.raises(NNEFXError):
            entry.kernel("fast")(*inputs, **attribs)
        return None
    got = entry.kernel("fast")(*inputs, **attribs)
    multi = isinstance(expected, tuple)
    exp_list = list(expected) if multi else [expected]
    got_list = list(got) if multi else [got]
    in_shapes = [[np.shape(i) for i in x] if isinstance(x, list) else np.shape(x) for x in inputs]
    rule = entry.shape_rule(*in_shapes, **attribs)
    rule_list = list(rule) if multi else [rule]
    for e, g, s in zip(exp_list, got_list, rule_list, strict=True):
        assert isinstance(g, np.ndarray) and g.dtype == np.int32 and e.dtype == np.int32
        assert e.shape == tuple(s) == g.shape
        np.testing.assert_array_equal(e, g)
    return expected


# --- registry --------------------------------------------------------------------------------------

def test_every_runtime_operator_is_registered_with_prefix_and_integer_declaration():
    cvm = {op.name: op for op in registry.all_ops("cvm")}
    assert set(cvm) == {"cvm_" + n for n in RUNTIME_OPS}
    for op in cvm.values():
        assert op.declaration.startswith(f"fragment {op.name}(")
        assert "tensor<integer>" in op.declaration and "scalar" not in op.declaration
        assert op.formal_kernel and op.fast_kernel and op.shape_rule
        assert callable(op.extra["precision"])
        assert op.extra["runtime_name"] == op.name[4:]


# --- elementwise -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cvm_abs", "cvm_negative", "cvm_cvm_precision", "cvm_relu"])
@SETTINGS
@given(st.data())
def test_unary(name, data):
    check(name, data.draw(values(data.draw(shapes()))))


@SETTINGS
@given(st.data())
def test_clip(data):
    lo = data.draw(st.integers(-INT32_MAX, INT32_MAX - 1))
    hi = data.draw(st.integers(lo + 1, INT32_MAX))
    check("cvm_clip", data.draw(values(data.draw(shapes()))), a_min=lo, a_max=hi)


@pytest.mark.parametrize("name", ["cvm_cvm_right_shift", "cvm_cvm_left_shift"])
@SETTINGS
@given(st.data())
def test_shifts(name, data):
    x = data.draw(values(data.draw(shapes())))
    check(name, x, precision=data.draw(st.integers(1, 32)), shift_bit=data.draw(st.integers(1, 32)))


@SETTINGS
@given(st.data())
def test_cvm_clip(data):
    check("cvm_cvm_clip", data.draw(values(data.draw(shapes()))), precision=data.draw(st.integers(1, 32)))


@pytest.mark.parametrize("name", ["cvm_elemwise_add", "cvm_elemwise_sub"])
@SETTINGS
@given(st.data())
def test_elemwise_binary(name, data):
    s = data.draw(shapes())
    check(name, data.draw(values(s)), data.draw(values(s)))


@st.composite
def broadcast_pair(draw):
    out = draw(shapes())

    def one():
        rank = draw(st.integers(1, len(out)))
        return tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - rank:])

    return one(), one()


@pytest.mark.parametrize("name", ["cvm_broadcast_" + k for k in ("add", "sub", "mul", "div", "max", "greater")])
@SETTINGS
@given(st.data())
def test_broadcast(name, data):
    sa, sb = data.draw(broadcast_pair())
    b = data.draw(values(sb))
    if name.endswith("div"):
        b.reshape(-1)[0] = 0  # division by zero is defined (0)
    check(name, data.draw(values(sa)), b)


def test_broadcast_refuses_incompatible_shapes():
    with pytest.raises(NNEFXError, match="cvm_broadcast_add.*do not broadcast"):
        registry.get("cvm_broadcast_add").kernel("fast")(np.zeros((2, 3), np.int32), np.zeros((4,), np.int32))


# --- reduce ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cvm_sum", "cvm_max"])
@SETTINGS
@given(st.data())
def test_reduce(name, data):
    s = data.draw(shapes())
    axes = data.draw(st.lists(st.integers(-len(s), len(s) - 1), max_size=len(s), unique_by=lambda a: a % len(s)))
    check(name, data.draw(values(s)), axis=axes, keepdims=data.draw(st.booleans()),
          exclude=data.draw(st.booleans()))


def test_reduce_departure_max_default_axis_starts_at_zero():
    x = -np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    for backend in ("formal", "fast"):
        k = registry.get("cvm_max").kernel(backend)
        assert k(x).tolist() == [0]
        assert k(x, axis=[0, 1]).tolist() == [-1]
        assert k(x, axis=[], exclude=True).tolist() == [-1]


def test_reduce_refuses_out_of_range_and_repeated_axes():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(NNEFXError, match=r"'cvm_sum'.*'axis' = \(2,\).*out of range"):
        registry.get("cvm_sum").kernel("formal")(x, axis=[2])
    with pytest.raises(NNEFXError, match="repeats an axis"):
        registry.get("cvm_sum").kernel("fast")(x, axis=[1, -1])


# --- nn ----------------------------------------------------------------------------------------------

@st.composite
def conv_case(draw):
    groups = draw(st.integers(1, 2))
    ic, opg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 7))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 7))
    n = draw(st.integers(1, 2))
    use_bias = draw(st.booleans())
    p = draw(st.sampled_from([8, 8, 16, 33]))  # 8 bits (the runtime's limit) and wider, wrapping
    x = draw(values((n, ic * groups, h, w), p))
    wt = draw(values((opg * groups, ic, kh, kw), p))
    b = draw(values((opg * groups,), p)) if use_bias else 0
    attribs = dict(channels=opg * groups, kernel_size=[kh, kw], strides=[sh, sw], padding=[ph, pw],
                   dilation=[dh, dw], groups=groups, use_bias=use_bias)
    return x, wt, b, attribs


@SETTINGS
@given(conv_case())
def test_conv2d(case):
    x, w, b, attribs = case
    check("cvm_conv2d", x, w, b, **attribs)


def test_conv2d_refuses_bad_groups_and_weights():
    k = registry.get("cvm_conv2d").kernel("fast")
    x = np.zeros((1, 4, 5, 5), np.int32)
    with pytest.raises(NNEFXError, match=r"'cvm_conv2d'.*'groups' = 3 must divide the input channels 4"):
        k(x, np.zeros((3, 1, 3, 3), np.int32), 0, channels=3, kernel_size=[3, 3], groups=3, use_bias=False)
    with pytest.raises(NNEFXError, match="weight shape"):
        k(x, np.zeros((2, 3, 3, 3), np.int32), 0, channels=2, kernel_size=[3, 3], use_bias=False)
    with pytest.raises(NNEFXError, match=r"'strides' = \(0, 1\)"):
        k(x, np.zeros((2, 4, 3, 3), np.int32), 0, channels=2, kernel_size=[3, 3], strides=[0, 1], use_bias=False)


@SETTINGS
@given(st.data())
def test_dense(data):
    m, k, units = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    use_bias = data.draw(st.booleans())
    p = data.draw(st.sampled_from([8, 33]))
    b = data.draw(values((units,), p)) if use_bias else 0
    check("cvm_dense", data.draw(values((m, k), p)), data.draw(values((units, k), p)), b,
          units=units, use_bias=use_bias)


@SETTINGS
@given(st.data())
def test_max_pool2d(data):
    psh, psw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    pad = data.draw(st.sampled_from([[0], [1], [0, 0], [1, 0], [0, 1], [1, 1], [2, 2]]))
    h = data.draw(st.integers(1, 7))
    w = data.draw(st.integers(1, 7))
    x = data.draw(values((data.draw(st.integers(1, 2)), 2, h, w)))
    check("cvm_max_pool2d", x, pool_size=[psh, psw], strides=[data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))],
          padding=pad, ceil_mode=data.draw(st.booleans()))


def test_max_pool2d_refuses_padding_not_below_pool():
    with pytest.raises(NNEFXError, match=r"'cvm_max_pool2d'.*'padding' = \(2, 2\)"):
        registry.get("cvm_max_pool2d").kernel("formal")(np.zeros((1, 1, 4, 4), np.int32), pool_size=[2, 2],
                                                        padding=[2, 2])


@SETTINGS
@given(st.data())
def test_upsampling(data):
    check("cvm_upsampling", data.draw(values(data.draw(shapes(4, 4, 3)))), scale=data.draw(st.integers(1, 3)))


# --- transform -----------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_repeat_tile_flatten_transpose(data):
    s = data.draw(shapes())
    x = data.draw(values(s))
    n = len(s)
    check("cvm_repeat", x, repeats=data.draw(st.integers(1, 3)), axis=data.draw(st.integers(-n, n - 1)))
    check("cvm_tile", x, reps=data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=5)))
    check("cvm_flatten", x)
    perm = data.draw(st.one_of(st.just([]), st.permutations(range(n)).map(list)))
    perm = [p - n if data.draw(st.booleans()) else p for p in perm]
    check("cvm_transpose", x, axes=perm)


def test_transpose_refuses_non_permutation():
    with pytest.raises(NNEFXError, match=r"'cvm_transpose'.*'axes' = \(0, 0\)"):
        registry.get("cvm_transpose").kernel("fast")(np.zeros((2, 3), np.int32), axes=[0, 0])


@SETTINGS
@given(st.data())
def test_concatenate(data):
    s = list(data.draw(shapes()))
    n = len(s)
    axis = data.draw(st.integers(-n, n - 1))
    xs = []
    for _ in range(data.draw(st.integers(1, 3))):
        s2 = list(s)
        s2[axis] = data.draw(st.integers(1, 3))
        xs.append(data.draw(values(tuple(s2))))
    check("cvm_concatenate", xs, axis=axis)


@SETTINGS
@given(st.data())
def test_strided_slice(data):
    s = data.draw(shapes())
    n = len(s)
    ints = st.integers(-6, 6)
    begin = data.draw(st.lists(ints, max_size=n))
    end = data.draw(st.lists(ints, max_size=n))
    stride = data.draw(st.lists(st.integers(-3, 3).filter(bool), max_size=n))
    check("cvm_strided_slice", data.draw(values(s)), begin=begin, end=end, stride=stride)


def test_strided_slice_follows_runtime_clipping():
    x = np.arange(6, dtype=np.int32)
    k = registry.get("cvm_strided_slice").kernel("formal")
    assert k(x, begin=[0], end=[100]).tolist() == [0, 1, 2, 3, 4, 5]  # end clipped to n, not n-1
    assert k(x, begin=[-1], end=[-100], stride=[-2]).tolist() == [5, 3, 1]
    assert k(x.reshape(2, 3)).tolist() == [[0, 1, 2]]  # end defaults to (1,)
    with pytest.raises(NNEFXError, match="selects nothing"):
        k(x, begin=[3], end=[3])


@SETTINGS
@given(st.data())
def test_slice_like(data):
    s = data.draw(shapes())
    like = tuple(data.draw(st.integers(1, d)) for d in s)
    if data.draw(st.booleans()):
        like = like + (2,)
        axis = data.draw(st.lists(st.integers(-len(s), len(s) - 1), min_size=1, max_size=len(s)))
    else:
        axis = []
    check("cvm_slice_like", data.draw(values(s)), np.zeros(like, np.int32), axis=axis)


@SETTINGS
@given(st.data())
def test_take_and_lut(data):
    s = data.draw(shapes(1, 3))
    x = data.draw(values(s))
    ind = data.draw(st.lists(st.integers(-3, 12), min_size=1, max_size=6)).copy()
    ind = np.array(ind, np.int32).reshape(data.draw(st.sampled_from([(len(ind),), (1, len(ind))])))
    axis = data.draw(st.one_of(st.just([]), st.integers(-len(s), len(s) - 1).map(lambda a: [a])))
    check("cvm_take", x, ind, axis=axis)
    check("cvm_cvm_lut", ind, x.reshape(-1), in_dim=x.size)


def test_take_clamps_indices():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    for backend in ("formal", "fast"):
        k = registry.get("cvm_take").kernel(backend)
        assert k(x, np.array([-5, 1, 99], np.int32)).tolist() == [1, 2, 6]
        assert k(x, np.array([-1, 7], np.int32), axis=[-1]).tolist() == [[1, 3], [4, 6]]


@SETTINGS
@given(st.data())
def test_expand_reshape_squeeze(data):
    s = data.draw(shapes())
    n = len(s)
    x = data.draw(values(s))
    check("cvm_expand_dims", x, axis=data.draw(st.integers(-n - 1, n)), num_newaxis=data.draw(st.integers(1, 3)))
    codes = [[-1], [0, -1], [-2], [-1, 1]]
    if n >= 2:
        codes += [[-3, -2], [0, 0, -2]]
    d0 = s[0]
    f = data.draw(st.sampled_from([k for k in range(1, d0 + 1) if d0 % k == 0]))
    codes.append([-4, f, -1, -2])
    check("cvm_reshape", x, shape=data.draw(st.sampled_from(codes)))
    ones = [i for i, d in enumerate(s) if d == 1]
    axis = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    check("cvm_squeeze", x, axis=axis)


def test_reshape_refuses_wrong_size_and_two_infers():
    k = registry.get("cvm_reshape").kernel("fast")
    with pytest.raises(NNEFXError, match=r"'cvm_reshape'.*'shape' = \(5,\)"):
        k(np.zeros((2, 3), np.int32), shape=[5])
    with pytest.raises(NNEFXError, match="more than one -1"):
        k(np.zeros((2, 3), np.int32), shape=[-1, -1])


@SETTINGS
@given(st.data())
def test_where(data):
    s = data.draw(shapes())
    cshape = data.draw(st.sampled_from([s, (s[0],)]))
    cond = data.draw(values(cshape, 2))
    check("cvm_where", cond, data.draw(values(s)), data.draw(values(s)))


# --- vision ------------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_get_valid_counts(data):
    b, n, k = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 6)), data.draw(st.integers(2, 7))
    x = data.draw(values((b, n, k), 6))
    check("cvm_get_valid_counts", x, score_threshold=data.draw(st.integers(-10, 10)))


@SETTINGS
@given(st.data())
def test_non_max_suppression(data):
    b, n = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 7))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = np.empty((b, n, 6), np.int32)
    x[:, :, 0] = rng.integers(-1, 3, (b, n))
    x[:, :, 1] = rng.integers(0, 4, (b, n))  # few scores: ties exercise the stable sort
    wide = data.draw(st.booleans())  # full int32 coordinates exercise the int32/int64 wrap-around
    x[:, :, 2:] = rng.integers(INT32_MIN, INT32_MAX, (b, n, 4), endpoint=True) if wide else rng.integers(0, 12, (b, n, 4))
    v = rng.integers(-1, n + 2, (b,)).astype(np.int32)
    check("cvm_non_max_suppression", x, v, max_output_size=data.draw(st.integers(-1, n)),
          iou_threshold=data.draw(st.integers(1, 101)), force_suppress=data.draw(st.booleans()),
          top_k=data.draw(st.integers(-1, n)))


def test_nms_iou_is_integer_percent_and_refuses_bad_threshold():
    a = [0, 9, 0, 0, 10, 10]
    assert iou_int(a, a) == 100
    assert iou_int(a, [0, 9, 5, 0, 15, 10]) == 33  # 50 / 150
    assert iou_int(a, [0, 9, 20, 20, 30, 30]) == 0
    with pytest.raises(NNEFXError, match=r"'iou_threshold' = 0"):
        registry.get("cvm_non_max_suppression").kernel("formal")(
            np.zeros((1, 2, 6), np.int32), np.array([2], np.int32), iou_threshold=0)


# --- arithmetic conventions ---------------------------------------------------------------------------

def test_right_shift_rounds_half_toward_plus_infinity():
    x = np.array([-3, -5, 3, 5, -4, 4, INT32_MAX], np.int32)  # /2: -1.5 -2.5 1.5 2.5 -2 2
    assert round_shift_right(x, 1)[:6].tolist() == [-1, -2, 2, 3, -2, 2]
    # runtime departure: x = 2^31-1, s = 1 wraps to -2^30 (seed: 2^30)
    assert int(round_shift_right(x, 1)[6]) == -(2**30)
    assert round_shift_right(x, 32).tolist() == [0] * 7
    for backend in ("formal", "fast"):
        k = registry.get("cvm_cvm_right_shift").kernel(backend)
        assert k(np.array([-3 * 64], np.int32), precision=10, shift_bit=7).tolist() == [-1]


def test_division_truncates_toward_zero_and_by_zero_gives_zero():
    a = np.array([-9, 9, 7, -7, 5], np.int32)
    b = np.array([4, -4, 0, 2, -1], np.int32)
    assert trunc_div(a, b).tolist() == [-2, -2, 0, -3, -5]


def test_cvm_precision_counts_bits():
    x = np.array([0, 1, 2, 3, 4, -7, -8, 127, INT32_MAX], np.int32)
    for backend in ("formal", "fast"):
        assert registry.get("cvm_cvm_precision").kernel(backend)(x).tolist() == [1, 1, 2, 2, 3, 3, 4, 7, 31]


def test_kernels_refuse_float_inputs():
    with pytest.raises(NNEFXError, match="'cvm_relu'.*integers"):
        registry.get("cvm_relu").kernel("fast")(np.zeros(3, np.float32))


def test_attribute_errors_name_operator_attribute_and_value():
    with pytest.raises(NNEFXError) as info:
        registry.get("cvm_cvm_clip").kernel("fast")(np.zeros(3, np.int32), precision=33)
    msg = info.value.message
    assert "cvm_cvm_clip" in msg and "precision" in msg and "33" in msg


_SCALAR = np.array(5, np.int32)
_TABLE = np.arange(3, dtype=np.int32)


@pytest.mark.parametrize("name, inputs, attribs", [
    ("cvm_abs", (_SCALAR,), {}), ("cvm_relu", (_SCALAR,), {}), ("cvm_negative", (_SCALAR,), {}),
    ("cvm_cvm_precision", (_SCALAR,), {}), ("cvm_clip", (_SCALAR,), {"a_min": 0, "a_max": 3}),
    ("cvm_cvm_clip", (_SCALAR,), {"precision": 2}),
    ("cvm_cvm_right_shift", (_SCALAR,), {"precision": 2, "shift_bit": 1}),
    ("cvm_sum", (_SCALAR,), {}), ("cvm_max", (_SCALAR,), {}), ("cvm_flatten", (_SCALAR,), {}),
    ("cvm_transpose", (_SCALAR,), {}), ("cvm_tile", (_SCALAR,), {"reps": [2]}),
    ("cvm_squeeze", (_SCALAR,), {}), ("cvm_expand_dims", (_SCALAR,), {"axis": 0}),
    ("cvm_reshape", (_SCALAR,), {"shape": [1]}), ("cvm_broadcast_add", (_SCALAR, _SCALAR), {}),
    ("cvm_broadcast_div", (_SCALAR, _SCALAR), {}), ("cvm_elemwise_add", (_SCALAR, _SCALAR), {}),
    ("cvm_where", (_SCALAR, _SCALAR, _SCALAR), {}), ("cvm_take", (_TABLE, _SCALAR), {}),
    ("cvm_cvm_lut", (_SCALAR, _TABLE), {"in_dim": 3}), ("cvm_slice_like", (_SCALAR, _SCALAR), {}),
])
def test_rank_zero_tensors_give_int32_arrays(name, inputs, attribs):
    """NNEF graphs may hold rank-0 tensors: both backends still return int32 ndarrays."""
    assert check(name, *inputs, **attribs) is not None
