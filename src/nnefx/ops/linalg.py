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


# =============================================================================================
# Shape rules and kernels
# =============================================================================================
#
# Formal ``matmul`` forms each dot product in float64 (float32 products are exact there) and
# rounds once; fast uses float32 BLAS through numpy, whose error is bounded by about
# k * eps32 * sum(|a| * |b|) for inner extent k.

import numpy as np  # noqa: E402

from ._common import broadcast_index, broadcast_shapes, float_type, op_error, scalar  # noqa: E402


def _mat_dims(shape, transposed):
    rows, cols = shape[-2], shape[-1]
    return (cols, rows) if transposed else (rows, cols)


@matmul.shape
def _matmul_shape(A, B, transposeA=False, transposeB=False):
    A, B = tuple(A), tuple(B)
    if len(A) != len(B) or len(A) < 2:
        raise op_error("matmul", f"operands must have equal ranks >= 2, got {A} and {B}")
    m, k1 = _mat_dims(A, transposeA)
    k2, n = _mat_dims(B, transposeB)
    if k1 is not None and k2 is not None and k1 != k2:
        raise op_error("matmul", f"inner dimensions differ: {k1} vs {k2} (shapes {A} and {B}, "
                                 f"transposeA={transposeA}, transposeB={transposeB})")
    batch = broadcast_shapes("matmul", A[:-2], B[:-2])
    return batch + (m, n)


@matmul.formal
def _matmul_formal(A, B, transposeA=False, transposeB=False):
    """C[..., i, j] = sum_l A'[..., i, l] * B'[..., l, j]; float64 products and sums, one rounding."""
    a, b = scalar(A), scalar(B)
    shape = _matmul_shape(a.shape, b.shape, transposeA, transposeB)
    if transposeA:
        a = np.swapaxes(a, -1, -2)
    if transposeB:
        b = np.swapaxes(b, -1, -2)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    out = np.empty(shape, float_type())
    for index in np.ndindex(*shape[:-1]):
        batch, i = index[:-1], index[-1]
        row = a64[broadcast_index(batch, a.shape[:-2]) + (i,)]  # A'[..., i, :]
        cols = b64[broadcast_index(batch, b.shape[:-2])]  # B'[..., :, :]
        for j in range(shape[-1]):
            out[index + (j,)] = np.dot(row, cols[:, j])
    return out


@matmul.fast
def _matmul_fast(A, B, transposeA=False, transposeB=False):
    a, b = scalar(A), scalar(B)
    _matmul_shape(a.shape, b.shape, transposeA, transposeB)
    if transposeA:
        a = np.swapaxes(a, -1, -2)
    if transposeB:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b).astype(float_type(), copy=False)


@linear.shape
def _linear_shape(input, filter, bias=()):
    input, filter = tuple(input), tuple(filter)
    if len(input) != 2 or len(filter) != 2:
        raise op_error("linear", f"input and filter must have rank 2, got {input} and {filter}")
    out = _matmul_shape(input, filter, False, True)
    return broadcast_shapes("linear", out, tuple(bias))


@linear.fast
def _linear_fast(input, filter, bias=0.0):
    x, w, b = scalar(input), scalar(filter), scalar(bias)
    _linear_shape(x.shape, w.shape, b.shape)
    y = x @ w.T
    return (y + (b.reshape(b.shape + (1,) * (2 - b.ndim)) if b.ndim < 2 else b)).astype(float_type(), copy=False)
