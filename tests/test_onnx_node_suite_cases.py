"""Node-suite cases the ONNX reader once got wrong: Dropout (the identity only in inference; in
training refused, never wrong) and ConvTranspose with output_shape and output_padding together."""

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
        if case.name.startswith("test_training"):
            with pytest.raises(NNEFXError, match="Dropout"):
                Session(nnefx.load(path)).run({})
            seen["refused"] += 1
            continue
        session = Session(nnefx.load(path))
        got = session.run(dict(zip([i.name for i in session.inputs], inputs, strict=False)))
        np.testing.assert_allclose(next(iter(got.values())), outputs[0])
        seen["ran"] += 1
    assert seen["ran"] >= 3 and seen["refused"] >= 3


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
