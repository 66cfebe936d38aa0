"""Run-time values inside a loop body: what a Loop whose every iteration binds other values costs.

    .venv/bin/python benchmarks/loop_values.py [--iterations 16,200] [--repeats 5]

An ONNX ``Loop`` (the test suite's, ``tests/test_onnx_control_flow_values.py``) whose body sums a window
``x[i : i + w]`` of an outer input — the ``Slice`` bounds computed in the body from the
iteration number ``i`` — and reshapes the window to an outer run-time shape: the ``Slice``
and the ``Reshape`` are deferred at load and bound on each iteration's values, which differ
from iteration to iteration.  Reported per loop iteration, fast backend:

* **first run** of a fresh ``Session`` (every iteration's values new: the body bound and
  planned for each),
* **repeat run** (the same inputs again: what the runtime kept from the first run is reused;
  median of ``--repeats``).

The figures of two source trees are compared by running the script with each tree first on
``PYTHONPATH``, alternated (the machine is shared).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402


def window_loop(path: str) -> None:
    """The test suite's window loop (``tests/test_onnx_control_flow_values.py``), saved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_onnx_control_flow_values import _window_loop

    onnx.save(_window_loop(), path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", default="16,200", help="loop trip counts, comma-separated")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "loop.onnx")
        window_loop(path)
        model = nnefx.load(path)
        print(f"nnefx from {os.path.dirname(nnefx.__file__)}")
        print("| iterations | first run / iteration | repeat run / iteration |")
        print("|---:|---:|---:|")
        for m in (int(v) for v in args.iterations.split(",")):
            feeds = {"M": np.array(m, np.int64), "acc0": np.zeros(1, np.float32),
                     "x": np.arange(m + 4, dtype=np.float32), "w": np.array([4], np.int64),
                     "shape": np.array([2, 2], np.int64)}
            session = Session(model, "fast")
            t = time.perf_counter()
            first = session.run(feeds)
            first_s = time.perf_counter() - t
            want = np.array([sum(range(k, k + 4)) for k in range(m)], np.float32).sum()
            assert np.allclose(first["acc"], want), (first["acc"], want)
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                session.run(feeds)
                times.append(time.perf_counter() - t)
            print(f"| {m} | {first_s / m * 1e6:.0f} µs | {statistics.median(times) / m * 1e6:.0f} µs |")


if __name__ == "__main__":
    main()
