"""The attribute guard memoizes checks that passed; it must never memoize a verdict wrongly."""

import numpy as np
import pytest

import nnefx.ops  # noqa: F401 - registers the operations
from nnefx.diagnostics import NNEFXError
from nnefx.ops import registry


def _conv():
    return registry.get("conv").kernel("fast")


def test_bad_attribute_after_good_call_still_refused():
    conv = _conv()
    x, w = np.ones((1, 2, 4, 4), np.float32), np.ones((2, 2, 3, 3), np.float32)
    ok = conv(x, w, stride=[1, 1], padding=[(1, 1), (1, 1)])
    assert ok.shape == (1, 2, 4, 4)
    for _ in range(2):  # the good verdict is cached; these keys differ only by type
        with pytest.raises(NNEFXError, match="groups"):
            conv(x, w, stride=[1, 1], padding=[(1, 1), (1, 1)], groups=True)
        with pytest.raises(NNEFXError, match="stride"):
            conv(x, w, stride=[1.0, 1.0], padding=[(1, 1), (1, 1)])


def test_bad_shape_after_good_call_still_refused():
    conv = _conv()
    w = np.ones((2, 2, 3, 3), np.float32)
    conv(np.ones((1, 2, 4, 4), np.float32), w)
    for _ in range(2):
        with pytest.raises(NNEFXError):
            conv(np.ones((1, 3, 4, 4), np.float32), w)  # channel mismatch


def test_unhashable_attributes_still_checked():
    conv = _conv()
    x, w = np.ones((1, 2, 4, 4), np.float32), np.ones((2, 2, 3, 3), np.float32)
    assert conv(x, w, stride=np.array([1, 1])).shape == (1, 2, 4, 4)  # auto padding
    with pytest.raises(NNEFXError, match="stride"):
        conv(x, w, stride=np.array([1.5, 1.0]))
