"""Loop-5 layers whose iteration count is known only at run time, in IR files OpenVINO itself
wrote (``openvino.save_model`` of a model built with its opset API): nnefx reads each as one
``onnx_loop`` over its body and computes what OpenVINO computes, bit for bit, on both
backends.  The body keeps an i32 ``current_iteration``, an invariant input, a merged (carried)
value and a condition computed from the data; the pieces are concatenated along axis 1."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

ov = pytest.importorskip("openvino")


def _loop_ir(path, *, constant_trip: int | None = None, sliced: bool = False) -> str:
    import openvino.opset8 as ops

    it = ops.parameter([1], np.int32, name="it")
    y_in = ops.parameter([2, 3], np.float32, name="y_in")
    x_in = ops.parameter([2, 3] if not sliced else [2, 1], np.float32, name="x_in")
    y_out = ops.add(ops.multiply(y_in, ops.constant(np.float32(2))), x_in)
    piece = ops.unsqueeze(ops.add(y_out, ops.convert(it, "f32")), ops.constant(np.array([1], np.int64)))
    cond = ops.less(ops.reduce_sum(y_out, ops.constant(np.array([0, 1], np.int64)), False),
                    ops.constant(np.float32(100)))
    r_cond, r_y, r_piece = ops.result(cond), ops.result(y_out), ops.result(piece)
    body = ov.Model([r_cond, r_y, r_piece], [it, y_in, x_in], "body")
    trip = ops.parameter([], np.int64, name="trip") if constant_trip is None else ops.constant(np.int64(constant_trip))
    y0 = ops.parameter([2, 3], np.float32, name="y0")
    x = ops.parameter([2, 3], np.float32, name="x")
    loop = ops.loop(trip, ops.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([0, 0])   # current_iteration: body input 0; condition: body output 0
    loop.set_merged_input(y_in, y0.output(0), r_y.output(0))
    if sliced:
        loop.set_sliced_input(x_in, x.output(0), 0, 1, 1, -1, 1)
    else:
        loop.set_invariant_input(x_in, x.output(0))
    outs = [ops.result(loop.get_iter_value(r_y.output(0), -1)),
            ops.result(loop.get_concatenated_slices(r_piece.output(0), 0, 1, 1, -1, 1))]
    params = [y0, x] if constant_trip is not None else [trip, y0, x]
    ov.save_model(ov.Model(outs, params, "m"), str(path), compress_to_fp16=False)
    return str(path)


@pytest.mark.parametrize("constant_trip", [None, 10], ids=["run-time-trip", "run-time-condition"])
def test_openvino_loop_runs_as_openvino_runs_it(tmp_path, constant_trip):
    path = _loop_ir(tmp_path / "m.xml", constant_trip=constant_trip)
    model = nnefx.load(path)
    assert "onnx_loop" in {op.op for op in model.graph.operations}
    compiled = ov.Core().compile_model(path, "CPU")
    rng = np.random.default_rng(1)
    y0, x = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    for n in ((1, 3, 10, -1) if constant_trip is None else (None,)):
        feed = {"y0": y0, "x": x} | ({} if n is None else {"trip": np.array(n, np.int64)})
        want = list(compiled(feed).values())
        for backend in ("formal", "fast"):
            got = list(nnefx.Session(model, backend=backend).run(feed).values())
            assert [g.shape for g in got] == [w.shape for w in want]
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), (n, backend)


def test_openvino_loop_converts_to_onnx_with_the_same_values(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = _loop_ir(tmp_path / "m.xml")
    nnefx.save(nnefx.load(path), tmp_path / "m.onnx")
    compiled = ov.Core().compile_model(path, "CPU")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    feed = {"trip": np.array(-1, np.int64), "y0": rng.standard_normal((2, 3)).astype(np.float32),
            "x": rng.standard_normal((2, 3)).astype(np.float32)}
    want = list(compiled(feed).values())
    assert all(np.array_equal(g, w) for g, w in zip(session.run(None, feed), want, strict=True))


def test_sliced_input_of_a_run_time_loop_is_refused_located(tmp_path):
    path = _loop_ir(tmp_path / "m.xml", sliced=True)
    with pytest.raises(NNEFXError, match="sliced inputs of a Loop whose iteration count is known only at run time") \
            as err:
        nnefx.load(path)
    assert "Loop" in str(err.value.location)
