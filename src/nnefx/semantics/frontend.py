"""The NNEF front-end: text in, checked, expanded, shaped :class:`~nnefx.graph.Graph` out.

``compile_document`` runs the compile flow of NNEF 1.0 §2.4.1: parse (either dialect),
check (NNEF 1.0 §3.3), expand fragments by evaluating compile-time expressions, propagate
shapes and data types, and attach ``graph.quant`` information.  Every failure is an
:class:`~nnefx.diagnostics.NNEFXError` with the file, line and column of the offending token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import dims
from ..diagnostics import NNEFXError
from ..graph import Graph, Operation
from ..syntax import ast
from ..syntax.parser import FINAL, deep_recursion, parse_document, parse_quant, paused_gc
from ..syntax.printer import format_declaration
from .checker import Checker, check_declaration, match_arguments, static_literal_type
from .dialect import (
    Tolerance,
    TractHeader,
    bind_given_shapes,
    carry_etypes,
    lower_externals,
    read_tract_header,
    take_properties,
    tract_deconv_filters,
)
from .expander import Expander
from .fastpath import compile_if_flat
from .shapes import infer_shapes
from .stdlib import KNOWN_EXTENSIONS, TRACT_DOMAIN_EXTENSION, visible_fragments
from .types import can_cast


def fragment_table(doc: ast.Document, tolerance: Tolerance | None = None) -> dict[str, ast.Fragment]:
    """Standard fragments visible to ``doc`` plus its own, after declaration checks.

    A ``tolerance`` (tract's dialect, lenient mode) lets a document fragment replace a
    standard operation of the same name, as tract does (``ModelBuilder::wire_invocation``
    looks in the document first)."""
    for ext in doc.extensions:
        if ext.text is not None:
            continue  # tract's header lines: read by dialect.read_tract_header
        for name in ext.names:
            if name not in KNOWN_EXTENSIONS:
                raise NNEFXError(f"unknown extension '{name}' (known: {', '.join(KNOWN_EXTENSIONS)})", ext.loc)
    names = doc.extension_names()
    if doc.tract:
        names = [*names, TRACT_DOMAIN_EXTENSION]
    table = visible_fragments(doc.dialect, names)
    own: set[str] = set()
    for frag in doc.fragments:
        if frag.name in table:
            stdlib = table[frag.name].origin == "stdlib"
            if stdlib and frag.name not in own and tolerance is not None and frag.body is not None:
                tolerance.allow("redefined-standard-fragment", f"fragment '{frag.name}' replaces the standard "
                                f"operation '{frag.name}' (the document's definition is used)", frag.loc)
            else:
                where = "a standard operation" if stdlib else "defined earlier"
                raise NNEFXError(f"fragment '{frag.name}' is already defined ({where}); fragment names must be "
                                 "unique", frag.loc)
        check_declaration(frag, doc.dialect)
        table[frag.name] = frag
        own.add(frag.name)
    return table


def tolerance_for(doc: ast.Document, lenient: bool) -> Tolerance | None:
    """tract's dialect for documents declaring ``tract_*`` extensions, else lenient or strict."""
    if doc.tract:
        return Tolerance("tract")
    return Tolerance("lenient") if lenient else None


def check_document(doc: ast.Document, tolerance: Tolerance | None = None,
                   header: TractHeader | None = None) -> dict[str, ast.Fragment]:
    """All static checks of NNEF 1.0 §3.3; returns the fragment table used."""
    table = fragment_table(doc, tolerance)
    checker = Checker(table, doc.dialect, tolerance=tolerance, symbols=header.symbols if header else ())
    with deep_recursion():
        for frag in doc.fragments:
            checker.check_fragment_body(frag)
        if doc.graph is not None:
            checker.check_graph(doc.graph)
    return table


def compile_document(text: str, *, file: str | None = None, quant: str | None = None, dialect: str | None = None,
                     lowered: Iterable[str] | None = None, expand_all: bool = False,
                     atomic: Iterable[str] | None = None, input_shapes: dict[str, tuple] | None = None,
                     quant_file: str | None = None, shapes: bool = True,
                     custom_shapes: Mapping[str, Callable[..., Any]] | None = None, lenient: bool = False,
                     extras: dict[str, Any] | None = None) -> Graph:
    """Parse, check, expand and shape an NNEF document; returns the flat graph.

    * ``dialect``: ``"provisional"`` or ``"final"``; detected from the header when None.
    * ``lowered``: standard compound operations to expand (the official parser's meaning).
    * ``expand_all``: expand every compound operation down to primitives, except ``atomic``.
    * ``quant``: the text of a ``graph.quant`` document; entries land in ``Tensor.quant``
      as ``{"op_name": NAME, **arguments}`` (defaults filled in).
    * ``input_shapes``: shapes for external inputs (see :func:`shapes.infer_shapes`).
    * ``shapes=False`` skips shape propagation.
    * ``custom_shapes``: shape functions for the document's declaration-only fragments
      (custom primitives), ``{name: f(*input_shapes, **attribs) -> shape | (shape, ...)}``
      as the official tools' ``custom_shapes``; without one their results stay unknown.

    * ``lenient``: accept the known exporter deviations from NNEF 1.0.5, each with a located
      :class:`~nnefx.diagnostics.NNEFXWarning` (see :mod:`nnefx.semantics.dialect`).
    * ``extras``: a dict that receives what the document says about the model besides its
      graph (``"properties"``: tract's ``tract_core_properties``).

    Documents in tract's dialect (a ``tract_*`` extension) are read by tract's rules: the
    header declares registries, symbols (``Graph.symbols``, symbolic extents in shapes) and
    assertions (``Graph.assertions``).

    Document-defined fragments are always expanded; standard compounds stay atomic unless
    lowered.  Raises :class:`NNEFXError` with a location for every invalid input.
    """
    try:
        with paused_gc(), deep_recursion():
            fast = None if lenient else compile_if_flat(
                text, file=file, dialect=dialect, lowered=lowered, expand_all=expand_all, atomic=atomic,
                input_shapes=input_shapes, shapes=shapes)
            if fast is not None:
                # the same graph and table as below, so the same quantization result or error
                graph, table = fast
                check_variables(graph)
                if quant:
                    attach_quant(graph, quant, table, file=quant_file or "<quant>", dialect=FINAL)
                return graph
            doc = parse_document(text, file, dialect)
            header = read_tract_header(doc)
            properties = take_properties(doc) if header is not None else None
            tolerance = tolerance_for(doc, lenient)
            table = check_document(doc, tolerance, header)
            expander = Expander(table, doc.dialect, lowered=lowered, expand_all=expand_all, atomic=atomic)
            expander.tolerance = tolerance
            assert doc.graph is not None
            if header is not None:
                expander.symbols = {s: dims.symbol(s) for s in header.symbols}
            graph = expander.expand_graph(doc.graph)
            graph.declarations = declarations(doc, expander)
            if header is not None:
                lower_externals(graph)
                tract_deconv_filters(graph)
                graph.symbols = list(header.symbols)
                graph.assertions = list(header.assertions)
                bind_given_shapes(graph, input_shapes)
            if properties is not None and extras is not None:
                extras["properties"] = properties
            graph.validate_structure()
            check_variables(graph)
            if shapes:
                infer_shapes(graph, input_shapes, custom_shapes)
            if header is not None:
                carry_etypes(graph)
                if extras is not None:   # the loader carries them again once variables have data
                    extras["tract_etypes"] = True
            if quant:
                attach_quant(graph, quant, table, file=quant_file or "<quant>", dialect=doc.dialect)
    except NNEFXError as exc:
        if file is not None:
            exc.at_file(file)
        raise
    except RecursionError:
        raise NNEFXError("document nested too deeply to process", None if file is None else
                         __import__("nnefx.diagnostics", fromlist=["Location"]).Location(file)) from None
    return graph


def declarations(doc: ast.Document, expander: Expander) -> dict[str, str]:
    """The document's declaration-only fragments (custom primitives) as declaration texts,
    defaults evaluated, so a printed graph declares what it invokes."""
    out: dict[str, str] = {}
    for frag in doc.fragments:
        if frag.body is None:
            params = [(p.name, str(p.type.type), None if p.default is None else expander.eval(p.default, {}))
                      for p in frag.params]
            out[frag.name] = format_declaration(frag.name, frag.generic, frag.generic_default, params,
                                                [(r.name, str(r.type.type)) for r in frag.results])
    return out


_LABEL = re.compile(r"[A-Za-z0-9_\-./\\]+\Z")


def check_variables(graph: Graph) -> None:
    """Variable labels (spec 4.1): non-empty, characters ``[A-Za-z0-9_-./\\]``; variables
    sharing a label (compared case-insensitively) share data, so their shapes must agree."""
    seen: dict[str, tuple[Any, Operation]] = {}
    for op in graph.operations:
        if op.op != "variable":
            continue
        label = op.attribs.get("label")
        if not isinstance(label, str) or not _LABEL.match(label):
            raise NNEFXError(f"variable label {label!r} is invalid: it must be non-empty and use only letters, "
                             "digits and _ - . / \\", op.location)
        key = label.lower()
        shape = op.attribs.get("shape")
        if key in seen and seen[key][0] != shape:
            other = seen[key][1]
            line = other.location.line if other.location else "?"
            raise NNEFXError(f"variables labelled '{label}' share data but have different shapes {shape} and "
                             f"{seen[key][0]} (the other is at line {line})", op.location)
        seen.setdefault(key, (shape, op))


def parse_quant_entries(text: str, table: dict[str, ast.Fragment], *, file: str | None = None,
                        dialect: str = FINAL) -> dict[str, dict[str, Any]]:
    """Parse and check a ``graph.quant`` text: tensor name → ``{"op_name": ..., **args}``."""
    qdoc = parse_quant(text, file, dialect)
    out: dict[str, dict[str, Any]] = {}
    locs = {}
    expander = Expander(table, dialect)
    for entry in qdoc.entries:
        if entry.tensor in out:
            raise NNEFXError(f"tensor '{entry.tensor}' is quantized twice (first at line {locs[entry.tensor].line})",
                             entry.loc)
        frag = table.get(entry.op)
        if frag is None:
            raise NNEFXError(f"unknown quantization operation '{entry.op}'", entry.loc)
        if not frag.params:
            raise NNEFXError(f"'{entry.op}' has no parameters", entry.loc)
        info: dict[str, Any] = {"op_name": entry.op}
        given = {}
        for arg in entry.args:
            p = frag.param(arg.name or "")
            if p is None or p is frag.params[0]:
                names = ", ".join(x.name for x in frag.params[1:])
                raise NNEFXError(f"'{entry.op}' has no quantization parameter '{arg.name}' (expected: {names})",
                                 arg.loc)
            if arg.name in given:
                raise NNEFXError(f"argument '{arg.name}' is given twice", arg.loc)
            t = static_literal_type(arg.value)
            want = p.type.type
            if want.is_tensor():
                ok = _numeric_nested(arg.value)
                if ok:
                    _array_shape(arg.value)  # rectangular, or an error at the ragged item
            else:
                ok = can_cast(t, want.bind("scalar"))
            if not ok:
                raise NNEFXError(f"argument '{arg.name}' of '{entry.op}' expects {want}, found {t}", arg.value.loc)
            given[arg.name] = expander.eval(arg.value, {})
        for p in frag.params[1:]:
            if p.name in given:
                info[p.name] = given[p.name]
            elif p.default is not None:
                info[p.name] = expander.eval(p.default, {})
            else:
                raise NNEFXError(f"'{entry.op}' needs argument '{p.name}'", entry.loc)
        out[entry.tensor] = info
        locs[entry.tensor] = entry.loc
    return out


def _array_shape(e: ast.Expr) -> tuple[int, ...]:
    """Shape of a nested array literal; ragged nesting is an error at the offending item."""
    if not isinstance(e, ast.ArrayExpr):
        return ()
    if not e.items:
        return (0,)
    inner = _array_shape(e.items[0])
    for item in e.items[1:]:
        if _array_shape(item) != inner:
            raise NNEFXError(f"per-channel values must form a rectangular array; this item's shape "
                             f"{list(_array_shape(item))} differs from the first item's {list(inner)}", item.loc)
    return (len(e.items), *inner)


def _check_quant_shape(name: str, key: str, value: Any, shape: tuple | None, loc: Any) -> None:
    dims = []
    v = value
    while isinstance(v, list):
        dims.append(len(v))
        v = v[0] if v else None
    if not dims or shape is None:
        return
    for i, d in enumerate(dims):
        t = shape[i] if i < len(shape) else 1
        if d != 1 and t is not None and d != t:
            raise NNEFXError(f"'{key}' of tensor '{name}' has shape {dims}, which does not broadcast to the "
                             f"tensor's shape {list(shape)} (dimension {i}: {d} vs {t})", loc)


def _numeric_nested(e: ast.Expr) -> bool:
    if isinstance(e, ast.Literal):
        return e.kind in ("integer", "scalar", "logical")
    if isinstance(e, ast.ArrayExpr):
        return all(_numeric_nested(i) for i in e.items)
    return False


def attach_quant(graph: Graph, text: str, table: dict[str, ast.Fragment], *, file: str | None = None,
                 dialect: str = FINAL) -> Graph:
    """Attach ``graph.quant`` entries to ``graph.tensors[...].quant``."""
    try:
        entries = parse_quant_entries(text, table, file=file, dialect=dialect)
    except NNEFXError as exc:
        if file is not None:
            exc.at_file(file)
        raise
    qdoc_locs = {e.tensor: e.loc for e in parse_quant(text, file, dialect).entries}
    for name, info in entries.items():
        if name not in graph.tensors:
            raise NNEFXError(f"graph.quant names tensor '{name}', which the graph does not define", qdoc_locs[name])
        for key, value in info.items():
            _check_quant_shape(name, key, value, graph.tensors[name].shape, qdoc_locs[name])
        graph.tensors[name].quant = info
    return graph


__all__ = ["attach_quant", "check_document", "check_variables", "compile_document", "fragment_table", "match_arguments",
           "parse_quant_entries"]
