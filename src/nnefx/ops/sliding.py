"""Sliding-window operations (NNEF 1.0.5 §4.3) and the pooling compounds (§4.9.3).

Conventions (spec §4.3): *basic* operations (``conv``, ``box``, ``argmax_pool``, ``sample``,
pools) map the up-scaled input to a down-scaled output, *reverse* operations (``deconv``,
``debox``, ``desample``) map down-scaled to up-scaled.  ``padding``/``stride``/``dilation``
are always in up-scaled space.  ``conv``/``deconv`` arrays have one entry per *spatial*
dimension; ``box``/``debox``/``argmax_pool``/``sample``/``desample`` and the pools have one
entry per dimension (batch and channel included).
"""

from __future__ import annotations

from .registry import define

_WINDOW = """border: string = 'constant',
    padding: (integer,integer)[] = [],
    stride: integer[] = [],
    dilation: integer[] = []"""

_PASS = "border = border, padding = padding, stride = stride, dilation = dilation"

conv = define("conv", "sliding", f"""
fragment conv(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    groups: integer = 1 )
-> ( output: tensor<scalar> );
""")

deconv = define("deconv", "sliding", f"""
fragment deconv(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    output_shape: integer[] = [],
    groups: integer = 1 )
-> ( output: tensor<scalar> );
""")

box = define("box", "sliding", f"""
fragment box(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW},
    normalize: logical = false )
-> ( output: tensor<scalar> );
""")

debox = define("debox", "sliding", f"""
fragment debox(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW},
    output_shape: integer[] = [],
    normalize: logical = false )
-> ( output: tensor<scalar> );
""")

argmax_pool = define("argmax_pool", "sliding", f"""
fragment argmax_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( index: tensor<integer> );
""")

sample = define("sample", "sliding", f"""
fragment sample(
    input: tensor<scalar>,
    index: tensor<integer>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> );
""")

desample = define("desample", "sliding", f"""
fragment desample(
    input: tensor<scalar>,
    index: tensor<integer>,
    size: integer[],
    {_WINDOW},
    output_shape: integer[] = [] )
-> ( output: tensor<scalar> );
""")

# --- pooling compounds (§4.9.3) -----------------------------------------------------------

max_pool_with_index = define("max_pool_with_index", "sliding", f"""
fragment max_pool_with_index(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar>, index: tensor<integer> )
{{
    index = argmax_pool(input, size = size, {_PASS});
    output = sample(input, index, size = size, {_PASS});
}}
""", compound=True)

max_pool = define("max_pool", "sliding", f"""
fragment max_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output, index = max_pool_with_index(input, size = size, {_PASS});
}}
""", compound=True)

avg_pool = define("avg_pool", "sliding", f"""
fragment avg_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output = box(input, size = size, {_PASS}, normalize = true);
}}
""", compound=True)

rms_pool = define("rms_pool", "sliding", f"""
fragment rms_pool(
    input: tensor<scalar>,
    size: integer[],
    {_WINDOW} )
-> ( output: tensor<scalar> )
{{
    output = sqrt(avg_pool(sqr(input), size = size, {_PASS}));
}}
""", compound=True)

# --- separable convolutions (§4.9.2) ------------------------------------------------------

separable_conv = define("separable_conv", "sliding", f"""
fragment separable_conv(
    input: tensor<scalar>,
    plane_filter: tensor<scalar>,
    point_filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    groups: integer = 1 )
-> ( output: tensor<scalar> )
{{
    filtered = conv(input, plane_filter, {_PASS}, groups = 0);
    output = conv(filtered, point_filter, bias, groups = groups);
}}
""", compound=True)

separable_deconv = define("separable_deconv", "sliding", f"""
fragment separable_deconv(
    input: tensor<scalar>,
    plane_filter: tensor<scalar>,
    point_filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0,
    {_WINDOW},
    output_shape: integer[] = [],
    groups: integer = 1 )
-> ( output: tensor<scalar> )
{{
    filtered = deconv(input, point_filter, groups = groups);
    output = deconv(filtered, plane_filter, bias, {_PASS}, output_shape = output_shape, groups = 0);
}}
""", compound=True)
