"""Write an nnefx :class:`~nnefx.graph.Graph` as an ONNX model (default opset 18).

Why: every importer produces the same flat Graph, so an NNEF folder, an IR network or a
document built with ``GraphBuilder`` can be handed to anything that runs ONNX
(onnxruntime, TensorRT, ...) by ``nnefx.save(model, "x.onnx")``.

The design mirrors the IR v11 writer (:mod:`nnefx.formats.ir.writer`):

* :class:`Emitter` (this module) knows the format: nodes, initializers, unique value and
  node names, the (possibly symbolic) shape and element type of every value it made.
* The operations are known by their families (:mod:`nnefx.formats.families`): one function
  per nnefx operation that emits ONNX nodes through :class:`ExportContext` (which also
  spells what the neutral lowering, :mod:`nnefx.formats.export.lowering`, asks of ONNX),
  found through :mod:`nnefx.formats.export.registry`.  Writers are *exact or refused*: where NNEF
  and ONNX differ (broadcasting aligned from the left, automatic padding, border modes,
  round-half-up, integer casts that floor), extra nodes reproduce NNEF's result; where no
  exact form exists the exporter raises :class:`Fallback`, and a compound operation is then
  written through its NNEF definition (expanded by the front-end, each piece exported in
  turn), otherwise the operation is refused with an :class:`NNEFXError` naming it and its
  source position.  Nothing is dropped or approximated.
* State is refused: ONNX has no variables that persist between runs, so a graph with
  ``update`` operations cannot be written (its variables would silently stop changing).

The protobuf is built with the optional ``onnx`` package and checked with
``onnx.checker`` before it is written to a temporary file beside the target and renamed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Model, Operation
from ...runtime.dtypes import DEFAULT_STORAGE
from ..export import context as _export
from ..export.lowering import first_input
from ..export.registry import table as writers
from . import deferred as _deferred  # noqa: F401 - registers the writer of deferred ONNX nodes

#: The ONNX operator set the writer targets (default domain).
OPSET = 18
#: The ONNX IR version written (onnx 1.13+ readers, onnxruntime 1.14+).
IR_VERSION = 8
#: nnefx data type -> numpy storage: the runtime's defaults themselves (one table, so the
#: types written are those a Session computes in).
NUMPY = DEFAULT_STORAGE
#: Initializer bytes above this are refused: a protobuf message cannot exceed 2 GiB.
MAX_BYTES = 2 ** 31 - 2 ** 24
#: Nested definition expansions allowed (a compound exported through a compound ...).
MAX_DEPTH = 16


class Fallback(Exception):
    """Raised by an exporter for a form it has no exact ONNX nodes for.

    The writer then exports a compound operation through its NNEF definition; for a
    primitive the message becomes the located error.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise NNEFXError("writing ONNX models needs the 'onnx' package: pip install nnefx[onnx]") from None
    return onnx


class Emitter:
    """Nodes, initializers and value metadata of one ONNX graph under construction."""

    def __init__(self, reserved: set[str], *, compress_to_fp16: bool = False, parent: Emitter | None = None):
        self.compress_to_fp16 = compress_to_fp16
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.meta: dict[str, tuple[tuple, np.dtype]] = {}
        #: values that are sequences or optionals (:data:`nnefx.graph.KINDS`), by name
        self.kinds: dict[str, str] = {}
        self.generated: set[str] = set()
        #: values written by nodes (not initializers or inputs): the ones that may be renamed
        self.node_outputs: set[str] = set()
        self.bytes = 0
        # a body's emitter shares its names with the graph around it: ONNX names are unique
        # across a graph and the subgraphs inside it (no shadowing)
        self._reserved = set(reserved) | (parent._reserved if parent is not None else set())
        self._used: set[str] = parent._used if parent is not None else set()
        self._node_names: set[str] = parent._node_names if parent is not None else set()
        self._const_cache: dict[tuple, str] = {}
        self._counter = 0 if parent is None else parent._counter + 100_000
        #: the emitter of the model's graph (a body's opset needs are the model's)
        self._root: Emitter = self if parent is None else parent._root
        #: the opset the model is written in: OPSET, or the newer one an operator needs
        #: (``need_opset``; opsets after 18 change no operator nnefx writes at 18)
        self.opset = OPSET
        #: the opsets of other domains the model imports (``ai.onnx.ml``: 5, ...)
        self.domains: dict[str, int] = {}
        #: every emitter of the model (its bodies'), whose values' element types decide the
        #: opset too (:meth:`etype_opset`)
        self._family: list[Emitter] = [self] if parent is None else self._root._family
        if parent is not None:
            self._family.append(self)

    def need_opset(self, version: int, domain: str = "") -> None:
        """Write the model in opset ``version`` of ``domain`` or later (an operator first
        defined there); a domain other than the default one is imported from then on."""
        if domain:
            self._root.domains[domain] = max(self._root.domains.get(domain, 1), int(version))
        else:
            self._root.opset = max(self._root.opset, int(version))

    def etype_opset(self) -> int:
        """The first opset whose types hold every element type a value of the model has
        (:data:`ETYPE_OPSETS`: float8 19, 4-bit 21, ...): the model is written in it at least."""
        seen = {np.dtype(dt) for em in self._family for _, dt in em.meta.values()}
        return max((ETYPE_OPSETS.get(etypes.from_numpy(dt), OPSET) for dt in seen if dt.kind != "O"),
                   default=OPSET)

    def fresh(self, hint: str) -> str:
        """A value name used nowhere else (and never one of the graph's own tensor names)."""
        while True:
            self._counter += 1
            name = f"{hint}:{self._counter}"
            if name not in self._reserved and name not in self._used:
                self._used.add(name)
                self.generated.add(name)
                return name

    def claim(self, name: str) -> str:
        self._used.add(name)
        return name

    def node_name(self, hint: str) -> str:
        return _export.unique_name(hint, self._node_names)

    def initializer(self, array: np.ndarray, name: str | None = None, hint: str = "const") -> str:
        """An initializer holding ``array``; small unnamed ones are shared when equal."""
        from onnx import numpy_helper

        arr = np.asarray(array)
        if not arr.flags.c_contiguous:   # (not ascontiguousarray: it makes 0-d arrays 1-d)
            arr = np.array(arr, order="C")
        key = None
        if name is None and arr.size <= 64 and arr.dtype != object:  # (str items: no bytes to compare)
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            if key in self._const_cache:
                return self._const_cache[key]
        vname = self.claim(name) if name is not None else self.fresh(hint)
        if self.compress_to_fp16 and _export.fp16_storable(arr):
            # half-precision storage, widened by a Cast where it is read (what
            # onnxconverter-common's float16 conversion with keep_io_types writes)
            from onnx import TensorProto, helper

            half = self.fresh(f"{vname}/f16")
            self._add_bytes(arr.size * 2)
            self.initializers.append(numpy_helper.from_array(arr.astype(np.float16), half))
            self.nodes.append(helper.make_node("Cast", [half], [vname], name=self.node_name(f"{vname}/Cast"),
                                               to=TensorProto.FLOAT))
        else:
            self._add_bytes(arr.nbytes)
            self.initializers.append(numpy_helper.from_array(arr, vname))
        self.meta[vname] = (tuple(arr.shape), arr.dtype)
        if key is not None:
            self._const_cache[key] = vname
        return vname

    def _add_bytes(self, n: int) -> None:
        self.bytes += n
        if self.bytes > MAX_BYTES:
            raise NNEFXError(f"the weights need more than {MAX_BYTES} bytes, beyond the 2 GB limit of an ONNX "
                             "protobuf (external data is not written by nnefx)")

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[tuple[tuple, np.dtype]], hint: str,
             attrs: dict[str, Any] | None = None, domain: str = "") -> list[str]:
        from onnx import helper

        names = [self.fresh(f"{hint}/{op_type}") for _ in outputs]
        node = helper.make_node(op_type, list(inputs), names, name=self.node_name(f"{hint}/{op_type}"),
                                domain=domain or None, **(attrs or {}))
        self.nodes.append(node)
        for n, (shape, dt) in zip(names, outputs, strict=True):
            self.meta[n] = (tuple(shape), np.dtype(dt))
        self.node_outputs.update(names)
        return names

    def rename(self, mapping: dict[str, str]) -> None:
        """Rename values everywhere (used to give graph tensors their NNEF names)."""
        if not mapping:
            return
        _rename_nodes(self.nodes, mapping)
        for init in self.initializers:
            if init.name in mapping:
                init.name = mapping[init.name]
        for old, new in mapping.items():
            self.meta[new] = self.meta.pop(old)
            if old in self.kinds:
                self.kinds[new] = self.kinds.pop(old)
            self.generated.discard(old)
            self.node_outputs.discard(old)
            self._used.add(new)


def _rename_nodes(nodes: Any, mapping: dict[str, str]) -> None:
    """Rename values in ``nodes`` and in the bodies (graph attributes) inside them, which may
    read outer values by name."""
    for node in nodes:
        for k, v in enumerate(node.input):
            if v in mapping:
                node.input[k] = mapping[v]
        for k, v in enumerate(node.output):
            if v in mapping:
                node.output[k] = mapping[v]
        for attr in node.attribute:
            for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                _rename_nodes(g.node, mapping)
                for out in g.output:
                    if out.name in mapping:
                        out.name = mapping[out.name]


class ExportContext(_export.ExportContextBase[str]):
    """What an operation exporter sees: graph tensors as ONNX values, and a node factory.

    ``variable``/``constant`` data becomes an initializer only when an exporter asks for the
    tensor as a value (:meth:`ref`); exporters that can use the data directly (a bias made
    1-D, a filter reshaped) ask :meth:`data` first.  The bookkeeping (``refs``, ``consts``,
    ``op``), :meth:`fail`, :meth:`data` and :meth:`bind` are those of every writer
    (:class:`~nnefx.formats.export.context.ExportContextBase`); numpy arrays and scalars count as
    literals here, since ONNX exporters pass computed tables (kernels of ones, gate orders).
    """

    FORMAT = "ONNX"
    LITERALS = (bool, int, float, np.ndarray, np.generic)
    #: load-time operands of broadcasting operations lose leading unit dims
    #: (:func:`~nnefx.formats.export.lowering.operands`): onnxruntime's fusions match 1-D
    #: scales and biases only
    TRIMS_LEADING_UNITS = True

    def __init__(self, graph: Graph, emitter: Emitter, *, top: bool = True):
        super().__init__(graph)
        self.e = emitter
        self.top = top
        #: how deep inside bodies (:func:`body_graph`) this graph is
        self.depth = 0
        #: initializers written from ``consts``, by (address, shape, strides, type) of the data
        self._data_refs: dict[tuple, str] = {}

    def fallback(self, message: str) -> Fallback:
        return Fallback(message)

    # --- tensors ------------------------------------------------------------------------------
    def dims(self, value: Any) -> tuple:
        """Shape of a tensor name, literal or ONNX value; unknown dims are ``None``."""
        if isinstance(value, str) and value in self.refs:
            return self.e.meta[self.refs[value]][0]
        if isinstance(value, str) and value in self.graph.tensors:
            t = self.graph.tensors[value]
            if t.shape is None:
                raise self.fail(f"tensor '{value}' has no known shape (not even its rank)")
            return tuple(None if d is None else int(d) for d in t.shape)
        if isinstance(value, str) and value in self.e.meta:
            return self.e.meta[value][0]
        if isinstance(value, np.ndarray):
            return tuple(value.shape)
        return ()

    def shape(self, value: Any) -> tuple:
        """Static shape; an unknown dim is an error (the operation needs it)."""
        shape = self.dims(value)
        if any(d is None for d in shape):
            raise self.fail(f"shape {list(shape)} is not static here; give the input shapes when loading")
        return tuple(int(d) for d in shape)

    def rank(self, value: Any) -> int:
        return len(self.dims(value))

    def dtype(self, value: Any, default: np.dtype | None = None) -> np.dtype:
        if isinstance(value, str):
            if value in self.refs:
                return self.e.meta[self.refs[value]][1]
            if value in self.graph.tensors:
                return tensor_dtype(self.graph.tensors[value])
            if value in self.e.meta:
                return self.e.meta[value][1]
        if isinstance(value, np.ndarray):
            return value.dtype
        if isinstance(value, (bool, np.bool_)):
            return NUMPY["logical"]
        return default if default is not None else NUMPY["scalar"]

    def ref(self, value: Any, dtype: Any = None) -> str:
        """The ONNX value holding tensor ``value`` (a graph name or a value name), or an
        initializer for a literal (of ``dtype``, default float32 / bool)."""
        if isinstance(value, str):
            if value in self.refs:
                return self.refs[value]
            if value in self.consts:
                arr = self.consts[value]
                # the same data under the same shape (a folded ``copy``, a variable read
                # twice) is one initializer
                key = (arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str)
                ref = self._data_refs.get(key)
                if ref is None:
                    name = value if (self.top and value not in self.graph.outputs) else None
                    ref = self._data_refs[key] = self.e.initializer(arr, name=name, hint="const")
                self.refs[value] = ref
                return ref
            if value in self.e.meta and value not in self.graph.tensors:
                return value
            raise self.fail(f"tensor '{value}' is not available")
        if isinstance(value, (bool, int, float, np.ndarray, np.generic, list)):
            arr = np.asarray(value)
            if dtype is None:
                dtype = NUMPY["logical"] if arr.dtype == np.bool_ else NUMPY["scalar"]
            return self.e.initializer(arr.astype(dtype))
        raise self.fail(f"unsupported input value {value!r}")

    def const(self, array: Any, dtype: Any = None) -> str:
        arr = np.asarray(array)
        return self.e.initializer(arr.astype(dtype) if dtype is not None else arr)

    def ints(self, values: Sequence[int]) -> str:
        """An int64 1-D initializer (axes, shapes, pads, ...)."""
        return self.e.initializer(np.asarray([int(v) for v in values], dtype=np.int64).reshape(-1))

    def node(self, op_type: str, inputs: Sequence[Any], shape: tuple | None = None, *, dtype: Any = None,
             outputs: Sequence[tuple[tuple, Any]] | None = None, domain: str = "", **attrs: Any) -> Any:
        """Emit one node; returns its only output (or the list when ``outputs`` is given).

        Inputs are graph tensor names, value names or literals; ``""`` is an omitted
        optional input.  The output's shape defaults to ``shape``, its type to ``dtype`` or
        that of the first input.  ``domain``: the operator's, for one outside the default
        domain (its opset is imported through ``need_opset``).
        """
        names = [v if isinstance(v, str) and v == "" else self.ref(v) for v in inputs]
        if outputs is None:
            dt = dtype if dtype is not None else (self.e.meta[names[0]][1] if names and names[0] else NUMPY["scalar"])
            outs = [(tuple(shape or ()), np.dtype(dt))]
        else:
            outs = [(tuple(s), np.dtype(d)) for s, d in outputs]
        hint = "n"
        if self.op is not None and self.op.output_names():
            hint = self.op.output_names()[0]
        got = self.e.node(op_type, names, outs, hint, {k: v for k, v in attrs.items() if v is not None}, domain)
        return got if outputs is not None else got[0]


    # --- spelling (what :mod:`nnefx.formats.export.lowering` asks of a format) --------------------
    LOGICAL = NUMPY["logical"]

    def type_of(self, value: Any, default: Any = None) -> np.dtype:
        return self.dtype(value, default)

    @staticmethod
    def nnef_type(name: str | None) -> np.dtype:
        return NUMPY.get(name or "scalar", NUMPY["scalar"])

    @staticmethod
    def is_float(dtype: Any) -> bool:
        return np.dtype(dtype).kind == "f"

    @staticmethod
    def is_integer(dtype: Any) -> bool:
        return np.dtype(dtype).kind in "iu"

    def live_data(self, value: Any) -> Any:
        """Load-time data of ``value`` unless it already is an ONNX value."""
        if isinstance(value, str) and value in self.refs:
            return None
        return self.data(value)

    def data_ref(self, value: Any, arr: np.ndarray, dtype: Any, reshaped: bool) -> str:
        """Load-time data of ``value`` (as ``arr``): the variable's own (named) initializer
        where unchanged, else a new one."""
        if isinstance(value, str) and not reshaped:
            return self.ref(value)
        return self.const(arr.astype(dtype) if dtype is not None else arr)

    def spell(self, kind: str, refs: list[str], shape: tuple, dtype: Any, **attrs: Any) -> str | None:
        """The ONNX node of element-wise operation ``kind`` (an NNEF name), None if none."""
        if kind == "clamp":   # Clip's bounds are inputs
            dt = self.dtype(refs[0])
            bounds = [self.const(np.asarray(attrs[k]), dt) for k in ("min", "max")]
            return self.node("Clip", [refs[0], *bounds], shape)
        if kind == "select":
            return self.node("Where", refs, shape, dtype=self.dtype(refs[1]))
        form = SPELLING.get(kind)
        if form is None:
            return None
        return self.node(form, refs, shape, dtype=dtype, **attrs)

    def spells(self, kind: str) -> bool:
        return kind in SPELLING or kind in ("clamp", "select")

    def reshape_value(self, ref: str, shape: tuple) -> str:
        return self.node("Reshape", [ref, self.ints(shape)], shape, allowzero=1)

    def unsqueeze(self, ref: str, axes: list[int], shape: tuple) -> str:
        return self.node("Unsqueeze", [ref, self.ints(axes)], shape)

    def concat(self, refs: list[Any], axis: int, shape: tuple) -> str:
        return self.node("Concat", refs, shape, axis=axis)

    def slice_value(self, ref: str, starts: list[int], ends: list[int], axes: list[int], shape: tuple,
                    steps: list[int] | None = None) -> str:
        inputs = [ref, self.ints(starts), self.ints(ends), self.ints(axes)]
        return self.node("Slice", inputs + ([self.ints(steps)] if steps is not None else []), shape)

    def pad_value(self, ref: str, pads: list[tuple[int, int]], border: str, value: float) -> str:
        """Pad in NNEF border mode ``border``; 'reflect' in chunks below the extent (Pad's
        limit) and 'reflect-even' (numpy 'symmetric', which Pad lacks) by mirrored slices."""
        from .spelling import padded

        return padded(self, ref, pads, border, value)

    def convert(self, ref: str, dtype: Any) -> str:
        return self.node("Cast", [ref], self.dims(ref), dtype=dtype, to=tensor_type(dtype))


#: Element types an ONNX model can hold -> the first opset that has them (the ONNX IR's
#: ``TensorProto.DataType`` and the operator docs' type constraints: float8 came with opset 19 /
#: IR 9, int4/uint4 with 21 / IR 10, float4e2m1 with 23 / IR 11, float8e8m0 with 24 / IR 12,
#: int2/uint2 with 25 / IR 13); a model holding one is written in that opset at least.
ETYPE_OPSETS = {**{t: OPSET for t in ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16",
                                      "u32", "u64", "bool", "string")},
                **{t: 19 for t in ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz")},
                "i4": 21, "u4": 21, "f4e2m1": 23, "f8e8m0": 24, "i2": 25, "u2": 25}
#: Element types an ONNX model can hold (complex ones are not written).
WRITABLE_ETYPES = tuple(ETYPE_OPSETS)


def tensor_dtype(t: Any, dtype: str | None = None, location: Location | None = None) -> np.dtype:
    """The numpy dtype of graph tensor ``t`` in the written model: its concrete element type
    (:attr:`~nnefx.graph.Tensor.etype`), else its NNEF data type's default (float32 / int64 /
    bool); a located error for element types ONNX cannot hold.  (A type newer than opset 18
    raises the model's opset: :meth:`Emitter.etype_opset`.)"""
    if t.etype is None:
        return NUMPY.get(dtype or t.dtype, NUMPY["scalar"])
    if t.etype not in WRITABLE_ETYPES:
        raise NNEFXError(f"tensor '{t.name}' has element type {t.etype}, which ONNX as nnefx writes it cannot "
                         f"hold (it holds {', '.join(WRITABLE_ETYPES)})", location)
    return etypes.numpy_dtype(t.etype)


def tensor_type(dtype: Any) -> int:
    """ONNX ``TensorProto`` element type of a numpy dtype."""
    from onnx import helper

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


#: NNEF element-wise operation -> the ONNX node that computes it exactly.
SPELLING = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "min": "Min", "max": "Max",
    "and": "And", "or": "Or", "lt": "Less", "gt": "Greater", "le": "LessOrEqual", "ge": "GreaterOrEqual",
    "eq": "Equal", "mod": "Mod", "abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sin": "Sin",
    "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
    "cosh": "Cosh", "tanh": "Tanh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "sqrt": "Sqrt",
    "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "not": "Not", "sigmoid": "Sigmoid", "relu": "Relu",
    "rcp": "Reciprocal", "copy": "Identity", "erf": "Erf", "softplus": "Softplus", "elu": "Elu",
}


# --- the driver --------------------------------------------------------------------------------

def _variable_data(ctx: ExportContext, op: Operation, name: str) -> np.ndarray:
    from ...runtime.dtypes import dequantize

    t = ctx.graph.tensors[name]
    label = str(op.attribs.get("label", name))
    if t.data is None:
        raise ctx.fail(f"variable '{label}' has no data (load the model with its weights)")
    arr = np.asarray(t.data)
    dtype = op.dtype or t.dtype
    if dtype == "scalar" and arr.dtype.kind in "iu":
        arr = dequantize(arr, t.quant or {}, f"variable '{label}'", op.location)
    shape = op.attribs.get("shape", t.shape)
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ctx.fail(f"variable '{label}' is declared with shape {list(shape)} but its data has shape "
                       f"{list(arr.shape)}")
    return arr.astype(tensor_dtype(t, op.dtype, op.location), copy=False)


def _constant_data(ctx: ExportContext, op: Operation, name: str, graph: Graph) -> np.ndarray:
    t = graph.tensors[name]
    dtype = tensor_dtype(t, op.dtype, op.location)
    shape = tuple(op.attribs.get("shape", t.shape or ()))
    if any(d is None for d in shape):
        raise ctx.fail(f"constant '{name}' has no definite shape")
    arr = ctx.constant_value(op, shape, list(shape))
    if dtype.kind in "iu" and arr.dtype.kind == "f":
        arr = np.floor(arr)
    return arr.astype(dtype)


def export_operation(ctx: ExportContext, op: Operation, depth: int = 0) -> None:
    """Export one operation: its exporter, else (or on :class:`Fallback`) its definition."""

    ctx.op = op
    fn = writers("onnx").find(op.op)
    reason = "no ONNX equivalent is known for this operation"
    if fn is not None:
        try:
            ctx.run_exporter(fn, op)
            return
        except Fallback as exc:
            reason = exc.message
        except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as exc:
            # an attribute combination an exporter did not foresee: say so, never a traceback
            raise ctx.fail(f"unexpected attributes or shapes ({type(exc).__name__}: {exc})") from None
    if not _export.is_compound(op.op):
        raise ctx.fail(reason)
    if depth >= MAX_DEPTH:
        raise ctx.fail(f"{reason} (and its definition nests too deeply)")
    _export_expanded(ctx, op, depth, reason)


def _export_expanded(ctx: ExportContext, op: Operation, depth: int, reason: str) -> None:
    """Write ``op`` through its fragment body: the one operation is printed as a tiny NNEF
    document whose externals stand for its tensor inputs, expanded by the front-end down to
    operations with exporters, and each of those is exported in its place
    (:func:`~nnefx.formats.export.context.export_definition`).  Errors name the original operation
    and its position."""

    try:
        sub, local = _export.single_operation_graph(ctx.graph, op, ctx.shape)
    except NNEFXError as exc:
        raise ctx.fail(f"{reason}; its definition needs static input shapes ({exc.message})") from None
    try:
        expanded = _export.compile_expanded(sub, set(writers("onnx").names()) - {op.op})
    except NNEFXError as exc:
        raise ctx.fail(f"{reason}, and its definition cannot be expanded ({exc.message})") from None
    child = ExportContext(expanded, ctx.e, top=False)

    def export(sop: Operation) -> None:
        try:
            export_operation(child, sop, depth + 1)
        except NNEFXError as exc:
            ctx.op = op
            raise ctx.fail(f"{reason}; its definition's '{sop.op}' cannot be written: {exc.message}") from None

    _export.export_definition(ctx, op, expanded, local, child, lambda sop, n: _constant_data(child, sop, n, expanded), export)


def _value_info(name: str, shape: tuple | None, dtype: np.dtype, symbolic: str | None, kind: str = "tensor") -> Any:
    """A graph input/output's type: a tensor, or a sequence/optional of ``shape``d elements."""
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    dims: list[Any] | None = None
    if shape is not None:
        dims = []
        for k, d in enumerate(shape):
            if d is None:
                dims.append(f"{symbolic}_{k}" if symbolic else None)
            else:
                dims.append(int(d))
    if kind == "tensor":
        return helper.make_tensor_value_info(name, elem, dims)
    typ = helper.make_tensor_type_proto(elem, dims)
    if kind in ("sequence", "optional_sequence"):
        typ = helper.make_sequence_type_proto(typ)
    if kind.startswith("optional"):
        typ = helper.make_optional_type_proto(typ)
    return helper.make_value_info(name, typ)


def element_dtype(tensor: Any) -> np.dtype:
    """The numpy type written for ``tensor``: its concrete element type where the graph names
    one (a sequence or optional is typed by its elements; a body's f16 or i32 value keeps its
    type), else the storage of its NNEF type."""
    if tensor.etype is not None and tensor.kind != "tensor":
        return etypes.numpy_dtype(etypes.parse(tensor.etype))
    if tensor.etype is not None:
        return tensor_dtype(tensor)
    return NUMPY.get(tensor.dtype, NUMPY["scalar"])


#: Operations that only relabel the dimensions of their one input (NNEF operators §4.4:
#: the values keep their row-major order): over load-time data their result is load-time
#: data too, folded while writing rather than written as a node.
RELABELLING = frozenset({"copy", "reshape", "squeeze", "unsqueeze"})


def _write_operations(ctx: ExportContext, graph: Graph) -> None:
    """Every operation an output needs: data as initializers on first use, the rest exported.

    Chains that do not depend on the inputs — a ``copy``/``reshape``/``squeeze``/``unsqueeze``
    of a variable, as nnef-tools writes for every bias and layer-norm scale — are folded
    into load-time data (:data:`RELABELLING`), so that the operation reading them sees data
    and can take it in its own form: a convolution's bias as ``Conv``'s ``B`` instead of an
    ``Unsqueeze`` and an ``Add`` per layer, a product's weight as a matrix.
    """
    for op in _export.operations_to_write(graph):
        ctx.op = op
        if op.op in ("variable", "constant"):
            (name,) = op.output_names()
            if op.op == "variable":
                ctx.consts[name] = _variable_data(ctx, op, name)
            else:
                ctx.consts[name] = _constant_data(ctx, op, name, graph)
            continue
        if op.op in RELABELLING and _fold_relabelling(ctx, op):
            continue
        export_operation(ctx, op)
    ctx.op = None


def _fold_relabelling(ctx: ExportContext, op: Operation) -> bool:
    """Fold ``op`` (one of :data:`RELABELLING`) when its input is load-time data not yet
    written and its output's shape is static: the data itself, under the shape the
    registry's shape rule gave the output (a view, no copy)."""
    source = first_input(op, "input", "x")
    outputs = op.output_names()
    if not isinstance(source, str) or source not in ctx.consts or source in ctx.refs or len(outputs) != 1:
        return False
    shape = ctx.graph.tensors[outputs[0]].shape
    data = ctx.consts[source]
    if shape is None or any(not isinstance(d, int) for d in shape) or int(np.prod(shape, dtype=np.int64)) != data.size:
        return False
    ctx.consts[outputs[0]] = data.reshape(tuple(shape))
    return True


def body_graph(ctx: ExportContext, name: str, captured: Sequence[str]) -> Any:
    """Body ``name`` of ``ctx``'s graph (:attr:`nnefx.graph.Graph.subgraphs`) as an ONNX
    ``GraphProto``: its formal inputs as the body's inputs, its captured inputs read as the
    outer values ``captured`` (ONNX bodies see the enclosing graph's names)."""
    from onnx import helper

    body = ctx.graph.subgraphs.get(name)
    if body is None:
        raise ctx.fail(f"the graph has no body named '{name}'")
    if ctx.depth >= MAX_DEPTH:
        raise ctx.fail(f"bodies nest more than {MAX_DEPTH} deep")
    n_formal = len(body.inputs) - len(captured)
    e = Emitter(set(body.tensors), compress_to_fp16=ctx.e.compress_to_fp16, parent=ctx.e)
    child = ExportContext(body, e, top=False)
    child.depth = ctx.depth + 1
    inputs = []
    for k, tensor in enumerate(body.inputs):
        t = body.tensors[tensor]
        dtype = element_dtype(t)
        shape = None if t.shape is None else tuple(None if not isinstance(d, int) else int(d) for d in t.shape)
        if k < n_formal:
            ref = e.fresh(f"{name}/{tensor}")
            e.meta[ref] = (shape or (), dtype)
            if t.kind != "tensor":
                e.kinds[ref] = t.kind
            inputs.append(_value_info(ref, shape, dtype, None, t.kind))
        else:
            ref = captured[k - n_formal]
            e.meta[ref] = ctx.e.meta.get(ref, (shape or (), dtype))
            if ref in ctx.e.kinds:
                e.kinds[ref] = ctx.e.kinds[ref]
        child.bind(tensor, ref)
    _write_operations(child, body)
    outputs = []
    for tensor in body.outputs:
        ref = child.output_ref(tensor)
        if ref not in e.node_outputs:  # an input, an outer value or an initializer: a node must write it
            new = e.fresh(f"{name}/{tensor}")
            e.nodes.append(helper.make_node("Identity", [ref], [new], name=e.node_name(f"{new}/Identity")))
            e.meta[new] = e.meta[ref]
            if ref in e.kinds:
                e.kinds[new] = e.kinds[ref]
            ref = new
        t = body.tensors[tensor]
        shape, dt = e.meta[ref]
        outputs.append(_value_info(ref, None if t.kind == "tensor" and t.shape is None else shape, dt, None,
                                   e.kinds.get(ref, "tensor")))
    ctx.e.bytes += e.bytes
    return helper.make_graph(e.nodes, name, inputs, outputs, initializer=e.initializers)


def build(model: Model | Graph, *, opset: int = OPSET, compress_to_fp16: bool = False) -> Any:
    """Translate a graph (shapes inferred) into an ``onnx.ModelProto`` (nothing is written).

    ``compress_to_fp16`` stores float32 initializers as float16 followed by a ``Cast`` to
    float32 (inputs, outputs and computation stay float32), as ``--fp16`` does for IR.
    """
    onnx = _onnx()
    from onnx import helper

    graph = model.graph if isinstance(model, Model) else model
    if graph.symbols:   # symbolic extents (tract_symbol) are written as unknown dims
        from ...runtime.symbols import without_symbols

        graph = without_symbols(graph, "onnx")
    if opset != OPSET:
        raise NNEFXError(f"nnefx writes ONNX opset {OPSET} only (asked for {opset})")
    if isinstance(model, Model):
        storage = model.extras.get("storage") or {}
        odd = {k: v for k, v in storage.items() if np.dtype(v) != NUMPY.get(k)}
        if odd:
            raise NNEFXError(f"the model stores its data types as {odd} (integer-runtime semantics); ONNX export "
                             "supports the default float32/int64/bool storage only")
    for op in graph.operations:
        if op.op == "update":
            raise NNEFXError(f"cannot write operation 'update' as ONNX: the graph updates variable "
                             f"'{op.inputs.get('variable')}' between runs, and ONNX models have no state",
                             op.location or Location(field=graph.name))
    e = Emitter(set(graph.tensors), compress_to_fp16=compress_to_fp16)
    ctx = ExportContext(graph, e)
    inputs = []
    for name in graph.inputs:
        kind = graph.tensors[name].kind
        if kind != "tensor":  # a sequence or an optional: its elements' shape, if known
            e.kinds[name] = kind
            shape = graph.tensors[name].shape
        else:
            shape = _export.input_shape(graph, name)
        e.claim(name)
        t_in = graph.tensors[name]
        e.meta[name] = (tuple(None if d is None else int(d) for d in shape or ()),
                        element_dtype(t_in) if getattr(t_in, "kind", "tensor") != "tensor"
                        else tensor_dtype(t_in, location=Location(field=f"input '{name}'")))
        ctx.bind(name, name)
        inputs.append(_value_info(name, None if shape is None else e.meta[name][0], e.meta[name][1], name, kind))
    _write_operations(ctx, graph)
    _name_values(ctx, graph)
    outputs = []
    for name in graph.outputs:
        t = graph.tensors[name]
        shape, dt = e.meta[name]
        declared = tuple(t.shape) if t.shape is not None else None
        outputs.append(_value_info(name, declared if declared is not None else shape, dt, None,
                                   e.kinds.get(name, t.kind)))
    g = helper.make_graph(e.nodes, graph.name or "main", inputs, outputs, initializer=e.initializers)
    opset = max(opset, e.opset, e.etype_opset())
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in sorted(e.domains.items())]
    proto = helper.make_model(g, opset_imports=imports, producer_name="nnefx", producer_version=_version())
    proto.ir_version = IR_VERSION if opset == OPSET and not e.domains else max(
        IR_VERSION, helper.find_min_ir_version_for(imports))
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:  # a bug in an exporter, never the user's input
        raise NNEFXError(f"internal error: the ONNX model nnefx built is invalid ({exc})") from None
    return proto


def _name_values(ctx: ExportContext, graph: Graph) -> None:
    """Give graph outputs (and, where free, other graph tensors) their own names."""
    e = ctx.e
    mapping: dict[str, str] = {}
    taken: set[str] = set()
    for name in graph.outputs:
        ref = ctx.output_ref(name)
        if ref == name:
            continue
        if ref in e.node_outputs and ref not in mapping:
            mapping[ref] = name
        else:
            _identity_to(ctx, ref, name)
        taken.add(name)
    for name, ref in ctx.refs.items():
        if name in taken or name in graph.outputs or ref not in e.node_outputs or ref in mapping:
            continue
        mapping[ref] = name
    e.rename(mapping)


def _identity_to(ctx: ExportContext, src: str, name: str) -> None:
    from onnx import helper

    e = ctx.e
    e.nodes.append(helper.make_node("Identity", [src], [e.claim(name)], name=e.node_name(f"{name}/Identity")))
    e.meta[name] = e.meta[src]
    if src in e.kinds:
        e.kinds[name] = e.kinds[src]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("nnefx")
    except Exception:
        return "0"


def write_onnx(model: Model | Graph, path: str | os.PathLike, **options: Any) -> None:
    """Write ``model`` as an ONNX file at ``path`` (temporary beside it, then renamed)."""
    path = os.fspath(path)
    graph = model.graph if isinstance(model, Model) else model
    shaped = _export.graph_with_shapes(graph)
    if shaped is not graph:
        model = Model(shaped, model.format, model.source, model.extras) if isinstance(model, Model) else shaped
    proto = build(model, **options)
    _export.write_atomically([(path, proto.SerializeToString())])
