"""Resizing in the formats.

Covers NNEF up/down-sampling (§4.3) and the opset ``Interpolate`` / ``Interp`` / ``Resample`` layers.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import (
    out,
    static,
    unop,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape, slice_layer
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import average_pool
from ..onnx.writer import ExportContext as OnnxContext

# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------

def _interpolate(ctx: IRContext, x: Any, shape: tuple, mode: str, transform: str,
                 nearest: str = "floor") -> Any:
    xs = ctx.shape(x)
    axes = list(range(2, len(xs)))
    attrs = {"mode": mode, "shape_calculation_mode": "sizes", "coordinate_transformation_mode": transform,
             "nearest_mode": nearest, "antialias": False, "pads_begin": [0] * len(xs), "pads_end": [0] * len(xs),
             "cube_coeff": -0.75}
    return ctx.layer("Interpolate", [x, ctx.ints([shape[a] for a in axes]), ctx.ints(axes)], shape,
                     attrs=attrs, version="opset11")


# --- ONNX helpers ----------------------------------------------------------------------------

def _resize(ctx: OnnxContext, op: Operation, mode: str, transform: str, nearest: str | None = None) -> str:
    x = ctx.ref(op.inputs["input"])
    factor = [int(v) for v in op.attribs["factor"]]
    scales = ctx.const(np.asarray([1.0, 1.0] + [float(f) for f in factor], np.float32))
    return ctx.node("Resize", [x, "", scales], ctx.dims(out(op)), mode=mode,
                    coordinate_transformation_mode=transform, nearest_mode=nearest)


_RESIZE_MODE = {"nearest": "nearest", "linear_onnx": "linear", "cubic": "cubic"}


def _gather_axes(ctx: OnnxContext, x: str, tables: list[tuple[int, np.ndarray]], shape: tuple) -> str:
    """Nearest resizing as one Gather per axis with the source indices nnefx computes:
    exact by construction (Resize would recompute the coordinates in float32, where a
    coordinate on a rounding boundary can land on the other side)."""
    y = x
    for ax, idx in tables:
        dims = list(ctx.dims(y))
        dims[ax] = len(idx)
        y = ctx.node("Gather", [y, ctx.const(np.asarray(idx, np.int64))], tuple(dims), axis=ax)
    return y if y != x else unop(ctx, "copy", x)


# --- writers --------------------------------------------------------------------------------------

@to_ir("nearest_downsample")
def nearest_downsample_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    shape = out_shape(ctx, op)
    plan = [(2 + i, 0, int(f), shape[2 + i]) for i, f in enumerate(op.attribs["factor"]) if int(f) != 1]
    ctx.bind(out(op), slice_layer(ctx, x, plan, shape))


@to_onnx("nearest_downsample")
def nearest_downsample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = ctx.ref(op.inputs["input"])
    factor = [int(v) for v in op.attribs["factor"]]
    axes = [2 + i for i, f in enumerate(factor) if f != 1]
    if not axes:
        ctx.bind(out(op), unop(ctx, "copy", x))
        return
    steps = [factor[a - 2] for a in axes]
    ctx.bind(out(op), ctx.node("Slice", [x, ctx.ints([0] * len(axes)), ctx.ints([2 ** 62] * len(axes)),
                                         ctx.ints(axes), ctx.ints(steps)], ctx.dims(out(op))))


@to_ir("nearest_upsample")
def nearest_upsample_to_ir(ctx: IRContext, op: Operation) -> None:
    # output[i] = input[floor(i / factor)]: asymmetric coordinates, floor rounding
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "nearest", "asymmetric"))


@to_onnx("nearest_upsample")
def nearest_upsample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # output[i] = input[floor(i / factor)]: asymmetric coordinates, floor rounding
    ctx.bind(out(op), _resize(ctx, op, "nearest", "asymmetric", "floor"))


@to_ir("ir_interp")
def ir_interp_to_ir(ctx: IRContext, op: Operation) -> None:
    transform = "align_corners" if op.attribs.get("align_corners", False) else "asymmetric"
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", transform))


@to_onnx("ir_interp")
def ir_interp_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # Caffe Interp: source = out * (in-1)/(out-1) (aligned corners) or out * in/out_size
    # (Resize 'asymmetric' with sizes), the upper neighbour clamped at the edge, as Resize does
    x = ctx.ref(op.inputs["input"])
    transform = "align_corners" if op.attribs.get("align_corners", False) else "asymmetric"
    sizes = [int(op.attribs["height"]), int(op.attribs["width"])]
    ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=[2, 3],
                               mode="linear", coordinate_transformation_mode=transform))


@to_ir("ir_resample")
def ir_resample_to_ir(ctx: IRContext, op: Operation) -> None:
    mode = op.attribs.get("mode", "nearest")
    if mode == "nearest":   # Caffe Resample NEAREST: src = floor(dst * in / out)
        y = _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "nearest", "asymmetric")
    elif mode == "linear":  # bilinear, pixel centres aligned, edges clamped
        y = _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", "half_pixel")
    else:
        raise ctx.fail(f"resample mode '{mode}' has no Interpolate form")
    ctx.bind(out(op), y)


@to_onnx("ir_resample")
def ir_resample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # 'nearest': source = floor(out * in / out_size) (asymmetric, floor); 'linear': half-pixel
    # centres clamped to the input (Resize 'linear' / 'half_pixel')
    x = ctx.ref(op.inputs["input"])
    mode = str(op.attribs.get("mode", "nearest"))
    sizes = [int(v) for v in op.attribs["output_size"]]
    xd = ctx.dims(x)
    axes = list(range(2, len(xd)))
    if mode == "nearest":   # source = floor(out * in / out_size), in integers
        tables = []
        for ax, n in zip(axes, sizes, strict=True):
            e = static(ctx, xd[ax:ax + 1])[0]
            tables.append((ax, np.minimum(np.arange(n, dtype=np.int64) * e // n, e - 1)))
        ctx.bind(out(op), _gather_axes(ctx, x, tables, ctx.dims(out(op))))
        return
    if mode == "linear":
        attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    else:
        raise ctx.fallback(f"mode '{mode}' has no Resize form")
    ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=axes, **attrs))


@to_ir("multilinear_upsample")
def multilinear_upsample_to_ir(ctx: IRContext, op: Operation) -> None:
    # checked against Interpolate-11 'linear': symmetric + replicate = half_pixel, asymmetric +
    # replicate = asymmetric, aligned (either border) = align_corners; a zero ('constant')
    # border outside the aligned method has no Interpolate form
    method, border, transform = nnef_attrs.linear_upsample_transform(op)
    if transform is None:
        raise ctx.fail(f"method '{method}' with border '{border}' has no Interpolate form")
    ctx.bind(out(op), _interpolate(ctx, op.inputs["input"], out_shape(ctx, op), "linear", transform))


@to_onnx("multilinear_upsample")
def multilinear_upsample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # Resize's coordinate transform, as export.attrs.linear_upsample_transform explains
    method, border, transform = nnef_attrs.linear_upsample_transform(op)
    if transform is None:
        raise ctx.fallback(f"method '{method}' with border '{border}' has no Resize form")
    ctx.bind(out(op), _resize(ctx, op, "linear", transform))


@to_ir("interpolate")
def ir_interpolate_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    xs, shape = ctx.shape(x), out_shape(ctx, op)
    a = op.attribs
    axes = [int(v) for v in a["axes"]]
    scales = [float(v) for v in a.get("scales", [])]
    attrs = {"mode": str(a.get("mode", "nearest")), "coordinate_transformation_mode":
             str(a.get("coordinate_transformation_mode", "half_pixel")),
             "nearest_mode": str(a.get("nearest_mode", "round_prefer_floor")), "antialias": False,
             "pads_begin": [0] * len(xs), "pads_end": [0] * len(xs),
             "cube_coeff": float(a.get("cubic_coeff_a", -0.75))}
    exact = all(abs(s - shape[ax] / xs[ax]) < 1e-12 for s, ax in zip(scales, axes, strict=True)) if scales else True
    if exact:
        target = ctx.ints([shape[ax] for ax in axes])
        attrs["shape_calculation_mode"] = "sizes"
    else:
        # the coordinate transform uses these scales, not out/in: write them, if OpenVINO's
        # floor(in * scale) gives the same extents
        if any(int(np.floor(xs[ax] * np.float32(s) + 1e-5)) != shape[ax] for s, ax in zip(scales, axes, strict=True)):
            raise ctx.fail(f"scales {scales} do not give the output extents {shape}")
        target = ctx.const(np.asarray(scales, np.float32), "f32")
        attrs["shape_calculation_mode"] = "scales"
    ctx.bind(out(op), ctx.layer("Interpolate", [x, target, ctx.ints(axes)], shape, attrs=attrs, version="opset11"))


@to_onnx("interpolate")
def ir_interpolate_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # the coordinate transform uses the given scales (not out/in), as Resize does with its
    # scales input: exact when floor(in * scale) gives the output extents
    a = op.attribs
    x = ctx.ref(op.inputs["input"])
    xd = ctx.dims(x)
    mode = _RESIZE_MODE.get(str(a.get("mode", "nearest")))
    coord = str(a.get("coordinate_transformation_mode", "half_pixel"))
    nearest = str(a.get("nearest_mode", "round_prefer_floor"))
    if mode is None:
        raise ctx.fallback(f"mode {a.get('mode')} has no Resize form")
    axes = [int(v) for v in a["axes"]]
    sizes = [int(v) for v in a["sizes"]]
    scales = [float(v) for v in a["scales"]]
    extents = [static(ctx, xd[ax:ax + 1])[0] for ax in axes]
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(a.get("cubic_coeff_a", -0.75))
    # Resize with sizes uses out / in as the scale: the same transform when the given scales
    # are those ratios (or are not used, with aligned corners)
    by_sizes = coord == "align_corners" or all(abs(sc - n / e) <= 1e-12 * abs(sc) for sc, n, e in
                                               zip(scales, sizes, extents, strict=True))
    if mode == "nearest":
        from ...ops.ext.resize import interpolation_taps

        tables = [(ax, interpolation_taps(e, n, sc, "nearest", coord, nearest, -0.75)[0][:, 0])
                  for ax, n, sc, e in zip(axes, sizes, scales, extents, strict=True)]
        ctx.bind(out(op), _gather_axes(ctx, x, tables, ctx.dims(out(op))))
        return
    if by_sizes:
        ctx.bind(out(op), ctx.node("Resize", [x, "", "", ctx.ints(sizes)], ctx.dims(out(op)), axes=axes, **attrs))
        return
    # otherwise the scales themselves, where every tool derives the same extents from them
    # (floor(in * scale) in float32 as onnxruntime runs it, and in float64 as onnx infers it)
    full = [1.0] * len(xd)
    for ax, n, sc, e in zip(axes, sizes, scales, extents, strict=True):
        f32 = np.float32(sc)
        if int(np.floor(np.float32(e) * f32)) != n or int(np.floor(float(e) * float(f32))) != n:
            raise ctx.fallback(f"scale {sc} does not give the extent {n} from {e} as Resize computes it")
        full[ax] = sc
    ctx.bind(out(op), ctx.node("Resize", [x, "", ctx.const(np.asarray(full, np.float32))], ctx.dims(out(op)),
                               **attrs))


@to_onnx("area_downsample")
def area_downsample_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    factor = [int(v) for v in op.attribs["factor"]]
    ctx.bind(out(op), average_pool(ctx, op.inputs["input"], factor, [(0, 0)] * len(factor), factor,
                                [1] * len(factor), "constant", ctx.dims(out(op))))
