"""Build NNEF models from Python: ``GraphBuilder``.

    b = GraphBuilder("net")
    x = b.external("input", shape=(1, 3, 8, 8))
    w = b.variable("conv1/filter", np.zeros((4, 3, 3, 3), np.float32))
    y = b.op("conv", x, w, padding=[(1, 1), (1, 1)])
    b.output(b.op("relu", y), name="output")
    model = b.build()              # a nnefx Model; nnefx.save(model, "folder")

Why it writes NNEF text and compiles it rather than assembling ``Operation`` objects: the
front-end already knows every standard operation's declaration (parameter names, order,
types, defaults, attribute ranges) and checks invocations against it.  Going through the
document means a builder-made graph is exactly what the same text loaded from disk would
give, attribute errors are reported by the same checker, and :meth:`GraphBuilder.text`
shows what will be saved.  Errors point back at the builder call that caused them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError
from ..graph import Model
from ..ops.signature import Signature, signature

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical",
             "string", "true", "false", "for", "in", "if", "else", "yield", "length_of", "shape_of",
             "range_of", "extent"}


@dataclass(eq=False)
class Value:
    """A tensor being built; pass it to :meth:`GraphBuilder.op` as an input."""

    name: str
    kind: str = "tensor"            # external, variable, constant or tensor
    dtype: str | None = None
    shape: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return self.name


@dataclass
class _Statement:
    lvalue: Any                     # Value, tuple/list of Values
    op: str
    args: tuple[Any, ...]
    attribs: dict[str, Any]
    generic: str | None
    call: str                       # how the user called it, for error messages
    data: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _is_ident(name: str) -> bool:
    return bool(_IDENT.fullmatch(name)) and name not in _KEYWORDS


def _literal(value: Any, where: str) -> str:
    """NNEF source text of a Python value (tensor handles print as their name)."""
    if isinstance(value, Value):
        return value.name
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            raise NNEFXError(f"{where}: {v} cannot be written in NNEF (only finite numbers)")
        text = repr(v)
        return text if any(c in text for c in ".e") else text + ".0"
    if isinstance(value, str):
        if any(c in value for c in "'\"\n\\"):
            raise NNEFXError(f"{where}: string {value!r} contains a quote, backslash or newline")
        return f"'{value}'"
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, where) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v, where) for v in value) + ")"
    raise NNEFXError(f"{where}: cannot write a {type(value).__name__} as an NNEF value")


def _dtype_of_array(array: np.ndarray, quantized: bool) -> str:
    kind = array.dtype.kind
    if kind == "b":
        return "logical"
    if kind in "iu":
        return "scalar" if quantized else "integer"
    if kind == "f":
        return "scalar"
    raise NNEFXError(f"numpy dtype {array.dtype} has no NNEF data type")


def _signature(op: str) -> Signature | None:
    """The registered operation's signature (None if unknown), read by
    :mod:`nnefx.ops.signature`, the one reader of declaration headers."""
    from ..ops import registry

    entry = registry.find(op)
    return None if entry is None else signature(entry.declaration)


def _result_arity(op: str) -> tuple[int, bool] | None:
    """(number of results, first result is an array) from the registry declaration."""
    sig = _signature(op)
    if sig is None or not sig.results:
        return None
    return len(sig.results), sig.results[0].is_array


def _parameter_names(op: str) -> list[str] | None:
    """Parameter names of a registered operation, in declaration order (None if unknown)."""
    sig = _signature(op)
    return None if sig is None else [p.name for p in sig.params]


class GraphBuilder:
    """Assemble a graph one invocation at a time; :meth:`build` compiles and checks it."""

    def __init__(self, name: str = "main"):
        if not _is_ident(name):
            raise NNEFXError(f"graph name '{name}' is not an NNEF identifier")
        self.name = name
        self._statements: list[_Statement] = []
        self._names: set[str] = set()
        self._inputs: list[Value] = []
        self._outputs: list[Value] = []
        self._quant: dict[str, tuple[Value, str, dict[str, Any]]] = {}
        self._counter = 0

    # -- naming ---------------------------------------------------------------------------

    def _claim(self, name: str | None, stem: str, bare: bool = False) -> str:
        if name is None:
            stem = re.sub(r"\W", "_", stem)
            if bare and _is_ident(stem) and stem not in self._names:
                self._names.add(stem)
                return stem
            while True:
                self._counter += 1
                name = f"{stem}{self._counter}"
                if name not in self._names and _is_ident(name):
                    break
        elif not _is_ident(name):
            raise NNEFXError(f"'{name}' is not a valid NNEF identifier")
        elif name in self._names:
            raise NNEFXError(f"the name '{name}' is already used in graph '{self.name}'")
        self._names.add(name)
        return name

    # -- tensor introductions -------------------------------------------------------------

    def external(self, name: str, shape: Sequence[int], dtype: str = "scalar") -> Value:
        """A graph input (``external``) of the given shape and data type."""
        value = Value(self._claim(name, "input"), "external", dtype, tuple(int(d) for d in shape))
        self._statements.append(_Statement(value, "external", (), {"shape": list(value.shape)}, dtype,
                                           f"external({name!r})"))
        self._inputs.append(value)
        return value

    def variable(self, label: str, data: Any, *, name: str | None = None, dtype: str | None = None,
                 quant: dict[str, Any] | None = None) -> Value:
        """A variable with its data; ``label`` is its file name in a model folder.

        Integer ``data`` with ``quant`` (a graph.quant entry: ``{"op_name": ..., params}``)
        is stored as quantized codes of a ``scalar`` variable.
        """
        array = np.asarray(data)
        if array.ndim == 0:
            array = array.reshape(1)
        dtype = dtype or _dtype_of_array(array, quant is not None)
        stem = re.sub(r"\W", "_", label.strip("/")) or "variable"
        value = Value(self._claim(name, stem if not stem[0].isdigit() else "v_" + stem, bare=True),
                      "variable", dtype, tuple(array.shape))
        self._statements.append(_Statement(value, "variable", (),
                                           {"shape": list(array.shape), "label": label}, dtype,
                                           f"variable({label!r})", data=array))
        if quant is not None:
            self.quantize(value, **quant)
        return value

    def constant(self, value: Any, shape: Sequence[int] | None = None, *, dtype: str | None = None,
                 name: str | None = None) -> Value:
        """A constant tensor: one repeated value, or an array's values (row-major)."""
        array = np.asarray(value)
        shape = tuple(int(d) for d in (shape if shape is not None else (array.shape or (1,))))
        dtype = dtype or _dtype_of_array(array, False)
        flat = array.ravel().tolist()
        result = Value(self._claim(name, "const"), "constant", dtype, shape)
        self._statements.append(_Statement(result, "constant", (), {"shape": list(shape), "value": flat},
                                           dtype, "constant(...)"))
        return result

    # -- operations -----------------------------------------------------------------------

    def op(self, op: str, *args: Any, name: str | Sequence[str] | None = None, outputs: int | None = None,
           dtype: str | None = None, **attribs: Any) -> Any:
        """Invoke operation ``op`` on tensor handles and literals.

        Positional ``args`` are the operation's tensor parameters in declaration order;
        keyword ``attribs`` are its other parameters by name.  ``dtype`` fills a generic
        ``<?>``.  Returns one :class:`Value`, a tuple of them for several results, or a list
        for a ``tensor[]`` result (give its length with ``outputs``).
        """
        if not _is_ident(op):
            raise NNEFXError(f"'{op}' is not an operation name")
        arity = _result_arity(op)
        count, is_array = arity if arity is not None else (1, False)
        if is_array and count == 1:
            if outputs is None:
                raise NNEFXError(f"operation '{op}' returns a tensor array; say how many with outputs=N")
            count = int(outputs)
        elif outputs is not None:
            count = int(outputs)
        names = [name] if isinstance(name, str) or name is None else list(name)
        if len(names) == 1 and count > 1:
            names = [None if name is None else f"{name}_{i}" for i in range(count)]
        if len(names) != count:
            raise NNEFXError(f"operation '{op}' has {count} results but {len(names)} names were given")
        values = [Value(self._claim(n, op)) for n in names]
        lvalue: Any = values[0] if count == 1 and not is_array else (values if is_array else tuple(values))
        params = _parameter_names(op)
        if params is not None:
            unknown = [k for k in attribs if k not in params]
            if unknown:
                raise NNEFXError(f"operation '{op}' has no parameter '{unknown[0]}' "
                                 f"(parameters: {', '.join(params)})")
            if len(args) > len(params):
                raise NNEFXError(f"operation '{op}' takes at most {len(params)} arguments, got {len(args)}")
            twice = [p for p in params[:len(args)] if p in attribs]
            if twice:
                raise NNEFXError(f"argument '{twice[0]}' of '{op}' is given twice")
        for a in args:
            if isinstance(a, Value) and a.name not in self._names:
                raise NNEFXError(f"argument '{a.name}' of '{op}' belongs to another builder")
        call = f"op({op!r}, ...)#{len(self._statements) + 1}"
        self._statements.append(_Statement(lvalue, op, tuple(args), dict(attribs), dtype, call))
        return lvalue

    def __getattr__(self, op: str) -> Any:
        """``b.conv(x, w, ...)`` is ``b.op("conv", x, w, ...)`` for registered operations."""
        if op.startswith("_"):
            raise AttributeError(op)
        from ..ops import registry

        if registry.find(op) is None:
            raise AttributeError(f"GraphBuilder has no method and the registry no operation '{op}'")
        return lambda *args, **kw: self.op(op, *args, **kw)

    def output(self, value: Value, name: str | None = None) -> Value:
        """Declare ``value`` a graph output, optionally renaming it to ``name``."""
        if name is not None and name != value.name:
            if value.kind != "tensor" or value in self._outputs:
                # Inputs, variables and constants keep their names; the output is a copy.
                copied = self.op("copy", value, name=name)
                self._outputs.append(copied)
                return copied
            if not _is_ident(name) or name in self._names:
                raise NNEFXError(f"output name '{name}' is not a free NNEF identifier")
            self._names.discard(value.name)
            self._names.add(name)
            value.name = name
        if value in self._outputs:
            raise NNEFXError(f"'{value.name}' is already an output")
        self._outputs.append(value)
        return value

    def quantize(self, value: Value, op_name: str, **params: Any) -> None:
        """Add a ``graph.quant`` entry for ``value`` (e.g. ``"zero_point_linear_quantize"``)."""
        self._quant[value.name] = (value, op_name, params)

    # -- output ---------------------------------------------------------------------------

    def _lines(self) -> list[tuple[str, str]]:
        lines: list[tuple[str, str]] = []
        for st in self._statements:
            where = f"GraphBuilder {st.call}"
            lv = st.lvalue
            if isinstance(lv, Value):
                left = lv.name
            elif isinstance(lv, list):
                left = "[" + ", ".join(v.name for v in lv) + "]"
            else:
                left = "(" + ", ".join(v.name for v in lv) + ")"
            args = [_literal(a, where) for a in st.args]
            args += [f"{k} = {_literal(v, where)}" for k, v in st.attribs.items()]
            generic = f"<{st.generic}>" if st.generic else ""
            lines.append((f"    {left} = {st.op}{generic}({', '.join(args)});", st.call))
        return lines

    def text(self) -> str:
        """The NNEF document (final dialect) this builder describes."""
        if not self._outputs:
            raise NNEFXError(f"graph '{self.name}' has no outputs; call output(...)")
        if not self._inputs:
            # The NNEF grammar requires a non-empty input list.
            raise NNEFXError(f"graph '{self.name}' has no inputs; NNEF graphs need at least one external")
        head = [
            "version 1.0;",
            "",
            f"graph {self.name}( {', '.join(v.name for v in self._inputs)} ) -> "
            f"( {', '.join(v.name for v in self._outputs)} )",
            "{",
        ]
        return "\n".join(head + [line for line, _ in self._lines()] + ["}", ""])

    def quant_text(self) -> str:
        """The ``graph.quant`` document ('' when nothing is quantized)."""
        lines = []
        for value, op_name, params in self._quant.values():
            args = ", ".join(f"{k} = {_literal(v, 'quantize')}" for k, v in params.items())
            lines.append(f'"{value.name}": {op_name}({args});')
        return "\n".join(lines) + ("\n" if lines else "")

    def build(self, **compile_options: Any) -> Model:
        """Compile the document through the NNEF front-end and attach variable data."""
        from ..semantics.frontend import compile_document

        text = self.text()
        quant = self.quant_text() or None
        file = f"<GraphBuilder {self.name}>"
        try:
            graph = compile_document(text, file=file, quant=quant, **compile_options)
        except NNEFXError as exc:
            raise self._explain(exc, text) from None
        by_label = {st.attribs["label"]: st.data for st in self._statements if st.op == "variable"}
        for op, tensor in graph.variables():
            label = op.attribs.get("label")
            if label in by_label:
                tensor.data = by_label[label]
        return Model(graph, format="memory", source=None, extras={"nnef_text": text, "nnef_quant": quant})

    def _explain(self, exc: NNEFXError, text: str) -> NNEFXError:
        loc = exc.location
        if loc is None or loc.line is None:
            return exc
        source_lines = text.splitlines()
        offset = 4  # version, blank, graph header, "{"
        index = loc.line - 1 - offset
        calls = [call for _, call in self._lines()]
        if 0 <= index < len(calls):
            snippet = source_lines[loc.line - 1].strip()
            return NNEFXError(f"{exc.message} (from GraphBuilder {calls[index]}: `{snippet}`)",
                              Location(loc.file, loc.line, loc.column, loc.field))
        return exc
