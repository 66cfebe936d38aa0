"""The graph under construction while a model file is imported: :class:`ImportGraph`.

Every reader owns one: it names tensors uniquely, and writes load-time constants into the
graph once, on first use (small ones as ``constant`` operations, the rest as ``variable``
operations with data).  Not to be confused with :class:`nnefx.io.builder.GraphBuilder`, which
writes NNEF text from Python calls.
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Operation, Tensor
from .values import Value, nnef_dtype, safe_label, storage_array


class ImportGraph:
    """Graph under construction plus the bookkeeping shared by all nodes of one model."""

    #: Constants with at most this many items become ``constant`` ops; bigger ones ``variable``.
    SMALL_CONSTANT = 16

    def __init__(self, name: str, file: str | None):
        self.graph = Graph(name=name)
        self.file = file
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
