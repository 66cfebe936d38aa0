"""``nnefx.load`` / ``nnefx.save``: one entry point for every format.

Formats sit at the edges (seed design): each is a module that turns a file into a
:class:`~nnefx.graph.Model` or back.  This module only decides *which* one, from the path,
and imports it lazily so that ``import nnefx`` stays cheap and optional dependencies
(onnx) are needed only by the formats that use them.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from .diagnostics import Location, NNEFXError

if TYPE_CHECKING:  # (a compiled model's load never needs the graph model)
    from .graph import Model

# (format name, module, loader function, saver function or None)
_FORMATS: dict[str, tuple[str, str, str | None]] = {
    "nnef-folder": ("nnefx.io.container", "load_folder", "save_folder"),
    "nnef-archive": ("nnefx.io.container", "load_archive", "save_archive"),
    "nnef-file": ("nnefx.io.container", "load_document", "save_document"),
    "ir": ("nnefx.formats.ir", "load", "save"),
    "cvm": ("nnefx.formats.cvm", "load", "save"),
    "onnx": ("nnefx.formats.onnx", "load", "save"),
}

#: Short names accepted by ``save(..., format=...)`` and ``nnefx convert --format``.
FORMAT_ALIASES = {"folder": "nnef-folder", "archive": "nnef-archive", "file": "nnef-file",
                  "nnef": "nnef-folder", "xml": "ir", "ir": "ir", "onnx": "onnx", "cvm": "cvm",
                  "json": "cvm"}


#: One path suffix -> format table, for :func:`load` and :func:`save` alike (longest suffix
#: first).  A path without a known suffix is an NNEF model folder when it is one (or, for
#: ``save``, has no suffix at all); anything else is refused with this list.
SUFFIXES: dict[str, str] = {
    ".tar.gz": "nnef-archive",
    ".tgz": "nnef-archive",
    ".tar": "nnef-archive",
    ".nnef": "nnef-file",
    ".xml": "ir",
    ".json": "cvm",
    ".onnx": "onnx",
}

#: Extra suffixes only ``load`` accepts: a ``.quant`` file names its document's model.
_LOAD_ONLY_SUFFIXES = {".quant": "nnef-file"}


def _known_suffixes() -> str:
    return "a folder (no suffix), " + ", ".join(SUFFIXES)


def _format_of_suffix(path: str, table: dict[str, str]) -> str | None:
    lower = path.lower().rstrip("/\\")
    for suffix, fmt in table.items():
        if lower.endswith(suffix):
            return fmt
    return None


def detect_format(path: str) -> str:
    """A model's format from its path (a folder is an NNEF model folder)."""
    if os.path.isdir(path):
        return "nnef-folder"
    fmt = _format_of_suffix(path, {**SUFFIXES, **_LOAD_ONLY_SUFFIXES})
    if fmt is not None:
        return fmt
    if not os.path.exists(path):
        raise NNEFXError(f"no such file or folder: {path}")
    raise NNEFXError(f"cannot tell the format of '{path}' from its name; known: {_known_suffixes()} "
                     "(or name the format with --format)")


def save_format_for(path: str) -> str:
    """The format ``save`` writes to ``path`` when none is named: by its suffix, a folder
    when it has none (or ends in a path separator, or is an existing folder)."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        return "nnef-folder"
    fmt = _format_of_suffix(path, SUFFIXES)
    if fmt is not None:
        return fmt
    suffix = os.path.splitext(os.path.basename(path))[1]
    if not suffix:
        return "nnef-folder"
    raise NNEFXError(f"cannot tell which format to write from the suffix '{suffix}'; known: "
                     f"{_known_suffixes()} (or name the format with format= / --to)", Location(path))


#: The extra that brings a format's optional dependency (named when it is missing).
_EXTRAS = {"onnx": "onnx"}


def _entry(fmt: str, which: int) -> Any:
    module, loader, saver = _FORMATS[fmt]
    name = (loader, saver)[which]
    if name is None:
        raise NNEFXError(f"nnefx cannot write the '{fmt}' format")
    try:
        mod = importlib.import_module(module)
        return getattr(mod, name)
    except ImportError as exc:
        hint = f"; install it with: pip install 'nnefx[{_EXTRAS[fmt]}]'" if fmt in _EXTRAS else ""
        raise NNEFXError(f"the '{fmt}' format needs the package '{exc.name or exc}', which is not "
                         f"installed{hint}") from None


def load(path: str | os.PathLike, **options: Any) -> Model:
    """Read a model from ``path`` in whatever supported format it is.

    Options are passed to the format's loader, e.g. ``params=`` for CVM models,
    ``dialect=`` for NNEF documents, ``lenient=True`` to accept known exporter deviations
    from NNEF 1.0.5 in NNEF documents (each one a located
    :class:`~nnefx.diagnostics.NNEFXWarning`), ``format=`` to force a format.
    """
    path = os.fspath(path)
    if not os.path.exists(path) and options.get("json_text") is None:  # (CVM: content given in memory)
        # before anything else, e.g. before an optional package the format would need
        raise NNEFXError("no such file or folder", Location(path))
    if not options.get("format"):
        from .engines.compiled import is_compiled, load_compiled

        if is_compiled(path):  # a folder written by `nnefx compile`: the engine's form, no source parsing
            if options:
                raise NNEFXError(f"a compiled model takes no load options (got {', '.join(sorted(options))}); "
                                 "compile it again with them")
            try:
                return load_compiled(path)  # type: ignore[return-value]
            except NNEFXError as exc:
                raise exc.at_file(path) from None
    fmt = options.pop("format", None) or detect_format(path)
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt not in _FORMATS:
        raise NNEFXError(f"unknown format '{fmt}' (known: {', '.join(sorted(FORMAT_ALIASES))})")
    if not fmt.startswith("nnef"):
        options.pop("lenient", None)   # the exporter deviations it accepts are NNEF text's
    if fmt == "ir" and "input_shapes" in options:
        # One spelling for every format: the IR reader calls the same thing ``shapes``.
        options["shapes"] = options.pop("input_shapes")
    try:
        return _entry(fmt, 0)(path, **options)
    except NNEFXError as exc:
        raise exc.at_file(path) from None


def save(model: Model, path: str | os.PathLike, format: str | None = None, **options: Any) -> None:
    """Write ``model`` to ``path``; the format follows the path unless named.

    Savers write to a temporary file or folder beside the target and rename it into place,
    so an interrupted save never leaves a half-written model.  ``dialect="tract"`` writes NNEF
    that tract reads (standard and ``tract_core_*`` operations; see :mod:`nnefx.formats.tract`).
    """
    path = os.fspath(path)
    fmt = FORMAT_ALIASES.get(format, format) if format else save_format_for(path)
    if fmt not in _FORMATS:
        raise NNEFXError(f"unknown format '{format}' (known: {', '.join(sorted(FORMAT_ALIASES))})")
    if not fmt.startswith("nnef") and model.graph.symbols:
        # symbolic extents (tract_symbol) are NNEF's; other writers get them as unknown
        import dataclasses

        from .runtime.symbols import without_symbols

        model = dataclasses.replace(model, graph=without_symbols(model.graph, fmt))
    if fmt.startswith("nnef"):
        # NNEF has no control flow: unrolled / branch taken where static, else refused (before the
        # renaming below, so the inlined bodies' names become identifiers too)
        import dataclasses

        from .formats.export.unroll import lower_control_flow

        model = dataclasses.replace(model, graph=lower_control_flow(model.graph))
    if fmt.startswith("nnef") and model.format in ("ir", "onnx"):
        # IR and ONNX tensor names (e.g. "/att/Reshape_output_0", "input.1") are not NNEF identifiers
        from .formats.ir.names import with_nnef_identifiers

        model = with_nnef_identifiers(model)
    if options.get("dialect") == "tract":  # NNEF that tract reads: formats/tract rewrites the graph
        options.pop("dialect")
        if not fmt.startswith("nnef"):
            raise NNEFXError(f"dialect 'tract' is NNEF; it cannot be written as {fmt}")
        from .formats.tract import to_tract

        model = to_tract(model)
    _entry(fmt, 1)(model, path, **options)
