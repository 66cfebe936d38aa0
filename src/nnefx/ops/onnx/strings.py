"""ONNX's string operators as operations of the ``onnx`` domain: StringConcat, StringSplit,
StringNormalizer and RegexFullMatch (NNEF has no tensors of text).

String tensors are the data model's ``string`` data type (:data:`nnefx.graph.STRING`): numpy
object arrays of Python ``str``.  The formal kernels visit item by item, as the operator
documents define them; the fast ones let numpy broadcast or map one function over the items.
Where a result's extent depends on the text (the substrings of StringSplit, the words
StringNormalizer keeps) the shape rule leaves it unknown and the kernel's result decides.

Specifications: ONNX operator docs: StringConcat-20, StringSplit-20, StringNormalizer-10,
RegexFullMatch-20 (RE2 syntax: :mod:`nnefx.ops.onnx.re2`).
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, op_error
from ..registry import define
from ._common import numpy_broadcast
from .re2 import compile_re2

FAMILY = "onnx_strings"


def _strings(op: str, x, what: str = "input") -> np.ndarray:
    """``x`` as an object array of ``str`` (what every kernel here computes on)."""
    a = np.asarray(x, dtype=object)
    for v in a.flat:
        if not isinstance(v, str):
            raise op_error(op, f"the {what} must hold strings, found {type(v).__name__}")
    return a


def _object_array(items: list, shape: tuple) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


# --- StringConcat ---------------------------------------------------------------------------------

onnx_string_concat = define("onnx_string_concat", FAMILY, """
fragment onnx_string_concat<?>( x: tensor<?>, y: tensor<?> ) -> ( z: tensor<?> );
""", domain="onnx", generic=True, doc="ONNX StringConcat: each pair of strings joined, numpy broadcasting.")


@onnx_string_concat.shape
def _concat_shape(x, y, dtype=None):
    return numpy_broadcast("onnx_string_concat", x, y)


@onnx_string_concat.formal
def _concat_formal(x, y, dtype=None):
    x, y = _strings("onnx_string_concat", x, "input x"), _strings("onnx_string_concat", y, "input y")
    shape = numpy_broadcast("onnx_string_concat", x.shape, y.shape)
    xb, yb = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
    return _object_array([xb[i] + yb[i] for i in np.ndindex(*shape)], shape)


@onnx_string_concat.fast
def _concat_fast(x, y, dtype=None):
    x, y = _strings("onnx_string_concat", x, "input x"), _strings("onnx_string_concat", y, "input y")
    return np.asarray(np.add(x, y), dtype=object)  # object arrays add item by item: str + str


# --- StringSplit ----------------------------------------------------------------------------------

onnx_string_split = define("onnx_string_split", FAMILY, """
fragment onnx_string_split<?>( x: tensor<?>, delimiter: string = '', maxsplit: integer = -1 )
    -> ( y: tensor<?>, z: tensor<integer> );
""", domain="onnx", generic=True,
    doc="ONNX StringSplit: each string split at `delimiter` (empty: runs of whitespace, ends trimmed), at most "
        "`maxsplit` times (-1: no limit); `y` has one more axis, padded with empty strings to the longest "
        "split, `z` the number of substrings of each string.")


def _split_one(s: str, delimiter: str, maxsplit: int) -> list[str]:
    # Python's str.split is the operator's definition (onnx's reference implementation, from
    # which the node suite's expected data come): a given delimiter separates every occurrence
    # (consecutive ones delimit empty strings); none (or '') splits at runs of whitespace and
    # drops the leading and trailing whitespace.  onnxruntime differs at the edges the operator
    # doc leaves open: only ' ' is whitespace to it, an empty string has no substrings, and the
    # remainder after `maxsplit` splits loses its trailing whitespace.
    return s.split(delimiter or None, maxsplit)


@onnx_string_split.shape
def _split_shape(x, delimiter="", maxsplit=-1, dtype=None):
    if maxsplit < -1:
        raise attr_error("onnx_string_split", "maxsplit", maxsplit, "must be -1 (no limit) or at least 0")
    return tuple(x) + (None,), tuple(x)


#: Most items a StringSplit result may have: its width is the longest split, so one long
#: string among many would otherwise pad every row to it (a small input, a huge result).
MAX_SPLIT_ITEMS = 1 << 26


def _split_result(parts: list[list[str]], shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    width = max((len(p) for p in parts), default=0)
    if len(parts) * width > MAX_SPLIT_ITEMS:
        raise op_error("onnx_string_split", f"the result would have {len(parts)} x {width} items (more than "
                                            f"{MAX_SPLIT_ITEMS}: every string is padded to the longest split)")
    y = np.empty((len(parts), width), dtype=object)
    y[...] = ""
    for k, p in enumerate(parts):
        y[k, :len(p)] = p
    z = np.asarray([len(p) for p in parts], np.int64)
    return y.reshape(tuple(shape) + (width,)), z.reshape(shape)


@onnx_string_split.formal
def _split_formal(x, delimiter="", maxsplit=-1, dtype=None):
    x = _strings("onnx_string_split", x)
    parts = [_split_one(x[i], delimiter, maxsplit) for i in np.ndindex(*x.shape)]
    return _split_result(parts, x.shape)


@onnx_string_split.fast
def _split_fast(x, delimiter="", maxsplit=-1, dtype=None):
    x = _strings("onnx_string_split", x)
    sep = delimiter or None
    return _split_result([s.split(sep, maxsplit) for s in x.reshape(-1).tolist()], x.shape)


# --- StringNormalizer ------------------------------------------------------------------------------

onnx_string_normalizer = define("onnx_string_normalizer", FAMILY, """
fragment onnx_string_normalizer<?>( x: tensor<?>, case_change_action: string = 'NONE',
                                    is_case_sensitive: logical = false, locale: string = '',
                                    stopwords: string[] = [] ) -> ( y: tensor<?> );
""", domain="onnx", generic=True,
    doc="ONNX StringNormalizer: the strings of a [C] or [1, C] tensor without the stop words (compared "
        "case-insensitively unless `is_case_sensitive`), then lower- or upper-cased; all removed gives one "
        "empty string.")

_ACTIONS = ("NONE", "LOWER", "UPPER")
#: Languages whose case mapping differs from Unicode's default one (Unicode SpecialCasing.txt:
#: Turkish/Azeri dotted and dotless i, Lithuanian dot above): Python's str.lower/upper, the
#: kernels' case mapping, is the default one, so these locales are refused, not approximated.
_SPECIAL_CASING = ("tr", "az", "lt")


def _check_normalizer(case_change_action: str, locale: str) -> None:
    if case_change_action not in _ACTIONS:
        raise attr_error("onnx_string_normalizer", "case_change_action", case_change_action,
                         f"must be one of {', '.join(_ACTIONS)}")
    language = locale.replace("-", "_").split("_")[0].lower()
    if language in _SPECIAL_CASING:
        raise attr_error("onnx_string_normalizer", "locale", locale,
                         "is not supported: its case mapping differs from Unicode's default one, which nnefx uses")


@onnx_string_normalizer.shape
def _normalizer_shape(x, case_change_action="NONE", is_case_sensitive=False, locale="", stopwords=(),
                      dtype=None):
    _check_normalizer(case_change_action, locale)
    if len(x) == 1:
        return (None,)
    if len(x) == 2 and x[0] in (1, None):
        return (1, None)
    raise op_error("onnx_string_normalizer", f"the input must have shape [C] or [1, C], not {list(x)}")


def _case(s: str, action: str) -> str:
    return s.lower() if action == "LOWER" else s.upper() if action == "UPPER" else s


def _normalized(x: np.ndarray, kept: list[str]) -> np.ndarray:
    if x.ndim == 2 and x.shape[0] != 1:
        raise op_error("onnx_string_normalizer", f"the input must have shape [C] or [1, C], not {list(x.shape)}")
    if not kept:
        kept = [""]  # all removed: one empty string (ONNX StringNormalizer-10)
    return _object_array(kept, (len(kept),) if x.ndim == 1 else (1, len(kept)))


@onnx_string_normalizer.formal
def _normalizer_formal(x, case_change_action="NONE", is_case_sensitive=False, locale="", stopwords=(),
                       dtype=None):
    _check_normalizer(case_change_action, locale)
    x = _strings("onnx_string_normalizer", x)
    kept = []
    for i in np.ndindex(*x.shape):
        s = x[i]
        if is_case_sensitive:
            stop = any(s == w for w in stopwords)
        else:
            stop = any(s.lower() == w.lower() for w in stopwords)
        if not stop:
            kept.append(_case(s, case_change_action))
    return _normalized(x, kept)


@onnx_string_normalizer.fast
def _normalizer_fast(x, case_change_action="NONE", is_case_sensitive=False, locale="", stopwords=(),
                     dtype=None):
    _check_normalizer(case_change_action, locale)
    x = _strings("onnx_string_normalizer", x)
    if is_case_sensitive:
        stops, key = set(stopwords), (lambda s: s)
    else:
        stops, key = {w.lower() for w in stopwords}, str.lower
    kept = [_case(s, case_change_action) for s in x.reshape(-1).tolist() if key(s) not in stops]
    return _normalized(x, kept)


# --- RegexFullMatch --------------------------------------------------------------------------------

onnx_regex_full_match = define("onnx_regex_full_match", FAMILY, """
fragment onnx_regex_full_match<?>( x: tensor<?>, pattern: string ) -> ( y: tensor<logical> );
""", domain="onnx", generic=True,
    doc="ONNX RegexFullMatch: whether the whole of each string matches `pattern` (RE2 syntax; what RE2 would "
        "refuse is refused).")


@onnx_regex_full_match.shape
def _regex_shape(x, pattern="", dtype=None):
    compile_re2(pattern)
    return tuple(x)


@onnx_regex_full_match.formal
def _regex_formal(x, pattern="", dtype=None):
    rx = compile_re2(pattern)
    x = _strings("onnx_regex_full_match", x)
    out = np.zeros(x.shape, np.bool_)
    for i in np.ndindex(*x.shape):
        out[i] = rx.fullmatch(x[i]) is not None
    return out


@onnx_regex_full_match.fast
def _regex_fast(x, pattern="", dtype=None):
    match = compile_re2(pattern).fullmatch
    x = _strings("onnx_regex_full_match", x)
    return np.fromiter((match(s) is not None for s in x.reshape(-1).tolist()), np.bool_, x.size).reshape(x.shape)


# --- element types: string results stay string, counts and matches their defaults -------------------

onnx_string_concat.etypes(lambda x, y, **_: "string")
onnx_string_split.etypes(lambda x, **_: ("string", "i64"))
onnx_string_normalizer.etypes(lambda x, **_: "string")
onnx_regex_full_match.etypes(lambda x, **_: "bool")
