"""CPU per shard of ``nnefx batch``'s worker: in this process against inside a Ray actor.

    python benchmarks/batch_cpu.py [--shards 12] [--rounds 3] [--width 1024] [--shard-rows 256]

The same :class:`nnefx.batch.job.ShardRunner` (the model of ``benchmarks/batch.py``, one BLAS
thread) turns the same shards into outputs here and in a plain Ray actor (``num_cpus=1``,
which Ray runs with one OpenMP/BLAS thread), rounds alternated.  CPU time (``getrusage``:
every thread of the process) is what the work costs whatever else the machine runs, so this
separates "the actor computes slower" from "Ray adds time between the actor and the driver"
on a shared machine, where wall times are not comparable.  (``benchmarks/batch.py`` splits a
whole job's CPU between the driver, the workers and Ray's other processes.)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _runner(model: str, src: str, shard_rows: int):
    from nnefx.batch import job

    runner = job.ShardRunner(model, {}, "fast", 32, None, shard_rows, threads=1)
    runner.spec = job.open_source(src, runner.input_names)
    return runner


def _shards(runner, indices) -> list[tuple[float, float]]:
    out = []
    for i in indices:
        t, c = time.perf_counter(), _cpu()
        runner(i)
        out.append((time.perf_counter() - t, _cpu() - c))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--shard-rows", type=int, default=256)
    args = p.parse_args()
    import numpy  # noqa: F401  (OpenBLAS loaded, so that the limit below applies to it)
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(1)
    import ray

    sys.path.insert(0, HERE)
    from batch import prepare

    with tempfile.TemporaryDirectory() as tmp:
        model, src, _, _ = prepare(tmp, (args.shards + 1) * args.shard_rows, args.width, args.shard_rows)

        @ray.remote(num_cpus=1)
        class Worker:
            def __init__(self):
                self.runner = _runner(model, src, args.shard_rows)

            def shards(self, indices):
                return _shards(self.runner, indices), [e["num_threads"] for e in threadpool_info()]

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        actor = Worker.remote()
        local = _runner(model, src, args.shard_rows)
        ray.get(actor.shards.remote([0]))
        _shards(local, [0])
        indices = list(range(1, args.shards + 1))
        here, there = [], []
        for r in range(args.rounds):
            if r % 2 == 0:
                here += _shards(local, indices)
                got, threads = ray.get(actor.shards.remote(indices))
            else:
                got, threads = ray.get(actor.shards.remote(indices))
                here += _shards(local, indices)
            there += got
        ray.shutdown()
    med = {k: (statistics.median(w for w, _ in v) * 1e3, statistics.median(c for _, c in v) * 1e3)
           for k, v in (("in process", here), ("Ray actor", there))}
    print(f"{args.shard_rows} rows x {args.width} floats per shard, {len(here)} shards each; BLAS threads: "
          f"here {[e['num_threads'] for e in threadpool_info()]}, actor {threads}")
    for k, (wall, cpu) in med.items():
        print(f"  {k:11} median wall {wall:7.1f} ms, CPU {cpu:7.1f} ms per shard")
    print(f"  actor / in process CPU: {med['Ray actor'][1] / med['in process'][1]:.3f}")


if __name__ == "__main__":
    main()
