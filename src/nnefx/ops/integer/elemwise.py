"""Elementwise operators (the CVM runtime's "Operator Math Formalization", "Elemwise Operators"): ``cvm_abs``, ``cvm_negative``,
``cvm_cvm_precision``, ``cvm_elemwise_add``, ``cvm_elemwise_sub``, ``cvm_clip``,
``cvm_cvm_clip``, ``cvm_cvm_right_shift``, ``cvm_cvm_left_shift``.

Departures from the seed, following the runtime (cvm.md §3.3.5):

* ``cvm_clip``'s ``is_sign`` attribute is ignored: the clip is always symmetric (ex13).
* ``cvm_right_shift`` overflows like int32 for ``x = 2**31 - 1, shift_bit = 1`` (see
  :func:`._int.round_shift_right`).
* ``abs``/``negative`` of INT32_MIN wrap to INT32_MIN (C int32); ``cvm_precision`` of
  INT32_MIN is 32 (the runtime would loop forever; no in-precision value reaches it).
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ._int import (
    INT32_MAX,
    alpha,
    as_int32,
    bad,
    bitlen,
    check_int,
    cvm_define,
    precision_rule,
    round_shift_right,
    round_shift_right_int,
    same_precision,
    shape_error,
    wrap32,
    wrap32_int,
)

_X = "x: tensor<integer>"


def _unary(name: str, scalar, vector, doc: str, params: str = _X, check=None):
    """Register an elementwise unary op: formal applies ``scalar`` element by element."""
    op = cvm_define(name, "integer.elemwise", params, doc=doc)
    full = "cvm_" + name

    @op.shape
    def shape(x, **attribs):
        if check is not None:
            check(**attribs)
        return tuple(x)

    @op.formal
    def formal(x, **attribs):
        x = as_int32(x, full, "x")
        if check is not None:
            check(**attribs)
        y = np.empty_like(x)
        for d in np.ndindex(x.shape):
            y[d] = scalar(int(x[d]), **attribs)
        return y

    @op.fast
    def fast(x, **attribs):
        x = as_int32(x, full, "x")
        if check is not None:
            check(**attribs)
        return vector(x, **attribs)

    return op


def _abs_scalar(x):
    return wrap32_int(x if x >= 0 else -x)


ABS = _unary("abs", _abs_scalar, lambda x: wrap32(np.abs(x.astype(np.int64))), "|x| (int32).")
precision_rule(ABS)(same_precision)

NEG = _unary("negative", lambda x: wrap32_int(-x), lambda x: wrap32(-x.astype(np.int64)), "-x (int32).")
precision_rule(NEG)(same_precision)


def _precision_scalar(x):
    """1 for x = 0, else ceil(log2(|x| + 1)) = bitlen(|x|)."""
    return 1 if x == 0 else bitlen(abs(x))


def _precision_vector(x):
    a = np.abs(x.astype(np.int64))
    # bitlen via frexp is exact for |x| <= 2**31 (float64 holds them exactly).
    _, e = np.frexp(a.astype(np.float64))
    return np.where(a == 0, 1, e).astype(np.int32)


PREC = _unary("cvm_precision", _precision_scalar, _precision_vector,
              "Bits of |x| (0 takes 1 bit).")
precision_rule(PREC)(lambda precs, shapes, out_shapes, **a: [6])


# --- elemwise_add / elemwise_sub: identical shapes, no broadcasting ------------------------------

def _binary(name: str, scalar, vector, doc: str):
    op = cvm_define(name, "integer.elemwise", "a: tensor<integer>, b: tensor<integer>", doc=doc)
    full = "cvm_" + name

    @op.shape
    def shape(a, b):
        if tuple(a) != tuple(b):
            raise shape_error(full, f"inputs must have identical shapes, got {tuple(a)} and {tuple(b)}")
        return tuple(a)

    @op.formal
    def formal(a, b):
        a = as_int32(a, full, "a")
        b = as_int32(b, full, "b")
        y = np.empty(shape(a.shape, b.shape), np.int32)
        for d in np.ndindex(y.shape):
            y[d] = scalar(int(a[d]), int(b[d]))
        return y

    @op.fast
    def fast(a, b):
        a = as_int32(a, full, "a")
        b = as_int32(b, full, "b")
        shape(a.shape, b.shape)
        return vector(a.astype(np.int64), b.astype(np.int64))

    precision_rule(op)(lambda precs, shapes, out_shapes, **at: [max(precs[0], precs[1]) + 1])
    return op


_binary("elemwise_add", lambda a, b: wrap32_int(a + b), lambda a, b: wrap32(a + b), "A + B (int32).")
_binary("elemwise_sub", lambda a, b: wrap32_int(a - b), lambda a, b: wrap32(a - b), "A - B (int32).")


# --- clip ----------------------------------------------------------------------------------------

def _clip_check(a_min=None, a_max=None):
    lo = check_int("cvm_clip", "a_min", a_min, -INT32_MAX, INT32_MAX)
    hi = check_int("cvm_clip", "a_max", a_max, -INT32_MAX, INT32_MAX)
    if lo >= hi:
        raise bad("cvm_clip", "a_min", lo, f"must be smaller than a_max = {hi}")


def _clip_scalar(x, a_min=None, a_max=None):
    if x >= a_max:
        return a_max
    if x <= a_min:
        return a_min
    return x


CLIP = _unary("clip", _clip_scalar, lambda x, a_min=None, a_max=None: np.clip(x, a_min, a_max).astype(np.int32),
              "Clip into [a_min, a_max].", _X + ", a_min: integer, a_max: integer", _clip_check)


@precision_rule(CLIP)
def clip_precision(precs, shapes, out_shapes, a_min=0, a_max=0, **attribs):
    """bitlen(max(|a_min|, |a_max|) + 1) + 1 -- e.g. 9 for (-127, 127), as the runtime."""
    return [bitlen(max(abs(a_min), abs(a_max)) + 1) + 1]


# --- cvm_clip, cvm_right_shift, cvm_left_shift ---------------------------------------------------

def _prec_check(op):
    def check(precision=None, **attribs):
        check_int(op, "precision", precision, 1, 32)
    return check


def _shift_check(op):
    def check(precision=None, shift_bit=None):
        check_int(op, "precision", precision, 1, 32)
        check_int(op, "shift_bit", shift_bit, 1, 32)
    return check


def _cvm_clip_scalar(x, precision=None):
    a = alpha(precision)
    return min(max(x, -a), a)


CVM_CLIP = _unary("cvm_clip", _cvm_clip_scalar,
                  lambda x, precision=None: np.clip(x, -alpha(precision), alpha(precision)).astype(np.int32),
                  "Clip into [-alpha(p), alpha(p)], alpha(p) = 2^(p-1) - 1 (is_sign ignored).",
                  _X + ", precision: integer", _prec_check("cvm_cvm_clip"))
precision_rule(CVM_CLIP)(lambda precs, shapes, out_shapes, precision=None, **a: [precision])


def _rshift_scalar(x, precision=None, shift_bit=None):
    return _cvm_clip_scalar(round_shift_right_int(x, shift_bit), precision)


def _rshift_vector(x, precision=None, shift_bit=None):
    a = alpha(precision)
    return np.clip(round_shift_right(x, shift_bit), -a, a).astype(np.int32)


RSHIFT = _unary("cvm_right_shift", _rshift_scalar, _rshift_vector,
                "Rounding right shift (half toward +inf), then clip to the precision.",
                _X + ", precision: integer, shift_bit: integer", _shift_check("cvm_cvm_right_shift"))
precision_rule(RSHIFT)(lambda precs, shapes, out_shapes, precision=None, **a: [precision])


def _lshift_scalar(x, precision=None, shift_bit=None):
    return _cvm_clip_scalar(wrap32_int(x * (1 << shift_bit)), precision)


def _lshift_vector(x, precision=None, shift_bit=None):
    a = alpha(precision)
    return np.clip(wrap32(x.astype(np.int64) << shift_bit), -a, a).astype(np.int32)


LSHIFT = _unary("cvm_left_shift", _lshift_scalar, _lshift_vector,
                "x * 2^shift_bit (int32), then clip to the precision.",
                _X + ", precision: integer, shift_bit: integer", _shift_check("cvm_cvm_left_shift"))


@precision_rule(LSHIFT)
def lshift_precision(precs, shapes, out_shapes, precision=None, shift_bit=None, **attribs):
    if precs[0] + shift_bit > 32:
        raise NNEFXError(f"operation 'cvm_cvm_left_shift': input precision {precs[0]} + shift_bit "
                         f"{shift_bit} exceeds 32 bits")
    return [precision]


