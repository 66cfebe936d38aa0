"""The ONNX backend node suite of the installed onnx package, run through nnefx and onnxruntime.

    python benchmarks/onnx_conformance.py [--backends fast,formal,onnxruntime] [--only SUBSTRING]
                                          [--json results.json] [--timeout 60]

onnx builds its node test cases (``onnx.backend.test.case.node.collect_testcases``): a model
with one operator (or its function body, for the ``_expanded`` cases) and input/output
data.  Each case is run on each backend — ``fast`` and ``formal`` load the model with
``nnefx.load`` and run a Session; ``onnxruntime`` runs the same model file directly — and
classified:

* **passed**: every output has the expected element type (compared strictly: float32 where
  float16 is expected is wrong) and shape, and its values are within the case's own
  ``rtol``/``atol`` (``numpy.testing.assert_allclose`` semantics, NaN equal to NaN);
* **wrong**: an output differs in type, shape or value;
* **refused**: the reader or the planner raised ``NNEFXError`` (onnxruntime: refused to load);
* **crashed**: any other exception, or the case took longer than ``--timeout`` seconds.

Per operator (the operator a case is named after) and in total; ``--json`` keeps every case's
verdict and message.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any

import numpy as np

VERDICTS = ("passed", "wrong", "refused", "crashed")


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def op_of(name: str, ops: list[str]) -> str:
    """The operator a case is named after: the longest operator name the case name starts with."""
    key = name[len("test_"):].replace("_", "").lower()
    best = ""
    for op in ops:
        low = op.lower()
        if key.startswith(low) and len(low) > len(best):
            best = op
    return best or name


def compare(got: Any, want: Any, rtol: float, atol: float) -> str | None:
    """None when ``got`` matches ``want``, else why not.  A sequence (list) matches element by
    element; an empty optional (None) only None."""
    if want is None or got is None:
        return None if want is None and got is None else f"{'an empty optional' if got is None else 'a value'}, " \
            f"expected {'an empty optional' if want is None else 'a value'}"
    if isinstance(want, list) or isinstance(got, list):
        if not isinstance(want, list) or not isinstance(got, list):
            return f"{'a sequence' if isinstance(got, list) else 'a tensor'}, expected " \
                   f"{'a sequence' if isinstance(want, list) else 'a tensor'}"
        if len(got) != len(want):
            return f"a sequence of {len(got)} tensors, expected {len(want)}"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            why = compare(g, w, rtol, atol)
            if why:
                return f"sequence element {k}: {why}"
        return None
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype:
        return f"element type {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "OUS":
        return None if np.array_equal(got, want) else "string values differ"
    try:
        np.testing.assert_allclose(got.astype(np.float64) if want.dtype.kind == "V" else got,
                                   want.astype(np.float64) if want.dtype.kind == "V" else want,
                                   rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as exc:
        return "values differ: " + " ".join(str(exc).split())[:200]
    except TypeError:
        g, w = got.astype(np.float64), want.astype(np.float64)
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            return "values differ"
    return None


def run_nnefx(path: str, backend: str, data_sets: list, rtol: float, atol: float) -> tuple[str, str]:
    import nnefx
    from nnefx.diagnostics import NNEFXError
    from nnefx.runtime.session import Session

    try:
        model = nnefx.load(path)
        session = Session(model, backend)
    except NNEFXError as exc:
        return "refused", str(exc)
    names = [i.name for i in session.inputs]
    for inputs, outputs in data_sets:
        try:
            result = session.run(dict(zip(names, inputs, strict=False)))
        except NNEFXError as exc:
            return "refused", str(exc)
        got = list(result.values())
        if len(got) != len(outputs):
            return "wrong", f"{len(got)} outputs, expected {len(outputs)}"
        for k, (g, w) in enumerate(zip(got, outputs, strict=True)):
            why = compare(g, w, rtol, atol)
            if why:
                return "wrong", f"output {k}: {why}"
    return "passed", ""


def run_ort(path: str, data_sets: list, rtol: float, atol: float) -> tuple[str, str]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own types for unsupported models
        return "refused", str(exc).splitlines()[0][:200]
    names = [i.name for i in sess.get_inputs()]
    for inputs, outputs in data_sets:
        try:
            got = sess.run(None, dict(zip(names, inputs, strict=False)))
        except Exception as exc:  # noqa: BLE001 - a run failure counts as refused for ORT
            return "refused", str(exc).splitlines()[0][:200]
        for k, (g, w) in enumerate(zip(got, outputs, strict=False)):
            why = compare(g, w, rtol, atol)
            if why:
                return "wrong", f"output {k}: {why}"
    return "passed", ""


def _data_sets(case: Any) -> list:
    from onnx import TensorProto, numpy_helper

    def array(v: Any) -> Any:
        if isinstance(v, TensorProto):  # cases whose data numpy cannot hold (float8, int4, ...) come as protos
            return numpy_helper.to_array(v)
        return np.asarray(v) if not isinstance(v, (list, dict, type(None))) else v

    sets = []
    for inputs, outputs in case.data_sets or []:
        sets.append(([array(v) for v in inputs], [array(v) for v in outputs]))
    return sets


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="fast,formal,onnxruntime")
    p.add_argument("--only", help="run only cases whose name contains this")
    p.add_argument("--json", help="write every case's verdicts here")
    p.add_argument("--timeout", type=int, default=60)
    args = p.parse_args()
    import warnings

    warnings.simplefilter("ignore")
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    started = time.perf_counter()
    cases = [c for c in collect_testcases(None) if c.kind == "node" and (not args.only or args.only in c.name)]
    ops = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")})
    backends = args.backends.split(",")
    table: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    records = []
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            op = op_of(case.name, ops)
            path = os.path.join(tmp, "model.onnx")
            onnx.save(case.model, path)
            data = _data_sets(case)
            record = {"case": case.name, "op": op}
            for backend in backends:
                signal.alarm(args.timeout)
                try:
                    if backend == "onnxruntime":
                        verdict, why = run_ort(path, data, case.rtol, case.atol)
                    else:
                        verdict, why = run_nnefx(path, backend, data, case.rtol, case.atol)
                except _Timeout:
                    verdict, why = "crashed", f"timeout after {args.timeout} s"
                except Exception as exc:  # noqa: BLE001 - that is what "crashed" counts
                    verdict, why = "crashed", f"{type(exc).__name__}: {str(exc)[:200]}"
                finally:
                    signal.alarm(0)
                table[op][backend][verdict] += 1
                record[backend] = [verdict, why]
            records.append(record)
    totals = {b: Counter() for b in backends}
    for per in table.values():
        for b in backends:
            totals[b].update(per[b])
    print(f"ONNX node suite of onnx {onnx.__version__}: {len(cases)} cases, {len(table)} operators "
          f"({time.perf_counter() - started:.0f} s)")
    print("| backend | " + " | ".join(VERDICTS) + " |")
    print("|---|" + "---:|" * len(VERDICTS))
    for b in backends:
        print(f"| {b} | " + " | ".join(str(totals[b][v]) for v in VERDICTS) + " |")
    print()
    print("| operator | cases | " + " | ".join(f"{b} pass" for b in backends) + " | nnefx not passing (first) |")
    print("|---|---:|" + "---:|" * len(backends) + "---|")
    for op in sorted(table):
        n = sum(table[op][backends[0]].values())
        first = next((r[backends[0]] for r in records if r["op"] == op and r[backends[0]][0] != "passed"), None)
        note = f"{first[0]}: {first[1][:80]}" if first else ""
        print(f"| {op} | {n} | " + " | ".join(str(table[op][b]["passed"]) for b in backends) + f" | {note} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
