"""RE2 patterns (ONNX RegexFullMatch): checked against the subset on which RE2 and Python's
``re`` agree, then run by RE2 itself (google-re2), whose matching time is linear in the text —
``re`` backtracks, in time exponential in the text's length on patterns such as ``(a+)+$``.

ONNX RegexFullMatch-20 names RE2's syntax (github.com/google/re2/wiki/Syntax).  RE2 is a
subset of what Python's ``re`` accepts, with a few meanings that differ; a pattern is
translated token by token so that it means what RE2 means, and every construct RE2 refuses
(back-references, look-around, atomic groups, possessive quantifiers, conditionals,
repetition counts above 1000) or whose RE2 meaning ``re`` cannot say (``\\p{..}`` Unicode
classes, ``\\C``, ``\\Q..\\E``, flags in the middle of a group) is refused with the pattern
and the position, never run with Python's meaning.

What the translation changes: ``\\d \\w \\s`` and their negations are RE2's ASCII classes
(``re`` would take Unicode digits and spaces, and ``\\v`` as space); ``\\b \\B`` are ASCII word
boundaries; ``$`` outside multi-line mode is the end of the text only (``re``'s also matches
before a final newline); ``\\z`` is ``re``'s ``\\Z``; ``\\x{HHHH}`` a code point;
``[[:alpha:]]``-style classes their ASCII sets; ``(?<name>`` is ``(?P<name>``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ...diagnostics import NNEFXError

MAX_PATTERN = 1 << 16
#: Without the google-re2 package, run the translation with Python's backtracking ``re``
#: instead of refusing (time unbounded on a hostile pattern or text: for trusted models only).
ALLOW_BACKTRACKING = False
MAX_REPEAT = 1000  # RE2's limit on a repetition count

_CLASSES = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_SIMPLE_ESCAPES = set("afnrtv")


def _error(pattern: str, pos: int, why: str) -> NNEFXError:
    return NNEFXError(f"operation 'onnx_regex_full_match': pattern {pattern!r} at offset {pos}: {why}")


@lru_cache(maxsize=256)
def compile_re2(pattern: str) -> Any:
    """``pattern`` (RE2 syntax) compiled by RE2 itself (the google-re2 package: linear-time
    matching), or a located refusal.  The translation below is checked first, so what nnefx
    refuses is the same with or without RE2 installed, and is what runs, with ``re``'s
    backtracking, only where :data:`ALLOW_BACKTRACKING` says so."""
    if not isinstance(pattern, str):
        raise NNEFXError("operation 'onnx_regex_full_match': the pattern must be a string")
    if len(pattern) > MAX_PATTERN:
        raise NNEFXError(f"operation 'onnx_regex_full_match': the pattern is longer than {MAX_PATTERN} characters")
    text, flags = _Translator(pattern).run()
    try:
        translated = re.compile(text, flags)
    except (re.error, RecursionError, OverflowError) as exc:
        raise _error(pattern, getattr(exc, "pos", 0) or 0, f"not a valid regular expression ({exc})") from None
    try:
        import re2
    except ImportError:
        if ALLOW_BACKTRACKING:
            return translated
        raise NNEFXError("operation 'onnx_regex_full_match' needs RE2 (google-re2: pip install 'nnefx[onnx]'): "
                         "Python's re backtracks, and a hostile pattern or text could make it run for ever, "
                         "where RE2 matches in linear time") from None
    options = re2.Options()
    options.log_errors = False  # its parse errors come back as exceptions, not lines on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise _error(pattern, 0, f"RE2 refuses it ({exc})") from None


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.multiline = False
        self.quantifiable = False  # whether the last token may take a quantifier

    def fail(self, why: str, pos: int | None = None) -> NNEFXError:
        return _error(self.p, self.i if pos is None else pos, why)

    def run(self) -> tuple[str, int]:
        p = self.p
        flags = 0
        while m := re.match(r"\(\?([imsU]+)\)", p[self.i:]):  # leading flags apply to the whole pattern
            if "U" in m.group(1):
                raise self.fail("the ungreedy flag (?U) is not supported")
            for f in m.group(1):
                flags |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}[f]
            self.multiline = self.multiline or "m" in m.group(1)
            self.i += m.end()
        while self.i < len(p):
            c = p[self.i]
            if c == "\\":
                self.escape()
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
            elif c in "*+?":
                self.quantifier(c)
            elif c == "{" and re.match(r"\{\d+(,\d*)?\}", p[self.i:]):
                m2 = re.match(r"\{(\d+)(,(\d*))?\}", p[self.i:])
                counts = [int(m2.group(1))] + ([int(m2.group(3))] if m2.group(3) else [])
                if any(n > MAX_REPEAT for n in counts):
                    raise self.fail(f"repetition counts above {MAX_REPEAT} are refused by RE2")
                if len(counts) == 2 and counts[1] < counts[0]:
                    raise self.fail("bad repetition range")
                self.quantifier(m2.group(0))
            elif c == "$":
                self.out.append("$" if self.multiline else r"\Z")
                self.i += 1
                self.quantifiable = False
            else:
                self.out.append(re.escape(c) if c in "{}#&~- \t\n\r\v\f" else c)
                self.i += 1
                self.quantifiable = c not in "|^"
        return "".join(self.out), flags

    def quantifier(self, q: str) -> None:
        if not self.quantifiable:
            raise self.fail(f"missing argument to repetition operator {q!r}")
        self.out.append(q)
        self.i += len(q)
        if self.i < len(self.p) and self.p[self.i] == "?":  # lazy form
            self.out.append("?")
            self.i += 1
        if self.i < len(self.p) and self.p[self.i] in "*+?":
            raise self.fail("bad repetition operator (a repetition of a repetition, or a possessive one)")
        self.quantifiable = False

    def group(self) -> None:
        p, i = self.p, self.i
        if p.startswith("(?", i):
            rest = p[i + 2:]
            if rest.startswith("P<") or rest.startswith("<") and not rest.startswith(("<=", "<!")):
                start = i + (4 if rest.startswith("P<") else 3)
                m = re.match(r"[A-Za-z_][A-Za-z0-9_]*>", p[start:])
                if not m:
                    raise self.fail("bad named capture group")
                self.out.append("(?P<" + m.group(0))
                self.i = start + m.end()
                self.quantifiable = False
                return
            m = re.match(r"([imsU]*)(-[imsU]*)?:", rest)
            if m:
                if "U" in m.group(0):
                    raise self.fail("the ungreedy flag (?U) is not supported")
                if "m" in m.group(0):
                    raise self.fail("multi-line mode on part of the pattern is not supported (give (?m) at its start)")
                self.out.append("(?" + m.group(0))
                self.i += 2 + m.end()
                self.quantifiable = False
                return
            if re.match(r"[imsU-]+\)", rest):
                raise self.fail("flags in the middle of a pattern are not supported (write (?flags:...))")
            raise self.fail("this group syntax (look-around, back-reference, atomic group, conditional or comment) "
                            "is not supported by RE2")
        self.out.append("(")
        self.i += 1
        self.quantifiable = False

    def _escape_item(self, in_class: bool) -> str:
        """The translation of the escape at ``self.i`` (advancing past it)."""
        p = self.p
        if self.i + 1 >= len(p):
            raise self.fail("trailing backslash")
        c = p[self.i + 1]
        self.i += 2
        if c in _CLASSES or c.lower() in _CLASSES:
            body = _CLASSES[c.lower()]
            if c.islower():
                return body if in_class else f"[{body}]"
            if in_class:
                raise self.fail(f"\\{c} inside a character class is not supported", self.i - 2)
            return f"[^{body}]"
        if c in "bB":
            if in_class:
                raise self.fail(f"\\{c} inside a character class", self.i - 2)
            return f"(?a:\\{c})"
        if c == "A":
            return "\\A"
        if c == "z":
            return "\\Z"
        if c == "x":
            m = re.match(r"\{([0-9A-Fa-f]{1,6})\}|([0-9A-Fa-f]{2})", p[self.i:])
            if not m:
                raise self.fail("bad \\x escape", self.i - 2)
            self.i += m.end()
            code = int(m.group(1) or m.group(2), 16)
            if code > 0x10FFFF:
                raise self.fail("code point above U+10FFFF", self.i - 2)
            return f"\\U{code:08x}"
        if c in _SIMPLE_ESCAPES:
            return "\\" + c
        if c.isdigit():
            raise self.fail("back-references and octal escapes are not supported", self.i - 2)
        if c.isalnum():  # \p{..}, \C, \Q, \Z, \G, ... : RE2 refuses or means what re cannot say
            raise self.fail(f"the escape \\{c} is not supported", self.i - 2)
        return re.escape(c)

    def escape(self) -> None:
        self.out.append(self._escape_item(False))
        self.quantifiable = True

    def char_class(self) -> None:
        p = self.p
        start = self.i
        self.i += 1
        parts = ["["]
        if self.i < len(p) and p[self.i] == "^":
            parts.append("^")
            self.i += 1
        first = True
        while True:
            if self.i >= len(p):
                raise self.fail("missing closing ]", start)
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and p.startswith("[:", self.i):
                m = re.match(r"\[:(\^?)([a-z]+):\]", p[self.i:])
                if not m or m.group(2) not in _POSIX:
                    raise self.fail("bad POSIX character class")
                if m.group(1):
                    raise self.fail("negated POSIX classes are not supported")
                parts.append(_POSIX[m.group(2)])
                self.i += m.end()
            elif c == "\\":
                parts.append(self._escape_item(True))
            elif c in "[&~|":  # literal in RE2, set syntax or a warning in re
                parts.append("\\" + c)
                self.i += 1
            else:
                parts.append(c)
                self.i += 1
        parts.append("]")
        self.out.append("".join(parts))
        self.quantifiable = True
