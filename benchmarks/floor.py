"""How close numpy + OpenBLAS can get to onnxruntime on the ResNets of ``benchmarks/run.py``.

    python benchmarks/floor.py [--nets 18,50] [--batches 1,8] [--repeats 15] [--work DIR] [--jit]

Issue 4 asks for nnefx's fast backend within 1.5× of onnxruntime.  This script measures the
three numbers that decide whether that is reachable with the fast kernels' design
(im2col / Winograd passes in numpy, products in OpenBLAS):

* ``nnefx``: the whole fast-backend run (median);
* ``products``: the float32 BLAS products of every convolution alone, at the shapes the fast
  kernel uses (im2col: ``(c, C·kh·kw/groups) @ (C·kh·kw/groups, Ho·Wo)`` per batch item and
  group; 1×1 layers are plain products), random operands, best of ``--repeats`` each, summed
  — a floor no im2col-based kernel can go below, whatever it does around the products;
* ``onnxruntime``: the same network's ONNX, CPU provider, 2 intra-op threads (median).

``--jit`` also runs an experiment that needs ``numba`` (``pip install numba``; not a
dependency of nnefx): the whole network with every 3×3 stride-1 convolution of ≥ 64
channels computed by Winograd F(2×2, 3×3) whose input and output transforms are compiled
(numba, one pass each, parallel over channels, work arrays padded against 4 KiB aliasing)
instead of numpy passes — the "compiled transforms" lever — timed against the shipped fast
backend in one process, alternately (``jit/fast`` < 1 means the compiled transforms help).
The engines of one row run in blocks after a discarded run, like ``benchmarks/run.py``.
Models are made by ``benchmarks/run.py``'s ``prepare`` (torch → ONNX → nnef-tools).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
# numba's OpenMP pool waits passively, so it does not spin against OpenBLAS's threads.
os.environ.setdefault("NUMBA_THREADING_LAYER", "omp")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from nnefx.blas import configure  # noqa: E402, I001  (before numpy: see nnefx/blas.py)

configure("auto")

import argparse  # noqa: E402
import functools  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import nnefx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import prepare  # noqa: E402


def conv_products(graph) -> list[tuple[int, int, int, int]]:
    """(count, M, K, N) of every BLAS product the fast conv kernel makes, per conv op."""
    shapes = []
    for op in graph.operations:
        if op.op != "conv":
            continue
        x = graph.tensor(op.inputs["input"]).shape
        w = graph.tensor(op.inputs["filter"]).shape
        y = graph.tensor(op.outputs["output"]).shape
        groups = op.attribs.get("groups", 1) or x[1]
        K = (x[1] // groups) * int(np.prod(w[2:]))
        shapes.append((x[0] * groups, w[0] // groups, K, int(np.prod(y[2:]))))
    return shapes


def best_of(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def product_floor(graph, repeats: int) -> float:
    rng = np.random.default_rng(0)
    total = 0.0
    for count, M, K, N in conv_products(graph):
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        out = np.empty((M, N), np.float32)
        total += count * best_of(functools.partial(np.matmul, a, b, out=out), repeats)
    return total


def timed_block(run, n: int) -> list[float]:
    time.sleep(0.25)
    run()  # discarded: warms caches and the engine's thread pool
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return times


class JitWinograd:
    """The ``--jit`` experiment: Winograd F(2×2, 3×3) with numba-compiled transforms."""

    def __init__(self) -> None:
        from numba import njit, prange

        @njit(parallel=True, boundscheck=False)
        def input_transform(x, pt, pl, Th, Tw, V):  # V[k, c, tile] = (Bᵀ d B)[k]
            B, C, H, W = x.shape
            Wp = 2 * Tw + 2
            for bc in prange(B * C):
                b, c = bc // C, bc % C
                rows = np.zeros((4, Wp), np.float32)
                e = np.empty((4, Wp), np.float32)
                for t in range(Th):
                    for i in range(4):
                        r = 2 * t - pt + i
                        for q in range(Wp):
                            qq = q - pl
                            inside = 0 <= r < H and 0 <= qq < W
                            rows[i, q] = x[b, c, r, qq] if inside else np.float32(0)
                    for q in range(Wp):
                        e[0, q] = rows[0, q] - rows[2, q]
                        e[1, q] = rows[1, q] + rows[2, q]
                        e[2, q] = rows[2, q] - rows[1, q]
                        e[3, q] = rows[1, q] - rows[3, q]
                    base = (b * Th + t) * Tw
                    for i in range(4):
                        for u in range(Tw):
                            q = 2 * u
                            V[4 * i, c, base + u] = e[i, q] - e[i, q + 2]
                            V[4 * i + 1, c, base + u] = e[i, q + 1] + e[i, q + 2]
                            V[4 * i + 2, c, base + u] = e[i, q + 2] - e[i, q + 1]
                            V[4 * i + 3, c, base + u] = e[i, q + 1] - e[i, q + 3]

        @njit(parallel=True, boundscheck=False)
        def output_transform(M, bias, Th, Tw, y):  # y = Aᵀ M A + bias, cropped
            B, c, Ho, Wo = y.shape
            for bo in prange(B * c):
                b, o = bo // c, bo % c
                s = np.empty((2, 4, Tw), np.float32)
                row = np.empty(2 * Tw, np.float32)
                for t in range(Th):
                    base = (b * Th + t) * Tw
                    for j in range(4):
                        for u in range(Tw):
                            m1, m2 = M[4 + j, o, base + u], M[8 + j, o, base + u]
                            s[0, j, u] = M[j, o, base + u] + m1 + m2
                            s[1, j, u] = m1 - m2 - M[12 + j, o, base + u]
                    for i in range(2):
                        if 2 * t + i < Ho:
                            for u in range(Tw):
                                row[2 * u] = s[i, 0, u] + s[i, 1, u] + s[i, 2, u] + bias[o]
                                row[2 * u + 1] = s[i, 1, u] - s[i, 2, u] - s[i, 3, u] + bias[o]
                            for q in range(Wo):
                                y[b, o, 2 * t + i, q] = row[q]

        self.input_transform, self.output_transform = input_transform, output_transform
        self.buffers: dict[tuple, tuple] = {}

    @staticmethod
    def work_array(rows: int, columns: int) -> np.ndarray:
        """(16, rows, columns) float32 whose 16 planes do not start 4 KiB apart (no aliasing)."""
        pitch = -(-columns // 16) * 16
        plane = rows * pitch
        plane += (16 - plane % 1024 // 64 % 16) % 16 * 64 + 5 * 64
        flat = np.empty(16 * plane, np.float32)
        return np.lib.stride_tricks.as_strided(flat, (16, rows, columns), (plane * 4, pitch * 4, 4))

    def conv3x3(self, x, U, bias, pads, y, finish) -> None:
        """Drop-in for :func:`nnefx.ops.winograd.conv3x3` (same arguments and contract)."""
        B, C = x.shape[:2]
        c = U.shape[1]
        Th, Tw = -(-y.shape[2] // 2), -(-y.shape[3] // 2)
        key = (B, C, c, Th, Tw)
        if key not in self.buffers:
            self.buffers[key] = (self.work_array(C, B * Th * Tw), self.work_array(c, B * Th * Tw))
        V, M = self.buffers[key]
        self.input_transform(np.ascontiguousarray(x), pads[0][0], pads[1][0], Th, Tw, V)
        np.matmul(U, V, out=M)
        self.output_transform(M, np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (c,)), Th, Tw, y)
        for i in range(B):
            finish(i)


def jit_ab(model, feed, repeats: int) -> tuple[float, float, float]:
    """Median ms of the shipped fast backend and of the ``--jit`` variant, and their max rel. diff."""
    from nnefx.ops import winograd

    jit = JitWinograd()
    shipped = (winograd.conv3x3, winograd.pays)
    variants = {"fast": shipped, "jit": (jit.conv3x3, lambda C, c, B, Th, Tw: C >= 64 and c >= 64)}
    sessions = {k: nnefx.Session(model, backend="fast") for k in variants}
    outputs, times = {}, {k: [] for k in variants}
    try:
        for k in variants:
            winograd.conv3x3, winograd.pays = variants[k]
            outputs[k] = next(iter(sessions[k].run(feed).values()))
        for r in range(max(2, repeats // 3)):
            for k in (("fast", "jit") if r % 2 == 0 else ("jit", "fast")):
                winograd.conv3x3, winograd.pays = variants[k]
                times[k] += timed_block(functools.partial(sessions[k].run, feed), 3)
    finally:
        winograd.conv3x3, winograd.pays = shipped
    diff = float(np.abs(outputs["fast"] - outputs["jit"]).max() / np.abs(outputs["fast"]).max())
    return statistics.median(times["fast"]) * 1e3, statistics.median(times["jit"]) * 1e3, diff


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="18,50")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--work", help="folder for the generated models (default: a new temporary one)")
    p.add_argument("--jit", action="store_true", help="also time the numba Winograd experiment")
    args = p.parse_args()
    import onnxruntime as ort

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="nnefx-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}")
    print("| net | batch | nnefx ms | products ms | onnxruntime ms | products/ort | nnefx/ort |"
          + (" jit ms | jit/fast | jit max rel. diff |" if args.jit else ""))
    for depth in (int(n) for n in args.nets.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            onnx_path, nnef_path = prepare(depth, batch, args.size, work)
            model = nnefx.load(str(nnef_path))
            session = nnefx.Session(model, backend="fast")
            info = session.inputs[0]
            x = np.random.default_rng(0).standard_normal(info.shape).astype(np.float32)
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
            ort_session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
            runs = {"nnefx": functools.partial(session.run, {info.name: x}),
                    "onnxruntime": functools.partial(ort_session.run, None, {"input": x})}
            times = {k: [] for k in runs}
            half = max(1, args.repeats // 2)
            for order in (("nnefx", "onnxruntime"), ("onnxruntime", "nnefx")):
                for k in order:
                    times[k] += timed_block(runs[k], half)
            nnefx_ms, ort_ms = (statistics.median(times[k]) * 1e3 for k in ("nnefx", "onnxruntime"))
            floor_ms = product_floor(model.graph, args.repeats) * 1e3
            row = (f"| ResNet-{depth} | {batch} | {nnefx_ms:.1f} | {floor_ms:.1f} | {ort_ms:.1f} | "
                   f"{floor_ms / ort_ms:.2f} | {nnefx_ms / ort_ms:.2f} |")
            if args.jit:
                fast_ms, jit_ms, diff = jit_ab(model, {info.name: x}, args.repeats)
                row += f" {jit_ms:.1f} | {jit_ms / fast_ms:.2f} | {diff:.1e} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
