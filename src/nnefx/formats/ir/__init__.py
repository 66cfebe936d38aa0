"""IR XML networks (``.xml`` + ``.bin``): legacy (versions <= 9) and opset (10/11) forms.

``nnefx.load("model.xml")`` comes here.  Reading happens in three layers, each in its own
module: :mod:`.xml` parses the file defensively into records, :mod:`.reader` checks the
structure (ports, edges, order) and handles inputs/constants/outputs, and the layer-mapping
registry (:mod:`.mapping`, with the opset mappings in :mod:`.opset` and the legacy catalog in
:mod:`.legacy`) turns every other layer into nnefx Operations.
"""

from __future__ import annotations

import os
from typing import Any

from ...diagnostics import NNEFXError
from ...graph import Model


def load(path: str | os.PathLike, **options: Any) -> Model:
    """Read an IR model.

    Options: ``weights=`` path of the ``.bin`` (default: the ``.xml`` path with ``.bin``);
    ``shapes={input_name: shape}`` to fix dynamic input dimensions (then shape computations
    fold to constants and the graph becomes static); ``max_bytes=``/``max_elements=`` to
    change the XML size limits.
    """
    from .reader import read_model

    path = os.fspath(path)
    unknown = set(options) - {"weights", "shapes", "max_bytes", "max_elements"}
    if unknown:
        raise NNEFXError(f"unknown option(s) for IR models: {', '.join(sorted(unknown))}")
    return read_model(path, **options)


def save(model: Model, path: str | os.PathLike, **options: Any) -> None:
    """Write ``model`` as IR v11 (``path`` + ``.bin``), readable by today's OpenVINO.

    Options: ``compress_to_fp16=True`` stores float weights as f16 behind ``Convert`` layers;
    ``weights=`` the ``.bin`` path.  Operations without an exact opset form are refused with
    an error naming them (see :mod:`.writer`).
    """
    from .writer import write_ir

    unknown = set(options) - {"compress_to_fp16", "weights"}
    if unknown:
        raise NNEFXError(f"unknown option(s) for writing IR models: {', '.join(sorted(unknown))}")
    write_ir(model, path, **options)


__all__ = ["load", "save"]
