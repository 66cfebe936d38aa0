"""ONNX exporters of NNEF's region-of-interest operations (NNEF 1.0.5 §4.6).

nnefx's kernels (:mod:`nnefx.ops.roi`) are the definition these exporters reproduce.  ONNX
has three RoI nodes, and none of them computes NNEF's result in general:

* ``RoiAlign`` (opset 16, ``coordinate_transformation_mode = 'half_pixel'``, ``mode =
  'avg'``, ``sampling_ratio = s``) samples exactly where ``avg_roi_align`` with
  ``resize_method = 'symmetric'`` does (``y0 - 0.5 + (i + 0.5) * r / (o * s)``) and averages
  the same bilinear values, but a sample more than one pixel outside the input reads 0 in
  onnxruntime (``y < -1 or y > H``) while NNEF clamps it to the edge.  It is therefore
  written only when the RoIs are load-time data whose every sample lies inside that range
  (checked here), and only with one sampling rate for both axes (``sampling_ratio`` is one
  integer).  Its ``'max'`` mode takes, per sample, the largest of the four *weighted corner
  terms* ``w_k * v_k`` instead of the interpolated value (onnxruntime warns about it), so it
  never stands for ``max_roi_align``.  The ``'output_half_pixel'`` transform adds no
  ``-0.5`` and stretches RoIs narrower than one pixel to one: neither 'asymmetric' nor
  'aligned' matches it.
* ``MaxRoiPool`` (opset 1, Caffe's RoI pooling in onnxruntime) treats the rounded end as
  inclusive (extent ``r' = max(end - start + 1, 1)``, NNEF: ``r = end - start``, empty when
  not positive), places bin ``i`` at ``start + [floor(i * r' / p), ceil((i + 1) * r' / p))``
  instead of NNEF's ``start + i * floor(r / p)`` with size ``ceil(r / p)``, clips bins to the
  input (NNEF's cells read zeros outside it, and the zeros take part in the maximum), and
  rounds half away from zero (NNEF: ``floor(x + 0.5)``).  It is never written; NNEF has no
  inclusive-end pooling it could stand for.

So every RoI operation is written as a short composition that is exact whatever the RoIs:

* ``roi_resample``: the sampling coordinates of every RoI (NNEF's formula for the method)
  normalised for ``GridSample`` (bilinear, ``padding_mode = 'border'`` = NNEF's clamped
  indices, ``align_corners = 0``); every batch item is sampled at every RoI's grid and each
  RoI then keeps its own item (``GatherND``, ``batch_dims = 1``): B times the output's work,
  never a copy of the input per RoI.
* ``avg_roi_align`` / ``max_roi_align``: ``RoiAlign`` where exact (above), else their NNEF
  definition written directly: the resampling above to ``output_size * sampling_rate``, then
  ``AveragePool`` / ``MaxPool`` with window = stride = sampling rate and no padding (the
  resampled extent is a multiple of the window, so NNEF's automatic padding is none).
  Written directly rather than through the generic definition fallback, so the batch size
  and the number of RoIs may stay unknown (symbolic dims).
* ``avg_roi_pool`` / ``max_roi_pool``: NNEF's integer cell bounds computed in int64 from
  the RoIs rounded in double precision (``floor(x + 0.5)`` of a float32 is exact there, not
  in float32), turned into per-axis cell masks; the average is two batched ``MatMul``\\ s
  with the masks divided by the full cell area (outside zeros count), the maximum a masked
  ``ReduceMax`` per axis (memory: RoIs x channels x H x W x output width), raised to 0
  where a cell reaches outside the input; empty RoIs give 0.

One and two spatial dimensions are written (a 1-D RoI is a 2-D one over a unit height);
``GridSample`` of opset 18 is 2-D only, so three or more are refused, as are inputs whose
spatial extents are not static.  Results agree with nnefx for finite inputs (the RoI kernels
refuse non-finite RoIs and out-of-range batch indices; ONNX leaves those undefined).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from .export_ops import F32, I64, _elem, _static, binop, exporter, out, scalar, unop
from .writer import ExportContext

F64 = np.dtype(np.float64)


def _layout(ctx: ExportContext, op: Operation) -> tuple[str, int, tuple[int, ...], str, str]:
    """(input as a 4-D value, M, static spatial extents of it, rois, batch index as (N,))."""
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    m = len(xd) - 2
    if m not in (1, 2):
        raise ctx.fail(f"RoIs over {m} spatial dimensions are not written: nnefx writes RoIs over 1 or 2 "
                       "(ONNX GridSample, which resampling needs, is 2-D only at opset 18)")
    extents = _static(ctx, xd[2:])
    if m == 1:   # a 1-D RoI is a 2-D one over a unit height
        x = ctx.node("Unsqueeze", [x, ctx.ints([2])], xd[:2] + (1,) + xd[2:])
        extents = (1,) + extents
    rois = ctx.ref(op.inputs["rois"])
    return x, m, extents, rois, _batch_index(ctx, op, ctx.dims(rois)[0])


def _batch_index(ctx: ExportContext, op: Operation, n: int | None) -> str:
    """The batch index as an int64 (N,) value (NNEF allows (N,) and (N, 1))."""
    index = ctx.ref(op.inputs["batch_index"], I64)
    if ctx.rank(index) != 1:
        index = ctx.node("Reshape", [index, ctx.ints([-1])], (n,))
    if ctx.dtype(index) != I64:
        index = ctx.node("Cast", [index], (n,), dtype=I64, to=_elem(I64))
    return index


def _columns(ctx: ExportContext, rois: str, m: int, dtype: Any) -> list[tuple[Any, Any]]:
    """(start, end) of each of the 2 spatial axes as (N, 1) values (or constants for the unit
    axis of a 1-D RoI), in ``dtype``."""
    n = ctx.dims(rois)[0]
    src = rois if ctx.dtype(rois) == dtype else ctx.node("Cast", [rois], ctx.dims(rois), dtype=dtype,
                                                         to=_elem(dtype))

    def col(k: int) -> str:
        return ctx.node("Gather", [src, ctx.ints([k])], (n, 1), axis=1)

    axes = [(col(k), col(m + k)) for k in range(m)]
    if m == 1:
        axes.insert(0, (np.zeros((1, 1), dtype), np.ones((1, 1), dtype)))
    return axes


def _const(ctx: ExportContext, value: Any, dtype: Any) -> Any:
    return value if isinstance(value, str) else ctx.const(np.asarray(value, dtype))


def _pick_items(ctx: ExportContext, per_item: str, index: str, shape: tuple) -> str:
    """``per_item[n, index[n]]`` for a value of shape (N, B, ...): each RoI's own batch item."""
    n = ctx.dims(index)[0]
    idx = ctx.node("Unsqueeze", [index, ctx.ints([1])], (n, 1))
    return ctx.node("GatherND", [per_item, idx], shape, batch_dims=1)


def _output(ctx: ExportContext, op: Operation, y: str, m: int) -> None:
    if m == 1:   # drop the unit height again
        y = ctx.node("Squeeze", [y, ctx.ints([2])], ctx.dims(out(op)))
    ctx.bind(out(op), y)


# --- roi_resample ------------------------------------------------------------------------------

def _taps(o: int, method: str) -> tuple[np.ndarray, float, float]:
    """(t, d, e) with NNEF's sampling coordinates ``start + t[i] * (end - start - d) + e``
    (:func:`nnefx.ops.roi.resample_taps`)."""
    i = np.arange(o, dtype=np.float64)
    if method == "symmetric":
        return (i + 0.5) / o, 0.0, -0.5
    if method == "asymmetric":
        return i / o, 0.0, 0.0
    return (i / (o - 1) if o > 1 else np.zeros(1)), 1.0, 0.0


def resample(ctx: ExportContext, op: Operation, size: list[int], method: str) -> tuple[str, int]:
    """The RoIs of ``op``'s input resampled to ``size`` by ``method``, as a 4-D value (a 1-D
    RoI over a unit height), and the number M of the RoIs' spatial dimensions."""
    from ...ops.resize import UPSAMPLE_METHODS

    if method not in UPSAMPLE_METHODS:
        raise ctx.fail(f"method '{method}' is not one of {', '.join(UPSAMPLE_METHODS)}")
    x, m, extents, rois, index = _layout(ctx, op)
    size = [1] * (2 - m) + [int(s) for s in size]
    n = ctx.dims(rois)[0]
    b, c = ctx.dims(x)[:2]
    grids = []
    for k, (start, end) in enumerate(_columns(ctx, rois, m, F32)):
        if m == 1 and k == 0:   # the unit height: every tap at pixel 0
            grids.append(ctx.const(np.zeros((1, 1), np.float32)))
            continue
        t, d, e = _taps(size[k], method)
        width = binop(ctx, "Sub", end, start)
        if d:
            width = binop(ctx, "Sub", width, scalar(ctx, d))
        coord = binop(ctx, "Add", start, binop(ctx, "Mul", width, ctx.const(t.reshape(1, -1).astype(np.float32))))
        # GridSample (align_corners = 0) reads pixel p at ((2 p + 1) / X - 1): NNEF's tap e folded in
        extent = float(extents[k])
        coord = binop(ctx, "Mul", coord, scalar(ctx, 2.0 / extent))
        grids.append(binop(ctx, "Add", coord, scalar(ctx, (2.0 * e + 1.0) / extent - 1.0)))
    oh, ow = size
    gy = ctx.node("Unsqueeze", [grids[0], ctx.ints([2, 3])], ctx.dims(grids[0]) + (1, 1))
    gx = ctx.node("Unsqueeze", [grids[1], ctx.ints([1, 3])], ctx.dims(grids[1])[:1] + (1,) + ctx.dims(grids[1])[1:]
                  + (1,))
    # grid[..., 0] = x, grid[..., 1] = y: exact (x * 1 + 0, 0 + y * 1) for finite coordinates
    grid = binop(ctx, "Add", binop(ctx, "Mul", gx, ctx.const(np.asarray([1, 0], np.float32))),
                 binop(ctx, "Mul", gy, ctx.const(np.asarray([0, 1], np.float32))))
    grid = ctx.node("Reshape", [grid, ctx.ints([1, -1, ow, 2])], (1, None if n is None else n * oh, ow, 2))
    batch = ctx.node("Shape", [x], (1,), dtype=I64, start=0, end=1)
    shape = ctx.node("Concat", [batch, ctx.ints([1, 1, 1])], (4,), axis=0)
    grid = ctx.node("Expand", [grid, shape], (b,) + ctx.dims(grid)[1:])
    y = ctx.node("GridSample", [x, grid], (b, c) + ctx.dims(grid)[1:3], mode="bilinear",
                 padding_mode="border", align_corners=0)
    y = ctx.node("Reshape", [y, ctx.ints([0, 0, -1, oh, ow])], (b, c, n, oh, ow))
    y = ctx.node("Transpose", [y], (n, b, c, oh, ow), perm=[2, 0, 1, 3, 4])
    return _pick_items(ctx, y, index, (n, c, oh, ow)), m


@exporter("roi_resample")
def _roi_resample(ctx: ExportContext, op: Operation) -> None:
    y, m = resample(ctx, op, [int(s) for s in op.attribs["output_size"]], str(op.attribs.get("method", "symmetric")))
    _output(ctx, op, y, m)


# --- avg_roi_align as RoiAlign -------------------------------------------------------------------

def _roi_align_exact(ctx: ExportContext, op: Operation) -> str | None:
    """Why ``op`` cannot be one RoiAlign node, or None when it can (see the module text)."""
    from ...ops.roi import resample_taps

    if str(op.attribs.get("resize_method", "symmetric")) != "symmetric":
        return "only resize_method 'symmetric' is RoiAlign's 'half_pixel' sampling"
    rate = [int(s) for s in op.attribs["sampling_rate"]]
    if len(rate) != 2 or rate[0] != rate[1]:
        return f"RoiAlign has one sampling_ratio for both axes, not {rate}"
    boxes = ctx.data(op.inputs["rois"])
    if boxes is None:
        return "the RoIs are computed at run time, and RoiAlign reads 0 (not the edge) beyond one pixel outside"
    xd = ctx.dims(op.inputs["input"])
    if any(d is None for d in xd[2:]):
        return "the input's spatial extents are not static"
    size = [int(o) * s for o, s in zip(op.attribs["output_size"], rate, strict=True)]
    margin = 1e-3   # onnxruntime computes the taps in float32
    for row in np.asarray(boxes, np.float64).reshape(-1, 4):
        for k in range(2):
            taps = resample_taps(float(row[k]), float(row[2 + k]), size[k], "symmetric")
            if taps and (min(taps) < -1 + margin or max(taps) > xd[2 + k] - margin):
                return "a RoI samples beyond one pixel outside the input, where RoiAlign reads 0 (NNEF: the edge)"
    return None


def _roi_align_node(ctx: ExportContext, op: Operation) -> None:
    boxes = np.asarray(ctx.data(op.inputs["rois"]), np.float32).reshape(-1, 4)
    x, index = ctx.ref(op.inputs["input"]), _batch_index(ctx, op, boxes.shape[0])
    xyxy = ctx.const(boxes[:, [1, 0, 3, 2]])   # NNEF rows (y0, x0, y1, x1) -> ONNX (x1, y1, x2, y2)
    oh, ow = (int(o) for o in op.attribs["output_size"])
    ctx.bind(out(op), ctx.node("RoiAlign", [x, xyxy, index], ctx.dims(out(op)), mode="avg", output_height=oh,
                               output_width=ow, sampling_ratio=int(op.attribs["sampling_rate"][0]),
                               spatial_scale=1.0, coordinate_transformation_mode="half_pixel"))


@exporter("avg_roi_align", "max_roi_align")
def _roi_align(ctx: ExportContext, op: Operation) -> None:
    # one RoiAlign node where exact, else NNEF's definition: roi_resample to output_size *
    # sampling_rate, then a pool with window = stride = sampling_rate (no padding: the
    # resampled extent is a multiple of the window), written directly (any batch / RoI count)
    if op.op == "avg_roi_align" and ctx.rank(op.inputs["input"]) == 4 and _roi_align_exact(ctx, op) is None:
        _roi_align_node(ctx, op)
        return
    rate = [int(s) for s in op.attribs["sampling_rate"]]
    size = [int(o) * s for o, s in zip(op.attribs["output_size"], rate, strict=True)]
    y, m = resample(ctx, op, size, str(op.attribs.get("resize_method", "symmetric")))
    window = [1] * (2 - m) + rate
    dims = ctx.dims(y)[:2] + tuple(d // w for d, w in zip(ctx.dims(y)[2:], window, strict=True))
    pool = "AveragePool" if op.op == "avg_roi_align" else "MaxPool"
    _output(ctx, op, ctx.node(pool, [y], dims, kernel_shape=window, strides=window), m)


# --- avg_roi_pool / max_roi_pool -----------------------------------------------------------------

def _rounded(ctx: ExportContext, v: Any) -> Any:
    """NNEF's round, floor(v + 0.5), of float64 RoI coordinates as int64 (constants pass)."""
    if not isinstance(v, str):
        return np.floor(np.asarray(v) + 0.5).astype(np.int64)
    r = unop(ctx, "Floor", binop(ctx, "Add", v, ctx.const(np.asarray(0.5, F64))))
    return ctx.node("Cast", [r], ctx.dims(r), dtype=I64, to=_elem(I64))


def _cells(ctx: ExportContext, start: Any, end: Any, p: int, extent: int) -> tuple[str, str, str, str]:
    """Masks (N, p, X) of NNEF's cells over one axis, whether each cell reaches outside the
    input (N, p), the cell size (N, 1) and whether the RoI is non-empty (N, 1)."""
    start, end = _const(ctx, start, I64), _const(ctx, end, I64)
    r = binop(ctx, "Sub", end, start)
    stride = binop(ctx, "Div", r, ctx.const(np.asarray(p, np.int64)))                    # r > 0: floor
    size = binop(ctx, "Div", binop(ctx, "Add", r, ctx.const(np.asarray(p - 1, np.int64))),
                 ctx.const(np.asarray(p, np.int64)))                                   # r > 0: ceil
    lo = binop(ctx, "Add", start, binop(ctx, "Mul", stride, ctx.const(np.arange(p, dtype=np.int64).reshape(1, p))))
    hi = binop(ctx, "Add", lo, size)
    pos = ctx.const(np.arange(extent, dtype=np.int64).reshape(1, 1, extent))
    lo3 = ctx.node("Unsqueeze", [lo, ctx.ints([2])], ctx.dims(lo) + (1,))
    hi3 = ctx.node("Unsqueeze", [hi, ctx.ints([2])], ctx.dims(hi) + (1,))
    mask = binop(ctx, "And", binop(ctx, "GreaterOrEqual", pos, lo3), binop(ctx, "Less", pos, hi3))
    outside = binop(ctx, "Or", binop(ctx, "Less", lo, ctx.const(np.asarray(0, np.int64))),
                    binop(ctx, "Greater", hi, ctx.const(np.asarray(extent, np.int64))))
    nonempty = binop(ctx, "Greater", r, ctx.const(np.asarray(0, np.int64)))
    return mask, outside, size, nonempty


def _as_float(ctx: ExportContext, v: str) -> str:
    return ctx.node("Cast", [v], ctx.dims(v), dtype=F32, to=_elem(F32))


@exporter("avg_roi_pool", "max_roi_pool")
def _roi_pool(ctx: ExportContext, op: Operation) -> None:
    x, m, extents, rois, index = _layout(ctx, op)
    sizes = [1] * (2 - m) + [int(s) for s in op.attribs["output_size"]]
    n = ctx.dims(rois)[0]
    b, c = ctx.dims(x)[:2]
    (ph, pw), (h, w) = sizes, extents
    axes = [_cells(ctx, _rounded(ctx, s), _rounded(ctx, e), sizes[k], extents[k])
            for k, (s, e) in enumerate(_columns(ctx, rois, m, F64))]
    (my, oy, cy, vy), (mx, ox, cx, vx) = axes
    valid = ctx.node("Unsqueeze", [binop(ctx, "And", vy, vx), ctx.ints([2, 3])], (n, 1, 1, 1))
    zero = scalar(ctx, 0.0)
    if op.op == "avg_roi_pool":
        # cell sums: (1, B, C, H, W) @ (N, 1, 1, W, pw), each RoI's own item, (N, 1, ph, H) @ that
        mxt = ctx.node("Transpose", [_as_float(ctx, mx)], (n, w, pw), perm=[0, 2, 1])
        mxt = ctx.node("Unsqueeze", [mxt, ctx.ints([1, 2])], (n, 1, 1, w, pw))
        x5 = ctx.node("Unsqueeze", [x, ctx.ints([0])], (1, b, c, h, w))
        rows = _pick_items(ctx, ctx.node("MatMul", [x5, mxt], (n, b, c, h, pw)), index, (n, c, h, pw))
        my4 = ctx.node("Unsqueeze", [_as_float(ctx, my), ctx.ints([1])], (n, 1, ph, h))
        total = ctx.node("MatMul", [my4, rows], (n, c, ph, pw))
        # divided by the whole cell area: the zeros outside the input count (empty RoIs: 0 below)
        area = binop(ctx, "Max", binop(ctx, "Mul", cy, cx), ctx.const(np.asarray(1, np.int64)))
        area = ctx.node("Unsqueeze", [_as_float(ctx, area), ctx.ints([2, 3])], (n, 1, 1, 1))
        y = binop(ctx, "Div", total, area)
    else:
        # masked maxima over each RoI's own batch item, one axis at a time
        lowest = scalar(ctx, -np.inf)
        items = ctx.node("Gather", [x, index], (n, c, h, w), axis=0)
        items = ctx.node("Unsqueeze", [items, ctx.ints([3])], (n, c, h, 1, w))
        mx5 = ctx.node("Unsqueeze", [mx, ctx.ints([1, 2])], (n, 1, 1, pw, w))
        cols = ctx.node("Where", [mx5, items, lowest], (n, c, h, pw, w), dtype=F32)
        cols = ctx.node("ReduceMax", [cols, ctx.ints([4])], (n, c, h, pw), keepdims=0)
        cols = ctx.node("Unsqueeze", [cols, ctx.ints([2])], (n, c, 1, h, pw))
        my5 = ctx.node("Unsqueeze", [my, ctx.ints([1, 4])], (n, 1, ph, h, 1))
        y = ctx.node("Where", [my5, cols, lowest], (n, c, ph, h, pw), dtype=F32)
        y = ctx.node("ReduceMax", [y, ctx.ints([3])], (n, c, ph, pw), keepdims=0)
        # cells reaching outside the input also read zeros, which take part in the maximum
        oy4 = ctx.node("Unsqueeze", [oy, ctx.ints([1, 3])], (n, 1, ph, 1))
        ox4 = ctx.node("Unsqueeze", [ox, ctx.ints([1, 2])], (n, 1, 1, pw))
        y = ctx.node("Where", [binop(ctx, "Or", oy4, ox4), binop(ctx, "Max", y, zero), y], (n, c, ph, pw), dtype=F32)
    _output(ctx, op, ctx.node("Where", [valid, y, zero], (n, c, ph, pw), dtype=F32), m)

