"""Control flow through the IR v11 writer: an ONNX ``If`` whose condition and a ``Loop`` whose
trip count or condition are known only at run time become If-8 and Loop-5 layers with their
bodies as sub-networks (OpenVINO opset docs); OpenVINO computes what nnefx computes.  Static
ones are still inlined (the branch taken, the loop unrolled)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

onnx = pytest.importorskip("onnx")
ov = pytest.importorskip("openvino")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402


def _vi(name, shape, et=T.FLOAT):
    return h.make_tensor_value_info(name, et, shape)


def _save(tmp_path, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), tmp_path / "m.onnx")
    return nnefx.load(tmp_path / "m.onnx")


def _layers(path, type_):
    return [lay for lay in ET.parse(path).getroot().find("layers") if lay.get("type") == type_]


def _if_model(tmp_path):
    """y = x + x where sum(x) > 0, else x * x - w (w an outer initializer read by the branch)."""
    then = h.make_graph([h.make_node("Add", ["x", "x"], ["r"])], "then", [], [_vi("r", [3])])
    els = h.make_graph([h.make_node("Mul", ["x", "x"], ["p"]), h.make_node("Sub", ["p", "w"], ["r2"])], "else", [],
                       [_vi("r2", [3])])
    return _save(tmp_path, [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
                            h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                 [_vi("x", [3])], [_vi("y", [3])],
                 [h.make_tensor("zero", T.FLOAT, [], [0.0]), h.make_tensor("w", T.FLOAT, [3], [1.0, 2.0, 3.0])])


def test_if_with_a_run_time_condition_is_an_if_layer(tmp_path):
    model = _if_model(tmp_path)
    nnefx.save(model, tmp_path / "m.xml")
    (layer,) = _layers(tmp_path / "m.xml", "If")
    assert layer.get("version") == "opset8"
    assert {c.tag for c in layer} >= {"then_body", "else_body", "then_port_map", "else_port_map"}
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    back = nnefx.load(tmp_path / "m.xml")   # read back: both branches computed, one selected
    for x in (np.array([1, 2, 3], np.float32), np.array([-1, -2, 0.5], np.float32)):
        want = nnefx.Session(model).run({"x": x})["y"]
        np.testing.assert_allclose(compiled({0: x})[0], want, rtol=1e-6)
        np.testing.assert_allclose(nnefx.Session(back).run({"x": x})["y"], want, rtol=1e-6)


def _loop_model(tmp_path, stop_at=None, cond_input=False):
    """y <- y * w + i for n iterations (n an input), each y also a scan output; with
    ``stop_at`` the body's condition i + 1 < stop_at, which ends it early only when the Loop
    has a condition input (ONNX ignores it otherwise; OpenVINO's Loop never does)."""
    nodes = [h.make_node("Mul", ["y_in", "w"], ["m"]), h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Add", ["m", "fi"], ["y_out"]), h.make_node("Identity", ["y_out"], ["scan"])]
    if stop_at is None:
        nodes.append(h.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        nodes += [h.make_node("Add", ["i", "one"], ["next"]), h.make_node("Less", ["next", "stop"], ["c_out"])]
    body = h.make_graph(nodes, "body", [_vi("i", [], T.INT64), _vi("c_in", [], T.BOOL), _vi("y_in", [2])],
                        [_vi("c_out", [], T.BOOL), _vi("y_out", [2]), _vi("scan", [2])])
    inits = [h.make_tensor("w", T.FLOAT, [2], [2.0, 0.5]), h.make_tensor("one", T.INT64, [], [1]),
             h.make_tensor("stop", T.INT64, [], [stop_at or 0])]
    inits.append(h.make_tensor("go", T.BOOL, [], [True]))
    return _save(tmp_path, [h.make_node("Loop", ["n", "go" if cond_input else "", "y0"], ["y", "ys"], body=body)],
                 [_vi("n", [], T.INT64), _vi("y0", [2])], [_vi("y", [2]), _vi("ys", [None, 2])], inits)


@pytest.mark.parametrize("stop_at,cond_input", [(None, False), (2, False), (2, True)])
def test_loop_with_a_run_time_trip_count_is_a_loop_layer(tmp_path, stop_at, cond_input):
    model = _loop_model(tmp_path, stop_at, cond_input)
    nnefx.save(model, tmp_path / "m.xml")
    (layer,) = _layers(tmp_path / "m.xml", "Loop")
    assert layer.get("version") == "opset5"
    purposes = {e.get("purpose") for e in layer.find("port_map")}
    assert purposes >= {"current_iteration", "execution_condition"}
    assert len(layer.find("back_edges")) == 1
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    for n in (1, 3, 5):
        feed = {"n": np.array(n, np.int64), "y0": np.array([1.0, 4.0], np.float32)}
        want = nnefx.Session(model).run(feed)
        got = {k.get_any_name(): v for k, v in compiled(feed).items()}
        assert got["ys"].shape == want["ys"].shape == (min(n, stop_at) if cond_input else n, 2)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
        np.testing.assert_allclose(got["ys"], want["ys"], rtol=1e-6)


def test_loop_with_a_nested_if_on_an_outer_flag(tmp_path):
    """Captured outer tensors (w, flag) reach the body and the If inside it as invariant inputs."""
    then = h.make_graph([h.make_node("Add", ["y_in", "w"], ["t"])], "then", [], [_vi("t", [2])])
    els = h.make_graph([h.make_node("Sub", ["y_in", "w"], ["e"])], "else", [], [_vi("e", [2])])
    body = h.make_graph([h.make_node("If", ["flag"], ["y_out"], then_branch=then, else_branch=els),
                         h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [_vi("i", [], T.INT64), _vi("c_in", [], T.BOOL), _vi("y_in", [2])],
                        [_vi("c_out", [], T.BOOL), _vi("y_out", [2])])
    model = _save(tmp_path, [h.make_node("Loop", ["n", "", "y0"], ["y"], body=body)],
                  [_vi("n", [], T.INT64), _vi("y0", [2]), _vi("flag", [], T.BOOL), _vi("w", [2])], [_vi("y", [2])])
    nnefx.save(model, tmp_path / "m.xml")
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    for flag in (True, False):
        feed = {"n": np.array(3, np.int64), "y0": np.array([1.0, 4.0], np.float32), "flag": np.array(flag),
                "w": np.array([0.5, -1.0], np.float32)}
        np.testing.assert_allclose(compiled(feed)[0], nnefx.Session(model).run(feed)["y"], rtol=1e-6)


def test_static_control_flow_is_still_inlined(tmp_path):
    then = h.make_graph([h.make_node("Neg", ["x"], ["r"])], "then", [], [_vi("r", [3])])
    els = h.make_graph([h.make_node("Abs", ["x"], ["r2"])], "else", [], [_vi("r2", [3])])
    model = _save(tmp_path, [h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)],
                  [_vi("x", [3])], [_vi("y", [3])], [h.make_tensor("c", T.BOOL, [], [True])])
    nnefx.save(model, tmp_path / "m.xml")
    assert not _layers(tmp_path / "m.xml", "If") and _layers(tmp_path / "m.xml", "Negative")


@pytest.mark.parametrize("stop_at,cond_input", [(None, False), (2, True)])
def test_a_loop_layer_reads_back_and_runs_as_openvino_runs_it(tmp_path, stop_at, cond_input):
    """nnefx's IR reader takes the Loop-5 layer it wrote (run-time trip count, condition from
    the body) as one onnx_loop over its body: the same values as OpenVINO, bit for bit, on both
    backends, for no, one and several iterations (and -1, no limit, where the body stops it)."""
    nnefx.save(_loop_model(tmp_path, stop_at, cond_input), tmp_path / "m.xml")
    back = nnefx.load(tmp_path / "m.xml")
    assert "onnx_loop" in {op.op for op in back.graph.operations} and len(back.graph.subgraphs) == 1
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    for n in (0, 1, 3, 5) + ((-1,) if cond_input else ()):
        feed = {"n": np.array(n, np.int64), "y0": np.array([1.0, 4.0], np.float32)}
        want = {k.get_any_name(): v for k, v in compiled(feed).items()}
        for backend in ("formal", "fast"):
            got = nnefx.Session(back, backend=backend).run(feed)
            for k in ("y", "ys"):
                assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), (n, backend, k)


def test_a_loop_layer_read_back_is_written_again_as_ir_and_onnx(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    nnefx.save(_loop_model(tmp_path, 2, True), tmp_path / "m.xml")
    back = nnefx.load(tmp_path / "m.xml")
    nnefx.save(back, tmp_path / "again.xml")
    nnefx.save(back, tmp_path / "again.onnx")
    (layer,) = _layers(tmp_path / "again.xml", "Loop")
    first = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    again = ov.Core().compile_model(str(tmp_path / "again.xml"), "CPU")
    session = ort.InferenceSession(str(tmp_path / "again.onnx"), providers=["CPUExecutionProvider"])
    for n in (0, 3, -1):
        feed = {"n": np.array(n, np.int64), "y0": np.array([1.0, 4.0], np.float32)}
        want = list(first(feed).values())
        for got in (list(again(feed).values()), session.run(None, feed)):
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), n


def test_float_to_integer_cast_is_refused_in_ir(tmp_path):
    model = _save(tmp_path, [h.make_node("Cast", ["x"], ["y"], to=T.INT32)], [_vi("x", [3])], [_vi("y", [3], T.INT32)])
    with pytest.raises(NNEFXError, match="Cast from a float type to i32") as err:
        nnefx.save(model, tmp_path / "m.xml")
    assert "Cast" in str(err.value.location)
    assert not (tmp_path / "m.xml").exists()


@pytest.mark.parametrize("in_dir,out_dir,out_axis", [(0, 0, 0), (1, 0, 0), (0, 1, 1), (1, 1, -1)])
def test_scan_over_a_run_time_length_is_a_tensor_iterator(tmp_path, in_dir, out_dir, out_axis):
    """s <- s + x_t, each (s * k) a scan output; x's length known only at run time."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Mul", ["s_out", "k"], ["o"])],
                        "body", [_vi("s_in", [2]), _vi("x_t", [2])], [_vi("s_out", [2]), _vi("o", [2])])
    model = _save(tmp_path, [h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                                         scan_input_directions=[in_dir], scan_output_directions=[out_dir],
                                         scan_output_axes=[out_axis])],
                  [_vi("s0", [2]), _vi("x", [None, 2]), _vi("k", [2])], [_vi("s", [2]), _vi("ys", None)])
    nnefx.save(model, tmp_path / "m.xml")
    (layer,) = _layers(tmp_path / "m.xml", "TensorIterator")
    assert len(layer.find("back_edges")) == 1
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")
    for n in (1, 4):
        feed = {"s0": np.array([1, 2], np.float32), "x": np.arange(2 * n, dtype=np.float32).reshape(n, 2),
                "k": np.array([1, -1], np.float32)}
        want = nnefx.Session(model).run(feed)
        got = {k.get_any_name(): v for k, v in compiled(feed).items()}
        for name in ("s", "ys"):
            assert np.array_equal(got[name], want[name]), name
    # read back with the length given at load: nnefx's reader unrolls it
    back = nnefx.load(tmp_path / "m.xml", shapes={"x": (4, 2)})
    got = nnefx.Session(back).run(feed)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_cast_and_cast_like_between_exact_types_are_converts(tmp_path):
    nodes = [h.make_node("Cast", ["x"], ["h"], to=T.FLOAT16), h.make_node("CastLike", ["h", "like"], ["y"])]
    model = _save(tmp_path, nodes, [_vi("x", [3], T.INT32)], [_vi("y", [3], T.DOUBLE)],
                  [h.make_tensor("like", T.DOUBLE, [1], [0.0])])
    nnefx.save(model, tmp_path / "m.xml")
    assert [c.find("data").get("destination_type") for c in _layers(tmp_path / "m.xml", "Convert")] == ["f16", "f64"]
    x = np.array([1, -70000, 2049], np.int32)    # f16 overflow and rounding
    want = nnefx.Session(model).run({"x": x})["y"]
    assert want.tolist() == [1.0, -np.inf, 2048.0]
    assert np.array_equal(nnefx.Session(nnefx.load(tmp_path / "m.xml")).run({"x": x})["y"], want)
    # OpenVINO's CPU plugin fuses the two Converts (no f16 rounding between): values f16 holds
    x = np.array([1, -1000, 2048], np.int32)
    want = nnefx.Session(model).run({"x": x})["y"]
    assert np.array_equal(ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU")({0: x})[0], want)
