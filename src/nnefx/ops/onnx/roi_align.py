"""ONNX RoiAlign (opset 16) as one operation.  NNEF's ``avg_roi_align``/``max_roi_align`` read
the edge value beyond the input and take the maximum of interpolated values, where ONNX reads 0
more than one pixel outside and, in ``max`` mode, keeps the largest *weighted corner* of each
sample; so ONNX's definition gets its own operation.

The definition (ONNX operator docs and the reference runtime's reading of them).  For RoI ``r``
= ``(x1, y1, x2, y2)`` of batch item ``batch_indices[r]``, scaled by ``spatial_scale`` and
shifted by -0.5 with ``half_pixel`` (else at least 1 pixel wide and high), each of the
``output_height x output_width`` bins takes a ``gh x gw`` grid of samples (``sampling_ratio``,
or ``ceil(roi extent / output extent)`` when it is 0) at the centres of the grid cells.  A
sample at ``(y, x)`` with ``y < -1``, ``y > H``, ``x < -1`` or ``x > W`` reads 0; otherwise the
coordinates are clamped to ``>= 0``, the low corner is ``floor``, and a low corner at the last
row/column collapses the high one onto it.  The four corners' bilinear weights ``w1..w4`` give
``avg``: the mean over the samples of ``sum w_i v_i``; ``max``: the maximum over the samples of
``max w_i v_i``.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_roi_align"

onnx_roi_align = define("onnx_roi_align", FAMILY, """
fragment onnx_roi_align(
    input: tensor<scalar>,
    rois: tensor<scalar>,
    batch_indices: tensor<integer>,
    mode: string = 'avg',
    output_height: integer = 1,
    output_width: integer = 1,
    sampling_ratio: integer = 0,
    spatial_scale: scalar = 1.0,
    half_pixel: logical = true )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX RoiAlign: bilinear samples averaged (or the largest weighted corner) per bin of "
                        "each RoI; 0 more than a pixel outside the input.")


@onnx_roi_align.shape
def _roi_align_shape(x, rois, batch_indices, mode="avg", output_height=1, output_width=1, sampling_ratio=0,
                     spatial_scale=1.0, half_pixel=True):
    name = "onnx_roi_align"
    if mode not in ("avg", "max"):
        raise attr_error(name, "mode", mode, "must be 'avg' or 'max'")
    if output_height < 1 or output_width < 1 or sampling_ratio < 0:
        raise op_error(name, "output_height and output_width must be >= 1 and sampling_ratio >= 0")
    if len(x) != 4 or len(rois) != 2 or rois[1] not in (None, 4) or len(batch_indices) != 1:
        raise op_error(name, f"input [N, C, H, W], rois [R, 4] and batch_indices [R] expected, got {list(x)}, "
                             f"{list(rois)}, {list(batch_indices)}")
    if None not in (rois[0], batch_indices[0]) and rois[0] != batch_indices[0]:
        raise op_error(name, f"{rois[0]} RoIs but {batch_indices[0]} batch indices")
    return (rois[0], x[1], output_height, output_width)


def _roi_geometry(roi, scale, half_pixel, oh, ow, ratio):
    """(start y, start x, bin height, bin width, grid rows, grid columns) of one RoI."""
    shift = 0.5 if half_pixel else 0.0
    x1, y1, x2, y2 = (float(v) * scale - shift for v in roi)
    height, width = y2 - y1, x2 - x1
    if not half_pixel:
        height, width = max(height, 1.0), max(width, 1.0)
    gh = ratio if ratio > 0 else int(math.ceil(height / oh))
    gw = ratio if ratio > 0 else int(math.ceil(width / ow))
    return y1, x1, height / oh, width / ow, gh, gw


def _corners(v: float, extent: int):
    """(low, high, fraction) of a clamped coordinate inside [-1, extent]."""
    v = max(v, 0.0)
    low = int(v)
    if low >= extent - 1:
        return extent - 1, extent - 1, 0.0
    return low, low + 1, v - low


def _check_batch(b: int, n: int) -> None:
    if not 0 <= b < n:
        raise op_error("onnx_roi_align", f"batch index {b} is outside [0, {n})")


@onnx_roi_align.formal
def _roi_align_formal(x, rois, batch_indices, mode="avg", output_height=1, output_width=1, sampling_ratio=0,
                      spatial_scale=1.0, half_pixel=True):
    x, rois, idx = np.asarray(x), np.asarray(rois), np.asarray(batch_indices)
    _roi_align_shape(x.shape, rois.shape, idx.shape, mode, output_height, output_width, sampling_ratio,
                     spatial_scale, half_pixel)
    n, c_n, h_n, w_n = x.shape
    out = np.zeros((rois.shape[0], c_n, output_height, output_width))
    for r in range(rois.shape[0]):
        b = int(idx[r])
        _check_batch(b, n)
        y0, x0, bh, bw, gh, gw = _roi_geometry(rois[r], spatial_scale, half_pixel, output_height, output_width,
                                               sampling_ratio)
        for c in range(c_n):
            plane = x[b, c].astype(np.float64)
            for ph in range(output_height):
                for pw in range(output_width):
                    values = []
                    for iy in range(gh):
                        y = y0 + ph * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            xx = x0 + pw * bw + (ix + 0.5) * bw / gw
                            if y < -1.0 or y > h_n or xx < -1.0 or xx > w_n:
                                terms = [0.0, 0.0, 0.0, 0.0]
                            else:
                                ylo, yhi, ly = _corners(y, h_n)
                                xlo, xhi, lx = _corners(xx, w_n)
                                terms = [(1 - ly) * (1 - lx) * plane[ylo, xlo], (1 - ly) * lx * plane[ylo, xhi],
                                         ly * (1 - lx) * plane[yhi, xlo], ly * lx * plane[yhi, xhi]]
                            values.append(sum(terms) if mode == "avg" else max(terms))
                    if mode == "avg":
                        out[r, c, ph, pw] = sum(values) / max(gh * gw, 1)
                    else:
                        out[r, c, ph, pw] = max(values) if values else 0.0
    return out.astype(x.dtype)


def _axis_taps(start, bin_size, grid, bins, extent):
    """Per sample along one axis: low and high index, fraction, and whether it lies inside."""
    pos = start + np.arange(bins)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / grid
    pos = pos.reshape(-1)
    inside = (pos >= -1.0) & (pos <= extent)
    v = np.maximum(pos, 0.0)
    low = np.floor(v).astype(np.int64)
    edge = low >= extent - 1
    low = np.where(edge, extent - 1, low)
    high = np.where(edge, extent - 1, low + 1)
    frac = np.where(edge, 0.0, v - low)
    return low, high, frac, inside


@onnx_roi_align.fast
def _roi_align_fast(x, rois, batch_indices, mode="avg", output_height=1, output_width=1, sampling_ratio=0,
                    spatial_scale=1.0, half_pixel=True):
    # per RoI, every channel and sample at once
    x, rois, idx = np.asarray(x), np.asarray(rois), np.asarray(batch_indices)
    _roi_align_shape(x.shape, rois.shape, idx.shape, mode, output_height, output_width, sampling_ratio,
                     spatial_scale, half_pixel)
    n, c_n, h_n, w_n = x.shape
    out = np.zeros((rois.shape[0], c_n, output_height, output_width), np.float64)
    for r in range(rois.shape[0]):
        b = int(idx[r])
        _check_batch(b, n)
        y0, x0, bh, bw, gh, gw = _roi_geometry(rois[r], spatial_scale, half_pixel, output_height, output_width,
                                               sampling_ratio)
        if gh == 0 or gw == 0:
            continue
        ylo, yhi, ly, yin = _axis_taps(y0, bh, gh, output_height, h_n)
        xlo, xhi, lx, xin = _axis_taps(x0, bw, gw, output_width, w_n)
        plane = x[b].astype(np.float64)
        ly, lx = ly[:, None], lx[None, :]
        terms = np.stack([(1 - ly) * (1 - lx) * plane[:, ylo][:, :, xlo], (1 - ly) * lx * plane[:, ylo][:, :, xhi],
                          ly * (1 - lx) * plane[:, yhi][:, :, xlo], ly * lx * plane[:, yhi][:, :, xhi]])
        terms = np.where((yin[:, None] & xin[None, :])[None, None], terms, 0.0)
        grid = (terms.sum(axis=0) if mode == "avg" else terms.max(axis=0)).reshape(
            c_n, output_height, gh, output_width, gw)
        out[r] = grid.mean(axis=(2, 4)) if mode == "avg" else grid.max(axis=(2, 4))
    return out.astype(x.dtype)
