"""tract's transformer operations (registry ``tract_transformers``, ``transformers/src/ops/``):
scaled dot-product attention (``sdpa.rs``), rotary embedding (``apply_rope.rs``) and the fused
scaled, masked softmax (``scaled_masked_softmax.rs``).  Silu, rms norm and the gelu approximation,
which tract moved into ``tract_core`` keeping ``tract_transformers_*`` aliases, live with their
core families.

Element-wise products here broadcast numpy-style (tract-core's binary operations align shapes
from the last axis).
"""

from __future__ import annotations

import math

import numpy as np

from ... import etypes
from .._common import attr_error, guard_family, op_error
from ..registry import define
from ._util import DOMAIN, numpy_broadcast, parse_etype

FAMILY = "tract_transformers"


def _softmax_row(values: list[float]) -> list[float]:
    m = max(values)
    if m == -math.inf:
        return [math.nan] * len(values)
    e = [math.exp(v - m) for v in values]
    s = math.fsum(e)
    return [v / s for v in e]


def _softmax_last(w: np.ndarray) -> np.ndarray:
    z = w - np.max(w, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


# --- sdpa -------------------------------------------------------------------------------------------------

sdpa = define("tract_transformers_sdpa", FAMILY, """
fragment tract_transformers_sdpa( q: tensor<scalar>, k: tensor<scalar>, v: tensor<scalar>, mask: tensor<scalar> = 0.0,
                                  scale: scalar = 0.0, datum_type: string, acc_datum_type: string, is_causal: logical )
    -> ( output: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_transformers_sdpa( q: tensor<scalar>, k: tensor<scalar>, "
                                 "v: tensor<scalar>, mask: tensor<scalar>, scale: scalar, datum_type: string, "
                                 "acc_datum_type: string, is_causal: logical ) -> ( output: tensor<scalar> );",
    doc="softmax(q k^T * scale + mask) v over the last axis, per batch and head: q [b, hq, m, d] (or "
        "[b, m, d]), k [b, hk, n, d], v [b, hk, n, dv], hq a multiple of hk (query head h reads key head "
        "h / (hq / hk)); scale defaults to 1/sqrt(d); the mask (numpy-broadcast, cast to acc_datum_type) is "
        "added to the scaled scores; is_causal adds the lowest acc_datum_type value where column > row + "
        "n - m.  Accumulated in acc_datum_type, the result in q's type (Sdpa::build_sdpa_graph).  tract "
        "reads mask and scale as optional although its header gives no default: here mask defaults to 0.0 "
        "(no mask) and scale to 0.0, meaning 1/sqrt(d).")


def _sdpa_dims(op: str, q, k, v):
    if len(q) not in (3, 4) or len(k) != len(q) or len(v) != len(q):
        raise op_error(op, f"q, k, v must all be rank 3 or 4, got {list(q)}, {list(k)}, {list(v)}")
    q4 = tuple(q) if len(q) == 4 else (q[0], 1) + tuple(q[1:])
    k4 = tuple(k) if len(k) == 4 else (k[0], 1) + tuple(k[1:])
    v4 = tuple(v) if len(v) == 4 else (v[0], 1) + tuple(v[1:])
    hq, hk = q4[1], k4[1]
    if hq is not None and hk is not None and (hk == 0 or hq % hk):
        raise op_error(op, f"query heads ({hq}) must be a multiple of key heads ({hk})")
    if q4[3] is not None and k4[3] is not None and q4[3] != k4[3]:
        raise op_error(op, f"q and k differ in their last extent ({q4[3]} and {k4[3]})")
    if k4[2] is not None and v4[2] is not None and k4[2] != v4[2]:
        raise op_error(op, f"k and v differ in sequence length ({k4[2]} and {v4[2]})")
    return q4, k4, v4


@sdpa.shape
def _sdpa_shape(q, k, v, mask=(), scale=0.0, datum_type="f32", acc_datum_type="f32", is_causal=False):
    op = "tract_transformers_sdpa"
    parse_etype(op, "datum_type", datum_type)
    parse_etype(op, "acc_datum_type", acc_datum_type)
    q4, k4, v4 = _sdpa_dims(op, q, k, v)
    if len(mask) > len(q):
        raise op_error(op, f"mask of rank {len(mask)} exceeds q's rank {len(q)}")
    if is_causal and len(mask):
        raise op_error(op, "a mask cannot be given with is_causal = true")
    out = q4[:3] + (v4[3],)
    scores = q4[:3] + (k4[2],) if len(q) == 4 else (q4[0],) + q4[2:3] + (k4[2],)
    if len(mask) and numpy_broadcast(op, scores, tuple(mask)) != scores:
        raise op_error(op, f"mask {list(mask)} must broadcast to the scores {list(scores)}")
    return out if len(q) == 4 else (out[0],) + out[2:]


def _sdpa_prepare(q, k, v, mask, scale, datum_type, acc_datum_type, is_causal):
    op = "tract_transformers_sdpa"
    q, k, v, mask = (np.asarray(a) for a in (q, k, v, mask))
    _sdpa_shape(q.shape, k.shape, v.shape, mask.shape, scale, datum_type, acc_datum_type, is_causal)
    acc = parse_etype(op, "acc_datum_type", acc_datum_type)
    if not etypes.is_float(acc):
        raise attr_error(op, "acc_datum_type", acc_datum_type, "must be a float type")
    rank3 = q.ndim == 3
    if rank3:
        q, k, v = q[:, None], k[:, None], v[:, None]
        if mask.ndim == 3:
            mask = mask[:, None]
    s = float(scale) if scale else 1.0 / math.sqrt(q.shape[-1])
    return q, k, v, mask, s, acc, rank3


@sdpa.formal
def _sdpa_formal(q, k, v, mask=0.0, scale=0.0, datum_type="f32", acc_datum_type="f32", is_causal=False):
    out_dtype = np.asarray(q).dtype
    q, k, v, mask, s, acc, rank3 = _sdpa_prepare(q, k, v, mask, scale, datum_type, acc_datum_type, is_causal)
    b, hq, m, _ = q.shape
    hk, n, dv = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hk
    lowest = float(np.finfo(etypes.numpy_dtype(acc)).min)
    mask_full = np.broadcast_to(mask.astype(np.float64), (b, hq, m, n))
    out = np.empty((b, hq, m, dv), np.float64)
    for bi in range(b):
        for h in range(hq):
            kh = h // group
            for i in range(m):
                scores = []
                for j in range(n):  # score_ij = (q_i . k_j) * scale + mask_ij
                    dot = math.fsum(float(q[bi, h, i, t]) * float(k[bi, kh, j, t]) for t in range(q.shape[3]))
                    extra = lowest if is_causal and j > i + n - m else float(mask_full[bi, h, i, j])
                    scores.append(dot * s + extra)
                weights = _softmax_row(scores)
                for c in range(dv):
                    out[bi, h, i, c] = math.fsum(weights[j] * float(v[bi, kh, j, c]) for j in range(n))
    return (out[:, 0] if rank3 else out).astype(out_dtype)


@sdpa.fast
def _sdpa_fast(q, k, v, mask=0.0, scale=0.0, datum_type="f32", acc_datum_type="f32", is_causal=False):
    out_dtype = np.asarray(q).dtype
    q, k, v, mask, s, acc, rank3 = _sdpa_prepare(q, k, v, mask, scale, datum_type, acc_datum_type, is_causal)
    cdt = etypes.compute_dtype(acc)
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1).astype(cdt), np.repeat(v, group, axis=1).astype(cdt)
    scores = np.matmul(q.astype(cdt), np.swapaxes(k, -1, -2)) * cdt.type(s) + mask.astype(cdt)
    if is_causal:
        m, n = scores.shape[-2:]
        above = np.arange(n)[None, :] > np.arange(m)[:, None] + (n - m)
        scores = scores + np.where(above, np.finfo(etypes.numpy_dtype(acc)).min, 0).astype(cdt)
    out = np.matmul(_softmax_last(scores), v)
    return (out[:, 0] if rank3 else out).astype(out_dtype)


# --- apply_rope ---------------------------------------------------------------------------------------------

apply_rope = define("tract_transformers_apply_rope", FAMILY, """
fragment tract_transformers_apply_rope( input: tensor<scalar>, cos: tensor<scalar>, sin: tensor<scalar> )
    -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="Rotary position embedding: input * cos + rotate_half(input) * sin, where rotate_half "
                        "swaps the two halves of the last axis and negates the new first half "
                        "(ops::apply_rope::ApplyRope); cos and sin broadcast numpy-style.")


@apply_rope.shape
def _rope_shape(x, cos, sin):
    op = "tract_transformers_apply_rope"
    if not x or (x[-1] is not None and x[-1] % 2):
        raise op_error(op, f"the last extent of input {list(x)} must be even")
    out = numpy_broadcast(op, tuple(x), tuple(cos), tuple(sin))
    if out != tuple(x):
        raise op_error(op, f"cos {list(cos)} and sin {list(sin)} must broadcast to input {list(x)}")
    return tuple(x)


@apply_rope.formal
def _rope_formal(x, cos, sin):
    x, cos, sin = np.asarray(x), np.asarray(cos), np.asarray(sin)
    _rope_shape(x.shape, cos.shape, sin.shape)
    c, s = np.broadcast_to(cos, x.shape), np.broadcast_to(sin, x.shape)
    half = x.shape[-1] // 2
    out = np.empty(x.shape, x.dtype)
    for pos in np.ndindex(*x.shape):
        j = pos[-1]
        rotated = -float(x[pos[:-1] + (j + half,)]) if j < half else float(x[pos[:-1] + (j - half,)])
        out[pos] = float(x[pos]) * float(c[pos]) + rotated * float(s[pos])
    return out


@apply_rope.fast
def _rope_fast(x, cos, sin):
    x, cos, sin = np.asarray(x), np.asarray(cos), np.asarray(sin)
    _rope_shape(x.shape, cos.shape, sin.shape)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos.astype(x.dtype) + rotated * sin.astype(x.dtype)).astype(x.dtype)


# --- scaled_masked_softmax -------------------------------------------------------------------------------------

sms = define("tract_transformers_scaled_masked_softmax", FAMILY, """
fragment tract_transformers_scaled_masked_softmax( input: tensor<scalar>, mask: tensor<scalar>, scale: scalar,
                                                   post_softmax_mask: logical ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="softmax over the last axis of input * scale + mask (a float mask), or of input * scale "
                        "where a bool mask is true and -inf where false; with post_softmax_mask (bool masks) the "
                        "result is also zeroed where the mask is false (ScaledMaskedSoftmax).")


@sms.shape
def _sms_shape(x, mask, scale, post_softmax_mask=False):
    op = "tract_transformers_scaled_masked_softmax"
    if not scale:
        raise attr_error(op, "scale", scale, "must not be 0")
    if numpy_broadcast(op, tuple(x), tuple(mask)) != tuple(x):
        raise op_error(op, f"mask {list(mask)} must broadcast to input {list(x)}")
    return tuple(x)


def _sms_args(x, mask, scale, post_softmax_mask):
    x, mask = np.asarray(x), np.asarray(mask)
    _sms_shape(x.shape, mask.shape, scale, post_softmax_mask)
    return x, np.broadcast_to(mask, x.shape)


@sms.formal
def _sms_formal(x, mask, scale, post_softmax_mask=False):
    x, mask = _sms_args(x, mask, scale, post_softmax_mask)
    boolean = mask.dtype == np.bool_
    out = np.empty(x.shape, x.dtype)
    for outer in np.ndindex(*x.shape[:-1]):
        row = [(float(x[outer + (j,)]) * float(scale) if not boolean or mask[outer + (j,)] else -math.inf)
               + (0.0 if boolean else float(mask[outer + (j,)])) for j in range(x.shape[-1])]
        for j, w in enumerate(_softmax_row(row)):
            out[outer + (j,)] = 0.0 if boolean and post_softmax_mask and not mask[outer + (j,)] else w
    return out


@sms.fast
def _sms_fast(x, mask, scale, post_softmax_mask=False):
    x, mask = _sms_args(x, mask, scale, post_softmax_mask)
    w = x.astype(etypes.compute_dtype(etypes.from_numpy(x.dtype))) * np.float32(scale)
    if mask.dtype == np.bool_:
        w = np.where(mask, w, -np.inf)
    else:
        w = w + mask
    with np.errstate(invalid="ignore"):
        out = _softmax_last(w)
    if mask.dtype == np.bool_ and post_softmax_mask:
        out = np.where(mask, out, 0)
    return out.astype(x.dtype)


guard_family(FAMILY)
