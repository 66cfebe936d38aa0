"""A writer of legacy-format IR networks (``.xml`` + ``.bin``) for the legacy-layer tests.

Tests describe small networks layer by layer — type, ``<data>`` attributes, input edges,
output port dims and blobs — and get real IR files in the legacy (version 7) layout: ``Input``
layers, ``precision`` attributes, ``<blobs>`` with offset/size into one ``.bin``, and no
``Result`` layers (outputs are the ports nothing consumes).  Expected outputs are computed
in the tests themselves with numpy/torch, never with the mapping under test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from xml.sax.saxutils import quoteattr

import numpy as np

import nnefx


@dataclass
class _Layer:
    id: int
    name: str
    type: str
    data: dict
    inputs: list          # [(dims, (from_layer, from_port))]
    outputs: list         # [dims]
    blobs: dict
    extra_xml: str = ""
    in_ids: list = field(default_factory=list)
    out_ids: list = field(default_factory=list)


class LegacyNet:
    """Build a legacy IR net: ``ref = net.input(...)``, ``refs = net.add(...)``, ``net.save(dir)``."""

    def __init__(self, name: str = "net", version: int = 7):
        self.name = name
        self.version = version
        self.layers: list[_Layer] = []
        self.blob = bytearray()

    # --- building ----------------------------------------------------------------------
    def _blob(self, array: np.ndarray, precision: str = "FP32") -> tuple[int, int]:
        if precision == "BIN":
            bits = np.asarray(array, dtype=np.uint8).reshape(-1)
            # BinaryConvolution weights: least significant bit first, as the Model Optimizer packed them
            data = np.packbits(bits, bitorder="little").tobytes()
        else:
            dt = {"FP32": "<f4", "I32": "<i4", "I64": "<i8", "FP16": "<f2"}[precision]
            data = np.asarray(array, dtype=dt).tobytes()
        off = len(self.blob)
        self.blob += data
        return off, len(data)

    def input(self, name: str, dims) -> tuple:
        lay = _Layer(len(self.layers), name, "Input", {}, [], [list(dims)], {})
        self.layers.append(lay)
        return (lay.id, 0)

    def const(self, name: str, array, precision: str = "FP32") -> tuple:
        arr = np.asarray(array)
        lay = _Layer(len(self.layers), name, "Const", {}, [], [list(arr.shape)],
                     {"custom": (arr, precision)})
        self.layers.append(lay)
        return (lay.id, 0)

    def add(self, ltype: str, inputs, outputs, data: dict | None = None, blobs: dict | None = None,
            name: str | None = None, extra_xml: str = "", in_dims=None) -> list[tuple]:
        """Add a layer; ``inputs`` are refs from earlier layers; ``outputs`` the output dims."""
        lid = len(self.layers)
        ins = []
        for k, ref in enumerate(inputs):
            # a None ref is an input port without an edge (fed by a TensorIterator port map)
            dims = in_dims[k] if in_dims is not None and in_dims[k] is not None else self.dims(ref)
            ins.append((dims, ref))
        b = {}
        for key, v in (blobs or {}).items():
            b[key] = v if isinstance(v, tuple) else (np.asarray(v), "FP32")
        lay = _Layer(lid, name or f"{ltype.lower()}{lid}", ltype, dict(data or {}), ins,
                     [list(o) for o in outputs], b, extra_xml)
        self.layers.append(lay)
        return [(lid, k) for k in range(len(outputs))]

    def dims(self, ref) -> list:
        return self.layers[ref[0]].outputs[ref[1]]

    # --- writing -------------------------------------------------------------------------
    @staticmethod
    def _port(pid: int, dims) -> str:
        if dims is None:
            return f'<port id="{pid}"/>'
        return f'<port id="{pid}">' + "".join(f"<dim>{int(d)}</dim>" for d in dims) + "</port>"

    def xml(self) -> str:
        head = f'<?xml version="1.0" ?>\n<net name="{self.name}" version="{self.version}" batch="1">'
        return head + "\n" + self.layers_xml() + "</net>\n"

    def body_xml(self, parent: LegacyNet) -> str:
        """This net as the <body> of a TensorIterator of ``parent`` (blobs go to its .bin)."""
        self.blob = parent.blob
        return "<body>" + self.layers_xml() + "</body>"

    def port_id(self, ref) -> int:
        """The XML port id of output ``ref`` (inputs are numbered first, then outputs)."""
        return len(self.layers[ref[0]].inputs) + ref[1]

    def layers_xml(self) -> str:
        lines = ["<layers>"]
        edges = []
        for lay in self.layers:
            n_in = len(lay.inputs)
            lay.in_ids = list(range(n_in))
            lay.out_ids = list(range(n_in, n_in + len(lay.outputs)))
        for lay in self.layers:
            parts = [f'<layer id="{lay.id}" name={quoteattr(lay.name)} type="{lay.type}" precision="FP32">']
            if lay.data:
                attrs = " ".join(f"{k}={quoteattr(str(v))}" for k, v in lay.data.items())
                parts.append(f"<data {attrs}/>")
            if lay.inputs:
                parts.append("<input>" + "".join(self._port(pid, dims) for pid, (dims, _) in
                                                 zip(lay.in_ids, lay.inputs, strict=True)) + "</input>")
                for pid, (_, ref) in zip(lay.in_ids, lay.inputs, strict=True):
                    if ref is not None:
                        edges.append((ref[0], self.layers[ref[0]].out_ids[ref[1]], lay.id, pid))
            if lay.outputs:
                parts.append("<output>" + "".join(self._port(pid, dims) for pid, dims in
                                                  zip(lay.out_ids, lay.outputs, strict=True)) + "</output>")
            if lay.blobs:
                parts.append("<blobs>")
                for key, (arr, prec) in lay.blobs.items():
                    off, size = self._blob(arr, prec)
                    p = f' precision="{prec}"' if prec != "FP32" else ""
                    parts.append(f'<{key} offset="{off}" size="{size}"{p}/>')
                parts.append("</blobs>")
            parts.append(lay.extra_xml(self) if callable(lay.extra_xml) else lay.extra_xml)
            parts.append("</layer>")
            lines.append("".join(parts))
        lines.append("</layers>\n<edges>")
        for fl, fp, tl, tp in edges:
            lines.append(f'<edge from-layer="{fl}" from-port="{fp}" to-layer="{tl}" to-port="{tp}"/>')
        lines.append("</edges>")
        return "\n".join(lines) + "\n"

    def save(self, folder, name: str | None = None) -> str:
        self.blob = bytearray()
        text = self.xml()
        base = os.path.join(str(folder), name or self.name)
        with open(base + ".xml", "w") as f:
            f.write(text)
        with open(base + ".bin", "wb") as f:
            f.write(bytes(self.blob))
        return base + ".xml"

    # --- running ---------------------------------------------------------------------------
    def run(self, folder, feeds: dict, backend: str = "fast"):
        """Save, load with nnefx.load, run one cycle through the generic Session."""
        from nnefx.runtime.session import Session

        model = nnefx.load(self.save(folder))
        return model, Session(model, backend=backend).run(feeds)


def run_both(net: LegacyNet, folder, feeds: dict) -> dict:
    """Run the net with both backends; assert they agree; return the fast results."""
    _, fast = net.run(folder, feeds, "fast")
    _, formal = net.run(folder, feeds, "formal")
    assert list(fast) == list(formal)
    for k in fast:
        np.testing.assert_allclose(fast[k], formal[k], rtol=1e-4, atol=1e-5)
    return fast


def test_writer_produces_a_loadable_legacy_net(tmp_path):
    net = LegacyNet("tiny")
    x = net.input("data", [1, 3])
    net.add("ReLU", [x], [[1, 3]], name="out")
    text = net.xml()
    assert 'version="7"' in text and "Result" not in text
    model = nnefx.load(net.save(tmp_path))
    assert model.format == "ir" and len(model.graph.inputs) == 1
