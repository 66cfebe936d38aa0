"""Generated windowed operations (conv / grouped / depth-wise, deconv, max/avg pooling, box,
with every border mode, explicit, negative and automatic padding, strides, dilations) written
as ONNX and run by onnxruntime must agree with nnefx: padding, border and group translation is
where the writer could silently go wrong, so it is checked over many shapes, not a few."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from nnefx.io.builder import GraphBuilder  # noqa: E402
from test_onnx_export import check  # noqa: E402

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def window(draw, pool: bool):
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    s = [draw(st.integers(1, 3)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)] if not pool else [1, 1]
    X = [draw(st.integers((k[i] - 1) * d[i] + 2, 9)) for i in range(2)]
    auto = draw(st.booleans())
    pads = [] if auto else [(draw(st.integers(-1, k[i] - 1)), draw(st.integers(-1, k[i] - 1))) for i in range(2)]
    return X, k, s, d, pads


def _fits(X, k, d, pads):
    """The padded extent holds one dilated window (else the shape rule rightly refuses)."""
    return all(x + p + q >= (f - 1) * dd + 1 for x, f, dd, (p, q) in zip(X, k, d, pads or [(0, 0)] * 2, strict=True))


@SETTINGS
@given(w=window(pool=False), groups=st.sampled_from([1, 2, 0]), border=st.sampled_from(
    ["constant", "replicate", "reflect", "reflect-even"]), bias=st.sampled_from(["none", "var", "input"]),
    seed=st.integers(0, 2 ** 16))
def test_conv(tmp_path, w, groups, border, bias, seed):
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)
    if not _fits(X, k, d, pads):
        return
    C, O = 4, 4 if groups == 0 else 6
    cin = 1 if groups == 0 else C // groups
    b = GraphBuilder("c")
    x = b.external("x", shape=(2, C) + tuple(X))
    feeds = {"x": rng.uniform(-1, 1, (2, C, *X)).astype("f4")}
    args = [x, b.variable("w", rng.uniform(-1, 1, (O, cin, *k)).astype("f4"))]
    if bias == "var":
        args.append(b.variable("b", rng.uniform(-1, 1, (1, O)).astype("f4")))
    elif bias == "input":
        args.append(b.external("bias", shape=(1, O)))
        feeds["bias"] = rng.uniform(-1, 1, (1, O)).astype("f4")
    b.output(b.op("conv", *args, groups=groups, padding=pads, stride=s, dilation=d, border=border), name="y")
    check(b.build(), feeds, tmp_path)


@SETTINGS
@given(w=window(pool=False), groups=st.sampled_from([1, 2, 0]), seed=st.integers(0, 2 ** 16))
def test_deconv(tmp_path, w, groups, seed):
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)
    per = 1 if groups == 0 else 6 // groups
    b = GraphBuilder("d")
    x = b.external("x", shape=(1, 4) + tuple(X))
    try:
        y = b.op("deconv", x, b.variable("w", rng.uniform(-1, 1, (4, per, *k)).astype("f4")),
                 b.variable("b", rng.uniform(-1, 1, (1, 4 * per if groups == 0 else 6)).astype("f4")),
                 groups=groups, padding=pads, stride=s, dilation=d)
        b.output(y, name="y")
        model = b.build()
    except Exception:   # a negative padding beyond the output's reach: rightly refused by nnefx
        return
    check(model, {"x": rng.uniform(-1, 1, (1, 4, *X)).astype("f4")}, tmp_path)


@SETTINGS
@given(w=window(pool=True), op=st.sampled_from(["max_pool", "avg_pool", "box", "rms_pool"]),
       border=st.sampled_from(["constant", "ignore", "replicate", "reflect", "reflect-even"]),
       channels=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_pooling(tmp_path, w, op, border, channels, seed):
    (X, k, s, _, pads), rng = w, np.random.default_rng(seed)
    if not _fits(X, k, [1, 1], pads):
        return
    b = GraphBuilder("p")
    x = b.external("x", shape=(2, 3) + tuple(X))
    size = [1, 2 if channels else 1] + k
    full = [] if not pads else [(0, 0), (0, 0)] + pads
    src = b.op("abs", x) if op == "rms_pool" else x
    b.output(b.op(op, src, size=size, padding=full, stride=[1, 1] + s, border=border), name="y")
    check(b.build(), {"x": rng.uniform(-2, 2, (2, 3, *X)).astype("f4")}, tmp_path)
