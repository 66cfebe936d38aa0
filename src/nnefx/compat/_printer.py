"""Text formatting functions of the official ``nnef`` package's printer, re-implemented.

These produce the same strings as ``nnef.format_graph`` & co. for graphs made of the
compat types, so tools that print graphs (validators, converters) give identical output
on both packages.  Strings that are :class:`Identifier`\\ s print bare, other strings
quoted; lists print as ``[...]`` and tuples as ``(...)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._types import Identifier


def format_version(version: tuple[int, int]) -> str:
    major, minor = version
    return f"version {major}.{minor};"


def format_extensions(extensions: Iterable[str]) -> str:
    return "\n".join(f"extension {ext};" for ext in extensions)


def _join(values: Iterable[Any], fmt: Any, brackets: str) -> str:
    return brackets[0] + ", ".join(fmt(v) for v in values) + brackets[1]


def format_argument(value: Any) -> str:
    """One argument value as NNEF text (raises TypeError for unprintable values)."""
    if isinstance(value, Identifier):
        return str(value)
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return _join(value, format_argument, "[]")
    if isinstance(value, tuple):
        return _join(value, format_argument, "()")
    raise TypeError("arguments must be of type int, float, str, nnef.Identifier or list/tuple of such, "
                    f"found: {type(value)}")


def format_result(value: Any) -> str:
    if isinstance(value, list):
        return _join(value, format_result, "[]")
    if isinstance(value, tuple):
        return _join(value, format_result, "()")
    if isinstance(value, Identifier):
        return str(value)
    raise TypeError(f"results must be of type nnef.Identifier or list/tuple of such, found: {type(value)}")


def format_shapes(result: Any, tensors: Mapping[str, Any]) -> str:
    if isinstance(result, list):
        return _join(result, lambda r: format_shapes(r, tensors), "[]")
    if isinstance(result, tuple):
        return _join(result, lambda r: format_shapes(r, tensors), "()")
    if isinstance(result, Identifier):
        return str(tensors[result].shape)
    raise TypeError(f"results must be of type nnef.Identifier or list/tuple of such, found: {type(result)}")


def format_invocation(name: str, attribs: Mapping[str, Any], inputs: Iterable[Any],
                      outputs: Iterable[Any] | None = None, dtype: str | None = None) -> str:
    inputs = list(inputs)
    text = ""
    if outputs is not None:
        text += ", ".join(format_result(o) for o in outputs) + " = "
    text += name
    if dtype is not None:
        text += f"<{dtype}>"
    args = [format_argument(v) for v in inputs]
    args += [f"{key} = {format_argument(value)}" for key, value in attribs.items()]
    return text + "(" + ", ".join(args) + ")"


def format_graph(name: str, inputs: Iterable[str], outputs: Iterable[str], operations: Iterable[Any],
                 tensors: Mapping[str, Any] | None = None, annotate_shapes: bool = False) -> str:
    """A graph definition (without the ``version`` line), one operation per line."""
    lines = [f"graph {name}( {', '.join(inputs)} ) -> ( {', '.join(outputs)} )", "{"]
    for op in operations:
        results = list(op.outputs.values())
        line = "\t" + format_invocation(op.name, op.attribs, op.inputs.values(), results, op.dtype) + ";"
        if annotate_shapes:
            line += "\t# " + ", ".join(format_shapes(r, tensors or {}) for r in results)
        lines.append(line)
    lines.append("}")
    return "\n".join(lines) + "\n"
