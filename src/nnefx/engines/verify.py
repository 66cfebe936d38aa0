"""``verify=True``: an engine's results checked against the formal backend on the same inputs.

The formal backend follows each operation's definition (float64 accumulation), so it is the
arbiter.  The check runs a formal :class:`~nnefx.runtime.session.Session` in lockstep with
the engine's (same inputs, same variable state) and compares every output and every new
variable value:

* floating results: the largest absolute difference, and the relative error
  ``max |engine - formal| / max |formal|`` (the measure used for whole networks: elementwise
  relative errors are meaningless near zero), against a bound — 1e-4 for full precision,
  1e-2 for ``f16``, 5e-2 for ``bf16`` (about 8 and 5 bits of agreement on deep networks);
* integer and logical results: exact.

A result beyond its bound raises :class:`~nnefx.diagnostics.NNEFXError` naming the tensor,
both errors and the bound; every comparison is kept in ``Session.verification``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError

BOUNDS = {"f32": 1e-4, "f16": 1e-2, "bf16": 5e-2}


@dataclass
class Comparison:
    tensor: str
    max_abs: float
    max_rel: float
    bound: float

    @property
    def ok(self) -> bool:
        return self.max_rel <= self.bound

    def __str__(self) -> str:
        return (f"{self.tensor}: max |diff| {self.max_abs:.3g}, relative {self.max_rel:.3g} "
                f"(bound {self.bound:.3g})")


class Verifier:
    def __init__(self, session: Any, bound: float | None = None):
        from ..runtime.session import Session

        if session.backend == "formal":
            raise NNEFXError("verify=True checks another backend against the formal one; this session is formal")
        precision = session._engine_options["precision"]
        self.bound = bound if bound is not None else BOUNDS.get(precision, 1e-4)
        self.session = session
        self.formal = Session(session.model, "formal", input_shapes=session._input_shapes_given,
                              storage=session._compile_options["storage"], variables=session._initial_values)
        session.verification = []

    def check(self, inputs: dict[str, np.ndarray], regs: Any, slot_of: Any, plan: Any = None) -> None:
        """``plan``: the plan that filled ``regs`` (a session's plan for the values bound this run)."""
        plan = plan if plan is not None else self.session.plan
        self.formal.assign({spec.label: self.session._state[spec.key]
                            for spec in plan.variables if spec.key in {u.key for u in plan.updates}})
        reference = self.formal.run(inputs)
        results = []
        for name, slot, _, _ in plan.outputs:
            got = regs[name] if slot_of is not None else regs[slot]
            results.append(compare(name, np.asarray(got), reference[name], self.bound))
        for upd in plan.updates:
            label = self.session._var_of_key[upd.key].label
            got = regs[slot_of[upd.key]] if slot_of is not None else regs[upd.slot]
            results.append(compare(f"new value of '{label}'", np.asarray(got),
                                   self.formal.variables[label], self.bound))
        self.session.verification = results
        bad = [c for c in results if not c.ok]
        if bad:
            where, first = self._first_divergence(inputs)
            raise NNEFXError(f"backend '{self.session.backend}' disagrees with the formal backend: "
                             + "; ".join(str(c) for c in bad) + first, where)

    def _first_divergence(self, inputs: dict[str, np.ndarray]) -> tuple[Any, str]:
        """The first operation (graph order) whose result is beyond the bound, for the message."""
        engine = self.session._engine
        if engine is None or not hasattr(engine, "trace"):
            return None, ""
        graph = engine.stateless.graph
        names = [n for op in graph.operations if op.op not in ("external", "variable", "constant", "copy")
                 for n in op.output_names() if n in self.session._graph.tensors]
        try:
            got = engine.trace(inputs, self.session._state)
            self.formal.assign({spec.label: self.session._state[spec.key] for spec in self.session.plan.variables
                                if spec.key in {u.key for u in self.session.plan.updates}})
            want = self.formal.run(inputs, fetch=names)
        except NNEFXError:
            return None, ""
        producer = graph.producers()
        for name in names:
            if name not in got or name not in want:
                continue
            c = compare(name, np.asarray(got[name]), np.asarray(want[name]), self.bound)
            if not c.ok:
                op = producer[name]
                return op.location, f"; first diverging: operation '{op.op}' ({c})"
        return None, ""


def compare(name: str, got: np.ndarray, ref: np.ndarray, bound: float) -> Comparison:
    if got.shape != ref.shape:
        raise NNEFXError(f"{name}: the backend returned shape {list(got.shape)}, the formal backend "
                         f"{list(ref.shape)}")
    if ref.dtype.kind in "biu":
        wrong = int(np.count_nonzero(got != ref))
        return Comparison(name, float(wrong), float(wrong), 0.0)
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    nan_mismatch = np.isnan(got) != np.isnan(ref)
    if nan_mismatch.any():
        return Comparison(name, float("inf"), float("inf"), bound)
    diff = np.where(np.isnan(diff), 0.0, diff)
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.nanmax(np.abs(ref))) if ref.size else 0.0
    return Comparison(name, max_abs, max_abs / scale if scale > 0 else max_abs, bound)
