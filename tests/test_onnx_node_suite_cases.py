"""Node-suite cases the ONNX reader once got wrong: Dropout (the identity only in inference; in
training refused, never wrong; a training_mode given at run time decides per run) and ConvTranspose with output_shape and output_padding together."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402


@pytest.fixture(scope="module")
def suite():
    from onnx.backend.test.case.node import collect_testcases

    return collect_testcases(None)


@pytest.fixture(scope="module")
def cases(suite):
    return [c for c in suite if "dropout" in c.name and "mask" not in c.name]


def test_inference_dropout_is_the_identity_and_training_is_refused(cases, tmp_path):
    seen = {"ran": 0, "refused": 0}
    for case in cases:
        path = os.path.join(tmp_path, case.name + ".onnx")
        onnx.save(case.model, path)
        inputs, outputs = case.data_sets[0]
        session = Session(nnefx.load(path))
        feeds = dict(zip([i.name for i in session.inputs], inputs, strict=False))
        if case.name.startswith("test_training") and "zero_ratio" not in case.name:
            # training_mode true and a ratio above 0 arrive at run time: random draws, refused
            with pytest.raises(NNEFXError, match=r"Dropout.*random.*run-time values"):
                session.run(feeds)
            seen["refused"] += 1
            continue
        got = session.run(feeds)
        np.testing.assert_allclose(next(iter(got.values())), outputs[0])
        seen["ran"] += 1
    assert seen["ran"] >= 4 and seen["refused"] >= 2


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_dropout_training_mode_at_run_time_decides_per_run(backend, tmp_path):
    from onnx import TensorProto, helper

    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("t", TensorProto.BOOL, [])], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3])])
    path = os.path.join(tmp_path, "dropout.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    session = Session(nnefx.load(path), backend)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for r, t in ((0.5, False), (0.0, True)):
        got = session.run({"x": x, "r": np.float32(r), "t": np.bool_(t)})
        np.testing.assert_array_equal(got["y"], x)
        assert got["mask"].dtype == np.bool_ and got["mask"].all() and got["mask"].shape == (2, 3)
    with pytest.raises(NNEFXError, match=r"ratio 0\.25.*run-time values") as err:
        session.run({"x": x, "r": np.float32(0.25), "t": np.bool_(True)})
    assert "(Dropout)" in str(err.value)


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_conv_transpose_cases(suite, backend, tmp_path):
    cases = [c for c in suite if c.name.startswith("test_convtranspose")]
    assert any(c.name == "test_convtranspose_kernel_shape" for c in cases)
    for case in cases:
        path = os.path.join(tmp_path, case.name + ".onnx")
        onnx.save(case.model, path)
        session = Session(nnefx.load(path), backend)
        inputs, outputs = case.data_sets[0]
        got = session.run(dict(zip([i.name for i in session.inputs], inputs, strict=False)))
        np.testing.assert_allclose(next(iter(got.values())), outputs[0], rtol=1e-5, atol=1e-5, err_msg=case.name)
