"""The ``nnefx`` command: check, inspect, run and convert models.

Every subcommand loads a model through :func:`nnefx.load`, so each works on every format.
Errors from the library (:class:`NNEFXError`) are printed as ``FILE:LINE:COL: error:
MESSAGE`` and give exit status 1; usage errors give 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .diagnostics import NNEFXError
from .graph import Model


def _add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dialect", choices=["provisional", "final"],
                   help="force the NNEF dialect (default: detected from the document)")
    p.add_argument("--params", help="parameter file of a CVM graph JSON model")
    p.add_argument("--format", dest="input_format",
                   help="force the input format (folder, archive, file, ir, cvm, onnx)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...",
                   help="set an input's shape: NNEF externals take it in place of the declared one (as the official "
                        "tools' external_shapes do); IR inputs must fit their declared dims")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bars (they are shown only on a terminal, after a second of work)")


def _load(args: argparse.Namespace, **extra):
    from .api import load

    options = dict(extra)
    if getattr(args, "dialect", None):
        options["dialect"] = args.dialect
    if getattr(args, "params", None):
        options["params"] = args.params
    if getattr(args, "input_format", None):
        options["format"] = args.input_format
    if getattr(args, "shape", None):
        options["input_shapes"] = _parse_shapes(args.shape)
    from .tools.progress import activity

    with activity(f"loading {args.model}"):
        model = load(args.model, **options)
    if not isinstance(model, Model) and getattr(args, "func", None) is not cmd_run:
        raise NNEFXError(f"'{args.model}' is a compiled model (nnefx compile): it can be run with nnefx run; "
                         "check, inspect, convert and query take its source")
    return model


def _parse_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    """``NAME=1,3,224,224`` options as a dict; malformed ones are usage errors (exit 2)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = None
        if not sep or not name or shape is None or any(d <= 0 for d in shape):
            raise UsageError(f"--shape expects NAME=D1,D2,... with positive integers, got '{item}'")
        shapes[name] = shape
    return shapes


class UsageError(Exception):
    """A command-line mistake found after argparse: reported like argparse's (exit 2)."""


def cmd_check(args: argparse.Namespace) -> int:
    model = _load(args)
    g = model.graph
    print(f"{args.model}: ok: graph '{g.name}', {len(g.operations)} operations, "
          f"{len(g.tensors)} tensors")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from . import report

    if args.json:
        # The JSON is the flat graph fully expanded to primitives (NNEF documents keep
        # standard compounds atomic by default; other formats map straight to primitives
        # or registry operations).
        from .api import FORMAT_ALIASES, detect_format

        fmt = args.input_format or detect_format(args.model)
        nnef = FORMAT_ALIASES.get(fmt, fmt).startswith("nnef")
        model = _load(args, **({"expand_all": True} if nnef else {}))
    else:
        model = _load(args)
    if args.json:
        print(json.dumps(report.graph_json(model.graph), indent=1))
    else:
        print(report.summary_text(model, cost=args.cost, ops=args.ops))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from .api import save

    model = _load(args)
    options = {"compress_to_fp16": True} if args.fp16 else {}
    from .tools.progress import activity

    with activity(f"writing {args.output}"):
        save(model, args.output, format=args.output_format, **options)
    print(f"wrote {args.output}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .runtime.cli import run_command

    return run_command(args, _load(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nnefx", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"nnefx {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("check", help="validate a model (exit 0 valid, 1 invalid)")
    p.add_argument("model", help="NNEF folder/.nnef/archive, IR .xml, CVM .json or .onnx")
    _add_load_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("inspect", help="show a model's graph, shapes and variables")
    p.add_argument("model")
    p.add_argument("--json", action="store_true", help="print the flat, expanded graph as JSON")
    p.add_argument("--cost", action="store_true", help="also report the integer runtime's ops cost")
    p.add_argument("--ops", action="store_true",
                   help="add a table with one row per operation: output shape, parameters, MACs, FLOPs")
    _add_load_options(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("convert", help="convert a model to another format or container")
    p.add_argument("model")
    p.add_argument("output", help="target path (folder, .nnef, .tgz, .xml, .onnx)")
    p.add_argument("--to", dest="output_format", help="force the output format")
    p.add_argument("--fp16", action="store_true",
                   help="IR/ONNX output: store float weights as FP16 (behind Convert layers / Cast nodes)")
    _add_load_options(p)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("run", help="execute a model on given or random inputs")
    p.add_argument("model")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--output", "-o", metavar="DIR", help="write outputs as NAME.npy into DIR")
    p.add_argument("--backend", choices=_backends(), default="fast",
                   help="fast/formal (numpy), an engine (onnxruntime, openvino, torch) or auto (the fastest, measured)")
    p.add_argument("--verify", action="store_true",
                   help="check the backend's outputs against the formal backend and report the error")
    p.add_argument("--threads", type=int, help="engine threads (default: all cores)")
    p.add_argument("--precision", choices=["f32", "f16", "bf16"], default="f32",
                   help="engine computation precision (default f32; the error against formal is reported)")
    p.add_argument("--device", default="cpu", help="torch backend device, e.g. cuda")
    p.add_argument("--steps", type=int, default=1, help="run this many steps (recurrent models)")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    p.add_argument("--profile", action="store_true", help="print time per operation kind")
    p.add_argument("--quantize", action="store_true",
                   help="apply the graph.quant entries of activations (simulated quantization)")
    p.add_argument("--fetch", action="append", default=[], metavar="NAME[,NAME...]",
                   help="also print (and with -o save) these intermediate tensors; '*' fetches every "
                        "computed tensor")
    p.add_argument("--stats", action="store_true",
                   help="print min/max/mean/std and NaN/Inf counts of the outputs and fetched tensors")
    _add_load_options(p)
    p.set_defaults(func=cmd_run)

    from .batch.cli import add_parser as add_batch_parser
    from .engines.cli import add_parsers as add_engine_parsers

    add_batch_parser(sub, _add_load_options)

    from .tools import compare, draw

    p = draw.add_parser(sub)
    _add_load_options(p)
    p.set_defaults(func=lambda a: draw.draw_command(a, _load))
    p = compare.add_parser(sub)
    _add_load_options(p)
    p.set_defaults(func=lambda a: compare.compare_command(a, _load))
    add_engine_parsers(sub, _add_load_options, _load)
    return parser


def _backends() -> list[str]:
    from .engines import backend_names

    return backend_names()


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .tools.progress import set_quiet

    set_quiet(getattr(args, "quiet", False))
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        parser.error(str(exc))
        return 2
    except NNEFXError as exc:
        if exc.location is None and getattr(args, "model", None):
            exc.at_file(args.model)
        print(str(exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and the like: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
