"""Invalid attributes never escape as Python exceptions: every shape rule and kernel of
every standard operation, given an attribute of the wrong type or value, either works or
raises :class:`NNEFXError` (which names the operation and the attribute)."""

from __future__ import annotations

import numpy as np
import pytest

from _ops_samples import SAMPLES, shape_of
from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry

POOL = [0, -1, 7, [], [0], [-1, 2], [1, 2, 3, 4, 5, 6], [(0, 0)], [(-9, -9)] * 4, [(1, 1)] * 4, "bogus", 1.5,
        True, [1.5, 2]]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_bad_attributes_raise_nnefx_errors(name):
    args, attrs = SAMPLES[name]
    op = registry.get(name)
    for key in attrs:
        if key == "dtype":
            continue
        for value in POOL:
            bad = dict(attrs, **{key: value})
            shape_attrs = {k: v for k, v in bad.items() if k != "dtype"}
            calls = [lambda: op.shape_rule(*[shape_of(a) for a in args], **shape_attrs),  # noqa: B023
                     lambda: op.kernel("fast")(*args, **bad),  # noqa: B023
                     lambda: op.kernel("formal")(*args, **bad)]  # noqa: B023
            for call in calls:
                with np.errstate(all="ignore"):
                    try:
                        call()
                    except NNEFXError as exc:
                        assert f"'{name}'" in str(exc)


def test_wrong_attribute_type_message_names_operation_attribute_and_value():
    with pytest.raises(NNEFXError, match=r"operation 'transpose': attribute 'axes' = 0 is not of the declared "
                                         r"type integer\[\]"):
        registry.get("transpose").shape_rule((2, 3), axes=0)
    with pytest.raises(NNEFXError, match=r"operation 'relu': has no attribute 'alpha'"):
        registry.get("relu").kernel("fast")(np.zeros(2, np.float32), alpha=1.0)
