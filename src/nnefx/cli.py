"""The ``nnefx`` command: check, inspect, run and convert models.

Every subcommand loads a model through :func:`nnefx.load`, so each works on every format.
Exit status (see README "Using the command line"): 0 ok; 1 invalid input — the model, its
data or an input file, printed as ``FILE:LINE:COL: error: MESSAGE`` (text) or ``FILE:
[FIELD]: error: MESSAGE`` (binary, XML, JSON); 2 usage — a malformed command line, reported
by argparse with the subcommand's usage; 3 an internal error of nnefx, i.e. a bug: one line
that asks for a report (``--debug`` shows the traceback).  No Python traceback otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
import traceback
from collections.abc import Sequence
from typing import Any

from .diagnostics import Location, NNEFXError

#: Format names ``--format`` and ``--to`` accept (short aliases and the full names).
_FORMAT_CHOICES = ("folder", "archive", "file", "nnef", "ir", "xml", "cvm", "json", "onnx",
                   "nnef-folder", "nnef-archive", "nnef-file")


class UsageError(Exception):
    """A command-line mistake found after argparse: reported like argparse's (exit 2)."""


def _shape_option(text: str) -> str:
    """``--shape NAME=D1,D2,...``: checked while parsing, so a bad one is a usage error."""
    _parse_shapes([text])
    return text


def name_value(text: str, form: str) -> tuple[str, str]:
    """Split a ``NAME=VALUE`` option, or raise argparse's type error naming the ``form``
    expected (so a malformed one is a usage error, found while parsing)."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expects {form}, got '{text}'")
    return name, value


def _input_option(text: str) -> str:
    """``--input NAME=FILE.npy``: checked while parsing, like ``--shape``."""
    name_value(text, "NAME=FILE.npy")
    return text


def positive(text: str) -> int:
    """A whole number of at least 1, checked while parsing (a usage error otherwise)."""
    return _count(1)(text)


def thread_count(text: str) -> int:
    """``--threads N``: 1 to the most an engine is asked for, checked while parsing."""
    from .engines.loaded import MAX_THREADS

    return _count(1, MAX_THREADS)(text)


def _count(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects a whole number, got '{text}'") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


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
            raise argparse.ArgumentTypeError(f"expects NAME=D1,D2,... with positive integers, got '{item}'")
        shapes[name] = shape
    return shapes


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the model: NNEF folder, .nnef document, .tgz/.tar archive, IR .xml "
                                 "(.bin beside it), CVM graph .json (with --params) or .onnx")


def _add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D1,D2,...", type=_shape_option,
                   help="set input NAME's shape (repeatable): replaces an NNEF external's declared shape; "
                        "must fit an IR or ONNX input's declared dims (fixes the unknown ones)")
    p.add_argument("--dialect", choices=["provisional", "final"],
                   help="force the NNEF dialect (default: told by the document's header)")
    p.add_argument("--params", metavar="FILE", help="the params file of a CVM graph JSON (default: <stem>.params)")
    p.add_argument("--format", dest="input_format", choices=_FORMAT_CHOICES, metavar="FORMAT",
                   help="read the model as this format instead of telling it from the path "
                        "(folder, archive, file, ir, cvm, onnx)")
    p.add_argument("--lenient", action="store_true",
                   help="accept known exporter deviations from NNEF 1.0.5 (each reported as a warning)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bars (they are shown only on a terminal, after a second of work)")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="on an internal error, show the Python traceback")


def _choice(p: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in p._actions if flag in a.option_strings)


def load_options(args: argparse.Namespace) -> dict:
    """The ``nnefx.load`` options the shared load options (``_add_load_options``) ask for."""
    options: dict = {}
    if getattr(args, "dialect", None):
        options["dialect"] = args.dialect
    if getattr(args, "params", None):
        options["params"] = args.params
    if getattr(args, "input_format", None):
        options["format"] = args.input_format
    if getattr(args, "shape", None):
        options["input_shapes"] = _parse_shapes(args.shape)
    if getattr(args, "lenient", False):
        options["lenient"] = True
    return options


def _load(args: argparse.Namespace, **extra):
    from .api import load

    options = {**extra, **load_options(args)}
    import warnings

    from .diagnostics import NNEFXWarning
    from .tools.progress import activity

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NNEFXWarning)
        try:
            with activity(f"loading {args.model}"):
                model = load(args.model, **options)
        finally:  # also when loading fails: the deviations accepted before the error
            for w in caught:
                if isinstance(w.message, NNEFXWarning):
                    print(str(w.message), file=sys.stderr)
    from .graph import Model  # here, not at the top: `nnefx --blas` must run before numpy loads

    if not isinstance(model, Model) and getattr(args, "func", None) is not cmd_run:
        raise NNEFXError(f"'{args.model}' is a compiled model (nnefx compile): it can be run with nnefx run; "
                         "the other commands take its source")
    return model


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
        model = _load(args)  # checked as `check` does: a compound's attributes before its expansion
        if nnef:
            model = _load(args, expand_all=True)
    else:
        model = _load(args)
    if args.json:
        print(json.dumps(report.graph_json(model.graph), indent=1))
    else:
        print(report.summary_text(model, cost=args.cost, ops=args.ops))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from .api import save

    # --dialect tract names the dialect to write (NNEF for tract); provisional/final the one to read
    write_tract = args.dialect == "tract"
    if write_tract:
        args.dialect = None
    model = _load(args)
    options = {"compress_to_fp16": True} if args.fp16 else {}
    if write_tract:
        options["dialect"] = "tract"
    from .tools.progress import activity

    with activity(f"writing {args.output}"):
        save(model, args.output, format=args.output_format, **options)
    print(f"wrote {args.output}{_structure_only_note(model, args)}")
    return 0


def _structure_only_note(model: Any, args: argparse.Namespace) -> str:
    """What a lone ``.nnef`` document leaves out, said where it was written: it holds the
    structure only (NNEF's tensor data lives in ``.dat`` files beside ``graph.nnef``), so a
    converted model whose variables have data cannot run from it; the note names the
    variables' size and the containers that keep them."""
    from .api import FORMAT_ALIASES, save_format_for

    fmt = FORMAT_ALIASES.get(args.output_format, args.output_format) if args.output_format else \
        save_format_for(args.output)
    if fmt != "nnef-file":
        return ""
    data = [t.data for _, t in model.graph.variables() if t.data is not None]
    if not data:
        return ""
    size = sum(int(getattr(d, "nbytes", 0)) for d in data)
    stem = args.output[: -len(".nnef")] if args.output.endswith(".nnef") else args.output
    return (f" (structure only: a lone document holds no tensor data, so the data of {len(data)} "
            f"variable{'s' if len(data) != 1 else ''} ({size} bytes) is not in it and `nnefx run` refuses it; "
            f"convert to a folder ({stem}) or an archive ({stem}.tgz) to keep the weights)")


def cmd_run(args: argparse.Namespace) -> int:
    from .runtime.cli import run_command

    return run_command(args, _load(args))


_EXAMPLES = {
    "check": """examples:
  nnefx check examples/digits/model                    # ok: graph 'digits', 16 operations, ...
  nnefx check tests/fixtures/ir/opset/cnn.xml --shape x=1,3,16,16
  nnefx check tests/fixtures/cvm/ex01_conv_pool_dense.json""",
    "inspect": """examples:
  nnefx inspect examples/digits/model                  # inputs, outputs, operations, variables
  nnefx inspect --json tests/fixtures/nnef/seed_foobar.nnef
  nnefx inspect tests/fixtures/cvm/ex01_conv_pool_dense.json --cost""",
    "run": """examples:
  nnefx run examples/digits/model --seed 0 -o out      # random input, writes out/probabilities.npy
  nnefx run examples/digits/model --shape input=8,1,8,8 --profile
  nnefx run tests/fixtures/ir/opset/lstm.xml -i x=tests/fixtures/ir/opset/lstm.x.npy""",
    "convert": """examples:
  nnefx convert examples/digits/model digits.tgz       # NNEF folder -> archive
  nnefx convert examples/digits/model digits.onnx      # -> ONNX (needs nnefx[onnx])
  nnefx convert tests/fixtures/ir/legacy/catalog_examples.xml catalog_v11.xml""",
}


def _subcommand(sub, name: str, purpose: str, details: str = ""):
    description = purpose + "." + ("\n\n" + textwrap.fill(details, 78) if details else "")
    return sub.add_parser(name, help=purpose, description=description, epilog=_EXAMPLES[name],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnefx", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Check, inspect, run and convert neural networks (NNEF, IR XML, CVM, ONNX).",
        epilog="exit status: 0 ok, 1 invalid input (FILE:LINE:COL: error: MESSAGE), 2 usage error,\n"
               "3 internal error of nnefx (please report it; --debug shows the traceback).\n"
               "'nnefx COMMAND --help' describes a command's options, with examples.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show nnefx's version and the optional extras found, and exit")
    parser.add_argument("--debug", action="store_true", default=False,
                        help="on an internal error, show the Python traceback")
    parser.add_argument("--blas", metavar="CORETYPE", default=os.environ.get("NNEFX_BLAS_CORETYPE", "off"),
                        help="OpenBLAS kernels for this command: 'auto' (AVX-512 kernels on CPUs OpenBLAS's "
                             "table lacks), a core type name (SkylakeX, Haswell, ...) or 'off' (default; "
                             "env NNEFX_BLAS_CORETYPE); an OPENBLAS_CORETYPE already set always wins")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _subcommand(sub, "check", "validate a model: exit 0 if valid, 1 with the first error's location if not",
                    "Reads the model, checks its structure, types and every operation's attributes, "
                    "and infers every tensor's shape.")
    _add_model(p)
    _add_load_options(p)
    p.set_defaults(func=cmd_check)

    p = _subcommand(sub, "inspect", "show a model's inputs, outputs, operations and variables",
                    "The summary keeps standard compound operations whole; --json prints the flat graph "
                    "with every compound expanded to primitives.")
    _add_model(p)
    _add_load_options(p)
    p.add_argument("--json", action="store_true", help="print the flat, fully expanded graph as JSON")
    p.add_argument("--cost", action="store_true",
                   help="also print the integer runtime's cost (\"ops\") of a CVM model")
    p.add_argument("--ops", action="store_true",
                   help="add a table with one row per operation: output shape, parameters, MACs, FLOPs")
    p.set_defaults(func=cmd_inspect)

    p = _subcommand(sub, "convert", "write a model in another format or container",
                    "The output format follows OUTPUT's suffix: none (a folder) for an NNEF model folder, "
                    ".nnef (structure only), .tgz/.tar.gz/.tar, .xml (IR v11 + .bin), .onnx, .json "
                    "(CVM + .params); --to names it instead. The output is written beside the target "
                    "and renamed into place: nothing is left behind on an error.")
    _add_model(p)
    _add_load_options(p)
    p.add_argument("output", help="where to write the converted model")
    p.add_argument("--to", dest="output_format", choices=_FORMAT_CHOICES, metavar="FORMAT",
                   help="write this format whatever OUTPUT's suffix (folder, archive, file, ir, onnx, cvm)")
    p.add_argument("--fp16", action="store_true",
                   help="IR/ONNX output: store float weights as float16 (behind Convert layers / Cast nodes)")
    _choice(p, "--dialect").choices = ["provisional", "final", "tract"]
    _choice(p, "--dialect").help = ("provisional/final: force the input's NNEF dialect; tract: write NNEF that "
                                    "tract loads (standard and tract_core_* operations)")
    p.set_defaults(func=cmd_convert)

    p = _subcommand(sub, "run", "execute a model on given or random inputs and print or save its outputs",
                    "Inputs come from .npy files (never unpickled) or are random of the declared shapes "
                    "(unknown dims: 1); each output is summarised, and written as DIR/NAME.npy with -o.")
    _add_model(p)
    _add_load_options(p)
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy", type=_input_option,
                   help="read input NAME from a .npy file (repeatable); inputs not given are random")
    p.add_argument("--output", "-o", metavar="DIR", help="write each output as DIR/NAME.npy")
    p.add_argument("--backend", choices=_backends(), default="fast",
                   help="fast: vectorised numpy kernels (default); formal: the reference kernels, slow and exact; "
                        "an engine (onnxruntime, openvino, torch) or auto (the fastest, measured)")
    p.add_argument("--verify", action="store_true",
                   help="check the backend's outputs against the formal backend and report the error")
    p.add_argument("--threads", type=thread_count, metavar="N", help="engine threads (default: all cores)")
    p.add_argument("--precision", choices=["f32", "f16", "bf16"], default="f32",
                   help="engine computation precision (default f32; the error against formal is reported)")
    p.add_argument("--device", default="cpu", help="torch backend device, e.g. cuda")
    p.add_argument("--steps", type=_count(1), default=1, metavar="N",
                   help="run N times with the same inputs, carrying variables' updates (recurrent models)")
    p.add_argument("--seed", type=_count(0), default=0, metavar="N", help="seed of the random inputs (default 0)")
    p.add_argument("--profile", action="store_true", help="print the time per operation kind")
    p.add_argument("--quantize", action="store_true",
                   help="apply the graph.quant entries of activations (simulated quantization)")
    p.add_argument("--fetch", action="append", default=[], metavar="NAME[,NAME...]",
                   help="also print (and with -o save) these intermediate tensors; '*' fetches every "
                        "computed tensor")
    p.add_argument("--stats", action="store_true",
                   help="print min/max/mean/std and NaN/Inf counts of the outputs and fetched tensors")
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


class _VersionAction(argparse.Action):
    """``--version``: nnefx's version and which optional extras this installation has."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


#: Optional packages, by the extra that installs them (pyproject.toml).
_OPTIONAL = (("onnx", "onnx", "ONNX read/write"), ("onnxruntime", "onnx", "ONNX peer"),
             ("openvino", "openvino", "IR peer"), ("torch", "torch", "exporters"),
             ("tqdm", "progress", "progress bars"), ("graphviz", "viz", "graph pictures"),
             ("pillow", "images", "ONNX ImageDecoder"))


def version_text() -> str:
    """``nnefx X (Python Y, numpy Z)`` and the optional packages found or missing."""
    from importlib import metadata

    from . import __version__

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    found, missing = [], []
    for dist, extra, _ in _OPTIONAL:
        v = version(dist)
        (found if v else missing).append(f"{dist} {v}" if v else f"{dist} (nnefx[{extra}])")
    lines = [f"nnefx {__version__} (Python {sys.version.split()[0]}, numpy {version('numpy')})",
             "extras found: " + (", ".join(found) or "none"),
             "extras missing: " + (", ".join(missing) or "none"),
             "Graphviz 'dot' program (nnefx draw to .svg/.png): " + (shutil.which("dot") or "not found")]
    return "\n".join(lines)


def _report(exc: BaseException, debug: bool) -> int:
    """The last resort: an exception nnefx did not expect is a bug of ours (exit 3)."""
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    text = str(exc).splitlines()[0] if str(exc) else ""
    print(f"nnefx: internal error: {type(exc).__name__}{': ' + text if text else ''} -- a bug in nnefx; "
          "please report it with the command line and the model"
          + ("" if debug else " (--debug shows the traceback)"), file=sys.stderr)
    return 3


def _choose_blas(argv: Sequence[str]) -> None:
    """Apply ``--blas`` (or ``NNEFX_BLAS_CORETYPE``) before anything imports numpy — the
    full parser's subcommands do — since OpenBLAS reads its choice once, when loaded."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--blas", default=os.environ.get("NNEFX_BLAS_CORETYPE", "off"))
    choice = early.parse_known_args(argv)[0].blas
    if choice.strip().lower() not in ("off", ""):
        from .blas import configure

        configure(choice)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _choose_blas(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    from .tools.progress import set_quiet

    set_quiet(getattr(args, "quiet", False))
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        parser.error(str(exc))
        return 2
    except NNEFXError as exc:
        if getattr(args, "model", None):  # a location without a file is in the model (not "<input>")
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
    except MemoryError:
        print(f"{args.model}: error: out of memory: the model or its inputs are too large for this machine",
              file=sys.stderr)
        return 1
    except OSError as exc:
        # The file system refused something nnefx did not wrap (a permission, a full disk).
        where = exc.filename or getattr(args, "model", None)
        print(f"{Location(str(where)) if where else 'nnefx'}: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the last resort: never a bare traceback
        return _report(exc, debug)


if __name__ == "__main__":
    sys.exit(main())
