"""Write an nnefx :class:`~nnefx.graph.Graph` as an IR v11 network (``.xml`` + ``.bin``).

Why this exists: today's OpenVINO reads only IR versions 10 and 11 and refuses every legacy
file, and no official tool upgrades them.  Every importer produces the same Graph, so
"upgrade a legacy file" is simply *load + save*, and any NNEF model whose operations have
opset equivalents can be written the same way.

The writer is two layers:

* :class:`IRWriter` (this module) knows the file format: layers with numbered ports
  (inputs first, then outputs, as OpenVINO numbers them), edges, ``Parameter`` / ``Const`` /
  ``Result`` layers, port ``names`` so input and output names survive, and the ``.bin``
  with every constant aligned to 8 bytes.  ``compress_to_fp16=True`` stores float constants
  as f16 behind a ``Convert`` layer, the form ``openvino.save_model`` writes.
* The operations are known by their families (:mod:`nnefx.formats.families`): one function
  per nnefx operation that emits opset layers through :class:`ExportContext`, found through
  :mod:`nnefx.formats.export.registry`; :class:`ExportContext` also spells what the neutral
  lowering (:mod:`nnefx.formats.export.lowering`) asks of IR.  An operation with no exporter, or with
  attributes that have no *exact* opset form, raises an :class:`NNEFXError` naming the
  operation and where it came from — nothing is dropped or approximated.

The output is ours (not hostile input), so plain :mod:`xml.etree` builds it.  Files are
written to temporaries in the target folder and renamed into place only when everything
has been produced, so an error never leaves a half-written model.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Model, Operation
from ..export import context as _export
from ..export.registry import table as writers
from ..export.unroll import lower_control_flow
from .weights import pack_binary_filter

#: nnefx data type -> IR element type of a tensor that names no concrete element type.
ETYPE = {"scalar": "f32", "integer": "i64", "logical": "boolean"}
#: nnefx concrete element type (:mod:`nnefx.etypes`) -> the IR element type that holds it
#: (OpenVINO's ``ov::element::Type`` names); the reader reads each back as the same type.
IR_ETYPES = {"f64": "f64", "f32": "f32", "f16": "f16", "bf16": "bf16", "i64": "i64", "i32": "i32",
             "i16": "i16", "i8": "i8", "u64": "u64", "u32": "u32", "u16": "u16", "u8": "u8", "bool": "boolean"}
#: IR element type -> numpy dtype of its ``.bin`` storage (bf16 through ``ml_dtypes``, on use).
NUMPY: dict[str, Any] = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i64": np.int64,
                         "i32": np.int32, "i16": np.int16, "i8": np.int8, "u64": np.uint64, "u32": np.uint32,
                         "u16": np.uint16, "u8": np.uint8, "boolean": np.bool_}
#: IR element type -> the legacy ``precision`` spelling OpenVINO still writes on ports.
PRECISION = {"f32": "FP32", "f16": "FP16", "f64": "FP64", "bf16": "BF16", "i64": "I64", "i32": "I32",
             "i16": "I16", "i8": "I8", "u64": "U64", "u32": "U32", "u16": "U16", "u8": "U8", "boolean": "BOOL",
             "u1": "BIN"}
#: Layers whose data inputs and output share one element type (OpenVINO validates it): an
#: exporter that feeds them mixed types has a bug, refused before a file OpenVINO rejects.
SAME_TYPE = {"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference",
             "FloorMod", "Mod", "Concat", "MatMul", "Convolution", "GroupConvolution"}


def storage_dtype(etype: str) -> Any:
    """The numpy dtype an IR element type's ``.bin`` bytes are written from."""
    if etype == "bf16":
        from ... import etypes

        return etypes.numpy_dtype("bf16")
    return NUMPY[etype]


def ir_etype(tensor: Any, location: Any = None) -> str:
    """The IR element type of graph tensor ``tensor``: its concrete element type where it has
    one (an f16 network is written with f16 ports), else its data type's default; a located
    error for element types IR v11 as nnefx writes it cannot hold."""
    from ... import etypes

    if tensor.etype is None:
        return ETYPE.get(tensor.dtype, "f32")
    found = IR_ETYPES.get(tensor.etype)
    if found is None:
        raise NNEFXError(f"cannot write tensor '{tensor.name}' as IR: its element type {etypes.of(tensor)} has no "
                         f"IR element type nnefx writes (it writes {', '.join(IR_ETYPES)}); write ONNX, or cast it "
                         "first", location)
    return found

Ref = tuple  # (layer id, port id)


@dataclass
class _Layer:
    id: int
    name: str
    type: str
    version: str
    attrs: dict[str, str]
    inputs: list[tuple[tuple, str]] = field(default_factory=list)    # (shape, etype) per input port
    outputs: list[tuple[tuple, str]] = field(default_factory=list)   # (shape, etype) per output port
    extra: dict[str, str] = field(default_factory=dict)               # attributes of <layer> itself
    #: elements after <output>: a Loop's <port_map>, <back_edges>, <body>; an If's branches
    children: list[ET.Element] = field(default_factory=list)


def _escape_names(names: list[str]) -> str:
    """A ``names``/``output_names`` list: comma-separated, commas inside a name escaped."""
    return ",".join(n.replace("\\", "\\\\").replace(",", "\\,") for n in names)


def _fmt(value: Any) -> str:
    """An attribute value the way OpenVINO spells it (lists comma-separated, bools lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_fmt(v) for v in value)
    if isinstance(value, float):
        return repr(float(np.float32(value))) if np.isfinite(value) else ("inf" if value > 0 else "-inf")
    return str(value)


class IRWriter:
    """Layers, edges and the weight blob of one IR v11 network under construction."""

    ALIGN = 8

    def __init__(self, name: str, *, compress_to_fp16: bool = False, blob: bytearray | None = None):
        self.name = name
        self.compress_to_fp16 = compress_to_fp16
        self.layers: list[_Layer] = []
        self.edges: list[tuple[int, int, int, int]] = []
        self.blob = bytearray() if blob is None else blob   # a body's constants go to its network's .bin
        #: layer id of each graph input's Parameter, of each graph output's Result (in order)
        self.parameter_ids: dict[str, int] = {}
        self.result_ids: list[int] = []
        self.meta: dict[Ref, tuple[tuple, str]] = {}
        self.port_names: dict[Ref, list[str]] = {}
        self._layer_names: set[str] = set()
        self._const_cache: dict[tuple, Ref] = {}
        self.rt_decompression: set[int] = set()

    # --- building --------------------------------------------------------------------------
    def _unique_name(self, hint: str) -> str:
        return _export.unique_name(hint or "layer", self._layer_names)

    def shape(self, ref: Ref) -> tuple:
        return self.meta[ref][0]

    def etype(self, ref: Ref) -> str:
        return self.meta[ref][1]

    def add(self, type_: str, inputs: Sequence[Ref], outputs: Sequence[tuple[tuple, str]], *,
            attrs: dict[str, Any] | None = None, version: str = "opset1", name: str = "") -> list[Ref]:
        """Append a layer; ``outputs`` are (shape, element type) per output port."""
        if type_ in SAME_TYPE:
            kinds = {self.meta[src][1] for src in inputs[:2]}
            if len(kinds) > 1:
                raise NNEFXError(f"cannot write a {type_} layer of element types {' and '.join(sorted(kinds))} as IR "
                                 "(OpenVINO requires one type)")
        lid = len(self.layers)
        lay = _Layer(lid, self._unique_name(name or f"{type_}_{lid}"), type_, version,
                     {k: _fmt(v) for k, v in (attrs or {}).items()})
        for port, src in enumerate(inputs):
            lay.inputs.append(self.meta[src])
            self.edges.append((src[0], src[1], lid, port))
        refs = []
        for k, (shape, et) in enumerate(outputs):
            ref = (lid, len(inputs) + k)
            lay.outputs.append((tuple(shape), et))
            self.meta[ref] = (tuple(shape), et)
            refs.append(ref)
        self.layers.append(lay)
        return refs

    def parameter(self, name: str, shape: tuple, etype: str) -> Ref:
        shp = ",".join("?" if d is None else str(int(d)) for d in shape)
        (ref,) = self.add("Parameter", [], [(shape, etype)], attrs={"shape": shp, "element_type": etype},
                          name=name)
        return ref

    def const(self, array: Any, etype: str, name: str = "") -> Ref:
        """A Const layer holding ``array`` (shared when the same bytes are asked for again)."""
        arr = np.array(np.asarray(array), dtype=storage_dtype(etype), order="C")  # (ascontiguousarray makes 0-d 1-d)
        compress = self.compress_to_fp16 and etype == "f32" and _export.fp16_storable(arr)
        store_type = "f16" if compress else etype
        stored = arr.astype(storage_dtype(store_type))
        data = (stored.view(np.uint16) if store_type == "bf16" else stored).astype(
            stored.dtype.newbyteorder("<") if store_type != "bf16" else "<u2").tobytes()
        key = (hashlib.sha256(data).digest(), len(data), store_type, arr.shape, etype)  # not the bytes twice
        if key in self._const_cache:
            return self._const_cache[key]
        ref = self._stored_const(data, arr.shape, store_type, name)
        if compress:
            (ref,) = self.add("Convert", [ref], [(arr.shape, "f32")], attrs={"destination_type": "f32"},
                              version="opset1", name=(name or "const") + "/decompress")
            self.rt_decompression.add(ref[0])
        self._const_cache[key] = ref
        return ref

    def const_bits(self, bits: Any, name: str = "") -> Ref:
        """A ``u1`` Const holding a BinaryConvolution filter ``bits`` (true/false per element),
        packed 8 to a byte with element ``i`` in bit ``i % 8`` of byte ``i // 8``: least
        significant bit first, as the Model Optimizer packs these filters and OpenVINO's CPU
        and GPU plugins read them (``weights.unpack_binary_filter``, which our reader uses).
        OpenVINO's ``u1`` Constant API and reference implementation number the bits the other
        way, so ``read_model(...)``'s Constant shows each byte's bits reversed."""
        arr = np.asarray(bits, dtype=bool)
        data = pack_binary_filter(arr)
        key = (hashlib.sha256(data).digest(), len(data), "u1", arr.shape, "u1")
        if key not in self._const_cache:
            self._const_cache[key] = self._stored_const(data, arr.shape, "u1", name)
        return self._const_cache[key]

    def _stored_const(self, data: bytes, shape: tuple, etype: str, name: str) -> Ref:
        """A Const layer whose bytes are appended to the blob at the next aligned offset."""
        while len(self.blob) % self.ALIGN:
            self.blob.append(0)
        offset = len(self.blob)
        self.blob.extend(data)
        (ref,) = self.add("Const", [], [(shape, etype)], name=name or "const",
                          attrs={"element_type": etype, "shape": ",".join(str(d) for d in shape),
                                 "offset": offset, "size": len(data)})
        return ref

    def result(self, src: Ref, name: str) -> None:
        lid = len(self.layers)
        self.add("Result", [src], [], name=f"{name}/sink_port_0")
        self.layers[lid].extra["output_names"] = _escape_names([name])
        self.result_ids.append(lid)

    def name_port(self, ref: Ref, name: str) -> None:
        names = self.port_names.setdefault(ref, [])
        if name not in names:
            names.append(name)

    # --- serialising -----------------------------------------------------------------------
    @staticmethod
    def _port(parent: ET.Element, pid: int, shape: tuple, etype: str, names: list[str] | None) -> None:
        attrs = {"id": str(pid), "precision": PRECISION.get(etype, "FP32")}
        if names:
            attrs["names"] = _escape_names(names)
        port = ET.SubElement(parent, "port", attrs)
        for d in shape:
            ET.SubElement(port, "dim").text = "-1" if d is None else str(int(d))

    def xml_bytes(self) -> bytes:
        net = ET.Element("net", {"name": self.name, "version": "11"})
        self.fill(net)
        ET.indent(net)
        return b'<?xml version="1.0"?>\n' + ET.tostring(net, encoding="utf-8") + b"\n"

    def fill(self, net: ET.Element) -> None:
        """``<layers>`` and ``<edges>`` into ``net`` (the network, or a Loop's ``<body>``)."""
        layers = ET.SubElement(net, "layers")
        for lay in self.layers:
            el = ET.SubElement(layers, "layer", {"id": str(lay.id), "name": lay.name, "type": lay.type,
                                                 "version": lay.version, **lay.extra})
            if lay.attrs:
                ET.SubElement(el, "data", lay.attrs)
            if lay.id in self.rt_decompression:
                # marks an f16 -> f32 weight Convert as decompression, as openvino.save_model does
                rt = ET.SubElement(el, "rt_info")
                ET.SubElement(rt, "attribute", {"name": "decompression", "version": "0"})
            if lay.inputs:
                ins = ET.SubElement(el, "input")
                for k, (shape, et) in enumerate(lay.inputs):
                    self._port(ins, k, shape, et, None)
            if lay.outputs:
                outs = ET.SubElement(el, "output")
                for k, (shape, et) in enumerate(lay.outputs):
                    pid = len(lay.inputs) + k
                    self._port(outs, pid, shape, et, self.port_names.get((lay.id, pid)))
            el.extend(lay.children)
        edges = ET.SubElement(net, "edges")
        for a, b, c, d in self.edges:
            ET.SubElement(edges, "edge", {"from-layer": str(a), "from-port": str(b), "to-layer": str(c),
                                          "to-port": str(d)})


class ExportContext(_export.ExportContextBase[Ref]):
    """What an operation exporter sees: graph tensors as IR port refs, and a layer factory.

    Tensors are materialised on demand: ``variable``/``constant`` data becomes a Const layer
    only when some exporter asks for the tensor as a port (:meth:`ref`); exporters that can use
    the data directly (a grouped filter reshaped, a bias flattened) ask :meth:`data` first.
    The bookkeeping (``refs``, ``consts``, ``op``), :meth:`fail`, :meth:`data` and :meth:`bind`
    are those of every writer (:class:`~nnefx.formats.export.context.ExportContextBase`).
    """

    FORMAT = "IR v11"

    def __init__(self, graph: Graph, writer: IRWriter):
        super().__init__(graph)
        self.w = writer

    # --- tensors ------------------------------------------------------------------------------
    def shape(self, value: Any) -> tuple:
        """Static shape of a tensor name, literal, or port ref."""
        if isinstance(value, tuple) and len(value) == 2 and value in self.w.meta:
            shape = self.w.shape(value)
        elif isinstance(value, str):
            t = self.graph.tensors[value]
            if t.shape is None:
                raise self.fail(f"tensor '{value}' has no known shape")
            shape = tuple(t.shape)
        else:
            return ()
        if any(d is None for d in shape):
            raise self.fail(f"shape {shape} is not static; fix the input shapes first")
        return tuple(int(d) for d in shape)

    def etype(self, value: Any, default: str = "f32") -> str:
        if isinstance(value, str):
            if value in self.refs:
                return self.w.etype(self.refs[value])
            return ir_etype(self.graph.tensors[value], self.op.location if self.op is not None else None)
        if isinstance(value, tuple) and value in self.w.meta:
            return self.w.etype(value)
        if isinstance(value, bool):
            return "boolean"
        return default

    def ref(self, value: Any, etype: str | None = None) -> Ref:
        """The port holding tensor ``value`` (a name), or a Const for a literal."""
        if isinstance(value, tuple):
            return value
        if isinstance(value, str):
            if value not in self.refs:
                if value not in self.consts:
                    raise self.fail(f"tensor '{value}' is not available")
                arr = self.consts[value]
                ref = self.w.const(arr, ir_etype(self.graph.tensors[value], self.op.location if self.op is not None else None), name=value)
                self.refs[value] = ref
            return self.refs[value]
        if isinstance(value, (bool, int, float, np.ndarray, list)):
            et = etype or ("boolean" if isinstance(value, bool) else "f32")
            return self.w.const(np.asarray(value), et)
        raise self.fail(f"unsupported input value {value!r}")

    def const(self, array: Any, etype: str) -> Ref:
        return self.w.const(array, etype)

    def ints(self, values: Sequence[int]) -> Ref:
        """An i64 1-D Const (axes, shapes, pads...)."""
        return self.w.const(np.asarray(list(values), dtype=np.int64).reshape(-1), "i64")

    def layer(self, type_: str, inputs: Sequence[Any], shape: tuple | None = None, *, etype: str | None = None,
              attrs: dict[str, Any] | None = None, version: str = "opset1",
              outputs: Sequence[tuple[tuple, str]] | None = None) -> Any:
        """Emit one layer; returns its only output ref (or the list when ``outputs`` is given)."""
        refs = [self.ref(v) for v in inputs]
        if outputs is None:
            et = etype or (self.w.etype(refs[0]) if refs else "f32")
            outs = [(tuple(shape or ()), et)]
        else:
            outs = list(outputs)
        hint = self.op.output_names()[0] if self.op is not None and self.op.output_names() else type_
        got = self.w.add(type_, refs, outs, attrs=attrs, version=version, name=f"{hint}/{type_}")
        return got if outputs is not None else got[0]


    # --- spelling (what :mod:`nnefx.formats.export.lowering` asks of a format) --------------------
    LOGICAL = "boolean"

    def dims(self, value: Any) -> tuple:
        """Dimensions of a value: always static in IR (:meth:`shape`)."""
        return self.shape(value)

    def type_of(self, value: Any, default: Any = None) -> str:
        return self.etype(value, default or "f32")

    @staticmethod
    def nnef_type(name: str | None) -> str:
        return ETYPE.get(name or "scalar", "f32")

    @staticmethod
    def is_float(etype: str) -> bool:
        return etype.startswith("f")

    @staticmethod
    def is_integer(etype: str) -> bool:
        return etype[:1] in ("i", "u")

    def live_data(self, value: Any) -> Any:
        return self.data(value)

    def fallback(self, message: str) -> NNEFXError:
        """A form IR has no exact layers for: refused (a compound's definition is tried by
        the writer only when the operation has no writer at all)."""
        return self.fail(message)

    def spells(self, kind: str) -> bool:
        return kind in SPELLING or kind == "copy"

    def data_ref(self, value: Any, arr: np.ndarray, etype: str | None, reshaped: bool) -> Ref:
        """Load-time data of ``value`` (as ``arr``) as a Const."""
        if isinstance(value, str):
            return self.const(arr, self.etype(value))
        return self.const(arr, etype or self.etype(value))

    def spell(self, kind: str, refs: list[Ref], shape: tuple, etype: str, **attrs: Any) -> Ref | None:
        """The opset layer of element-wise operation ``kind`` (an NNEF name), None if none."""
        if kind == "copy":
            return refs[0]
        form = SPELLING.get(kind)
        if form is None:
            return None
        layer, version = form
        return self.layer(layer, refs, shape, etype=etype, attrs=attrs or None, version=version)

    def reshape_value(self, ref: Ref, shape: tuple) -> Ref:
        return self.layer("Reshape", [ref, self.ints(shape)], shape, attrs={"special_zero": False})

    def unsqueeze(self, ref: Ref, axes: list[int], shape: tuple) -> Ref:
        return self.layer("Unsqueeze", [ref, self.ints(axes)], shape)

    def concat(self, refs: list[Any], axis: int, shape: tuple) -> Ref:
        return self.layer("Concat", refs, shape, attrs={"axis": axis})

    def slice_value(self, ref: Ref, starts: list[int], ends: list[int], axes: list[int], shape: tuple,
                    steps: list[int] | None = None) -> Ref:
        steps = steps if steps is not None else [1] * len(axes)
        return self.layer("Slice", [ref, self.ints(starts), self.ints(ends), self.ints(steps), self.ints(axes)],
                          shape, version="opset8")

    def pad_value(self, ref: Ref, pads: list[tuple[int, int]], border: str, value: float) -> Ref:
        if border not in PAD_MODE:
            raise self.fail(f"border '{border}' has no opset Pad mode")
        new = tuple(d + p + q for d, (p, q) in zip(self.shape(ref), pads, strict=True))
        inputs = [ref, self.ints([p for p, _ in pads]), self.ints([q for _, q in pads])]
        if border == "constant":
            inputs.append(self.const(np.asarray(value), self.etype(ref)))
        return self.layer("Pad", inputs, new, attrs={"pad_mode": PAD_MODE[border]})

    def convert(self, ref: Ref, etype: str) -> Ref:
        return self.layer("Convert", [ref], self.shape(ref), etype=etype, attrs={"destination_type": etype})


#: NNEF element-wise operation -> (opset layer, version) where one layer is exact.
SPELLING = {
    "add": ("Add", "opset1"), "sub": ("Subtract", "opset1"), "mul": ("Multiply", "opset1"),
    "div": ("Divide", "opset1"), "pow": ("Power", "opset1"), "min": ("Minimum", "opset1"),
    "max": ("Maximum", "opset1"), "and": ("LogicalAnd", "opset1"), "or": ("LogicalOr", "opset1"),
    "lt": ("Less", "opset1"), "gt": ("Greater", "opset1"), "le": ("LessEqual", "opset1"),
    "ge": ("GreaterEqual", "opset1"), "eq": ("Equal", "opset1"), "ne": ("NotEqual", "opset1"),
    "abs": ("Abs", "opset1"), "neg": ("Negative", "opset1"), "exp": ("Exp", "opset1"), "log": ("Log", "opset1"),
    "sin": ("Sin", "opset1"), "cos": ("Cos", "opset1"), "tan": ("Tan", "opset1"), "asin": ("Asin", "opset1"),
    "acos": ("Acos", "opset1"), "atan": ("Atan", "opset1"), "sinh": ("Sinh", "opset1"),
    "cosh": ("Cosh", "opset1"), "tanh": ("Tanh", "opset1"), "asinh": ("Asinh", "opset4"),
    "acosh": ("Acosh", "opset4"), "atanh": ("Atanh", "opset4"), "sqrt": ("Sqrt", "opset1"),
    "floor": ("Floor", "opset1"), "ceil": ("Ceiling", "opset1"), "sign": ("Sign", "opset1"),
    "not": ("LogicalNot", "opset1"), "sigmoid": ("Sigmoid", "opset1"), "relu": ("Relu", "opset1"),
    "erf": ("Erf", "opset1"), "softplus": ("SoftPlus", "opset4"), "silu": ("Swish", "opset4"),
    "elu": ("Elu", "opset1"), "clamp": ("Clamp", "opset1"), "select": ("Select", "opset1"),
}
#: NNEF border -> Pad-1 ``pad_mode``.
PAD_MODE = {"constant": "constant", "replicate": "edge", "reflect": "reflect", "reflect-even": "symmetric"}


def build(graph: Graph, *, compress_to_fp16: bool = False, blob: bytearray | None = None,
          fixed: dict[str, np.ndarray] | None = None) -> IRWriter:
    """Translate ``graph`` into an :class:`IRWriter` (nothing is written to disk); ``blob``
    the weights of the network it is a body of, ``fixed`` inputs given as constants."""

    if graph.symbols:   # symbolic extents (tract_symbol) are unknown here (and refused where needed)
        from ...runtime.symbols import without_symbols

        graph = without_symbols(graph, "IR")

    updated = {op.inputs.get("variable") for op in graph.operations if op.op == "update"}
    w = IRWriter(graph.name or "model", compress_to_fp16=compress_to_fp16, blob=blob)
    ctx = ExportContext(graph, w)
    for name in graph.inputs:
        if fixed and name in fixed:
            ctx.consts[name] = np.asarray(fixed[name])
            continue
        ref = w.parameter(name, _export.input_shape(graph, name), ir_etype(graph.tensors[name], Location(field=name)))
        w.parameter_ids[name] = ref[0]
        ctx.bind(name, ref)
    for op in _export.operations_to_write(graph, keep_updates=True):
        ctx.op = op
        if op.op in ("variable", "constant"):
            (name,) = op.output_names()
            t = graph.tensors[name]
            if op.op == "variable":
                if t.data is None:
                    raise ctx.fail(f"variable '{op.attribs.get('label', name)}' has no data")
                arr = np.asarray(t.data)
            else:
                arr = ctx.constant_value(op, tuple(op.attribs.get("shape", t.shape or ())))
            ctx.consts[name] = np.asarray(arr, dtype=storage_dtype(ir_etype(t, op.location)))
            if name in updated:
                _state_read(ctx, op, name)
            continue
        if op.op == "update":
            _state_write(ctx, op)
            continue
        fn = writers("ir").find(op.op) or _expanded_exporter(op.op)
        if fn is None:
            raise ctx.fail("no opset equivalent is known for this operation")
        ctx.run_exporter(fn, op)
        _check_etypes(ctx, op)
    ctx.op = None
    for name in graph.outputs:
        ref = ctx.output_ref(name)
        if any(n != name and (n in graph.inputs or n in graph.outputs) for n, r in ctx.refs.items() if r == ref):
            # the output is another input/output under a second name (a copy, a no-op reshape):
            # give it a port of its own so both names survive
            ref = w.add("Convert", [ref], [w.meta[ref]], attrs={"destination_type": w.etype(ref)},
                        name=f"{name}/copy")[0]
            ctx.refs[name] = ref
        w.name_port(ref, name)
        w.result(ref, name)
    for name, ref in ctx.refs.items():
        if name in graph.inputs:
            w.name_port(ref, name)
    return w


#: Control-flow operations IR v11 has layers for (the rest is inlined or refused).
KEPT_CONTROL = ("onnx_if", "onnx_loop", "onnx_scan")


def body_network(ctx: ExportContext, name: str, *, fixed: dict[str, np.ndarray] | None = None,
                 extra: Any = None) -> tuple[IRWriter, Graph]:
    """Body ``name`` of the operation being written as a sub-network (its constants in the
    network's ``.bin``): control flow inside it handled as in the network, its inputs in
    ``fixed`` written as constants, ``extra(graph)`` a last change to (a copy of) the body.
    An error inside it keeps its own location (the body operation's) and names the layer's
    operation."""
    body = ctx.graph.subgraphs.get(name)
    if body is None:
        raise ctx.fail(f"the graph has no body named '{name}'")
    import dataclasses

    body = dataclasses.replace(body, tensors=dict(body.tensors), operations=list(body.operations),
                               inputs=list(body.inputs), outputs=list(body.outputs))
    if extra is not None:
        extra(body)
    try:
        body = _export.graph_with_shapes(lower_control_flow(body, "IR v11", keep=KEPT_CONTROL))
        return build(body, compress_to_fp16=ctx.w.compress_to_fp16, blob=ctx.w.blob, fixed=fixed), body
    except NNEFXError as exc:   # located at the body's operation, named after the layer's
        raise NNEFXError(f"{ctx.fail('').message}its body '{name}' cannot be written: {exc.message}",
                         exc.location or ctx.fail("").location) from None


def _check_etypes(ctx: ExportContext, op: Operation) -> None:
    """Each result of ``op`` is written in its graph tensor's element type: a writer whose
    layers compute another type (an f32 form of an f16 operation) is refused, located, rather
    than written with values the graph does not compute."""
    for name in op.output_names():
        ref = ctx.refs.get(name)
        t = ctx.graph.tensors.get(name)
        if ref is None or t is None or not isinstance(ref, tuple) or ref not in ctx.w.meta:
            continue
        want, got = ir_etype(t, op.location), ctx.w.etype(ref)
        if want != got:
            raise ctx.fail(f"its IR form gives {got} where the graph computes {want} ('{name}')")


def _expanded_exporter(name: str) -> Any:
    """For a compound operation with no exporter of its own: export its NNEF definition."""
    return _export_expanded if _export.is_compound(name) else None


def _export_expanded(ctx: ExportContext, op: Operation) -> None:
    """Expand ``op`` through its fragment body (the front-end, as for any NNEF document) down
    to operations that have exporters, and export those in its place.

    The one operation is printed as a tiny document whose externals stand for its tensor
    inputs (:func:`~nnefx.formats.export.context.export_definition`); errors name the original
    operation and its position.
    """

    sub, local = _export.single_operation_graph(ctx.graph, op, ctx.shape)
    try:
        expanded = _export.compile_expanded(sub, set(writers("ir").names()))
    except NNEFXError as exc:
        raise ctx.fail(f"its definition cannot be expanded ({exc.message})") from None
    child = ExportContext(expanded, ctx.w)

    def constant(sop: Operation, n: str) -> np.ndarray:
        arr = _export.constant_array(sop, tuple(sop.attribs.get("shape", ())))
        if arr is None:
            raise ctx.fail(f"its definition's constant '{n}' does not fill its shape")
        return np.asarray(arr, dtype=storage_dtype(ir_etype(expanded.tensors[n], op.location)))

    def export(sop: Operation) -> None:
        fn = writers("ir").find(sop.op)
        if fn is None:
            raise ctx.fail(f"its definition uses '{sop.op}', which has no opset equivalent")
        try:
            fn(child, sop)
        except NNEFXError as exc:
            raise ctx.fail(f"its definition's '{sop.op}' cannot be written: {exc.message}") from None

    _export.export_definition(ctx, op, expanded, local, child, constant, export)


def _variable_id(op: Operation, name: str) -> str:
    return str(op.attribs.get("label", name))


def _state_read(ctx: ExportContext, op: Operation, name: str) -> None:
    """An updated variable: ReadValue-6 of a state initialised from the variable's data.

    OpenVINO keeps the state per infer request across inferences (``reset_state`` restores
    the initial value), as an nnefx ``Session`` does across runs (``reset``).
    """
    init = ctx.ref(name)   # the data as a Const
    del ctx.consts[name]   # from here on the tensor is the state, not load-time data
    shape, et = ctx.w.meta[init]
    ref = ctx.w.add("ReadValue", [init], [(shape, et)], version="opset6", name=f"{name}/ReadValue",
                    attrs={"variable_id": _variable_id(op, name), "variable_type": et,
                           "variable_shape": ",".join(str(d) for d in shape)})[0]
    ctx.bind(name, ref)


def _state_write(ctx: ExportContext, op: Operation) -> None:
    """``update``: Assign-6 of the new value (applied after the inference, as in NNEF)."""
    var, value = op.inputs["variable"], op.inputs["value"]
    producer = next((o for o in ctx.graph.operations if o.op == "variable" and var in o.output_names()), None)
    if producer is None:
        raise ctx.fail(f"'{var}' is not a variable")
    src = ctx.ref(value)
    ctx.w.add("Assign", [src], [ctx.w.meta[src]], version="opset6", name=f"{var}/Assign",
              attrs={"variable_id": _variable_id(producer, var)})
    for n in op.output_names():
        ctx.bind(n, src)


def write_ir(model: Model | Graph, path: str | os.PathLike, *, compress_to_fp16: bool = False,
             weights: str | os.PathLike | None = None) -> None:
    """Write ``model`` as IR v11: ``path`` (``.xml``) and ``weights`` (default: ``.bin`` beside it)."""
    graph = model.graph if isinstance(model, Model) else model
    path = os.fspath(path)
    # control flow inlined where static, else written as If-8 / Loop-5 / TensorIterator-1 with its bodies
    graph = _export.graph_with_shapes(lower_control_flow(graph, "IR v11", keep=KEPT_CONTROL))
    w = build(graph, compress_to_fp16=compress_to_fp16)
    xml = w.xml_bytes()
    bin_path = os.fspath(weights) if weights is not None else os.path.splitext(path)[0] + ".bin"
    _export.write_atomically([(bin_path, w.blob), (path, xml)])  # (the blob as is: no copy of the weights)

