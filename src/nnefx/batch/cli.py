"""``nnefx batch``: the command-line face of :func:`nnefx.batch.run`."""

from __future__ import annotations

import argparse
from typing import Any

from ..cli import positive

EXAMPLES = """examples:
  nnefx batch examples/digits/model --inputs 'rows/*.npy' --output out/
  nnefx batch model.onnx --inputs features.parquet --column input=pixels --output out/ --output-format parquet
  nnefx batch model/ --inputs images/ --preprocess 'size=224,224;mean=0.485,0.456,0.406;std=0.229,0.224,0.225' \\
      --output out/ --ray local --workers 2
"""


def _backends() -> list[str]:
    from ..engines import backend_names

    return backend_names()




def _column(text: str) -> str:
    """``--column INPUT=COLUMN``, checked while parsing so a malformed one is a usage error."""
    from ..cli import name_value

    name_value(text, "INPUT=COLUMN")
    return text


def add_parser(sub: Any, add_load_options: Any) -> None:
    p = sub.add_parser(
        "batch", help="run a model over a data set, in shards, resumable (in process or on Ray)",
        description="Run MODEL on every row of a data set and write the outputs as shards. A rerun with the "
                    "same arguments skips the shards already complete; rows that fail are listed in "
                    "OUTPUT/errors.jsonl.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the model (any format nnefx reads); Ray workers must be able to read it")
    p.add_argument("--inputs", required=True, metavar="SRC",
                   help="a folder or glob of .npy/.npz files (one row each), a Parquet file or folder, "
                        "or image files")
    p.add_argument("--output", required=True, metavar="DIR", help="folder for the shards and manifest.json")
    p.add_argument("--ray", metavar="ADDRESS", help="run on Ray: 'local' or a cluster's HOST:PORT")
    p.add_argument("--workers", type=positive, default=1, help="Ray workers, each loads the model once (default 1)")
    p.add_argument("--batch-size", type=positive, default=32, help="rows per Session run (default 32)")
    p.add_argument("--shard-rows", type=positive, help="rows per output shard (default 32 x batch size)")
    p.add_argument("--backend", choices=_backends(), default="fast",
                   help="the backend that runs the model: fast, formal, an engine or auto (Ray workers give "
                        "an engine one thread each)")
    p.add_argument("--output-format", dest="output_format", choices=["npy", "parquet"], default="npy",
                   help="shard files: .npy arrays per output, or one Parquet file per shard")
    p.add_argument("--column", action="append", default=[], metavar="INPUT=COLUMN", type=_column,
                   help="Parquet: the column that feeds a model input (default: the input's name)")
    p.add_argument("--preprocess", metavar="SPEC",
                   help="images: 'size=W,H;mode=RGB|L;scale=S;mean=..;std=..;layout=nchw|nhwc'")
    p.add_argument("--overwrite", action="store_true", help="replace another job's shards in DIR")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first row that fails")
    add_load_options(p)  # with --quiet (no progress bar), as every subcommand
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    from ..diagnostics import NNEFXError
    from .job import run

    columns = {}
    for item in args.column:
        name, sep, column = item.partition("=")
        if not sep or not name or not column:
            raise NNEFXError(f"--column expects INPUT=COLUMN, got '{item}'")
        columns[name] = column
    from ..cli import load_options

    summary = run(args.model, args.inputs, args.output, ray=args.ray, workers=args.workers,
                  batch_size=args.batch_size, shard_rows=args.shard_rows, backend=args.backend,
                  load_options=load_options(args), output_format=args.output_format, columns=columns, preprocess=args.preprocess,
                  overwrite=args.overwrite, fail_fast=args.fail_fast, progress=False if args.quiet else None)
    print(summary)
    return 0
