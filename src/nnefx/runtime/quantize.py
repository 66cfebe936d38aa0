"""Simulated quantization: apply ``graph.quant`` entries of activations while running.

A ``graph.quant`` entry on an activation (or on a variable stored as real numbers) is a
run-time hint: the tensor is to be quantized right after it is produced (nnef-binary.md §7,
spec 7.1).  ``Session(model, quantize=True)`` does this by rewriting the graph before
planning: after each such tensor ``t`` it inserts the entry's operation
(``zero_point_linear_quantize(t, ...)`` and the like — ordinary registry operations with
formal and fast kernels) and makes every reader of ``t`` read the quantized copy instead.
Variables stored as quantized codes are already on the quantization grid once read, so they
are left alone.  Nothing changes when the flag is off: a float run of a quantized model is
what most tools do by default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Graph, Operation, Tensor
from ..ops.registry import OpDef
from ..ops.signature import signature
from .signature import tensor_params


def quantization_targets(graph: Graph) -> dict[str, dict[str, Any]]:
    """The tensors whose ``graph.quant`` entry simulated quantization applies, with the entry."""
    targets: dict[str, dict[str, Any]] = {}
    for name, tensor in graph.tensors.items():
        if not tensor.quant or tensor.dtype != "scalar":
            continue
        if tensor.data is not None and np.asarray(tensor.data).dtype.kind in "iu":
            continue  # quantized codes: the values read are already quantized
        targets[name] = tensor.quant
    return targets


def quantized_graph(graph: Graph, resolve: Any) -> Graph:
    """A copy of ``graph`` with a pseudo-quantization operation after every hinted tensor."""
    targets = quantization_targets(graph)
    if not targets:
        return graph
    tensors = dict(graph.tensors)
    renamed: dict[str, str] = {}  # external/variable -> its quantized copy, for readers
    operations: list[Operation] = []

    def fresh(base: str, suffix: str) -> str:
        name = f"{base}__{suffix}"
        while name in tensors:
            name += "_"
        return name

    def reread(value: Any) -> Any:
        if isinstance(value, str):
            return renamed.get(value, value)
        if isinstance(value, list):
            return [reread(v) for v in value]
        if isinstance(value, tuple):
            return tuple(reread(v) for v in value)
        return value

    for op in graph.operations:
        inputs = {k: reread(v) for k, v in op.inputs.items()}
        if op.op == "update":
            first = next(iter(op.inputs))
            inputs[first] = op.inputs[first]  # the variable itself, never a quantized copy
        op = dataclasses.replace(op, inputs=inputs)
        hinted = [n for n in op.output_names() if n in targets] if op.op != "update" else []
        if not hinted:
            operations.append(op)
            continue
        if op.op in ("external", "variable"):
            # Names of inputs and variables are part of the model's interface: keep them and
            # let later readers see a quantized copy instead.
            operations.append(op)
            for out in hinted:
                copy = fresh(out, "quantized")
                tensors[copy] = Tensor(copy, tensors[out].dtype, tensors[out].shape)
                operations.extend(_quantize_ops(op, out, copy, targets[out], tensors, resolve))
                renamed[out] = copy
            continue
        # Any other producer writes a raw tensor; the quantization writes the original name.
        raw_of = {out: fresh(out, "raw") for out in hinted}
        for out, raw in raw_of.items():
            tensors[raw] = dataclasses.replace(tensors[out], name=raw, quant=None)

        def rename(value: Any, raw_of: dict[str, str] = raw_of) -> Any:
            if isinstance(value, str):
                return raw_of.get(value, value)
            if isinstance(value, list):
                return [rename(v) for v in value]
            return value

        operations.append(dataclasses.replace(op, outputs={k: rename(v) for k, v in op.outputs.items()}))
        for out, raw in raw_of.items():
            operations.extend(_quantize_ops(op, raw, out, targets[out], tensors, resolve))
    return dataclasses.replace(graph, tensors=tensors, operations=operations)


def _quantize_ops(producer: Operation, source: str, target: str, quant: dict[str, Any],
                  tensors: dict[str, Tensor], resolve: Any) -> list[Operation]:
    name = str(quant.get("op_name", ""))
    try:
        opdef: OpDef = resolve(name)
    except NNEFXError:
        raise NNEFXError(f"tensor '{source}' asks for unknown quantization '{name}'", producer.location) from None
    params = tensor_params(opdef.declaration) or ()
    tensor_names = [p.name for p in params]
    if not tensor_names:
        raise NNEFXError(f"'{name}' is not a quantization operation", producer.location)
    ops: list[Operation] = []
    inputs: dict[str, Any] = {tensor_names[0]: source}
    attribs: dict[str, Any] = {}
    for p in params[1:]:
        if p.name not in quant:
            continue
        value = quant[p.name]
        if isinstance(value, (list, tuple)):
            # a per-channel array: a constant aligned from dimension 0
            const = f"{target}__{p.name}"
            while const in tensors:
                const += "_"
            tensors[const] = Tensor(const, p.dtype or "scalar", (len(value),))
            ops.append(Operation("constant", {}, {"output": const}, {"shape": [len(value)], "value": list(value)},
                                 dtype=p.dtype or "scalar", location=producer.location))
            inputs[p.name] = const
        else:
            inputs[p.name] = value
    for key, value in quant.items():
        if key != "op_name" and key not in tensor_names:
            attribs[key] = value
    result = _first_result(opdef)
    ops.append(Operation(name, inputs, {result: target}, attribs, location=producer.location))
    return ops


def _first_result(opdef: OpDef) -> str:
    sig = signature(opdef.declaration)
    return sig.results[0].name if sig is not None and sig.results else "y"
