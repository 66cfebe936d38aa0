"""ONNX Col2Im (opset 18) as one operation: the inverse of the sliding-block unfold, summing
every block's items back to their image positions.

The input is ``[N, C * prod(block_shape), L]``: for each of the ``L`` block positions (in
row-major order over the block grid) the block's items, channel-major.  Block ``l`` at grid
position ``g`` and kernel offset ``k`` lands at image position ``g * stride - pad_begin +
k * dilation`` and adds to what is there; positions outside the image are dropped.
``image_shape`` and ``block_shape`` decide the result's shape, so they are attributes (the
reader binds the model's constants).  NNEF's ``deconv`` with a one-hot filter would express
the same sums only for one channel group at a time; this is the direct form.
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


guard_family(FAMILY)  # noqa: E305  (attribute types checked before any rule or kernel runs)
