"""IR v11 networks: nnefx load/compile/run times next to OpenVINO's, on an OpenVINO-written file.

Builds a ResNet-style CNN with OpenVINO's Python opsets (stem conv, residual blocks of
conv → batch norm → relu, pooling, a 1x1 projection, global average pool, dense head), saves
it as IR v11 (``--fp16`` for compressed weights), then times:

* ``nnefx.load`` (XML parse + mapping; weights memory-mapped) — best of ``--repeats``;
* ``Session`` construction (plan compile) and ``Session.run`` (fast backend) — median;
* OpenVINO ``read_model`` + ``compile_model`` and inference (CPU plugin, f32) — median;

and checks both give the same outputs first.  Usage::

    .venv/bin/python benchmarks/ir.py --channels 64 --size 56 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def build(path: str, channels: int, size: int, fp16: bool) -> None:
    import openvino as ov
    import openvino.opset8 as o8
    import openvino.opset13 as o

    rng = np.random.RandomState(0)

    def w(*shape):
        return (rng.randn(*shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    def bn(x, c):
        return o.batch_norm_inference(x, rng.rand(c).astype(np.float32) + 0.5, rng.randn(c).astype(np.float32) * 0.1,
                                      rng.randn(c).astype(np.float32) * 0.1, rng.rand(c).astype(np.float32) + 0.5,
                                      1e-5)

    def conv(x, cin, cout, k=3, s=1):
        p = k // 2
        return o.convolution(x, w(cout, cin, k, k), [s, s], [p, p], [p, p], [1, 1])

    x = o.parameter([1, 3, size, size], np.float32, name="image")
    c = channels
    h = o.relu(bn(conv(x, 3, c, 3, 2), c))
    h = o8.max_pool(h, [2, 2], [1, 1], [0, 0], [0, 0], [3, 3], "ceil").output(0)
    for stage in range(3):
        cin, cout = c * 2 ** max(stage - 1, 0), c * 2 ** stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            i = cin if block == 0 else cout
            y = o.relu(bn(conv(h, i, cout, 3, stride), cout))
            y = bn(conv(y, cout, cout), cout)
            skip = h if (i == cout and stride == 1) else bn(conv(h, i, cout, 1, stride), cout)
            h = o.relu(o.add(y, skip))
    g = o.reduce_mean(h, np.array([2, 3], np.int64), False)
    out = o.add(o.matmul(g, w(10, c * 4), False, True), np.zeros(10, np.float32))
    out = o8.softmax(out, -1)
    out.output(0).get_tensor().set_names({"probs"})
    ov.save_model(ov.Model([out], [x], "resnet_like"), path, compress_to_fp16=fp16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--fp16", action="store_true")
    args = ap.parse_args()

    import openvino as ov

    import nnefx
    from nnefx.runtime.session import Session

    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "net.xml")
    build(path, args.channels, args.size, args.fp16)
    xml_kb = os.path.getsize(path) / 1024
    bin_mb = os.path.getsize(path[:-4] + ".bin") / 2 ** 20
    x = np.random.RandomState(1).rand(1, 3, args.size, args.size).astype(np.float32)

    loads = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        model = nnefx.load(path)
        loads.append(time.perf_counter() - t)
    t = time.perf_counter()
    session = Session(model)
    compile_s = time.perf_counter() - t
    got = session.run({"image": x})["probs"]
    runs = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        session.run({"image": x})
        runs.append(time.perf_counter() - t)

    core = ov.Core()
    t = time.perf_counter()
    cm = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    ov_compile = time.perf_counter() - t
    want = cm({"image": x})[cm.outputs[0]]
    ov_runs = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        cm({"image": x})
        ov_runs.append(time.perf_counter() - t)

    err = float(np.abs(got - want).max())
    print(f"model: resnet_like channels={args.channels} size={args.size} fp16={args.fp16} "
          f"xml={xml_kb:.0f} KiB bin={bin_mb:.1f} MiB ops={len(model.graph.operations)}; max |nnefx - OpenVINO| = {err:.2e}")
    print(f"nnefx.load            best {min(loads) * 1e3:8.1f} ms")
    print(f"nnefx Session()       {compile_s * 1e3:8.1f} ms")
    print(f"nnefx run (fast)      median {statistics.median(runs) * 1e3:8.1f} ms")
    print(f"OpenVINO read+compile {ov_compile * 1e3:8.1f} ms")
    print(f"OpenVINO infer (CPU)  median {statistics.median(ov_runs) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
