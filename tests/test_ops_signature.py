"""The one reader of declaration headers (nnefx.ops.signature) against every registered op."""

from __future__ import annotations

import pytest

from nnefx.ops import all_ops, load_all
from nnefx.ops.signature import NO_DEFAULT, signature
from nnefx.runtime.signature import tensor_params

load_all()


def test_conv_signature():
    from nnefx.ops import get

    sig = signature(get("conv").declaration)
    assert sig.name == "conv"
    assert [p.name for p in sig.tensor_params] == ["input", "filter", "bias"]
    bias = sig.tensor_params[2]
    assert bias.default == 0.0 and bias.default_text == "0.0" and bias.tensor_dtype == "scalar"
    types = sig.attribute_types
    assert types["padding"] == "(integer,integer)[]" and types["border"] == "string"
    assert types["groups"] == "integer"
    assert [r.name for r in sig.results] == ["output"]


def test_generic_and_untyped_tensors_stay_apart():
    from nnefx.ops import get

    (inp,) = signature(get("cast").declaration).tensor_params
    assert inp.tensor_dtype == ""                       # tensor<>: any type, not the generic
    sel = {p.name: p.tensor_dtype for p in signature(get("select").declaration).tensor_params}
    assert sel["condition"] == "logical" and sel["true_value"] is None and sel["false_value"] is None


def test_expression_defaults_are_text_only():
    sig = signature("fragment f( x: tensor<scalar>, n: integer[] = [1, 2], s: scalar = -x ) "
                    "-> ( y: tensor<scalar>, z: tensor<integer>[] );")
    n, s = sig.params[1], sig.params[2]
    assert n.default_text == "[1, 2]" and n.default is NO_DEFAULT and n.is_array
    assert s.default is NO_DEFAULT
    assert [r.type for r in sig.results] == ["tensor<scalar>", "tensor<integer>[]"]
    assert signature("not a declaration") is None


@pytest.mark.parametrize("op", sorted(all_ops(), key=lambda o: o.name), ids=lambda o: o.name)
def test_every_declaration_reads(op):
    sig = signature(op.declaration)
    assert sig is not None and sig.name == op.name
    names = [p.name for p in sig.params + sig.results]
    assert len(names) == len(set(names)), names
    assert sig.results and all(r.is_tensor for r in sig.results)
    assert [p.name for p in tensor_params(op.declaration)] == [p.name for p in sig.tensor_params]
