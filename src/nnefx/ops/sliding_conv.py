"""Fast ``conv``/``deconv`` kernels (im2col/BLAS, Winograd), their fused epilogues and the
prepared Winograd filters the fast backend's planner passes use, and the separable
convolution compounds (NNEF spec §4.9.2).

Split from :mod:`nnefx.ops.sliding` (declarations, shape rules, window geometry and the
formal kernels, whose conventions hold here too) to keep each module readable; importing
either registers both.
"""

from __future__ import annotations

import contextvars
import math

import numpy as np

from . import winograd
from ._common import (
    float_type,
    op_error,
    pad_array,
    relu_into,
    scalar,
)
from .sliding import (  # noqa: F401
    _conv_formal,
    _conv_shape,
    _deconv_formal,
    _deconv_groups,
    _deconv_shape,
    _down_window,
    _extension,
    _group_sizes,
    _scatter_geometry,
    _up_window,
    _view,
    conv,
    deconv,
    separable_conv,
    separable_deconv,
)

# --- conv / deconv: fast ------------------------------------------------------------------

class ConvEpilogue:
    """What a fused convolution does to each batch item's output, in place, while it is hot.

    Set by :func:`fused_conv` for the duration of one guarded ``conv`` call (a context
    variable, so the kernel keeps its ordinary signature and attribute guard).  ``skip``
    (optional) is added, then ``relu`` applied — the same float32 operations, in the same
    order, as the ``add`` and ``relu`` fast kernels on the convolution's result.

    ``no_negative_zero``: the convolution added a bias without any −0.0 element to every
    output, so no output (nor output + skip) is −0.0 — in round-to-nearest a sum is −0.0
    only when both terms are — and ``fmax(y, 0)`` alone is then the exact ReLU (NaN → +0,
    never −0): ``relu_into``'s second pass, which only maps −0.0 to +0.0, is skipped.
    """

    __slots__ = ("skip", "relu", "applied", "no_negative_zero")

    def __init__(self, skip: np.ndarray | None, relu: bool):
        self.skip = skip
        self.relu = relu
        self.applied = False
        self.no_negative_zero = False

    def fits(self, out_shape: tuple) -> bool:
        """Fusable only without broadcasting: ``skip`` has exactly the result's shape."""
        s = self.skip
        return s is None or (s.__class__ is np.ndarray and s.dtype == float_type() and s.shape == tuple(out_shape))

    def apply(self, i: int, yi: np.ndarray) -> None:
        if self.skip is not None:
            yi += self.skip[i]
        if self.relu:
            if self.no_negative_zero:
                np.fmax(yi, float_type()(0.0), out=yi)
            else:
                relu_into(yi, yi)


_EPILOGUE: contextvars.ContextVar[ConvEpilogue | None] = contextvars.ContextVar("conv_epilogue", default=None)


@conv.fast
def _conv_fast(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), groups=1):
    """im2col in channel-major order, one BLAS product per batch item, the result already NCHW.

    For each batch item and group, ``cols`` is the (Cg·F, X) matrix of window values (rows:
    input channel and filter offset, columns: output positions) and the filter is the
    (cg, Cg·F) matrix, so ``filter @ cols`` is (cg, X): output channels by positions, the
    layout the result needs — no transposes of the big operands.  A 1×1 filter with unit
    dilation needs no im2col at all: the (strided) input *is* ``cols``.  Bias (and a fused
    epilogue, see :class:`ConvEpilogue`) is applied to each item right after its product,
    while it is still in cache.
    """
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _conv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, groups)
    epilogue = _EPILOGUE.get()
    if epilogue is not None:
        epilogue.applied = epilogue.fits(out_shape)
        if not epilogue.applied:
            epilogue = None
        else:
            epilogue.no_negative_zero = not bool(np.signbit(b[b == 0]).any())
    return _conv_run(x, filter, w, b, border, padding, stride, dilation, groups, out_shape, epilogue, True)


def _conv_run(x, filter, w, b, border, padding, stride, dilation, groups, out_shape, epilogue, allow_winograd):
    """The body of :func:`_conv_fast` once arguments are checked (``filter``: as passed)."""
    B, C = x.shape[:2]
    c = w.shape[0]
    n = x.ndim - 2
    G = C if groups == 0 else groups
    Cg, cg = _group_sizes(C, c, G)
    win = _down_window("conv", x.shape[2:], w.shape[2:], padding, stride, dilation)
    xs = tuple(out_shape[2:])
    F = tuple(w.shape[2:])
    X, K = math.prod(xs), Cg * math.prod(F)
    wm = w.reshape(G, cg, K)
    y = np.empty((B, G, cg, X), float_type())
    bias_item = b.reshape(()) if b.size == 1 else b.reshape((c,) + (1,) * n)
    pointwise = all(f == 1 for f in F) and not any(p or q for p, q in win.pads)
    # Winograd's transforms are float32 work arrays: a float64 convolution goes by im2col
    if (allow_winograd and y.dtype == np.float32 and n == 2 and G == 1 and F == (3, 3) and win.stride == [1, 1] and win.dilation == [1, 1]
            and border == "constant" and all(p >= 0 and q >= 0 for p, q in win.pads) and B * X > 0
            and winograd.pays(C, c, B, -(-xs[0] // 2), -(-xs[1] // 2))):
        _conv_winograd(x, filter, w, b, bias_item, win, y.reshape((B, c) + xs), epilogue)
        return y.reshape((B, c) + xs)
    # Small images (late layers): several batch items per product, or BLAS runs on thin,
    # slow matrices (7×7 = 49 columns: 25 % below its speed on wide ones).  Only products
    # big enough that OpenBLAS already runs them on all its threads: grouping tiny ones
    # (the digits example) makes them multi-threaded, and on a busy machine each then waits
    # for a second thread (10× slower runs seen).
    group = (min(B, -(-_PRODUCT_COLUMNS // X))
             if B > 1 and 0 < X < _PRODUCT_COLUMNS // 2 and c * K * X >= _GROUP_MIN_MACS else 1)
    if (group == 1 and not pointwise and n == 2 and border == "constant" and xs[1] >= _WIDE_MIN_WIDTH
            and all(p >= 0 and q >= 0 for p, q in win.pads) and B * X > 0):
        _conv_wide_rows(x, wm, bias_item, y.reshape((B, c) + xs), win, F, G, epilogue)
        return y.reshape((B, c) + xs)
    if pointwise:
        # Pointwise: the strided input itself is the column matrix.
        picked = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in win.stride)]
        picked = picked[(slice(None), slice(None)) + tuple(slice(0, e) for e in xs)]

        def columns(i):
            return picked[i]  # (C, xs...)
    else:
        xp = pad_array(x, [(0, 0), (0, 0)] + win.pads, border)
        v = _view(xp, [1, 1] + list(F), [1, 1] + win.stride, [1, 1] + win.dilation, (B, C) + xs)
        # v is (B, C, xs..., 1, 1, F...): bring the filter offsets before the positions.
        v = v.reshape((B, C) + xs + F)
        perm = (0, 1) + tuple(range(2 + n, 2 + 2 * n)) + tuple(range(2, 2 + n))
        v = v.transpose(perm)

        def columns(i):
            return v[i]  # (C, F..., xs...)
    if group == 1:
        # One batch item's columns at a time, in one reused buffer: the buffer stays
        # cache-sized and is allocated (page-faulted) once instead of B times as large.
        cols = np.empty((C,) + (() if pointwise else F) + xs, float_type())
        for i in range(B):
            src = columns(i)
            if pointwise and src.flags.c_contiguous:
                mat = src.reshape(G, K, X)  # stride 1: no copy at all
            else:
                np.copyto(cols, src)
                mat = cols.reshape(G, K, X)
            np.matmul(wm, mat, out=y[i])  # (G, cg, X): float32 BLAS
            yi = y[i].reshape((c,) + xs)
            yi += bias_item
            if epilogue is not None:
                epilogue.apply(i, yi)
        return y.reshape((B, c) + xs)
    # ``group`` items side by side: columns (G, K, m·X), item j in columns j·X...  Every
    # chunk gets contiguous buffers of its own width (a trailing partial chunk too), so the
    # BLAS always sees dense matrices.
    buffers: dict[int, tuple] = {}
    for i0 in range(0, B, group):
        m = min(group, B - i0)
        if m not in buffers:
            cols = np.empty((G, K, m * X), float_type())
            out = np.empty((G, cg, m * X), float_type())
            buffers[m] = (cols, cols.reshape((C,) + (() if pointwise else F) + (m,) + xs),  # views
                          out, out.reshape((c, m) + xs))
        cols, into, out, parts = buffers[m]
        for j in range(m):
            np.copyto(into[(Ellipsis, j) + (slice(None),) * n], columns(i0 + j))
        np.matmul(wm, cols, out=out)  # float32 BLAS
        for j in range(m):
            yi = y[i0 + j].reshape((c,) + xs)
            np.add(parts[:, j], bias_item, out=yi)
            if epilogue is not None:
                epilogue.apply(i0 + j, yi)
    return y.reshape((B, c) + xs)


class PreparedFilter:
    """A plan step's cache of a constant filter's Winograd transform (see :func:`prepared_conv`).

    ``source`` is the filter array the transform was made from; it is reused only for that
    very object (held here, so its identity cannot pass to another array), which the planner
    guarantees never changes: it wraps only steps whose filter is a constant of the plan.
    """

    __slots__ = ("source", "transformed")

    def __init__(self) -> None:
        self.source: object = None
        self.transformed: np.ndarray | None = None


_PREPARED: contextvars.ContextVar[PreparedFilter | None] = contextvars.ContextVar("conv_prepared", default=None)


def prepared_conv(conv_kernel):
    """Wrap a (guarded, possibly fused) ``conv`` kernel whose filter argument is a constant.

    Each call makes the step's :class:`PreparedFilter` visible to :func:`_conv_fast`, which
    then transforms the filter for Winograd once instead of on every run (a 512×512 3×3
    filter: ≈ 15 ms, more than the convolution).  Results are identical with or without.
    """
    holder = PreparedFilter()

    def run(*args, **kwargs):
        token = _PREPARED.set(holder)
        try:
            return conv_kernel(*args, **kwargs)
        finally:
            _PREPARED.reset(token)

    run.prepared = holder  # for tests and profiling
    return run


def _winograd_filter(filter, w):
    holder = _PREPARED.get()
    if holder is not None and holder.source is filter:
        return holder.transformed
    U = winograd.transform_filter(w)
    if holder is not None:
        holder.source, holder.transformed = filter, U
    return U


def _conv_winograd(x, filter, w, b, bias_item, win, y, epilogue):
    """3×3 stride-1 convolution by Winograd F(2×2, 3×3) (:mod:`nnefx.ops.winograd`).

    Any batch item whose result is not all finite is computed again by the direct path: a
    NaN or Inf, or an overflow inside the transforms, spreads over whole 4×4 input tiles,
    where the direct sum keeps it to the windows that read it.  The check is a sum over the
    item's output (a non-finite sum of finite values, i.e. huge ones, also falls back).
    """
    U = _winograd_filter(filter, w)
    pads = [tuple(p) for p in win.pads]

    def finish(i):
        yi = y[i]
        if not math.isfinite(float(np.add.reduce(yi, axis=None))):
            item = x[i:i + 1]
            np.copyto(yi, _conv_run(item, w, w, b, "constant", pads, [1, 1], [1, 1], 1, (1,) + yi.shape,
                                    None, False)[0])
        if epilogue is not None:
            epilogue.apply(i, yi)

    with np.errstate(over="ignore", invalid="ignore"):  # overflows inside the transforms: see finish
        winograd.conv3x3(x, U, bias_item, pads, y, finish)


#: Columns a product should have at least when batch items are small enough to share one
#: (items whose output has fewer than half as many positions are grouped).
_PRODUCT_COLUMNS = 1024

#: Multiply-adds one item's product needs before items are grouped (see ``_conv_fast``).
_GROUP_MIN_MACS = 1 << 20


#: Narrowest output row for which :func:`_conv_wide_rows` beats classic im2col: its
#: products compute (W + pads)/W as many columns (9/7 = 1.29× at 7, 1.07× at 28).
_WIDE_MIN_WIDTH = 12


def _conv_wide_rows(x, wm, bias_item, y, win, F, G, epilogue):
    """2-D convolution with *wide rows*: im2col from contiguous runs instead of a gather.

    Stride 1 first: each batch item is written once into a zero-padded buffer whose rows
    are Wp = W + pads long, flattened per channel.  For filter offset (jh, jw), the window
    values of all output positions (h, w) — taken over full padded rows, w < Wp — are the
    *contiguous* run of ``Ho·Wp`` elements starting at ``jh·dh·Wp + jw·dw``; so the column
    matrix is built from long memcpy-like runs (2–4× faster than gathering ``Wo``-element
    row pieces), and the product yields Ho×Wp values per channel of which the first Wo of
    each row are the output (the rest mix two rows and are dropped while adding the bias).

    Stride (sh, sw): the padded item is split into sh·sw *phases* (padded rows ≡ a mod sh,
    columns ≡ b mod sw), each Hq×Wq; padded element (r·sh + a, q·sw + b) is phase (a, b)
    at (r, q), so filter offset (jh, jw) reads phase (jh·dh mod sh, jw·dw mod sw) from
    (jh·dh div sh, jw·dw div sw) on, again as one contiguous run of ``Ho·Wq`` per channel
    (the ResNet stem's 7×7/2 gather was 4× its product's time).  Each output element gets
    the same products and sum as in the classic path; only the matrix width the BLAS sees
    (Wq instead of Wo columns per row) differs.
    """
    B, C, H, W = x.shape
    c, Ho, Wo = y.shape[1:]
    (pt, pb), (pl, pr) = win.pads
    sh, sw = win.stride
    dh, dw = win.dilation
    fh, fw = F
    Hp, Wp = H + pt + pb, W + pl + pr
    Hq, Wq = -(-Hp // sh), -(-Wp // sw)
    N = Ho * Wq
    length = Hq * Wq + (fw - 1) * dw // sw  # the last offset's run reaches past the last row
    flat = np.zeros((sh, sw, C, length), float_type())
    fills = []  # (phase interior view, input rows, input columns) per phase
    for a in range(sh):
        i0 = (a - pt) % sh  # first input row landing in phase row set a
        rows_in = range(i0, H, sh)
        for b_ in range(sw):
            j0 = (b_ - pl) % sw
            cols_in = range(j0, W, sw)
            if not len(rows_in) or not len(cols_in):
                continue
            grid = flat[a, b_, :, :Hq * Wq].reshape(C, Hq, Wq)
            r0, q0 = (i0 + pt) // sh, (j0 + pl) // sw
            fills.append((grid[:, r0:r0 + len(rows_in), q0:q0 + len(cols_in)],
                          (slice(None), slice(i0, H, sh), slice(j0, W, sw))))
    cols = np.empty((C, fh, fw, N), float_type())
    if sh == sw == 1:
        st = flat.strides
        runs = [(cols, np.lib.stride_tricks.as_strided(flat[0, 0], (C, fh, fw, N),
                                                       (st[2], dh * Wp * st[3], dw * st[3], st[3]),
                                                       writeable=False))]
    else:
        runs = []
        for jh in range(fh):
            a, r = divmod(jh * dh, sh)[::-1]
            for jw in range(fw):
                b_, q = divmod(jw * dw, sw)[::-1]
                start = r * Wq + q
                runs.append((cols[:, jh, jw], flat[a, b_, :, start:start + N]))
    wide = np.empty((G, wm.shape[1], N), float_type())
    valid = wide.reshape(c, Ho, Wq)[:, :, :Wo]
    for i in range(B):
        xi = x[i]
        for dst, src in fills:
            np.copyto(dst, xi[src])
        for dst, src in runs:
            np.copyto(dst, src)
        np.matmul(wm, cols.reshape(G, -1, N), out=wide)  # float32 BLAS
        yi = y[i]
        np.add(valid, bias_item, out=yi)
        if epilogue is not None:
            epilogue.apply(i, yi)


def fused_conv(conv_kernel, add_kernel, relu_kernel, *, residual: bool, relu: bool):
    """``conv`` followed by ``add`` (residual, optional) and ``relu`` (optional), as one kernel.

    ``conv_kernel`` is the guarded ``conv`` fast kernel (attribute checks included); the
    result equals ``relu(add(conv(...), skip))`` computed by the separate fast kernels,
    bit for bit, without the intermediate arrays or passes.  Where ``skip`` would need
    broadcasting (or is not float32), the separate kernels run instead.  With ``residual``
    the last positional argument is ``skip`` and ``skip_first`` says whether it was the
    ``add``'s first operand (addition of two floats is commutative, so it only matters for
    the fallback call, which keeps the graph's order).
    """

    def run(*args, skip_first=False, **kwargs):
        skip = None
        if residual:
            *args, skip = args
        epilogue = ConvEpilogue(skip, relu)
        token = _EPILOGUE.set(epilogue)
        try:
            y = conv_kernel(*args, **kwargs)
        finally:
            _EPILOGUE.reset(token)
        if epilogue.applied:
            return y
        if residual:
            y = add_kernel(skip, y) if skip_first else add_kernel(y, skip)
        return relu_kernel(y) if relu else y

    return run


def _add_bias_f32(y, b, c):
    """Add the bias in place: ``y`` is the kernel's own fresh float32 product."""
    if b.size == 1:
        y += b.reshape(())
    else:
        y += b.reshape((1, c) + (1,) * (y.ndim - 2))
    return y


@deconv.fast
def _deconv_fast(input, filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(), output_shape=(),
                 groups=1):
    """Scatter form: for each filter offset j, one BLAS product per group added at q*s + j*d."""
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    out_shape = _deconv_shape(x.shape, w.shape, b.shape, border, padding, stride, dilation, output_shape, groups)
    B, c = x.shape[:2]
    C = out_shape[1]
    n = x.ndim - 2
    G = _deconv_groups(groups, w.shape, list(output_shape), c)
    Cg, cg = _group_sizes(C, c, G)
    win = _up_window("deconv", x.shape[2:], w.shape[2:], padding, stride, dilation, out_shape, offset=2)
    ext = [(0, 0)] * n if border == "constant" else [_extension(win, k) for k in range(n)]
    xe = pad_array(x, [(0, 0), (0, 0)] + ext, border)
    lead, start, length = _scatter_geometry(win, ext)
    xs = xe.shape[2:]
    buf = np.zeros((B, C) + tuple(length), float_type())
    xg = xe.reshape((B, G, cg) + xs)
    wg = w.reshape((G, cg, Cg) + tuple(w.shape[2:]))
    for j in win.offsets():
        contrib = np.einsum("bgq...,gqc->bgc...", xg, wg[(slice(None),) * 3 + j], optimize=True)
        region = tuple(slice(j[k] * win.dilation[k] + lead[k],
                             j[k] * win.dilation[k] + lead[k] + (xs[k] - 1) * win.stride[k] + 1, win.stride[k])
                       for k in range(n))
        buf[(slice(None), slice(None)) + region] += contrib.reshape((B, C) + xs)
    y = buf[(slice(None), slice(None)) + tuple(slice(start[k], start[k] + win.X[k]) for k in range(n))]
    return _add_bias_f32(np.ascontiguousarray(y), b, C)


# --- separable convolutions -----------------------------------------------------------------

def _check_point_filter(op, plane_filter, point_filter):
    if any(d not in (1, None) for d in tuple(point_filter)[2:]):
        raise op_error(op, f"point filter {tuple(point_filter)} must have spatial extents 1")


@separable_conv.shape
def _sepconv_shape(input, plane_filter, point_filter, bias=(), border="constant", padding=(), stride=(),
                   dilation=(), groups=1):
    _check_point_filter("separable_conv", plane_filter, point_filter)
    filtered = _conv_shape(input, plane_filter, (), border, padding, stride, dilation, 0)
    return _conv_shape(filtered, point_filter, bias, groups=groups)


@separable_deconv.shape
def _sepdeconv_shape(input, plane_filter, point_filter, bias=(), border="constant", padding=(), stride=(),
                     dilation=(), output_shape=(), groups=1):
    _check_point_filter("separable_deconv", plane_filter, point_filter)
    filtered = _deconv_shape(input, point_filter, (), groups=groups)
    return _deconv_shape(filtered, plane_filter, bias, border, padding, stride, dilation, output_shape, 0)


def _sepconv(kconv):
    def run(input, plane_filter, point_filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(),
            groups=1):
        _sepconv_shape(np.shape(input), np.shape(plane_filter), np.shape(point_filter), np.shape(bias), border,
                       padding, stride, dilation, groups)
        filtered = kconv(input, plane_filter, 0.0, border, padding, stride, dilation, 0)
        return kconv(filtered, point_filter, bias, groups=groups)
    return run


def _sepdeconv(kdeconv):
    def run(input, plane_filter, point_filter, bias=0.0, border="constant", padding=(), stride=(), dilation=(),
            output_shape=(), groups=1):
        _sepdeconv_shape(np.shape(input), np.shape(plane_filter), np.shape(point_filter), np.shape(bias), border,
                         padding, stride, dilation, output_shape, groups)
        filtered = kdeconv(input, point_filter, 0.0, groups=groups)
        return kdeconv(filtered, plane_filter, bias, border, padding, stride, dilation, output_shape, 0)
    return run


separable_conv.fast(_sepconv(_conv_fast))
separable_deconv.fast(_sepdeconv(_deconv_fast))

