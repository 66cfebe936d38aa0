"""Recurrent cells and sequences: how each operator is read from IR and ONNX (and written, below).

LSTMCell, GRUCell, RNNCell, LSTMSequence, GRUSequence, RNNSequence; ONNX LSTM, GRU, RNN.

Specifications: OpenVINO opset docs: LSTMCell-4, GRUCell-3, RNNCell-3, LSTMSequence-5, GRUSequence-5, RNNSequence-5;
ONNX operator docs: LSTM, GRU, RNN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..export.lowering import (
    out,
    static,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.spelling import F32, I64, slice_axis
from ..onnx.writer import ExportContext as OnnxContext
from ..onnx.writer import tensor_type
from ..reading.context import NodeContext
from ..reading.conventions import binary, const_value, unary
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value
from ._common import onnx_need

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------


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
    outs = ctx.emit("lstm_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
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
        t = ctx.emit1("convert_element_type", {"input": t}, {"destination_type": "i64"}, dtype="integer")
    return t


@operator("GRUSequence", ANY)
def _gru_sequence(ctx: NodeContext):
    if _acts(ctx, ["sigmoid", "tanh"]) != ["sigmoid", "tanh"]:
        raise ctx.error("GRUSequence with non-default activations is not supported")
    ctx.expect_inputs(6)
    direction = ctx.choice("direction", ("forward", "reverse", "bidirectional"))
    outs = ctx.emit("gru_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
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
    outs = ctx.emit("rnn_sequence", {"input": ctx.tensor(0), "initial_hidden": ctx.tensor(1),
                                        "sequence_lengths": _sequence_inputs(ctx, 2), "W": ctx.tensor(3),
                                        "R": ctx.tensor(4), "B": ctx.tensor(5)},
                    {"direction": direction, "clip": ctx.float("clip", 0.0), "activation": act}, outputs=2)
    return [ctx.result(o, port=i) for i, o in enumerate(outs)]


# --- ONNX nodes -----------------------------------------------------------------------------------
# ONNX LSTM / GRU / RNN (ONNX operator docs: LSTM-14, GRU-14, RNN-14) are the IR sequences
# (LSTMSequence-5, GRUSequence-5, RNNSequence-5) in another layout: time-first by default
# (``layout`` 0: X [T, N, I], states [D, N, H], Y [T, D, N, H]; ``layout`` 1 is batch-first
# with Y [N, T, D, H]), LSTM gate blocks i,o,f,c where the IR has f,i,c,o (GRU z,r,h in both),
# and two biases (Wb, Rb) where the IR has their sum (GRU with ``linear_before_reset`` keeps
# Rb's h block apart).  Both read a 'reverse' direction backwards within each sequence's
# length, leave zeros past it and return the last active state.

#: per ONNX kind: IR operation, gate count, IR gate block -> ONNX gate block, default activations
_ONNX_SEQ = {"LSTM": ("lstm_sequence", 4, [2, 0, 3, 1], ["sigmoid", "tanh", "tanh"]),
             "GRU": ("gru_sequence", 3, [0, 1, 2], ["sigmoid", "tanh"]),
             "RNN": ("rnn_sequence", 1, [0], ["tanh"])}


def _onnx_gate_rows(c: NodeContext, v: Value, order: list[int], hs: int, what: str) -> str:
    """``v`` ([D, G*H, ...]) with its gate blocks along axis 1 in the IR's order."""
    idx = np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order])
    if v.is_const:
        arr = np.asarray(v.const)
        if arr.ndim < 2 or arr.shape[1] != len(order) * hs:
            raise c.error(f"{what} of shape {list(arr.shape)} does not hold {len(order)} gate blocks of {hs}")
        return const_value(c, np.take(arr, idx, axis=1), v.etype)
    t = c.tensor_of(v)
    if order == list(range(len(order))):
        return t
    return c.emit1("gather", {"input": t, "indices": const_value(c, idx, "i64")}, {"axis": 1})


def _onnx_batch_first(c: NodeContext, v: Value) -> str:
    """[A, B, ...] -> [B, A, ...] (time-first data, direction-first states)."""
    rank = len(v.shape) if v.shape is not None else 3
    if v.is_const:
        return const_value(c, np.swapaxes(np.asarray(v.const), 0, 1), v.etype)
    return c.emit1("transpose", {"input": c.tensor_of(v)}, {"axes": [1, 0] + list(range(2, rank))})


def _onnx_runtime_bias(c: NodeContext, b: str, gates: int, hs: int, idx: np.ndarray, lbr: bool) -> str:
    """The IR bias of a run-time ONNX bias ``b`` ([D, 2*G*H]): Wb + Rb in the IR's gate order."""
    def part(begin: int, end: int) -> str:
        return c.emit1("slice", {"input": b}, {"axes": [1], "begin": [begin], "end": [end]})

    def reordered(t: str) -> str:
        if list(idx) == list(range(len(idx))):
            return t
        return c.emit1("gather", {"input": t, "indices": const_value(c, idx, "i64")}, {"axis": 1})

    g = gates * hs
    if not lbr:
        return binary(c, "add", reordered(part(0, g)), reordered(part(g, 2 * g)))
    zr = binary(c, "add", part(0, 2 * hs), part(g, g + 2 * hs))
    return c.emit1("concat", {"values": [zr, part(2 * hs, g), part(g + 2 * hs, 2 * g)]}, {"axis": 1})


@onnx_node("LSTM", "GRU", "RNN")
def _onnx_sequence(r, attrs, ins):
    kind = r.node.op_type
    op, gates, order, default_acts = _ONNX_SEQ[kind]
    x, w, rw = onnx_need(r, ins, 0, "X"), onnx_need(r, ins, 1, "W"), onnx_need(r, ins, 2, "R")
    opt = [ins[i] if len(ins) > i else None for i in range(8)]
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise r.error(f"layout {layout} must be 0 or 1")
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise r.error(f"direction '{direction}' must be forward, reverse or bidirectional")
    dirs = 2 if direction == "bidirectional" else 1
    if x.shape is None or len(x.shape) != 3 or w.shape is None or len(w.shape) != 3:
        raise r.error("X and W must have known rank 3")
    hs = int(attrs["hidden_size"]) if "hidden_size" in attrs else (rw.shape or (None,))[-1]
    if hs is None or hs < 1:
        raise r.error("hidden_size is not known")
    if w.shape[0] is not None and w.shape[0] != dirs:
        raise r.error(f"W has {w.shape[0]} directions; direction '{direction}' needs {dirs}")
    acts = [a.lower() for a in attrs.get("activations", default_acts * dirs)]
    if kind == "RNN":
        if len(acts) != dirs or len(set(acts)) != 1 or acts[0] not in _ACT:
            raise r.error(f"activations {attrs.get('activations')} are not supported (one of Tanh, Sigmoid, Relu "
                          "for every direction)")
    elif acts != default_acts * dirs:
        raise r.error(f"{kind} with activations {attrs.get('activations')} is not supported (only the defaults)")
    if attrs.get("activation_alpha") or attrs.get("activation_beta"):
        raise r.error("activation_alpha/activation_beta are not supported")
    if kind == "LSTM":
        if attrs.get("input_forget", 0):
            raise r.error("input_forget=1 (coupled input and forget gates) is not supported")
    c = r.ctx([v for v in ins if v is not None])
    xs = tuple(x.shape) if layout == 1 else (x.shape[1], x.shape[0], x.shape[2])
    n, t = xs[0], xs[1]
    xt = c.tensor_of(x) if layout == 1 else _onnx_batch_first(c, x)
    W = _onnx_gate_rows(c, w, order, hs, "W")
    R = _onnx_gate_rows(c, rw, order, hs, "R")
    # bias: ONNX [D, 2*G*H] (Wb then Rb) -> IR [D, G*H] = Wb + Rb (GRU linear_before_reset: + Rb's h block)
    lbr = kind == "GRU" and bool(attrs.get("linear_before_reset", 0))
    b = opt[3]
    idx = np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order])
    if b is None:
        B = const_value(c, np.zeros((dirs, (gates + (1 if lbr else 0)) * hs), np.float32), "f32")
    elif b.is_const:
        arr = np.asarray(b.const)
        if arr.shape != (dirs, 2 * gates * hs):
            raise r.error(f"B of shape {list(arr.shape)} must be [{dirs}, {2 * gates * hs}]")
        wb, rb = np.take(arr[:, :gates * hs], idx, axis=1), np.take(arr[:, gates * hs:], idx, axis=1)
        if lbr:
            bias = np.concatenate([wb[:, :2 * hs] + rb[:, :2 * hs], wb[:, 2 * hs:], rb[:, 2 * hs:]], axis=1)
        else:
            bias = wb + rb
        B = const_value(c, bias, b.etype)
    else:
        B = _onnx_runtime_bias(c, c.tensor_of(b), gates, hs, idx, lbr)
    # sequence lengths: every sequence is whole unless given
    if opt[4] is not None:
        lv = opt[4]
        lens = const_value(c, np.asarray(lv.const).astype(np.int64), "i64") if lv.is_const else \
            c.emit1("convert_element_type", {"input": c.tensor_of(lv)}, {"destination_type": "i64"}, dtype="integer")
    elif t is not None:
        lens = const_value(c, np.array([t], np.int64), "i64")
    else:
        raise r.error("a sequence length that is not known when loading needs the sequence_lens input")

    def state(v: Value | None, what: str) -> str:
        if v is None:
            if n is None:
                raise r.error(f"an omitted {what} with a batch size not known when loading is not supported")
            return const_value(c, np.zeros((n, dirs, hs), np.float32), "f32")
        return c.tensor_of(v) if layout == 1 else _onnx_batch_first(c, v)

    inputs = {"input": xt, "initial_hidden": state(opt[5], "initial_h")}
    if kind == "LSTM":
        inputs["initial_cell"] = state(opt[6], "initial_c")
    inputs.update({"sequence_lengths": lens, "W": W, "R": R, "B": B})
    if kind == "LSTM" and opt[7] is not None and not (opt[7].is_const and not np.any(np.asarray(opt[7].const))):
        # peepholes: ONNX P [D, 3H] in blocks i, o, f; the operation's are f, i, o
        inputs["P"] = _onnx_gate_rows(c, opt[7], [2, 0, 1], hs, "P")
    attribs = {"direction": direction, "clip": float(attrs.get("clip", 0.0))}
    if kind == "GRU":
        attribs["linear_before_reset"] = lbr
    if kind == "RNN":
        attribs["activation"] = acts[0]
    outs = c.emit(op, inputs, attribs, outputs=3 if kind == "LSTM" else 2)
    # Y: IR [N, D, T, H] -> [T, D, N, H] (layout 0) or [N, T, D, H] (layout 1); states [N, D, H] -> [D, N, H]
    y = c.emit1("transpose", {"input": outs[0]}, {"axes": [2, 1, 0, 3] if layout == 0 else [0, 2, 1, 3]})
    results = [c.result(y)]
    for o in outs[1:]:
        results.append(c.result(o if layout == 1 else c.emit1("transpose", {"input": o}, {"axes": [1, 0, 2]})))
    return results


# ================================================================================================
# Writing
# ================================================================================================

# --- IR v11 helpers --------------------------------------------------------------------------

def _sequence_lengths_ir(ctx: IRContext, lens: Any, n: int, layer: str) -> Any:
    """The per-batch-item lengths of a sequence layer: load-time data (one length repeated for
    every item) or a run-time ``[N]`` tensor; ``layer`` names the form in a refusal."""
    data = ctx.data(lens)
    if data is not None:
        arr = np.asarray(data, dtype=np.int64).reshape(-1)
        return ctx.const(np.repeat(arr, n) if arr.size == 1 else arr, "i64")
    if ctx.shape(lens) == (n,):
        return ctx.ref(lens)
    raise ctx.fail(f"run-time sequence lengths of shape {ctx.shape(lens)} have no {layer} form")


# --- ONNX helpers ----------------------------------------------------------------------------

def _swap01(ctx: OnnxContext, value: Any) -> str:
    ref = ctx.ref(value)
    d = ctx.dims(ref)
    return ctx.node("Transpose", [ref], (d[1], d[0]) + tuple(d[2:]), perm=[1, 0] + list(range(2, len(d))))


def _gate_blocks(ctx: OnnxContext, value: Any, order: list[int], hs: int) -> str:
    """``value`` ([D, G*H, ...]) with its gate blocks along axis 1 reordered."""
    idx = np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order])
    if order == list(range(len(order))):
        return ctx.ref(value)
    data = None if (isinstance(value, str) and value in ctx.refs) else ctx.data(value)
    if data is not None:
        return ctx.const(np.take(np.asarray(data, F32), idx, axis=1))
    ref = ctx.ref(value)
    return ctx.node("Gather", [ref, ctx.ints(idx)], ctx.dims(ref), axis=1)


def _sequence_lengths_onnx(ctx: OnnxContext, value: Any, n: int | None) -> str:
    data = None if (isinstance(value, str) and value in ctx.refs) else ctx.data(value)
    if data is not None:
        arr = np.asarray(data, dtype=np.int64).reshape(-1)
        if arr.size == 1 and n is not None:
            arr = np.repeat(arr, n)
        if n is None or arr.size != n or np.any(arr < 0) or np.any(arr > np.iinfo(np.int32).max):
            raise ctx.fallback(f"sequence lengths {arr.tolist()} do not give one length per batch item")
        return ctx.const(arr.astype(np.int32))
    ref = ctx.ref(value)
    if len(ctx.dims(ref)) != 1:
        raise ctx.fallback(f"run-time sequence lengths of shape {list(ctx.dims(ref))} have no ONNX form")
    return ctx.node("Cast", [ref], ctx.dims(ref), dtype=np.int32, to=tensor_type(np.int32))


# --- writers --------------------------------------------------------------------------------------

@to_ir("ir_reverse_sequence")
def ir_reverse_sequence_to_ir(ctx: IRContext, op: Operation) -> None:
    attrs = {"seq_axis": int(op.attribs.get("seq_axis", 1)), "batch_axis": int(op.attribs.get("batch_axis", 0))}
    ctx.bind(out(op), ctx.layer("ReverseSequence", [op.inputs["input"], op.inputs["lengths"]], out_shape(ctx, op),
                                attrs=attrs))


@to_onnx("ir_reverse_sequence")
def ir_reverse_sequence_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    seq, batch = int(op.attribs.get("seq_axis", 1)), int(op.attribs.get("batch_axis", 0))
    x = ctx.ref(op.inputs["input"])
    if ctx.rank(x) < 2 or {seq, batch} != {0, 1}:
        raise ctx.fallback(f"sequence axis {seq} / batch axis {batch} have no ReverseSequence form (axes 0 and 1)")
    lens = ctx.ref(op.inputs["lengths"])
    lens = ctx.node("Cast", [lens], ctx.dims(lens), dtype=I64, to=tensor_type(I64))
    ctx.bind(out(op), ctx.node("ReverseSequence", [x, lens], ctx.dims(x), batch_axis=batch, time_axis=seq))


@to_ir("ir_ctc_greedy_decoder")
def ir_ctc_greedy_decoder_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("CTCGreedyDecoder", [op.inputs["data"], op.inputs["seq_indicators"]],
                                out_shape(ctx, op), etype="f32",
                                attrs={"ctc_merge_repeated": bool(op.attribs.get("ctc_merge_repeated", True))}))


def peepholes(op: Operation, data: Any) -> Any:
    """The peepholes ``P`` of an ``lstm_sequence`` that has them, else None (left out, or all
    zeros when known); ``data(value)`` gives a value's load-time data (None if not known)."""
    p = op.inputs.get("P", 0.0)
    if isinstance(p, (int, float)) and not p:
        return None
    known = data(p)
    return None if known is not None and not np.any(np.asarray(known)) else p


@to_ir("lstm_sequence")
def ir_lstm_sequence_to_ir(ctx: IRContext, op: Operation) -> None:
    # the operation *is* LSTMSequence-5 (batch first, gates f,i,c,o, sigmoid/tanh/tanh)
    if peepholes(op, ctx.data) is not None:
        raise ctx.fail("LSTMSequence-5 has no peepholes (input P)")
    x = op.inputs["input"]
    n = ctx.shape(x)[0]
    hs = ctx.shape(op.inputs["initial_hidden"])[2]
    lens_ref = _sequence_lengths_ir(ctx, op.inputs["sequence_lengths"], n, "LSTMSequence")
    names = op.output_names()
    refs = ctx.layer("LSTMSequence", [x, op.inputs["initial_hidden"], op.inputs["initial_cell"], lens_ref,
                                      op.inputs["W"], op.inputs["R"], op.inputs["B"]],
                     outputs=[(ctx.shape(nm), "f32") for nm in names],
                     attrs={"hidden_size": hs, "direction": str(op.attribs.get("direction", "forward")),
                            "clip": float(op.attribs.get("clip", 0.0)), "activations": ["sigmoid", "tanh", "tanh"],
                            "activations_alpha": [], "activations_beta": []}, version="opset5")
    for nm, r in zip(names, refs, strict=True):
        ctx.bind(nm, r)


@to_onnx("lstm_sequence", "gru_sequence", "rnn_sequence")
def ir_sequence_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    x = op.inputs["input"]
    n, t, _ = ctx.dims(x)
    w, r, b = op.inputs["W"], op.inputs["R"], op.inputs["B"]
    hs = static(ctx, ctx.dims(op.inputs["initial_hidden"])[2:3])[0]
    dirs = static(ctx, ctx.dims(w)[:1])[0]
    direction = str(op.attribs.get("direction", "forward"))
    clip = float(op.attribs.get("clip", 0.0))
    attrs: dict[str, Any] = {"hidden_size": hs, "direction": direction, "clip": clip if clip else None}
    if op.op == "lstm_sequence":
        kind, order, gates = "LSTM", [1, 3, 0, 2], 4
    elif op.op == "gru_sequence":
        kind, order, gates = "GRU", [0, 1, 2], 3
        attrs["linear_before_reset"] = int(bool(op.attribs.get("linear_before_reset", False)))
    else:
        kind, order, gates = "RNN", [0], 1
        act = str(op.attribs.get("activation", "tanh"))
        names = {"tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu"}
        if act not in names:
            raise ctx.fallback(f"activation '{act}' has no ONNX RNN form")
        attrs["activations"] = [names[act]] * dirs
    W, R = _gate_blocks(ctx, w, order, hs), _gate_blocks(ctx, r, order, hs)
    # the bias: [D, G*H] (+ GRU's recurrent h-bias as a 4th block) -> [D, 2*G*H]
    bdata = None if (isinstance(b, str) and b in ctx.refs) else ctx.data(b)
    lbr = kind == "GRU" and attrs["linear_before_reset"]
    if bdata is not None:
        arr = np.asarray(bdata, F32).reshape(dirs, -1)
        wb = np.take(arr[:, :gates * hs], np.concatenate([np.arange(g * hs, (g + 1) * hs) for g in order]), axis=1)
        rb = np.zeros_like(wb)
        if lbr:
            rb[:, 2 * hs:] = arr[:, 3 * hs:4 * hs]
        B = ctx.const(np.concatenate([wb, rb], axis=1))
    else:
        bref = ctx.ref(b)
        if lbr:
            zeros = ctx.const(np.zeros((dirs, 2 * hs), F32))
            wb = slice_axis(ctx, bref, 1, 0, 3 * hs, 1, 3 * hs)
            rbh = slice_axis(ctx, bref, 1, 3 * hs, 4 * hs, 1, hs)
            B = ctx.node("Concat", [wb, zeros, rbh], (dirs, 6 * hs), axis=1)
        else:
            wb = _gate_blocks(ctx, bref, order, hs)
            B = ctx.node("Concat", [wb, ctx.const(np.zeros((dirs, gates * hs), F32))], (dirs, 2 * gates * hs), axis=1)
    inputs = [_swap01(ctx, x), W, R, B, _sequence_lengths_onnx(ctx, op.inputs["sequence_lengths"], n),
              _swap01(ctx, op.inputs["initial_hidden"])]
    outs = [((t, dirs, n, hs), F32), ((dirs, n, hs), F32)]
    if kind == "LSTM":
        inputs.append(_swap01(ctx, op.inputs["initial_cell"]))
        outs.append(((dirs, n, hs), F32))
        p = peepholes(op, lambda v: None if (isinstance(v, str) and v in ctx.refs) else ctx.data(v))
        if p is not None:  # the operation's blocks f, i, o -> ONNX's i, o, f
            inputs.append(_gate_blocks(ctx, p, [1, 2, 0], hs))
    refs = ctx.node(kind, inputs, outputs=outs, **attrs)
    names = op.output_names()
    ctx.bind(names[0], ctx.node("Transpose", [refs[0]], (n, dirs, t, hs), perm=[2, 1, 0, 3]))
    for name, ref in zip(names[1:], refs[1:], strict=True):
        ctx.bind(name, _swap01(ctx, ref))


@to_ir("gru_sequence", "rnn_sequence")
def ir_gru_rnn_sequence_to_ir(ctx: IRContext, op: Operation) -> None:
    x = op.inputs["input"]
    n = ctx.shape(x)[0]
    hs = ctx.shape(op.inputs["initial_hidden"])[2]
    lens_ref = _sequence_lengths_ir(ctx, op.inputs["sequence_lengths"], n, "sequence-layer")
    attrs: dict[str, Any] = {"hidden_size": hs, "direction": str(op.attribs.get("direction", "forward")),
                             "clip": float(op.attribs.get("clip", 0.0)), "activations_alpha": [],
                             "activations_beta": []}
    if op.op == "gru_sequence":
        kind = "GRUSequence"
        attrs.update(activations=["sigmoid", "tanh"],
                     linear_before_reset=bool(op.attribs.get("linear_before_reset", False)))
    else:
        kind = "RNNSequence"
        attrs["activations"] = [str(op.attribs.get("activation", "tanh"))]
    names = op.output_names()
    refs = ctx.layer(kind, [x, op.inputs["initial_hidden"], lens_ref, op.inputs["W"], op.inputs["R"], op.inputs["B"]],
                     outputs=[(ctx.shape(nm), "f32") for nm in names], attrs=attrs, version="opset5")
    for nm, r in zip(names, refs, strict=True):
        ctx.bind(nm, r)
