"""Generated windowed operations (conv / grouped / depth-wise, deconv, max/avg pooling, box,
with every border mode, explicit, negative and automatic padding, strides, dilations) written
as ONNX and run by onnxruntime must agree with nnefx: padding, border and group translation is
where the writer could silently go wrong, so it is checked over many shapes, not a few."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from _export_helpers import property_settings, window  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402
from test_onnx_export import check  # noqa: E402

SETTINGS = property_settings(50)


#: windows with negative paddings (crops) and one spare position per extent
WINDOW = window(pool=False, min_pad=-1, spare=2)


def _fits(X, k, d, pads):
    """The padded extent holds one dilated window (else the shape rule rightly refuses)."""
    return all(x + p + q >= (f - 1) * dd + 1 for x, f, dd, (p, q) in zip(X, k, d, pads or [(0, 0)] * 2, strict=True))


@SETTINGS
@given(w=WINDOW, groups=st.sampled_from([1, 2, 0]), border=st.sampled_from(
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
@given(w=WINDOW, groups=st.sampled_from([1, 2, 0]), seed=st.integers(0, 2 ** 16))
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
@given(w=WINDOW, op=st.sampled_from(["max_pool", "avg_pool", "box", "rms_pool"]),
       border=st.sampled_from(["constant", "ignore", "replicate", "reflect", "reflect-even"]),
       channels=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_pooling(tmp_path, w, op, border, channels, seed):
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)   # dilated too
    if not _fits(X, k, d, pads):
        return
    b = GraphBuilder("p")
    x = b.external("x", shape=(2, 3) + tuple(X))
    size = [1, 2 if channels else 1] + k
    full = [] if not pads else [(0, 0), (0, 0)] + pads
    src = b.op("abs", x) if op == "rms_pool" else x
    b.output(b.op(op, src, size=size, padding=full, stride=[1, 1] + s, dilation=[1, 1] + d, border=border), name="y")
    try:
        model = b.build()
    except Exception:   # 'ignore' with a window wholly in the padding: nnefx refuses some too
        return
    try:
        check(model, {"x": rng.uniform(-2, 2, (2, 3, *X)).astype("f4")}, tmp_path)
    except Exception as exc:
        assert "whole windows under border 'ignore'" in str(exc), exc


# --- random graphs: NNEF broadcasting, axes and slicing through chains of operations ----------

_BIN = ["add", "sub", "mul", "max", "min", "pow", "div", "lt", "ge", "eq"]
_UN = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "floor", "round", "sqr", "rsqrt", "log", "softplus"]


@st.composite
def random_graph(draw):
    """A GraphBuilder graph over one rank-4 input and lower-rank prefix operands (NNEF
    broadcasting aligns them from dimension 0), with feeds."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    full = tuple(draw(st.integers(1, 4)) for _ in range(4))
    b = GraphBuilder("rand")
    x = b.external("x", shape=full)
    feeds = {"x": rng.uniform(-2, 2, full).astype("f4")}
    values = [(x, full)]
    for k in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["bin", "un", "reduce", "softmax", "reshape", "slice", "pad", "transpose",
                                     "select", "clamp"]))
        v, shape = values[draw(st.integers(0, len(values) - 1))]
        r = len(shape)
        if kind == "bin":
            pr = draw(st.integers(0, r))
            kept = tuple(d if draw(st.booleans()) else 1 for d in shape[:pr])
            name = f"p{k}"
            if draw(st.booleans()):
                other = b.variable(name, rng.uniform(0.5, 1.5, kept).astype("f4")) if kept else 0.75
            else:
                other = b.external(name, shape=kept or (1,))
                feeds[name] = rng.uniform(0.5, 1.5, kept or (1,)).astype("f4")
            op = draw(st.sampled_from(_BIN))
            a = b.op("abs", v) if op == "pow" else v
            y = b.op(op, a, other) if draw(st.booleans()) else b.op(op, other, a)
            if op in ("lt", "ge", "eq"):
                y = b.op("select", y, v, 0.25)
            values.append((y, shape if len(kept) <= r else kept))
        elif kind == "un":
            op = draw(st.sampled_from(_UN))
            src = b.op("add", b.op("abs", v), 0.5) if op in ("rsqrt", "log") else v
            values.append((b.op(op, src), shape))
        elif kind == "reduce":
            axes = sorted(draw(st.sets(st.integers(0, r - 1), min_size=1, max_size=r)))
            op = draw(st.sampled_from(["sum_reduce", "mean_reduce", "max_reduce", "min_reduce", "argmax_reduce"]))
            y = b.op(op, v, axes=axes)
            if op == "argmax_reduce":
                y = b.op("cast", y, dtype="scalar")
            values.append((y, tuple(1 if i in axes else d for i, d in enumerate(shape))))
        elif kind == "softmax":
            axes = sorted(draw(st.sets(st.integers(0, r - 1), min_size=1, max_size=2)))
            values.append((b.op("softmax", v, axes=axes), shape))
        elif kind == "reshape":
            start = draw(st.integers(0, r - 1))
            count = draw(st.integers(1, r - start))
            vol = int(np.prod(shape[start:start + count]))
            y = b.op("reshape", v, shape=[vol], axis_start=start, axis_count=count)
            values.append((y, shape[:start] + (vol,) + shape[start + count:]))
        elif kind == "slice":
            a = draw(st.integers(0, r - 1))
            n = shape[a]
            step = draw(st.sampled_from([1, 2, -1, -2]))
            if step > 0:
                lo = draw(st.integers(0, n - 1))
                hi = draw(st.integers(lo + 1, n))
                count = -(-(hi - lo) // step)
                y = b.op("slice", v, axes=[a], begin=[lo - n if draw(st.booleans()) else lo], end=[hi], stride=[step])
            else:
                hi = draw(st.integers(0, n - 1))
                lo = draw(st.integers(-1, hi - 1))
                count = -(-(hi - lo) // -step)
                y = b.op("slice", v, axes=[a], begin=[hi], end=[lo if lo >= 0 else -n - 1], stride=[step])
            values.append((y, shape[:a] + (count,) + shape[a + 1:]))
        elif kind == "pad":
            pads = [(draw(st.integers(0, 3)), draw(st.integers(0, 3))) for _ in range(r)]
            border = draw(st.sampled_from(["constant", "replicate", "reflect", "reflect-even"]))
            y = b.op("pad", v, padding=pads, border=border)
            values.append((y, tuple(d + p + q for d, (p, q) in zip(shape, pads, strict=True))))
        elif kind == "transpose":
            perm = list(draw(st.permutations(range(r))))
            values.append((b.op("transpose", v, axes=perm), tuple(shape[p] for p in perm)))
        elif kind == "select":
            c = b.op("gt", v, 0.0)
            values.append((b.op("select", c, v, b.op("neg", v)), shape))
        else:
            values.append((b.op("clamp", v, -0.5, 0.8), shape))
    for k, (v, _) in enumerate(values[1:]):
        b.output(v, name=f"out{k}")
    return b, feeds


@SETTINGS
@given(case=random_graph())
def test_random_graphs(tmp_path, case):
    b, feeds = case
    try:
        model = b.build()
    except Exception:   # an invalid combination (e.g. a prefix operand wider than the input)
        return
    check(model, feeds, tmp_path, rtol=1e-4)


@SETTINGS
@given(w=WINDOW, border=st.sampled_from(["constant", "ignore", "replicate", "reflect", "reflect-even"]),
       channels=st.booleans(), normalize=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_window_index_family(tmp_path, w, border, channels, normalize, seed):
    """argmax_pool / max_pool_with_index (MaxPool's flat indices turned into window offsets),
    sample (a gather), desample (a scatter-add) and debox (a transposed ones convolution)."""
    (X, k, s, d, pads), rng = w, np.random.default_rng(seed)
    if not _fits(X, k, d, pads):
        return
    b = GraphBuilder("w")
    x = b.external("x", shape=(2, 3) + tuple(X))
    size = [1, 2 if channels else 1] + k
    win = dict(size=size, padding=[] if not pads else [(0, 0), (0, 0)] + pads, stride=[1, 1] + s,
               dilation=[1, 1] + d)
    vals, idx = b.op("max_pool_with_index", x, border=border, outputs=2, **win)
    b.output(vals, name="vals")
    b.output(idx, name="idx")
    b.output(b.op("sample", b.op("neg", x), idx, border=border, **win), name="smp")
    if all(p >= 0 for p, _ in pads):
        b.output(b.op("desample", vals, idx, output_shape=[2, 3] + X, **win), name="des")
    if not channels and border in ("constant", "ignore"):
        b.output(b.op("debox", vals, border=border, normalize=normalize, output_shape=[2, 3] + X, **win), name="dbx")
    try:
        model = b.build()
    except Exception:   # e.g. 'ignore' windows wholly in the padding: nnefx refuses some too
        return
    xv = np.round(rng.uniform(-2, 2, (2, 3, *X)), 1).astype("f4")   # ties in the windows
    try:
        check(model, {"x": xv}, tmp_path, rtol=1e-4)
    except Exception as exc:
        assert "whole windows under border 'ignore'" in str(exc), exc
