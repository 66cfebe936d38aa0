"""Bodies that operations run (``Graph.subgraphs``): tract's scan body, once per step.

An operation declaring the runtime keyword ``call`` (``define(..., runtime_keywords=...)``)
gets ``call(body, inputs) -> results`` (dicts by name) from the planner; the body runs on the
same backend as the caller.  Its plan is made once per distinct set of input shapes (a scan
calls it with the same shapes at every step) and kept, a few per body.  (ONNX control flow's
bodies declare their inputs' shapes and run through :mod:`nnefx.runtime.subgraphs`; a tract scan
body's parameters take whatever shapes the scan gives, hence a plan per shape set here.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Graph

#: plans kept per body (distinct input shapes); a scan needs one
MAX_PLANS = 8


class BodyRunner:
    """``call(body, inputs)`` over the bodies of one graph, on one backend."""

    def __init__(self, graph: Graph, backend: str):
        self.graph = graph
        self.backend = backend
        self.sessions: dict[tuple, Any] = {}

    def __call__(self, name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        body = self.graph.subgraphs.get(name)
        if body is None:
            raise NNEFXError(f"the graph has no body '{name}'")
        key = (name, *((k, np.shape(v)) for k, v in sorted(inputs.items())))
        session = self.sessions.get(key)
        if session is None:
            from ..semantics.tract_scan import specialized_body
            from .session import Session

            if len(self.sessions) >= MAX_PLANS:
                self.sessions.clear()
            graph = specialized_body(body, {k: np.shape(v) for k, v in inputs.items()})
            session = self.sessions[key] = Session(graph, backend=self.backend)
        return session.run(inputs)
