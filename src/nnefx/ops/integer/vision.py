"""Vision operators: ``cvm_get_valid_counts`` (seed: get_valid_count) and
``cvm_non_max_suppression`` (the CVM runtime's "Operator Math Formalization", "Vision Operators").

Rows are ``(id, score, x1, y1, x2, y2, ...)``.  The seed leaves the overlap ratio's integer
definition open; nnefx follows the runtime (cvm.md §3.3.6):

``iou(a, b)``: areas ``A = (x2 - x1) * (y2 - y1)`` in int64 without clamping (inverted
boxes have negative areas); ``S = A_a + A_b``, 0 if ``S <= 0``; the intersection's width
``w = max(0, min(x2) - max(x1))`` (int32) and height likewise, ``I = w * h`` (int64);
``U = S - I``, 0 if ``U <= 0``; else ``floor(100 * I / U)`` -- or ``floor(I / floor(U / 100))``
when ``100 * I`` would overflow int64.  So 100 means identical boxes and thresholds >= 101
suppress nothing.

Departures from the seed: get_valid_counts needs ``2 <= K <= 31`` (seed: 32); rows with a
negative id are skipped by NMS and never suppress others.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ._int import (
    as_int32,
    bad,
    bitlen,
    check_bool,
    check_int,
    cost_rule,
    cvm_define,
    precision_rule,
    shape_error,
    wrap32_int,
)

_I64_MAX = 2**63 - 1


def _wrap64(v: int) -> int:
    return ((v + 2**63) % 2**64) - 2**63


# --- get_valid_counts ----------------------------------------------------------------------------

GVC = cvm_define("get_valid_counts", "integer.vision", "x: tensor<integer>, score_threshold: integer = 0",
                 "valid_count: tensor<integer>, y: tensor<integer>",
                 doc="Compact the rows whose score exceeds the threshold; count them per batch.")


@GVC.shape
def gvc_shape(x, score_threshold=0):
    op = "cvm_get_valid_counts"
    check_int(op, "score_threshold", score_threshold)
    if len(x) != 3:
        raise shape_error(op, f"input must be 3-D (B, N, K), got shape {tuple(x)}")
    if not 2 <= x[2] <= 31:
        raise shape_error(op, f"row length K = {x[2]} must lie in [2, 31]")
    return (x[0],), tuple(x)


@GVC.formal
def gvc_formal(x, score_threshold=0):
    """valid_count[b] = card{q | X[b,q,1] > thr}; Y[b, idx, k] = X[b, n, k] for the valid rows
    in order (idx = number of valid rows before n); remaining rows are -1."""
    x = as_int32(x, "cvm_get_valid_counts", "x")
    gvc_shape(x.shape, score_threshold)
    b_, n_, k_ = x.shape
    count = np.zeros((b_,), np.int32)
    y = np.full(x.shape, -1, np.int32)
    for b in range(b_):
        for n in range(n_):
            if int(x[b, n, 1]) > score_threshold:
                idx = sum(1 for q in range(n) if int(x[b, q, 1]) > score_threshold)
                for k in range(k_):
                    y[b, idx, k] = x[b, n, k]
        count[b] = sum(1 for q in range(n_) if int(x[b, q, 1]) > score_threshold)
    return count, y


@GVC.fast
def gvc_fast(x, score_threshold=0):
    x = as_int32(x, "cvm_get_valid_counts", "x")
    gvc_shape(x.shape, score_threshold)
    valid = x[:, :, 1] > score_threshold
    count = valid.sum(axis=1).astype(np.int32)
    y = np.full(x.shape, -1, np.int32)
    # stable argsort of "not valid" puts valid rows first in their original order
    order = np.argsort(~valid, axis=1, kind="stable")
    packed = np.take_along_axis(x, order[:, :, None], axis=1)
    keep = np.arange(x.shape[1])[None, :] < count[:, None]
    y[keep] = packed[keep]
    return count, y


@precision_rule(GVC)
def gvc_precision(precs, shapes, out_shapes, **attribs):
    _, n, k = shapes[0]
    return [bitlen(n * k + 1) + 1, precs[0]]


@cost_rule(GVC)
def gvc_cost(shapes, out_shapes, **attribs):
    # 1 per element of output 0 (the runtime's special case for output 1 tests the name
    # "get_valid_count" and never fires).
    return 1


# --- non_max_suppression -------------------------------------------------------------------------

NMS = cvm_define(
    "non_max_suppression", "integer.vision",
    "x: tensor<integer>, valid_count: tensor<integer>, max_output_size: integer = -1, "
    "iou_threshold: integer = 50, force_suppress: logical = false, top_k: integer = -1",
    doc="Greedy non-maximum suppression over (id, score, x1, y1, x2, y2) rows.")


@NMS.shape
def nms_shape(x, valid_count, max_output_size=-1, iou_threshold=50, force_suppress=False, top_k=-1):
    op = "cvm_non_max_suppression"
    check_int(op, "max_output_size", max_output_size)
    check_int(op, "iou_threshold", iou_threshold)
    if iou_threshold <= 0:
        raise bad(op, "iou_threshold", iou_threshold, "must be positive")
    check_bool(op, "force_suppress", force_suppress)
    check_int(op, "top_k", top_k)
    if len(x) != 3 or x[2] != 6:
        raise shape_error(op, f"input must be (B, N, 6), got shape {tuple(x)}")
    if tuple(valid_count) != (x[0],):
        raise shape_error(op, f"valid_count shape {tuple(valid_count)} must be ({x[0]},)")
    return tuple(x)


def _ratio(inter: int, union: int) -> int:
    """floor(100 * I / U), or floor(I / floor(U / 100)) when 100 * I overflows int64."""
    if 100 * inter > _I64_MAX:
        if union // 100 == 0:  # the runtime divides by zero here (it crashes)
            raise NNEFXError("operation 'cvm_non_max_suppression': box coordinates overflow the "
                             "overlap computation")
        return inter // (union // 100)
    return 100 * inter // union


def iou_int(a, b) -> int:
    """The runtime's integer overlap ratio of two rows (percent, floor)."""
    area_a = _wrap64((int(a[4]) - int(a[2])) * (int(a[5]) - int(a[3])))
    area_b = _wrap64((int(b[4]) - int(b[2])) * (int(b[5]) - int(b[3])))
    s = _wrap64(area_a + area_b)
    if s <= 0:
        return 0
    w = max(0, wrap32_int(min(int(a[4]), int(b[4])) - max(int(a[2]), int(b[2]))))
    h = max(0, wrap32_int(min(int(a[5]), int(b[5])) - max(int(a[3]), int(b[3]))))
    inter = w * h
    union = _wrap64(s - inter)
    if union <= 0:
        return 0
    return _ratio(inter, union)


def _attribs(attribs):
    return {"max_output_size": -1, "iou_threshold": 50, "force_suppress": False, "top_k": -1, **attribs}


def _nms_inputs(x, valid_count, attribs):
    op = "cvm_non_max_suppression"
    x = as_int32(x, op, "x")
    v = as_int32(valid_count, op, "valid_count")
    nms_shape(x.shape, v.shape, **attribs)
    return x, v, _attribs(attribs)


@NMS.formal
def nms_formal(x, valid_count, **attribs):
    """Per batch b, following the seed's definition:

    T = clip(valid_count[b], 0, N); R = the first T rows ordered by I (score descending,
    ties by index); U = {p < min(TK, T) | R[p, 0] >= 0 and iou(p, q) < iou_threshold for every
    q in U with q < p}, where iou counts only for equal ids unless force_suppress;
    Y[b, n] = R[IDX(n)] for n < min(T, MOS, |U|), the rest -1."""
    x, v, a = _nms_inputs(x, valid_count, attribs)
    b_, n_, k_ = x.shape
    y = np.full(x.shape, -1, np.int32)
    for b in range(b_):
        t = min(max(int(v[b]), 0), n_)
        order = sorted(range(t), key=lambda i: (-int(x[b, i, 1]), i))
        r = [x[b, i] for i in order]
        tk = t if a["top_k"] < 0 else min(a["top_k"], t)
        mos = t if a["max_output_size"] < 0 else a["max_output_size"]
        u: list[int] = []
        for p in range(tk):
            if int(r[p][0]) < 0:
                continue
            if all(not (a["force_suppress"] or int(r[p][0]) == int(r[q][0]))
                   or iou_int(r[p], r[q]) < a["iou_threshold"] for q in u):
                u.append(p)
        for n in range(min(t, mos, len(u))):
            for k in range(k_):
                y[b, n, k] = r[u[n]][k]
    return y


def _iou_matrix(r: np.ndarray) -> np.ndarray:
    """iou_int for every pair of rows of ``r`` (T, 6), vectorised in int64."""
    r = r.astype(np.int64)
    with np.errstate(over="ignore"):
        area = (r[:, 4] - r[:, 2]) * (r[:, 5] - r[:, 3])
        s = area[:, None] + area[None, :]
        w = np.minimum(r[:, None, 4], r[None, :, 4]) - np.maximum(r[:, None, 2], r[None, :, 2])
        h = np.minimum(r[:, None, 5], r[None, :, 5]) - np.maximum(r[:, None, 3], r[None, :, 3])
        w = np.maximum(w.astype(np.int32), 0).astype(np.int64)
        h = np.maximum(h.astype(np.int32), 0).astype(np.int64)
        inter = w * h
        union = s - inter
    valid = (s > 0) & (union > 0)
    big = inter > _I64_MAX // 100
    out = np.zeros(s.shape, np.int64)
    plain = valid & ~big
    out[plain] = (100 * inter[plain]) // union[plain]
    for i, j in zip(*np.nonzero(valid & big), strict=True):  # astronomically large boxes only
        out[i, j] = _ratio(int(inter[i, j]), int(union[i, j]))
    return out


@NMS.fast
def nms_fast(x, valid_count, **attribs):
    """Stable argsort by score, one pairwise overlap matrix per batch, then a greedy pass
    over boolean rows of that matrix."""
    x, v, a = _nms_inputs(x, valid_count, attribs)
    y = np.full(x.shape, -1, np.int32)
    n_ = x.shape[1]
    for b in range(x.shape[0]):
        t = min(max(int(v[b]), 0), n_)
        if t == 0:
            continue
        r = x[b, :t][np.argsort(-x[b, :t, 1].astype(np.int64), kind="stable")]
        tk = t if a["top_k"] < 0 else min(a["top_k"], t)
        mos = t if a["max_output_size"] < 0 else min(a["max_output_size"], t)
        r = r[:tk]
        suppress = _iou_matrix(r) >= a["iou_threshold"]
        if not a["force_suppress"]:
            suppress &= r[:, None, 0] == r[None, :, 0]
        kept = np.zeros(tk, bool)
        count = 0
        for p in range(tk):
            if count >= mos:
                break
            if r[p, 0] >= 0 and not (suppress[p] & kept).any():
                kept[p] = True
                count += 1
        rows = r[kept]
        y[b, : len(rows)] = rows
    return y


@cost_rule(NMS)
def nms_cost(shapes, out_shapes, **attribs):
    return 20 * shapes[0][0]


precision_rule(NMS)(lambda precs, shapes, out_shapes, **at: [precs[0]])
