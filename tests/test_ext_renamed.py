"""Extension operations are named by meaning; documents of earlier versions still read.

nnefx 0.1 wrote them as ``ir_*`` operations under ``extension nnefx_ir;`` (``ir_erf``,
``ir_top_k``, ...).  Such a document compiles — on the fast path and the general pipeline —
to the same graph as one written with the new names under ``extension nnefx_ops;``, and is
written back with the new names.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry
from nnefx.ops.ext import RENAMED
from nnefx.runtime.session import Session
from nnefx.semantics import fastpath
from nnefx.semantics.frontend import compile_document
from nnefx.syntax.printer import print_graph

BODY = """graph G( x ) -> ( y, k )
{{
    x = external<scalar>(shape = [2, 5]);
    e = {erf}(x);
    y, k = {top_k}(e, k = 2, axis = 1);
}}
"""
OLD = "version 1.0;\nextension nnefx_ir;\n" + BODY.format(erf="ir_erf", top_k="ir_top_k")
NEW = "version 1.0;\nextension nnefx_ops;\n" + BODY.format(erf="erf", top_k="top_k")


def test_every_renamed_operation_exists_under_its_new_name_only():
    for old, new in RENAMED.items():
        assert registry.find(new) is not None and registry.find(new).domain == "nnefx", new
        assert registry.find(old) is None, old


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "general"])
def test_old_names_read_as_the_new_operations(monkeypatch, fast):
    monkeypatch.setattr(fastpath, "ENABLED", fast)
    old, new = compile_document(OLD), compile_document(NEW)
    assert [o.op for o in old.operations] == [o.op for o in new.operations] == ["external", "erf", "top_k"]
    assert print_graph(old) == print_graph(new)
    assert "extension nnefx_ops;" in print_graph(old) and "ir_" not in print_graph(old)
    x = np.linspace(-2, 2, 10, dtype=np.float32).reshape(2, 5)
    a, b = Session(old, "formal").run({"x": x}), Session(new, "formal").run({"x": x})
    for name in ("y", "k"):
        np.testing.assert_array_equal(a[name], b[name])


def test_old_names_need_their_old_extension():
    with pytest.raises(NNEFXError, match="ir_erf"):
        compile_document(OLD.replace("extension nnefx_ir;", "extension nnefx_ops;"))
    with pytest.raises(NNEFXError, match="'erf'"):
        compile_document(NEW.replace("extension nnefx_ops;", "extension nnefx_ir;"))
