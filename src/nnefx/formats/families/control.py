"""Control flow, sequences and optionals (``ops/onnx/control.py``, ``ops/onnx/sequence.py``).

Reading: ONNX ``If``, ``Loop``, ``Scan``, ``SequenceMap`` read each graph attribute as a body
(:meth:`nnefx.formats.onnx.reader.OnnxReader.subgraph`): a graph of its own filed in the
enclosing graph's ``subgraphs``, whose inputs are the body's formal inputs followed by the
outer tensors it reads (the operation's ``captured`` inputs; both branches of an ``If`` take
the same list).  The ``Sequence*``/``Optional*`` nodes become their ``onnx_*`` operations,
with the result's kind (sequence, optional) and element type on its data node.

Writing: the ONNX writer writes these operations back as their nodes (bodies as graph
attributes); see ``formats/onnx/control.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Operation, Tensor
from ..export.registry import to_ir, to_onnx
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext
from ..onnx.writer import body_graph, element_dtype
from ..reading.registry import onnx_node
from ..reading.values import Value, nnef_dtype
from ._common import _kept

# --- helpers ----------------------------------------------------------------------------------


def _emit(r: Any, op: str, inputs: dict[str, Any], attribs: dict[str, Any], results: list[tuple],
          array: bool = False) -> list[Value]:
    """Emit ``op``; ``results`` = one (kind, etype, shape) per result (a ``tensor[]`` result when
    ``array``); the results' data nodes get their kind and element type."""
    ctx = r.ctx([])
    names = ctx.emit(op, inputs, attribs, outputs=[len(results)] if array else len(results))
    values = []
    for name, (kind, etype, shape) in zip(names, results, strict=True):
        t = r.builder.graph.tensors[name]
        t.dtype, t.kind, t.etype = nnef_dtype(etype), kind, etype
        if kind != "tensor":
            t.shape = None if shape is None else tuple(shape)  # the elements' shape
        elif t.shape is None and shape is not None:
            t.shape = tuple(shape)
        values.append(Value(tensor=name, etype=etype, shape=t.shape, kind=kind))
    return values


def _check_carried(r: Any, op_type: str, results: list[tuple]) -> None:
    """Control-flow values (carried, scanned, branch results) keep their element type: bodies
    run on the concrete types (f16, i32, ...) and the kernels pass their arrays through, so
    the rule is every operation's (``_common._kept``): what kernels see widened — bfloat16,
    the float8/float4 kinds, 2/4-bit integers — is refused at the node."""
    for kind, etype, _ in results:
        if kind in ("tensor", "optional") and not _kept(r, etype, False):
            raise r.error(f"{op_type} has a value of element type {etype}, which control-flow values do not "
                          "carry yet (bfloat16, float8 and 2/4-bit values would reach the body widened)")


def _tensor(r: Any, value: Value) -> str:
    return r.ctx([value]).tensor(0)


def _opt(r: Any, value: Value | None) -> list[str]:
    return [] if value is None else [_tensor(r, value)]


def _element(value: Value) -> Value:
    """What one element of a sequence value looks like to a body."""
    if value.kind == "sequence":
        return Value(etype=value.etype, shape=value.shape, kind="tensor")
    return value


def _merge(*shapes: tuple | None) -> tuple | None:
    """The shape every one of ``shapes`` fits (None extents where they differ; None when a rank
    is unknown or the ranks differ)."""
    if not shapes or any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:
        return None
    return tuple(d[0] if len(set(d)) == 1 else None for d in zip(*shapes, strict=True))


def _outputs_of(child: Any) -> list[tuple]:
    """(kind, element type, shape) of each output of a body read by reader ``child``."""
    graph = child.builder.graph
    out = []
    for name, vo in zip(graph.outputs, child.graph_proto.output, strict=True):
        t = graph.tensors[name]
        value = child.values.get(vo.name)
        etype = value.etype if value is not None else t.etype or _default_etype(t.dtype)
        kind, tt = child.value_kind(vo.type)
        if kind is not None and tt.elem_type:  # the type the body declares for it, where it does
            etype = child.etype_code(tt.elem_type)
        out.append((t.kind, etype, t.shape))
    return out


def _default_etype(dtype: str) -> str:
    return {"scalar": "f32", "integer": "i64", "logical": "boolean"}.get(dtype, "f32")


def _align(readers: list[Any]) -> list[str]:
    """One ``captured`` list for bodies that share it (an ``If``'s branches): each body's inputs
    become its formal inputs followed by an input for every outer tensor any of them reads."""
    union = list(dict.fromkeys(name for child in readers for name in child.captured))
    for child in readers:
        graph = child.builder.graph
        inner_of = dict(zip(child.captured, child.captured_inner, strict=True))
        formals = [n for n in graph.inputs if n not in set(child.captured_inner)]
        inner = []
        for outer in union:
            if outer not in inner_of:
                t = child.parent.builder.graph.tensors[outer]
                name = child.builder.unique(outer)
                graph.tensors[name] = Tensor(name, t.dtype, t.shape, etype=t.etype, kind=t.kind)
                graph.operations.insert(0, Operation("external", {}, {"output": name},
                                                     {"shape": [1 if d is None else d for d in t.shape or ()]},
                                                     dtype=t.dtype))
                inner_of[outer] = name
            inner.append(inner_of[outer])
        graph.inputs = formals + inner
    return union


# --- control flow -----------------------------------------------------------------------------

@onnx_node("If")
def _if(r, attrs, ins):
    if not ins or ins[0] is None:
        raise r.error("If needs a condition input")
    branches = [r.subgraph(attrs[a], a, []) for a in ("then_branch", "else_branch")]
    outs = [_outputs_of(b) for b in branches]
    if len(outs[0]) != len(outs[1]):
        raise r.error(f"the branches have {len(outs[0])} and {len(outs[1])} outputs; If needs the same number")
    for k, (a, b) in enumerate(zip(*outs, strict=True)):
        if a[0] != b[0] or nnef_dtype(a[1]) != nnef_dtype(b[1]):
            raise r.error(f"output {k} is a {a[0]} of {a[1]} in then_branch but a {b[0]} of {b[1]} in else_branch")
    _check_carried(r, "If", [(a[0], a[1], None) for a in outs[0]])
    captured = _align(branches)
    names = [r.file_subgraph(b, a) for b, a in zip(branches, ("then_branch", "else_branch"), strict=True)]
    results = [(a[0], a[1], _merge(a[2], b[2])) for a, b in zip(*outs, strict=True)]
    return _emit(r, "onnx_if", {"cond": _tensor(r, ins[0]), "captured": captured},
                 {"then_branch": names[0], "else_branch": names[1]}, results, array=True)


@onnx_node("Loop")
def _loop(r, attrs, ins):
    ins = list(ins) + [None] * (2 - len(ins))
    trips, cond, carried = ins[0], ins[1], ins[2:]
    if any(v is None for v in carried):
        raise r.error("Loop's carried values cannot be left out")
    hints = [Value(etype="i64", shape=()), Value(etype="boolean", shape=()), *carried]
    body = r.subgraph(attrs["body"], "body", hints)
    outs = _outputs_of(body)
    if len(body.builder.graph.inputs) - len(body.captured) != 2 + len(carried) or len(outs) < 1 + len(carried):
        raise r.error(f"the body must take the iteration number, the condition and the {len(carried)} carried "
                      "values, and return the condition and the carried values (then scan outputs)")
    name = r.file_subgraph(body, "body")
    results = [(k, e, s) for k, e, s in outs[1:1 + len(carried)]]
    results += [(k, e, None if s is None else (None, *s)) for k, e, s in outs[1 + len(carried):]]
    if not results:
        return []
    _check_carried(r, "Loop", results + [(v.kind, v.etype, None) for v in carried])  # carried: same types
    return _emit(r, "onnx_loop", {"max_trip": _opt(r, trips), "cond": _opt(r, cond),
                                  "initial": [_tensor(r, v) for v in carried], "captured": body.captured},
                 {"body": name}, results, array=True)


@onnx_node("Scan")
def _scan(r, attrs, ins):
    m = int(attrs["num_scan_inputs"])
    batched = r.opset < 9
    if batched:
        if ins and ins[0] is not None:
            raise r.error("Scan-8 with sequence_lens is not supported (only full-length sequences)")
        ins = ins[1:]
    if not 0 < m <= len(ins) or any(v is None for v in ins):
        raise r.error(f"num_scan_inputs = {m} does not fit the {len(ins)} inputs")
    states, scanned = ins[:len(ins) - m], ins[len(ins) - m:]
    axes = list(attrs.get("scan_input_axes", [0] * m))
    directions = list(attrs.get("directions" if batched else "scan_input_directions", [0] * m))
    hints = list(states)
    for x, axis in zip(scanned, axes, strict=False):
        shape = None if x.shape is None else list(x.shape[1:] if batched else x.shape)
        if shape is not None and -len(shape) <= axis < len(shape):
            del shape[axis]
        hints.append(Value(etype=x.etype, shape=None if shape is None else tuple(shape)))
    if batched:
        hints = [Value(etype=v.etype, shape=None if v.shape is None else tuple(v.shape[1:])) if k < len(states)
                 else v for k, v in enumerate(hints)]
    body = r.subgraph(attrs["body"], "body", hints)
    outs = _outputs_of(body)
    name = r.file_subgraph(body, "body")
    results = [(k, e, _merge(v.shape, s) if not batched else None) for (k, e, s), v in zip(outs, states, strict=False)]
    steps = {x.shape[(1 if batched else 0) + a % (len(x.shape) - batched)] if x.shape is not None and
             len(x.shape) > batched else None for x, a in zip(scanned, axes, strict=False)}
    n = steps.pop() if len(steps) == 1 else None
    out_axes = list(attrs.get("scan_output_axes", [])) if not batched else []
    for k, (kind, etype, shape) in enumerate(outs[len(states):]):
        if shape is None or batched:
            results.append((kind, etype, None))
            continue
        axis = out_axes[k] if k < len(out_axes) else 0  # the stacked axis, from the end when negative
        axis = axis + len(shape) + 1 if axis < 0 else axis
        dims = list(shape)
        dims.insert(min(max(axis, 0), len(dims)), n if isinstance(n, int) else None)
        results.append((kind, etype, tuple(dims)))
    _check_carried(r, "Scan", results + [(v.kind, v.etype, None) for v in ins])
    attribs: dict[str, Any] = {"body": name, "scan_input_axes": axes, "scan_input_directions": directions,
                               "batched": batched}
    if not batched:
        attribs["scan_output_axes"] = list(attrs.get("scan_output_axes", []))
        attribs["scan_output_directions"] = list(attrs.get("scan_output_directions", []))
    return _emit(r, "onnx_scan", {"initial": [_tensor(r, v) for v in states],
                                  "scanned": [_tensor(r, v) for v in scanned], "captured": body.captured},
                 attribs, results, array=True)


@onnx_node("SequenceMap")
def _sequence_map(r, attrs, ins):
    if not ins or ins[0] is None or ins[0].kind != "sequence":
        raise r.error("SequenceMap's first input must be a sequence")
    hints = [_element(v) for v in ins]
    body = r.subgraph(attrs["body"], "body", hints)
    name = r.file_subgraph(body, "body")
    results = [("sequence", e, None) for _, e, _ in _outputs_of(body)]
    return _emit(r, "onnx_sequence_map", {"input_sequence": _tensor(r, ins[0]),
                                          "additional": [_tensor(r, v) for v in ins[1:]],
                                          "captured": body.captured}, {"body": name}, results, array=True)


# --- sequences --------------------------------------------------------------------------------

def _need_seq(r: Any, value: Value | None, what: str = "input 0") -> Value:
    if value is None or value.kind != "sequence":
        raise r.error(f"{what} must be a sequence")
    return value


@onnx_node("SequenceConstruct")
def _construct(r, attrs, ins):
    if not ins or any(v is None or v.kind != "tensor" for v in ins):
        raise r.error("SequenceConstruct takes one or more tensors")
    if len({nnef_dtype(v.etype) for v in ins}) != 1:
        raise r.error("the tensors of a sequence must have one element type")
    return _emit(r, "onnx_sequence_construct", {"inputs": [_tensor(r, v) for v in ins]}, {},
                 [("sequence", ins[0].etype, _merge(*[v.shape for v in ins]))])


@onnx_node("SequenceEmpty")
def _empty(r, attrs, ins):
    etype = r.etype_code(int(attrs.get("dtype", 1)))
    return _emit(r, "onnx_sequence_empty", {}, {}, [("sequence", etype, None)])


@onnx_node("SequenceInsert")
def _insert(r, attrs, ins):
    seq = _need_seq(r, ins[0])
    if len(ins) < 2 or ins[1] is None or ins[1].kind != "tensor":
        raise r.error("SequenceInsert needs a tensor to insert")
    return _emit(r, "onnx_sequence_insert", {"input_sequence": _tensor(r, seq), "tensor": _tensor(r, ins[1]),
                                             "position": _opt(r, ins[2] if len(ins) > 2 else None)}, {},
                 [("sequence", seq.etype, _merge(seq.shape, ins[1].shape))])


@onnx_node("SequenceErase")
def _erase(r, attrs, ins):
    seq = _need_seq(r, ins[0])
    return _emit(r, "onnx_sequence_erase", {"input_sequence": _tensor(r, seq),
                                            "position": _opt(r, ins[1] if len(ins) > 1 else None)}, {},
                 [("sequence", seq.etype, seq.shape)])


@onnx_node("SequenceAt")
def _at(r, attrs, ins):
    seq = _need_seq(r, ins[0])
    if len(ins) < 2 or ins[1] is None:
        raise r.error("SequenceAt needs a position")
    return _emit(r, "onnx_sequence_at", {"input_sequence": _tensor(r, seq), "position": _tensor(r, ins[1])}, {},
                 [("tensor", seq.etype, seq.shape)])


@onnx_node("SequenceLength")
def _length(r, attrs, ins):
    seq = _need_seq(r, ins[0])
    return _emit(r, "onnx_sequence_length", {"input_sequence": _tensor(r, seq)}, {}, [("tensor", "i64", ())])


@onnx_node("ConcatFromSequence")
def _concat(r, attrs, ins):
    seq = _need_seq(r, ins[0])
    return _emit(r, "onnx_concat_from_sequence", {"input_sequence": _tensor(r, seq)},
                 {"axis": int(attrs["axis"]), "new_axis": int(attrs.get("new_axis", 0))},
                 [("tensor", seq.etype, None)])


@onnx_node("SplitToSequence")
def _split(r, attrs, ins):
    if not ins or ins[0] is None or ins[0].kind != "tensor":
        raise r.error("SplitToSequence takes a tensor")
    axis, keepdims = int(attrs.get("axis", 0)), int(attrs.get("keepdims", 1))
    split = ins[1] if len(ins) > 1 else None
    shape = None
    if ins[0].shape is not None and -len(ins[0].shape) <= axis < len(ins[0].shape):
        dims = list(ins[0].shape)
        axis_ = axis % len(dims)
        if split is None:
            dims[axis_] = 1
            if not keepdims:
                del dims[axis_]
        else:
            dims[axis_] = None
        shape = tuple(dims)
    return _emit(r, "onnx_split_to_sequence", {"input": _tensor(r, ins[0]), "split": _opt(r, split)},
                 {"axis": axis, "keepdims": keepdims}, [("sequence", ins[0].etype, shape)])


# --- optionals --------------------------------------------------------------------------------

_OPTIONAL_OF = {"tensor": "optional", "sequence": "optional_sequence"}


@onnx_node("Optional")
def _optional(r, attrs, ins):
    value = ins[0] if ins else None
    if value is not None:
        if value.kind not in _OPTIONAL_OF:
            raise r.error(f"an optional cannot hold a {value.kind.replace('_', ' ')}")
        return _emit(r, "onnx_optional", {"input": [_tensor(r, value)]}, {},
                     [(_OPTIONAL_OF[value.kind], value.etype, value.shape)])
    kind, tt = r.value_kind(attrs["type"]) if "type" in attrs else (None, None)
    if kind not in _OPTIONAL_OF:
        raise r.error("an empty Optional needs a 'type' attribute of a tensor or a sequence of tensors")
    return _emit(r, "onnx_optional", {"input": []}, {}, [(_OPTIONAL_OF[kind], r.etype_code(tt.elem_type), None)])


@onnx_node("OptionalHasElement")
def _has_element(r, attrs, ins):
    value = ins[0] if ins else None
    return _emit(r, "onnx_optional_has_element", {"input": _opt(r, value)}, {}, [("tensor", "boolean", ())])


@onnx_node("OptionalGetElement")
def _get_element(r, attrs, ins):
    value = ins[0] if ins else None
    if value is None:
        raise r.error("OptionalGetElement needs an input")
    kind = {"optional": "tensor", "optional_sequence": "sequence"}.get(value.kind, value.kind)
    if value.kind in ("tensor", "sequence"):
        return value  # a plain tensor or sequence passes unchanged (opset 18)
    return _emit(r, "onnx_optional_get_element", {"input": _tensor(r, value)}, {},
                 [(kind, value.etype, value.shape)])


# === Writing ===================================================================================
# ONNX (opset 18) has every one of these as a node: bodies become graph attributes that read the
# captured outer values by name (``formats/onnx/writer.py`` ``body_graph``).


def _out(ctx: OnnxContext, name: str) -> tuple:
    t = ctx.graph.tensors[name]
    shape = () if t.shape is None else tuple(d if isinstance(d, int) else None for d in t.shape)
    return shape, element_dtype(t)


def _node(ctx: OnnxContext, op: Operation, op_type: str, inputs: list, **attrs: Any) -> None:
    """One ONNX node for ``op``; its outputs bound to ``op``'s results, kinds recorded."""
    names = op.output_names()
    refs = ctx.node(op_type, inputs, outputs=[_out(ctx, n) for n in names], **attrs)
    for name, ref in zip(names, refs, strict=True):
        kind = ctx.graph.tensors[name].kind
        if kind != "tensor":
            ctx.e.kinds[ref] = kind
        ctx.bind(name, ref)


def _optional_in(values: list) -> list:
    return list(values) if values else [""]


@to_onnx("onnx_if")
def if_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    captured = [ctx.ref(n) for n in op.inputs["captured"]]
    _node(ctx, op, "If", [op.inputs["cond"]], then_branch=body_graph(ctx, op.attribs["then_branch"], captured),
          else_branch=body_graph(ctx, op.attribs["else_branch"], captured))


@to_onnx("onnx_loop")
def loop_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    captured = [ctx.ref(n) for n in op.inputs["captured"]]
    _node(ctx, op, "Loop", [*_optional_in(op.inputs["max_trip"]), *_optional_in(op.inputs["cond"]),
                            *op.inputs["initial"]], body=body_graph(ctx, op.attribs["body"], captured))


@to_onnx("onnx_scan")
def scan_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    if op.attribs.get("batched"):
        raise ctx.fail("the batched form (Scan-8) has no node in ONNX opset 18")
    captured = [ctx.ref(n) for n in op.inputs["captured"]]
    attrs = {k: list(op.attribs[k]) or None for k in ("scan_input_axes", "scan_input_directions",
                                                      "scan_output_axes", "scan_output_directions")
             if k in op.attribs}
    _node(ctx, op, "Scan", [*op.inputs["initial"], *op.inputs["scanned"]],
          body=body_graph(ctx, op.attribs["body"], captured), num_scan_inputs=len(op.inputs["scanned"]), **attrs)


@to_onnx("onnx_sequence_map")
def sequence_map_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    captured = [ctx.ref(n) for n in op.inputs["captured"]]
    _node(ctx, op, "SequenceMap", [op.inputs["input_sequence"], *op.inputs["additional"]],
          body=body_graph(ctx, op.attribs["body"], captured))


@to_onnx("onnx_sequence_construct")
def sequence_construct_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SequenceConstruct", list(op.inputs["inputs"]))


@to_onnx("onnx_sequence_empty")
def sequence_empty_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    from onnx import helper

    dtype = _out(ctx, op.output_names()[0])[1]
    _node(ctx, op, "SequenceEmpty", [], dtype=helper.np_dtype_to_tensor_dtype(dtype))


@to_onnx("onnx_sequence_insert")
def sequence_insert_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SequenceInsert", [op.inputs["input_sequence"], op.inputs["tensor"], *op.inputs["position"]])


@to_onnx("onnx_sequence_erase")
def sequence_erase_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SequenceErase", [op.inputs["input_sequence"], *op.inputs["position"]])


@to_onnx("onnx_sequence_at")
def sequence_at_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SequenceAt", [op.inputs["input_sequence"], op.inputs["position"]])


@to_onnx("onnx_sequence_length")
def sequence_length_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SequenceLength", [op.inputs["input_sequence"]])


@to_onnx("onnx_concat_from_sequence")
def concat_from_sequence_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "ConcatFromSequence", [op.inputs["input_sequence"]], axis=int(op.attribs["axis"]),
          new_axis=int(op.attribs.get("new_axis", 0)))


@to_onnx("onnx_split_to_sequence")
def split_to_sequence_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "SplitToSequence", [op.inputs["input"], *op.inputs["split"]], axis=int(op.attribs.get("axis", 0)),
          keepdims=int(op.attribs.get("keepdims", 1)))


@to_onnx("onnx_optional")
def optional_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    if op.inputs["input"]:
        _node(ctx, op, "Optional", list(op.inputs["input"]))
        return
    from onnx import helper

    name = op.output_names()[0]
    shape, dtype = _out(ctx, name)
    typ = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(dtype), None)
    if ctx.graph.tensors[name].kind == "optional_sequence":
        typ = helper.make_sequence_type_proto(typ)
    _node(ctx, op, "Optional", [], type=typ)


@to_onnx("onnx_optional_has_element")
def optional_has_element_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "OptionalHasElement", list(op.inputs["input"]))


@to_onnx("onnx_optional_get_element")
def optional_get_element_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "OptionalGetElement", [op.inputs["input"]])


@to_onnx("onnx_identity")
def identity_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    _node(ctx, op, "Identity", [op.inputs["input"]])


# --- writing IR v11 (OpenVINO opset docs: If-8, Loop-5) -------------------------------------------
# What the IR writer keeps (an If whose condition and a Loop whose trip count or condition are
# known only at run time; the static ones are inlined first, formats/export/unroll.py) becomes
# the opset layer with its bodies as sub-networks: a body's inputs are Parameters fed through the
# layer's port map, its outputs Results.


def _port_map_entry(parent: Any, kind: str, external: int, internal: int, **extra: Any) -> None:
    from xml.etree import ElementTree as ET

    ET.SubElement(parent, kind, {"external_port_id": str(external), "internal_layer_id": str(internal),
                                 **{k: str(v) for k, v in extra.items()}})


def _outer_outputs(ctx: IRContext, op: Operation) -> list[tuple[tuple, str]]:
    from ..ir.writer import ir_etype

    outs = []
    for name in op.output_names():
        t = ctx.graph.tensors[name]
        shape = tuple(d if isinstance(d, int) else None for d in t.shape) if t.shape is not None else None
        if shape is None:
            raise ctx.fail(f"result '{name}' has an unknown rank, which an IR port cannot declare")
        outs.append((shape, ir_etype(t, op.location)))
    return outs


def _parameters(ctx: IRContext, op: Operation, w: Any, body: Any, inputs: list[int]) -> list[int]:
    """The Parameter layer id of each of the body's inputs at ``inputs`` (all are needed)."""
    ids = []
    for k in inputs:
        lid = w.parameter_ids.get(body.inputs[k])
        if lid is None:
            raise ctx.fail(f"body input {k} '{body.inputs[k]}' has no Parameter")
        ids.append(lid)
    return ids


def _iterating_layer(ctx: IRContext, op: Operation, type_: str, version: str, refs: list, outs: list, pm: Any,
                     back: list[tuple[int, int]], w: Any) -> None:
    """The Loop / TensorIterator layer itself: its port map, back edges (body Result -> body
    Parameter) and body after its ports; its results bound to ``op``'s."""
    from xml.etree import ElementTree as ET

    edges = ET.Element("back_edges")
    for src, dst in back:
        ET.SubElement(edges, "edge", {"from-layer": str(src), "to-layer": str(dst)})
    net = ET.Element("body")
    w.fill(net)
    got = ctx.w.add(type_, refs, outs, version=version, name=f"{op.output_names()[0]}/{type_}")
    ctx.w.layers[got[0][0]].children = [pm, edges, net]
    for name, ref in zip(op.output_names(), got, strict=True):
        ctx.bind(name, ref)


@to_ir("onnx_if")
def if_to_ir(ctx: IRContext, op: Operation) -> None:
    from xml.etree import ElementTree as ET

    from ..ir.writer import body_network

    captured = list(op.inputs["captured"])
    refs = [ctx.ref(op.inputs["cond"])] + [ctx.ref(n) for n in captured]
    if ctx.w.etype(refs[0]) != "boolean":
        raise ctx.fail("its condition is not a boolean tensor")
    outs = _outer_outputs(ctx, op)
    children = []
    for tag in ("then", "else"):
        w, body = body_network(ctx, op.attribs[f"{tag}_branch"])
        if len(body.inputs) != len(captured) or len(body.outputs) != len(outs):
            raise ctx.fail(f"its {tag} branch takes {len(body.inputs)} inputs and gives {len(body.outputs)} "
                           f"results, for {len(captured)} and {len(outs)}")
        pm = ET.Element(f"{tag}_port_map")
        for k, lid in enumerate(_parameters(ctx, op, w, body, list(range(len(captured))))):
            _port_map_entry(pm, "input", 1 + k, lid)
        for j, lid in enumerate(w.result_ids):
            _port_map_entry(pm, "output", len(refs) + j, lid)
        net = ET.Element(f"{tag}_body")
        w.fill(net)
        children += [pm, net]
    got = ctx.w.add("If", refs, outs, version="opset8", name=f"{op.output_names()[0]}/If")
    ctx.w.layers[got[0][0]].children = children
    for name, ref in zip(op.output_names(), got, strict=True):
        ctx.bind(name, ref)


@to_ir("onnx_loop")
def loop_to_ir(ctx: IRContext, op: Operation) -> None:
    """ONNX Loop as Loop-5: the trip count (-1: none) and the condition (true: none) as its
    first inputs, then the carried values (merged: a back edge from their body Result) and
    the captured tensors (invariant).  ONNX's iteration number is the body's
    ``current_iteration`` Parameter; its incoming condition is true whenever the body runs,
    so it is written as a constant, and its condition output, which ONNX ignores when the
    loop has no condition input, is then a constant true; a scan output gets a unit leading
    axis in the body and is concatenated along it (ONNX stacks them)."""
    from xml.etree import ElementTree as ET

    from ..ir.writer import body_network

    trips, conds = op.inputs["max_trip"], op.inputs["cond"]
    carried, captured = list(op.inputs["initial"]), list(op.inputs["captured"])
    trip = ctx.ref(trips[0]) if trips else ctx.const(np.array(-1, np.int64), "i64")
    cond = ctx.ref(conds[0]) if conds else ctx.const(np.array(True), "boolean")
    if ctx.w.etype(cond) != "boolean" or ctx.w.etype(trip) not in ("i64", "i32"):
        raise ctx.fail("its trip count must be an integer and its condition a boolean tensor")
    refs = [trip, cond] + [ctx.ref(n) for n in carried + captured]
    outs = _outer_outputs(ctx, op)
    n_carried = len(carried)
    n_scan = len(outs) - n_carried

    def stack_scans(body: Any) -> None:   # each scan output with a leading axis of 1
        if not conds:   # ONNX ignores the body's condition output when the loop has no condition input
            name = "nnefx_true"
            while name in body.tensors:
                name += "_"
            body.tensors[name] = Tensor(name, "logical", ())
            body.operations.append(Operation("constant", {}, {"output": name}, {"shape": [], "value": [True]},
                                             dtype="logical", location=op.location))
            body.outputs[0] = name
        for j in range(n_scan):
            k = 1 + n_carried + j
            name = body.outputs[k]
            t = body.tensors[name]
            new = f"{name}__nnefx_step"
            while new in body.tensors:
                new += "_"
            body.tensors[new] = Tensor(new, t.dtype, None if t.shape is None else (1, *t.shape), etype=t.etype)
            body.operations.append(Operation("unsqueeze", {"input": name}, {"output": new}, {"axes": [0]},
                                             dtype=t.dtype, location=op.location))
            body.outputs[k] = new

    source = ctx.graph.subgraphs.get(op.attribs["body"])
    if source is None or len(source.inputs) != 2 + n_carried + len(captured) or \
            len(source.outputs) != 1 + n_carried + n_scan:
        raise ctx.fail("its body's inputs and results do not match the loop's")
    w, body = body_network(ctx, op.attribs["body"], fixed={source.inputs[1]: np.array(True)}, extra=stack_scans)
    params = _parameters(ctx, op, w, body, [0] + list(range(2, len(body.inputs))))
    pm = ET.Element("port_map")
    for k, lid in enumerate(params[1:]):
        _port_map_entry(pm, "input", 2 + k, lid)
    for j, lid in enumerate(w.result_ids[1:]):
        if j < n_carried:
            _port_map_entry(pm, "output", len(refs) + j, lid)
        else:
            _port_map_entry(pm, "output", len(refs) + j, lid, axis=0, start=0, end=-1, stride=1, part_size=1)
    _port_map_entry(pm, "input", -1, params[0], purpose="current_iteration")
    _port_map_entry(pm, "output", -1, w.result_ids[0], purpose="execution_condition")
    back = [(w.result_ids[1 + k], params[1 + k]) for k in range(n_carried)]
    _iterating_layer(ctx, op, "Loop", "opset5", refs, outs, pm, back, w)


@to_ir("onnx_scan")
def scan_to_ir(ctx: IRContext, op: Operation) -> None:
    """ONNX Scan (9+) as TensorIterator-1: each scanned input sliced one item at a time along
    its axis (stride -1 from the end for a reverse direction), the item's unit axis squeezed
    in the body; states merged through back edges, captured tensors invariant; each scan
    output given a unit axis in the body and concatenated along it (reversed likewise)."""
    from xml.etree import ElementTree as ET

    from ..ir.writer import body_network

    if op.attribs.get("batched"):
        raise ctx.fail("the batched form (Scan-8) has no TensorIterator form nnefx writes")
    states, scanned, captured = list(op.inputs["initial"]), list(op.inputs["scanned"]), list(op.inputs["captured"])
    if not scanned:
        raise ctx.fail("a TensorIterator needs at least one scanned input")
    n_states, n_scanned = len(states), len(scanned)
    outs = _outer_outputs(ctx, op)
    n_out = len(outs) - n_states
    ranks = [len(ctx.graph.tensors[x].shape or ()) for x in scanned]
    in_axes = list(op.attribs.get("scan_input_axes") or [0] * n_scanned)
    in_axes = [a + r if a < 0 else a for a, r in zip(in_axes, ranks, strict=True)]
    in_dirs = list(op.attribs.get("scan_input_directions") or [0] * n_scanned)
    out_axes = list(op.attribs.get("scan_output_axes") or [0] * n_out)
    out_dirs = list(op.attribs.get("scan_output_directions") or [0] * n_out)
    source = ctx.graph.subgraphs.get(op.attribs["body"])
    if source is None or len(source.inputs) != n_states + n_scanned + len(captured) or \
            len(source.outputs) != n_states + n_out:
        raise ctx.fail("its body's inputs and results do not match the scan's")

    def fresh(body: Any, hint: str) -> str:
        while hint in body.tensors:
            hint += "_"
        return hint

    def reshape_body(body: Any) -> None:
        front = []
        for k in range(n_scanned):   # the body takes the slice, with its unit axis, and squeezes it
            item = body.inputs[n_states + k]
            t = body.tensors[item]
            if t.shape is None:
                raise ctx.fail(f"scanned item '{item}' has an unknown rank")
            piece = fresh(body, f"{item}__nnefx_slice")
            axis = in_axes[k]
            body.tensors[piece] = Tensor(piece, t.dtype, (*t.shape[:axis], 1, *t.shape[axis:]), etype=t.etype)
            body.inputs[n_states + k] = piece
            body.operations = [o for o in body.operations if not (o.op == "external" and item in o.output_names())]
            front.append(Operation("squeeze", {"input": piece}, {"output": item}, {"axes": [axis]}, dtype=t.dtype,
                                   location=op.location))
        body.operations[:0] = front
        for j in range(n_out):        # each scan output with a unit axis to concatenate along
            name = body.outputs[n_states + j]
            t = body.tensors[name]
            if t.shape is None:
                raise ctx.fail(f"scan output '{name}' has an unknown rank")
            axis = out_axes[j] + len(t.shape) + 1 if out_axes[j] < 0 else out_axes[j]
            out_axes[j] = axis
            new = fresh(body, f"{name}__nnefx_step")
            body.tensors[new] = Tensor(new, t.dtype, (*t.shape[:axis], 1, *t.shape[axis:]), etype=t.etype)
            body.operations.append(Operation("unsqueeze", {"input": name}, {"output": new}, {"axes": [axis]},
                                             dtype=t.dtype, location=op.location))
            body.outputs[n_states + j] = new

    w, body = body_network(ctx, op.attribs["body"], extra=reshape_body)
    params = _parameters(ctx, op, w, body, list(range(len(body.inputs))))
    refs = [ctx.ref(n) for n in states + scanned + captured]
    pm = ET.Element("port_map")

    def sliced(direction: int, axis: int) -> dict:
        forward = {"start": 0, "end": -1, "stride": 1}
        backward = {"start": -1, "end": 0, "stride": -1}
        return {"axis": axis, **(backward if direction else forward), "part_size": 1}

    for k, lid in enumerate(params):
        if n_states <= k < n_states + n_scanned:
            _port_map_entry(pm, "input", k, lid, **sliced(in_dirs[k - n_states], in_axes[k - n_states]))
        else:
            _port_map_entry(pm, "input", k, lid)
    for j, lid in enumerate(w.result_ids):
        if j < n_states:
            _port_map_entry(pm, "output", len(refs) + j, lid)
        else:
            _port_map_entry(pm, "output", len(refs) + j, lid, **sliced(out_dirs[j - n_states], out_axes[j - n_states]))
    back = [(w.result_ids[k], params[k]) for k in range(n_states)]
    _iterating_layer(ctx, op, "TensorIterator", "opset1", refs, outs, pm, back, w)
