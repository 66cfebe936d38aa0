"""``nnefx compare``: two models, or one model on two backends, on the same inputs.

What is compared: every output (matched by name, or by position when the two models
name them differently but have as many), and with ``--tensors`` every intermediate tensor
the two graphs both compute (by name; nnefx backends only), in the first model's order.
A tensor *diverges* when an element breaks ``|a - b| <= atol + rtol * |b|`` (numpy's
``allclose`` rule, ``b`` the second run), when NaNs sit in different places, or when the
shapes differ; the report names the first diverging intermediate tensor and the operation
that computes it, which is where to look.

Backends: ``fast`` and ``formal`` (nnefx's own) and ``onnxruntime`` (the ``onnx`` extra:
an ``.onnx`` model runs as it is; any other model is first written to ONNX by nnefx, so
this also checks the exporter).

Exit status: 0 everything compared agrees within the tolerance, 4 something diverges,
1 invalid input (a model or input file), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..graph import Model
from ..runtime.session import TensorInfo

#: Exit status when the compared runs diverge beyond the tolerance.
EXIT_DIVERGED = 4
BACKENDS = ("fast", "formal", "onnxruntime")


@dataclass
class Difference:
    """How two arrays differ: ``ok`` under the tolerance, else ``why`` says how not."""

    name: str
    shape: str
    max_abs: float
    max_rel: float
    ok: bool
    why: str = ""


def difference(name: str, a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> Difference:
    """Max absolute and relative difference of ``a`` from ``b`` and whether they agree."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return Difference(name, f"{list(a.shape)} vs {list(b.shape)}", float("inf"), float("inf"), False,
                          "shapes differ")
    shape = str(list(a.shape))
    if a.size == 0:
        return Difference(name, shape, 0.0, 0.0, True)
    x = a.astype(np.float64) if a.dtype.kind in "biuf" else a
    y = b.astype(np.float64) if b.dtype.kind in "biuf" else b
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        same = bool(np.array_equal(a, b))
        return Difference(name, shape, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same,
                          "" if same else "values differ")
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        equal = (x == y) | (np.isnan(x) & np.isnan(y))
        d = np.where(equal, 0.0, np.abs(x - y))
        d = np.where(np.isnan(d), np.inf, d)  # NaN in one run only, or inf against -inf
        rel = np.where(d == 0, 0.0, d / np.abs(y))
        within = equal | (d <= atol + rtol * np.abs(y))
    ok = bool(within.all())
    why = ""
    if not ok:
        where = np.unravel_index(int(np.argmax(~within.reshape(-1))), a.shape) if a.ndim else ()
        why = f"first at {[int(i) for i in where]}: {_value(a[where])} vs {_value(b[where])}"
    return Difference(name, shape, float(d.max()), float(np.where(np.isnan(rel), np.inf, rel).max()), ok, why)


def _value(v: Any) -> str:
    return f"{float(v):.7g}" if isinstance(v, (float, np.floating)) else str(v.item() if hasattr(v, "item") else v)


class _Runner:
    """One model on one backend: its inputs, outputs and a run with fetched tensors."""

    label: str
    inputs: list[TensorInfo]
    outputs: list[str]
    computed: list[str]  # intermediate tensors it can fetch, graph order
    producers: dict[str, Any]

    def run(self, feeds: dict[str, np.ndarray], fetch: list[str]) -> dict[str, np.ndarray]:
        raise NotImplementedError


class _NnefxRunner(_Runner):
    def __init__(self, model: Model, backend: str, path: str):
        from ..runtime.session import Session
        from .stats import computed_tensors

        self.session = Session(model, backend=backend)
        self.label = f"{path} ({backend} backend)"
        self.inputs = self.session.inputs
        self.outputs = [o.name for o in self.session.outputs]
        graph = self.session.plan.graph
        self.computed = [n for n in computed_tensors(graph) if n not in self.outputs]
        self.producers = graph.producers()

    def run(self, feeds: dict[str, np.ndarray], fetch: list[str]) -> dict[str, np.ndarray]:
        return self.session.run(feeds, fetch=fetch)


class _OrtRunner(_Runner):
    _TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
              "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}

    def __init__(self, model: Model, path: str, workdir: str):
        try:
            import onnxruntime as ort
        except ImportError:
            raise NNEFXError("the onnxruntime backend needs the 'onnxruntime' package: "
                             "pip install 'nnefx[onnx]'") from None
        if model.format == "onnx" and model.source:
            onnx_path = model.source
            self.label = f"{path} (onnxruntime)"
        else:
            from ..api import save

            onnx_path = os.path.join(workdir, f"model{len(os.listdir(workdir))}.onnx")
            save(model, onnx_path)
            self.label = f"{path} (written as ONNX by nnefx, onnxruntime)"
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 -- onnxruntime's own refusal, reported as such
            raise NNEFXError(f"onnxruntime cannot load the model: {exc}") from None
        self.inputs = [TensorInfo(i.name, tuple(d if isinstance(d, int) else None for d in i.shape),
                                  "integer" if "int" in i.type else "logical" if "bool" in i.type else "scalar")
                       for i in self.session.get_inputs()]
        self._dtypes = {i.name: self._TYPES.get(i.type) for i in self.session.get_inputs()}
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.computed = []
        self.producers = {}

    def run(self, feeds: dict[str, np.ndarray], fetch: list[str]) -> dict[str, np.ndarray]:
        typed = {k: v.astype(self._dtypes[k]) if self._dtypes.get(k) else v for k, v in feeds.items()}
        try:
            values = self.session.run(None, typed)
        except Exception as exc:  # noqa: BLE001
            raise NNEFXError(f"onnxruntime failed to run the model: {exc}") from None
        return dict(zip(self.outputs, values, strict=True))


def _runner(model: Model, backend: str, path: str, workdir: str) -> _Runner:
    if backend == "onnxruntime":
        return _OrtRunner(model, path, workdir)
    return _NnefxRunner(model, backend, path)


def _match(names_a: list[str], names_b: list[str], what: str) -> list[tuple[str, str]]:
    """Pairs by name, or by position when no name is shared and the counts agree."""
    if set(names_a) == set(names_b):
        return [(n, n) for n in names_a]
    if len(names_a) == len(names_b):
        return list(zip(names_a, names_b, strict=True))
    raise NNEFXError(f"the two models' {what} differ: {', '.join(names_a)} vs {', '.join(names_b)}")


def _plan_runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    from ..cli import UsageError

    backends = list(args.backend or [])
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {args.seed}")
    if args.other is None:
        if len(backends) != 2:
            raise UsageError("compare one model on two backends (--backend X --backend Y) "
                             "or two models (compare A B)")
        return [(args.model, backends[0]), (args.model, backends[1])]
    if len(backends) > 2:
        raise UsageError("--backend is given once (both models) or twice (one per model)")
    first = backends[0] if backends else "fast"
    second = backends[1] if len(backends) == 2 else first
    return [(args.model, first), (args.other, second)]


def compare_command(args: argparse.Namespace, load: Any) -> int:
    """``nnefx compare``; ``load(args, **options)`` is the CLI's model loader."""
    from ..runtime.cli import load_npy, parse_input_option, random_input
    from . import progress

    runs = _plan_runs(args)
    with tempfile.TemporaryDirectory(prefix="nnefx-compare-") as workdir:
        runners = []
        for path, backend in runs:
            model = load(argparse.Namespace(**{**vars(args), "model": path}))
            runners.append(_runner(model, backend, path, workdir))
        a, b = runners
        print(f"A: {a.label}")
        print(f"B: {b.label}")

        pairs_in = _match([i.name for i in a.inputs], [i.name for i in b.inputs], "inputs")
        given: dict[str, np.ndarray] = {}
        sources: dict[str, str] = {}
        for option in args.input:
            name, path = parse_input_option(option)
            if name not in dict(pairs_in):
                raise NNEFXError(f"'{name}' is not an input of the first model "
                                 f"(inputs: {', '.join(n for n, _ in pairs_in) or 'none'})")
            given[name], sources[name] = load_npy(path), path
        rng = np.random.default_rng(args.seed)
        for info in a.inputs:
            if info.name not in given:
                given[info.name], sources[info.name] = random_input(info, rng), f"random (seed {args.seed})"
            print(f"input  {info.name}: {list(given[info.name].shape)} <- {sources[info.name]}")
        feeds_b = {nb: given[na] for na, nb in pairs_in}

        fetch_a: list[str] = []
        fetch_b: list[str] = []
        if args.tensors:
            if not a.computed and not b.computed or isinstance(a, _OrtRunner) or isinstance(b, _OrtRunner):
                print("note: --tensors compares intermediate tensors of nnefx backends only; "
                      "comparing outputs")
            else:
                common = set(b.computed)
                fetch_a = [n for n in a.computed if n in common]
                fetch_b = fetch_a
                if not fetch_a:
                    print("note: the two graphs name no intermediate tensor alike; comparing outputs")
        with progress.bar(2, "runs", unit="run") as bar:
            out_a = a.run(given, fetch_a)
            bar.update()
            out_b = b.run(feeds_b, fetch_b)
            bar.update()

    rows = [difference(na if na == nb else f"{na} / {nb}", out_a[na], out_b[nb], args.atol, args.rtol)
            for na, nb in _match(a.outputs, b.outputs, "outputs")]
    tensor_rows = [difference(n, out_a[n], out_b[n], args.atol, args.rtol) for n in fetch_a]
    print()
    print(_table("output", rows))
    if tensor_rows:
        print()
        print(_table("tensor", tensor_rows))
    print()
    bad = [r for r in rows + tensor_rows if not r.ok]
    tol = f"atol {args.atol:g}, rtol {args.rtol:g}"
    first = next((r for r in tensor_rows if not r.ok), None)
    if first is not None:
        op = a.producers.get(first.name)
        where = f" (operation '{op.op}'{' at ' + str(op.location) if op is not None and op.location else ''})" \
            if op is not None else ""
        print(f"first diverging tensor: {first.name}{where}: {first.why}")
    if bad:
        print(f"DIFFER: {len(bad)} of {len(rows) + len(tensor_rows)} tensors beyond {tol}")
        return EXIT_DIVERGED
    print(f"agree: {len(rows)} output{'s' if len(rows) != 1 else ''}"
          f"{f' and {len(tensor_rows)} intermediate tensors' if tensor_rows else ''} within {tol}")
    return 0


def _table(title: str, rows: list[Difference]) -> str:
    header = (title, "shape", "max abs", "max rel", "")
    cells = [header] + [(r.name, r.shape, f"{r.max_abs:.3g}", f"{r.max_rel:.3g}",
                         "ok" if r.ok else f"DIFFERS ({r.why})") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = []
    for c in cells:
        lines.append("  ".join([c[0].ljust(widths[0]), c[1].ljust(widths[1]), c[2].rjust(widths[2]),
                                c[3].rjust(widths[3]), c[4]]).rstrip())
    return "\n".join(lines)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``compare`` subcommand's arguments (called by ``nnefx.cli.build_parser``)."""
    p = sub.add_parser(
        "compare", help="run two models, or one model on two backends, and compare their results",
        description="Run two models (say, an NNEF model and its ONNX export) or one model on two backends "
                    "on the same inputs and report the largest absolute and relative difference per "
                    "output; with --tensors also per intermediate tensor, naming the first that diverges. "
                    "Exit status: 0 agree within the tolerance, 4 diverge, 1 invalid input, 2 usage.",
        epilog="examples:\n"
               "  nnefx compare examples/digits/model --backend fast --backend formal\n"
               "  nnefx compare examples/digits/model --backend fast --backend formal --tensors\n"
               "  nnefx convert examples/digits/model digits.onnx && nnefx compare examples/digits/model digits.onnx",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the first model (A): NNEF folder/.nnef/archive, IR .xml, CVM .json or .onnx")
    p.add_argument("other", nargs="?", help="the second model (B); omitted: A on two backends")
    p.add_argument("--backend", action="append", choices=BACKENDS,
                   help="backend of both models, or given twice: of A then of B (default fast); "
                        "onnxruntime runs .onnx files as they are and other models as nnefx writes them to ONNX")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input of A (B's input of the same name or position gets the same array); "
                        "inputs not given are random")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    p.add_argument("--tensors", action="store_true",
                   help="also compare every intermediate tensor both graphs compute (by name) and name the "
                        "first that diverges (nnefx backends)")
    p.add_argument("--atol", type=float, default=1e-5,
                   help="absolute tolerance (default 1e-5): agree where |a-b| <= atol + rtol*|b|")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default 1e-4)")
    return p
