"""Small helpers shared by the IR extension families (not operations themselves)."""

from __future__ import annotations

import math

import numpy as np

from ...diagnostics import NNEFXError
from .._common import float_type


def f32(x: object) -> np.ndarray:
    """``x`` as an array of the working float type (float32; float64 in a float64 operation)."""
    return np.asarray(x, dtype=float_type())


def require(cond: bool, op: str, message: str) -> None:
    """Raise an :class:`NNEFXError` naming ``op`` unless ``cond`` holds."""
    if not cond:
        raise NNEFXError(f"{op}: {message}")


def round_half_away(x: float) -> float:
    """C ``round``: halves go away from zero (the rounding IR layers' definitions use)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def np_round_half_away(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, np.floor(x + 0.5), -np.floor(-x + 0.5))


def iou(a: tuple, b: tuple, offset: float) -> float:
    """Intersection over union of two (x1, y1, x2, y2) boxes; ``offset`` 1 for pixel boxes."""
    ix1, iy1 = max(a[0], b[0]), max(a[1], b[1])
    ix2, iy2 = min(a[2], b[2]), min(a[3], b[3])
    iw, ih = ix2 - ix1 + offset, iy2 - iy1 + offset
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    area_a = (a[2] - a[0] + offset) * (a[3] - a[1] + offset)
    area_b = (b[2] - b[0] + offset) * (b[3] - b[1] + offset)
    union = area_a + area_b - inter
    return float(inter / union) if union > 0 else 0.0


def nms_formal(boxes: list, order: list[int], threshold: float, offset: float, limit: int = -1) -> list[int]:
    """Greedy NMS: walk ``order`` (best first), keep a box unless it overlaps a kept one by
    more than ``threshold``; stop after ``limit`` kept boxes (``-1``: no limit)."""
    kept: list[int] = []
    for i in order:
        if 0 <= limit <= len(kept):
            break
        if all(iou(boxes[i], boxes[k], offset) <= threshold for k in kept):
            kept.append(i)
    return kept


def nms_fast(boxes: np.ndarray, order: np.ndarray, threshold: float, offset: float, limit: int = -1) -> np.ndarray:
    """Vectorised greedy NMS with the same result as :func:`nms_formal`."""
    boxes = np.asarray(boxes, dtype=np.float64)
    order = np.asarray(order, dtype=np.int64)
    if order.size == 0:
        return order
    b = boxes[order]
    areas = (b[:, 2] - b[:, 0] + offset) * (b[:, 3] - b[:, 1] + offset)
    alive = np.ones(len(order), dtype=bool)
    kept: list[int] = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        if 0 <= limit <= len(kept):
            break
        kept.append(i)
        rest = np.nonzero(alive[i + 1:])[0] + i + 1
        if rest.size == 0:
            continue
        iw = np.minimum(b[i, 2], b[rest, 2]) - np.maximum(b[i, 0], b[rest, 0]) + offset
        ih = np.minimum(b[i, 3], b[rest, 3]) - np.maximum(b[i, 1], b[rest, 1]) + offset
        inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)
        union = areas[i] + areas[rest] - inter
        ov = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
        alive[rest[ov > threshold]] = False
    return order[np.asarray(kept, dtype=np.int64)]
