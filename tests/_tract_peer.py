"""Run one tract-domain operation through tract itself (its Python bindings, a test-only peer).

:func:`tract_document` writes a one-operation NNEF document (``extension tract_registry ...``
header, each tensor argument a ``tract_core_external`` input of its datum type, attributes as
literals); :func:`tract_batch` loads and runs many such documents with tract in a child process
(a panic in tract aborts its process; the batch then records it and goes on in a new one).
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from nnefx.ops import registry

_DATUM = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32",
          "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool"}


def literal(v) -> str:
    """An NNEF literal for an attribute value."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"'{v}'"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if np.isfinite(v) else ("inf" if v > 0 else "-inf")
    return str(int(v))


def tensor_params(name: str) -> list[str]:
    """The names of the tensor parameters of ``name``'s declaration, in order."""
    decl = registry.get(name).declaration
    params = decl[decl.index("(") + 1:decl.index("->")]
    params = params[:params.rindex(")")]
    return [m.group(1) for m in re.finditer(r"(\w+)\s*:\s*tensor<", params)]


def tract_document(name: str, args: list, kwargs: dict, registries=("tract_core",), n_results: int = 1,
                   consts=()):
    """The text of a one-operation document and the input arrays it expects, in order.  Tensor
    arguments whose position is in ``consts`` (1-D) become array literals (tract wants some operands
    constant: resize's scales, stft's window)."""
    lines, inputs, feed = [], [], []
    tparams = tensor_params(name)
    # where our header gave a tensor parameter a rank-0 default standing for tract's 'absent'
    # (extra['tract_header']), a plain number argument means absent: leave it out for tract
    sentinel = "tract_header" in registry.get(name).extra

    def constant(a):  # a 1-D array literal: tract folds it into a constant tensor
        return literal(np.asarray(a).reshape(-1).tolist())

    def external(a):
        a = np.asarray(a)
        ident = f"i{len(inputs)}"
        inputs.append(ident)
        feed.append(np.ascontiguousarray(a))
        lines.append(f"    {ident} = tract_core_external(shape = {literal(list(a.shape))}, "
                     f"datum_type = '{_DATUM[a.dtype.name]}');")
        return ident

    call = []
    for k, (pname, a) in enumerate(zip(tparams, args, strict=False)):
        if isinstance(a, list) and all(isinstance(x, np.ndarray) for x in a):
            ref = "[" + ", ".join(external(x) for x in a) + "]"
        elif isinstance(a, np.ndarray):
            ref = constant(a) if k in consts else external(a)
        elif sentinel and k > 0 and isinstance(a, float):
            call.append("=")  # later tensors are named
            continue
        else:
            ref = literal(a)
        # tract's own parameter order differs where our header had to (extra['tract_header']): name them
        named = call and ("=" in call[-1] or "tract_header" in registry.get(name).extra)
        call.append(f"{pname} = {ref}" if named else ref)
    for k, v in kwargs.items():
        call.append(f"{k} = {external(v) if isinstance(v, np.ndarray) else literal(v)}")
    call = [c for c in call if c != "="]
    outs = [f"o{k}" for k in range(n_results)]
    lhs = outs[0] if n_results == 1 else "(" + ", ".join(outs) + ")"
    lines.append(f"    {lhs} = {name}({', '.join(call)});")
    header = "\n".join(f"extension tract_registry {r};" for r in registries)
    text = (f"version 1.0;\n{header}\n\ngraph g( {', '.join(inputs)} ) -> ( {', '.join(outs)} )\n{{\n"
            + "\n".join(lines) + "\n}\n")
    return text, feed


def _worker(job_dir: str) -> None:
    """Run every job under ``job_dir`` not yet answered (run in a child: a tract panic aborts it)."""
    import tract

    root = Path(job_dir)
    for job in sorted(root.glob("*.job")):
        done = job.with_suffix(".npz")
        if done.exists() or job.with_suffix(".crash").exists():
            continue
        job.with_suffix(".running").write_text("")
        data = pickle.loads(job.read_bytes())
        try:
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "graph.nnef").write_text(data["text"])
                nnef = tract.nnef()
                if "tract_transformers" in data["registries"]:
                    nnef = nnef.with_tract_transformers()
                model = nnef.load(tmp).into_runnable()
                results = [r.to_numpy() for r in model.run(data["feed"])]
            np.savez(done, *results)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            job.with_suffix(".error").write_text(str(exc).split("Stack backtrace")[0])
            np.savez(done)
        job.with_suffix(".running").unlink()


def tract_batch(jobs: dict) -> dict:
    """Run ``{key: (name, args, kwargs, registries, n_results, consts)}`` through tract in child processes;
    returns ``{key: list of arrays}`` or ``{key: error text}``."""
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for k, (key, job) in enumerate(sorted(jobs.items())):
            text, feed = tract_document(*job)
            (root / f"{k:04d}.job").write_bytes(pickle.dumps({"key": key, "text": text, "feed": feed,
                                                              "registries": job[3]}))
        code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import _tract_peer; " \
               f"_tract_peer._worker({tmp!r})"
        for _ in range(len(jobs) + 1):
            subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300, check=False)
            running = list(root.glob("*.running"))
            if not running:
                break
            for r in running:  # the child died on this job (a panic in tract): record it, go on
                r.with_suffix(".crash").write_text("")
                r.unlink()
        for job in sorted(root.glob("*.job")):
            key = pickle.loads(job.read_bytes())["key"]
            if job.with_suffix(".crash").exists():
                out[key] = "tract aborted (a panic)"
            elif job.with_suffix(".error").exists():
                out[key] = job.with_suffix(".error").read_text()
            else:
                with np.load(job.with_suffix(".npz")) as z:
                    out[key] = [z[f"arr_{i}"] for i in range(len(z.files))]
    return out
