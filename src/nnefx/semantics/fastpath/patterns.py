"""The regular expressions of the NNEF fast path: how a flat document is cut up.

WHY a module of its own: the whole speed of the fast path comes from doing the lexing work
at C speed, with a handful of compiled regular expressions instead of the tokenizer and
parser: one cuts the graph body into ``lhs = op(args);`` statements, one splits a
statement's arguments into its *template* and *slots*, one finds the numbers in a template.
They are subtle (no nested repetition, exact identifier and string rules), and they are the
one place that must agree with the NNEF grammar (NNEF 1.0.5 §3.1–3.2); keeping them together,
apart from the code that uses them, makes them reviewable against it.  Both the
per-document driver (:mod:`nnefx.semantics.fastpath`) and the statement-form compiler
(:mod:`nnefx.semantics.fastpath.compiler`) match with them.
"""

from __future__ import annotations

import re

# Whitespace is what the lexer skips: blanks and newlines (``\r`` is normalised away
# first) and ``#`` comments.  Everything the expressions accept is re-validated by the real
# parser the first time a template is seen, so they only need to be no more lenient than
# the grammar about *where statements end* and *what a slot is*.

_B = r"[ \t\n\v\f]"
# A comment always runs to the end of its line (the lookahead stops backtracking into it).
# No nested repetition anywhere (``(?:[ ]+)*`` backtracks exponentially on a failing match).
_WS = r"(?:[ \t\n\v\f]|\#[^\n]*(?![^\n]))*"
_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_END_ID = r"(?![A-Za-z0-9_])"
# Plain string literals: printable ASCII (and tab), no quote of their kind, no backslash.
_STR = r"""'[\t -&(-\[\]-~]*'|"[\t !#-\[\]-~]*\""""

HEADER = re.compile(
    rf"{_WS}version{_END_ID}{_WS}(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?![A-Za-z0-9_.]){_WS}(?P<semi>;)?"
    rf"(?P<exts>(?:{_WS}extension{_END_ID}[^;'\"#]*;)*)"
    rf"{_WS}graph{_END_ID}{_WS}(?P<name>{_ID}){_WS}\((?P<ins>[^;'\"#()]*)\){_WS}->{_WS}"
    rf"\((?P<outs>[^;'\"#()]*)\){_WS}\{{", re.ASCII)
NAME_LIST = re.compile(rf"{_B}*{_ID}{_END_ID}(?:{_B}*,{_B}*{_ID}{_END_ID})*{_B}*\Z", re.ASCII)
EXT_LIST = re.compile(rf"{_B}*{_ID}{_END_ID}(?:{_B}*(?:,{_B}*)?{_ID}{_END_ID})*{_B}*\Z", re.ASCII)
IDS = re.compile(_ID, re.ASCII)

STATEMENT = re.compile(
    rf"{_WS}(?:(?P<one>{_ID}){_WS}|(?P<many>[\[(A-Za-z_][A-Za-z0-9_ \t\n\v\f,\[\]()]*))=(?!=)"
    rf"{_WS}(?P<op>{_ID}){_WS}(?:<{_B}*(?P<gen>{_ID}){_B}*>{_WS})?"
    # the argument list as "unrolled loop" (plain run, then string + plain run, repeated):
    # the same language as (?:[^;'"#]|STR)*, matched twice as fast (no backtracking state
    # per character), still without nested ambiguity
    rf"\((?P<args>[^;'\"#]*(?:(?:{_STR})[^;'\"#]*)*)\){_WS};", re.ASCII)
CLOSE = re.compile(rf"{_WS}\}}{_WS}\Z", re.ASCII)
# After fragment definitions: the graph keyword opening a line, then the same graph header.
GRAPH_LINE = re.compile(rf"^[ \t\v\f]*(?P<graph>graph){_END_ID}", re.ASCII | re.MULTILINE)
GRAPH_HEADER = re.compile(
    rf"graph{_WS}(?P<name>{_ID}){_WS}\((?P<ins>[^;'\"#()]*)\){_WS}->{_WS}\((?P<outs>[^;'\"#()]*)\){_WS}\{{",
    re.ASCII)

# Slots: plain string literals, and identifiers that are not named-argument names, not the
# logical literals and not the tail of a number (``1e5``).
SLOTS = re.compile(
    rf"({_STR}|(?<![A-Za-z0-9_.])(?!(?:true|false){_END_ID}){_ID}{_END_ID}(?!{_B}*=(?!=)))", re.ASCII)

# Numeric literals in a template (identifiers and strings already cut out as ``\x00``).
NUMBERS = re.compile(r"(?<![A-Za-z0-9_.])(-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)(?![A-Za-z0-9_.])", re.ASCII)


def strip_comments(s: str) -> str:
    return re.sub(r"#[^\n]*", " ", s)
