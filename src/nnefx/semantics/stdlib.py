"""The standard library: every registered operation's declaration, parsed once.

The texts come from :func:`nnefx.ops.registry.declarations` (final dialect), so the
signature the checker enforces is exactly the one the operation's kernels implement.
Each declaration is parsed on its own (file ``<stdlib:NAME>``), so one faulty entry only
disables that operation (using it reports the fault) instead of the whole front-end.

Visibility: domain ``nnef`` is always visible; the nnefx extension operations become
visible when a final-dialect document declares the matching extension:

=================  =========================================================
``nnefx_cvm``      domain ``cvm``: the deterministic integer set (``cvm_*``)
``nnefx_ir``       domain ``ir``: IR layers without NNEF counterpart (``ir_*``)
``nnefx_ops``      domain ``nnefx``: nnefx extension operations named by meaning (``erf``,
                   ``top_k``, ``gather_nd``, ``lstm_sequence``, ... — :mod:`nnefx.ops.ext`)
``tract_*``        domain ``tract``: tract's operations (any tract header line)
``nnefx_onnx``     domain ``onnx``: ONNX operators without NNEF counterpart (``onnx_*``)
=================  =========================================================

Names of earlier versions: documents written by nnefx 0.1 call the ``nnefx`` domain's
operations by their old ``ir_*`` names under ``extension nnefx_ir;`` (``ir_erf``,
``ir_top_k``, ...).  Where ``nnefx_ir`` is declared those names stay visible, as views of
the renamed operations that emit the new names (:data:`nnefx.ops.ext.RENAMED`), so such
files still read and load to the same graph.

The provisional dialect sees its own spellings of renamed operations
(:data:`PROVISIONAL_VIEWS`); the mapping back to the final names happens when operations
are emitted, so the graph always uses final names.
"""

from __future__ import annotations

import copy as _copy
from typing import Any

from ..diagnostics import NNEFXError
from ..syntax import ast
from ..syntax.parser import EXT_FRAGMENTS, EXT_OPERATORS, parse_library

EXTENSION_DOMAINS = {"nnefx_cvm": "cvm", "nnefx_ir": "ir", "nnefx_ops": "nnefx", "nnefx_onnx": "onnx"}
KNOWN_EXTENSIONS = (EXT_FRAGMENTS, EXT_OPERATORS, *EXTENSION_DOMAINS)
#: documents in tract's dialect (any ``tract_*`` extension line) see domain ``tract``: the
#: operations of tract's registries (tract_core, tract_transformers, ...).  Not a name a
#: document writes, so the fast path never takes tract documents.
TRACT_DOMAIN_EXTENSION = "tract_registry"
_DOMAINS_BY_EXTENSION = {**EXTENSION_DOMAINS, TRACT_DOMAIN_EXTENSION: "tract"}

#: provisional name -> (final operation, {provisional param: final param}, fixed attributes,
#: final params hidden from the provisional signature)
PROVISIONAL_VIEWS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "matmul": ("matmul", {"trA": "transposeA", "trB": "transposeB"}, {}),
    "transpose": ("transpose", {"perm": "axes"}, {}),
    "idn": ("copy", {}, {}),
    "planewise_conv": ("conv", {}, {"groups": 0}),
    "planewise_deconv": ("deconv", {}, {"groups": 0}),
}

_cache: dict[str, Any] = {"key": None}
#: (library, visible domains) -> fragment table of the final dialect (see visible_fragments)
_visible: dict[tuple, dict[str, ast.Fragment]] = {}


class Library:
    """Parsed standard fragments plus the ones that failed to parse or check."""

    def __init__(self) -> None:
        self.fragments: dict[str, ast.Fragment] = {}
        self.broken: dict[str, NNEFXError] = {}


def _registry_key() -> tuple:
    """What the library is built from: every operation's name and declaration.  Read off
    the registry table in its own order (no sort, no generator: this runs for every
    document, and sorting ~200 names cost about as much as the rest of a small document's
    header); a different order only means a rebuild, never a stale library."""
    from ..ops import registry

    table = registry.table()
    return tuple(table), tuple([op.declaration for op in table.values()])


def library() -> Library:
    """The parsed and checked standard library (rebuilt only when the registry changes)."""
    from ..ops import registry

    key = _registry_key()
    if _cache["key"] == key:
        return _cache["lib"]
    lib = Library()
    surface: set[str] = set()
    for op in registry.all_ops():
        # an operation whose documents spell it otherwise than its graph form (tract's scan
        # puts tensors inside tuples): documents are checked against that spelling, and the
        # expander lowers it (semantics/tract_scan.py)
        text = op.extra["tract_header"] if op.extra.get("surface") else op.declaration
        if op.extra.get("surface"):
            surface.add(op.name)
        try:
            frags = parse_library(text, file=f"<stdlib:{op.name}>")
        except NNEFXError as exc:
            lib.broken[op.name] = exc
            continue
        for frag in frags:
            frag.origin = "stdlib"
            frag.domain = op.domain
            lib.fragments[frag.name] = frag
    from .checker import Checker, check_declaration

    checker = Checker(lib.fragments, "final")
    for name, frag in list(lib.fragments.items()):
        try:
            if name not in surface:
                check_declaration(frag, "final")
            checker.check_fragment_body(frag)
        except NNEFXError as exc:
            lib.broken[name] = exc
    _cache["key"] = key
    _cache["lib"] = lib
    return lib


def visible_fragments(dialect: str, extensions: list[str]) -> dict[str, ast.Fragment]:
    """Standard fragments a document of ``dialect`` with ``extensions`` may call."""
    lib = library()
    domains = frozenset({"nnef"} | {_DOMAINS_BY_EXTENSION[e] for e in extensions if e in _DOMAINS_BY_EXTENSION})
    if dialect != "provisional":
        # the filtered table per library build and domain set (a fresh dict per call: callers own it)
        key = (lib, domains)
        cached = _visible.get(key)
        if cached is None:
            if len(_visible) >= 16:
                _visible.clear()
            cached = _visible[key] = {name: f for name, f in lib.fragments.items() if f.domain in domains}
            _add_renamed(cached, lib, domains)
        return dict(cached)
    # the provisional dialect also sees its own spellings of some final operations
    table = {name: f for name, f in lib.fragments.items() if f.domain in domains}
    _add_renamed(table, lib, domains)
    for prov_name, (final_name, renames, fixed) in PROVISIONAL_VIEWS.items():
        base = table.get(final_name)
        if base is None:
            continue
        view = _copy.copy(base)
        inverse = {v: k for k, v in renames.items()}
        view.params = []
        for p in base.params:
            if p.name in fixed:
                continue
            if p.name in inverse:
                p = _copy.copy(p)
                p.name = inverse[p.name]
            view.params.append(p)
        view.name = prov_name
        view.emit_as = final_name
        view.param_map = dict(renames)
        view.fixed_attribs = dict(fixed)
        table[prov_name] = view
    return table


def _add_renamed(table: dict[str, ast.Fragment], lib: Library, domains: frozenset[str]) -> None:
    """Under ``nnefx_ir``, the old ``ir_*`` names of renamed extension operations, as views
    that emit the new names (see the module docstring)."""
    if "ir" not in domains:
        return
    from ..ops.ext import RENAMED

    for old, new in RENAMED.items():
        base = lib.fragments.get(new)
        if base is None or old in table:
            continue
        view = _copy.copy(base)
        view.name = old
        view.emit_as = new
        table[old] = view


def broken_reason(name: str) -> NNEFXError | None:
    return library().broken.get(name)
