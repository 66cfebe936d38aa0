"""Latency and peak memory of nnefx's fast backend against onnxruntime and nnef-tools.

    python benchmarks/run.py [--nets 18,50] [--batches 1,8] [--repeats 10] [--size 224] [--wait-idle 120]

For each ResNet and batch size: the torch network is exported to ONNX, converted to NNEF by
nnef-tools, then the three engines run the same input, all limited to 2 threads, in blocks
of back-to-back runs: engine order A B C, then C B A (so slow drifts of machine load hit them
alike), each block after one discarded run.  Not one run each in turn: on 2 cores, the
worker threads an engine leaves spinning after its run (OpenBLAS's, onnxruntime's, OpenMP's)
steal the CPU from the next engine for its whole run — measured here, a ResNet-18 batch-1
run took 2–5× longer right after another engine's run than after its own.  Latency is the
median of all timed runs (``--repeats`` per engine).  Peak memory is measured in a fresh subprocess per engine
as the growth of peak RSS (VmHWM) over the process's RSS after imports (model load + runs),
so the three numbers are comparable.  (Not ``ru_maxrss``: Linux carries it across ``exec``,
so a child would report the benchmark parent's peak.)  Outputs are checked to agree before anything is timed.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

# Before numpy: name OpenBLAS's kernels on CPUs OpenBLAS may misdetect, which only works
# before numpy loads the library (see nnefx/blas.py; `import nnefx` alone chooses nothing).
try:
    from nnefx.blas import configure  # noqa: E402, I001  (must come first)
except ImportError:  # an older nnefx (A/B runs with PYTHONPATH=old/src) chose at import
    import nnefx  # noqa: F401

    def configure(coretype: str = "auto") -> None:
        return None

configure("auto")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ENGINES = ("nnefx", "onnxruntime", "nnef-tools")


def prepare(depth: int, batch: int, size: int, work: Path) -> tuple[Path, Path]:
    """Export ResNet-``depth`` for ``batch`` to ONNX and convert it to an NNEF folder."""
    import torch

    sys.path.insert(0, str(HERE))
    from resnet_torch import resnet

    onnx_path = work / f"resnet{depth}_b{batch}.onnx"
    nnef_path = work / f"resnet{depth}_b{batch}.nnef"
    if not onnx_path.exists():
        torch.onnx.export(resnet(depth), torch.randn(batch, 3, size, size), str(onnx_path), opset_version=13,
                          dynamo=False, input_names=["input"], output_names=["output"])
    if not nnef_path.exists():
        subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-model", str(onnx_path),
                        "--input-format", "onnx", "--output-format", "nnef", "--output-model", str(nnef_path),
                        "--keep-io-names"], check=True, capture_output=True)
    return onnx_path, nnef_path


def make_runner(engine: str, onnx_path: Path, nnef_path: Path):
    """Load ``engine``'s model and return a function input → output array."""
    if engine == "nnefx":
        import nnefx

        session = nnefx.Session(nnefx.load(nnef_path), backend="fast")
        return lambda x: session.run({"input": x})["output"]
    if engine == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        return lambda x: sess.run(["output"], {"input": x})[0]
    if engine == "nnef-tools":
        import torch
        from nnef_tools.interpreter.pytorch import Interpreter

        torch.set_num_threads(2)
        interp = Interpreter(str(nnef_path))

        def run(x):
            with torch.no_grad():
                return np.asarray(interp([x])["output"])

        return run
    raise ValueError(engine)


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS now, VmHWM peak), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def memory_child(engine: str, onnx_path: str, nnef_path: str, batch: int, size: int, runs: int) -> None:
    """Subprocess body: imports, baseline RSS, load + runs, then report peak growth."""
    if engine == "nnefx":
        import nnefx  # noqa: F401
    elif engine == "onnxruntime":
        import onnxruntime  # noqa: F401
    else:
        import nnef_tools.interpreter.pytorch  # noqa: F401
        import torch  # noqa: F401
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size), dtype=np.float32)
    base = _status_mb("VmRSS")
    run = make_runner(engine, Path(onnx_path), Path(nnef_path))
    for _ in range(runs):
        run(x)
    peak = _status_mb("VmHWM")
    print(json.dumps({"peak_growth_mb": peak - base}))


def measure_memory(engine: str, onnx_path: Path, nnef_path: Path, batch: int, size: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--memory-child", engine, str(onnx_path), str(nnef_path),
                          str(batch), str(size)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_growth_mb"]


def cpu_idle(seconds: float = 4.0) -> float:
    """Fraction of all CPUs' time spent idle over the next ``seconds`` (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    idle0, total0 = sample()
    time.sleep(seconds)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(total1 - total0, 1)


def wait_idle(limit: float, threshold: float = 0.9) -> float:
    """Wait (up to ``limit`` seconds) until the CPUs are ``threshold`` idle over 4 s; the last idle share.

    Why: on a shared machine another job starting mid-run makes 2-thread BLAS wait for its
    second thread (whole runs 2–10× slower); rows measured that way mislead.
    """
    deadline = time.monotonic() + limit
    idle = cpu_idle()
    while idle < threshold and time.monotonic() < deadline:
        idle = cpu_idle()
    return idle


def bench(depth: int, batch: int, size: int, repeats: int, work: Path, engines: tuple = ENGINES) -> dict:
    onnx_path, nnef_path = prepare(depth, batch, size, work)
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size), dtype=np.float32)
    reference = make_runner("onnxruntime", onnx_path, nnef_path)(x)
    runners = {e: make_runner(e, onnx_path, nnef_path) for e in engines}
    for name, run in runners.items():  # also the warm-up run
        y = run(x)
        err = float(np.max(np.abs(y - reference)) / max(np.max(np.abs(reference)), 1e-12))
        if err > 1e-3:
            raise SystemExit(f"{name} disagrees with onnxruntime on resnet{depth} b{batch}: rel err {err:.2e}")
    times: dict[str, list[float]] = {e: [] for e in engines}
    blocks = 2
    for block in range(blocks):
        order = engines if block % 2 == 0 else engines[::-1]
        for name in order:
            run = runners[name]
            time.sleep(0.25)  # the previous engine's worker threads stop spinning
            run(x)  # discarded
            for _ in range(-(-repeats // blocks)):
                t0 = time.perf_counter()
                run(x)
                times[name].append(time.perf_counter() - t0)
    del runners
    row = {"net": f"ResNet-{depth}", "batch": batch}
    for e in engines:
        row[f"{e}_ms"] = 1000 * statistics.median(times[e])
        row[f"{e}_peak_mb"] = measure_memory(e, onnx_path, nnef_path, batch, size)
    return row


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--memory-child":
        engine, onnx_path, nnef_path, batch, size = sys.argv[2:7]
        memory_child(engine, onnx_path, nnef_path, int(batch), int(size), runs=2)
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="18,50")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--engines", default=",".join(ENGINES), help="engines to time (default: all three)")
    p.add_argument("--work", default=None, help="folder for the exported models (default: a temp folder)")
    p.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                   help="before each row, wait up to SECONDS for the CPUs to be >= 90%% idle over 4 s "
                        "(the idle share found is printed after the row)")
    args = p.parse_args()
    engines = tuple(e for e in args.engines.split(",") if e)
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        p.error(f"unknown engine(s) {', '.join(unknown)} (choose from {', '.join(ENGINES)})")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="nnefx-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        from nnefx.blas import describe
    except ImportError:  # an older nnefx (A/B runs with PYTHONPATH=old/src)
        from threadpoolctl import threadpool_info

        def describe() -> str:
            return "blas: " + ", ".join(f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info())

    print(describe())
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    print("| net | batch | nnefx ms | onnxruntime ms | nnef-tools ms | nnefx/ort | nnefx MB | ort MB | nnef-tools MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for depth in (int(d) for d in args.nets.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            idle = wait_idle(args.wait_idle) if args.wait_idle > 0 else None
            r = bench(depth, batch, args.size, args.repeats, work, engines)

            def cell(key: str, fmt: str, r: dict = r) -> str:
                return format(r[key], fmt) if key in r else "-"

            ratio = (f"{r['nnefx_ms'] / r['onnxruntime_ms']:.2f}" if "nnefx_ms" in r and "onnxruntime_ms" in r
                     else "-")
            print(f"| {r['net']} | {batch} | {cell('nnefx_ms', '.1f')} | {cell('onnxruntime_ms', '.1f')} | "
                  f"{cell('nnef-tools_ms', '.1f')} | {ratio} | {cell('nnefx_peak_mb', '.0f')} | "
                  f"{cell('onnxruntime_peak_mb', '.0f')} | {cell('nnef-tools_peak_mb', '.0f')} |"
                  + ("" if idle is None else f" (CPUs {idle:.0%} idle before, load {os.getloadavg()[0]:.2f} after)"),
                  flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
