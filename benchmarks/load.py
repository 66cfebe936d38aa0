"""Model loading: nnefx vs the official ``nnef`` package on a model with ~100 MB of weights.

Each measurement runs in a fresh subprocess (after a warm-up load without variables, so
imports and parser set-up are not counted) so that peak memory is the loader's own:
``tracemalloc`` peak (Python + numpy heap allocations) and the rise of the resident-set
peak (``VmHWM``, reset through ``/proc/self/clear_refs``) over the RSS before loading.
Memory-mapped pages that are read count in RSS but are file-backed page cache, not heap:
compare the traced peak for what the loader allocates.  Two scenarios:

* ``load``       — load the model (nnefx memory-maps big tensors, so pages are not read yet);
* ``load+touch`` — load and then read every weight (sum), which forces the data in, so
                   lazy mapping cannot hide work.

Usage:  .venv/bin/python benchmarks/load.py [--mb 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

CHILD = r"""
import json, sys, time, tracemalloc
import numpy as np
which, path, touch, mode, repeat = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], int(sys.argv[5])
if which == "nnef":
    import nnef
    nnef.load_graph(path, load_variables=False)            # warm-up: imports, parser
    load = lambda: [t.data for t in nnef.load_graph(path).tensors.values() if t.data is not None]
else:
    import nnefx
    nnefx.load(path, load_variables=False)                 # warm-up: imports, stdlib
    opts = {} if which == "nnefx" else {"mmap": False}
    load = lambda: [t.data for _, t in nnefx.load(path, **opts).graph.variables()]
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:   # reset the VmHWM peak to the current RSS
    f.write("5")
if mode == "time":                              # best of several, no tracing overhead
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        arrays = load()
        total = sum(float(a.sum()) for a in arrays) if touch else 0.0
        times.append(time.perf_counter() - t0)
        del arrays
    print(json.dumps({"seconds": min(times)}))
else:                                           # one traced run for memory
    base = status("VmRSS")
    tracemalloc.start()
    arrays = load()
    total = sum(float(a.sum()) for a in arrays) if touch else 0.0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"traced_peak": peak, "rss_rise": status("VmHWM") - base}))
"""


def make_model(root: str, megabytes: int) -> int:
    """A chain of matmuls whose [1024, 1024] float32 weights total ``megabytes`` MiB."""
    from nnefx.io.binary import write_tensor

    n = max(1, megabytes // 4)
    lines = ["version 1.0;", "", "graph bench( input ) -> ( output )", "{",
             "    input = external<scalar>(shape = [1, 1024]);"]
    prev = "input"
    rng = np.random.default_rng(0)
    for i in range(n):
        label = f"layer{i}/weight"
        lines.append(f"    w{i} = variable<scalar>(shape = [1024, 1024], label = '{label}');")
        out = "output" if i == n - 1 else f"h{i}"
        lines.append(f"    {out} = matmul({prev}, w{i});")
        prev = out
        os.makedirs(os.path.join(root, f"layer{i}"), exist_ok=True)
        write_tensor(os.path.join(root, label + ".dat"),
                     rng.standard_normal((1024, 1024), dtype=np.float32) * 0.01)
    lines.append("}")
    with open(os.path.join(root, "graph.nnef"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return n * 1024 * 1024 * 4


def run_child(which: str, path: str, touch: bool, mode: str, repeat: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, which, path, "1" if touch else "0", mode, str(repeat)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="weights in MiB (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per loader (in one process); the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "model")
        os.makedirs(folder)
        weights = make_model(folder, args.mb)
        import nnefx

        nnefx.save(nnefx.load(folder), os.path.join(tmp, "model.tar"))
        nnefx.save(nnefx.load(folder), os.path.join(tmp, "model.tgz"))
        print(f"model: {weights / 2**20:.0f} MiB of float32 weights in {weights // (4 << 20)} tensors; "
              f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus")
        print(f"{'loader':<22}{'scenario':<12}{'best s':>8}{'traced peak':>14}{'rss rise':>11}"
              f"{'peak/weights':>14}")
        cases = [("nnef", folder, "nnef.load_graph"), ("nnefx", folder, "nnefx (mmap)"),
                 ("nnefx-read", folder, "nnefx (mmap=False)"),
                 ("nnefx", os.path.join(tmp, "model.tar"), "nnefx .tar"),
                 ("nnefx", os.path.join(tmp, "model.tgz"), "nnefx .tgz")]
        for touch in (False, True):
            for which, path, title in cases:
                best = run_child(which, path, touch, "time", args.repeat)["seconds"]
                mem = run_child(which, path, touch, "mem")
                traced, rss = mem["traced_peak"], mem["rss_rise"]
                ratio = max(traced, rss) / weights
                print(f"{title:<22}{'load+touch' if touch else 'load':<12}{best:>8.3f}"
                      f"{traced / 2**20:>11.1f} MB{rss / 2**20:>8.1f} MB{ratio:>13.2f}x")
        print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
