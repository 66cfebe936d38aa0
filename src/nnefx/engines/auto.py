"""``backend="auto"``: the fastest installed backend that runs the whole graph, measured once.

On the first ``run`` of an ``auto`` session every candidate — each installed engine that can
run the whole graph, and the numpy ``fast`` backend — is compiled for the inputs at hand and
timed on them (one warm-up run, then the best of a few runs within a short budget).  The
fastest wins; the choice is cached per graph and input shapes for the process, and
``Session.backend_reason`` says what was measured.  Nothing is chosen that was not run: an
engine that fails to compile or run is left out with its reason, and ``fast`` always remains.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError

#: Seconds of timed runs per candidate (after the warm-up and one timed run; a candidate whose
#: first timed run is 10x slower than the best so far is not timed further).
BUDGET = 0.25
_CACHE: dict[tuple, str] = {}


class FastRunner:
    """The numpy fast backend behind the engine-runner interface (pure: state in, state out)."""

    def __init__(self, session: Any):
        from ..runtime.session import Session

        self.session = Session(session.model, "fast", input_shapes=session._input_shapes_given,
                               storage=session._compile_options["storage"], variables=session._initial_values)
        self.updated = [u.key for u in self.session.plan.updates]

    def __call__(self, inputs: dict[str, np.ndarray], state: dict[str, np.ndarray]) -> tuple[dict, dict]:
        s = self.session
        s._state.update({k: state[k] for k in self.updated})
        outputs = s.run(inputs)
        return outputs, {k: s._state[k] for k in self.updated}


def _time(runner: Any, inputs: dict, state: dict, to_beat: float = float("inf")) -> float:
    runner(inputs, state)  # warm-up: compiles the shape variant
    t = time.perf_counter()
    runner(inputs, state)
    best = time.perf_counter() - t
    if best > 10 * to_beat:  # hopeless: no need to spend the budget confirming it
        return best
    spent = 0.0
    while spent < BUDGET:
        t = time.perf_counter()
        runner(inputs, state)
        elapsed = time.perf_counter() - t
        best = min(best, elapsed)
        spent += elapsed
    return best


def choose(session: Any, inputs: dict[str, np.ndarray]) -> tuple[Any, str]:
    """(runner, reason) for an ``auto`` session's first inputs."""
    from . import engines
    from .base import EngineRunner

    key = (session.model.source, session.plan.graph.name, len(session.plan.graph.operations),
           tuple((n, a.shape, a.dtype.str) for n, a in sorted(inputs.items())),
           tuple(sorted(session._engine_options.items())))
    state = dict(session._state)
    timings: dict[str, float] = {}
    skipped: dict[str, str] = {}
    where = None  # the position of the first refusal that has one
    runners: dict[str, Any] = {}
    cached = _CACHE.get(key)
    # The usual losers first (torch's OpenMP pool and numpy's BLAS threads go idle before the
    # real contenders are timed), then the optimising engines.
    order = ["torch", "fast", "openvino", "onnxruntime"]
    names = [cached] if cached else sorted([*engines(), "fast"], key=lambda n: order.index(n) if n in order else -1)
    for name in names:
        try:
            runner = FastRunner(session) if name == "fast" else \
                EngineRunner(engines()[name], session._graph, **session._engine_options)
            if cached:
                return runner, f"auto: {name} (measured fastest earlier in this process for these shapes)"
            timings[name] = _time(runner, inputs, state, min(timings.values(), default=float("inf")))
            runners[name] = runner
        except NNEFXError as exc:
            skipped[name] = exc.message.split(": ", 1)[-1] if "cannot run" in exc.message else exc.message
            where = where or exc.location
    if not timings:
        raise NNEFXError("backend 'auto' found no backend that runs this graph: "
                         + "; ".join(f"{n}: {r}" for n, r in skipped.items()), where)
    best = min(timings, key=timings.__getitem__)
    _CACHE[key] = best
    # Release the candidates that lost: their worker threads (onnxruntime's pools, OpenVINO's
    # streams) would otherwise keep spinning beside the winner's and slow it — measured: an
    # encoder ran 1.7x slower on OpenVINO with onnxruntime's session still alive.
    chosen = runners.pop(best)
    runners.clear()
    import gc

    gc.collect()
    ranked = ", ".join(f"{n} {timings[n] * 1e3:.3g} ms" for n in sorted(timings, key=timings.__getitem__))
    reason = f"auto: {best}, the fastest on the first inputs ({ranked})"
    if skipped:
        reason += "; not usable: " + "; ".join(f"{n} ({r})" for n, r in skipped.items())
    return chosen, reason
