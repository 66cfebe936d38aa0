"""ONNX sequences and optionals (``Sequence*``, ``ConcatFromSequence``, ``SplitToSequence``,
``Optional*``; opsets 11-25), after the ONNX operator docs.

A sequence is an ordered list of tensors of one element type whose shapes may differ; its
run-time value is a :class:`nnefx.graph.TensorSequence` (a tuple of arrays) and its data node
has ``kind="sequence"``.  An optional holds nothing (``None``) or one tensor or sequence
(``kind="optional"`` / ``"optional_sequence"``).  Optional ONNX inputs (a position, a split)
are ``tensor[]`` arguments of zero or one tensor.  These kernels move data only: formal and
fast are the same function.

Positions follow ONNX: negative values count from the end; ``SequenceInsert`` accepts
``[-n, n]``, ``SequenceAt``/``SequenceErase`` ``[-n, n - 1]``; out-of-range positions are errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import TensorSequence
from .._common import attr_error, op_error
from ..registry import define
from ._common import norm_axis

FAMILY = "onnx_sequence"


def _both(entry: Any, fn: Any) -> None:
    entry.formal(fn)
    entry.fast(fn)


def _unknown(*args: Any, **kwargs: Any) -> tuple:
    return None  # a sequence (or an optional) has no single shape


def _seq(op: str, value: Any) -> TensorSequence:
    if not isinstance(value, TensorSequence):
        raise op_error(op, f"expects a sequence, got {'an empty optional' if value is None else 'a tensor'}")
    return value


def _position(op: str, position: list, n: int, low: int, high: int, default: int) -> int:
    if not len(position):
        return default
    p = np.asarray(position[0])
    if p.size != 1 or p.dtype.kind not in "iu":
        raise op_error(op, f"the position must be one integer, got shape {list(p.shape)} of {p.dtype}")
    k = int(p.reshape(-1)[0])
    if not low <= k <= high:
        raise op_error(op, f"position {k} is outside [{low}, {high}] for a sequence of {n} tensors")
    return k + n if k < 0 else k


# --- construction -----------------------------------------------------------------------------

onnx_sequence_construct = define("onnx_sequence_construct", FAMILY, """
fragment onnx_sequence_construct( inputs: tensor<>[] ) -> ( output: tensor<> );
""", domain="onnx", doc="ONNX SequenceConstruct: a sequence of the input tensors, in order.")
onnx_sequence_construct.shape(_unknown)
_both(onnx_sequence_construct, lambda inputs: TensorSequence(np.asarray(x) for x in inputs))

onnx_sequence_empty = define("onnx_sequence_empty", FAMILY, """
fragment onnx_sequence_empty( ) -> ( output: tensor<> );
""", domain="onnx", doc="ONNX SequenceEmpty: a sequence of no tensors (its element type is the result's).")
onnx_sequence_empty.shape(_unknown)
_both(onnx_sequence_empty, lambda: TensorSequence())


onnx_sequence_insert = define("onnx_sequence_insert", FAMILY, """
fragment onnx_sequence_insert( input_sequence: tensor<>, tensor: tensor<>, position: tensor<integer>[] )
    -> ( output_sequence: tensor<> );
""", domain="onnx", doc="ONNX SequenceInsert: the sequence with `tensor` inserted before `position` (at the "
                        "end without one).")
onnx_sequence_insert.shape(_unknown)


def _insert(input_sequence, tensor, position):
    op = "onnx_sequence_insert"
    seq = _seq(op, input_sequence)
    n = len(seq)
    k = _position(op, position, n, -n, n, n)
    if seq and np.asarray(tensor).dtype != seq[0].dtype:
        raise op_error(op, f"the tensor's element type {np.asarray(tensor).dtype} is not the sequence's "
                           f"({seq[0].dtype})")
    return TensorSequence((*seq[:k], np.asarray(tensor), *seq[k:]))


_both(onnx_sequence_insert, _insert)


onnx_sequence_erase = define("onnx_sequence_erase", FAMILY, """
fragment onnx_sequence_erase( input_sequence: tensor<>, position: tensor<integer>[] )
    -> ( output_sequence: tensor<> );
""", domain="onnx", doc="ONNX SequenceErase: the sequence without the tensor at `position` (the last without one).")
onnx_sequence_erase.shape(_unknown)


def _erase(input_sequence, position):
    op = "onnx_sequence_erase"
    seq = _seq(op, input_sequence)
    n = len(seq)
    if n == 0:
        raise op_error(op, "cannot erase from an empty sequence")
    k = _position(op, position, n, -n, n - 1, n - 1)
    return TensorSequence((*seq[:k], *seq[k + 1:]))


_both(onnx_sequence_erase, _erase)


onnx_sequence_at = define("onnx_sequence_at", FAMILY, """
fragment onnx_sequence_at( input_sequence: tensor<>, position: tensor<integer> ) -> ( tensor: tensor<> );
""", domain="onnx", doc="ONNX SequenceAt: the tensor at `position`.")


@onnx_sequence_at.shape
def _at_shape(input_sequence, position):
    return None


def _at(input_sequence, position):
    op = "onnx_sequence_at"
    seq = _seq(op, input_sequence)
    n = len(seq)
    return seq[_position(op, [position], n, -n, n - 1, 0)]


_both(onnx_sequence_at, _at)


onnx_sequence_length = define("onnx_sequence_length", FAMILY, """
fragment onnx_sequence_length( input_sequence: tensor<> ) -> ( length: tensor<integer> );
""", domain="onnx", doc="ONNX SequenceLength: the number of tensors in the sequence (an int64 scalar).")


@onnx_sequence_length.shape
def _length_shape(input_sequence):
    return ()


_both(onnx_sequence_length, lambda input_sequence: np.array(len(_seq("onnx_sequence_length", input_sequence)),
                                                            np.int64))


# --- to and from tensors ----------------------------------------------------------------------

onnx_concat_from_sequence = define("onnx_concat_from_sequence", FAMILY, """
fragment onnx_concat_from_sequence( input_sequence: tensor<>, axis: integer, new_axis: integer = 0 )
    -> ( concat_result: tensor<> );
""", domain="onnx", doc="ONNX ConcatFromSequence: the sequence's tensors concatenated along `axis` (stacked "
                        "along a new axis when `new_axis` is 1).")


@onnx_concat_from_sequence.shape
def _concat_shape(input_sequence, axis=0, new_axis=0):
    if new_axis not in (0, 1):
        raise attr_error("onnx_concat_from_sequence", "new_axis", new_axis, "must be 0 or 1")
    return None


def _concat(input_sequence, axis=0, new_axis=0):
    op = "onnx_concat_from_sequence"
    seq = _seq(op, input_sequence)
    if not seq:
        raise op_error(op, "cannot concatenate an empty sequence (its result has no shape)")
    rank = seq[0].ndim
    if new_axis:
        return np.stack(seq, axis=norm_axis(op, axis, rank + 1))
    if rank == 0:
        raise op_error(op, "cannot concatenate scalars without new_axis = 1")
    axis = norm_axis(op, axis, rank)
    for x in seq:
        if x.ndim != rank or x.shape[:axis] + x.shape[axis + 1:] != seq[0].shape[:axis] + seq[0].shape[axis + 1:]:
            raise op_error(op, f"shapes {list(seq[0].shape)} and {list(x.shape)} differ outside axis {axis}")
    return np.concatenate(seq, axis=axis)


_both(onnx_concat_from_sequence, _concat)


onnx_split_to_sequence = define("onnx_split_to_sequence", FAMILY, """
fragment onnx_split_to_sequence( input: tensor<>, split: tensor<integer>[], axis: integer = 0, keepdims: integer = 1 )
    -> ( output_sequence: tensor<> );
""", domain="onnx", doc="ONNX SplitToSequence: `input` split along `axis` into parts of the sizes `split` gives "
                        "(one size: equal parts, the last smaller; none: parts of 1, squeezed unless `keepdims`).")


@onnx_split_to_sequence.shape
def _split_shape(input, split, axis=0, keepdims=1):
    norm_axis("onnx_split_to_sequence", axis, len(input))
    return None


def _split(input, split, axis=0, keepdims=1):
    op = "onnx_split_to_sequence"
    x = np.asarray(input)
    axis = norm_axis(op, axis, x.ndim)
    n = x.shape[axis]
    if not len(split):
        parts = np.split(x, n, axis=axis) if n else []
        return TensorSequence(p if keepdims else np.squeeze(p, axis) for p in parts)
    s = np.asarray(split[0])
    if s.dtype.kind not in "iu" or s.ndim > 1:
        raise op_error(op, f"split must be an integer scalar or vector, got shape {list(s.shape)} of {s.dtype}")
    if s.ndim == 0:
        size = int(s)
        if size <= 0:
            raise op_error(op, f"split = {size} must be positive")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        sizes = [int(v) for v in s]
        if any(v < 0 for v in sizes) or sum(sizes) != n:
            raise op_error(op, f"split sizes {sizes} must be non-negative and sum to the axis extent {n}")
    bounds = np.cumsum(sizes)[:-1]
    return TensorSequence(np.split(x, bounds, axis=axis))


_both(onnx_split_to_sequence, _split)


# --- optionals --------------------------------------------------------------------------------

onnx_optional = define("onnx_optional", FAMILY, """
fragment onnx_optional( input: tensor<>[] ) -> ( output: tensor<> );
""", domain="onnx", doc="ONNX Optional: an optional holding the input (empty without one).")
onnx_optional.shape(_unknown)
_both(onnx_optional, lambda input: input[0] if len(input) else None)


onnx_optional_has_element = define("onnx_optional_has_element", FAMILY, """
fragment onnx_optional_has_element( input: tensor<>[] ) -> ( output: tensor<logical> );
""", domain="onnx", doc="ONNX OptionalHasElement: whether the optional input holds a value (false without an "
                        "input; true for a plain tensor or sequence).")


@onnx_optional_has_element.shape
def _has_shape(input):
    return ()


_both(onnx_optional_has_element, lambda input: np.array(bool(len(input)) and input[0] is not None))


onnx_optional_get_element = define("onnx_optional_get_element", FAMILY, """
fragment onnx_optional_get_element( input: tensor<> ) -> ( output: tensor<> );
""", domain="onnx", doc="ONNX OptionalGetElement: the value the optional holds (an error when empty); a plain "
                        "tensor or sequence passes unchanged.")
onnx_optional_get_element.shape(lambda input: None)


def _get(input):
    if input is None:
        raise op_error("onnx_optional_get_element", "the optional is empty")
    return input


_both(onnx_optional_get_element, _get)


onnx_identity = define("onnx_identity", FAMILY, """
fragment onnx_identity( input: tensor<> ) -> ( output: tensor<> );
""", domain="onnx", doc="ONNX Identity of a sequence or an optional (a tensor's is NNEF `copy`).")
onnx_identity.shape(lambda input: None)
_both(onnx_identity, lambda input: input)
