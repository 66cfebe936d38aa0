"""Recursive-descent parser for NNEF documents in both dialects.

* ``provisional`` — NNEF 1.0 provisional (NNEF 1.0 provisional §3.1–3.2): ``version 1.0`` without ``;``,
  optional ``;`` after assignments, ``extent``, untyped ``tensor``, ``[e for i in a if c]``;
  fragment bodies may use operator expressions, the graph body is flat.
* ``final`` — NNEF 1.0.5: ``version 1.0;``, ``extension`` lines, mandatory ``;``,
  ``integer``, ``tensor<T>``, generics, ``[for i in a if c yield e]``; fragments need
  ``KHR_enable_fragment_definitions`` and operator expressions
  ``KHR_enable_operator_expressions`` (both in the graph and in fragment bodies).

The dialect is detected from the header (``;`` after the version number means final) unless
forced.  Nesting deeper than :data:`MAX_DEPTH` is an error with a location, never a
``RecursionError``: every expression node records its depth as it is built.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ..diagnostics import Location, NNEFXError
from ..semantics.types import EMPTY, GENERIC, ArrayT, Prim, TensorT, TupleT, Type  # noqa: F401
from . import ast
from .lexer import EOF, NAME, NUMBER, OP, STRING, Token, tokenize

PROVISIONAL, FINAL = "provisional", "final"
DIALECTS = (PROVISIONAL, FINAL)

#: Deepest allowed nesting of expressions, types and lvalues.
MAX_DEPTH = 500

KEYWORDS = {
    PROVISIONAL: frozenset("graph fragment tensor extent scalar logical string shape_of length_of "
                           "range_of for in if else true false version".split()),
    FINAL: frozenset("version extension graph fragment tensor integer scalar logical string shape_of "
                     "length_of range_of for in yield if else true false".split()),
}

EXT_FRAGMENTS = "KHR_enable_fragment_definitions"
EXT_OPERATORS = "KHR_enable_operator_expressions"
#: extensions named ``tract_*`` follow tract's grammar and switch the document to its dialect
TRACT_PREFIX = "tract_"

_BINARY_PRECEDENCE = {
    "in": 1, "&&": 2, "||": 2,
    "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "^": 6,
}


@contextmanager
def deep_recursion(limit: int = 20000) -> Iterator[None]:
    """Raise Python's recursion limit while walking trees bounded by :data:`MAX_DEPTH`."""
    old = sys.getrecursionlimit()
    if old < limit:
        sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        if old < limit:
            sys.setrecursionlimit(old)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large trees.

    WHY: parsing/checking a 100k-operation document allocates millions of small objects
    that all stay alive; each generational collection rescans them for nothing, which
    measured as about half of the front-end time.  Nestable: re-enables only if it was on.
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def detect_dialect(text: str | list[Token]) -> str:
    """``final`` when the version statement ends with ``;`` or ``extension`` follows, else
    ``provisional``.  Documents that do not start with a version are reported as final."""
    if isinstance(text, str):
        try:
            toks = tokenize(text)
        except NNEFXError:
            toks = []
    else:
        toks = text
    if len(toks) >= 3 and toks[0].kind == NAME and toks[0].value == "version":
        nxt = toks[2]
        if nxt.kind == OP and nxt.value == ";":
            return FINAL
        if nxt.kind == NAME and nxt.value == "extension":
            return FINAL
        return PROVISIONAL
    return FINAL


class _Depth:
    """``with parser.nested(tok):`` — counts nesting, errors past :data:`MAX_DEPTH`."""

    __slots__ = ("parser", "tok")

    def __init__(self, parser: Parser, tok: Token | None):
        self.parser = parser
        self.tok = tok

    def __enter__(self) -> None:
        p = self.parser
        p.depth += 1
        if p.depth > MAX_DEPTH:
            p.depth = 0
            raise p.error(f"nesting too deep (more than {MAX_DEPTH} levels)", self.tok)

    def __exit__(self, *exc: object) -> None:
        if self.parser.depth > 0:
            self.parser.depth -= 1


class Parser:
    def __init__(self, text: str | list[Token], file: str | None = None, dialect: str = FINAL):
        if dialect not in DIALECTS:
            raise NNEFXError(f"unknown NNEF dialect '{dialect}' (expected 'provisional' or 'final')")
        self.file = file
        self.dialect = dialect
        self.keywords = KEYWORDS[dialect]
        self.tokens = tokenize(text, file) if isinstance(text, str) else text
        self.pos = 0
        #: the current token, ``tokens[pos]``: a plain attribute kept in step with ``pos``
        #: (read a few times per token; a property call each time was a fifth of parsing)
        self.tok: Token = self.tokens[0] if self.tokens else None  # type: ignore[assignment]
        self.depth = 0
        #: whether operator expressions are allowed where we are
        self.compositional = True
        self.flat_reason = ""
        self.extensions: set[str] = set()
        #: whether the document is in tract's dialect (a ``tract_*`` extension line)
        self.tract = False

    # --- token helpers ------------------------------------------------------------------

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def loc(self, tok: Token | None = None) -> Location:
        t = tok or self.tok
        return Location(self.file, t.line, t.column)

    def end(self) -> tuple[int, int]:
        prev = self.tokens[self.pos - 1] if self.pos > 0 else self.tok
        return (prev.end_line, prev.end_column)

    def error(self, msg: str, tok: Token | None = None) -> NNEFXError:
        return NNEFXError(msg, self.loc(tok))

    def advance(self) -> Token:
        t = self.tok
        if t.kind != EOF:
            self.pos += 1
            self.tok = self.tokens[self.pos]
        return t

    def is_op(self, value: str, tok: Token | None = None) -> bool:
        t = tok or self.tok
        return t.kind == OP and t.value == value

    def is_kw(self, value: str, tok: Token | None = None) -> bool:
        t = tok or self.tok
        return t.kind == NAME and t.value == value and value in self.keywords

    def expect_op(self, value: str, context: str = "") -> Token:
        if not self.is_op(value):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{value}'{where}, found {self.tok.describe()}")
        return self.advance()

    def expect_kw(self, value: str, context: str = "") -> Token:
        if not self.is_kw(value):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{value}'{where}, found {self.tok.describe()}")
        return self.advance()

    def expect_identifier(self, what: str = "an identifier") -> Token:
        t = self.tok
        if t.kind != NAME:
            raise self.error(f"expected {what}, found {t.describe()}")
        if t.value in self.keywords:
            raise self.error(f"expected {what}, found keyword '{t.value}' (keywords cannot be identifiers)")
        return self.advance()

    def nested(self, tok: Token | None = None) -> _Depth:
        return _Depth(self, tok)

    def _node_depth(self, node: ast.Node, *children: ast.Node | None) -> ast.Node:
        depth = 0
        for c in children:  # 1 + the deepest child (a loop: this runs for every compound node)
            if c is not None:
                d = getattr(c, "depth", 1)
                if d > depth:
                    depth = d
        depth += 1
        if depth > MAX_DEPTH:
            raise NNEFXError(f"expression nested too deeply (more than {MAX_DEPTH} levels)", node.loc)
        node.depth = depth  # type: ignore[attr-defined]
        return node

    # --- document -----------------------------------------------------------------------

    def parse_document(self) -> ast.Document:
        start = self.tok
        version = self.parse_version()
        doc = ast.Document(loc=self.loc(start), dialect=self.dialect, version=version)
        if self.dialect == FINAL:
            while self.is_kw("extension"):
                doc.extensions.append(self.parse_extension())
        self.extensions = set(doc.extension_names())
        self.tract = doc.tract
        if doc.tract:
            # tract reads fragment definitions and operator expressions without the KHR
            # extensions (nnef/src/ast/parse.rs), and its exporters rely on it
            self.extensions |= {EXT_FRAGMENTS, EXT_OPERATORS}
        while self.tok.kind == NAME and self.tok.value == "fragment":
            if self.dialect == FINAL and EXT_FRAGMENTS not in self.extensions:
                raise self.error(f"fragment definitions need 'extension {EXT_FRAGMENTS};' "
                                 f"after the version statement")
            self.compositional = self.dialect == PROVISIONAL or EXT_OPERATORS in self.extensions
            self.flat_reason = f"enable them with 'extension {EXT_OPERATORS};'"
            doc.fragments.append(self.parse_fragment(require_body=self.dialect == PROVISIONAL))
        if not self.is_kw("graph"):
            raise self.error(f"expected 'graph' (or 'fragment'), found {self.tok.describe()}")
        if self.dialect == PROVISIONAL:
            self.compositional = False
            self.flat_reason = "the graph body uses the flat syntax (NNEF 1.0 provisional §3.2.4)"
        else:
            self.compositional = EXT_OPERATORS in self.extensions
            self.flat_reason = f"enable them with 'extension {EXT_OPERATORS};'"
        doc.graph = self.parse_graph()
        if self.tok.kind != EOF:
            raise self.error(f"expected end of document after the graph definition, found {self.tok.describe()}")
        doc.end = self.end()
        return doc

    def parse_version(self) -> tuple[int, int]:
        if not (self.tok.kind == NAME and self.tok.value == "version"):
            raise self.error(f"expected 'version' at the start of the document, found {self.tok.describe()}")
        self.advance()
        t = self.tok
        if t.kind != NUMBER:
            raise self.error(f"expected a version number such as 1.0, found {t.describe()}")
        parts = t.value.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise self.error(f"version must be written MAJOR.MINOR (e.g. 1.0), found '{t.value}'")
        major, minor = int(parts[0]), int(parts[1])
        if major != 1:
            raise self.error(f"unsupported NNEF version {t.value} (nnefx reads version 1.x)")
        self.advance()
        if self.dialect == FINAL:
            self.expect_op(";", "after the version statement")
        elif self.is_op(";"):
            self.advance()
        return (major, minor)

    def parse_extension(self) -> ast.Extension:
        start = self.advance()
        first = self.expect_identifier("an extension name")
        names = [first.value]
        if first.value.startswith(TRACT_PREFIX):
            # tract's extension grammar: ``extension NAME <anything but ';'>;``
            parts = []
            while not self.is_op(";"):
                if self.tok.kind == EOF:
                    raise self.error(f"expected ';' to end 'extension {first.value}'")
                parts.append(f"'{self.tok.value}'" if self.tok.kind == STRING else self.tok.value)
                self.advance()
            self.advance()
            return ast.Extension(loc=self.loc(start), end=self.end(), names=names, text=" ".join(parts))
        while not self.is_op(";"):
            if self.is_op(","):
                self.advance()
            if self.tok.kind != NAME:
                raise self.error(f"expected an extension name or ';', found {self.tok.describe()}")
            names.append(self.expect_identifier("an extension name").value)
        self.advance()
        return ast.Extension(loc=self.loc(start), end=self.end(), names=names)

    def parse_library(self) -> list[ast.Fragment]:
        """A sequence of fragment declarations/definitions (the standard library)."""
        frags = []
        self.compositional = True
        while self.tok.kind != EOF:
            frags.append(self.parse_fragment(require_body=False))
        return frags

    # --- fragments ----------------------------------------------------------------------

    def parse_fragment(self, require_body: bool) -> ast.Fragment:
        start = self.advance()  # 'fragment'
        name = self.expect_identifier("a fragment name").value
        generic, generic_default = False, None
        if self.is_op("<"):
            if self.dialect == PROVISIONAL:
                raise self.error("generic fragments ('<?>') exist only in the final dialect")
            self.advance()
            self.expect_op("?", "in generic declaration")
            generic = True
            if self.is_op("="):
                self.advance()
                generic_default = self.parse_type_name(allow_generic=False)
            self.expect_op(">", "to close the generic declaration")
        self.expect_op("(", "to open the parameter list")
        # tract's grammar allows an empty parameter list (``tract_core_properties()``)
        params = [] if self.tract and self.is_op(")") else [self.parse_param()]
        while params and self.is_op(","):
            self.advance()
            params.append(self.parse_param())
        self.expect_op(")", "to close the parameter list")
        self.expect_op("->", "before the result list")
        self.expect_op("(", "to open the result list")
        results = [self.parse_result()]
        while self.is_op(","):
            self.advance()
            results.append(self.parse_result())
        self.expect_op(")", "to close the result list")
        body = None
        if self.is_op("{"):
            body = self.parse_body()
        elif self.dialect == FINAL and self.is_op(";"):
            self.advance()
        elif require_body:
            raise self.error(f"expected '{{' to begin the body of fragment '{name}', found {self.tok.describe()}")
        else:
            raise self.error(f"expected '{{' or ';' after the declaration of fragment '{name}', "
                             f"found {self.tok.describe()}")
        return ast.Fragment(loc=self.loc(start), end=self.end(), name=name, generic=generic,
                            generic_default=generic_default, params=params, results=results, body=body)

    def parse_param(self) -> ast.Param:
        t = self.expect_identifier("a parameter name")
        self.expect_op(":", f"after parameter '{t.value}'")
        typ = self.parse_type()
        default = None
        if self.is_op("="):
            self.advance()
            default = self.parse_literal_expr()
        return ast.Param(loc=self.loc(t), end=self.end(), name=t.value, type=typ, default=default)

    def parse_result(self) -> ast.Result:
        t = self.expect_identifier("a result name")
        self.expect_op(":", f"after result '{t.value}'")
        typ = self.parse_type()
        return ast.Result(loc=self.loc(t), end=self.end(), name=t.value, type=typ)

    def parse_type_name(self, allow_generic: bool = True) -> str:
        t = self.tok
        names = ("integer", "scalar", "logical", "string") if self.dialect == FINAL else \
            ("extent", "scalar", "logical", "string")
        if t.kind == NAME and t.value in names:
            self.advance()
            return "integer" if t.value == "extent" else t.value
        if allow_generic and self.is_op("?") and self.dialect == FINAL:
            self.advance()
            return GENERIC
        raise self.error(f"expected a type name ({', '.join(names)}), found {t.describe()}")

    def parse_type(self) -> ast.TypeNode:
        start = self.tok
        with self.nested(start):
            typ: Type
            if self.is_op("("):
                self.advance()
                items = [self.parse_type().type]
                while self.is_op(","):
                    self.advance()
                    items.append(self.parse_type().type)
                self.expect_op(")", "to close the tuple type")
                if len(items) < 2:
                    raise self.error("a tuple type needs at least two item types", start)
                typ = TupleT(tuple(items))
            elif start.kind == NAME and start.value == "tensor":
                self.advance()
                if self.dialect == FINAL:
                    if not self.is_op("<"):
                        raise self.error("expected '<' after 'tensor' (final dialect types are written "
                                         "tensor<scalar>, tensor<integer>, tensor<logical>, tensor<?> or tensor<>)")
                    self.advance()
                    dtype = None
                    if not self.is_op(">"):
                        dtype = self.parse_type_name()
                        if dtype == "string":
                            raise self.error("tensors cannot hold strings", start)
                    self.expect_op(">", "to close the tensor type")
                    typ = TensorT(dtype)
                else:
                    typ = TensorT(None, lenient=True)
            else:
                typ = Prim(self.parse_type_name())
            while self.is_op("[") and self.is_op("]", self.peek()):
                self.advance()
                self.advance()
                typ = ArrayT(typ)
            return ast.TypeNode(loc=self.loc(start), end=self.end(), type=typ)

    # --- graph --------------------------------------------------------------------------

    def parse_graph(self) -> ast.GraphDef:
        start = self.advance()  # 'graph'
        name = self.expect_identifier("a graph name").value
        self.expect_op("(", "to open the graph parameter list")
        params = self.parse_identifier_list("a graph input name")
        self.expect_op(")", "to close the graph parameter list")
        self.expect_op("->", "before the graph result list")
        self.expect_op("(", "to open the graph result list")
        results = self.parse_identifier_list("a graph output name")
        self.expect_op(")", "to close the graph result list")
        body = self.parse_body()
        return ast.GraphDef(loc=self.loc(start), end=self.end(), name=name, params=params,
                            results=results, body=body)

    def parse_identifier_list(self, what: str) -> list[ast.Identifier]:
        ids = []
        while True:
            t = self.expect_identifier(what)
            ids.append(ast.Identifier(loc=self.loc(t), end=self.end(), name=t.value))
            if not self.is_op(","):
                return ids
            self.advance()

    def parse_body(self) -> list[ast.Assignment]:
        self.expect_op("{", "to begin the body")
        body = []
        while not self.is_op("}"):
            if self.tok.kind == EOF:
                raise self.error("expected '}' to end the body, found end of input")
            body.append(self.parse_assignment())
        if not body:
            raise self.error("a body needs at least one assignment")
        self.advance()
        return body

    def parse_assignment(self) -> ast.Assignment:
        start = self.tok
        lhs = self.parse_lvalue_tuple()
        self.expect_op("=", "in assignment")
        rhs_start = self.tok
        rhs = self.parse_expr()
        if not self.compositional and not isinstance(rhs, ast.Invocation):
            raise self.error(f"expected an operation invocation on the right-hand side, found {rhs_start.describe()} "
                             f"(flat syntax assigns only invocations; {self.flat_reason})", rhs_start)
        if self.is_op(",") and self.dialect == PROVISIONAL:  # unparenthesised tuple on the right-hand side
            items = [rhs]
            while self.is_op(","):
                self.advance()
                items.append(self.parse_expr())
            rhs = self._node_depth(ast.TupleExpr(loc=self.loc(rhs_start), end=self.end(), items=items,
                                                 parenthesized=False), *items)
        if self.dialect == FINAL:
            self.expect_op(";", "after the assignment")
        elif self.is_op(";"):
            self.advance()
        return ast.Assignment(loc=self.loc(start), end=self.end(), lhs=lhs, rhs=rhs)

    # --- lvalues ------------------------------------------------------------------------

    def parse_lvalue_tuple(self) -> ast.Expr:
        start = self.tok
        first = self.parse_lvalue()
        if not self.is_op(","):
            return first
        items = [first]
        while self.is_op(","):
            self.advance()
            items.append(self.parse_lvalue())
        return self._node_depth(ast.TupleExpr(loc=self.loc(start), end=self.end(), items=items,
                                              parenthesized=False), *items)

    def parse_lvalue(self) -> ast.Expr:
        start = self.tok
        with self.nested(start):
            if self.is_op("["):
                self.advance()
                items = []
                if not self.is_op("]"):
                    items.append(self.parse_lvalue())
                    while self.is_op(","):
                        self.advance()
                        items.append(self.parse_lvalue())
                self.expect_op("]", "to close the array on the left-hand side")
                return self._node_depth(ast.ArrayExpr(loc=self.loc(start), end=self.end(), items=items), *items)
            if self.is_op("("):
                self.advance()
                items = [self.parse_lvalue()]
                while self.is_op(","):
                    self.advance()
                    items.append(self.parse_lvalue())
                self.expect_op(")", "to close the tuple on the left-hand side")
                if len(items) == 1:
                    return items[0]
                return self._node_depth(ast.TupleExpr(loc=self.loc(start), end=self.end(), items=items), *items)
            if start.kind == NAME and start.value not in self.keywords:
                self.advance()
                return ast.Identifier(loc=self.loc(start), end=self.end(), name=start.value)
            raise self.error("expected an identifier, array or tuple on the left-hand side of an "
                             f"assignment, found {start.describe()}")

    # --- literal expressions (defaults, quant arguments) --------------------------------

    def parse_literal_expr(self) -> ast.Expr:
        start = self.tok
        with self.nested(start):
            if self.is_op("["):
                self.advance()
                items = []
                if not self.is_op("]"):
                    items.append(self.parse_literal_expr())
                    while self.is_op(","):
                        self.advance()
                        items.append(self.parse_literal_expr())
                self.expect_op("]", "to close the array")
                return self._node_depth(ast.ArrayExpr(loc=self.loc(start), end=self.end(), items=items), *items)
            if self.is_op("("):
                self.advance()
                items = [self.parse_literal_expr()]
                while self.is_op(","):
                    self.advance()
                    items.append(self.parse_literal_expr())
                self.expect_op(")", "to close the tuple")
                if len(items) == 1:
                    return items[0]
                return self._node_depth(ast.TupleExpr(loc=self.loc(start), end=self.end(), items=items), *items)
            lit = self.parse_literal()
            if lit is None:
                raise self.error(f"expected a literal value, found {start.describe()}")
            return lit

    def parse_literal(self) -> ast.Literal | None:
        """A numeric (optionally negative), string or logical literal, or None."""
        t = self.tok
        if t.kind == OP and t.value == "-" and self.peek().kind == NUMBER:
            self.advance()
            lit = self.parse_literal()
            assert lit is not None
            lit.value = -lit.value
            lit.loc = self.loc(t)
            return lit
        if t.kind == NUMBER:
            self.advance()
            if t.real:
                value: object = float(t.value)
                kind = "scalar"
            else:
                value = int(t.value)
                kind = "integer"
            return ast.Literal(loc=self.loc(t), end=self.end(), value=value, kind=kind)
        if t.kind == STRING:
            self.advance()
            return ast.Literal(loc=self.loc(t), end=self.end(), value=t.value, kind="string")
        if t.kind == NAME and t.value in ("true", "false"):
            self.advance()
            return ast.Literal(loc=self.loc(t), end=self.end(), value=t.value == "true", kind="logical")
        return None

    # --- rvalue expressions -------------------------------------------------------------

    def _flat_error(self, what: str, tok: Token) -> NNEFXError:
        return self.error(f"{what} is an operator expression, not allowed here; {self.flat_reason}", tok)

    def parse_expr(self, no_select: bool = False) -> ast.Expr:
        start = self.tok
        # A number, string or name right before ',', ')' or ']' (most arguments in real
        # documents): exactly the node the precedence chain below returns for it, without
        # descending through it (the nesting check still applies).
        kind = start.kind
        if (kind == NUMBER or kind == STRING or kind == NAME) and self.depth < MAX_DEPTH:
            nxt = self.tokens[self.pos + 1]
            if nxt.kind == OP and (nxt.value == "," or nxt.value == ")" or nxt.value == "]"):
                if kind != NAME:
                    return self.parse_literal()  # type: ignore[return-value]
                # a plain identifier (what parse_primary makes of a name that is neither a
                # keyword nor a logical literal and is not called)
                if start.value not in self.keywords and start.value != "true" and start.value != "false":
                    self.pos += 1
                    self.tok = nxt
                    return ast.Identifier(loc=self.loc(start), end=self.end(), name=start.value)
        # ``with self.nested(start):`` spelled out (no context-manager object per expression)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.depth = 0
            raise self.error(f"nesting too deep (more than {MAX_DEPTH} levels)", start)
        try:
            expr = self.parse_binary(1)
            if not no_select and self.is_kw("if"):
                if not self.compositional:
                    raise self._flat_error("'if ... else'", self.tok)
                self.advance()
                cond = self.parse_binary(1)
                self.expect_kw("else", "in 'x if condition else y'")
                other = self.parse_expr()
                expr = self._node_depth(ast.Select(loc=self.loc(start), end=self.end(), condition=cond,
                                                   then=expr, otherwise=other), expr, cond, other)
            return expr
        finally:
            if self.depth > 0:
                self.depth -= 1

    def _binary_op(self) -> str | None:
        t = self.tok
        if t.kind == OP and t.value in _BINARY_PRECEDENCE:
            return t.value
        if self.dialect == FINAL and t.kind == NAME and t.value == "in":
            return "in"
        return None

    def parse_binary(self, min_prec: int) -> ast.Expr:
        start = self.tok
        left = self.parse_unary()
        while True:
            op = self._binary_op()
            if op is None or _BINARY_PRECEDENCE[op] < min_prec:
                return left
            if not self.compositional:
                raise self._flat_error(f"operator '{op}'", self.tok)
            self.advance()
            right = self.parse_binary(_BINARY_PRECEDENCE[op] + 1)
            left = self._node_depth(ast.Binary(loc=self.loc(start), end=self.end(), op=op, left=left,
                                               right=right), left, right)

    def parse_unary(self) -> ast.Expr:
        t = self.tok
        if t.kind == OP and t.value in ("-", "+", "!"):
            if not self.compositional:
                if t.value == "-" and self.peek().kind == NUMBER:
                    lit = self.parse_literal()
                    assert lit is not None
                    return self.parse_postfix(lit, t)
                raise self._flat_error(f"unary '{t.value}'", t)
            with self.nested(t):
                self.advance()
                operand = self.parse_unary()
                return self._node_depth(ast.Unary(loc=self.loc(t), end=self.end(), op=t.value,
                                                  operand=operand), operand)
        return self.parse_postfix(self.parse_primary(), t)

    def _array_lvalue_ahead(self) -> bool:
        """Whether the ``[`` at the current token opens an array left-hand side (its matching
        ``]`` is followed by ``=``), not a subscript.  Only the provisional dialect needs to
        ask: its ``;`` is optional, so ``x = f(y)`` followed by ``[a, b] = g(x)`` is two
        assignments, and a subscript is never followed by ``=``."""
        depth = 0
        for k in range(self.pos, len(self.tokens)):
            t = self.tokens[k]
            if t.kind == EOF:
                return False
            if t.kind == OP:
                if t.value == "[" or t.value == "(":
                    depth += 1
                elif t.value == "]" or t.value == ")":
                    depth -= 1
                    if depth == 0:
                        nxt = self.tokens[k + 1] if k + 1 < len(self.tokens) else t
                        return nxt.kind == OP and nxt.value == "="
        return False

    def parse_postfix(self, expr: ast.Expr, start: Token) -> ast.Expr:
        while (t := self.tok).kind == OP and t.value == "[":
            bracket = self.tok
            if self.dialect == PROVISIONAL and self._array_lvalue_ahead():
                break  # ';' is optional there: '[a, b] = ...' begins the next assignment
            if not self.compositional:
                raise self._flat_error("a subscript", bracket)
            self.advance()
            begin = stop = None
            is_range = False
            if not self.is_op(":"):
                begin = self.parse_expr()
            if self.is_op(":"):
                is_range = True
                self.advance()
                if not self.is_op("]"):
                    stop = self.parse_expr()
            if begin is None and not is_range:
                raise self.error("expected an index or a range in the subscript", bracket)
            self.expect_op("]", "to close the subscript")
            expr = self._node_depth(ast.Subscript(loc=self.loc(start), end=self.end(), base=expr, begin=begin,
                                                  stop=stop, is_range=is_range), expr, begin, stop)
        return expr

    _BUILTINS = ("shape_of", "length_of", "range_of", "scalar", "logical", "string")

    def parse_primary(self) -> ast.Expr:
        t = self.tok
        lit = self.parse_literal()
        if lit is not None:
            return lit
        if t.kind == NAME:
            cast_name = "integer" if self.dialect == FINAL else "extent"
            if t.value in self._BUILTINS or t.value == cast_name:
                if t.value in self.keywords:
                    if not self.compositional:
                        raise self._flat_error(f"builtin '{t.value}'", t)
                    self.advance()
                    self.expect_op("(", f"after builtin '{t.value}'")
                    arg = self.parse_expr()
                    self.expect_op(")", f"to close builtin '{t.value}'")
                    name = "integer" if t.value == "extent" else t.value
                    return self._node_depth(ast.Builtin(loc=self.loc(t), end=self.end(), name=name, arg=arg), arg)
            if t.value in self.keywords:
                raise self.error(f"expected an expression, found keyword '{t.value}'")
            self.advance()
            generic = None
            if (self.is_op("<") and self.dialect == FINAL and self.is_op(">", self.peek(2))
                    and self.is_op("(", self.peek(3))
                    and (self.peek().kind == NAME and self.peek().value in ("integer", "scalar", "logical", "string")
                         or self.is_op("?", self.peek()))):
                self.advance()
                generic = self.parse_type_name()
                self.advance()  # '>'
            if self.is_op("("):
                return self.parse_invocation(t, generic)
            return ast.Identifier(loc=self.loc(t), end=self.end(), name=t.value)
        if self.is_op("("):
            self.advance()
            first = self.parse_expr()
            if self.is_op(")"):
                self.advance()
                if not self.compositional and not isinstance(first, ast.TupleExpr):
                    raise self._flat_error("a parenthesised expression", t)
                return first
            items = [first]
            while (t2 := self.tok).kind == OP and t2.value == ",":
                self.advance()
                items.append(self.parse_expr())
            self.expect_op(")", "to close the tuple")
            return self._node_depth(ast.TupleExpr(loc=self.loc(t), end=self.end(), items=items), *items)
        if self.is_op("["):
            return self.parse_bracket()
        raise self.error(f"expected an expression, found {t.describe()}")

    def parse_bracket(self) -> ast.Expr:
        t = self.advance()  # '['
        if self.is_op("]"):
            self.advance()
            return ast.ArrayExpr(loc=self.loc(t), end=self.end(), items=[])
        if self.is_kw("for"):
            if self.dialect != FINAL:
                raise self.error("expected '[e for i in a]' comprehension form in the provisional dialect")
            if not self.compositional:
                raise self._flat_error("a comprehension", t)
            self.advance()
            iters = [self.parse_iterator()]
            while self.is_op(","):
                self.advance()
                iters.append(self.parse_iterator())
            cond = None
            if self.is_kw("if"):
                self.advance()
                cond = self.parse_expr(no_select=True)
            self.expect_kw("yield", "in comprehension")
            body = self.parse_expr()
            self.expect_op("]", "to close the comprehension")
            return self._node_depth(ast.Comprehension(loc=self.loc(t), end=self.end(), iterators=iters,
                                                      condition=cond, body=body),
                                    body, cond, *[i.iterable for i in iters])
        first = self.parse_expr()
        if self.is_kw("for"):
            if self.dialect != PROVISIONAL:
                raise self.error("comprehensions are written [for i in a yield e] in the final dialect")
            if not self.compositional:
                raise self._flat_error("a comprehension", t)
            self.advance()
            it = self.parse_iterator()
            cond = None
            if self.is_kw("if"):
                self.advance()
                cond = self.parse_expr(no_select=True)
            self.expect_op("]", "to close the comprehension")
            return self._node_depth(ast.Comprehension(loc=self.loc(t), end=self.end(), iterators=[it],
                                                      condition=cond, body=first), first, cond, it.iterable)
        items = [first]
        while (t2 := self.tok).kind == OP and t2.value == ",":
            self.advance()
            items.append(self.parse_expr())
        self.expect_op("]", "to close the array")
        return self._node_depth(ast.ArrayExpr(loc=self.loc(t), end=self.end(), items=items), *items)

    def parse_iterator(self) -> ast.Iterator:
        t = self.tok
        if self.is_op("("):
            self.advance()
            names = [self.expect_identifier("a loop variable").value]
            while self.is_op(","):
                self.advance()
                names.append(self.expect_identifier("a loop variable").value)
            self.expect_op(")", "to close the loop variables")
        else:
            names = [self.expect_identifier("a loop variable").value]
        self.expect_kw("in", "after the loop variable")
        iterable = self.parse_expr(no_select=True)
        return ast.Iterator(loc=self.loc(t), end=self.end(), names=names, iterable=iterable)

    def parse_invocation(self, name_tok: Token, generic: str | None) -> ast.Invocation:
        self.expect_op("(", f"after '{name_tok.value}'")
        args: list[ast.Argument] = []
        if self.is_op(")"):
            raise self.error(f"invocation of '{name_tok.value}' needs at least one argument")
        while True:
            a = self.tok
            # (token tests spelled out: this loop runs once per argument of every invocation)
            if a.kind == NAME and a.value not in self.keywords and self.is_op("=", self.peek()):
                self.advance()
                self.advance()
                value = self.parse_expr()
                args.append(ast.Argument(loc=self.loc(a), end=self.end(), name=a.value, value=value))
            else:
                value = self.parse_expr()
                args.append(ast.Argument(loc=self.loc(a), end=self.end(), name=None, value=value))
            t = self.tok
            if t.kind == OP and t.value == ",":
                self.advance()
                continue
            self.expect_op(")", f"or ',' in the arguments of '{name_tok.value}'")
            break
        if not self.compositional:
            for arg in args:
                self._refuse_chained(arg.value, name_tok.value)
        return self._node_depth(ast.Invocation(loc=self.loc(name_tok), end=self.end(), name=name_tok.value,
                                               generic=generic, args=args), *[x.value for x in args])

    def _refuse_chained(self, e: ast.Expr, callee: str) -> None:
        """Flat syntax (NNEF spec §2.2 flat grammar; provisional 1.0 §3.2.4: the graph body
        is flat) passes identifiers and literals, not invocations: ``y = f(g(x))`` is a
        chain, valid only where operator expressions are (the official parser accepts it
        anyway; nnefx follows the grammar)."""
        if isinstance(e, ast.Invocation):
            raise NNEFXError(f"the invocation of '{e.name}' is an argument of '{callee}': chained invocations "
                             f"are not flat syntax; assign '{e.name}(...)' to an identifier first "
                             f"({self.flat_reason})", e.loc)
        if isinstance(e, (ast.ArrayExpr, ast.TupleExpr)):
            for item in e.items:
                self._refuse_chained(item, callee)

    # --- graph.quant --------------------------------------------------------------------

    def parse_quant(self) -> ast.QuantDocument:
        start = self.tok
        entries = []
        while self.tok.kind != EOF:
            t = self.tok
            if t.kind != STRING:
                raise self.error(f"expected a quoted tensor name, found {t.describe()}")
            self.advance()
            self.expect_op(":", f"after \"{t.value}\"")
            op = self.expect_identifier("a quantization operation name")
            self.expect_op("(", f"after '{op.value}'")
            args = []
            while not self.is_op(")"):
                a = self.expect_identifier("an argument name")
                self.expect_op("=", f"after argument '{a.value}' (quantization arguments are named)")
                value = self.parse_literal_expr()
                args.append(ast.Argument(loc=self.loc(a), end=self.end(), name=a.value, value=value))
                if not self.is_op(","):
                    break
                self.advance()
            self.expect_op(")", f"to close the arguments of '{op.value}'")
            if self.is_op(";"):
                self.advance()
            entries.append(ast.QuantEntry(loc=self.loc(t), end=self.end(), tensor=t.value, op=op.value, args=args))
        return ast.QuantDocument(loc=self.loc(start), end=self.end(), entries=entries)


def parse_document(text: str, file: str | None = None, dialect: str | None = None) -> ast.Document:
    """Parse a ``graph.nnef`` document (dialect auto-detected unless given)."""
    with paused_gc():
        tokens = tokenize(text, file)
        with deep_recursion():
            return Parser(tokens, file, dialect or detect_dialect(tokens)).parse_document()


def parse_library(text: str, file: str | None = None) -> list[ast.Fragment]:
    """Parse fragment declarations (final dialect), e.g. the registry's standard library."""
    with deep_recursion():
        return Parser(text, file, FINAL).parse_library()


def parse_quant(text: str, file: str | None = None, dialect: str = FINAL) -> ast.QuantDocument:
    """Parse a ``graph.quant`` document; ``;`` after entries is optional (the provisional form)."""
    with deep_recursion():
        return Parser(text, file, dialect).parse_quant()
