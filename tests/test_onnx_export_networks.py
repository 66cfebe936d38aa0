"""ONNX export of whole networks and through the CLI.

* the digits example (``examples/digits/model``) -> ``.onnx`` -> onnxruntime = nnefx;
* the real networks of ``tests/realnets`` (torch -> ONNX -> nnef-tools -> NNEF, generated
  here) -> nnefx -> ``.onnx`` -> onnxruntime agrees with torch within 1e-4 relative
  (max|ort - torch| / max|torch|), as nnefx itself does in ``test_real_networks.py``;
* ``nnefx convert IN out.onnx``: writes a checked model; unsupported operations and
  stateful graphs print ``FILE:LINE:COL: error: ...``, exit 1 and leave no file behind.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import nnefx  # noqa: E402
from _export_helpers import run_ort, save_onnx  # noqa: E402
from nnefx.cli import main  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

DIGITS = "examples/digits/model"
RTOL = 1e-4


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(expected))), 1e-12)
    return float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) / scale


def test_digits_example_exports_and_agrees(tmp_path):
    model = nnefx.load(DIGITS)
    path = save_onnx(model, str(tmp_path / "digits.onnx"))
    proto = onnx.load(path)
    assert [n.op_type for n in proto.graph.node] == ["Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Reshape",
                                                     "Gemm", "Softmax"]
    x = np.random.default_rng(3).uniform(0, 1, (1, 1, 8, 8)).astype(np.float32)
    want = Session(model, "fast").run({"input": x})["probabilities"]
    got = run_ort(path, {"input": x})["probabilities"]
    assert relative_error(got, want) <= 1e-5
    # the file reads back into nnefx too, with the same result
    back = Session(nnefx.load(path), "fast").run({"input": x})
    assert relative_error(next(iter(back.values())), want) <= 1e-5


def test_convert_command_writes_onnx(tmp_path, capsys):
    out = str(tmp_path / "digits.onnx")
    assert main(["convert", DIGITS, out]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    onnx.checker.check_model(out)
    out2 = str(tmp_path / "forced.bin")
    assert main(["convert", DIGITS, out2, "--to", "onnx"]) == 0
    assert onnx.load(out2).graph.output[0].name == "probabilities"


BAD = {
    "unsupported.nnef": ("""version 1.0;
graph G( x, rois, index ) -> ( y )
{
    x = external<scalar>(shape = [1, 1, 0, 4]);
    rois = external<scalar>(shape = [1, 4]);
    index = external<integer>(shape = [1]);
    r = relu(x);
    y = max_roi_pool(r, rois, index, output_size = [2, 2]);
}
""", "8:9", "cannot write operation 'max_roi_pool' as ONNX"),
    "stateful.nnef": ("""version 1.0;
graph G( x ) -> ( y, s )
{
    x = external<scalar>(shape = [1, 2]);
    v = variable<scalar>(shape = [1, 2], label = 'acc');
    y = add(x, v);
    s = update(v, y);
}
""", "7:9", "ONNX models have no state"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_convert_refusals_are_located_and_write_nothing(tmp_path, capsys, name):
    text, where, message = BAD[name]
    src = tmp_path / name
    src.write_text(text)
    (tmp_path / "graph.dat").write_bytes(b"")   # unrelated file: must survive untouched
    if name == "stateful.nnef":
        folder = tmp_path / "model"
        folder.mkdir()
        (folder / "graph.nnef").write_text(text)
        from nnefx.io.binary import write_tensor

        write_tensor(str(folder / "acc.dat"), np.zeros((1, 2), np.float32))
        src = folder / "graph.nnef"
        arg = str(folder)
    else:
        arg = str(src)
    out = tmp_path / "out.onnx"
    before = sorted(os.listdir(tmp_path))
    assert main(["convert", arg, str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(f"{src}:{where}: error: ") and message in err[-1]
    assert not out.exists() and sorted(os.listdir(tmp_path)) == before


# --- real networks: torch -> ONNX -> nnef-tools -> NNEF -> nnefx -> ONNX -----------------------

torch = pytest.importorskip("torch")
pytest.importorskip("nnef_tools")

from realnets import convert, networks  # noqa: E402


@pytest.fixture(scope="module", params=networks.NAMES)
def converted(request, tmp_path_factory):
    net, x = networks.build(request.param)
    tmp = tmp_path_factory.mktemp(f"onnx_{request.param}")
    onnx_path = convert.export_onnx(net, x, tmp / "net.onnx")
    folder = convert.onnx_to_nnef(onnx_path, tmp / "net.nnef")
    with torch.no_grad():
        expected = net(x).numpy()
    return request.param, folder, x.numpy(), expected, tmp


@pytest.mark.slow
def test_real_network_round_trip_matches_torch(converted):
    name, folder, x, expected, tmp = converted
    model = nnefx.load(folder)
    path = save_onnx(model, str(tmp / "back.onnx"))
    feed = x.astype(np.int64) if x.dtype.kind == "i" else x
    (got,) = run_ort(path, {model.graph.inputs[0]: feed}).values()
    assert got.shape == expected.shape
    assert relative_error(got, expected) <= RTOL
    (mine,) = Session(model, "fast").run({model.graph.inputs[0]: feed}).values()
    assert relative_error(got, mine) <= RTOL


@pytest.mark.slow
def test_torch_onnx_read_by_nnefx_and_written_again(converted):
    """ONNX -> nnefx -> ONNX: the rewritten file computes what the original does (the
    importer's ``ir_*`` operations, e.g. the embedding's Gather, map back to ONNX nodes)."""
    name, _, x, _, tmp = converted
    original = str(tmp / "net.onnx")
    model = nnefx.load(original)
    path = save_onnx(model, str(tmp / "again.onnx"))
    first = ort.InferenceSession(original, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    feed = x.astype(np.int64) if x.dtype.kind == "i" else x
    (want,) = run_ort(original, {first: feed}).values()
    (got,) = run_ort(path, {model.graph.inputs[0]: feed}).values()
    assert relative_error(got, want) <= 1e-5


def test_onnx_extension_operations_round_trip(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Div", ["i", "k"], ["idiv"]),
        helper.make_node("Mod", ["a", "b"], ["fmod"], fmod=1),
        helper.make_node("Greater", ["a", "b"], ["gt"]),
        helper.make_node("Expand", ["a", "target"], ["wide"]),
        helper.make_node("Gather", ["a", "neg"], ["picked"], axis=1),
        helper.make_node("Erf", ["a"], ["erf"]),
    ]
    inits = [numpy_helper.from_array(np.array([[3, -2, 5]], np.int64), "k"),
             numpy_helper.from_array(np.array([2, 2, 3], np.int64), "target"),
             numpy_helper.from_array(np.array([-1, 0], np.int64), "neg")]
    graph = helper.make_graph(
        nodes, "ext",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         [("idiv", TensorProto.INT64), ("fmod", TensorProto.FLOAT), ("gt", TensorProto.BOOL),
          ("wide", TensorProto.FLOAT), ("picked", TensorProto.FLOAT), ("erf", TensorProto.FLOAT)]],
        initializer=inits)
    src = str(tmp_path / "ext.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    model = nnefx.load(src)
    assert {"integer_arith", "erf"} <= {op.op for op in model.graph.operations}
    path = str(tmp_path / "again.onnx")
    nnefx.save(model, path)
    rng = np.random.default_rng(5)
    feeds = {"a": rng.uniform(-3, 3, (2, 3)).astype(np.float32),
             "b": rng.choice([-1.5, 0.7, 2.0], (2, 3)).astype(np.float32),
             "i": rng.integers(-9, 9, (2, 3))}
    want, got = run_ort(src, feeds), run_ort(path, feeds)
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)


def test_onnx_import_extensions_round_trip_more(tmp_path):
    """CumSum, ReduceProd, Round, Einsum, GatherElements read by nnefx as
    ``ir_*`` operations and written back: onnxruntime computes the same on both files."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("CumSum", ["a", "ax"], ["cs"], exclusive=1, reverse=1),
        helper.make_node("ReduceProd", ["a"], ["rp"], axes=[1], keepdims=1),
        helper.make_node("Round", ["a"], ["rd"]),
        helper.make_node("Einsum", ["a", "b"], ["es"], equation="ij,kj->ik"),
        helper.make_node("GatherElements", ["a", "ge_i"], ["ge"], axis=1),
    ]
    inits = [numpy_helper.from_array(np.array(1, np.int64), "ax"),
             numpy_helper.from_array(np.array([[0, 3, 3], [1, 0, 2], [3, 3, 0]], np.int64), "ge_i")]
    graph = helper.make_graph(
        nodes, "ext2",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [5, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("cs", "rp", "rd", "es", "ge")],
        initializer=inits)
    src = str(tmp_path / "ext2.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    model = nnefx.load(src)
    assert {"cumulative_sum", "einsum", "round_with_mode"} <= {op.op for op in model.graph.operations}
    path = str(tmp_path / "again.onnx")
    nnefx.save(model, path)
    a = np.random.default_rng(8).uniform(-3, 3, (3, 4)).astype(np.float32)
    a[0, :3] = [0.5, 1.5, -2.5]    # Round's ties
    feeds = {"a": a, "b": np.random.default_rng(9).uniform(-1, 1, (5, 4)).astype(np.float32)}
    want, got = run_ort(src, feeds), run_ort(path, feeds)
    assert list(got) == list(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6, err_msg=k)
