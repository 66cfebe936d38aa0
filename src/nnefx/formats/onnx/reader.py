"""Translate an ONNX graph onto nnefx registry operations.

Why through the IR importer: OpenVINO's IR opsets were designed to receive ONNX models, so
most ONNX operations have an IR layer with the same semantics (numpy broadcasting, Slice-8
start/stop/step/axes, Gather-8 negative indices, Interpolate-11 coordinate modes, ...).
Each ONNX node is therefore re-expressed as one or more IR layers (with ONNX attributes
renamed) and handed to the IR mapping functions of :mod:`nnefx.formats.ir.opset`, which
already emit exact NNEF / ``ir_*`` operations and fold constant sub-graphs (shape
computations) while loading.  Convolutions and a few others are emitted directly.

Safety: the protobuf is parsed by the ``onnx`` package (no code is run); external-data
files must lie inside the model's folder and their ranges are checked; every constant the
importer creates is bounded by the IR folds' item limit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Model, Operation, Tensor
from ..ir.mapping import GraphBuilder, LayerContext, Value, etype_of_array, find_fold, find_mapping
from ..ir.weights import nnef_dtype
from ..ir.xml import Layer, Port

#: Refuse model files (and external data) beyond this size.
MAX_FILE_BYTES = 4 << 30
#: Most nodes a graph may have.
MAX_NODES = 200_000


@dataclass
class _Node(Layer):
    """An IR layer standing for (part of) an ONNX node; diagnostics name the ONNX node."""

    op_type: str = ""

    def where(self) -> str:
        return f"node {self.id} '{self.name}' ({self.op_type})"


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError:
        raise NNEFXError("reading ONNX models needs the 'onnx' package: pip install nnefx[onnx]") from None
    return onnx, helper, numpy_helper


class OnnxReader:
    def __init__(self, model: Any, file: str, input_shapes: dict[str, Any] | None):
        self.proto = model
        self.file = file
        self.input_shapes = dict(input_shapes or {})
        self.builder = GraphBuilder(model.graph.name or "main", file, None, 11)  # type: ignore[arg-type]
        self.values: dict[str, Value] = {}
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = int(imp.version)
        self.index = 0
        self.node: Any = None

    # --- structure ----------------------------------------------------------------------------
    def loc(self, field: str | None = None) -> Location:
        return Location(self.file, None, None, field)

    def read(self) -> Model:
        from .ops import HANDLERS  # here, not at the top: the handlers import this module

        _, helper, _ = _onnx()
        g = self.proto.graph
        if len(g.node) > MAX_NODES:
            raise NNEFXError(f"the graph has {len(g.node)} nodes (more than {MAX_NODES})", self.loc("graph"))
        self.inferred = self.inferred_shapes()
        for init in g.initializer:
            arr = _tensor_array(init, self.file)
            self.values[init.name] = Value(const=arr, etype=_etype(arr), shape=tuple(arr.shape), label=init.name)
        for vi in g.input:
            if vi.name in self.values:
                continue
            self.external(vi)
        for i, node in enumerate(g.node):
            self.index = i
            self.node = node
            where = f"node {i} '{node.name}' ({node.op_type})"
            if node.domain not in ("", "ai.onnx"):
                raise NNEFXError(f"unsupported operation '{node.op_type}' of domain '{node.domain}'",
                                 self.loc(where))
            fn = HANDLERS.get(node.op_type)
            if fn is None:
                raise NNEFXError(f"unsupported ONNX operation '{node.op_type}'", self.loc(where))
            ins: list[Value | None] = []
            for name in node.input:
                if name == "":
                    ins.append(None)
                elif name not in self.values:
                    raise NNEFXError(f"input '{name}' is not defined before this node", self.loc(where))
                else:
                    ins.append(self.values[name])
            attrs = {a.name: _attr_value(helper, a) for a in node.attribute}
            try:
                outs = fn(self, attrs, ins)
            except NNEFXError as exc:
                if exc.location is None or exc.location.field is None:
                    raise NNEFXError(exc.message, self.loc(where)) from None
                raise
            except KeyError as exc:  # a required attribute the node does not carry
                raise NNEFXError(f"missing attribute {exc}", self.loc(where)) from None
            except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, AttributeError) as exc:
                # attribute values of the wrong kind or length (e.g. pads=[1] on a 2-D pool)
                raise NNEFXError(f"invalid node: {exc}", self.loc(where)) from None
            outs = outs if isinstance(outs, list) else [outs]
            for k, name in enumerate(node.output):
                if name == "":
                    continue
                if k >= len(outs):
                    outs.append(Value(unsupported=f"output {k} of {where} is not supported"))
                self.values[name] = self.fill_shape(name, outs[k])
        self.outputs(g)
        graph = self.builder.graph
        graph.validate_structure()
        return Model(graph, format="onnx", source=self.file,
                     extras={"onnx_opset": self.opset, "onnx_producer": self.proto.producer_name})

    def inferred_shapes(self) -> dict[str, tuple]:
        """Static shapes from ONNX's own shape inference (a pure function of the protobuf).

        They stand in where a registry shape rule cannot tell a result's shape, as declared
        port dims do for IR files (but only until a computed shape disagrees with them).
        """
        onnx, _, _ = _onnx()
        proto = self.proto
        if self.input_shapes:
            proto = type(proto)()
            proto.CopyFrom(self.proto)
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
        shapes: dict[str, tuple] = {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
                continue
            dims = [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]
            if all(d is not None for d in dims):
                shapes[vi.name] = tuple(dims)
        return shapes

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

    def external(self, vi: Any) -> None:
        tt = vi.type.tensor_type
        where = f"input '{vi.name}'"
        if not vi.type.HasField("tensor_type"):
            raise NNEFXError("only tensor inputs are supported", self.loc(where))
        dims: list[int | None] = []
        for d in tt.shape.dim:
            dims.append(int(d.dim_value) if d.HasField("dim_value") else None)
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
        self.builder.graph.tensors[name] = Tensor(name, dtype, tuple(dims))
        self.builder.graph.operations.append(
            Operation("external", {}, {"output": name}, {"shape": [1 if d is None else d for d in dims]},
                      dtype=dtype, location=self.loc(where)))  # NNEF's declared extents: 1 where unknown, as IR
        self.builder.graph.inputs.append(name)
        self.values[name] = Value(tensor=name, etype=etype, shape=tuple(dims))

    def outputs(self, g: Any) -> None:
        graph = self.builder.graph
        for vo in g.output:
            loc = self.loc(f"output '{vo.name}'")
            value = self.values.get(vo.name)
            if value is None:
                raise NNEFXError("the graph output is not computed by any node", loc)
            name = self.builder.materialise(value, vo.name, loc)
            if name != vo.name or name in graph.outputs or name in graph.inputs:
                t = graph.tensors[name]
                if vo.name in graph.tensors and name != vo.name:
                    new = self.builder.unique(vo.name)
                else:
                    new = vo.name
                graph.tensors[new] = Tensor(new, t.dtype, t.shape)
                graph.operations.append(Operation("copy", {"x": name}, {"y": new}, {}, dtype=t.dtype, location=loc))
                name = new
            graph.outputs.append(name)

    # --- helpers for handlers ------------------------------------------------------------------
    def layer(self, ir_type: str, data: dict[str, Any], n_in: int, n_out: int = 1,
              out_dims: list | None = None, version: str = "opset8") -> _Node:
        node = self.node
        return _Node(id=self.index, name=node.name or f"{node.op_type}_{self.index}", type=ir_type, version=version,
                     precision=None, data=dict(data), inputs=[Port(i, None) for i in range(n_in)],
                     outputs=[Port(i, None if out_dims is None else out_dims[i]) for i in range(n_out)],
                     blobs={}, line=None, op_type=node.op_type)  # type: ignore[arg-type]

    def ctx(self, values: list[Value], ir_type: str = "", version: str = "opset8") -> LayerContext:
        lay = self.layer(ir_type or self.node.op_type, {}, len(values), version=version)
        c = LayerContext(self.builder, lay, values, version)
        c.location = self.loc(lay.where())
        return c

    def ir(self, ir_type: str, data: dict[str, Any], values: list[Value], n_out: int = 1,
           version: str = "opset8", out_dims: list | None = None) -> list[Value]:
        """Map the node as IR layer ``ir_type`` (folding it when every input is known)."""
        fn = find_mapping(ir_type, version)
        assert fn is not None, ir_type
        lay = self.layer(ir_type, data, len(values), n_out, out_dims, version)
        c = LayerContext(self.builder, lay, values, version)
        c.location = self.loc(lay.where())
        folder = find_fold(ir_type, version)
        if folder is not None and values and all(v.is_const for v in values):
            try:
                res = folder(c, [v.const for v in values])
            except NNEFXError:
                raise
            except (ValueError, IndexError, TypeError, OverflowError, ZeroDivisionError) as exc:
                raise c.error(f"cannot evaluate constant node: {exc}") from None
            if res is not None:
                outs = res if isinstance(res, list) else [res]
                return [o if isinstance(o, Value) else c.folded(np.asarray(o)) for o in outs]
        res = fn(c)
        return res if isinstance(res, list) else [res]

    def ir1(self, ir_type: str, data: dict[str, Any], values: list[Value], **kw: Any) -> Value:
        return self.ir(ir_type, data, values, **kw)[0]

    def error(self, message: str) -> NNEFXError:
        return NNEFXError(message, self.loc(f"node {self.index} '{self.node.name}' ({self.node.op_type})"))


def const(arr: Any, dtype: Any = None) -> Value:
    a = np.asarray(arr, dtype=dtype)
    return Value(const=a, etype=_etype(a), shape=tuple(a.shape))


def _etype(arr: np.ndarray) -> str:
    return etype_of_array(arr)


_ELEM = {1: "f32", 2: "u8", 3: "i8", 4: "u16", 5: "i16", 6: "i32", 7: "i64", 9: "boolean", 10: "f16", 11: "f64",
         12: "u32", 13: "u64", 16: "bf16"}


def _etype_code(code: int, loc: Location) -> str:
    if code not in _ELEM:
        raise NNEFXError(f"unsupported ONNX element type {code}", loc)
    return _ELEM[code]


def _attr_value(helper: Any, a: Any) -> Any:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", "replace") for x in v]
    return v


def _tensor_array(t: Any, model_file: str) -> np.ndarray:
    """A TensorProto's data; external data is read from inside the model's folder only."""
    _, _, numpy_helper = _onnx()
    loc = Location(model_file, None, None, f"initializer '{t.name}'")
    n = 1
    for d in t.dims:
        if d < 0:
            raise NNEFXError(f"negative dimension in {list(t.dims)}", loc)
        n *= int(d)
    if n > (1 << 31):
        raise NNEFXError(f"tensor of shape {list(t.dims)} is too large", loc)
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
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length if length is not None else size - offset)
        t2 = type(t)()
        t2.CopyFrom(t)
        del t2.external_data[:]
        t2.data_location = 0
        t2.raw_data = data
        t = t2
    try:
        arr = numpy_helper.to_array(t)
    except Exception as exc:  # noqa: BLE001 - protobuf/numpy errors on lying tensors
        raise NNEFXError(f"cannot decode tensor data: {exc}", loc) from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise NNEFXError(f"unsupported tensor data type {arr.dtype}", loc)
    return arr


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
    with open(path, "rb") as f:
        data = f.read()
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
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
