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
