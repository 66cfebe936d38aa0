"""ONNX default-domain operators read through registry operations: the ONNX backend node suite's
cases of each, loaded with ``nnefx.load`` and run by a Session on the fast and the formal backend,
compared with the case's expected outputs at the case's own tolerances (element types and shapes
compared strictly).  Cases whose element type the reader cannot return as declared are refused
with the node's location, never answered in another type.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

#: node-suite cases (without ``test_``) that must pass on both backends
PASS = """
acosh acosh_example asinh asinh_example atanh atanh_example isinf isinf_positive isinf_negative isinf_float16
isnan isnan_float16 celu thresholdedrelu thresholdedrelu_default thresholdedrelu_example shrink_hard shrink_soft
swish
argmax_no_keepdims_example_select_last_index argmax_keepdims_random_select_last_index
argmax_negative_axis_keepdims_example_select_last_index argmin_default_axis_random_select_last_index
argmin_no_keepdims_example_select_last_index
""".split()

#: cases refused with a located error naming the node, and a word of the reason
REFUSED = {
    "celu_float16": "f16 data is not supported",
    "reduce_log_sum_exp_keepdims_random": "f64 data is not supported",
}


@pytest.fixture(scope="module")
def suite() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    return {c.name[len("test_"):]: c for c in collect_testcases(None)}


def _model(suite: dict, name: str, tmp_path) -> str:
    path = os.path.join(tmp_path, name + ".onnx")
    onnx.save(suite[name].model, path)
    return path


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_cases_pass(suite, backend, tmp_path):
    for name in PASS:
        case = suite[name]
        session = Session(nnefx.load(_model(suite, name, tmp_path)), backend)
        names = [i.name for i in session.inputs]
        for inputs, outputs in case.data_sets:
            got = list(session.run(dict(zip(names, inputs, strict=False))).values())
            assert len(got) == len(outputs), name
            for g, w in zip(got, outputs, strict=True):
                g, w = np.asarray(g), np.asarray(w)
                assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
                assert g.shape == w.shape, (name, g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cases_refused_located(suite, name, tmp_path):
    node = suite[name].model.graph.node[0]
    with pytest.raises(NNEFXError, match=REFUSED[name]) as info:
        Session(nnefx.load(_model(suite, name, tmp_path)), "fast")
    assert f"({node.op_type})" in str(info.value)
