"""``mish`` end to end: registry kernels, IR (OpenVINO Mish-4) and ONNX (Mish-18) reading and writing.

Mish is ``x * tanh(softplus(x))`` in both operator specifications; nnefx reads it into its own
``mish`` operation (extension ``nnefx_ops``) and writes it back as the single layer/node.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from ir_netgen import assert_close, run_nnefx, run_openvino
from nnefx.ops import registry
from nnefx.runtime.session import Session

X = np.linspace(-12, 12, 2 * 3 * 40, dtype=np.float32).reshape(2, 3, 40)

GRAPH = """version 1.0;
extension nnefx_ops;

graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 3, 40]);
    t = mul(x, 0.5);
    y = mish(t);
}
"""


def _model(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "graph.nnef").write_text(GRAPH)
    return nnefx.load(str(folder))


def _run(model, backend="fast"):
    return Session(model, backend, input_shapes={"x": X.shape}).run({"x": X})


def _ops(model):
    return [op.op for op in model.graph.operations]


def test_formal_and_fast_agree_exactly():
    x = np.concatenate([np.linspace(-40, 40, 40001), [np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, -3e38]])
    x = x.astype(np.float32)
    op = registry.get("mish")
    a, b = op.kernel("formal")(x), op.kernel("fast")(x)
    np.testing.assert_array_equal(a, b)
    assert op.domain == "nnefx" and op.infer([(2, 3)], {}) == ((2, 3),)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.mish(torch.tensor(x[np.isfinite(x)], dtype=torch.float64)).float().numpy()
    np.testing.assert_array_equal(a[np.isfinite(x)], want)


@pytest.mark.peer
def test_ir_mish_read_as_mish_against_openvino(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset4 as o4
    import openvino.opset13 as o

    p = o.parameter(list(X.shape), np.float32, name="x")
    y = o4.mish(p)
    y.output(0).get_tensor().set_names({"y"})
    path = str(tmp_path / "m.xml")
    ov.save_model(ov.Model([y.output(0)], [p], "m"), path, compress_to_fp16=False)
    assert "mish" in _ops(nnefx.load(path))
    want = run_openvino(path, {"x": X})["y"]
    for backend in ("fast", "formal"):
        assert_close(run_nnefx(path, {"x": X}, backend=backend)["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.peer
def test_onnx_mish_read_as_mish_against_onnxruntime(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Mish", ["x"], ["y"])], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(X.shape))])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    model = nnefx.load(path)
    assert "mish" in _ops(model)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    assert_close(_run(model)["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.peer
def test_write_read_round_trip_in_both_formats(tmp_path):
    model = _model(tmp_path)
    want = _run(model)["y"]
    # IR: one Mish-4 layer, OpenVINO agrees, read back as mish
    xml = str(tmp_path / "w.xml")
    nnefx.save(model, xml)
    assert 'type="Mish" version="opset4"' in open(xml).read()
    back = nnefx.load(xml)
    assert "mish" in _ops(back)
    np.testing.assert_array_equal(_run(back)["y"], want)
    pytest.importorskip("openvino")
    assert_close(run_openvino(xml, {"x": X})["y"], want, rtol=1e-5, atol=1e-6)
    # ONNX: one Mish node, onnxruntime agrees, read back as mish
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path = str(tmp_path / "w.onnx")
    nnefx.save(model, path)
    assert [n.op_type for n in onnx.load(path).graph.node if n.op_type == "Mish"] == ["Mish"]
    back = nnefx.load(path)
    assert "mish" in _ops(back)
    np.testing.assert_array_equal(_run(back)["y"], want)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    assert_close(got, want, rtol=1e-5, atol=1e-6)
