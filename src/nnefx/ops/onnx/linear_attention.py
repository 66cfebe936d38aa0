"""ONNX LinearAttention (opset 27) as one operation: the recurrent form of linear attention that
decoders of Gated DeltaNet / Mamba-style models run token by token.

The definition (ONNX operator docs).  Query, key and value are 3-D ``[B, T, H * D]`` with the
heads packed in the last axis (``q_num_heads`` query heads of size ``d_k``, ``kv_num_heads``
key/value heads of sizes ``d_k`` and ``d_v``); the state ``S`` is ``[B, H_kv, d_k, d_v]``
(``past_state``, zeros when absent).  For each token ``t`` and key/value head:

* ``linear``:      ``S = S + k_t ⊗ v_t``
* ``gated``:       ``S = exp(g_t) * S + k_t ⊗ v_t``
* ``delta``:       ``S = S + β_t * k_t ⊗ (v_t - S^T k_t)``
* ``gated_delta``: ``S' = exp(g_t) * S``, ``S = S' + β_t * k_t ⊗ (v_t - S'^T k_t)``

and each query head ``h`` reads the state of key/value head ``h // (q_num_heads /
kv_num_heads)``: ``o_t = scale * q_t^T S`` (``scale`` 0 means ``1 / sqrt(d_k)``).  The decay
``g`` is ``[B, T, H_kv]`` (one per head) or ``[B, T, H_kv * d_k]`` (one per key dimension,
scaling the rows of ``S``); ``β`` is ``[B, T, H_kv]`` or ``[B, T, 1]``.  Outputs: ``[B, T,
H_q * d_v]`` in the query's type and the last state in ``past_state``'s type (the query's when
absent).  ``chunk_size`` only tunes chunk-parallel implementations and is not an attribute
here.  Absent optional tensors are rank 0.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_linear_attention"
_RULES = ("linear", "gated", "delta", "gated_delta")

onnx_linear_attention = define("onnx_linear_attention", FAMILY, """
fragment onnx_linear_attention(
    query: tensor<scalar>,
    key: tensor<scalar>,
    value: tensor<scalar>,
    past_state: tensor<scalar> = 0.0,
    decay: tensor<scalar> = 0.0,
    beta: tensor<scalar> = 0.0,
    q_num_heads: integer,
    kv_num_heads: integer,
    scale: scalar = 0.0,
    update_rule: string = 'gated_delta' )
-> ( output: tensor<scalar>, present_state: tensor<scalar> );
""", domain="onnx", doc="ONNX LinearAttention: the linear / gated / delta / gated-delta state recurrence over the "
                        "tokens, grouped query heads reading shared key/value states.")


def _geometry(q, k, v, past_state, decay, beta, q_num_heads, kv_num_heads, update_rule):
    """(B, T, d_k, d_v) after every shape and attribute check."""
    name = "onnx_linear_attention"
    if update_rule not in _RULES:
        raise attr_error(name, "update_rule", update_rule, f"must be one of {', '.join(_RULES)}")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise op_error(name, f"q_num_heads ({q_num_heads}) must be a positive multiple of kv_num_heads "
                             f"({kv_num_heads})")
    if not len(q) == len(k) == len(v) == 3:
        raise op_error(name, f"query, key and value must be 3-D [B, T, H * D], got {list(q)}, {list(k)}, {list(v)}")
    for what, s, h in (("query", q, q_num_heads), ("key", k, kv_num_heads), ("value", v, kv_num_heads)):
        if s[2] is not None and s[2] % h:
            raise op_error(name, f"{what} hidden size {s[2]} does not split into {h} heads")
    b, t = q[0], q[1]
    for what, s in (("key", k), ("value", v)):
        if None not in (s[0], b) and s[0] != b or None not in (s[1], t) and s[1] != t:
            raise op_error(name, f"{what} {list(s)} must share batch and length with the query {list(q)}")
    d_k = None if q[2] is None else q[2] // q_num_heads
    if None not in (d_k, k[2]) and k[2] != d_k * kv_num_heads:
        raise op_error(name, f"key hidden size {k[2]} is not kv_num_heads * {d_k} (the query head size)")
    d_v = None if v[2] is None else v[2] // kv_num_heads
    gating, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if gating != bool(decay):
        raise op_error(name, f"update_rule '{update_rule}' {'needs' if gating else 'takes no'} decay")
    if delta != bool(beta):
        raise op_error(name, f"update_rule '{update_rule}' {'needs' if delta else 'takes no'} beta")
    if decay and (len(decay) != 3 or decay[2] not in (None, kv_num_heads)
                  and (d_k is None or decay[2] != kv_num_heads * d_k)):
        raise op_error(name, f"decay {list(decay)} must be [B, T, kv_num_heads] or [B, T, kv_num_heads * d_k]")
    if beta and (len(beta) != 3 or beta[2] not in (None, 1, kv_num_heads)):
        raise op_error(name, f"beta {list(beta)} must be [B, T, kv_num_heads] or [B, T, 1]")
    if past_state:
        want = (b, kv_num_heads, d_k, d_v)
        if len(past_state) != 4 or any(None not in (x, y) and x != y for x, y in zip(past_state, want, strict=True)):
            raise op_error(name, f"past_state {list(past_state)} must be [B, kv_num_heads, d_k, d_v] = {list(want)}")
    return b, t, d_k, d_v


@onnx_linear_attention.shape
def _linear_attention_shape(q, k, v, past_state=(), decay=(), beta=(), q_num_heads=0, kv_num_heads=0, scale=0.0,
                            update_rule="gated_delta"):
    b, t, d_k, d_v = _geometry(q, k, v, past_state, decay, beta, q_num_heads, kv_num_heads, update_rule)
    return (b, t, None if d_v is None else q_num_heads * d_v), (b, kv_num_heads, d_k, d_v)


def _unpack(x: np.ndarray, heads: int, dtype) -> np.ndarray:
    """[B, T, H * D] -> [B, H, T, D]"""
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).transpose(0, 2, 1, 3).astype(dtype)


def _inputs(q, k, v, past_state, decay, beta, q_num_heads, kv_num_heads, scale, update_rule, dtype):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    past_state, decay, beta = np.asarray(past_state), np.asarray(decay), np.asarray(beta)
    b, t, d_k, d_v = _geometry(q.shape, k.shape, v.shape, past_state.shape, decay.shape, beta.shape, q_num_heads,
                               kv_num_heads, update_rule)
    g = None
    if decay.ndim:  # [B, H_kv, T, 1] (one per head) or [B, H_kv, T, d_k]
        if decay.shape[2] == kv_num_heads:
            g = decay.reshape(b, t, kv_num_heads, 1).transpose(0, 2, 1, 3).astype(dtype)
        else:
            g = _unpack(decay, kv_num_heads, dtype)
    rate = None
    if beta.ndim:  # [B, H_kv or 1, T, 1]
        rate = beta.reshape(b, t, beta.shape[2], 1).transpose(0, 2, 1, 3).astype(dtype)
    state = past_state.astype(dtype) if past_state.ndim else np.zeros((b, kv_num_heads, d_k, d_v), dtype)
    factor = 1.0 / math.sqrt(d_k) if scale == 0.0 else float(scale)
    out_types = (q.dtype, past_state.dtype if past_state.ndim else q.dtype)
    return (_unpack(q, q_num_heads, dtype), _unpack(k, kv_num_heads, dtype), _unpack(v, kv_num_heads, dtype),
            state, g, rate, factor, out_types)


@onnx_linear_attention.formal
def _linear_attention_formal(q, k, v, past_state=0.0, decay=0.0, beta=0.0, q_num_heads=0, kv_num_heads=0,
                             scale=0.0, update_rule="gated_delta"):
    # the recurrence item by item, in float64
    q, k, v, state, g, rate, factor, (ytype, stype) = _inputs(
        q, k, v, past_state, decay, beta, q_num_heads, kv_num_heads, scale, update_rule, np.float64)
    b_n, hq, t_n, d_k = q.shape
    d_v = v.shape[3]
    group = hq // kv_num_heads
    out = np.zeros((b_n, hq, t_n, d_v))
    for b in range(b_n):
        for h in range(kv_num_heads):
            s = state[b, h].copy()
            for t in range(t_n):
                if g is not None:
                    for i in range(d_k):
                        s[i, :] *= math.exp(g[b, h, t, i if g.shape[3] > 1 else 0])
                vt = v[b, h, t].copy()
                if rate is not None:
                    r = rate[b, h if rate.shape[1] > 1 else 0, t, 0]
                    for j in range(d_v):
                        vt[j] = r * (vt[j] - sum(s[i, j] * k[b, h, t, i] for i in range(d_k)))
                for i in range(d_k):
                    for j in range(d_v):
                        s[i, j] += k[b, h, t, i] * vt[j]
                for hh in range(h * group, (h + 1) * group):
                    for j in range(d_v):
                        out[b, hh, t, j] = factor * sum(q[b, hh, t, i] * s[i, j] for i in range(d_k))
            state[b, h] = s
    y = out.transpose(0, 2, 1, 3).reshape(b_n, t_n, hq * d_v)
    return y.astype(ytype), state.astype(stype)


@onnx_linear_attention.fast
def _linear_attention_fast(q, k, v, past_state=0.0, decay=0.0, beta=0.0, q_num_heads=0, kv_num_heads=0,
                           scale=0.0, update_rule="gated_delta"):
    # one token at a time over all batches and heads, float32 (float64 for float64 inputs)
    dtype = np.float64 if np.asarray(q).dtype == np.float64 else np.float32
    q, k, v, state, g, rate, factor, (ytype, stype) = _inputs(
        q, k, v, past_state, decay, beta, q_num_heads, kv_num_heads, scale, update_rule, dtype)
    b_n, hq, t_n, _ = q.shape
    group = hq // kv_num_heads
    out = np.empty((b_n, hq, t_n, v.shape[3]), dtype)
    for t in range(t_n):
        if g is not None:
            state = state * np.exp(g[:, :, t, :])[..., None]
        vt = v[:, :, t, :]
        if rate is not None:
            vt = rate[:, :, t, :] * (vt - np.einsum("bhij,bhi->bhj", state, k[:, :, t, :]))
        state = state + k[:, :, t, :, None] * vt[:, :, None, :]
        read = state if group == 1 else np.repeat(state, group, axis=1)
        out[:, :, t, :] = factor * np.einsum("bhi,bhij->bhj", q[:, :, t, :], read)
    y = out.transpose(0, 2, 1, 3).reshape(b_n, t_n, -1)
    return y.astype(ytype), state.astype(stype)
