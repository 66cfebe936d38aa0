"""onnxruntime as an nnefx backend: the graph through nnefx's ONNX exporter, run by ORT's CPU provider."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ..graph import Graph, Model
from .base import Engine, Problem, exporter_problems
from .loaded import OrtLoaded, contiguous
from .loaded import ort_session_options as session_options


class OnnxRuntimeEngine(Engine):
    name = "onnxruntime"
    extra = "onnxruntime"
    via = "ONNX"

    def module(self) -> Any:
        return self._import("onnxruntime")

    def require(self) -> Any:
        # Building a model needs the exporter's onnx package too; loading a compiled model
        # (onnxruntime's own file) does not, and skips its import (0.05-0.2 s).
        self._import("onnx")
        return self.module()

    def problems(self, graph: Graph) -> list[Problem]:
        from ..formats.onnx import save

        return exporter_problems(graph, save, ".onnx", "ONNX")

    def compile(self, graph: Graph, *, threads: int, precision: str, device: str) -> Any:
        ort = self.require()
        from ..diagnostics import NNEFXError
        from ..formats.onnx import save

        if device != "cpu":
            raise NNEFXError(f"backend 'onnxruntime' runs on the CPU here, not on '{device}'")
        if precision != "f32":
            raise NNEFXError(f"backend 'onnxruntime' computes in full precision only (asked for {precision})")
        with tempfile.TemporaryDirectory(prefix="nnefx-ort-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            save(Model(graph), path)
            with open(path, "rb") as f:
                data = f.read()
        return OrtModel(ort, data, graph, threads)


class OrtModel:
    """An ``InferenceSession`` with nnefx's input and output names."""

    def __init__(self, ort: Any, data: bytes, graph: Graph, threads: int, options: Any = None):
        from ..diagnostics import NNEFXError

        self.source_bytes = data
        try:
            self.session = ort.InferenceSession(data, options or session_options(ort, threads),
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types
            raise NNEFXError(f"onnxruntime refused the exported model ({str(exc).splitlines()[0]})") from None
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.graph_outputs = list(graph.outputs)

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self.session.run(None, {n: contiguous(feeds[n]) for n in self.inputs})
        return dict(zip(self.outputs, values, strict=True))


__all__ = ["OnnxRuntimeEngine", "OrtLoaded", "OrtModel", "session_options"]
