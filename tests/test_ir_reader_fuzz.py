"""Bad IR input never escapes as a Python traceback: mutated files load or raise NNEFXError."""

from __future__ import annotations

import os
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnefx
from ir_netgen import NetGen
from nnefx.diagnostics import NNEFXError


def base_net() -> NetGen:
    rng = np.random.RandomState(0)
    g = NetGen()
    x = g.param("x", (1, 2, 6, 6))
    w = g.const(rng.randn(3, 2, 3, 3).astype(np.float32), name="w")
    c = g.op("Convolution", [x, w], [(1, 3, 4, 4)], {"strides": "1,1", "dilations": "1,1", "pads_begin": "0,0",
                                                    "pads_end": "0,0", "auto_pad": "explicit"})
    p = g.op("MaxPool", [c], [(1, 3, 2, 2), (1, 3, 2, 2)], {"strides": "2,2", "dilations": "1,1", "pads_begin": "0,0",
                                                           "pads_end": "0,0", "kernel": "2,2", "rounding_type": "floor",
                                                           "auto_pad": "explicit", "index_element_type": "i64",
                                                           "axis": "0"}, version="opset8",
             out_etypes=["f32", "i64"])[0]
    s = g.const(np.array([0, -1], np.int64), name="s")
    r = g.op("Reshape", [p, s], [(1, 12)], {"special_zero": "true"})
    ax = g.const(np.array([1], np.int64), name="ax")
    m = g.op("ReduceMean", [r, ax], [(1, 1)], {"keep_dims": "true"})
    k = g.const(np.array([0, 2, 4], np.int64), name="k")
    a0 = g.const(np.array(1, np.int64), name="a0")
    gt = g.op("Gather", [r, k, a0], [(1, 3)], {"batch_dims": "0"}, version="opset8")
    y = g.op("Add", [gt, m], [(1, 3)], {"auto_broadcast": "numpy"})
    g.result(y)
    return g


BASE = base_net()
XML = BASE.xml()
NUMBERS = [m.span() for m in re.finditer(r"-?\d+", XML)]
ATTRS = [m.span(1) for m in re.finditer(r'="([^"]*)"', XML)]


def load_or_error(tmp_path, text: str, binary: bytes, run: bool = False) -> None:
    """Loading (and, if asked, running) either works or raises NNEFXError with a location."""
    (tmp_path / "f.xml").write_text(text)
    (tmp_path / "f.bin").write_bytes(binary)
    try:
        model = nnefx.load(str(tmp_path / "f.xml"))
    except NNEFXError as exc:
        assert exc.location is not None and exc.location.file is not None
        return
    if not run:
        return
    from nnefx.runtime.session import Session

    feeds = {}
    for name in model.graph.inputs:
        t = model.graph.tensors[name]
        shape = tuple(2 if d is None else d for d in (t.shape or ()))
        if int(np.prod(shape)) > 1 << 16:
            return
        feeds[name] = np.random.RandomState(0).randn(*shape).astype(np.float32)
    try:
        Session(model, input_shapes={k: v.shape for k, v in feeds.items()}).run(feeds)
    except NNEFXError:
        pass


FUZZ = settings(max_examples=int(os.environ.get("NNEFX_IR_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_base_net_loads(tmp_path):
    (tmp_path / "f.xml").write_text(XML)
    (tmp_path / "f.bin").write_bytes(bytes(BASE.bin))
    model = nnefx.load(str(tmp_path / "f.xml"))
    assert model.graph.outputs


@FUZZ
@given(st.data())
def test_number_mutations(tmp_path, data):
    i = data.draw(st.integers(0, len(NUMBERS) - 1))
    a, b = NUMBERS[i]
    value = data.draw(st.sampled_from(["0", "-1", "-7", "1", "2", "3", "999999999999", "65536", "?", "", "1.5"]))
    load_or_error(tmp_path, XML[:a] + value + XML[b:], bytes(BASE.bin), run=True)


@FUZZ
@given(st.data())
def test_attribute_mutations(tmp_path, data):
    i = data.draw(st.integers(0, len(ATTRS) - 1))
    a, b = ATTRS[i]
    value = data.draw(st.sampled_from(["", "true", "x", "1,2,3", "-1", "f16", "u1", "bogus", "0,0,0,0", "1e400",
                                       "opset99", "same_lower", "ceil", "explicit", "nan", "i4", "\\,"]))
    load_or_error(tmp_path, XML[:a] + value + XML[b:], bytes(BASE.bin), run=True)


@FUZZ
@given(st.integers(0, len(XML)), st.integers(0, 2 * 1024))
def test_truncations(tmp_path, cut, bin_cut):
    load_or_error(tmp_path, XML[:cut], bytes(BASE.bin)[:bin_cut])


@FUZZ
@given(st.lists(st.integers(0, len(BASE.layers) - 1), min_size=1, max_size=3))
def test_dropped_layers(tmp_path, drop):
    layers = [lay for i, lay in enumerate(BASE.layers) if i not in drop]
    text = XML.replace("\n".join(BASE.layers), "\n".join(layers))
    load_or_error(tmp_path, text, bytes(BASE.bin))


# --- mutations of an OpenVINO-written transformer block (many layer types, shape sub-graphs) ------------

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "ir", "opset", "transformer")
with open(FIXTURE + ".xml") as _f:
    TB_XML = _f.read()
with open(FIXTURE + ".bin", "rb") as _f:
    TB_BIN = _f.read()
TB_NUMBERS = [m.span() for m in re.finditer(r"-?\d+", TB_XML)]
TB_ATTRS = [m.span(1) for m in re.finditer(r'="([^"]*)"', TB_XML)]


@FUZZ
@given(st.data())
def test_transformer_mutations(tmp_path, data):
    text = TB_XML
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):
            a, b = TB_NUMBERS[data.draw(st.integers(0, len(TB_NUMBERS) - 1))]
            value = data.draw(st.sampled_from(["0", "-1", "1", "2", "3", "7", "16", "999999", "-9"]))
        else:
            a, b = TB_ATTRS[data.draw(st.integers(0, len(TB_ATTRS) - 1))]
            value = data.draw(st.sampled_from(["", "x", "1,2", "-1", "f16", "i32", "boolean", "true", "false",
                                               "opset1", "opset99", "numpy", "none", "2,0,1"]))
        if b > len(text):
            continue
        text = text[:a] + value + text[b:]
    load_or_error(tmp_path, text, TB_BIN, run=True)


def test_pooling_with_zero_stride_is_a_located_error(tmp_path):
    """Found by test_number_mutations: a zero stride used to divide by zero while mapping."""
    import pytest

    fixtures = os.path.join(os.path.dirname(__file__), "fixtures", "ir", "opset")
    with open(os.path.join(fixtures, "cnn.xml")) as f:
        text = f.read()
    pool = re.search(r'<layer[^>]*type="(MaxPool|AvgPool)"[^>]*>\s*<data[^>]*strides="([^"]*)"', text)
    assert pool is not None
    start, end = pool.span(2)
    bad = tmp_path / "cnn.xml"
    bad.write_text(text[:start] + ",".join("0" for _ in pool.group(2).split(",")) + text[end:])
    with open(os.path.join(fixtures, "cnn.bin"), "rb") as f:
        (tmp_path / "cnn.bin").write_bytes(f.read())
    with pytest.raises(NNEFXError, match="strides"):
        nnefx.load(bad)
