"""Recurrent cells and sequences: how each operator is read from IR and ONNX (and written, below).

LSTMCell, GRUCell, RNNCell, LSTMSequence, GRUSequence, RNNSequence; ONNX LSTM, GRU, RNN.

Specifications: OpenVINO opset docs: LSTMCell-4, GRUCell-3, RNNCell-3, LSTMSequence-5, GRUSequence-5, RNNSequence-5;
ONNX operator docs: LSTM, GRU, RNN.
"""

from __future__ import annotations

import numpy as np

from ..reading.context import NodeContext
from ..reading.conventions import binary, const_value, unary
from ..reading.registry import ANY, operator

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

# --- recurrent cells -------------------------------------------------------------------------------


def _chunks(ctx: NodeContext, i: int, n: int) -> list[str]:
    """Split a weight input along axis 0 into n equal parts (folded when constant)."""
    v = ctx.input(i)
    if v.is_const:
        return [const_value(ctx, c, v.etype) for c in np.split(np.asarray(v.const), n, axis=0)]
    return ctx.emit("split", {"value": ctx.tensor(i)}, {"axis": 0, "ratios": [1] * n}, outputs=[n])


def _row(ctx: NodeContext, t: str) -> str:
    return ctx.emit1("unsqueeze", {"input": t}, {"axes": [0]})


_ACT = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu"}


def _acts(ctx: NodeContext, default: list[str]) -> list[str]:
    acts = [a.strip().lower() for a in ctx.str("activations", ",".join(default)).split(",") if a.strip()]
    for a in acts:
        if a not in _ACT:
            raise ctx.error(f"activation '{a}' is not supported")
    if ctx.has("activations_alpha") or ctx.has("activations_beta"):
        if ctx.str("activations_alpha", "") or ctx.str("activations_beta", ""):
            raise ctx.error("activations_alpha/beta are not supported")
    return acts


def _clip(ctx: NodeContext, t: str) -> str:
    c = ctx.float("clip", 0.0)
    if c:
        return ctx.emit1("clamp", {"x": t, "a": -c, "b": c})
    return t


def _lin(ctx: NodeContext, x: str, w: str) -> str:
    return ctx.emit1("matmul", {"A": x, "B": w}, {"transposeA": False, "transposeB": True})


@operator("LSTMCell", ANY)
def _lstm_cell(ctx: NodeContext):
    f_act, g_act, h_act = _acts(ctx, ["sigmoid", "tanh", "tanh"])
    if ctx.n_inputs > 6:
        raise ctx.error("LSTMCell peepholes are not supported")
    x, h, c = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    hs = ctx.int("hidden_size")
    wshape = ctx.in_shape(3)
    if wshape is not None and wshape[0] is not None and wshape[0] != 4 * hs:
        raise ctx.error(f"W has {wshape[0]} rows, expected 4 * hidden_size = {4 * hs}")
    b = const_value(ctx, np.asarray(ctx.const(5)).reshape(1, -1), ctx.in_etype(5)) if ctx.is_const(5) \
        else _row(ctx, ctx.tensor(5))
    gates = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, ctx.tensor(3)), _lin(ctx, h, ctx.tensor(4))), b)
    gates = _clip(ctx, gates)
    f, i, g, o = ctx.emit("split", {"value": gates}, {"axis": 1, "ratios": [1, 1, 1, 1]}, outputs=[4])
    ft, it, ot = (unary(ctx, _ACT[f_act], t) for t in (f, i, o))
    gt = unary(ctx, _ACT[g_act], g)
    c2 = binary(ctx, "add", binary(ctx, "mul", ft, c), binary(ctx, "mul", it, gt))
    h2 = binary(ctx, "mul", ot, unary(ctx, _ACT[h_act], c2))
    return [ctx.result(h2, port=0), ctx.result(c2, port=1)]


@operator("GRUCell", ANY)
def _gru_cell(ctx: NodeContext):
    f_act, g_act = _acts(ctx, ["sigmoid", "tanh"])
    x, h = ctx.tensor(0), ctx.tensor(1)
    lbr = ctx.bool("linear_before_reset", False)
    wz, wr, wh = _chunks(ctx, 2, 3)
    rz, rr, rh = _chunks(ctx, 3, 3)
    bparts = _chunks(ctx, 4, 4 if lbr else 3)
    bparts = [_row(ctx, t) for t in bparts]
    z = unary(ctx, _ACT[f_act], _clip(ctx, binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wz), _lin(ctx, h, rz)),
                                                  bparts[0])))
    rg = unary(ctx, _ACT[f_act], _clip(ctx, binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wr),
                                                                      _lin(ctx, h, rr)), bparts[1])))
    if lbr:
        hh = binary(ctx, "add", binary(ctx, "mul", rg, binary(ctx, "add", _lin(ctx, h, rh), bparts[3])),
                    binary(ctx, "add", _lin(ctx, x, wh), bparts[2]))
    else:
        hh = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, wh), _lin(ctx, binary(ctx, "mul", rg, h), rh)),
                    bparts[2])
    ht = unary(ctx, _ACT[g_act], _clip(ctx, hh))
    # H' = (1 - z) * h~ + z * H
    one_minus = binary(ctx, "sub", 1.0, z)
    h2 = binary(ctx, "add", binary(ctx, "mul", one_minus, ht), binary(ctx, "mul", z, h))
    return ctx.result(h2)


@operator("RNNCell", ANY)
def _rnn_cell(ctx: NodeContext):
    (act,) = _acts(ctx, ["tanh"])
    x, h = ctx.tensor(0), ctx.tensor(1)
    b = const_value(ctx, np.asarray(ctx.const(4)).reshape(1, -1), ctx.in_etype(4)) if ctx.is_const(4) \
        else _row(ctx, ctx.tensor(4))
    y = binary(ctx, "add", binary(ctx, "add", _lin(ctx, x, ctx.tensor(2)), _lin(ctx, h, ctx.tensor(3))), b)
    return ctx.result(unary(ctx, _ACT[act], _clip(ctx, y)))


@operator("LSTMSequence", ANY)
def _lstm_sequence(ctx: NodeContext):
    acts = _acts(ctx, ["sigmoid", "tanh", "tanh"])
    if acts != ["sigmoid", "tanh", "tanh"]:
        raise ctx.error("LSTMSequence with non-default activations is not supported")
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    ctx.expect_inputs(7)
    lt = _sequence_inputs(ctx, 3)
    outs = ctx.emit("ir_lstm_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                         "initial_cell": ctx.tensor(2), "sequence_lengths": lt,
                                         "W": ctx.tensor(4), "R": ctx.tensor(5), "B": ctx.tensor(6)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0)}, outputs=3)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


def _sequence_inputs(ctx: NodeContext, lens_index: int) -> str:
    lens = ctx.input(lens_index)
    if lens.is_const:
        return ctx.tensor_of(ctx.folded(np.asarray(lens.const).astype(np.int64), "i64"))
    t = ctx.tensor(lens_index)
    if lens.etype != "i64":
        t = ctx.emit1("ir_convert", {"input": t}, {"destination_type": "i64"}, dtype="integer")
    return t


@operator("GRUSequence", ANY)
def _gru_sequence(ctx: NodeContext):
    if _acts(ctx, ["sigmoid", "tanh"]) != ["sigmoid", "tanh"]:
        raise ctx.error("GRUSequence with non-default activations is not supported")
    ctx.expect_inputs(6)
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    outs = ctx.emit("ir_gru_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                        "sequence_lengths": _sequence_inputs(ctx, 2), "W": ctx.tensor(3),
                                        "R": ctx.tensor(4), "B": ctx.tensor(5)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0),
                     "linear_before_reset": ctx.bool("linear_before_reset", False)}, outputs=2)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


@operator("RNNSequence", ANY)
def _rnn_sequence(ctx: NodeContext):
    (act,) = _acts(ctx, ["tanh"])
    ctx.expect_inputs(6)
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    outs = ctx.emit("ir_rnn_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                        "sequence_lengths": _sequence_inputs(ctx, 2), "W": ctx.tensor(3),
                                        "R": ctx.tensor(4), "B": ctx.tensor(5)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0), "activation": act}, outputs=2)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]
