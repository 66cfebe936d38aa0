"""String operators: how each is read from ONNX and written back.

ONNX StringConcat, StringSplit, StringNormalizer, RegexFullMatch and TfIdfVectorizer, read
as the onnx-domain operations of :mod:`nnefx.ops.onnx.strings` and
:mod:`nnefx.ops.onnx.tfidf` and written back as the same nodes.  Their string tensors are
the data model's ``string`` data type; NNEF and OpenVINO IR cannot hold them, so those
writers refuse these graphs, located.

Specifications: ONNX operator docs: StringConcat-20, StringSplit-20, StringNormalizer-10,
RegexFullMatch-20, TfIdfVectorizer-9.
"""

from __future__ import annotations

from ...graph import Operation
from ..export.registry import to_onnx
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.registry import onnx_node
from ._common import onnx_emit, onnx_need, onnx_write

# ================================================================================================
# Reading
# ================================================================================================


def _strings_in(r, ins, n: int) -> list:
    values = [onnx_need(r, ins, i, f"input {i}") for i in range(n)]
    for i, v in enumerate(values):
        if v.etype != "string":
            raise r.error(f"input {i} must be a string tensor, not {v.etype}")
    return values


@onnx_node("StringConcat")
def _onnx_string_concat(r, attrs, ins):
    x, y = _strings_in(r, ins, 2)
    return onnx_emit(r, "onnx_string_concat", {"x": x, "y": y}, {}, results=["string"], dtype="string")[0]


@onnx_node("StringSplit")
def _onnx_string_split(r, attrs, ins):
    (x,) = _strings_in(r, ins, 1)
    data = {"delimiter": str(attrs.get("delimiter", "")), "maxsplit": int(attrs.get("maxsplit", -1))}
    if data["maxsplit"] < 0:
        data["maxsplit"] = -1  # ONNX: unspecified is no limit
    return onnx_emit(r, "onnx_string_split", {"x": x}, data, results=["string", "i64"], dtype="string")


@onnx_node("StringNormalizer")
def _onnx_string_normalizer(r, attrs, ins):
    (x,) = _strings_in(r, ins, 1)
    data = {"case_change_action": str(attrs.get("case_change_action", "NONE")),
            "is_case_sensitive": bool(attrs.get("is_case_sensitive", 0)), "locale": str(attrs.get("locale", "")),
            "stopwords": [str(w) for w in attrs.get("stopwords", [])]}
    return onnx_emit(r, "onnx_string_normalizer", {"x": x}, data, results=["string"], dtype="string")[0]


@onnx_node("RegexFullMatch")
def _onnx_regex_full_match(r, attrs, ins):
    (x,) = _strings_in(r, ins, 1)
    if "pattern" not in attrs:
        raise r.error("attribute 'pattern' is missing")
    return onnx_emit(r, "onnx_regex_full_match", {"x": x}, {"pattern": str(attrs["pattern"])},
                     results=["boolean"], dtype="string")[0]


@onnx_node("TfIdfVectorizer")
def _onnx_tfidf_vectorizer(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    strings = x.etype == "string"
    if not strings and x.etype not in ("i32", "i64"):
        raise r.error(f"input 0 must be a string, int32 or int64 tensor, not {x.etype}")
    for name in ("max_gram_length", "min_gram_length", "max_skip_count", "mode", "ngram_counts", "ngram_indexes"):
        if name not in attrs:
            raise r.error(f"attribute '{name}' is missing")
    if strings and attrs.get("pool_int64s") or not strings and attrs.get("pool_strings"):
        raise r.error(f"the pool must hold {'strings' if strings else 'integers'}, as the input does")
    data = {"max_gram_length": int(attrs["max_gram_length"]), "min_gram_length": int(attrs["min_gram_length"]),
            "max_skip_count": int(attrs["max_skip_count"]), "mode": str(attrs["mode"]),
            "ngram_counts": [int(v) for v in attrs["ngram_counts"]],
            "ngram_indexes": [int(v) for v in attrs["ngram_indexes"]],
            "pool_int64s": [int(v) for v in attrs.get("pool_int64s", [])],
            "pool_strings": [str(v) for v in attrs.get("pool_strings", [])],
            "weights": [float(v) for v in attrs.get("weights", [])]}
    return onnx_emit(r, "onnx_tfidf_vectorizer", {"input": x}, data, results=["f32"],
                     dtype="string" if strings else "integer")[0]


# ================================================================================================
# Writing
# ================================================================================================

@to_onnx("onnx_string_concat")
def string_concat_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "StringConcat", [op.inputs["x"], op.inputs["y"]], 20)


@to_onnx("onnx_string_split")
def string_split_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    limit = int(op.attribs.get("maxsplit", -1))
    onnx_write(ctx, op, "StringSplit", [op.inputs["x"]], 20, delimiter=str(op.attribs.get("delimiter", "")),
               maxsplit=limit if limit >= 0 else None)


@to_onnx("onnx_string_normalizer")
def string_normalizer_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    a = op.attribs
    onnx_write(ctx, op, "StringNormalizer", [op.inputs["x"]], 10,
               case_change_action=str(a.get("case_change_action", "NONE")),
               is_case_sensitive=int(bool(a.get("is_case_sensitive", False))), locale=str(a.get("locale", "")) or None,
               stopwords=list(a.get("stopwords", [])) or None)


@to_onnx("onnx_regex_full_match")
def regex_full_match_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "RegexFullMatch", [op.inputs["x"]], 20, keep=("pattern",), pattern=str(op.attribs["pattern"]))


@to_onnx("onnx_tfidf_vectorizer")
def tfidf_vectorizer_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    a = op.attribs
    onnx_write(ctx, op, "TfIdfVectorizer", [op.inputs["input"]], 9,
               keep=("max_gram_length", "min_gram_length", "max_skip_count", "mode", "ngram_counts", "ngram_indexes"),
               max_gram_length=int(a["max_gram_length"]), min_gram_length=int(a["min_gram_length"]),
               max_skip_count=int(a["max_skip_count"]), mode=str(a["mode"]),
               ngram_counts=[int(v) for v in a["ngram_counts"]], ngram_indexes=[int(v) for v in a["ngram_indexes"]],
               pool_int64s=[int(v) for v in a.get("pool_int64s", [])] or None,
               pool_strings=[str(v) for v in a.get("pool_strings", [])] or None,
               weights=[float(v) for v in a.get("weights", [])] or None)
