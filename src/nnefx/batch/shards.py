"""A batch job's output folder: shards, the manifest that commits them, the errors file.

Layout of ``DIR``::

    manifest.json                 the job (model digest, backend, arguments), this run's token, done shards
    shard-00000.keys.npy          input keys of the rows in shard 0, in input order   (npy format)
    shard-00000.<output>.npy      one array per model output, rows in the same order
    shard-00000.parquet           or: one Parquet file per shard, a `key` column + one per output
    errors.jsonl                  one line per row that failed: {"key", "shard", "error"}

Nothing is half-written: every file is written to a temporary beside it and renamed, and a
shard counts as done only once ``manifest.json`` — written before the first shard and
rewritten the same way as shards complete — lists it with the SHA-256 of each of its files.
The worker that computed a shard writes its files (:func:`write_shard`); the driver alone
writes the manifest.  A rerun verifies those digests and redoes
any shard whose files are missing or changed.  Temporaries of an interrupted run
(``.nnefx-*.tmp``) are removed by the next one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import socket
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError

MANIFEST = "manifest.json"
ERRORS = "errors.jsonl"
FORMAT_VERSION = 1
_SHARD_FILE = re.compile(r"^shard-\d{5,}\.")


def shard_stem(index: int) -> str:
    return f"shard-{index:05d}"


def file_names(outputs: Sequence[str]) -> dict[str, str]:
    """A distinct, safe file-name part for each output name (tensor names may hold '/', ':')."""
    used: set[str] = {"keys"}
    names: dict[str, str] = {}
    for name in outputs:
        base = re.sub(r"[^A-Za-z0-9_-]", "_", name).strip("_") or "output"
        candidate, n = base, 1
        while candidate.lower() in used:
            n += 1
            candidate = f"{base}_{n}"
        used.add(candidate.lower())
        names[name] = candidate
    return names


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def write_atomic(path: str, data: bytes) -> None:
    """``data`` into ``path`` through a temporary beside it, with the permissions open() would give."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nnefx-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def encode_shard(keys: Sequence[str], outputs: Mapping[str, np.ndarray], names: Mapping[str, str],
                 fmt: str) -> dict[str, bytes]:
    """The files of one shard (name -> bytes), before they are written."""
    files: dict[str, bytes] = {}
    if fmt == "npy":
        files["keys.npy"] = _npy(np.asarray(list(keys), dtype=str))
        for name, array in outputs.items():
            files[f"{names[name]}.npy"] = _npy(array)
        return files
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, Any] = {"key": pa.array(list(keys), pa.string())}
    meta: dict[str, Any] = {}
    for name, array in outputs.items():
        # the row width from the per-row shape, so a shard whose every row failed (no rows at
        # all) still gets its typed, empty column
        rows = array.reshape(len(keys), int(np.prod(array.shape[1:], dtype=np.int64)))
        flat = pa.array(rows.reshape(-1))
        columns[name] = pa.FixedSizeListArray.from_arrays(flat, rows.shape[1]) if len(keys) else \
            pa.array([], pa.list_(flat.type, rows.shape[1]))
        meta[name] = {"shape": list(array.shape[1:]), "dtype": str(array.dtype)}
    table = pa.table(columns).replace_schema_metadata({"nnefx": json.dumps(meta)})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    files["parquet"] = buffer.getvalue()
    return files


def write_shard(folder: str, index: int, files: Mapping[str, bytes]) -> dict[str, str]:
    """Write one shard's files into the output ``folder``; their SHA-256 by name.

    Called by the worker that computed the shard, wherever it runs, once :func:`check_run`
    has shown that ``folder`` is the driver's.  Each file goes through a temporary beside
    it, so a worker killed here leaves only a ``.nnefx-*.tmp`` that the driver removes.
    """
    stem = shard_stem(index)
    digests = {}
    for part, data in files.items():
        name = f"{stem}.{part}"
        write_atomic(os.path.join(folder, name), data)
        digests[name] = digest_bytes(data)
    return digests


def check_run(folder: str, run: str) -> None:
    """Refuse to write into ``folder`` unless its manifest is that of run ``run``: a worker on
    another machine that sees another folder at the same path (no shared storage) writes
    nothing."""
    file = os.path.join(folder, MANIFEST)
    try:
        with open(file, encoding="utf-8") as f:
            found = json.load(f).get("run")
    except (OSError, ValueError, AttributeError):
        found = None
    if found != run:
        raise NNEFXError(f"the output folder on worker host '{socket.gethostname()}' is not the driver's "
                         "(another job's manifest, or none): Ray workers write their shards themselves, "
                         "so the output folder must be on storage shared with the driver", Location(folder))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def read_shard(folder: str, entry: Mapping[str, Any]) -> tuple[list[str], dict[str, np.ndarray]]:
    """Keys and outputs of a done shard (for users and tests; the job never reads them back)."""
    stem = entry["stem"]
    if entry["format"] == "npy":
        keys = np.load(os.path.join(folder, f"{stem}.keys.npy"), allow_pickle=False).tolist()
        outputs = {name: np.load(os.path.join(folder, f"{stem}.{part}.npy"), allow_pickle=False)
                   for name, part in entry["outputs"].items()}
        return keys, outputs
    import pyarrow.parquet as pq

    table = pq.read_table(os.path.join(folder, f"{stem}.parquet"))
    meta = json.loads(table.schema.metadata[b"nnefx"])
    keys = table.column("key").to_pylist()
    outputs = {}
    for name, info in meta.items():
        flat = np.asarray(table.column(name).combine_chunks().flatten(), dtype=info["dtype"])
        outputs[name] = flat.reshape([len(keys)] + info["shape"])
    return keys, outputs


class OutputFolder:
    """The output folder of one job: checks it belongs to this job, commits shards, keeps errors."""

    def __init__(self, path: str, job: Mapping[str, Any], *, overwrite: bool = False):
        self.path = path
        self.job = dict(job)
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise NNEFXError(f"cannot create the output folder ({exc.strerror or exc})", Location(path)) from None
        self._remove_temporaries()
        manifest = self._read_manifest()
        if manifest is not None and manifest.get("job") != self.job:
            if not overwrite:
                changed = sorted(k for k in set(self.job) | set(manifest.get("job") or {})
                                 if (manifest.get("job") or {}).get(k) != self.job.get(k))
                raise NNEFXError("this folder holds the shards of another job (changed: "
                                 f"{', '.join(changed) or 'format'}); use --overwrite to replace them",
                                 Location(os.path.join(path, MANIFEST)))
            manifest = None
        if manifest is None:
            strays = [n for n in os.listdir(path) if _SHARD_FILE.match(n) or n == ERRORS]
            if strays and not overwrite:
                raise NNEFXError(f"this folder holds shard files without a manifest ({strays[0]}, ...): "
                                 "another job's; use --overwrite to replace them", Location(path))
            for name in strays:
                os.unlink(os.path.join(path, name))
            manifest = {"version": FORMAT_VERSION, "job": self.job, "shards": {}}
        self.manifest = manifest

    def _read_manifest(self) -> dict[str, Any] | None:
        file = os.path.join(self.path, MANIFEST)
        if not os.path.exists(file):
            return None
        try:
            with open(file, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError) as exc:
            raise NNEFXError(f"unreadable manifest ({exc}); use --overwrite to start again", Location(file)) from None
        if not isinstance(manifest, dict) or manifest.get("version") != FORMAT_VERSION \
                or not isinstance(manifest.get("shards"), dict):
            raise NNEFXError("not a manifest of this nnefx version; use --overwrite to start again", Location(file))
        return manifest

    def _remove_temporaries(self) -> None:
        for name in os.listdir(self.path):
            if name.startswith(".nnefx-") and name.endswith(".tmp"):
                os.unlink(os.path.join(self.path, name))

    def done(self, index: int) -> bool:
        """True when shard ``index`` is committed and each of its files still has its digest."""
        entry = self.manifest["shards"].get(str(index))
        if entry is None:
            return False
        return all(digest_file(os.path.join(self.path, name)) == digest for name, digest in entry["files"].items())

    def start(self) -> str:
        """Write the manifest before any worker writes a shard; returns this run's token.

        Workers write their shards' files themselves (:func:`write_shard`) and check the token
        first, so a worker that sees another folder at the same path (no shared storage)
        refuses instead of writing elsewhere.  Files of a shard that the manifest does not list
        yet are not part of the output: a rerun writes them again.
        """
        self.manifest["run"] = secrets.token_hex(8)
        self.flush()
        return self.manifest["run"]

    def record(self, index: int, rows: tuple[int, int], digests: Mapping[str, str], outputs: Mapping[str, str],
               fmt: str, errors: Sequence[tuple[str, str]], *, flush: bool = True) -> None:
        """List a shard whose files are written (with their SHA-256) in the manifest.

        ``flush=False`` leaves the manifest's rewrite to a later :meth:`flush` (the caller
        batches rewrites; until then the shard is simply not done yet for a rerun).
        """
        self.manifest["shards"][str(index)] = {
            "stem": shard_stem(index), "rows": list(rows), "format": fmt, "outputs": dict(outputs),
            "files": dict(digests), "errors": [{"key": k, "error": e} for k, e in errors]}
        if flush:
            self.flush()

    def flush(self) -> None:
        """Rewrite ``manifest.json`` (atomically): the commit point of every shard it lists."""
        data = json.dumps(self.manifest, indent=1, sort_keys=True).encode()
        write_atomic(os.path.join(self.path, MANIFEST), data)

    def finish(self) -> None:
        """Once no worker writes any more: the manifest rewritten without the run token (so a
        finished job's folder does not depend on how many runs it took), and the temporaries
        of writers that died removed."""
        self.manifest.pop("run", None)
        self.flush()
        self._remove_temporaries()

    def write_errors(self) -> int:
        """``errors.jsonl`` from the manifest (all shards, shard order); returns the number of errors."""
        lines = []
        for index in sorted(self.manifest["shards"], key=int):
            for e in self.manifest["shards"][index]["errors"]:
                lines.append(json.dumps({"key": e["key"], "shard": int(index), "error": e["error"]}))
        target = os.path.join(self.path, ERRORS)
        if lines:
            write_atomic(target, ("\n".join(lines) + "\n").encode())
        elif os.path.exists(target):
            os.unlink(target)
        return len(lines)
