"""ONNX models: ``nnefx.load("model.onnx")`` and ``nnefx.save(model, "model.onnx")``.

The file is parsed with the optional ``onnx`` package (``pip install nnefx[onnx]``); nothing
from it is executed.  Nodes are translated one by one onto nnefx registry operations by the
readers of their operator families (``nnefx/formats/families/``) on the format-neutral
import layer (:mod:`nnefx.formats.reading`), see :mod:`.reader`.  Writing goes the other
way, one writer per nnefx operation, see :mod:`.writer` and :mod:`nnefx.formats.families`.
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
    """Write ``model`` as an ONNX file (opset 18), runnable by onnxruntime.

    Operations without an exact ONNX form, and graphs that update variables (ONNX models
    have no state), are refused with an error naming the operation and its position (see
    :mod:`.writer`).  Options: ``compress_to_fp16=True`` stores float weights as float16
    behind ``Cast`` nodes (``nnefx convert --fp16``).
    """
    from .writer import write_onnx

    unknown = set(options) - {"compress_to_fp16"}
    if unknown:
        raise NNEFXError(f"unknown option(s) for writing ONNX models: {', '.join(sorted(unknown))}")
    write_onnx(model, path, **options)
