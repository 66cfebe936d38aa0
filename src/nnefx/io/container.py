"""NNEF model containers: folders, tar archives and lone documents (nnef-binary.md §1).

A model folder holds ``graph.nnef``, optionally ``graph.quant``, and one ``<label>.dat``
per variable label.  An archive is the same tree packed as a (gzip'ed) tar file.  A lone
``.nnef`` document has structure but no data.

Loading checks the container against the graph, because a model whose files disagree
with its text would otherwise fail (or silently compute garbage) much later:

* every variable label maps to an existing ``.dat`` (labels compare case-insensitively,
  one leading ``/`` is dropped, ``..`` is refused so a label cannot reach outside the model);
* the stored shape equals the declared shape exactly and the stored item type fits the
  declared data type (``scalar`` ← float or quantized codes, ``integer`` ← int/uint,
  ``logical`` ← bool);
* no stray ``.dat`` file that no variable claims (alternates such as ``w.dat.q8`` and vendor
  files without the ``.dat`` suffix are ignored, as the spec says);
* every ``graph.quant`` entry names a tensor of the graph.

Archives are read **without extracting to disk**: members are read straight into memory
(or, for an uncompressed tar, memory-mapped in place) after refusing absolute paths,
``..``, links, devices, duplicates and sizes the archive cannot possibly hold.

A lone document (:func:`load_document`) gives variables without data (``Tensor.data`` is
None): enough for ``nnefx check`` and ``inspect``; running it needs the data, and the
runtime refuses a variable without it.

Saving writes into a temporary file or folder beside the target and renames it into place,
so an interrupted or failed save never leaves a half-written model.
"""

from __future__ import annotations

import gzip
import mmap as _mmap
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from .. import etypes
from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Model
from . import binary
from .files import set_final_mode

GRAPH_FILE = "graph.nnef"
QUANT_FILE = "graph.quant"
DAT_SUFFIX = ".dat"
#: weights tract reads beside .dat files (nnef/src/resource.rs SafeTensorsLoader)
SAFETENSORS_SUFFIX = ".safetensors"

#: Archive limits: the largest tensor file (4 GiB data + header), the largest text member,
#: the most members.  Anything beyond is refused before memory is allocated for it.
MAX_DAT_SIZE = binary.HEADER_SIZE + (1 << 32) - 1
MAX_TEXT_SIZE = 256 << 20
MAX_MEMBERS = 100_000
#: A deflate stream expands at most ~1032:1; a member claiming more than that cannot be real.
_GZIP_MAX_RATIO = 1040

_LABEL = re.compile(r"[A-Za-z0-9_\-./\\]+")
_QUANT_KEY = re.compile(r"""(?m)^[ \t]*(["'])((?:(?!\1).)*)\1[ \t]*:""")

_LOADER_OPTIONS = ("mmap", "load_variables", "strict")


# --------------------------------------------------------------------------------------------
# labels


def label_path(label: str, file: str | None = None) -> str:
    """The relative (``/``-separated) path of a variable's tensor file.

    Follows the official tools (``label + ".dat"`` after dropping one leading ``/``) but
    refuses labels that could escape the model: empty components, ``..``, characters
    outside the spec's ``[A-Za-z0-9_\\-./\\\\]``.
    """
    where = Location(file, field=f"label '{label}'")
    if not isinstance(label, str) or not label:
        raise NNEFXError("variable label is empty", where)
    if not _LABEL.fullmatch(label):
        raise NNEFXError(f"variable label '{label}' has characters outside [A-Za-z0-9_-./\\]", where)
    rel = label[1:] if label.startswith("/") else label
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise NNEFXError(f"variable label '{label}' has an empty, '.' or '..' path component", where)
    return rel + DAT_SUFFIX


# --------------------------------------------------------------------------------------------
# loading


class _TensorStore:
    """The ``.dat`` files of a container: relative path -> reader, plus a case-folded index."""

    def __init__(self, container: str, readers: dict[str, Callable[[], tuple[np.ndarray, Any]]]):
        self.container = container
        self.readers = readers
        self.folded: dict[str, list[str]] = {}
        for rel in readers:
            self.folded.setdefault(rel.lower(), []).append(rel)

    def find(self, rel: str, label: str) -> str | None:
        if rel in self.readers:
            return rel
        candidates = self.folded.get(rel.lower(), [])
        if len(candidates) > 1:
            raise NNEFXError(f"label '{label}' matches several files that differ only in case: "
                             f"{', '.join(sorted(candidates))}", Location(self.container))
        return candidates[0] if candidates else None


def _declared_dtype_fits(declared: str, array: np.ndarray, quant: Any) -> bool:
    if quant is not None:
        return declared == "scalar"
    if array.dtype == object:   # tract's string tensors (vendor 'TR')
        return False
    kind = array.dtype.kind
    return {"f": "scalar", "i": "integer", "u": "integer", "b": "logical"}.get(kind) == declared


def _fmt(shape: Any) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _attach_variables(model: Model, store: _TensorStore, file_name: Callable[[str], str],
                      optional: set[str] = frozenset()) -> None:
    """Read every variable's data into its tensor, checking shapes, types and strays
    (``optional`` tensors, from ``.safetensors`` files, may stay unused as in tract)."""
    graph = model.graph
    claimed: set[str] = set()
    by_label: dict[str, tuple[np.ndarray, Any, str]] = {}
    stored_bits: dict[str, int] = {}
    for op, tensor in graph.variables():
        label = str(op.attribs.get("label", ""))
        rel = label_path(label, file_name(GRAPH_FILE))
        key = rel.lower()
        if key not in by_label:
            found = store.find(rel, label)
            if found is None:
                raise NNEFXError(f"variable '{tensor.name}' has no tensor file '{rel}' (label '{label}')",
                                 Location(file_name(rel), field="file"))
            array, quant = store.readers[found]()
            by_label[key] = (array, quant, found)
            claimed.add(found)
        array, quant, found = by_label[key]
        declared = tuple(op.attribs.get("shape", tensor.shape or ()))
        if tuple(array.shape) != declared:
            raise NNEFXError(f"stored shape {_fmt(array.shape)} of variable '{tensor.name}' differs from "
                             f"its declared shape {_fmt(declared)}", Location(file_name(found), field="extents"))
        if not _declared_dtype_fits(tensor.dtype, array, quant):
            stored = "quantized codes" if quant is not None else str(array.dtype)
            raise NNEFXError(f"variable '{tensor.name}' is declared {tensor.dtype} but its file stores "
                             f"{stored}", Location(file_name(found), field="item_type"))
        tensor.data = array
        if quant is None and array.dtype != object and tensor.etype is None:
            stored = etypes.from_numpy(array.dtype)
            if stored != etypes.of(tensor):
                tensor.etype = stored   # f16 stays f16, f64 stays f64, i32 stays i32, ...
        if quant is not None:
            if quant.get("op_name") and tensor.quant is None:
                tensor.quant = dict(quant)       # legacy / provisional header algorithm
            if quant.get("bits") and quant["bits"] != array.dtype.itemsize * 8:
                stored_bits[label] = int(quant["bits"])
    stray = sorted(set(store.readers) - claimed - optional)
    if stray:
        raise NNEFXError(f"tensor file '{stray[0]}' belongs to no variable of the graph"
                         + (f" (and {len(stray) - 1} more)" if len(stray) > 1 else ""),
                         Location(file_name(stray[0]), field="file"))
    if stored_bits:
        model.extras["stored_bits"] = stored_bits
    if model.extras.get("tract_etypes"):   # tract computes in the variables' stored types too
        from ..semantics.dialect import carry_etypes

        carry_etypes(graph)


def _check_quant_keys(graph: Graph, quant_text: str | None, quant_file: str) -> None:
    """Every ``graph.quant`` entry must name a tensor of the graph (by identifier)."""
    if not quant_text:
        return
    for m in _QUANT_KEY.finditer(quant_text):
        name = m.group(2)
        if name not in graph.tensors:
            line = quant_text.count("\n", 0, m.start(2)) + 1
            col = m.start(2) - (quant_text.rfind("\n", 0, m.start(2)) + 1)
            raise NNEFXError(f"quantization entry '{name}' names no tensor of graph '{graph.name}'",
                             Location(quant_file, line, col))


def _decode_text(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NNEFXError(f"not UTF-8 text (byte {exc.start})", Location(file, field="encoding")) from None


def _compile(text: str, file: str, quant: str | None, quant_file: str, opts: dict[str, Any],
             extras: dict[str, Any] | None = None) -> Graph:
    from ..semantics.frontend import compile_document

    graph = compile_document(text, file=file, quant=quant, quant_file=quant_file, extras=extras, **opts)
    _check_quant_keys(graph, quant, quant_file)   # also holds if the front-end drops unknown keys
    return graph


def _split_options(opts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    mine = {k: opts.pop(k) for k in _LOADER_OPTIONS if k in opts}
    return mine, opts


def _read_file(path: str, limit: int = MAX_TEXT_SIZE) -> bytes:
    try:
        with binary.open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise NNEFXError(f"file is {size} bytes; refusing text over {limit}", Location(path, field="file"))
            # read(n) allocates n bytes up front: ask only for what the file holds (+1 to
            # notice growth), never for the limit.
            data = f.read(size + 1)
    except OSError as exc:
        raise NNEFXError(f"cannot read: {exc.strerror or exc}", Location(path, field="file")) from None
    if len(data) > limit:
        raise NNEFXError(f"file grew beyond {limit} bytes while reading", Location(path, field="file"))
    return data


def load_folder(path: str | os.PathLike, **opts: Any) -> Model:
    """Load a model folder (``graph.nnef`` [+ ``graph.quant``] + ``.dat`` files).

    Options: ``mmap`` (default True: big tensors are memory-mapped copy-on-write),
    ``load_variables`` (default True; False skips all ``.dat`` handling), ``strict`` (strict
    tensor headers); everything else (``dialect``, ``lowered``, ``expand_all``) goes to
    :func:`nnefx.semantics.frontend.compile_document`.
    """
    root = os.fspath(path)
    mine, compile_opts = _split_options(dict(opts))
    if not os.path.isdir(root):
        raise NNEFXError("not a model folder", Location(root, field="file"))
    graph_path = os.path.join(root, GRAPH_FILE)
    if not os.path.isfile(graph_path):
        raise NNEFXError(f"model folder has no {GRAPH_FILE}", Location(root, field="file"))
    text = _decode_text(_read_file(graph_path), graph_path)
    quant_path = os.path.join(root, QUANT_FILE)
    quant = _decode_text(_read_file(quant_path), quant_path) if os.path.isfile(quant_path) else None
    extras: dict[str, Any] = {}
    graph = _compile(text, graph_path, quant, quant_path, compile_opts, extras)
    model = Model(graph, format="nnef-folder", source=root, extras=extras)
    if mine.get("load_variables", True):
        use_mmap = bool(mine.get("mmap", True))
        strict = bool(mine.get("strict", False))
        readers: dict[str, Callable[[], tuple[np.ndarray, Any]]] = {}
        real_root = os.path.realpath(root)
        optional: set[str] = set()
        for rel, full in _walk_dat_files(root):
            if not os.path.realpath(full).startswith(real_root + os.sep):
                raise NNEFXError("tensor file links outside the model folder", Location(full, field="file"))
            if rel.endswith(SAFETENSORS_SUFFIX):
                optional |= _add_safetensors(readers, _read_file(full, MAX_DAT_SIZE), full)
                continue
            readers[rel] = (lambda f=full: binary.read_tensor(f, mmap=use_mmap, strict=strict))
        _attach_variables(model, _TensorStore(root, readers), lambda rel: os.path.join(root, rel), optional)
    return model


def _walk_dat_files(root: str) -> Iterator[tuple[str, str]]:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((DAT_SUFFIX, SAFETENSORS_SUFFIX)):
                full = os.path.join(folder, name)
                yield os.path.relpath(full, root).replace(os.sep, "/"), full


def load_document(path: str | os.PathLike, **opts: Any) -> Model:
    """Load a lone ``.nnef`` document: structure only, variables have no data.

    ``X.quant`` beside ``X.nnef`` is read as its quantization file (and a ``.quant`` path
    loads its ``.nnef`` sibling), mirroring ``graph.nnef``/``graph.quant`` in a folder.
    """
    doc = os.fspath(path)
    if doc.endswith(".quant"):
        doc = doc[: -len(".quant")] + ".nnef"
    _mine, compile_opts = _split_options(dict(opts))
    text = _decode_text(_read_file(doc), doc)
    quant_path = doc[: -len(".nnef")] + ".quant" if doc.endswith(".nnef") else doc + ".quant"
    quant = _decode_text(_read_file(quant_path), quant_path) if os.path.isfile(quant_path) else None
    extras: dict[str, Any] = {}
    graph = _compile(text, doc, quant, quant_path, compile_opts, extras)
    return Model(graph, format="nnef-file", source=doc, extras=extras)


# --------------------------------------------------------------------------------------------
# archives


def _member_error(archive: str, name: str, message: str) -> NNEFXError:
    return NNEFXError(message, Location(archive, field=f"member '{name}'"))


def _safe_member_name(archive: str, member: tarfile.TarInfo) -> str:
    name = member.name
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise _member_error(archive, name, "archive member has an absolute path")
    if "\\" in name and ".." in name.split("\\"):
        raise _member_error(archive, name, "archive member path contains '..'")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _member_error(archive, name, "archive member path contains '..'")
    if "\0" in name:
        raise _member_error(archive, name, "archive member name contains a NUL byte")
    return "/".join(parts)


def _is_gzip(path: str) -> bool:
    with binary.open_regular(path) as f:
        return f.read(2) == b"\x1f\x8b"


def load_archive(path: str | os.PathLike, **opts: Any) -> Model:
    """Load a model from a tar or gzip'ed tar archive, without extracting it to disk.

    Members may sit at the archive root or under a single top folder.  Same options as
    :func:`load_folder`; in an uncompressed tar, big tensors are memory-mapped in place.
    """
    archive = os.fspath(path)
    mine, compile_opts = _split_options(dict(opts))
    try:
        size = os.path.getsize(archive)
        gz = _is_gzip(archive)
    except OSError as exc:
        raise NNEFXError(f"cannot read: {exc.strerror or exc}", Location(archive, field="file")) from None
    load_vars = mine.get("load_variables", True)
    strict = bool(mine.get("strict", False))
    contents: dict[str, Any] = {}
    try:
        if gz:
            members = _read_stream(archive, size, load_vars, contents)
        else:
            members = _read_plain(archive, size, load_vars, bool(mine.get("mmap", True)), contents)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        raise NNEFXError(f"not a readable tar archive: {exc}", Location(archive, field="archive")) from None
    prefix = _find_root(archive, members)

    def member_file(rel: str) -> str:
        return f"{archive}[{prefix}{rel}]"

    text = _decode_text(bytes(contents[prefix + GRAPH_FILE]), member_file(GRAPH_FILE))
    quant_raw = contents.get(prefix + QUANT_FILE)
    quant = _decode_text(bytes(quant_raw), member_file(QUANT_FILE)) if quant_raw is not None else None
    extras: dict[str, Any] = {}
    graph = _compile(text, member_file(GRAPH_FILE), quant, member_file(QUANT_FILE), compile_opts, extras)
    model = Model(graph, format="nnef-archive", source=archive, extras=extras)
    if load_vars:
        readers: dict[str, Any] = {}
        optional: set[str] = set()
        for name, buf in contents.items():
            if name.startswith(prefix) and name.endswith(SAFETENSORS_SUFFIX):
                optional |= _add_safetensors(readers, buf, member_file(name[len(prefix):]))
        for name, buf in contents.items():
            if name.startswith(prefix) and name.endswith(DAT_SUFFIX):
                rel = name[len(prefix):]
                if rel in readers:
                    raise NNEFXError(f"tensor '{rel}' is stored twice (also in a .safetensors file)",
                                     Location(member_file(rel), field="file"))
                readers[rel] = (lambda b=buf, r=rel: binary.read_tensor(b, name=member_file(r), strict=strict))
        _attach_variables(model, _TensorStore(archive, readers), member_file, optional)
    return model


def _check_member(archive: str, member: tarfile.TarInfo, seen: set[str], limit: int) -> str | None:
    """Validate one member; its safe name for regular files, None for folders."""
    name = _safe_member_name(archive, member)
    if len(seen) >= MAX_MEMBERS:
        raise _member_error(archive, member.name, f"archive has more than {MAX_MEMBERS} members")
    if member.isdir():
        return None
    if not member.isreg() or member.issparse():
        kind = ("symbolic link" if member.issym() else "hard link" if member.islnk() else
                "device" if (member.ischr() or member.isblk()) else "fifo" if member.isfifo() else
                "sparse file" if member.issparse() else "special member")
        raise _member_error(archive, member.name, f"archive member is a {kind}; only regular files and "
                            "folders are allowed")
    if name in seen:
        raise _member_error(archive, member.name, "archive has this member twice")
    seen.add(name)
    cap = min(limit, MAX_DAT_SIZE if name.endswith((DAT_SUFFIX, SAFETENSORS_SUFFIX)) else MAX_TEXT_SIZE)
    if member.size > cap:
        raise _member_error(archive, member.name, f"archive member claims {member.size} bytes, more than "
                            f"the archive can hold or a model file may be ({cap})")
    return name


def _wanted(name: str, load_vars: bool) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base in (GRAPH_FILE, QUANT_FILE) or (load_vars and name.endswith((DAT_SUFFIX, SAFETENSORS_SUFFIX)))


def _safetensors_readers(data: Any, file: str) -> dict[str, Callable[[], tuple[np.ndarray, Any]]]:
    """The tensors of one ``.safetensors`` file as readers keyed like ``.dat`` files (``NAME.dat``).

    tract reads every tensor of a model's ``.safetensors`` files as variable data under its
    name (``nnef/src/resource.rs`` ``SafeTensorsLoader``, ``framework.rs``), f32 and f16
    only.  The header is validated by the ``safetensors`` package (offsets in range, not
    overlapping, sizes matching dtype and shape); any fault is a located error.
    """
    try:
        from safetensors.numpy import load as _load_safetensors
    except ImportError:  # pragma: no cover - a core dependency
        raise NNEFXError("reading .safetensors needs the 'safetensors' package (pip install safetensors)",
                         Location(file, field="file")) from None
    try:
        tensors = _load_safetensors(bytes(data))
    except Exception as exc:  # the package raises its own SafetensorError and ValueErrors
        raise NNEFXError(f"not a valid .safetensors file: {exc}", Location(file, field="header")) from None
    out: dict[str, Callable[[], tuple[np.ndarray, Any]]] = {}
    for name, array in tensors.items():
        if array.dtype not in (np.float32, np.float16):
            raise NNEFXError(f"tensor '{name}' is {array.dtype}; tract reads f32 and f16 tensors from "
                             ".safetensors", Location(file, field=f"tensor '{name}'"))
        out[name + DAT_SUFFIX] = (lambda a=array: (a, None))
    return out


def _add_safetensors(readers: dict[str, Any], data: Any, file: str) -> set[str]:
    """Merge one ``.safetensors`` file's tensors into ``readers``; returns their keys."""
    found = _safetensors_readers(data, file)
    for rel in found:
        if rel in readers:
            raise NNEFXError(f"tensor '{rel[:-len(DAT_SUFFIX)]}' is stored twice (also as '{rel}' or in another "
                             ".safetensors file)", Location(file, field="file"))
    readers.update(found)
    return set(found)


def _read_stream(archive: str, size: int, load_vars: bool, contents: dict[str, Any]) -> list[str]:
    """Read a gzip'ed tar sequentially; wanted members go into ``contents`` as bytearrays."""
    names: list[str] = []
    seen: set[str] = set()
    limit = size * _GZIP_MAX_RATIO + (1 << 20)
    with binary.open_regular(archive) as raw, tarfile.open(fileobj=raw, mode="r|gz") as tar:
        for member in tar:
            name = _check_member(archive, member, seen, limit)
            if name is None:
                continue
            names.append(name)
            if _wanted(name, load_vars):
                f = tar.extractfile(member)
                assert f is not None
                buf = binary.alloc_buffer(member.size)
                got = _read_chunked(f, buf)
                if got != member.size:
                    raise _member_error(archive, member.name, f"archive member is truncated ({got} of "
                                        f"{member.size} bytes)")
                contents[name] = buf
    return names


#: bytes read from a compressed archive at a time: tarfile's stream hands each read back as a
#: new bytes object (joined from its chunks), so one read of a whole member would hold two
#: transient copies of it beside the buffer it fills
_STREAM_CHUNK = 1 << 16


def _read_chunked(f: Any, buf: memoryview) -> int:
    """Fill ``buf`` from ``f`` in bounded reads; the number of bytes read."""
    got = 0
    while got < len(buf):
        n = f.readinto(buf[got:got + _STREAM_CHUNK])
        if not n:
            break
        got += n
    return got


def _read_plain(archive: str, size: int, load_vars: bool, use_mmap: bool, contents: dict[str, Any]
                ) -> list[str]:
    """Read an uncompressed tar; member data are slices of one copy-on-write mapping."""
    names: list[str] = []
    seen: set[str] = set()
    with binary.open_regular(archive) as f:
        mapped = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY) if use_mmap and size else None
        with tarfile.open(fileobj=f, mode="r:") as tar:
            for member in tar:
                name = _check_member(archive, member, seen, size)
                if name is None:
                    continue
                names.append(name)
                end = member.offset_data + member.size
                if end > size:
                    raise _member_error(archive, member.name, f"archive member claims {member.size} bytes "
                                        "beyond the end of the archive")
                if _wanted(name, load_vars):
                    if mapped is not None:
                        contents[name] = memoryview(mapped)[member.offset_data:end]
                    else:
                        f.seek(member.offset_data)
                        buf = binary.alloc_buffer(member.size)
                        if f.readinto(buf) != member.size:
                            raise _member_error(archive, member.name, "archive member is truncated")
                        contents[name] = buf
    return names


def _find_root(archive: str, names: list[str]) -> str:
    """The member prefix of the model: '' (files at root) or 'top/' (one top folder)."""
    if GRAPH_FILE in names:
        return ""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    if len(tops) == 1 and all("/" in n for n in names):
        prefix = tops.pop() + "/"
        if prefix + GRAPH_FILE in names:
            return prefix
    raise NNEFXError(f"archive has no {GRAPH_FILE} at its root (or under a single top folder)",
                     Location(archive, field="archive"))


# --------------------------------------------------------------------------------------------
# saving


def _tract_dialect(model: Model) -> bool:
    """A graph rewritten for tract (``save(..., dialect="tract")``): tract's verdict, not nnefx's."""
    return isinstance(model.extras, dict) and model.extras.get("dialect") == "tract"


def _model_files(model: Model, target: str) -> tuple[str, str, list[tuple[str, list[bytes | memoryview]]]]:
    """graph.nnef text, graph.quant text and (relative path, chunks) per tensor file."""
    from ..formats.export.unroll import lower_control_flow
    from ..syntax.printer import print_graph, print_quant, print_readable

    graph = lower_control_flow(model.graph)  # NNEF has no control flow: unrolled where static, else refused
    text = print_graph(graph, tract=True) if _tract_dialect(model) else print_readable(graph, where=target)
    quant_text = print_quant(graph)
    stored_bits = model.extras.get("stored_bits", {}) if isinstance(model.extras, dict) else {}
    files: list[tuple[str, list[bytes | memoryview]]] = []
    seen: dict[str, tuple[int, ...]] = {}
    for op, tensor in graph.variables():
        label = str(op.attribs.get("label", ""))
        rel = label_path(label, target)
        key = rel.lower()
        if tensor.data is None:
            raise NNEFXError(f"variable '{tensor.name}' (label '{label}') has no data; a model folder or "
                             "archive needs every variable's data (save as a lone .nnef instead)",
                             Location(target, field=f"label '{label}'"))
        data = np.asarray(tensor.data)
        if key in seen:
            if seen[key] != data.shape:
                raise NNEFXError(f"variables sharing label '{label}' have different shapes", Location(target))
            continue
        seen[key] = data.shape
        declared = tuple(op.attribs.get("shape", data.shape))
        if tuple(data.shape) != declared:
            raise NNEFXError(f"data of variable '{tensor.name}' has shape {_fmt(data.shape)}, declared "
                             f"{_fmt(declared)}", Location(target, field=f"label '{label}'"))
        quantized = tensor.dtype == "scalar" and data.dtype.kind in "iu"
        if not quantized and not _declared_dtype_fits(tensor.dtype, data, None):
            raise NNEFXError(f"data of variable '{tensor.name}' is {data.dtype} but it is declared "
                             f"{tensor.dtype}", Location(target, field=f"label '{label}'"))
        chunks = binary.encode_tensor(data, quant=quantized, bits=stored_bits.get(label), file=rel)
        files.append((rel, chunks))
    return text, quant_text, files


def _install(tmp: str, target: str, is_dir: bool) -> None:
    """Move a finished temporary file/folder onto ``target`` (replacing an old model)."""
    if is_dir and os.path.lexists(target):
        if os.path.islink(target) or not os.path.isdir(target):
            raise NNEFXError("target exists and is not a folder; refusing to replace it",
                             Location(target, field="file"))
        if os.listdir(target) and not os.path.isfile(os.path.join(target, GRAPH_FILE)):
            raise NNEFXError(f"target folder exists and is not an NNEF model (no {GRAPH_FILE}); refusing "
                             "to replace it", Location(target, field="file"))
        backup = tmp + ".old"
        os.rename(target, backup)
        try:
            os.rename(tmp, target)
        except OSError:
            os.rename(backup, target)
            raise
        shutil.rmtree(backup, ignore_errors=True)
        return
    if not is_dir and os.path.isdir(target):
        raise NNEFXError("target is a folder; refusing to replace it with a file", Location(target, field="file"))
    os.replace(tmp, target)


def _temp_beside(target: str, is_dir: bool) -> str:
    parent = os.path.dirname(os.path.abspath(target)) or "."
    prefix = "." + os.path.basename(os.path.abspath(target)) + "."
    try:
        if is_dir:
            return tempfile.mkdtemp(dir=parent, prefix=prefix, suffix=".tmp")
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=prefix, suffix=".tmp")
        os.close(fd)
        return tmp
    except OSError as exc:
        raise NNEFXError(f"cannot write beside the target: {exc.strerror or exc}",
                         Location(target, field="file")) from None


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.unlink(path)
        except OSError:
            pass


def _guarded(target: str, is_dir: bool, write: Callable[[str], None]) -> None:
    tmp = _temp_beside(target, is_dir)
    try:
        write(tmp)
        set_final_mode(tmp, target, is_dir)   # not mkstemp's/mkdtemp's private 0600/0700
        _install(tmp, target, is_dir)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError):
            raise NNEFXError(f"cannot write: {exc.strerror or exc}", Location(target, field="file")) from None
        raise


def save_folder(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` as a model folder (replacing an existing model folder atomically)."""
    target = os.fspath(path).rstrip("/\\") or os.fspath(path)
    text, quant_text, files = _model_files(model, target)

    def write(tmp: str) -> None:
        with open(os.path.join(tmp, GRAPH_FILE), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        if quant_text:
            with open(os.path.join(tmp, QUANT_FILE), "w", encoding="utf-8", newline="\n") as f:
                f.write(quant_text)
        for rel, chunks in files:
            full = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)

    _guarded(target, True, write)


class _ChunkReader:
    """A read-only file over a list of byte chunks (so tarfile streams arrays uncopied)."""

    def __init__(self, chunks: list[bytes | memoryview]):
        self._chunks = [memoryview(c).cast("B") for c in chunks]
        self._index = 0
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while self._index < len(self._chunks) and (n < 0 or len(out) < n):
            chunk = self._chunks[self._index]
            take = len(chunk) - self._pos if n < 0 else min(n - len(out), len(chunk) - self._pos)
            out += chunk[self._pos:self._pos + take]
            self._pos += take
            if self._pos >= len(chunk):
                self._index += 1
                self._pos = 0
        return bytes(out)


def _add_member(tar: tarfile.TarFile, name: str, chunks: list[bytes | memoryview]) -> None:
    info = tarfile.TarInfo(name)
    info.size = sum(memoryview(c).nbytes for c in chunks)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, _ChunkReader(chunks))  # type: ignore[arg-type]


def save_archive(model: Model, path: str | os.PathLike, *, compress: bool | None = None) -> None:
    """Write ``model`` as a tar archive, gzip'ed unless the path ends in ``.tar``.

    Members sit at the archive root (as nnef_tools expects); the archive is deterministic
    (zero timestamps and owners) so the same model always gives the same bytes.
    """
    target = os.fspath(path)
    if compress is None:
        compress = not target.lower().endswith(".tar")
    text, quant_text, files = _model_files(model, target)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as raw:
            stream: BinaryIO = raw
            gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) if compress \
                else None
            if gz is not None:
                stream = gz  # type: ignore[assignment]
            with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
                _add_member(tar, GRAPH_FILE, [text.encode("utf-8")])
                if quant_text:
                    _add_member(tar, QUANT_FILE, [quant_text.encode("utf-8")])
                for rel, chunks in files:
                    _add_member(tar, rel, chunks)
            if gz is not None:
                gz.close()

    _guarded(target, False, write)


def save_document(model: Model, path: str | os.PathLike) -> None:
    """Write the graph as a lone ``.nnef`` document (``X.quant`` beside it if quantized).

    A document carries no tensor data: variables keep only shape and label.
    """
    from ..formats.export.unroll import lower_control_flow
    from ..syntax.printer import print_graph, print_quant, print_readable

    target = os.fspath(path)
    graph = lower_control_flow(model.graph)
    text = print_graph(graph, tract=True) if _tract_dialect(model) else print_readable(graph, where=target)
    quant_text = print_quant(graph)
    quant_target = (target[: -len(".nnef")] if target.endswith(".nnef") else target) + ".quant"
    binary.write_atomic(target, [text.encode("utf-8")])
    if quant_text:
        binary.write_atomic(quant_target, [quant_text.encode("utf-8")])
