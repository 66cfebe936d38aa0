"""ONNX -> nnefx -> ONNX for every single-node case of the ONNX import tests
(``tests/test_onnx_nodes.py``): onnxruntime computes the same on the rewritten file as on the
original, or the rewrite is refused with the node's location (the cases listed in
``REFUSED``, whose nnefx form has no exact ONNX counterpart)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import nnefx  # noqa: E402
from _export_helpers import run_ort, save_onnx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from test_onnx_nodes import CASES, MORE, make  # noqa: E402

ALL = [(op, inputs, attrs, case[3] if len(case) > 3 else 17, None) for case in CASES
       for op, inputs, attrs in [case[:3]]] + [tuple(case) for case in MORE]
IDS = [f"{i}-{c[0]}-{c[3]}" for i, c in enumerate(ALL)]
REFUSED: set[str] = set()


def _run(path: str, feeds: dict) -> list[np.ndarray]:
    return list(run_ort(path, feeds).values())


@pytest.mark.parametrize("index", range(len(ALL)), ids=IDS)
def test_single_node_round_trip(tmp_path, index):
    op, inputs, attrs, opset, out_type = ALL[index]
    kw = {}
    if out_type is not None:
        kw = {"n_out": len(out_type) if isinstance(out_type, list) else 1, "out_type": out_type}
    model, feeds = make(op, inputs, attrs, opset, **kw)
    src = str(tmp_path / "n.onnx")
    onnx.save(model, src)
    want = _run(src, feeds)
    loaded = nnefx.load(src)
    dst = str(tmp_path / "again.onnx")
    if IDS[index] in REFUSED:
        with pytest.raises(NNEFXError, match="as ONNX"):
            nnefx.save(loaded, dst)
        return
    save_onnx(loaded, dst)
    got = _run(dst, {k: v for k, v in feeds.items() if k in loaded.graph.inputs})
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-5, atol=1e-6)


# --- torch-exported networks of the import tests, written again --------------------------------

torch = pytest.importorskip("torch")
import test_onnx_models as nets  # noqa: E402

NETS = [("cnn", nets._CNN, (2, 3, 9, 9), 13), ("mobile", nets._Mobile, (1, 4, 6, 6), 18),
        ("block", nets._Block, (2, 5, 16), 17), ("misc", nets._Misc, (2, 2, 8, 8), 13),
        ("causal", nets._Causal, (2, 5, 16), 18)]


@pytest.mark.parametrize("name, cls, shape, opset", NETS, ids=[n[0] for n in NETS])
def test_torch_network_round_trip(tmp_path, name, cls, shape, opset):
    """torch -> ONNX (opset 13-18) -> nnefx -> ONNX (opset 18): onnxruntime agrees on both files
    (attention, layer/instance norm, GELU, hard-swish, pixel shuffle, embeddings, cumsum,
    ceil-mode pooling, transposed convolution, resampling)."""
    torch.manual_seed(5)
    net = cls().eval()
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    src = str(tmp_path / f"{name}.onnx")
    torch.onnx.export(net, torch.from_numpy(x), src, opset_version=opset, dynamo=False, input_names=["input"])
    want = _run(src, {"input": x})
    model = nnefx.load(src)
    dst = str(tmp_path / "again.onnx")
    save_onnx(model, dst)
    got = _run(dst, {"input": x})
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape
        scale = max(float(np.abs(w).max()), 1.0)
        assert float(np.abs(g.astype(np.float64) - w).max()) <= 1e-4 * scale
