"""Run a model over a data set, shard by shard, in this process or on a Ray cluster.

The driver (this process) lists the source's rows, cuts them into shards of ``shard_rows``
consecutive rows, skips the shards the output folder already holds (verified), writes the
manifest that opens this run, and hands the rest to workers.  A worker loads the model once
and turns a shard number into the shard's files: it reads the rows, checks each against the
model's inputs, runs a :class:`~nnefx.runtime.session.Session` on batches of ``batch_size``
rows, writes the outputs (with the keys of the rows that ran) into the output folder, each
file through a temporary and a rename, and returns only the files' digests and the errors
of the rows that did not run.  The driver then lists the shard in the manifest, the commit
point (:mod:`.shards`).  So a shard's outputs cross no process boundary, and a worker that
dies mid-shard leaves no listed shard behind: Ray restarts it and retries the shard, whose
files come out the same as in an uninterrupted run.

On Ray the workers are a Ray Data actor pool (``map_batches`` with an
``ActorPoolStrategy``, one CPU each), fed a dataset of shard numbers: Ray Data streams them
to the actors, restarts an actor that dies and retries its shard.  The worker checks the
run token the driver wrote into the manifest before it writes anything, so a worker that
sees another folder at the same path (no shared storage) refuses.  Without Ray the same
worker runs in this process, so both paths give identical files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError
from . import shards as shard_files
from .sources import RowError, SourceSpec, open_source, read_rows

#: Seconds to wait for a Ray cluster's address to answer before giving up.
CONNECT_TIMEOUT = 10.0
#: Default shard: this many batches.  A shard is the unit of hand-over, resumption and
#: progress; each costs the driver and a Ray worker a few ms (BENCHMARKS.md), so shards of
#: hundreds of ms of compute keep that to about 1 %, and a killed run loses little.
SHARD_BATCHES = 32
#: Seconds between two rewrites of the manifest while shards complete (it grows with the job).
MANIFEST_SECONDS = 0.5


@dataclass
class Summary:
    """What a job did; ``str()`` is the CLI's final line."""

    rows: int
    shards: int
    skipped: int
    failures: int
    seconds: float
    output: str
    backend: str
    workers: int
    ray: bool

    def __str__(self) -> str:
        where = f"{self.workers} Ray worker{'s' * (self.workers != 1)}" if self.ray else "in process"
        skipped = f" ({self.skipped} already complete)" if self.skipped else ""
        errors = f", errors in {os.path.join(self.output, shard_files.ERRORS)}" if self.failures else ""
        return (f"batch: {self.rows} rows, {self.shards} shards{skipped}, {self.failures} failures{errors}, "
                f"{self.seconds:.2f} s ({self.backend} backend, {where})")


def run(model: str, inputs: str, output: str, *, ray: str | None = None, workers: int = 1,
        batch_size: int = 32, shard_rows: int | None = None, backend: str = "fast",
        input_shapes: Mapping[str, Sequence[int]] | None = None, load_options: Mapping[str, Any] | None = None,
        output_format: str = "npy", columns: Mapping[str, str] | None = None,
        preprocess: Mapping[str, Any] | str | None = None, overwrite: bool = False, fail_fast: bool = False,
        progress: bool | None = None) -> Summary:
    """Run the model at path ``model`` on every row of ``inputs``; shards go to folder ``output``.

    ``ray``: None runs in this process; ``"local"`` starts (or joins) a Ray runtime on this
    machine; any other value is a cluster address for ``ray.init``.  ``workers`` Ray actors
    each load the model once.  ``input_shapes`` and ``load_options`` are passed to
    :func:`nnefx.load` (e.g. a shape for a dynamic input).  ``output_format`` is ``"npy"`` or
    ``"parquet"``.  ``columns`` maps model inputs to Parquet columns (default: same names).
    ``progress`` None shows a bar only on a terminal.  Returns a :class:`Summary`; rows that
    fail are kept in ``errors.jsonl`` unless ``fail_fast``, which stops at the first one.
    """
    started = time.perf_counter()
    if batch_size < 1:
        raise NNEFXError(f"batch size must be at least 1, got {batch_size}")
    if workers < 1:
        raise NNEFXError(f"workers must be at least 1, got {workers}")
    shard_rows = shard_rows or SHARD_BATCHES * batch_size
    if shard_rows < 1:
        raise NNEFXError(f"shard rows must be at least 1, got {shard_rows}")
    if output_format not in ("npy", "parquet"):
        raise NNEFXError(f"output format must be npy or parquet, got '{output_format}'")
    options = dict(load_options or {})
    if input_shapes:
        options["input_shapes"] = {k: tuple(int(d) for d in v) for k, v in input_shapes.items()}
    runner = ShardRunner(model, options, backend, batch_size, None, shard_rows)
    spec = open_source(inputs, runner.input_names, columns=columns,
                       preprocess=preprocess if isinstance(preprocess, Mapping) or preprocess is None
                       else _parse(preprocess))
    runner.spec = spec
    count = math.ceil(spec.rows / shard_rows)
    job = {"model": model_digest(model), "backend": backend, "load_options": _jsonable(options),
           "source": source_digest(spec), "batch_size": batch_size, "shard_rows": shard_rows,
           "format": output_format, "rows": spec.rows}
    folder = shard_files.OutputFolder(output, job, overwrite=overwrite)
    todo = [i for i in range(count) if not folder.done(i)]
    names = shard_files.file_names(runner.output_names)
    if progress is None:
        from ..tools.progress import enabled as progress_enabled  # a terminal, no --quiet / NNEFX_PROGRESS=0

        progress = progress_enabled()
    todo_rows = sum(len(_rows(i, shard_rows, spec.rows)) for i in todo)
    bar = _progress_bar(todo_rows, progress)
    results: Iterator[tuple] | None = None
    try:
        if todo:
            if ray:
                connect(ray)  # before the manifest: an address that does not answer leaves the folder as it was
            runner.target(output, folder.start(), names, output_format, fail_fast)
            results = _ray_results(workers, todo, runner) if ray else (runner.write(i) for i in todo)
            flushed = -math.inf
            for index, digests, errors in results:
                if digests is None:
                    key, message = errors[0]
                    raise NNEFXError(f"input '{key}': {message} (stopped by --fail-fast)")
                rows = _rows(index, shard_rows, spec.rows)
                # The manifest is rewritten at most every MANIFEST_SECONDS (and at the end): a
                # shard written but not listed yet is only one a rerun does again.
                now = time.monotonic()
                due = now - flushed >= MANIFEST_SECONDS
                folder.record(index, (rows.start, rows.stop), digests, names, output_format, errors, flush=due)
                flushed = now if due else flushed
                bar.update(len(rows))
    finally:
        bar.close()
        if results is not None:
            results.close()  # Ray: the actors are stopped before the folder is tidied
            folder.finish()
    total_failures = folder.write_errors()
    return Summary(rows=spec.rows, shards=count, skipped=count - len(todo), failures=total_failures,
                   seconds=time.perf_counter() - started, output=output, backend=backend,
                   workers=workers if ray else 1, ray=bool(ray))


def _parse(text: str) -> dict[str, Any]:
    from .sources import parse_preprocess

    return parse_preprocess(text)


def _rows(index: int, shard_rows: int, total: int) -> range:
    return range(index * shard_rows, min(total, (index + 1) * shard_rows))


class ShardRunner:
    """A worker: the model loaded once, a shard number in, the shard's outputs out."""

    def __init__(self, model: str, load_options: Mapping[str, Any], backend: str, batch_size: int,
                 spec: SourceSpec | None, shard_rows: int, threads: int | None = None):
        from ..api import load
        from ..runtime.session import Session

        self.model_path, self.load_options, self.backend = model, dict(load_options), backend
        loaded = load(model, **load_options)
        graph = loaded.graph
        self.row_shapes: dict[str, tuple] = {}
        for name in graph.inputs:
            shape = graph.tensors[name].shape
            if not shape:
                raise NNEFXError(f"input '{name}' has {'no known shape' if shape is None else 'rank 0'}; "
                                 "batch jobs need inputs whose first dimension is the batch")
            self.row_shapes[name] = tuple(shape[1:])
        shapes = {name: (None,) + shape for name, shape in self.row_shapes.items()}
        self.session = Session(loaded, backend=backend, input_shapes=shapes, threads=threads)
        self.input_names = [i.name for i in self.session.inputs]
        self.output_names = [o.name for o in self.session.outputs]
        self.dtypes = {i.name: i.dtype for i in self.session.inputs}
        self.batch_size = batch_size
        self.spec = spec
        self.shard_rows = shard_rows
        self.output: str | None = None

    def target(self, output: str, run: str, names: Mapping[str, str], output_format: str,
               fail_fast: bool) -> None:
        """Where :meth:`write` puts shards: folder ``output`` of run ``run`` (its manifest's token)."""
        self.output, self.run, self.names = output, run, dict(names)
        self.output_format, self.fail_fast = output_format, fail_fast
        self.checked = False

    def write(self, index: int) -> tuple[int, dict[str, str] | None, list[tuple[str, str]]]:
        """Compute shard ``index`` and write its files: (index, SHA-256 per file, row errors).

        With ``fail_fast`` a shard with a row error is not written (digests None), so the
        driver can stop at its first error.
        """
        assert self.output is not None
        index, keys, outputs, errors = self(index)
        if errors and self.fail_fast:
            return index, None, errors
        if not self.checked:
            shard_files.check_run(self.output, self.run)
            self.checked = True
        files = shard_files.encode_shard(keys, outputs, self.names, self.output_format)
        return index, shard_files.write_shard(self.output, index, files), errors

    def __call__(self, index: int) -> tuple[int, list[str], dict[str, np.ndarray], list[tuple[str, str]]]:
        assert self.spec is not None
        rows = _rows(index, self.shard_rows, self.spec.rows)
        keys: list[str] = []
        ready: list[dict[str, np.ndarray]] = []
        errors: list[tuple[str, str]] = []
        for row, value in zip(rows, read_rows(self.spec, rows, self.input_names), strict=True):
            key = self.spec.key(row)
            try:
                if isinstance(value, RowError):
                    raise value
                ready.append(self._fit(value))
                keys.append(key)
            except RowError as exc:
                errors.append((key, str(exc)))
        done_keys: list[str] = []
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self.output_names}
        start = 0
        while start < len(ready):
            stop = start + 1
            shapes = {n: a.shape for n, a in ready[start].items()}
            while stop < len(ready) and stop - start < self.batch_size and \
                    all(ready[stop][n].shape == s for n, s in shapes.items()):
                stop += 1
            for ok, result in self._run(ready[start:stop], keys[start:stop], errors):
                done_keys.append(ok)
                for name in self.output_names:
                    parts[name].append(result[name])
            start = stop
        outputs = {name: np.stack(parts[name]) if parts[name] else np.zeros((0,), np.float32)
                   for name in self.output_names}
        return index, done_keys, outputs, errors

    def _fit(self, row: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from ..runtime.dtypes import kind_matches

        fitted = {}
        for name, array in row.items():
            expected = self.row_shapes[name]
            if array.ndim == len(expected) + 1 and array.shape[0] == 1:
                array = array[0]
            if array.ndim != len(expected) or any(e is not None and e != d for e, d in zip(expected, array.shape, strict=True)):
                raise RowError(f"input '{name}' must have shape "
                               f"[{', '.join('?' if d is None else str(d) for d in expected)}] per row, "
                               f"got {list(array.shape)}")
            if not kind_matches(array, self.dtypes[name]):
                raise RowError(f"input '{name}' must be {self.dtypes[name]} data, got {array.dtype}")
            fitted[name] = array
        return fitted

    def _run(self, rows: list[dict[str, np.ndarray]], keys: list[str],
             errors: list[tuple[str, str]]) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
        """Each row's outputs; a failing batch is rerun row by row to name the rows at fault."""
        batch = {name: np.stack([r[name] for r in rows]) for name in self.input_names}
        try:
            result = self.session.run(batch)
        except NNEFXError as exc:
            if len(rows) == 1:
                errors.append((keys[0], str(exc)))
                return
            for row, key in zip(rows, keys, strict=True):
                yield from self._run([row], [key], errors)
            return
        for name, array in result.items():
            if array.ndim == 0 or array.shape[0] != len(rows):
                raise NNEFXError(f"output '{name}' of shape {list(array.shape)} does not keep the batch "
                                 f"dimension of {len(rows)} rows; batch jobs need outputs with a batch dimension")
        for k, key in enumerate(keys):
            yield key, {name: array[k] for name, array in result.items()}


def model_digest(path: str) -> str:
    """SHA-256 over a model's files (a folder's regular files, or the file and its sidecar)."""
    h = hashlib.sha256()
    if os.path.isdir(path):
        files = sorted(os.path.join(d, n) for d, _, names in os.walk(path) for n in names)
    else:
        stem, ext = os.path.splitext(path)
        files = [path] + ([stem + ".bin"] if ext.lower() == ".xml" and os.path.exists(stem + ".bin") else [])
    for file in files:
        h.update(os.path.relpath(file, path).encode() + b"\0")
        digest = shard_files.digest_file(file)
        if digest is None:
            raise NNEFXError(f"cannot read model file '{file}'")
        h.update(digest.encode())
    return h.hexdigest()


def source_digest(spec: SourceSpec) -> dict[str, Any]:
    """What identifies the input rows: kind, place, file names and sizes (not their bytes: a
    million images are not hashed twice), columns and preprocessing."""
    h = hashlib.sha256()
    for file, n in zip(spec.files, spec.counts or (0,) * len(spec.files), strict=True):
        try:
            size = os.path.getsize(file)
        except OSError:
            size = -1
        h.update(f"{file}\0{size}\0{n}\n".encode())
    return {"kind": spec.kind, "path": os.path.abspath(spec.path), "files": h.hexdigest(),
            "columns": dict(spec.columns), "preprocess": _jsonable(spec.preprocess)}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=list))


def _progress_bar(total: int, show: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # progress is optional; the summary line says the same at the end
        show = False
    if not show:
        class _Silent:
            def update(self, n: int) -> None:
                pass

            def close(self) -> None:
                pass

        return _Silent()
    return tqdm(total=total, unit="row", desc="batch", dynamic_ncols=True, file=sys.stderr)


# ---- Ray ---------------------------------------------------------------------------------

def connect(address: str) -> Any:
    """``ray`` initialised: a local runtime for ``"local"``, else the cluster at ``address``."""
    try:
        import ray
    except ImportError:
        raise NNEFXError("--ray needs Ray: pip install 'nnefx[ray]'") from None
    if ray.is_initialized():
        return ray
    if address not in ("local", "auto"):
        _check_answers(address)
    _quiet_ray_notices()
    try:
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR", configure_logging=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError, ...
        raise NNEFXError(f"cannot connect to the Ray cluster at '{address}' ({exc})") from None
    return ray


#: Ray's log lines that tell a batch user nothing (logger name, message start): the notice that
#: token authentication is on (the security warning that it is off is kept), and Ray Data's
#: "progress bars disabled" (nnefx draws its own progress line).
_RAY_NOTICES = (("ray._private.authentication.authentication_token_setup",
                 "Token authentication is enabled for this Ray cluster"),
                ("ray.data._internal.progress", "Progress bars disabled"))


class _DropNotice(logging.Filter):
    def __init__(self, start: str):
        super().__init__()
        self.start = start

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.start)


def _quiet_ray_notices() -> None:
    for name, start in _RAY_NOTICES:
        log = logging.getLogger(name)
        if not any(isinstance(f, _DropNotice) and f.start == start for f in log.filters):
            log.addFilter(_DropNotice(start))


def _check_answers(address: str) -> None:
    """Fail within :data:`CONNECT_TIMEOUT` seconds when nothing listens at ``host:port``."""
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise NNEFXError(f"a Ray address is HOST:PORT (or 'local'), got '{address}'")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise NNEFXError(f"the Ray cluster at '{address}' does not answer ({exc.strerror or exc})") from None


class BatchWorker:
    """The Ray Data actor (``map_batches`` with an ``ActorPoolStrategy``) around a :class:`ShardRunner`.

    Each call gets a batch of shard numbers, writes those shards into the output folder
    (:meth:`ShardRunner.write`) and returns only their metadata, one JSON string per shard:
    the index, the SHA-256 of each file written (None when ``fail_fast`` stopped at a row
    error) and the row errors.  A failure to start (the model or the source unreadable on the
    worker's machine) is kept and raised by each :meth:`write`; a call returns an
    :class:`NNEFXError` as data (message and location), which the driver raises as it was.
    """

    def __init__(self, args: dict[str, Any]):
        self.runner: ShardRunner | None = None
        self.failure: NNEFXError | None = None
        try:
            # One CPU per actor (num_cpus=1): an engine gets one thread, so workers do not
            # oversubscribe the cores.
            self.runner = ShardRunner(args["model"], args["load_options"], args["backend"], args["batch_size"],
                                      args["spec"], args["shard_rows"], threads=1)
            self.runner.target(**args["target"])
        except NNEFXError as exc:
            self.failure = exc
        except OSError as exc:
            self.failure = NNEFXError(f"a Ray worker on '{socket.gethostname()}' cannot start: {exc}")

    def write(self, index: int) -> tuple[int, dict[str, str] | None, list[tuple[str, str]]]:
        if self.failure is not None:
            raise self.failure
        assert self.runner is not None
        return self.runner.write(index)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        done = []
        for index in batch["index"]:
            try:
                i, digests, errors = self.write(int(index))
            except NNEFXError as exc:
                # Sent back as data: Ray Data would wrap it in a UserCodeException whose cause
                # does not survive the trip, and log its traceback.
                where = dataclasses.asdict(exc.location) if exc.location is not None else None
                done.append(json.dumps({"index": int(index), "failure": exc.message, "location": where}))
                continue
            done.append(json.dumps({"index": i, "files": digests, "errors": errors}))
        return {"done": np.asarray(done, dtype=object)}


def _ray_results(workers: int, todo: list[int], runner: ShardRunner) -> Iterator[tuple]:
    """Each shard's :meth:`ShardRunner.write` result, from a pool of ``workers`` Ray Data actors.

    The shard numbers are a dataset of one row per block, mapped by :class:`BatchWorker` one
    shard per call; Ray Data streams them to the actors as each frees up.  Its actor pools
    restart an actor that dies (killed, out of memory, its machine lost) — loading the model
    anew — and retry its shard; a retried shard's files are written again, through
    temporaries, with the same bytes.  Only metadata (a few hundred bytes) comes back.
    """
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    args = {"model": os.path.abspath(runner.model_path), "load_options": runner.load_options, "backend": runner.backend,
            "batch_size": runner.batch_size, "spec": runner.spec, "shard_rows": runner.shard_rows,
            "target": {"output": os.path.abspath(runner.output or ""), "run": runner.run, "names": runner.names,
                       "output_format": runner.output_format, "fail_fast": runner.fail_fast}}
    dataset = ray.data.from_items([{"index": i} for i in todo], override_num_blocks=len(todo))
    mapped = dataset.map_batches(BatchWorker, fn_constructor_args=(args,), batch_size=1,
                                 compute=ray.data.ActorPoolStrategy(size=min(workers, len(todo))), num_cpus=1)
    rows = iter(mapped.iter_rows())
    try:
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            except Exception as exc:  # Ray wraps the worker's exception (RayTaskError, UserCodeException)
                raise _worker_error(exc) from None
            done = json.loads(row["done"])
            if "failure" in done:
                where = done["location"]
                raise NNEFXError(done["failure"], Location(**where) if where else None)
            yield done["index"], done["files"], [tuple(e) for e in done["errors"]]
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # stops the streaming executor and its actors


def _worker_error(exc: BaseException) -> NNEFXError:
    """The error a Ray worker raised, unwrapped from Ray's exception chain."""
    seen = exc
    for _ in range(8):
        if isinstance(seen, NNEFXError):
            return seen
        cause = getattr(seen, "cause", None) or seen.__cause__ or seen.__context__
        if cause is None:
            break
        seen = cause
    lines = str(exc).strip().splitlines()
    return NNEFXError(f"a Ray worker failed: {lines[-1] if lines else type(exc).__name__}")
