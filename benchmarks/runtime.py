"""What the runtime itself costs and saves: compile time, per-run overhead, peak memory.

    .venv/bin/python benchmarks/runtime.py [--size 224] [--batch 1] [--repeats 5]

The network is a ResNet-18 (v1.5 layout, batch-norm folded into the convolutions) written
with nnefx's ``GraphBuilder`` and random weights — numpy only, no converter involved.  The
script reports, for the fast backend limited to 2 BLAS threads:

* ``Session`` construction time (front-end already done: planning, kernel lookup, folding);
* median run latency and the part of it spent outside kernels (input checks, the run loop,
  result checks), from the per-operation profile;
* peak traced heap (``tracemalloc``, which sees numpy's allocations) during one run, with
  intermediate tensors released after their last reader (the default) and with
  ``release=False`` (every intermediate kept until the run ends, as a naive interpreter does).

Kernel speed is the operator families' business and is compared with onnxruntime by
``benchmarks/run.py``; this script isolates the runtime layer.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import nnefx  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402
from nnefx.runtime.profile import Profile  # noqa: E402


def resnet18(size: int, seed: int = 0) -> nnefx.Model:
    """ResNet-18 with random (He-initialised) weights; residual branches scaled down so the
    activations stay in a sane range through 8 blocks."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("resnet18")
    counter = [0]

    def conv(x, cin, cout, k, stride, scale=1.0):
        counter[0] += 1
        n = counter[0]
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k)) * scale).astype(np.float32)
        bias = (rng.standard_normal((1, cout)) * 0.01).astype(np.float32)
        p = k // 2
        return b.op("conv", x, b.variable(f"conv{n}/filter", w), b.variable(f"conv{n}/bias", bias),
                    padding=[(p, p), (p, p)], stride=[stride, stride])

    x = b.external("input", shape=(1, 3, size, size))
    h = b.op("relu", conv(x, 3, 64, 7, 2))
    h = b.op("max_pool", h, size=[1, 1, 3, 3], stride=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (1, 1), (1, 1)])
    cin = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            body = b.op("relu", conv(h, cin, width, 3, s))
            body = conv(body, width, width, 3, 1, scale=0.3)
            skip = conv(h, cin, width, 1, s) if (s != 1 or cin != width) else h
            h = b.op("relu", b.op("add", body, skip))
            cin = width
    h = b.op("reshape", b.op("mean_reduce", h, axes=[2, 3]), shape=[0, -1])
    w = (rng.standard_normal((1000, 512)) * np.sqrt(1.0 / 512)).astype(np.float32)
    logits = b.op("linear", h, b.variable("fc/filter", w), b.variable("fc/bias", np.zeros((1, 1000), np.float32)))
    b.output(logits, name="logits")
    return b.build()


def peak_run_bytes(session: nnefx.Session, x: np.ndarray) -> int:
    session.run({"input": x})  # warm caches outside the measurement
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    session.run({"input": x})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    model = resnet18(args.size)
    shapes = {"input": (args.batch, 3, args.size, args.size)}
    x = np.random.default_rng(1).standard_normal(shapes["input"]).astype(np.float32)

    compile_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        session = nnefx.Session(model, input_shapes=shapes)
        compile_times.append(time.perf_counter() - t0)
    print(session.plan.summary())
    print(f"Session construction: {1e3 * min(compile_times):.1f} ms (best of 3)")

    session.run({"input": x})
    latencies = []
    profile = Profile()
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        session.run({"input": x}, profile=profile)
        latencies.append(time.perf_counter() - t0)
    overhead = (profile.total_seconds - profile.kernel_seconds) / profile.runs
    median = statistics.median(latencies)
    print(f"run latency: median {1e3 * median:.1f} ms over {args.repeats} runs; outside kernels "
          f"{1e3 * overhead:.2f} ms per run ({100 * overhead / median:.2f} %)")

    released = peak_run_bytes(session, x)
    kept = peak_run_bytes(nnefx.Session(model, input_shapes=shapes, release=False), x)
    weights = sum(t.data.nbytes for _, t in model.graph.variables())
    print(f"peak traced heap during a run: {released / 2**20:.1f} MiB with release after last use, "
          f"{kept / 2**20:.1f} MiB keeping every intermediate ({kept / max(released, 1):.1f}x); "
          f"weights {weights / 2**20:.1f} MiB (not counted: loaded before)")


if __name__ == "__main__":
    main()
