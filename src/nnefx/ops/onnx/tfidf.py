"""ONNX TfIdfVectorizer as an operation of the ``onnx`` domain: counts of the pool's n-grams
(of integers or of strings) in each row, weighted as term frequencies, inverse document
frequencies or their product.

The definition (ONNX operator docs, TfIdfVectorizer-9): the pool lists the 1-grams, then the
2-grams, ... as one flat array, ``ngram_counts[k]`` the position where the (k+1)-grams start;
n-gram ``j`` of the pool (counted over all sizes, in pool order) adds to output column
``ngram_indexes[j]``.  In each row (a [C] input is one row, a [N, C] input N rows; n-grams
never span rows), every n-gram of a size in [``min_gram_length``, ``max_gram_length``] is
looked for with its items ``d`` apart, ``d`` from 1 to ``max_skip_count + 1`` (1-grams once).
``mode``: TF the counts; IDF ``weights[c]`` (1 without weights) where column ``c`` counted at
least once, else 0; TFIDF count × ``weights[c]``.  The result is float32, [C'] or [N, C'] with
C' = max(``ngram_indexes``) + 1.  A pool n-gram listed twice counts in the column of its last
listing (as onnx's reference and onnxruntime's trie keep the last id).
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, op_error
from ..registry import define

FAMILY = "onnx_tfidf"
OP = "onnx_tfidf_vectorizer"

onnx_tfidf_vectorizer = define(OP, FAMILY, """
fragment onnx_tfidf_vectorizer<?>( input: tensor<?>, max_gram_length: integer, min_gram_length: integer,
                                   max_skip_count: integer, mode: string, ngram_counts: integer[],
                                   ngram_indexes: integer[], pool_int64s: integer[] = [],
                                   pool_strings: string[] = [], weights: scalar[] = [] )
    -> ( output: tensor<scalar> );
""", domain="onnx", generic=True,
    doc="ONNX TfIdfVectorizer: per row, the pool's n-grams (integers or strings, items up to max_skip_count "
        "apart) counted into output columns and weighted (TF, IDF or TFIDF).")

_MODES = ("TF", "IDF", "TFIDF")


def _pool(max_gram_length, min_gram_length, max_skip_count, mode, ngram_counts, ngram_indexes, pool_int64s,
          pool_strings, weights) -> tuple[dict[tuple, int], int]:
    """The pool as {n-gram tuple: output column} (only sizes counted) and the column count."""
    if mode not in _MODES:
        raise attr_error(OP, "mode", mode, f"must be one of {', '.join(_MODES)}")
    if not 1 <= min_gram_length <= max_gram_length:
        raise op_error(OP, f"the n-gram lengths must satisfy 1 <= min_gram_length ({min_gram_length}) <= "
                           f"max_gram_length ({max_gram_length})")
    if max_skip_count < 0:
        raise attr_error(OP, "max_skip_count", max_skip_count, "must not be negative")
    if pool_int64s and pool_strings:
        raise op_error(OP, "give pool_int64s or pool_strings, not both")
    pool = list(pool_int64s) if pool_int64s else list(pool_strings)
    if not ngram_indexes:
        raise attr_error(OP, "ngram_indexes", ngram_indexes, "must not be empty")
    if min(ngram_indexes) < 0:
        raise attr_error(OP, "ngram_indexes", ngram_indexes, "must not hold negative columns")
    columns = max(ngram_indexes) + 1
    if weights and len(weights) < columns:
        raise attr_error(OP, "weights", f"{len(weights)} values", f"must give one weight per output column ({columns})")
    starts = list(ngram_counts)
    if any(b < a for a, b in zip(starts, starts[1:], strict=False)) or (starts and (starts[0] != 0 or starts[-1] > len(pool))):
        raise attr_error(OP, "ngram_counts", starts, f"must rise from 0 within the pool's {len(pool)} items")
    table: dict[tuple, int] = {}
    j = 0
    for k, start in enumerate(starts):
        n = k + 1
        end = starts[k + 1] if k + 1 < len(starts) else len(pool)
        if (end - start) % n:
            raise op_error(OP, f"the pool's {n}-grams (items {start} to {end}) are not a whole number of {n}-grams")
        for first in range(start, end, n):
            if j >= len(ngram_indexes):
                raise attr_error(OP, "ngram_indexes", f"{len(ngram_indexes)} columns",
                                 "must give a column for each n-gram of the pool")
            if min_gram_length <= n <= max_gram_length:
                table[tuple(pool[first:first + n])] = ngram_indexes[j]
            j += 1
    if j != len(ngram_indexes):
        raise attr_error(OP, "ngram_indexes", f"{len(ngram_indexes)} columns", f"must give one per pool n-gram ({j})")
    return table, columns


def _rows(x: np.ndarray, strings: bool) -> np.ndarray:
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim > 2:
        raise op_error(OP, f"the input must have shape [C] or [N, C], not {list(x.shape)}")
    if strings != (x.dtype == object):
        raise op_error(OP, f"the pool holds {'strings' if strings else 'integers'} but the input is {x.dtype} data")
    return x.reshape(1, -1) if x.ndim == 1 else x


def _weigh(counts: np.ndarray, mode: str, weights, squeeze: bool) -> np.ndarray:
    w = np.asarray(list(weights)[:counts.shape[1]] or np.ones(counts.shape[1]), np.float32)
    if mode == "TF":
        out = counts.astype(np.float32)
    elif mode == "IDF":
        out = np.where(counts > 0, w, np.float32(0))
    else:
        out = counts.astype(np.float32) * w
    out = out.astype(np.float32)
    return out[0] if squeeze else out


@onnx_tfidf_vectorizer.shape
def _tfidf_shape(x, max_gram_length=1, min_gram_length=1, max_skip_count=0, mode="TF", ngram_counts=(),
                 ngram_indexes=(), pool_int64s=(), pool_strings=(), weights=(), dtype=None):
    _, columns = _pool(max_gram_length, min_gram_length, max_skip_count, mode, ngram_counts, ngram_indexes,
                       pool_int64s, pool_strings, weights)
    if len(x) > 2:
        raise op_error(OP, f"the input must have shape [C] or [N, C], not {list(x)}")
    return (x[0], columns) if len(x) == 2 else (columns,)


def _key(v):
    return v if isinstance(v, str) else int(v)


def _count_formal(rows: np.ndarray, table: dict, columns: int, lengths: range, skips: int) -> np.ndarray:
    """The definition: every row, size, distance and start looked up one n-gram at a time."""
    counts = np.zeros((rows.shape[0], columns), np.int64)
    for r in range(rows.shape[0]):
        row = [_key(v) for v in rows[r]]
        for n in lengths:
            for d in range(1, (skips if n > 1 else 0) + 2):
                for i in range(len(row) - (n - 1) * d):
                    column = table.get(tuple(row[i + k * d] for k in range(n)))
                    if column is not None:
                        counts[r, column] += 1
    return counts


def _count_fast(rows: np.ndarray, table: dict, columns: int, lengths: range, skips: int) -> np.ndarray:
    """The same counts, each size and distance's n-grams of all rows cut out at once."""
    if rows.dtype != object:
        rows = rows.astype(np.int64)
    counts = np.zeros((rows.shape[0], columns), np.int64)
    width = rows.shape[1]
    get = table.get
    for n in lengths:
        for d in range(1, (skips if n > 1 else 0) + 2):
            span = (n - 1) * d + 1
            if span > width:
                break
            # every n-gram of the rows with items d apart: one column of items per position
            grams = np.stack([rows[:, k * d: width - span + 1 + k * d] for k in range(n)], axis=-1)
            for r in range(rows.shape[0]):
                for gram in map(tuple, grams[r].tolist()):
                    column = get(gram)
                    if column is not None:
                        counts[r, column] += 1
    return counts


def _vectorizer(count):
    """The kernel around one way of counting: the pool checked, rows counted, counts weighted."""
    def kernel(x, max_gram_length=1, min_gram_length=1, max_skip_count=0, mode="TF", ngram_counts=(),
               ngram_indexes=(), pool_int64s=(), pool_strings=(), weights=(), dtype=None):
        table, columns = _pool(max_gram_length, min_gram_length, max_skip_count, mode, ngram_counts, ngram_indexes,
                               pool_int64s, pool_strings, weights)
        x = np.asarray(x)
        counts = count(_rows(x, bool(pool_strings)), table, columns, range(min_gram_length, max_gram_length + 1),
                       max_skip_count)
        return _weigh(counts, mode, weights, x.ndim < 2)
    return kernel


onnx_tfidf_vectorizer.formal(_vectorizer(_count_formal))
onnx_tfidf_vectorizer.fast(_vectorizer(_count_fast))
onnx_tfidf_vectorizer.etypes(lambda x, **_: "f32")
