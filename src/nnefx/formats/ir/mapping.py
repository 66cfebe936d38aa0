"""The layer-mapping registry: how one IR layer becomes nnefx Operations.

Every IR layer type (per opset version, or for the legacy form) has one *mapping
function*.  The reader walks the layers in topological order and calls the mapping for
each, handing it a :class:`LayerContext`; the function emits Operations into the Graph
being built and returns one :class:`Value` per output port.  Mappings never see XML and
never touch the ``.bin`` directly: the context gives them parsed attributes, input values,
declared port dims and decoded blobs, and turns their mistakes into diagnostics that name
the layer (``layer 12 'conv1' (Convolution)``).

Mapping API (for ``opset.py`` here and the legacy catalog in ``nnefx.formats.ir.legacy``)::

    from nnefx.formats.ir.mapping import layer, fold, LayerContext, Value

    @layer("Convolution", versions=("opset1",))      # versions=None: any version
    def convolution(ctx: LayerContext) -> Value | list[Value]:
        strides = ctx.ints("strides")                 # '1,1' -> [1, 1]; required unless default=
        x = ctx.tensor(0)                             # graph tensor name of input port 0
        w = ctx.tensor(1)                             #   (constants are materialised on demand)
        (y,) = ctx.emit("conv", {"input": x, "filter": w, "bias": 0.0},
                        {"stride": strides, ...})
        return ctx.result(y)                          # Value for output port 0

Versions: v10/11 layers carry ``version="opsetN"`` (or ``"extension"``...); layers of the
legacy form (IR version <= 9, no ``version`` attribute) are looked up under the version
``"legacy"`` (TensorIterator/Loop/If bodies share their net's version).  Lookup tries the
exact version, then the ``versions=None`` fallback.  Type names are case-sensitive as in the
files (``ReLU``, ``SoftMax`` as OpenVINO writes them); register aliases by listing several
names: ``@layer(("Relu", "ReLU"), versions=...)``.  ``Parameter``/``Input``, ``Const`` and
``Result`` are handled by the reader itself (:mod:`.reader`) and never reach a mapping.

Values: an input is a :class:`Value` — a graph tensor (``value.tensor``), a constant known
while loading (``value.const``, a numpy array; Const layers and everything folded from
them), or a *symbolic* integer vector (``value.sym``: ints and :class:`Dim` entries, e.g.
the ShapeOf of a tensor with a dynamic batch, with ``value.lazy`` to compute it at run
time if a runtime tensor is ever needed).  Use ``ctx.const(i)``/``ctx.const_ints(i)``
where an input must be known at load time (axes, target shapes, pads), ``ctx.tensor(i)``
where a runtime tensor is needed (a constant is then written into the graph once, as a
``variable`` with data, or a small ``constant``), and ``ctx.folded(array)`` to return a
load-time constant without emitting anything.  ``Value(unsupported="why")`` marks an output
that cannot be produced (it raises only if something uses it).

Folding: ``@fold("Gather", versions=OPSETS)`` registers ``fn(ctx, arrays)`` for a type;
whenever every input of a layer is a constant (or symbolic) it is tried before the mapping
and returns the output arrays, or None to fall back to the mapping.  ``OPSETS`` means
every version but ``"legacy"``.  On symbolic inputs the arrays have dtype ``object``; a fold
that cannot handle a :class:`Dim` (arithmetic on an unknown extent) may raise, and the layer
is then mapped normally to run at run time.

Shapes: ``ctx.emit`` runs the registry shape rule of each emitted operation at once (an
NNEFXError from it is reported at the layer), and the reader compares every output's
inferred shape with the port's declared dims (and every input port's dims with the value
arriving on its edge), so each layer is checked as it is mapped (issue 6 item 4);
``ctx.in_shape(i)`` gives the best-known shape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Operation, Tensor
from ...ops.contract import Undecided
from .weights import Weights, element_type, nnef_dtype, unpack_binary_filter
from .xml import Layer, Port

MapFn = Callable[["LayerContext"], Any]
FoldFn = Callable[["LayerContext", list], Any]

_MAPPINGS: dict[tuple[str, str | None], MapFn] = {}
_FOLDS: dict[tuple[str, str | None], FoldFn] = {}


def layer(types: str | Iterable[str], versions: Iterable[str] | None = None) -> Callable[[MapFn], MapFn]:
    """Register a mapping function for IR layer type(s) and version(s) (None = any)."""
    names = (types,) if isinstance(types, str) else tuple(types)
    vers: tuple[str | None, ...] = (None,) if versions is None else tuple(versions)

    def deco(fn: MapFn) -> MapFn:
        for t in names:
            for v in vers:
                old = _MAPPINGS.get((t, v))
                if old is not None and old.__qualname__ == fn.__qualname__ and old.__module__ == fn.__module__:
                    continue  # the same module imported again (e.g. after a failed import)
                if old is not None:
                    raise ValueError(f"IR layer mapping for {t!r} version {v!r} is registered twice")
                _MAPPINGS[(t, v)] = fn
        return fn

    return deco


#: ``versions`` value meaning "every opset version" (any version but ``"legacy"``).
OPSETS = ("opset*",)


def fold(types: str | Iterable[str], versions: Iterable[str] | None = None) -> Callable[[FoldFn], FoldFn]:
    """Register a constant-folding function: ``fn(ctx, arrays) -> array | list | None``.

    ``versions`` works as for :func:`layer`, plus :data:`OPSETS` for every opset version.
    """
    names = (types,) if isinstance(types, str) else tuple(types)
    vers: tuple[str | None, ...] = (None,) if versions is None else tuple(versions)

    def deco(fn: FoldFn) -> FoldFn:
        for t in names:
            for v in vers:
                _FOLDS[(t, v)] = fn
        return fn

    return deco


_loaded = False


def _load_mappings() -> None:
    # Import the modules that register mappings, once; the legacy catalog is optional while
    # it is being written (its absence only means legacy layers are reported unsupported).
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import opset  # noqa: F401

    try:
        from . import legacy  # noqa: F401
    except ImportError:
        pass


def find_mapping(ltype: str, version: str | None) -> MapFn | None:
    _load_mappings()
    return _MAPPINGS.get((ltype, version)) or _MAPPINGS.get((ltype, None))


def find_fold(ltype: str, version: str | None = None) -> FoldFn | None:
    _load_mappings()
    keys = [(ltype, version)] + ([(ltype, OPSETS[0])] if version != "legacy" else []) + [(ltype, None)]
    for key in keys:
        if key in _FOLDS:
            return _FOLDS[key]
    return None


def registered_types() -> list[tuple[str, str | None]]:
    _load_mappings()
    return sorted(_MAPPINGS, key=lambda k: (k[0], k[1] or ""))


@dataclass
class Value:
    """What flows along one IR edge while the graph is built."""

    tensor: str | None = None
    const: np.ndarray | None = None
    #: IR element type (``f32``, ``i64``, ...) of the value.
    etype: str = "f32"
    #: Best-known shape: inferred, else declared by the producing port (None dims = dynamic).
    shape: tuple | None = None
    #: Name hint for a constant's graph tensor / variable label (the Const layer's name).
    label: str | None = None
    #: A partially known integer vector (object array of ints and :class:`Dim`), e.g. the
    #: ShapeOf of a tensor with a dynamic batch; ``lazy`` computes it at run time if needed.
    sym: np.ndarray | None = None
    lazy: Callable[[], str] | None = None
    #: Set when the value cannot be used (e.g. MaxPool indices): the reason, raised on use.
    unsupported: str | None = None
    #: The file's bytes behind a ``u1`` constant read straight from a Const: BinaryConvolution
    #: unpacks its filter from them in its own bit order (``weights.unpack_binary_filter``).
    packed: np.ndarray | None = None

    @property
    def is_const(self) -> bool:
        return self.const is not None


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def safe_label(name: str) -> str:
    """A variable label / identifier-ish version of ``name`` (NNEF label charset)."""
    s = re.sub(r"[^A-Za-z0-9_\-./]", "_", name).strip("/")
    # no '.'/'..' path segments: a label names a file inside the model folder
    parts = [p if p not in ("", ".", "..") else "_" for p in s.split("/")]
    return "/".join(parts) if s else "v"


class GraphBuilder:
    """Graph under construction plus the bookkeeping shared by all layers of one net."""

    #: Constants with at most this many items become ``constant`` ops; bigger ones ``variable``.
    SMALL_CONSTANT = 16

    def __init__(self, name: str, file: str | None, weights: Weights, ir_version: int):
        self.graph = Graph(name=name)
        self.file = file
        self.weights = weights
        self.ir_version = ir_version
        self._materialised: dict[int, tuple[np.ndarray, str]] = {}
        self._labels: set[str] = set()
        self._counter = 0

    def unique(self, hint: str) -> str:
        base = hint or "t"
        name = base
        while name in self.graph.tensors:
            self._counter += 1
            name = f"{base}_{self._counter}"
        return name

    def add_tensor(self, hint: str, dtype: str = "scalar", shape: tuple | None = None,
                   data: np.ndarray | None = None) -> str:
        name = self.unique(hint)
        self.graph.tensors[name] = Tensor(name, dtype, shape, data)
        return name

    def materialise(self, value: Value, hint: str, location: Location | None = None) -> str:
        """The graph tensor holding ``value``: constants are written into the graph once."""
        if value.tensor is not None:
            return value.tensor
        if value.unsupported:
            raise NNEFXError(value.unsupported, location)
        if value.const is None:
            assert value.lazy is not None
            value.tensor = value.lazy()
            return value.tensor
        key = id(value.const)
        hit = self._materialised.get(key)
        if hit is not None and hit[0] is value.const:
            return hit[1]
        hint = value.label or hint
        arr = storage_array(value.const, value.etype)
        dtype = nnef_dtype(value.etype)
        shape = tuple(int(d) for d in arr.shape)
        finite = arr.dtype.kind != "f" or bool(np.all(np.isfinite(arr)))
        if arr.size <= self.SMALL_CONSTANT and finite:  # NNEF text has no literal for inf/nan
            name = self.add_tensor(f"{hint}", dtype, shape)
            value_list = [v.item() for v in arr.reshape(-1)]
            op = Operation("constant", {}, {"output": name}, {"shape": list(shape), "value": value_list},
                           dtype=dtype, location=location)
        else:
            label = safe_label(hint)
            base, k = label, 0
            while label.lower() in self._labels:
                k += 1
                label = f"{base}_{k}"
            self._labels.add(label.lower())
            name = self.add_tensor(hint, dtype, shape, data=arr)
            op = Operation("variable", {}, {"output": name}, {"shape": list(shape), "label": label},
                           dtype=dtype, location=location)
        self.graph.operations.append(op)
        # keep the array alive with its name: ids of dead arrays get reused
        self._materialised[key] = (value.const, name)
        value.tensor = name
        return name


def storage_array(arr: np.ndarray, etype: str) -> np.ndarray:
    """How a constant is held in the graph: float32 (f64 stays f64), int64, bool."""
    a = np.asarray(arr)
    kind = nnef_dtype(etype)
    if kind == "scalar":
        dt = np.float64 if a.dtype == np.float64 else np.float32
    elif kind == "logical":
        dt = np.bool_
    else:
        dt = np.int64
    out = np.asarray(a, dtype=dt)  # no copy when it already fits: .bin weights stay memory-mapped
    if out.ndim and not out.flags.c_contiguous:
        out = np.ascontiguousarray(out)
    return out


def etype_of_array(arr: np.ndarray) -> str:
    dt = np.asarray(arr).dtype
    if dt == np.bool_:
        return "boolean"
    if dt.kind == "f":
        return {2: "f16", 4: "f32", 8: "f64"}[dt.itemsize]
    if dt.kind == "i":
        return f"i{dt.itemsize * 8}"
    if dt.kind == "u":
        return f"u{dt.itemsize * 8}"
    raise NNEFXError(f"unsupported constant data type {dt}")


@dataclass(frozen=True)
class Dim:
    """An unknown extent: dimension ``axis`` of graph tensor ``tensor`` (symbolic shapes)."""

    tensor: str
    axis: int

    def __repr__(self) -> str:
        return f"{self.tensor}.shape[{self.axis}]"


_ATTR_MISSING = object()


class LayerContext:
    """Everything a mapping function may use about the layer being mapped."""

    def __init__(self, builder: GraphBuilder, lay: Layer, values: list[Value], version: str):
        self.builder = builder
        self.layer = lay
        self.values = values
        self.version = version
        self.location = Location(builder.file, lay.line, None, lay.where())
        self.ops: list[Operation] = []

    # --- identity ------------------------------------------------------------------------
    @property
    def type(self) -> str:
        return self.layer.type

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def attrs(self) -> dict[str, str]:
        return self.layer.data

    def error(self, message: str) -> NNEFXError:
        return NNEFXError(message, self.location)

    # --- attributes ----------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.layer.data

    def _raw(self, key: str, default: Any) -> Any:
        if key in self.layer.data:
            return self.layer.data[key]
        if default is _ATTR_MISSING:
            raise self.error(f"missing attribute '{key}'")
        return default

    def str(self, key: str, default: Any = _ATTR_MISSING) -> str:
        v = self._raw(key, default)
        return v.strip() if isinstance(v, str) else v

    def choice(self, key: str, options: Iterable[str], default: Any = _ATTR_MISSING) -> str:
        v = self.str(key, default)
        opts = tuple(options)
        if isinstance(v, str) and v.lower() in opts:
            return v.lower()
        if v in opts:
            return v
        raise self.error(f"attribute '{key}' must be one of {', '.join(opts)}; got '{v}'")

    def int(self, key: str, default: Any = _ATTR_MISSING) -> int:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        try:
            return int(v.strip())
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                raise self.error(f"attribute '{key}' must be an integer, got '{v}'") from None
            if not math.isfinite(f) or f != int(f):
                raise self.error(f"attribute '{key}' must be an integer, got '{v}'") from None
            return int(f)

    def float(self, key: str, default: Any = _ATTR_MISSING) -> float:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        try:
            return float(v.strip())
        except ValueError:
            raise self.error(f"attribute '{key}' must be a number, got '{v}'") from None

    def bool(self, key: str, default: Any = _ATTR_MISSING) -> bool:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        t = v.strip().lower()
        if t in ("true", "1", "yes"):
            return True
        if t in ("false", "0", "no"):
            return False
        raise self.error(f"attribute '{key}' must be true or false, got '{v}'")

    def ints(self, key: str, default: Any = _ATTR_MISSING) -> list[int]:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        items = [s for s in v.replace(" ", "").split(",") if s != ""]
        try:
            return [int(s) for s in items]
        except ValueError:
            raise self.error(f"attribute '{key}' must be a list of integers, got '{v}'") from None

    def floats(self, key: str, default: Any = _ATTR_MISSING) -> list[float]:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        items = [s for s in v.replace(" ", "").split(",") if s != ""]
        try:
            return [float(s) for s in items]
        except ValueError:
            raise self.error(f"attribute '{key}' must be a list of numbers, got '{v}'") from None

    # --- inputs --------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.values)

    def expect_inputs(self, *counts: int) -> None:
        if len(self.values) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.error(f"expects {want} inputs, has {len(self.values)}")

    def input(self, i: int) -> Value:
        if i >= len(self.values):
            raise self.error(f"input {i} is missing (the layer has {len(self.values)} inputs)")
        return self.values[i]

    def is_const(self, i: int) -> bool:
        return self.input(i).is_const

    def const(self, i: int, what: str = "") -> np.ndarray:
        v = self.input(i)
        if v.const is None:
            raise self.error(f"input {i}{' (' + what + ')' if what else ''} must be a constant known when "
                             "the model is loaded; computing it at run time is not supported")
        return v.const

    def const_ints(self, i: int, what: str = "") -> list[int]:
        a = self.const(i, what)
        if a.dtype.kind not in "iub":
            if a.dtype.kind == "f" and np.all(np.floor(a) == a):
                return [int(x) for x in a.reshape(-1)]
            raise self.error(f"input {i}{' (' + what + ')' if what else ''} must hold integers")
        return [int(x) for x in a.reshape(-1)]

    def tensor(self, i: int) -> str:
        v = self.input(i)
        return self.builder.materialise(v, f"{self.name}_in{i}" if v.tensor is None else "", self.location)

    def tensor_of(self, value: Value, hint: str = "") -> str:
        return self.builder.materialise(value, hint or f"{self.name}_c", self.location)

    def in_shape(self, i: int) -> tuple | None:
        return self.input(i).shape

    def in_rank(self, i: int) -> int:
        s = self.in_shape(i)
        if s is None:
            raise self.error(f"the rank of input {i} is not known")
        return len(s)

    def in_etype(self, i: int) -> str:
        return self.input(i).etype

    def out_port(self, i: int = 0) -> Port:
        if i >= len(self.layer.outputs):
            raise self.error(f"output port {i} is missing")
        return self.layer.outputs[i]

    def out_dims(self, i: int = 0) -> tuple | None:
        return self.out_port(i).dims

    def out_etype(self, i: int = 0, default: str = "f32") -> str:
        if i < len(self.layer.outputs) and self.layer.outputs[i].precision:
            return element_type(self.layer.outputs[i].precision, self.location)
        return default

    def blob(self, name: str, shape: tuple | None = None, etype: str | None = None,
             required: bool = True) -> np.ndarray | None:
        """Decode a legacy blob (``weights``, ``biases``, ``custom``, ...) of this layer."""
        b = self.layer.blobs.get(name)
        if b is None:
            if required:
                raise self.error(f"missing <{name}> blob")
            return None
        et = element_type(etype or b.precision or self.layer.precision or "FP32", self.location)
        if shape is None:
            from .weights import ELEMENT_TYPES
            bits = ELEMENT_TYPES[et][1]
            if (b.size * 8) % bits:
                raise self.error(f"<{name}> blob size {b.size} is not a whole number of {et} elements")
            shape = ((b.size * 8) // bits,)
        loc = Location(self.builder.file, b.line, None, self.layer.where())
        return self.builder.weights.tensor(b.offset, b.size, et, tuple(shape), loc)

    # --- emitting --------------------------------------------------------------------------
    def emit(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, *,
             outputs: int | list[int] = 1, dtype: str | None = None, out_dtype: str | None = None,
             result_name: str = "output") -> list[str]:
        """Append an Operation; returns its output tensor names (in result order).

        ``inputs`` maps parameter names to tensor names or literals (in declaration order);
        ``outputs`` is the number of results, or for a ``tensor[]`` result a one-item list
        with the array length.  Result parameter names come from the registry declaration.
        ``dtype`` is the generic data type (NNEF ``<?>``); ``out_dtype`` the data type of the
        results (defaults to ``dtype`` or ``scalar``).
        """
        result_names = _result_names(op, result_name)
        kind = out_dtype or dtype or "scalar"
        outs: dict[str, Any] = {}
        flat: list[str] = []
        if isinstance(outputs, list):
            names = [self.builder.add_tensor(f"{self.name}_{op}", kind) for _ in range(outputs[0])]
            outs[result_names[0]] = names
            flat = names
        else:
            for k in range(outputs):
                rn = result_names[k] if k < len(result_names) else f"result{k}"
                n = self.builder.add_tensor(f"{self.name}_{op}", kind)
                outs[rn] = n
                flat.append(n)
        operation = Operation(op, dict(inputs), outs, dict(attribs or {}), dtype=dtype, location=self.location)
        self.builder.graph.operations.append(operation)
        self.ops.append(operation)
        infer_operation(self.builder.graph, operation)
        return flat

    def emit1(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, **kw: Any) -> str:
        return self.emit(op, inputs, attribs, **kw)[0]

    def result(self, tensor: str, etype: str | None = None, port: int = 0) -> Value:
        """The Value of output ``port`` held in graph tensor ``tensor``."""
        t = self.builder.graph.tensors[tensor]
        et = etype or self.out_etype(port, default=_etype_for(t.dtype))
        return Value(tensor=tensor, etype=et, shape=t.shape)

    def folded(self, array: Any, etype: str | None = None) -> Value:
        """A load-time constant result (nothing is emitted unless someone needs a tensor)."""
        arr = np.asarray(array)
        et = etype or etype_of_array(arr)
        return Value(const=arr, etype=et, shape=tuple(int(d) for d in arr.shape))


def binary_filter(ctx: LayerContext, value: Value) -> np.ndarray:
    """The 0/1 values (float32, ``value.shape``) of a load-time BinaryConvolution filter.

    A ``u1`` filter is unpacked from the file's bytes least significant bit first, the order
    of every real file and plugin (:func:`.weights.unpack_binary_filter` cites them), not by
    the generic ``u1`` element order its Const was decoded with; other element types hold
    the 0/1 values themselves.
    """
    assert value.const is not None
    if value.etype != "u1":
        return np.asarray(value.const, dtype=np.float32)
    if value.packed is None:
        raise ctx.error("a packed (u1) filter must come straight from a Const: its bit order is only "
                        "known for the file's bytes")
    count = int(np.prod(value.const.shape, dtype=np.int64))
    return unpack_binary_filter(value.packed, count).astype(np.float32).reshape(value.const.shape)


def _etype_for(dtype: str) -> str:
    return {"scalar": "f32", "integer": "i64", "logical": "boolean"}.get(dtype, "f32")


_RESULT_NAMES: dict[str, list[str]] = {}


def _result_names(op: str, default: str) -> list[str]:
    if op in _RESULT_NAMES:
        return _RESULT_NAMES[op]
    from ...ops import registry
    from ...ops.signature import signature

    entry = registry.find(op)
    sig = signature(entry.declaration) if entry is not None else None
    names = [r.name for r in sig.results] if sig is not None and sig.results else [default]
    _RESULT_NAMES[op] = names
    return names


_PARAMS: dict[str, list[str]] = {}


def tensor_params(op: str) -> list[str] | None:
    """Names of the tensor parameters of ``op`` in declaration order (from the registry).

    Read by :mod:`nnefx.ops.signature`, as the planner's, so the importer and the planner
    agree on the order in which an operation takes its tensors.
    """
    if op in _PARAMS:
        return _PARAMS[op]
    from ...ops import registry
    from ...ops.signature import signature

    entry = registry.find(op)
    if entry is None:
        return None
    sig = signature(entry.declaration)
    params = [p.name for p in sig.tensor_params] if sig is not None else []
    _PARAMS[op] = params
    return params


def infer_operation(graph: Graph, op: Operation) -> None:
    """Run the registry shape rule of ``op`` and store result shapes on its tensors.

    A shape rule that rejects the operation (NNEFXError) is a real error in the model and is
    reported at the operation's layer; a rule that is missing, or cannot handle unknown
    dimensions, leaves the shapes unknown (the port's declared dims are used instead).
    """
    from ...ops import registry

    entry = registry.find(op.op)
    if entry is None or entry.shape_rule is None:
        return
    params = tensor_params(op.op) or list(op.inputs)
    args = []
    for p in params:
        v = op.inputs.get(p, None)
        if isinstance(v, list):
            shapes = [_shape_of(graph, x) for x in v]
            if any(s is None for s in shapes):
                return
            args.append(shapes)
        elif p not in op.inputs:
            args.append(())
        else:
            s = _shape_of(graph, v)
            if s is None:
                return
            args.append(s)
    dynamic = any(d is None for shape in _flat_shapes(args) for d in shape)
    try:
        results = entry.infer(args, op.attribs, op.dtype or "scalar")
    except Undecided:
        return  # a rule that cannot decide with unknown extents: checked at run time
    except NNEFXError as exc:
        if dynamic:
            return
        # With every extent known a failing rule is a bug or a bad layer: never leave the
        # shape silently unknown.
        raise NNEFXError(f"{op.op}: {exc.message}", op.location) from None
    outs = list(op.outputs.values())
    for value, shape in zip(outs, results, strict=False):
        if isinstance(value, list):
            for name, s in zip(value, shape if isinstance(shape, list) else [], strict=False):
                graph.tensors[name].shape = tuple(s)
        elif isinstance(value, str) and shape is not None:
            graph.tensors[value].shape = tuple(shape)


def _flat_shapes(args: list) -> list[tuple]:
    out = []
    for a in args:
        if isinstance(a, list):
            out.extend(a)
        else:
            out.append(a)
    return out


def _shape_of(graph: Graph, v: Any) -> tuple | None:
    if isinstance(v, str):
        t = graph.tensors.get(v)
        return None if t is None else t.shape
    if isinstance(v, (bool, int, float)):
        return ()
    return None
