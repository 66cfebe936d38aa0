"""ONNX Dropout is read as the identity only in inference; in training it is refused, never wrong."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    from onnx.backend.test.case.node import collect_testcases

    return [c for c in collect_testcases(None) if "dropout" in c.name and "mask" not in c.name]


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
