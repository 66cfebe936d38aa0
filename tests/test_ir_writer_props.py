"""Generated windowed operations (conv / grouped / depth-wise conv, deconv, max/avg pooling
with every border mode, explicit and automatic padding, strides, dilations) written as IR v11
and run by OpenVINO must agree with nnefx — the padding/border/group translation is where the
writer could silently go wrong, so it is checked over many shapes, not a few."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _export_helpers import property_settings, window
from nnefx.io.builder import GraphBuilder
from test_ir_writer import check

pytest.importorskip("openvino")

SETTINGS = property_settings(25)


def reflectable(pads, X):
    """Explicit pads no larger than extent - 1 (reflection needs that many values)."""
    return [(min(p, x - 1), min(q, x - 1)) for (p, q), x in zip(pads or [(0, 0)] * len(X), X, strict=True)]


@SETTINGS
@given(w=window(pool=False), groups=st.sampled_from([1, 2, 0]), border=st.sampled_from(
    ["constant", "replicate", "reflect", "reflect-even"]), bias=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_conv(tmp_path, w, groups, border, bias, seed):
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)
    if border.startswith("reflect"):
        pads = reflectable(pads, X)
    C = 4
    O = 4 if groups == 0 else 6
    cin = 1 if groups == 0 else C // groups
    b = GraphBuilder("c")
    x = b.external("x", shape=(2, C) + tuple(X))
    args = [x, b.variable("w", rng.uniform(-1, 1, (O, cin, *k)).astype("f4"))]
    if bias:
        args.append(b.variable("b", rng.uniform(-1, 1, (1, O)).astype("f4")))
    b.output(b.op("conv", *args, groups=groups, padding=pads, stride=s, dilation=d, border=border), name="y")
    check(b.build(), {"x": rng.uniform(-1, 1, (2, C, *X)).astype("f4")}, tmp_path)


@SETTINGS
@given(w=window(pool=False), groups=st.sampled_from([1, 2]), seed=st.integers(0, 2 ** 16))
def test_deconv(tmp_path, w, groups, seed):
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)
    b = GraphBuilder("d")
    x = b.external("x", shape=(1, 4) + tuple(X))
    y = b.op("deconv", x, b.variable("w", rng.uniform(-1, 1, (4, 6 // groups, *k)).astype("f4")),
             b.variable("b", rng.uniform(-1, 1, (1, 6)).astype("f4")), groups=groups, padding=pads, stride=s,
             dilation=d)
    b.output(y, name="y")
    check(b.build(), {"x": rng.uniform(-1, 1, (1, 4, *X)).astype("f4")}, tmp_path)


@SETTINGS
@given(w=window(pool=True), op=st.sampled_from(["max_pool", "avg_pool"]),
       border=st.sampled_from(["constant", "ignore", "replicate", "reflect", "reflect-even"]),
       seed=st.integers(0, 2 ** 16))
def test_pooling(tmp_path, w, op, border, seed):
    (X, k, s, _, pads), rng = w, np.random.default_rng(seed)
    if border.startswith("reflect"):
        pads = reflectable(pads, X)
    b = GraphBuilder("p")
    x = b.external("x", shape=(1, 3) + tuple(X))
    full_pads = [] if not pads else [(0, 0), (0, 0)] + pads
    b.output(b.op(op, x, size=[1, 1, *k], stride=[1, 1, *s], padding=full_pads, border=border), name="y")
    # all-negative inputs: a zero pad taking part in a max would show
    check(b.build(), {"x": rng.uniform(-2, -0.1, (1, 3, *X)).astype("f4")}, tmp_path)
