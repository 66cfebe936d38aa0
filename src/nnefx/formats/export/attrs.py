"""What NNEF operation attributes mean, in terms every exporter (IR v11, ONNX) can use.

An exporter does two things: it *reads* an NNEF operation (defaults, automatic padding,
which border a normalisation implies, which coordinate transform a resize method is, where
a backward slice stops) and it *emits* the target format's nodes.  The reading is NNEF's
semantics and does not depend on the target, so it lives here once: each function returns
a neutral description (numbers, a transform name, ``None`` where no target has a form) and
leaves the wording of a refusal, and everything about nodes and layers, to the writer.
Two copies of these rules could drift apart, and then one format would silently compute
something else than the other for the same document.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...graph import Operation

#: The stop index of a backward slice that runs through index 0 (-1 would wrap to the end).
INT64_MIN = -(2 ** 63)


# --- slicing ----------------------------------------------------------------------------------

def slice_stop(stop: int, step: int) -> int:
    """``stop`` for a slice node: a backward slice (``step < 0``) ending before index 0 stops at
    :data:`INT64_MIN`, since a negative stop would count from the end in IR and ONNX alike."""
    return INT64_MIN if step < 0 and stop < 0 else stop


def slice_bounds(plan: Sequence[tuple[int, int, int, int]]) -> tuple[list[int], list[int], list[int], list[int]]:
    """(axes, starts, stops, steps) of resolved slice items ``(axis, first index, step, count)``
    (as :func:`nnefx.ops.shape._slice_plan` gives them)."""
    axes, starts, stops, steps = [], [], [], []
    for a, b, s, count in plan:
        axes.append(a)
        starts.append(b)
        stops.append(slice_stop(b + count * s, s))
        steps.append(s)
    return axes, starts, stops, steps


# --- windows ----------------------------------------------------------------------------------

def window_padding(op: Operation, n: int, size: list[int], extents: Callable[[], Sequence[int]],
                   out_extents: Callable[[], Sequence[int]] | None = None
                   ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Explicit padding, stride and dilation of a windowed operation over ``n`` dimensions.

    ``padding``/``stride``/``dilation`` are validated and defaulted as the operation itself
    does (empty stride/dilation = 1s); an empty padding is NNEF's automatic one, resolved
    against the input extents ``extents()`` (and, for a transposed operation, the output
    extents ``out_extents()``).  The extents are asked for only then, so a writer that
    cannot know them statically fails only where it must.
    """
    from ...ops._common import resolve_padding_down, resolve_padding_up, window_arrays

    size, pads, stride, dil = window_arrays(op.op, n, size, op.attribs.get("padding", []),
                                            op.attribs.get("stride", []), op.attribs.get("dilation", []))
    if pads is None:
        xs = extents()
        if out_extents is not None:
            pads = resolve_padding_up(xs, out_extents(), size, stride, dil, pads)
        else:
            pads = resolve_padding_down(xs, size, stride, dil, pads)
    return [tuple(p) for p in pads], stride, dil


def window_span(count: int, size: int, stride: int, dilation: int) -> int:
    """The extent ``count`` windows cover: the last one starts at ``(count - 1) * stride`` and
    reaches ``(size - 1) * dilation`` further (a transposed operation's full output extent)."""
    return (count - 1) * stride + (size - 1) * dilation + 1


def box_mode(op: Operation) -> tuple[str, bool]:
    """(border, normalize) of a window sum or mean (``box``, ``avg_pool``, ``rms_pool``).

    ``avg_pool`` and ``rms_pool`` always divide, ``box`` only with ``normalize``; border
    'ignore' divides by the count of real values, so for an undivided sum it is the same
    as padding zeros ('constant').
    """
    border = op.attribs.get("border", "constant")
    normalize = op.op != "box" or bool(op.attribs.get("normalize", False))
    if border == "ignore" and not normalize:
        border = "constant"
    return border, normalize


def lrn_params(op: Operation) -> tuple[float, float, float]:
    """(alpha, beta, bias) of ``local_response_normalization`` with NNEF's defaults."""
    return (float(op.attribs.get("alpha", 1.0)), float(op.attribs.get("beta", 0.5)),
            float(op.attribs.get("bias", 1.0)))


# --- shapes -----------------------------------------------------------------------------------

def transpose_perm(op: Operation, rank: int) -> list[int]:
    """The full permutation of ``transpose``: NNEF's ``axes`` may list only the leading
    dimensions; the others keep their places."""
    axes = [int(a) for a in op.attribs["axes"]]
    return axes + list(range(len(axes), rank))


# --- element-wise, reductions, normalisation --------------------------------------------------

def literal_bounds(a: Any, b: Any) -> tuple[float, float] | None:
    """``clamp``'s bounds where a clip node means the same: both literals and ``a <= b``
    (NNEF's max(min(x, b), a) gives ``a`` everywhere when ``a > b``; clip nodes differ)."""
    if not isinstance(a, str) and not isinstance(b, str) and float(a) <= float(b):
        return float(a), float(b)
    return None


#: NNEF reduction -> what it computes ("sum", "mean", "max", "min", "any", "all").
REDUCTIONS = {"sum_reduce": "sum", "mean_reduce": "mean", "max_reduce": "max", "min_reduce": "min",
              "any_reduce": "any", "all_reduce": "all"}


def reduction(op: Operation) -> str:
    """What reduction ``op`` computes: ``sum_reduce`` with ``normalize`` is a mean."""
    kind = REDUCTIONS[op.op]
    if kind == "sum" and op.attribs.get("normalize", False):
        return "mean"
    return kind


def reduced_shape(shape: Sequence[Any], axes: Sequence[int]) -> tuple:
    """``shape`` after reducing ``axes`` with the reduced dimensions kept (as NNEF keeps them)."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def batch_norm_inputs(op: Operation) -> dict[str, Any]:
    """mean, variance, offset and scale of ``batch_normalization`` (NNEF defaults: offset 0,
    scale 1), in that order."""
    return {k: op.inputs.get(k, 1.0 if k == "scale" else 0.0) for k in ("mean", "variance", "offset", "scale")}


# --- resizing ---------------------------------------------------------------------------------

_LINEAR_TRANSFORM = {"symmetric": "half_pixel", "asymmetric": "asymmetric", "aligned": "align_corners"}


def linear_upsample_transform(op: Operation) -> tuple[str, str, str | None]:
    """(method, border, coordinate transform) of ``multilinear_upsample``.

    The transform is named as both IR Interpolate-11 and ONNX Resize name it: 'symmetric' =
    half-pixel centres, 'asymmetric' = i / factor, 'aligned' = corners aligned.  Both clamp
    source coordinates at the edges, which is NNEF's 'replicate'; a zero ('constant') border
    is read only by the first two methods, and then neither has a form: the transform is None.
    """
    method = op.attribs.get("method", "symmetric")
    border = op.attribs.get("border", "replicate")
    transform = _LINEAR_TRANSFORM.get(method)
    if border != "replicate" and method != "aligned":
        transform = None
    return method, border, transform
