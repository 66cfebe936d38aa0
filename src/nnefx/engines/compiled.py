"""Offline compilation: ``nnefx compile MODEL -o OUT`` writes an engine's compiled form; load it fast.

``OUT`` is a folder:

* ``nnefx-compiled.json`` — the manifest: engine name and version, nnefx version, the
  source's path and SHA-256, the input and output names, shapes and types, threads and
  precision, the measured latency, and the artifact files' sizes and digests (BLAKE3, or
  SHA-256 where the ``blake3`` package is not installed; one per 4 MiB chunk);
* the artifact, in the engine's own format only: OpenVINO's exported compiled model
  (``model.blob``, read back with ``Core.import_model``) or onnxruntime's optimised model
  (``model.onnx``, written by ORT itself, loaded with optimisation already done), its
  weights in ONNX external data (``model.data``, which onnxruntime maps into memory
  instead of parsing and copying them out of the protobuf: session creation for
  ResNet-18 fell from 0.086 to 0.010 s CPU).

``nnefx.load(OUT)`` returns a :class:`CompiledModel` without parsing the source.  It refuses,
with the reason: an artifact whose digest is not the manifest's (truncated or edited), an
engine of another version than the one that compiled it, and a source that changed since
(when it is still where it was).  Nothing is unpickled or executed beyond the engine's own
model format.  Compiled models are for fixed input shapes and stateless graphs.

The artifact is checked, then mapped into memory rather than copied, and the engines compute
with its weights in place (as OpenVINO does with the weights of an IR it reads): replace a
loaded artifact — ``nnefx compile`` does, by renaming — rather than editing it in place while
a process still runs it.  onnxruntime opens its files by name after they were checked; that
the names still are the files checked (same device, inode, size and time) is checked again
once it has, and onnxruntime itself refuses external data outside the model's folder.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import mmap
import os
import stat
import threading
import time
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError

MANIFEST = "nnefx-compiled.json"
FORMAT = "nnefx-compiled"
VERSION = 3
#: Each engine's artifact files: the first one always, the others where the engine wrote them.
ARTIFACTS = {"openvino": ("model.blob",), "onnxruntime": ("model.onnx", "model.data")}
#: Bytes per digest of an artifact file.  A file is checked as consecutive chunks, each with
#: its own digest in the manifest, so that several threads check one file at once.
CHUNK = 4 << 20
#: Digest algorithms a manifest may name.  BLAKE3 where its package is installed (the engine
#: extras bring it): 6.4 ms of CPU for ResNet-18's 47 MB blob against SHA-256's 23 ms (with the
#: CPU's SHA extensions); both 256-bit, both release the GIL while they hash.
ALGORITHMS = ("blake3", "sha256")
#: Smallest chunk a manifest may name (bounds the work a manifest can ask for).
MIN_CHUNK = 1 << 16


def _workers() -> int:
    """Threads that check an artifact: the cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _hasher(algorithm: str) -> Any:
    """The hash function ``algorithm`` names (one of :data:`ALGORITHMS`), or why it is missing."""
    if algorithm == "sha256":
        return hashlib.sha256
    try:
        from blake3 import blake3
    except ImportError:
        raise NNEFXError("the compiled model's digests are BLAKE3, and the blake3 package is not installed: "
                         "pip install blake3 (the onnxruntime and openvino extras bring it), or compile it "
                         "again here") from None
    return blake3


def _algorithm() -> str:
    """The digest a new manifest uses: BLAKE3 when installed, else SHA-256."""
    try:
        _hasher("blake3")
    except NNEFXError:
        return "sha256"
    return "blake3"


def _digests(path: str, chunk: int = CHUNK, algorithm: str | None = None) -> dict[str, Any]:
    """A file's manifest entry: its size, the chunk size, the algorithm and the digest of every chunk."""
    algorithm = algorithm or _algorithm()
    hasher = _hasher(algorithm)
    digests = []
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digests.append(hasher(block).hexdigest())
    return {"size": os.path.getsize(path), "chunk": chunk, "algorithm": algorithm, "digests": digests}


def _valid_entry(entry: Any) -> bool:
    """Whether a manifest's entry for one artifact file is well formed (sizes and digests agree)."""
    if not isinstance(entry, dict):
        return False
    size, chunk, digests = entry.get("size"), entry.get("chunk"), entry.get("digests")
    return (type(size) is int and type(chunk) is int and size > 0 and chunk >= MIN_CHUNK
            and entry.get("algorithm") in ALGORITHMS
            and isinstance(digests, list) and len(digests) == -(-size // chunk)
            and all(isinstance(d, str) and len(d) == 64 for d in digests))


def _open_mapped(path: str, size: int) -> tuple[Any, mmap.mmap] | None:
    """The file open and mapped into memory (not copied), or None: missing, not a regular file,
    or not the manifest's size (truncated or grown: refused before anything is hashed).

    Mapped rather than read: the digests are taken over the very pages OpenVINO then reads,
    and neither a copy into a bytes object nor a second read of the file is paid.  A private
    (copy-on-write) mapping, because OpenVINO wants a writable tensor; nothing is ever written
    to it.  The open file is returned too, so that what an engine opens by name can be
    compared with it (:func:`_same_file`).
    """
    f = None
    try:
        # Non-blocking, then a regular file only: a FIFO in its place must not hang the load.
        f = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
        status = os.fstat(f.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size != size:
            raise ValueError("not a regular file, or not the manifest's size")
        return f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        if f is not None:
            f.close()
        return None


def _refused(path: str) -> NNEFXError:
    return NNEFXError("the compiled artifact is missing, truncated or edited (its digest is not the "
                      "manifest's): compile it again", Location(path))


class _Check:
    """Artifact files opened, mapped and checked against the manifest's chunk digests by worker
    threads (hashlib releases the GIL), in groups: a group's files are handed out (:meth:`group`)
    once every chunk of them matched, while the later groups are still being checked.

    What an engine parses is one group, checked before the engine sees it; raw weights another,
    checked while the engine reads the first.  Threads only, not ``concurrent.futures``
    (a few milliseconds of a load that takes tens).
    """

    def __init__(self, folder: str, groups: list[dict[str, dict[str, Any]]]):
        self.folder = folder
        self.groups = [list(g) for g in groups]
        self.opened: dict[str, tuple[Any, mmap.mmap] | None] = {}
        self.failed: set[str] = set()
        # every algorithm first: a missing one is refused before any file is opened
        hashers = {name: _hasher(entry["algorithm"]) for entries in groups for name, entry in entries.items()}
        tasks = []
        self._left = []
        for g, entries in enumerate(groups):
            count = 0
            for name, entry in entries.items():
                self.opened[name] = opened = _open_mapped(os.path.join(folder, name), entry["size"])
                if opened is None:
                    self.failed.add(name)
                    continue
                for k, digest in enumerate(entry["digests"]):
                    tasks.append((g, name, hashers[name], k * entry["chunk"], (k + 1) * entry["chunk"], digest))
                    count += 1
            self._left.append(count)
        self._done = [threading.Event() for _ in groups]
        for g, count in enumerate(self._left):
            if not count:
                self._done[g].set()
        self._lock = threading.Lock()
        self._tasks = tasks
        self._next = itertools.count()  # next(): atomic in CPython, the work queue
        for k in range(min(_workers(), len(tasks))):
            threading.Thread(target=self._work, name=f"nnefx-artifact-check-{k}", daemon=True).start()

    def _work(self) -> None:
        for i in self._next:
            if i >= len(self._tasks):
                return
            g, name, hasher, start, stop, digest = self._tasks[i]
            ok = False
            if name not in self.failed:
                try:
                    with memoryview(self.opened[name][1]) as view, view[start:stop] as part:  # type: ignore[index]
                        ok = hasher(part).hexdigest() == digest
                except Exception:  # noqa: BLE001 - a file that cannot be read is a file refused
                    ok = False
            with self._lock:
                if not ok:
                    self.failed.add(name)
                self._left[g] -= 1
                if not self._left[g]:
                    self._done[g].set()

    def group(self, g: int) -> dict[str, tuple[Any, mmap.mmap]]:
        """Group ``g``'s files, open and mapped, once all of them matched; else the located refusal."""
        self._done[g].wait()
        for name in self.groups[g]:
            if name in self.failed:
                raise _refused(os.path.join(self.folder, name))
        return {name: self.opened[name] for name in self.groups[g]}  # type: ignore[misc]

    def close(self, keep: str = "") -> None:
        """Every file and mapping closed, once the workers are done with them, but the mapping of
        file ``keep``, which an engine holds."""
        for event in self._done:
            event.wait()
        for name, opened in self.opened.items():
            if opened is not None:
                if name != keep:
                    opened[1].close()
                opened[0].close()


def _engine_runner(engine: str, module: Any, path: str, manifest: dict[str, Any], check: _Check,
                   names: list[str]) -> Any:
    """The engine's model from its verified artifact; OpenVINO's CPU plugin is loaded while the
    artifact is still being checked."""
    from .loaded import OrtLoaded, OvImported, ov_core

    main = ARTIFACTS[engine][0]
    threads = int(manifest.get("threads", 1))
    if engine == "openvino":
        core = ov_core(module)
        opened = check.group(0)
        # The compiled model may keep pointing into the mapping: it lives as long as the runner.
        return OvImported(core, module, opened[main][1], [i["name"] for i in manifest["inputs"]], names, threads,
                          str(manifest.get("precision", "f32")))
    check.group(0)
    # By name: onnxruntime maps the external data it finds beside the graph (a model handed
    # over as bytes would have its weights copied out of it).
    return OrtLoaded(module, os.path.join(path, main), names, threads)


def _same_file(f: Any, path: str) -> bool:
    """Whether ``path`` still names the open file ``f``, unchanged (device, inode, size, time)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    was = os.fstat(f.fileno())
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (was.st_dev, was.st_ino, was.st_size,
                                                                       was.st_mtime_ns)


def _source_digest(path: str) -> str:
    from ..batch.job import model_digest

    return model_digest(path)


def _stored(session: Any, graph: Any, name: str) -> str:
    """The numpy dtype the engine model takes for input ``name``: its concrete element type
    (an ONNX int32 input is int32 to the engine, though random data is drawn as int64)."""
    from ..etypes import numpy_dtype

    t = graph.tensors[name]
    return str(numpy_dtype(t.etype) if t.etype else np.dtype(session.plan.storage[t.dtype]))


def compile_model(source: str, out: str, *, backend: str = "auto", load_options: dict[str, Any] | None = None,
                  threads: int | None = None, precision: str = "f32") -> dict[str, Any]:
    """Compile the model at ``source`` for ``backend`` into folder ``out``; returns the manifest."""
    from .. import load
    from ..runtime.cli import random_input
    from ..runtime.session import Session
    from . import get as get_engine

    model = load(source, **(load_options or {}))
    if not hasattr(model, "graph"):
        raise NNEFXError("this is a compiled model (nnefx compile) already: compile its source", Location(source))
    if any(op.op == "update" for op in model.graph.operations):
        raise NNEFXError("nnefx compile supports stateless graphs only (this one updates variables); "
                         "run it with --backend instead", Location(source))
    from ..graph import deferred_operations

    deferred = deferred_operations(model.graph)
    if deferred:  # an engine model per set of run-time values: no one artifact stands for the graph
        node = deferred[0].attribs["node"]
        raise NNEFXError(f"nnefx compile writes one engine model, and {node.kind} takes the values of "
                         f"{', '.join(repr(v) for v in node.values)} at run time (the engines compile one model "
                         "per set of values); run it with --backend instead", deferred[0].location)
    session = Session(model, "auto" if backend == "auto" else backend, threads=threads, precision=precision)
    rng = np.random.default_rng(0)
    inputs = {i.name: random_input(i, rng) for i in session.inputs}
    session.run(inputs)
    chosen = backend
    if backend == "auto":
        chosen = session.backend_reason.split()[1].rstrip(",")
    if chosen not in ARTIFACTS:
        raise NNEFXError(f"nnefx compile writes onnxruntime and OpenVINO models; '{chosen}' "
                         f"{'was the fastest' if backend == 'auto' else 'was asked for'} and has no saved form"
                         + (": name --backend onnxruntime or openvino" if backend == "auto" else ""))
    engine = get_engine(chosen)
    runner = session._engine
    (compiled,) = runner._variants.values()
    t = time.perf_counter()
    for _ in range(3):
        session.run(inputs)
    latency = (time.perf_counter() - t) / 3
    parent = os.path.dirname(os.path.abspath(out)) or "."
    os.makedirs(parent, exist_ok=True)
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix=".nnefx-compile-", dir=parent)
    try:
        artifact = os.path.join(tmp, ARTIFACTS[chosen][0])
        if chosen == "openvino":
            with open(artifact, "wb") as f:
                blob = compiled.compiled.export_model()
                f.write(blob.getvalue() if hasattr(blob, "getvalue") else blob)
        else:
            _write_ort_optimized(engine.module(), compiled, artifact, runner.threads)
        g = model.graph
        manifest = {
            "format": FORMAT, "version": VERSION, "engine": chosen, "engine_version": engine.version(),
            "nnefx_version": _nnefx_version(), "source": os.path.abspath(source),
            "source_digest": _source_digest(source), "source_stamp": _stamp(source),
            "threads": runner.threads, "precision": precision,
            "inputs": [{"name": n, "shape": list(inputs[n].shape), "dtype": _stored(session, g, n)} for n in g.inputs],
            "outputs": [{"name": n, "dtype": g.tensors[n].dtype} for n in g.outputs],
            "latency_ms": latency * 1e3,
            "artifact": {name: _digests(os.path.join(tmp, name)) for name in ARTIFACTS[chosen]
                         if os.path.exists(os.path.join(tmp, name))},
            "reason": session.backend_reason,
        }
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o666 & ~umask)
        if os.path.isdir(out):
            if not os.path.exists(os.path.join(out, MANIFEST)):
                raise NNEFXError("the output folder exists and is not a compiled model; not overwriting it",
                                 Location(out))
            old = out.rstrip("/") + ".old-nnefx"
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        elif os.path.exists(out):
            raise NNEFXError("the output exists and is not a folder; not overwriting it", Location(out))
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _write_ort_optimized(ort: Any, compiled: Any, path: str, threads: int) -> None:
    from .onnxruntime import session_options

    options = session_options(ort, threads)
    options.optimized_model_filepath = path
    # weights beside the graph, as external data that the loading session maps (ARTIFACTS)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                     ARTIFACTS["onnxruntime"][1])
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(compiled.source_bytes, options, providers=["CPUExecutionProvider"])


def _stamp(path: str) -> list:
    """Sizes and modification times of a model's files: a cheap first test of "unchanged"."""
    if os.path.isdir(path):
        files = sorted(os.path.join(d, n) for d, _, names in os.walk(path) for n in names)
    else:
        files = [path]
    out = []
    for f in files:
        st = os.stat(f)
        out.append([os.path.relpath(f, path), st.st_size, st.st_mtime_ns])
    return out


def _nnefx_version() -> str:
    from .. import __version__

    return __version__


def is_compiled(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, MANIFEST))


class CompiledModel:
    """A compiled model read back: its manifest and a ready engine model."""

    def __init__(self, path: str, manifest: dict[str, Any], runner: Any):
        self.path = path
        self.manifest = manifest
        self.runner = runner

    def __repr__(self) -> str:
        return f"CompiledModel({self.path!r}, engine={self.manifest.get('engine')!r})"

    @property
    def inputs(self) -> list[dict[str, Any]]:
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list[dict[str, Any]]:
        return self.manifest["outputs"]

    def run(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        feeds = {}
        for spec in self.inputs:
            if spec["name"] not in inputs:
                raise NNEFXError(f"missing input '{spec['name']}' of the compiled model")
            array = np.asarray(inputs[spec["name"]])
            if list(array.shape) != spec["shape"]:
                raise NNEFXError(f"input '{spec['name']}': the model was compiled for shape {spec['shape']}, "
                                 f"got {list(array.shape)}; compile again with --shape")
            want = np.dtype(spec["dtype"])
            if array.dtype != want:  # as a Session takes it: the same kind, narrowed where every value fits
                from ..etypes import parse
                from ..runtime.dtypes import to_storage

                kind = "logical" if want.kind == "b" else "integer" if want.kind in "iu" else "scalar"
                array = to_storage(array, kind, {kind: want}, f"input '{spec['name']}'", etype=parse(str(want)))
            feeds[spec["name"]] = array
        unknown = set(inputs) - set(feeds)
        if unknown:
            raise NNEFXError(f"'{sorted(unknown)[0]}' is not an input of the compiled model")
        try:
            results = self.runner(feeds)
        except Exception as exc:  # noqa: BLE001 - the engine's own exception types
            from .base import engine_failure

            raise engine_failure(self.manifest.get("engine", "?"), exc) from None
        return {o["name"]: results[o["name"]] for o in self.outputs}


def _check_fields(manifest: dict[str, Any], where: Location) -> None:
    """The fields a compiled model is run by, of the types :func:`compile_model` writes: a
    manifest is a file like any other (edited by hand, or by someone else)."""
    def bad(field: str, what: str) -> NNEFXError:
        return NNEFXError(f"the manifest's '{field}' must be {what}", where)

    for field in ("inputs", "outputs"):
        items = manifest.get(field)
        if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                  for i in items):
            raise bad(field, "a list of objects with a 'name'")
    for spec in manifest["inputs"]:
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise bad("inputs", f"shapes of non-negative whole numbers (input '{spec['name']}': {shape!r})")
        import ml_dtypes  # noqa: F401 - registers bfloat16 and the float8 kinds with numpy

        try:
            dtype = np.dtype(spec.get("dtype"))
        except TypeError:
            dtype = np.dtype(object)
        if dtype.kind not in "biuf" and not (dtype.kind == "V" and dtype.type.__module__.startswith("ml_dtypes")):
            raise bad("inputs", f"numeric element types (input '{spec['name']}': {spec.get('dtype')!r})")
    from .loaded import MAX_THREADS

    threads = manifest.get("threads")
    if type(threads) is not int or not 1 <= threads <= MAX_THREADS:
        raise bad("threads", f"a whole number from 1 to {MAX_THREADS}")
    if manifest.get("precision", "f32") not in ("f32", "f16", "bf16"):
        raise bad("precision", "f32, f16 or bf16")


def load_compiled(path: str) -> CompiledModel:
    from .loaded import engine_module, engine_version

    file = os.path.join(path, MANIFEST)
    try:
        with open(file, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: arrays nested thousands deep
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise NNEFXError(f"unreadable manifest ({reason})", Location(file)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise NNEFXError("not a compiled model of nnefx", Location(file))
    if manifest.get("version") != VERSION:
        raise NNEFXError(f"written by another nnefx version (compiled-model format {manifest.get('version')!r}, "
                         f"this one reads {VERSION}): compile it again", Location(file))
    _check_fields(manifest, Location(file))
    engine_name = manifest.get("engine")
    if engine_name not in ARTIFACTS or not isinstance(manifest.get("artifact"), dict):
        raise NNEFXError(f"unknown engine '{engine_name}' in the manifest", Location(file))
    files = manifest["artifact"]
    allowed = ARTIFACTS[engine_name]
    if allowed[0] not in files or not set(files) <= set(allowed):
        raise NNEFXError(f"the manifest must name the artifact {allowed[0]}"
                         + (f" (and possibly {', '.join(allowed[1:])})" if allowed[1:] else "") + ", nothing else",
                         Location(file))
    for name, entry in files.items():
        if not _valid_entry(entry):
            raise NNEFXError(f"the manifest's entry for {name} is malformed (size, chunk, algorithm "
                             f"({' or '.join(ALGORITHMS)}) and one digest per chunk expected): compile it again",
                             Location(file))
    source = manifest.get("source")
    # The source, when still there, must be the one compiled: same sizes and times, or else
    # (a copy, a touch) the same digest.
    if isinstance(source, str) and os.path.exists(source) and _stamp(source) != manifest.get("source_stamp") \
            and _source_digest(source) != manifest.get("source_digest"):
        raise NNEFXError(f"the source {source} changed since it was compiled: compile it again", Location(file))
    # Check the artifact while the engine is imported and readied: hashlib releases the GIL,
    # and the import (0.05-0.4 s of loading shared libraries) is paid anyway.  What the engine
    # parses (OpenVINO's blob, onnxruntime's graph) is checked before the engine sees it;
    # onnxruntime's weights (``model.data``: raw tensor bytes, nothing in them is parsed) are
    # checked on while onnxruntime creates its session, and before it is returned.
    check = _Check(path, [{allowed[0]: files[allowed[0]]},
                          {name: entry for name, entry in files.items() if name != allowed[0]}])
    names = [o["name"] for o in manifest["outputs"]]
    keep = ""
    try:
        module = engine_module(engine_name)  # the engine itself only: no exporter is needed to load its own file
        version = engine_version(engine_name, module)
        if version != manifest.get("engine_version"):
            raise NNEFXError(f"compiled by {engine_name} {manifest.get('engine_version')}, but "
                             f"{version} is installed: compile it again "
                             f"(nnefx compile {manifest.get('source')} -o {path})", Location(file))
        try:
            runner = _engine_runner(engine_name, module, path, manifest, check, names)
        except NNEFXError:
            check.group(1)  # damaged weights are the reason when they are: say that
            raise
        opened = {**check.group(0), **check.group(1)}
        if engine_name == "onnxruntime":
            # it opened its files by name: they must still be the files verified
            for name, (f, _) in opened.items():
                if not _same_file(f, os.path.join(path, name)):
                    raise NNEFXError("the compiled artifact was replaced while it was loaded: load it again",
                                     Location(os.path.join(path, name)))
        else:
            keep = allowed[0]  # OpenVINO's runner holds this mapping, which outlives the file
    finally:
        check.close(keep)
    return CompiledModel(path, manifest, runner)


__all__ = ["CompiledModel", "compile_model", "is_compiled", "load_compiled"]
