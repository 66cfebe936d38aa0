"""ONNX model loading: ``nnefx.load`` vs ``onnx.load`` on a model with ~100 MB of weights.

Two files of the same network (a chain of matmuls with float32 ``[1024, 1024]`` weights):
initializers stored in the ``.onnx`` file (``raw_data``), and the same weights as external
data beside it (one ``.data`` file).  Each measurement runs in a fresh subprocess after a
warm-up load of a tiny model (imports not counted): time = best of ``--repeat`` loads,
memory = one load under ``tracemalloc`` (Python + numpy heap) and the rise of the resident
set peak (``VmHWM``; memory-mapped pages read count there as page cache, not heap).  The
goal: ``nnefx.load`` no slower than ``onnx.load`` and a heap peak at most 1.1x the weights.
``load+touch`` also reads every weight once (a sum), so lazy mapping hides nothing.

Usage:  .venv/bin/python benchmarks/onnx_load.py [--mb 100] [--repeat 5]
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
which, path, tiny, touch, mode, repeat = sys.argv[1:6] + [int(sys.argv[6])]
touch = touch == "1"
if which == "onnx":
    import onnx
    from onnx import numpy_helper
    onnx.load(tiny)
    def load():
        m = onnx.load(path)
        return [numpy_helper.to_array(t) for t in m.graph.initializer] if touch else m
else:
    import nnefx
    nnefx.load(tiny)
    def load():
        m = nnefx.load(path)
        return [t.data for t in m.graph.tensors.values() if t.data is not None] if touch else m
def weigh(x):
    return sum(float(np.asarray(a, np.float64).sum()) for a in x) if touch else 0.0
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
if mode == "time":
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        x = load()
        weigh(x)
        times.append(time.perf_counter() - t0)
        del x
    print(json.dumps({"seconds": min(times)}))
else:
    base = status("VmRSS")
    tracemalloc.start()
    x = load()
    weigh(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"traced_peak": peak, "rss_rise": status("VmHWM") - base}))
"""


def make_models(root: str, megabytes: int) -> tuple[int, str, str, str]:
    """The embedded-weights model, the external-data one, a tiny warm-up model; weight bytes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = max(1, megabytes // 4)
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev = "input"
    for i in range(n):
        w = (rng.standard_normal((1024, 1024), dtype=np.float32) * 0.03).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"layer{i}.weight"))
        out = "output" if i == n - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"layer{i}.weight"], [out], name=f"matmul{i}"))
        prev = out
    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1024])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1024])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    embedded = os.path.join(root, "embedded.onnx")
    onnx.save(model, embedded)
    os.makedirs(os.path.join(root, "ext"))
    external = os.path.join(root, "ext", "external.onnx")
    onnx.save(model, external, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.data",
              size_threshold=0)
    tiny = os.path.join(root, "tiny.onnx")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tiny)
    return n * 1024 * 1024 * 4, embedded, external, tiny


def run_child(which: str, path: str, tiny: str, touch: bool, mode: str, repeat: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, which, path, tiny, "1" if touch else "0", mode, str(repeat)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="weights in MiB (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed loads per process; the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        weights, embedded, external, tiny = make_models(tmp, args.mb)
        print(f"model: {weights / 2**20:.0f} MiB of float32 weights in {weights // (4 << 20)} initializers; "
              f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus")
        print(f"{'loader':<12}{'file':<10}{'scenario':<12}{'best s':>8}{'traced peak':>14}{'rss rise':>11}"
              f"{'heap/weights':>14}")
        for touch in (False, True):
            for path, kind in ((embedded, "embedded"), (external, "external")):
                for which in ("onnx", "nnefx"):
                    best = run_child(which, path, tiny, touch, "time", args.repeat)["seconds"]
                    mem = run_child(which, path, tiny, touch, "mem")
                    traced, rss = mem["traced_peak"], mem["rss_rise"]
                    print(f"{which + '.load':<12}{kind:<10}{'load+touch' if touch else 'load':<12}{best:>8.3f}"
                          f"{traced / 2**20:>11.1f} MB{rss / 2**20:>8.1f} MB{traced / weights:>13.2f}x")
        print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
