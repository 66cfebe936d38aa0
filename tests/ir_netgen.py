"""Build small IR XML networks (+ .bin) in tests, and compare nnefx with OpenVINO on them.

Shared by tests/test_ir_reader*.py, test_ir_opset*.py and test_ir_openvino*.py.
"""

from __future__ import annotations

import os
from xml.sax.saxutils import quoteattr

import numpy as np

ETYPE = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64",
         np.dtype(np.int64): "i64", np.dtype(np.int32): "i32", np.dtype(np.int16): "i16", np.dtype(np.int8): "i8",
         np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32",
         np.dtype(np.uint64): "u64", np.dtype(np.bool_): "boolean"}
PRECISION = {"f32": "FP32", "f16": "FP16", "f64": "FP64", "i64": "I64", "i32": "I32", "i16": "I16", "i8": "I8",
             "u8": "U8", "u16": "U16", "u32": "U32", "u64": "U64", "boolean": "BOOL", "u1": "U1"}


class NetGen:
    """A tiny IR v10/11 writer for tests (not the product's writer)."""

    def __init__(self, version: int = 11, name: str = "net"):
        self.version = version
        self.name = name
        self.layers: list[str] = []
        self.edges: list[tuple[int, int, int, int]] = []
        self.bin = bytearray()
        self.next_id = 0
        self.shapes: dict[tuple[int, int], tuple] = {}
        self.etypes: dict[tuple[int, int], str] = {}

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    @staticmethod
    def _port(pid: int, shape, etype: str, names: str | None = None) -> str:
        attr = f' names={quoteattr(names)}' if names else ""
        dims = "".join(f"<dim>{-1 if d is None else d}</dim>" for d in shape)
        return f'<port id="{pid}" precision="{PRECISION.get(etype, "FP32")}"{attr}>{dims}</port>'

    def param(self, name: str, shape, etype: str = "f32", names: str | None = None) -> tuple[int, int]:
        lid = self._id()
        shp = ",".join("?" if d is None else str(d) for d in shape)
        names = names if names is not None else (name if self.version >= 11 else None)
        self.layers.append(f'<layer id="{lid}" name={quoteattr(name)} type="Parameter" version="opset1">'
                           f'<data shape="{shp}" element_type="{etype}"/><output>'
                           f'{self._port(0, shape, etype, names)}</output></layer>')
        self.shapes[(lid, 0)] = tuple(shape)
        self.etypes[(lid, 0)] = etype
        return (lid, 0)

    def const(self, arr, etype: str | None = None, name: str | None = None) -> tuple[int, int]:
        arr = np.asarray(arr)
        etype = etype or ETYPE[arr.dtype]
        if etype == "u1":
            data = np.packbits(arr.reshape(-1).astype(np.uint8), bitorder="big").tobytes()
        else:
            data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        while len(self.bin) % 8:
            self.bin.append(0)
        offset = len(self.bin)
        self.bin.extend(data)
        lid = self._id()
        shp = ",".join(str(d) for d in arr.shape)
        self.layers.append(f'<layer id="{lid}" name={quoteattr(name or f"c{lid}")} type="Const" version="opset1">'
                           f'<data element_type="{etype}" shape="{shp}" offset="{offset}" size="{len(data)}"/>'
                           f'<output>{self._port(0, arr.shape, etype)}</output></layer>')
        self.shapes[(lid, 0)] = tuple(arr.shape)
        self.etypes[(lid, 0)] = etype
        return (lid, 0)

    def op(self, type_: str, inputs, out_shapes, attrs: dict | None = None, version: str = "opset1",
           name: str | None = None, out_etypes=None, names=None):
        lid = self._id()
        data = ""
        if attrs:
            data = "<data " + " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs.items()) + "/>"
        ins = []
        for i, src in enumerate(inputs):
            ins.append(self._port(i, self.shapes[src], self.etypes[src]))
            self.edges.append((src[0], src[1], lid, i))
        outs = []
        refs = []
        out_etypes = out_etypes or [self.etypes[inputs[0]] if inputs else "f32"] * len(out_shapes)
        for k, shape in enumerate(out_shapes):
            pid = len(inputs) + k
            nm = names[k] if names else (f"{name or type_.lower()}{lid}:{k}" if self.version >= 11 else None)
            outs.append(self._port(pid, shape, out_etypes[k], nm))
            self.shapes[(lid, pid)] = tuple(shape)
            self.etypes[(lid, pid)] = out_etypes[k]
            refs.append((lid, pid))
        self.layers.append(f'<layer id="{lid}" name={quoteattr(name or f"{type_.lower()}{lid}")} type="{type_}" '
                           f'version="{version}">{data}<input>{"".join(ins)}</input><output>{"".join(outs)}</output>'
                           "</layer>")
        return refs if len(refs) != 1 else refs[0]

    def result(self, src, name: str | None = None) -> None:
        lid = self._id()
        self.layers.append(f'<layer id="{lid}" name={quoteattr(name or f"out{lid}")} type="Result" version="opset1">'
                           f'<input>{self._port(0, self.shapes[src], self.etypes[src])}</input></layer>')
        self.edges.append((src[0], src[1], lid, 0))

    def xml(self) -> str:
        edges = "".join(f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>'
                        for a, b, c, d in self.edges)
        return (f'<?xml version="1.0"?>\n<net name="{self.name}" version="{self.version}"><layers>\n'
                + "\n".join(self.layers) + f"\n</layers><edges>{edges}</edges></net>\n")

    def write(self, path) -> str:
        path = os.fspath(path)
        with open(path, "w") as fh:
            fh.write(self.xml())
        with open(os.path.splitext(path)[0] + ".bin", "wb") as fh:
            fh.write(bytes(self.bin))
        return path


def run_openvino(xml_path: str, feeds: dict) -> dict:
    import openvino as ov

    core = ov.Core()
    cm = core.compile_model(xml_path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = cm(feeds)
    out = {}
    for o in cm.outputs:
        out[o.get_any_name()] = np.asarray(res[o])
    return out


def run_nnefx(xml_path: str, feeds: dict, backend: str = "fast", **load_opts) -> dict:
    import nnefx
    from nnefx.runtime.session import Session

    model = nnefx.load(xml_path, **load_opts)
    shapes = {k: tuple(np.shape(v)) for k, v in feeds.items()}
    return Session(model, backend, input_shapes=shapes).run(feeds)


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == np.bool_ or want.dtype.kind in "iu":
        np.testing.assert_array_equal(got.astype(want.dtype), want)
        return
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1e-6)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) if want.size else 0.0
    assert err <= rtol * scale + atol, f"max abs error {err} vs scale {scale}"
