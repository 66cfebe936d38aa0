"""``nnefx bench``: latency percentiles, throughput and peak memory, one row per backend.

Each backend runs in a process of its own (engines leave worker threads spinning after a
run, which slows whatever runs next in the same process), started with ``python -m
nnefx.engines.bench`` and reporting JSON.  In the child: load the model, build the session,
make seeded random inputs of the session's shapes (``--shape`` fixes unknown ones), run the
warm-up, then time single runs until ``--time`` seconds have passed.  Peak memory is the
growth of the process's peak resident set (``VmHWM``) over its size after the imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError


def _rss_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One backend's measurement (runs in the child process)."""
    import nnefx

    from ..runtime.cli import random_input
    from ..runtime.session import Session

    base = _rss_kib("VmRSS")
    started = time.perf_counter()
    model = nnefx.load(spec["model"], **spec["load"])
    session = Session(model, spec["backend"], threads=spec["threads"], precision=spec["precision"])
    rng = np.random.default_rng(0)
    inputs = {i.name: random_input(i, rng) for i in session.inputs}
    for _ in range(max(1, spec["warmup"])):
        session.run(inputs)
    load_first = time.perf_counter() - started
    times: list[float] = []
    deadline = time.perf_counter() + spec["time"]
    while not times or time.perf_counter() < deadline:
        t = time.perf_counter()
        session.run(inputs)
        times.append(time.perf_counter() - t)
    batch = next((int(a.shape[0]) for a in inputs.values() if a.ndim), 1)
    p50, p90, p99 = (float(np.percentile(times, q)) for q in (50, 90, 99))
    return {"backend": spec["backend"], "runs": len(times), "p50": p50, "p90": p90, "p99": p99,
            "throughput": batch / p50, "peak_mib": max(0, _rss_kib("VmHWM") - base) / 1024,
            "load_first": load_first, "reason": session.backend_reason}


def run(model: str, backends: list[str], *, load_options: dict[str, Any], threads: int | None, seconds: float,
        warmup: int, precision: str = "f32") -> list[dict[str, Any]]:
    from ..tools.progress import bar

    rows = []
    with bar(len(backends), "bench", unit="backend") as shown:
        for backend in backends:
            shown.set_postfix_str(backend)
            rows.append(_measure(backend, model, load_options, threads, seconds, warmup, precision))
            shown.update(1)
    return rows


def _measure(backend: str, model: str, load_options: dict[str, Any], threads: int | None, seconds: float,
             warmup: int, precision: str) -> dict[str, Any]:
    spec = {"model": model, "load": load_options, "backend": backend, "threads": threads, "time": seconds,
            "warmup": warmup, "precision": precision}
    done = subprocess.run([sys.executable, "-m", "nnefx.engines.bench", json.dumps(spec)],
                          capture_output=True, text=True, env=os.environ.copy())
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {"backend": backend, "error": message}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'backend':12} {'runs':>6} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'items/s':>9} "
             f"{'peak MiB':>9} {'load+1st s':>10}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['backend']:12} failed: {r['error']}")
            continue
        lines.append(f"{r['backend']:12} {r['runs']:6d} {r['p50'] * 1e3:9.3f} {r['p90'] * 1e3:9.3f} "
                     f"{r['p99'] * 1e3:9.3f} {r['throughput']:9.1f} {r['peak_mib']:9.1f} {r['load_first']:10.3f}")
    for r in rows:
        if r.get("backend") == "auto" and "reason" in r:
            lines.append(r["reason"])
    return "\n".join(lines)


def _main() -> int:
    from ..diagnostics import NNEFXError as Error

    spec = json.loads(sys.argv[1])
    try:
        print(json.dumps(child(spec)))
    except Error as exc:
        if exc.location is None:
            exc.at_file(spec["model"])
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())

__all__ = ["NNEFXError", "child", "run", "table"]
