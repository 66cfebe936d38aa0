"""Export speed: nnefx graphs written as IR v11 and as ONNX, in memory.

Builds a ResNet-style network with ``GraphBuilder`` (stem convolution, ``--blocks`` residual
blocks of conv → batch norm → relu with an element-wise tail — ``clamp``, ``abs``, ``rcp``,
``silu`` — max and average pooling with border padding, a dense head with
softmax), plus the committed digits example model, then times ``nnefx.save`` to ``.xml``
(IR v11) and to ``.onnx`` in a temporary folder (the public API; the files are small, so
the writers' translation dominates).  Reports the median of ``--repeats`` runs after one
warm-up, in CPU time of this process (``time.process_time``: on a shared, loaded machine wall
time mostly measures the wait for a core).  Usage::

    .venv/bin/python benchmarks/export.py --blocks 16 --repeats 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import nnefx
from nnefx.io.builder import GraphBuilder


def network(blocks: int, channels: int = 32, size: int = 28):
    rng = np.random.default_rng(0)
    b = GraphBuilder("export_bench")

    count = [0]

    def w(*shape):
        count[0] += 1
        return b.variable(f"w{count[0]}", rng.uniform(-0.1, 0.1, shape).astype(np.float32))

    x = b.external("x", shape=(1, 3, size, size))
    y = b.op("relu", b.op("conv", x, w(channels, 3, 3, 3), w(1, channels), padding=[(1, 1), (1, 1)]))
    for _ in range(blocks):
        z = b.op("conv", y, w(channels, channels, 3, 3), w(1, channels), padding=[(1, 1), (1, 1)])
        z = b.op("batch_normalization", z, w(1, channels), w(1, channels), w(1, channels), w(1, channels),
                 epsilon=1e-5)
        z = b.op("clamp", b.op("relu", z), 0.0, 6.0)
        z = b.op("add", z, b.op("silu", b.op("rcp", b.op("add", b.op("abs", z), 1.0))))
        y = b.op("add", y, z)
    y = b.op("max_pool", y, size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border="constant")
    y = b.op("avg_pool", y, size=[1, 1, 2, 2], stride=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (0, 1), (0, 1)],
             border="replicate")
    y = b.op("reshape", b.op("mean_reduce", y, axes=[2, 3]), shape=[1, channels])
    y = b.op("softmax", b.op("linear", y, w(10, channels), w(1, 10)))
    b.output(y, name="y")
    return b.build()


def timed(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        samples.append(time.process_time() - t)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    digits = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")
    models = {f"resnet-like ({args.blocks} blocks)": network(args.blocks), "digits example": nnefx.load(digits)}
    print(f"{'model':28} {'ops':>5} {'IR v11':>10} {'ONNX':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models.items():
            ir_s = timed(lambda m=model: nnefx.save(m, os.path.join(tmp, "m.xml")), args.repeats)
            onnx_s = timed(lambda m=model: nnefx.save(m, os.path.join(tmp, "m.onnx")), args.repeats)
            print(f"{name:28} {len(model.graph.operations):5} {ir_s * 1e3:8.1f} ms {onnx_s * 1e3:8.1f} ms")

if __name__ == "__main__":
    main()
