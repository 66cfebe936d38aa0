"""From IR records (:mod:`.xml`) to a :class:`~nnefx.graph.Model`.

The reader owns the *structure* of a net — which layers exist, how edges connect their
ports, the order they run in, the graph inputs and outputs — and the layers that are about
structure rather than computation: ``Parameter``/``Input`` (graph inputs), ``Const`` (data
from the ``.bin``, in both the v10/11 ``element_type/offset/size`` form and the legacy
``<blobs><custom .../></blobs>`` form) and ``Result`` (graph outputs).  Every other layer is
handed to its mapping function (:mod:`.mapping`).

Names follow OpenVINO, so a Session's results are keyed like OpenVINO's: a tensor is named
after its port's first tensor name (v11 ``names``), else after its layer
(``name.<output index>`` when the layer has several outputs; legacy files: ``name`` for the
first output and ``name.<port id>`` for the others).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from ...diagnostics import Location, NNEFXError
from ...graph import Model, Operation, ValueNeeded
from ..reading.context import fold_known
from .deferred import defer_layer
from .mapping import LayerContext, NetGraph, Value, find_fold, find_mapping
from .weights import Weights, element_type, nnef_dtype
from .xml import Layer, Net, Port

STRUCTURAL = ("Parameter", "Input", "Const", "Result")


def _fmt(shape: Any) -> str:
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class NetReader:
    def __init__(self, net: Net, file: str | None, weights: Weights,
                 shapes: dict[str, Any] | None = None):
        self.net = net
        self.file = file
        self.weights = weights
        self.shapes = {k: tuple(v) for k, v in (shapes or {}).items()}
        self.builder = NetGraph(net.name or "network", file, weights, net.version)
        self.values: dict[tuple[int, int], Value] = {}
        self.used_shapes: set[str] = set()
        #: tensors computed from deferred layers' results (their extents are known only at run time)
        self.pending: set[str] = set()

    # ------------------------------------------------------------------------------------
    def loc(self, lay: Layer, line: int | None = None) -> Location:
        return Location(self.file, line or lay.line, None, lay.where())

    def layer_version(self, lay: Layer) -> str:
        if self.net.version <= 9 or not lay.version:
            return "legacy" if self.net.version <= 9 else (lay.version or "opset1")
        return lay.version

    def default_etype(self, lay: Layer) -> str:
        p = lay.precision or self.net.precision
        return element_type(p, self.loc(lay)) if p else "f32"

    def port_etype(self, lay: Layer, port: Port) -> str:
        if port.precision:
            return element_type(port.precision, self.loc(lay, port.line))
        return self.default_etype(lay)

    def port_name(self, lay: Layer, index: int) -> str:
        port = lay.outputs[index]
        if port.names:
            return port.names[0]
        if self.net.version <= 9:
            # legacy files: the layer name, then "name.<port id>" for the later outputs
            return lay.name if index == 0 else f"{lay.name}.{port.id}"
        # OpenVINO's rule for unnamed tensors (v10 files): the layer name, plus ".<output
        # index>" (the position among the outputs, not the port id) when there are several
        return lay.name if len(lay.outputs) == 1 else f"{lay.name}.{index}"

    # ------------------------------------------------------------------------------------
    def order(self) -> tuple[list[Layer], dict[int, list[tuple[Port, tuple[int, int]]]]]:
        """Validate edges and ports; return layers in topological order and each layer's inputs."""
        by_id: dict[int, Layer] = {}
        for lay in self.net.layers:
            if lay.id in by_id:
                raise NNEFXError(f"layer id {lay.id} is used twice", self.loc(lay))
            by_id[lay.id] = lay
        incoming: dict[tuple[int, int], tuple[int, int]] = {}
        succ: dict[int, list[int]] = {lid: [] for lid in by_id}
        indeg: dict[int, int] = {lid: 0 for lid in by_id}
        for e in self.net.edges:
            eloc = Location(self.file, e.line, None, "edges")
            src = by_id.get(e.from_layer)
            dst = by_id.get(e.to_layer)
            if src is None:
                raise NNEFXError(f"edge from unknown layer {e.from_layer}", eloc)
            if dst is None:
                raise NNEFXError(f"edge to unknown layer {e.to_layer}", eloc)
            if not any(p.id == e.from_port for p in src.outputs):
                raise NNEFXError(f"edge from port {e.from_port}, which is not an output port of this layer",
                                 Location(self.file, e.line, None, src.where()))
            if not any(p.id == e.to_port for p in dst.inputs):
                raise NNEFXError(f"edge to port {e.to_port}, which is not an input port of this layer",
                                 Location(self.file, e.line, None, dst.where()))
            key = (e.to_layer, e.to_port)
            if key in incoming:
                raise NNEFXError(f"input port {e.to_port} has more than one incoming edge",
                                 Location(self.file, e.line, None, dst.where()))
            incoming[key] = (e.from_layer, e.from_port)
            succ[e.from_layer].append(e.to_layer)
            indeg[e.to_layer] += 1
        inputs: dict[int, list[tuple[Port, tuple[int, int]]]] = {}
        for lay in self.net.layers:
            lst = []
            for p in lay.inputs:
                src = incoming.get((lay.id, p.id))
                if src is None:
                    raise NNEFXError(f"input port {p.id} is not connected (no edge leads to it)",
                                     self.loc(lay, p.line))
                lst.append((p, src))
            inputs[lay.id] = lst
        # Kahn's algorithm, stable in file order.
        position = {lay.id: i for i, lay in enumerate(self.net.layers)}
        ready = deque(sorted((lid for lid, d in indeg.items() if d == 0), key=position.__getitem__))
        order: list[Layer] = []
        while ready:
            lid = ready.popleft()
            order.append(by_id[lid])
            for nxt in succ[lid]:
                indeg[nxt] -= 1
                if indeg[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(by_id):
            stuck = [lay for lay in self.net.layers if indeg[lay.id] > 0]
            raise NNEFXError(f"the layers form a cycle ({len(stuck)} layers cannot be ordered; "
                             "only TensorIterator/Loop bodies may loop, through their back edges)",
                             self.loc(stuck[0]))
        return order, inputs

    # ------------------------------------------------------------------------------------
    def read(self) -> Model:
        order, inputs = self.order()
        results: list[tuple[Layer, Value, tuple[int, int]]] = []
        for lay in order:
            values = [self.values[src] for _, src in inputs[lay.id]]
            if lay.type in ("Parameter", "Input"):
                outs = [self.parameter(lay)]
            elif lay.type == "Const":
                outs = [self.const(lay)]
            elif lay.type == "Result":
                if len(values) != 1:
                    raise NNEFXError(f"a Result must have exactly one input, has {len(values)}", self.loc(lay))
                self.fill_shape(values[0], lay.inputs[0], lay)
                results.append((lay, values[0], inputs[lay.id][0][1]))
                continue
            else:
                outs = self.map_layer(lay, values)
            for i, port in enumerate(lay.outputs):
                self.values[(lay.id, port.id)] = outs[i]
        if not results and self.net.version <= 9:
            # Legacy nets have no Result layers: every output port nothing reads is an output.
            consumed = {(e.from_layer, e.from_port) for e in self.net.edges}
            for lay in order:
                if lay.type in ("Const",):
                    continue
                for port in lay.outputs:
                    if (lay.id, port.id) not in consumed:
                        results.append((lay, self.values[(lay.id, port.id)], (lay.id, port.id)))
        position = {lay.id: i for i, lay in enumerate(self.net.layers)}
        results.sort(key=lambda r: position[r[0].id])  # OpenVINO's output order: file order
        unused = set(self.shapes) - self.used_shapes
        if unused:
            raise NNEFXError(f"a shape is given for {', '.join(repr(n) for n in sorted(unused))}, which "
                             f"{'is not an input' if len(unused) == 1 else 'are not inputs'} of the network", Location(self.file))
        self.outputs(results)
        if self.net.version <= 9:
            from .legacy_state import check_memory_pairs  # legacy Memory layers come in pairs

            check_memory_pairs(self.builder)
        graph = self.builder.graph
        graph.validate_structure()
        model = Model(graph, format="ir", source=self.file,
                      extras={"ir_version": self.net.version, "ir_name": self.net.name})
        return model

    # --- structural layers -----------------------------------------------------------------
    def parameter(self, lay: Layer) -> Value:
        loc = self.loc(lay)
        if len(lay.outputs) != 1:
            raise NNEFXError(f"an input layer must have exactly one output port, has {len(lay.outputs)}", loc)
        port = lay.outputs[0]
        if "element_type" in lay.data:
            etype = element_type(lay.data["element_type"], loc)
        else:
            etype = self.port_etype(lay, port)
        dims = port.dims
        if "shape" in lay.data and dims is not None and self.net.version >= 10:
            declared = _parse_shape_attr(lay.data["shape"], loc)
            if declared is not None and not _compatible(declared, dims):
                raise NNEFXError(f"shape attribute {_fmt(declared)} disagrees with the port dims {_fmt(dims)}", loc)
        name = self.port_name(lay, 0)
        for key in (name, lay.name):
            if key in self.shapes:
                given = self.shapes[key]
                self.used_shapes.add(key)
                if len(given) != len(dims) or not _compatible(given, dims):
                    raise NNEFXError(f"given shape {_fmt(given)} does not fit the declared input shape {_fmt(dims)}",
                                     loc)
                dims = tuple(int(d) for d in given)
                break
        dtype = nnef_dtype(etype)
        tname = self.builder.unique(name)
        from ...graph import Tensor
        from ..reading.values import tensor_etype

        self.builder.graph.tensors[tname] = Tensor(tname, dtype, tuple(dims),
                                                   etype=tensor_etype(etype) if self.builder.concrete else None)
        self.builder.graph.operations.append(
            Operation("external", {}, {"output": tname}, {"shape": [1 if d is None else int(d) for d in dims]},
                      dtype=dtype, location=loc))
        self.builder.graph.inputs.append(tname)
        return Value(tensor=tname, etype=etype, shape=tuple(dims))

    def const(self, lay: Layer) -> Value:
        loc = self.loc(lay)
        if len(lay.outputs) != 1:
            raise NNEFXError(f"a Const must have exactly one output port, has {len(lay.outputs)}", loc)
        port = lay.outputs[0]
        dims = port.dims
        if "offset" in lay.data or "element_type" in lay.data:
            etype = element_type(lay.data.get("element_type") or port.precision, loc)
            if "shape" in lay.data:
                shape = _parse_shape_attr(lay.data["shape"], loc)
                if shape is None or any(d is None for d in shape):
                    raise NNEFXError("a Const must have a static shape", loc)
                if dims is not None and tuple(dims) != tuple(shape):
                    raise NNEFXError(f"shape attribute {_fmt(shape)} disagrees with the port dims {_fmt(dims)}", loc)
            else:
                shape = dims
            if shape is None or any(d is None for d in shape):
                raise NNEFXError("a Const must have a static shape", loc)
            try:
                offset = int(lay.data["offset"])
                size = int(lay.data["size"])
            except KeyError as exc:
                raise NNEFXError(f"missing attribute '{exc.args[0]}'", loc) from None
            except ValueError:
                raise NNEFXError("offset and size must be integers", loc) from None
            arr = self.weights.tensor(offset, size, etype, tuple(shape), loc)
            packed = self.weights.raw(offset, size, loc) if etype == "u1" else None
        else:
            blob = lay.blobs.get("custom") or (next(iter(lay.blobs.values())) if lay.blobs else None)
            if blob is None:
                raise NNEFXError("a Const layer needs a <blobs><custom offset=... size=.../></blobs> entry "
                                 "or offset/size/element_type data", loc)
            etype = element_type(blob.precision or port.precision or lay.precision or self.net.precision
                                 or "FP32", loc)
            if dims is None or any(d is None for d in dims):
                raise NNEFXError("a Const must have a static shape", loc)
            blob_loc = Location(self.file, blob.line, None, lay.where())
            arr = self.weights.tensor(blob.offset, blob.size, etype, tuple(dims), blob_loc)
            packed = self.weights.raw(blob.offset, blob.size, blob_loc) if etype == "u1" else None
        if port.precision:
            petype = element_type(port.precision, loc)
            if petype != etype and not (etype == "u1" and petype in ("u1", "boolean")):
                raise NNEFXError(f"port precision {port.precision} disagrees with the data's element type {etype}",
                                 loc)
        return Value(const=arr, etype=etype, shape=tuple(int(d) for d in arr.shape), label=lay.name,
                     packed=packed)

    def outputs(self, results: list[tuple[Layer, Value, tuple[int, int]]]) -> None:
        graph = self.builder.graph
        layer_by_id = {lay.id: lay for lay in self.net.layers}
        for lay, value, (src_layer, src_port) in results:
            src = layer_by_id[src_layer]
            index = next(i for i, p in enumerate(src.outputs) if p.id == src_port)
            want = self.port_name(src, index)
            if lay.type == "Result":
                # newer files also name the output on the Result layer itself
                from .xml import _split_names

                named = _split_names(lay.attrs.get("output_names", ""))
                if named:
                    want = named[0]
            loc = self.loc(lay)
            if value.tensor is None:
                name = self.builder.materialise(value, want, loc)
            else:
                name = value.tensor
            if name != want or name in graph.outputs or name in graph.inputs:
                t = graph.tensors[name]
                new = self.builder.add_tensor(want, t.dtype, t.shape)
                graph.operations.append(Operation("copy", {"x": name}, {"y": new}, {}, dtype=t.dtype, location=loc))
                name = new
            graph.outputs.append(name)

    # --- computational layers --------------------------------------------------------------
    def map_layer(self, lay: Layer, values: list[Value]) -> list[Value]:
        version = self.layer_version(lay)
        fn = find_mapping(lay.type, version)
        loc = self.loc(lay)
        if fn is None:
            raise NNEFXError(f"unsupported IR layer type '{lay.type}' (version {version})", loc)
        values = [self.fill_shape(v, port, lay) for v, port in zip(values, lay.inputs, strict=False)]
        ctx = LayerContext(self.builder, lay, values, version)
        outs: Any = None
        folder = find_fold(lay.type, version) if values else None
        if folder is not None and all(v.is_const or v.sym is not None for v in values):
            outs = self.try_fold(ctx, fn, folder, values)
        if outs is None:
            checkpoint = self.builder.checkpoint(values)
            try:
                res = fn(ctx)
            except NNEFXError as exc:
                # a parameter computed at run time, or an input whose extents a deferred layer
                # gives: the layer is read again once a run knows them, else refused here
                res = self.deferred(lay, fn, version, values, exc, checkpoint)
                if res is None:
                    raise
            outs = res if isinstance(res, list) else [res]
        if any(v.tensor in self.pending for v in values):
            self.pending.update(v.tensor for v in outs if v.tensor is not None)
        if len(outs) < len(lay.outputs):
            raise NNEFXError(f"the mapping produced {len(outs)} results for {len(lay.outputs)} output ports", loc)
        for i, port in enumerate(lay.outputs):
            outs[i] = self.finish_output(ctx, i, port, outs[i])
        return outs

    def deferred(self, lay: Layer, fn: Any, version: str, values: list[Value], exc: NNEFXError,
                 checkpoint: tuple) -> list[Value] | None:
        """The layer as a deferred operation (:mod:`.deferred`) when it failed for want of what a
        run knows: an input's value computed at run time (:class:`ValueNeeded`), or the extents
        of an input a deferred layer gives; None when it failed for another reason."""
        waiting = [k for k, v in enumerate(values) if v.tensor in self.pending
                   and (v.shape is None or any(d is None for d in v.shape))]
        needed = []
        if isinstance(exc, ValueNeeded):
            needed = [k for k, v in enumerate(values) if not v.unsupported and (
                v is exc.value or (v.tensor is not None and v.tensor == exc.tensor))][:1]
        if not needed and not waiting:
            return None
        self.builder.restore(checkpoint)
        outs = defer_layer(self, lay, fn, version, values, needed, waiting)
        self.pending.update(v.tensor for v in outs if v.tensor is not None)
        return outs

    def fill_shape(self, value: Value, port: Port, lay: Layer | None = None) -> Value:
        """The consumer's view of a value: its declared dims fill in an unknown shape, and
        must agree with a known one (a file whose ports disagree about an edge is refused)."""
        if value.shape is None and port.dims is not None:
            value.shape = tuple(port.dims)
        elif lay is not None and value.shape is not None and port.dims is not None and \
                not _compatible(tuple(value.shape), tuple(port.dims)):
            raise NNEFXError(f"input port {port.id}: the incoming value has shape {_fmt(value.shape)} but the port "
                             f"declares {_fmt(port.dims)}", self.loc(lay, port.line))
        return value

    def try_fold(self, ctx: LayerContext, fn, folder, values: list[Value]) -> list[Value] | None:
        """Evaluate a layer whose inputs are all known while loading.

        Fully constant inputs give constants.  Partially known integer vectors (symbolic
        shapes) are folded as far as the fold function can go on object arrays; if it cannot
        (arithmetic on an unknown extent), the layer is mapped normally and runs at run time.
        """
        return fold_known(ctx, fn, folder, values, what="layer")

    def finish_output(self, ctx: LayerContext, index: int, port: Port, value: Value) -> Value:
        """Name the port's tensor after the port, check its shape against the declared dims."""
        graph = self.builder.graph
        lay = ctx.layer
        declared = port.dims
        shape = value.shape
        if value.tensor is not None and shape is None:
            shape = graph.tensors[value.tensor].shape
        if declared is not None and shape is not None:
            if not _compatible(shape, declared) or len(shape) != len(declared):
                raise NNEFXError(f"output port {port.id}: the computed shape {_fmt(shape)} differs from the "
                                 f"declared shape {_fmt(declared)}", self.loc(lay, port.line))
        if shape is None and declared is not None:
            shape = tuple(declared)
        elif shape is not None and declared is not None:
            # take the more precise extent per dimension
            shape = tuple(d if d is not None else e for d, e in zip(shape, declared, strict=False))
        value.shape = shape
        if value.tensor is not None:
            t = graph.tensors[value.tensor]
            if t.shape is None or any(d is None for d in t.shape):
                t.shape = shape
            produced_here = any(value.tensor in op.output_names() for op in ctx.ops)
            if produced_here:
                want = self.port_name(lay, index)
                if value.tensor != want and want not in graph.tensors:
                    _rename(graph, ctx.ops, value.tensor, want)
                    value.tensor = want
        return value


def _rename(graph, ops: list[Operation], old: str, new: str) -> None:
    t = graph.tensors.pop(old)
    t.name = new
    graph.tensors[new] = t

    def sub(v: Any) -> Any:
        if isinstance(v, str):
            return new if v == old else v
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    for op in ops:
        op.inputs = {k: sub(v) for k, v in op.inputs.items()}
        op.outputs = {k: sub(v) for k, v in op.outputs.items()}


def _compatible(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    return all(x is None or y is None or int(x) == int(y) for x, y in zip(a, b, strict=False))


def _parse_shape_attr(text: str, loc: Location) -> tuple | None:
    t = text.strip()
    if t == "":
        return ()
    if t == "...":
        raise NNEFXError("tensors of dynamic rank ('...') are not supported", loc)
    if t.startswith("["):
        t = t.strip("[]")
    out = []
    for item in t.split(","):
        s = item.strip()
        if s in ("?", "-1"):
            out.append(None)
            continue
        if ".." in s:  # interval dims (OpenVINO "1..10"): dynamic for our purposes
            out.append(None)
            continue
        try:
            v = int(s)
        except ValueError:
            raise NNEFXError(f"bad shape attribute '{text}'", loc) from None
        if v < 0:
            raise NNEFXError(f"bad shape attribute '{text}'", loc)
        out.append(v)
    return tuple(out)


def bin_path_for(xml_path: str) -> str:
    base, _ = os.path.splitext(xml_path)
    return base + ".bin"


def read_model(path: str, *, weights: str | None = None, shapes: dict[str, Any] | None = None,
               max_bytes: int | None = None, max_elements: int | None = None) -> Model:
    from .xml import MAX_ELEMENTS, MAX_XML_BYTES, read_net

    net = read_net(path, max_bytes=max_bytes or MAX_XML_BYTES, max_elements=max_elements or MAX_ELEMENTS)
    w = Weights(weights or bin_path_for(path))
    return NetReader(net, path, w, shapes).read()
