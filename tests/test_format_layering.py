"""The format wing's layering: no format package imports another's, and the format-neutral
import and export layers import no format package at all (read from the sources, so an import
hidden inside a function counts too).  The family modules are where the formats meet: each
holds an operator's IR and ONNX reading and writing side by side, so they may use each
format's spelling."""

from __future__ import annotations

import ast
import os

import pytest

FORMATS = os.path.join(os.path.dirname(__file__), os.pardir, "src", "nnefx", "formats")
PACKAGES = ("ir", "onnx", "cvm")


def _imported_formats(path: str, package: str) -> set[str]:
    """Format packages ``path`` (a module of formats/``package``) imports, by any spelling."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 2:  # from ..X import ...  (X a sibling of this package)
                target = mod.split(".")[0] if mod else ""
                names = [target] if target else [a.name for a in node.names]
                found.update(n for n in names if n in PACKAGES)
            elif node.level == 0 and mod.startswith("nnefx.formats."):
                found.add(mod.split(".")[2])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("nnefx.formats."):
                    found.add(a.name.split(".")[2])
    return {p for p in found if p in PACKAGES and p != package}


@pytest.mark.parametrize("package", ["ir", "onnx", "cvm", "reading", "export"])
def test_no_format_package_imports_another(package):
    folder = os.path.join(FORMATS, package)
    offenders = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            hits = _imported_formats(os.path.join(folder, name), package)
            if hits:
                offenders[name] = sorted(hits)
    assert offenders == {}


def test_every_onnx_and_ir_reader_is_registered_by_a_family_or_the_format():
    from nnefx.formats.ir.mapping import registered_types
    from nnefx.formats.reading.registry import find_onnx_node, onnx_types

    onnx_ops = onnx_types()
    assert {"LSTM", "GRU", "RNN", "Conv", "Resize", "Slice"} <= set(onnx_ops)
    assert find_onnx_node("LSTM").__module__ == "nnefx.formats.families.recurrent"
    modules = {t: None for t, _ in registered_types()}
    assert "Interpolate" in modules and "TensorIterator" in modules
