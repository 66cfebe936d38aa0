"""Sequence layers of the IR catalog: CTCGreedyDecoder and ReverseSequence."""

from __future__ import annotations

import numpy as np

from .._common import float_type
from ..registry import define
from ._common import require

ctc_greedy_decoder = define(
    "ir_ctc_greedy_decoder", "ir.sequence", """
fragment ir_ctc_greedy_decoder( data: tensor<scalar>, seq_indicators: tensor<scalar>,
    ctc_merge_repeated: logical = true ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Best-path CTC decoding of logits [T, N, C] (blank = class C-1) over the steps whose "
        "indicator is non-zero; output [N, T, 1, 1] class indices, padded with -1.")


def _ctc_check(data, seq):
    op = "ir_ctc_greedy_decoder"
    require(len(data) == 3, op, f"data must be [T, N, C], got rank {len(data)}")
    require(len(seq) == 2, op, f"seq_indicators must be [T, N], got rank {len(seq)}")
    require(tuple(seq) == tuple(data[:2]) or None in seq or None in data[:2], op,
            f"seq_indicators shape {tuple(seq)} must equal data's [T, N] {tuple(data[:2])}")


@ctc_greedy_decoder.shape
def _ctc_shape(data, seq_indicators, *, ctc_merge_repeated=True):
    _ctc_check(data, seq_indicators)
    return ((data[1], data[0], 1, 1),)


@ctc_greedy_decoder.formal
def _ctc_formal(data, seq_indicators, *, ctc_merge_repeated=True):
    _ctc_check(data.shape, seq_indicators.shape)
    T, N, C = data.shape
    out = np.full((N, T, 1, 1), -1.0, dtype=float_type())
    for n in range(N):
        prev, k = -1, 0
        for t in range(T):
            if seq_indicators[t, n] == 0:
                break
            best = 0
            for c in range(1, C):
                if data[t, n, c] > data[t, n, best]:
                    best = c
            if best != C - 1 and not (ctc_merge_repeated and best == prev):
                out[n, k, 0, 0] = best
                k += 1
            prev = best
    return out


@ctc_greedy_decoder.fast
def _ctc_fast(data, seq_indicators, *, ctc_merge_repeated=True):
    _ctc_check(data.shape, seq_indicators.shape)
    T, N, C = data.shape
    best = np.argmax(data, axis=2)                                     # (T, N), first maximum
    active = np.cumprod(seq_indicators != 0, axis=0).astype(bool)      # stops at the first 0
    prev = np.vstack([np.full((1, N), -1), best[:-1]])
    emit = active & (best != C - 1)
    if ctc_merge_repeated:
        emit &= best != prev
    out = np.full((N, T, 1, 1), -1.0, dtype=float_type())
    for n in range(N):
        vals = best[emit[:, n], n]
        out[n, :len(vals), 0, 0] = vals
    return out


reverse_sequence = define(
    "ir_reverse_sequence", "ir.sequence", """
fragment ir_reverse_sequence( input: tensor<scalar>, lengths: tensor<scalar>, seq_axis: integer = 1,
    batch_axis: integer = 0 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="For each slice b along batch_axis, reverses its first lengths[b] elements along seq_axis.")


def _rs_axes(shape, lengths, seq_axis, batch_axis):
    op = "ir_reverse_sequence"
    r = len(shape)
    require(-r <= seq_axis < r and -r <= batch_axis < r, op,
            f"axes must lie in [-{r}, {r}), got seq_axis {seq_axis}, batch_axis {batch_axis}")
    s, b = seq_axis % r, batch_axis % r
    require(s != b, op, "seq_axis and batch_axis must differ")
    require(len(lengths) == 1 and lengths[0] in (None, shape[b]), op,
            f"lengths must be 1-D with {shape[b]} items, got shape {tuple(lengths)}")
    return s, b


def _rs_lengths(lengths, extent):
    ls = [int(v) for v in np.asarray(lengths).reshape(-1)]
    for i, v in enumerate(ls):
        require(0 <= v <= extent, "ir_reverse_sequence", f"lengths[{i}] = {v} is outside [0, {extent}]")
    return ls


@reverse_sequence.shape
def _rs_shape(input, lengths, *, seq_axis=1, batch_axis=0):
    _rs_axes(input, lengths, seq_axis, batch_axis)
    return (tuple(input),)


@reverse_sequence.formal
def _rs_formal(input, lengths, *, seq_axis=1, batch_axis=0):
    s, b = _rs_axes(input.shape, lengths.shape, seq_axis, batch_axis)
    ls = _rs_lengths(lengths, input.shape[s])
    out = input.copy()
    for idx in np.ndindex(*input.shape):
        n, t = idx[b], idx[s]
        if t < ls[n]:
            src = list(idx)
            src[s] = ls[n] - 1 - t
            out[idx] = input[tuple(src)]
    return out


@reverse_sequence.fast
def _rs_fast(input, lengths, *, seq_axis=1, batch_axis=0):
    s, b = _rs_axes(input.shape, lengths.shape, seq_axis, batch_axis)
    ls = np.asarray(_rs_lengths(lengths, input.shape[s]))
    t = np.arange(input.shape[s])
    shape_b = [1] * input.ndim
    shape_b[b] = -1
    shape_t = [1] * input.ndim
    shape_t[s] = -1
    L = ls.reshape(shape_b)
    T = t.reshape(shape_t)
    src = np.where(T < L, L - 1 - T, T)
    src = np.broadcast_to(src, tuple(input.shape[i] if i in (s, b) else 1 for i in range(input.ndim)))
    return np.take_along_axis(input, np.broadcast_to(src, input.shape), axis=s)
