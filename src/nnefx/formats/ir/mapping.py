"""How one IR layer is read: the IR's view of the format-neutral import layer.

Every IR layer type (per opset version, or for the legacy form) has one reader.  The
numpy-style opset layers are read by the operator readers of the family modules
(``nnefx/formats/families/``, registered with :func:`~nnefx.formats.reading.registry.operator`);
IR-only layers (the legacy catalog, sub-networks, BinaryConvolution) by readers registered with
:func:`layer` (:func:`~nnefx.formats.reading.registry.ir_layer`) in ``legacy*.py`` and
``opset_ir.py``.  The reader (:mod:`.reader`) walks the layers in topological order and calls
the reader of each with a :class:`LayerContext` — a
:class:`~nnefx.formats.reading.context.NodeContext` built from the layer, plus its blobs —
which emits registry operations and returns one
:class:`~nnefx.formats.reading.values.Value` per output port.  Readers never see XML and
never touch the ``.bin`` directly, and their mistakes become diagnostics that name the layer
(``layer 12 'conv1' (Convolution)``)::

    from nnefx.formats.reading.registry import operator

    @operator("Convolution", versions=("opset1",))    # versions=None: any version
    def convolution(ctx) -> Value | list[Value]:
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
files (``ReLU``, ``SoftMax`` as OpenVINO writes them).  ``Parameter``/``Input``, ``Const`` and
``Result`` are handled by the reader itself and never reach a reader.

Values, folding (``@fold``: tried whenever every input is a constant or symbolic), symbolic
dims and shape inference are the neutral layer's (:mod:`nnefx.formats.reading`); the
reader also compares every output's inferred shape with the port's declared dims (and every
input port's dims with the value arriving on its edge), so each layer is checked as it is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...diagnostics import Location
from ..reading.context import NodeContext
from ..reading.graph import ImportGraph
from ..reading.registry import OPSETS, find_ir_layer, fold, ir_types
from ..reading.registry import find_fold as _find_fold
from ..reading.registry import ir_layer as layer
from ..reading.shapes import tensor_params
from ..reading.values import Dim, Value, etype_of_array, safe_label, storage_array
from .weights import Weights, element_type, unpack_binary_filter
from .xml import Layer, Port

__all__ = ["OPSETS", "Dim", "LayerContext", "NetGraph", "Value", "binary_filter", "etype_of_array", "find_fold",
           "find_mapping", "fold", "layer", "registered_types", "safe_label", "storage_array", "tensor_params"]

MapFn = Any

_loaded = False


def _load_ir_readers() -> None:
    # The IR-only readers live in this package: imported once, beside the families.
    global _loaded
    if _loaded:
        return
    from . import legacy, opset_ir  # noqa: F401 - (a failed import is retried by the next lookup)

    _loaded = True


def find_mapping(ltype: str, version: str | None) -> MapFn | None:
    _load_ir_readers()
    return find_ir_layer(ltype, version)


def find_fold(ltype: str, version: str | None = None) -> MapFn | None:
    _load_ir_readers()
    return _find_fold(ltype, version)


def registered_types() -> list[tuple[str, str | None]]:
    _load_ir_readers()
    return ir_types()


class NetGraph(ImportGraph):
    """The graph of one IR network under construction, with its weights file."""

    def __init__(self, name: str, file: str | None, weights: Weights, ir_version: int):
        super().__init__(name, file, concrete=ir_version >= 10)
        self.weights = weights
        self.ir_version = ir_version


class LayerContext(NodeContext):
    """Everything a reader may use about the IR layer being read (its blobs included)."""

    def __init__(self, builder: NetGraph, lay: Layer, values: list[Value], version: str):
        super().__init__(builder, lay.type, lay.name, lay.data, values, version,
                         Location(builder.file, lay.line, None, lay.where()),
                         out_dims=[p.dims for p in lay.outputs], where=lay.where())
        self.layer = lay

    def out_port(self, i: int = 0) -> Port:
        if i >= len(self.layer.outputs):
            raise self.error(f"output port {i} is missing")
        return self.layer.outputs[i]

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
