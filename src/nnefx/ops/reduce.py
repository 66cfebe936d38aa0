"""Reduce operations (NNEF 1.0.5 §4.4) and ``moments`` (§4.9.6).

Reduced axes keep extent 1 (the rank never changes); ``axes = []`` is the identity.
Arg-reductions over several axes return the row-major linear index inside the reduced
sub-volume; ties go to the first index.
"""

from __future__ import annotations

from .registry import define

sum_reduce = define("sum_reduce", "reduce", """
fragment sum_reduce( input: tensor<scalar>, axes: integer[], normalize: logical = false ) -> ( output: tensor<scalar> );
""")

max_reduce = define("max_reduce", "reduce", """
fragment max_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""")

min_reduce = define("min_reduce", "reduce", """
fragment min_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""")

argmax_reduce = define("argmax_reduce", "reduce", """
fragment argmax_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
""")

argmin_reduce = define("argmin_reduce", "reduce", """
fragment argmin_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<integer> );
""")

all_reduce = define("all_reduce", "reduce", """
fragment all_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
""")

any_reduce = define("any_reduce", "reduce", """
fragment any_reduce( input: tensor<logical>, axes: integer[] ) -> ( output: tensor<logical> );
""")

mean_reduce = define("mean_reduce", "reduce", """
fragment mean_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> )
{
    output = sum_reduce(input, axes = axes, normalize = true);
}
""", compound=True)

moments = define("moments", "reduce", """
fragment moments( input: tensor<scalar>, axes: integer[] ) -> ( mean: tensor<scalar>, variance: tensor<scalar> )
{
    mean = mean_reduce(input, axes = axes);
    variance = mean_reduce(sqr(input - mean), axes = axes);
}
""", compound=True)
