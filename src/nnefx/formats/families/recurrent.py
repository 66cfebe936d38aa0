"""Recurrent sequences in the formats.

Covers the opset LSTM/GRU/RNN sequence layers, ``ReverseSequence``, ``CTCGreedyDecoder``.

Writing: per operation its IR v11 writer (``*_to_ir``) beside its ONNX writer (``*_to_onnx``),
under the rules of :mod:`nnefx.formats.families`.
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


@to_ir("lstm_sequence")
def ir_lstm_sequence_to_ir(ctx: IRContext, op: Operation) -> None:
    # the operation *is* LSTMSequence-5 (batch first, gates f,i,c,o, sigmoid/tanh/tanh)
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
