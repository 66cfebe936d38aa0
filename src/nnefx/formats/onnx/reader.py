"""Translate an ONNX graph onto nnefx registry operations.

Each node is read by the ONNX reader of its operator family (``nnefx/formats/families/``,
found through :mod:`nnefx.formats.reading.registry`), on the format-neutral import layer
(:mod:`nnefx.formats.reading`): values, symbolic dims, constant folding, registry operations
emitted with their shape rules run at once.  Most ONNX operators share the semantics of a
numpy-style operator (numpy broadcasting, Slice start/stop/step/axes, Gather negative
indices, Resize coordinate modes, ...), so their readers spell the node through that
operator (:meth:`~nnefx.formats.reading.context.NodeContext.apply`); the rest emit registry
operations directly.  This module is the container: protobuf, initializers, inputs, outputs,
dispatch.

Safety: the protobuf is parsed by the ``onnx`` package (no code is run); external-data
files must lie inside the model's folder and their ranges are checked; every constant the
importer creates is bounded by the IR folds' item limit.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import Location, NNEFXError
from ...graph import Model, Operation, Tensor, ValueNeeded
from ...ops.onnx.tensors import cast
from ..reading.context import NodeContext, apply_operator
from ..reading.graph import ImportGraph
from ..reading.registry import find_onnx_node
from ..reading.values import Value, concrete, const, etype_of_array, nnef_dtype, tensor_etype
from .deferred import defer_node

#: Refuse model files (and external data) beyond this size.
MAX_FILE_BYTES = 4 << 30
#: Most nodes a graph may have.
MAX_NODES = 200_000


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        raise NNEFXError("reading ONNX models needs the 'onnx' package: pip install nnefx[onnx]") from None
    return onnx, helper, numpy_helper


#: Deepest nesting of subgraphs (an ``If`` inside a ``Loop`` body inside ...) read.
MAX_SUBGRAPH_DEPTH = 16
#: ONNX operators whose inputs may be sequences or optionals (any other refuses them).
CONTAINER_OPERATORS = frozenset({
    "Identity", "If", "Loop", "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase", "SequenceAt",
    "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap", "Optional", "OptionalHasElement",
    "OptionalGetElement"})


class OnnxReader:
    def __init__(self, model: Any, file: str, input_shapes: dict[str, Any] | None, *,
                 parent: OnnxReader | None = None, graph_proto: Any = None, where: str = ""):
        self.proto = model
        self.file = file
        self.input_shapes = dict(input_shapes or {})
        self.graph_proto = model.graph if graph_proto is None else graph_proto
        self.builder = ImportGraph(self.graph_proto.name or "main", file, concrete=True)
        #: element type of each value as ONNX's type inference (and the file) declares it
        self.declared_etypes: dict[str, str] = {}
        self.values: dict[str, Value] = {}
        #: the enclosing graph's reader (a subgraph reads outer names through it)
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        #: outer tensors this subgraph reads (names in the parent's graph), in input order
        self.captured: list[str] = []
        #: this graph's inputs standing for them, in the same order
        self.captured_inner: list[str] = []
        self._prefix = where
        self.opset = 1 if parent is None else parent.opset
        #: the opset version each imported domain has ("" for the default domain)
        self.opsets: dict[str, int] = {}
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = int(imp.version)
            self.opsets["" if imp.domain == "ai.onnx" else imp.domain] = int(imp.version)
        self.index = 0
        self.node: Any = None
        self.inferred: dict[str, tuple] = {}
        #: element types and ranks ONNX's own inference gives (for deferred nodes' results);
        #: a body shares its outermost reader's record of every body's values
        self.inferred_etypes: dict[str, str] = {} if parent is None else parent.body_etypes
        self.inferred_ranks: dict[str, int] = {} if parent is None else parent.body_ranks
        self.body_etypes: dict[str, str] = {} if parent is None else parent.body_etypes
        self.body_ranks: dict[str, int] = {} if parent is None else parent.body_ranks
        #: tensors computed from deferred nodes' results (their shapes are known only at run time)
        self.pending: set[str] = set()

    # --- structure ----------------------------------------------------------------------------
    def loc(self, field: str | None = None) -> Location:
        return Location(self.file, None, None, field)

    def read(self) -> Model:
        self.check_opset()
        self.inferred = self.inferred_shapes()
        self.read_graph()
        graph = self.builder.graph
        graph.validate_structure()
        return Model(graph, format="onnx", source=self.file,
                     extras={"onnx_opset": self.opset, "onnx_producer": self.proto.producer_name})

    def read_graph(self, hints: list[Value | None] | None = None) -> None:
        """Initializers, inputs (``hints``: the values a subgraph's formal inputs will get, for
        inputs whose type the body leaves out), nodes and outputs of this reader's graph."""
        _, helper, _ = _onnx()
        g = self.graph_proto
        if len(g.node) > MAX_NODES:
            raise NNEFXError(f"the graph has {len(g.node)} nodes (more than {MAX_NODES})", self.loc("graph"))
        for init in g.initializer:
            where = f"{self._prefix}initializer '{init.name}'"
            if init.name in self.values:  # ONNX IR: a graph is in single static assignment form
                raise NNEFXError(f"the name '{init.name}' is given to more than one initializer", self.loc(where))
            arr = _tensor_array(init, self.file)
            etype = _etype_code(init.data_type, Location(self.file, None, None, f"initializer '{init.name}'"))
            self.values[init.name] = Value(const=arr, etype=etype, shape=tuple(arr.shape), label=init.name)
        seen: set[str] = set()
        for k, vi in enumerate(g.input):
            if vi.name in seen:
                raise NNEFXError(f"the name '{vi.name}' is given to more than one input",
                                 self.loc(f"{self._prefix}input '{vi.name}'"))
            seen.add(vi.name)
            if vi.name in self.values:
                self._initialized_input(vi, self.values[vi.name])
                continue
            self.external(vi, (hints or [])[k] if hints is not None and k < len(hints) else None)
            if self.parent is not None:
                self.run_time_shaped([], [self.values[vi.name]])  # a body's inputs: given per call
        for i, node in enumerate(g.node):
            self.index = i
            self.node = node
            where = self.where()
            domain = "" if node.domain == "ai.onnx" else node.domain
            if domain not in self.opsets and (domain or self.proto.ir_version >= 3):
                raise NNEFXError(f"the model imports no opset of domain '{node.domain or 'ai.onnx'}', which "
                                 f"operation '{node.op_type}' is of", self.loc(where))
            fn = find_onnx_node(node.op_type, domain)
            if fn is None:
                raise NNEFXError(f"unsupported operation '{node.op_type}' of domain '{node.domain}'" if domain
                                 else f"unsupported ONNX operation '{node.op_type}'", self.loc(where))
            ins: list[Value | None] = []
            for name in node.input:
                if name == "":
                    ins.append(None)
                    continue
                value = self.lookup(name)
                if value is None:
                    raise NNEFXError(f"input '{name}' is not defined before this node", self.loc(where))
                if value.kind != "tensor" and node.op_type not in CONTAINER_OPERATORS:
                    raise NNEFXError(f"input '{name}' is a {value.kind.replace('_', ' ')}; {node.op_type} takes "
                                     "tensors", self.loc(where))
                ins.append(value)
            _check_attribute_types(node, self.opsets.get(domain, self.opset), self.loc(where))
            _check_string_inputs(node, self.opsets.get(domain, self.opset), ins, self.loc(where))
            attrs = {a.name: _attr_value(helper, a) for a in node.attribute}
            self._ops_before = len(self.builder.graph.operations)
            checkpoint = self.builder.checkpoint(ins)
            watch = _ShapeWatch([v for v in ins if v is not None and v.tensor in self.pending])
            try:
                outs = fn(self, attrs, ins)
            except NNEFXError as exc:
                # a parameter computed at run time, or an input whose extents only a run gives
                # (and which the node looked at): read again once they are known, else refused here
                watch.end()
                outs = self.deferred(fn, attrs, ins, exc, checkpoint, watch.read)
                if outs is None:
                    if exc.location is None or exc.location.field is None:
                        raise NNEFXError(exc.message, self.loc(where)) from None
                    raise
            except KeyError as exc:  # a required attribute the node does not carry
                raise NNEFXError(f"missing attribute {exc}", self.loc(where)) from None
            except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, AttributeError) as exc:
                # attribute values of the wrong kind or length (e.g. pads=[1] on a 2-D pool)
                raise NNEFXError(f"invalid node: {exc}", self.loc(where)) from None
            finally:
                watch.end()
            outs = outs if isinstance(outs, list) else [outs]
            for k, name in enumerate(node.output):
                if name == "":
                    continue
                if name in self.values:  # ONNX IR: every name is assigned once (graphs are SSA)
                    raise NNEFXError(f"output '{name}' is already defined (by an input, an initializer or "
                                     "an earlier node)", self.loc(where))
                if k >= len(outs):
                    outs.append(Value(unsupported=f"output {k} of {where} is not supported"))
                self.values[name] = self.fill_etype(name, self.fill_shape(name, outs[k]), ins)
            self.run_time_shaped(ins, [self.values[n] for n in node.output if n in self.values])
        self.outputs(g)

    def run_time_shaped(self, ins: list[Value | None], results: list[Value]) -> None:
        """Record in :attr:`pending` the results of the node just read whose extents only a run
        knows: all of them when an input's are (computed from a deferred node's results, or a
        body input: a body is generic in its inputs' shapes), else those a node of fully known
        input shapes leaves unknown (computed from run-time values: Range, Expand or Reshape to
        a computed shape, NonZero, control flow).  A node that fails while an input's extents
        are pending is deferred until a run gives them (:meth:`deferred`); unknown extents of
        the main graph's own inputs stay the model's (a node that needs them is refused)."""
        tensors = [v for v in ins if v is not None and v.kind == "tensor" and v.tensor is not None]
        if any(v.tensor in self.pending for v in ins if v is not None):
            self.pending.update(v.tensor for v in results if v.tensor is not None)
        elif all(not self.unknown_extents(v) for v in tensors):
            self.pending.update(v.tensor for v in results if v.tensor is not None and v.kind == "tensor"
                                and self.unknown_extents(v))

    def unknown_extents(self, v: Value) -> bool:
        """Whether tensor value ``v``'s rank or an extent is not known while loading."""
        shape = v.shape
        if shape is None and v.tensor is not None and v.tensor in self.builder.graph.tensors:
            shape = self.builder.graph.tensors[v.tensor].shape
        return shape is None or any(d is None for d in shape)

    def lookup(self, name: str) -> Value | None:
        """The value of ``name`` here, or read from an enclosing graph (ONNX IR "Names Within a
        Graph": a subgraph sees the names of the graphs around it).  An outer load-time
        constant is used as is; an outer graph tensor becomes an input of this subgraph,
        recorded in :attr:`captured`, so the data model has no implicit outer reads."""
        value = self.values.get(name)
        if value is not None or self.parent is None:
            return value
        outer = self.parent.lookup(name)
        if outer is None or outer.unsupported:
            return outer
        if outer.is_const:
            # this graph's own copy: materialising a constant records its tensor on the value,
            # a name of the graph that materialised it (an enclosing or sibling graph)
            value = dataclasses.replace(outer, tensor=None)
            self.values[name] = value
            return value
        tensor = self.parent.builder.materialise(outer, name, self.parent.loc(self.parent.where()))
        t = self.parent.builder.graph.tensors[tensor]
        inner = self.builder.unique(name)
        self.builder.graph.tensors[inner] = Tensor(inner, t.dtype, t.shape, etype=t.etype, kind=t.kind)
        self.builder.graph.operations.append(
            Operation("external", {}, {"output": inner}, {"shape": [1 if d is None else d for d in t.shape or ()]},
                      dtype=t.dtype, location=self.loc(f"outer tensor '{name}'")))
        self.builder.graph.inputs.append(inner)
        self.captured.append(tensor)
        self.captured_inner.append(inner)
        value = Value(tensor=inner, etype=outer.etype, shape=outer.shape, kind=outer.kind)
        self.values[name] = value
        self.run_time_shaped([], [value])
        return value

    def subgraph(self, proto: Any, attr: str, hints: list[Value | None],
                 input_shapes: dict[str, Any] | None = None) -> OnnxReader:
        """Read graph attribute ``attr`` of the node being read as a body; the reader it used
        (its graph, its :attr:`captured` outer tensors) is returned, the graph not yet filed.
        ``input_shapes``: extents of body inputs the operator fixes (FlexAttention's scores),
        in place of the body's open ones, so what the body computes from them folds at load."""
        if self.depth + 1 > MAX_SUBGRAPH_DEPTH:
            raise self.error(f"subgraphs nest more than {MAX_SUBGRAPH_DEPTH} deep")
        child = OnnxReader(self.proto, self.file, input_shapes, parent=self, graph_proto=proto,
                           where=f"{self.where()} {attr}: ")
        child.read_graph(hints)
        child.builder.graph.validate_structure()
        return child

    def file_subgraph(self, child: OnnxReader, attr: str) -> str:
        """Put ``child``'s graph into this graph's ``subgraphs`` under a fresh name; the name."""
        table = self.builder.graph.subgraphs
        base = f"{self.node.name or self.node.op_type.lower() + str(self.index)}_{attr}"
        name, k = base, 0
        while name in table:
            k += 1
            name = f"{base}_{k}"
        child.builder.graph.name = name
        table[name] = child.builder.graph
        return name

    def check_opset(self) -> None:
        """The default domain's opset must be one the ONNX operator docs define: between 1 and
        the newest the installed ``onnx`` package knows (an operator's meaning is looked up there)."""
        onnx, _, _ = _onnx()
        newest = onnx.defs.onnx_opset_version()
        declared = [int(i.version) for i in self.proto.opset_import if i.domain in ("", "ai.onnx")]
        if not declared and self.proto.ir_version >= 3 and (
                not self.proto.opset_import or any(n.domain in ("", "ai.onnx") for n in self.proto.graph.node)):
            # (a model of another domain's operators only, ai.onnx.ml say, needs no default opset)
            raise NNEFXError("the model imports no opset of the default domain ('' / 'ai.onnx')",
                             self.loc("opset_import"))
        for version in declared:
            if not 1 <= version <= newest:
                raise NNEFXError(f"opset {version} of the default domain is not one this onnx package knows "
                                 f"(1 to {newest})", self.loc("opset_import"))
        known = _domain_versions()
        for imp in self.proto.opset_import:
            if imp.domain in ("", "ai.onnx") or imp.domain not in known:
                continue  # an unknown domain is refused at the first node that uses it
            if not 1 <= int(imp.version) <= known[imp.domain]:
                raise NNEFXError(f"opset {imp.version} of domain '{imp.domain}' is not one this onnx package "
                                 f"knows (1 to {known[imp.domain]})", self.loc("opset_import"))

    def inferred_shapes(self) -> dict[str, tuple]:
        """Static shapes from ONNX's own shape inference (a pure function of the protobuf).

        They stand in where a registry shape rule cannot tell a result's shape, as declared
        port dims do for IR files (but only until a computed shape disagrees with them).
        """
        onnx, _, _ = _onnx()
        proto = _without_weights(self.proto)
        if self.input_shapes:
            for vi in proto.graph.input:
                if vi.name in self.input_shapes:
                    dims = vi.type.tensor_type.shape.dim
                    for d, v in zip(dims, self.input_shapes[vi.name], strict=False):
                        d.Clear()
                        d.dim_value = int(v)
        try:
            inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        except Exception:  # noqa: BLE001 - inference is only a fallback; mapping errors are reported later
            return {}
        self._body_types(inferred.graph, 0)
        shapes: dict[str, tuple] = {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                continue
            if tt.elem_type in _ELEM:
                self.declared_etypes[vi.name] = _ELEM[tt.elem_type]
                self.inferred_etypes[vi.name] = _ELEM[tt.elem_type]
            if not tt.HasField("shape"):
                continue
            dims = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tt.shape.dim]
            self.inferred_ranks[vi.name] = len(dims)
            if all(d is not None for d in dims):
                shapes[vi.name] = tuple(dims)
        return shapes

    def _body_types(self, graph: Any, depth: int) -> None:
        """Element types and ranks ONNX's inference gives the values inside bodies (graph
        attributes, nested at most :data:`MAX_SUBGRAPH_DEPTH`), for nodes of a body deferred
        to run time; a name two bodies type differently is left out."""
        if depth > MAX_SUBGRAPH_DEPTH:
            return
        for node in graph.node:
            for a in node.attribute:
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    for vi in list(g.value_info) + list(g.output):
                        if not vi.type.HasField("tensor_type"):
                            continue
                        tt = vi.type.tensor_type
                        if tt.elem_type in _ELEM:
                            _agree(self.body_etypes, vi.name, _ELEM[tt.elem_type])
                        if tt.HasField("shape"):
                            _agree(self.body_ranks, vi.name, len(tt.shape.dim))
                    self._body_types(g, depth + 1)

    def fill_shape(self, name: str, value: Value) -> Value:
        declared = self.inferred.get(name)
        if declared is None or value.unsupported:
            return value
        shape = value.shape
        if shape is None and value.tensor is not None:
            shape = self.builder.graph.tensors[value.tensor].shape
        if shape is not None and all(d is not None for d in shape):
            if tuple(shape) != declared:
                # ONNX's inference and onnxruntime differ in places (e.g. ceil-mode pooling,
                # where nnefx follows onnxruntime): from here on its shapes are not trusted
                self.inferred = {}
            return value
        value.shape = declared
        if value.tensor is not None:
            self.builder.graph.tensors[value.tensor].shape = declared
        return value

    def fill_etype(self, name: str, value: Value, ins: list[Value | None]) -> Value:
        """``value`` in the element type ONNX declares for output ``name`` of the node just read.

        The registry's element-type rules give each result its type as the node is read; the
        file's declared type (ONNX type inference, a pure function of the operator schemas)
        is the arbiter.  Where they differ the node's own result is rounded (wrapped) to the
        declared type when stored, a constant is cast to it while loading, and a tensor the
        node passes through unchanged gets an exact cast.
        """
        declared = self.declared_etypes.get(name)
        if declared is None or value.unsupported or value.etype == declared or value.sym is not None:
            return value
        if nnef_dtype(declared) != nnef_dtype(value.etype):
            raise self.error(f"output '{name}' is read as {value.etype} data, but the model declares {declared}")
        if value.is_const:
            arr = cast(np.asarray(value.const), etypes.numpy_dtype(concrete(declared) or "bool"))
            return Value(const=arr, etype=declared, shape=tuple(arr.shape), label=value.label)
        if value.tensor is None:
            return value
        produced = {n for op in self.builder.graph.operations[self._ops_before:] for n in op.output_names()}
        passed = {v.tensor for v in ins if v is not None}
        if value.tensor in produced and value.tensor not in passed:
            self.builder.graph.tensors[value.tensor].etype = tensor_etype(declared)
            value.etype = declared
            return value
        ctx = self.ctx([value])
        out = ctx.emit1("onnx_cast", {"input": value.tensor}, {"to": concrete(declared) or "bool"},
                        dtype=nnef_dtype(declared))
        return ctx.result(out)

    def _initialized_input(self, vi: Any, value: Value) -> None:
        """An input that an initializer of the same name gives (ONNX IR: its default value, read
        here as a constant): the initializer must be of the type the input declares."""
        kind, tt = _value_kind(vi.type)
        if kind != "tensor":
            return  # no tensor type declared (IR version 3 files often leave it out): nothing to hold against
        where = self.loc(f"{self._prefix}input '{vi.name}'")
        if tt.elem_type and _ELEM.get(tt.elem_type) != value.etype:
            raise NNEFXError(f"the initializer of the same name is {value.etype}, the input declares "
                             f"{_ELEM.get(tt.elem_type) or _NAMES.get(tt.elem_type, tt.elem_type)}", where)
        if tt.HasField("shape"):
            declared = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
            shape = list(value.shape or ())
            if len(declared) != len(shape) or any(d is not None and d != e for d, e in zip(declared, shape,
                                                                                          strict=True)):
                raise NNEFXError(f"the initializer of the same name has shape {shape}, the input declares "
                                 f"{['?' if d is None else d for d in declared]}", where)

    def external(self, vi: Any, hint: Value | None = None) -> None:
        where = f"{self._prefix}input '{vi.name}'"
        kind, tt = _value_kind(vi.type)
        if kind is None and hint is not None and vi.type.WhichOneof("value") is None:
            self._external_like(vi.name, hint, where)  # a body input without a type: the value it gets
            return
        if kind is None:
            raise NNEFXError("only tensor, sequence and optional inputs are supported", self.loc(where))
        dims: list[int | None] = []
        if tt.HasField("shape"):
            for d in tt.shape.dim:
                if d.HasField("dim_value") and d.dim_value < 0:
                    raise NNEFXError(f"declares the extent {d.dim_value}: an extent is a non-negative number "
                                     "(ONNX IR: dim_value)", self.loc(where))
                dims.append(int(d.dim_value) if d.HasField("dim_value") else None)
        elif kind == "tensor" and self.parent is not None:
            # a body input of unknown rank: the rank of the value it is given, extents left open
            if hint is None or hint.shape is None:
                return self._external_like(vi.name, hint or Value(etype=_etype_code(tt.elem_type, self.loc(where))),
                                           where, keep_shape=False)
            dims = [None] * len(hint.shape)
        if vi.name in self.input_shapes:
            given = tuple(int(d) for d in self.input_shapes.pop(vi.name))
            if len(given) != len(dims) or any(d is not None and d != e for d, e in zip(dims, given, strict=True)):
                raise NNEFXError(f"given shape {list(given)} does not fit the declared shape "
                                 f"{['?' if d is None else d for d in dims]}", self.loc(where))
            dims = list(given)
        # Unknown dims (a dim_param such as torch's dynamic batch, or none at all) stay None,
        # as IR's dynamic dims do: check/inspect show them as '?', a Session binds them from
        # the arrays it is given, and a mapping that needs them static says so at its node.
        etype = _etype_code(tt.elem_type, self.loc(where))
        dtype = nnef_dtype(etype)
        name = vi.name
        if kind != "tensor":  # the shape is the elements' (None: not even the rank declared)
            shape = tuple(dims) if tt.HasField("shape") else None
            self.builder.graph.tensors[name] = Tensor(name, dtype, shape, etype=etype, kind=kind)
            self.builder.graph.operations.append(
                Operation("external", {}, {"output": name}, {"shape": []}, dtype=dtype, location=self.loc(where)))
            self.builder.graph.inputs.append(name)
            self.values[name] = Value(tensor=name, etype=etype, shape=shape, kind=kind)
            return
        self.builder.graph.tensors[name] = Tensor(name, dtype, tuple(dims), etype=tensor_etype(etype))
        self.builder.graph.operations.append(
            Operation("external", {}, {"output": name}, {"shape": [1 if d is None else d for d in dims]},
                      dtype=dtype, location=self.loc(where)))  # NNEF's declared extents: 1 where unknown, as IR
        self.builder.graph.inputs.append(name)
        self.values[name] = Value(tensor=name, etype=etype, shape=tuple(dims))

    def _external_like(self, name: str, hint: Value, where: str, keep_shape: bool = True) -> None:
        dtype = nnef_dtype(hint.etype)
        shape = hint.shape if keep_shape and hint.shape is not None else None
        if shape is not None:
            shape = tuple([None] * len(shape))  # the rank only: a carried value may change its extents
        self.builder.graph.tensors[name] = Tensor(name, dtype, shape, etype=hint.etype, kind=hint.kind)
        self.builder.graph.operations.append(
            Operation("external", {}, {"output": name}, {"shape": [] if hint.kind != "tensor" else
                                                                  [1] * len(shape or ())}, dtype=dtype,
                      location=self.loc(where)))
        self.builder.graph.inputs.append(name)
        self.values[name] = Value(tensor=name, etype=hint.etype, shape=shape, kind=hint.kind)

    def outputs(self, g: Any) -> None:
        graph = self.builder.graph
        for vo in g.output:
            loc = self.loc(f"{self._prefix}output '{vo.name}'")
            value = self.lookup(vo.name)
            if value is None:
                raise NNEFXError("the graph output is not computed by any node", loc)
            name = self.builder.materialise(value, vo.name, loc)
            if name != vo.name or name in graph.outputs or name in graph.inputs:
                t = graph.tensors[name]
                if vo.name in graph.tensors and (name != vo.name or name in graph.inputs or name in graph.outputs):
                    # also a graph input passed straight out (or an output listed twice): one tensor
                    # cannot be both in the data model (nor in NNEF), so the output is a copy
                    # under a name of its own
                    new = self.builder.unique(vo.name)
                else:
                    new = vo.name
                graph.tensors[new] = Tensor(new, t.dtype, t.shape, etype=t.etype, kind=t.kind)
                if t.kind == "tensor":
                    graph.operations.append(Operation("copy", {"x": name}, {"y": new}, {}, dtype=t.dtype,
                                                      location=loc))
                else:
                    graph.operations.append(Operation("onnx_identity", {"input": name}, {"output": new}, {},
                                                      location=loc))
                name = new
            graph.outputs.append(name)

    def deferred(self, fn: Any, attrs: dict[str, Any], ins: list[Value | None], exc: NNEFXError,
                 checkpoint: tuple, shape_read: set[int] | frozenset[int] = frozenset()) -> list[Value] | None:
        """The node as a deferred operation when it failed for want of what a run knows: the
        value of an input computed at run time (:class:`ValueNeeded`), or the extents of an
        input only a run gives (:meth:`run_time_shaped`) — one whose shape the node's reader
        read (``shape_read``: ids of such inputs; a refusal that never looked at them, an
        unsupported attribute say, stays a refusal at load); None when it failed for another
        reason."""
        waiting = [k for k, v in enumerate(ins) if v is not None and v.kind == "tensor" and v.tensor in self.pending
                   and id(v) in shape_read and self.unknown_extents(v)]
        value = None
        if isinstance(exc, ValueNeeded):
            value = next((k for k, v in enumerate(ins) if v is not None and not v.unsupported and (
                v is exc.value or (v.tensor is not None and v.tensor == exc.tensor))), None)
        if value is None and not waiting:
            return None
        self.builder.restore(checkpoint)
        outs = defer_node(self, fn, attrs, ins, [] if value is None else [value], waiting)
        self.pending.update(v.tensor for v in outs if v.tensor is not None)
        return outs

    # --- helpers for handlers ------------------------------------------------------------------
    def where(self) -> str:
        return f"{self._prefix}node {self.index} '{self.node.name}' ({self.node.op_type})"

    def ctx(self, values: list[Value]) -> NodeContext:
        """A context for the node being read, to emit registry operations with."""
        node = self.node
        return NodeContext(self.builder, node.op_type, node.name or f"{node.op_type}_{self.index}", {}, values,
                           None, self.loc(self.where()), where=self.where())

    def apply(self, kind: str, attrs: dict[str, Any], values: list[Value], n_out: int = 1,
              version: str = "opset8", out_dims: list | None = None) -> list[Value]:
        """Read the node as numpy-style operator ``kind`` (folded when every input is known)."""
        node = self.node
        return apply_operator(self.builder, node.name or f"{node.op_type}_{self.index}", self.loc(self.where()),
                              self.where(), kind, attrs, values, version=version, n_out=n_out, out_dims=out_dims)[0]

    def apply1(self, kind: str, attrs: dict[str, Any], values: list[Value], **kw: Any) -> Value:
        return self.apply(kind, attrs, values, **kw)[0]

    def etype_code(self, code: int) -> str:
        """The element type of ONNX ``TensorProto.DataType`` ``code``."""
        return _etype_code(code, self.loc(self.where()))

    def tensor_array(self, t: Any) -> np.ndarray:
        """A TensorProto's data (attributes: ``Constant.value``, ``ConstantOfShape.value``)."""
        return _tensor_array(t, self.file)

    def error(self, message: str) -> NNEFXError:
        return NNEFXError(message, self.loc(self.where()))

    def value_kind(self, type_proto: Any) -> tuple[str | None, Any]:
        """What a ``TypeProto`` (an attribute's, e.g. ``Optional.type``) holds; see :func:`_value_kind`."""
        return _value_kind(type_proto)


class _WatchedValue(Value):
    """A :class:`Value` whose ``shape`` records being read (see :class:`_ShapeWatch`)."""

    @property  # type: ignore[override]
    def shape(self) -> tuple | None:
        self.__dict__["_shape_read"] = True
        return self.__dict__.get("shape")

    @shape.setter
    def shape(self, value: tuple | None) -> None:
        self.__dict__["shape"] = value


class _ShapeWatch:
    """While a node is read, which of ``values`` (inputs whose extents only a run gives) its
    reader reads the shape of: their class is :class:`_WatchedValue` until :meth:`end`, which
    restores it and leaves the ids of those read in :attr:`read`."""

    def __init__(self, values: list[Value]):
        self.values = values
        self.read: set[int] = set()
        for v in values:
            v.__class__ = _WatchedValue

    def end(self) -> None:
        for v in self.values:
            v.__class__ = Value
            if v.__dict__.pop("_shape_read", False):
                self.read.add(id(v))
        self.values = []


def _agree(table: dict[str, Any], name: str, value: Any) -> None:
    """Record ``value`` for ``name`` unless another was recorded: then None (not known)."""
    if name not in table:
        table[name] = value
    elif table[name] != value:
        table[name] = None
_DOMAIN_VERSIONS: dict[str, int] = {}


def _domain_versions() -> dict[str, int]:
    """The newest opset version of each non-default domain the installed ``onnx`` defines
    (``ai.onnx.ml``, ``ai.onnx.preview.training``, ``ai.onnx.preview``), from its schemas."""
    if not _DOMAIN_VERSIONS:
        onnx, _, _ = _onnx()
        for schema in onnx.defs.get_all_schemas_with_history():
            if schema.domain not in ("", "ai.onnx"):
                _DOMAIN_VERSIONS[schema.domain] = max(_DOMAIN_VERSIONS.get(schema.domain, 1), schema.since_version)
    return _DOMAIN_VERSIONS


def _value_kind(t: Any) -> tuple[str | None, Any]:
    """What an ONNX ``TypeProto`` holds (:data:`nnefx.graph.KINDS`) and the tensor type of its
    elements; (None, None) for what nnefx does not carry (maps, sparse tensors, nested
    sequences)."""
    which = t.WhichOneof("value")
    if which == "tensor_type":
        return "tensor", t.tensor_type
    if which == "sequence_type":
        inner = t.sequence_type.elem_type
        return ("sequence", inner.tensor_type) if inner.WhichOneof("value") == "tensor_type" else (None, None)
    if which == "optional_type":
        inner = t.optional_type.elem_type
        kind, tt = _value_kind(inner)
        if kind == "tensor":
            return "optional", tt
        if kind == "sequence":
            return "optional_sequence", tt
    return None, None


#: Initializers larger than this (bytes of data) reach shape inference as typed inputs only.
INFERENCE_INITIALIZER_BYTES = 4096


def _without_weights(proto: Any) -> Any:
    """A copy of the model for ONNX's shape inference in which large initializers are graph
    inputs of their type and shape: inference serialises the whole model (twice), which for a
    model of 100 MB of weights cost more time and memory than everything else in loading.
    Small initializers (the shape vectors inference propagates) are kept with their data."""
    copy = type(proto)()  # what inference reads: the IR version, opsets, functions and the graph
    copy.ir_version = proto.ir_version
    copy.opset_import.extend(proto.opset_import)
    copy.functions.extend(proto.functions)
    src, dst = proto.graph, copy.graph
    dst.name = src.name
    dst.node.extend(src.node)
    dst.input.extend(src.input)
    dst.output.extend(src.output)
    dst.value_info.extend(src.value_info)
    dst.sparse_initializer.extend(src.sparse_initializer)
    inputs = {vi.name for vi in src.input}
    for t in src.initializer:
        n = 1
        for d in t.dims:
            n *= max(int(d), 0)
        if t.data_location != 1 and n * 8 <= INFERENCE_INITIALIZER_BYTES:
            dst.initializer.append(t)
        elif t.name not in inputs:
            vi = dst.input.add()
            vi.name = t.name
            vi.type.tensor_type.elem_type = t.data_type
            vi.type.tensor_type.shape.SetInParent()
            for d in t.dims:
                vi.type.tensor_type.shape.dim.add().dim_value = int(d)
    return copy


def _etype(arr: np.ndarray) -> str:
    return etype_of_array(arr)


#: ``TensorProto.DataType`` codes -> element types (14/15 COMPLEX64/128 are refused).
_ELEM = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 8: "string", 9: "boolean", 10: "f16", 11: "f64",
         12: "u32", 13: "u64", 16: "bf16", 17: "f8e4m3fn", 18: "f8e4m3fnuz", 19: "f8e5m2", 20: "f8e5m2fnuz",
         21: "u4", 22: "i4", 23: "f4e2m1", 24: "f8e8m0", 25: "u2", 26: "i2"}
_NAMES = {14: "complex64", 15: "complex128"}


def _etype_code(code: int, loc: Location) -> str:
    if code not in _ELEM:
        name = _NAMES.get(code)
        raise NNEFXError(f"unsupported ONNX element type {code}{f' ({name})' if name else ''}", loc)
    return _ELEM[code]


def _check_attribute_types(node: Any, opset: int, loc: Location) -> None:
    """Each attribute the operator's schema declares has the declared type (ONNX operator docs;
    an ``axis`` given as a float or a ``perm`` as a string is refused, not coerced)."""
    from onnx import AttributeProto, defs

    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # noqa: BLE001 - no schema: the operator's reader decides
        return
    for a in node.attribute:
        declared = schema.attributes.get(a.name)
        if declared is None:
            continue
        want = int(declared.type)
        if a.type != want and not (a.type == AttributeProto.UNDEFINED and a.ref_attr_name):
            names = AttributeProto.AttributeType.Name
            raise NNEFXError(f"attribute '{a.name}' must be of type {names(want)}, not {names(a.type)}", loc)


def _check_string_inputs(node: Any, opset: int, ins: list, loc: Location) -> None:
    """A string tensor reaches only an input whose schema type admits strings (ONNX operator
    docs' type constraints): a model that hands text to ``Relu`` is refused here, at its node,
    instead of failing inside a kernel."""
    if not any(v is not None and v.etype == "string" for v in ins):
        return
    from onnx import defs

    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # noqa: BLE001 - no schema: the operator's reader decides
        return
    if not schema.inputs:
        return
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for k, v in enumerate(ins):
        if v is None or v.etype != "string":
            continue
        formal = schema.inputs[min(k, len(schema.inputs) - 1)]  # the last one may be variadic
        types = allowed.get(formal.type_str, {formal.type_str})
        if not any("string" in t for t in types):
            raise NNEFXError(f"input {k} ('{node.input[k]}') is a string tensor, which {node.op_type} does not take "
                             f"(it takes {', '.join(sorted(types))})", loc)


def _attr_value(helper: Any, a: Any) -> Any:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "replace") for x in v]
    return v


#: ONNX element types whose raw_data (and external data) is a plain little-endian array
#: (ONNX IR: TensorProto.raw_data), read as a view instead of decoded element by element.
_RAW = {code: np.dtype(spelling) for code, spelling in
        {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 10: "<f2", 11: "<f8", 12: "<u4",
         13: "<u8"}.items()}


def _native(arr: np.ndarray) -> np.ndarray:
    """``arr`` in the machine's byte order (a view on little-endian machines, else a copy)."""
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _tensor_array(t: Any, model_file: str) -> np.ndarray:
    """A TensorProto's data; external data is read from inside the model's folder only."""
    _, _, numpy_helper = _onnx()
    loc = Location(model_file, None, None, f"initializer '{t.name}'")
    _etype_code(int(t.data_type), loc)  # complex and unknown codes: refused by name
    n = 1
    for d in t.dims:
        if d < 0:
            raise NNEFXError(f"negative dimension in {list(t.dims)}", loc)
        n *= int(d)
    if n > (1 << 31):
        raise NNEFXError(f"tensor of shape {list(t.dims)} is too large", loc)
    if t.data_type == 8:  # STRING: string_data items (UTF-8), never raw or external (ONNX IR "Tensor")
        return _string_array(t, n, loc)
    if t.data_location == 1:  # EXTERNAL
        info = {e.key: e.value for e in t.external_data}
        rel = info.get("location", "")
        base = os.path.dirname(os.path.abspath(model_file))
        path = os.path.realpath(os.path.join(base, rel))
        if not rel or os.path.isabs(rel) or os.path.commonpath([path, os.path.realpath(base)]) != \
                os.path.realpath(base):
            raise NNEFXError(f"external data path '{rel}' is outside the model's folder", loc)
        if not os.path.isfile(path):
            raise NNEFXError(f"external data file '{rel}' does not exist", loc)
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise NNEFXError("external data offset/length must be integers", loc) from None
        size = os.path.getsize(path)
        if offset < 0 or offset > size or (length is not None and (length < 0 or offset + length > size)):
            raise NNEFXError(f"external data range offset={offset} length={length} exceeds the file "
                             f"('{rel}', {size} bytes)", loc)
        raw = _RAW.get(t.data_type)
        if raw is not None:  # mapped copy-on-write, not read: no heap for the weights
            nbytes = n * raw.itemsize
            if (length is not None and length != nbytes) or offset + nbytes > size:
                raise NNEFXError(f"external data range offset={offset} length={length} does not hold the "
                                 f"{nbytes} bytes of a {list(t.dims)} tensor of element type {t.data_type} "
                                 f"('{rel}', {size} bytes)", loc)
            if nbytes == 0:
                return np.zeros(tuple(t.dims), raw.newbyteorder("="))
            arr = np.memmap(path, dtype=raw, mode="c", offset=offset, shape=tuple(int(d) for d in t.dims))
            return _native(arr.view(np.ndarray))
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length if length is not None else size - offset)
        t2 = type(t)()
        t2.CopyFrom(t)
        del t2.external_data[:]
        t2.data_location = 0
        t2.raw_data = data
        t = t2
    elif t.data_type in _RAW and t.HasField("raw_data"):
        raw = _RAW[t.data_type]
        data = t.raw_data  # the one copy: protobuf hands out bytes; the array is a view of them
        if len(data) != n * raw.itemsize:
            raise NNEFXError(f"raw_data holds {len(data)} bytes, but a {list(t.dims)} tensor of element type "
                             f"{t.data_type} needs {n * raw.itemsize}", loc)
        return _native(np.frombuffer(data, raw).reshape(tuple(int(d) for d in t.dims)))
    try:
        arr = numpy_helper.to_array(t)
    except Exception as exc:  # noqa: BLE001 - protobuf/numpy errors on lying tensors
        raise NNEFXError(f"cannot decode tensor data: {exc}", loc) from None
    if arr.dtype == object or arr.dtype.kind not in "biufV":
        raise NNEFXError(f"unsupported tensor data type {arr.dtype}", loc)
    want = etypes.numpy_dtype(concrete(_ELEM[int(t.data_type)]) or "bool")
    if arr.dtype != want:  # numpy_helper's storage differs from ours (never a value change)
        arr = arr.astype(want)
    return arr


def _string_array(t: Any, n: int, loc: Location) -> np.ndarray:
    """A STRING tensor's items as an object array of ``str`` (UTF-8, as ONNX IR requires)."""
    if t.data_location == 1 or t.HasField("raw_data"):
        raise NNEFXError("a string tensor must hold its items in string_data (not raw or external data)", loc)
    if len(t.string_data) != n:
        raise NNEFXError(f"string_data holds {len(t.string_data)} items, but a {list(t.dims)} tensor needs {n}", loc)
    out = np.empty(n, dtype=object)
    for k, item in enumerate(t.string_data):
        try:
            out[k] = item.decode("utf-8")
        except UnicodeDecodeError:
            raise NNEFXError(f"string item {k} is not valid UTF-8", loc) from None
    return out.reshape(tuple(int(d) for d in t.dims))


def _parse(proto: Any, path: str) -> None:
    """Parse the file into ``proto`` straight from a read-only mapping of it: the parser copies
    what it keeps, so no Python ``bytes`` copy of the whole file is ever made."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            proto.ParseFromString(b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            proto.ParseFromString(view)


def read_model(path: str, *, input_shapes: dict[str, Any] | None = None, **options: Any) -> Model:
    """Parse ``path`` and translate it; see :func:`nnefx.formats.onnx.load`."""
    onnx, _, _ = _onnx()
    if options:
        raise NNEFXError(f"unknown ONNX load options: {', '.join(sorted(options))}")
    loc = Location(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise NNEFXError(f"cannot read the model: {exc.strerror}", loc) from None
    if size > MAX_FILE_BYTES:
        raise NNEFXError(f"the file is too large ({size} bytes)", loc)
    proto = onnx.ModelProto()
    try:
        _parse(proto, path)
    except OSError as exc:
        raise NNEFXError(f"cannot read the model: {exc.strerror}", loc) from None
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise NNEFXError(f"not a valid ONNX model (protobuf decoding failed: {exc})", loc) from None
    if not proto.HasField("graph") or (len(proto.graph.node) == 0 and len(proto.graph.output) == 0):
        raise NNEFXError("not a valid ONNX model (no graph)", loc)
    reader = OnnxReader(proto, path, input_shapes)
    model = reader.read()
    if reader.input_shapes:
        inits = {t.name for t in proto.graph.initializer}
        inputs = [i.name for i in proto.graph.input if i.name not in inits]
        raise NNEFXError(f"a shape is given for {', '.join(repr(n) for n in sorted(reader.input_shapes))}, which "
                         f"{'is not an input' if len(reader.input_shapes) == 1 else 'are not inputs'} of the graph "
                         f"(inputs: {', '.join(inputs)})", loc)
    return model


__all__ = ["read_model", "OnnxReader", "const"]
