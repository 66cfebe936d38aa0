"""tract's one-step recurrent operations for linear-attention decoders (registry
``tract_transformers``; ``transformers/src/ops/causal_conv1d_update.rs`` and
``gdn_recurrent.rs``, also registered as ``tract_qwen35_*``): one token's update of a
short causal convolution and of a gated delta-rule memory, each returning its output and the
new state.

tract runs them in f16 (the gdn decay and state in f32) and checks Qwen3.5's sizes (four
taps, width 128); the definitions hold for any size, and nnefx takes any floating type: the
formal kernels compute in float64, the fast ones in float32 as tract does, each result rounded
once to its input's element type.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import float_type, op_error
from ..registry import define
from ._util import DOMAIN

FAMILY = "tract_transformers"


def _size(shape) -> int:
    return math.prod(shape)


# --- causal_conv1d_update ----------------------------------------------------------------------------------

CONV = "tract_transformers_causal_conv1d_update"

conv_update = define(CONV, FAMILY, f"""
fragment {CONV}( input: tensor<scalar>, weight: tensor<scalar>, initial_state: tensor<scalar> )
    -> ( output: tensor<scalar>, final_state: tensor<scalar> );
""", domain=DOMAIN, doc="One step of a depth-wise causal convolution with SiLU, per channel c of the "
                        "flattened input: the state's taps shift by one and take input[c] last, output[c] = "
                        "silu(sum_t state'[c, t] * weight[c, t]) over the K taps (K = weight's last extent; "
                        "weight and state hold K values per channel).  Results: output (input's shape) and "
                        "final_state (the state's shape).")


@conv_update.shape
def _conv_shape(input, weight, initial_state):
    channels = _size(input)
    if not weight:
        raise op_error(CONV, "weight must have a kernel axis (rank >= 1)")
    k = weight[-1]
    if k < 1 or _size(weight) != channels * k:
        raise op_error(CONV, f"weight {list(weight)} must hold {k} taps for each of the {channels} input values")
    if _size(initial_state) != channels * k:
        raise op_error(CONV, f"initial_state {list(initial_state)} must hold {k} values for each of the "
                             f"{channels} input values")
    return tuple(input), tuple(initial_state)


conv_update.etypes(lambda x, w, s: (x, s))


def _conv(x, w, s, acc):
    k = w.shape[-1]
    xs = np.asarray(x, acc).reshape(-1)
    state = np.asarray(s, acc).reshape(-1, k)
    new = np.concatenate([state[:, 1:], xs[:, None]], axis=1)
    total = np.sum(new * np.asarray(w, acc).reshape(-1, k), axis=1)
    out = total / (1.0 + np.exp(-total))
    return (out.reshape(np.shape(x)).astype(np.asarray(x).dtype),
            new.reshape(np.shape(s)).astype(np.asarray(s).dtype))


@conv_update.formal
def _conv_formal(input, weight, initial_state):
    return _conv(input, weight, initial_state, np.float64)


@conv_update.fast
def _conv_fast(input, weight, initial_state):
    return _conv(input, weight, initial_state, float_type())


# --- gdn_recurrent -----------------------------------------------------------------------------------------

GDN = "tract_transformers_gdn_recurrent"

gdn = define(GDN, FAMILY, f"""
fragment {GDN}( query: tensor<scalar>, key: tensor<scalar>, value: tensor<scalar>, log_decay: tensor<scalar>,
                beta: tensor<scalar>, initial_state: tensor<scalar> )
    -> ( output: tensor<scalar>, final_state: tensor<scalar> );
""", domain=DOMAIN, doc="One token of the gated delta rule, per head h (query/key/value [..., W] of equal "
                        "shapes, H = size / W heads; log_decay and beta one value per head; the state W x W "
                        "per head, [row, col]): q and k are L2-normalised (eps 1e-6 under the root), d = "
                        "exp(log_decay), residual = (v - k^T S d) beta, S' = S d + k residual^T, output = "
                        "q^T S' / sqrt(W).  Results: output (query's shape) and final_state (the state's shape).")


@gdn.shape
def _gdn_shape(query, key, value, log_decay, beta, initial_state):
    if not query:
        raise op_error(GDN, "query must have a last axis (rank >= 1)")
    if tuple(query) != tuple(key) or tuple(query) != tuple(value):
        raise op_error(GDN, f"query, key and value must have one shape, got {list(query)}, {list(key)}, "
                            f"{list(value)}")
    width = query[-1]
    heads = _size(query) // width if width else 0
    for name, shape, want in (("log_decay", log_decay, heads), ("beta", beta, heads),
                              ("initial_state", initial_state, heads * width * width)):
        if _size(shape) != want:
            raise op_error(GDN, f"{name} {list(shape)} must hold {want} values ({heads} heads of width {width})")
    return tuple(query), tuple(initial_state)


gdn.etypes(lambda q, k, v, g, b, s: (q, s))


def _gdn(q, k, v, g, beta, s, acc):
    width = np.shape(q)[-1]
    heads = _size(np.shape(q)) // width

    def rows(a):
        return np.asarray(a, acc).reshape(heads, width)

    qh, kh, vh = rows(q), rows(k), rows(v)
    qn = qh / np.sqrt(np.sum(qh * qh, axis=1, keepdims=True) + acc(1e-6))
    kn = kh / np.sqrt(np.sum(kh * kh, axis=1, keepdims=True) + acc(1e-6))
    decay = np.exp(np.asarray(g, acc).reshape(heads))
    state = np.asarray(s, acc).reshape(heads, width, width)
    predicted = np.einsum("hr,hrc->hc", kn, state) * decay[:, None]
    residual = (vh - predicted) * np.asarray(beta, acc).reshape(heads)[:, None]
    new = state * decay[:, None, None] + kn[:, :, None] * residual[:, None, :]
    out = np.einsum("hr,hrc->hc", qn, new) / acc(math.sqrt(width))
    return (out.reshape(np.shape(q)).astype(np.asarray(q).dtype),
            new.reshape(np.shape(s)).astype(np.asarray(s).dtype))


@gdn.formal
def _gdn_formal(query, key, value, log_decay, beta, initial_state):
    return _gdn(query, key, value, log_decay, beta, initial_state, np.float64)


@gdn.fast
def _gdn_fast(query, key, value, log_decay, beta, initial_state):
    return _gdn(query, key, value, log_decay, beta, initial_state, float_type())
