"""Compound operations' formal kernels are their NNEF bodies (nnefx.ops.derived).

A compound's formal kernel runs its body through the primitives' formal kernels; a written
one is kept only where needed (listed here with the reason).  Checked: which kernels are
derived, that a derived kernel takes attributes by keyword or by position and left out
(declared defaults), that it reports bad arguments as the operation's error, and that its
compiled bodies stay bounded.
"""

from __future__ import annotations

import numpy as np
import pytest

from _ops_samples import SAMPLES
from nnefx.diagnostics import NNEFXError
from nnefx.ops import derived, registry

#: Compounds whose formal kernel is written by hand, and why.
WRITTEN = {
    # Its result is a tensor array whose length is an attribute: a graph cannot return it as
    # one output, so the body cannot run as a document; the kernel is the identity anyway.
    "copy_n",
}


def _compounds():
    return [op for op in registry.all_ops() if op.compound]


@pytest.mark.parametrize("op", _compounds(), ids=lambda op: op.name)
def test_formal_kernel_is_the_body_unless_listed(op):
    is_derived = getattr(op.formal_kernel.__wrapped__, "derived", False)
    assert is_derived == (op.name not in WRITTEN)


@pytest.mark.parametrize("name", ["sigmoid", "clamp", "softmax", "avg_pool", "moments"])
def test_derived_kernel_equals_the_expanded_graph_run_formally(name):
    """The same numbers as the front-end's expansion run on the formal backend, bit for bit."""
    from nnefx.runtime.session import Session
    from nnefx.semantics.frontend import compile_document

    op = registry.get(name)
    args, attrs = SAMPLES[name]
    got = op.formal_kernel(*args, **attrs)
    got = got if isinstance(got, tuple) else (got,)
    feeds = {f"t{k}": np.asarray(a) for k, a in enumerate(args)}
    decls = "\n".join(f"t{k} = external<{'scalar'}>(shape = {list(np.shape(a))});" for k, a in enumerate(args))
    lit = derived._literal
    call = ", ".join([f"t{k}" for k in range(len(args))] + [f"{k} = {lit(v)}" for k, v in attrs.items()])
    outs = ", ".join(f"r{k}" for k in range(len(got)))
    text = (f"version 1.0;\ngraph G( {', '.join(feeds)} ) -> ( {outs} )\n{{\n{decls}\n{outs} = {name}({call});\n}}\n")
    want = Session(compile_document(text, expand_all=True), "formal").run(feeds)
    for k, value in enumerate(got):
        np.testing.assert_array_equal(value, want[f"r{k}"])


def test_attributes_by_position_keyword_or_default():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    elu = registry.get("elu").formal_kernel
    np.testing.assert_array_equal(elu(x), elu(x, alpha=1.0))
    lq = registry.get("linear_quantize").formal_kernel
    lo, hi = np.float32(-1.0), np.float32(2.0)
    np.testing.assert_array_equal(lq(x, lo, hi, 4), lq(x, lo, hi, bits=4))


def test_bad_arguments_name_the_operation_without_a_synthetic_position():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(NNEFXError, match="'softmax'") as info:
        registry.get("softmax").formal_kernel(x, axes=[5])
    assert info.value.location is None
    with pytest.raises(NNEFXError, match="'min_max_linear_quantize'.*bits"):
        registry.get("min_max_linear_quantize").formal_kernel(x, np.float32(0), np.float32(1), bits=0,
                                                               signed=False, symmetric=False)


def test_compiled_bodies_are_bounded(monkeypatch):
    monkeypatch.setattr(derived, "CACHE_SIZE", 2)
    op = registry.get("sqr")
    kernel = derived.formal_from_body(op)
    for n in range(1, 6):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(kernel(x), x * x)
    cells = kernel.__closure__
    caches = [c.cell_contents for c in cells if isinstance(c.cell_contents, dict)]
    assert caches and all(len(c) <= 2 for c in caches)
