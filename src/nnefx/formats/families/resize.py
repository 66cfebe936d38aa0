"""Resizing: how each operator is read from IR and ONNX (and written, below).

Interpolate (opset 1, 4 and 11 forms); ONNX Resize and Upsample.  Coordinate modes are in
:mod:`nnefx.ops.ext` (``COORD_MODES``).

Specifications: OpenVINO opset docs: Interpolate-1/4/11; ONNX operator docs: Resize (coordinate_transformation_mode), Upsample.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...graph import Operation
from ...ops.ext import COORD_MODES, INTERP_MODES, NEAREST_MODES
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
from ..reading.context import NodeContext
from ..reading.conventions import multilinear_method, nearest_upsample_fits, norm_axes
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Dim, const, nnef_dtype
from ._common import onnx_const, onnx_emit, onnx_ints, onnx_kept_etypes, onnx_need, onnx_rank, onnx_write

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


@operator("Interpolate", ANY)
def _interpolate(ctx: NodeContext):
    xshape = ctx.in_shape(0)
    if xshape is None:
        raise ctx.error("the input rank is not known")
    r = len(xshape)
    odims = ctx.out_dims(0)
    if odims is None or len(odims) != r:
        raise ctx.error("Interpolate needs the output rank")
    if ctx.version == "opset1":
        mode = ctx.str("mode").lower()
        coord = "half_pixel" if not ctx.bool("align_corners", False) else "align_corners"
        nearest = "round_prefer_floor" if mode != "nearest" else "floor"
        coord = "asymmetric" if mode == "nearest" and coord == "half_pixel" else coord
        axes = sorted(norm_axes(ctx, ctx.ints("axes"), r))
        cubic_a = -0.75
        if any(ctx.ints("pads_begin", [0])) or any(ctx.ints("pads_end", [0])):
            raise ctx.error("Interpolate with pads is not supported")
        if mode == "linear":
            mode = "linear_onnx"
    else:
        mode = ctx.str("mode").lower()
        coord = ctx.choice("coordinate_transformation_mode", COORD_MODES, "half_pixel")
        nearest = ctx.choice("nearest_mode", NEAREST_MODES, "round_prefer_floor")
        cubic_a = ctx.float("cube_coeff", -0.75)
        if any(ctx.ints("pads_begin", [0])) or any(ctx.ints("pads_end", [0])):
            raise ctx.error("Interpolate with pads is not supported")
        if ctx.bool("antialias", False):
            raise ctx.error("Interpolate with antialias is not supported")
        axes_input = 3 if ctx.version == "opset4" else 2
        if ctx.n_inputs > axes_input:
            axes = norm_axes(ctx, ctx.const_ints(axes_input, "axes"), r)
        else:
            axes = list(range(r))
    calc = ctx.str("shape_calculation_mode", "sizes").lower() if ctx.version != "opset1" else "sizes"
    target = list(odims)
    if calc == "scales":  # axes scaled by exactly 1 are left alone (e.g. a dynamic batch)
        all_scales = _interp_scales(ctx, axes, None, None)
        axes = [a for a, sc in zip(axes, all_scales, strict=True) if sc != 1.0]
        for a, sc in zip(axes, _interp_scales(ctx, axes, None, None), strict=True):
            if target[a] is None and xshape[a] is not None:
                v = xshape[a] * sc  # OpenVINO: floor(extent * scale), tolerant to float noise
                target[a] = int(round(v)) if abs(v - round(v)) < 1e-5 else int(math.floor(v))
    else:
        sizes_in = ctx.input(1)
        given = sizes_in.const if sizes_in.is_const else sizes_in.sym
        x_name = ctx.input(0).tensor
        keep = []
        for k, a in enumerate(axes):
            entry = np.asarray(given).reshape(-1)[k] if given is not None and np.size(given) == len(axes) else None
            if isinstance(entry, Dim) and entry.tensor == x_name and entry.axis == a:
                continue  # the target extent is the input's own (dynamic) extent
            if target[a] is None and entry is not None and not isinstance(entry, Dim):
                target[a] = int(entry)
            if xshape[a] is not None and xshape[a] == target[a]:
                continue
            keep.append(a)
        axes = keep
    for a in axes:
        if xshape[a] is None or target[a] is None:
            raise ctx.error("Interpolate needs known input and output extents on the resized axes "
                            "(fix dynamic input dims with nnefx.load(..., shapes={...}))")
    sizes = [int(target[a]) for a in axes]
    scales = _interp_scales(ctx, axes, [int(xshape[a]) for a in axes], sizes)
    if not axes:
        return ctx.result(ctx.tensor(0))
    x = ctx.tensor(0)
    if all(xshape[a] == n for a, n in zip(axes, sizes, strict=True)) and mode != "cubic":
        if all(abs(s - 1.0) < 1e-12 for s in scales):
            return ctx.result(x)
    standard = _interp_standard(ctx, x, xshape, axes, sizes, scales, mode, coord, nearest)
    if standard is not None:
        return ctx.result(standard)
    if mode == "linear":
        if any(s < 1 for s in scales):
            raise ctx.error("Interpolate mode 'linear' down-scaling is not supported")
        mode = "linear_onnx"
    if mode not in INTERP_MODES:
        raise ctx.error(f"Interpolate mode '{mode}' is not supported")
    y = ctx.emit1("interpolate", {"input": x},
                  {"axes": axes, "sizes": sizes, "scales": scales, "mode": mode,
                   "coordinate_transformation_mode": coord, "nearest_mode": nearest, "cubic_coeff_a": cubic_a})
    return ctx.result(y)


def _interp_scales(ctx: NodeContext, axes: list[int], ins, outs) -> list[float]:
    """The scale per resized axis as OpenVINO uses it in the coordinate transform."""
    mode = ctx.str("shape_calculation_mode", "sizes").lower() if ctx.version != "opset1" else "sizes"
    if mode == "scales":
        idx = 2 if ctx.version == "opset4" else 1
        sc = [float(v) for v in np.asarray(ctx.const(idx, "scales")).reshape(-1)]
        given = ctx.const_ints(3 if ctx.version == "opset4" else 2, "axes") if ctx.n_inputs > (
            3 if ctx.version == "opset4" else 2) else list(range(ctx.in_rank(0)))
        given = norm_axes(ctx, given, ctx.in_rank(0))
        if len(sc) != len(given):
            raise ctx.error("scales do not match the axes")
        by_axis = dict(zip(given, sc, strict=True))
        return [by_axis[a] for a in axes]
    return [o / i for i, o in zip(ins, outs, strict=True)]


def _interp_standard(ctx: NodeContext, x: str, xshape, axes, sizes, scales, mode, coord, nearest) -> str | None:
    """NNEF nearest_upsample / multilinear_upsample where they compute exactly the same thing."""
    r = len(xshape)
    if sorted(axes) != list(range(2, r)) or r < 3:
        return None
    factors = []
    for a, n in zip(axes, sizes, strict=True):
        if n % xshape[a]:
            return None
        factors.append(n // xshape[a])
    if any(abs(s - f) > 1e-9 for s, f in zip(scales, factors, strict=True)) or all(f == 1 for f in factors):
        return None
    if mode == "nearest":
        if not nearest_upsample_fits(coord, nearest):
            return None
        return ctx.emit1("nearest_upsample", {"input": x}, {"factor": factors})
    if mode in ("linear", "linear_onnx"):
        method = multilinear_method(coord)
        if method is None:
            return None
        return ctx.emit1("multilinear_upsample", {"input": x},
                         {"factor": factors, "method": method, "border": "replicate"})
    return None


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("Resize", "Upsample")
def _onnx_resize(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    rank = onnx_rank(r, x)
    kind = r.node.op_type
    if any(d is None for d in x.shape) and kind == "Resize" and r.opset >= 11:
        return _onnx_full_resize(r, attrs, ins)
    if any(d is None for d in x.shape):
        raise r.error("Resize needs a known input shape")
    mode = attrs.get("mode", "nearest")
    if kind == "Upsample" or r.opset < 11:
        coord = "asymmetric"
        nearest = "floor"
        scales_v = ins[1] if len(ins) > 1 and ins[1] is not None else None
        scales = list(attrs["scales"]) if scales_v is None and "scales" in attrs else \
            [float(v) for v in np.asarray(onnx_const(r, scales_v, "scales")).reshape(-1)]
        sizes = None
        if mode == "linear" and kind == "Resize":
            coord = "asymmetric"
    else:
        coord = attrs.get("coordinate_transformation_mode", "half_pixel")
        nearest = attrs.get("nearest_mode", "round_prefer_floor")
        if (attrs.get("antialias", 0) or attrs.get("exclude_outside", 0) or x.etype != "f32"
                or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch" or coord not in COORD_MODES):
            return _onnx_full_resize(r, attrs, ins)
        if attrs.get("exclude_outside", 0):
            raise r.error("exclude_outside=1 is not supported")
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise r.error("keep_aspect_ratio_policy other than stretch is not supported")
        if coord == "tf_crop_and_resize":
            raise r.error("coordinate_transformation_mode tf_crop_and_resize is not supported")
        scales = None
        sizes = None
        if len(ins) > 3 and ins[3] is not None and ins[3].shape not in ((0,),):
            sizes = onnx_ints(r, ins[3], "sizes")
        if sizes is None and len(ins) > 2 and ins[2] is not None:
            scales = [float(v) for v in np.asarray(onnx_const(r, ins[2], "scales")).reshape(-1)]
        if not sizes and not scales:
            raise r.error("Resize needs scales or sizes")
        if coord == "align_corners" and scales and any(
                d * f != math.floor(d * f) for d, f in zip(x.shape[-len(scales):], scales, strict=False)):
            # ONNX's align_corners divides by the unrounded resized length (extent x scale)
            return _onnx_full_resize(r, attrs, ins)
    axes = list(attrs.get("axes", range(rank)))
    axes = norm_axes(r, axes, rank)
    if sizes:
        if len(sizes) != len(axes):
            raise r.error("sizes do not match the axes")
    else:
        if len(scales) != len(axes):
            raise r.error("scales do not match the axes")
    out = list(x.shape)
    for k, a in enumerate(axes):
        out[a] = sizes[k] if sizes else int(math.floor(x.shape[a] * scales[k]))
        if not sizes and coord == "align_corners" and out[a] != x.shape[a] * scales[k]:
            # ONNX divides by the unrounded extent x * scale - 1 there; Interpolate by the output's
            return _onnx_full_resize(r, attrs, ins)
    imode = {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}.get(mode)
    if imode is None:
        raise r.error(f"Resize mode '{mode}' is not supported")
    data = {"mode": imode, "coordinate_transformation_mode": coord, "nearest_mode": nearest,
            "cube_coeff": float(attrs.get("cubic_coeff_a", -0.75)),
            "shape_calculation_mode": "sizes" if sizes else "scales"}
    second = const(np.array(sizes, np.int64)) if sizes else const(np.array(scales, np.float32))
    return r.apply1("Interpolate", data, [x, second, const(np.array(axes, np.int64))], version="opset11",
                 out_dims=[tuple(out)])


_RESIZE_ATTRS = {"mode": str, "coordinate_transformation_mode": str, "cubic_coeff_a": float, "exclude_outside": bool,
                 "extrapolation_value": float, "nearest_mode": str, "keep_aspect_ratio_policy": str, "antialias": bool}


def _onnx_full_resize(r, attrs, ins):
    """Resize-11..19 with what the interpolation above does not have (antialias, exclude_outside,
    keep_aspect_ratio_policy, tf_crop_and_resize, half_pixel_symmetric, integer data, unknown
    extents): the onnx-domain ``onnx_resize``, whose scales or sizes are load-time attributes."""
    x = onnx_need(r, ins, 0, "X")
    roi, scales_v, sizes_v = (ins[i] if i < len(ins) else None for i in (1, 2, 3))
    onnx_kept_etypes(r, [x, roi])
    data = {k: conv(attrs[k]) for k, conv in _RESIZE_ATTRS.items() if k in attrs}
    if sizes_v is not None and sizes_v.shape != (0,):
        data["sizes"] = onnx_ints(r, sizes_v, "sizes")
    elif scales_v is not None and scales_v.shape != (0,):
        data["scales"] = [float(v) for v in np.asarray(onnx_const(r, scales_v, "scales")).reshape(-1)]
    else:
        raise r.error("Resize needs scales or sizes")
    if "axes" in attrs:
        data["axes"] = [int(a) for a in attrs["axes"]]
    if data.get("coordinate_transformation_mode") != "tf_crop_and_resize" or (roi is not None and roi.shape == (0,)):
        roi = None   # the region of interest is read by tf_crop_and_resize only
    return onnx_emit(r, "onnx_resize", {"input": x, "roi": roi}, data, results=[x.etype],
                     dtype=nnef_dtype(x.etype))[0]


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


@to_onnx("onnx_resize")
def onnx_resize_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    scales = [float(v) for v in op.attribs.get("scales", [])]
    sizes = [int(v) for v in op.attribs.get("sizes", [])]
    roi = op.inputs.get("roi") if isinstance(op.inputs.get("roi"), str) else None
    attrs = {k: op.attribs[k] for k in _RESIZE_ATTRS if k in op.attribs}
    attrs = {k: (int(v) if isinstance(v, bool) else v) for k, v in attrs.items()}
    onnx_write(ctx, op, "Resize", [op.inputs["input"], roi, ctx.const(np.asarray(scales, np.float32)) if scales else None,
                                   ctx.ints(sizes) if sizes else None], 19,
               axes=[int(a) for a in op.attribs.get("axes", [])] or None, **attrs)
