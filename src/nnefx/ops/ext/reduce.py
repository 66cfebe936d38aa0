"""Reductions and selections: top_k, cumulative sum, product reduction, einsum and non-maximum suppression.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import re

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define

top_k_op = define("top_k", "ext", """
fragment top_k( input: tensor<scalar>, k: integer, axis: integer, mode: string = 'max', sort: string = 'value' )
    -> ( values: tensor<scalar>, indices: tensor<integer> );
""", domain="nnefx", doc="IR TopK: the k largest (or smallest) along an axis; ties keep the lower index.")


@top_k_op.shape
def _top_k_shape(x, k=1, axis=0, mode="max", sort="value"):
    if not 0 <= axis < len(x):
        raise NNEFXError(f"top_k: axis {axis} out of range")
    if k < 1 or (x[axis] is not None and k > x[axis]):
        raise NNEFXError(f"top_k: k = {k} is out of range for extent {x[axis]}")
    s = list(x)
    s[axis] = k
    return tuple(s), tuple(s)


@top_k_op.fast
def _top_k_formal(x, k=1, axis=0, mode="max", sort="value"):
    x = np.asarray(x)
    key = -x if mode == "max" else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    if sort == "index":
        idx = np.sort(idx, axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)



@top_k_op.formal
def _top_k_def(x, k=1, axis=0, mode="max", sort="value"):
    x = np.asarray(x)
    shape = list(x.shape)
    shape[axis] = k
    values = np.empty(shape, dtype=x.dtype)
    indices = np.empty(shape, dtype=np.int64)
    rest = [d for a, d in enumerate(x.shape) if a != axis]
    for pos in np.ndindex(*rest):
        line = [x[pos[:axis] + (j,) + pos[axis:]] for j in range(x.shape[axis])]
        order = sorted(range(len(line)), key=lambda j: (-line[j] if mode == "max" else line[j], j))[:k]
        if sort == "index":
            order.sort()
        for t, j in enumerate(order):
            values[pos[:axis] + (t,) + pos[axis:]] = line[j]
            indices[pos[:axis] + (t,) + pos[axis:]] = j
    return values, indices



cumulative_sum_op = define("cumulative_sum", "ext", """
fragment cumulative_sum( x: tensor<scalar>, axis: integer, exclusive: logical = false, reverse: logical = false )
    -> ( y: tensor<scalar> );
""", domain="nnefx", doc="IR CumSum along an axis (optionally exclusive and/or from the end).")


@cumulative_sum_op.shape
def _cumsum_shape(x, axis=0, exclusive=False, reverse=False):
    if not 0 <= axis < len(x):
        raise NNEFXError(f"cumulative_sum: axis {axis} out of range")
    return tuple(x)


@cumulative_sum_op.fast
def _cumsum_formal(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    v = np.flip(x, axis) if reverse else x
    c = np.cumsum(v, axis=axis, dtype=np.float64)
    if exclusive:
        c = c - v
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype)



@cumulative_sum_op.formal
def _cumsum_def(x, axis=0, exclusive=False, reverse=False):
    x = np.asarray(x)
    out = np.empty_like(x)
    n = x.shape[axis]
    for pos in np.ndindex(*x.shape):
        j = pos[axis]
        if reverse:
            span = range(j + 1 if exclusive else j, n)
        else:
            span = range(0, j if exclusive else j + 1)
        total = 0.0
        for t in span:
            total += float(x[pos[:axis] + (t,) + pos[axis + 1:]])
        out[pos] = total
    return out



prod_reduce_op = define("prod_reduce", "ext", """
fragment prod_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""", domain="nnefx", doc="Product over axes (kept with extent 1, like the NNEF reductions).")


@prod_reduce_op.shape
def _prod_shape(x, axes=()):
    s = list(x)
    for a in axes:
        if not 0 <= a < len(s):
            raise NNEFXError(f"prod_reduce: axis {a} out of range")
        s[a] = 1
    return tuple(s)


@prod_reduce_op.fast
def _prod_formal(x, axes=()):
    x = np.asarray(x)
    return np.prod(x, axis=tuple(axes), keepdims=True, dtype=np.float64).astype(x.dtype)



@prod_reduce_op.formal
def _prod_def(x, axes=()):
    x = np.asarray(x)
    out = np.ones(_prod_shape(x.shape, axes), dtype=np.float64)
    for pos in np.ndindex(*x.shape):
        target = tuple(0 if a in axes else d for a, d in enumerate(pos))
        out[target] *= float(x[pos])
    return out.astype(x.dtype)



einsum_op = define("einsum", "ext", """
fragment einsum( inputs: tensor<scalar>[], equation: string ) -> ( output: tensor<scalar> );
""", domain="nnefx", doc="IR Einsum: sums of products over the labelled axes of an explicit equation.")

_EINSUM = re.compile(r"^[a-zA-Z.,]*->[a-zA-Z.]*$")


def _einsum_check(equation: str, n: int) -> str:
    eq = equation.replace(" ", "")
    if not _EINSUM.match(eq) or len(eq.split("->")[0].split(",")) != n:
        raise NNEFXError(f"einsum: unsupported equation '{equation}' for {n} inputs")
    return eq


@einsum_op.shape
def _einsum_shape(shapes, equation=""):
    eq = _einsum_check(equation, len(shapes))
    ins, out = eq.split("->")
    if "." in eq:
        raise NNEFXError("einsum: ellipsis equations are not supported")
    sizes: dict[str, int] = {}
    for labels, s in zip(ins.split(","), shapes, strict=False):
        if len(labels) != len(s):
            raise NNEFXError(f"einsum: '{labels}' does not match an input of rank {len(s)}")
        for lab, d in zip(labels, s, strict=True):
            if lab in sizes and d not in (sizes[lab],) and d != 1 and sizes[lab] != 1:
                raise NNEFXError(f"einsum: label '{lab}' has extents {sizes[lab]} and {d}")
            sizes[lab] = max(sizes.get(lab, 1), d)
    return tuple(sizes[lab] for lab in out)


@einsum_op.fast
def _einsum_formal(xs, equation=""):
    eq = _einsum_check(equation, len(xs))
    return np.einsum(eq, *[np.asarray(x, dtype=np.float64) for x in xs]).astype(np.asarray(xs[0]).dtype)



@einsum_op.formal
def _einsum_def(xs, equation=""):
    eq = _einsum_check(equation, len(xs))
    ins, out_labels = eq.split("->")
    specs = ins.split(",")
    arrays = [np.asarray(x, dtype=np.float64) for x in xs]
    sizes: dict[str, int] = {}
    for spec, a in zip(specs, arrays, strict=True):
        for lab, d in zip(spec, a.shape, strict=True):
            sizes[lab] = max(sizes.get(lab, 1), d)
    labels = sorted(sizes)
    out = np.zeros(tuple(sizes[lab] for lab in out_labels))
    for values in np.ndindex(*[sizes[lab] for lab in labels]):
        v = dict(zip(labels, values, strict=True))
        term = 1.0
        for spec, a in zip(specs, arrays, strict=True):
            term *= a[tuple(v[lab] if a.shape[k] != 1 else 0 for k, lab in enumerate(spec))]
        out[tuple(v[lab] for lab in out_labels)] += term
    return out.astype(np.asarray(xs[0]).dtype)



# --- NonMaxSuppression ---------------------------------------------------------------------------------

non_max_suppression_op = define("non_max_suppression", "ext", """
fragment non_max_suppression( boxes: tensor<scalar>, scores: tensor<scalar>, max_output_boxes_per_class: integer,
                 iou_threshold: scalar, score_threshold: scalar, soft_nms_sigma: scalar = 0.0,
                 box_encoding: string = 'corner', sort_result_descending: logical = true )
    -> ( selected_indices: tensor<integer>, selected_scores: tensor<scalar>, valid_outputs: tensor<integer> );
""", domain="nnefx", doc="IR NonMaxSuppression (v5/v9): per batch and class, greedy (or soft) suppression; "
                      "outputs hold only the selected rows.")


@non_max_suppression_op.shape
def _nms_shape(boxes, scores, **attrs):
    if len(boxes) != 3 or boxes[2] != 4 or len(scores) != 3 or scores[0] != boxes[0] or scores[2] != boxes[1]:
        raise NNEFXError("non_max_suppression: boxes must be [B, N, 4] and scores [B, C, N]")
    return (None, 3), (None, 3), (1,)


def _corners(b: np.ndarray, encoding: str) -> np.ndarray:
    if encoding == "center":
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], -1)
    y1 = np.minimum(b[..., 0], b[..., 2])
    y2 = np.maximum(b[..., 0], b[..., 2])
    x1 = np.minimum(b[..., 1], b[..., 3])
    x2 = np.maximum(b[..., 1], b[..., 3])
    return np.stack([y1, x1, y2, x2], -1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    if area_a <= 0 or area_b <= 0:
        return 0.0
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = ih * iw
    return float(inter / (area_a + area_b - inter))


@non_max_suppression_op.formal
def _nms_formal(boxes, scores, max_output_boxes_per_class=0, iou_threshold=0.0, score_threshold=0.0,
                soft_nms_sigma=0.0, box_encoding="corner", sort_result_descending=True):
    boxes = np.asarray(boxes, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    nb, nc, _ = scores.shape
    corners = _corners(boxes, box_encoding)
    picked: list[tuple[int, int, int, float]] = []
    scale = -0.5 / soft_nms_sigma if soft_nms_sigma > 0 else 0.0
    for b in range(nb):
        for c in range(nc):
            if max_output_boxes_per_class <= 0:
                continue
            # candidates: (score, box index), best first; equal scores keep the lower index first
            cand = [(scores[b, c, i], i) for i in range(scores.shape[2]) if scores[b, c, i] > score_threshold]
            cand.sort(key=lambda t: (-t[0], t[1]))
            chosen: list[tuple[int, float]] = []
            while cand and len(chosen) < max_output_boxes_per_class:
                s, i = cand.pop(0)
                if soft_nms_sigma > 0:
                    keep = True
                else:
                    keep = all(_iou(corners[b, i], corners[b, j]) <= iou_threshold for j, _ in chosen)
                if not keep:
                    continue
                chosen.append((i, s))
                if soft_nms_sigma > 0:  # decay the others' scores, drop those under the threshold
                    rest = []
                    for s2, i2 in cand:
                        iou = _iou(corners[b, i], corners[b, i2])
                        s2 = s2 * np.exp(scale * iou * iou)
                        if s2 > score_threshold:
                            rest.append((s2, i2))
                    rest.sort(key=lambda t: (-t[0], t[1]))
                    cand = rest
            picked.extend((b, c, i, s) for i, s in chosen)
    if sort_result_descending:
        picked.sort(key=lambda t: -t[3])  # stable: ties keep batch/class/selection order
    idx = np.array([[b, c, i] for b, c, i, _ in picked], dtype=np.int64).reshape(-1, 3)
    sel = np.array([[b, c, s] for b, c, _, s in picked], dtype=np.float32).reshape(-1, 3)
    return idx, sel, np.array([len(picked)], dtype=np.int64)


