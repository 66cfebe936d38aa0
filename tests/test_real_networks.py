"""Real networks end to end: torch → ONNX → nnef-tools → NNEF → nnefx, against torch.

The converted files use what exporters really write: ``constant``, custom fragments with
unary minus (nnef-tools' polynomial ``erf``), ``lp_reduce``, ``multilinear_upsample`` and
``nearest_upsample``.  The oracle is torch itself (the nnef-tools interpreter is not usable
with numpy 2).  Agreement is measured as max|nnefx - torch| / max|torch| ≤ 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("nnef_tools")
pytest.importorskip("onnx")

import nnefx  # noqa: E402
from realnets import convert, networks  # noqa: E402

# nnef-tools' erf fragment is a polynomial approximation with absolute error ≤ 1.5e-7, far
# inside the tolerance, so GELU still agrees with torch's exact erf.
RTOL = 1e-4


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(expected))), 1e-12)
    return float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) / scale


@pytest.fixture(scope="module", params=networks.NAMES)
def converted(request, tmp_path_factory):
    net, x = networks.build(request.param)
    tmp = tmp_path_factory.mktemp(request.param)
    onnx_path = convert.export_onnx(net, x, tmp / "net.onnx")
    folder = convert.onnx_to_nnef(onnx_path, tmp / "net.nnef")
    with torch.no_grad():
        expected = net(x).numpy()
    return request.param, folder, x.numpy(), expected


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_converted_network_matches_torch(converted, backend):
    name, folder, x, expected = converted
    model = nnefx.load(folder)
    session = nnefx.Session(model, backend=backend)
    inputs = {session.inputs[0].name: x.astype(np.int64) if x.dtype.kind == "i" else x}
    (actual,) = session.run(inputs).values()
    assert actual.shape == expected.shape
    assert _relative_error(actual, expected) <= RTOL


def test_converted_documents_use_exporter_features(converted):
    name, folder, _, _ = converted
    text = (folder / "graph.nnef").read_text()
    wanted = {"transformer": "fragment erf", "normpool": "fragment lp_reduce",
              "mobilenet": "multilinear_upsample", "resnet": "max_pool"}[name]
    assert wanted in text
    model = nnefx.load(folder)
    assert model.graph.outputs == ["output"]


def test_macs_match_nnef_tools_gmac_and_torch_flop_counter(converted):
    """``nnefx inspect``'s MAC count agrees exactly with nnef-tools' gmac on the same file and
    with torch's own FLOP counter (2 FLOPs per MAC, as fvcore/thop-style counters count
    products) on the torch original."""
    from nnef_tools.gmac import _count_macs
    from nnef_tools.io.nnef import Reader
    from torch.utils.flop_counter import FlopCounterMode

    from nnefx.tools.cost import graph_cost

    name, folder, _, _ = converted
    cost = graph_cost(nnefx.load(folder).graph)
    assert cost.unknown == 0

    # nnef-tools' reader needs shape functions for the custom fragments its converter wrote
    def lp_reduce_shape(x, axes, **_):
        return [1 if i in axes else d for i, d in enumerate(x)]

    graph = Reader(infer_shapes=True, custom_shapes={"erf": lambda x: x, "lp_reduce": lp_reduce_shape})(str(folder))
    gmac = sum(_count_macs(op, False, False, False, False) for op in graph.operations)
    assert cost.macs == gmac

    net, x = networks.build(name)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        net(x)
    assert 2 * cost.macs == counter.get_total_flops()
    assert (cost.macs > 0) == (name != "normpool")
