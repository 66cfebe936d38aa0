"""What a document may do beyond NNEF 1.0.5: tract's dialect and known exporter deviations.

Two sources of NNEF that the specification's verdict rejects are common:

* **tract's dialect** (a document declaring a ``tract_*`` extension, as ``torch-to-nnef``
  writes by default).  Its header (tract ``nnef/src/deser.rs`` ``ModelBuilder::translate``):
  ``extension tract_registry NAME;`` enables a registry of operations (an unknown one is an
  error, as in tract), ``extension tract_symbol S;`` declares a symbolic dimension (older
  files: ``tract_pulse_streaming_symbol``, and tract accepts new symbols in any ``external``
  shape), ``extension tract_assert EXPR;`` constrains symbols (``NAME: EXPR`` is a scenario,
  an alternative rather than a constraint).  Fragments and operator expressions need no KHR
  extension; a fragment ``tract_core_properties`` holds the model's properties; document
  fragments shadow standard ones; argument values coerce the way tract coerces them.
* **exporter deviations** in files that claim plain NNEF (``torch-to-nnef``'s
  ``KhronosNNEF`` target).  Strict by default; ``lenient=True`` accepts each one with a
  located :class:`~nnefx.diagnostics.NNEFXWarning` naming it.

:class:`Tolerance` is the one place both are decided; the checker asks it before refusing.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from .. import dims
from ..diagnostics import Location, NNEFXError, NNEFXWarning
from ..syntax import ast

#: tract's registries (tract ``nnef/src/ops/mod.rs``, ``transformers``, ``onnx-opl``,
#: ``pulse-opl``, ``extra``); ``tract_nnef`` is the standard set, always on.
TRACT_REGISTRIES = ("tract_nnef", "tract_core", "tract_transformers", "tract_resource", "tract_onnx",
                    "tract_pulse", "tract_extra")
#: the header extensions of tract's dialect
TRACT_EXTENSIONS = ("tract_registry", "tract_symbol", "tract_assert", "tract_pulse_streaming_symbol")
#: operations whose ``shape`` may introduce new symbols (tract ``allowing_new_symbols``)
EXTERNAL_OPS = ("external", "tract_core_external")
#: the fragment tract reads as the model's properties
PROPERTIES_FRAGMENT = "tract_core_properties"

#: deviation kind -> what it is, for warnings and documentation
DEVIATIONS = {
    "redefined-standard-fragment": "a fragment definition replaces a standard operation of the same name",
    "positional-attribute": "an attribute passed positionally (NNEF 1.0.5 §2.4.2 wants it named)",
    "extra-argument": "more positional arguments than the operation has parameters",
    "scalar-for-array": "a single value (or a tuple) where an array is declared",
    "nested-array-padding": "integer[][] where (integer, integer)[] is declared",
    "tensor-for-attribute": "a tensor passed where a non-tensor attribute of a compound is declared",
    "load-time-attribute": "an integer attribute of a primitive given as a tensor whose value is known at load "
                           "(computed from shapes)",
    "batched-linear": "'linear' applied to an input of rank > 2 (expanded through its definition)",
    "tuple-from-array": "an array result unpacked into a tuple of identifiers",
}


@dataclass
class Tolerance:
    """Departures from NNEF 1.0.5 a document may make: ``mode`` ``"tract"`` (the dialect's
    own rules: silent) or ``"lenient"`` (each use warned, located and named)."""

    mode: str
    used: list[tuple[str, str, Location | None]] = field(default_factory=list)

    def allow(self, kind: str, detail: str, loc: Location | None) -> None:
        self.used.append((kind, detail, loc))
        if self.mode == "lenient":
            warnings.warn(NNEFXWarning(f"accepted exporter deviation '{kind}': {detail}", loc), stacklevel=2)


@dataclass
class TractHeader:
    """The meaning of a tract document's header lines."""

    registries: list[str] = field(default_factory=list)
    #: declared symbols in order, with where each was declared
    symbols: dict[str, Location | None] = field(default_factory=dict)
    assertions: list[dims.Assertion] = field(default_factory=list)
    #: scenario name -> its assertions (alternatives, recorded, not enforced)
    scenarios: dict[str, list[dims.Assertion]] = field(default_factory=dict)
    #: the older streaming form: identifiers in input shapes are symbols
    streaming: bool = False


def read_tract_header(doc: ast.Document) -> TractHeader | None:
    """Read the ``tract_*`` extension lines (None for a document outside tract's dialect)."""
    if not doc.tract:
        return None
    header = TractHeader()
    pending: list[tuple[str | None, str, Location | None]] = []
    for ext in doc.extensions:
        if ext.text is None:
            continue
        name, text, loc = ext.names[0], ext.text.strip(), ext.loc
        if name == "tract_registry":
            if text not in TRACT_REGISTRIES:
                raise NNEFXError(f"unknown tract registry '{text}' (known: {', '.join(TRACT_REGISTRIES)})", loc)
            header.registries.append(text)
        elif name == "tract_symbol":
            if not dims._NAME.fullmatch(text):
                raise NNEFXError(f"'extension tract_symbol' needs one symbol name, found '{text}'", loc)
            if text in header.symbols:
                raise NNEFXError(f"symbol '{text}' is declared twice", loc)
            header.symbols[text] = loc
        elif name == "tract_pulse_streaming_symbol":
            header.streaming = True
        elif name == "tract_assert":
            scenario, _, rule = text.rpartition(":")
            pending.append((scenario.strip() or None, rule, loc))
        else:
            raise NNEFXError(f"unknown tract extension '{name}' (known: {', '.join(TRACT_EXTENSIONS)})", loc)
    header.symbols.update({s: None for s in external_symbols(doc, header) if s not in header.symbols})
    known = set(header.symbols)
    fixed: dict[str, int] = {}
    for scenario, rule, loc in pending:
        a = dims.parse_assertion(rule, loc, known)
        if scenario is None:
            if a.holds({}) is False:
                raise NNEFXError(f"tract_assert '{a}' can never hold", loc)
            header.assertions.append(a)
            pinned = _pinned(a)
            if pinned is not None:
                name, value = pinned
                if fixed.setdefault(name, value) != value:
                    raise NNEFXError(f"tract_assert '{a}' contradicts an earlier one ({name} = {fixed[name]})", loc)
        else:
            header.scenarios.setdefault(scenario, []).append(a)
    for a in header.assertions:   # what the pinned symbols already decide
        if a.holds(fixed) is False:
            pins = ", ".join(f"{k} = {v}" for k, v in fixed.items() if k in a.symbols())
            raise NNEFXError(f"tract_assert '{a}' contradicts the others ({pins})", a.loc)
    return header


def _pinned(a: dims.Assertion) -> tuple[str, int] | None:
    """``S == 3`` (or ``3 == S``) pins symbol S."""
    if a.op not in ("==", "="):
        return None
    for sym, value in ((a.left, a.right), (a.right, a.left)):
        if isinstance(sym, dims.Dim) and isinstance(value, int) and len(sym.symbols()) == 1:
            (name,) = sym.symbols()
            if sym.terms == dims.symbol(name).terms:
                return name, value
    return None


def external_symbols(doc: ast.Document, header: TractHeader) -> list[str]:
    """Identifiers an ``external`` shape uses that the graph body never assigns: tract makes
    them new symbols (``allowing_new_symbols`` in ``external`` / ``tract_core_external``)."""
    if doc.graph is None:
        return []
    assigned = {i.name for a in doc.graph.body for i in _lhs_names(a.lhs)}
    out: list[str] = []
    for a in doc.graph.body:
        rhs = a.rhs
        if not (isinstance(rhs, ast.Invocation) and rhs.name in EXTERNAL_OPS):
            continue
        for arg in rhs.args:
            if arg.name == "shape":
                for ident in _identifiers(arg.value):
                    if ident not in assigned and ident not in header.symbols and ident not in out:
                        out.append(ident)
    return out


def _lhs_names(e: ast.Expr) -> list[ast.Identifier]:
    if isinstance(e, ast.Identifier):
        return [e]
    if isinstance(e, (ast.TupleExpr, ast.ArrayExpr)):
        return [i for x in e.items for i in _lhs_names(x)]
    return []


def _identifiers(e: ast.Expr) -> list[str]:
    if isinstance(e, ast.Identifier):
        return [e.name]
    out = []
    for child in ast.iter_children(e):
        if isinstance(child, ast.Expr):
            out.extend(_identifiers(child))
    return out


def take_properties(doc: ast.Document) -> dict[str, Any] | None:
    """Remove the ``tract_core_properties`` fragment from ``doc`` and return its pairs.

    tract reads the first assignment of its body as ``(string, tensor)[]``
    (``ModelBuilder::parse_properties``); exporters write literal strings, numbers and arrays.
    """
    for i, frag in enumerate(doc.fragments):
        if frag.name != PROPERTIES_FRAGMENT:
            continue
        del doc.fragments[i]
        props: dict[str, Any] = {}
        if not frag.body:
            return props
        value = frag.body[0].rhs
        if not isinstance(value, ast.ArrayExpr):
            raise NNEFXError("tract_core_properties must assign an array of (key, value) pairs", value.loc)
        for item in value.items:
            if not (isinstance(item, ast.TupleExpr) and len(item.items) == 2
                    and isinstance(item.items[0], ast.Literal) and isinstance(item.items[0].value, str)):
                raise NNEFXError("each property must be a ('key', value) pair with a string key", item.loc)
            props[item.items[0].value] = _literal(item.items[1])
        return props
    return None


def _literal(e: ast.Expr) -> Any:
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.ArrayExpr):
        return [_literal(x) for x in e.items]
    if isinstance(e, ast.TupleExpr):
        return tuple(_literal(x) for x in e.items)
    if isinstance(e, ast.Unary) and e.op == "-" and isinstance(e.operand, ast.Literal):
        return -e.operand.value
    raise NNEFXError("property values must be literals", e.loc)


def lower_externals(graph: Any) -> None:
    """``tract_core_external(shape, datum_type)`` is a graph input like ``external``
    (tract ``nnef/src/ops/core/source.rs``): written as the standard operation, with the
    datum type kept as the tensor's element type, so every later pass sees one kind of input."""
    from .. import etypes

    for op in graph.operations:
        if op.op != "tract_core_external":
            continue
        name = op.output_names()[0]
        etype = etypes.parse(str(op.attribs.get("datum_type", "f32")), op.location)
        dtype = etypes.abstract(etype)
        if dtype is None:
            raise NNEFXError(f"graph input '{name}' has datum type '{etype}', which nnefx cannot feed", op.location)
        op.op = "external"
        op.attribs = {"shape": op.attribs.get("shape", [])}
        op.dtype = dtype
        tensor = graph.tensors[name]
        tensor.dtype = dtype
        if etype != etypes.DEFAULTS.get(dtype):
            tensor.etype = etype


def bind_given_shapes(graph: Any, input_shapes: dict[str, tuple] | None) -> None:
    """Input shapes given at load (``input_shapes=``) bind the symbols they fill: the values
    are written into every attribute, the symbols leave ``graph.symbols``, and the graph's
    assertions are checked with them."""
    if not input_shapes or not graph.symbols:
        return
    values: dict[str, int] = {}
    origin: dict[str, str] = {}
    for op in graph.operations:
        if op.op == "external":
            name = op.output_names()[0]
            shape = op.attribs.get("shape")
            if name in input_shapes and isinstance(shape, list) and len(shape) == len(input_shapes[name]):
                dims.bind(tuple(shape), tuple(input_shapes[name]), values, f"input '{name}'", op.location, origin)
    if not values:
        return
    for a in graph.assertions:
        if a.holds(values) is False:
            bound = ", ".join(f"{k} = {values[k]}" for k in sorted(a.symbols()) if k in values)
            raise NNEFXError(f"the input shapes violate tract_assert '{a}' ({bound})", a.loc)
    for op in graph.operations:
        op.attribs = {k: dims.substitute_in(v, values) for k, v in op.attribs.items()}
    graph.symbols = [s for s in graph.symbols if s not in values]
    graph.assertions = [a for a in graph.assertions if a.holds(values) is None]
