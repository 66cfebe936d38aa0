"""Paired A/B of the fast conv/pool changes of issue 4's third round, in one process.

    python benchmarks/conv_ab.py NNEF_FOLDER [--repeats 12]

Two sessions of the same model: "old" with Winograd switched off
(``winograd.MIN_CHANNELS`` above any layer) and the previous 9-slice max pool, "new" as
shipped.  They run alternately (order swapped every round), three timed runs after one
discarded run per turn, so slow drifts of the shared machine's load hit both alike — what
whole-script runs of ``benchmarks/run.py`` cannot offer for comparing nnefx versions.
The input is ``(batch, 3, size, size)`` read from the model's declared input shape.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

from nnefx.blas import configure  # noqa: E402, I001  (before numpy: see nnefx/blas.py)

configure("auto")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import nnefx  # noqa: E402
import nnefx.ops.sliding_pool as sliding  # noqa: E402
from nnefx.ops import winograd  # noqa: E402


def nine_slice_max(xp, win):
    """The max pool's window maximum before this round: one strided slice per window offset."""
    out = None
    for j in win.offsets():
        view = xp[tuple(slice(j[k] * win.dilation[k], j[k] * win.dilation[k] + (win.x[k] - 1) * win.stride[k] + 1,
                              win.stride[k]) for k in range(xp.ndim))]
        out = np.array(view, copy=True) if out is None else np.maximum(out, view, out=out)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--repeats", type=int, default=12)
    args = p.parse_args()
    model = nnefx.load(args.model)
    sessions = {"old": nnefx.Session(model, backend="fast"), "new": nnefx.Session(model, backend="fast")}
    settings = {"old": (10 ** 9, nine_slice_max), "new": (winograd.MIN_CHANNELS, sliding._window_max)}
    info = sessions["new"].inputs[0]
    x = np.random.default_rng(0).standard_normal(info.shape).astype(np.float32)
    times: dict[str, list[float]] = {k: [] for k in sessions}
    load = os.getloadavg()[0]
    try:
        for r in range(args.repeats):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                winograd.MIN_CHANNELS, sliding._window_max = settings[name]
                run = sessions[name].run
                run({info.name: x})  # discarded
                for _ in range(3):
                    t0 = time.perf_counter()
                    run({info.name: x})
                    times[name].append(time.perf_counter() - t0)
    finally:
        winograd.MIN_CHANNELS, sliding._window_max = settings["new"]
    a, b = (np.array(times[k]) * 1e3 for k in ("old", "new"))
    print(f"{args.model}: old min {a.min():.1f} median {np.median(a):.1f} ms | new min {b.min():.1f} "
          f"median {np.median(b):.1f} ms | change {np.median(b) / np.median(a) - 1:+.1%} "
          f"(load {load:.2f} -> {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
