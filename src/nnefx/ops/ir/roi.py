"""Region-of-interest pooling layers of the IR catalog: ROIPooling (max and bilinear) and
PSROIPooling (position-sensitive, average and bilinear).

NNEF's RoI operations take rois as [R, 4] plus a separate batch index and leave the pixel
convention open, so these layers keep their exact (Caffe-derived) arithmetic as extensions.
RoIs are rows [batch_id, x1, y1, x2, y2].
"""

from __future__ import annotations

import math

import numpy as np

from .._common import float_type
from ..registry import define
from ._common import np_round_half_away, require, round_half_away

roi_pooling = define(
    "ir_roi_pooling", "ir.roi", """
fragment ir_roi_pooling( input: tensor<scalar>, rois: tensor<scalar>, pooled_h: integer,
    pooled_w: integer, spatial_scale: scalar = 1.0, method: string = 'max' )
    -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="RoI pooling to a fixed pooled_h x pooled_w grid: 'max' over integer bins of the scaled, "
        "rounded RoI; 'bilinear' samples normalised RoIs at the bin grid points. A RoI with batch "
        "index -1 ends the list: it and all later RoIs give zeros.")


def _check_rois(op, input, rois, ph, pw):
    require(ph > 0 and pw > 0, op, f"pooled sizes must be > 0, got {ph} x {pw}")
    require(len(input) == 4, op, f"input must be 4-D, got rank {len(input)}")
    require(len(rois) == 2 and rois[1] in (None, 5), op, "rois must be [R, 5] rows [batch, x1, y1, x2, y2]")


@roi_pooling.shape
def _roi_shape(input, rois, *, pooled_h, pooled_w, spatial_scale=1.0, method="max"):
    _check_rois("ir_roi_pooling", input, rois, pooled_h, pooled_w)
    require(method in ("max", "bilinear"), "ir_roi_pooling", f"'method' must be 'max' or 'bilinear', got '{method}'")
    return ((rois[0], input[1], pooled_h, pooled_w),)


def _batch(rois, r, n):
    b = int(rois[r, 0])
    require(0 <= b < n, "ir_roi_pooling", f"roi {r} names batch {b}, outside [0, {n})")
    return b


def active_rois(rois) -> int:
    """How many leading RoIs are real: a batch index of -1 ends the list (Proposal and
    DetectionOutput write it after their last box); that RoI and all after it pool to 0."""
    ends = np.nonzero(np.asarray(rois[:, 0]) == -1)[0]
    return int(ends[0]) if ends.size else rois.shape[0]


def _bilinear_point(img, y, x):
    """Bilinear read of ``img[..., y, x]`` (channels first), y/x inside the image."""
    H, W = img.shape[-2], img.shape[-1]
    y0, x0 = int(math.floor(y)), int(math.floor(x))
    y1, x1 = min(int(math.ceil(y)), H - 1), min(int(math.ceil(x)), W - 1)
    dy, dx = y - y0, x - x0
    top = img[..., y0, x0] + (img[..., y0, x1] - img[..., y0, x0]) * dx
    bottom = img[..., y1, x0] + (img[..., y1, x1] - img[..., y1, x0]) * dx
    return top + (bottom - top) * dy


def _bilinear_coord(ph, pooled, start, end, extent):
    if pooled > 1:
        return ph * (end - start) * (extent - 1) / (pooled - 1) + start * (extent - 1)
    return 0.5 * (start + end) * (extent - 1)


@roi_pooling.formal
def _roi_formal(input, rois, *, pooled_h, pooled_w, spatial_scale=1.0, method="max"):
    _roi_shape(input.shape, rois.shape, pooled_h=pooled_h, pooled_w=pooled_w, method=method)
    N, C, H, W = input.shape
    out = np.zeros((rois.shape[0], C, pooled_h, pooled_w), dtype=float_type())
    for r in range(active_rois(rois)):
        b = _batch(rois, r, N)
        x1, y1, x2, y2 = (float(v) for v in rois[r, 1:5])
        if method == "bilinear":
            for ph in range(pooled_h):
                for pw in range(pooled_w):
                    y = _bilinear_coord(ph, pooled_h, y1, y2, H)
                    x = _bilinear_coord(pw, pooled_w, x1, x2, W)
                    if 0 <= y <= H - 1 and 0 <= x <= W - 1:
                        for c in range(C):
                            out[r, c, ph, pw] = _bilinear_point(input[b, c].astype(np.float64), y, x)
            continue
        sx, sy = round_half_away(x1 * spatial_scale), round_half_away(y1 * spatial_scale)
        ex, ey = round_half_away(x2 * spatial_scale), round_half_away(y2 * spatial_scale)
        roi_w, roi_h = max(ex - sx + 1, 1), max(ey - sy + 1, 1)
        bin_w, bin_h = roi_w / pooled_w, roi_h / pooled_h
        for c in range(C):
            for ph in range(pooled_h):
                for pw in range(pooled_w):
                    hs = min(max(math.floor(ph * bin_h) + sy, 0), H)
                    he = min(max(math.ceil((ph + 1) * bin_h) + sy, 0), H)
                    ws = min(max(math.floor(pw * bin_w) + sx, 0), W)
                    we = min(max(math.ceil((pw + 1) * bin_w) + sx, 0), W)
                    best = None
                    for h in range(int(hs), int(he)):
                        for w in range(int(ws), int(we)):
                            v = float(input[b, c, h, w])
                            best = v if best is None or v > best else best
                    out[r, c, ph, pw] = 0.0 if best is None else best
    return out


@roi_pooling.fast
def _roi_fast(input, rois, *, pooled_h, pooled_w, spatial_scale=1.0, method="max"):
    _roi_shape(input.shape, rois.shape, pooled_h=pooled_h, pooled_w=pooled_w, method=method)
    N, C, H, W = input.shape
    R = rois.shape[0]
    out = np.zeros((R, C, pooled_h, pooled_w), dtype=float_type())
    if R == 0:
        return out
    R = active_rois(rois)
    for r in range(R):
        _batch(rois, r, N)
    if method == "bilinear":
        for r in range(R):
            b = int(rois[r, 0])
            x1, y1, x2, y2 = (float(v) for v in rois[r, 1:5])
            ys = np.array([_bilinear_coord(p, pooled_h, y1, y2, H) for p in range(pooled_h)])
            xs = np.array([_bilinear_coord(p, pooled_w, x1, x2, W) for p in range(pooled_w)])
            img = input[b].astype(np.float64)
            yy, xx = np.meshgrid(ys, xs, indexing="ij")
            ok = (yy >= 0) & (yy <= H - 1) & (xx >= 0) & (xx <= W - 1)
            y0 = np.floor(np.clip(yy, 0, H - 1)).astype(int)
            x0 = np.floor(np.clip(xx, 0, W - 1)).astype(int)
            y1i = np.minimum(np.ceil(np.clip(yy, 0, H - 1)).astype(int), H - 1)
            x1i = np.minimum(np.ceil(np.clip(xx, 0, W - 1)).astype(int), W - 1)
            dy, dx = yy - y0, xx - x0
            top = img[:, y0, x0] + (img[:, y0, x1i] - img[:, y0, x0]) * dx
            bottom = img[:, y1i, x0] + (img[:, y1i, x1i] - img[:, y1i, x0]) * dx
            out[r] = np.where(ok, top + (bottom - top) * dy, 0.0)
        return out
    scaled = np_round_half_away(rois[:, 1:5].astype(np.float64) * spatial_scale)
    for r in range(R):
        b = int(rois[r, 0])
        sx, sy, ex, ey = scaled[r]
        roi_w, roi_h = max(ex - sx + 1, 1), max(ey - sy + 1, 1)
        bin_w, bin_h = roi_w / pooled_w, roi_h / pooled_h
        ph = np.arange(pooled_h)
        pw = np.arange(pooled_w)
        hs = np.clip(np.floor(ph * bin_h) + sy, 0, H).astype(int)
        he = np.clip(np.ceil((ph + 1) * bin_h) + sy, 0, H).astype(int)
        ws = np.clip(np.floor(pw * bin_w) + sx, 0, W).astype(int)
        we = np.clip(np.ceil((pw + 1) * bin_w) + sx, 0, W).astype(int)
        w_lo, w_hi = int(ws.min()), int(we.max())
        if w_hi <= w_lo:
            continue
        # max over each row band once (restricted to the RoI's columns), then over column bands
        rows = np.full((pooled_h, C, w_hi - w_lo), -np.inf, dtype=input.dtype)
        for i in range(pooled_h):
            if he[i] > hs[i]:
                rows[i] = input[b, :, hs[i]:he[i], w_lo:w_hi].max(axis=1)
        for j in range(pooled_w):
            if we[j] > ws[j]:
                out[r, :, :, j] = rows[:, :, ws[j] - w_lo:we[j] - w_lo].max(axis=2).T
        out[r, :, he <= hs, :] = 0.0                                     # empty bins are 0
    return out


psroi_pooling = define(
    "ir_psroi_pooling", "ir.roi", """
fragment ir_psroi_pooling( input: tensor<scalar>, rois: tensor<scalar>, output_dim: integer,
    group_size: integer = 1, spatial_scale: scalar = 1.0, mode: string = 'average',
    spatial_bins_x: integer = 1, spatial_bins_y: integer = 1 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Position-sensitive RoI pooling (R-FCN): output [R, output_dim, group_size, group_size]; bin "
        "(i, j) of output channel c averages input channel (c*group+i)*group+j ('average', absolute "
        "RoIs) or averages bilinear samples of input channel bin*output_dim + c over the spatial bins "
        "('bilinear', normalised RoIs).")


def _check_ps(input, rois, output_dim, group_size, mode, bx, by):
    op = "ir_psroi_pooling"
    _check_rois(op, input, rois, group_size, group_size)
    require(output_dim > 0, op, f"'output_dim' must be > 0, got {output_dim}")
    require(mode in ("average", "bilinear"), op, f"'mode' must be 'average' or 'bilinear', got '{mode}'")
    require(bx > 0 and by > 0, op, "spatial bins must be > 0")
    need = output_dim * (group_size * group_size if mode == "average" else bx * by)
    require(input[1] in (None, need), op, f"input needs {need} channels, got {input[1]}")


@psroi_pooling.shape
def _ps_shape(input, rois, *, output_dim, group_size=1, spatial_scale=1.0, mode="average", spatial_bins_x=1,
              spatial_bins_y=1):
    _check_ps(input, rois, output_dim, group_size, mode, spatial_bins_x, spatial_bins_y)
    return ((rois[0], output_dim, group_size, group_size),)


def _ps_average_bins(roi, scale, group, H, W):
    x1 = round_half_away(float(roi[1])) * scale
    y1 = round_half_away(float(roi[2])) * scale
    x2 = (round_half_away(float(roi[3])) + 1.0) * scale
    y2 = (round_half_away(float(roi[4])) + 1.0) * scale
    roi_w, roi_h = max(x2 - x1, 0.1), max(y2 - y1, 0.1)
    bw, bh = roi_w / group, roi_h / group
    bins = []
    for ph in range(group):
        hs = min(max(math.floor(ph * bh + y1), 0), H)
        he = min(max(math.ceil((ph + 1) * bh + y1), 0), H)
        row = []
        for pw in range(group):
            ws = min(max(math.floor(pw * bw + x1), 0), W)
            we = min(max(math.ceil((pw + 1) * bw + x1), 0), W)
            row.append((int(hs), int(he), int(ws), int(we)))
        bins.append(row)
    return bins


def _ps_bilinear_points(roi, scale, group, bx, by, H, W):
    """For each (sby, sbx, ph, pw): the sample point (y, x) or None when outside the image."""
    x1, y1 = float(roi[1]) * scale, float(roi[2]) * scale
    x2, y2 = float(roi[3]) * scale, float(roi[4]) * scale
    bin_w, bin_h = (x2 - x1) / bx, (y2 - y1) / by
    pts = {}
    for sby in range(by):
        for sbx in range(bx):
            bxmin, bymin = x1 + sbx * bin_w, y1 + sby * bin_h
            for ph in range(group):
                for pw in range(group):
                    y = _bilinear_coord(ph, group, bymin, bymin + bin_h, H)
                    x = _bilinear_coord(pw, group, bxmin, bxmin + bin_w, W)
                    ok = 0 <= y <= H - 1 and 0 <= x <= W - 1
                    pts[sby, sbx, ph, pw] = (y, x) if ok else None
    return pts


@psroi_pooling.formal
def _ps_formal(input, rois, *, output_dim, group_size=1, spatial_scale=1.0, mode="average", spatial_bins_x=1,
               spatial_bins_y=1):
    _check_ps(input.shape, rois.shape, output_dim, group_size, mode, spatial_bins_x, spatial_bins_y)
    N, C, H, W = input.shape
    G = group_size
    out = np.zeros((rois.shape[0], output_dim, G, G), dtype=float_type())
    for r in range(active_rois(rois)):
        b = _batch(rois, r, N)
        if mode == "average":
            bins = _ps_average_bins(rois[r], spatial_scale, G, H, W)
            for c in range(output_dim):
                for ph in range(G):
                    for pw in range(G):
                        hs, he, ws, we = bins[ph][pw]
                        ch = (c * G + ph) * G + pw
                        total, count = 0.0, 0
                        for h in range(hs, he):
                            for w in range(ws, we):
                                total += float(input[b, ch, h, w])
                                count += 1
                        out[r, c, ph, pw] = total / count if count else 0.0
        else:
            pts = _ps_bilinear_points(rois[r], spatial_scale, G, spatial_bins_x, spatial_bins_y, H, W)
            nb = spatial_bins_x * spatial_bins_y
            for c in range(output_dim):
                for ph in range(G):
                    for pw in range(G):
                        total = 0.0
                        for sby in range(spatial_bins_y):
                            for sbx in range(spatial_bins_x):
                                p = pts[sby, sbx, ph, pw]
                                if p is not None:
                                    ch = (sby * spatial_bins_x + sbx) * output_dim + c
                                    total += float(_bilinear_point(input[b, ch].astype(np.float64), *p))
                        out[r, c, ph, pw] = total / nb
    return out


@psroi_pooling.fast
def _ps_fast(input, rois, *, output_dim, group_size=1, spatial_scale=1.0, mode="average", spatial_bins_x=1,
             spatial_bins_y=1):
    _check_ps(input.shape, rois.shape, output_dim, group_size, mode, spatial_bins_x, spatial_bins_y)
    N, C, H, W = input.shape
    G = group_size
    out = np.zeros((rois.shape[0], output_dim, G, G), dtype=float_type())
    for r in range(active_rois(rois)):
        b = _batch(rois, r, N)
        if mode == "average":
            bins = _ps_average_bins(rois[r], spatial_scale, G, H, W)
            x = input[b].astype(np.float64).reshape(output_dim, G, G, H, W)
            for ph in range(G):
                for pw in range(G):
                    hs, he, ws, we = bins[ph][pw]
                    if he > hs and we > ws:
                        out[r, :, ph, pw] = x[:, ph, pw, hs:he, ws:we].mean(axis=(1, 2))
        else:
            pts = _ps_bilinear_points(rois[r], spatial_scale, G, spatial_bins_x, spatial_bins_y, H, W)
            nb = spatial_bins_x * spatial_bins_y
            x = input[b].astype(np.float64).reshape(nb, output_dim, H, W)
            acc = np.zeros((output_dim, G, G))
            for (sby, sbx, ph, pw), p in pts.items():
                if p is not None:
                    acc[:, ph, pw] += _bilinear_point(x[sby * spatial_bins_x + sbx], *p)
            out[r] = acc / nb
    return out
