"""Recurrent sequences with per-batch lengths: LSTM, GRU and RNN sequences (steps past a sequence's length output zeros and keep the state).

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ..registry import define

# --- LSTMSequence --------------------------------------------------------------------------------

lstm_sequence_op = define("lstm_sequence", "ext", """
fragment lstm_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, initial_cell: tensor<scalar>,
                           sequence_lengths: tensor<integer>, W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>,
                           P: tensor<scalar> = 0.0, direction: string = 'forward', clip: scalar = 0.0 )
    -> ( output: tensor<scalar>, hidden: tensor<scalar>, cell: tensor<scalar> );
""", domain="nnefx", doc="IR LSTMSequence (v5), batch-first [N,T,I]; gates f,i,c,o; sigmoid/tanh/tanh; "
                          "peepholes P [D, 3H] (blocks f,i,o; 0: none) as ONNX LSTM's.")


@lstm_sequence_op.shape
def _lstm_shape(x, h, c, lens, w, r, b, p=(), direction="forward", clip=0.0):
    if len(x) != 3 or len(h) != 3 or len(w) != 3:
        raise NNEFXError("lstm_sequence: X, H, W must have rank 3")
    n, t, _ = x
    dirs = 2 if direction == "bidirectional" else 1
    hs = h[2]
    if w[0] != dirs or w[1] != 4 * hs or r[2] != hs or b[1] != 4 * hs:
        raise NNEFXError("lstm_sequence: weight shapes do not match the hidden size")
    if len(p) and tuple(p) != (dirs, 3 * hs):
        raise NNEFXError(f"lstm_sequence: peepholes P of shape {list(p)} must be [{dirs}, {3 * hs}]")
    return (n, dirs, t, hs), (n, dirs, hs), (n, dirs, hs)


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def lstm_sequence(x, h0, c0, lens, w, r, b, direction="forward", clip=0.0, p=None):
    """The LSTM recurrence (ONNX LSTM's equations in the IR's gate order f, i, c, o): with
    peepholes ``p`` ([D, 3H], blocks f, i, o) the input and forget gates also see the previous
    cell state and the output gate the new one, each before its clip and activation."""
    peep = p is not None and np.ndim(p) == 2 and np.any(p)

    def c(v):
        return np.clip(v, -clip, clip) if clip else v

    def cell(d, xt, states):
        h, cs = states
        f, i, g, o = np.split(xt @ w[d].T + h @ r[d].T + b[d], 4, axis=1)
        if peep:
            pf, pi, po = np.split(p[d], 3)
            f, i = f + pf * cs, i + pi * cs
        c_new = _sig(c(f)) * cs + _sig(c(i)) * np.tanh(c(g))
        if peep:
            o = o + po * c_new
        return _sig(c(o)) * np.tanh(c_new), c_new

    return _run_sequence(x, (h0, c0), lens, direction, cell)


@lstm_sequence_op.formal
def _lstm_formal(x, h, c, lens, w, r, b, p=0.0, direction="forward", clip=0.0):
    return lstm_sequence(x, h, c, lens, w, r, b, direction, clip, p)


# --- GRUSequence / RNNSequence ---------------------------------------------------------------------

gru_sequence_op = define("gru_sequence", "ext", """
fragment gru_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, sequence_lengths: tensor<integer>,
                          W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>, direction: string = 'forward',
                          clip: scalar = 0.0, linear_before_reset: logical = false )
    -> ( output: tensor<scalar>, hidden: tensor<scalar> );
""", domain="nnefx", doc="IR GRUSequence (v5), batch-first [N,T,I]; gates z,r,h; sigmoid/tanh.")

rnn_sequence_op = define("rnn_sequence", "ext", """
fragment rnn_sequence( input: tensor<scalar>, initial_hidden: tensor<scalar>, sequence_lengths: tensor<integer>,
                          W: tensor<scalar>, R: tensor<scalar>, B: tensor<scalar>, direction: string = 'forward',
                          clip: scalar = 0.0, activation: string = 'tanh' )
    -> ( output: tensor<scalar>, hidden: tensor<scalar> );
""", domain="nnefx", doc="IR RNNSequence (v5), batch-first [N,T,I]; H' = f(X W^T + H R^T + B).")


def _seq_shape(x, h, w, r, b, direction, gates):
    if len(x) != 3 or len(h) != 3 or len(w) != 3 or len(r) != 3:
        raise NNEFXError("recurrent sequence: X, H, W and R must have rank 3")
    n, t, _ = x
    dirs = 2 if direction == "bidirectional" else 1
    hs = h[2]
    if w[0] != dirs or w[1] != gates * hs or r[2] != hs:
        raise NNEFXError("recurrent sequence: weight shapes do not match the hidden size")
    return (n, dirs, t, hs), (n, dirs, hs)


@gru_sequence_op.shape
def _gru_shape(x, h, lens, w, r, b, direction="forward", clip=0.0, linear_before_reset=False):
    return _seq_shape(x, h, w, r, b, direction, 3)


@rnn_sequence_op.shape
def _rnn_shape(x, h, lens, w, r, b, direction="forward", clip=0.0, activation="tanh"):
    return _seq_shape(x, h, w, r, b, direction, 1)


_ACTIVATIONS = {"tanh": np.tanh, "sigmoid": _sig, "relu": lambda v: np.maximum(v, 0)}


def _run_sequence(x, states0, lens, direction, cell):
    """Shared time loop of the recurrent sequences: ``states0`` the initial states, each
    (N, directions, H), the first one the hidden state written to the output; ``cell(d, xt,
    states)`` gives a step's new states.  Steps at or past a sequence's length leave zeros in
    the output and the states as they were.  Returns the output and each final state."""
    x = np.asarray(x)
    n, t, _ = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    hs = states0[0].shape[2]
    y = np.zeros((n, dirs, t, hs), dtype=x.dtype)
    finals = [np.zeros((n, dirs, hs), dtype=x.dtype) for _ in states0]
    lens = np.asarray(lens).reshape(-1).astype(np.int64)
    if lens.size == 1 and n != 1:
        lens = np.repeat(lens, n)
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        states = [s[:, d].astype(x.dtype).copy() for s in states0]
        for step in range(t):
            active = step < lens
            pos = np.where(active, (lens - 1 - step) if reverse else step, 0)
            new = cell(d, x[np.arange(n), pos], states)
            states = [np.where(active[:, None], v, s) for v, s in zip(new, states, strict=True)]
            for bi in range(n):
                if active[bi]:
                    y[bi, d, pos[bi]] = states[0][bi]
        for final, s in zip(finals, states, strict=True):
            final[:, d] = s
    return (y, *finals)


@gru_sequence_op.formal
def _gru_formal(x, h0, lens, w, r, b, direction="forward", clip=0.0, linear_before_reset=False):
    def cell(d, xt, states):
        (h,) = states
        wz, wr, wh = np.split(w[d], 3)
        rz, rr, rh = np.split(r[d], 3)
        parts = b[d].reshape(4 if linear_before_reset else 3, -1)
        bz, br, bh = parts[0], parts[1], parts[2]
        rbh = parts[3] if linear_before_reset else None

        def c(v):
            return np.clip(v, -clip, clip) if clip else v

        z = _sig(c(xt @ wz.T + h @ rz.T + bz))
        rg = _sig(c(xt @ wr.T + h @ rr.T + br))
        if linear_before_reset:
            hh = np.tanh(c(xt @ wh.T + rg * (h @ rh.T + rbh) + bh))
        else:
            hh = np.tanh(c(xt @ wh.T + (rg * h) @ rh.T + bh))
        return ((1 - z) * hh + z * h,)

    return _run_sequence(x, (h0,), lens, direction, cell)


@rnn_sequence_op.formal
def _rnn_formal(x, h0, lens, w, r, b, direction="forward", clip=0.0, activation="tanh"):
    if activation not in _ACTIVATIONS:
        raise NNEFXError(f"rnn_sequence: unsupported activation '{activation}'")
    f = _ACTIVATIONS[activation]

    def cell(d, xt, states):
        v = xt @ w[d].T + states[0] @ r[d].T + b[d]
        return (f(np.clip(v, -clip, clip) if clip else v),)

    return _run_sequence(x, (h0,), lens, direction, cell)


