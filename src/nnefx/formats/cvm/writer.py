"""nnefx graph of ``cvm_*`` operations -> CVM graph JSON + params (``nnefx.save(m, "x.json")``).

The inverse of :mod:`.reader`: the graph's single ``external`` becomes the variable ``data``
(its saturation ``cvm_cvm_clip``, if that is what reads it, folds back into the data
precision), variables become parameter nodes, every other operation must be a ``cvm_*``
operation and becomes the runtime operator of the same name with its attributes written the
way the runtime's tooling writes them.  Precisions of parameters are the loader's when the
model came from a CVM file, else the smallest that holds their values.  The result is
re-validated by the reader before anything is written, and both files are written to a
temporary name and renamed into place.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Model
from ...io.files import write_atomic
from ...ops import registry
from . import attrs as A
from .builder import CVMBuilder
from .precision import data_precision


def _runtime_attribs(rt: str, attribs: dict[str, Any]) -> dict[str, Any]:
    out = dict(attribs)
    if rt == "take":
        axis = out.get("axis", [])
        out["axis"] = None if not axis else axis[0]
    return out


def to_cvm(model: Model) -> tuple[str, bytes]:
    """The graph JSON text and params bytes of ``model``."""
    g = model.graph
    stored = model.extras.get("cvm", {}).get("precision", {})
    externals = [op for op in g.operations if op.op == "external"]
    if len(externals) > 1:
        raise NNEFXError("a CVM model has one input ('data'); this graph has "
                         f"{len(externals)}: {', '.join(op.output_names()[0] for op in externals)}")
    readers: dict[str, list] = {}
    for op in g.operations:
        for name in op.input_names():
            readers.setdefault(name, []).append(op)
    b = CVMBuilder()
    ref: dict[str, tuple[int, int]] = {}
    folded: set[int] = set()
    for op in g.operations:
        if id(op) in folded:
            continue
        outs = op.output_names()
        if op.op == "external":
            name = outs[0]
            shape = tuple(g.tensors[name].shape or ())
            if not shape or any(d is None for d in shape):
                raise NNEFXError(f"input '{name}' needs a fixed shape in a CVM model", op.location)
            users = readers.get(name, [])
            precision = stored.get(name, 32)
            if len(users) == 1 and users[0].op == "cvm_cvm_clip" and name not in g.outputs:
                precision = int(users[0].attribs["precision"])
                folded.add(id(users[0]))
                ref[users[0].output_names()[0]] = b.input("data", shape, precision)
            else:
                ref[name] = b.input("data", shape, precision)
            continue
        if op.op in ("variable", "constant"):
            tensor = g.tensors[outs[0]]
            data = tensor.data if op.op == "variable" else np.asarray(op.attribs.get("value"))
            if data is None:
                raise NNEFXError(f"variable '{outs[0]}' has no data", op.location)
            label = str(op.attribs.get("label", outs[0])) if op.op == "variable" else outs[0]
            if label == "data":
                raise NNEFXError("a parameter may not be called 'data' in a CVM model", op.location)
            arr = np.asarray(data)
            if arr.dtype.kind not in "iub":
                raise NNEFXError(f"parameter '{label}' holds {arr.dtype} data; CVM models are integer",
                                 op.location)
            shape = tuple(tensor.shape or arr.shape)
            arr = np.broadcast_to(arr, shape).astype(np.int64)
            precision = stored.get(outs[0], data_precision(arr))
            if precision > 32:
                raise NNEFXError(f"parameter '{label}' does not fit in int32", op.location)
            ref[outs[0]] = b.param(label, arr.astype(np.int32), precision)
            continue
        entry = registry.get(op.op)
        rt = entry.extra.get("runtime_name")
        if entry.domain != "cvm" or rt is None:
            raise NNEFXError(f"operation '{op.op}' has no CVM counterpart (only cvm_* operations can be "
                             "written as a CVM model)", op.location)
        inputs = []
        for value in op.inputs.values():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str):
                    inputs.append(ref[v])
                elif rt in ("conv2d", "dense") and not op.attribs.get("use_bias", True):
                    continue  # the absent bias
                else:
                    raise NNEFXError(f"operation '{op.op}': literal input {v!r} cannot be written as CVM",
                                     op.location)
        try:
            first = b.op(rt, *inputs, **_runtime_attribs(rt, op.attribs))
        except ValueError as exc:
            raise NNEFXError(str(exc), op.location) from None
        for k, name in enumerate(outs[: A.num_outputs(rt)]):
            ref[name] = (first[0], k)
    missing = [n for n in g.outputs if n not in ref]
    if missing:
        raise NNEFXError(f"output '{missing[0]}' is not produced by a CVM operation")
    return b.json([ref[n] for n in g.outputs]), b.params()


def save(model: Model, path: str, *, params: str | None = None) -> None:
    """Write ``path`` (graph JSON) and ``params`` (default ``<stem>.params`` beside it)."""
    from .reader import load

    text, blob = to_cvm(model)
    load(path, json_text=text, params_bytes=blob)  # what we write must load
    ppath = params or os.path.splitext(path)[0] + ".params"
    write_atomic(ppath, [blob])
    write_atomic(path, [text.encode("utf-8")])
