"""ONNX Col2Im (opset 18) as one operation: the inverse of the sliding-block unfold, summing
every block's items back to their image positions.

The input is ``[N, C * prod(block_shape), L]``: for each of the ``L`` block positions (in
row-major order over the block grid) the block's items, channel-major.  Block ``l`` at grid
position ``g`` and kernel offset ``k`` lands at image position ``g * stride - pad_begin +
k * dilation`` and adds to what is there; positions outside the image are dropped.
``image_shape`` and ``block_shape`` decide the result's shape, so they are attributes (the
reader binds the model's constants).  NNEF's ``deconv`` with a one-hot filter would express
the same sums only for one channel group at a time; this is the direct form.

DeformConv (opset 19, the 2-D form) lives here too: a convolution whose taps are read at
per-position fractional offsets (bilinear; neighbours outside the input read 0) and weighted
by a mask; NNEF's ``conv`` reads a fixed lattice.
"""

from __future__ import annotations

import itertools

import numpy as np

from .._common import guard_family, op_error
from ..registry import define

FAMILY = "onnx_sliding"

onnx_col2im = define("onnx_col2im", FAMILY, """
fragment onnx_col2im(
    input: tensor<scalar>,
    image_shape: integer[],
    block_shape: integer[],
    dilations: integer[] = [],
    pads: integer[] = [],
    strides: integer[] = [] )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX Col2Im: sliding blocks [N, C*prod(block), L] summed back into [N, C, *image].")


def _geometry(x, image_shape, block_shape, dilations, pads, strides):
    name = "onnx_col2im"
    n = len(image_shape)
    if n == 0 or len(block_shape) != n:
        raise op_error(name, f"image_shape {list(image_shape)} and block_shape {list(block_shape)} need equal, "
                             "non-zero lengths")
    dilations = list(dilations) or [1] * n
    strides = list(strides) or [1] * n
    pads = list(pads) or [0] * (2 * n)
    if len(dilations) != n or len(strides) != n or len(pads) != 2 * n:
        raise op_error(name, f"dilations, strides need {n} values and pads {2 * n}")
    if min(block_shape) <= 0 or min(dilations) <= 0 or min(strides) <= 0 or min(image_shape) <= 0:
        raise op_error(name, "image_shape, block_shape, dilations and strides must be positive")
    grid = []
    for d in range(n):
        span = dilations[d] * (block_shape[d] - 1) + 1
        grid.append((image_shape[d] + pads[d] + pads[d + n] - span) // strides[d] + 1)
    if min(grid) < 1:
        raise op_error(name, f"no block fits: the block grid would be {grid}")
    kernel = int(np.prod(block_shape))
    if len(x) != 3:
        raise op_error(name, f"the input must be [N, C * prod(block_shape), L], got {list(x)}")
    if x[1] is not None and x[1] % kernel:
        raise op_error(name, f"input axis 1 ({x[1]}) is not a multiple of prod(block_shape) = {kernel}")
    if x[2] is not None and x[2] != int(np.prod(grid)):
        raise op_error(name, f"input axis 2 has {x[2]} blocks but the block grid {grid} holds {int(np.prod(grid))}")
    return dilations, pads, strides, grid, kernel


@onnx_col2im.shape
def _col2im_shape(x, image_shape, block_shape, dilations=(), pads=(), strides=()):
    _, _, _, _, kernel = _geometry(x, image_shape, block_shape, dilations, pads, strides)
    return (x[0], None if x[1] is None else x[1] // kernel, *image_shape)


@onnx_col2im.formal
def _col2im_formal(x, image_shape, block_shape, dilations=(), pads=(), strides=()):
    x = np.asarray(x)
    dilations, pads, strides, grid, kernel = _geometry(x.shape, image_shape, block_shape, dilations, pads, strides)
    n = len(image_shape)
    channels = x.shape[1] // kernel
    out = np.zeros((x.shape[0], channels, *image_shape), np.float64)
    for b in range(x.shape[0]):
        for c in range(channels):
            for k, offset in enumerate(itertools.product(*(range(s) for s in block_shape))):
                for l_index, cell in enumerate(itertools.product(*(range(g) for g in grid))):
                    pos = [cell[d] * strides[d] - pads[d] + offset[d] * dilations[d] for d in range(n)]
                    if all(0 <= pos[d] < image_shape[d] for d in range(n)):
                        out[(b, c, *pos)] += float(x[b, c * kernel + k, l_index])
    return out.astype(x.dtype)


@onnx_col2im.fast
def _col2im_fast(x, image_shape, block_shape, dilations=(), pads=(), strides=()):
    x = np.asarray(x)
    dilations, pads, strides, grid, kernel = _geometry(x.shape, image_shape, block_shape, dilations, pads, strides)
    n = len(image_shape)
    channels = x.shape[1] // kernel
    acc = np.float64 if x.dtype == np.float64 else np.float32
    blocks = x.astype(acc).reshape(x.shape[0], channels, *block_shape, *grid)
    padded = [image_shape[d] + pads[d] + pads[d + n] + strides[d] * grid[d] for d in range(n)]
    out = np.zeros((x.shape[0], channels, *padded), acc)
    for offset in itertools.product(*(range(s) for s in block_shape)):
        where = tuple(slice(offset[d] * dilations[d], offset[d] * dilations[d] + strides[d] * grid[d], strides[d])
                      for d in range(n))
        out[(slice(None), slice(None), *where)] += blocks[(slice(None), slice(None), *offset)]
    crop = tuple(slice(pads[d], pads[d] + image_shape[d]) for d in range(n))
    return out[(slice(None), slice(None), *crop)].astype(x.dtype)


# --- DeformConv ------------------------------------------------------------------------------

onnx_deform_conv = define("onnx_deform_conv", FAMILY, """
fragment onnx_deform_conv(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    offset: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    mask: tensor<scalar> = 1.0,
    dilations: integer[] = [],
    group: integer = 1,
    offset_group: integer = 1,
    pads: integer[] = [],
    strides: integer[] = [] )
-> ( output: tensor<scalar> );
""", domain="onnx", doc="ONNX DeformConv (2-D): a convolution whose taps read the input at learned "
                        "fractional offsets (bilinear, zero outside), each tap weighted by a mask.")


def _deform_geometry(x, w, offset, dilations, group, offset_group, pads, strides):
    name = "onnx_deform_conv"
    if len(x) != 4 or len(w) != 4 or len(offset) != 4:
        raise op_error(name, "only the 2-D form ([N, C, H, W] input, [M, C/group, kH, kW] filter) is supported")
    kh, kw = w[2:]
    dilations = list(dilations) or [1, 1]
    strides = list(strides) or [1, 1]
    pads = list(pads) or [0, 0, 0, 0]
    if len(dilations) != 2 or len(strides) != 2 or len(pads) != 4:
        raise op_error(name, "dilations and strides need 2 values, pads 4")
    if group <= 0 or offset_group <= 0 or x[1] % offset_group or x[1] != w[1] * group or w[0] % group:
        raise op_error(name, f"channels do not split: input {list(x)}, filter {list(w)}, group {group}, "
                             f"offset_group {offset_group}")
    out = [(x[2 + d] + pads[d] + pads[d + 2] - (dilations[d] * ((kh, kw)[d] - 1) + 1)) // strides[d] + 1
           for d in range(2)]
    if offset[0] != x[0] or offset[1] != offset_group * kh * kw * 2 or list(offset[2:]) != out:
        raise op_error(name, f"offset must be [{x[0]}, {offset_group * kh * kw * 2}, {out[0]}, {out[1]}], "
                             f"got {list(offset)}")
    return dilations, pads, strides, out


@onnx_deform_conv.shape
def _deform_shape(x, w, offset, bias=(), mask=(), dilations=(), group=1, offset_group=1, pads=(), strides=()):
    _, _, _, out = _deform_geometry(x, w, offset, dilations, group, offset_group, pads, strides)
    return (x[0], w[0], *out)


def _bilinear(plane: np.ndarray, h: float, w: float) -> float:
    """``plane`` read at a fractional position; neighbours outside the plane read 0."""
    h0, w0 = int(np.floor(h)), int(np.floor(w))
    total = 0.0
    for dh, dw in ((0, 0), (0, 1), (1, 0), (1, 1)):
        r, c = h0 + dh, w0 + dw
        if 0 <= r < plane.shape[0] and 0 <= c < plane.shape[1]:
            weight = (1 - abs(h - r)) * (1 - abs(w - c))
            total += weight * float(plane[r, c])
    return total


@onnx_deform_conv.formal
def _deform_formal(x, w, offset, bias=0.0, mask=1.0, dilations=(), group=1, offset_group=1, pads=(), strides=()):
    x, w, offset = np.asarray(x), np.asarray(w), np.asarray(offset)
    dilations, pads, strides, (oh, ow) = _deform_geometry(x.shape, w.shape, offset.shape, dilations, group,
                                                          offset_group, pads, strides)
    n, c = x.shape[:2]
    m, cpg, kh, kw = w.shape
    off = offset.reshape(n, offset_group, kh, kw, 2, oh, ow)
    msk = np.broadcast_to(np.asarray(mask, np.float64), (n, offset_group * kh * kw, oh, ow)).reshape(
        n, offset_group, kh, kw, oh, ow)
    b = np.broadcast_to(np.asarray(bias, np.float64), (m,))
    out = np.zeros((n, m, oh, ow))
    for bi in range(n):
        for o in range(m):
            g = o // (m // group)
            for i in range(oh):
                for j in range(ow):
                    total = b[o]
                    for ci in range(g * cpg, (g + 1) * cpg):
                        og = ci // (c // offset_group)
                        for p in range(kh):
                            for q in range(kw):
                                h = -pads[0] + strides[0] * i + dilations[0] * p + off[bi, og, p, q, 0, i, j]
                                v = -pads[1] + strides[1] * j + dilations[1] * q + off[bi, og, p, q, 1, i, j]
                                total += (float(w[o, ci - g * cpg, p, q]) * msk[bi, og, p, q, i, j]
                                          * _bilinear(x[bi, ci], float(h), float(v)))
                    out[bi, o, i, j] = total
    return out.astype(x.dtype)


@onnx_deform_conv.fast
def _deform_fast(x, w, offset, bias=0.0, mask=1.0, dilations=(), group=1, offset_group=1, pads=(), strides=()):
    x, w, offset = np.asarray(x), np.asarray(w), np.asarray(offset)
    dilations, pads, strides, (oh, ow) = _deform_geometry(x.shape, w.shape, offset.shape, dilations, group,
                                                          offset_group, pads, strides)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    n, c, ih, iw = x.shape
    m, cpg, kh, kw = w.shape
    off = offset.astype(acc).reshape(n, offset_group, kh, kw, 2, oh, ow)
    msk = np.broadcast_to(np.asarray(mask, acc), (n, offset_group * kh * kw, oh, ow)).reshape(
        n, offset_group, kh, kw, oh, ow)
    base_h = (-pads[0] + strides[0] * np.arange(oh))[None, :, None] + dilations[0] * np.arange(kh)[:, None, None]
    base_w = (-pads[1] + strides[1] * np.arange(ow))[None, None, :] + dilations[1] * np.arange(kw)[:, None, None]
    h = base_h[None, None, :, None, :, :] + off[:, :, :, :, 0]  # [n, og, kh, kw, oh, ow]
    v = base_w[None, None, None, :, :, :] + off[:, :, :, :, 1]
    h0, v0 = np.floor(h).astype(np.int64), np.floor(v).astype(np.int64)
    planes = x.astype(acc).reshape(n, offset_group, c // offset_group, ih * iw)
    sampled = np.zeros((n, offset_group, c // offset_group, kh, kw, oh, ow), acc)
    for dh in (0, 1):
        for dv in (0, 1):
            r, s = h0 + dh, v0 + dv
            inside = (r >= 0) & (r < ih) & (s >= 0) & (s < iw)
            weight = (1 - np.abs(h - r)) * (1 - np.abs(v - s)) * inside * msk
            flat = np.where(inside, r * iw + s, 0).reshape(n, offset_group, 1, -1)
            values = np.take_along_axis(planes, np.broadcast_to(flat, (n, offset_group, c // offset_group,
                                                                       flat.shape[-1])), axis=3)
            sampled += values.reshape(sampled.shape) * weight[:, :, None]
    sampled = sampled.reshape(n, group, cpg, kh, kw, oh, ow)
    out = np.einsum("ngckhij,gmckh->ngmij", sampled, w.astype(acc).reshape(group, m // group, cpg, kh, kw))
    out = out.reshape(n, m, oh, ow) + np.broadcast_to(np.asarray(bias, acc), (m,))[None, :, None, None]
    return out.astype(x.dtype)


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
