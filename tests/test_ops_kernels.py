"""Every operation: shape rule, formal kernel and fast kernel agree on a concrete sample.

Tolerance for float results: |fast - formal| <= 1e-5 * (1 + |formal|) per element (about
84 float32 ulp relative) — loose enough for float32 BLAS sums over these small windows and
tight enough to catch any indexing or border mistake (which moves results by O(1)).
Integer and logical results must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest

from _ops_samples import SAMPLES, shape_of
from nnefx.ops import registry

KERNELLED = [op for op in registry.all_ops("nnef") if op.name not in ("external", "variable")]


def _as_list(result, op):
    """Results as a list of arrays (one per declared result; tensor[] results flattened)."""
    n_results = op.declaration.split("->", 1)[1].split("{")[0].count(":")
    if n_results > 1:
        return [np.asarray(r) for r in result]
    if isinstance(result, list):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def _shapes_list(shapes, op):
    n_results = op.declaration.split("->", 1)[1].split("{")[0].count(":")
    if n_results > 1 or isinstance(shapes, list):
        return [tuple(s) for s in shapes]
    return [tuple(shapes)]


def test_every_kernelled_operation_has_a_sample():
    assert {op.name for op in KERNELLED} == set(SAMPLES)


def assert_agree(fast, formal):
    assert fast.shape == formal.shape and fast.dtype == formal.dtype
    if formal.dtype == np.float32:
        np.testing.assert_allclose(fast, formal, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(fast, formal)


@pytest.mark.parametrize("op", KERNELLED, ids=lambda op: op.name)
def test_shape_rule_formal_and_fast_agree(op):
    args, attrs = SAMPLES[op.name]
    shape_attrs = {k: v for k, v in attrs.items() if k != "dtype"}
    formal = _as_list(op.kernel("formal")(*args, **attrs), op)
    fast = _as_list(op.kernel("fast")(*args, **attrs), op)
    shapes = _shapes_list(op.shape_rule(*[shape_of(a) for a in args], **shape_attrs), op)
    assert [r.shape for r in formal] == shapes
    assert len(fast) == len(formal)
    for a, b in zip(fast, formal, strict=True):
        assert_agree(a, b)


_EXPECTED_DTYPE = {"scalar": np.float32, "integer": np.int64, "logical": np.bool_}


@pytest.mark.parametrize("op", KERNELLED, ids=lambda op: op.name)
def test_result_dtypes_follow_the_declaration(op):
    args, attrs = SAMPLES[op.name]
    results_text = op.declaration.split("->", 1)[1].split("{")[0]
    declared = [t.split(">")[0] for t in results_text.split("tensor<")[1:]]
    results = _as_list(op.kernel("fast")(*args, **attrs), op)
    if len(declared) == 1:
        declared = declared * len(results)
    for r, t in zip(results, declared, strict=True):
        assert r.dtype == _EXPECTED_DTYPE[attrs["dtype"] if t == "?" else t], (op.name, r.dtype, t)


def _blank(shape, k):
    """``shape`` with dimension k unknown (None)."""
    return tuple(None if n == k else d for n, d in enumerate(shape))


def _compatible(partial, full):
    if isinstance(full, list):
        return isinstance(partial, list) and len(partial) == len(full) and all(
            _compatible(p, f) for p, f in zip(partial, full, strict=True))
    if full and isinstance(full[0], tuple):  # several results
        return len(partial) == len(full) and all(_compatible(p, f) for p, f in zip(partial, full, strict=True))
    return len(partial) == len(full) and all(p is None or p == f for p, f in zip(partial, full, strict=True))


UNKNOWN_COUNT_OK = {("unstack", 0, 1)}  # the number of results needs the extent


@pytest.mark.parametrize("op", [op for op in KERNELLED if op.name != "constant"], ids=lambda op: op.name)
def test_shape_rules_accept_unknown_extents(op):
    """Blanking any one input extent gives a result compatible with the known one, never an error."""
    args, attrs = SAMPLES[op.name]
    attrs = {k: v for k, v in attrs.items() if k != "dtype"}
    shapes = [shape_of(a) for a in args]
    full = op.shape_rule(*shapes, **attrs)
    for n, s in enumerate(shapes):
        items = s if isinstance(s, list) else [s]
        for m, one in enumerate(items):
            for k in range(len(one)):
                if (op.name, n, k) in UNKNOWN_COUNT_OK:
                    continue
                blanked = _blank(one, k)
                if isinstance(s, list):
                    new = list(s)
                    new[m] = blanked
                else:
                    new = blanked
                partial = op.shape_rule(*shapes[:n], new, *shapes[n + 1:], **attrs)
                assert _compatible(partial, full), (n, m, k, partial, full)
