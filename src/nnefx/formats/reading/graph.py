"""The graph under construction while a model file is imported: :class:`ImportGraph`.

Every reader owns one: it names tensors uniquely, and writes load-time constants into the
graph once, on first use (small ones as ``constant`` operations, the rest as ``variable``
operations with data).  Not to be confused with :class:`nnefx.io.builder.GraphBuilder`, which
writes NNEF text from Python calls.
"""

from __future__ import annotations

import numpy as np

from ... import etypes
from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Operation, Tensor
from ...ops.onnx.tensors import cast
from .values import Value, nnef_dtype, safe_label, storage_array, tensor_etype


class ImportGraph:
    """Graph under construction plus the bookkeeping shared by all nodes of one model."""

    #: Constants with at most this many items become ``constant`` ops; bigger ones ``variable``.
    SMALL_CONSTANT = 16

    def __init__(self, name: str, file: str | None, concrete: bool = False):
        self.graph = Graph(name=name)
        #: Record each tensor's concrete element type (:attr:`nnefx.graph.Tensor.etype`) and
        #: keep constants in it, so the graph computes in the file's types (an int8 ``Add``
        #: returns int8).  Readers whose files declare every element type (ONNX) set it.
        self.concrete = concrete
        self.file = file
        self._materialised: dict[int, tuple[np.ndarray, str]] = {}
        self._labels: set[str] = set()
        self._counter = 0

    @classmethod
    def continuing(cls, graph: Graph, file: str | None, concrete: bool = False) -> ImportGraph:
        """A builder adding to ``graph``'s tensors (new operations are collected in a graph of
        their own, sharing the tensors), e.g. to read a deferred node once its values are known."""
        b = cls.__new__(cls)
        b.graph = Graph(name=graph.name, tensors=graph.tensors)
        b.concrete = concrete
        b.file = file
        b._materialised = {}
        b._labels = {str(op.attribs.get("label", "")).lower() for op in graph.operations if op.op == "variable"}
        b._counter = 0
        return b

    def checkpoint(self, values: list[Value | None]) -> tuple:
        """What :meth:`restore` needs to undo a node's partial reading (``values``: its inputs)."""
        return (len(self.graph.operations), set(self.graph.tensors), set(self._materialised), set(self._labels),
                [(v, v.tensor) for v in values if v is not None])

    def restore(self, checkpoint: tuple) -> None:
        """Forget what was added since :meth:`checkpoint`."""
        n_ops, tensors, materialised, labels, values = checkpoint
        del self.graph.operations[n_ops:]
        for name in [t for t in self.graph.tensors if t not in tensors]:
            del self.graph.tensors[name]
        for key in [k for k in self._materialised if k not in materialised]:
            del self._materialised[key]
        self._labels = labels
        for v, tensor in values:
            v.tensor = tensor

    def unique(self, hint: str) -> str:
        base = hint or "t"
        name = base
        while name in self.graph.tensors:
            self._counter += 1
            name = f"{base}_{self._counter}"
        return name

    def add_tensor(self, hint: str, dtype: str = "scalar", shape: tuple | None = None,
                   data: np.ndarray | None = None, etype: str | None = None) -> str:
        name = self.unique(hint)
        self.graph.tensors[name] = Tensor(name, dtype, shape, data, etype=etype if self.concrete else None)
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
        dtype = nnef_dtype(value.etype)
        etype = tensor_etype(value.etype) if self.concrete else None
        if etype == "string":  # str items, held as data (an NNEF constant's value list holds numbers)
            arr = np.asarray(value.const, dtype=object)
        elif etype is not None:
            arr = cast(np.asarray(value.const), etypes.numpy_dtype(etype))
            if arr.ndim and not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
        else:
            arr = storage_array(value.const, value.etype)
        shape = tuple(int(d) for d in arr.shape)
        # NNEF text has no literal for inf/nan; checked on small constants only (a pass over
        # large weights would read every page of a memory-mapped file while loading)
        if arr.size <= self.SMALL_CONSTANT and arr.dtype != object and (arr.dtype.kind not in "fV" or bool(np.all(np.isfinite(arr.astype(np.float64))))):
            name = self.add_tensor(f"{hint}", dtype, shape, etype=etype)
            value_list = [v.item() for v in (arr.astype(np.float64 if dtype == "scalar" else np.int64) if arr.dtype.kind == "V" else arr).reshape(-1)]
            op = Operation("constant", {}, {"output": name}, {"shape": list(shape), "value": value_list},
                           dtype=dtype, location=location)
        else:
            label = safe_label(hint)
            base, k = label, 0
            while label.lower() in self._labels:
                k += 1
                label = f"{base}_{k}"
            self._labels.add(label.lower())
            name = self.add_tensor(hint, dtype, shape, data=arr, etype=etype)
            op = Operation("variable", {}, {"output": name}, {"shape": list(shape), "label": label},
                           dtype=dtype, location=location)
        self.graph.operations.append(op)
        # keep the array alive with its name: ids of dead arrays get reused
        self._materialised[key] = (value.const, name)
        value.tensor = name
        return name
