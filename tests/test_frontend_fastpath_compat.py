"""The fast path and the shape memo seen through ``nnefx.compat.nnef``: invisible as well.

``parse_string`` must give the very same official-layout graph (types of every value
included) with the fast path on and forced off, and ``infer_shapes`` (which memoises shape
rules per operation, input shapes and attributes) must give every tensor the shape the
general front-end computes, on repetitive documents where the memo is actually hit.
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnefx.compat.nnef as compat
from nnefx.compat import nnef as compat_nnef
from nnefx.diagnostics import NNEFXError
from nnefx.semantics import fastpath
from nnefx.semantics.shapes import infer_shapes
from test_frontend_fastpath import CORPUS, _strict_fast_path, flat_documents  # noqa: F401  (autouse fixture)


def _same(a: Any, b: Any, where: str = "graph") -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} vs {b!r}"


def _parse(text: str, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", compat.parse_string(text, **kw)
    except compat.Error as exc:
        return "error", str(exc)


def check_parse(text: str, **kw: Any) -> Any:
    fast = _parse(text, **kw)
    with fastpath.disabled():
        full = _parse(text, **kw)
    assert fast[0] == full[0], (fast, full)
    if fast[0] == "ok":
        _same(fast[1], full[1])
    else:
        assert fast[1] == full[1]
    return fast[1] if fast[0] == "ok" else None


def check_shapes(text: str) -> None:
    """compat ``infer_shapes`` (memoised) against the general front-end's shapes."""
    graph = check_parse(text)
    if graph is None:
        return
    try:
        with fastpath.disabled():  # what compat parses, shaped by the general front-end's shape pass
            reference = infer_shapes(compat_nnef._build(text, None, None, "input", None)[0])
    except NNEFXError:
        with pytest.raises(compat.Error):
            compat.infer_shapes(graph)
        return
    compat.infer_shapes(graph)
    for name, t in graph.tensors.items():
        want = reference.tensors[name].shape
        _same(t.shape, None if want is None else list(want), f"shape of {name}")
    shapes = [t.shape for t in graph.tensors.values() if t.shape is not None]
    assert len({id(s) for s in shapes}) == len(shapes), "tensors share one shape list"


def repetitive(blocks: int) -> str:
    """A small network of repeated conv/relu/pool blocks (the memo's hits)."""
    lines = ["version 1.0;", "graph Net( input ) -> ( output )", "{",
             "    input = external(shape = [1, 4, 8, 8]);"]
    prev = "input"
    for b in range(blocks):
        lines += [f"    w{b} = variable(shape = [4, 4, 3, 3], label = 'b{b}/w');",
                  f"    c{b} = conv({prev}, w{b}, 0.0, padding = [(1, 1), (1, 1)], stride = [1, 1]);",
                  f"    r{b} = relu(c{b});",
                  f"    p{b} = max_pool(r{b}, size = [1, 1, 3, 3], stride = [1, 1, 1, 1], "
                  "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');",
                  f"    a{b} = add(p{b}, {prev});"]
        prev = f"a{b}"
    lines += [f"    output = mul({prev}, 0.5);", "}"]
    return "\n".join(lines) + "\n"


def test_exporter_documents_take_the_fast_path() -> None:
    """nnef-tools output: flat ResNet (both APIs), and a transformer block whose custom
    fragments (erf, ...) compat keeps atomic like the official parser (nnefx expands them,
    which the fast path leaves to the general pipeline)."""
    folder = pathlib.Path(__file__).parent / "fixtures" / "fastpath"
    resnet = (folder / "nnef_tools_resnet.nnef").read_text()
    transformer = (folder / "nnef_tools_transformer.nnef").read_text()
    options = dict(dialect="final", lowered=None, expand_all=False, atomic=None, input_shapes=None, shapes=False,
                   expander_class=compat_nnef._OfficialExpander)
    for text in (resnet, transformer):
        assert fastpath.compile_if_flat(text, file="input", **options) is not None
        check_shapes(text)
    assert fastpath.compile_if_flat(resnet, file=None, dialect=None, lowered=None, expand_all=False, atomic=None,
                                    input_shapes=None, shapes=True) is not None


@pytest.mark.parametrize("case_id,text", CORPUS, ids=[c for c, _ in CORPUS])
def test_compat_corpus_same_with_and_without_fast_path(case_id: str, text: str) -> None:
    check_parse(text)
    check_parse(text, lowered=["linear", "softmax"])


def test_compat_repetitive_network_shapes_and_quantization() -> None:
    text = repetitive(30)
    assert fastpath.compile_if_flat(text, file="input", dialect="final", lowered=None, expand_all=False,
                                    atomic=None, input_shapes=None, shapes=False) is not None
    check_shapes(text)
    quant = "\"w0\": linear_quantize(min = -1.0, max = 1.0, bits = 8);"
    graph = check_parse(text, quant_str=quant)
    assert graph.tensors["w0"].quantization["op-name"] == "linear_quantize"


def test_compat_memo_respects_external_shapes_and_edits() -> None:
    graph = compat.parse_string(repetitive(4))
    compat.infer_shapes(graph, external_shapes={"input": [2, 4, 5, 5]})
    assert graph.tensors["output"].shape == [2, 4, 5, 5]
    # an edited attribute is a new memo key, not a stale hit
    op = graph.operations[2]
    assert op.name == "conv"
    op.attribs["stride"] = [2, 2]
    with pytest.raises(compat.Error, match="broadcast"):  # the residual add no longer fits
        compat.infer_shapes(graph)
    assert graph.tensors["c0"].shape == [1, 4, 4, 4]
    op.attribs["stride"] = [1.0, 1.0]  # same values, other type: a different key
    with pytest.raises(compat.Error, match="stride"):
        compat.infer_shapes(graph)
    op.attribs["stride"] = [1, 1]
    compat.infer_shapes(graph)
    assert graph.tensors["output"].shape == [1, 4, 8, 8]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_documents())
def test_compat_generated_flat_documents(text: str) -> None:
    check_shapes(text)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 12))
def test_compat_repetitive_documents(blocks: int) -> None:
    check_shapes(repetitive(blocks))
