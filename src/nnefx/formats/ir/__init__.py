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
    """Writing IR v11 is not implemented yet (planned); say so instead of writing junk."""
    raise NNEFXError("writing IR XML is not supported yet; save as an NNEF folder instead")


__all__ = ["load", "save"]
