"""Up- and down-sampling (NNEF 1.0.5 §4.3): ``factor`` has one entry per spatial dimension.

``nearest_downsample``, ``area_downsample`` and ``nearest_upsample`` are compounds over
``box``/``debox``; ``multilinear_upsample`` is primitive.
"""

from __future__ import annotations

from .registry import define

nearest_downsample = define("nearest_downsample", "resize", """
fragment nearest_downsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = box(input, size = [1] * dims, stride = [1,1] + factor, padding = [(0,0)] * dims);
}
""", compound=True)

area_downsample = define("area_downsample", "resize", """
fragment area_downsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = box(input, size = [1,1] + factor, stride = [1,1] + factor, padding = [(0,0)] * dims, normalize = true);
}
""", compound=True)

nearest_upsample = define("nearest_upsample", "resize", """
fragment nearest_upsample( input: tensor<scalar>, factor: integer[] ) -> ( output: tensor<scalar> )
{
    dims = 2 + length_of(factor);
    output = debox(input, size = [1,1] + factor, stride = [1,1] + factor, padding = [(0,0)] * dims);
}
""", compound=True)

multilinear_upsample = define("multilinear_upsample", "resize", """
fragment multilinear_upsample(
    input: tensor<scalar>,
    factor: integer[],
    method: string = 'symmetric',
    border: string = 'replicate' )
-> ( output: tensor<scalar> );
""")
