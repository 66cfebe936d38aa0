"""What the OpenBLAS kernel choice is worth: float32 matrix products (sgemm) per core type.

Each core type runs in a fresh process (OpenBLAS picks its kernels once, when numpy loads
it), with ``nnefx.blas.configure(coretype)`` called before numpy is imported, as a user
would; ``unset`` leaves the choice to OpenBLAS.  Sizes: 2048³ and a ResNet-50 3×3
convolution as im2col (M=784 output positions, K=2304, N=256).  Prints GFLOP/s, best of
``--repeat`` after a warm-up.

Usage: env -u OPENBLAS_CORETYPE python benchmarks/blas.py [--coretypes unset,Haswell,SkylakeX]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
from nnefx import blas
coretype, repeat = sys.argv[1], int(sys.argv[2])
if coretype != "unset":
    blas.configure(coretype)
import numpy as np
rows = {}
for name, (m, k, n) in {"2048^3": (2048, 2048, 2048), "conv 784x2304x256": (784, 2304, 256)}.items():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b
    best = min((lambda t0: (a @ b, time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(repeat))
    rows[name] = 2 * m * k * n / best / 1e9
info = blas.blas_info()
print(json.dumps({"kernels": info.get("architecture"), "threads": info.get("threads"), "rows": rows}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--coretypes", default="unset,Haswell,SkylakeX")
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.setdefault("OPENBLAS_NUM_THREADS", "2")
    print("| configure() | kernels | threads | 2048³ GFLOP/s | conv 784×2304×256 GFLOP/s |")
    print("|---|---|---|---|---|")
    for coretype in args.coretypes.split(","):
        out = subprocess.run([sys.executable, "-c", CHILD, coretype, str(args.repeat)], env=env,
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows = list(r["rows"].values())
        print(f"| {coretype} | {r['kernels']} | {r['threads']} | {rows[0]:.0f} | {rows[1]:.0f} |", flush=True)


if __name__ == "__main__":
    main()
