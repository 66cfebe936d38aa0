"""The NNEF writer never writes what nnefx cannot read back: it refuses with the operation's
own location (and leaves the target untouched), and what it does write reads back and runs
with identical outputs."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import Location, NNEFXError
from nnefx.graph import Model
from nnefx.semantics.frontend import compile_document

HEADER = "version 1.0;\nextension nnefx_ir;\n"


def _model(body: str, sig: str = "( x ) -> ( y )") -> Model:
    return Model(graph=compile_document(f"{HEADER}graph g{sig}\n{{\n{body}\n}}\n"))


def _save_refused(model: Model, tmp_path, match: str) -> NNEFXError:
    for target in (tmp_path / "folder", tmp_path / "doc.nnef", tmp_path / "arch.nnef.tgz"):
        with pytest.raises(NNEFXError, match=match) as info:
            nnefx.save(model, os.fspath(target))
        assert not target.exists()
        assert os.listdir(tmp_path) == []  # no temporary left behind either
    return info.value


def test_graph_without_inputs_is_refused(tmp_path):
    model = _model("x = external(shape = [2]);\n c = constant(shape = [2], value = [1.0, -2.0]);\n"
                   " y = relu(c);")
    g = model.graph
    g.operations = [op for op in g.operations if op.op != "external"]
    del g.tensors["x"]
    g.inputs = []
    g.operations[0].location = Location("net.onnx", field="node 0 'c' (Constant)")
    err = _save_refused(model, tmp_path, "it has no inputs")
    assert err.location == Location("net.onnx", field="node 0 'c' (Constant)")
    # what it ran before refusing is unchanged: the graph still runs
    assert np.array_equal(nnefx.Session(model).run({})["y"], [1.0, 0.0])


def test_max_pool_on_integer_tensor_is_refused_at_its_node(tmp_path):
    model = _model("x = external<scalar>(shape = [1, 1, 4, 4]);\n"
                   " y = max_pool(x, size = [1, 1, 2, 2], border = 'ignore');")
    g = model.graph
    g.tensors["x"].dtype = g.tensors["y"].dtype = "integer"
    g.operations[0].dtype = "integer"
    g.operations[1].location = Location("net.onnx", field="node 0 'pool' (MaxPool)")
    err = _save_refused(model, tmp_path, r"cannot write operation 'max_pool' as NNEF.*tensor<scalar>")
    assert err.location == Location("net.onnx", field="node 0 'pool' (MaxPool)")


def test_ir_arith_with_mixed_operand_types_is_refused(tmp_path):
    model = _model("x = external<integer>(shape = [4]);\n e = external<integer>(shape = [4]);\n"
                   " y = ir_arith<integer>(x, e, op = 'power');", "( x, e ) -> ( y )")
    g = model.graph
    g.tensors["e"].dtype = "scalar"  # ONNX Pow: an int64 base with a float exponent
    g.operations[1].dtype = "scalar"
    err = _save_refused(model, tmp_path, r"cannot write operation 'integer_arith' as NNEF.*argument 'y'")
    assert err.location is not None and err.location.line == 7  # its line in the source text


def test_what_is_written_reads_back_and_runs_the_same(tmp_path):
    model = _model("x = external<integer>(shape = [4]);\n c = constant<integer>(shape = [1], value = [3]);\n"
                   " s = ir_arith<integer>(x, c, op = 'multiply');\n f = external(shape = [1, 1, 4, 4]);\n"
                   " p = max_pool(f, size = [1, 1, 2, 2], border = 'ignore');\n y = copy<integer>(s);",
                   "( x, f ) -> ( y, p )")
    feeds = {"x": np.arange(4, dtype=np.int64), "f": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)}
    expected = nnefx.Session(model).run(feeds)
    for target in (tmp_path / "folder", tmp_path / "doc.nnef"):
        nnefx.save(model, os.fspath(target))
        again = nnefx.Session(nnefx.load(os.fspath(target))).run(feeds)
        for name, value in expected.items():
            assert again[name].dtype == value.dtype and np.array_equal(again[name], value)
