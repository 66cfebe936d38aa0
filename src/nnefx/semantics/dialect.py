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

import numpy as np

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


#: NNEF arithmetic and comparisons tract computes on integer tensors too (in their datum type,
#: wrapping; division truncates, tract ``core/src/ops/math``) -> the nnefx operation that
#: computes them so (numpy broadcasting, as tract's rank broadcast)
TRACT_INTEGER_OPS = {"add": ("integer_arith", "add"), "sub": ("integer_arith", "subtract"),
                     "mul": ("integer_arith", "multiply"), "div": ("integer_arith", "divide"),
                     "min": ("integer_arith", "minimum"), "max": ("integer_arith", "maximum"),
                     "eq": ("integer_compare", "equal"), "ne": ("integer_compare", "not_equal"),
                     "lt": ("integer_compare", "less"), "le": ("integer_compare", "less_equal"),
                     "gt": ("integer_compare", "greater"), "ge": ("integer_compare", "greater_equal")}


def tract_loose(frag: Any, got: Any, want: Any) -> bool:
    """tract's own operations declare every tensor parameter ``tensor<scalar>`` and type the
    values by their datum types (an i64 index tensor, a u8 image cast to f32): in tract's
    dialect any tensor passes for such a parameter of a primitive of the ``tract`` domain, and
    an integer tensor for an operand of the arithmetic tract computes on integers
    (:data:`TRACT_INTEGER_OPS`, rewritten by :func:`carry_etypes`); checker and expander ask
    the same question."""
    from .types import Prim, TensorT

    if not isinstance(want, TensorT) or want.dtype != "scalar":
        return False
    if frag.domain == "nnef" and frag.name in TRACT_INTEGER_OPS:   # (an integer number too: ne(x, 5))
        return isinstance(got, TensorT) and got.dtype == "integer" or got == Prim("integer")
    return frag.domain == "tract" and frag.body is None and isinstance(got, TensorT)


def tract_integer_result(frag: Any, types: list[Any]) -> bool:
    """Arithmetic of :data:`TRACT_INTEGER_OPS` whose tensor operands are all integer tensors
    has an integer result in tract's dialect (``types``: the arguments' types), checker and
    expander alike."""
    from .types import TensorT

    if frag.domain != "nnef" or TRACT_INTEGER_OPS.get(frag.name, ("",))[0] != "integer_arith":
        return False
    tensors = [t for t in types if isinstance(t, TensorT)]
    return bool(tensors) and all(t.dtype == "integer" for t in tensors)


def carry_etypes(graph: Any) -> None:
    """Element types flow as tract computes them: every tensor takes the datum type tract
    gives it (tract ``core/src/ops/binary.rs``: an operation computes in its operands' common
    super type), from the inputs' ``datum_type`` and the variables' stored item types — an
    ``add`` of two f16 tensors is f16 (NNEF text itself names only ``scalar``, so a plain NNEF
    document keeps computing in f32).  A registry element-type rule decides where an operation
    has one (``tract_core_cast``, ``tract_core_shape_of``, ...).  A number written in the
    text next to a typed float operand has that operand's type in tract (``mul(x, 0.1)``
    with f16 ``x`` multiplies by f16's 0.1, with f64 ``x`` by f64's): it becomes a rank-0
    constant of that type."""
    from .. import etypes
    from ..formats.reading.shapes import infer_etypes
    from ..ops import registry

    def typing(op: Any) -> bool:   # an operation giving its result a type of its own (a cast)
        entry = registry.find(op.op) if op.op.startswith("tract_") else None
        return entry is not None and entry.etype_rule is not None

    if not any(t.etype is not None for t in graph.tensors.values()) and not any(map(typing, graph.operations)):
        # every tensor of its default type: only the arithmetic on integer tensors (an i64
        # index minus an i64 constant) changes from the standard reading
        for op in graph.operations:
            _integer_arithmetic(graph, op, etypes)
        return

    ops = []
    for op in graph.operations:
        if op.op not in ("external", "variable", "constant"):
            _integer_arithmetic(graph, op, etypes)
            entry = registry.find(op.op)
            if entry is not None and entry.domain == "tract" and entry.etype_rule is None:
                _follow_data(graph, op, etypes)
            else:
                if entry is not None and op.dtype is not None:
                    _rebind_generic(graph, op, entry)
                given = infer_etypes(graph, op, unify=_common_etype) or []
                if entry is not None and entry.domain == "tract":   # (tract_core_cast to 'i32', 'i64' ...)
                    outs = [n for n in op.output_names() if n in graph.tensors]
                    for k, name in enumerate(outs):
                        t = graph.tensors[name]
                        et = t.etype or (given[k] if k < len(given) else None)
                        if et is not None and t.dtype == "scalar":
                            t.dtype = etypes.abstract(et) or t.dtype
            ops.extend(_typed_literals(graph, op, etypes))
        ops.append(op)
    graph.operations = ops


def _integer_arithmetic(graph: Any, op: Any, etypes: Any) -> None:
    """``add`` (``sub``, ``lt`` ...) of integer tensors becomes ``integer_arith``
    (``integer_compare``) computing in their type; a number written beside them is converted
    as tract converts it (Rust's ``as``: truncated toward zero, saturated)."""
    if op.op not in TRACT_INTEGER_OPS:
        return
    tensors = [graph.tensors[v] for v in op.inputs.values() if isinstance(v, str) and v in graph.tensors]
    if not tensors or any(t.dtype != "integer" for t in tensors):
        return
    et = _common_etype([etypes.of(t) for t in tensors])
    if et is None:
        return
    name, kind = TRACT_INTEGER_OPS[op.op]
    info = np.iinfo(etypes.numpy_dtype(et))
    for k, v in list(op.inputs.items()):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            op.inputs[k] = int(min(max(np.trunc(v), info.min), info.max)) if np.isfinite(v) else 0
    op.op, op.attribs, op.dtype = name, {"op": kind}, "integer"
    if name == "integer_arith":
        for out in op.output_names():
            graph.tensors[out].dtype = "integer"


def _rebind_generic(graph: Any, op: Any, entry: Any) -> None:
    """A generic operation (``transpose<?>``, ``concat<?>``) whose generic tensors became
    another abstract type here (a ``tract_core_cast`` to 'i32' the checker typed by tract's
    ``tensor<scalar>`` header) is bound to that type, results included."""
    from ..ops.signature import signature

    sig = signature(entry.declaration)
    if sig is None:
        return
    kinds = set()
    for p in sig.tensor_params:
        if p.tensor_dtype is None and p.name in op.inputs:
            v = op.inputs[p.name]
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, str) and x in graph.tensors:
                    kinds.add(graph.tensors[x].dtype)
    if len(kinds) != 1 or op.dtype in kinds:
        return
    new = kinds.pop()
    generic_results = {r.name for r in sig.results if r.tensor_dtype is None}
    for key, value in op.outputs.items():
        if key in generic_results:
            for name in value if isinstance(value, list) else [value]:
                if isinstance(name, str) and name in graph.tensors and graph.tensors[name].dtype == op.dtype:
                    graph.tensors[name].dtype = new
    op.dtype = new


def _follow_data(graph: Any, op: Any, etypes: Any) -> None:
    """A tract operation without an element-type rule returns its first tensor operand's
    datum type (gathers, scatters, top-k values, slices ...: tract's headers declare them all
    tensor<scalar>), and its results take that type's abstract NNEF type."""
    first = next((graph.tensors[v] for v in op.inputs.values() if isinstance(v, str) and v in graph.tensors), None)
    if first is None:
        return
    et = etypes.of(first)
    for name in op.output_names():
        t = graph.tensors.get(name)
        if t is not None and t.kind == "tensor" and t.dtype == "scalar":
            t.dtype = etypes.abstract(et) or t.dtype
            t.etype = None if etypes.DEFAULTS.get(t.dtype) == et else et


def _common_etype(found: list[str]) -> str | None:
    """tract's common super type of operand types (``DatumType::common_super_type``): the
    wider float, the wider integer of one signedness; None (the default) where tract has none."""
    from .. import etypes

    kinds = set(found)
    if len(kinds) <= 1:
        return next(iter(kinds), None)
    if all(etypes.is_float(k) for k in kinds):
        widest = max(kinds, key=lambda k: etypes.BITS.get(k, 0))
        same = [k for k in kinds if etypes.BITS.get(k) == etypes.BITS.get(widest)]
        return widest if len(same) == 1 else None   # f16 with bf16: no common type
    if len({k[0] for k in kinds}) == 1 and all(k[0] in "iu" for k in kinds):
        return max(kinds, key=lambda k: etypes.BITS.get(k, 0))
    return None


def _typed_literals(graph: Any, op: Any, etypes: Any) -> list[Any]:
    """The float literal operands of ``op`` whose result is a float other than f32, as
    ``constant`` operations of the result's type (a literal would be bound as an f32)."""
    from ..graph import Operation, Tensor

    outs = [graph.tensors[n] for n in op.output_names() if n in graph.tensors]
    et = outs[0].etype if len(outs) == 1 else None
    if et is None or not etypes.is_float(et):
        return []
    made = []
    for k, v in list(op.inputs.items()):
        if isinstance(v, float):
            name = f"{outs[0].name}_{k}_literal"
            while name in graph.tensors:
                name += "_"
            graph.tensors[name] = Tensor(name, "scalar", (), etype=et)
            made.append(Operation("constant", {}, {"output": name}, {"shape": [], "value": [v]}, "scalar",
                                  op.location))
            op.inputs[k] = name
    return made


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


def tract_deconv_filters(graph: Any) -> None:
    """tract reads ``deconv``'s filter as ``[C_out, C_in / groups, ...]`` — the layout of the
    matching ``conv``'s filter (tract ``nnef/src/ops/nnef/deser.rs`` ``read_conv_parameters``:
    input channels = filter dim 1 · groups, output channels = filter dim 0; ``conv_like`` builds
    ``Deconv`` with ``KernelFormat::OIHW``), and ``groups = 0`` as filter dim 0 groups.  NNEF
    1.0.5 §4.3 reads it ``[C_in, C_out / groups, ...]``.  In tract's dialect each ``deconv``'s
    filter is regrouped into NNEF's layout (``[g, C_out/g, C_in/g, ...]`` swapped in the middle:
    a reshape / transpose / reshape, folded with a variable filter) and its groups made explicit.
    tract's ``output_shape`` lists the spatial extents only (``ser.rs`` ``make_conv_named_args``)
    and a full-rank one is ignored there: both are refused here rather than read otherwise."""
    from ..graph import Operation, Tensor

    producers = graph.producers()
    rewritten: list[Operation] = []
    for op in graph.operations:
        if op.op in ("separable_deconv", "planewise_deconv"):
            raise NNEFXError(f"'{op.op}' in tract's dialect (whose deconv filter layout differs from NNEF's) "
                             "is not supported", op.location)
        if op.op != "deconv":
            rewritten.append(op)
            continue
        if list(op.attribs.get("output_shape") or []):
            raise NNEFXError("deconv's 'output_shape' in tract's dialect (spatial extents only, tract "
                             "ignores any other length) is not supported", op.location)
        f = op.inputs["filter"]
        g = int(op.attribs.get("groups", 1))
        if g == 0:   # tract: as many groups as the filter's first extent
            src = producers.get(f) if isinstance(f, str) else None
            shape = list(src.attribs.get("shape") or []) if src is not None and src.op in ("variable", "constant") \
                else []
            if not shape or not isinstance(shape[0], int):
                raise NNEFXError("deconv with groups = 0 in tract's dialect needs a filter whose shape is known "
                                 "when the model loads (a variable or constant)", op.location)
            g = shape[0]
        if not isinstance(f, str):
            raise NNEFXError("deconv's filter in tract's dialect must be a tensor", op.location)
        dtype = graph.tensors[f].dtype if f in graph.tensors else "scalar"

        def temp(kind: str, source: str, attribs: dict, _op=op, _dtype=dtype) -> str:
            name = f"{_op.output_names()[0]}_tract_filter"
            while name in graph.tensors:
                name += "_"
            graph.tensors[name] = Tensor(name, _dtype)
            rewritten.append(Operation(kind, {"input": source}, {"output": name}, attribs, _dtype, _op.location))
            return name

        if g == 1:
            f = temp("transpose", f, {"axes": [1, 0]})
        else:
            f = temp("reshape", f, {"shape": [g, -1], "axis_start": 0, "axis_count": 1})
            f = temp("transpose", f, {"axes": [0, 2, 1]})
            f = temp("reshape", f, {"shape": [-1], "axis_start": 0, "axis_count": 2})
        op.inputs = {**op.inputs, "filter": f}
        op.attribs = {**op.attribs, "groups": g}
        rewritten.append(op)
    graph.operations = rewritten
    for sub in graph.subgraphs.values():
        tract_deconv_filters(sub)
