"""The spine: error type, data model, registry and CLI plumbing."""

import numpy as np
import pytest

from nnefx import Graph, Model, NNEFXError, Operation, Tensor
from nnefx.cli import main
from nnefx.diagnostics import Location
from nnefx.ops import registry


def test_error_formats_text_and_field_locations():
    assert str(NNEFXError("bad", Location("a.nnef", 3, 7))) == "a.nnef:3:7: error: bad"
    assert str(NNEFXError("bad", Location("w.dat", field="magic"))) == "w.dat: [magic]: error: bad"
    assert str(NNEFXError("bad").at_file("x")) == "x: error: bad"


def test_graph_structure_validation_catches_use_before_definition():
    g = Graph("g", inputs=["x"], outputs=["y"],
              tensors={"x": Tensor("x", shape=(1,)), "y": Tensor("y", shape=(1,))},
              operations=[Operation("relu", {"x": "x"}, {"y": "y"}),
                          Operation("external", {}, {"output": "x"}, {"shape": [1]})])
    with pytest.raises(NNEFXError, match="before it is defined"):
        g.validate_structure()
    g.operations.reverse()
    g.validate_structure()


def test_model_weights_are_keyed_by_label():
    data = np.ones((2, 2), np.float32)
    g = Graph("g", tensors={"w": Tensor("w", shape=(2, 2), data=data)},
              operations=[Operation("variable", {}, {"output": "w"}, {"label": "conv/w", "shape": [2, 2]})])
    assert list(Model(g).weights) == ["conv/w"]


def test_registry_rejects_unknown_operation_by_name():
    with pytest.raises(NNEFXError, match="unsupported operation 'no_such_op'"):
        registry.get("no_such_op")


def test_registry_entries_have_declarations_and_rules():
    for op in registry.all_ops():
        assert op.declaration.startswith("fragment"), op.name
        assert op.name in op.declaration.split("(")[0], op.name


def test_cli_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["check"])
    assert info.value.code == 2


def test_cli_missing_file_exits_1_without_traceback(capsys, tmp_path):
    assert main(["check", str(tmp_path / "nope.xyz")]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_generic_operations_shape_rules_take_the_resolved_dtype():
    """The registry's calling convention: generic entries get ``dtype=`` in shape rules too."""
    import inspect

    for op in registry.all_ops():
        if not op.generic or op.shape_rule is None:
            continue
        params = inspect.signature(op.shape_rule).parameters
        assert "dtype" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()), op.name
