"""Helpers the writer tests share (tests/test_onnx_export*.py, tests/test_ir_writer*.py).

Every ONNX export test does the same three things: save with nnefx, run onnx's full checker
on the file, run it with onnxruntime; and the property tests of both writers draw the same
kind of 2-D windows.  One copy keeps the checks equally strict everywhere (a test that
forgot ``full_check`` would pass models the others reject).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import nnefx


def run_ort(model_or_path: Any, feeds: dict) -> dict[str, np.ndarray]:
    """Run an ONNX file (or ``ModelProto``) with onnxruntime on CPU: outputs by name."""
    ort = pytest.importorskip("onnxruntime")
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds), strict=True))


def save_onnx(model: Any, path: str, **options: Any) -> str:
    """``nnefx.save`` as ONNX, then onnx's full checker (types and shapes inferred) on the file."""
    onnx = pytest.importorskip("onnx")
    nnefx.save(model, path, **options)
    onnx.checker.check_model(path, full_check=True)
    return path


def property_settings(examples: int) -> Any:
    """Hypothesis settings of the writers' property tests (no deadline: they run a peer)."""
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def window(draw: Any, pool: bool, min_pad: int = 0, spare: int = 1) -> tuple:
    """A 2-D window: (extents X, size k, stride s, dilation d, explicit pads or [] = automatic).

    Sizes and strides 1-3, dilations 1-2 (1 for pools), each extent at least one dilated
    window plus ``spare - 1``, paddings from ``min_pad`` (negative = a crop) to ``k - 1``.
    """
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    s = [draw(st.integers(1, 3)) for _ in range(2)]
    d = [draw(st.integers(1, 2)) for _ in range(2)] if not pool else [1, 1]
    X = [draw(st.integers((k[i] - 1) * d[i] + spare, 9)) for i in range(2)]
    auto = draw(st.booleans())
    pads = [] if auto else [(draw(st.integers(min_pad, k[i] - 1)), draw(st.integers(min_pad, k[i] - 1)))
                            for i in range(2)]
    return X, k, s, d, pads
