"""Engine backends through nnefx against the engines standalone, plus compiled-artifact loading.

    python benchmarks/engines.py [--nets r18b1,r50b8,enc] [--rounds 2] [--runs 20] [--threads 2] [--rows R,...]
                                 [--load-repeats 5] [--only-load] [--baseline SRC] [--engines E,..]
                                 [--overhead] [--ort-export] [--ov-export]

Networks (random weights, fixed seeds): ResNet-18 at batch 1 and ResNet-50 at batch 8
(224 x 224, benchmarks/resnet_torch.py), and a transformer encoder (4 pre-norm layers, width
256, 4 heads, 128 tokens, GELU).  Each is exported by torch to ONNX (opset 13) and converted
to NNEF by nnef-tools; nnefx runs the NNEF folder.

Rows, each in a process of its own (an engine's spinning worker threads slow whatever runs
next in the same process), alternated A B C ... then ... C B A over ``--rounds`` so drifts
of machine load hit all alike, each nnefx row run beside the standalone row it is compared
with; every engine limited to ``--threads``; the figures are the median latency of ``--runs``
timed runs after two warm-ups, best round, the CPU time per run (all threads of the process),
and each pair's ratio within a round, median over the rounds (``--rows`` picks rows):

* ``nnefx auto`` and ``nnefx <engine>`` for onnxruntime, openvino, torch, and the numpy
  ``nnefx fast`` backend — all on the NNEF folder;
* ``<engine> standalone``: onnxruntime and OpenVINO on torch's own ONNX export, torch eager
  on the torch module.

Then ``nnefx compile`` for onnxruntime and OpenVINO, and the time to ``nnefx.load`` the
compiled folder and run once, against loading the NNEF source, compiling for the engine and
running once: each in a fresh process, the two alternated ``--load-repeats`` times (after one
warm-up pair), medians of wall and CPU seconds; also the load alone (ready to run, the first
run not counted: for ResNet-50 at batch 8 that run is most of the compiled side's time).  The
engine's own import is timed apart (both sides pay it alike) and the ratio is given without
and with it.  ``--only-load`` runs
just these rows; ``--baseline SRC`` adds the same rows of another checkout (``SRC``: its
``src`` folder), alternated with these in the same run.  ``--overhead`` measures only what ``Session.run`` adds around an engine's
call (input checks, the shape-variant lookup, output conversion), with the call stubbed.
``--ort-export`` runs onnxruntime on torch's export and on nnefx's export of the NNEF folder:
the operations left after onnxruntime's optimiser (its fusions) and the latency, one process,
alternated; ``--ov-export`` the same for OpenVINO on torch's export and nnefx's IR v11: the
execution graphs the CPU plugin built, node by node, and the latency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = ("nnefx auto", "nnefx onnxruntime", "nnefx openvino", "nnefx torch", "nnefx fast",
        "onnxruntime standalone", "openvino standalone", "torch standalone")
#: The order rows run in each round (reversed every other round): each nnefx row beside the
#: standalone row it is compared with, so that each pair of ``PAIRS`` runs seconds apart.
RUN_ORDER = ("nnefx auto", "onnxruntime standalone", "nnefx onnxruntime", "nnefx openvino", "openvino standalone",
             "nnefx torch", "torch standalone", "nnefx fast")
PAIRS = (("nnefx auto", "onnxruntime standalone"), ("nnefx onnxruntime", "onnxruntime standalone"),
         ("nnefx openvino", "openvino standalone"), ("nnefx torch", "torch standalone"))


def _encoder():
    import torch
    import torch.nn as nn

    class Layer(nn.Module):
        def __init__(self, d: int, h: int):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.h), -1) @ v
            x = x + self.out(att.permute(0, 2, 1, 3).reshape(b, t, d))
            return x + self.ff(self.ln2(x))

    torch.manual_seed(0)
    return nn.Sequential(*[Layer(256, 4) for _ in range(4)]).eval(), torch.randn(1, 128, 256)


def prepare(net: str, work: Path) -> tuple[Path, Path, Path]:
    """The torch module (state dict), torch's ONNX export and the nnef-tools NNEF folder."""
    import torch

    sys.path.insert(0, str(HERE))
    from resnet_torch import resnet

    if net == "enc":
        module, x = _encoder()
    else:
        depth, batch = {"r18b1": (18, 1), "r50b8": (50, 8)}[net]
        module, x = resnet(depth).eval(), torch.randn(batch, 3, 224, 224)
    onnx_path, nnef_path, pt = work / f"{net}.onnx", work / f"{net}.nnef", work / f"{net}.pt2"
    torch.onnx.export(module, x, str(onnx_path), opset_version=13, dynamo=False, input_names=["input"],
                      output_names=["output"])
    subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-model", str(onnx_path), "--input-format",
                    "onnx", "--output-format", "nnef", "--output-model", str(nnef_path), "--keep-io-names"],
                   check=True, capture_output=True)
    torch.save({"net": net, "shape": list(x.shape)}, str(pt))
    return onnx_path, nnef_path, pt


def _runner(row: str, net: str, onnx_path: str, nnef_path: str, threads: int):
    if row.startswith("nnefx"):
        import nnefx

        backend = row.split()[1]
        session = nnefx.Session(nnefx.load(nnef_path), backend=backend, threads=threads)
        name = session.inputs[0].name
        return lambda x: session.run({name: x}), session
    if row == "onnxruntime standalone":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
        return lambda x: sess.run(None, {"input": x}), None
    if row == "openvino standalone":
        import openvino as ov

        core = ov.Core()
        compiled = core.compile_model(core.read_model(onnx_path), "CPU",
                                      {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                       "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})  # compile_config's
        request = compiled.create_infer_request()
        return lambda x: request.infer([x]), None
    import torch

    torch.set_num_threads(threads)
    module = prepare_module(net)

    def run(x):
        with torch.inference_mode():
            return module(torch.from_numpy(x)).numpy()
    return run, None


def prepare_module(net: str):
    sys.path.insert(0, str(HERE))
    from resnet_torch import resnet

    if net == "enc":
        return _encoder()[0]
    return resnet({"r18b1": 18, "r50b8": 50}[net]).eval()


def median_ms(run, x, runs: int, warmups: int = 2) -> tuple[float, float]:
    """Median latency of ``run(x)`` in milliseconds over ``runs`` timed calls after ``warmups``,
    and the median CPU milliseconds of the process (all its threads) per call.

    The CPU figure is the work a run costs, spinning worker threads included; on a machine
    other jobs share it moves far less than the wall time (it does not count waiting for a core).
    """
    for _ in range(warmups):
        run(x)
    times, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        run(x)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(times) * 1e3, statistics.median(cpus) * 1e3


def child(row: str, net: str, onnx_path: str, nnef_path: str, threads: int, runs: int, shape: list[int]) -> dict:
    import numpy as np

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    run, session = _runner(row, net, onnx_path, nnef_path, threads)
    wall, cpu = median_ms(run, x, runs)
    out = {"row": row, "median_ms": wall, "cpu_ms": cpu}
    if session is not None and row == "nnefx auto":
        out["reason"] = session.backend_reason
    return out


def load_child(kind: str, path: str, engine: str, threads: int, shape: list[int]) -> dict:
    """Load + first run in this fresh process: wall and CPU seconds, the engine's import apart.

    The engine module is imported first and timed on its own, with the background work its
    import starts: both sides pay it alike (a fresh ``nnefx run`` pays it once either way), so
    the ratio compares the work that differs — parsing, exporting and optimising the source
    against reading the compiled form.
    """
    import importlib
    import resource

    import numpy as np

    import nnefx

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    t, c = time.perf_counter(), cpu()
    importlib.import_module(engine)
    _settle_telemetry()
    imported, imported_cpu = time.perf_counter() - t, cpu() - c
    t, c = time.perf_counter(), cpu()
    if kind == "compiled":
        model = nnefx.load(path)
        loaded, loaded_cpu = time.perf_counter() - t, cpu() - c
        model.run({model.inputs[0]["name"]: x})
    else:
        session = nnefx.Session(nnefx.load(path), backend=engine, threads=threads)  # compiles for the engine
        loaded, loaded_cpu = time.perf_counter() - t, cpu() - c
        session.run({session.inputs[0].name: x})
    return {"seconds": time.perf_counter() - t, "cpu": cpu() - c, "import": imported, "import_cpu": imported_cpu,
            "load": loaded, "load_cpu": loaded_cpu}


def _settle_telemetry(timeout: float = 5.0) -> None:
    """Wait until the telemetry events an engine's import queued are sent (or given up).

    What the import starts in the background is part of it: OpenVINO's Python package sends a
    telemetry event on import (``openvino_telemetry``, unless the user opted out: a pool thread
    that imports urllib and forks a process, joined for up to 3 s), which would otherwise run
    into the timed load and compete with it for the GIL and the cores — on both sides, but a
    larger share of the shorter one.  The sender counts its pending events (``queue_size``).
    """
    telemetry = sys.modules.get("openvino_telemetry")
    try:
        sender = telemetry.Telemetry().sender if telemetry is not None else None
        end = time.perf_counter() + timeout
        while sender is not None and sender.queue_size > 0 and time.perf_counter() < end:
            time.sleep(0.002)
    except Exception:  # noqa: BLE001 - another telemetry version: nothing to wait for that we know of
        pass


def overhead_child(backend: str, nnef_path: str, shape: list[int], calls: int = 2000) -> dict:
    """nnefx's own cost per ``Session.run`` around the engine: the engine's call replaced by
    one returning its last results, CPU time of this thread, best of 5 x ``calls`` runs."""
    import numpy as np

    import nnefx

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    session = nnefx.Session(nnefx.load(nnef_path), backend=backend, threads=1)
    name = session.inputs[0].name
    session.run({name: x})
    (compiled,) = session._engine._variants.values()
    if backend == "onnxruntime":
        last = compiled.session.run(None, {compiled.inputs[0]: x})
        compiled.session = type("Done", (), {"run": lambda self, names, feeds: last})()
    else:
        last = compiled.request.infer([x])
        compiled.request = type("Done", (), {"infer": lambda self, feeds: last})()
    best = float("inf")
    for _ in range(5):
        t = time.thread_time()
        for _ in range(calls):
            session.run({name: x})
        best = min(best, (time.thread_time() - t) / calls)
    return {"backend": backend, "overhead_us": best * 1e6}


def alternated(calls: dict, runs: int) -> None:
    """Each call once to warm up, then ``runs`` rounds of every call, in alternating order;
    print each call's median wall ms (ratio to the first call's), minimum and median CPU ms."""
    for call in calls.values():
        call()
    times: dict[str, list[float]] = {k: [] for k in calls}
    cpus: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(runs):
        for label in calls if r % 2 == 0 else list(calls)[::-1]:
            t, c = time.perf_counter(), time.process_time()
            calls[label]()
            times[label].append(time.perf_counter() - t)
            cpus[label].append(time.process_time() - c)
    first = next(iter(calls))
    base = statistics.median(times[first])
    for label, ts in times.items():
        print(f"  {label:22} median {statistics.median(ts) * 1e3:7.2f} ms ({statistics.median(ts) / base:.3f}x "
              f"{first}), min {min(ts) * 1e3:7.2f} ms, CPU {statistics.median(cpus[label]) * 1e3:7.2f} ms")


def ort_export(net: str, onnx_path: Path, nnef_path: Path, work: Path, threads: int, runs: int) -> None:
    """onnxruntime on torch's export and on nnefx's export of the NNEF folder: the operations
    after onnxruntime's optimiser and the latency, one process, alternated."""
    import collections

    import numpy as np
    import onnx
    import onnxruntime as ort

    import nnefx
    from nnefx.formats.onnx import save

    raw_path = work / f"{net}.nnefx.onnx"
    save(nnefx.load(str(nnef_path)), str(raw_path))
    raw = raw_path.read_bytes()
    models = {"torch's export": onnx_path.read_bytes(), "nnefx's export": raw}
    sessions = {}
    counts: dict[str, collections.Counter] = {}
    for label, data in models.items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
        opts.optimized_model_filepath = str(work / "optimized.onnx")
        session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        ops = collections.Counter(n.op_type for n in onnx.load(str(work / "optimized.onnx")).graph.node)
        sessions[label] = (session, session.get_inputs()[0].name)
        counts[label] = ops
        print(f"  {label:22} after ORT's optimiser: {sum(ops.values())} nodes, "
              f"{ops['LayerNormalization']} LayerNormalization, {ops['Gemm']} Gemm, {ops['MatMul']} MatMul, "
              f"{ops['Gelu']} Gelu, {ops['Erf']} Erf")
    a, b = counts.values()
    print("  operations only one side has after the optimiser: "
          + (", ".join(f"{k} {a[k]} vs {b[k]}" for k in sorted(set(a) | set(b)) if a[k] != b[k]) or "none"))
    x = np.random.default_rng(0).standard_normal(list(sessions["nnefx's export"][0].get_inputs()[0].shape)
                                                 ).astype(np.float32)
    alternated({label: (lambda s=session, n=name: s.run(None, {n: x})) for label, (session, name) in sessions.items()},
               runs)
    # Where the time goes: onnxruntime's own node profile, kernel time per operation type
    # (median over the runs of each node, summed per type), both exports.
    per_type: dict[str, collections.Counter] = {}
    for label, data in models.items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = threads, 1, 3
        opts.enable_profiling, opts.profile_file_prefix = True, str(work / "profile")
        session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        for _ in range(min(runs, 20)):
            session.run(None, {name: x})
        events = json.loads(Path(session.end_profiling()).read_text())
        nodes: dict[tuple, list[float]] = collections.defaultdict(list)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                nodes[(e["args"]["op_name"], e["name"])].append(e["dur"])
        per_type[label] = collections.Counter()
        for (op, _), durs in nodes.items():
            per_type[label][op] += statistics.median(durs) / 1e3
    a, b = per_type.values()
    print("  kernel ms per run by operation type (torch's / nnefx's export): "
          + ", ".join(f"{k} {a[k]:.3f} / {b[k]:.3f}" for k in sorted(set(a) | set(b), key=lambda k: -max(a[k], b[k]))))


def ov_export(net: str, onnx_path: Path, nnef_path: Path, work: Path, threads: int, runs: int) -> None:
    """OpenVINO on torch's ONNX export and on nnefx's IR v11 export of the NNEF folder, compiled
    with the openvino backend's settings: the execution graphs the CPU plugin built (its runtime
    model: each node's layer type, kernel, precision, output layout and shape, in execution
    order) compared node by node, then the latency, one process, alternated."""
    import numpy as np
    import openvino as ov

    import nnefx
    from nnefx.engines.openvino import compile_config
    from nnefx.formats.ir import save

    ir_path = work / f"{net}.nnefx.xml"
    save(nnefx.load(str(nnef_path)), str(ir_path))
    core = ov.Core()
    requests, graphs = {}, {}
    for label, path in (("torch's export", onnx_path), ("nnefx's export", ir_path)):
        compiled = core.compile_model(core.read_model(str(path)), "CPU", compile_config(threads, "f32"))
        nodes = []
        for op in compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            fields = [str(info[k].astype(str)) if k in info else "" for k in
                      ("layerType", "primitiveType", "runtimePrecision", "outputLayouts")]
            nodes.append((*fields, str(op.get_output_partial_shape(0)) if op.get_output_size() else ""))
        graphs[label] = nodes
        requests[label] = (compiled, compiled.create_infer_request())
    a, b = graphs.values()
    differ = [k for k, (p, q) in enumerate(zip(a, b, strict=False)) if p != q]
    print(f"  execution graphs: {len(a)} and {len(b)} nodes, "
          + ("identical (layer, kernel, precision, layout, shape of every node)" if a == b else
             f"{len(differ)} differ, first: {a[differ[0]] if differ else a[len(b):][:1]} vs "
             f"{b[differ[0]] if differ else b[len(a):][:1]}"))
    x = np.random.default_rng(0).standard_normal(
        list(requests["nnefx's export"][0].inputs[0].get_partial_shape().to_shape())).astype(np.float32)
    alternated({label: (lambda r=request: r.infer([x])) for label, (_, request) in requests.items()}, runs)


def compiled_rows(net: str, nnef_path: Path, work: Path, shape: list[int], threads: int, repeats: int,
                  baseline: str | None = None, engines: tuple[str, ...] = ("onnxruntime", "openvino")) -> None:
    """``nnefx compile`` for each engine, then load + first run of the compiled folder against
    load + compile of the source, each in a fresh process, alternated, ``repeats`` times.

    With ``baseline`` (the ``src`` folder of another nnefx checkout), the same two rows of that
    checkout too (its own ``nnefx compile``), all four alternated in one run: a change's effect
    measured under the same machine load."""
    trees = {"": None, **({"baseline ": baseline} if baseline else {})}
    for engine in engines:
        outs = {}
        for label, src in trees.items():
            outs[label] = work / f"{net}.{engine}.{'baseline.' if src else ''}compiled"
            subprocess.run([sys.executable, "-m", "nnefx", "compile", str(nnef_path), "-o", str(outs[label]),
                            "--backend", engine, "--threads", str(threads)], check=True, capture_output=True,
                           env=_env(src))
        rows = [(label, kind) for label in trees for kind in ("compiled", "source")]
        runs: dict[tuple[str, str], list[dict]] = {row: [] for row in rows}
        for r in range(repeats + 1):  # the first round warms the page cache and the bytecode cache
            for label, kind in rows if r % 2 == 0 else rows[::-1]:
                res = _spawn("--load-child", kind, str(outs[label] if kind == "compiled" else nnef_path), engine,
                             str(threads), json.dumps(shape), src=trees[label])
                if "error" in res:
                    print(f"  load {engine} {label}{kind}: error: {res['error'][:100]}")
                    return
                if r:
                    runs[(label, kind)].append(res)
        med = {k: {m: statistics.median(x[m] for x in v)
                   for m in ("seconds", "cpu", "import", "import_cpu", "load", "load_cpu")} for k, v in runs.items()}
        imp = statistics.median(x["import"] for v in runs.values() for x in v)
        for label in trees:
            fast, slow = med[(label, "compiled")], med[(label, "source")]
            print(f"  {label}load + first run, {engine}: compiled {fast['seconds']:.3f} s ({fast['cpu']:.3f} s CPU), "
                  f"source + compile {slow['seconds']:.3f} s ({slow['cpu']:.3f} s CPU): "
                  f"{slow['seconds'] / fast['seconds']:.1f}x wall, {slow['cpu'] / fast['cpu']:.1f}x CPU; "
                  f"engine import {imp:.3f} s apart (with it: "
                  f"{(slow['seconds'] + imp) / (fast['seconds'] + imp):.1f}x wall)")
            print(f"  {label}load alone (ready to run, before the first run), {engine}: compiled {fast['load']:.3f} s "
                  f"({fast['load_cpu']:.3f} s CPU), source + compile {slow['load']:.3f} s "
                  f"({slow['load_cpu']:.3f} s CPU): "
                  f"{slow['load'] / fast['load']:.1f}x wall, {slow['load_cpu'] / fast['load_cpu']:.1f}x CPU")


def print_rows(net: str, shape: list[int], threads: int, n_rounds: int, rounds: dict[str, list[dict]]) -> None:
    """Per row: the best round's median wall ms and its ratio to standalone onnxruntime's best,
    the median over rounds of the CPU ms per run; then, for each row beside its standalone
    counterpart in ``RUN_ORDER``, the median over rounds of the two rows' ratio in the same
    round (wall and CPU) — a pair measured seconds apart, so that drifts of the machine's load
    between rounds cancel."""
    def best(row: str) -> dict:
        done = [r for r in rounds[row] if "error" not in r]
        return min(done, key=lambda r: r["median_ms"]) if done else rounds[row][0]

    ort = best("onnxruntime standalone").get("median_ms", math.nan) if "onnxruntime standalone" in rounds else math.nan
    print(f"\n{net} (input {shape}, {threads} threads): median ms per run, best of {n_rounds} rounds; "
          "CPU ms per run (all threads), median of the rounds")
    for row in (r for r in ROWS if r in rounds):
        res = best(row)
        if "error" in res:
            print(f"  {row:24} error: {res['error'][:100]}")
            continue
        cpu = statistics.median(r["cpu_ms"] for r in rounds[row] if "error" not in r)
        print(f"  {row:24} {res['median_ms']:9.2f}   {res['median_ms'] / ort:5.2f}x standalone onnxruntime   "
              f"CPU {cpu:9.2f}")
    if "nnefx auto" in rounds and "reason" in best("nnefx auto"):
        print(f"  ({best('nnefx auto')['reason']})")
    for row, other in (p for p in PAIRS if p[0] in rounds and p[1] in rounds):
        pairs = [(a, b) for a, b in zip(rounds[row], rounds[other], strict=True) if "error" not in a and "error" not in b]
        if pairs:
            wall = statistics.median(a["median_ms"] / b["median_ms"] for a, b in pairs)
            cpu = statistics.median(a["cpu_ms"] / b["cpu_ms"] for a, b in pairs)
            print(f"  {row} / {other}, same round: {wall:.3f}x wall, {cpu:.3f}x CPU (median of {len(pairs)})")


def _env(src: str | None = None) -> dict[str, str]:
    # Bytecode caching as in an installed package (pip writes .pyc files): without it every
    # child compiles the modules it imports, which costs the source side more (it imports more).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src:
        env["PYTHONPATH"] = os.path.abspath(src)
    return env


def _spawn(*args: str, src: str | None = None) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=_env(src))
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nets", default="r18b1,r50b8,enc")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", default=",".join(ROWS),
                   help="comma-separated rows to run (default all), e.g. 'nnefx auto,onnxruntime standalone'")
    p.add_argument("--load-repeats", type=int, default=5, help="compiled/source load pairs per engine (0: none)")
    p.add_argument("--only-load", action="store_true", help="only the compiled-artifact rows")
    p.add_argument("--baseline", metavar="SRC",
                   help="also the compiled-artifact rows of another nnefx checkout's src folder, alternated")
    p.add_argument("--engines", default="onnxruntime,openvino", help="engines of the compiled-artifact rows")
    p.add_argument("--overhead", action="store_true",
                   help="only nnefx's own cost per run around each engine's call (engine call stubbed)")
    p.add_argument("--overhead-child", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--ort-export", action="store_true",
                   help="only onnxruntime on torch's export vs nnefx's (fusions, latency)")
    p.add_argument("--ov-export", action="store_true",
                   help="only OpenVINO on torch's export vs nnefx's IR (execution graphs, latency)")
    p.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    p.add_argument("--load-child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        row, net, onnx_path, nnef_path, threads, runs, shape = args.child
        print(json.dumps(child(row, net, onnx_path, nnef_path, int(threads), int(runs), json.loads(shape))))
        return
    if args.overhead_child:
        backend, nnef_path, shape = args.overhead_child
        print(json.dumps(overhead_child(backend, nnef_path, json.loads(shape))))
        return
    if args.load_child:
        kind, path, engine, threads, shape = args.load_child
        print(json.dumps(load_child(kind, path, engine, int(threads), json.loads(shape))))
        return
    wanted = [r.strip() for r in args.rows.split(",")]
    unknown = [r for r in wanted if r not in ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}; rows: {', '.join(ROWS)}")
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        for net in args.nets.split(","):
            onnx_path, nnef_path, pt = prepare(net, Path(tmp))
            shape = torch.load(str(pt))["shape"]
            if args.ov_export:
                print(f"\n{net}: OpenVINO, {args.threads} threads, {args.runs} alternated runs")
                ov_export(net, onnx_path, nnef_path, Path(tmp), args.threads, args.runs)
                continue
            if args.ort_export:
                print(f"\n{net}: onnxruntime, {args.threads} threads, {args.runs} alternated runs")
                ort_export(net, onnx_path, nnef_path, Path(tmp), args.threads, args.runs)
                continue
            if args.overhead:
                for backend in ("onnxruntime", "openvino"):
                    res = _spawn("--overhead-child", backend, str(nnef_path), json.dumps(shape))
                    print(f"{net} nnefx {backend}: {res.get('overhead_us', math.nan):.1f} us CPU per Session.run "
                          "around the engine's call")
                continue
            if args.only_load:
                print(f"\n{net} (input {shape}, {args.threads} threads): medians of {args.load_repeats} "
                      "alternated pairs of fresh processes")
                compiled_rows(net, nnef_path, Path(tmp), shape, args.threads, args.load_repeats, args.baseline,
                              tuple(args.engines.split(",")))
                continue
            order = [row for row in RUN_ORDER if row in wanted]
            rounds: dict[str, list[dict]] = {row: [] for row in order}
            for r in range(args.rounds):
                for row in order if r % 2 == 0 else order[::-1]:
                    rounds[row].append(_spawn("--child", row, net, str(onnx_path), str(nnef_path),
                                              str(args.threads), str(args.runs), json.dumps(shape)))
            print_rows(net, shape, args.threads, args.rounds, rounds)
            if args.load_repeats > 0:
                compiled_rows(net, nnef_path, Path(tmp), shape, args.threads, args.load_repeats, args.baseline,
                              tuple(args.engines.split(",")))


if __name__ == "__main__":
    main()
