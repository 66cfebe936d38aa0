"""Write CVM models (graph JSON + params) from Python, in the runtime tooling's exact layout.

Used to generate test and benchmark networks; nnefx does not convert arbitrary graphs to CVM
(``nnefx.save`` has no CVM writer).  Shapes are computed with the operators' shape rules,
operator output precisions are written as -1 (the runtime recomputes them), every entry
gets its own storage slot, and attributes are written as the Python ``str()`` of each value,
as the runtime's tooling does::

    b = CVMBuilder()
    x = b.input("data", (1, 3, 8, 8), precision=8)
    w = b.param("w", weights, precision=8)
    y = b.op("conv2d", x, w, channels=4, kernel_size=(3, 3), padding=(1, 1), use_bias=False)
    json_text, params = b.json([y]), b.params()
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...ops import registry
from . import attrs as A
from .params import write_params


def _attr_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        inner = ", ".join(str(int(v)) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return str(value)


class CVMBuilder:
    """Accumulates nodes; each method returns an entry reference ``(node_id, output_index)``."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.op_attrs: list[str] = []
        self.shapes: list[tuple[int, ...]] = []
        self.precisions: list[int] = []
        self.row_ptr = [0]
        self._params: dict[str, np.ndarray] = {}
        self._counts: dict[str, int] = {}

    def _entry(self, ref: tuple[int, int]) -> int:
        return self.row_ptr[ref[0]] + ref[1]

    def _add(self, node: dict[str, Any], attrs_text: str, shapes: list[tuple], precs: list[int]) -> int:
        self.nodes.append(node)
        self.op_attrs.append(attrs_text)
        self.shapes.extend(shapes)
        self.precisions.extend(precs)
        self.row_ptr.append(self.row_ptr[-1] + len(shapes))
        return len(self.nodes) - 1

    def input(self, name: str, shape: tuple[int, ...], precision: int) -> tuple[int, int]:
        text = json.dumps({"precision": str(precision), "shape": str(tuple(shape))})
        return (self._add({"op": "null", "name": name, "inputs": []}, text, [tuple(shape)], [precision]), 0)

    def param(self, name: str, value: np.ndarray, precision: int) -> tuple[int, int]:
        ref = self.input(name, tuple(value.shape), precision)
        self._params[name] = np.asarray(value, np.int32)
        return ref

    def op(self, func: str, *inputs: tuple[int, int], **attribs: Any) -> tuple[int, int]:
        """Add operator ``func`` (runtime name) reading ``inputs``; returns its first output."""
        raw = {k: _attr_text(v) for k, v in attribs.items()}
        parsed = A.parse_attrs(func, raw)
        entry = registry.get("cvm_" + func)
        in_shapes = [self.shapes[self._entry(r)] for r in inputs]
        args = [in_shapes] if func == "concatenate" else in_shapes
        out = entry.infer(args, A.to_nnefx(func, parsed))
        outs = list(out[0]) if A.num_outputs(func) > 1 and isinstance(out[0], list) else list(out)
        k = self._counts.get(func, 0)
        self._counts[func] = k + 1
        node = {"op": "cvm_op", "name": f"{func}_{k}",
                "attrs": {"flatten_data": "0", "func_name": func, "num_inputs": str(len(inputs)),
                          "num_outputs": str(len(outs))},
                "inputs": [[r[0], r[1], 0] for r in inputs]}
        nid = self._add(node, json.dumps(raw), [tuple(s) for s in outs], [-1] * len(outs))
        return (nid, 0)

    def json(self, heads: list[tuple[int, int]]) -> str:
        if not heads:
            raise NNEFXError("a CVM model needs at least one head")
        n = self.row_ptr[-1]
        doc = {
            "nodes": self.nodes,
            "arg_nodes": [i for i, node in enumerate(self.nodes) if node["op"] == "null"],
            "node_row_ptr": self.row_ptr,
            "heads": [[r[0], r[1], 0] for r in heads],
            "attrs": {"op_attrs": ["list_str", self.op_attrs],
                      "dltype": ["list_str", ["int32"] * n],
                      "precision": ["list_int", self.precisions],
                      "storage_id": ["list_int", list(range(n))],
                      "shape": ["list_shape", [list(s) for s in self.shapes]]},
            "version": "cvm_1.0.0",
        }
        return json.dumps(doc, indent=1)

    def params(self) -> bytes:
        return write_params(self._params)


def resnet_like(channels: int = 16, blocks: int = 2, size: int = 16, classes: int = 10,
                seed: int = 0) -> tuple[str, bytes]:
    """A quantized ResNet-style integer network: stem conv, ``blocks`` residual blocks
    (conv-shift-relu-conv-shift + skip, clip back to 8 bits), max pool, dense head."""
    rng = np.random.default_rng(seed)
    b = CVMBuilder()

    def weights(*shape):
        return rng.integers(-127, 128, size=shape).astype(np.int32)

    def conv(x, cin, tag):
        w = b.param(f"{tag}_w", weights(channels, cin, 3, 3), 8)
        bias = b.param(f"{tag}_b", rng.integers(-2000, 2001, size=(channels,)).astype(np.int32), 12)
        y = b.op("conv2d", x, w, bias, channels=channels, kernel_size=(3, 3), padding=(1, 1), use_bias=True)
        return b.op("cvm_right_shift", y, shift_bit=10, precision=8)

    x = b.input("data", (1, 3, size, size), 8)
    h = b.op("relu", conv(x, 3, "stem"))
    for k in range(blocks):
        y = b.op("relu", conv(h, channels, f"b{k}a"))
        y = conv(y, channels, f"b{k}b")
        s = b.op("elemwise_add", y, h)
        h = b.op("relu", b.op("cvm_clip", s, precision=8))
    p = b.op("max_pool2d", h, pool_size=(2, 2), strides=(2, 2))
    f = b.op("flatten", p)
    feat = channels * (size // 2) * (size // 2)
    w = b.param("fc_w", weights(classes, feat), 8)
    out = b.op("dense", f, w, units=classes, use_bias=False)
    return b.json([out]), b.params()
