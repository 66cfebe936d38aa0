"""Parse + check + shape-inference benchmark: nnefx against the official ``nnef`` package.

Generates flat NNEF documents of N operations with a realistic mix (variables, conv with
bias, max/avg pooling, relu/add/mul, batch normalization; ``--doc blocks``, the default) or a
worst case for nnefx's fast path where no two statements share their literal arguments
(``--doc unique``: ``mul``/``add`` with a different scalar each time), or blocks calling a
document-defined fragment (``--doc fragments``); or takes documents a real exporter writes:
``--doc exported`` (a deep ResNet-style torch network of about N operations) and ``--doc
resnet50`` (the 284-statement ResNet-50 of ``benchmarks/run.py``), exported to ONNX by torch
and converted by nnef-tools exactly as ``benchmarks/run.py`` does, at benchmark time (cached
under ``$NNEFX_BENCH_CACHE`` or ``<tmp>/nnefx-parse-bench``; nothing is committed).  It
measures, for each tool in its own fresh subprocess (so neither pays for the other's imports
or garbage), after one warm-up parse of a *different* small document:

* time: wall-clock of text -> checked graph with every tensor shape known
  (official: ``nnef.parse_string`` + ``nnef.infer_shapes``; nnefx:
  ``compile_document``, which takes its flat-document fast path here; general: the same with
  the fast path switched off, i.e. the general parser/checker/expander/shape pass that
  documents with fragments go through; compat: ``nnefx.compat.nnef.parse_string`` +
  ``infer_shapes``),
  best of ``--repeat`` runs (small documents: about a second's worth of runs, at most 300;
  the median and the first timed run are printed too);
* every timed run starts after a full garbage collection (untimed);
* nnefx keeps the statement forms it compiled between documents (``fastpath.FORM_CACHE_SIZE``):
  the ``nnefx`` rows forget them before every run (``fastpath.clear_caches()``), so each run
  pays for compiling every form as the first document of a process does; the ``nnefx-warm``
  rows forget them too, then read one *other* document of the same kind (:data:`WARM`:
  another exporter network for ``exported``/``resnet50``, a 50-operation one for the
  generated kinds) before the timed run, i.e. a process that has read one such document;
* memory: peak resident set size (``resource.getrusage(...).ru_maxrss``) of a subprocess
  that does one run, minus the RSS after imports, plus the ``tracemalloc`` peak of the run
  (Python allocations only, so it under-reports the C++-backed official parser).

Usage::

    python benchmarks/parse.py                   # 10k and 100k operations
    python benchmarks/parse.py --tools official nnefx compat general --ops 10000
    python benchmarks/parse.py --ops 10000 --repeat 5 --tools nnefx official
    python benchmarks/parse.py --profile nnefx --ops 10000   # cProfile top functions
    python benchmarks/parse.py --doc exported --ops 10000    # nnef-tools output, ~10k statements
    python benchmarks/parse.py --doc resnet50 --ops 0        # nnef-tools' ResNet-50 (284 statements)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

TOOLS = ("official", "nnefx", "nnefx-warm", "compat", "general")


def generate(ops: int, channels: int = 16, size: int = 32) -> str:
    """A flat document with about ``ops`` operations (every shape valid)."""
    lines = ["version 1.0;", "", "graph Net( input ) -> ( output )", "{",
             f"    input = external(shape = [1, {channels}, {size}, {size}]);"]
    count, block, prev = 1, 0, "input"
    pad = "[(1, 1), (1, 1)]"
    while count < ops - 1:
        b = f"b{block}"
        kind = block % 4
        body = [
            f"{b}_w = variable(shape = [{channels}, {channels}, 3, 3], label = '{b}/filter');",
            f"{b}_bias = variable(shape = [1, {channels}], label = '{b}/bias');",
            f"{b}_conv = conv({prev}, {b}_w, {b}_bias, padding = {pad}, stride = [1, 1]);",
        ]
        if kind == 1:
            body += [
                f"{b}_mean = variable(shape = [1, {channels}], label = '{b}/mean');",
                f"{b}_var = variable(shape = [1, {channels}], label = '{b}/variance');",
                f"{b}_bn = batch_normalization({b}_conv, {b}_mean, {b}_var, 0.0, 1.0, epsilon = 1e-5);",
                f"{b}_relu = relu({b}_bn);",
            ]
        else:
            body.append(f"{b}_relu = relu({b}_conv);")
        body.append(f"{b}_add = add({b}_relu, {prev});")
        if kind == 2:
            body.append(f"{b}_pool = max_pool({b}_add, size = [1, 1, 3, 3], stride = [1, 1, 1, 1], "
                        "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');")
        elif kind == 3:
            body.append(f"{b}_pool = avg_pool({b}_add, size = [1, 1, 3, 3], stride = [1, 1, 1, 1], "
                        "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'constant');")
        else:
            body.append(f"{b}_pool = mul({b}_add, 0.5);")
        prev = f"{b}_pool"
        lines += ["    " + line for line in body]
        count += len(body)
        block += 1
    lines.append(f"    output = sigmoid({prev});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate_unique(ops: int) -> str:
    """Every statement has its own literal, so no statement reuses another's compiled plan."""
    lines = ["version 1.0;", "", "graph Net( input ) -> ( output )", "{", "    input = external(shape = [1, 16, 8, 8]);"]
    prev = "input"
    for i in range(1, ops - 1):
        lines.append(f"    t{i} = {'mul' if i % 2 else 'add'}({prev}, {1.0 + i * 1e-6!r});")
        prev = f"t{i}"
    lines += [f"    output = relu({prev});", "}"]
    return "\n".join(lines) + "\n"


def generate_fragments(ops: int) -> str:
    """Blocks of variable + conv + activation + add where every fourth activation calls a
    fragment the document defines (nnef-tools writes such fragments, e.g. ``erf``): nnefx
    expands those calls, the official parser is told to lower them (``lowered=['act']``)."""
    lines = ["version 1.0;", "extension KHR_enable_fragment_definitions;", "",
             "fragment act( x: tensor<scalar> ) -> ( y: tensor<scalar> )", "{",
             "    t = mul(x, 0.5);", "    s = sigmoid(x);", "    y = mul(t, s);", "}", "",
             "graph Net( input ) -> ( output )", "{", "    input = external(shape = [1, 16, 8, 8]);"]
    prev, i, count = "input", 0, 1
    while count < ops - 1:
        lines += [f"    w{i} = variable(shape = [16, 16, 1, 1], label = 'w{i}');",
                  f"    c{i} = conv({prev}, w{i}, 0.0);",
                  f"    a{i} = act(c{i});" if i % 4 == 0 else f"    a{i} = relu(c{i});",
                  f"    p{i} = add(a{i}, {prev});"]
        count += 6 if i % 4 == 0 else 4
        prev, i = f"p{i}", i + 1
    lines += [f"    output = copy({prev});", "}"]
    return "\n".join(lines) + "\n"


#: Exported networks: torch -> ONNX -> nnef-tools, written once per size into this folder
#: (a temporary cache: the benchmark's subprocesses read it, nothing is committed).
EXPORT_CACHE = os.environ.get("NNEFX_BENCH_CACHE") or os.path.join(tempfile.gettempdir(), "nnefx-parse-bench")


def _export(name: str, build: Callable[[], tuple[Any, Any]]) -> str:
    """The ``graph.nnef`` text nnef-tools writes for the torch module and example input
    ``build()`` returns, converted as ``benchmarks/run.py`` does (ONNX opset 13, then
    ``nnef_tools.convert --keep-io-names``); cached under :data:`EXPORT_CACHE` by ``name``
    (torch is only imported to make it)."""
    folder = os.path.join(EXPORT_CACHE, name)
    graph_path = os.path.join(folder, name + ".nnef", "graph.nnef")
    if not os.path.exists(graph_path):
        import torch

        net, x = build()
        os.makedirs(folder, exist_ok=True)
        onnx_path = os.path.join(folder, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(net, x, onnx_path, opset_version=13, dynamo=False, input_names=["input"],
                              output_names=["output"])
        subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-model", onnx_path, "--input-format",
                        "onnx", "--output-format", "nnef", "--output-model", os.path.join(folder, name + ".nnef"),
                        "--keep-io-names"], check=True, capture_output=True)
    with open(graph_path) as f:
        return f.read()


def generate_exported(ops: int) -> str:
    """What nnef-tools writes for a deep ResNet-style network of about ``ops`` operations:
    a stem and bottleneck blocks (``benchmarks/resnet_torch.py``) whose widths cycle through
    4..24 channels (so weight shapes vary as in real networks; stride 2 at a third and two
    thirds of the depth) on a 1x3x16x16 input, fixed seed.  nnef-tools folds the batch
    normalisations into the convolutions; a block becomes about 20 statements (variables,
    ``copy``, ``unsqueeze``, ``conv``, ``relu``, ``add``)."""
    blocks = max(1, (ops - 8) // 20)

    def build() -> tuple[Any, Any]:
        import torch
        import torch.nn as nn

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from resnet_torch import Bottleneck

        torch.manual_seed(0)
        layers: list[Any] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for i in range(blocks):
            width = 4 + 4 * (i % 6)
            layers.append(Bottleneck(cin, width, 2 if i in (blocks // 3, 2 * blocks // 3) else 1))
            cin = width * Bottleneck.expansion
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
        return nn.Sequential(*layers).eval(), torch.randn(1, 3, 16, 16)

    return _export(f"deep_resnet_{blocks}", build)


def generate_resnet50(ops: int = 0) -> str:
    """The ResNet-50 document nnef-tools writes (1x3x224x224, ``benchmarks/run.py``'s
    network and conversion; 284 statements; ``ops`` is ignored)."""

    def build() -> tuple[Any, Any]:
        import torch

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from resnet_torch import resnet

        return resnet(50), torch.randn(1, 3, 224, 224)

    return _export("resnet50_b1", build)


DOCS = {"blocks": generate, "unique": generate_unique, "fragments": generate_fragments,
        "exported": generate_exported, "resnet50": generate_resnet50}
#: What the official package (and its drop-in) must lower to infer shapes of a document.
LOWERED = {"fragments": ["act"]}


def _run_once(tool: str, text: str, lowered: list[str] | None = None) -> int:
    """Parse, check and infer shapes; returns the number of tensors with a known shape."""
    if tool == "official":
        import nnef

        graph = nnef.parse_string(text, lowered=lowered or [])
        nnef.infer_shapes(graph)
        return sum(t.shape is not None for t in graph.tensors.values())
    if tool == "compat":
        import nnefx.compat.nnef as nnef_compat

        graph = nnef_compat.parse_string(text, lowered=lowered)
        nnef_compat.infer_shapes(graph)
        return sum(t.shape is not None for t in graph.tensors.values())
    from nnefx.semantics import fastpath
    from nnefx.semantics.frontend import compile_document

    if tool == "general":  # the general pipeline alone (what documents with fragments pay)
        with fastpath.disabled():
            g = compile_document(text)
    else:
        g = compile_document(text)
    return sum(t.shape is not None for t in g.tensors.values())


def _imports(tool: str) -> None:
    if tool == "official":
        import nnef  # noqa: F401
    else:
        import nnefx.compat.nnef  # noqa: F401
        import nnefx.semantics.frontend  # noqa: F401


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


#: The other document nnefx-warm reads before each timed run (see the module docstring).
WARM: dict[str, Callable[[], str]] = {
    "blocks": lambda: generate(50), "unique": lambda: generate_unique(50), "fragments": lambda: generate_fragments(50),
    "exported": lambda: generate_resnet50(), "resnet50": lambda: generate_exported(1168)}


def _prepare(tool: str, doc: str) -> Callable[[], None]:
    """What runs, untimed, before each timed run: for nnefx, forgetting the statement forms
    compiled so far (and, for nnefx-warm, reading another document of the kind); then, for
    every tool, a full garbage collection, so that no run pays for the previous run's (or
    the warm-up document's) garbage."""
    if tool == "official":
        return gc.collect
    from nnefx.semantics import fastpath

    warm = WARM[doc]() if tool == "nnefx-warm" else None

    def prepare() -> None:
        fastpath.clear_caches()
        if warm is not None:
            _run_once(tool, warm, LOWERED.get(doc))
        gc.collect()

    return prepare


def worker(tool: str, ops: int, mode: str, repeat: int, doc: str = "blocks") -> dict:
    text = DOCS[doc](ops)
    _imports(tool)
    _run_once(tool, generate(50))  # warm caches (stdlib parsing, registry loading)
    prepare = _prepare(tool, doc)
    if mode == "time":
        # Every run parses the text into a new graph, after ``prepare`` (nnefx: compiled
        # statement forms forgotten, see the module docstring; the first timed run is
        # reported on its own as well).  Small documents are parsed many times (about a
        # second's worth, at most 300) for a stable figure.
        times: list[float] = []
        shaped = 0
        runs = repeat
        while len(times) < runs:
            prepare()
            start = time.perf_counter()
            shaped = _run_once(tool, text, LOWERED.get(doc))
            times.append(time.perf_counter() - start)
            if len(times) == 1 and times[0] < 0.05:
                runs = max(repeat, min(300, int(1.0 / max(times[0], 1e-4))))
        ordered = sorted(times)
        return {"seconds": ordered[0], "median": ordered[len(ordered) // 2], "first": times[0], "runs": len(times),
                "shaped": shaped, "lines": text.count("\n")}
    prepare()
    base = _rss_kib()
    tracemalloc.start()
    shaped = _run_once(tool, text, LOWERED.get(doc))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rss_peak_mib": (maxrss - base) / 1024, "tracemalloc_peak_mib": peak / 2**20, "shaped": shaped}


def _subprocess(tool: str, ops: int, mode: str, repeat: int, doc: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, "--ops", str(ops), "--mode", mode, "--repeat", str(repeat),
           "--doc", doc]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile(tool: str, ops: int, doc: str = "blocks") -> None:
    import cProfile
    import pstats

    text = DOCS[doc](ops)
    _imports(tool)
    _run_once(tool, generate(50))
    _prepare(tool, doc)()
    prof = cProfile.Profile()
    prof.enable()
    _run_once(tool, text, LOWERED.get(doc))
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--tools", nargs="*", default=["official", "nnefx", "compat"], choices=TOOLS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--doc", choices=tuple(DOCS), default="blocks")
    ap.add_argument("--worker", choices=TOOLS)
    ap.add_argument("--mode", choices=("time", "memory"), default="time")
    ap.add_argument("--profile", choices=TOOLS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.ops[0], args.mode, args.repeat, args.doc)))
        return
    if args.profile:
        profile(args.profile, args.ops[0], args.doc)
        return
    print(f"# parse+check+shapes benchmark ({args.doc} documents), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| ops | tool | time (s), best | median / first run (s) | ops/s | peak RSS over baseline (MiB) | "
          "tracemalloc peak (MiB) | shaped tensors |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.ops:
        count = n
        if args.doc in ("exported", "resnet50"):  # convert once, before the timed subprocesses
            count = DOCS[args.doc](n).count(";") - 1  # statements (the version line aside)
        repeat = args.repeat if n <= 20_000 else max(1, args.repeat // 2)
        for tool in args.tools:
            t = _subprocess(tool, n, "time", repeat, args.doc)
            m = _subprocess(tool, n, "memory", 1, args.doc)
            if "error" in t or "error" in m:
                print(f"| {count} | {tool} | error: {t.get('error') or m.get('error')} | | | | | |")
                continue
            print(f"| {count} | {tool} | {t['seconds']:.4f} | {t['median']:.4f} / {t['first']:.4f} ({t['runs']} runs) | "
                  f"{count / t['seconds']:,.0f} | {m['rss_peak_mib']:.0f} | {m['tracemalloc_peak_mib']:.1f} | "
                  f"{t['shaped']} |", flush=True)
    print(f"# load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
