"""ONNX import: bad input gives located NNEFXErrors; the CLI converts, checks and runs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.cli import main  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

F = TensorProto.FLOAT


def _save(tmp_path, nodes, inputs, outputs, inits=(), opset=17, name="m.onnx"):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def test_unsupported_op_names_node(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("TfIdfVectorizer", ["a"], ["y"], name="tf_7")]
    p = _save(tmp_path, nodes, [_vi("x", [2])], [_vi("y", None, TensorProto.INT64)])
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    text = str(e.value)
    assert "m.onnx" in text and "node 1 'tf_7' (TfIdfVectorizer)" in text and "unsupported" in text


def test_corrupt_and_truncated(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = _save(tmp_path, nodes, [_vi("x", [2])], [_vi("y", [2])])
    data = p.read_bytes()
    t = tmp_path / "trunc.onnx"
    t.write_bytes(data[: len(data) // 2])
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(t))
    assert "trunc.onnx" in str(e.value)
    z = tmp_path / "zero.onnx"
    z.write_bytes(b"")
    with pytest.raises(NNEFXError):
        nnefx.load(str(z))


def _external_model(tmp_path, location, offset=0, length=16):
    w = TensorProto(name="w", data_type=F, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    return _save(tmp_path, nodes, [_vi("x", [4])], [_vi("y", [4])], [w])


def test_external_data_path_traversal_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(np.ones(4, np.float32).tobytes())
    sub = tmp_path / "model"
    sub.mkdir()
    p = _external_model(sub, "../secret.bin")
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert "outside the model's folder" in str(e.value) and "initializer 'w'" in str(e.value)
    p = _external_model(sub, str(tmp_path / "secret.bin"))
    with pytest.raises(NNEFXError):
        nnefx.load(str(p))


def test_external_data_inside_folder_and_range_checked(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    p = _external_model(tmp_path, "w.bin")
    m = nnefx.load(str(p))
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(Session(m).run({"x": x})["y"], x + np.arange(4))
    p = _external_model(tmp_path, "w.bin", offset=8, length=16)
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert "exceeds the file" in str(e.value)


def test_dynamic_inputs_stay_unknown_or_take_a_shape(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = _save(tmp_path, nodes, [_vi("x", ["batch", 3])], [_vi("y", ["batch", 3])])
    m = nnefx.load(str(p))  # what torch.onnx.export writes with dynamic_axes: the batch stays unknown
    assert m.graph.tensors["x"].shape == (None, 3) and m.graph.tensors["y"].shape == (None, 3)
    x = np.array([[-1, 2, 3]] * 5, np.float32)
    np.testing.assert_array_equal(nnefx.Session(m).run({"x": x})["y"], np.maximum(x, 0))  # bound by the input
    m = nnefx.load(str(p), input_shapes={"x": (2, 3)})
    assert m.graph.tensors["x"].shape == (2, 3)
    with pytest.raises(NNEFXError):
        nnefx.load(str(p), input_shapes={"x": (2, 4)})
    with pytest.raises(NNEFXError):
        nnefx.load(str(p), input_shapes={"x": (2, 3), "nope": (1,)})


def test_unsupported_attribute_and_pool_indices(tmp_path):
    nodes = [helper.make_node("Pad", ["x", "p"], ["y"], mode="mirror", name="padder")]
    p = _save(tmp_path, nodes, [_vi("x", [2, 3])], [_vi("y", None)],
              [numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), "p")])
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert "node 0 'padder' (Pad)" in str(e.value) and "mirror" in str(e.value)
    # MaxPool's indices output: flat offsets of each window's maximum (it used to be refused)
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], strides=[2, 2], name="mp")]
    p = _save(tmp_path, nodes, [_vi("x", [1, 1, 4, 4])], [_vi("y", None), _vi("idx", None, TensorProto.INT64)])
    x = np.array([[[[1, 5, 2, 0], [3, 4, 8, 1], [0, 0, 0, 9], [7, 0, 0, 0]]]], np.float32)
    out = nnefx.Session(nnefx.load(str(p))).run({"x": x})
    assert out["idx"].tolist() == [[[[1, 6], [12, 11]]]]


def test_saving_onnx_writes_it_again(tmp_path):
    # (writing ONNX used to be refused; the exporter is tested in test_onnx_export*.py)
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = _save(tmp_path, nodes, [_vi("x", [2])], [_vi("y", [2])])
    m = nnefx.load(str(p))
    nnefx.save(m, str(tmp_path / "out.onnx"))
    x = np.array([-1.0, 2.0], np.float32)
    assert nnefx.Session(nnefx.load(str(tmp_path / "out.onnx"))).run({"x": x})["y"].tolist() == [0.0, 2.0]


def test_cli_convert_check_run(tmp_path, capsys):
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    nodes = [helper.make_node("MatMul", ["input.1", "fc.weight"], ["h"]),
             helper.make_node("Relu", ["h"], ["output"])]
    p = _save(tmp_path, nodes, [_vi("input.1", ["n", 3])], [_vi("output", ["n", 4])],
              [numpy_helper.from_array(w, "fc.weight")])
    out = tmp_path / "nnef"
    assert main(["convert", str(p), str(out), "--shape", "input.1=2,3"]) == 0
    assert main(["check", str(out)]) == 0
    x = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]], np.float32)
    inp = tmp_path / "x.npy"
    np.save(inp, x)
    m = nnefx.load(str(out))
    res = tmp_path / "res"
    assert main(["run", str(out), "-i", f"{m.graph.inputs[0]}={inp}", "-o", str(res)]) == 0
    got = np.load(res / f"{m.graph.outputs[0]}.npy")
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-6)
    capsys.readouterr()
    assert main(["check", str(p)]) == 0  # dynamic input without --shape: its dim stays unknown
    assert main(["inspect", str(p)]) == 0
    assert "input.1: scalar [?, 3]" in capsys.readouterr().out
    assert main(["run", str(p), "-i", f"input.1={inp}", "-o", str(res)]) == 0  # the batch comes from the input
    np.testing.assert_allclose(np.load(res / "output.npy"), np.maximum(x @ w, 0), rtol=1e-6)


@pytest.mark.parametrize("node, message", [
    (helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2], name="c"), "kernel_shape"),
    (helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1], name="c"), "pads"),
    (helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1], name="c"), "strides"),
    (helper.make_node("MaxPool", ["x"], ["y"], name="c"), "kernel_shape"),
    (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0, 1, 2], name="c"), "c"),
    (helper.make_node("Cast", ["x"], ["y"], to=14, name="c"), "element type"),
])
def test_hostile_attributes_are_located(tmp_path, node, message):
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    p = _save(tmp_path, [node], [_vi("x", [1, 1, 5, 5])], [_vi("y", None)], [w])
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert f"node 0 'c' ({node.op_type})" in str(e.value) and message in str(e.value)


def test_mutated_files_never_crash(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Reshape", ["r", "s"], ["y"])]
    inits = [numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "s")]
    p = _save(tmp_path, nodes, [_vi("x", [1, 1, 4, 4])], [_vi("y", None)], inits)
    data = p.read_bytes()
    rng = np.random.default_rng(3)
    q = tmp_path / "fz.onnx"
    for i in range(60):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        if i % 3 == 0:
            b = b[: int(rng.integers(1, len(b)))]
        q.write_bytes(bytes(b))
        try:
            nnefx.load(str(q))
        except NNEFXError:
            pass


def test_missing_onnx_package_is_explained(tmp_path, monkeypatch):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = _save(tmp_path, nodes, [_vi("x", [2])], [_vi("y", [2])])
    monkeypatch.setitem(__import__("sys").modules, "onnx", None)
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert "pip install nnefx[onnx]" in str(e.value)


# --- hostile files: each a located NNEFXError ----------------------------------------------------

def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _nesting_bomb(depth):
    """ModelProto.graph → If node → then_branch graph → ..., ``depth`` times, written by hand
    (the protobuf library refuses to build it)."""
    graph = b""
    for _ in range(depth):
        attribute = _field(1, b"then_branch") + _field(6, graph) + _varint(20 << 3) + _varint(5)
        graph = _field(1, _field(4, b"If") + _field(5, attribute))
    return _varint(1 << 3) + _varint(8) + _field(7, graph)


@pytest.mark.parametrize("depth", [60, 5000])
def test_nesting_bomb_is_refused_by_the_parser(tmp_path, depth):
    p = tmp_path / "bomb.onnx"
    p.write_bytes(_nesting_bomb(depth))
    with pytest.raises(NNEFXError, match="protobuf decoding failed") as e:
        nnefx.load(str(p))
    assert "bomb.onnx" in str(e.value)


def test_huge_declared_dims(tmp_path):
    big = TensorProto(name="w", data_type=F, dims=[1 << 40])  # no data behind it
    p = _save(tmp_path, [helper.make_node("Relu", ["w"], ["y"])], [], [_vi("y", None)], [big])
    with pytest.raises(NNEFXError, match=r"initializer 'w'.*too large"):
        nnefx.load(str(p))
    s = numpy_helper.from_array(np.array([1 << 40], np.int64), "s")
    p = _save(tmp_path, [helper.make_node("ConstantOfShape", ["s"], ["y"], name="c")], [], [_vi("y", None)], [s])
    with pytest.raises(NNEFXError, match=r"node 0 'c' \(ConstantOfShape\).*too large"):
        nnefx.load(str(p))
    p = _save(tmp_path, [helper.make_node("Tile", ["x", "s"], ["y"], name="t")], [_vi("x", [4])], [_vi("y", None)],
              [s])
    with pytest.raises(NNEFXError, match=r"node 0 't' \(Tile\).*more than"):  # refused before allocating
        Session(nnefx.load(str(p))).run({"x": np.ones(4, np.float32)})


def test_raw_data_that_lies_about_its_size(tmp_path):
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.raw_data = w.raw_data[:7]
    p = _save(tmp_path, [helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [w])
    with pytest.raises(NNEFXError, match=r"initializer 'w'.*raw_data holds 7 bytes.*needs 16"):
        nnefx.load(str(p))
    w = TensorProto(name="w", data_type=F, dims=[4])
    w.float_data.extend([1.0, 2.0])
    p = _save(tmp_path, [helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [w])
    with pytest.raises(NNEFXError, match=r"initializer 'w'.*cannot decode"):
        nnefx.load(str(p))


def test_external_data_is_mapped_and_must_hold_the_tensor(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    p = _external_model(tmp_path, "w.bin", offset=8, length=16)  # within the file: a view of it
    np.testing.assert_array_equal(Session(nnefx.load(str(p))).run({"x": np.zeros(4, np.float32)})["y"],
                                  np.arange(2, 6, dtype=np.float32))
    p = _external_model(tmp_path, "w.bin", offset=0, length=12)  # a length that is not the tensor's
    with pytest.raises(NNEFXError, match=r"initializer 'w'.*does not hold the 16 bytes"):
        nnefx.load(str(p))


@pytest.mark.parametrize("nodes, message", [
    ([helper.make_node("Add", ["x", "b"], ["a"], name="n0"), helper.make_node("Relu", ["a"], ["b"], name="n1")],
     r"node 0 'n0' \(Add\).*'b' is not defined before"),  # a cycle
    ([helper.make_node("Add", ["x", "a"], ["a"], name="n0")], r"node 0 'n0' \(Add\).*'a' is not defined before"),
    ([helper.make_node("Add", ["x", "nope"], ["a"], name="n0")], r"'nope' is not defined"),
    ([helper.make_node("Relu", ["x"], ["a"], name="n0"), helper.make_node("Neg", ["x"], ["a"], name="n1")],
     r"node 1 'n1' \(Neg\).*output 'a' is already defined"),
    ([helper.make_node("Relu", ["x"], ["x"], name="n0")], r"node 0 'n0' \(Relu\).*output 'x' is already defined"),
])
def test_cycles_undefined_and_reassigned_tensors(tmp_path, nodes, message):
    p = _save(tmp_path, nodes, [_vi("x", [2])], [_vi("a", [2])])
    with pytest.raises(NNEFXError, match=message):
        nnefx.load(str(p))


@pytest.mark.parametrize("node, message", [
    (helper.make_node("Softmax", ["x"], ["y"], axis=1.5, name="c"), "'axis' must be of type INT, not FLOAT"),
    (helper.make_node("Transpose", ["x"], ["y"], perm="ab", name="c"), "'perm' must be of type INTS, not STRING"),
    (helper.make_node("LeakyRelu", ["x"], ["y"], alpha="big", name="c"), "'alpha' must be of type FLOAT"),
    (helper.make_node("Cast", ["x"], ["y"], to="float", name="c"), "'to' must be of type INT, not STRING"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=numpy_helper.from_array(np.array([2, 2], np.int64)),
                      name="c"), "'kernel_shape' must be of type INTS, not TENSOR"),
])
def test_attributes_of_the_wrong_type(tmp_path, node, message):
    p = _save(tmp_path, [node], [_vi("x", [1, 1, 4, 4])], [_vi("y", None)])
    with pytest.raises(NNEFXError) as e:
        nnefx.load(str(p))
    assert f"node 0 'c' ({node.op_type})" in str(e.value) and message in str(e.value)


def test_unknown_domains_and_opsets(tmp_path):
    node = helper.make_node("Foo", ["x"], ["y"], domain="com.example", name="f")
    g = helper.make_graph([node], "g", [_vi("x", [2])], [_vi("y", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(m, str(tmp_path / "dom.onnx"))
    with pytest.raises(NNEFXError, match=r"node 0 'f' \(Foo\).*domain 'com.example'"):
        nnefx.load(str(tmp_path / "dom.onnx"))
    for opset in (0, 999):
        p = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])], opset=opset)
        with pytest.raises(NNEFXError, match=rf"opset_import.*opset {opset} of the default domain"):
            nnefx.load(str(p))


def test_run_inputs_of_the_wrong_shape_or_element_type_name_both(tmp_path):
    p = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    session = Session(nnefx.load(str(p)))
    with pytest.raises(NNEFXError, match=r"input 'x' must have shape \[2, 3\], got \[3, 2\]"):
        session.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(NNEFXError, match=r"input 'x' must be scalar.*got int64"):
        session.run({"x": np.zeros((2, 3), np.int64)})
    p = _save(tmp_path, [helper.make_node("Neg", ["x"], ["y"])], [_vi("x", [2], TensorProto.INT32)],
              [_vi("y", [2], TensorProto.INT32)], name="i.onnx")
    with pytest.raises(NNEFXError, match=r"input 'x' must be .*integer.*got float32"):
        Session(nnefx.load(str(p))).run({"x": np.zeros(2, np.float32)})
