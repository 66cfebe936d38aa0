"""Shape rules against the official tools' shape inference (``nnef.infer_shapes``, a
test-only peer), for every operation and for generated window attributes.

Where the tools deviate from the spec (documented in the spec digest, §11), the tools must
refuse and we must not — those cases are listed explicitly with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _ops_samples import SAMPLES
from _ops_samples import nnef_literal as _literal
from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

nnef = pytest.importorskip("nnef")
pytestmark = pytest.mark.peer

HEADER = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
_TYPE = {np.dtype(np.float32): "scalar", np.dtype(np.int64): "integer", np.dtype(np.bool_): "logical"}

# Tools deviations (spec digest §11): they refuse what the spec allows.
TOOLS_REFUSE = {
    "add_n": "tools demand identical shapes; the spec body broadcasts",
    "max_roi_pool": "tools demand batch_index of rank 1; the spec writes (N, 1)",
    "sample": "tools compare the index shape with the input; the spec says the output",
    "separable_conv": "tools assume groups = 1 in the point-wise filter check",
    "separable_deconv": "tools assume groups = 1 in the point-wise filter check",
}


def document(name, args, attrs, n_results):
    """An NNEF document invoking ``name``; returns (text, result names)."""
    lines, refs, inputs = [], [], []
    for value in args:
        items = value if isinstance(value, list) else [value]
        names = []
        for item in items:
            arr = np.asarray(item)
            arr = arr.reshape(1) if arr.ndim == 0 else arr
            t = f"t{len(inputs)}"
            inputs.append(t)
            lines.append(f"{t} = external<{_TYPE[arr.dtype]}>(shape = {list(arr.shape)});")
            names.append(t)
        refs.append("[" + ", ".join(names) + "]" if isinstance(value, list) else names[0])
    kwargs = [f"{k} = {_literal(v)}" for k, v in attrs.items() if k != "dtype"]
    outs = [f"r{k}" for k in range(n_results)]
    generic = f"<{attrs['dtype']}>" if name == "cast" else ""
    lhs = "[" + ", ".join(outs) + "]" if n_results > 1 and _array_result(name) else ", ".join(outs)
    lines.append(f"{lhs} = {name}{generic}({', '.join(refs + kwargs)});")
    return HEADER + f"graph G({', '.join(inputs)}) -> ({', '.join(outs)}) {{\n" + "\n".join(lines) + "\n}\n", outs


def _array_result(name):
    return "[]" in registry.get(name).declaration.split("->", 1)[1].split("{")[0]


def tools_shapes(text, outs):
    g = nnef.parse_string(text)
    nnef.infer_shapes(g)
    return [tuple(g.tensors[o].shape) for o in outs]


def our_shapes(name, args, attrs):
    op = registry.get(name)
    result = op.kernel("fast")(*args, **attrs)
    results = result if isinstance(result, list | tuple) else [result]
    return [tuple(np.shape(r)) for r in results]


CASES = sorted(n for n in SAMPLES if n not in ("constant", "update"))


@pytest.mark.parametrize("name", CASES)
def test_shape_rule_agrees_with_tools(name):
    args, attrs = SAMPLES[name]
    ours = our_shapes(name, args, attrs)
    text, outs = document(name, args, attrs, len(ours))
    if name in TOOLS_REFUSE:
        with pytest.raises(nnef.Error):
            tools_shapes(text, outs)
        return
    assert ours == tools_shapes(text, outs)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(["conv", "deconv", "box", "debox", "max_pool", "avg_pool",
                                              "argmax_pool"]))
def test_window_shapes_agree_with_tools(data, name):
    """Generated sizes/strides/dilations/paddings (explicit or automatic)."""
    n = data.draw(st.integers(1, 2))
    spatial = [data.draw(st.integers(1, 9)) for _ in range(n)]
    f = [data.draw(st.integers(1, 4)) for _ in range(n)]
    s = [data.draw(st.integers(1, 3)) for _ in range(n)]
    d = [data.draw(st.integers(1, 3)) for _ in range(n)]
    auto = data.draw(st.booleans())
    pads = [] if auto else [(data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))) for _ in range(n)]
    x = np.zeros([1, 2] + spatial, np.float32)
    if name in ("conv", "deconv"):
        args = [x, np.zeros([2, 2] + f, np.float32), np.zeros((1, 2), np.float32)]
        attrs = dict(padding=pads, stride=s, dilation=d)
    else:
        args = [x]
        attrs = dict(size=[1, 1] + f, padding=[(0, 0)] * 2 + pads if pads else [], stride=[1, 1] + s,
                     dilation=[1, 1] + d)
    try:
        ours = [registry.get(name).shape_rule(*[np.shape(a) for a in args], **attrs)]
    except NNEFXError:
        ours = None
    text, outs = document(name, args, attrs, 1)
    try:
        theirs = tools_shapes(text, outs)
    except nnef.Error:
        theirs = None
    if ours is None and theirs is not None and any(dim <= 0 for shape in theirs for dim in shape):
        return  # window larger than the padded input: the spec forbids it, the tools give extent <= 0
    assert ours == theirs
