"""Which function writes each operation in each format, filled by the family modules.

The per-operator writers live with their operator family (:mod:`nnefx.formats.families`),
where an operator's reading and writing for every format sit together; the format packages
only look them up here.  A writer registered :func:`for_all` formats is written once, over
the neutral lowering (:mod:`.lowering`); one registered :func:`to_ir` / :func:`to_onnx` is a
format's own spelling of the operation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .context import ExporterTable

Writer = Callable[[Any, Any], None]

#: Format key -> operation name -> writer.
TABLES: dict[str, ExporterTable[Writer]] = {"ir": ExporterTable(), "onnx": ExporterTable()}
_loaded = False


def to_ir(*names: str) -> Callable[[Writer], Writer]:
    """Decorator: ``fn`` writes operations ``names`` as IR v11 layers."""
    return TABLES["ir"].exporter(*names)


def to_onnx(*names: str) -> Callable[[Writer], Writer]:
    """Decorator: ``fn`` writes operations ``names`` as ONNX nodes."""
    return TABLES["onnx"].exporter(*names)


def for_all(*names: str) -> Callable[[Writer], Writer]:
    """Decorator: ``fn`` writes operations ``names`` in every format (through the lowering)."""
    def deco(fn: Writer) -> Writer:
        for table in TABLES.values():
            table.exporter(*names)(fn)
        return fn
    return deco


def table(fmt: str) -> ExporterTable[Writer]:
    """The writers of format ``fmt`` ('ir', 'onnx'), the family modules loaded first."""
    global _loaded
    if not _loaded:
        importlib.import_module("nnefx.formats.families")
        _loaded = True
    return TABLES[fmt]


def exportable_ops(fmt: str) -> list[str]:
    """Names of the operations format ``fmt`` ('ir', 'onnx') has a writer for (compounds
    without one may still be written through their NNEF definitions)."""
    return table(fmt).names()
