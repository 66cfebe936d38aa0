"""The operator contract, installed by ``define()`` on every operation of every domain.

Checked on the domains that used to be unguarded (``cvm``, ``ir``, the ``nnefx`` extension
operations): a wrong attribute type or an unknown attribute is an error naming the
operation; a left-out attribute takes the declaration's default; and wherever a kernel or
shape rule still spells a default of its own, it equals the declared one (one default).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry
from nnefx.ops.signature import signature


def test_every_rule_and_kernel_of_every_domain_is_guarded():
    unguarded = [(op.name, slot) for op in registry.all_ops()
                 for slot in ("shape_rule", "formal_kernel", "fast_kernel")
                 if getattr(op, slot) is not None and not getattr(getattr(op, slot), "_guarded", False)]
    assert unguarded == []


@pytest.mark.parametrize("name,args,attrs,bad", [
    ("cvm_clip", [np.arange(6, dtype=np.int32)], {"a_min": 1, "a_max": 4}, {"a_min": 1.5}),
    ("top_k", [np.arange(6, dtype=np.float32)], {"k": 2, "axis": 0}, {"k": "2"}),
    ("ir_prior_box", [np.zeros((1, 3, 4, 4), np.float32), np.zeros((1, 3, 32, 32), np.float32)],
     {"min_size": [4.0]}, {"flip": 1}),
])
def test_wrong_attribute_types_are_refused_naming_the_operation(name, args, attrs, bad):
    op = registry.get(name)
    for kernel in (op.formal_kernel, op.fast_kernel or op.formal_kernel):
        kernel(*args, **attrs)  # the valid call runs
        with pytest.raises(NNEFXError, match=f"'{name}'.*attribute '{next(iter(bad))}'"):
            kernel(*args, **{**attrs, **bad})
        with pytest.raises(NNEFXError, match=f"'{name}': has no attribute 'bogus'"):
            kernel(*args, **attrs, bogus=1)


def test_left_out_attributes_take_the_declared_defaults():
    op = registry.get("top_k")
    x = np.array([3.0, 1.0, 2.0, 5.0], np.float32)
    declared = signature(op.declaration).attribute_defaults
    explicit = op.formal_kernel(x, k=2, axis=0, **{k: v for k, v in declared.items() if k not in ("k", "axis")})
    implicit = op.formal_kernel(x, k=2, axis=0)
    for a, b in zip(explicit, implicit, strict=True):
        np.testing.assert_array_equal(a, b)
    assert op.attributes({"k": 2})["mode"] == declared["mode"]


def _norm(v):
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    return v if isinstance(v, (bool, str)) else float(v)


def test_defaults_spelled_by_rules_and_kernels_equal_the_declaration():
    differ = []
    for op in registry.all_ops():
        sig = signature(op.declaration)
        declared = {} if sig is None else sig.attribute_defaults
        for slot in ("shape_rule", "formal_kernel", "fast_kernel"):
            fn = getattr(op, slot)
            while fn is not None and hasattr(fn, "__wrapped__"):
                fn = fn.__wrapped__
            try:
                params = inspect.signature(fn).parameters if fn is not None else {}
            except (TypeError, ValueError):
                continue
            for name, p in params.items():
                if name in declared and p.default is not inspect.Parameter.empty \
                        and _norm(p.default) != _norm(declared[name]):
                    differ.append((op.name, slot, name, p.default, declared[name]))
    assert differ == []
