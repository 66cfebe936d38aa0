"""Fast vs formal kernels of the NNEF standard operations, one operation at a time.

Usage: ``.venv/bin/python benchmarks/ops.py [--repeats N]``

Each case checks that the two kernels agree (the property tests' bound), then reports the
median time of the fast kernel over ``--repeats`` calls and one formal call.  BLAS is limited
to one thread so figures are comparable on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from nnefx.ops import registry  # noqa: E402

rng = np.random.default_rng(0)


def f(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X = f(1, 32, 32, 32)
CASES = [
    ("conv 3x3 32->32 on 32x32", "conv", [X, f(32, 32, 3, 3), f(1, 32)], {}),
    ("conv 3x3 depth-wise stride 2", "conv", [X, f(32, 1, 3, 3), f(1, 32)], dict(groups=0, stride=[2, 2])),
    ("deconv 4x4 stride 2 32->16", "deconv", [f(1, 32, 16, 16), f(32, 16, 4, 4), f(1, 16)], dict(stride=[2, 2])),
    ("max_pool 3x3 stride 2", "max_pool", [X], dict(size=[1, 1, 3, 3], stride=[1, 1, 2, 2])),
    ("avg_pool 3x3 'ignore'", "avg_pool", [X], dict(size=[1, 1, 3, 3], border="ignore")),
    ("matmul 64x512 @ 512x256", "matmul", [f(64, 512), f(512, 256)], {}),
    ("softmax axis 1 (64x1000)", "softmax", [f(64, 1000)], {}),
    ("batch_normalization", "batch_normalization", [X, f(1, 32), np.abs(f(1, 32)) + 1, f(1, 32), f(1, 32)],
     dict(epsilon=1e-3)),
    ("multilinear_upsample x2", "multilinear_upsample", [f(1, 32, 16, 16)], dict(factor=[2, 2])),
    ("exp (32K elements)", "exp", [X], {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print("| case | fast (median) | formal (1 call) | formal / fast |")
    print("|---|---|---|---|")
    for label, name, tensors, attrs in CASES:
        op = registry.get(name)
        fast, formal = op.kernel("fast"), op.kernel("formal")
        t0 = time.perf_counter()
        ref = formal(*tensors, **attrs)
        t_formal = time.perf_counter() - t0
        out = fast(*tensors, **attrs)
        assert np.allclose(out, ref, rtol=1e-4, atol=1e-4), label
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fast(*tensors, **attrs)
            times.append(time.perf_counter() - t0)
        t_fast = statistics.median(times)
        print(f"| {label} | {t_fast * 1e3:.2f} ms | {t_formal * 1e3:.0f} ms | {t_formal / t_fast:.0f}x |")


if __name__ == "__main__":
    main()
