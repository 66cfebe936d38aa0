"""Compile a flat :class:`~nnefx.graph.Graph` into a :class:`Plan`, once, before running it.

Graph *compilation* is separate from *execution* (NNEF spec §2.4 "Execution semantics":
a graph is first compiled, then executed any number of times); this module is the
compilation half for the runtime.  :func:`compile_plan` runs these passes over one
:class:`~nnefx.runtime.passes.PlanState`:

1. **validate** — the order of operations (every tensor defined before it is read, one
   ``update`` per variable, ``update`` applied to a variable, graph outputs produced);
2. **bind** — every operation resolved to its kernel through the registry
   (``registry.get(op).kernel(...)``) so an unsupported operation fails *before* the first
   run, with the operation's location; ``constant`` operations and literal tensor
   arguments turned into ready arrays;
3. **fold** — every operation whose inputs are all constants or never-updated variables is
   run once (it would compute the same value on every run);
4. **prune** — operations that feed no output and no ``update`` are dropped;
5. **the backend's passes** — registered with the backend (:mod:`nnefx.runtime.backend`),
   e.g. the fast backend's convolution epilogue fusion and Winograd filter preparation
   (:mod:`nnefx.runtime.fast_backend`);
6. **allocate** — each tensor gets a *slot* in a register list; from the last use of each
   tensor, which slots to clear after each step; cleared slots are handed to later
   results, so a run holds only the tensors still alive (numpy allocates each result, so
   clearing the reference is what frees the memory).

The :class:`Plan` is a list of :class:`Step`\\ s over slots (:mod:`nnefx.runtime.plan`);
:mod:`nnefx.runtime.session` executes it.  Everything that depends on the graph's
*structure* is decided here so that the run loop does nothing but call kernels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..graph import Graph
from ..ops import registry
from . import passes
from .backend import get_backend
from .dtypes import storage_map
from .passes import MAX_CONSTANT_ITEMS, SPECIAL, PlanState, Resolver
from .plan import InputSpec, Plan, Step, UpdateSpec, VariableSpec, _op_location, call_kernel, check_result

__all__ = ["MAX_CONSTANT_ITEMS", "SPECIAL", "InputSpec", "Plan", "Resolver", "Step", "UpdateSpec", "VariableSpec",
           "_op_location", "call_kernel", "check_result", "compile_plan"]


def compile_plan(graph: Graph, backend: str = "fast", *, storage: Mapping[str, Any] | None = None,
                 fold: bool = True, resolve: Resolver | None = None, source: str | None = None,
                 check_shapes: bool = True, release: bool = True,
                 variables: Mapping[str, Any] | None = None, fetch: Sequence[str] = (),
                 fuse: bool = True, depth: int = 0) -> Plan:
    """Compile ``graph`` for ``backend`` (``"fast"`` or ``"formal"``).

    ``resolve`` maps an operation name to its :class:`OpDef` (default: the registry; tests
    pass their own).  ``storage`` overrides the numpy dtype of NNEF types.  ``source`` names
    the model file for messages.  ``check_shapes`` makes each step compare its results with
    the shapes the graph declares (turn it off when inputs are fed with other shapes than
    declared and shapes have not been inferred again).  ``release=False`` keeps every
    intermediate tensor until the run ends (what a naive interpreter does; for measuring what
    releasing saves).  ``variables`` gives values by label (case-insensitive) that replace or
    supply the graph's variable data (seed §2.4.1: "pass initial values to the variables").
    ``fetch`` names intermediate tensors to return after the graph's outputs (kept alive and
    never pruned), e.g. to compare a layer's activations with another tool.  ``fuse=False``
    skips the backend's fusion passes (on the fast backend: a ``conv`` followed by its only
    reader ``relu``, or by a residual ``add`` (and that one's only reader ``relu``), run as
    one kernel that finishes each batch item in place,
    :func:`nnefx.runtime.fast_backend.fuse_conv_epilogues`; same results, bit for bit).
    ``depth`` is how deep inside control-flow bodies ``graph`` is (the bodies of its own
    ``If``/``Loop``/``Scan`` operations are compiled with the same options, one deeper:
    :mod:`nnefx.runtime.subgraphs`).
    """
    chosen = get_backend(backend)
    s = PlanState(graph=graph, backend=chosen, resolve=resolve or registry.get, store=storage_map(storage),
                  source=source, given={str(k).lower(): v for k, v in (variables or {}).items()},
                  fetch=fetch, check_shapes=check_shapes, release=release, ops=list(graph.operations),
                  depth=depth, body_options=dict(backend=backend, storage=storage, fold=fold, resolve=resolve,
                                                 source=source, release=release, fuse=fuse))
    passes.validate(s)
    passes.bind(s)
    if fold:
        passes.fold(s)
    passes.prune(s)
    for extra in chosen.passes:
        if fuse or not extra.fusion:
            extra.run(s)
    return passes.allocate(s)
