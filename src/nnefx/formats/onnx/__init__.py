"""ONNX models (read-only): ``nnefx.load("model.onnx")``.

The file is parsed with the optional ``onnx`` package (``pip install nnefx[onnx]``); nothing
from it is executed.  Nodes are translated one by one onto nnefx registry operations, mostly
by re-expressing each ONNX node as the equivalent OpenVINO IR opset layer and reusing the IR
importer's mappings (the two opsets are close relatives), see :mod:`.reader`.
"""

from __future__ import annotations

import os
from typing import Any

from ...diagnostics import NNEFXError
from ...graph import Model


def load(path: str | os.PathLike, **options: Any) -> Model:
    """Read an ONNX model; ``input_shapes={name: shape}`` fixes dynamic input dims."""
    from .reader import read_model

    return read_model(os.fspath(path), **options)


def save(model: Model, path: str | os.PathLike, **options: Any) -> None:
    """Writing ONNX is not supported: convert to an NNEF folder instead."""
    raise NNEFXError("writing ONNX is not supported yet (save to an NNEF folder, archive or IR instead)")
