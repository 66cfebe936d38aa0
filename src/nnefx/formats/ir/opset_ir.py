"""IR v10/11 layers that only the IR has, or that need the file itself.

The numpy-style opset layers are read by the family modules (``nnefx/formats/families/``);
what stays here is IR spelling: sub-networks (TensorIterator-1, Loop-5, If-8: their bodies
are IR networks read by :class:`.reader.NetReader`), BinaryConvolution-1 (its ``u1`` filter is
unpacked in the file's bit order), and opset layers whose attributes and semantics equal their
legacy namesakes (read by the legacy catalog).  Specifications: OpenVINO opset docs of the
layers named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..families.sliding_conv import _padding, _spatial
from ..reading.conventions import const_value, norm_axis
from ..reading.registry import ANY
from ..reading.registry import ir_layer as layer
from ..reading.values import Value, dtype_of
from .mapping import LayerContext, binary_filter


@layer("BinaryConvolution", ANY)
def _binary_convolution(ctx: LayerContext):
    """BinaryConvolution-1 as ``ir_binary_convolution`` (0/1 input and filter read as -1/+1).

    Where the opset is ambiguous the layer is refused rather than guessed: ``pad_value`` fills
    padded positions, but OpenVINO's reference implementation and its CPU plugin disagree on
    every value but 1 (0 reads as -1 in the reference and as "no contribution" on the CPU;
    -1 never matches a bit in the reference and reads as -1 on the CPU), so padding is mapped
    only with ``pad_value = 1`` (each padded position counts as +1, as in nnefx).  The input
    should hold 0/1 values; nnefx reads ``x > 0`` as +1 for any value, as the CPU plugin does.
    """
    ctx.expect_inputs(2)
    mode = ctx.str("mode")
    if mode != "xnor-popcount":
        raise ctx.error(f"mode '{mode}' is not supported (only xnor-popcount is defined)")
    xshape = ctx.in_shape(0)
    if xshape is None or len(xshape) < 3:
        raise ctx.error("the input rank must be known and >= 3")
    n = len(xshape) - 2
    w = ctx.input(1)
    if w.shape is None or any(d is None for d in w.shape) or len(w.shape) != n + 2:
        raise ctx.error(f"the filter shape must be known and of rank {n + 2}")
    strides = _spatial(ctx, "strides", n, None)
    dil = _spatial(ctx, "dilations", n, None)
    pads = _padding(ctx, xshape[2:], w.shape[2:], strides, dil)
    if pads is None:
        raise ctx.error("auto_pad needs known spatial extents")
    pad_value = ctx.float("pad_value")
    if pad_value != 1.0 and any(p or q for p, q in pads):
        raise ctx.error(f"pad_value {pad_value:g} with padding is ambiguous (OpenVINO's reference and CPU "
                        "plugin compute different results); only pad_value 1 is mapped")
    if w.is_const:
        # a u1 filter is unpacked least significant bit first (binary_filter says why)
        filt = const_value(ctx, binary_filter(ctx, w), "f32")
    elif w.etype in ("f32", "f16", "f64", "bf16"):
        filt = ctx.tensor(1)
    else:
        raise ctx.error(f"a run-time filter of element type {w.etype} is not supported")
    y = ctx.emit1("ir_binary_convolution", {"input": ctx.tensor(0), "filter": filt},
                  {"padding": pads, "stride": strides, "dilation": dil, "groups": 1, "pad_value": pad_value})
    return ctx.result(y)



# --- TensorIterator (opset form) ------------------------------------------------------------------------

#: Unrolling bound: iterations x body layers (a hostile file must not make the graph explode).
MAX_UNROLLED = 50_000


def _ti_port_maps(ctx: LayerContext, tag: str) -> list:
    from .legacy_state import PortMap

    pm = ctx.layer.port_map
    out = []
    for el in pm.findall(tag) if pm is not None else []:
        def num(key: str, default, _el=el):
            v = _el.attrib.get(key)
            if v is None:
                if default is _REQUIRED:
                    raise ctx.error(f"<port_map><{tag}> lacks '{key}'")
                return default
            try:
                return int(v)
            except ValueError:
                raise ctx.error(f"<port_map><{tag}> '{key}' = {v!r} is not an integer") from None

        if el.attrib.get("purpose"):  # Loop's special body ports, handled by the Loop mapping
            continue
        out.append(PortMap(num("external_port_id", _REQUIRED), num("internal_layer_id", _REQUIRED), 0,
                           num("axis", None), num("start", 0), num("end", -1), num("stride", 1),
                           num("part_size", 1), el.line))
    return out


def _special_port(ctx: LayerContext, tag: str, purpose: str) -> int | None:
    pm = ctx.layer.port_map
    for el in pm.findall(tag) if pm is not None else []:
        if el.attrib.get("purpose") == purpose:
            try:
                return int(el.attrib["internal_layer_id"])
            except (KeyError, ValueError):
                raise ctx.error(f"<port_map><{tag} purpose='{purpose}'> needs an integer internal_layer_id") from None
    return None


_REQUIRED = object()


@layer("TensorIterator", ANY)
def _tensor_iterator(ctx: LayerContext):
    """Unrolled while loading: the body is mapped once per iteration (the count is static)."""
    return _unroll(ctx, trip_count=None, first_input=0)


class _RunTimeCondition(Exception):
    """Raised while unrolling when a body's execution condition is known only at run time."""


@layer("Loop", ANY)
def _loop(ctx: LayerContext):
    """Unrolled while loading when the iteration count is known then: a constant trip count
    (or -1) and an execution condition that is a load-time constant in every iteration;
    otherwise the loop runs as one ``onnx_loop`` operation over its body
    (:func:`nnefx.formats.ir.loop.read_loop`)."""
    from .loop import read_loop

    if ctx.n_inputs < 2:
        raise ctx.error("a Loop needs trip count and execution condition inputs")
    trip = ctx.input(0)
    cond = ctx.input(1)
    if not trip.is_const or not cond.is_const:
        return read_loop(ctx)
    n = int(np.asarray(trip.const).reshape(-1)[0])
    if not bool(np.asarray(cond.const).reshape(-1)[0]):
        n = 0
    checkpoint, n_ops = ctx.builder.checkpoint(list(ctx.values)), len(ctx.ops)
    try:
        return _unroll(ctx, trip_count=n, first_input=2)
    except _RunTimeCondition:
        ctx.builder.restore(checkpoint)
        del ctx.ops[n_ops:]
        return read_loop(ctx)


@dataclass
class PortStructure:
    """A TensorIterator's / Loop's port map and back edges, checked against its body."""

    ins: list
    outs: list
    counter: int | None
    condition: int | None
    in_index: dict[int, int]
    out_index: dict[int, int]
    by_id: dict[int, Any]
    #: body Parameter id -> its port map input
    params: dict[int, Any]
    #: body Parameter id -> the body Result its back edge comes from
    back: dict[int, int]


def port_structure(ctx: LayerContext, first_input: int) -> PortStructure:
    """The layer's port map entries (data inputs from ``first_input`` on), special body ports
    and back edges, each naming a body layer of the right kind (located errors otherwise)."""
    lay = ctx.layer
    if lay.body is None:
        raise ctx.error(f"a {ctx.type} needs a <body>")
    ins, outs = _ti_port_maps(ctx, "input"), _ti_port_maps(ctx, "output")
    counter = _special_port(ctx, "input", "current_iteration")
    condition = _special_port(ctx, "output", "execution_condition")
    in_index = {p.id: k for k, p in enumerate(lay.inputs)}
    out_index = {p.id: k for k, p in enumerate(lay.outputs)}
    by_id = {bl.id: bl for bl in lay.body.layers}
    params: dict[int, Any] = {}
    for m in ins:
        if m.external not in in_index or in_index[m.external] < first_input:
            raise ctx.error(f"port map input names external port {m.external}, which is not a data input of the layer")
        bl = by_id.get(m.layer)
        if bl is None or bl.type != "Parameter":
            raise ctx.error(f"port map input {m.external} must name a body Parameter (layer {m.layer})")
        if m.layer in params:
            raise ctx.error(f"two port map inputs feed body Parameter {m.layer}")
        params[m.layer] = m
    for special, kind in ((counter, "Parameter"), (condition, "Result")):
        if special is not None and (by_id.get(special) is None or by_id[special].type != kind):
            raise ctx.error(f"special body port {special} must be a body {kind}")
    for m in outs:
        if m.external not in out_index:
            raise ctx.error(f"port map output names external port {m.external}, which is not an output of the layer")
        if by_id.get(m.layer) is None or by_id[m.layer].type != "Result":
            raise ctx.error(f"port map output {m.external} must name a body Result (layer {m.layer})")
    back = {}
    for e in lay.back_edges:
        if by_id.get(e.from_layer) is None or by_id[e.from_layer].type != "Result" or \
                by_id.get(e.to_layer) is None or by_id[e.to_layer].type != "Parameter":
            raise ctx.error(f"back edge {e.from_layer} -> {e.to_layer} must lead from a body Result to a Parameter")
        if e.to_layer not in params:
            raise ctx.error(f"back edge into body Parameter {e.to_layer}, which has no initial value")
        back[e.to_layer] = e.from_layer
    return PortStructure(ins, outs, counter, condition, in_index, out_index, by_id, params, back)


def _unroll(ctx: LayerContext, trip_count: int | None, first_input: int):
    from .legacy_state import _chunks, _take
    from .reader import NetReader

    lay = ctx.layer
    ps = port_structure(ctx, first_input)
    outs, counter, condition = ps.outs, ps.counter, ps.condition
    in_index, out_index, params, back = ps.in_index, ps.out_index, ps.params, ps.back
    sub = NetReader(lay.body, ctx.builder.file, ctx.builder.weights)
    sub.builder = ctx.builder
    order, body_inputs = sub.order()
    chunks: dict[int, list[int]] = {}
    for pid, m in params.items():
        if m.axis is None:
            continue
        v = ctx.input(in_index[m.external])
        if v.shape is None or any(d is None for d in v.shape):
            raise ctx.error(f"sliced input port {m.external} needs a static shape")
        m.axis = norm_axis(ctx, m.axis, len(v.shape))
        chunks[pid] = _chunks(ctx, m, v.shape[m.axis])
    counts = {len(c) for c in chunks.values()}
    if len(counts) > 1:
        raise ctx.error(f"the sliced inputs give different iteration counts {sorted(counts)}")
    if trip_count is None:
        if not counts:
            raise ctx.error("a TensorIterator needs at least one sliced input")
        n_iter = counts.pop()
    else:
        n_iter = trip_count if trip_count >= 0 else MAX_UNROLLED
        if counts:
            n_iter = min(n_iter, counts.pop())
    if n_iter * max(len(order), 1) > MAX_UNROLLED and (trip_count is None or trip_count >= 0):
        raise ctx.error(f"cannot unroll {n_iter} iterations of {len(order)} layers (limit {MAX_UNROLLED})")
    consts: dict[int, Value] = {}
    state: dict[int, Value] = {}
    collected: dict[int, list[Value]] = {m.external: [] for m in outs}
    done = 0
    for it in range(n_iter):
        if done * max(len(order), 1) > MAX_UNROLLED:
            raise ctx.error(f"the loop runs more than {done} iterations; unrolling stops at {MAX_UNROLLED} layers")
        vals: dict[tuple[int, int], Value] = {}
        res_vals: dict[int, Value] = {}
        for bl in order:
            if bl.type == "Parameter" and bl.id == counter:
                shape = tuple(d or 1 for d in (bl.outputs[0].dims or ()))
                et = sub.port_etype(bl, bl.outputs[0]) if bl.outputs[0].precision else "i64"
                vals[(bl.id, bl.outputs[0].id)] = ctx.folded(np.full(shape, it, dtype=np.int64), et)
            elif bl.type == "Parameter":
                if bl.id not in params:
                    raise ctx.error(f"body Parameter {bl.id} '{bl.name}' has no port map input")
                m = params[bl.id]
                if it > 0 and bl.id in back:
                    v = state[bl.id]
                else:
                    v = ctx.input(in_index[m.external])
                    if m.axis is not None:
                        v = _take(ctx, v, m.axis, chunks[bl.id][it], m.part)
                vals[(bl.id, bl.outputs[0].id)] = v
            elif bl.type == "Const":
                if bl.id not in consts:
                    consts[bl.id] = sub.const(bl)
                vals[(bl.id, bl.outputs[0].id)] = consts[bl.id]
            elif bl.type == "Result":
                res_vals[bl.id] = vals[body_inputs[bl.id][0][1]]
            else:
                res = sub.map_layer(bl, [vals[src] for _, src in body_inputs[bl.id]])
                for k, port in enumerate(bl.outputs):
                    vals[(bl.id, port.id)] = res[k]
        for pid, rid in back.items():
            state[pid] = res_vals[rid]
        for m in outs:
            collected[m.external].append(res_vals[m.layer])
        done += 1
        if condition is not None:
            c = res_vals[condition]
            if not c.is_const:
                raise _RunTimeCondition()
            if not bool(np.asarray(c.const).reshape(-1)[0]):
                break
    if done == 0:
        raise ctx.error(f"the {ctx.type} runs no iteration; zero-iteration loops are not supported")
    results: list[Value | None] = [None] * len(lay.outputs)
    for m in outs:
        parts = collected[m.external]
        if m.axis is None:
            v = parts[-1]
        else:
            if abs(m.stride) != m.part:
                raise ctx.error(f"port map output {m.external}: only |stride| = part_size is supported")
            if m.stride < 0:
                parts = parts[::-1]
            rank = len(parts[0].shape or ())
            axis = norm_axis(ctx, m.axis, rank)
            kind = dtype_of(parts[0])
            t = ctx.emit1("concat", {"values": [ctx.tensor_of(p) for p in parts]}, {"axis": axis}, dtype=kind)
            v = ctx.result(t, parts[0].etype)
        results[out_index[m.external]] = v
    missing = [lay.outputs[k].id for k, r in enumerate(results) if r is None]
    if missing:
        raise ctx.error(f"output ports {missing} have no port map entry")
    return results

@layer("DetectionOutput", ANY)
def _detection_output(ctx: LayerContext):
    from .legacy_ext import _detection_output as legacy_detection_output

    if not ctx.has("num_classes"):  # DetectionOutput-8 derives it from the shapes
        conf, prior = ctx.in_shape(1), ctx.in_shape(2)
        if conf is None or prior is None or conf[1] is None or prior[-1] is None:
            raise ctx.error("num_classes cannot be derived: the confidence and prior shapes must be known")
        priors = prior[-1] // 4
        if priors < 1 or conf[1] % priors:
            raise ctx.error(f"confidences ({conf[1]}) do not divide into {priors} priors")
        ctx.layer.data["num_classes"] = str(conf[1] // priors)
    return legacy_detection_output(ctx)


def _shared_with_legacy(name: str, fn_name: str) -> None:
    """Register an opset layer whose attributes and semantics equal its legacy namesake."""

    def mapped(ctx: LayerContext):
        from . import legacy_ext

        return getattr(legacy_ext, fn_name)(ctx)

    mapped.__name__ = f"_opset_{fn_name.strip('_')}"
    mapped.__qualname__ = mapped.__name__
    layer(name, ANY)(mapped)


for _name, _fn in (("RegionYolo", "_region_yolo"), ("ReorgYolo", "_reorg_yolo"), ("ROIPooling", "_roi_pooling"),
                   ("PSROIPooling", "_psroi"), ("ReverseSequence", "_reverse_sequence"),
                   ("CTCGreedyDecoder", "_ctc")):
    _shared_with_legacy(_name, _fn)

# --- If -----------------------------------------------------------------------------------------------------


def _map_branch(ctx: LayerContext, tag: str) -> dict[int, Value]:
    """Map one If branch once; returns output port id -> Value."""
    from .reader import NetReader

    lay = ctx.layer
    net = lay.branches.get(tag)
    pm = lay.branch_maps.get(tag)
    if net is None or pm is None:
        raise ctx.error(f"an If needs <{tag}> and its port map")
    in_index = {p.id: k for k, p in enumerate(lay.inputs)}
    out_ids = {p.id for p in lay.outputs}

    def entries(kind: str) -> dict[int, int]:
        out = {}
        for el in pm.findall(kind):
            try:
                ext, internal = int(el.attrib["external_port_id"]), int(el.attrib["internal_layer_id"])
            except (KeyError, ValueError):
                raise ctx.error(f"<{tag}> port map entries need integer external_port_id and "
                                "internal_layer_id") from None
            out[internal] = ext
        return out

    ins, outs = entries("input"), entries("output")
    sub = NetReader(net, ctx.builder.file, ctx.builder.weights)
    sub.builder = ctx.builder
    order, body_inputs = sub.order()
    vals: dict[tuple[int, int], Value] = {}
    result: dict[int, Value] = {}
    for bl in order:
        if bl.type == "Parameter":
            ext = ins.get(bl.id)
            if ext is None or ext not in in_index or in_index[ext] == 0:
                raise ctx.error(f"{tag} Parameter {bl.id} '{bl.name}' is not fed by a data input of the If")
            vals[(bl.id, bl.outputs[0].id)] = ctx.input(in_index[ext])
        elif bl.type == "Const":
            vals[(bl.id, bl.outputs[0].id)] = sub.const(bl)
        elif bl.type == "Result":
            ext = outs.get(bl.id)
            if ext is not None:
                if ext not in out_ids:
                    raise ctx.error(f"{tag} output names external port {ext}, which is not an output of the If")
                result[ext] = vals[body_inputs[bl.id][0][1]]
        else:
            res = sub.map_layer(bl, [vals[src] for _, src in body_inputs[bl.id]])
            for k, port in enumerate(bl.outputs):
                vals[(bl.id, port.id)] = res[k]
    return result


@layer("If", ANY)
def _if(ctx: LayerContext):
    """A load-time condition keeps one branch; a run-time one evaluates both and selects
    (NNEF's ``select``; both branches must give equal shapes)."""
    cond = ctx.input(0)
    ports = [p.id for p in ctx.layer.outputs]
    if cond.is_const:
        tag = "then_body" if bool(np.asarray(cond.const).reshape(-1)[0]) else "else_body"
        got = _map_branch(ctx, tag)
        missing = [p for p in ports if p not in got]
        if missing:
            raise ctx.error(f"the {tag} gives no value for output ports {missing}")
        return [got[p] for p in ports]
    then_v, else_v = _map_branch(ctx, "then_body"), _map_branch(ctx, "else_body")
    c = ctx.tensor(0)
    outs = []
    for p in ports:
        a, b = then_v.get(p), else_v.get(p)
        if a is None or b is None:
            raise ctx.error(f"output port {p} is missing from a branch")
        if a.shape is None or b.shape is None or tuple(a.shape) != tuple(b.shape) or \
                any(d is None for d in a.shape):
            raise ctx.error("an If with a run-time condition needs branches of equal, known shapes")
        r = len(a.shape)
        cond_t = c if r == 0 else ctx.emit1("reshape", {"input": c}, {"shape": [1] * r}, dtype="logical")
        y = ctx.emit1("select", {"condition": cond_t, "true_value": ctx.tensor_of(a), "false_value": ctx.tensor_of(b)},
                      dtype=dtype_of(a))
        outs.append(ctx.result(y, a.etype))
    return outs

