"""float64 computes in float64: every standard operation's kernels, both backends.

The accumulation contract (:mod:`nnefx.etypes`): a kernel computes at least as wide as its
element type.  A float64 operation runs its kernel with float64 as the working float type
(``ops._common.wide_floats``, installed by the planner for every operation reading or writing
an f64 tensor).  This sweep feeds each operation's sample (``_ops_samples``) as float64 whose
low bits float32 cannot hold, so a kernel that narrows anywhere to float32 is caught three ways:
its float results are not float64, or every one of them is a float32 value, or fast and formal
(independent definitions: numpy arrays vs per-item float64) differ by more than 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest

from _ops_samples import SAMPLES
from nnefx.ops import registry
from nnefx.ops._common import wide_floats

KERNELLED = [op for op in registry.all_ops("nnef") if op.name not in ("external", "variable")]
#: results that only select or count items (no float arithmetic can narrow them)
_NO_ARITHMETIC = {"constant", "cast", "logarithmic_quantize", "argmax_reduce", "argmin_reduce", "all_reduce", "any_reduce"}
_rng = np.random.default_rng(64)


def _wide(value):
    """float32 sample data as float64 with 2^-40-relative low bits float32 cannot hold."""
    if isinstance(value, list):
        return [_wide(v) for v in value]
    if isinstance(value, np.ndarray | np.floating) and np.asarray(value).dtype == np.float32:
        a = np.asarray(value, np.float64)
        return a * (1.0 + 2.0 ** -40 * _rng.uniform(1.0, 2.0, size=a.shape))
    return value


def _results(op, value):
    n_results = op.declaration.split("->", 1)[1].split("{")[0].count(":")
    if n_results > 1 or isinstance(value, list):
        return [np.asarray(r) for r in value]
    return [np.asarray(value)]


def _case(op):
    args, attrs = SAMPLES[op.name]
    if op.name in ("constant",):
        return args, attrs
    return _wide(args), attrs


@pytest.mark.parametrize("op", KERNELLED, ids=lambda op: op.name)
def test_float64_operation_computes_in_float64(op):
    args, attrs = _case(op)
    formal = _results(op, wide_floats(op.kernel("formal"))(*args, **attrs))
    fast = _results(op, wide_floats(op.kernel("fast"))(*args, **attrs))
    narrow = _results(op, op.kernel("formal")(*SAMPLES[op.name][0], **attrs))
    assert len(fast) == len(formal) == len(narrow)
    for a, b, c in zip(fast, formal, narrow, strict=True):
        assert a.shape == b.shape == c.shape
        if c.dtype != np.float32:
            np.testing.assert_array_equal(a, b)
            continue
        assert a.dtype == b.dtype == np.float64, (op.name, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300, err_msg=f"{op.name}: fast vs formal")
        np.testing.assert_allclose(b, c, rtol=1e-4, atol=1e-4, err_msg=f"{op.name}: float64 vs float32")
        finite = b[np.isfinite(b) & (b != np.round(b))]
        if op.name not in _NO_ARITHMETIC and finite.size:
            assert np.any(finite != finite.astype(np.float32)), f"{op.name}: every result is a float32 value"


def test_float64_convolution_of_winograd_size_stays_float64():
    """The fast conv takes Winograd for 3×3 convolutions of many channels; its work arrays are
    float32, so a float64 convolution of that size goes by im2col instead (checked against torch's
    float64 conv2d) — through ``prepared_conv``, as the fast backend's pass wraps constant filters."""
    torch = pytest.importorskip("torch")
    from nnefx.ops.sliding import prepared_conv

    x = _wide(np.random.default_rng(1).standard_normal((1, 256, 14, 14)).astype(np.float32))
    w = _wide((np.random.default_rng(2).standard_normal((256, 256, 3, 3)) / 50).astype(np.float32))
    y = prepared_conv(wide_floats(registry.get("conv").fast_kernel))(x, w, 0.0, padding=[(1, 1), (1, 1)])
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
