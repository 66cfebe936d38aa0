"""Compound operations: the fused kernel equals its NNEF body.

Each compound is invoked in a small NNEF document, compiled twice by the front-end — once
with the compound atomic (its own fast kernel runs) and once with ``expand_all=True`` (its
body, down to primitives, runs through the formal kernels) — and the results must agree
within the accumulation bound of the kernels tests (``1e-5`` relative + ``1e-5``).
This checks the declaration bodies and the fused kernels against each other.
"""

from __future__ import annotations

import numpy as np
import pytest

from _ops_samples import SAMPLES
from _ops_samples import nnef_literal as _literal
from nnefx.ops import registry

compile_document = pytest.importorskip("nnefx.semantics.frontend").compile_document
Session = pytest.importorskip("nnefx.runtime.session").Session

HEADER = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
COMPOUNDS = [op for op in registry.all_ops("nnef") if op.compound and op.name in SAMPLES and op.name != "copy_n"]
_TYPE = {np.dtype(np.float32): "scalar", np.dtype(np.int64): "integer", np.dtype(np.bool_): "logical"}


def _tensor_params(op):
    head = op.declaration.split("->", 1)[0]
    return [p.split(":")[0].strip() for p in head[head.index("(") + 1:].split(",") if "tensor<" in p]


def _document(op, args, attrs):
    feeds, lines, refs = {}, [], []
    for value in args:
        items = value if isinstance(value, list) else [value]
        names = []
        for item in items:
            arr = np.asarray(item)
            if arr.ndim == 0:
                arr = arr.reshape(1)
            name = f"t{len(feeds)}"
            feeds[name] = arr
            lines.append(f"{name} = external<{_TYPE[arr.dtype]}>(shape = {list(arr.shape)});")
            names.append(name)
        refs.append("[" + ", ".join(names) + "]" if isinstance(value, list) else names[0])
    kwargs = [f"{k} = {_literal(v)}" for k, v in attrs.items() if k != "dtype"]
    results = op.declaration.split("->", 1)[1].split("{")[0]
    outs = [f"r{k}" for k in range(results.count(":"))]
    lines.append(f"{', '.join(outs)} = {op.name}({', '.join(refs + kwargs)});")
    text = HEADER + f"graph G({', '.join(feeds)}) -> ({', '.join(outs)}) {{\n" + "\n".join(lines) + "\n}\n"
    return text, feeds, outs


@pytest.mark.parametrize("op", COMPOUNDS, ids=lambda op: op.name)
def test_fused_kernel_equals_expanded_body(op):
    args, attrs = SAMPLES[op.name]
    text, feeds, outs = _document(op, args, attrs)
    atomic = compile_document(text)
    assert [o.op for o in atomic.operations if o.op != "external"] == [op.name]
    expanded = compile_document(text, expand_all=True)
    assert all(not registry.get(o.op).compound for o in expanded.operations)
    fused = Session(atomic, "fast").run(feeds)
    body = Session(expanded, "formal").run(feeds)
    for name in outs:
        a, b = np.asarray(fused[name]), np.asarray(body[name])
        assert a.shape == b.shape and a.dtype == b.dtype
        if a.dtype == np.float32:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(a, b)
