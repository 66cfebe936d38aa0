"""Vision operators: ``cvm_get_valid_counts`` (seed: get_valid_count) and
``cvm_non_max_suppression`` (seed 002, "Vision Operators").

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
    union = s - inter
    if union <= 0:
        return 0
    if 100 * inter > _I64_MAX:
        return inter // (union // 100)
    return 100 * inter // union


def _nms_batch(rows, t, max_output_size, iou_threshold, force_suppress, top_k, overlaps):
    """Kept rows of one batch.  ``overlaps(kept_rows, row)`` -> iou of row with each kept row."""
    cand = sorted(range(t), key=lambda i: -int(rows[i][1]))  # stable: ties keep input order
    n_max = t if max_output_size < 0 else min(t, max_output_size)
    p_max = t if top_k < 0 else min(t, top_k)
    kept: list[int] = []
    p = 0
    while p < p_max and len(kept) < n_max:
        row = rows[cand[p]]
        p += 1
        if int(row[0]) < 0:
            continue
        if kept:
            ious = overlaps([rows[k] for k in kept], row)
            same = [force_suppress or int(rows[k][0]) == int(row[0]) for k in kept]
            if any(s and v >= iou_threshold for s, v in zip(same, ious, strict=True)):
                continue
        kept.append(cand[p - 1])
    return kept


def _nms(x, valid_count, attribs, overlaps):
    op = "cvm_non_max_suppression"
    x = as_int32(x, op, "x")
    v = as_int32(valid_count, op, "valid_count")
    nms_shape(x.shape, v.shape, **attribs)
    a = {"max_output_size": -1, "iou_threshold": 50, "force_suppress": False, "top_k": -1, **attribs}
    y = np.full(x.shape, -1, np.int32)
    n_ = x.shape[1]
    for b in range(x.shape[0]):
        t = min(max(int(v[b]), 0), n_)
        kept = _nms_batch(x[b], t, a["max_output_size"], a["iou_threshold"], bool(a["force_suppress"]),
                          a["top_k"], overlaps)
        for i, k in enumerate(kept):
            y[b, i] = x[b, k]
    return y


@NMS.formal
def nms_formal(x, valid_count, **attribs):
    """R = the first T rows sorted by score (stable); keep p in order while every kept q has
    iou(p, q) < iou_threshold (iou counted only for equal ids unless force_suppress); the
    kept rows, then -1 rows."""
    return _nms(x, valid_count, attribs, lambda kept, row: [iou_int(k, row) for k in kept])


def _overlaps_vec(kept, row):
    k = np.asarray(kept, np.int64)
    r = np.asarray(row, np.int64)
    with np.errstate(over="ignore"):
        area_k = (k[:, 4] - k[:, 2]) * (k[:, 5] - k[:, 3])
        area_r = (r[4] - r[2]) * (r[5] - r[3])
        s = area_k + area_r
        w = np.maximum(0, (np.minimum(k[:, 4], r[4]) - np.maximum(k[:, 2], r[2])).astype(np.int32))
        h = np.maximum(0, (np.minimum(k[:, 5], r[5]) - np.maximum(k[:, 3], r[3])).astype(np.int32))
    inter = w.astype(np.int64) * h.astype(np.int64)
    union = s - inter
    out = []
    for si, ii, ui in zip(s.tolist(), inter.tolist(), union.tolist(), strict=True):
        if si <= 0 or ui <= 0:
            out.append(0)
        elif 100 * ii > _I64_MAX:
            out.append(ii // (ui // 100))
        else:
            out.append(100 * ii // ui)
    return out


@NMS.fast
def nms_fast(x, valid_count, **attribs):
    return _nms(x, valid_count, attribs, _overlaps_vec)


@cost_rule(NMS)
def nms_cost(shapes, out_shapes, **attribs):
    return 20 * shapes[0][0]


precision_rule(NMS)(lambda precs, shapes, out_shapes, **at: [precs[0]])
