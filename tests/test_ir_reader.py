"""IR reader: structure, names, weights, hardened XML, and the errors that name layers."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from ir_netgen import NetGen, assert_close, run_nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.formats.ir import xml as irxml
from nnefx.formats.ir.mapping import find_mapping, layer, registered_types
from nnefx.formats.ir.weights import Weights, decode


def small_net(tmp_path, *, bias_shape=(1, 4, 1, 1)):
    rng = np.random.RandomState(0)
    g = NetGen()
    x = g.param("data", (1, 3, 5, 5))
    w = g.const(rng.randn(4, 3, 3, 3).astype(np.float32), name="conv.weight")
    c = g.op("Convolution", [x, w], [(1, 4, 5, 5)], {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1",
                                                    "pads_end": "1,1", "auto_pad": "explicit"}, name="conv1")
    b = g.const(rng.randn(*bias_shape).astype(np.float32), name="conv.bias")
    a = g.op("Add", [c, b], [(1, 4, 5, 5)], {"auto_broadcast": "numpy"})
    r = g.op("ReLU", [a], [(1, 4, 5, 5)], names=["prob"])
    g.result(r)
    return g, g.write(tmp_path / "net.xml")


def conv_ref(x, w, b):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 4, 5, 5), np.float64)
    for o in range(4):
        for i in range(5):
            for j in range(5):
                out[0, o, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * w[o])
    return np.maximum(out + b.reshape(1, 4, 1, 1), 0)


def test_load_run_and_names(tmp_path):
    g, path = small_net(tmp_path)
    model = nnefx.load(path)
    assert model.format == "ir"
    assert model.graph.inputs == ["data"]
    assert model.graph.outputs == ["prob"]
    ops = [op.op for op in model.graph.operations]
    assert "conv" in ops and "relu" in ops
    x = np.random.RandomState(1).randn(1, 3, 5, 5).astype(np.float32)
    out = run_nnefx(path, {"data": x})
    net = irxml.read_net(path)
    consts = {lay.name: lay for lay in net.layers if lay.type == "Const"}
    w = Weights(str(tmp_path / "net.bin"))
    wl = consts["conv.weight"].data
    warr = w.tensor(int(wl["offset"]), int(wl["size"]), "f32", (4, 3, 3, 3), None)
    bl = consts["conv.bias"].data
    barr = w.tensor(int(bl["offset"]), int(bl["size"]), "f32", (1, 4, 1, 1), None)
    assert_close(out["prob"], conv_ref(x, warr, barr))


def test_output_name_falls_back_to_layer_name(tmp_path):
    g = NetGen(version=10)
    x = g.param("inp", (2, 3))
    r = g.op("Tanh", [x], [(2, 3)], name="act")
    g.result(r)
    model = nnefx.load(g.write(tmp_path / "n.xml"))
    assert model.graph.inputs == ["inp"] and model.graph.outputs == ["act"]


def test_port_names_with_escaped_comma():
    assert irxml._split_names(r"a\,b, c") == ["a,b", "c"]


def test_same_tensor_to_two_results(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    r = g.op("Exp", [x], [(2,)], names=["e"])
    g.result(r)
    g.result(r)
    model = nnefx.load(g.write(tmp_path / "n.xml"))
    assert len(set(model.graph.outputs)) == 2


# --- errors that name the layer -------------------------------------------------------------------


def error_of(path, **opts) -> NNEFXError:
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path, **opts)
    return info.value


def test_shape_mismatch_names_layer_port_and_shapes(tmp_path):
    g = NetGen()
    x = g.param("x", (1, 3, 5, 5))
    w = g.const(np.zeros((4, 3, 3, 3), np.float32))
    c = g.op("Convolution", [x, w], [(1, 4, 4, 4)], {"strides": "1,1", "dilations": "1,1", "pads_begin": "1,1",
                                                    "pads_end": "1,1"}, name="conv1")
    g.result(c)
    err = error_of(g.write(tmp_path / "n.xml"))
    text = str(err)
    assert "conv1" in text and "(Convolution)" in text and "layer 2" in text
    assert "[1,4,5,5]" in text and "[1,4,4,4]" in text and "port 2" in text


def test_unknown_layer_type(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    r = g.op("FrobnicateX", [x], [(2,)], name="frob", version="opset99")
    g.result(r)
    err = error_of(g.write(tmp_path / "n.xml"))
    assert err.location.field == "layer 1 'frob' (FrobnicateX)"
    assert "unsupported IR layer type 'FrobnicateX'" in err.message
    assert err.location.line is not None


def test_cycle_is_refused(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    a = g.op("Add", [x, x], [(2,)], name="a")
    b = g.op("Exp", [a], [(2,)], name="b")
    g.result(b)
    # rewire: a's second input comes from b -> cycle a -> b -> a
    g.edges = [e if not (e[2] == a[0] and e[3] == 1) else (b[0], b[1], a[0], 1) for e in g.edges]
    err = error_of(g.write(tmp_path / "n.xml"))
    assert "cycle" in err.message and "layer" in err.location.field


def test_missing_edge(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    a = g.op("Add", [x, x], [(2,)], name="adder")
    g.result(a)
    g.edges = [e for e in g.edges if not (e[2] == a[0] and e[3] == 1)]
    err = error_of(g.write(tmp_path / "n.xml"))
    assert "input port 1 is not connected" in err.message and "'adder' (Add)" in err.location.field


def test_edge_to_unknown_port_and_layer(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    a = g.op("Exp", [x], [(2,)], name="e")
    g.result(a)
    g.edges.append((x[0], 7, a[0], 0))
    err = error_of(g.write(tmp_path / "n.xml"))
    assert "port 7" in err.message
    g.edges[-1] = (x[0], 0, 99, 0)
    err = error_of(g.write(tmp_path / "n.xml"))
    assert "unknown layer 99" in err.message


def test_blob_past_end_of_bin(tmp_path):
    g = NetGen()
    x = g.param("x", (4,))
    c = g.const(np.arange(4, dtype=np.float32), name="k")
    a = g.op("Add", [x, c], [(4,)])
    g.result(a)
    path = g.write(tmp_path / "n.xml")
    with open(tmp_path / "n.bin", "r+b") as fh:
        fh.truncate(8)
    err = error_of(path)
    assert "past the end" in err.message and "'k' (Const)" in err.location.field


def test_blob_size_lies(tmp_path):
    g = NetGen()
    x = g.param("x", (4,))
    c = g.const(np.arange(4, dtype=np.float32), name="k")
    g.result(g.op("Add", [x, c], [(4,)]))
    g.write(tmp_path / "n.xml")
    text = (tmp_path / "n.xml").read_text().replace('size="16"', 'size="12"')
    (tmp_path / "n.xml").write_text(text)
    err = error_of(tmp_path / "n.xml")
    assert "does not match" in err.message


def test_missing_bin(tmp_path):
    g = NetGen()
    x = g.param("x", (4,))
    c = g.const(np.arange(4, dtype=np.float32))
    g.result(g.op("Add", [x, c], [(4,)]))
    g.write(tmp_path / "n.xml")
    (tmp_path / "n.bin").unlink()
    assert "does not exist" in error_of(tmp_path / "n.xml").message


def test_duplicate_layer_id(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    g.result(g.op("Exp", [x], [(2,)]))
    text = g.xml().replace('<layer id="1"', '<layer id="0"')
    (tmp_path / "n.xml").write_text(text)
    assert "used twice" in error_of(tmp_path / "n.xml").message


@pytest.mark.parametrize("dims, message", [("<dim>x</dim>", "dimension"), ("<dim>-5</dim>", "negative")])
def test_bad_dims(tmp_path, dims, message):
    g = NetGen()
    x = g.param("x", (2,))
    g.result(g.op("Exp", [x], [(2,)]))
    (tmp_path / "n.xml").write_text(g.xml().replace("<dim>2</dim>", dims, 1))
    assert message in error_of(tmp_path / "n.xml").message


def test_dynamic_dims_and_shapes_option(tmp_path):
    g = NetGen()
    x = g.param("x", (None, 3))
    g.result(g.op("Exp", [x], [(None, 3)], names=["y"]))
    path = g.write(tmp_path / "n.xml")
    model = nnefx.load(path)
    assert model.graph.tensors["x"].shape == (None, 3)
    model = nnefx.load(path, shapes={"x": (5, 3)})
    assert model.graph.tensors["x"].shape == (5, 3)
    assert "does not fit" in error_of(path, shapes={"x": (5, 4)}).message
    assert "a shape is given for 'nope', which is not an input" in error_of(path, shapes={"nope": (5, 3)}).message
    assert "unknown option" in error_of(path, colour="red").message


# --- hostile XML ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ('<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><net version="11">'
     '<layers>&b;</layers></net>', "DTD"),
    ('<?xml version="1.0"?><!DOCTYPE net SYSTEM "file:///etc/passwd"><net version="11"/>', "DTD"),
    ('<net version="11"><layers><layer id="0"</layers></net>', "malformed XML"),
    ('<net version="11"><layers></layers>', "malformed XML"),
    ('<model version="11"/>', "root element"),
    ('<net version="42"><layers/></net>', "unsupported IR version"),
    ('<net version="11"/>', "no <layers>"),
    ('', "malformed XML"),
    ('<net version="11"><layers><layer name="a" type="Parameter"/></layers></net>', "layer id"),
])
def test_hostile_or_malformed_xml(tmp_path, text, message):
    (tmp_path / "h.xml").write_text(text)
    err = error_of(tmp_path / "h.xml")
    assert message in err.message
    assert err.location is not None and err.location.file.endswith("h.xml")


def test_element_and_size_limits(tmp_path):
    g = NetGen()
    x = g.param("x", (2,))
    g.result(g.op("Exp", [x], [(2,)]))
    path = g.write(tmp_path / "n.xml")
    assert "more than 5 elements" in error_of(path, max_elements=5).message
    assert "limit" in error_of(path, max_bytes=100).message


def test_cli_check_reports_layer(tmp_path, capsys):
    from nnefx.cli import main

    g = NetGen()
    x = g.param("x", (2,))
    g.result(g.op("Bogus", [x], [(2,)], name="bog"))
    path = g.write(tmp_path / "n.xml")
    assert main(["check", path]) == 1
    err = capsys.readouterr().err
    assert "n.xml" in err and "'bog' (Bogus)" in err and "error:" in err


# --- weights --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.uint16, np.uint32, np.uint64, np.bool_])
def test_decode_every_precision(dtype):
    rng = np.random.RandomState(3)
    if dtype == np.bool_:
        arr = rng.rand(7) > 0.5
    elif np.dtype(dtype).kind == "f":
        arr = rng.randn(7).astype(dtype)
    else:
        info = np.iinfo(dtype)
        arr = rng.randint(max(info.min, -1000), min(info.max, 1000), size=7).astype(dtype)
        arr[0] = info.max
        arr[1] = info.min
    from ir_netgen import ETYPE

    raw = np.frombuffer(arr.astype(arr.dtype.newbyteorder("<")).tobytes(), np.uint8)
    got = decode(raw, ETYPE[np.dtype(dtype)], 7)
    np.testing.assert_array_equal(got, arr)


def test_decode_bit_packed_and_nibbles():
    bits = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1, 1], np.uint8)
    raw = np.packbits(bits, bitorder="big")
    np.testing.assert_array_equal(decode(raw, "u1", 10), bits)
    raw = np.array([0x21, 0xF3], np.uint8)
    np.testing.assert_array_equal(decode(raw, "u4", 4), [1, 2, 3, 15])
    np.testing.assert_array_equal(decode(raw, "i4", 4), [1, 2, 3, -1])
    bf = np.array([1.5, -2.25], np.float32)
    raw = np.frombuffer((bf.view(np.uint32) >> 16).astype("<u2").tobytes(), np.uint8)
    np.testing.assert_array_equal(decode(raw, "bf16", 2), bf)


def test_const_of_every_type_round_trips(tmp_path):
    g = NetGen()
    x = g.param("x", (3,))
    arrays = {"f16": np.array([1.5, -2.0, 3.25], np.float16), "i32": np.array([1, -2, 3], np.int32),
              "u8": np.array([0, 200, 255], np.uint8), "boolean": np.array([True, False, True])}
    for name, arr in arrays.items():
        c = g.const(arr, name=name)
        g.result(c, name=f"r_{name}")
    g.result(g.op("Exp", [x], [(3,)]))
    path = g.write(tmp_path / "n.xml")
    model = nnefx.load(path)
    assert model.graph.outputs[:4] == list(arrays)
    out = run_nnefx(path, {"x": np.zeros(3, np.float32)})
    for name, arr in arrays.items():
        np.testing.assert_array_equal(np.asarray(out[name]).astype(arr.dtype), arr)


def test_weights_are_memory_mapped(tmp_path):
    g = NetGen()
    x = g.param("x", (1, 64))
    w = g.const(np.ones((64, 64), np.float32), name="big")
    g.result(g.op("MatMul", [x, w], [(1, 64)], {"transpose_a": "false", "transpose_b": "false"}))
    model = nnefx.load(g.write(tmp_path / "n.xml"))
    datas = [t.data for t in model.graph.tensors.values() if t.data is not None]
    assert datas and datas[0].shape == (64, 64)
    base = datas[0]
    while getattr(base, "base", None) is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, (np.memmap, memoryview)) or type(base).__name__ == "mmap", type(base)


# --- registry ----------------------------------------------------------------------------------------


def test_registry_lookup_and_duplicates():
    assert find_mapping("Convolution", "opset1") is not None
    assert find_mapping("SoftMax", "opset8") is not None
    assert find_mapping("NoSuchLayer", "opset1") is None
    assert ("MaxPool", None) in registered_types()
    with pytest.raises(ValueError):
        @layer("Convolution", versions=None)
        def other(ctx):  # pragma: no cover - never called
            return None


# --- committed fixtures (IR v11 written by OpenVINO; outputs recorded from OpenVINO) ---------------------

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "ir", "opset")


@pytest.mark.parametrize("name", ["cnn", "lstm", "transformer"])
@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_fixture_outputs_match_recorded_openvino(name, backend):
    path = os.path.join(FIXTURES, f"{name}.xml")
    x = np.load(os.path.join(FIXTURES, f"{name}.x.npy"))
    got = run_nnefx(path, {"x": x}, backend=backend)
    outputs = nnefx.load(path).graph.outputs
    assert outputs and set(outputs) == set(got)
    for out in outputs:
        want = np.load(os.path.join(FIXTURES, f"{name}.{out}.npy"))
        assert_close(got[out], want)


def test_interval_dims_are_dynamic_and_dynamic_rank_is_refused(tmp_path):
    g = NetGen()
    x = g.param("x", (None, 3))
    g.result(g.op("Exp", [x], [(None, 3)], names=["y"]))
    text = g.xml().replace('shape="?,3"', 'shape="1..8,3"').replace("<dim>-1</dim>", "<dim>1..8</dim>")
    (tmp_path / "n.xml").write_text(text)
    (tmp_path / "n.bin").write_bytes(b"")
    assert nnefx.load(tmp_path / "n.xml").graph.tensors["x"].shape == (None, 3)
    (tmp_path / "n.xml").write_text(g.xml().replace('shape="?,3"', 'shape="..."'))
    assert "dynamic rank" in error_of(tmp_path / "n.xml").message


# --- the legacy form (IR v <= 9) ------------------------------------------------------------------------

def _dims(shape) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


@pytest.mark.parametrize("form", ["inside", "blobs"])
def test_legacy_net_with_weights_blobs_and_dangling_outputs(tmp_path, form):
    rng = np.random.RandomState(5)
    w = rng.randn(3, 2, 3, 3).astype(np.float32)
    b = rng.randn(3).astype(np.float32)
    s = rng.randn(1, 3, 1, 1).astype(np.float32)
    blob = w.tobytes() + b.tobytes() + s.tobytes()
    wb = f'<weights offset="0" size="{w.nbytes}"/><biases offset="{w.nbytes}" size="{b.nbytes}"/>'
    weights = wb if form == "inside" else f"<blobs>{wb}</blobs>"
    xml = f'''<?xml version="1.0"?>
<net name="legacy" version="7" precision="FP32" batch="1"><layers>
<layer id="0" name="data" type="Input" precision="FP32"><output><port id="0">{_dims((1, 2, 4, 4))}</port></output></layer>
<layer id="1" name="conv" type="Convolution" precision="FP32">
  <data kernel="3,3" strides="1,1" pads_begin="1,1" pads_end="1,1" dilations="1,1" output="3" group="1"/>
  <input><port id="0">{_dims((1, 2, 4, 4))}</port></input><output><port id="3">{_dims((1, 3, 4, 4))}</port></output>
  {weights}
</layer>
<layer id="2" name="relu" type="ReLU" precision="FP32">
  <input><port id="0">{_dims((1, 3, 4, 4))}</port></input><output><port id="1">{_dims((1, 3, 4, 4))}</port></output>
</layer>
<layer id="3" name="scale" type="Const" precision="FP32">
  <output><port id="1">{_dims((1, 3, 1, 1))}</port></output>
  <blobs><custom offset="{w.nbytes + b.nbytes}" size="{s.nbytes}"/></blobs>
</layer>
<layer id="4" name="prod" type="Eltwise" precision="FP32"><data operation="mul"/>
  <input><port id="0">{_dims((1, 3, 4, 4))}</port><port id="1">{_dims((1, 3, 1, 1))}</port></input>
  <output><port id="2">{_dims((1, 3, 4, 4))}</port></output>
</layer>
</layers><edges>
<edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
<edge from-layer="1" from-port="3" to-layer="2" to-port="0"/>
<edge from-layer="2" from-port="1" to-layer="4" to-port="0"/>
<edge from-layer="3" from-port="1" to-layer="4" to-port="1"/>
</edges></net>
'''
    (tmp_path / "old.xml").write_text(xml)
    (tmp_path / "old.bin").write_bytes(blob)
    model = nnefx.load(tmp_path / "old.xml")
    assert model.graph.inputs == ["data"] and model.graph.outputs == ["prod"]
    x = rng.randn(1, 2, 4, 4).astype(np.float32)
    got = run_nnefx(str(tmp_path / "old.xml"), {"data": x})["prod"]
    want = np.maximum(conv_ref_general(x, w) + b.reshape(1, 3, 1, 1), 0) * s
    assert_close(got, want)
    # a lying biases size is caught by the blob checks and names the layer
    (tmp_path / "old.xml").write_text(xml.replace(f'<biases offset="{w.nbytes}" size="{b.nbytes}"',
                                                     f'<biases offset="{w.nbytes}" size="{b.nbytes + 4}"'))
    err = error_of(tmp_path / "old.xml")
    assert "'conv' (Convolution)" in err.location.field
    (tmp_path / "old.xml").write_text(xml)
    (tmp_path / "old.bin").write_bytes(blob[:w.nbytes + b.nbytes + 4])
    err = error_of(tmp_path / "old.xml")
    assert "past the end" in err.message and "'scale' (Const)" in err.location.field


def conv_ref_general(x, w):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for o in range(w.shape[0]):
        for i in range(h):
            for j in range(wd):
                out[0, o, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * w[o])
    return out


@pytest.mark.parametrize("layer", ["Broadcast", "Tile", "Range"])
def test_hostile_constant_sizes_are_refused_before_allocating(tmp_path, layer):
    g = NetGen()
    x = g.param("x", (1,))
    big = 1 << 20
    if layer == "Broadcast":
        y = g.op("Broadcast", [g.const(np.ones(1, np.float32)), g.const(np.array([big, big], np.int64))],
                 [(big, big)], {"mode": "numpy"}, version="opset3")
    elif layer == "Tile":
        y = g.op("Tile", [g.const(np.ones((2, 2), np.float32)), g.const(np.array([big, big], np.int64))],
                 [(2 * big, 2 * big)])
    else:
        y = g.op("Range", [g.const(np.array(0, np.int64)), g.const(np.array(1 << 40, np.int64)),
                           g.const(np.array(1, np.int64))], [(1 << 40,)], {"output_type": "i64"}, version="opset4",
                 out_etypes=["i64"])
    g.result(y)
    g.result(g.op("Exp", [x], [(1,)]))
    err = error_of(g.write(tmp_path / "n.xml"))
    assert "too large" in err.message and f"({layer})" in err.location.field


def test_ports_disagreeing_about_an_edge(tmp_path):
    g = NetGen()
    x = g.param("x", (2, 3))
    e = g.op("Exp", [x], [(2, 3)], name="ex")
    g.result(g.op("Tanh", [e], [(2, 3)], name="th"))
    text = g.xml()
    # the Tanh input port claims [2, 4]
    head, tail = text.split('name="th"', 1)
    tail = tail.replace("<dim>3</dim>", "<dim>4</dim>", 1)
    (tmp_path / "n.xml").write_text(head + 'name="th"' + tail)
    (tmp_path / "n.bin").write_bytes(b"")
    err = error_of(tmp_path / "n.xml")
    assert "'th' (Tanh)" in err.location.field and "[2,3]" in err.message and "[2,4]" in err.message
