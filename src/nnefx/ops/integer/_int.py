"""Integer arithmetic of the deterministic integer operator set, defined once.

Every ``cvm_*`` kernel (formal and fast) builds on these helpers, so the rules below hold
for the whole set and are written down in one place:

* **Data type.**  Tensors are ``int32`` at every operation boundary.  Kernels accept any
  integer (or boolean) array whose values fit in int32 and convert it; a float array or a
  value outside int32 is an error naming the operation and the parameter.
* **Precision.**  A tensor of precision ``p`` (1..32) holds values in ``[-alpha(p), alpha(p)]``
  with ``alpha(p) = 2**(p-1) - 1``; ``alpha(32) = 2**31 - 1``, so INT32_MIN is never a valid
  value.  ``bitlen(n)`` is the number of binary digits of ``n >= 0`` (``bitlen(0) = 0``).
* **Overflow.**  Arithmetic wraps modulo 2**32 exactly like the runtime's int32 arithmetic:
  kernels compute in int64 (or Python ints) and reduce once with :func:`wrap32`.  Because
  reduction modulo 2**32 is a ring homomorphism, sums of products computed wider and wrapped
  at the end equal the runtime's step-by-step int32 wrap-around — also when numpy's int64
  itself wraps (2**64 is a multiple of 2**32).  The precision rules (see
  :mod:`nnefx.formats.cvm.precision`) make overflow impossible for checked models; the
  wrap-around only matters for values the runtime's precision system lets escape.
* **Division** (:func:`trunc_div`): C semantics, truncation toward zero (``-9 / 4 = -2``);
  ``x / 0 = 0`` (the runtime's guard); ``INT32_MIN / -1`` wraps to INT32_MIN (C leaves it
  undefined; unreachable for in-precision values).
* **Right shift with rounding** (:func:`round_shift_right`): ``T = ((x >> (s-1)) + 1) >> 1``
  with arithmetic shifts in int32, i.e. ``floor((x + 2**(s-1)) / 2**s)``: round half toward
  +infinity (-1.5 -> -1, -2.5 -> -2, 1.5 -> 2).  Runtime departure kept: for
  ``x = 2**31 - 1`` and ``s = 1`` the ``+ 1`` wraps, giving ``-2**30`` (the seed's formula
  would give ``2**30``).  ``s = 32`` always gives 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...diagnostics import NNEFXError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: Largest attribute value the runtime accepts for sizes such as strides or scales.
MAX_ATTR = 4096


def alpha(p: int) -> int:
    """Largest magnitude a tensor of precision ``p`` may hold: ``2**(p-1) - 1``."""
    return (1 << (p - 1)) - 1


def bitlen(n: int) -> int:
    """Binary digits of ``n >= 0`` (``bitlen(0) = 0``, ``bitlen(4) = 3``)."""
    return int(n).bit_length()


def wrap32(a: Any) -> np.ndarray:
    """Reduce integers modulo 2**32 into int32 (two's complement), like C int32 arithmetic."""
    arr = np.asarray(a)
    if arr.dtype == np.int32:
        return arr
    if arr.dtype == object:  # Python ints of any size
        arr = np.array([((int(v) + 2**31) % 2**32) - 2**31 for v in arr.ravel()],
                       dtype=np.int64).reshape(arr.shape)
    return arr.astype(np.int64).astype(np.int32)


def wrap32_int(v: int) -> int:
    """:func:`wrap32` for one Python int."""
    return ((int(v) + 2**31) % 2**32) - 2**31


def saturate(x: np.ndarray, p: int) -> np.ndarray:
    """Clip to ``[-alpha(p), alpha(p)]`` (the runtime's input saturation and cvm_clip)."""
    a = alpha(p)
    return np.clip(np.asarray(x, np.int64), -a, a).astype(np.int32)


def round_shift_right(x: np.ndarray, s: int) -> np.ndarray:
    """``((x >> (s-1)) + 1) >> 1`` in int32 arithmetic (see the module docstring)."""
    t = np.asarray(x, np.int64) >> (s - 1)
    t = wrap32(t + 1).astype(np.int64)
    return (t >> 1).astype(np.int32)


def round_shift_right_int(x: int, s: int) -> int:
    """:func:`round_shift_right` for one Python int (the formal kernels' scalar form)."""
    return wrap32_int((x >> (s - 1)) + 1) >> 1


def trunc_div_int(a: int, b: int) -> int:
    """C integer division of two int32 values: toward zero, ``x / 0 = 0``, wrapped."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap32_int(q if (a < 0) == (b < 0) else -q)


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Vectorised :func:`trunc_div_int`."""
    a64 = np.asarray(a, np.int64)
    b64 = np.asarray(b, np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.abs(a64) // np.abs(safe)
    q = np.where((a64 < 0) != (safe < 0), -q, q)
    return wrap32(np.where(b64 == 0, 0, q))


def as_int32(x: Any, op: str, param: str) -> np.ndarray:
    """The int32 array a kernel works on; rejects floats and values outside int32."""
    if isinstance(x, np.ndarray) and x.dtype == np.int32:
        return x
    arr = np.asarray(x)
    if arr.dtype == bool:
        return arr.astype(np.int32)
    if not np.issubdtype(arr.dtype, np.integer):
        raise NNEFXError(f"operation '{op}': input '{param}' must hold integers, got {arr.dtype}")
    if arr.dtype.itemsize > 4 or arr.dtype == np.uint32:
        if arr.size and (int(arr.min()) < INT32_MIN or int(arr.max()) > INT32_MAX):
            raise NNEFXError(f"operation '{op}': input '{param}' holds values outside int32")
    return arr.astype(np.int32)


# --- attribute validation -------------------------------------------------------------------

def bad(op: str, attr: str, value: Any, why: str) -> NNEFXError:
    """The error for an attribute outside its range: names operation, attribute and value."""
    return NNEFXError(f"operation '{op}': attribute '{attr}' = {_show(value)} {why}")


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_show(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value) if isinstance(value, str) else str(value)


def check_int(op: str, attr: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` must be an int (not a bool) in ``[lo, hi]`` (inclusive; None = unbounded)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise bad(op, attr, value, "must be an integer")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        lo_s = "-inf" if lo is None else str(lo)
        hi_s = "inf" if hi is None else str(hi)
        raise bad(op, attr, v, f"is out of range [{lo_s}, {hi_s}]")
    return v


def check_ints(op: str, attr: str, value: Any, length: int | Sequence[int] | None = None,
               lo: int | None = None, hi: int | None = None) -> tuple[int, ...]:
    """A tuple of ints, optionally of a given length (or one of several), each in range."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),)
    if not isinstance(value, (list, tuple)):
        raise bad(op, attr, value, "must be a tuple of integers")
    if length is not None:
        allowed = (length,) if isinstance(length, int) else tuple(length)
        if len(value) not in allowed:
            raise bad(op, attr, value, f"must have {' or '.join(map(str, allowed))} elements")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise bad(op, attr, value, "must be a tuple of integers")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            lo_s = "-inf" if lo is None else str(lo)
            hi_s = "inf" if hi is None else str(hi)
            raise bad(op, attr, value, f"has element {int(v)} out of range [{lo_s}, {hi_s}]")
    return tuple(int(v) for v in value)


def check_bool(op: str, attr: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise bad(op, attr, value, "must be a logical value")
    return bool(value)


def normalize_axes(op: str, attr: str, axes: Sequence[int], ndim: int, *, unique: bool = True,
                   extra: int = 0) -> tuple[int, ...]:
    """Map negative axes to ``axis + ndim + extra``; each must fall in ``[0, ndim + extra)``."""
    out = []
    n = ndim + extra
    for a in axes:
        r = a + n if a < 0 else a
        if not 0 <= r < n:
            raise bad(op, attr, tuple(axes), f"has axis {a} out of range [{-n}, {n - 1}] for rank {ndim}")
        out.append(r)
    if unique and len(set(out)) != len(out):
        raise bad(op, attr, tuple(axes), "repeats an axis")
    return tuple(out)


def shape_error(op: str, message: str) -> NNEFXError:
    return NNEFXError(f"operation '{op}': {message}")


def size_of(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# --- registration helpers ---------------------------------------------------------------------

def precision_rule(op: Any):
    """Attach the output-precision rule ``rule(precs, shapes, out_shapes, **attribs) -> list``."""
    def deco(fn):
        op.extra["precision"] = fn
        return fn
    return deco


def cost_rule(op: Any):
    """Attach the runtime's per-element "ops" base ``rule(shapes, out_shapes, **attribs) -> int``."""
    def deco(fn):
        op.extra["cost"] = fn
        return fn
    return deco


def cvm_define(runtime_name: str, family: str, params: str, results: str = "y: tensor<integer>",
               doc: str = "", **extra: Any):
    """Register ``cvm_<runtime_name>`` in domain "cvm" with its NNEF declaration (final dialect).

    The prefix is unconditional so that the mapping from runtime names is injective
    (``cvm_clip`` -> ``cvm_cvm_clip``, ``clip`` -> ``cvm_clip``).
    """
    from ..registry import define

    name = "cvm_" + runtime_name
    declaration = f"fragment {name}( {params} ) -> ( {results} );"
    op = define(name, family, declaration, domain="cvm", doc=doc, runtime_name=runtime_name, **extra)
    # Kernels are registered through wrappers that guarantee the boundary type: int32
    # ndarrays, also for rank-0 results where numpy would hand back a scalar.
    op.formal = _registering(op, "formal_kernel")
    op.fast = _registering(op, "fast_kernel")
    return op


def _as_result(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_as_result(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == np.int32:
        return value
    return np.asarray(value, dtype=np.int32)


def _registering(op: Any, slot: str):
    def register(fn):
        def kernel(*args, **kwargs):
            return _as_result(fn(*args, **kwargs))
        kernel.__name__ = getattr(fn, "__name__", "kernel")
        kernel.__doc__ = fn.__doc__
        kernel.__wrapped__ = fn
        setattr(op, slot, kernel)
        return fn
    return register


def same_precision(precs, shapes, out_shapes, **attribs) -> list[int]:
    """The common rule: the output has the first input's precision."""
    return [precs[0]]
