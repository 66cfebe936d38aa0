"""IR v11 spellings that several operator families share (layers with their versions and
attributes); what NNEF means is decided in :mod:`nnefx.formats.export.lowering`."""

from __future__ import annotations

from typing import Any

from ...graph import Operation
from ..export import attrs as nnef_attrs
from ..export.lowering import out
from .writer import ExportContext as IRContext


def out_shape(ctx: IRContext, op: Operation, k: int = 0) -> tuple:
    return ctx.shape(out(op, k))


def slice_layer(ctx: IRContext, x: Any, plan: list[tuple[int, int, int, int]], shape: tuple) -> Any:
    """Slice-8 from resolved (axis, first index, stride, count) items."""
    if not plan:
        return ctx.ref(x)
    axes, start, stop, step = nnef_attrs.slice_bounds(plan)
    return ctx.layer("Slice", [x, ctx.ints(start), ctx.ints(stop), ctx.ints(step), ctx.ints(axes)], shape,
                     version="opset8")


def reduce_layer(ctx: IRContext, kind: str, x: Any, axes: list[int], shape: tuple) -> Any:
    """A ``kind`` reduction of ``x`` (of ``shape``) over ``axes``, reduced dims kept (NNEF's)."""
    return ctx.layer(kind, [x, ctx.ints(axes)], nnef_attrs.reduced_shape(shape, axes), attrs={"keep_dims": True})
