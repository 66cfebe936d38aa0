"""Winograd F(2×2, 3×3) for the fast ``conv`` kernel: 3×3, stride 1, dilation 1, one group.

Why: a 3×3 convolution as im2col + BLAS spends 9 multiply-adds per input channel and output
element; Winograd's minimal filtering algorithm F(2×2, 3×3) (Lavin & Gray 2015) computes
each 2×2 output tile from a 4×4 input tile with 16 — 2.25× fewer — as 16 independent
matrix products (one per tile position), at the price of linear transforms of the input
tiles and of the products, which are numpy passes here (no compiled code).  On the
benchmark machine those passes cost about as much as the products save for 64-channel
layers, so :func:`pays` uses it only from 256 channels on (see BENCHMARKS.md).

With ``d`` a 4×4 input tile, ``g`` a 3×3 filter and (rows of the matrices)::

    Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
    G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]
    Aᵀ = [1 1 1 0; 0 1 -1 -1]

the tile's output is ``Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A``, and over channels the element-wise
product becomes, for each of the 16 positions ``k``, ``M[k] = U[k] @ V[k]`` with ``U[k]``
(out × in channels) from the filter and ``V[k]`` (in channels × tiles) from the input.

Layout (so every numpy pass runs over long contiguous runs): the zero-padded image is
split into four *phases* ``Z[a, b][t, u] = padded[2t + a, 2u + b]``, each ``(Th+1)×(Tw+1)``
and flattened per channel; tile (t, u)'s input column ``2u + s`` is phase ``s mod 2`` at
flat offset ``t·Wq + u + s div 2``, so the column transform is four passes of the form
``Z[..., k] ± Z[..., k + 1]`` over whole flattened phases and the row transform four of
the form ``C[..., k] ± C[..., k + Wq]``.  The tile grid carries one extra column (u = Tw)
whose values mix two rows and are dropped, like the wide rows of the im2col path.

Accuracy: float32 throughout (the filter transform in float64, rounded once).  The
transforms only add and subtract (the ½ of G is exact), so each result is the exact tile
formula with a few more roundings than a direct sum.  Measured against a float64 reference
on ResNet-shaped layers (He-scaled random filters, post-ReLU random inputs, 3×3 pad 1):
max |err| / max |y| = 3.1e-7 / 4.0e-7 / 6.1e-7 for 64@56², 128@28², 256@14² (im2col:
3.5e-7 / 3.5e-7 / 3.0e-7), and the largest error per output relative to S = Σ|terms| is
≤ 2.3e-7 (im2col ≤ 1.4e-7) — i.e. 1–3× im2col's error, ≈ 40× inside the fast kernels'
documented bound ``|fast - formal| ≤ 1e-5·S + 1e-6``, which the tests check.
Non-finite values do not stay local — a NaN or Inf anywhere in a
4×4 input tile reaches all four outputs of the tile (and ``inf - inf`` = NaN) — so the
caller recomputes any batch item whose output is not all finite by the direct path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Fewest input and output channels for which the transforms pay for themselves.  Layer by
#: layer on the benchmark machine (2 threads, in-process A/B, min of 16–48 calls):
#: 64 ch 56×56 1.2–1.6× *slower* than im2col, 128 ch 28×28 0.93–0.98× (and slower in one
#: whole-network profile), 256 ch 14×14 0.72–0.86×; so only from 256 channels on.
MIN_CHANNELS = 256

#: Fewest tile columns (tiles · items) a product should have: thinner products (one 7×7
#: image: 4×5 tiles) read the 16/9 larger transformed filter for too little work.
MIN_COLUMNS = 48

#: Fewest 2×2 tiles per image: on small images the partial edge tiles and the extra tile
#: column waste too much (7×7: 4×5 tile columns for 12.25 tiles' worth of outputs, the
#: products only 1.4× fewer instead of 2.25×), measured no faster than im2col.
MIN_TILES = 49

#: Tile columns to aim for per product when several batch items share one (small images).
GROUP_COLUMNS = 256

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def transform_filter(w: np.ndarray) -> np.ndarray:
    """``U[k] = (G g Gᵀ)[k]`` for every (out, in) channel pair: a (16, out, in) float32 array.

    Computed in float64 and rounded once; k = 4·row + column of the 4×4 tile position.
    """
    u = np.einsum("ri,sj,ocij->rsoc", _G, _G, np.asarray(w, np.float64), optimize=True)
    return np.ascontiguousarray(u.reshape((16,) + w.shape[:2]), dtype=np.float32)


def geometry(H: int, W: int, pads) -> tuple[int, int, int, int]:
    """(Ho, Wo, Th, Tw): output extents and 2×2 tile counts for 3×3 windows over padded H×W."""
    (pt, pb), (pl, pr) = pads
    Ho, Wo = H + pt + pb - 2, W + pl + pr - 2
    return Ho, Wo, -(-Ho // 2), -(-Wo // 2)


def pays(C: int, c: int, B: int, Th: int, Tw: int) -> bool:
    """Whether Winograd beats im2col here (measured on the benchmark machine, see module doc)."""
    columns = min(B, group_size(B, Th, Tw)) * Th * (Tw + 1)
    return C >= MIN_CHANNELS and c >= MIN_CHANNELS and columns >= MIN_COLUMNS and Th * Tw >= MIN_TILES


def group_size(B: int, Th: int, Tw: int) -> int:
    """Batch items per product: enough for ≈ GROUP_COLUMNS tile columns (1 for big images)."""
    return max(1, min(B, -(-GROUP_COLUMNS // max(1, Th * (Tw + 1)))))


class _Buffers:
    """Work arrays for ``m`` items at a time (allocated once per call and chunk size)."""

    def __init__(self, C: int, c: int, m: int, H: int, W: int, pads, Th: int, Tw: int):
        (pt, _), (pl, _) = pads
        Hq, Wq = Th + 1, Tw + 1
        L, N = Hq * Wq, Th * Wq
        self.Wq, self.L, self.N = Wq, L, N
        # +1: the column pass reads one element past each flattened phase (always zero)
        self.Z = np.zeros((2, 2, C, m, L + 1), np.float32)
        self.Cs = np.empty((4, 2, C, m, L), np.float32)
        self.V = np.empty((4, 4, C, m, N), np.float32)
        self.M = np.empty((4, 4, c, m, N), np.float32)
        self.S = np.empty((2, 4, c, m, N), np.float32)
        self.Y = np.empty((2, 2, c, m, Th, Wq), np.float32)
        self.fills = []  # (interior of one phase, first input row, first input column)
        for a in range(2):
            r0 = (a - pt) % 2
            nr = len(range(r0, H, 2))
            for b in range(2):
                c0 = (b - pl) % 2
                nc = len(range(c0, W, 2))
                if nr and nc:
                    grid = self.Z[a, b, :, :, :L].reshape(C, m, Hq, Wq)
                    R0, Q0 = (r0 + pt) // 2, (c0 + pl) // 2
                    self.fills.append((grid[:, :, R0:R0 + nr, Q0:Q0 + nc], r0, c0))


def conv3x3(x: np.ndarray, U: np.ndarray, bias: np.ndarray, pads, y: np.ndarray,
            finish: Callable[[int], None]) -> None:
    """``y`` (B, c, Ho, Wo) = 3×3 convolution of ``x`` (B, C, H, W) + ``bias``, by F(2×2, 3×3).

    ``U`` is :func:`transform_filter` of the (c, C, 3, 3) filter; ``bias`` a scalar or a
    (c, 1, 1) array; ``pads`` the non-negative constant padding ((top, bottom), (left, right)).
    ``finish(i)`` is called once item ``i`` of ``y`` is complete (checks, epilogue).
    """
    B, C, H, W = x.shape
    c = U.shape[1]
    Ho, Wo, Th, Tw = geometry(H, W, pads)
    group = group_size(B, Th, Tw)
    buffers: dict[int, _Buffers] = {}
    # The bias is added to position (1, 1) of the transformed products: Aᵀ E₁₁ A is all
    # ones, so it reaches every output of the tile once (at a quarter of the cost of an
    # add over the output).  It enters every output as a summand or as the first operand
    # of a subtraction, so a bias without −0.0 leaves no output −0.0 (see ConvEpilogue).
    bias = np.asarray(bias, np.float32)
    bias = bias.reshape(c, 1, 1) if bias.size != 1 else bias.reshape(())
    for i0 in range(0, B, group):
        m = min(group, B - i0)
        buf = buffers.get(m)
        if buf is None:
            buf = buffers[m] = _Buffers(C, c, m, H, W, pads, Th, Tw)
        _tiles(x[i0:i0 + m], U, bias, buf, y[i0:i0 + m], Ho, Wo)
        for i in range(i0, i0 + m):
            finish(i)


def _tiles(x, U, bias, buf: _Buffers, y, Ho, Wo):
    C, c = U.shape[2], U.shape[1]
    m = x.shape[0]
    Wq, L, N = buf.Wq, buf.L, buf.N
    Z, Cs, V, M, S, Y = buf.Z, buf.Cs, buf.V, buf.M, buf.S, buf.Y
    xt = x.transpose(1, 0, 2, 3)  # (C, m, H, W): the buffers keep items inside channels
    for dst, r0, c0 in buf.fills:
        np.copyto(dst, xt[:, :, r0::2, c0::2])
    # column transform (Bᵀ over the tile's columns): Cs[s] from the even/odd column phases
    e, o = Z[:, 0], Z[:, 1]
    np.subtract(e[..., :L], e[..., 1:], out=Cs[0])
    np.add(o[..., :L], e[..., 1:], out=Cs[1])
    np.subtract(e[..., 1:], o[..., :L], out=Cs[2])
    np.subtract(o[..., :L], o[..., 1:], out=Cs[3])
    # row transform: V[r, s] from the even/odd row phases of Cs[s]
    re, ro = Cs[:, 0], Cs[:, 1]
    np.subtract(re[..., :N], re[..., Wq:Wq + N], out=V[0])
    np.add(ro[..., :N], re[..., Wq:Wq + N], out=V[1])
    np.subtract(re[..., Wq:Wq + N], ro[..., :N], out=V[2])
    np.subtract(ro[..., :N], ro[..., Wq:Wq + N], out=V[3])
    np.matmul(U, V.reshape(16, C, m * N), out=M.reshape(16, c, m * N))  # 16 float32 BLAS products
    M[1, 1] += bias
    # output transform: Aᵀ over rows, then over columns
    np.add(M[0], M[1], out=S[0])
    S[0] += M[2]
    np.subtract(M[1], M[2], out=S[1])
    S[1] -= M[3]
    Yf = Y.reshape(2, 2, c, m, N)
    np.add(S[:, 0], S[:, 1], out=Yf[:, 0])
    Yf[:, 0] += S[:, 2]
    np.subtract(S[:, 1], S[:, 2], out=Yf[:, 1])
    Yf[:, 1] -= S[:, 3]
    yt = y.transpose(1, 0, 2, 3)
    for a in range(2):
        ha = (Ho - a + 1) // 2
        for b in range(2):
            np.copyto(yt[:, :, a::2, b::2], Y[a, b, :, :, :ha, :(Wo - b + 1) // 2])
