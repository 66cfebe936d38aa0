"""``nnefx query``, ``nnefx bench`` and ``nnefx compile``: the engines' command-line face."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..cli import positive, thread_count

QUERY_EXAMPLES = """examples:
  nnefx query examples/digits/model
  nnefx query model.xml --backend openvino --backend torch
"""
BENCH_EXAMPLES = """examples:
  nnefx bench examples/digits/model --time 1
  nnefx bench model.onnx --backend onnxruntime --backend fast --shape input=8,3,224,224 --threads 2
"""
COMPILE_EXAMPLES = """examples:
  nnefx compile examples/digits/model -o digits.compiled
  nnefx run digits.compiled
  nnefx compile model.onnx -o model.compiled --backend openvino --shape input=1,3,224,224
"""


def add_parsers(sub: Any, add_load_options: Any, load: Any) -> None:
    from . import backend_names

    p = sub.add_parser("query", help="can each backend run the model, and if not, which operations stop it",
                       description="Tell, per backend and before anything is compiled, whether it can run the model; "
                                   "if not, every operation that stops it with its position and the reason.",
                       epilog=QUERY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the model (any format nnefx reads)")
    p.add_argument("--backend", action="append", choices=[b for b in backend_names() if b != "auto"],
                   help="ask only these backends (repeatable; default all)")
    add_load_options(p)
    p.set_defaults(func=lambda args: _query(args, load))

    p = sub.add_parser("bench", help="latency percentiles, throughput and peak memory per backend",
                       description="Benchmark the model on each backend, each in its own process: warm-up, then "
                                   "timed runs for --time seconds; p50/p90/p99 latency, throughput (batch items/s), "
                                   "peak memory, load + first run.",
                       epilog=BENCH_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the model (any format nnefx reads)")
    p.add_argument("--backend", action="append", choices=backend_names(),
                   help="benchmark these backends (repeatable; default: fast and every installed engine that can run it)")
    p.add_argument("--threads", type=thread_count, help="threads per engine (default: all cores)")
    p.add_argument("--time", type=float, default=3.0, help="seconds of timed runs per backend (default 3)")
    p.add_argument("--warmup", type=positive, default=2, help="untimed runs first (default 2)")
    p.add_argument("--precision", choices=["f32", "f16", "bf16"], default="f32", help="engine precision")
    add_load_options(p)
    p.set_defaults(func=lambda args: _bench(args, load))

    p = sub.add_parser("compile", help="compile for an engine once, save it, load it fast later",
                       description="Compile the model for an engine (auto: the fastest measured) and save the engine's "
                                   "own compiled form with a manifest; `nnefx run OUT` and nnefx.load(OUT) use it "
                                   "without reading the source.",
                       epilog=COMPILE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the source model (any format nnefx reads)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder for the compiled model")
    p.add_argument("--backend", choices=["auto", "onnxruntime", "openvino"], default="auto",
                   help="the engine (default auto: the fastest of those that can save a compiled form)")
    p.add_argument("--threads", type=thread_count, help="threads the compiled model runs with (default: all cores)")
    p.add_argument("--precision", choices=["f32", "f16", "bf16"], default="f32", help="engine precision")
    add_load_options(p)
    p.set_defaults(func=_compile)




def _load_options(args: argparse.Namespace) -> dict[str, Any]:
    from ..cli import load_options

    return load_options(args)


def _query(args: argparse.Namespace, load: Any) -> int:
    from .query import query, report

    results = query(load(args), args.backend)
    print(report(results))
    stopped = [name for name, problems in results.items() if problems]
    if args.backend and stopped:  # a backend asked for by name cannot run it: say so as an error
        import sys

        print(f"{args.model}: error: {' and '.join(stopped)} cannot run this model (see above)", file=sys.stderr)
        return 1
    return 0


def _bench(args: argparse.Namespace, load: Any) -> int:
    from ..diagnostics import NNEFXError
    from . import NUMPY_BACKENDS, engines
    from .bench import run, table

    if args.time <= 0:
        raise NNEFXError(f"--time must be positive, got {args.time}")
    # Read here first: a model that does not load is one located error, not a failed row per backend.
    model = load(args)
    backends = args.backend
    if not backends:
        from .query import query

        found = query(model, [*NUMPY_BACKENDS[:1], *[n for n, e in engines().items() if e.available()]])
        backends = [n for n, problems in found.items() if not problems]
    rows = run(args.model, backends, load_options=_load_options(args), threads=args.threads, seconds=args.time,
               warmup=args.warmup, precision=args.precision)
    print(table(rows))
    failed = [r for r in rows if "error" in r]
    if failed and len(failed) == len(rows):
        print(failed[0]["error"], file=sys.stderr)  # the first backend's error, as every command reports one
        return 1
    return 0


def _compile(args: argparse.Namespace) -> int:
    from .compiled import compile_model

    manifest = compile_model(args.model, args.output, backend=args.backend, load_options=_load_options(args),
                             threads=args.threads, precision=args.precision)
    print(f"wrote {args.output}: {manifest['engine']} {manifest['engine_version']}, "
          f"{manifest['latency_ms']:.3f} ms per run ({manifest['reason']})")
    return 0
