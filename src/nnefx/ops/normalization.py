"""Normalization operations (NNEF 1.0.5 §4.9.4, all compound).

``size`` arrays are full-rank (cross-channel LRN is ``size = [1, n, 1, 1]``); the inner
``box`` uses its defaults, i.e. automatic padding and a zero (``'constant'``) border.
"""

from __future__ import annotations

from .registry import define

local_response_normalization = define("local_response_normalization", "normalization", """
fragment local_response_normalization(
    input: tensor<scalar>,
    size: integer[],
    alpha: scalar = 1.0,
    beta: scalar = 0.5,
    bias: scalar = 1.0 )
-> ( output: tensor<scalar> )
{
    sigma = bias + alpha * box(sqr(input), size = size, normalize = true);
    output = input / (sigma ^ beta);
}
""", compound=True)

local_mean_normalization = define("local_mean_normalization", "normalization", """
fragment local_mean_normalization( input: tensor<scalar>, size: integer[] ) -> ( output: tensor<scalar> )
{
    mean = box(input, size = size, normalize = true);
    output = sub(input, mean);
}
""", compound=True)

local_variance_normalization = define("local_variance_normalization", "normalization", """
fragment local_variance_normalization(
    input: tensor<scalar>,
    size: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sqrt(box(sqr(input), size = size, normalize = true));
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

local_contrast_normalization = define("local_contrast_normalization", "normalization", """
fragment local_contrast_normalization(
    input: tensor<scalar>,
    size: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    centered = local_mean_normalization(input, size = size);
    output = local_variance_normalization(centered, size = size, bias = bias, epsilon = epsilon);
}
""", compound=True)

l1_normalization = define("l1_normalization", "normalization", """
fragment l1_normalization(
    input: tensor<scalar>,
    axes: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sum_reduce(abs(input), axes = axes);
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

l2_normalization = define("l2_normalization", "normalization", """
fragment l2_normalization(
    input: tensor<scalar>,
    axes: integer[],
    bias: scalar = 0.0,
    epsilon: scalar = 0.0 )
-> ( output: tensor<scalar> )
{
    sigma = sqrt(sum_reduce(sqr(input), axes = axes));
    output = input / max(sigma + bias, epsilon);
}
""", compound=True)

batch_normalization = define("batch_normalization", "normalization", """
fragment batch_normalization(
    input: tensor<scalar>,
    mean: tensor<scalar>,
    variance: tensor<scalar>,
    offset: tensor<scalar>,
    scale: tensor<scalar>,
    epsilon: scalar )
-> ( output: tensor<scalar> )
{
    output = offset + scale * (input - mean) / sqrt(variance + epsilon);
}
""", compound=True)
