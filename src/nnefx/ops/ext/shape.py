"""Run-time shapes: a tensor's shape as a tensor, reshape and broadcast to run-time targets, and ranges.

Part of the nnefx extension operations (see :mod:`nnefx.ops.ext`).
"""

from __future__ import annotations

import math

import numpy as np

from ...diagnostics import NNEFXError
from .._common import float_type
from ..registry import define

# --- run-time shapes ------------------------------------------------------------------------

tensor_shape_op = define("tensor_shape", "ext", """
fragment tensor_shape<?>( input: tensor<?> ) -> ( output: tensor<integer> );
""", domain="nnefx", generic=True, doc="The extents of a tensor as a 1-D integer tensor (IR ShapeOf).")


@tensor_shape_op.shape
def _shape_of_shape(x, dtype=None):
    return (len(x),)


@tensor_shape_op.formal
def _shape_of_formal(x, dtype=None):
    return np.asarray(np.shape(x), dtype=np.int64)


def reshape_target(in_shape: tuple, target: list[int], special_zero: bool) -> tuple:
    """OpenVINO Reshape: 0 copies the input extent (special_zero) and one -1 is inferred."""
    out = []
    infer = -1
    for i, t in enumerate(target):
        if t == 0 and special_zero:
            if i >= len(in_shape):
                raise NNEFXError(f"reshape: 0 at position {i} but the input has rank {len(in_shape)}")
            out.append(int(in_shape[i]))
        elif t == -1:
            if infer >= 0:
                raise NNEFXError("reshape: more than one -1 in the target shape")
            infer = i
            out.append(1)
        elif t < 0:
            raise NNEFXError(f"reshape: invalid target extent {t}")
        else:
            out.append(int(t))
    total = int(np.prod(in_shape, dtype=np.int64))
    known = int(np.prod(out, dtype=np.int64))
    if infer >= 0:
        if known == 0 or total % known:
            raise NNEFXError(f"reshape: cannot infer -1 reshaping {list(in_shape)} to {list(target)}")
        out[infer] = total // known
    elif known != total:
        raise NNEFXError(f"reshape: cannot reshape {list(in_shape)} ({total} items) to {out} ({known} items)")
    return tuple(out)


reshape_to_op = define("reshape_to", "ext", """
fragment reshape_to<?>( input: tensor<?>, shape: tensor<integer>, special_zero: logical = true ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR Reshape with the target shape given at run time.")


@reshape_to_op.shape
def _reshape_shape(x, s, special_zero=True, dtype=None):
    if len(s) != 1 or s[0] is None:
        raise NNEFXError("reshape_to: the shape input must be a 1-D tensor")
    return (None,) * int(s[0])


@reshape_to_op.formal
def _reshape_formal(x, s, special_zero=True, dtype=None):
    x = np.asarray(x)
    return x.reshape(reshape_target(x.shape, [int(v) for v in np.asarray(s).reshape(-1)], special_zero))


def broadcast_shape(a: tuple, b: tuple) -> tuple:
    """numpy (right-aligned) broadcast of two shapes."""
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2, strict=False):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise NNEFXError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


broadcast_to_op = define("broadcast_to", "ext", """
fragment broadcast_to<?>( input: tensor<?>, shape: tensor<integer>, mode: string = 'numpy', axes_mapping: integer[] = [] ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR Broadcast (numpy / bidirectional / explicit) to a run-time shape.")


@broadcast_to_op.shape
def _broadcast_shape_rule(x, s, mode="numpy", axes_mapping=(), dtype=None):
    if len(s) != 1 or s[0] is None:
        raise NNEFXError("broadcast_to: the shape input must be a 1-D tensor")
    n = int(s[0])
    if mode == "bidirectional":
        n = max(n, len(x))
    return (None,) * n


def broadcast_to(x: np.ndarray, target: tuple, mode: str, axes_mapping) -> np.ndarray:
    x = np.asarray(x)
    if mode == "numpy":
        if broadcast_shape(x.shape, target) != tuple(target):
            raise NNEFXError(f"broadcast: {list(x.shape)} cannot be broadcast to {list(target)}")
        return np.broadcast_to(x, target).copy()
    if mode == "bidirectional":
        shape = broadcast_shape(x.shape, target)
        return np.broadcast_to(x, shape).copy()
    if mode == "explicit":
        axes = [int(a) for a in axes_mapping]
        if len(axes) != x.ndim:
            raise NNEFXError("broadcast: axes_mapping must have one entry per input dimension")
        shape = [1] * len(target)
        for d, a in zip(x.shape, axes, strict=False):
            if not 0 <= a < len(target):
                raise NNEFXError(f"broadcast: axis {a} out of range")
            shape[a] = d
        return np.broadcast_to(x.reshape(shape), target).copy()
    raise NNEFXError(f"broadcast: unsupported mode '{mode}'")


@broadcast_to_op.formal
def _broadcast_formal(x, s, mode="numpy", axes_mapping=(), dtype=None):
    return broadcast_to(x, tuple(int(v) for v in np.asarray(s).reshape(-1)), mode, axes_mapping)



# --- Range, TopK, CumSum, ReduceProd, Round, Einsum --------------------------------------------------

arange_op = define("arange", "ext", """
fragment arange<?>( start: tensor<?>, stop: tensor<?>, step: tensor<?> ) -> ( output: tensor<?> );
""", domain="nnefx", generic=True, doc="IR Range: start, start+step, ... up to (excluding) stop; bounds at run time.")


@arange_op.shape
def _range_shape(a, b, c, dtype=None):
    for s in (a, b, c):
        if int(np.prod(s, dtype=np.int64)) != 1:
            raise NNEFXError("arange: start, stop and step must be single values")
    return (None,)


@arange_op.formal
def _range_formal(a, b, c, dtype=None):
    a, b, c = (np.asarray(v).reshape(-1)[0] for v in (a, b, c))
    if c == 0:
        raise NNEFXError("arange: step must not be 0")
    count = max(int(math.ceil((float(b) - float(a)) / float(c))), 0)
    if count > 1 << 28:
        raise NNEFXError(f"arange: {count} items is too many")
    out = a + np.arange(count) * c
    kind = "f" if dtype == "scalar" else "i"
    return out.astype(float_type() if kind == "f" else np.int64)


