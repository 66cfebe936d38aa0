"""The tract domain (``tract_core_*``, ``tract_transformers_*``): formal against fast kernels,
shape rules against the results, tract itself as a peer, and bad attributes as errors.

Each case is ``(operation, tensor arguments, attributes)``; ``PEER`` marks the cases that tract
(Python bindings) runs from a one-operation NNEF document (see ``_tract_peer.py``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

RNG = np.random.default_rng(14)


def f32(*shape, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def ints(*shape, lo=-5, hi=5, dtype=np.int64):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


SPECIAL = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, -3.7, 1e-3, 30.0, -30.0], np.float32)
BOOLS_A = np.array([[True, False, True], [False, False, True]])
BOOLS_B = np.array([True, False])

CASES = {
    # element-wise
    "erf": ("tract_core_erf", [f32(3, 4)], {}),
    "erf_special": ("tract_core_erf", [SPECIAL], {}),
    "erf_f16": ("tract_core_erf", [f32(5).astype(np.float16)], {}),
    "hard_swish": ("tract_core_hard_swish", [f32(3, 4, lo=-5, hi=5)], {}),
    "round_even": ("tract_core_round_even", [SPECIAL], {}),
    "silu": ("tract_core_silu", [f32(2, 5)], {}),
    "silu_transformers": ("tract_transformers_silu", [f32(7)], {}),
    "gelu_approx": ("tract_core_gelu_approx", [f32(2, 6)], {"fast_impl": False}),
    "gelu_approx_fast": ("tract_core_gelu_approx", [f32(2, 6)], {"fast_impl": True}),
    "gelu_approx_transformers": ("tract_transformers_gelu_approx", [f32(4)], {"fast_impl": False}),
    "is_nan": ("tract_core_is_nan", [np.array([1.0, np.nan, -np.inf, 0.0], np.float32)], {}),
    "is_inf": ("tract_core_is_inf", [np.array([1.0, np.nan, -np.inf, np.inf], np.float32)], {}),
    "is_inf_pos": ("tract_core_is_inf", [np.array([1.0, np.nan, -np.inf, np.inf], np.float32)],
                   {"detect_negative": False}),
    "bitnot_i32": ("tract_core_bitnot", [ints(3, 4, lo=-1000, hi=1000, dtype=np.int32)], {}),
    "bitnot_u8": ("tract_core_bitnot", [ints(6, lo=0, hi=255, dtype=np.uint8)], {}),
    "bitnot_bool": ("tract_core_bitnot", [BOOLS_A], {}),
    "bitand": ("tract_core_bitand", [ints(2, 3, lo=0, hi=100), ints(2, lo=0, hi=100)], {}),
    "bitor": ("tract_core_bitor", [ints(2, 3, lo=-100, hi=100, dtype=np.int32), ints(2, 3, dtype=np.int32)], {}),
    "bitxor": ("tract_core_bitxor", [ints(2, 3, lo=0, hi=100, dtype=np.uint8), ints(1, lo=0, hi=9, dtype=np.uint8)],
               {}),
    "bitand_bool": ("tract_core_bitand", [BOOLS_A, BOOLS_B], {}),
    "xor": ("tract_core_xor", [BOOLS_A, BOOLS_B], {}),
    # indexing
    "gather": ("tract_core_gather", [f32(4, 5, 2), ints(3, lo=-4, hi=4)], {"axis": 0}),
    "gather_2d_idx": ("tract_core_gather", [f32(3, 5), ints(2, 2, lo=0, hi=5)], {"axis": 1}),
    "gather_i32": ("tract_core_gather", [ints(3, 5, dtype=np.int32), ints(4, lo=-5, hi=5, dtype=np.int32)],
                   {"axis": 1}),
    "gather_elements": ("tract_core_gather_elements", [f32(3, 4), ints(3, 2, lo=-4, hi=4)], {"axis": 1}),
    "gather_elements_ax0": ("tract_core_gather_elements", [f32(3, 4), ints(5, 4, lo=0, hi=3)], {"axis": 0}),
    "gather_nd": ("tract_core_gather_nd", [f32(3, 4, 2), ints(5, 2, lo=0, hi=3)], {"batch_dims": 0}),
    "gather_nd_batch": ("tract_core_gather_nd", [f32(2, 4, 3), ints(2, 3, 1, lo=0, hi=4)], {"batch_dims": 1}),
    "scatter_elements": ("tract_core_scatter_elements",
                         [f32(3, 4), np.array([[1, 0], [3, 3], [-1, 2]]), f32(3, 2)], {"axis": 1}),
    "scatter_elements_add": ("tract_core_scatter_elements",
                             [f32(3, 4), np.array([[1, 1], [3, 3], [0, 2]]), f32(3, 2)],
                             {"axis": 1, "reduction": "add"}),
    "scatter_elements_max": ("tract_core_scatter_elements",
                             [ints(4, 3), np.array([[0, 1, 2], [0, 1, 2]]), ints(2, 3)],
                             {"axis": 0, "reduction": "max"}),
    "scatter_nd": ("tract_core_scatter_nd", [f32(4, 3), np.array([[2], [0]]), f32(2, 3)], {}),
    "scatter_nd_mul": ("tract_core_scatter_nd", [f32(4, 3), np.array([[2, 1], [2, 1], [0, 0]]), f32(3)],
                       {"reduction": "mul"}),
    "one_hot": ("tract_core_one_hot", [np.array([[0, 2], [-1, 1]])], {"axis": 2, "dim": 3}),
    "one_hot_axis0": ("tract_core_one_hot", [np.array([1, 0, 3], np.int32)],
                      {"axis": 0, "dim": 4, "value_off": -1.0, "value_on": 5.0}),
    "topk": ("tract_core_topk", [np.array([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, 5.0, 5.0]], np.float32), 2],
             {"axis": 1, "largest": True}),
    "topk_smallest": ("tract_core_topk", [np.array([[3.0, 1.0, 3.0, 1.0], [0.0, 5.0, 5.0, -5.0]], np.float32), 3],
                      {"axis": 1, "largest": False}),
    "topk_axis0_int": ("tract_core_topk", [ints(5, 3), 5], {"axis": 0, "largest": True}),
    "trilu_upper": ("tract_core_trilu", [f32(2, 3, 4), 0], {"upper": True}),
    "trilu_lower_k": ("tract_core_trilu", [f32(4, 4), -1], {"upper": False}),
    "trilu_upper_k": ("tract_core_trilu", [ints(3, 5), 2], {"upper": True}),
    # type and shape
    "cast_f32_i8": ("tract_core_cast", [np.array([1.7, -1.7, np.nan, 1e10, -1e10, 300.5, -0.5], np.float32)],
                    {"to": "i8"}),
    "cast_f32_u8": ("tract_core_cast", [np.array([1.7, -1.7, 255.9, 1e10], np.float32)], {"to": "u8"}),
    "cast_f32_i64": ("tract_core_cast", [f32(3, 4, lo=-1e6, hi=1e6)], {"to": "i64"}),
    "cast_f32_f16": ("tract_core_cast", [f32(3, 4, lo=-1e3, hi=1e3)], {"to": "f16"}),
    "cast_f32_bool": ("tract_core_cast", [np.array([0.0, -0.0, 1.0, np.nan], np.float32)], {"to": "bool"}),
    "cast_i64_i32_wrap": ("tract_core_cast", [np.array([2**40 + 5, -(2**33) - 1, 7])], {"to": "i32"}),
    "cast_i64_u8_wrap": ("tract_core_cast", [np.array([300, -1, 255])], {"to": "u8"}),
    "cast_bool_f32": ("tract_core_cast", [BOOLS_A], {"to": "f32"}),
    "cast_i32_f32": ("tract_core_cast", [ints(5, lo=-(2**30), hi=2**30, dtype=np.int32)], {"to": "F32"}),
    "shape_of": ("tract_core_shape_of", [f32(2, 3, 4)], {}),
    "range_int": ("tract_core_range", [], {"start": 2, "end": 11, "step": 3}),
    "range_neg": ("tract_core_range", [], {"start": 5, "end": -4, "step": -2}),
    "range_empty": ("tract_core_range", [], {"start": 5, "end": 1, "step": 1}),
    "range_tensors": ("tract_core_range", [], {"start": np.array(1), "end": np.array(7), "step": np.array(2)}),
    "broadcast": ("tract_core_broadcast", [f32(3, 1)], {"shape": [2, 3, 4]}),
    "broadcast_same": ("tract_core_broadcast", [ints(2, 3)], {"shape": [2, 3]}),
    "broadcast_rank": ("tract_core_broadcast", [ints(3)], {"shape": [2, 4, 3]}),
    "downsample": ("tract_core_downsample", [f32(2, 7)], {"axis": 1, "stride": 3}),
    "downsample_modulo": ("tract_core_downsample", [f32(8, 2)], {"axis": 0, "stride": 2, "modulo": 1}),
    "downsample_negative": ("tract_core_downsample", [f32(2, 7)], {"axis": 1, "stride": -2}),
    "dyn_slice": ("tract_core_dyn_slice", [f32(3, 8)], {"start": np.array(2), "end": np.array(6), "len": 4,
                                                         "axis": 1}),
    # contractions, reductions, normalisations
    "einsum_matmul": ("tract_core_einsum", [[f32(3, 4), f32(4, 5)]], {"expr": "ij,jk->ik", "acc": "f32"}),
    "einsum_batch": ("tract_core_einsum", [[f32(2, 3, 4), f32(2, 4, 2)]],
                     {"expr": "bij,bjk->bik", "acc": "f32", "output": ""}),
    "einsum_diag": ("tract_core_einsum", [[f32(4, 4)]], {"expr": "ii->i", "acc": "f32"}),
    "einsum_bcast": ("tract_core_einsum", [[f32(1, 4), f32(3, 4)]], {"expr": "ij,ij->ij", "acc": "f32"}),
    "einsum_int": ("tract_core_einsum", [[ints(2, 3, dtype=np.int32), ints(3, dtype=np.int32)]],
                   {"expr": "ij,j->i", "acc": "i32"}),
    "product_reduce": ("tract_core_product_reduce", [f32(3, 4, 2, lo=0.5, hi=1.5)], {"axes": [1]}),
    "product_reduce_all": ("tract_core_product_reduce", [f32(3, 4, lo=0.5, hi=1.5)], {"axes": [0, 1]}),
    "product_reduce_int_wrap": ("tract_core_product_reduce", [ints(3, 6, lo=50, hi=120, dtype=np.int8)],
                                {"axes": [1]}),
    "argmax_last": ("tract_core_argmax_reduce_last", [np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)],
                    {"axes": [1]}),
    "argmin_last": ("tract_core_argmin_reduce_last", [np.array([[1, 0, 3, 0], [2, 2, 2, 2]], np.float32)],
                    {"axes": [1]}),
    "argmax_two_axes": ("tract_core_argmax_reduce_last", [ints(2, 3, 4, lo=0, hi=3)], {"axes": [1, 2]}),
    "softmax": ("tract_core_softmax", [f32(2, 5), [1]], {"exp": ""}),
    "log_softmax": ("tract_core_log_softmax", [f32(2, 3, 5), [2]], {}),
    "log_softmax_two": ("tract_core_log_softmax", [f32(2, 3, 5, lo=-30, hi=30), [0, 2]], {}),
    "rms_norm": ("tract_core_rms_norm", [f32(2, 3, 8)], {"axis": 2, "eps": 1e-5}),
    "rms_norm_axis0": ("tract_core_rms_norm", [f32(6, 3)], {"axis": 0}),
    "rms_norm_transformers": ("tract_transformers_rms_norm", [f32(2, 8)], {"axis": 1}),
    "rms_norm_f16": ("tract_core_rms_norm", [f32(2, 8).astype(np.float16)], {"axis": 1}),
    # spectral and complex
    "fft": ("tract_core_fft", [f32(3, 8, 2)], {"axis": 1, "inverse": False}),
    "fft_inverse": ("tract_core_fft", [f32(5, 3, 2)], {"axis": 0, "inverse": True}),
    "fft_odd": ("tract_core_fft", [f32(7, 2)], {"axis": 0, "inverse": False}),
    "stft": ("tract_core_stft", [f32(2, 16, 2)], {"axis": 1, "frame": 4, "stride": 2}),
    "stft_window": ("tract_core_stft", [f32(12, 2), f32(3, lo=0, hi=1)], {"axis": 0, "frame": 4, "stride": 3}),
    "complex_to_inner": ("tract_core_complex_to_inner_dim", [(f32(2, 3) + 1j * f32(2, 3)).astype(np.complex64)],
                         {}),
    "inner_to_complex": ("tract_core_inner_dim_to_complex", [f32(2, 3, 2)], {}),
    # transformers
    "sdpa": ("tract_transformers_sdpa", [f32(2, 3, 4, 8), f32(2, 3, 5, 8), f32(2, 3, 5, 6)],
             {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": False}),
    "sdpa_mask_scale": ("tract_transformers_sdpa", [f32(1, 2, 4, 8), f32(1, 2, 4, 8), f32(1, 2, 4, 8), f32(4, 4)],
                        {"scale": 0.3, "datum_type": "f32", "acc_datum_type": "f32", "is_causal": False}),
    "sdpa_causal": ("tract_transformers_sdpa", [f32(1, 2, 3, 4), f32(1, 2, 5, 4), f32(1, 2, 5, 4)],
                    {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": True}),
    "sdpa_gqa": ("tract_transformers_sdpa", [f32(1, 4, 3, 4), f32(1, 2, 3, 4), f32(1, 2, 3, 4)],
                 {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": True}),
    "sdpa_rank3": ("tract_transformers_sdpa", [f32(2, 3, 4), f32(2, 5, 4), f32(2, 5, 4), f32(2, 3, 5)],
                   {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": False}),
    "apply_rope": ("tract_transformers_apply_rope", [f32(1, 2, 3, 8), f32(3, 8), f32(3, 8)], {}),
    "scaled_masked_softmax": ("tract_transformers_scaled_masked_softmax", [f32(2, 3, 5), f32(2, 3, 5)],
                              {"scale": 0.5, "post_softmax_mask": False}),
    "scaled_masked_softmax_bool": ("tract_transformers_scaled_masked_softmax",
                                   [f32(2, 3, 5), RNG.uniform(size=(2, 3, 5)) > 0.3],
                                   {"scale": 0.5, "post_softmax_mask": True}),
    # resize
    "resize_nearest_x2": ("tract_core_resize", [f32(1, 2, 3, 4), np.array([1, 1, 2, 2], np.float32)],
                          {"coord_transformer": "asymmetric", "interpolator": "nearest", "nearest_mode": "floor"}),
    "resize_linear_half_pixel": ("tract_core_resize", [f32(1, 2, 3, 4), np.array([1, 1, 2.5, 1.5], np.float32)],
                                 {"coord_transformer": "half_pixel", "interpolator": "linear"}),
    "resize_linear_align": ("tract_core_resize", [f32(1, 1, 4, 5), np.array([1, 1, 2, 2], np.float32)],
                            {"coord_transformer": "align_corners", "interpolator": "linear"}),
    "resize_cubic_sizes": ("tract_core_resize", [f32(1, 1, 4, 4), 0.0, np.array([1, 1, 7, 3], np.float32)],
                           {"coord_transformer": "pytorch_half_pixel", "interpolator": "cubic"}),
    "resize_nearest_ceil": ("tract_core_resize", [f32(2, 5), np.array([1, 1.7], np.float32)],
                            {"coord_transformer": "half_pixel", "interpolator": "nearest",
                             "nearest_mode": "round_prefer_ceil"}),
    # grid_sample
    **{f"grid_sample_{m}_{p}_{int(a)}": ("tract_core_grid_sample", [f32(2, 3, 4, 5), f32(2, 3, 6, 2, lo=-1.3, hi=1.3)],
                                         {"mode": m, "padding_mode": p, "align_corners": a})
       for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection") for a in (False, True)},
    "grid_sample_3d": ("tract_core_grid_sample", [f32(1, 2, 3, 4, 5), f32(1, 2, 2, 3, 3, lo=-1.2, hi=1.2)], {}),
}

#: Cases tract runs as a peer (the others: tract lacks the operation in the installed version,
#: or refuses that input type; their reason is next to them).
NO_PEER = {
    "erf_f16": "compared through the f32 case",
    "silu": "tract_core_silu is newer than the installed tract",
    "silu_transformers": "checked against torch below",
    "gelu_approx": "tract_core_gelu_approx is newer than the installed tract",
    "gelu_approx_fast": "tract_core_gelu_approx is newer than the installed tract",
    "shape_of": "tract's Python API cannot return its TDim result",
    "range_empty": "tract 0.23.9 panics on an empty range",
    "range_tensors": "tract 0.23.9 panics on rank-0 external bounds (range_int covers the values)",
    "dyn_slice": "tract 0.23.9 panics on rank-0 external bounds",
    "rms_norm_f16": "compared through the f32 cases",
    "argmax_two_axes": "tract 0.23.9 reduces one axis at a time",
    "complex_to_inner": "tract's Python API takes no complex inputs",
    "inner_to_complex": "tract's Python API returns no complex results",
    "scaled_masked_softmax_bool": "tract 0.23.9 takes float masks only",
}


def _run(name, args, kwargs, backend):
    return registry.get(name).kernel(backend)(*args, **kwargs)


def _tuple(r):
    return tuple(r) if isinstance(r, tuple) else (r,)


def assert_same(a, b, what, ulp_tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    if a.dtype.kind in "biu" or b.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        wide = np.complex128 if "c" in (a.dtype.kind, b.dtype.kind) else np.float64
        np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=ulp_tol, atol=ulp_tol,
                                   err_msg=what)


@pytest.mark.parametrize("case", sorted(CASES))
def test_formal_matches_fast(case):
    name, args, kwargs = CASES[case]
    formal = _tuple(_run(name, args, kwargs, "formal"))
    fast = _tuple(_run(name, args, kwargs, "fast"))
    for k, (a, b) in enumerate(zip(formal, fast, strict=True)):
        assert a.dtype == b.dtype, f"{case} result {k}: {a.dtype} vs {b.dtype}"
        tol = 2e-3 if a.dtype == np.float16 else 1e-5
        assert_same(a, b, f"{case} result {k}", tol)


@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_rule(case):
    name, args, kwargs = CASES[case]
    op = registry.get(name)
    shapes = [[np.shape(x) for x in a] if isinstance(a, list) else np.shape(a) for a in args]
    rule = op.shape_rule(*shapes, **kwargs)
    results = _tuple(_run(name, args, kwargs, "fast"))
    rules = rule if isinstance(rule, tuple) and rule and isinstance(rule[0], tuple) else (rule,)
    for predicted, result in zip(rules, results, strict=True):
        if predicted is None:
            continue
        assert len(predicted) == result.ndim
        for p, d in zip(predicted, result.shape, strict=True):
            assert p is None or p == d, f"{case}: rule {predicted}, result {result.shape}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_etype_rule(case):
    from nnefx import etypes

    name, args, kwargs = CASES[case]
    op = registry.get(name)
    results = _tuple(_run(name, args, kwargs, "fast"))
    ins = [etypes.from_numpy(np.asarray(a).dtype) if not isinstance(a, list) else
           [etypes.from_numpy(np.asarray(x).dtype) for x in a] for a in args]
    if op.etype_rule is None:  # the default: the first tensor input's element type
        expected = (ins[0],) * len(results)
    else:
        expected = _tuple(op.etype_rule(*ins, **kwargs))
    assert tuple(etypes.from_numpy(r.dtype) for r in results) == expected


#: Tensor arguments tract wants constant (by position), written as array literals in its document.
CONSTS = {"stft_window": {1}, **{c: {1, 2} for c in CASES if c.startswith("resize")}}


def _registries(name):
    return ("tract_core", "tract_transformers") if name.startswith("tract_transformers") else ("tract_core",)


@pytest.fixture(scope="module")
def tract_results():
    pytest.importorskip("tract")
    from _tract_peer import tract_batch

    jobs = {}
    for case, (name, args, kwargs) in CASES.items():
        if case not in NO_PEER:
            n = len(_tuple(_run(name, args, kwargs, "fast")))
            jobs[case] = (name, args, kwargs, _registries(name), n, CONSTS.get(case, ()))
    return tract_batch(jobs)


@pytest.mark.peer
@pytest.mark.parametrize("case", sorted(c for c in CASES if c not in NO_PEER))
def test_tract_peer(case, tract_results):
    name, args, kwargs = CASES[case]
    ours = _tuple(_run(name, args, kwargs, "fast"))
    theirs = tract_results[case]
    assert not isinstance(theirs, str), f"tract: {theirs}"
    tol = 2e-5 if "bicubic" in case else 2e-6  # 16 float32 taps in tract
    for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert_same(a, b.astype(a.dtype) if b.dtype.kind == a.dtype.kind else b, f"{case} result {k}", tol)


# --- torch as the peer where the installed tract lacks the operation ----------------------------------


def test_torch_peer_activations():
    torch = pytest.importorskip("torch")
    x = f32(3, 7, lo=-6, hi=6)
    t = torch.from_numpy(x)
    for name, ref in [("tract_core_silu", torch.nn.functional.silu(t)),
                      ("tract_transformers_silu", torch.nn.functional.silu(t)),
                      ("tract_core_hard_swish", torch.nn.functional.hardswish(t)),
                      ("tract_core_erf", torch.erf(t)),
                      ("tract_core_round_even", torch.round(t * 2.5)),
                      ("tract_core_gelu_approx", torch.nn.functional.gelu(t, approximate="tanh"))]:
        arg = x * 2.5 if name == "tract_core_round_even" else x
        kwargs = {"fast_impl": False} if "gelu" in name else {}
        for backend in ("formal", "fast"):
            assert_same(registry.get(name).kernel(backend)(arg, **kwargs), ref.numpy(), name, 2e-6)


def test_torch_peer_indexing():
    torch = pytest.importorskip("torch")
    x, i = f32(4, 6), ints(4, 3, lo=0, hi=6)
    ref = torch.gather(torch.from_numpy(x), 1, torch.from_numpy(i)).numpy()
    assert_same(_run("tract_core_gather_elements", [x, i], {"axis": 1}, "formal"), ref, "gather_elements")
    v, ix = torch.topk(torch.from_numpy(x), 3, dim=1, largest=True, sorted=True)
    values, indices = _run("tract_core_topk", [x, 3], {"axis": 1, "largest": True}, "formal")
    assert_same(values, v.numpy(), "topk values")
    assert_same(indices, ix.numpy(), "topk indices")
    assert_same(_run("tract_core_trilu", [x, 1], {"upper": True}, "fast"), torch.triu(torch.from_numpy(x), 1).numpy(),
                "triu")
    oh = torch.nn.functional.one_hot(torch.tensor([2, 0, 1]), 4).numpy()
    assert_same(_run("tract_core_one_hot", [np.array([2, 0, 1])], {"axis": 1, "dim": 4}, "formal"),
                oh.astype(np.float32), "one_hot")


@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("grid_sample") and not (
    "bicubic_border" in c or "bicubic_reflection" in c)))  # there tract pads the point, torch each tap
def test_torch_peer_grid_sample(case):
    torch = pytest.importorskip("torch")
    _, (x, grid), kw = CASES[case]
    ref = torch.nn.functional.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode=kw.get("mode", "bilinear"),
                                          padding_mode=kw.get("padding_mode", "zeros"),
                                          align_corners=kw.get("align_corners", False)).numpy()
    assert_same(_run("tract_core_grid_sample", [x, grid], kw, "fast"), ref, case, 2e-5)


def test_torch_peer_stft_window():
    torch = pytest.importorskip("torch")
    x, w = f32(12, 2), f32(3, lo=0.1, hi=1.0)
    z = torch.complex(torch.from_numpy(x[:, 0]), torch.from_numpy(x[:, 1]))
    ref = torch.stft(z, n_fft=4, hop_length=3, win_length=3, window=torch.from_numpy(w), center=False,
                     onesided=False, return_complex=True).T  # (frames, frame)
    for backend in ("formal", "fast"):
        got = _run("tract_core_stft", [x, w], {"axis": 0, "frame": 4, "stride": 3}, backend)
        assert_same(got, torch.view_as_real(ref).numpy(), f"stft {backend}", 1e-5)


def test_torch_peer_sdpa():
    torch = pytest.importorskip("torch")
    q, k, v, m = f32(2, 4, 3, 8), f32(2, 2, 5, 8), f32(2, 2, 5, 8), f32(3, 5)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(m), enable_gqa=True)
    kw = {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": False}
    for backend in ("formal", "fast"):
        assert_same(_run("tract_transformers_sdpa", [q, k, v, m], kw, backend), ref.numpy(), f"sdpa {backend}", 1e-5)
    q = f32(1, 2, 4, 8)
    ref = torch.nn.functional.scaled_dot_product_attention(torch.from_numpy(q), tk[:1], tv[:1], is_causal=True)
    got = _run("tract_transformers_sdpa", [q, k[:1], v[:1]], {**kw, "is_causal": True}, "fast")
    # torch aligns the causal mask to the top left, tract to the bottom right: equal on square blocks only
    assert got.shape == ref.shape
    sq = _run("tract_transformers_sdpa", [q, q, q], {**kw, "is_causal": True}, "fast")
    tq = torch.from_numpy(q)
    assert_same(sq, torch.nn.functional.scaled_dot_product_attention(tq, tq, tq, is_causal=True).numpy(),
                "causal", 1e-5)


# --- bad input ----------------------------------------------------------------------------------------

BAD = [
    ("tract_core_gather", [f32(3, 4), ints(2, lo=0, hi=3)], {"axis": 2}, "axis"),
    ("tract_core_gather", [f32(3, 4), ints(2, lo=0, hi=3)], {"axis": -1}, "axis"),
    ("tract_core_gather", [f32(3, 4), np.array([3])], {"axis": 0}, "out of range"),
    ("tract_core_gather_elements", [f32(3, 4), ints(3, lo=0, hi=3)], {"axis": 0}, "rank"),
    ("tract_core_gather_nd", [f32(3, 4), ints(2, 3, lo=0, hi=2)], {"batch_dims": 0}, "batch_dims"),
    ("tract_core_scatter_elements", [f32(3), np.array([0]), f32(1)], {"axis": 0, "reduction": "sum"}, "reduction"),
    ("tract_core_one_hot", [np.array([0, 1])], {"axis": 3, "dim": 2}, "axis"),
    ("tract_core_one_hot", [np.array([0, 1])], {"axis": 0, "dim": 0}, "dim"),
    ("tract_core_one_hot", [np.array([0, 5])], {"axis": 0, "dim": 3}, "out of range"),
    ("tract_core_topk", [f32(3, 4), 5], {"axis": 1, "largest": True}, "k"),
    ("tract_core_trilu", [f32(4), 0], {"upper": True}, "rank"),
    ("tract_core_xor", [f32(2), f32(2)], {}, "bool"),
    ("tract_core_bitand", [ints(2, 3), ints(4)], {}, "broadcast"),
    ("tract_core_is_inf", [f32(2)], {"detect_positive": 1.5}, "detect_positive"),
    ("tract_core_cast", [f32(2)], {"to": "float"}, "datum type"),
    ("tract_core_cast", [f32(2)], {"to": "string"}, "not supported"),
    ("tract_core_range", [], {"start": 0, "end": 4, "step": 0}, "step"),
    ("tract_core_range", [], {"start": 0, "end": np.array([4, 5]), "step": 1}, "end"),
    ("tract_core_broadcast", [f32(3, 2)], {"shape": [3, 3]}, "broadcast"),
    ("tract_core_broadcast", [f32(2, 3)], {"shape": [1, 3]}, "broadcast"),
    ("tract_core_downsample", [f32(3, 2)], {"axis": 0, "stride": 0}, "stride"),
    ("tract_core_downsample", [f32(3, 2)], {"axis": 0, "stride": -1, "modulo": 1}, "modulo"),
    ("tract_core_dyn_slice", [f32(3, 2)], {"start": 1, "end": 4, "len": 3, "axis": 0}, "slice"),
    ("tract_core_dyn_slice", [f32(3, 2)], {"start": 1, "end": 3, "len": 1, "axis": 0}, "len"),
    ("tract_core_external", [], {"datum_type": "f32", "shape": [2]}, "graph input"),
    ("tract_core_einsum", [[f32(2, 3), f32(4, 5)]], {"expr": "ij,jk->ik", "acc": "f32"}, "extents"),
    ("tract_core_einsum", [[f32(2, 3)]], {"expr": "ij,jk->ik", "acc": "f32"}, "inputs"),
    ("tract_core_einsum", [[f32(2, 3)]], {"expr": "ij->iz", "acc": "f32"}, "expr"),
    ("tract_core_einsum", [[f32(2, 3)]], {"expr": "ij->i", "acc": "float32"}, "acc"),
    ("tract_core_product_reduce", [f32(2, 3)], {"axes": [2]}, "axes"),
    ("tract_core_log_softmax", [f32(2, 3), [3]], {}, "axes"),
    ("tract_core_rms_norm", [f32(2, 3)], {"axis": 2}, "axis"),
    ("tract_core_fft", [f32(3, 3)], {"axis": 0, "inverse": False}, "extent 2"),
    ("tract_core_resize", [f32(2, 3), np.array([1, 2], np.float32)], {"interpolator": "area"}, "interpolator"),
    ("tract_core_resize", [f32(2, 3)], {}, "scales"),
    ("tract_core_grid_sample", [f32(1, 1, 4, 4), f32(1, 2, 2, 2)], {"mode": "area"}, "mode"),
    ("tract_core_grid_sample", [f32(1, 1, 4, 4), f32(1, 2, 2, 2)], {"padding_mode": "wrap"}, "padding_mode"),
    ("tract_core_grid_sample", [f32(1, 1, 4, 4), f32(1, 2, 2, 3)], {}, "grid"),
    ("tract_core_grid_sample", [f32(1, 1, 2, 4, 4), f32(1, 2, 2, 2, 3)], {"mode": "bicubic"}, "2 spatial"),
    ("tract_core_resize", [f32(2, 3), np.array([1, 2, 2], np.float32)], {}, "one value per axis"),
    ("tract_core_fft", [f32(3, 2)], {"axis": 1, "inverse": False}, "axis"),
    ("tract_core_stft", [f32(3, 2)], {"axis": 0, "frame": 4, "stride": 1}, "frame"),
    ("tract_core_stft", [f32(8, 2)], {"axis": 0, "frame": 4, "stride": 0}, "stride"),
    ("tract_core_complex_to_inner_dim", [f32(3)], {}, "complex"),
    ("tract_transformers_sdpa", [f32(1, 3, 2, 4), f32(1, 2, 2, 4), f32(1, 2, 2, 4)],
     {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": False}, "heads"),
    ("tract_transformers_sdpa", [f32(1, 2, 2, 4), f32(1, 2, 2, 4), f32(1, 2, 2, 4), f32(2, 2)],
     {"datum_type": "f32", "acc_datum_type": "f32", "is_causal": True}, "mask"),
    ("tract_transformers_sdpa", [f32(1, 2, 2, 4), f32(1, 2, 2, 4), f32(1, 2, 2, 4)],
     {"datum_type": "f32", "acc_datum_type": "i32", "is_causal": False}, "acc_datum_type"),
    ("tract_transformers_apply_rope", [f32(2, 3), f32(3), f32(3)], {}, "even"),
    ("tract_transformers_scaled_masked_softmax", [f32(2, 3), f32(2, 3)], {"scale": 0.0, "post_softmax_mask": False},
     "scale"),
]


@pytest.mark.parametrize("name,args,kwargs,word", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
@pytest.mark.parametrize("backend", ["formal", "fast"])
def test_bad_input(name, args, kwargs, word, backend):
    with pytest.raises(NNEFXError) as info:
        registry.get(name).kernel(backend)(*args, **kwargs)
    assert name in str(info.value) and word in str(info.value)


def test_domain_and_declarations():
    """Every tract operation is in domain 'tract', named after its registry, parses and checks."""
    from nnefx.semantics.stdlib import library

    ops = list(registry.all_ops("tract"))
    assert len(ops) >= 40
    lib = library()
    for op in ops:
        assert op.name.startswith(("tract_core_", "tract_transformers_")), op.name
        if op.name == "tract_core_scan":  # documents call tract's form (tensors inside tuples), lowered
            assert [p.name for p in lib.fragments[op.name].params][:2] == ["body", "scan"]
            assert op.name not in lib.broken
        assert op.name in lib.fragments and op.name not in lib.broken, op.name
        assert op.shape_rule and op.formal_kernel and op.fast_kernel, op.name


# --- scan: the body is a document fragment; here a Python stand-in for torch-to-nnef's GRU body -----------


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gru_body(name, v):
    """torch-to-nnef's ``gru_scan_loop`` fragment (op/fragment/gru.nnef), evaluated with numpy."""
    assert name == "gru_scan_loop"
    h = v["h_t_prev"]
    r = _sigmoid(v["xt_Wr_t"] + h @ v["W_hr"].T)
    z = _sigmoid(v["xt_Wz_t"] + h @ v["W_hz"].T)
    n = np.tanh(v["xt_Wn_t"] + r * (h @ v["W_hn"].T + v["b_hn"]))
    return {"h_t": ((1.0 - z) * n + z * h).astype(np.float32)}


def _gru_scan(torch_gru, x, h0, chunk):
    w_ih, w_hh = (getattr(torch_gru, n).detach().numpy() for n in ("weight_ih_l0", "weight_hh_l0"))
    b_ih, b_hh = (getattr(torch_gru, n).detach().numpy() for n in ("bias_ih_l0", "bias_hh_l0"))
    (w_ir, w_iz, w_in), (w_hr, w_hz, w_hn) = np.split(w_ih, 3), np.split(w_hh, 3)
    (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = np.split(b_ih, 3), np.split(b_hh, 3)
    scanned = [x @ w_ir.T + b_ir + b_hr, x @ w_iz.T + b_iz + b_hz, x @ w_in.T + b_in]
    kw = dict(
        body="gru_scan_loop",
        scan=[("xt_Wr_t", 0, chunk), ("xt_Wz_t", 0, chunk), ("xt_Wn_t", 0, chunk)],
        full=["W_hr", "W_hz", "W_hn", "b_hn"],
        state=[("h_t_prev", "h_t")],
        output=[("h_t", "full", 0, chunk), ("h_t", "last", 0, chunk)],
    )
    return [registry.get("tract_core_scan").kernel(b)(scanned, [w_hr, w_hz, w_hn, b_hn], [h0], **kw,
                                                      call=_gru_body) for b in ("formal", "fast")]


def test_scan_gru_against_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    gru = torch.nn.GRU(4, 3)
    x, h0 = f32(6, 2, 4), f32(1, 2, 3)
    ref, ref_h = gru(torch.from_numpy(x), torch.from_numpy(h0))
    for full, last in _gru_scan(gru, x, h0, 1):
        assert_same(full, ref.detach().numpy(), "gru full", 1e-5)
        assert_same(last, ref_h.detach().numpy(), "gru last", 1e-5)
    # backward (chunk -1): the sequence read from its end, outputs placed from the end
    for full, last in _gru_scan(gru, x, h0, -1):
        rev, rev_h = gru(torch.from_numpy(x[::-1].copy()), torch.from_numpy(h0))
        assert_same(full, rev.detach().numpy()[::-1], "gru backward full", 1e-5)
        assert_same(last, rev_h.detach().numpy(), "gru backward last", 1e-5)


def test_scan_chunks_and_errors():
    from nnefx.ops.tract.scan import slice_chunk

    x = np.arange(10).reshape(5, 2)
    np.testing.assert_array_equal(slice_chunk(x, 0, 2, 2), [[8, 9], [0, 0]])  # padded last chunk
    np.testing.assert_array_equal(slice_chunk(x, 0, 0, -2), [[6, 7], [8, 9]])  # from the end, in order
    op = registry.get("tract_core_scan")
    spec = dict(body="b", scan=[("a", 0, 1)], full=[], state=[], output=[("y", "full", 0, 1)])
    assert op.shape_rule([x.shape], [], [], **spec) == [None]  # no body to ask
    assert op.shape_rule([x.shape], [], [], **spec, body_shapes=lambda b, s: {"y": (1, 3)}) == [(5, 3)]
    for kwargs, word in [({}, "session"), ({"skip": 1, "call": _gru_body}, "skip"),
                         ({"output": [("y", "every", 0, 1)], "call": _gru_body}, "output"),
                         ({"call": lambda name, v: {"z": v["a"]}}, "result 'y'")]:
        with pytest.raises(NNEFXError) as info:
            op.kernel("formal")([x], [], [], **{**spec, **kwargs})
        assert "tract_core_scan" in str(info.value) and word in str(info.value)
    with pytest.raises(NNEFXError, match="describes 1 inputs but 2 tensors"):
        op.kernel("formal")([x, x], [], [], **spec, call=_gru_body)


def test_headers_keep_tract_parameter_names():
    """Where NNEF 1.0.5 forced a different header, the parameters keep tract's names and defaults
    differ only where the text says why (extra['tract_header'] is tract's own declaration)."""
    from nnefx.ops.signature import signature

    changed = [op for op in registry.all_ops("tract") if "tract_header" in op.extra]
    assert {op.name for op in changed} >= {"tract_core_stft", "tract_core_resize", "tract_core_einsum",
                                           "tract_transformers_sdpa", "tract_core_external"}
    for op in changed:
        if op.extra.get("surface"):  # documents call tract's form; the graph form splits out the tensors
            continue
        ours = {p.name for p in signature(op.declaration).params}
        header = op.extra["tract_header"]
        theirs = set(re.findall(r"(\w+)\s*:", header[header.index("(") + 1:header.index("->")]))
        assert ours == theirs, op.name
