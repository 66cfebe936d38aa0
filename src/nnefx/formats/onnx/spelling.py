"""ONNX spellings that several operator families share: padding in NNEF's border modes,
one-axis slices, and pooling/convolution windows moved onto the dimensions ONNX pools over.

These are how ONNX *writes* things (its node types and attributes); what NNEF means is
decided once in :mod:`nnefx.formats.export.lowering`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..export import attrs as nnef_attrs
from ..export.lowering import (
    binop,
    scalar,
    static,
    unop,
    window_input,
)
from .writer import NUMPY
from .writer import ExportContext as OnnxContext


def padded(ctx: Any, x: str, pads: list[tuple[int, int]], border: str, value: float = 0.0) -> str:
    """``x`` padded by non-negative ``pads`` in NNEF border ``border`` ('constant' pads with
    ``value``); 'reflect' in chunks below the extent (Pad's limit), 'reflect-even' (numpy
    'symmetric', which Pad lacks) by mirrored slices."""
    dims = ctx.dims(x)
    if border == "constant":
        return pad_node(ctx, x, pads, "constant", value)
    if border == "replicate":
        return pad_node(ctx, x, pads, "edge")
    if border not in ("reflect", "reflect-even"):
        raise ctx.fallback(f"border '{border}' has no ONNX padding form")
    for k, (p, q) in enumerate(pads):
        if not (p or q):
            continue
        z = dims[k]
        if z is None:
            raise ctx.fail(f"border '{border}' needs the static extent of dimension {k}")
        if border == "reflect" and z == 1:
            x = pad_node(ctx, x, [(p, q) if i == k else (0, 0) for i in range(len(dims))], "edge")
            continue
        # Beyond the extent the reflections repeat periodically (period 2z - 2, or 2z with
        # the edge repeated); padding in chunks of z - 1 (z) keeps every new edge on a mirror
        # point of that periodic extension, so reflecting the grown tensor again continues it
        chunk = z - 1 if border == "reflect" else z
        while p or q:
            pc, qc = min(p, chunk), min(q, chunk)
            if border == "reflect":
                x = pad_node(ctx, x, [(pc, qc) if i == k else (0, 0) for i in range(len(dims))], "reflect")
            else:
                x = _mirror_even(ctx, x, k, pc, qc)
            p, q = p - pc, q - qc
        dims = ctx.dims(x)
    return x


def slice_axis(ctx: Any, x: str, axis: int, start: int, end: int, step: int, extent: int) -> str:
    dims = list(ctx.dims(x))
    dims[axis] = extent
    return ctx.node("Slice", [x, ctx.ints([start]), ctx.ints([end]), ctx.ints([axis]), ctx.ints([step])],
                    tuple(dims))


def _mirror_even(ctx: Any, x: str, k: int, p: int, q: int) -> str:
    """Pad axis ``k`` by mirroring with the edge repeated (numpy 'symmetric', which Pad
    lacks): reversed slices of the first ``p`` and last ``q`` elements (both <= extent)."""
    z = ctx.dims(x)[k]
    parts = []
    if p:
        parts.append(slice_axis(ctx, x, k, p - 1, nnef_attrs.INT64_MIN, -1, p))
    parts.append(x)
    if q:
        parts.append(slice_axis(ctx, x, k, z - 1, nnef_attrs.slice_stop(z - 1 - q, -1), -1, q))
    shape = list(ctx.dims(x))
    shape[k] = z + p + q
    return ctx.node("Concat", parts, tuple(shape), axis=k)


def pad_node(ctx: Any, x: str, pads: list[tuple[int, int]], mode: str, value: float = 0.0) -> str:
    dims = ctx.dims(x)
    shape = tuple(None if d is None else d + p + q for d, (p, q) in zip(dims, pads, strict=True))
    inputs = [x, ctx.ints([p for p, _ in pads] + [q for _, q in pads])]
    if mode == "constant":
        inputs.append(ctx.const(np.asarray(value), ctx.dtype(x)))
    return ctx.node("Pad", inputs, shape, mode=mode)


F32 = NUMPY["scalar"]


I64 = NUMPY["integer"]


def pads_attr(pads: list[tuple[int, int]]) -> list[int]:
    return [p for p, _ in pads] + [q for _, q in pads]


def average_pool(ctx: OnnxContext, x: Any, size: list[int], pads: list, stride: list[int], dil: list[int],
                 border: str, shape: tuple) -> str:
    """Windowed mean with NNEF's border: 'ignore' divides by the in-range count."""
    xin, pads = window_input(ctx, x, pads, border, ("constant", "ignore"))
    if all(d == 1 for d in dil):
        return ctx.node("AveragePool", [xin], shape, kernel_shape=size, pads=pads_attr(pads), strides=stride,
                        count_include_pad=0 if border == "ignore" else 1)
    # AveragePool-18 has no dilations: window sums as a depth-wise convolution with a ones
    # kernel, divided by the volume or (under 'ignore') by the same sums of ones
    channels = static(ctx, ctx.dims(xin)[1:2])[0]
    dt = ctx.dtype(xin)
    ones = ctx.const(np.ones((channels, 1) + tuple(size), dt))
    attrs = dict(kernel_shape=size, pads=pads_attr(pads), strides=stride, dilations=dil, group=channels)
    total = ctx.node("Conv", [xin, ones], shape, **attrs)
    if border != "ignore":
        return binop(ctx, "div", total, scalar(ctx, float(np.prod(size)), dt))
    dims = ctx.dims(xin)
    filled = ctx.node("ConstantOfShape", [ctx.node("Shape", [xin], (len(dims),), dtype=I64)], dims, dtype=dt,
                      value=filled_tensor(1, dt))
    return binop(ctx, "div", total, ctx.node("Conv", [filled, ones], shape, **attrs))


def filled_tensor(value: float, dtype: Any) -> Any:
    """ConstantOfShape's ``value``: a one-item tensor of ``dtype``."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.full((1,), value, dtype=dtype))


def reduce(ctx: OnnxContext, kind: str, x: Any, axes: list[int]) -> str:
    """An NNEF reduction (reduced axes kept); no axes reduces nothing (ONNX: everything)."""
    ref = ctx.ref(x)
    if not axes:
        return unop(ctx, "copy", ref)
    dims = ctx.dims(ref)
    axes = [a % len(dims) for a in axes]
    return ctx.node(kind, [ref, ctx.ints(axes)], nnef_attrs.reduced_shape(dims, axes), keepdims=1)
