"""The fast backend: vectorised kernels, plus two planner passes of its own.

* :func:`fuse_conv_epilogues` — ``conv → relu``, ``conv → add`` and ``conv → add → relu``
  chains become one step (:func:`nnefx.ops.sliding.fused_conv`);
* :func:`prepare_winograd_filters` — ``conv`` steps with a constant 3×3 filter keep its
  Winograd transform between runs (:func:`nnefx.ops.sliding.prepared_conv`).

Both are registered with the backend (:func:`nnefx.runtime.backend.register_backend`), so
the planner runs them without knowing them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..diagnostics import NNEFXError
from ..graph import flat_values as _flat
from ..ops import registry
from ..ops.sliding import fused_conv, prepared_conv
from .backend import Backend, BackendPass, register_backend
from .passes import Entry, PlanState


def fuse_conv_epilogues(s: PlanState) -> None:
    """Merge ``conv → relu``, ``conv → add`` and ``conv → add → relu`` chains into one step.

    Why: in a CNN every convolution is followed by a ReLU and, in residual networks, an
    ``add``; as separate kernels each is a full pass over a fresh array (batch 8 of
    ResNet-18: 17 % of a run).  The fused kernel (:func:`nnefx.ops.sliding.fused_conv`)
    applies them to each batch item's output in place, right after its matrix product.

    A link is fused only when the convolution's (or the ``add``'s) result is read by that
    next operation alone, exactly once, and is not a graph output, a fetched tensor or an
    ``update`` value (``protected``): nothing else may observe the intermediate value that
    the fused kernel never materialises.  Only the registry's own ``conv``/``add``/``relu``
    fast kernels are fused (a test's resolver keeps its own).  The ``add``'s other operand
    must be computed before the fused step runs: the step takes the ``conv``'s place when
    it is, else the ``add``'s (the convolution's inputs then live a little longer).
    Records, for each fused operation (by ``id``), its profile label in ``s.labels``.
    """
    kept, resolve, protected, graph = s.entries, s.resolve, s.protected, s.graph
    try:
        defs = {name: resolve(name) for name in ("conv", "add", "relu")}
    except NNEFXError:
        return
    registry_defs = {name: registry.get(name) for name in defs}
    if any(defs[n] is not registry_defs[n] for n in defs):
        return
    conv_k, add_k, relu_k = (defs[n].fast_kernel for n in ("conv", "add", "relu"))

    readers: dict[str, list[int]] = {}
    produced_at: dict[str, int] = {}
    for k, entry in enumerate(kept):
        for a in _flat(entry[4]):
            if isinstance(a, str):
                readers.setdefault(a, []).append(k)
        for name in entry[1].output_names():
            produced_at[name] = k

    def sole_reader(name: str) -> int | None:
        r = readers.get(name, [])
        return r[0] if len(r) == 1 and name not in protected else None

    def is_op(entry: Entry | None, name: str) -> bool:
        return entry is not None and entry[2] is defs[name] and entry[3] is defs[name].fast_kernel

    entries: list[Entry | None] = list(kept)
    labels: dict[int, str] = {}
    for k1, entry in enumerate(kept):
        if entries[k1] is not entry or not is_op(entry, "conv"):
            continue
        i, op, opdef, _kernel, args, kwargs = entry
        outs = op.output_names()
        if len(outs) != 1 or graph.tensors[outs[0]].dtype != "scalar":
            continue
        t = outs[0]
        chain: list[int] = []
        skip: Any = None
        skip_first = False
        at = k1
        k2 = sole_reader(t)
        nxt = entries[k2] if k2 is not None else None
        if is_op(nxt, "add") and len(nxt[4]) == 2 and graph.tensors[nxt[1].output_names()[0]].dtype == "scalar":
            x_arg, y_arg = nxt[4]
            if x_arg == t and y_arg != t:
                skip = y_arg
            elif y_arg == t and x_arg != t:
                skip, skip_first = x_arg, True
            if skip is not None:
                chain.append(k2)
                if isinstance(skip, str) and produced_at.get(skip, -1) > k1:
                    at = k2  # the other operand is computed after the conv: run there
                k3 = sole_reader(nxt[1].output_names()[0])
                after = entries[k3] if k3 is not None else None
                if is_op(after, "relu") and after[4] == [nxt[1].output_names()[0]]:
                    chain.append(k3)
        elif is_op(nxt, "relu") and nxt[4] == [t]:
            chain.append(k2)
        if not chain:
            continue
        last = entries[chain[-1]]
        kinds = [entries[k][1].op for k in chain]
        residual = kinds[0] == "add"
        relu = kinds[-1] == "relu"
        fused_op = dataclasses.replace(op, outputs=dict(last[1].outputs))
        new_args = list(args) + ([skip] if residual else [])
        new_kwargs = dict(kwargs)
        if residual:
            new_kwargs["skip_first"] = skip_first
        kernel = fused_conv(conv_k, add_k, relu_k, residual=residual, relu=relu)
        for k in [k1] + chain:
            entries[k] = None
        entries[at] = (i, fused_op, opdef, kernel, new_args, new_kwargs)
        labels[id(fused_op)] = "+".join(["conv"] + kinds)
        # the fused step now reads the skip operand at its own position
        if isinstance(skip, str):
            readers[skip] = [at if r == chain[0] else r for r in readers[skip]]
    s.entries = [e for e in entries if e is not None]
    s.labels.update(labels)


def prepare_winograd_filters(s: PlanState) -> None:
    """Let ``conv`` steps with a constant 3×3 filter keep its Winograd transform across runs.

    Why: the fast kernel computes 3×3 stride-1 convolutions of many channels by Winograd
    F(2×2, 3×3), whose transformed filter costs about as much as the convolution itself.
    A filter that is a constant of the plan (a ``constant``, or a ``variable`` no ``update``
    changes; :meth:`Session.assign` compiles a new plan) is the same, unchanged array in
    every run, so its step's kernel is wrapped by :func:`nnefx.ops.sliding.prepared_conv`,
    which caches the transform for that array.  Filters computed at run time or fed as
    inputs are transformed on every call.  Only the registry's ``conv`` (plain or fused).
    """
    kept, const_values = s.entries, s.const_values
    try:
        conv_def = s.resolve("conv")
    except NNEFXError:
        return
    if conv_def is not registry.get("conv"):
        return
    out: list[Entry] = []
    for entry in kept:
        i, op, opdef, kernel, args, kwargs = entry
        if opdef is conv_def and len(args) >= 2 and isinstance(args[1], str):
            value = const_values.get(args[1])
            if value is not None and getattr(value, "ndim", 0) == 4 and tuple(value.shape[2:]) == (3, 3):
                entry = (i, op, opdef, prepared_conv(kernel), args, kwargs)
        out.append(entry)
    s.entries = out


register_backend(Backend("fast", "fast", passes=(
    BackendPass("fuse conv epilogues", fuse_conv_epilogues, fusion=True),
    BackendPass("prepare Winograd filters", prepare_winograd_filters),
), doc="vectorised kernels (strided views, im2col/BLAS, Winograd), conv epilogues fused"))
