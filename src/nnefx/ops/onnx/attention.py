"""ONNX Attention (opsets 23-25) as one operation: scaled dot-product attention with grouped
key/value heads, 3-D (heads folded into the hidden axis) or 4-D inputs, boolean or additive
masks, causal and sliding-window masking, a key/value cache (``past_key``/``past_value``,
or a static cache with ``nonpad_kv_seqlen``), soft-capping and the ``qk_matmul_output``
probe.

The definition (ONNX Attention, its function body):

* ``Q`` and ``K`` are each scaled by ``sqrt(scale)`` (``scale`` defaults to
  ``1 / sqrt(head size)``); the cache is concatenated in front of ``K``/``V`` along the
  sequence; ``kv`` heads repeat to the ``q`` heads' count;
* scores ``= softcap * tanh((Q K^T) / softcap)`` (when ``softcap > 0``) plus the bias: the
  mask (boolean: 0 where true, -inf where false; additive as given, padded with -inf to the
  total key length), the causal frontier (query ``i`` sees key ``j <= i + offset``, offset
  the cache length or ``nonpad_kv_seqlen - q_len``), the sliding window, the static-cache
  padding;
* ``softmax`` over keys (a row with every key masked gives zeros), then times ``V``.

Optional tensors are rank 0 when absent (a real mask, cache or length is never rank 0).
``softmax_precision`` names the type the softmax is taken in (0: the inputs' type); 11 (double)
takes it in float64 (the formal kernel always computes float32 in float64).

Element types: float32 and float64 compute in their own type (the formal kernel in float64)
and round once.  For float16 and bfloat16 the function body is the meaning: every one of its
nodes (the scale factor, ``Q``/``K`` times it, the product, each soft-capping step, the biased
scores, each step of ``Softmax``'s own body when the softmax type is narrow, the probabilities
cast back, the result) yields a tensor of that type, so both kernels round there, while inside
one node — a product, the softmax's sum — they accumulate wide (float32 fast, float64 formal)
and round once, nnefx's element-type contract (:mod:`nnefx.etypes`).  The kernels therefore
take ``q``, ``k``, ``v``, the mask and the cache as stored (``stored_inputs``): the element type
decides where they round.
``qk_matmul_output_mode``: 0 the scaled product, 1 after soft-capping, 2 with the bias,
3 after the softmax.

RotaryEmbedding (opset 23) lives here too: it rotates query/key heads before attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._common import attr_error, guard_family, op_error
from ..registry import define

FAMILY = "onnx_attention"

onnx_attention = define("onnx_attention", FAMILY, """
fragment onnx_attention(
    q: tensor<scalar>,
    k: tensor<scalar>,
    v: tensor<scalar>,
    attn_mask: tensor<> = 0.0,
    past_key: tensor<scalar> = 0.0,
    past_value: tensor<scalar> = 0.0,
    nonpad_kv_seqlen: tensor<integer> = 0,
    scale: scalar = 0.0,
    is_causal: logical = false,
    q_num_heads: integer = 0,
    kv_num_heads: integer = 0,
    softcap: scalar = 0.0,
    softmax_precision: integer = 0,
    qk_matmul_output_mode: integer = 0,
    left_window_size: integer = -1,
    right_window_size: integer = -1 )
-> ( y: tensor<scalar>, present_key: tensor<scalar>, present_value: tensor<scalar>, qk_matmul_output: tensor<scalar> );
""", domain="onnx", doc="ONNX Attention: softmax(Q K^T * scale + masks) V with grouped heads, cache, causal "
                        "and sliding-window masks, soft-capping (scale = 0: 1/sqrt(head size)).",
                   stored_inputs=("q", "k", "v", "attn_mask", "past_key", "past_value"))

#: ``softmax_precision`` codes (ONNX TensorProto data types) and the types they name.
SOFTMAX_TYPES = {1: np.dtype(np.float32), 11: np.dtype(np.float64), 10: np.dtype(np.float16)}


def _softmax_dtype(precision: int, dtype: np.dtype) -> np.dtype:
    """The type the softmax is taken in: ``softmax_precision``'s, or the inputs' when 0."""
    if precision == 16:
        from ... import etypes

        return etypes.numpy_dtype("bf16")
    return SOFTMAX_TYPES.get(precision, np.dtype(dtype))


def _rounding(dtype: np.dtype, acc: type) -> Callable[[Any], np.ndarray]:
    """``x`` rounded to ``dtype`` and held in ``acc`` where ``dtype`` is a float narrower than
    float32 (a function-body node's result), else ``x`` itself (computed in its own type)."""
    if np.dtype(dtype).itemsize >= 4:
        return lambda x: x

    def rounded(x: Any) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.asarray(x, acc).astype(dtype).astype(acc)
    return rounded


def _root(scale: float, head: int, dtype: np.dtype, acc: type) -> Any:
    """``sqrt(scale)``, by which ``Q`` and ``K`` are each multiplied.  For a narrow type it is
    the body's ``ScaleFactorF``: computed in float32, then cast to the inputs' type."""
    if np.dtype(dtype).itemsize >= 4:
        return acc(math.sqrt(_scale(scale, head)))
    s = np.float32(scale) if scale != 0.0 else np.float32(1) / np.sqrt(np.float32(head))
    return _rounding(dtype, acc)(np.sqrt(np.float32(s)))


def _softmax(scores: np.ndarray, soft: np.dtype, acc: type) -> np.ndarray:
    """Softmax over the last axis, taken in type ``soft`` (held in ``acc``, float64 for double):
    a narrow type rounds at each node of Softmax's function body (ReduceMax, Sub, Exp,
    ReduceSum, Div).  A row whose every score is -inf gives zeros instead of NaN."""
    wide = np.float64 if soft == np.float64 else acc
    rp = _rounding(soft, wide)
    s = rp(scores.astype(wide, copy=False))
    top = s.max(axis=-1, keepdims=True)
    e = rp(np.exp(rp(s - np.where(np.isneginf(top), 0, top))))
    total = rp(e.sum(axis=-1, keepdims=True))
    return rp(e / np.where(total == 0, 1, total))


def _heads(name, q, k, v, q_num_heads, kv_num_heads):
    """(batch, q heads, q length, head size), the same for k and v, from 3-D or 4-D shapes."""
    if not len(q) == len(k) == len(v) or len(q) not in (3, 4):
        raise op_error(name, f"q, k and v must all be 3-D or all 4-D, got {list(q)}, {list(k)}, {list(v)}")
    if len(q) == 4:
        return tuple(q), tuple(k), tuple(v)
    if q_num_heads <= 0 or kv_num_heads <= 0:
        raise op_error(name, "3-D inputs need q_num_heads and kv_num_heads")
    out = []
    for s, h in ((q, q_num_heads), (k, kv_num_heads), (v, kv_num_heads)):
        if s[2] is not None and s[2] % h:
            raise op_error(name, f"hidden size {s[2]} does not split into {h} heads")
        out.append((s[0], h, s[1], None if s[2] is None else s[2] // h))
    return tuple(out)


@onnx_attention.shape
def _attention_shape(q, k, v, attn_mask=(), past_key=(), past_value=(), nonpad_kv_seqlen=(), scale=0.0,
                     is_causal=False, q_num_heads=0, kv_num_heads=0, softcap=0.0, softmax_precision=0,
                     qk_matmul_output_mode=0, left_window_size=-1, right_window_size=-1):
    name = "onnx_attention"
    if softmax_precision not in (0, 1, 10, 11, 16):
        raise attr_error(name, "softmax_precision", softmax_precision, "is not a floating-point type code")
    if qk_matmul_output_mode not in (0, 1, 2, 3):
        raise attr_error(name, "qk_matmul_output_mode", qk_matmul_output_mode, "must be 0, 1, 2 or 3")
    if left_window_size < -1 or right_window_size < -1:
        raise op_error(name, "window sizes must be -1 (unbounded) or non-negative")
    q4, k4, v4 = _heads(name, q, k, v, q_num_heads, kv_num_heads)
    if (len(past_key) == 0) != (len(past_value) == 0):
        raise op_error(name, "past_key and past_value come together")
    if past_key and nonpad_kv_seqlen:
        raise op_error(name, "nonpad_kv_seqlen cannot be combined with a past cache")
    if None not in (q4[3], k4[3]) and q4[3] != k4[3]:
        raise op_error(name, f"query head size {q4[3]} differs from key head size {k4[3]}")
    if q4[1] is not None and k4[1] is not None and q4[1] % k4[1]:
        raise op_error(name, f"{q4[1]} query heads are not a multiple of {k4[1]} key/value heads")
    past = past_key[2] if past_key else 0
    total = None if past is None or k4[2] is None else past + k4[2]
    present_k = (k4[0], k4[1], total, k4[3])
    present_v = (v4[0], v4[1], total, v4[3])
    y = (q4[0], q4[1], q4[2], v4[3])
    if len(q) == 3:
        y = (q4[0], q4[2], None if q4[1] is None or v4[3] is None else q4[1] * v4[3])
    return y, present_k, present_v, (q4[0], q4[1], q4[2], total)


def _split(x: np.ndarray, heads: int) -> np.ndarray:
    if x.ndim == 4:
        return x
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


def _prepare(q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, is_causal, q_num_heads,
             kv_num_heads, left_window_size, right_window_size, acc):
    """4-D q/k/v (cache prepended), the present cache, and the additive bias [.., q_len, kv_len]."""
    q, k, v = (_split(np.asarray(t), h) for t, h in ((q, q_num_heads), (k, kv_num_heads), (v, kv_num_heads)))
    past_key, past_value = np.asarray(past_key), np.asarray(past_value)
    if past_key.ndim:
        k = np.concatenate([past_key.astype(k.dtype), k], axis=2)
        v = np.concatenate([past_value.astype(v.dtype), v], axis=2)
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = np.zeros((q_len, kv_len), acc)
    mask = np.asarray(attn_mask)
    if mask.ndim:
        pad = kv_len - mask.shape[-1]
        if mask.dtype == np.bool_:
            mask = np.where(mask, 0.0, -np.inf)
        mask = mask.astype(acc)
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=-np.inf)
        bias = bias + mask
    seqlen = np.asarray(nonpad_kv_seqlen)
    if seqlen.ndim:
        offset = seqlen.reshape(-1, 1, 1, 1) - q_len  # per batch: [batch, 1, 1, 1]
    else:
        offset = past_key.shape[2] if past_key.ndim else 0
    i = np.arange(q_len).reshape(-1, 1)
    j = np.arange(kv_len).reshape(1, -1)
    diff = i + offset - j  # query position minus key position
    if is_causal:
        bias = bias + np.where(diff >= 0, 0.0, -np.inf)
    if left_window_size >= 0:
        bias = bias + np.where(diff <= left_window_size, 0.0, -np.inf)
    if right_window_size >= 0:
        bias = bias + np.where(-diff <= right_window_size, 0.0, -np.inf)
    if seqlen.ndim:
        bias = bias + np.where(j < seqlen.reshape(-1, 1, 1, 1), 0.0, -np.inf)
    return q, k, v, bias.astype(acc)


def _scale(scale: float, head: int) -> float:
    return scale if scale != 0.0 else 1.0 / math.sqrt(head)


@onnx_attention.formal
def _attention_formal(q, k, v, attn_mask=0.0, past_key=0.0, past_value=0.0, nonpad_kv_seqlen=0, scale=0.0,
                      is_causal=False, q_num_heads=0, kv_num_heads=0, softcap=0.0, softmax_precision=0,
                      qk_matmul_output_mode=0, left_window_size=-1, right_window_size=-1):
    # (the registry's guard has run the shape rule on these arguments already)
    dtype = np.asarray(q).dtype
    rt = _rounding(dtype, np.float64)  # a function-body node's result (identity for float32/64)
    soft = _softmax_dtype(softmax_precision, dtype)
    q4, k4, v4, bias = _prepare(q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, is_causal,
                                q_num_heads, kv_num_heads, left_window_size, right_window_size, np.float64)
    bias = rt(bias)
    batch, heads, q_len, _ = q4.shape
    kv_heads, kv_len = k4.shape[1], k4.shape[2]
    root = _root(scale, q4.shape[3], dtype, np.float64)
    queries, keys = rt(q4.astype(np.float64) * root), rt(k4.astype(np.float64) * root)
    cap = rt(np.float64(softcap))
    bias = np.broadcast_to(bias, (batch, heads, q_len, kv_len))
    y = np.zeros((batch, heads, q_len, v4.shape[3]))
    probe = np.zeros((batch, heads, q_len, kv_len))
    for b in range(batch):
        for h in range(heads):
            g = h // (heads // kv_heads)  # the key/value head this query head shares
            for i in range(q_len):
                qi = queries[b, h, i]
                scores = rt(np.array([float(np.dot(qi, keys[b, g, j])) for j in range(kv_len)]))
                product = scores
                if softcap > 0:
                    scores = rt(rt(np.tanh(rt(scores / cap))) * cap)
                capped = scores
                scores = rt(scores + bias[b, h, i])
                if np.isneginf(bias[b, h, i]).all():
                    weights = np.zeros(kv_len)  # every key masked: the row is zero
                else:
                    weights = rt(_softmax(scores, soft, np.float64))
                y[b, h, i] = rt(weights @ v4[b, g].astype(np.float64))
                probe[b, h, i] = (product, capped, scores, weights)[qk_matmul_output_mode]
    if np.ndim(q) == 3:
        y = y.transpose(0, 2, 1, 3).reshape(batch, q_len, -1)
    return y.astype(dtype), k4.astype(dtype), v4.astype(dtype), probe.astype(dtype)


@onnx_attention.fast
def _attention_fast(q, k, v, attn_mask=0.0, past_key=0.0, past_value=0.0, nonpad_kv_seqlen=0, scale=0.0,
                    is_causal=False, q_num_heads=0, kv_num_heads=0, softcap=0.0, softmax_precision=0,
                    qk_matmul_output_mode=0, left_window_size=-1, right_window_size=-1):
    # (the registry's guard has run the shape rule on these arguments already)
    dtype = np.asarray(q).dtype
    acc = np.float64 if dtype == np.float64 else np.float32
    rt = _rounding(dtype, acc)  # a function-body node's result (identity for float32/64)
    q4, k4, v4, bias = _prepare(q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, is_causal,
                                q_num_heads, kv_num_heads, left_window_size, right_window_size, acc)
    bias = rt(bias)
    reps = q4.shape[1] // k4.shape[1]
    keys = np.repeat(k4, reps, axis=1).astype(acc) if reps > 1 else k4.astype(acc)
    values = np.repeat(v4, reps, axis=1).astype(acc) if reps > 1 else v4.astype(acc)
    root = _root(scale, q4.shape[3], dtype, acc)
    product = rt(rt(q4.astype(acc) * root) @ rt(keys * root).transpose(0, 1, 3, 2))
    if softcap > 0:
        cap = rt(acc(softcap))
        capped = rt(rt(np.tanh(rt(product / cap))) * cap)
    else:
        capped = product
    scores = rt(capped + bias)
    weights = rt(_softmax(scores, _softmax_dtype(softmax_precision, dtype), acc).astype(acc))
    masked = np.isneginf(np.broadcast_to(bias, scores.shape)).all(axis=-1, keepdims=True)
    weights = np.where(masked, acc(0), weights)
    y = rt(weights @ values)
    if np.ndim(q) == 3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    probe = (product, capped, scores, weights)[qk_matmul_output_mode]
    return y.astype(dtype), k4.astype(dtype), v4.astype(dtype), probe.astype(dtype)


# --- RotaryEmbedding ---------------------------------------------------------------------------

onnx_rotary_embedding = define("onnx_rotary_embedding", FAMILY, """
fragment onnx_rotary_embedding(
    input: tensor<scalar>,
    cos_cache: tensor<scalar>,
    sin_cache: tensor<scalar>,
    position_ids: tensor<integer> = 0,
    interleaved: logical = false,
    rotary_embedding_dim: integer = 0,
    num_heads: integer = 0 )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX RotaryEmbedding-23: the first rotary_embedding_dim items of each head rotated "
                        "pairwise by the cached angles of the item's position.")


def _rotary_dims(x, cos, sin, position_ids, rotary_embedding_dim, num_heads):
    """(batch, sequence, heads, head size, rotated size) of a rotary embedding."""
    name = "onnx_rotary_embedding"
    if len(x) == 4:
        batch, heads, seq, head = x
    elif len(x) == 3:
        if num_heads <= 0:
            raise op_error(name, "a 3-D input needs num_heads")
        batch, seq, hidden = x
        heads = num_heads
        if hidden is not None and hidden % heads:
            raise op_error(name, f"hidden size {hidden} does not split into {heads} heads")
        head = None if hidden is None else hidden // heads
    else:
        raise op_error(name, f"the input must be [batch, heads, seq, head] or [batch, seq, hidden], got {list(x)}")
    rotated = rotary_embedding_dim or head
    if rotated is not None and (rotated % 2 or (head is not None and rotated > head)):
        raise attr_error(name, "rotary_embedding_dim", rotary_embedding_dim, "must be even and at most the head size")
    want = 2 if position_ids else 3
    for what, c in (("cos_cache", cos), ("sin_cache", sin)):
        if len(c) != want or (rotated is not None and c[-1] not in (rotated // 2, None)):
            raise op_error(name, f"{what} must have rank {want} and {rotated // 2 if rotated else '?'} items "
                                 f"in its last axis, got {list(c)}")
    return batch, seq, heads, head, rotated


@onnx_rotary_embedding.shape
def _rotary_shape(x, cos, sin, position_ids=(), interleaved=False, rotary_embedding_dim=0, num_heads=0):
    _rotary_dims(x, cos, sin, position_ids, rotary_embedding_dim, num_heads)
    return tuple(x)


def _angles(cos, sin, position_ids):
    """cos and sin per (batch, position, pair): looked up by position_ids when given."""
    cos, sin, ids = np.asarray(cos), np.asarray(sin), np.asarray(position_ids)
    if ids.ndim:
        return cos[ids], sin[ids]
    return cos, sin


def _as_bshd(x: np.ndarray, heads: int) -> np.ndarray:
    return x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(x.shape[0], x.shape[1], heads, -1)


def _from_bshd(y: np.ndarray, like: np.ndarray) -> np.ndarray:
    return y.transpose(0, 2, 1, 3) if like.ndim == 4 else y.reshape(like.shape)


@onnx_rotary_embedding.formal
def _rotary_formal(x, cos, sin, position_ids=0, interleaved=False, rotary_embedding_dim=0, num_heads=0):
    x = np.asarray(x)
    batch, seq, heads, head, rotated = _rotary_dims(x.shape, np.shape(cos), np.shape(sin), np.shape(position_ids),
                                                    rotary_embedding_dim, num_heads)
    c, s = _angles(cos, sin, position_ids)
    data = _as_bshd(x, heads).astype(np.float64)
    out = data.copy()
    half = rotated // 2
    for b in range(batch):
        for p in range(seq):
            for h in range(heads):
                for i in range(half):
                    first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
                    a, z = data[b, p, h, first], data[b, p, h, second]
                    cc, ss = float(c[b, p, i]), float(s[b, p, i])
                    out[b, p, h, first] = cc * a - ss * z
                    out[b, p, h, second] = ss * a + cc * z
    return _from_bshd(out, x).astype(x.dtype)


@onnx_rotary_embedding.fast
def _rotary_fast(x, cos, sin, position_ids=0, interleaved=False, rotary_embedding_dim=0, num_heads=0):
    x = np.asarray(x)
    _, _, heads, _, rotated = _rotary_dims(x.shape, np.shape(cos), np.shape(sin), np.shape(position_ids),
                                           rotary_embedding_dim, num_heads)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    c, s = (a.astype(acc)[:, :, None, :] for a in _angles(cos, sin, position_ids))
    data = _as_bshd(x, heads).astype(acc)
    part = data[..., :rotated]
    first, second = (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)
    real, imag = c * first - s * second, s * first + c * second
    turned = np.stack([real, imag], axis=-1).reshape(part.shape) if interleaved else \
        np.concatenate([real, imag], axis=-1)
    out = np.concatenate([turned, data[..., rotated:]], axis=-1)
    return _from_bshd(out, x).astype(x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
