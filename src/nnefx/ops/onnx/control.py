"""ONNX control flow: ``If`` (opset 1-25), ``Loop`` (1-25), ``Scan`` (8, 9-25), ``SequenceMap`` (17-25).

Each operation names its bodies with string attributes (``then_branch``/``else_branch``,
``body``): graphs of the enclosing graph's ``subgraphs`` table (:attr:`nnefx.graph.Graph.subgraphs`).
A body's inputs are its formal parameters (as the ONNX operator docs list them) followed by
the outer tensors it reads; the operation passes those as its ``captured`` inputs, so the data
model has no implicit outer-scope reads.  The kernels run a body through the ``call`` hook the
planner passes (:mod:`nnefx.runtime.subgraphs`), on the caller's backend: the formal and the
fast kernels are the same loop around the body, which runs formal or fast kernels.

Optional ONNX inputs (``Loop``'s ``M`` and ``cond``) are ``tensor[]`` arguments of zero or one
tensor.  Values may be tensors, sequences (:class:`nnefx.graph.TensorSequence`) or optionals
(``None`` or the element) wherever ONNX allows them (loop-carried values, branch outputs).

Bounds: one execution runs at most :data:`nnefx.runtime.subgraphs.MAX_ITERATIONS` iterations
(an ONNX ``Loop`` without ``M`` may otherwise never stop); the error names the operation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorSequence
from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_control"
_HOOK = ("call",)


def _limit() -> int:
    from ...runtime.subgraphs import MAX_ITERATIONS

    return MAX_ITERATIONS


def _needs_call(op: str, call: Any) -> None:
    if call is None:
        raise op_error(op, "runs a body graph: it needs the session (run it in a model, not on its own)")


def _scalar_bool(op: str, what: str, value: Any) -> bool:
    a = np.asarray(value)
    if a.size != 1:
        raise op_error(op, f"{what} must hold one value, got shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def _empty_stack(call: Any, body: str, k: int, op: str) -> np.ndarray:
    """A scan output of zero iterations: shape (0, *declared element shape), its declared type."""
    plan = call.plan(body)
    _, _, dtype, shape = plan.outputs[k]
    if shape is None or any(d is None for d in shape):
        raise op_error(op, f"ran zero iterations and body '{body}' does not declare the shape of output {k}, "
                           "so the empty scan output has no known shape")
    return np.zeros((0, *shape), plan.storage[dtype])


# --- If ---------------------------------------------------------------------------------------

onnx_if = define("onnx_if", FAMILY, """
fragment onnx_if( cond: tensor<logical>, captured: tensor<>[], then_branch: string, else_branch: string )
    -> ( outputs: tensor<>[] );
""", domain="onnx", runtime_keywords=_HOOK,
    doc="ONNX If: the outputs of body `then_branch` when `cond` is true, else of `else_branch`; both "
        "take the `captured` outer tensors.")


@onnx_if.shape
def _if_shape(cond, captured, then_branch="", else_branch=""):
    if len(cond) and int(np.prod([d for d in cond if d is not None])) != 1 and None not in cond:
        raise op_error("onnx_if", f"the condition must hold one value, got shape {list(cond)}")
    return None  # decided by the branch taken; the reader sets the declared shapes


def _if(cond, captured, then_branch="", else_branch="", call=None):
    _needs_call("onnx_if", call)
    branch = then_branch if _scalar_bool("onnx_if", "the condition", cond) else else_branch
    return list(call.run(branch, list(captured)))


onnx_if.formal(_if)
onnx_if.fast(_if)


# --- Loop -------------------------------------------------------------------------------------

onnx_loop = define("onnx_loop", FAMILY, """
fragment onnx_loop( max_trip: tensor<integer>[], cond: tensor<logical>[], initial: tensor<>[],
                    captured: tensor<>[], body: string ) -> ( outputs: tensor<>[] );
""", domain="onnx", runtime_keywords=_HOOK,
    doc="ONNX Loop: run `body` (iteration number, condition, carried values, captured tensors) -> "
        "(condition, carried values, scan outputs) while the iteration number is below `max_trip` (if "
        "given) and the condition holds (if given); results: the last carried values, then each scan "
        "output stacked along a new first axis.")


@onnx_loop.shape
def _loop_shape(max_trip, cond, initial, captured, body=""):
    if len(max_trip) > 1 or len(cond) > 1:
        raise op_error("onnx_loop", "takes at most one trip count and one condition")
    return None


def _loop(max_trip, cond, initial, captured, body="", call=None):
    op = "onnx_loop"
    _needs_call(op, call)
    limit = _limit()
    trips = int(np.asarray(max_trip[0]).reshape(-1)[0]) if len(max_trip) else None
    if len(max_trip) and np.asarray(max_trip[0]).size != 1:
        raise op_error(op, f"the trip count must hold one value, got shape {list(np.shape(max_trip[0]))}")
    going = _scalar_bool(op, "the condition", cond[0]) if len(cond) else True
    if not len(cond) and trips is None:  # ONNX: "for (int i=0; ; ++i)", an endless loop
        raise op_error(op, "has neither a trip count nor a condition: it never stops")
    if not len(cond) and trips is not None and trips > limit:  # nothing can stop it sooner: refuse now
        raise op_error(op, f"its trip count {trips} is more than the {limit} iterations one loop may run")
    carried = list(initial)
    n_carried = len(carried)
    _, outs = call.signature(body)
    n_scan = len(outs) - 1 - n_carried
    if n_scan < 0:
        raise op_error(op, f"body '{body}' has {len(outs)} outputs; it needs the condition and the "
                           f"{n_carried} carried values")
    scans: list[list[np.ndarray]] = [[] for _ in range(n_scan)]
    i = 0
    while going and (trips is None or i < trips):
        if i >= limit:
            raise op_error(op, f"ran {limit} iterations without stopping (the most one loop may run"
                               f"{'' if trips is None else f'; its trip count is {trips}'})")
        results = call.run(body, [np.array(i, np.int64), np.array(going), *carried, *captured])
        if len(cond):  # without a condition input the body's condition output is ignored
            going = _scalar_bool(op, "the body's condition output", results[0])
        carried = list(results[1:1 + n_carried])
        for k, value in enumerate(results[1 + n_carried:]):
            if not isinstance(value, np.ndarray):
                raise op_error(op, f"scan output {k} of body '{body}' must be a tensor")
            scans[k].append(value)
        i += 1
    stacked = []
    for k, parts in enumerate(scans):
        if not parts:
            stacked.append(_empty_stack(call, body, 1 + n_carried + k, op))
            continue
        shapes = {p.shape for p in parts}
        if len(shapes) != 1:
            raise op_error(op, f"scan output {k} of body '{body}' changes shape between iterations "
                               f"({sorted(shapes)[:2]}), so its values cannot be stacked")
        stacked.append(np.stack(parts))
    return carried + stacked


onnx_loop.formal(_loop)
onnx_loop.fast(_loop)


# --- Scan -------------------------------------------------------------------------------------

onnx_scan = define("onnx_scan", FAMILY, """
fragment onnx_scan( initial: tensor<>[], scanned: tensor<>[], captured: tensor<>[], body: string,
                    scan_input_axes: integer[] = [], scan_input_directions: integer[] = [],
                    scan_output_axes: integer[] = [], scan_output_directions: integer[] = [],
                    batched: logical = false ) -> ( outputs: tensor<>[] );
""", domain="onnx", runtime_keywords=_HOOK,
    doc="ONNX Scan: run `body` (states, one slice of each scanned tensor, captured tensors) -> (states, "
        "scan output slices) once per slice along each scanned axis (reversed where the direction is 1); "
        "results: the last states, then the slices of each scan output stacked along its axis. "
        "`batched` is Scan-8: axis 0 of every input is a batch, scanned item by item.")


@onnx_scan.shape
def _scan_shape(initial, scanned, captured, body="", scan_input_axes=(), scan_input_directions=(),
                scan_output_axes=(), scan_output_directions=(), batched=False):
    if not scanned:
        raise op_error("onnx_scan", "needs at least one scanned input")
    for attr, values in (("scan_input_axes", scan_input_axes), ("scan_input_directions", scan_input_directions)):
        if values and len(values) != len(scanned):
            raise attr_error("onnx_scan", attr, list(values), f"must have one entry per scanned input ({len(scanned)})")
    for attr, values in (("scan_input_directions", scan_input_directions),
                         ("scan_output_directions", scan_output_directions)):
        if any(d not in (0, 1) for d in values):
            raise attr_error("onnx_scan", attr, list(values), "must hold 0 (forward) or 1 (reverse)")
    for x, axis in zip(scanned, scan_input_axes or [0] * len(scanned), strict=True):
        rank = len(x) - (1 if batched else 0)
        if not -rank <= axis < rank:
            raise attr_error("onnx_scan", "scan_input_axes", list(scan_input_axes),
                             f"has {axis}, outside [-{rank}, {rank - 1}] for a rank-{rank} scanned input")
    return None


def _scan_one(initial, scanned, captured, body, in_axes, in_dirs, out_axes, out_dirs, call):
    op = "onnx_scan"
    seqs = []
    for x, axis, direction in zip(scanned, in_axes, in_dirs, strict=True):
        x = np.asarray(x)
        axis = axis + x.ndim if axis < 0 else axis
        x = np.moveaxis(x, axis, 0)
        seqs.append(x[::-1] if direction else x)
    steps = {x.shape[0] for x in seqs}
    if len(steps) != 1:
        raise op_error(op, f"the scanned inputs have different lengths ({sorted(steps)})")
    n = steps.pop()
    if n > _limit():
        raise op_error(op, f"would run {n} iterations, more than the {_limit()} one loop may run")
    states = list(initial)
    n_states = len(states)
    _, outs = call.signature(body)
    n_out = len(outs) - n_states
    if n_out < 0:
        raise op_error(op, f"body '{body}' has {len(outs)} outputs, fewer than the {n_states} states")
    if out_axes and len(out_axes) != n_out or out_dirs and len(out_dirs) != n_out:
        raise op_error(op, f"scan_output_axes/directions must have one entry per scan output ({n_out})")
    parts: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for t in range(n):
        results = call.run(body, [*states, *(x[t] for x in seqs), *captured])
        states = list(results[:n_states])
        for k, value in enumerate(results[n_states:]):
            parts[k].append(np.asarray(value))
    outputs = []
    for k in range(n_out):
        if not parts[k]:
            stacked = _empty_stack(call, body, n_states + k, op)
        else:
            shapes = {p.shape for p in parts[k]}
            if len(shapes) != 1:
                raise op_error(op, f"scan output {k} of body '{body}' changes shape between iterations")
            stacked = np.stack(parts[k])
        if out_dirs and out_dirs[k]:
            stacked = stacked[::-1]
        axis = out_axes[k] if out_axes else 0
        rank = stacked.ndim
        if not -rank <= axis < rank:
            raise attr_error(op, "scan_output_axes", list(out_axes), f"has {axis}, outside [-{rank}, {rank - 1}]")
        outputs.append(np.ascontiguousarray(np.moveaxis(stacked, 0, axis)))
    return states + outputs


def _scan(initial, scanned, captured, body="", scan_input_axes=(), scan_input_directions=(), scan_output_axes=(),
          scan_output_directions=(), batched=False, call=None):
    _needs_call("onnx_scan", call)
    m = len(scanned)
    in_axes = list(scan_input_axes) or [0] * m
    in_dirs = list(scan_input_directions) or [0] * m
    out_axes, out_dirs = list(scan_output_axes), list(scan_output_directions)
    if not batched:
        return _scan_one(initial, scanned, captured, body, in_axes, in_dirs, out_axes, out_dirs, call)
    batch = {np.shape(x)[0] for x in [*initial, *scanned]}
    if len(batch) != 1:
        raise op_error("onnx_scan", f"the inputs have different batch sizes ({sorted(batch)})")
    items = [_scan_one([s[b] for s in initial], [x[b] for x in scanned], captured, body, in_axes, in_dirs,
                       out_axes, out_dirs, call) for b in range(batch.pop())]
    if not items:
        raise op_error("onnx_scan", "has a batch of zero items")
    return [np.stack([item[k] for item in items]) for k in range(len(items[0]))]


onnx_scan.formal(_scan)
onnx_scan.fast(_scan)


# --- SequenceMap ------------------------------------------------------------------------------

onnx_sequence_map = define("onnx_sequence_map", FAMILY, """
fragment onnx_sequence_map( input_sequence: tensor<>, additional: tensor<>[], captured: tensor<>[], body: string )
    -> ( outputs: tensor<>[] );
""", domain="onnx", runtime_keywords=_HOOK,
    doc="ONNX SequenceMap: `body` applied to each element of `input_sequence` (with the same element of "
        "each additional sequence, or the whole additional tensor); each body output collected into a "
        "sequence.")


@onnx_sequence_map.shape
def _sequence_map_shape(input_sequence, additional, captured, body=""):
    return None


def _sequence_map(input_sequence, additional, captured, body="", call=None):
    op = "onnx_sequence_map"
    _needs_call(op, call)
    if not isinstance(input_sequence, TensorSequence):
        raise op_error(op, "the first input must be a sequence")
    n = len(input_sequence)
    for k, extra in enumerate(additional):
        if isinstance(extra, TensorSequence) and len(extra) != n:
            raise op_error(op, f"additional sequence {k} has {len(extra)} elements, the input sequence {n}")
    if n > _limit():
        raise op_error(op, f"would run {n} iterations, more than the {_limit()} one loop may run")
    _, outs = call.signature(body)
    collected: list[list[Any]] = [[] for _ in outs]
    for i in range(n):
        args = [input_sequence[i], *(e[i] if isinstance(e, TensorSequence) else e for e in additional), *captured]
        for k, value in enumerate(call.run(body, args)):
            collected[k].append(value)
    return [TensorSequence(c) for c in collected]


onnx_sequence_map.formal(_sequence_map)
onnx_sequence_map.fast(_sequence_map)
