"""Fast-backend run time of a float32 ResNet of two source trees, alternated in fresh processes (A/B).

For changes to the kernels or the planner that must not slow float32 networks: exports the
ResNet of ``benchmarks/resnet_torch.py`` with torch (ONNX, then NNEF through nnef-tools, as
``benchmarks/run.py`` does), then for ``--rounds`` rounds runs it with each tree's ``nnefx``
(``PYTHONPATH`` = the tree's ``src``, order swapped every round) on the fast backend,
``--runs`` timed runs after two warm-up runs, and reports per tree the best and median CPU time
(``time.process_time``: less disturbed by other jobs on a shared machine than wall time) and
the best wall time over all rounds, with the two trees' outputs compared.  Usage::

    git worktree add /tmp/base main        # or any checkout of the version to compare with
    .venv/bin/python benchmarks/run_ab.py --trees /tmp/base . --rounds 6 --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
from nnefx.blas import configure
configure("auto")
import numpy as np
import nnefx
path, n, batch, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
session = nnefx.Session(nnefx.load(path), backend="fast")
x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
for _ in range(2):
    y = session.run({"input": x})["output"]
walls, cpus = [], []
for _ in range(n):
    t, c = time.perf_counter(), time.process_time()
    session.run({"input": x})
    walls.append(time.perf_counter() - t)
    cpus.append(time.process_time() - c)
print(min(walls), " ".join(map(repr, cpus)), float(np.sum(y, dtype=np.float64)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", nargs=2, required=True, metavar=("A", "B"), help="two source trees (repository roots)")
    ap.add_argument("--depth", type=int, default=18)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from run import prepare  # noqa: E402 - the exporter of benchmarks/run.py

    with tempfile.TemporaryDirectory() as tmp:
        _, nnef_path = prepare(args.depth, args.batch, args.size, Path(tmp))
        walls: dict[str, list[float]] = {t: [] for t in args.trees}
        cpus: dict[str, list[float]] = {t: [] for t in args.trees}
        sums: dict[str, float] = {}
        for r in range(args.rounds):
            for tree in args.trees if r % 2 == 0 else args.trees[::-1]:
                env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(tree), "src"))
                out = subprocess.run([sys.executable, "-c", CHILD, str(nnef_path), str(args.runs), str(args.batch),
                                      str(args.size)], env=env, check=True, capture_output=True, text=True)
                wall, cpu_text, total = out.stdout.split()[0], out.stdout.split()[1:-1], out.stdout.split()[-1]
                walls[tree].append(float(wall))
                cpus[tree].extend(float(c) for c in cpu_text)
                sums[tree] = float(total)
    print(f"ResNet-{args.depth} batch {args.batch} {args.size}x{args.size}, fast backend, float32; "
          f"{args.rounds} rounds x {args.runs} runs")
    print("| tree | best CPU ms | median CPU ms | best wall ms | output sum |")
    print("|---|---:|---:|---:|---:|")
    for tree in args.trees:
        print(f"| {tree} | {min(cpus[tree]) * 1e3:.1f} | {statistics.median(cpus[tree]) * 1e3:.1f} | "
              f"{min(walls[tree]) * 1e3:.1f} | {sums[tree]:.6f} |")


if __name__ == "__main__":
    main()
