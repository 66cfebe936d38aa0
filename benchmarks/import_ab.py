"""IR and ONNX import time of two source trees, alternated in fresh processes (A/B).

For changes to the format wing (readers, the import layer): builds the ResNet-style IR v11
network of ``benchmarks/ir.py`` with OpenVINO, writes it as ONNX with nnefx, then for
``--rounds`` rounds loads each file with each tree's ``nnefx`` in a fresh process (``PYTHONPATH``
= the tree's ``src``), ``--loads`` times after one warm-up load, and reports per tree and
format the best CPU time (``time.process_time``: less disturbed by other jobs on a shared
machine than wall time) and the best wall time over all rounds.  Usage::

    git worktree add /tmp/base main        # or any checkout of the version to compare with
    .venv/bin/python benchmarks/import_ab.py --trees /tmp/base . --rounds 6 --loads 40
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time
import nnefx
path, n = sys.argv[1], int(sys.argv[2])
nnefx.load(path)
wall = cpu = float("inf")
for _ in range(n):
    t, c = time.perf_counter(), time.process_time()
    nnefx.load(path)
    wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
print(wall, cpu)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", nargs=2, required=True, metavar=("A", "B"), help="two source trees (repository roots)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--loads", type=int, default=40)
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, os.pardir, "src"))
    sys.path.insert(0, here)
    import ir  # noqa: E402 - the network builder of benchmarks/ir.py

    import nnefx  # noqa: E402

    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "net.xml")
        ir.build(xml, 32, 56, False)
        onnx_path = os.path.join(tmp, "net.onnx")
        nnefx.save(nnefx.load(xml), onnx_path)
        best: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for path in (xml, onnx_path):
                for tree in args.trees:
                    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(tree), "src"))
                    out = subprocess.run([sys.executable, "-c", CHILD, path, str(args.loads)], env=env, check=True,
                                         capture_output=True, text=True).stdout.split()
                    wall, cpu = float(out[0]), float(out[1])
                    key = (tree, os.path.splitext(path)[1][1:])
                    old = best.get(key, [float("inf"), float("inf")])
                    best[key] = [min(old[0], wall), min(old[1], cpu)]
    print(f"{'tree':40s} {'format':6s} {'best CPU ms':>11s} {'best wall ms':>12s}")
    for (tree, fmt), (wall, cpu) in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{tree:40s} {fmt:6s} {cpu * 1e3:11.2f} {wall * 1e3:12.2f}")


if __name__ == "__main__":
    main()
