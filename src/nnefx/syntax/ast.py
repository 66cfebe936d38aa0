"""NNEF abstract syntax tree.  Every node carries ``loc`` (where it starts) and ``end``
(line, column just past it) so every diagnostic can point into the source.

The same node classes serve both dialects; the parser normalises provisional spellings
(``extent`` → ``integer``, ``[e for i in a if c]`` → a :class:`Comprehension` with the same
fields as the final ``[for i in a if c yield e]``) so later passes see one language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Location
from ..semantics.types import Type


@dataclass(kw_only=True)
class Node:
    loc: Location
    end: tuple[int, int] | None = None


# --- expressions -------------------------------------------------------------------------

@dataclass(kw_only=True)
class Expr(Node):
    pass


@dataclass(kw_only=True)
class Literal(Expr):
    value: Any  # int, float, bool or str
    #: "integer", "scalar", "logical" or "string"
    kind: str


@dataclass(kw_only=True)
class Identifier(Expr):
    name: str


@dataclass(kw_only=True)
class ArrayExpr(Expr):
    items: list[Expr]


@dataclass(kw_only=True)
class TupleExpr(Expr):
    items: list[Expr]
    parenthesized: bool = True


@dataclass(kw_only=True)
class Unary(Expr):
    op: str
    operand: Expr


@dataclass(kw_only=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(kw_only=True)
class Select(Expr):
    condition: Expr
    then: Expr
    otherwise: Expr


@dataclass(kw_only=True)
class Iterator(Node):
    #: the loop variable, or a tuple of names (``for (a, b) in pairs``)
    names: list[str]
    iterable: Expr


@dataclass(kw_only=True)
class Comprehension(Expr):
    iterators: list[Iterator]
    condition: Expr | None
    body: Expr


@dataclass(kw_only=True)
class Subscript(Expr):
    base: Expr
    #: single index (``is_range`` False) or range begin (None = open)
    begin: Expr | None
    stop: Expr | None = None
    is_range: bool = False


@dataclass(kw_only=True)
class Builtin(Expr):
    #: shape_of, length_of, range_of, integer, scalar, logical, string
    name: str
    arg: Expr


@dataclass(kw_only=True)
class Argument(Node):
    name: str | None
    value: Expr


@dataclass(kw_only=True)
class Invocation(Expr):
    name: str
    #: explicit generic data type ``f<T>(...)``; "?" forwards the caller's binding
    generic: str | None
    args: list[Argument]


# --- declarations -------------------------------------------------------------------------

@dataclass(kw_only=True)
class TypeNode(Node):
    type: Type


@dataclass(kw_only=True)
class Param(Node):
    name: str
    type: TypeNode
    default: Expr | None = None


@dataclass(kw_only=True)
class Result(Node):
    name: str
    type: TypeNode


@dataclass(kw_only=True)
class Assignment(Node):
    lhs: Expr
    rhs: Expr


@dataclass(kw_only=True)
class Fragment(Node):
    name: str
    generic: bool
    generic_default: str | None
    params: list[Param]
    results: list[Result]
    #: None for a body-less declaration (a primitive)
    body: list[Assignment] | None
    #: where the declaration came from ("document", "stdlib")
    origin: str = "document"
    #: registry domain of a standard fragment ("nnef", "cvm", "ir", "nnefx")
    domain: str = "nnef"
    #: provisional views of standard operations: the operation emitted, parameter renames
    #: (provisional name -> final name) and attributes fixed by the alias
    emit_as: str | None = None
    param_map: dict[str, str] = field(default_factory=dict)
    fixed_attribs: dict[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


@dataclass(kw_only=True)
class GraphDef(Node):
    name: str
    params: list[Identifier]
    results: list[Identifier]
    body: list[Assignment]


@dataclass(kw_only=True)
class Extension(Node):
    names: list[str]
    #: tract's form ``extension NAME TEXT;`` (``tract_registry tract_core``, ``tract_symbol B``,
    #: ``tract_assert S >= 1``): the text after the name, as tract reads it (nnef/src/ast/parse.rs)
    text: str | None = None


@dataclass(kw_only=True)
class Document(Node):
    dialect: str  # "provisional" | "final"
    version: tuple[int, int]
    extensions: list[Extension] = field(default_factory=list)
    fragments: list[Fragment] = field(default_factory=list)
    graph: GraphDef | None = None

    def extension_names(self) -> list[str]:
        return [n for e in self.extensions for n in e.names]

    @property
    def tract(self) -> bool:
        """Whether the document is in tract's dialect (declares a ``tract_*`` extension)."""
        return any(e.text is not None for e in self.extensions)


@dataclass(kw_only=True)
class QuantEntry(Node):
    tensor: str
    op: str
    args: list[Argument]


@dataclass(kw_only=True)
class QuantDocument(Node):
    entries: list[QuantEntry]


def iter_children(node: Node) -> list[Node]:
    """Direct child nodes, for generic walks (tests check every node has a location)."""
    out: list[Node] = []
    for value in node.__dict__.values():
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, Node))
    return out
