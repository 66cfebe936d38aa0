"""nnefx's recurrent sequences (``lstm_sequence``, ``gru_sequence``, ``rnn_sequence``, read from
ONNX LSTM/GRU/RNN and IR LSTMSequence/GRUSequence/RNNSequence) written for tract as
``tract_core_scan``, the way torch-to-nnef writes torch's recurrent layers.

Per direction: the input projection ``x W^T + b`` is one ``matmul`` over the whole sequence
(input [N, T, I] by a [1, G*H, I] constant), scanned along T one step at a time (from the end
for a reverse direction); the body fragment adds the recurrent term ``h R^T`` and applies the
cell (:mod:`nnefx.ops.ext.recurrent`'s equations, gate order f, i, c, o for LSTM and z, r, h for
GRU, clip on every pre-activation); the state is [N, 1, H].  The full output of each direction
gets its direction axis back and the directions are concatenated, as nnefx's [N, D, T, H].

tract's scan runs every step of every sequence: sequence lengths shorter than the input
(per-batch lengths) have no form here and are refused, located; weights and biases must be
known when the model is written (they become the constants of the matmuls).
"""

from __future__ import annotations

import re

import numpy as np

from ...graph import Graph, Operation, Tensor
from .rewrite import Rewriter, rule
from .rules import _refuse


def _known(rw: Rewriter, op: Operation, param: str) -> np.ndarray:
    """The value of a weight-like argument: folded, or a variable's data."""
    name = op.inputs[param]
    value = rw.value(name)
    if value is None and isinstance(name, str):
        value = getattr(rw.tensor(name), "data", None)
    if value is None:
        raise _refuse(op, f"its '{param}' depends on the model's inputs (tract's scan takes it as a constant)")
    return np.asarray(value)

_GATES = {"lstm_sequence": 4, "gru_sequence": 3, "rnn_sequence": 1}


class _Body:
    """A scan body built operation by operation (its parameters are ``external`` inputs)."""

    def __init__(self, name: str, params: list[str], results: list[str]):
        self.graph = Graph(name=name, inputs=list(params), outputs=list(results))
        self.count = 0
        for p in params:
            self.graph.tensors[p] = Tensor(name=p, dtype="scalar")
            self.graph.operations.append(Operation("external", {}, {"output": p}, {"shape": []}, dtype="scalar"))

    def add(self, op: str, inputs: dict, attribs: dict | None = None, name: str | None = None) -> str:
        if name is None:
            self.count += 1
            name = f"t{self.count}"
        self.graph.tensors[name] = Tensor(name=name, dtype="scalar")
        self.graph.operations.append(Operation(op, inputs, {"output": name}, attribs or {}))
        return name

    def split(self, x: str, parts: int, size: int) -> list[str]:
        """``x``'s gate blocks along its last axis (slices: tract's library has no ``split``)."""
        return [self.add("slice", {"input": x}, {"axes": [2], "begin": [k * size], "end": [(k + 1) * size],
                                                 "stride": [1]}) for k in range(parts)]

    def recurrent(self, h: str, r: str) -> str:
        return self.add("matmul", {"A": h, "B": r}, {"transposeA": False, "transposeB": True})

    def clipped(self, x: str, clip: float) -> str:
        return self.add("clamp", {"x": x, "a": -clip, "b": clip}) if clip else x


def _lstm_body(b: _Body, clip: float, hs: int) -> None:
    gates = b.clipped(b.add("add", {"x": "x_t", "y": b.recurrent("h", "R")}), clip)
    f, i, g, o = b.split(gates, 4, hs)
    c_next = b.add("add", {"x": b.add("mul", {"x": b.add("sigmoid", {"x": f}), "y": "c"}),
                           "y": b.add("mul", {"x": b.add("sigmoid", {"x": i}), "y": b.add("tanh", {"x": g})})},
                   name="c_next")
    b.add("mul", {"x": b.add("sigmoid", {"x": o}), "y": b.add("tanh", {"x": c_next})}, name="h_next")


def _gru_body(b: _Body, clip: float, lbr: bool, hs: int) -> None:
    xz, xr, xh = b.split("x_t", 3, hs)
    rz, rr, rh = "R_z", "R_r", "R_h"
    z = b.add("sigmoid", {"x": b.clipped(b.add("add", {"x": xz, "y": b.recurrent("h", rz)}), clip)})
    r = b.add("sigmoid", {"x": b.clipped(b.add("add", {"x": xr, "y": b.recurrent("h", rr)}), clip)})
    if lbr:
        inner = b.add("mul", {"x": r, "y": b.add("add", {"x": b.recurrent("h", rh), "y": "Rb_h"})})
    else:
        inner = b.recurrent(b.add("mul", {"x": r, "y": "h"}), rh)
    hh = b.add("tanh", {"x": b.clipped(b.add("add", {"x": xh, "y": inner}), clip)})
    b.add("add", {"x": b.add("mul", {"x": b.add("sub", {"x": 1.0, "y": z}), "y": hh}),
                  "y": b.add("mul", {"x": z, "y": "h"})}, name="h_next")


def _rnn_body(b: _Body, clip: float, activation: str) -> None:
    pre = b.clipped(b.add("add", {"x": "x_t", "y": b.recurrent("h", "R")}), clip)
    b.add(activation, {"x": pre}, name="h_next")


@rule("lstm_sequence", "gru_sequence", "rnn_sequence")
def _sequence(rw: Rewriter, op: Operation) -> None:
    kind = op.op
    x = op.inputs["input"]
    shape = rw.tensor(x).shape
    if shape is None or len(shape) != 3 or not isinstance(shape[1], int):
        raise _refuse(op, f"the number of steps of '{x}' is not known when the model is written")
    n, t, _ = shape  # the batch may be symbolic
    p = op.inputs.get("P", 0.0)
    if kind == "lstm_sequence" and not (isinstance(p, (int, float)) and not p) and np.any(_known(rw, op, "P")):
        raise _refuse(op, "LSTM peepholes (input P) have no tract form here")
    w, r, bias = (_known(rw, op, p).astype(np.float32) for p in ("W", "R", "B"))
    lens = _known(rw, op, "sequence_lengths").reshape(-1)
    if np.any(lens != t):
        raise _refuse(op, f"sequence lengths {lens.tolist()} shorter than the input's {t} steps: tract's "
                          "scan runs every step of every sequence")
    direction = op.attribs.get("direction", "forward")
    clip = float(op.attribs.get("clip", 0.0) or 0.0)
    lbr = bool(op.attribs.get("linear_before_reset", False))
    activation = op.attribs.get("activation", "tanh")
    if kind == "rnn_sequence" and activation not in ("tanh", "sigmoid", "relu"):
        raise _refuse(op, f"activation '{activation}' has no form here")
    dirs = 2 if direction == "bidirectional" else 1
    gates, hs = _GATES[kind], w.shape[1] // _GATES[kind]
    outs = op.outputs
    base = re.sub(r"\W", "_", op.output_names()[0])
    states = ["initial_hidden"] + (["initial_cell"] if kind == "lstm_sequence" else [])
    per_dir: list[list[str]] = []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wx = rw.constant(f"{base}_W{d}", w[d][None], op, fresh=True)
        bx = bias[d][: gates * hs]  # GRU with linear_before_reset: the recurrent h bias comes after
        proj = rw.temp("matmul", {"A": x, "B": wx}, {"transposeA": False, "transposeB": True}, like=op,
                       shape=(n, t, gates * hs))
        xw = rw.temp("add", {"x": proj, "y": rw.constant(f"{base}_B{d}", bx[None, None], op, fresh=True)},
                     {}, like=op, shape=(n, t, gates * hs))
        full_names, full_tensors = [], []
        if kind == "gru_sequence":
            for g, tag in enumerate("zrh"):
                full_names.append(f"R_{tag}")
                full_tensors.append(rw.constant(f"{base}_R{d}{tag}", r[d][g * hs:(g + 1) * hs][None], op,
                                                fresh=True))
            if lbr:
                full_names.append("Rb_h")
                full_tensors.append(rw.constant(f"{base}_Rb{d}", bias[d][3 * hs:][None, None], op, fresh=True))
        else:
            full_names.append("R")
            full_tensors.append(rw.constant(f"{base}_R{d}", r[d][None], op, fresh=True))
        state_names = ["h", "c"][: len(states)]
        init = []
        for s in states:
            init.append(rw.temp("slice", {"input": op.inputs[s]}, {"axes": [1], "begin": [d], "end": [d + 1],
                                                                   "stride": [1]}, like=op, shape=(n, 1, hs)))
        body_name = rw.fresh(f"{base}_step{d}")
        results = ["h_next"] + (["c_next"] if kind == "lstm_sequence" else [])
        body = _Body(body_name, ["x_t", *full_names, *state_names], results)
        if kind == "lstm_sequence":
            _lstm_body(body, clip, hs)
        elif kind == "gru_sequence":
            _gru_body(body, clip, lbr, hs)
        else:
            _rnn_body(body, clip, activation)
        rw.graph.subgraphs[body_name] = body.graph
        chunk = -1 if reverse else 1
        names = [rw.fresh(f"{base}_y{d}"), rw.fresh(f"{base}_h{d}")]
        output = [("h_next", "full", 1, chunk), ("h_next", "last", 1, chunk)]
        if kind == "lstm_sequence":
            names.append(rw.fresh(f"{base}_c{d}"))
            output.append(("c_next", "last", 1, chunk))
        for k, nm in enumerate(names):
            rw._declare(nm, None, dtype="scalar", shape=(n, t, hs) if k == 0 else (n, 1, hs))
        rw.graph.operations.append(Operation(
            "tract_core_scan", {"scan_inputs": [xw], "full_inputs": full_tensors, "state_inputs": init},
            {"outputs": names},
            {"body": body_name, "scan": [("x_t", 1, chunk)], "full": full_names,
             "state": [(s, f"{s}_next") for s in state_names], "output": output},
            location=op.location))
        per_dir.append(names)
    ys = [rw.temp("unsqueeze", {"input": names[0]}, {"axes": [1]}, like=op, shape=(n, 1, t, hs))
          for names in per_dir]
    rw.emit("concat", {"values": ys}, {"axis": 1}, outs["output"], like=op)
    rw.emit("concat", {"values": [names[1] for names in per_dir]}, {"axis": 1}, outs["hidden"], like=op)
    if kind == "lstm_sequence":
        rw.emit("concat", {"values": [names[2] for names in per_dir]}, {"axis": 1}, outs["cell"], like=op)
