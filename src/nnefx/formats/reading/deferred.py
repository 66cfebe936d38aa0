"""What every reader's deferred node shares (:class:`nnefx.graph.Deferred`): the results of a
node read again once its run-time values are known, written into the tensors the deferred
operation declared, so the rest of the graph reads them under the same names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Operation
from .graph import ImportGraph
from .values import Value


def bind_results(builder: ImportGraph, outs: list[Value], outputs: list[str | None], loc: Location) -> list[Operation]:
    """The operations ``builder`` collected, with result ``k`` of the node (``outs[k]``) written
    into tensor ``outputs[k]`` of the deferred operation (None: an output the file leaves
    unnamed): the producing operation renamed where it made the tensor, else a ``copy``."""
    graph = builder.graph
    ops = graph.operations
    produced = {n for op in ops for n in op.output_names()}
    renamed: set[str] = set()
    for k, name in enumerate(outputs):
        if name is None:
            continue
        if k >= len(outs) or outs[k].unsupported:
            why = outs[k].unsupported if k < len(outs) else None
            raise NNEFXError(why or f"output {k} is not supported", loc)
        v = outs[k]
        want = graph.tensors[name].dtype
        if v.tensor is not None and v.tensor in produced and v.tensor not in renamed:
            src = graph.tensors.pop(v.tensor)
            if src.dtype != want:
                raise NNEFXError(f"internal: output {k} is {src.dtype}, declared {want}", loc)
            graph.tensors[name] = type(src)(name, src.dtype, src.shape, src.data, src.quant, src.etype)
            _rename(ops, v.tensor, name)
            renamed.add(name)
            continue
        src_name = builder.materialise(v, f"{name}_value", loc)
        src = graph.tensors[src_name]
        if src.dtype != want:
            raise NNEFXError(f"internal: output {k} is {src.dtype}, declared {want}", loc)
        graph.tensors[name].shape = src.shape
        ops.append(Operation("copy", {"x": src_name}, {"y": name}, {}, dtype=src.dtype, location=loc))
    return ops


def _rename(ops: list[Operation], old: str, new: str) -> None:
    def sub(v: Any) -> Any:
        if isinstance(v, str):
            return new if v == old else v
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        return v

    for op in ops:
        op.inputs = {k: sub(v) for k, v in op.inputs.items()}
        op.outputs = {k: sub(v) for k, v in op.outputs.items()}


def describe_values(values: Mapping[str, np.ndarray]) -> str:
    """The values a node was read with, for its messages (``'axes' = [5]``)."""
    parts = []
    for name, a in values.items():
        a = np.asarray(a)
        text = str(a.tolist()) if a.size <= 16 else np.array2string(a, threshold=16, separator=", ")
        parts.append(f"'{name}' = {text}")
    return ", ".join(parts)


def describe_run(values: Mapping[str, np.ndarray], shapes: Mapping[str, Any]) -> str:
    """What a node was read with at run time, for its messages: the values of ``values`` and
    the shapes of ``shapes`` (inputs whose extents only the run told)."""
    parts = []
    if values or not shapes:
        parts.append(f"run-time values: {describe_values(values)}")
    if shapes:
        parts.append("run-time shapes: " + ", ".join(
            f"'{name}' {'?' if shape is None else list(shape)}" for name, shape in shapes.items()))
    return "; ".join(parts)
