"""ONNX → NNEF keeps the meaning: every node-suite model nnefx runs, converted and read back.

    python benchmarks/onnx_to_nnef.py [--only SUBSTRING] [--backend fast] [--dialect nnef,tract]
                                      [--json results.json]

For each case of the installed onnx package's backend node suite
(``onnx.backend.test.case.node.collect_testcases``) that nnefx loads and runs, the model is
saved as an NNEF folder by each writer dialect asked for — ``nnef``, nnefx's default
(``nnefx.save``), and ``tract``, NNEF for tract (``nnefx.save(..., dialect="tract")``, which
declares element types in tract's own forms) — loaded again and run on the same inputs; the
outputs must be **bit-identical** (same element type, shape and bytes; NaN equal to NaN).
Verdicts, per dialect:

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


DIALECTS = ("nnef", "tract")


def roundtrip(model_path: str, inputs: list, folder: str, backend: str = "fast",
              dialects: tuple[str, ...] = ("nnef",)) -> dict[str, tuple[str, str]]:
    """The verdict per dialect for one ONNX model file run on ``inputs`` (positional, as the
    node suite gives them): ``nnef`` is nnefx's default writer, ``tract`` ``save(..., dialect="tract")``."""
    import nnefx
    from nnefx.diagnostics import NNEFXError
    from nnefx.runtime.session import Session

    try:
        model = nnefx.load(model_path)
        session = Session(model, backend)
        feeds = dict(zip([i.name for i in session.inputs], inputs, strict=False))
        want = session.run(feeds)
    except NNEFXError as exc:
        return {d: ("skipped", str(exc)) for d in dialects}
    verdicts = {}
    for dialect in dialects:
        where = folder + ("" if dialect == "nnef" else "_" + dialect)
        options = {} if dialect == "nnef" else {"dialect": dialect}
        try:
            verdicts[dialect] = _written_and_read(model, where, options, backend, feeds, want)
        except Exception as exc:  # noqa: BLE001 - that is what "crashed" counts (this dialect's)
            verdicts[dialect] = ("crashed", f"{type(exc).__name__}: {str(exc)[:200]}")
    return verdicts


def _written_and_read(model: Any, folder: str, options: dict, backend: str, feeds: dict,
                      want: dict) -> tuple[str, str]:
    import nnefx
    from nnefx.diagnostics import NNEFXError
    from nnefx.runtime.session import Session

    try:
        nnefx.save(model, folder, **options)
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


def run_cases(case: Any, tmp: str, backend: str = "fast",
              dialects: tuple[str, ...] = ("nnef",)) -> dict[str, tuple[str, str]]:
    """One node-suite case through every writer dialect in ``dialects``: verdict and message each."""
    import onnx

    path = os.path.join(tmp, case.name + ".onnx")
    onnx.save(case.model, path)
    try:
        return roundtrip(path, case_inputs(case), os.path.join(tmp, case.name + "_nnef"), backend, dialects)
    except Exception as exc:  # noqa: BLE001 - that is what "crashed" counts
        return {d: ("crashed", f"{type(exc).__name__}: {str(exc)[:200]}") for d in dialects}


def run_case(case: Any, tmp: str, backend: str = "fast", dialect: str = "nnef") -> tuple[str, str]:
    """One node-suite case through one writer dialect: verdict and message."""
    return run_cases(case, tmp, backend, (dialect,))[dialect]


_TRACT_CHILD = """
import sys, numpy as np, tract
folder, feeds, out = sys.argv[1:4]
inputs = list(np.load(feeds, allow_pickle=False).values())
results = tract.nnef().load(folder).into_runnable().run(inputs)
np.savez(out, *[r.to_numpy() for r in results])
"""


def in_tract(folder: str, inputs: list, backend: str = "fast") -> tuple[str, str]:
    """Run a folder written with ``dialect="tract"`` in tract itself (its Python bindings, in a
    child process: a panic inside tract aborts the process) and compare with nnefx's outputs of
    the same folder: the same element types and shapes, integers and booleans equal, floats
    within 1e-4 of the largest magnitude, 1e-2 for float16 (tract's own kernels round
    differently: it rounds f16 intermediates where nnefx rounds once).  Verdicts:
    ``agrees``, ``disagrees``, ``fails`` (tract refused or died)."""
    import subprocess

    import nnefx
    from nnefx.runtime.session import Session

    model = nnefx.load(folder)
    session = Session(model, backend)
    want = list(session.run(dict(zip(model.graph.inputs, inputs, strict=True))).values())
    feeds, out = os.path.join(folder, "..", os.path.basename(folder) + "_in.npz"), folder + "_out.npz"
    np.savez(feeds, *inputs)
    proc = subprocess.run([sys.executable, "-c", _TRACT_CHILD, folder, feeds, out], capture_output=True,
                          text=True, timeout=120, check=False)
    if proc.returncode != 0:
        return "fails", _tract_reason(proc.stderr, proc.returncode)
    got = list(np.load(out).values())
    if len(got) != len(want):
        return "disagrees", f"{len(got)} outputs, nnefx {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        w = np.asarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            return "disagrees", f"output {k}: {g.dtype}{list(g.shape)} vs nnefx {w.dtype}{list(w.shape)}"
        if w.dtype.kind == "f":
            scale = max(float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)), 1e-30)
            both = np.isfinite(w) & np.isfinite(g)
            if not np.array_equal(np.isfinite(g), np.isfinite(w)):
                return "disagrees", f"output {k}: non-finite values differ"
            rel = float(np.max(np.abs(g[both].astype(np.float64) - w[both]), initial=0.0)) / scale
            tol = 1e-2 if w.dtype == np.float16 else 1e-4   # (f16: about ten of its ulps)
            if rel > tol:
                return "disagrees", f"output {k}: {rel:.2g} of the largest magnitude from nnefx's (> {tol:g})"
        elif not np.array_equal(g, w):
            return "disagrees", f"output {k}: values differ"
    return "agrees", ""


def _tract_reason(stderr: str, code: int) -> str:
    """tract's own words: the last cause of its error chain, or where it panicked."""
    text = stderr.split("Stack backtrace")[0]
    if "Caused by:" in text:
        causes = [ln.strip() for ln in text.split("Caused by:")[-1].splitlines() if ln.strip()]
        return " / ".join(causes[-2:])[:200]
    panic = [ln for ln in stderr.splitlines() if "panicked at" in ln or ln.startswith(("assertion", "TractError"))]
    return " ".join(panic[:2])[:200] or f"exit status {code}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run only cases whose name contains this")
    p.add_argument("--backend", default="fast", choices=("fast", "formal"))
    p.add_argument("--dialect", default=",".join(DIALECTS),
                   help="writers to try, comma-separated: nnef (the default writer), tract (dialect='tract')")
    p.add_argument("--in-tract", type=int, default=0, metavar="K",
                   help="also run every K-th case the tract dialect wrote identically in tract itself")
    p.add_argument("--json", help="write every case's verdict here")
    p.add_argument("--show", default="differs,unreadable,crashed", help="verdicts to list case by case")
    args = p.parse_args()
    dialects = tuple(d for d in args.dialect.split(",") if d)
    if not dialects or any(d not in DIALECTS for d in dialects):
        p.error(f"--dialect takes {', '.join(DIALECTS)}")
    import warnings

    warnings.simplefilter("ignore")
    import onnx

    started = time.perf_counter()
    cases = node_cases(args.only)
    counts: dict[str, Counter] = {d: Counter() for d in dialects}
    records = []
    show = set(args.show.split(","))
    tract_counts: Counter = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            verdicts = run_cases(case, tmp, args.backend, dialects)
            for dialect, (verdict, why) in verdicts.items():
                counts[dialect][verdict] += 1
                records.append({"case": case.name, "dialect": dialect, "verdict": verdict, "message": why})
                if verdict in show:
                    print(f"{dialect:5s} {verdict:10s} {case.name}: {' '.join(why.split())[:160]}")
            if args.in_tract and verdicts.get("tract", ("",))[0] == "identical" \
                    and counts["tract"]["identical"] % args.in_tract == 1 % args.in_tract:
                folder = os.path.join(tmp, case.name + "_nnef_tract")
                try:
                    verdict, why = in_tract(folder, case_inputs(case), args.backend)
                except Exception as exc:  # noqa: BLE001 - a timeout or an unreadable result
                    verdict, why = "fails", f"{type(exc).__name__}: {str(exc)[:160]}"
                tract_counts[verdict] += 1
                records.append({"case": case.name, "dialect": "in tract", "verdict": verdict, "message": why})
                if verdict != "agrees":
                    print(f"in tract {verdict:9s} {case.name}: {' '.join(why.split())[:160]}")
    ran = len(cases) - counts[dialects[0]]["skipped"]
    print(f"ONNX node suite of onnx {onnx.__version__}, {args.backend} backend: {len(cases)} cases, nnefx runs "
          f"{ran}; converted to NNEF and read back ({time.perf_counter() - started:.0f} s)")
    print("| dialect | " + " | ".join(VERDICTS) + " |")
    print("|---|" + "---:|" * len(VERDICTS))
    for dialect in dialects:
        print(f"| {dialect} | " + " | ".join(str(counts[dialect][v]) for v in VERDICTS) + " |")
    if args.in_tract:
        print(f"run in tract itself (every {args.in_tract}th identical tract folder): "
              + ", ".join(f"{v} {tract_counts[v]}" for v in ("agrees", "disagrees", "fails")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
