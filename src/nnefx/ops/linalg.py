"""Matrix multiplication (NNEF 1.0.5 §4.7) and ``linear`` (§4.9.2)."""

from __future__ import annotations

from .registry import define

matmul = define("matmul", "linalg", """
fragment matmul( A: tensor<scalar>, B: tensor<scalar>, transposeA: logical = false, transposeB: logical = false ) -> ( C: tensor<scalar> );
""")

linear = define("linear", "linalg", """
fragment linear(
    input: tensor<scalar>,
    filter: tensor<scalar>,
    bias: tensor<scalar> = 0.0 )
-> ( output: tensor<scalar> )
{
    output = matmul(input, filter, transposeB = true) + bias;
}
""", compound=True)
