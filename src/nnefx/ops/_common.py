"""Shared shape and data helpers for the NNEF operator families.

Why a module of its own: broadcasting, axis checks, window arithmetic (padding, stride,
dilation) and border handling are used by many families and must agree everywhere, between
the shape rules, the formal kernels and the fast kernels.

Conventions (NNEF 1.0.5 §4):

* Broadcasting aligns dimensions from index 0 and pads the shorter shape with *trailing*
  1s — the opposite of numpy.  :func:`nnef_view` right-pads an array's shape so numpy
  broadcasting then does the NNEF thing.
* Shape rules see ``None`` for an unknown extent; they propagate it.
* Data types of results: ``scalar`` -> ``np.float32``, ``integer`` -> ``np.int64``,
  ``logical`` -> ``np.bool_``.  ``scalar`` means the *working float type*
  (:func:`float_type`): float32, or float64 while a kernel of a float64 operation runs
  (:func:`wide_floats`), so one kernel serves both and a float64 graph computes in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..dims import Dim

DTYPE_OF = {"scalar": np.float32, "integer": np.int64, "logical": np.bool_, "string": np.dtype(object)}

# --- the working float type --------------------------------------------------------------------
#
# The accumulation contract (nnefx.etypes): a kernel computes at least as wide as its element
# type.  float32 kernels are the common case and stay as they are; a float64 operation (an
# argument or a result typed f64) runs its kernel under ``wide_floats``, and every kernel asks
# ``float_type()`` / ``scalar()`` instead of naming float32, so the same code computes in
# float64 there.  A context variable, not a parameter: kernels call each other (compounds'
# fast kernels, shared helpers) and the type must reach all of them without every signature
# growing an argument; and it is per thread/task, so concurrent sessions do not meet.

_FLOAT: ContextVar[type] = ContextVar("nnefx_float_type", default=np.float32)


def float_type() -> type:
    """The float type kernels compute ``scalar`` data in now: float32, or float64 inside
    :func:`wide_floats`."""
    return _FLOAT.get()


def wide_floats(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` run with float64 as the working float type (a float64 operation's kernel)."""
    def wide(*args: Any, **kwargs: Any) -> Any:
        token = _FLOAT.set(np.float64)
        try:
            return kernel(*args, **kwargs)
        finally:
            _FLOAT.reset(token)

    wide.__wrapped__ = kernel  # type: ignore[attr-defined]
    wide.wide_floats = True  # type: ignore[attr-defined]
    return wide

# --- errors ---------------------------------------------------------------------------------

def op_error(op: str, message: str) -> NNEFXError:
    """An error about operation ``op``; the caller attaches the file location."""
    return NNEFXError(f"operation '{op}': {message}")


def attr_error(op: str, attr: str, value: Any, why: str) -> NNEFXError:
    """An invalid attribute: names the operation, the attribute and its value."""
    return NNEFXError(f"operation '{op}': attribute '{attr}' = {value!r} {why}")


# --- data conversions --------------------------------------------------------------------------

def scalar(x: Any) -> np.ndarray:
    """``x`` as an array of the working float type (float32, float64 in a float64 operation;
    literals arrive as Python numbers)."""
    return np.asarray(x, dtype=_FLOAT.get())


def storage_dtype(dtype: str) -> Any:
    """The numpy type a kernel makes results of NNEF data type ``dtype`` in (``scalar``: the
    working float type)."""
    return _FLOAT.get() if dtype == "scalar" else DTYPE_OF[dtype]


def as_dtype(x: Any, dtype: str | None) -> np.ndarray:
    """``x`` converted to the numpy type of the NNEF data type (``None``: keep its own;
    ``scalar``: the working float type)."""
    if dtype is None:
        return np.asarray(x)
    return np.asarray(x, dtype=_FLOAT.get() if dtype == "scalar" else DTYPE_OF[dtype])


def relu_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``relu`` of float32 ``x`` written to ``out`` (may be ``x`` itself): ``fmax(x, 0) + 0``.

    ``fmax`` drops a NaN operand (NaN -> 0) but may keep -0.0 against +0.0; adding +0.0
    turns any zero into +0.0 and leaves every other value unchanged.  The one definition
    shared by the ``relu`` fast kernel and the ReLU fused into a convolution's output, so
    the two cannot drift apart.
    """
    np.fmax(x, np.float32(0.0), out=out)
    out += np.float32(0.0)
    return out


# --- broadcasting ----------------------------------------------------------------------------

def broadcast_shapes(op: str, *shapes: Sequence[int | None]) -> tuple:
    """The NNEF broadcast of ``shapes``: align from dimension 0, pad with trailing 1s.

    Per dimension the extents must be equal or one of them 1; an unknown (``None``) extent
    broadcasts with 1 to ``None`` and with a known extent k > 1 to k (assumed compatible).
    A symbolic extent (:class:`nnefx.dims.Dim`) acts the same way: with 1 or itself it stays,
    with k > 1 it gives k (valid only if it is 1 or k), with anything else it is unknown.
    """
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | Dim | None] = []
    for i in range(rank):
        dim: int | Dim | None = 1
        for s in shapes:
            d = s[i] if i < len(s) else 1
            if isinstance(d, Dim) or isinstance(dim, Dim):
                dim = _broadcast_symbolic(dim, d)
                continue
            if d == 1:
                continue
            if d is None:
                if dim == 1:
                    dim = None
                continue
            if dim is None or dim == 1:
                dim = d
            elif dim != d:
                raise op_error(op, "shapes " + " and ".join(str(tuple(s)) for s in shapes)
                               + f" cannot be broadcast (dimension {i}: {dim} vs {d})")
        out.append(dim)
    return tuple(out)


def _broadcast_symbolic(dim: Any, d: Any) -> Any:
    if isinstance(d, Dim) and isinstance(dim, Dim):
        return dim if dim.terms == d.terms else None
    sym, other = (d, dim) if isinstance(d, Dim) else (dim, d)
    if other is None:
        return None
    return sym if other == 1 else other


def nnef_view(x: np.ndarray, rank: int) -> np.ndarray:
    """``x`` reshaped with trailing 1s up to ``rank``, so numpy broadcasting aligns like NNEF."""
    if x.ndim >= rank:
        return x
    return x.reshape(x.shape + (1,) * (rank - x.ndim))


def nnef_broadcast(*arrays: np.ndarray) -> list[np.ndarray]:
    """Arrays right-padded to a common rank (numpy broadcasting then follows NNEF's rule)."""
    rank = max(a.ndim for a in arrays)
    return [nnef_view(a, rank) for a in arrays]


def checked_broadcast(op: str, *arrays: Any) -> list[np.ndarray]:
    """Check that the arrays broadcast the NNEF way, then right-pad them for numpy."""
    arrays_ = [np.asarray(a) for a in arrays]
    broadcast_shapes(op, *(a.shape for a in arrays_))
    return nnef_broadcast(*arrays_)


def broadcast_index(index: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element of an operand of ``shape`` that broadcasting maps output ``index`` to."""
    return tuple(0 if shape[k] == 1 else index[k] for k in range(len(shape)))


# --- attribute checks ------------------------------------------------------------------------

def check_axes(op: str, axes: Sequence[int], rank: int, attr: str = "axes", unique: bool = True) -> list[int]:
    """Axes must lie in [0, rank) (NNEF has no negative axes) and be unique."""
    axes = list(axes)
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not 0 <= a < rank:
            raise attr_error(op, attr, axes, f"has an axis outside [0, {rank})")
    if unique and len(set(axes)) != len(axes):
        raise attr_error(op, attr, axes, "repeats an axis")
    return [int(a) for a in axes]


def check_positive(op: str, attr: str, values: Sequence[int], allow_zero: bool = False) -> None:
    lo = 0 if allow_zero else 1
    if any(v is not None and v < lo for v in values):
        raise attr_error(op, attr, list(values), "must have items >= 0" if allow_zero else "must have items > 0")


# --- sliding windows ---------------------------------------------------------------------------

BORDERS = ("ignore", "constant", "replicate", "reflect", "reflect-even")


def check_border(op: str, border: str, allowed: Sequence[str]) -> None:
    if border not in allowed:
        raise attr_error(op, "border", border, "is not one of " + ", ".join(repr(b) for b in allowed))


def window_arrays(op: str, n: int, size: Sequence[int], padding: Sequence, stride: Sequence[int],
                  dilation: Sequence[int]) -> tuple[list[int], list | None, list[int], list[int]]:
    """Validate ``size``/``padding``/``stride``/``dilation`` for ``n`` windowed dimensions.

    Returns ``(size, padding or None for automatic, stride, dilation)`` with empty
    ``stride``/``dilation`` replaced by 1s.
    """
    size = list(size)
    if len(size) != n:
        raise attr_error(op, "size", size, f"must have {n} items")
    check_positive(op, "size", size)
    stride = list(stride) or [1] * n
    dilation = list(dilation) or [1] * n
    if len(stride) != n:
        raise attr_error(op, "stride", stride, f"must be empty or have {n} items")
    if len(dilation) != n:
        raise attr_error(op, "dilation", dilation, f"must be empty or have {n} items")
    check_positive(op, "stride", stride)
    check_positive(op, "dilation", dilation)
    pads: list | None = None
    if len(padding):
        if len(padding) != n:
            raise attr_error(op, "padding", list(padding), f"must be empty or have {n} items")
        pads = []
        for item in padding:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise attr_error(op, "padding", list(padding), "must hold (before, after) pairs")
            pads.append((int(item[0]), int(item[1])))
    return size, pads, [int(s) for s in stride], [int(d) for d in dilation]


def dilated(f: int, d: int) -> int:
    """Extent of a kernel of size ``f`` with dilation ``d``."""
    return (f - 1) * d + 1


def auto_padding_down(X: int, f: int, s: int, d: int) -> tuple[int, int]:
    """Automatic padding of a basic (down-scaling) op: x = ceil(X/s), extra padding after."""
    x = -(-X // s)
    t = max((x - 1) * s + dilated(f, d) - X, 0)
    return t // 2, t - t // 2


def auto_padding_up(x: int, X: int, f: int, s: int, d: int) -> tuple[int, int]:
    """Automatic padding of a reverse (up-scaling) op producing extent ``X`` from ``x``."""
    t = max((x - 1) * s + dilated(f, d) - X, 0)
    return t // 2, t - t // 2


def down_extent(op: str, dim: int, X: int | None, f: int, s: int, d: int,
                pad: tuple[int, int] | None) -> int | None:
    """Output extent of a basic op along one dimension (``None`` stays ``None``)."""
    if X is None:
        return None
    if pad is None:
        return -(-X // s)
    p, q = pad
    fd = dilated(f, d)
    if p + X + q < fd:
        raise op_error(op, f"padded extent {p + X + q} of dimension {dim} is smaller than the "
                           f"dilated window {fd}")
    return (p + X + q - fd) // s + 1


def up_extent(op: str, dim: int, x: int | None, f: int, s: int, d: int,
              pad: tuple[int, int] | None) -> int | None:
    """Output extent of a reverse op along one dimension when no ``output_shape`` is given."""
    if x is None:
        return None
    if pad is None:
        return x * s
    X = (x - 1) * s + dilated(f, d) - (pad[0] + pad[1])
    if X <= 0:
        raise op_error(op, f"dimension {dim} would have non-positive extent {X}")
    return X


def resolve_padding_down(X: Sequence[int], size: Sequence[int], stride: Sequence[int],
                         dilation: Sequence[int], pads: list | None) -> list[tuple[int, int]]:
    """Concrete padding of a basic op (automatic padding resolved against extents ``X``)."""
    if pads is not None:
        return pads
    return [auto_padding_down(X[i], size[i], stride[i], dilation[i]) for i in range(len(size))]


def resolve_padding_up(x: Sequence[int], X: Sequence[int], size: Sequence[int], stride: Sequence[int],
                       dilation: Sequence[int], pads: list | None) -> list[tuple[int, int]]:
    if pads is not None:
        return pads
    return [auto_padding_up(x[i], X[i], size[i], stride[i], dilation[i]) for i in range(len(size))]


def check_output_shape(op: str, output_shape: Sequence[int], x: Sequence[int | None], size, stride, dilation,
                       pads, offset: int) -> None:
    """A given ``output_shape`` must down-scale back to the input extents (spatial/windowed dims)."""
    for i in range(len(size)):
        X = output_shape[offset + i]
        xi = x[offset + i]
        if xi is None:
            continue
        pad = pads[i] if pads is not None else None
        back = down_extent(op, offset + i, X, size[i], stride[i], dilation[i], pad)
        if back != xi:
            raise attr_error(op, "output_shape", list(output_shape),
                             f"does not down-scale to the input extent {xi} in dimension {offset + i}")


def border_index(j: int, z: int, border: str) -> int | None:
    """Map index ``j`` of an extent-``z`` axis into range by ``border``; None = outside.

    ``None`` means the position lies outside and has no input element: the caller uses the
    constant (``'constant'``) or skips it (``'ignore'``).  Reflections repeat periodically
    when the padding exceeds the extent (the spec defines one reflection; repeating is the
    natural continuation and what ``numpy.pad`` does).
    """
    if 0 <= j < z:
        return j
    if border in ("constant", "ignore") or z <= 0:
        return None
    if border == "replicate":
        return 0 if j < 0 else z - 1
    if border == "reflect":
        if z == 1:
            return 0
        period = 2 * z - 2
        j = j % period
        return j if j < z else period - j
    if border == "reflect-even":
        period = 2 * z
        j = j % period
        return j if j < z else period - 1 - j
    raise NNEFXError(f"unknown border '{border}'")


_NP_MODES = {"replicate": "edge", "reflect": "reflect", "reflect-even": "symmetric"}


def pad_array(x: np.ndarray, pads: Sequence[tuple[int, int]], border: str, value: float = 0.0) -> np.ndarray:
    """Extend (or, for negative amounts, crop) ``x`` per axis by ``border`` (§3.3).

    ``'constant'``/``'ignore'`` fill with ``value``; the others mirror :func:`border_index`.
    """
    crop = tuple(slice(max(-p, 0), x.shape[k] - max(-q, 0)) for k, (p, q) in enumerate(pads))
    x = x[crop]
    if border not in ("constant", "ignore") and 0 in x.shape:
        raise NNEFXError(f"negative padding {list(pads)} leaves nothing for border '{border}' to read")
    widths = [(max(p, 0), max(q, 0)) for p, q in pads]
    if not any(p or q for p, q in widths):
        return x
    if border in ("constant", "ignore"):
        return np.pad(x, widths, mode="constant", constant_values=value)
    if border == "reflect" and any(x.shape[k] == 1 and (p or q) for k, (p, q) in enumerate(widths)):
        # numpy cannot reflect an extent-1 axis; a one-element reflection is that element.
        for k, w in enumerate(widths):
            if w != (0, 0):
                x = np.pad(x, [w if i == k else (0, 0) for i in range(x.ndim)],
                           mode="edge" if x.shape[k] == 1 else "reflect")
        return x
    return np.pad(x, widths, mode=_NP_MODES[border])


# --- the operator contract ---------------------------------------------------------------------
# The attribute guard lives in :mod:`nnefx.ops.contract` and is installed by ``define()`` on
# every operation; these names stay for family modules written before that.

def guard_attributes(op: Any) -> None:
    """Install the contract on ``op``'s rule and kernels (``define()`` already does; idempotent)."""
    from .contract import guard

    op.shape_rule = guard(op, op.shape_rule, is_shape_rule=True)
    op.formal_kernel = guard(op, op.formal_kernel)
    op.fast_kernel = guard(op, op.fast_kernel)


def guard_family(family: str) -> None:
    """Guard every operation of ``family`` — a no-op for operations made by ``define()``,
    which guards them itself; kept so older family modules keep working."""
    from .registry import _REGISTRY

    for op in list(_REGISTRY.values()):
        if op.family == family:
            guard_attributes(op)

