"""``nnefx run``: execute a model on given or random inputs and write the outputs.

Input files are read with ``allow_pickle=False`` (nothing from a file is executed) and
outputs are written to a temporary file in the target folder and renamed into place, so an
interrupted run never leaves a truncated ``.npy`` behind.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError
from ..graph import Model
from ..io.files import replacing
from ..tools import progress
from ..tools.stats import resolve_fetch, stats_table
from .profile import Profile
from .session import Session, TensorInfo

#: Largest random input ``nnefx run`` makes up (items); a declared shape is no reason to
#: allocate unbounded memory.
MAX_RANDOM_ITEMS = 1 << 28


def parse_input_option(text: str) -> tuple[str, str]:
    """``NAME=FILE.npy`` → (name, path); a usage error otherwise."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise NNEFXError(f"--input expects NAME=FILE.npy, got '{text}'")
    return name, path


def load_npy(path: str) -> np.ndarray:
    """A numpy array from a ``.npy`` file, without unpickling anything."""
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
            f.seek(0)
            if magic[:2] == b"PK":
                raise NNEFXError("an .npz archive, not a .npy array; give each array as its own .npy "
                                 "file (numpy.save)", Location(path))
            if magic != b"\x93NUMPY":
                raise NNEFXError(f"not a .npy file (it starts with {magic!r}, not numpy's \\x93NUMPY "
                                 "header); write input arrays with numpy.save", Location(path))
            array = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise NNEFXError("no such file", Location(path)) from None
    except IsADirectoryError:
        raise NNEFXError("a folder, not a .npy file", Location(path)) from None
    except ValueError as exc:
        if "pickle" in str(exc):
            raise NNEFXError("the array holds Python objects (dtype object), which nnefx never unpickles; "
                             "save a numeric, boolean or str_ array", Location(path)) from None
        raise NNEFXError(f"not a readable .npy array ({exc})", Location(path)) from None
    except (OSError, EOFError) as exc:
        raise NNEFXError(f"not a readable .npy array ({exc})", Location(path)) from None
    if not isinstance(array, np.ndarray):
        raise NNEFXError("expected a single .npy array (not an .npz archive)", Location(path))
    return array


def random_input(info: TensorInfo, rng: np.random.Generator) -> np.ndarray:
    """Random data of the declared shape (unknown dimensions become 1) and data type."""
    shape = tuple(1 if d is None else d for d in (info.shape or ()))
    volume = 1
    for d in shape:
        volume *= int(d)
    if volume > MAX_RANDOM_ITEMS:
        raise NNEFXError(f"input '{info.name}' of shape {list(shape)} is too large for random data "
                         f"({volume} items, limit {MAX_RANDOM_ITEMS}); give it with --input")
    if info.dtype == "integer":
        return rng.integers(0, 10, size=shape)
    if info.dtype == "logical":
        return rng.random(shape) < 0.5
    if info.dtype == "string":  # words of 1 to 8 lower-case letters
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        words = ["".join(rng.choice(letters, int(rng.integers(1, 9)))) for _ in range(volume)]
        return np.array(words, dtype=object).reshape(shape)
    return rng.standard_normal(shape).astype(np.float32)


def safe_file_name(name: str) -> str:
    """A file name for a tensor name (IR and CVM names may contain '/', ':' and the like)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    return cleaned or "output"


def save_npy_atomic(path: str, array: np.ndarray) -> None:
    if array.dtype == object:  # a string tensor: numpy's own str_ items (an object array needs pickle)
        array = array.astype(np.str_)
    with replacing(path) as f:
        np.save(f, array, allow_pickle=False)


def _fmt_shape(shape: Any) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def describe_array(array: np.ndarray) -> str:
    """A one-line summary: values when few, else min / max / mean."""
    if array.size == 0:
        return "empty"
    if array.size <= 6:
        return "values " + np.array2string(array.reshape(-1), precision=5, separator=", ")
    if array.dtype == np.bool_:
        return f"{int(array.sum())} of {array.size} true"
    if array.dtype.kind in "OUS":
        return "strings " + ", ".join(repr(str(v))[:24] for v in array.reshape(-1)[:4]) + ", ..."
    finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array
    text = "no finite values" if finite.size == 0 else \
        f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean(dtype=np.float64):.6g}"
    if finite.size != array.size:
        text += f"  ({array.size - finite.size} NaN/Inf)"
    return text


def _check_shape(session: Session, name: str, array: np.ndarray, path: str) -> None:
    """An input file of another shape than the model's: say so, and how to run it anyway."""
    info = next(i for i in session.inputs if i.name == name)
    shape = info.shape
    if shape is None or len(shape) != array.ndim:
        return  # a rank mismatch is reported by the session, without a --shape hint to give
    if all(d is None or d == a for d, a in zip(shape, array.shape, strict=True)):
        return
    text = f"input '{name}' has shape {_fmt_shape(array.shape)} but the model takes {_fmt_shape(shape)}"
    if all(d is None or d == a for d, a in zip(shape[1:], array.shape[1:], strict=True)):
        # only the batch size differs: the model can take it (its other dims are what it needs)
        text += f"; to run it on this batch size add --shape {name}={','.join(str(d) for d in array.shape)}"
    raise NNEFXError(text, Location(path))


def run_command(args: argparse.Namespace, model: Model) -> int:
    """The ``run`` subcommand; ``args`` as parsed by :func:`nnefx.cli.build_parser`."""
    if args.steps < 1:
        raise NNEFXError(f"--steps must be at least 1, got {args.steps}")
    if not isinstance(model, Model):
        return _run_compiled(args, model)
    if getattr(args, "quantize", False):
        from .quantize import quantization_targets

        if not quantization_targets(model.graph):
            raise NNEFXError("--quantize: no activation of this model has a graph.quant entry, so nothing "
                             "would be quantized and the run would be plain floating point; drop --quantize")
    if getattr(args, "threads", None) is not None and args.threads < 1:
        raise NNEFXError(f"--threads must be at least 1, got {args.threads}")
    session = Session(model, backend=args.backend, quantize=bool(getattr(args, "quantize", False)),
                      threads=getattr(args, "threads", None), precision=getattr(args, "precision", "f32"),
                      device=getattr(args, "device", "cpu"), verify=bool(getattr(args, "verify", False)))
    plan = session.plan
    output_names = [info.name for info in session.outputs]
    fetch = [n for n in resolve_fetch(plan.graph, list(getattr(args, "fetch", None) or []))
             if n not in output_names]
    if args.backend in ("fast", "formal"):
        print(f"graph '{plan.graph.name}': {plan.summary()}")
    else:
        print(f"graph '{plan.graph.name}': {len(plan.graph.operations)} operations, backend {args.backend}")

    given: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    names = [i.name for i in session.inputs]
    for option in args.input:
        name, path = parse_input_option(option)
        if name not in names:
            raise NNEFXError(f"--input names '{name}', which is not an input of the model "
                             f"(inputs: {', '.join(names) or 'none'})")
        if name in given:
            raise NNEFXError(f"input '{name}' is given twice")
        given[name] = load_npy(path)
        sources[name] = path
        _check_shape(session, name, given[name], path)
    rng = np.random.default_rng(args.seed)
    for info in session.inputs:
        if info.name not in given:
            given[info.name] = random_input(info, rng)
            sources[info.name] = f"random (seed {args.seed})"
        array = given[info.name]
        print(f"input  {info.name}: {info.dtype} {_fmt_shape(array.shape)} <- {sources[info.name]}")

    profile = Profile() if args.profile else None
    started = time.perf_counter()
    outputs: dict[str, np.ndarray] = {}
    with progress.bar(args.steps, "steps", unit="step") as bar:
        for _ in range(args.steps):
            outputs = session.run(given, profile=profile, fetch=fetch)
            bar.update()
    elapsed = time.perf_counter() - started

    for info in session.outputs:
        array = outputs[info.name]
        print(f"output {info.name}: {info.dtype} {_fmt_shape(array.shape)}  {describe_array(array)}")
    for name in fetch:
        array = outputs[name]
        print(f"tensor {name}: {plan.graph.tensors[name].dtype} {_fmt_shape(array.shape)}  {describe_array(array)}")
    if args.backend not in ("fast", "formal"):
        print(f"backend: {session.backend_reason if args.backend == 'auto' else args.backend}")
    for comparison in getattr(session, "verification", []) or []:
        print(f"verify: {comparison}")
    steps = f"{args.steps} steps" if args.steps > 1 else "1 step"
    mode = ", simulated quantization" if getattr(args, "quantize", False) else ""
    print(f"ran {steps} in {elapsed * 1e3:.3f} ms ({args.backend} backend{mode})")

    if args.output:
        try:
            os.makedirs(args.output, exist_ok=True)
        except OSError as exc:
            raise NNEFXError(f"cannot create the output folder ({exc.strerror or exc})",
                             Location(args.output)) from None
        used: set[str] = set()
        for name in output_names + fetch:
            base = safe_file_name(name)
            file = base
            n = 1
            while file.lower() in used:
                n += 1
                file = f"{base}_{n}"
            used.add(file.lower())
            path = os.path.join(args.output, file + ".npy")
            try:
                save_npy_atomic(path, outputs[name])
            except OSError as exc:
                raise NNEFXError(f"cannot write tensor '{name}' ({exc.strerror or exc})",
                                 Location(path)) from None
            print(f"wrote {path}")
    if getattr(args, "stats", False):
        print()
        print(stats_table({name: outputs[name] for name in output_names + fetch}))
    if profile is not None:
        from ..blas import describe

        print()
        print(profile.table())
        print()
        print(describe())
    return 0


def _run_compiled(args: argparse.Namespace, compiled: Any) -> int:
    """``nnefx run OUT`` on a folder written by ``nnefx compile``: the engine's form, fixed shapes."""
    ignored = [flag for flag, used in (
        ("--backend", args.backend != "fast"), ("--verify", args.verify), ("--threads", args.threads is not None),
        ("--precision", args.precision != "f32"), ("--device", args.device != "cpu"), ("--profile", args.profile),
        ("--quantize", getattr(args, "quantize", False)), ("--fetch", bool(args.fetch)), ("--stats", args.stats),
        ("--shape", bool(getattr(args, "shape", None)))) if used]
    if ignored:  # said, not silently dropped: the artifact fixes the engine, its options and shapes
        raise NNEFXError(f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to a compiled "
                         "model (its engine, options and shapes were fixed by nnefx compile); run its source "
                         "with them instead")
    m = compiled.manifest
    source = str(m["source"])
    try:
        shown = os.path.relpath(source) if not os.path.relpath(source).startswith("..") else source
    except ValueError:  # another drive (Windows)
        shown = source
    print(f"compiled model: {m['engine']} {m['engine_version']} (from {shown})")
    rng = np.random.default_rng(args.seed)
    given: dict[str, np.ndarray] = {}
    for option in args.input:
        name, path = parse_input_option(option)
        given[name] = load_npy(path)
    for spec in compiled.inputs:
        if spec["name"] not in given:
            info = TensorInfo(spec["name"], tuple(spec["shape"]), _nnef_type(spec["dtype"]))
            given[spec["name"]] = random_input(info, rng).astype(spec["dtype"])
    started = time.perf_counter()
    outputs: dict[str, np.ndarray] = {}
    for _ in range(args.steps):
        outputs = compiled.run(given)
    elapsed = time.perf_counter() - started
    for name, array in outputs.items():
        print(f"output {name}: {_fmt_shape(array.shape)}  {describe_array(array)}")
    print(f"ran {args.steps} step{'s' * (args.steps != 1)} in {elapsed * 1e3:.3f} ms ({m['engine']}, compiled)")
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        for name, array in outputs.items():
            path = os.path.join(args.output, safe_file_name(name) + ".npy")
            save_npy_atomic(path, array)
            print(f"wrote {path}")
    return 0


def _nnef_type(dtype: str) -> str:
    kind = np.dtype(dtype).kind
    return "logical" if kind == "b" else "integer" if kind in "iu" else "scalar"
