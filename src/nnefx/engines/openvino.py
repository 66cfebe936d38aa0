"""OpenVINO as an nnefx backend: the graph through nnefx's IR v11 exporter, compiled for the CPU plugin."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from ..diagnostics import NNEFXError
from ..graph import Graph, Model
from .base import Engine, Problem, exporter_problems
from .loaded import OV_PRECISIONS as PRECISIONS
from .loaded import OvImported, OvRequest, engine_version, port_name


class OpenVinoEngine(Engine):
    name = "openvino"
    extra = "openvino"
    via = "IR v11"

    def module(self) -> Any:
        return self._import("openvino")

    def version(self) -> str:
        return engine_version(self.name, self.module())

    def problems(self, graph: Graph) -> list[Problem]:
        from ..formats.ir import save

        return _saturating(graph) or exporter_problems(graph, save, ".xml", "IR v11")

    def compile(self, graph: Graph, *, threads: int, precision: str, device: str) -> Any:
        ov = self.module()
        from ..formats.ir import save

        if device != "cpu":
            raise NNEFXError(f"backend 'openvino' runs on the CPU here, not on '{device}'")
        saturating = _saturating(graph)
        if saturating:
            raise NNEFXError(f"{saturating[0].operation}: {saturating[0].reason}", saturating[0].location)
        if precision not in PRECISIONS:
            raise NNEFXError(f"backend 'openvino' knows precisions {', '.join(PRECISIONS)}, not '{precision}'")
        core = ov.Core()
        if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
            raise NNEFXError("backend 'openvino' cannot compute in bf16 on this CPU (no bf16 units)")
        with tempfile.TemporaryDirectory(prefix="nnefx-ov-") as tmp:
            path = os.path.join(tmp, "model.xml")
            save(Model(graph), path)
            model = core.read_model(path)
            try:
                compiled = core.compile_model(model, "CPU", compile_config(threads, precision))
            except RuntimeError as exc:
                raise NNEFXError(f"OpenVINO refused the exported model ({str(exc).splitlines()[0]})") from None
        return OvModel(compiled, graph)


def compile_config(threads: int, precision: str) -> dict[str, Any]:
    """The CPU plugin's settings for one model: one stream of ``threads`` threads run for the
    latency of one request, the precision hint explicit (on CPUs with bf16 units the plugin's
    default is bf16)."""
    return {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": PRECISIONS[precision],
            "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}


#: Integer element types whose arithmetic OpenVINO's CPU plugin saturates (i8 100 * 3 gives 127)
#: where the graph wraps around (ONNX and the opsets' fixed-width integers; nnefx's contract).
SATURATED = ("i8", "u8", "i16", "u16")
#: Operations that move or pick items without computing new ones (no overflow to differ on).
MOVING = {"external", "variable", "constant", "copy", "reshape", "squeeze", "unsqueeze", "transpose", "concat",
          "split", "stack", "unstack", "slice", "tile", "pad", "select", "gather", "max", "min", "gt", "lt", "ge",
          "le", "eq", "ne"}


def _saturating(graph: Graph) -> list[Problem]:
    """Operations computing narrow integers, which the CPU plugin saturates instead of wrapping."""
    found = []
    for op in graph.operations:
        if op.op in MOVING:
            continue
        for name in op.output_names():
            t = graph.tensors.get(name)
            if t is not None and t.etype in SATURATED:
                found.append(Problem(op.op, op.location, f"OpenVINO's CPU plugin saturates {t.etype} arithmetic "
                                                         f"where the graph wraps around ('{name}')"))
                break
    return found


class OvModel(OvRequest):
    """A compiled OpenVINO model with nnefx's input and output names."""

    def __init__(self, compiled: Any, graph: Graph):
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        self.inputs = [port_name(p, graph.inputs, k) for k, p in enumerate(compiled.inputs)]
        if len(compiled.outputs) != len(graph.outputs):
            raise NNEFXError(f"the OpenVINO model has {len(compiled.outputs)} outputs, the graph "
                             f"{len(graph.outputs)}")
        self.outputs = [port_name(p, graph.outputs, k) for k, p in enumerate(compiled.outputs)]


__all__ = ["PRECISIONS", "OpenVinoEngine", "OvImported", "OvModel"]
