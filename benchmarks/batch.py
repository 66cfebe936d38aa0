"""Throughput of ``nnefx batch``: a plain Session loop against the job in process and on Ray.

    python benchmarks/batch.py [--rows 16384] [--batch 32] [--shard-rows R] [--rounds 2]

The model is a CPU-bound stack of 24 (W x W) products with tanh (rows of W floats, ``--width``,
default 1024), the killed-worker test's model made wider.  Each configuration runs in its own process, in rounds
A B C D, D C B A, ... so drifts of machine load hit them alike; the figure is the best round.
Every configuration computes with one BLAS thread per worker (Ray gives each actor one CPU),
so "1 worker" and the plain loop do the same arithmetic on one core:

* ``loop``: read the .npy rows, stack batches, ``Session.run`` — no shards, no manifest;
* ``inproc``: ``nnefx.batch.run`` without Ray (reads, runs, writes and commits shards);
* ``ray1`` / ``ray2``: ``nnefx.batch.run(ray="local", workers=N)`` on an already started
  local Ray (start-up is excluded: a cluster is up before jobs are sent to it).

It also prints the figures of the cost model in BENCHMARKS.md: the per-shard compute time,
Ray's fixed cost (``ray1-one-shard`` / ``ray2-two-shards``: a job of one shard per worker —
actor pool start, model loads, those shards) and the steady throughput of the other shards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def prepare(folder: str, rows: int, width: int, shard_rows: int) -> tuple[str, str, str]:
    import numpy as np

    import nnefx
    from nnefx.io.builder import GraphBuilder

    rng = np.random.default_rng(7)
    b = GraphBuilder("slow")
    x = b.external("x", [1, width])
    w = b.variable("w", (rng.standard_normal((width, width)) / (width ** 0.5)).astype(np.float32))
    for _ in range(24):
        x = b.tanh(b.matmul(x, w))
    b.output(x, "y")
    model = os.path.join(folder, "model")
    nnefx.save(b.build(), model)
    src = os.path.join(folder, "rows")
    one = os.path.join(folder, "one-shard")
    two = os.path.join(folder, "two-shards")
    os.makedirs(src)
    os.makedirs(one)
    os.makedirs(two)
    for i in range(rows):
        row = rng.standard_normal((1, width)).astype(np.float32)
        np.save(os.path.join(src, f"r{i:06d}.npy"), row)
        if i < shard_rows:
            np.save(os.path.join(one, f"r{i:06d}.npy"), row)
        if i < 2 * shard_rows:
            np.save(os.path.join(two, f"r{i:06d}.npy"), row)
    return model, src, one, two


class ProcessCPU:
    """CPU seconds of this process's descendants (Ray's processes), sampled from /proc.

    A thread finds the descendants every ``scan`` seconds (a walk over all of /proc, ~4 ms
    of CPU) and re-reads the ones it knows every ``period`` seconds, keeping the last value
    seen (a process's times are cumulative, so one found late is counted whole); the
    figures split Ray's workers (``ray::BatchWorker`` / Ray Data's ``ray::MapWorker``) from
    the rest (raylet, GCS, idle workers).  The thread's own CPU (``own``) is taken off the
    driver's.  CPU time is what the work costs whatever else the machine runs, which wall
    times on a shared machine are not.
    """

    def __init__(self, period: float = 0.05, scan: float = 1.0):
        import threading

        self.period, self.scan_every, self.last, self.own = period, scan, {}, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.tick = os.sysconf("SC_CLK_TCK")

    def _read(self, pid: int) -> tuple[int, float, bool] | None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name = f.read(64)
        except OSError:
            return None
        return (int(fields[1]), (int(fields[11]) + int(fields[12])) / self.tick,
                name.startswith((b"ray::BatchWorker", b"ray::MapWorker")))

    def _scan(self) -> None:
        seen = {int(e): self._read(int(e)) for e in os.listdir("/proc") if e.isdigit()}
        parents = {pid: v[0] for pid, v in seen.items() if v}
        me = os.getpid()
        for pid, value in seen.items():
            p, hops = parents.get(pid), 0
            while p and p != me and hops < 16:
                p, hops = parents.get(p), hops + 1
            if value and p == me:
                self.last[pid] = value[1:]

    def _update(self) -> None:
        for pid in list(self.last):
            value = self._read(pid)
            if value:
                self.last[pid] = value[1:]

    def _loop(self) -> None:
        started, scanned = time.thread_time(), time.monotonic()
        while not self.stop.wait(self.period):
            if time.monotonic() - scanned >= self.scan_every:
                self._scan()
                scanned = time.monotonic()
            else:
                self._update()
            self.own = time.thread_time() - started

    def __enter__(self) -> ProcessCPU:
        self._scan()
        self.base = dict(self.last)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def split(self) -> tuple[float, float]:
        """(CPU of the workers, CPU of Ray's other processes) since entering."""
        workers = other = 0.0
        for pid, (cpu, is_worker) in self.last.items():
            used = cpu - self.base.get(pid, (0.0, False))[0]
            if is_worker:
                workers += used
            else:
                other += used
        return workers, other


def child(config: str, model: str, src: str, out: str, batch: int, shard_rows: int) -> dict:
    """One configuration, timed in this (fresh) process."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    # After numpy's import: OpenBLAS must be loaded for threadpoolctl to limit it (a limit set
    # before is lost, and the loop would compute on every core while a Ray actor has one).
    threadpool_limits(1)

    import nnefx
    import nnefx.batch
    from nnefx.runtime.session import Session

    if config.startswith("ray"):
        import ray

        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    started, cpu = time.perf_counter(), _cpu()
    if config == "loop":
        session = Session(nnefx.load(model), input_shapes={"x": (None, nnefx.load(model).graph.tensors["x"].shape[1])})
        files = sorted(os.listdir(src))
        compute = 0.0
        for s in range(0, len(files), batch):
            rows = np.stack([np.load(os.path.join(src, f), allow_pickle=False)[0] for f in files[s:s + batch]])
            t = time.perf_counter()
            session.run({"x": rows})
            compute += time.perf_counter() - t
        seconds = time.perf_counter() - started
        return {"config": config, "seconds": seconds, "rows": len(files), "compute": compute,
                "driver_cpu": _cpu() - cpu}
    workers = {"inproc": 1, "ray1": 1, "ray2": 2, "ray1-one-shard": 1, "ray2-two-shards": 2}[config]
    with ProcessCPU() as ray_cpu:
        summary = nnefx.batch.run(model, src, out, batch_size=batch, shard_rows=shard_rows,
                                  ray="local" if config.startswith("ray") else None, workers=workers,
                                  progress=False)
        seconds = time.perf_counter() - started
        driver = _cpu() - cpu - ray_cpu.own
    assert summary.failures == 0 and summary.skipped == 0
    workers_cpu, other_cpu = ray_cpu.split()
    return {"config": config, "seconds": seconds, "rows": summary.rows, "shards": summary.shards,
            "driver_cpu": driver, "workers_cpu": workers_cpu, "ray_other_cpu": other_cpu}


def _cpu() -> float:
    """CPU seconds of this process, all its threads (for a Ray job: the driver's share)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--shard-rows", type=int, default=0,
                        help="rows per shard (default: the job's, SHARD_BATCHES batches)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        config, model, src, out, batch, shard_rows = args.child
        print(json.dumps(child(config, model, src, out, int(batch), int(shard_rows))))
        return
    if not args.shard_rows:
        from nnefx.batch.job import SHARD_BATCHES

        args.shard_rows = SHARD_BATCHES * args.batch
    configs = ["loop", "inproc", "ray1", "ray2", "ray1-one-shard", "ray2-two-shards"]
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model, src, one, two = prepare(tmp, args.rows, args.width, args.shard_rows)
        for r in range(args.rounds):
            for config in configs if r % 2 == 0 else configs[::-1]:
                out = os.path.join(tmp, f"out-{config}-{r}")
                source = {"ray1-one-shard": one, "ray2-two-shards": two}.get(config, src)
                done = subprocess.run([sys.executable, __file__, "--child", config, model, source, out,
                                       str(args.batch), str(args.shard_rows)], capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{config} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if config not in best or result["seconds"] < best[config]["seconds"]:
                    best[config] = result
    rate = {c: best[c]["rows"] / best[c]["seconds"] for c in configs}
    print(f"{'configuration':16} {'seconds':>8} {'rows/s':>9}")
    for c in configs:
        print(f"{c:16} {best[c]['seconds']:8.3f} {rate[c]:9.0f}")
    shards = best["inproc"]["shards"]
    per_shard_compute = best["loop"]["compute"] / shards
    # Ray's fixed cost per pool size: a job of one shard per worker (pool start, model loads,
    # one shard each); the steady rate is that of the remaining shards.
    fixed = {"ray1": best["ray1-one-shard"]["seconds"], "ray2": best["ray2-two-shards"]["seconds"]}
    shards_in_fixed = {"ray1": 1, "ray2": 2}
    steady = {c: (args.rows - shards_in_fixed[c] * args.shard_rows) / max(best[c]["seconds"] - fixed[c], 1e-9)
              for c in ("ray1", "ray2")}
    print(f"1 worker overhead vs loop: {rate['loop'] / rate['ray1'] - 1:+.1%} whole job (in process: "
          f"{rate['loop'] / rate['inproc'] - 1:+.1%}); 2 workers / 1 worker: {rate['ray2'] / rate['ray1']:.2f}x")
    print(f"Ray's fixed cost (one shard per worker: pool start, model loads, those shards): "
          f"{fixed['ray1']:.2f} s with 1 worker, {fixed['ray2']:.2f} s with 2; beyond it, "
          f"1 worker {steady['ray1']:.0f} rows/s ({rate['loop'] / steady['ray1'] - 1:+.1%} vs loop), "
          f"2 workers {steady['ray2']:.0f} rows/s ({steady['ray2'] / steady['ray1']:.2f}x one)")
    print(f"per shard ({args.shard_rows} rows): compute {per_shard_compute * 1e3:.1f} ms, loop total "
          f"{best['loop']['seconds'] / shards * 1e3:.1f} ms, in-process job {best['inproc']['seconds'] / shards * 1e3:.1f} ms, "
          f"1 Ray worker {best['ray1']['seconds'] / shards * 1e3:.1f} ms")
    # CPU per shard (what the work costs whatever else runs): whole jobs for the loop and the
    # in-process job; for Ray, the steady part: the job less the fixed-cost job of its pool size.
    print(f"CPU per shard: loop {best['loop']['driver_cpu'] / shards * 1e3:.1f} ms, in-process job "
          f"{best['inproc']['driver_cpu'] / shards * 1e3:.1f} ms (whole jobs); beyond the fixed-cost job:")
    for c, f in (("ray1", "ray1-one-shard"), ("ray2", "ray2-two-shards")):
        n = shards - shards_in_fixed[c]
        part = {k: (best[c][k] - best[f][k]) / n * 1e3 for k in ("workers_cpu", "driver_cpu", "ray_other_cpu")}
        print(f"  {c}: workers {part['workers_cpu']:.1f} ms, driver {part['driver_cpu']:.1f} ms, "
              f"Ray's other processes {part['ray_other_cpu']:.1f} ms")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
