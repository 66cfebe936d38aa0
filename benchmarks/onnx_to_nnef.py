"""ONNX → NNEF keeps the meaning: every node-suite model nnefx runs, converted and read back.

    python benchmarks/onnx_to_nnef.py [--only SUBSTRING] [--backend fast] [--json results.json]

For each case of the installed onnx package's backend node suite
(``onnx.backend.test.case.node.collect_testcases``) that nnefx loads and runs, the model is
saved as an NNEF folder (``nnefx.save``), loaded again and run on the same inputs; the
outputs must be **bit-identical** (same element type, shape and bytes; NaN equal to NaN).
Verdicts:

* **identical**: read back, ran, every output the same;
* **refused**: ``nnefx.save`` stopped with an ``NNEFXError`` that names a location;
* **differs**: the read-back model ran but an output differs;
* **unreadable**: the written NNEF could not be read back or run (nnefx wrote what it cannot read);
* **crashed**: any other exception, or a refusal without a location.

Cases nnefx does not run (refused at load or run) are counted as ``skipped``.  The goal is no
``differs``, ``unreadable`` or ``crashed``; ``tests/test_onnx_to_nnef.py`` checks a
deterministic sample of the same cases with :func:`roundtrip`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import numpy as np

VERDICTS = ("identical", "refused", "differs", "unreadable", "crashed", "skipped")


def same(a: Any, b: Any) -> bool:
    """Bit-identical arrays (NaN payloads included), with equal element types and shapes."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "OUS":
        return bool(np.array_equal(a, b))
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def roundtrip(model_path: str, inputs: list, folder: str, backend: str = "fast") -> tuple[str, str]:
    """The verdict for one ONNX model file run on ``inputs`` (positional, as the node suite gives them)."""
    import nnefx
    from nnefx.diagnostics import NNEFXError
    from nnefx.runtime.session import Session

    try:
        model = nnefx.load(model_path)
        session = Session(model, backend)
        feeds = dict(zip([i.name for i in session.inputs], inputs, strict=False))
        want = session.run(feeds)
    except NNEFXError as exc:
        return "skipped", str(exc)
    try:
        nnefx.save(model, folder)
    except NNEFXError as exc:
        located = exc.location is not None and (exc.location.line is not None or exc.location.field is not None)
        return ("refused" if located else "crashed"), str(exc)
    try:
        again = nnefx.load(folder)
        session2 = Session(again, backend)
        renamed = dict(zip(again.graph.inputs, feeds.values(), strict=True))
        got = session2.run(renamed)
    except NNEFXError as exc:
        return "unreadable", str(exc)
    if len(got) != len(want):
        return "differs", f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got.values(), want.values(), strict=True)):
        if not same(g, w):
            g, w = np.asarray(g), np.asarray(w)
            return "differs", f"output {k}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
    return "identical", ""


def node_cases(only: str | None = None) -> list:
    """The node suite's cases (``kind == 'node'``), in the suite's order."""
    from onnx.backend.test.case.node import collect_testcases

    return [c for c in collect_testcases(None) if c.kind == "node" and (not only or only in c.name)]


def case_inputs(case: Any) -> list:
    inputs, _ = case.data_sets[0]
    return [np.asarray(v) if not isinstance(v, (list, dict)) else v for v in inputs]


def run_case(case: Any, tmp: str, backend: str = "fast") -> tuple[str, str]:
    import onnx

    path = os.path.join(tmp, case.name + ".onnx")
    onnx.save(case.model, path)
    try:
        return roundtrip(path, case_inputs(case), os.path.join(tmp, case.name + "_nnef"), backend)
    except Exception as exc:  # noqa: BLE001 - that is what "crashed" counts
        return "crashed", f"{type(exc).__name__}: {str(exc)[:200]}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run only cases whose name contains this")
    p.add_argument("--backend", default="fast", choices=("fast", "formal"))
    p.add_argument("--json", help="write every case's verdict here")
    p.add_argument("--show", default="differs,unreadable,crashed", help="verdicts to list case by case")
    args = p.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    import onnx

    started = time.perf_counter()
    cases = node_cases(args.only)
    counts: Counter = Counter()
    records = []
    show = set(args.show.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            verdict, why = run_case(case, tmp, args.backend)
            counts[verdict] += 1
            records.append({"case": case.name, "verdict": verdict, "message": why})
            if verdict in show:
                print(f"{verdict:10s} {case.name}: {' '.join(why.split())[:160]}")
    ran = len(cases) - counts["skipped"]
    print(f"ONNX node suite of onnx {onnx.__version__}, {args.backend} backend: {len(cases)} cases, nnefx runs "
          f"{ran}; converted to NNEF and read back ({time.perf_counter() - started:.0f} s)")
    print("| " + " | ".join(VERDICTS) + " |")
    print("|" + "---:|" * len(VERDICTS))
    print("| " + " | ".join(str(counts[v]) for v in VERDICTS) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
