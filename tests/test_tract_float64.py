"""tract-dialect documents with float64 inputs (``datum_type = 'f64'``) compute in float64 on
both backends and agree with tract itself (its Python bindings), which computes f64 graphs in
f64: each result within 1e-12 relative of tract's, where a float32 step anywhere would miss
by ~1e-8 (the inputs carry low bits float32 cannot hold).  (tract refuses ``sigmoid`` of f64
at run time, "Sigmoid does not support F64", so it is not among the cases.)"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx

tract = pytest.importorskip("tract")
from test_tract_read_etypes import _folder  # noqa: E402 - the typed document builder (f64 inputs)

RNG = np.random.default_rng(64)


def _f64(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape) * (1.0 + 2.0 ** -40 * RNG.uniform(1.0, 2.0, shape))


X, Y, P = _f64(3, 8), _f64(3, 8), _f64(3, 8, lo=0.1, hi=3.0)
IMG, FILT = _f64(1, 2, 6, 5), _f64(3, 2, 3, 3)

CASES = [
    ("y = add(x0, x1);", [X, Y]), ("y = mul(x0, 0.5);", [X]), ("y = div(x0, x1);", [X, P]),
    ("y = exp(x0);", [X]), ("y = log(x0);", [P]), ("y = tanh(x0);", [X]),
    ("y = sqrt(x0);", [P]), ("y = rsqrt(x0);", [P]), ("y = pow(x0, x1);", [P, X]), ("y = relu(x0);", [X]),
    ("y = sum_reduce(x0, axes = [1]);", [X]), ("y = mean_reduce(x0, axes = [1]);", [X]),
    ("y = max_reduce(x0, axes = [0]);", [X]),
    ("y = matmul(x0, x1, transposeB = true);", [X, Y]),
    ("y = softmax(x0, axes = [1]);", [X]),
    ("y = conv(x0, x1, 0.0, padding = [(1, 1), (0, 1)]);", [IMG, FILT]),
    ("y = max_pool(x0, size = [1, 1, 2, 2], stride = [1, 1, 2, 2], border = 'ignore');", [IMG]),
    ("y = box(x0, size = [1, 1, 3, 3], border = 'constant', padding = [(0, 0), (0, 0), (1, 1), (1, 1)]);", [IMG]),
]


@pytest.mark.parametrize("body, inputs", CASES, ids=[f"{k}-{c[0][4:].split('(')[0]}" for k, c in enumerate(CASES)])
def test_f64_tract_document_computes_in_float64(tmp_path, body, inputs):
    folder = _folder(tmp_path, body, inputs)
    want = tract.nnef().load(folder).into_runnable().run(list(inputs))[0].to_numpy()
    assert want.dtype == np.float64
    model = nnefx.load(folder)
    feeds = {f"x{k}": a for k, a in enumerate(inputs)}
    for backend in ("formal", "fast"):
        got = nnefx.Session(model, backend=backend).run(feeds)["y"]
        assert got.dtype == np.float64, backend
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13, err_msg=backend)


def test_a_float_literal_keeps_its_value_where_tract_rounds_it_to_f32_first(tmp_path):
    """``mul(x, 0.1)`` of f64 ``x``: nnefx multiplies by the literal's value (0.1 as float64, the
    value the text writes); tract makes the literal an f32 tensor first, so it multiplies by
    float32(0.1) = 0.100000001490116...  A documented difference, pinned both ways."""
    folder = _folder(tmp_path, "y = mul(x0, 0.1);", [X])
    want = tract.nnef().load(folder).into_runnable().run([X])[0].to_numpy()
    np.testing.assert_array_equal(want, X * np.float64(np.float32(0.1)))
    model = nnefx.load(folder)
    for backend in ("formal", "fast"):
        np.testing.assert_array_equal(nnefx.Session(model, backend=backend).run({"x0": X})["y"], X * 0.1)
