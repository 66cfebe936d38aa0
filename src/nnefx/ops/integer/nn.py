"""NN operators: ``cvm_conv2d``, ``cvm_dense``, ``cvm_relu``, ``cvm_max_pool2d``,
``cvm_upsampling`` (the CVM runtime's "Operator Math Formalization", "NN Operators").

Accumulation is int32 with wrap-around (see :mod:`._int`).  Departures from the seed, all
following the runtime (cvm.md §3.3.3):

* conv2d sums the kernel window over ``[0, KH)`` x ``[0, KW)``; the seed's sums written to
  ``KH``/``KW`` inclusive are a typo.
* max_pool2d in ceil mode rejects a geometry whose last window starts in the bottom/right
  padding (``(OH-1)*SH - PH >= H``); the seed has no such check.
* The fast kernels multiply in float64 (BLAS) only when every partial sum is provably an
  integer below 2**53 in magnitude (then float arithmetic is exact whatever the summation
  order), and fall back to int64 otherwise.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ._int import (
    INT32_MIN,
    MAX_ATTR,
    as_int32,
    bad,
    bitlen,
    check_bool,
    check_int,
    check_ints,
    cost_rule,
    cvm_define,
    precision_rule,
    same_precision,
    shape_error,
    wrap32,
    wrap32_int,
)


def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of int64 arrays, exactly (mod 2**64): float64 BLAS when provably exact."""
    k = a.shape[-1]
    amax = int(np.abs(a).max()) if a.size else 0
    bmax = int(np.abs(b).max()) if b.size else 0
    if amax * bmax * max(k, 1) < 2**53:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a, b)


# --- conv2d --------------------------------------------------------------------------------------

CONV = cvm_define(
    "conv2d", "integer.nn",
    "x: tensor<integer>, w: tensor<integer>, b: tensor<integer> = 0, channels: integer, "
    "kernel_size: integer[], strides: integer[] = [1, 1], padding: integer[] = [0, 0], "
    "dilation: integer[] = [1, 1], groups: integer = 1, use_bias: logical = true",
    doc="Grouped, dilated 2-D convolution, NCHW / OIHW, int32 accumulation.")


def conv_geometry(x, w, b=None, *, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                  dilation=(1, 1), groups=1, use_bias=True):
    """Validate conv2d's shapes and attributes; returns (output shape, normalized attributes)."""
    op = "cvm_conv2d"
    channels = check_int(op, "channels", channels, 1)
    kh, kw = check_ints(op, "kernel_size", kernel_size, 2, 1)
    sh, sw = check_ints(op, "strides", strides, 2, 1, MAX_ATTR)
    ph, pw = check_ints(op, "padding", padding, 2, 0, MAX_ATTR)
    dh, dw = check_ints(op, "dilation", dilation, 2, 1, MAX_ATTR)
    groups = check_int(op, "groups", groups, 1)
    use_bias = check_bool(op, "use_bias", use_bias)
    if len(x) != 4:
        raise shape_error(op, f"input must be 4-D (N, C, H, W), got shape {tuple(x)}")
    n, c, h, wd = x
    if c % groups:
        raise bad(op, "groups", groups, f"must divide the input channels {c}")
    if channels % groups:
        raise bad(op, "groups", groups, f"must divide channels = {channels}")
    expect = (channels, c // groups, kh, kw)
    if tuple(w) != expect:
        raise shape_error(op, f"weight shape {tuple(w)} must be {expect} "
                              "(channels, C / groups, kernel_size)")
    if use_bias and (b is None or tuple(b) != (channels,)):
        raise shape_error(op, f"bias shape {None if b is None else tuple(b)} must be ({channels},)")
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if ekh > h + 2 * ph or ekw > wd + 2 * pw:
        raise shape_error(op, f"dilated kernel ({ekh}, {ekw}) exceeds the padded input "
                              f"({h + 2 * ph}, {wd + 2 * pw})")
    oh = (h + 2 * ph - ekh) // sh + 1
    ow = (wd + 2 * pw - ekw) // sw + 1
    return (n, channels, oh, ow), (kh, kw, sh, sw, ph, pw, dh, dw, groups, use_bias)


@CONV.shape
def conv_shape(x, w, b=None, **attribs):
    return conv_geometry(x, w, b, **attribs)[0]


def _conv_inputs(x, w, b, attribs):
    x = as_int32(x, "cvm_conv2d", "x")
    w = as_int32(w, "cvm_conv2d", "w")
    use_bias = attribs.get("use_bias", True)
    b = as_int32(b, "cvm_conv2d", "b") if use_bias else None
    shape, geo = conv_geometry(x.shape, w.shape, None if b is None else b.shape, **attribs)
    return x, w, b, shape, geo


@CONV.formal
def conv_formal(x, w, b=0, **attribs):
    """Y[n,oc,p,q] = sum_ic sum_{i<KH} sum_{j<KW} pad(n, (oc div OPG)*IC + ic,
    p*SH - PH + i*DH, q*SW - PW + j*DW) * W[oc,ic,i,j] (+ B[oc])."""
    x, w, b, shape, (kh, kw, sh, sw, ph, pw, dh, dw, groups, _) = _conv_inputs(x, w, b, attribs)
    n_, oc_, oh, ow = shape
    _, _, h, wd = x.shape
    ic_n = w.shape[1]
    opg = oc_ // groups
    y = np.zeros(shape, np.int32)

    def pad(n, j, r, c):
        return int(x[n, j, r, c]) if 0 <= r < h and 0 <= c < wd else 0

    for n in range(n_):
        for oc in range(oc_):
            for p in range(oh):
                for q in range(ow):
                    acc = 0
                    for ic in range(ic_n):
                        for i in range(kh):
                            for j in range(kw):
                                acc += pad(n, (oc // opg) * ic_n + ic, p * sh - ph + i * dh,
                                           q * sw - pw + j * dw) * int(w[oc, ic, i, j])
                    if b is not None:
                        acc += int(b[oc])
                    y[n, oc, p, q] = wrap32_int(acc)
    return y


@CONV.fast
def conv_fast(x, w, b=0, **attribs):
    """im2col per group, one batched matrix product."""
    x, w, b, shape, (kh, kw, sh, sw, ph, pw, dh, dw, groups, _) = _conv_inputs(x, w, b, attribs)
    n, oc, oh, ow = shape
    c = x.shape[1]
    ic = c // groups
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = np.empty((n, c, kh * kw, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            cols[:, :, i * kw + j] = xp[:, :, r0:r0 + sh * (oh - 1) + 1:sh, c0:c0 + sw * (ow - 1) + 1:sw]
    cols = cols.reshape(n, groups, ic * kh * kw, oh * ow)
    wm = w.astype(np.int64).reshape(groups, oc // groups, ic * kh * kw)
    y = _exact_matmul(wm[None], cols).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + b.astype(np.int64)[None, :, None, None]
    return wrap32(y)


@precision_rule(CONV)
def conv_precision(precs, shapes, out_shapes, use_bias=True, **attribs):
    """Inputs of at most 8 bits; q = p0 + p1 + bitlen(IC*KH*KW); bias: max(q, p2) + 1."""
    if precs[0] > 8 or precs[1] > 8:
        raise _precision_error("cvm_conv2d", precs)
    w = shapes[1]
    q = precs[0] + precs[1] + bitlen(w[1] * w[2] * w[3])
    return [max(q, precs[2]) + 1 if use_bias else q]


@cost_rule(CONV)
def conv_cost(shapes, out_shapes, use_bias=True, **attribs):
    w = shapes[1]
    return w[1] * w[2] * w[3] * 3 + (1 if use_bias else 0)


def _precision_error(op, precs):
    return NNEFXError(f"operation '{op}': inputs must have at most 8 bits of precision "
                      f"(data {precs[0]}, weight {precs[1]})")


# --- dense ---------------------------------------------------------------------------------------

DENSE = cvm_define(
    "dense", "integer.nn",
    "x: tensor<integer>, w: tensor<integer>, b: tensor<integer> = 0, units: integer, "
    "use_bias: logical = true",
    doc="Fully connected layer Y = X W^T (+ B), int32 accumulation.")


@DENSE.shape
def dense_shape(x, w, b=None, units=None, use_bias=True):
    op = "cvm_dense"
    units = check_int(op, "units", units, 1)
    use_bias = check_bool(op, "use_bias", use_bias)
    if len(x) != 2:
        raise shape_error(op, f"input must be 2-D (M, K), got shape {tuple(x)}")
    if tuple(w) != (units, x[1]):
        raise shape_error(op, f"weight shape {tuple(w)} must be ({units}, {x[1]}) (units, K)")
    if use_bias and (b is None or tuple(b) != (units,)):
        raise shape_error(op, f"bias shape {None if b is None else tuple(b)} must be ({units},)")
    return (x[0], units)


def _dense_inputs(x, w, b, units, use_bias):
    x = as_int32(x, "cvm_dense", "x")
    w = as_int32(w, "cvm_dense", "w")
    b = as_int32(b, "cvm_dense", "b") if use_bias else None
    dense_shape(x.shape, w.shape, None if b is None else b.shape, units=units, use_bias=use_bias)
    return x, w, b


@DENSE.formal
def dense_formal(x, w, b=0, units=None, use_bias=True):
    """Y[m, n] = sum_k X[m, k] * W[n, k] (+ B[n])."""
    x, w, b = _dense_inputs(x, w, b, units, use_bias)
    m_, k_ = x.shape
    y = np.zeros((m_, units), np.int32)
    for m in range(m_):
        for n in range(units):
            acc = sum(int(x[m, k]) * int(w[n, k]) for k in range(k_))
            if b is not None:
                acc += int(b[n])
            y[m, n] = wrap32_int(acc)
    return y


@DENSE.fast
def dense_fast(x, w, b=0, units=None, use_bias=True):
    x, w, b = _dense_inputs(x, w, b, units, use_bias)
    y = _exact_matmul(x.astype(np.int64), w.astype(np.int64).T)
    if b is not None:
        y = y + b.astype(np.int64)
    return wrap32(y)


@precision_rule(DENSE)
def dense_precision(precs, shapes, out_shapes, use_bias=True, **attribs):
    if precs[0] > 8 or precs[1] > 8:
        raise _precision_error("cvm_dense", precs)
    q = precs[0] + precs[1] + bitlen(shapes[1][1])
    return [max(q, precs[2]) + 1 if use_bias else q]


@cost_rule(DENSE)
def dense_cost(shapes, out_shapes, use_bias=True, **attribs):
    # Runtime: K*3 (+1 with bias); the docs table's (K+1)*3 is not what it computes.
    return shapes[1][1] * 3 + (1 if use_bias else 0)


# --- relu ----------------------------------------------------------------------------------------

RELU = cvm_define("relu", "integer.nn", "x: tensor<integer>", doc="max(x, 0).")
RELU.shape(lambda x: tuple(x))
precision_rule(RELU)(same_precision)


@RELU.formal
def relu_formal(x):
    x = as_int32(x, "cvm_relu", "x")
    y = np.empty_like(x)
    for d in np.ndindex(x.shape):
        y[d] = max(0, int(x[d]))
    return y


@RELU.fast
def relu_fast(x):
    return np.maximum(as_int32(x, "cvm_relu", "x"), 0)


# --- max_pool2d ----------------------------------------------------------------------------------

POOL = cvm_define(
    "max_pool2d", "integer.nn",
    "x: tensor<integer>, pool_size: integer[], strides: integer[] = [1, 1], "
    "padding: integer[] = [0, 0], ceil_mode: logical = false",
    doc="Max pooling per plane; padded cells are INT32_MIN and never win.")


def pool_geometry(x, pool_size, strides=(1, 1), padding=(0, 0), ceil_mode=False):
    op = "cvm_max_pool2d"
    psh, psw = check_ints(op, "pool_size", pool_size, 2, 1)
    sh, sw = check_ints(op, "strides", strides, 2, 1, MAX_ATTR)
    pad = check_ints(op, "padding", padding, (1, 2), 0, MAX_ATTR)
    ph, pw = (pad[0], pad[0]) if len(pad) == 1 else pad
    ceil_mode = check_bool(op, "ceil_mode", ceil_mode)
    if len(x) != 4:
        raise shape_error(op, f"input must be 4-D (N, C, H, W), got shape {tuple(x)}")
    n, c, h, w = x
    if ph >= psh or pw >= psw:
        raise bad(op, "padding", tuple(padding), f"must be smaller than pool_size ({psh}, {psw})")
    if psh > h + 2 * ph or psw > w + 2 * pw:
        raise bad(op, "pool_size", (psh, psw), f"exceeds the padded input ({h + 2 * ph}, {w + 2 * pw})")
    if ceil_mode:
        oh = (h + 2 * ph - psh + sh - 1) // sh + 1
        ow = (w + 2 * pw - psw + sw - 1) // sw + 1
        # DEPARTURE (runtime): the last window must start inside the input, else rejected.
        if (oh - 1) * sh - ph >= h or (ow - 1) * sw - pw >= w:
            raise shape_error(op, "with ceil_mode the last window would start in the padding "
                                  f"(input {h}x{w}, pool {psh}x{psw}, strides {sh}x{sw}, padding {ph}x{pw})")
    else:
        oh = (h + 2 * ph - psh) // sh + 1
        ow = (w + 2 * pw - psw) // sw + 1
    return (n, c, oh, ow), (psh, psw, sh, sw, ph, pw)


@POOL.shape
def pool_shape(x, **attribs):
    return pool_geometry(x, **attribs)[0]


@POOL.formal
def pool_formal(x, **attribs):
    """Y[n,i,p,q] = max{pad(n,i,p',q') | p' in [p*SH-PH, +PSH), q' in [q*SW-PW, +PSW)}."""
    x = as_int32(x, "cvm_max_pool2d", "x")
    shape, (psh, psw, sh, sw, ph, pw) = pool_geometry(x.shape, **attribs)
    _, _, h, w = x.shape

    def pad(n, i, r, c):
        return int(x[n, i, r, c]) if 0 <= r < h and 0 <= c < w else INT32_MIN

    y = np.zeros(shape, np.int32)
    for n, i, p, q in np.ndindex(shape):
        y[n, i, p, q] = max(pad(n, i, r, c)
                            for r in range(p * sh - ph, p * sh - ph + psh)
                            for c in range(q * sw - pw, q * sw - pw + psw))
    return y


@POOL.fast
def pool_fast(x, **attribs):
    x = as_int32(x, "cvm_max_pool2d", "x")
    shape, (psh, psw, sh, sw, ph, pw) = pool_geometry(x.shape, **attribs)
    n, c, oh, ow = shape
    _, _, h, w = x.shape
    rows = max(h + 2 * ph, (oh - 1) * sh + psh)
    cols = max(w + 2 * pw, (ow - 1) * sw + psw)
    xp = np.full((n, c, rows, cols), INT32_MIN, np.int32)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    y = np.full(shape, INT32_MIN, np.int32)
    for i in range(psh):
        for j in range(psw):
            np.maximum(y, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw], out=y)
    return y


precision_rule(POOL)(same_precision)


@cost_rule(POOL)
def pool_cost(shapes, out_shapes, pool_size=(1, 1), **attribs):
    return int(pool_size[0]) * int(pool_size[1])


# --- upsampling ----------------------------------------------------------------------------------

UPS = cvm_define("upsampling", "integer.nn", "x: tensor<integer>, scale: integer",
                 doc="Nearest-neighbour upsampling by an integer scale.")


@UPS.shape
def ups_shape(x, scale=None):
    scale = check_int("cvm_upsampling", "scale", scale, 1, MAX_ATTR)
    if len(x) != 4:
        raise shape_error("cvm_upsampling", f"input must be 4-D (N, C, H, W), got shape {tuple(x)}")
    return (x[0], x[1], x[2] * scale, x[3] * scale)


@UPS.formal
def ups_formal(x, scale=None):
    """Y[n, i, h, w] = X[n, i, h div scale, w div scale]."""
    x = as_int32(x, "cvm_upsampling", "x")
    shape = ups_shape(x.shape, scale)
    y = np.zeros(shape, np.int32)
    for n, i, h, w in np.ndindex(shape):
        y[n, i, h, w] = x[n, i, h // scale, w // scale]
    return y


@UPS.fast
def ups_fast(x, scale=None):
    x = as_int32(x, "cvm_upsampling", "x")
    ups_shape(x.shape, scale)
    return np.repeat(np.repeat(x, scale, axis=2), scale, axis=3)


precision_rule(UPS)(same_precision)
