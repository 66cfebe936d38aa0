"""Run-time values: what binding a plan to tensor-valued parameters costs, first run and after.

    .venv/bin/python benchmarks/runtime_values.py [--size 16] [--repeats 20]

An ONNX network (written here with ``onnx.helper``, random weights) whose parameters arrive
as graph inputs, as exporters write dynamic models: ``Conv`` 3×3 (8 → 8 channels) → ``Resize`` with run-time
``scales`` → ``Slice`` with run-time ``starts``/``ends`` → ``ReduceMean`` with run-time
``axes``.  nnefx defers those three nodes at load and, per run, binds their values, builds
them as registry operations and compiles the graph — once per value set
(:mod:`nnefx.runtime.values`).  Reported on the fast backend (2 BLAS threads):

* **first run** of a value set (bind + build + compile + run) and **repeat runs** with the
  same values (bind, cache hit, run; median), for two value sets alternated;
* the **binding alone** on a cache hit (values read, cache keys made, plan found);
* the same network with those parameters as **initializers** (folded at load: no binding at
  all), the floor a bound plan's repeat runs are compared with (timed interleaved with them).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import nnefx  # noqa: E402

PARAMS = ("scales", "starts", "ends", "axes")


def network(path: str, size: int, constants: dict[str, np.ndarray] | None) -> None:
    """The network; ``constants`` makes the parameters initializers instead of inputs."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.1).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Resize", ["r", "", "scales"], ["u"], mode="linear"),
             helper.make_node("Slice", ["u", "starts", "ends", "axes_s"], ["s"]),
             helper.make_node("ReduceMean", ["s", "axes"], ["y"], keepdims=1)]
    inits = [w, numpy_helper.from_array(np.array([2, 3], np.int64), "axes_s")]
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [1, 8, size, size])]
    kinds = {"scales": (T.FLOAT, [4]), "starts": (T.INT64, [2]), "ends": (T.INT64, [2]), "axes": (T.INT64, [1])}
    for name in PARAMS:
        if constants is None:
            inputs.append(helper.make_tensor_value_info(name, *kinds[name]))
        else:
            inits.append(numpy_helper.from_array(constants[name], name))
    g = helper.make_graph(nodes, "values", inputs, [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


def value_sets(size: int) -> list[dict[str, np.ndarray]]:
    return [{"scales": np.array([1, 1, 2, 2], np.float32), "starts": np.array([1, 1]),
             "ends": np.array([2 * size - 1, 2 * size - 1]), "axes": np.array([1])},
            {"scales": np.array([1, 1, 1.5, 1.5], np.float32), "starts": np.array([0, 2]),
             "ends": np.array([size, size]), "axes": np.array([-1])}]


def timed(session: nnefx.Session, feed: dict) -> float:
    t0 = time.perf_counter()
    session.run(feed)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    x = np.random.default_rng(1).standard_normal((1, 8, args.size, args.size)).astype(np.float32)
    sets = value_sets(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        dynamic = os.path.join(tmp, "dynamic.onnx")
        network(dynamic, args.size, None)
        model = nnefx.load(dynamic)
        t0 = time.perf_counter()
        session = nnefx.Session(model, "fast")
        load = time.perf_counter() - t0
        first: list[list[float]] = [[], []]
        for _ in range(args.repeats):  # a fresh session each time: every value set's first run
            fresh = nnefx.Session(model, "fast")
            for k, v in enumerate(sets):
                first[k].append(timed(fresh, {"x": x, **v}))
        statics = []
        for k, v in enumerate(sets):
            path = os.path.join(tmp, f"static{k}.onnx")
            network(path, args.size, v)
            statics.append(nnefx.Session(nnefx.load(path), "fast"))
            np.testing.assert_allclose(statics[k].run({"x": x})["y"], session.run({"x": x, **v})["y"], rtol=1e-6)
        repeat: list[list[float]] = [[], []]
        static: list[list[float]] = [[], []]
        bind: list[list[float]] = [[], []]
        for _ in range(args.repeats):  # interleaved, so a busy machine slows all columns alike
            for k, v in enumerate(sets):
                feed = {"x": x, **v}
                repeat[k].append(timed(session, feed))
                static[k].append(timed(statics[k], {"x": x}))
                t0 = time.perf_counter()
                session._plan_bound(feed, ())  # the binding alone: values read, keys made, cache hit
                bind[k].append(time.perf_counter() - t0)
    print(f"network: Conv 3x3 8->8 on {args.size}x{args.size}, Resize/Slice/ReduceMean with run-time "
          f"parameters; Session {load * 1e3:.1f} ms; medians of {args.repeats}, fast backend")
    print("| value set | first run (bind + build + compile + run) | repeat run (bind, cached plan, run) | "
          "binding alone (cache hit) | parameters as initializers | first / repeat |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in range(len(sets)):
        fst, rep = statistics.median(first[k]), statistics.median(repeat[k])
        print(f"| {k + 1} | {fst * 1e3:.2f} ms | {rep * 1e3:.2f} ms | {statistics.median(bind[k]) * 1e3:.3f} ms | "
              f"{statistics.median(static[k]) * 1e3:.2f} ms | {fst / rep:.1f}× |")


if __name__ == "__main__":
    main()
