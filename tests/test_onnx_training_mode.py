"""ONNX operators in training mode that are deterministic: BatchNormalization normalising with
the batch's own statistics (and updating the running ones), against onnx.reference and the
formula of the operator docs."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

_ELEM = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}


def _bn_model(path, shape, dtype, opset, outputs, **attrs):
    c = shape[1]
    names = ["y", "running_mean", "running_var", "saved_mean", "saved_var"][:outputs]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], names, **attrs)
    elem = _ELEM[dtype]
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", elem, list(shape))] + [
        helper.make_tensor_value_info(n, elem, [c]) for n in "sbmv"],
        [helper.make_tensor_value_info(n, elem, None) for n in names])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _feeds(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    return {"x": rng.standard_normal(shape).astype(dtype), "s": rng.standard_normal(c).astype(dtype),
            "b": rng.standard_normal(c).astype(dtype), "m": rng.standard_normal(c).astype(dtype),
            "v": rng.random(c).astype(dtype) + 0.5}


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("shape,dtype", [((2, 3, 4, 5), np.float32), ((4, 2), np.float32),
                                          ((3, 4, 6), np.float16)])
def test_batch_norm_training_mode_matches_onnx_reference(backend, shape, dtype, tmp_path):
    path = _bn_model(os.path.join(tmp_path, "bn.onnx"), shape, dtype, 15, 3, training_mode=1,
                     epsilon=1e-3, momentum=0.8)
    feeds = _feeds(shape, dtype, 1)
    want = ReferenceEvaluator(path).run(None, feeds)
    got = Session(nnefx.load(path), backend).run(feeds)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    for (name, g), w in zip(got.items(), want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


def test_batch_norm_9_with_five_outputs_is_training(tmp_path):
    # before opset 14 the number of outputs says training: Y uses the batch's statistics
    shape = (3, 2, 5)
    path = _bn_model(os.path.join(tmp_path, "bn9.onnx"), shape, np.float32, 9, 5)
    feeds = _feeds(shape, np.float32, 2)
    got = Session(nnefx.load(path)).run(feeds)
    x = feeds["x"].astype(np.float64)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    y = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * feeds["s"][:, None] + feeds["b"][:, None]
    np.testing.assert_allclose(got["y"], y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["running_mean"], feeds["m"] * 0.9 + mean * 0.1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["running_var"], feeds["v"] * 0.9 + var * 0.1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["saved_mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["saved_var"], var, rtol=1e-5, atol=1e-6)
