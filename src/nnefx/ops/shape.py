"""Tensor shape operations (NNEF 1.0.5 §4.5): reshape, squeeze, unsqueeze, transpose, split,
concat, stack, unstack, slice, pad, tile, gather, cast.

All but ``pad`` are generic (``<?>``): they move data without looking at it.
"""

from __future__ import annotations

from .registry import define

reshape = define("reshape", "shape", """
fragment reshape<?>( input: tensor<?>, shape: integer[], axis_start: integer = 0, axis_count: integer = -1 ) -> ( output: tensor<?> );
""", generic=True)

squeeze = define("squeeze", "shape", """
fragment squeeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

unsqueeze = define("unsqueeze", "shape", """
fragment unsqueeze<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

transpose = define("transpose", "shape", """
fragment transpose<?>( input: tensor<?>, axes: integer[] ) -> ( output: tensor<?> );
""", generic=True)

split = define("split", "shape", """
fragment split<?>( value: tensor<?>, axis: integer, ratios: integer[] ) -> ( values: tensor<?>[] );
""", generic=True)

concat = define("concat", "shape", """
fragment concat<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
""", generic=True)

stack = define("stack", "shape", """
fragment stack<?>( values: tensor<?>[], axis: integer ) -> ( value: tensor<?> );
""", generic=True)

unstack = define("unstack", "shape", """
fragment unstack<?>( value: tensor<?>, axis: integer ) -> ( values: tensor<?>[] );
""", generic=True)

slice_ = define("slice", "shape", """
fragment slice<?>( input: tensor<?>, axes: integer[], begin: integer[], end: integer[], stride: integer[] = [] ) -> ( output: tensor<?> );
""", generic=True)

pad = define("pad", "shape", """
fragment pad( input: tensor<scalar>, padding: (integer,integer)[], border: string = 'constant', value: scalar = 0.0 ) -> ( output: tensor<scalar> );
""")

tile = define("tile", "shape", """
fragment tile<?>( input: tensor<?>, repeats: integer[] ) -> ( output: tensor<?> );
""", generic=True)

gather = define("gather", "shape", """
fragment gather<?>( input: tensor<?>, indices: tensor<integer>, axis: integer = 0 ) -> ( output: tensor<?> );
""", generic=True)

cast = define("cast", "shape", """
fragment cast<?>( input: tensor<> ) -> ( output: tensor<?> );
""", generic=True)
