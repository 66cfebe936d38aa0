"""The conventions the numpy-style formats share, as typed functions.

ONNX and the OpenVINO IR opsets index, broadcast and slice as numpy does; NNEF aligns
broadcasting from dimension 0 and wants ``0 <= axis < rank``.  Every reader turns the
numpy-style conventions into NNEF ones here, so the rules are written once:

* **right-aligned broadcasting** (:func:`broadcast_shapes`, :func:`aligned`): the lower-rank
  operand gets leading unit dimensions (folded into constants, ``unsqueeze`` for run-time
  tensors), after which both conventions agree (ONNX operator docs, "Broadcasting in ONNX";
  OpenVINO opset docs, "Broadcast Rules For Elementwise Operations", ``numpy``);
* **negative axes** (:func:`norm_axis`, :func:`norm_axes`): counted from the end, checked
  against the rank;
* **slice and gather index rules** (:class:`IndexPlan`, :func:`strided_plan`,
  :func:`slice_plan`, :func:`emit_index_plan`, :func:`gather_indices`): bounds clamped to
  the extent, negative starts/stops/indices counted from the end, numpy's ``slice.indices``
  (ONNX operator docs: Slice, Gather; OpenVINO opset docs: StridedSlice-1, Slice-8, Gather-8);
* **interpolation coordinate modes** (:func:`source_coordinate`, :func:`nearest_upsample_fits`,
  :func:`multilinear_method`): :data:`COORD_MODES` (``half_pixel``, ``pytorch_half_pixel``,
  ``asymmetric``, ``tf_half_pixel_for_nn``, ``align_corners``; ONNX operator docs: Resize;
  OpenVINO opset docs: Interpolate-4/11), and which of them NNEF's own ``nearest_upsample`` /
  ``multilinear_upsample`` compute exactly (NNEF spec §4.3, sliding-window operations).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from ...diagnostics import NNEFXError
from ...ops.ext import COORD_MODES, NEAREST_MODES
from ...ops.ext.resize import _source_coordinate
from .context import NodeContext
from .values import Value, dtype_of

__all__ = ["BIG", "COORD_MODES", "NEAREST_MODES", "IndexPlan", "aligned", "binary", "broadcast_shapes",
           "const_value", "emit_index_plan", "gather_indices", "multilinear_method", "nearest_upsample_fits",
           "norm_axes", "norm_axis", "slice_plan", "source_coordinate", "strided_plan", "unary"]

#: The "to the end" bound of a slice whose extent is unknown (OpenVINO's and ONNX's INT_MAX).
BIG = 2 ** 31 - 1


class Reporter(Protocol):
    """Anything that words an error at the node being read (a NodeContext, a format's reader)."""

    def error(self, message: str) -> NNEFXError: ...


# --- axes and broadcasting --------------------------------------------------------------------

def norm_axis(ctx: Reporter, axis: int, rank: int) -> int:
    """``axis`` counted from the end when negative; an error unless ``0 <= axis < rank``."""
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return a


def norm_axes(ctx: Reporter, axes: Iterable[int], rank: int) -> list[int]:
    axes = list(axes)
    out = [norm_axis(ctx, int(a), rank) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"repeated axes {list(axes)}")
    return out


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's right-aligned broadcast of known shapes (ValueError when they do not fit)."""
    return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))


def aligned(ctx: NodeContext, indices: list[int]) -> list[str]:
    """Tensors of the given inputs with equal ranks (numpy-style leading unit dims added)."""
    ranks = [ctx.in_rank(i) for i in indices]
    r = max(ranks)
    out = []
    for i, ri in zip(indices, ranks, strict=False):
        v = ctx.input(i)
        if ri == r:
            out.append(ctx.tensor(i))
        elif v.is_const:
            arr = np.asarray(v.const).reshape((1,) * (r - ri) + tuple(v.const.shape))
            out.append(ctx.tensor_of(ctx.folded(arr, v.etype), f"{ctx.name}_in{i}"))
        else:
            out.append(ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": list(range(r - ri))},
                                 dtype=dtype_of(v)))
    return out


# --- small emitting helpers ---------------------------------------------------------------------

def const_value(ctx: NodeContext, arr, etype: str) -> str:
    """The graph tensor of a load-time constant."""
    return ctx.tensor_of(ctx.folded(np.asarray(arr), etype))


def unary(ctx: NodeContext, op: str, x: str, attribs: dict | None = None) -> str:
    return ctx.emit1(op, {"x": x}, attribs)


def binary(ctx: NodeContext, op: str, x, y, out_dtype: str = "scalar") -> str:
    return ctx.emit1(op, {"x": x, "y": y}, out_dtype=out_dtype)


# --- slicing ------------------------------------------------------------------------------------

class IndexPlan:
    """A numpy-style indexing plan: items are ('slice', b, e, s), ('index', i), ('new',), ('ellipsis',)."""

    def __init__(self, items: list[tuple]):
        self.items = items

    def expand(self, rank: int) -> list[tuple]:
        used = sum(1 for it in self.items if it[0] in ("slice", "index"))
        out = []
        seen_ellipsis = False
        for it in self.items:
            if it[0] == "ellipsis":
                if seen_ellipsis:
                    raise NNEFXError("more than one ellipsis in a StridedSlice")
                seen_ellipsis = True
                out.extend([("slice", None, None, 1)] * (rank - used))
            else:
                out.append(it)
        used = sum(1 for it in out if it[0] in ("slice", "index"))
        if used > rank:
            raise NNEFXError(f"slice addresses {used} dimensions of a rank-{rank} tensor")
        out.extend([("slice", None, None, 1)] * (rank - used))
        return out

    def numpy_index(self, rank: int) -> tuple:
        idx = []
        for it in self.expand(rank):
            if it[0] == "slice":
                idx.append(slice(it[1], it[2], it[3]))
            elif it[0] == "index":
                idx.append(it[1])
            else:
                idx.append(np.newaxis)
        return tuple(idx)


def strided_plan(ctx: NodeContext, begin: list[int], end: list[int], strides: list[int], *,
                 begin_mask: list[int], end_mask: list[int], new_axis_mask: list[int],
                 shrink_axis_mask: list[int], ellipsis_mask: list[int]) -> IndexPlan:
    """The plan of a StridedSlice-1 (masks padded with zeros to ``len(begin)``)."""
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise ctx.error("begin, end and strides must have the same length")

    def pad(m: list[int]) -> list[int]:
        return (m + [0] * n)[:n] if len(m) < n else m[:n]

    bm, em, nm, sm, elm = (pad(m) for m in (begin_mask, end_mask, new_axis_mask, shrink_axis_mask, ellipsis_mask))
    items = []
    for i in range(n):
        if elm[i]:
            items.append(("ellipsis",))
        elif nm[i]:
            items.append(("new",))
        elif sm[i]:
            items.append(("index", begin[i]))
        else:
            if strides[i] == 0:
                raise ctx.error("slice stride 0")
            items.append(("slice", None if bm[i] else begin[i], None if em[i] else end[i], strides[i]))
    return IndexPlan(items)


def slice_plan(ctx: NodeContext, rank: int, start: list[int], stop: list[int], step: list[int],
               axes: list[int] | None) -> IndexPlan:
    """The plan of a Slice-8 / ONNX Slice: per axis a start, stop and non-zero step."""
    n = len(start)
    if axes is None:
        axes = list(range(n))
    axes = norm_axes(ctx, axes, rank)
    if not (len(stop) == len(step) == len(axes) == n):
        raise ctx.error("start, stop, step and axes must have the same length")
    items: list[tuple] = [("slice", None, None, 1)] * rank
    for a, b, e, s in zip(axes, start, stop, step, strict=False):
        if s == 0:
            raise ctx.error("slice step 0")
        items[a] = ("slice", b, e, s)
    return IndexPlan(items)


def emit_index_plan(ctx: NodeContext, plan: IndexPlan, value: Value, x: str) -> str:
    """Emit NNEF ``slice``/``squeeze``/``unsqueeze`` doing ``plan`` on tensor ``x`` (of ``value``).

    Bounds are clamped to known extents as numpy does; unknown extents keep the
    numpy-style bounds (negative from the end, :data:`BIG` for "to the end").
    """
    shape = value.shape
    rank = len(shape)
    try:
        items = plan.expand(rank)
    except NNEFXError as exc:
        raise ctx.error(exc.message) from None
    dt = dtype_of(value)
    axes, begins, ends, strides, squeeze, new_pos = [], [], [], [], [], []
    d = 0
    out_pos = 0
    for it in items:
        if it[0] == "new":
            new_pos.append(out_pos)
            out_pos += 1
            continue
        extent = shape[d]
        if it[0] == "index":
            i = it[1]
            if extent is not None:
                if not -extent <= i < extent:
                    raise ctx.error(f"index {i} out of range for extent {extent}")
                i = i + extent if i < 0 else i
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            elif i >= 0:
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            elif i == -1:
                axes.append(d), begins.append(-1), ends.append(BIG), strides.append(1)
            else:
                axes.append(d), begins.append(i), ends.append(i + 1), strides.append(1)
            squeeze.append(d)
            d += 1
            continue
        _, b, e, s = it
        out_pos += 1
        if b is None and e is None and s == 1:
            d += 1
            continue
        if extent is not None:
            start, stop, step = slice(b, e, s).indices(extent)
            if not len(range(start, stop, step)):  # empty: NNEF's slice [extent, extent) selects nothing
                start, stop, step = extent, extent, 1
            elif step < 0 and stop < 0:
                stop = -(extent + 1)
            axes.append(d), begins.append(start), ends.append(stop), strides.append(step)
        else:
            if s > 0:
                bb = 0 if b is None else b
                ee = BIG if e is None or e >= BIG else e
            else:
                bb = -1 if b is None else b
                ee = -BIG if e is None or e <= -BIG else e
            if (s > 0 and ee == 0) or ((bb >= 0) == (ee >= 0) and (ee <= bb if s > 0 else ee >= bb)):
                # empty whatever the extent (bounds on one side the wrong way round, or a stop at 0):
                # [extent, extent) — an end of 0 would be NNEF's "to the end"
                bb, ee, s = BIG, BIG, 1
            axes.append(d), begins.append(bb), ends.append(ee), strides.append(s)
        d += 1
    y = x
    if axes:
        attrs = {"axes": axes, "begin": begins, "end": ends}
        if any(s != 1 for s in strides):
            attrs["stride"] = strides
        y = ctx.emit1("slice", {"input": y}, attrs, dtype=dt)
    if squeeze:
        y = ctx.emit1("squeeze", {"input": y}, {"axes": squeeze}, dtype=dt)
    if new_pos:
        y = ctx.emit1("unsqueeze", {"input": y}, {"axes": new_pos}, dtype=dt)
    return y


def gather_indices(ctx: NodeContext, indices: np.ndarray, extent: int | None) -> np.ndarray:
    """Constant gather indices with negative ones counted from the end of a known extent."""
    idx = np.asarray(indices).astype(np.int64)
    if extent is not None:
        if np.any((idx < -extent) | (idx >= extent)):
            raise ctx.error(f"gather index out of range for extent {extent}")
        idx = np.where(idx < 0, idx + extent, idx)
    return idx


# --- interpolation coordinate modes ---------------------------------------------------------------

def source_coordinate(i: np.ndarray, scale: float, n_in: int, n_out: int, mode: str) -> np.ndarray:
    """The input coordinate output index ``i`` samples along one axis, by coordinate mode."""
    return _source_coordinate(i, scale, n_in, n_out, mode)


def nearest_upsample_fits(coord: str, nearest: str) -> bool:
    """Whether nearest resizing by a whole factor with these modes is NNEF's ``nearest_upsample``
    (every output reads input ``floor(i / factor)``)."""
    return (coord == "asymmetric" and nearest in ("floor", "simple")) or \
        (coord in ("half_pixel", "pytorch_half_pixel") and nearest == "round_prefer_ceil") or \
        (coord == "tf_half_pixel_for_nn" and nearest == "floor")


def multilinear_method(coord: str) -> str | None:
    """The ``multilinear_upsample`` method (border ``replicate``) computing linear resizing by a
    whole factor with coordinate mode ``coord``, or None where no method does."""
    return {"half_pixel": "symmetric", "pytorch_half_pixel": "symmetric", "align_corners": "aligned",
            "asymmetric": "asymmetric"}.get(coord)
