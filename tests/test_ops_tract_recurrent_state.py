"""tract_transformers_causal_conv1d_update and tract_transformers_gdn_recurrent against a
reference written from tract's definition (transformers/src/ops/causal_conv1d_update.rs,
gdn_recurrent.rs: the per-channel / per-head loops, f32 accumulation, rounded to f16), at tract's
sizes (4 taps, width 128, f16) and at other sizes; shape rules, element types, a document run."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

CONV, GDN = "tract_transformers_causal_conv1d_update", "tract_transformers_gdn_recurrent"


def conv_reference(x, w, s):
    """tract's loop: per channel, taps shifted in, f32 sum, x / (1 + exp(-x)), f16 out."""
    k = w.shape[-1]
    xs, ws, ss = (a.reshape(-1).astype(np.float32) for a in (x, w, s))
    out, final = np.zeros(xs.size, np.float32), np.zeros(ss.size, np.float32)
    for c in range(xs.size):
        total = np.float32(0)
        for t in range(k - 1):
            final[c * k + t] = ss[c * k + t + 1]
            total += ss[c * k + t + 1] * ws[c * k + t]
        final[c * k + k - 1] = xs[c]
        total += xs[c] * ws[c * k + k - 1]
        out[c] = total / (1 + np.exp(-total))
    return out.reshape(x.shape).astype(x.dtype), final.reshape(s.shape).astype(s.dtype)


def gdn_reference(q, k, v, g, beta, s):
    """tract's loop over heads and columns (f32), the output rounded to query's type."""
    width, q_dtype = q.shape[-1], q.dtype
    heads = q.size // width
    q, k, v = (a.reshape(heads, width).astype(np.float32) for a in (q, k, v))
    g, beta = g.reshape(-1).astype(np.float32), beta.reshape(-1).astype(np.float32)
    st = s.reshape(heads, width, width).astype(np.float32)
    out, final = np.zeros((heads, width), np.float32), np.zeros_like(st)
    for h in range(heads):
        q_inv = 1 / math.sqrt(float(np.sum(q[h] ** 2)) + 1e-6)
        k_inv = 1 / math.sqrt(float(np.sum(k[h] ** 2)) + 1e-6)
        decay = math.exp(g[h])
        for col in range(width):
            predicted = sum(k[h, r] * k_inv * st[h, r, col] * decay for r in range(width))
            residual = (v[h, col] - predicted) * beta[h]
            result = 0.0
            for r in range(width):
                nxt = st[h, r, col] * decay + k[h, r] * k_inv * residual
                final[h, r, col] = nxt
                result += q[h, r] * q_inv * nxt
            out[h, col] = result / math.sqrt(width)
    return out.reshape(-1).astype(q_dtype), final


def _conv_case(rng, shape, k, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((*shape, k)).astype(dtype)
    s = rng.standard_normal((*shape, k)).astype(dtype)
    return x, w, s


@pytest.mark.parametrize("shape, k, dtype", [((1, 8), 4, np.float16), ((2, 3), 4, np.float32),
                                             ((5,), 3, np.float32), ((2, 2), 1, np.float16)])
def test_causal_conv1d_update(shape, k, dtype):
    x, w, s = _conv_case(np.random.default_rng(0), shape, k, dtype)
    ref_out, ref_state = conv_reference(x, w, s)
    op = registry.get(CONV)
    assert op.shape_rule(x.shape, w.shape, s.shape) == (x.shape, s.shape)
    for backend in ("formal", "fast"):
        out, state = op.kernel(backend)(x, w, s)
        assert out.dtype == x.dtype and state.dtype == s.dtype
        np.testing.assert_array_equal(state, ref_state)  # a shift: exact
        tol = 2e-3 if dtype == np.float16 else 1e-6
        np.testing.assert_allclose(out.astype(np.float32), ref_out.astype(np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("heads, width, dtype", [(2, 128, np.float16), (3, 8, np.float32), (1, 1, np.float32)])
def test_gdn_recurrent(heads, width, dtype):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, heads, width)).astype(dtype) for _ in range(3))
    g = (rng.standard_normal((1, heads)) * 0.1 - 0.2).astype(np.float32)
    beta = rng.uniform(0, 1, (1, heads)).astype(dtype)
    s = (rng.standard_normal((1, heads, width, width)) * 0.1).astype(np.float32)
    ref_out, ref_state = gdn_reference(q, k, v, g, beta, s)
    op = registry.get(GDN)
    assert op.shape_rule(q.shape, k.shape, v.shape, g.shape, beta.shape, s.shape) == (q.shape, s.shape)
    for backend in ("formal", "fast"):
        out, state = op.kernel(backend)(q, k, v, g, beta, s)
        assert out.shape == q.shape and out.dtype == q.dtype and state.dtype == np.float32
        np.testing.assert_allclose(state.reshape(ref_state.shape), ref_state, rtol=1e-4, atol=1e-5)
        tol = 2e-3 if dtype == np.float16 else 1e-5
        np.testing.assert_allclose(out.reshape(-1).astype(np.float32), ref_out.astype(np.float32),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("name, shapes, word", [
    (CONV, [(4,), (4, 3), (4, 2)], "initial_state"),
    (CONV, [(4,), (3, 4), (4, 4)], "weight"),
    (GDN, [(1, 2, 4), (1, 2, 4), (1, 2, 3), (2,), (2,), (2, 4, 4)], "one shape"),
    (GDN, [(1, 2, 4), (1, 2, 4), (1, 2, 4), (3,), (2,), (2, 4, 4)], "log_decay"),
    (GDN, [(1, 2, 4), (1, 2, 4), (1, 2, 4), (2,), (2,), (2, 4, 3)], "initial_state"),
])
def test_bad_shapes_are_named(name, shapes, word):
    with pytest.raises(NNEFXError, match=word) as info:
        registry.get(name).shape_rule(*shapes)
    assert name in str(info.value)


def test_in_a_document(tmp_path):
    """Both results of each operation, read from a tract_transformers document, on both backends."""
    (tmp_path / "g.nnef").write_text(f"""version 1.0;
extension tract_registry tract_transformers;

graph g( x, w, s ) -> ( y, s2 )
{{
  x = external<scalar>(shape = [1, 6]);
  w = external<scalar>(shape = [1, 6, 4]);
  s = external<scalar>(shape = [1, 6, 4]);
  (y, s2) = {CONV}(input = x, weight = w, initial_state = s);
}}
""")
    model = nnefx.load(tmp_path / "g.nnef")
    x, w, s = _conv_case(np.random.default_rng(2), (1, 6), 4, np.float32)
    ref_out, ref_state = conv_reference(x, w, s)
    for backend in ("fast", "formal"):
        got = nnefx.Session(model, backend=backend).run({"x": x, "w": w, "s": s})
        np.testing.assert_allclose(got["y"], ref_out, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got["s2"], ref_state)
