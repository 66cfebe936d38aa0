"""Backends: which kernels a plan calls and which passes it adds.

A backend is a name, the kernel of each :class:`~nnefx.ops.registry.OpDef` it calls
(``formal`` or ``fast``), and the passes it adds to the planner between ``prune`` and
``allocate`` (:mod:`nnefx.runtime.passes`).  The planner imports no backend: a backend
module registers itself with :func:`register_backend`, so a new one (an engine run through
an exporter, say) plugs in without the planner changing.  The built-in ones are ``formal``
(the reference kernels, no passes) and ``fast`` (:mod:`nnefx.runtime.fast_backend`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..diagnostics import NNEFXError


@dataclass(frozen=True)
class BackendPass:
    """One planner pass a backend adds: ``run(state)`` rewrites ``state.entries`` in place
    (and may record ``state.labels``)."""

    name: str
    run: Callable[[Any], None]
    #: A fusion pass: skipped when the caller asks for ``fuse=False``.
    fusion: bool = False


@dataclass(frozen=True)
class Backend:
    name: str
    #: Which kernel of each operation the plan calls: ``"formal"`` or ``"fast"``.
    kernel: str
    passes: tuple[BackendPass, ...] = ()
    doc: str = ""


_BACKENDS: dict[str, Backend] = {}
#: Modules that register the built-in backends, imported on the first lookup.
_BUILTIN = ("nnefx.runtime.fast_backend",)
_loaded = False


def register_backend(backend: Backend) -> Backend:
    """Add (or replace) a backend under its name; returns it."""
    if backend.kernel not in ("formal", "fast"):
        raise ValueError(f"backend {backend.name!r}: kernel must be 'formal' or 'fast', not {backend.kernel!r}")
    _BACKENDS[backend.name] = backend
    return backend


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _BUILTIN:
            importlib.import_module(module)


def get_backend(name: str) -> Backend:
    """The backend called ``name``; an :class:`NNEFXError` listing the known ones if none."""
    _ensure_loaded()
    backend = _BACKENDS.get(name)
    if backend is None:
        known = sorted(_BACKENDS)
        listed = " or ".join(f"'{n}'" for n in known) if len(known) <= 2 else \
            ", ".join(f"'{n}'" for n in known[:-1]) + f" or '{known[-1]}'"
        raise NNEFXError(f"unknown backend '{name}' (expected {listed})")
    return backend


def backends() -> list[str]:
    """Names of the registered backends."""
    _ensure_loaded()
    return sorted(_BACKENDS)


register_backend(Backend("formal", "formal", doc="the reference kernels: the definition, the arbiter"))
