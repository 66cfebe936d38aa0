"""Loop-5 layers whose iteration count is known only at run time, read as one ``onnx_loop``.

A Loop whose trip count and condition are load-time constants is unrolled while loading
(:mod:`.opset_ir`); one whose trip count or initial condition arrive as tensors, or whose body
computes its execution condition from run-time values, runs as the registry's ``onnx_loop``
over its body (OpenVINO opset docs, Loop-5):

* the body network becomes a graph of its own in the enclosing graph's ``subgraphs``, with the
  inputs ``onnx_loop`` gives a body: the iteration number (the ``current_iteration``
  Parameter, i64), the incoming condition (unused: the body computes its own), the carried
  values (Parameters a back edge feeds, initialised from the layer's inputs), then the
  invariant inputs (the other Parameters: the operation's ``captured`` tensors); its outputs
  are the ``execution_condition`` Result, the Results the back edges carry, then the Results
  the port map concatenates;
* a trip count below 0 means no limit (Loop-5), ``onnx_loop``'s limit is made so at run time;
  the condition is always passed, so the body's condition output always decides, as in Loop-5;
* an output without ``axis`` is the last value of a carried Result; one with ``axis`` is the
  per-iteration pieces (of extent 1 there, as Loop-5 requires) concatenated along it: the body
  gives each piece without that axis, ``onnx_loop`` stacks them on a new first axis, moved to
  ``axis``.

Refused, located: sliced inputs (an input port map ``axis``), reversed or strided output
concatenation, the last value of a Result no back edge carries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation
from ..reading.values import Value
from .mapping import LayerContext

#: onnx_loop's trip count standing for "no limit" (its own iteration budget still applies)
UNLIMITED = 2 ** 62


def read_loop(ctx: LayerContext) -> list[Value]:
    from .opset_ir import port_structure
    from .reader import NetReader

    lay = ctx.layer
    ps = port_structure(ctx, 2)
    outs, counter, condition = ps.outs, ps.counter, ps.condition
    in_index, out_index, params, back = ps.in_index, ps.out_index, ps.params, ps.back
    for m in ps.ins:
        if m.axis is not None:
            raise ctx.error(f"port map input {m.external} slices its input along axis {m.axis}; sliced inputs of a "
                            "Loop whose iteration count is known only at run time are not supported")
    for m in outs:
        if m.axis is None and m.layer not in back.values():
            raise ctx.error(f"port map output {m.external} is the last value of body Result {m.layer}, which no back "
                            "edge carries; only carried values and concatenated outputs are supported")
        if m.axis is not None and (m.stride != m.part or m.start != 0 or m.end != -1):
            raise ctx.error(f"port map output {m.external}: only a forward concatenation of whole pieces "
                            "(start 0, end -1, stride = part_size) is supported")

    sub = NetReader(lay.body, ctx.builder.file, ctx.builder.weights)
    sub.builder.concrete = ctx.builder.concrete
    body = sub.builder.graph
    order, body_inputs = sub.order()
    values: dict[tuple[int, int], Value] = {}
    tensor_of: dict[int, str] = {}
    results: dict[int, Value] = {}
    for bl in order:
        srcs = [values[src] for _, src in body_inputs[bl.id]]
        if bl.type == "Parameter":
            if bl.id != counter and bl.id not in params:
                raise ctx.error(f"body Parameter {bl.id} '{bl.name}' has no port map input")
            v = sub.parameter(bl)
            tensor_of[bl.id] = v.tensor
            outs_ = [v]
        elif bl.type == "Const":
            outs_ = [sub.const(bl)]
        elif bl.type == "Result":
            if len(srcs) != 1:
                raise ctx.error(f"body Result {bl.id} must have exactly one input")
            results[bl.id] = sub.fill_shape(srcs[0], bl.inputs[0], bl)
            continue
        else:
            outs_ = sub.map_layer(bl, srcs)
        for k, port in enumerate(bl.outputs):
            values[(bl.id, port.id)] = outs_[k]

    # the body's inputs in onnx_loop's order
    iteration = _iteration_input(ctx, sub, tensor_of.get(counter) if counter is not None else None)
    going = sub.builder.add_tensor("nnefx_cond_in", "logical", ())
    body.operations.insert(0, Operation("external", {}, {"output": going}, {"shape": []}, dtype="logical",
                                        location=ctx.location))
    carried = [pid for pid in sorted(params, key=lambda p: in_index[params[p].external]) if pid in back]
    invariant = [pid for pid in sorted(params, key=lambda p: in_index[params[p].external]) if pid not in back]
    body.inputs = [iteration, going] + [tensor_of[p] for p in carried] + [tensor_of[p] for p in invariant]

    # its outputs: the condition, the carried values, the concatenated pieces
    scans = [m for m in outs if m.axis is not None]
    cond_value = results[condition] if condition is not None else Value(const=np.array(True), etype="boolean", shape=())
    body.outputs = []
    pieces = [(results[m.layer], f"piece{k}", m) for k, m in enumerate(scans)]
    for value, hint, m in [(cond_value, "nnefx_cond_out", None)] + \
            [(results[back[p]], f"carried{k}", None) for k, p in enumerate(carried)] + pieces:
        name = sub.builder.materialise(value, hint, ctx.location)
        if m is not None:
            name = _unit_axis_dropped(ctx, sub, name, m)
        elif name in body.inputs or name in body.outputs:
            t = body.tensors[name]
            new = sub.builder.add_tensor(hint, t.dtype, t.shape)
            body.tensors[new].etype = t.etype
            body.operations.append(Operation("copy", {"x": name}, {"y": new}, {}, dtype=t.dtype, location=ctx.location))
            name = new
        body.outputs.append(name)
    body.validate_structure()
    name = f"{lay.name or 'loop'}_body"
    while name in ctx.builder.graph.subgraphs:
        name += "_"
    ctx.builder.graph.subgraphs[name] = body

    loop_outs = ctx.emit("onnx_loop", {"max_trip": _trip(ctx), "cond": [ctx.tensor(1)],
                                       "initial": [ctx.tensor(in_index[params[p].external]) for p in carried],
                                       "captured": [ctx.tensor(in_index[params[p].external]) for p in invariant]},
                         {"body": name}, outputs=[len(carried) + len(scans)])
    for k, out in enumerate(loop_outs):
        src = body.tensors[body.outputs[1 + k]]
        t = ctx.builder.graph.tensors[out]
        t.dtype, t.etype = src.dtype, src.etype
        if k >= len(carried) and src.shape is not None:
            t.shape = (None, *src.shape)
    values_out: list[Value | None] = [None] * len(lay.outputs)
    for m in outs:
        if m.axis is None:
            k = next(j for j, p in enumerate(carried) if back[p] == m.layer)
            tensor = loop_outs[k]
        else:
            tensor = _concatenated(ctx, loop_outs[len(carried) + scans.index(m)], m)
        t = ctx.builder.graph.tensors[tensor]
        values_out[out_index[m.external]] = ctx.result(tensor, t.etype)
    missing = [lay.outputs[k].id for k, v in enumerate(values_out) if v is None]
    if missing:
        raise ctx.error(f"output ports {missing} have no port map entry")
    return values_out


def _iteration_input(ctx: LayerContext, sub: Any, counter: str | None) -> str:
    """The body input onnx_loop feeds the iteration number (an i64 scalar): the
    ``current_iteration`` Parameter itself, converted where it declares another type, or an
    input nothing reads."""
    body = sub.builder.graph
    name = sub.builder.add_tensor("nnefx_iteration", "integer", ())
    if sub.builder.concrete:
        body.tensors[name].etype = "i64"
    body.operations.insert(0, Operation("external", {}, {"output": name}, {"shape": []}, dtype="integer",
                                        location=ctx.location))
    if counter is None:
        return name
    t = body.tensors[counter]
    if t.shape is not None and any(d not in (1, None) for d in t.shape):
        raise ctx.error(f"the current_iteration Parameter has shape {list(t.shape)}; it must hold one value")
    at = next(k for k, op in enumerate(body.operations) if counter in op.output_names())
    del body.operations[at]
    body.inputs.remove(counter)
    made: list[Operation] = []
    shape = [1 if d is None else d for d in (t.shape or ())]
    et = t.etype or "i64"
    staged = name
    if et != "i64":
        staged = sub.builder.add_tensor("nnefx_iteration_cast", t.dtype, ())
        body.tensors[staged].etype = t.etype
        made.append(Operation("onnx_cast", {"input": name}, {"output": staged},
                                         {"to": et, "saturate": True, "round_mode": "up"}, dtype=t.dtype,
                                         location=ctx.location))
    made.append(Operation("reshape", {"input": staged}, {"output": counter}, {"shape": shape}, dtype=t.dtype,
                          location=ctx.location))
    body.operations[at:at] = made   # where the Parameter was: before everything that reads it
    return name


def _trip(ctx: LayerContext) -> list[str]:
    """Loop-5's trip count as onnx_loop's: a negative count (no limit) becomes an unreachable one."""
    trip = ctx.input(0)
    if trip.is_const:
        n = int(np.asarray(trip.const).reshape(-1)[0])
        return [ctx.tensor_of(Value(const=np.array(UNLIMITED if n < 0 else n, np.int64), etype="i64", shape=()))]
    x = ctx.tensor(0)
    negative = ctx.emit1("integer_compare", {"x": x, "y": 0}, {"op": "less"}, dtype="integer", out_dtype="logical")
    return [ctx.emit1("select", {"condition": negative, "true_value": UNLIMITED, "false_value": x}, dtype="integer")]


def _unit_axis_dropped(ctx: LayerContext, sub: Any, name: str, m: Any) -> str:
    """A piece of a concatenated output without its unit ``axis`` (Loop-5 concatenates pieces
    of extent 1 there: stride and part_size 1), so that onnx_loop's stacking along a new first
    axis and a transpose give the concatenation; a piece of another extent fails at run time."""
    body = sub.builder.graph
    t = body.tensors[name]
    if t.shape is None:
        raise ctx.error(f"port map output {m.external}: the rank of the body's pieces is unknown")
    axis = m.axis + len(t.shape) if m.axis < 0 else m.axis
    if not 0 <= axis < len(t.shape):
        raise ctx.error(f"port map output {m.external}: axis {m.axis} is outside the pieces' rank {len(t.shape)}")
    if t.shape[axis] not in (1, None):
        raise ctx.error(f"port map output {m.external}: pieces of extent {t.shape[axis]} along axis {m.axis}; "
                        "Loop-5 concatenates pieces of extent 1")
    m.axis = axis
    new = sub.builder.add_tensor(f"{name}_piece", t.dtype, t.shape[:axis] + t.shape[axis + 1:])
    body.tensors[new].etype = t.etype
    body.operations.append(Operation("squeeze", {"input": name}, {"output": new}, {"axes": [axis]}, dtype=t.dtype,
                                     location=ctx.location))
    return new


def _concatenated(ctx: LayerContext, stacked: str, m: Any) -> str:
    """onnx_loop's pieces stacked on a new first axis, moved to ``m.axis``: Loop-5's
    concatenation of unit pieces along it."""
    if m.axis == 0:
        return stacked
    t = ctx.builder.graph.tensors[stacked]
    rank = len(t.shape)
    perm = list(range(1, m.axis + 1)) + [0] + list(range(m.axis + 1, rank))
    x = ctx.emit1("transpose", {"input": stacked}, {"axes": perm}, dtype=t.dtype)
    ctx.builder.graph.tensors[x].etype = t.etype
    return x


