"""ONNX nodes whose parameters are computed at run time: read again once their values are known.

When a node's reader needs the value of an input (``Slice`` starts, ``ReduceSum`` axes,
``Resize`` scales, ...) and finds a tensor computed at run time there, it raises
:class:`~nnefx.graph.ValueNeeded`; the reader undoes what the node had emitted and writes
one :class:`~nnefx.graph.Deferred` operation instead (:func:`defer_node`).  Its ``build``
(:class:`ReadAgain`) runs the same reader on the same attributes, with the needed inputs as
constants, when a session knows their values (:mod:`nnefx.runtime.values`): the node
becomes exactly the registry operations a file with those constants would have given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import Location, NNEFXError
from ...graph import DEFERRED, Deferred, Graph, Operation, ValueNeeded
from ..export.registry import to_onnx
from ..reading.deferred import bind_results, describe_run
from ..reading.graph import ImportGraph
from ..reading.values import Value, nnef_dtype


def defer_node(reader: Any, fn: Callable[..., Any], attrs: dict[str, Any], ins: list[Value | None],
               values: list[int], shapes: list[int]) -> list[Value]:
    """The node being read as one deferred operation, needing the values of inputs ``values``
    and the shapes of inputs ``shapes`` (positions); its output Values (unknown extents)."""
    where = reader.where()
    loc = reader.loc(where)
    node = reader.node
    builder = reader.builder
    stem = node.name or f"{node.op_type}_{reader.index}"
    names = [None if v is None else builder.materialise(v, f"{stem}_in{k}", loc) for k, v in enumerate(ins)]
    etypes = [None if v is None else v.etype for v in ins]
    default = ins[0].etype if ins and ins[0] is not None else "f32"
    outs: list[str | None] = []
    results: list[Value] = []
    for k, out in enumerate(node.output):
        if out == "":
            outs.append(None)
            results.append(Value(unsupported=f"output {k} of {where} is not given a name"))
            continue
        etype = reader.inferred_etypes.get(out) or default
        rank = reader.inferred_ranks.get(out)
        shape = None if rank is None else (None,) * rank
        name = builder.add_tensor(out, nnef_dtype(etype), shape)
        outs.append(name)
        results.append(Value(tensor=name, etype=etype, shape=shape))
    again = ReadAgain(fn, dict(attrs), _copy(node), reader.index, reader.opset, reader.file, names, etypes,
                      outs, [v.etype for v in results], prefix=reader._prefix,
                      shaped=[(names[k], node.input[k]) for k in shapes])
    record = Deferred(kind=node.op_type, where=where, values=[names[k] for k in values], build=again,
                      format="onnx", source=node.SerializeToString(), shapes=[names[k] for k in shapes])
    builder.graph.operations.append(
        Operation(DEFERRED, {"input": [n for n in names if n is not None]},
                  {"output": [n for n in outs if n is not None]}, {"node": record}, location=loc))
    return results


def _copy(node: Any) -> Any:
    c = type(node)()
    c.CopyFrom(node)
    return c


class ReadAgain:
    """``Deferred.build`` of an ONNX node: its reader run again with the values known."""

    def __init__(self, fn: Callable[..., Any], attrs: dict[str, Any], node: Any, index: int, opset: int,
                 file: str, inputs: list[str | None], etypes: list[str | None], outputs: list[str | None],
                 out_etypes: list[str], prefix: str = "", shaped: list[tuple[str | None, str]] | None = None):
        self.fn, self.attrs, self.node, self.index, self.opset, self.file = fn, attrs, node, index, opset, file
        self.inputs, self.etypes, self.outputs, self.out_etypes = inputs, etypes, outputs, out_etypes
        #: where the node's graph sits ("" for the main graph, "[node 0 '' (Loop) body: " in a body)
        self.prefix = prefix
        #: inputs whose extents it is read again for: (graph tensor, the file's name for messages)
        self.shaped = [(n, label) for n, label in shaped or () if n is not None]

    def reader(self, builder: ImportGraph) -> Any:
        from .reader import OnnxReader

        r = OnnxReader.__new__(OnnxReader)
        r.proto = None
        r.file = self.file
        r.input_shapes = {}
        r.builder = builder
        r.values = {}
        r.opset = self.opset
        r.index = self.index
        r.node = self.node
        r.inferred = {}
        r.inferred_etypes = {}
        r.inferred_ranks = {}
        r.declared_etypes = {}
        r.pending = set()
        r.graph_proto = None
        r.parent = None
        r.depth = 0
        r.captured = []
        r.captured_inner = []
        r._prefix = getattr(self, "prefix", "")
        return r

    def __call__(self, graph: Graph, values: Mapping[str, np.ndarray]) -> list[Operation]:
        builder = ImportGraph.continuing(graph, self.file, concrete=True)  # as the ONNX reader's
        r = self.reader(builder)
        loc: Location = r.loc(r.where())
        ins: list[Value | None] = []
        for k, (name, etype) in enumerate(zip(self.inputs, self.etypes, strict=True)):
            if name is None or etype is None:
                ins.append(None)
            elif name in values:
                arr = _as_etype(np.asarray(values[name]), etype)
                ins.append(Value(const=arr, etype=etype, shape=tuple(arr.shape), label=f"{name}_value{k}"))
            else:
                ins.append(Value(tensor=name, etype=etype, shape=graph.tensors[name].shape))
        shaped = {label: graph.tensors[name].shape for name, label in getattr(self, "shaped", ()) if name not in values}
        try:
            outs = self.fn(r, dict(self.attrs), ins)
        except ValueNeeded:
            raise
        except NNEFXError as exc:
            raise NNEFXError(f"{exc.message} ({describe_run(values, shaped)})", loc) from None
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, AttributeError, KeyError) as exc:
            raise NNEFXError(f"invalid node for the {describe_run(values, shaped)}: {exc}", loc) from None
        outs = outs if isinstance(outs, list) else [outs]
        ops = bind_results(builder, outs, self.outputs, loc)
        for k, name in enumerate(self.outputs):
            if name is None:
                continue
            t = graph.tensors[name]
            carried = _spelled(t.etype) if t.etype else _DEFAULT[t.dtype]
            if _spelled(self.out_etypes[k]) != carried:
                raise NNEFXError(f"output {k} has element type {self.out_etypes[k]}, which a result computed "
                                 f"from run-time values does not carry yet (it would be {carried})", loc)
        return ops


#: the element type each abstract type's results are held in when none is named
_DEFAULT = {"scalar": "f32", "integer": "i64", "logical": "bool"}


def _spelled(etype: str) -> str:
    return "bool" if etype == "boolean" else etype


def _as_etype(arr: np.ndarray, etype: str) -> np.ndarray:
    """A run-time value (held in its NNEF storage) as the element type the file gave it."""
    try:
        dtype = etypes.numpy_dtype("bool" if etype == "boolean" else etype)
    except NNEFXError:
        return arr
    return arr.astype(dtype, copy=False)


# --- writing: the node back as its file had it ------------------------------------------------

def deferred_to_onnx(ctx: Any, op: Operation) -> None:
    """A deferred ONNX node, written back as the node it was (its schema unchanged between the
    file's opset and the one written); any other deferred node is refused at its position."""
    from onnx import NodeProto, defs

    from .writer import OPSET

    node: Deferred = op.attribs["node"]
    again = node.build
    # (duck-typed: the record's class may come from an earlier import of this module)
    if node.format != "onnx" or not all(hasattr(again, a) for a in ("opset", "inputs", "outputs")):
        raise ctx.fail(f"{node.kind} takes the values of {', '.join(node.values)} at run time")
    proto = NodeProto()
    proto.ParseFromString(node.source)
    try:
        same = defs.get_schema(proto.op_type, again.opset).since_version == \
            defs.get_schema(proto.op_type, OPSET).since_version
    except Exception:  # noqa: BLE001 - onnx.defs raises its own SchemaError
        same = False
    if not same:
        raise ctx.fail(f"{proto.op_type} of opset {again.opset} takes values at run time and differs from "
                       f"{proto.op_type} of opset {OPSET}, which nnefx writes")
    inputs = ["" if n is None else n for n in again.inputs]
    outs = []
    for name in again.outputs:
        if name is None:
            raise ctx.fail(f"{proto.op_type} with an unnamed output cannot be written back")
        t = ctx.graph.tensors[name]
        if t.shape is None:
            raise ctx.fail(f"the rank of {proto.op_type}'s output '{name}' is not known")
        outs.append((tuple(t.shape), ctx.nnef_type(t.dtype)))
    refs = ctx.node(proto.op_type, inputs, outputs=outs)
    ctx.e.nodes[-1].attribute.extend(proto.attribute)
    for name, ref in zip(again.outputs, refs, strict=True):
        ctx.bind(name, ref)


to_onnx(DEFERRED)(deferred_to_onnx)
