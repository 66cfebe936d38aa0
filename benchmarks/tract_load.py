"""Loading torch-to-nnef exports: nnefx vs tract's own loader vs nnefx on the nnef-tools export.

Networks (random-initialised, no downloads): ResNet-18 (torchvision's topology written out here:
stem, four stages of two basic blocks, 64..512 channels, 1000 classes; 11.7 M parameters) and a
small BERT-like encoder (embeddings, 4 post-norm layers of width 256, 4 heads, GELU MLP).  Each is
written three ways: torch-to-nnef's tract target (a folder), the same target as a ``.tgz``, and
torch → ONNX → NNEF through the official ``nnef-tools`` converter (ResNet-18 only: nnef-tools does
not convert the encoder's attention graph).

Each measurement runs in a fresh process (imports and one warm-up load of another copy are not
counted); a row is the median over ``--runs`` processes (the machine is shared: medians, and
the spread).  Columns:

* ``load`` — tract: ``tract.nnef().with_tract_transformers().load(path)``; nnefx: ``nnefx.load``
  (parse, check, shapes, weights memory-mapped);
* ``first run`` — load + ready + one inference: tract ``load(...).into_runnable().run``, nnefx
  ``Session(model).run`` (fast backend);
* ``heap`` — nnefx: tracemalloc peak over the load, and over load + first run (what Python and
  numpy allocate), in
  separate processes (tracing slows Python down several times: timed runs are not traced);
  ``rss`` — the rise of the resident-set peak (VmHWM) over the same span, for both (tract's
  allocations are invisible to tracemalloc).  Both against the weights' bytes.

Usage:  python benchmarks/tract_load.py [--runs 5] [--only resnet18|encoder]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CHILD = r"""
import json, sys, time, tracemalloc
import numpy as np
which, path, warm, shape, dtype, mode = (sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5],
                                        sys.argv[6])
x = (np.random.default_rng(0).integers(0, 50, shape) if dtype == "i64" else
     np.random.default_rng(0).standard_normal(shape)).astype(np.int64 if dtype == "i64" else np.float32)
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
if which == "tract":
    import tract
    def load(p):
        return tract.nnef().with_tract_transformers().load(p)
    def first(m):
        return m.into_runnable().run([x])[0].to_numpy()
else:
    import nnefx
    def load(p):
        return nnefx.load(p)
    def first(m):
        return next(iter(nnefx.Session(m).run({m.graph.inputs[0]: x}).values()))
first(load(warm))                               # imports, registries, library: not counted
with open("/proc/self/clear_refs", "w") as f:   # reset VmHWM to the current RSS
    f.write("5")
base = status("VmRSS")
traced = which != "tract" and mode == "mem"   # tracing slows Python down: timed runs are not traced
if traced:
    tracemalloc.start()
t0 = time.perf_counter()
model = load(path)
t1 = time.perf_counter()
heap_load = tracemalloc.get_traced_memory()[1] if traced else None
y = first(model)
t2 = time.perf_counter()
heap = tracemalloc.get_traced_memory()[1] if traced else None
print(json.dumps({"load": t1 - t0, "first": t2 - t0, "heap": heap, "heap_load": heap_load, "rss": status("VmHWM") - base,
                  "sum": float(np.asarray(y, np.float64).sum())}))
"""


def _resnet18():
    from test_torch_to_nnef_tract import ResNet18  # torchvision's ResNet-18 topology, written out

    return ResNet18(width=64, classes=1000)


def _encoder():
    from test_torch_to_nnef_tract import Encoder

    return Encoder(vocab=1000, d=256, heads=4, layers=4, length=32)


NETWORKS = {"resnet18": (_resnet18, (1, 3, 224, 224), "f32"), "encoder": (_encoder, (1, 32), "i64")}


def _weights(folder: Path) -> int:
    """Bytes of tensor data (the payload of every .dat file, less its 128-byte header)."""
    return sum(max(0, p.stat().st_size - 128) for p in folder.rglob("*.dat"))


def _prepare(name: str, tmp: Path) -> dict:
    import torch

    from _t2n import export

    make, shape, dtype = NETWORKS[name]
    torch.manual_seed(0)
    net = make().eval()
    for mod in net.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
    x = torch.randint(0, 50, shape) if dtype == "i64" else torch.randn(*shape)
    paths = {"t2n": export(net, (x,), tmp, name), "t2n_tgz": export(net, (x,), tmp, name + "_a", archive=True)}
    if name == "resnet18":
        from realnets.convert import export_onnx, onnx_to_nnef

        paths["nnef_tools"] = onnx_to_nnef(export_onnx(net, x, tmp / f"{name}.onnx"), tmp / f"{name}_nt")
    warm = export(net, (x,), tmp, name + "_warm")
    return {"paths": paths, "warm": warm, "shape": shape, "dtype": dtype, "weights": _weights(paths["t2n"])}


def _child(which: str, path: Path, warm: Path, shape, dtype, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(path), str(warm), json.dumps(list(shape)), dtype,
                          mode],
                         check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row (median kept)")
    parser.add_argument("--only", choices=sorted(NETWORKS), help="one network")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus; "
          f"median of {args.runs} processes (min-max)")
    print(f"{'network':<10}{'file':<12}{'loader':<7}{'load ms':>18}{'first run ms':>20}"
          f"{'heap/w load':>12}{'heap/w run':>11}{'rss/w':>7}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name in [args.only] if args.only else list(NETWORKS):
            prep = _prepare(name, tmp)
            rows = [("t2n", "tract"), ("t2n", "nnefx"), ("t2n_tgz", "tract"), ("t2n_tgz", "nnefx")]
            if "nnef_tools" in prep["paths"]:
                rows.append(("nnef_tools", "nnefx"))
            sums = {}
            for kind, which in rows:
                args_ = (which, prep["paths"][kind], prep["warm"], prep["shape"], prep["dtype"])
                res = [_child(*args_, "time") for _ in range(args.runs)]
                mem = [_child(*args_, "mem") for _ in range(max(1, args.runs // 2))]
                sums[(kind, which)] = res[0]["sum"]

                def col(key, scale=1000.0, res=res):
                    vals = [r[key] * scale for r in res]
                    return f"{statistics.median(vals):.0f} ({min(vals):.0f}-{max(vals):.0f})"

                w = prep["weights"]
                heap = "-" if mem[0]["heap"] is None else f"{statistics.median(r['heap'] for r in mem) / w:.2f}x"
                heap_load = "-" if mem[0]["heap"] is None else \
                    f"{statistics.median(r['heap_load'] for r in mem) / w:.2f}x"
                rss = f"{statistics.median(r['rss'] for r in res + mem) / w:.2f}x"
                print(f"{name:<10}{kind:<12}{which:<7}{col('load'):>18}{col('first'):>20}{heap_load:>12}{heap:>11}"
                      f"{rss:>7}")
            print(f"{name}: weights {prep['weights'] / 2**20:.1f} MiB; output sums "
                  + ", ".join(f"{k[0]}/{k[1]} {v:.4f}" for k, v in sums.items()))
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
