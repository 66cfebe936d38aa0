"""Miscellaneous array operations (NNEF 1.0.5 §4.9.6): ``copy_n`` and ``add_n``.

``add_n``'s recursion bottoms out in a ``[1]``-shaped zero constant (as in the official
tools' library) so that the expanded graph only contains tensors; adding it broadcasts away.
"""

from __future__ import annotations

from .registry import define

copy_n = define("copy_n", "multi", """
fragment copy_n<?>( x: tensor<?>, times: integer ) -> ( y: tensor<?>[] )
{
    y = [x] * times;
}
""", compound=True, generic=True)

add_n = define("add_n", "multi", """
fragment add_n( x: tensor<scalar>[] ) -> ( y: tensor<scalar> )
{
    y = x[0] + add_n(x[1:]) if length_of(x) > 0 else constant(shape = [1], value = [0.0]);
}
""", compound=True)


# =============================================================================================
# Shape rules and kernels
# =============================================================================================

import numpy as np  # noqa: E402

from ._common import as_dtype, attr_error, broadcast_shapes, float_type, op_error, scalar  # noqa: E402
from .elementwise import BINARY_OPS  # noqa: E402


def _check_times(times):
    if isinstance(times, bool) or not isinstance(times, (int, np.integer)) or times <= 0:
        raise attr_error("copy_n", "times", times, "must be an integer > 0")


@copy_n.shape
def _copy_n_shape(x, times=1, **_):
    _check_times(times)
    return [tuple(x)] * int(times)


# Written, not derived from the body (the one compound that keeps a hand-written formal
# kernel, see nnefx.ops.derived): its result is a tensor array whose length is an attribute,
# which a graph cannot return as one output, so the body cannot run as a document.
@copy_n.formal
def _copy_n_formal(x, times=1, dtype=None):
    _check_times(times)
    x = as_dtype(x, dtype)
    return [np.array(x, copy=True) for _ in range(int(times))]


@copy_n.fast
def _copy_n_fast(x, times=1, dtype=None):
    _check_times(times)
    x = as_dtype(x, dtype)
    return [x.copy() for _ in range(int(times))]


@add_n.shape
def _add_n_shape(x):
    shapes = [tuple(s) for s in x]
    if not shapes:
        raise op_error("add_n", "needs at least one tensor")
    return broadcast_shapes("add_n", *shapes, (1,))


@add_n.fast
def _add_n_fast(x):
    items = [scalar(v) for v in x]
    _add_n_shape([v.shape for v in items])
    acc = np.zeros((1,), float_type())
    for item in reversed(items):  # the same right-nested float32 additions as the definition
        acc = BINARY_OPS["add"].fast_kernel(item, acc)
    return acc
