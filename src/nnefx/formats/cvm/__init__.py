"""CVM models: the deterministic integer runtime's graph JSON + params binary.

``nnefx.load("m.json", params="m.params")`` lands in :func:`load`.  The reader validates the
model exactly where the runtime would refuse it (structure, attributes, shapes, precisions,
params) and builds an ordinary nnefx graph of ``cvm_*`` operations, so the generic Session
runs it with either backend.  :mod:`.precision` is the bit-precision analysis and
:mod:`.cost` the runtime's "ops" measure.
"""

from __future__ import annotations

from typing import Any

from ...graph import Model
from .cost import model_cost
from .params import read_params, write_params
from .precision import infer_precisions, model_precisions


def load(path: str, *, params: str | None = None, **opts: Any) -> Model:
    """Read a CVM graph JSON and its params file (default: ``<stem>.params`` beside it).

    ``json_text=`` / ``params_bytes=`` give the contents directly (``path`` then only names
    the model in messages).
    """
    from ...diagnostics import Location, NNEFXError
    from .reader import load as _load

    unknown = sorted(set(opts) - {"json_text", "params_bytes"})
    if unknown:
        raise NNEFXError(f"option '{unknown[0]}' does not apply to CVM models", Location(path))
    return _load(path, params=params, **opts)


def save(model: Model, path: str, *, params: str | None = None) -> None:
    """Write a graph of ``cvm_*`` operations as CVM graph JSON + params (``<stem>.params``)."""
    from .writer import save as _save

    _save(model, path, params=params)


__all__ = ["infer_precisions", "load", "model_cost", "model_precisions", "read_params", "save",
           "write_params"]
