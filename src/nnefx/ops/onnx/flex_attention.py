"""ONNX FlexAttention (``ai.onnx.preview`` opset 1) as one operation: attention over rank-4
inputs with two optional modifier bodies, ``score_mod`` and ``prob_mod``.

The definition (ONNX operator docs, FlexAttention, and its function body):

* ``Q`` and ``K`` are each multiplied by ``sqrt(scale)`` in their own element type
  (``scale`` 0: ``1 / sqrt(head size)``); key/value head ``h // (Hq / Hkv)`` serves query
  head ``h``;
* ``scores = Q K^T`` in the input type, then converted to the softmax type
  (``softmax_precision``: an ONNX element-type code, 1 float32, 10 float16, 11 float64,
  16 bfloat16; 0 means float64 for float64 inputs, else float32);
* ``scores = score_mod(scores)`` when given, ``probs = softmax(scores)`` over the keys (a row
  whose scores are all ``-inf`` gives NaN, as ONNX Softmax does), ``probs = prob_mod(probs)``;
* ``Y = probs V`` in the softmax type, converted back to the input type.

A modifier is a body graph of the enclosing graph's ``subgraphs`` (as ``If``/``Loop``
bodies are): one ``[B, Hq, L, S]`` tensor of the softmax type in, one out, followed by the
``captured`` outer tensors both bodies read; the kernels run it through the planner's
``call`` hook.  The formal kernel does the products in float64 and rounds where the function
body rounds; the fast one does them in the types the function body names.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _common
from ..registry import define

FAMILY = "onnx_flex_attention"
_NAME = "onnx_flex_attention"
#: ONNX element-type codes softmax_precision may name.
PRECISIONS = {1: "f32", 10: "f16", 11: "f64", 16: "bf16"}

onnx_flex_attention = define(_NAME, FAMILY, """
fragment onnx_flex_attention(
    q: tensor<scalar>,
    k: tensor<scalar>,
    v: tensor<scalar>,
    captured: tensor<>[],
    scale: scalar = 0.0,
    softmax_precision: integer = 0,
    score_mod: string = '',
    prob_mod: string = '' )
-> ( y: tensor<scalar> );
""", domain="onnx", runtime_keywords=("call",),
    doc="ONNX FlexAttention (ai.onnx.preview): softmax(score_mod(Q K^T * scale)) through prob_mod, times V; "
        "grouped key/value heads; modifiers are bodies run on the scores/probabilities.")


def softmax_etype(precision: int, input_etype: str) -> str:
    """The element type the scores and probabilities (and the modifier bodies) use."""
    if precision == 0:
        return "f64" if input_etype == "f64" else "f32"
    if precision not in PRECISIONS:
        raise _common.attr_error(_NAME, "softmax_precision", precision, "must be 0 or the ONNX type code of "
                                                                         "float32, float16, float64 or bfloat16")
    return PRECISIONS[precision]


@onnx_flex_attention.shape
def _shape(q, k, v, captured=(), scale=0.0, softmax_precision=0, score_mod="", prob_mod=""):
    softmax_etype(softmax_precision, "f32")
    if not len(q) == len(k) == len(v) == 4:
        raise _common.op_error(_NAME, f"Q, K and V must be rank 4, got {list(q)}, {list(k)}, {list(v)}")

    def differ(a, b):
        return a is not None and b is not None and a != b

    if differ(q[0], k[0]) or differ(k[0], v[0]):
        raise _common.op_error(_NAME, f"batch sizes differ: {q[0]}, {k[0]}, {v[0]}")
    if differ(k[1], v[1]) or differ(k[2], v[2]):
        raise _common.op_error(_NAME, f"K {list(k)} and V {list(v)} must have the same heads and sequence length")
    if differ(q[3], k[3]):
        raise _common.op_error(_NAME, f"query head size {q[3]} differs from key head size {k[3]}")
    if q[1] is not None and k[1] is not None and (k[1] == 0 or q[1] % k[1]):
        raise _common.op_error(_NAME, f"{q[1]} query heads are not a multiple of {k[1]} key/value heads")
    return (q[0], q[1], q[2], v[3])


def _storage(etype: str) -> np.dtype:
    from ... import etypes

    return etypes.numpy_dtype(etype)


def _modify(call: Any, body: str, x: np.ndarray, captured: list, dtype: np.dtype) -> np.ndarray:
    if not body:
        return x
    if call is None:
        raise _common.op_error(_NAME, "runs a modifier body: it needs the session (run it in a model, not on its "
                                      "own)")
    out = call.run(body, [x, *captured])
    if len(out) != 1:
        raise _common.op_error(_NAME, f"modifier body '{body}' must have one output, it has {len(out)}")
    y = np.asarray(out[0])
    if y.shape != x.shape:
        raise _common.op_error(_NAME, f"modifier body '{body}' returned shape {list(y.shape)}; it must keep "
                                      f"{list(x.shape)}")
    return y.astype(dtype, copy=False)


def _run(q, k, v, captured, scale, softmax_precision, score_mod, prob_mod, call, formal: bool):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    dtype = q.dtype
    soft = _storage(softmax_etype(softmax_precision, "f64" if dtype == np.float64 else "f32"))
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    root = math.sqrt(scale if scale != 0.0 else 1.0 / math.sqrt(q.shape[3]))
    wide = np.float64 if formal or dtype == np.float64 else np.float32
    qs = (q.astype(wide) * root).astype(dtype)
    ks = (k.astype(wide) * root).astype(dtype)
    scores = (qs.astype(wide) @ ks.astype(wide).transpose(0, 1, 3, 2)).astype(dtype).astype(soft)
    scores = _modify(call, score_mod, scores, list(captured), soft)
    s = scores.astype(np.float64) if formal else scores
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        probs = (e / e.sum(axis=-1, keepdims=True)).astype(soft)
    probs = _modify(call, prob_mod, probs, list(captured), soft)
    calc = np.float64 if formal else np.promote_types(soft, np.float32)
    y = (probs.astype(calc) @ v.astype(soft).astype(calc)).astype(soft)
    return y.astype(dtype)


@onnx_flex_attention.formal
def _formal(q, k, v, captured=(), scale=0.0, softmax_precision=0, score_mod="", prob_mod="", call=None):
    return _run(q, k, v, captured, scale, softmax_precision, score_mod, prob_mod, call, True)


@onnx_flex_attention.fast
def _fast(q, k, v, captured=(), scale=0.0, softmax_precision=0, score_mod="", prob_mod="", call=None):
    return _run(q, k, v, captured, scale, softmax_precision, score_mod, prob_mod, call, False)
