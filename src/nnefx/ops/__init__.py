"""Operator families.  Every module (and subpackage module) here registers its operations
with :mod:`nnefx.ops.registry` when imported; :func:`load_all` imports them all."""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    """Import every family module below this package, recursively."""
    for info in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        if info.name.endswith(".registry"):
            continue
        importlib.import_module(info.name)


from .registry import OpDef, all_ops, define, find, get  # noqa: E402

__all__ = ["OpDef", "all_ops", "define", "find", "get", "load_all"]
