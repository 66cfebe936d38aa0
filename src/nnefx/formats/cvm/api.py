"""The runtime's *model API* byte layout (``CVMAPIInference``), for byte-exact comparisons.

The graph API returns int32 tensors; the model API packs them into one byte buffer:

* input bytes: int8 (sign-extended) when the data precision is at most 8, else int32 LE;
* output type: 1 byte when the output precision (max over heads) is at most 8, else 4 --
  ``postprocess`` "argmax" or "detection" forces 4.  One-byte outputs are the low byte of
  each int32 (two's complement), lossless unless a value escaped its precision (``where``);
* one head (no "detection"): the flattened tensor; several heads, or "detection": head k
  is viewed as a (rows, last dim) matrix, all row counts must be equal, and the output is
  row 0 of every head, then row 1 of every head, ...  "detection" with one head fails.

* "argmax": every head is viewed as rows of its last dim Y; each row's index of its first
  maximum, compared after truncation to int8, is an int32.  The reported length is one slot
  per row, heads one after another, but the runtime's loop steps its row counter by Y, so
  only the first ceil(rows / Y) slots of each head are written; the others keep whatever the
  caller's buffer held (``pack_outputs(..., buffer=)``; zeros when not given).
"""

from __future__ import annotations

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Model


def input_from_bytes(model: Model, data: bytes) -> np.ndarray:
    """Decode model-API input bytes into the int32 ``data`` array (before saturation)."""
    info = model.extras["cvm"]
    g = model.graph
    if not g.inputs:
        raise NNEFXError("the model has no 'data' input")
    shape = g.tensors[g.inputs[0]].shape
    in_type = 1 if info["precision"][g.inputs[0]] <= 8 else 4
    count = int(np.prod(shape))
    if len(data) != count * in_type:
        raise NNEFXError(f"model API input must be {count * in_type} bytes, got {len(data)}")
    return np.frombuffer(data, "<i1" if in_type == 1 else "<i4").reshape(shape).astype(np.int32)


def pack_outputs(model: Model, outputs: list[np.ndarray], buffer: bytes | None = None) -> bytes:
    """The bytes ``CVMAPIInference`` writes for the head tensors ``outputs`` (head order).

    ``buffer`` is the caller's output buffer before the call; it matters only for the
    "argmax" postprocess, which leaves part of the buffer as it was.
    """
    info = model.extras["cvm"]
    post = info.get("postprocess", "")
    if post == "argmax":
        return _pack_argmax(outputs, buffer)
    out_type = 4 if post == "detection" or info["output_precision"] > 8 else 1
    dtype = "<i1" if out_type == 1 else "<i4"

    def cast(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, np.int32).astype(dtype)  # int8: low byte, two's complement

    if len(outputs) == 1 and post != "detection":
        return cast(outputs[0]).tobytes()
    if len(outputs) == 1:
        raise NNEFXError("the 'detection' postprocess needs several heads")
    mats = [np.asarray(o).reshape(-1, np.asarray(o).shape[-1]) for o in outputs]
    rows = {m.shape[0] for m in mats}
    if len(rows) != 1:
        raise NNEFXError("model API: heads have different row counts "
                         f"({', '.join(str(m.shape[0]) for m in mats)}), the runtime fails")
    return b"".join(cast(m[r]).tobytes() for r in range(mats[0].shape[0]) for m in mats)


def _pack_argmax(outputs: list[np.ndarray], buffer: bytes | None) -> bytes:
    heads = [np.asarray(o, np.int32) for o in outputs]
    rows = [h.size // h.shape[-1] if h.ndim and h.shape[-1] else 0 for h in heads]
    length = 4 * sum(rows)
    if buffer is None:
        buffer = bytes(length)
    if len(buffer) != length:
        raise NNEFXError(f"model API: the 'argmax' output buffer must be {length} bytes, got {len(buffer)}")
    slots = np.frombuffer(buffer, "<i4").copy()
    start = 0
    for head, count in zip(heads, rows, strict=True):
        if count:
            y = head.shape[-1]
            written = -(-count // y)                 # the loop visits i = 0, Y, 2Y, ... < rows
            mat = head.reshape(count, y)[:written].astype(np.int8)   # compared after int8 truncation
            slots[start:start + written] = np.argmax(mat, axis=1)    # first maximum wins
        start += count
    return slots.tobytes()  # already "<i4" (a copy of the caller's buffer)
