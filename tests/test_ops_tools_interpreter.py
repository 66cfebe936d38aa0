"""Numeric peer: the official tools' PyTorch interpreter (``nnef_tools``) runs the same
one-operation NNEF documents; results must match our fast kernels within 1e-4.

Skipped where the interpreter cannot run the case or deliberately differs from the spec
(spec digest §8 and §11): the reasons are listed below.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _ops_samples import SAMPLES
from nnefx.ops import registry
from test_ops_tools_shapes import TOOLS_REFUSE, document

nnef = pytest.importorskip("nnef")
interpreter = pytest.importorskip("nnef_tools.interpreter.pytorch")
pytestmark = pytest.mark.peer

TOOLS_DIFFER = {
    "gelu": "the interpreter uses the exact erf GELU; NNEF defines x * sigmoid(1.702 x)",
    "selu": "the interpreter ignores alpha/lambda (torch constants)",
    "softmax": "the interpreter divides by sum_reduce(x) for several axes (bug)",
    "cast": "the interpreter truncates scalar -> integer; NNEF floors",
}
TOOLS_CANNOT = {
    "argmax_pool": "pooling windows over N/C unsupported", "max_pool_with_index": "same",
    "desample": "same", "pad": "2-D tensors unsupported", "prelu": "[1, C] alpha unsupported",
    "linear_quantize": "interpreter signature bug", "avg_roi_align": "RoI ops unsupported",
    "max_roi_align": "RoI ops unsupported", "avg_roi_pool": "RoI ops unsupported",
    "roi_resample": "RoI ops unsupported",
}
SKIP = {**TOOLS_REFUSE, **TOOLS_DIFFER, **TOOLS_CANNOT, "constant": "graph-level", "update": "graph-level"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_results_match_the_tools_interpreter(name):
    if name in SKIP:
        pytest.skip(SKIP[name])
    args, attrs = SAMPLES[name]
    result = registry.get(name).kernel("fast")(*args, **attrs)
    ours = list(result) if isinstance(result, list | tuple) else [result]
    text, outs = document(name, args, attrs, len(ours))
    feeds = []
    for value in args:
        for item in value if isinstance(value, list) else [value]:
            arr = np.asarray(item)
            feeds.append(arr.reshape(1) if arr.ndim == 0 else arr)
    graph = nnef.parse_string(text)
    nnef.infer_shapes(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = interpreter.Interpreter(graph, device="cpu")(feeds)
    for a, name_out in zip(ours, graph.outputs, strict=True):
        b = out[name_out]
        assert np.shape(a) == np.shape(b)
        if np.asarray(a).dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_array_equal(a, np.asarray(b).astype(np.asarray(a).dtype))
