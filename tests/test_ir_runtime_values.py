"""Run-time values in IR files: a layer whose parameters arrive as tensors computed at run time
(ReduceSum axes, Pad pads, Interpolate sizes given as network inputs or computed in the
network) is read again with each run's values instead of being refused at load, against
OpenVINO on the same file."""

from __future__ import annotations

import numpy as np
import pytest

from ir_netgen import run_openvino

ov = pytest.importorskip("openvino")
pytestmark = pytest.mark.peer

import openvino.opset13 as o  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.graph import DEFERRED  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402


def _save(tmp_path, outs, params) -> str:
    for i, x in enumerate(outs):
        x.output(0).get_tensor().set_names({f"out{i}"})
    path = str(tmp_path / "case.xml")
    ov.save_model(ov.Model([x.output(0) for x in outs], params, "case"), path, compress_to_fp16=False)
    return path


def _network(tmp_path) -> str:
    x = o.parameter([2, 6], np.float32, name="x")
    axes = o.parameter([1], np.int64, name="axes")
    pads = o.parameter([2], np.int64, name="pads")
    reduced = o.reduce_sum(x, axes, keep_dims=False)
    padded = o.pad(o.relu(x), pads, o.add(pads, o.constant(np.array([1, 0], np.int64))), "constant",
                   o.constant(np.float32(0.5)))
    tail = o.multiply(padded, o.constant(np.float32(2)))  # reads a deferred layer's result
    return _save(tmp_path, [reduced, tail], [x, axes, pads])


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_layer_parameters_computed_at_run_time_are_bound_per_run(tmp_path, backend):
    path = _network(tmp_path)
    model = nnefx.load(path)
    assert [op.op for op in model.graph.operations].count(DEFERRED) == 2
    session = Session(model, backend)
    x = np.arange(12, dtype=np.float32).reshape(2, 6) - 4
    for axes, pads in (([1], [1, 0]), ([0], [0, 2]), ([-1], [2, 1]), ([1], [1, 0])):
        feeds = {"x": x, "axes": np.array(axes, np.int64), "pads": np.array(pads, np.int64)}
        want = run_openvino(path, feeds)
        got = session.run(feeds)
        for k, w in want.items():
            assert got[k].shape == w.shape and got[k].dtype == w.dtype
            np.testing.assert_allclose(got[k], w, rtol=1e-6)


def test_a_value_the_layer_rejects_is_located_with_the_values(tmp_path):
    session = Session(nnefx.load(_network(tmp_path)))
    feeds = {"x": np.ones((2, 6), np.float32), "axes": np.array([5], np.int64), "pads": np.array([0, 0], np.int64)}
    with pytest.raises(NNEFXError, match=r"ReduceSum.*'axes' = \[5\]") as err:
        session.run(feeds)
    assert err.value.location is not None and err.value.location.line is not None  # the layer's line


def test_the_openvino_engine_runs_the_bound_network(tmp_path):
    path = _network(tmp_path)
    session = Session(nnefx.load(path), "openvino", verify=True)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for axes, pads in (([1], [1, 0]), ([0], [0, 2])):
        feeds = {"x": x, "axes": np.array(axes, np.int64), "pads": np.array(pads, np.int64)}
        want = run_openvino(path, feeds)
        got = session.run(feeds)
        for k, w in want.items():
            np.testing.assert_allclose(got[k], w, rtol=1e-6)


def test_writers_refuse_the_deferred_layer_located(tmp_path):
    model = nnefx.load(_network(tmp_path))
    for out in ("back.xml", "back.onnx", "back.nnef"):
        with pytest.raises(NNEFXError, match="ReduceSum|Pad"):
            nnefx.save(model, str(tmp_path / out))
