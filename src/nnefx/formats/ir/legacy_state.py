"""Legacy IR layers that carry state: Memory (across runs) and TensorIterator (across the
iterations of one run).

**Memory.**  The IR writes one logical delay as a *pair* of Memory layers sharing ``id``: one
has only an input (the value to remember), the other only an output (the value remembered
from the previous run; zeros before the first).  That is exactly an NNEF ``variable`` read
by the graph and an ``update`` written at the end of the cycle (NNEF spec §4.8 `update`,
for recurrent networks), so the pair becomes one zero-initialised variable labelled after
the ``id`` plus one ``update``; ``Session.run`` then carries the state from run to run and
``Session.reset`` restores the zeros.

**TensorIterator.**  The body is run step by step *while loading*: for every iteration the
body's layers are mapped again (through the same layer mappings as the main net), with the
sliced inputs bound to slices of the external inputs, back edges bound to the previous
iteration's results and the initial values to the TI inputs; sliced outputs are concatenated
in iteration order (reversed for negative strides), the others take the last iteration's
value.  The iteration count is static in legacy IR, so the unrolled graph is exact; its size
is bounded (``MAX_UNROLLED_LAYERS``) so a hostile file cannot make it explode.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Operation
from ..reading.values import Value, safe_label
from .legacy import check, legacy_layer, safe_axis_value
from .mapping import LayerContext

MAX_UNROLLED_LAYERS = 200_000

# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def _memory_state(ctx: LayerContext) -> dict:
    state = getattr(ctx.builder, "_legacy_memory", None)
    if state is None:
        state = {}
        ctx.builder._legacy_memory = state
    return state


@legacy_layer("Memory")
def _memory(ctx: LayerContext):
    mid = ctx.str("id")
    check(ctx, mid != "", "id", mid, "must not be empty")
    index = ctx.int("index")
    check(ctx, index in (0, 1), "index", index, "must be 0 or 1")
    size = ctx.int("size", 2)
    check(ctx, size == 2, "size", size, "must be 2 (a Memory pair)")
    n_out = len(ctx.layer.outputs)
    if ctx.n_inputs == 0 and n_out == 1:
        role, shape = "read", ctx.out_dims(0)
    elif ctx.n_inputs == 1 and n_out == 0:
        role, shape = "write", ctx.in_shape(0)
    else:
        raise ctx.error(f"a Memory layer has either one input or one output; this one has {ctx.n_inputs} inputs "
                        f"and {n_out} outputs")
    if shape is None or any(d is None for d in shape):
        raise ctx.error("a Memory layer needs a static shape")
    shape = tuple(int(d) for d in shape)
    state = _memory_state(ctx)
    entry = state.get(mid)
    if entry is None:
        label = safe_label(f"memory/{mid}")
        name = ctx.builder.add_tensor(label, "scalar", shape, data=np.zeros(shape, dtype=np.float32))
        ctx.builder.graph.operations.append(Operation("variable", {}, {"output": name},
                                                      {"shape": list(shape), "label": label}, dtype="scalar",
                                                      location=ctx.location))
        entry = state[mid] = {"tensor": name, "shape": shape, "roles": {}}
    if entry["shape"] != shape:
        raise ctx.error(f"Memory '{mid}' has shape {list(shape)} here but {list(entry['shape'])} in its pair")
    if role in entry["roles"]:
        raise ctx.error(f"Memory '{mid}' has two layers that {role} it")
    if index in {i for i in entry["roles"].values()}:
        raise ctx.error(f"Memory '{mid}' uses index {index} for both layers of the pair")
    entry["roles"][role] = index
    if role == "read":
        return Value(tensor=entry["tensor"], etype="f32", shape=shape)
    ctx.emit("update", {"variable": entry["tensor"], "value": ctx.tensor(0)}, dtype="scalar", result_name="result")
    return []


def check_memory_pairs(builder) -> None:
    """Every Memory id must have both halves (called after the net is read)."""
    for mid, entry in (getattr(builder, "_legacy_memory", None) or {}).items():
        if len(entry["roles"]) != 2:
            missing = "reading" if "read" not in entry["roles"] else "writing"
            raise NNEFXError(f"Memory '{mid}' has no {missing} layer (Memory layers come in pairs)",
                             Location(builder.file, None, None, f"Memory '{mid}'"))


# ---------------------------------------------------------------------------------------------
# TensorIterator
# ---------------------------------------------------------------------------------------------


@dataclass
class PortMap:
    external: int
    layer: int
    port: int
    axis: int | None
    start: int
    end: int
    stride: int
    part: int
    line: int


def _port_maps(ctx: LayerContext, tag: str) -> list[PortMap]:
    pm = ctx.layer.port_map
    out = []
    for el in pm.findall(tag) if pm is not None else []:
        def num(key: str, default: int | None = None, _el=el) -> int | None:
            v = _el.attrib.get(key)
            if v is None:
                if default is None and key in ("external_port_id", "internal_layer_id", "internal_port_id"):
                    raise NNEFXError(f"<port_map><{tag}> lacks '{key}'", Location(ctx.builder.file, _el.line, None,
                                                                                     ctx.layer.where()))
                return default
            try:
                return int(v)
            except ValueError:
                raise NNEFXError(f"<port_map><{tag}> '{key}' = {v!r} is not an integer",
                                 Location(ctx.builder.file, _el.line, None, ctx.layer.where())) from None

        axis = num("axis", None)
        out.append(PortMap(num("external_port_id"), num("internal_layer_id"), num("internal_port_id"), axis,
                           num("start", 0), num("end", -1), num("stride", 1), num("part_size", 1), el.line))
    return out


def _chunks(ctx: LayerContext, m: PortMap, extent: int) -> list[int]:
    """Lower indices of the parts taken along the axis, in iteration order."""
    where = f"port map of port {m.external}"
    if m.stride == 0 or m.part < 1:
        raise ctx.error(f"{where}: stride must not be 0 and part_size must be >= 1")
    s = m.start + extent + 1 if m.start < 0 else m.start
    e = m.end + extent + 1 if m.end < 0 else m.end
    if not (0 <= s <= extent and 0 <= e <= extent):
        raise ctx.error(f"{where}: start {m.start} / end {m.end} fall outside the axis extent {extent}")
    lows = []
    i = 0
    while True:
        low = s + i * m.stride if m.stride > 0 else s + i * m.stride - m.part
        if (m.stride > 0 and low + m.part > e) or (m.stride < 0 and low < e):
            break
        lows.append(low)
        i += 1
        if i > MAX_UNROLLED_LAYERS:
            raise ctx.error(f"{where}: too many iterations")
    return lows


def _body_order(ctx: LayerContext, fed: set) -> tuple[list, dict]:
    body = ctx.layer.body
    by_id = {}
    for lay in body.layers:
        if lay.id in by_id:
            raise ctx.error(f"body layer id {lay.id} is used twice")
        by_id[lay.id] = lay
    src: dict[tuple[int, int], tuple[int, int]] = {}
    succ = {i: [] for i in by_id}
    indeg = {i: 0 for i in by_id}
    for e in body.edges:
        if e.from_layer not in by_id or e.to_layer not in by_id:
            raise ctx.error(f"body edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} names an unknown "
                            "layer")
        if not any(p.id == e.from_port for p in by_id[e.from_layer].outputs):
            raise ctx.error(f"body edge from port {e.from_port} of layer {e.from_layer}, which has no such output")
        key = (e.to_layer, e.to_port)
        if key in src or key in fed:
            raise ctx.error(f"body input {e.to_layer}:{e.to_port} is fed twice")
        src[key] = (e.from_layer, e.from_port)
        succ[e.from_layer].append(e.to_layer)
        indeg[e.to_layer] += 1
    for lay in body.layers:
        for p in lay.inputs:
            if (lay.id, p.id) not in src and (lay.id, p.id) not in fed:
                raise ctx.error(f"body layer {lay.id} '{lay.name}' input port {p.id} is not connected")
    position = {lay.id: k for k, lay in enumerate(body.layers)}
    ready = deque(sorted((i for i, d in indeg.items() if d == 0), key=position.__getitem__))
    order = []
    while ready:
        i = ready.popleft()
        order.append(by_id[i])
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if len(order) != len(by_id):
        raise ctx.error("the body layers form a cycle outside the back edges")
    return order, src


def _take(ctx: LayerContext, value: Value, axis: int, low: int, part: int) -> Value:
    if value.is_const:
        sl = [slice(None)] * value.const.ndim
        sl[axis] = slice(low, low + part)
        return ctx.folded(np.ascontiguousarray(value.const[tuple(sl)]), value.etype)
    t = ctx.emit1("slice", {"input": ctx.tensor_of(value)}, {"axes": [axis], "begin": [low], "end": [low + part]},
                  dtype="scalar")
    return ctx.result(t, etype=value.etype)


@legacy_layer("TensorIterator")
def tensor_iterator(ctx: LayerContext) -> list[Value]:
    from .reader import NetReader

    lay = ctx.layer
    if lay.body is None:
        raise ctx.error("a TensorIterator needs a <body>")
    ins, outs = _port_maps(ctx, "input"), _port_maps(ctx, "output")
    in_index = {p.id: k for k, p in enumerate(lay.inputs)}
    out_index = {p.id: k for k, p in enumerate(lay.outputs)}
    for m in ins:
        if m.external not in in_index:
            raise ctx.error(f"port map input names external port {m.external}, which is not an input of the layer")
    for m in outs:
        if m.external not in out_index:
            raise ctx.error(f"port map output names external port {m.external}, which is not an output of the layer")
    initial = {(m.layer, m.port): m for m in ins}
    if len(initial) != len(ins):
        raise ctx.error("two port map inputs feed the same body port")
    back = {(e.to_layer, e.to_port): (e.from_layer, e.from_port) for e in lay.back_edges}
    for key in back:
        if key not in initial:
            raise ctx.error(f"back edge into body port {key[0]}:{key[1]} has no initial value in the port map")
    order, src = _body_order(ctx, set(initial))
    # iteration count from the sliced inputs
    counts, chunks = set(), {}
    for m in ins:
        if m.axis is None:
            continue
        v = ctx.input(in_index[m.external])
        shape = v.shape
        if shape is None or any(d is None for d in shape):
            raise ctx.error(f"sliced input port {m.external} needs a static shape")
        axis = safe_axis_value(ctx, m.axis, len(shape), f"port map axis of port {m.external}")
        m.axis = axis
        chunks[(m.layer, m.port)] = _chunks(ctx, m, shape[axis])
        counts.add(len(chunks[(m.layer, m.port)]))
    if not counts:
        raise ctx.error("a TensorIterator needs at least one sliced input (a port map input with an axis)")
    if len(counts) != 1:
        raise ctx.error(f"the sliced inputs give different iteration counts {sorted(counts)}")
    n_iter = counts.pop()
    if n_iter * max(1, len(order)) > MAX_UNROLLED_LAYERS:
        raise ctx.error(f"unrolling {n_iter} iterations of {len(order)} layers exceeds the limit "
                        f"{MAX_UNROLLED_LAYERS}")
    if n_iter == 0:
        raise ctx.error("the TensorIterator runs no iteration")
    for m in outs:
        if m.axis is not None and abs(m.stride) != m.part:
            raise ctx.error(f"port map output {m.external}: only |stride| = part_size is supported")
    sub = NetReader(lay.body, ctx.builder.file, ctx.builder.weights)
    sub.builder = ctx.builder
    const_cache: dict[int, Value] = {}
    state: dict[tuple[int, int], Value] = {}
    collected: dict[int, list[Value]] = {m.external: [] for m in outs}
    for it in range(n_iter):
        vals: dict[tuple[int, int], Value] = {}
        for bl in order:
            inputs = []
            for p in bl.inputs:
                key = (bl.id, p.id)
                if key in src:
                    inputs.append(vals[src[key]])
                elif it > 0 and key in back:
                    inputs.append(state[key])
                else:
                    m = initial[key]
                    v = ctx.input(in_index[m.external])
                    if m.axis is not None:
                        v = _take(ctx, v, m.axis, chunks[key][it], m.part)
                    inputs.append(v)
            if bl.type == "Const":
                if bl.id not in const_cache:
                    const_cache[bl.id] = sub.const(bl)
                res = [const_cache[bl.id]]
            elif bl.type in ("Input", "Parameter", "Result"):
                raise ctx.error(f"body layer {bl.id} '{bl.name}' of type {bl.type} is not allowed in a legacy "
                                "TensorIterator body")
            else:
                res = sub.map_layer(bl, inputs)
            for k, port in enumerate(bl.outputs):
                vals[(bl.id, port.id)] = res[k]
        for key, frm in back.items():
            if frm not in vals:
                raise ctx.error(f"back edge from body port {frm[0]}:{frm[1]}, which no body layer produces")
            state[key] = vals[frm]
        for m in outs:
            if (m.layer, m.port) not in vals:
                raise ctx.error(f"port map output names body port {m.layer}:{m.port}, which no layer produces")
            collected[m.external].append(vals[(m.layer, m.port)])
    results: list[Value | None] = [None] * len(lay.outputs)
    for m in outs:
        parts = collected[m.external]
        if m.axis is None:
            v = parts[-1]
        else:
            if m.stride < 0:
                parts = parts[::-1]
            rank = len(parts[0].shape or ())
            axis = safe_axis_value(ctx, m.axis, rank, f"port map axis of output {m.external}")
            t = ctx.emit1("concat", {"values": [ctx.tensor_of(p) for p in parts]}, {"axis": axis}, dtype="scalar",
                          result_name="value")
            v = ctx.result(t)
        if not v.is_const and v.tensor is not None and not any(v.tensor in op.output_names() for op in ctx.ops):
            # give each TI output a tensor of its own (so it can be named after the port)
            v = ctx.result(ctx.emit1("copy", {"x": ctx.tensor_of(v)}, dtype="scalar"))
        results[out_index[m.external]] = v
    if any(r is None for r in results):
        missing = [lay.outputs[k].id for k, r in enumerate(results) if r is None]
        raise ctx.error(f"output ports {missing} have no port map entry")
    return results
