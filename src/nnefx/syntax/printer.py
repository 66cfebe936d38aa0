"""Print a flat :class:`~nnefx.graph.Graph` back as NNEF text (and its ``graph.quant``).

The output is the flat final-dialect syntax the official parser reads: ``version 1.0;``,
one ``extension`` statement per nnefx extension domain used, one assignment per operation
with every attribute written out, the bound generic as ``op<T>(...)``.  Negative literals
are written ``-1`` (part of the literal in flat syntax); non-finite reals cannot be written
and raise :class:`NNEFXError`.  ``dialect="provisional"`` writes the seed-era spelling
(no ``;``, provisional parameter names).

:func:`print_readable` is what writers call: the same text, read back by nnefx's own
front-end before it is returned, so nnefx never writes NNEF it cannot read (a graph without
inputs, which the graph declaration's identifier list cannot express (NNEF spec, graph definition); an
operation whose arguments break its declaration, such as ``max_pool`` on an ``integer``
tensor).  A refusal names the operation and points at where it came from.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..dims import Dim
from ..graph import DEFERRED, Graph, Operation
from .parser import KEYWORDS

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOMAIN_EXTENSIONS = {"cvm": "nnefx_cvm", "ir": "nnefx_ir", "nnefx": "nnefx_ops", "onnx": "nnefx_onnx"}
#: final operation -> (provisional name, {final param: provisional param})
_PROVISIONAL_NAMES = {"matmul": ("matmul", {"transposeA": "trA", "transposeB": "trB"}),
                      "transpose": ("transpose", {"axes": "perm"}),
                      "copy": ("idn", {})}


def _check_name(name: str, dialect: str) -> str:
    if not _IDENT.match(name):
        raise NNEFXError(f"'{name}' is not a valid NNEF identifier")
    if name in KEYWORDS[dialect]:
        raise NNEFXError(f"'{name}' is a keyword of the {dialect} dialect and cannot name a tensor or graph there")
    return name


def format_value(v: Any, *, tensor: bool = False) -> str:
    """One value in NNEF literal syntax; inside tensor parameters ``str`` is a tensor name."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise NNEFXError(f"the value {v} cannot be written in NNEF (no literal for it)")
        text = repr(v)
        if "e" in text and "." not in text.split("e")[0]:
            mant, exp = text.split("e")
            text = f"{mant}.0e{exp}"
        return text
    if isinstance(v, str):
        if tensor:
            if not _IDENT.match(v):
                raise NNEFXError(f"tensor name '{v}' is not a valid NNEF identifier")
            return v
        if "'" not in v:
            return f"'{v}'"
        if '"' not in v:
            return f'"{v}"'
        raise NNEFXError(f"the string {v!r} contains both quote characters and cannot be written")
    if isinstance(v, Dim):
        return str(v).replace(" ", "")   # a symbolic extent, in tract's expression syntax
    if isinstance(v, list):
        return "[" + ", ".join(format_value(x, tensor=tensor) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(format_value(x, tensor=tensor) for x in v) + ")"
    try:
        import numpy as np

        if isinstance(v, np.ndarray):
            return format_value(v.tolist(), tensor=tensor)
        if isinstance(v, np.generic):
            return format_value(v.item(), tensor=tensor)
    except ImportError:  # pragma: no cover
        pass
    raise NNEFXError(f"cannot write value {v!r} in NNEF")


def _lhs(outputs: dict[str, Any]) -> str:
    parts = []
    for v in outputs.values():
        parts.append(format_value(v, tensor=True))
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def format_operation(op: Operation, dialect: str = "final") -> str:
    name = op.op
    if name == "tract_core_scan" and "scan_inputs" in op.inputs:
        return _format_scan(op)
    for t in op.input_names() + op.output_names():
        _check_name(t, dialect)
    if dialect == "provisional" and op.op in ("external", "variable", "constant") and op.dtype not in (None, "scalar"):
        raise NNEFXError(f"the provisional dialect cannot write {op.op}<{op.dtype}> (it has no typed "
                         "tensor introductions); print the final dialect instead", op.location)
    renames: dict[str, str] = {}
    if dialect == "provisional" and name in _PROVISIONAL_NAMES:
        name, renames = _PROVISIONAL_NAMES[name]
    order = _parameter_order(op.op)
    args = []
    named = False
    for i, (k, v) in enumerate(op.inputs.items()):
        # an optional input left out before this one: positions no longer match the
        # declaration, so from here on arguments are named (NNEF spec, invocation syntax)
        named = named or (order is not None and (i >= len(order) or order[i] != k))
        args.append(f"{k} = {format_value(v, tensor=True)}" if named else format_value(v, tensor=True))
    args += [f"{renames.get(k, k)} = {format_value(v)}" for k, v in op.attribs.items()]
    generic = f"<{op.dtype}>" if op.dtype and dialect == "final" else ""
    return f"{_lhs(op.outputs)} = {name}{generic}({', '.join(args)})"


@functools.lru_cache(maxsize=1024)
def _parameter_order(name: str) -> tuple[str, ...] | None:
    """The declared parameter names of registry operation ``name`` in order (None if unknown)."""
    from ..ops import registry
    from ..ops.signature import signature

    entry = registry.find(name)
    sig = signature(entry.declaration) if entry is not None else None
    return None if sig is None else tuple(p.name for p in sig.params)
def _format_scan(op: Operation) -> str:
    """tract's scan in the form documents write it (tensors inside the tuples; the graph
    keeps them as the operation's three ``tensor[]`` inputs, :mod:`nnefx.ops.tract.scan`)."""
    a, ins, v = op.attribs, op.inputs, format_value

    def items(entries):
        return "[" + ", ".join("(" + ", ".join(entry) + ")" for entry in entries) + "]"

    scan = items([v(n), t, v(axis), v(chunk)] for (n, axis, chunk), t in zip(a["scan"], ins["scan_inputs"], strict=True))
    full = items([v(n), t] for n, t in zip(a["full"], ins["full_inputs"], strict=True))
    state = items([v(n), t, v(r)] for (n, r), t in zip(a["state"], ins["state_inputs"], strict=True))
    output = items([v(x) for x in e] for e in a["output"])
    rest = "".join(f", {k} = {v(a[k])}" for k in ("skip", "reset_every_turn", "external_state") if k in a)
    names = [format_value(n, tensor=True) for n in op.output_names()]
    # tract unpacks the results into a tuple of identifiers (its reader refuses an array there)
    lhs = f"({', '.join(names)})" if len(names) > 1 else f"[{names[0]}]"
    return (f"{lhs} = tract_core_scan(body = {v(a['body'])}, scan = {scan}, full = {full}, "
            f"state = {state}, output = {output}{rest})")


def _body_fragments(graph: Graph) -> list[str]:
    """The bodies of the graph's scans as fragment definitions (tract's dialect needs no KHR
    extension for them)."""
    lines: list[str] = []
    for name, body in graph.subgraphs.items():
        def typed(n: str, body: Graph = body) -> str:
            return f"{n}: tensor<{body.tensors[n].dtype}>"

        lines.append(f"fragment {name}( {', '.join(typed(n) for n in body.inputs)} ) -> "
                     f"( {', '.join(typed(n) for n in body.outputs)} )")
        lines.append("{")
        lines.extend(f"    {format_operation(op)};" for op in body.operations if op.op != "external")
        lines.extend(["}", ""])
    return lines


def _domain_extensions(graph: Graph) -> list[str]:
    from ..ops import registry

    exts = []
    for op in graph.operations:
        entry = registry.find(op.op)
        if entry is not None and entry.domain == "tract":
            # tract's registries (its own reader needs the right one; nnefx any of them)
            ext = "tract_registry " + ("tract_transformers" if op.op.startswith("tract_transformers_")
                                       else "tract_core")
            if ext not in exts:
                exts.append(ext)
        elif entry is not None and entry.domain in _DOMAIN_EXTENSIONS:
            ext = _DOMAIN_EXTENSIONS[entry.domain]
            if ext not in exts:
                exts.append(ext)
    return exts


def format_declaration(name: str, generic: bool, generic_default: str | None,
                       params: list[tuple[str, str, Any]], results: list[tuple[str, str]]) -> str:
    """A body-less fragment declaration (final dialect), e.g.
    ``fragment shuffle<?>( input: tensor<?>, groups: integer ) -> ( output: tensor<?> )``;
    ``params`` are ``(name, type text, default value or None)``."""
    g = ("<? = " + generic_default + ">" if generic_default else "<?>") if generic else ""
    ps = ", ".join(f"{n}: {t}" + ("" if d is None else f" = {format_value(d)}") for n, t, d in params)
    rs = ", ".join(f"{n}: {t}" for n, t in results)
    return f"fragment {name}{g}( {ps} ) -> ( {rs} )"


def print_graph(graph: Graph, *, dialect: str = "final", tract: bool = False) -> str:
    """The graph as an NNEF document (flat syntax).

    ``tract``: a graph written for tract (``save(..., dialect="tract")``) is headed by
    ``extension tract_registry tract_core;`` even where it uses no ``tract_core_*`` operation:
    the header is what tells a reader that the document means what tract computes (``sub`` of
    two integer tensors in their datum type, as tract's binary operations do), which nnefx's
    reader follows too; without it the same text is standard NNEF, which types ``sub`` scalar."""
    if dialect not in ("final", "provisional"):
        raise NNEFXError(f"unknown NNEF dialect '{dialect}' (expected 'final' or 'provisional')")
    end = ";" if dialect == "final" else ""
    lines = [f"version 1.0{end}"]
    if graph.declarations and dialect != "final":
        raise NNEFXError(f"the graph uses declaration-only fragments ({', '.join(graph.declarations)}); "
                         "nnefx writes their declarations in the final dialect only")
    if dialect == "final":
        exts = _domain_extensions(graph)
        if tract and not any(e.startswith("tract_registry ") for e in exts):
            exts.insert(0, "tract_registry tract_core")
        for ext in exts:
            lines.append(f"extension {ext};")
        # symbolic extents are written in tract's dialect (its header declares them)
        lines.extend(f"extension tract_symbol {name};" for name in graph.symbols)
        lines.extend(f"extension tract_assert {a};" for a in graph.assertions)
        if graph.declarations:
            lines.append("extension KHR_enable_fragment_definitions;")
            lines.append("")
            lines.extend(f"{text};" for text in graph.declarations.values())
    elif graph.symbols:
        raise NNEFXError(f"the provisional dialect cannot write symbolic extents ({', '.join(graph.symbols)})")
    lines.append("")
    if graph.subgraphs:
        if dialect != "final":
            raise NNEFXError("the provisional dialect cannot write the bodies of tract_core_scan")
        lines.extend(_body_fragments(graph))
    for n in [graph.name, *graph.inputs, *graph.outputs]:
        _check_name(n, dialect)
    if not graph.inputs:
        first = next((op.location for op in graph.operations if op.location is not None), None)
        raise NNEFXError(f"cannot write graph '{graph.name}' as NNEF: it has no inputs, and an NNEF "
                         "graph declaration lists at least one (NNEF spec, graph definition)", first)
    refuse_deferred(graph)
    lines.append(f"graph {graph.name}( {', '.join(graph.inputs)} ) -> ( {', '.join(graph.outputs)} )")
    lines.append("{")
    for op in graph.operations:
        try:
            text = format_operation(op, dialect)
        except NNEFXError as exc:  # a value NNEF has no literal for: named where it came from
            if exc.location is not None or op.location is None:
                raise
            raise NNEFXError(f"cannot write operation '{op.op}' as NNEF: {exc.message}", op.location) from None
        lines.append(f"    {text}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def refuse_deferred(graph: Graph, fmt: str = "NNEF") -> None:
    """A node whose parameters are tensors known only at run time (values, or the extents of
    a tensor a run tells) cannot be written: NNEF operations take them as attributes fixed in
    the document.  Raised at the first such node, located at it."""
    for op in graph.operations:
        if op.op == DEFERRED:
            node = op.attribs["node"]
            needs = (f"the values of {', '.join(repr(v) for v in node.values)}" if node.values else
                     f"the extents of {', '.join(repr(v) for v in node.shapes)}")
            raise NNEFXError(f"cannot write {node.kind} as {fmt}: it takes {needs} at run time, and NNEF "
                             "operations take such parameters as attributes fixed in the document", op.location)


def check_element_types(graph: Graph, where: str | None = None, fmt: str = "NNEF") -> None:
    """Refuse a graph whose tensors carry concrete element types the NNEF files cannot hold.

    NNEF text types tensors ``scalar``/``integer``/``logical`` only, and nnefx computes them
    as float32/int64/bool (NNEF spec §4.1 leaves the representation open): an int8 ``add``
    or a float16 network written as NNEF would compute something else when read back
    (no wrap-around at 8 bits, no float16 rounding).  Variables keep their type in their
    tensor files (NNEF tensor file format: float 16/32/64 bits, signed/unsigned integers);
    every other tensor must have its data type's default element type.
    """
    from .. import etypes
    from ..io.binary import item_type_of

    variables = {name for op in graph.operations if op.op == "variable" for name in op.output_names()}
    producers = graph.producers()
    for name, t in graph.tensors.items():
        if t.etype is None or t.etype == etypes.DEFAULTS.get(t.dtype):
            continue
        op = producers.get(name)
        loc = (op.location if op is not None and op.location is not None else None) or Location(where)
        if t.dtype == "string":
            raise NNEFXError(f"cannot write tensor '{name}' as {fmt}: it holds strings, which {fmt} as nnefx writes "
                             "it cannot hold (NNEF's tensor data types are scalar, integer and logical); write ONNX",
                             loc)
        if name in variables:
            try:
                item_type_of(etypes.numpy_dtype(t.etype))
                continue
            except NNEFXError:
                raise NNEFXError(f"cannot write variable '{name}' as {fmt}: its element type {t.etype} has no "
                                 "NNEF tensor-file item type", loc) from None
        raise NNEFXError(f"cannot write tensor '{name}' as {fmt}: it is {t.etype} data, and {fmt} as nnefx "
                         f"writes and reads it types tensors only as {t.dtype} (computed as "
                         f"{etypes.DEFAULTS.get(t.dtype)}, which would change its values); write NNEF for "
                         "tract (`nnefx convert --dialect tract`, save(..., dialect=\"tract\")), which declares "
                         "element types in tract's forms (tract_core_external datum_type, tract_core_cast), or "
                         "ONNX, or cast it to the default type first", loc)


def print_readable(graph: Graph, *, where: str | None = None) -> str:
    """:func:`print_graph`'s final-dialect text, refused unless nnefx reads it back.

    The text is compiled by the front-end (the checker against each operation's declaration,
    the expansion and the shape rules, exactly as loading it would); an error there becomes
    ``cannot write operation 'OP' as NNEF: ...`` located at the operation's own position (its
    source file's line or node), or at ``where`` (the target) when it has none.
    """
    from ..semantics.frontend import compile_document

    check_element_types(graph, where)
    text = print_graph(graph)
    try:
        compile_document(text, file=where)
    except NNEFXError as err:
        line = err.location.line if err.location is not None else None
        body_start = text.split("\n").index("{") + 2  # 1-based line of the first operation
        index = line - body_start if line is not None else -1
        if 0 <= index < len(graph.operations):
            op = graph.operations[index]
            raise NNEFXError(f"cannot write operation '{op.op}' as NNEF: nnefx could not read it back "
                             f"({err.message})", op.location or Location(where)) from None
        raise NNEFXError(f"cannot write graph '{graph.name}' as NNEF: nnefx could not read it back "
                         f"({err.message})", Location(where)) from None
    return text


def print_quant(graph: Graph) -> str:
    """The ``graph.quant`` text for every tensor with quantization info ("" if none)."""
    lines = []
    for name, tensor in graph.tensors.items():
        q = tensor.quant
        if not q:
            continue
        op = q.get("op_name") or q.get("op-name")
        if not op:
            raise NNEFXError(f"quantization info of tensor '{name}' names no operation ('op_name')")
        args = ", ".join(f"{k} = {format_value(v)}" for k, v in q.items() if k not in ("op_name", "op-name"))
        lines.append(f'"{name}": {op}({args});')
    return "\n".join(lines) + ("\n" if lines else "")
