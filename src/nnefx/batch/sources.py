"""Where a batch job's rows come from: ``.npy``/``.npz`` files, Parquet tables, image files.

A source lists its row *keys* cheaply (file names, or row numbers of a table) and reads the
rows of one shard on demand, in the worker that runs the shard.  Listing is deterministic
(sorted), so a rerun assigns the same rows to the same shards.  Reading never unpickles:
``np.load(..., allow_pickle=False)``, Parquet through pyarrow, images through Pillow.

A row that cannot be read (a corrupt file, a missing column) is reported with its key as a
:class:`RowError` and the shard goes on; errors of the source as a whole (no such folder,
nothing matches) are :class:`~nnefx.diagnostics.NNEFXError` before any work starts.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError

#: Largest number of rows a job lists (a bound on the driver's memory for keys).
MAX_ROWS = 50_000_000
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


class RowError(Exception):
    """One row could not be read or does not fit the model; the job records it and goes on."""


@dataclass(frozen=True)
class SourceSpec:
    """Everything a worker needs to reopen the source (plain data: it travels to Ray workers)."""

    kind: str  # "npy", "parquet" or "image"
    path: str
    files: tuple[str, ...]
    #: Parquet: model input -> column name; images: the preprocessing options.
    columns: Mapping[str, str] = field(default_factory=dict)
    preprocess: Mapping[str, Any] = field(default_factory=dict)
    #: Parquet: rows per file, in file order.
    counts: tuple[int, ...] = ()

    @property
    def rows(self) -> int:
        return sum(self.counts) if self.kind == "parquet" else len(self.files)

    def key(self, row: int) -> str:
        """The key a row is reported and stored under."""
        if self.kind != "parquet":
            return os.path.relpath(self.files[row], self.path) if os.path.isdir(self.path) else self.files[row]
        file, index = self._locate(row)
        return f"{os.path.basename(self.files[file])}#{index}" if len(self.files) > 1 else str(row)

    def _locate(self, row: int) -> tuple[int, int]:
        for k, n in enumerate(self.counts):
            if row < n:
                return k, row
            row -= n
        raise IndexError(row)


def open_source(path: str, input_names: Sequence[str], *, columns: Mapping[str, str] | None = None,
                preprocess: Mapping[str, Any] | None = None) -> SourceSpec:
    """Find the rows of ``path``: a folder or glob of ``.npy``/``.npz``/image files, or Parquet."""
    pattern = any(ch in path for ch in "*?[")
    if pattern:
        files = sorted(f for f in glob.glob(path, recursive=True) if os.path.isfile(f))
        root = os.path.dirname(path.split("*")[0].split("?")[0].split("[")[0]) or "."
    elif os.path.isdir(path):
        files = sorted(os.path.join(dirpath, name) for dirpath, _, names in os.walk(path) for name in names
                       if not name.startswith("."))
        root = path
    elif os.path.isfile(path):
        files = [path]
        root = path
    else:
        raise NNEFXError("no such file or folder (expected .npy/.npz files, images or Parquet)", Location(path))
    if len(files) > MAX_ROWS:
        raise NNEFXError(f"more than {MAX_ROWS} files: split the job", Location(path))
    kinds = {_kind_of(f) for f in files} - {None}
    if not kinds:
        raise NNEFXError("no .npy, .npz, .parquet or image files here", Location(path))
    if len(kinds) > 1:
        raise NNEFXError(f"mixed input kinds ({', '.join(sorted(kinds))}): give one kind per job", Location(path))
    kind = kinds.pop()
    files = [f for f in files if _kind_of(f) == kind]
    if kind == "parquet":
        return _parquet_spec(root, files, input_names, columns or {})
    if columns:
        raise NNEFXError("--column applies to Parquet sources only")
    if kind == "image":
        if len(input_names) != 1:
            raise NNEFXError(f"image files feed a model with one input; this one has {len(input_names)}")
        return SourceSpec("image", root, tuple(files), preprocess=dict(parse_preprocess(preprocess or {})))
    if preprocess:
        raise NNEFXError("--preprocess applies to image sources only")
    return SourceSpec("npy", root, tuple(files))


def _kind_of(path: str) -> str | None:
    lower = path.lower()
    if lower.endswith((".npy", ".npz")):
        return "npy"
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(IMAGE_SUFFIXES):
        return "image"
    return None


def _parquet_spec(root: str, files: list[str], input_names: Sequence[str],
                  columns: Mapping[str, str]) -> SourceSpec:
    pq = _pyarrow_parquet()
    unknown = set(columns) - set(input_names)
    if unknown:
        raise NNEFXError(f"--column names {', '.join(sorted(unknown))}, not an input of the model "
                         f"(inputs: {', '.join(input_names)})")
    mapping = {name: columns.get(name, name) for name in input_names}
    counts = []
    for f in files:
        try:
            meta = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise NNEFXError(f"not a readable Parquet file ({exc})", Location(f)) from None
        names = set(meta.schema_arrow.names)
        missing = [f"'{col}' (for input '{inp}')" for inp, col in mapping.items() if col not in names]
        if missing:
            raise NNEFXError(f"no column {', '.join(missing)}; columns: {', '.join(sorted(names))}",
                             Location(f))
        counts.append(meta.metadata.num_rows)
    if sum(counts) > MAX_ROWS:
        raise NNEFXError(f"more than {MAX_ROWS} rows: split the job", Location(root))
    return SourceSpec("parquet", root, tuple(files), columns=mapping, counts=tuple(counts))


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NNEFXError("Parquet sources need pyarrow: pip install 'nnefx[batch]'") from None
    return pq


def read_rows(spec: SourceSpec, rows: range, input_names: Sequence[str]) -> list[dict[str, np.ndarray] | RowError]:
    """The inputs of each row in ``rows`` (in order), or the :class:`RowError` that row raised."""
    if spec.kind == "parquet":
        return _read_parquet(spec, rows)
    out: list[dict[str, np.ndarray] | RowError] = []
    for row in rows:
        try:
            if spec.kind == "image":
                out.append({input_names[0]: load_image(spec.files[row], spec.preprocess)})
            else:
                out.append(_read_numpy(spec.files[row], input_names))
        except RowError as exc:
            out.append(exc)
    return out


def _read_numpy(path: str, input_names: Sequence[str]) -> dict[str, np.ndarray]:
    try:
        with open(path, "rb") as f:
            loaded = np.load(f, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                if len(input_names) != 1:
                    raise RowError(f"a .npy file feeds a model with one input; give .npz files with arrays "
                                   f"named {', '.join(input_names)}")
                return {input_names[0]: loaded}
            with loaded:
                missing = [n for n in input_names if n not in loaded.files]
                if missing:
                    raise RowError(f"no array named {', '.join(missing)} (arrays: {', '.join(loaded.files)})")
                return {n: loaded[n] for n in input_names}
    except RowError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise RowError(f"not a readable numpy file ({exc})") from None


def _read_parquet(spec: SourceSpec, rows: range) -> list[dict[str, np.ndarray] | RowError]:
    pq = _pyarrow_parquet()
    out: list[dict[str, np.ndarray] | RowError] = []
    start = 0
    for path, count in zip(spec.files, spec.counts, strict=True):
        lo, hi = max(rows.start, start), min(rows.stop, start + count)
        if lo < hi:
            table = _read_slice(pq, path, lo - start, hi - lo, list(dict.fromkeys(spec.columns.values())))
            cols = {inp: table.column(col).to_pylist() for inp, col in spec.columns.items()}
            for k in range(hi - lo):
                try:
                    out.append({inp: _cell(values[k], col) for (inp, values), col
                                in zip(cols.items(), spec.columns.values(), strict=True)})
                except RowError as exc:
                    out.append(exc)
        start += count
    return out


def _read_slice(pq: Any, path: str, offset: int, length: int, columns: list[str]) -> Any:
    """Rows ``[offset, offset + length)`` of one file, reading only the row groups they lie in."""
    import pyarrow as pa

    f = pq.ParquetFile(path)
    groups, first, seen = [], None, 0
    for g in range(f.metadata.num_row_groups):
        n = f.metadata.row_group(g).num_rows
        if seen + n > offset and seen < offset + length:
            groups.append(g)
            first = seen if first is None else first
        seen += n
    table = f.read_row_groups(groups, columns=columns) if groups else pa.table({c: [] for c in columns})
    return table.slice(offset - (first or 0), length)


def _cell(value: Any, column: str) -> np.ndarray:
    if value is None:
        raise RowError(f"column '{column}' is empty in this row")
    try:
        array = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise RowError(f"column '{column}' holds a ragged value ({exc})") from None
    if array.dtype == object:
        raise RowError(f"column '{column}' holds values that are not numbers")
    return array


# ---- images ------------------------------------------------------------------------------

_PREPROCESS_KEYS = {"size", "mode", "scale", "mean", "std", "layout"}


def parse_preprocess(options: Mapping[str, Any] | str) -> dict[str, Any]:
    """Image preprocessing as a dict, from a dict or ``"size=224,224;scale=0.00392;mean=...;layout=nchw"``.

    Steps, in this order: convert to ``mode`` (``RGB`` default, or ``L``), resize to ``size``
    (width, height; bilinear), to float32 times ``scale`` (default 1/255), minus ``mean`` and
    divided by ``std`` per channel, then ``layout`` ``nchw`` (default) or ``nhwc`` without the
    batch dimension.
    """
    if isinstance(options, str):
        parsed: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in options.split(";"))):
            key, sep, value = item.partition("=")
            if not sep:
                raise NNEFXError(f"--preprocess expects KEY=VALUE items separated by ';', got '{item}'")
            parsed[key.strip()] = value.strip()
        options = parsed
    unknown = set(options) - _PREPROCESS_KEYS
    if unknown:
        raise NNEFXError(f"unknown preprocessing key(s) {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(sorted(_PREPROCESS_KEYS))})")
    result: dict[str, Any] = {"mode": str(options.get("mode", "RGB")), "layout": str(options.get("layout", "nchw")).lower()}
    if result["mode"] not in ("RGB", "L"):
        raise NNEFXError(f"preprocessing mode must be RGB or L, got '{result['mode']}'")
    if result["layout"] not in ("nchw", "nhwc"):
        raise NNEFXError(f"preprocessing layout must be nchw or nhwc, got '{result['layout']}'")
    channels = 3 if result["mode"] == "RGB" else 1
    try:
        if "size" in options:
            size = _floats(options["size"])
            if len(size) != 2 or any(s < 1 or s != int(s) or s > 16384 for s in size):
                raise ValueError("size needs two positive whole numbers (width, height)")
            result["size"] = [int(s) for s in size]
        result["scale"] = float(options.get("scale", 1 / 255))
        for key, default in (("mean", 0.0), ("std", 1.0)):
            values = _floats(options.get(key, [default] * channels))
            if len(values) == 1:
                values = values * channels
            if len(values) != channels:
                raise ValueError(f"{key} needs {channels} values for mode {result['mode']}")
            if key == "std" and any(v == 0 for v in values):
                raise ValueError("std must not be 0")
            result[key] = values
    except ValueError as exc:
        raise NNEFXError(f"bad preprocessing: {exc}") from None
    return result


def _floats(value: Any) -> list[float]:
    if isinstance(value, str):
        return [float(v) for v in value.split(",")]
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(v) for v in value]


def load_image(path: str, spec: Mapping[str, Any]) -> np.ndarray:
    """One image file as the model's input row, preprocessed as ``spec`` says."""
    try:
        from PIL import Image
    except ImportError:
        raise NNEFXError("image sources need Pillow: pip install 'nnefx[batch]'") from None
    Image.MAX_IMAGE_PIXELS = 1 << 26  # decompression bombs are errors, not allocations
    try:
        with Image.open(path) as img:
            img = img.convert(spec["mode"])
            if "size" in spec:
                img = img.resize(tuple(spec["size"]), Image.Resampling.BILINEAR)
            array = np.asarray(img, dtype=np.float32)
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise RowError(f"not a readable image ({exc})") from None
    if array.ndim == 2:
        array = array[:, :, None]
    array = array * np.float32(spec["scale"])
    array = (array - np.asarray(spec["mean"], np.float32)) / np.asarray(spec["std"], np.float32)
    return np.ascontiguousarray(array.transpose(2, 0, 1) if spec["layout"] == "nchw" else array)
