"""IR layers whose parameters are computed at run time: read again once their values are known.

A layer reader that needs the value of an input (``ReduceSum`` axes, ``Pad`` pads,
``Interpolate`` sizes, ...) and finds a tensor computed at run time there raises
:class:`~nnefx.graph.ValueNeeded`.  The IR reader then undoes what the layer had emitted and
writes one :class:`~nnefx.graph.Deferred` operation instead (:func:`defer_layer`), whose results
are the layer's output ports (element types and dims as the ports declare them); its ``build``
(:class:`ReadLayerAgain`) runs the same mapping on the same layer with those inputs as
constants when a session knows their values (:mod:`nnefx.runtime.values`) — exactly the
operations a file with those constants would have given.  As for ONNX nodes
(:mod:`nnefx.formats.onnx.deferred`), a layer that fails while an input's extents come from a
deferred layer is deferred too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ... import etypes
from ...diagnostics import NNEFXError
from ...graph import DEFERRED, Deferred, Graph, Operation, ValueNeeded
from ..reading.deferred import bind_results, describe_values
from .mapping import LayerContext, NetGraph, Value
from .weights import Weights, nnef_dtype
from .xml import Layer


def defer_layer(reader: Any, lay: Layer, fn: Callable[..., Any], version: str, values: list[Value],
                needed: list[int], waiting: list[int]) -> list[Value]:
    """Layer ``lay`` as one deferred operation, needing the values of inputs ``needed`` and the
    shapes of inputs ``waiting`` (positions); its output Values (the ports' declared dims)."""
    builder: NetGraph = reader.builder
    loc = reader.loc(lay)
    names = [builder.materialise(v, f"{lay.name}_in{k}", loc) for k, v in enumerate(values)]
    outs: list[str] = []
    results: list[Value] = []
    for i, port in enumerate(lay.outputs):
        etype = reader.port_etype(lay, port)
        shape = None if port.dims is None else tuple(port.dims)
        name = builder.add_tensor(reader.port_name(lay, i), nnef_dtype(etype), shape)
        outs.append(name)
        results.append(Value(tensor=name, etype=etype, shape=shape))
    again = ReadLayerAgain(fn, lay, version, builder.file, builder.weights, builder.ir_version, names,
                           [v.etype for v in values], outs)
    record = Deferred(kind=lay.type, where=lay.where(), values=[names[k] for k in needed], build=again,
                      format="ir", source=None, shapes=[names[k] for k in waiting])
    builder.graph.operations.append(Operation(DEFERRED, {"input": names}, {"output": outs}, {"node": record},
                                              location=loc))
    return results


class ReadLayerAgain:
    """``Deferred.build`` of an IR layer: its mapping run again with the values known."""

    def __init__(self, fn: Callable[..., Any], lay: Layer, version: str, file: str | None, weights: Weights,
                 ir_version: int, inputs: list[str], etypes: list[str], outputs: list[str]):
        self.fn, self.lay, self.version, self.file = fn, lay, version, file
        self.weights, self.ir_version = weights, ir_version
        self.inputs, self.etypes, self.outputs = inputs, etypes, outputs

    def __call__(self, graph: Graph, values: Mapping[str, np.ndarray]) -> list[Operation]:
        builder = NetGraph.continuing(graph, self.file, concrete=self.ir_version >= 10)  # as the reader's
        builder.weights, builder.ir_version = self.weights, self.ir_version
        ins = []
        for k, (name, etype) in enumerate(zip(self.inputs, self.etypes, strict=True)):
            if name in values:
                arr = np.asarray(values[name])
                try:
                    arr = arr.astype(etypes.numpy_dtype("bool" if etype == "boolean" else etype), copy=False)
                except NNEFXError:
                    pass
                ins.append(Value(const=arr, etype=etype, shape=tuple(arr.shape), label=f"{name}_value{k}"))
            else:
                ins.append(Value(tensor=name, etype=etype, shape=graph.tensors[name].shape))
        ctx = LayerContext(builder, self.lay, ins, self.version)
        try:
            res = self.fn(ctx)
        except ValueNeeded:
            raise
        except NNEFXError as exc:
            raise NNEFXError(f"{exc.message} (run-time values: {describe_values(values)})", ctx.location) from None
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, AttributeError, KeyError) as exc:
            raise NNEFXError(f"invalid layer for the run-time values {describe_values(values)}: {exc}",
                             ctx.location) from None
        outs = res if isinstance(res, list) else [res]
        return bind_results(builder, outs, list(self.outputs), ctx.location)
