"""Compile a flat :class:`~nnefx.graph.Graph` into a :class:`Plan`, once, before running it.

Seed 000 §2.4.1 separates graph *compilation* from *execution*; this module is the
compilation half for the runtime.  It

* checks the order of operations (every tensor defined before it is read, one ``update``
  per variable, ``update`` applied to a variable, graph outputs produced somewhere);
* resolves every operation to its kernel through the registry
  (``registry.get(op).kernel(backend)``) so an unsupported operation fails *before* the first
  run, with the operation's location;
* turns ``constant`` operations and literal tensor arguments into ready arrays, and folds
  every operation whose inputs are all constants or never-updated variables (it would compute
  the same value on every run);
* drops operations that feed no output and no ``update``;
* gives each tensor a *slot* in a register list and computes, from the last use of each
  tensor, which slots to clear after each step; cleared slots are handed to later results,
  so a run holds only the tensors still alive (numpy allocates each result, so clearing the
  reference is what frees the memory).

The :class:`Plan` is a list of :class:`Step`\\ s over slots; :mod:`nnefx.runtime.session`
executes it.  Everything that depends on the graph's *structure* is decided here so that the
run loop does nothing but call kernels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation
from ..ops import registry
from ..ops.registry import OpDef
from .dtypes import dequantize, literal_array, storage_map, to_storage
from .signature import tensor_params

#: Operations the session handles itself instead of calling a kernel.
SPECIAL = ("external", "variable", "constant", "update")

#: Largest ``constant`` the planner will materialise (items): a hostile document must not be
#: able to make nnefx allocate unbounded memory from a one-line declaration.
MAX_CONSTANT_ITEMS = 1 << 28

Resolver = Callable[[str], OpDef]


@dataclass
class Step:
    """One kernel call: read argument slots, call, write result slots, clear dead slots."""

    op: Operation
    #: Position of the operation in ``graph.operations`` (for messages).
    index: int
    kind: str
    kernel: Callable[..., Any]
    #: One entry per positional argument: a slot number, or a list of them (``tensor[]``).
    args: list[Any]
    kwargs: dict[str, Any]
    #: One entry per result, in declaration order: a slot, or a list of slots (``tensor[]``).
    outs: list[Any]
    #: Tensor names matching ``outs`` (for messages and checks).
    out_names: list[Any]
    #: Storage dtype and NNEF dtype of each flattened result.
    out_storage: list[tuple[np.dtype, str]]
    #: Declared shapes of the flattened results (None where not fully known).
    out_shapes: list[tuple | None]
    #: Slots to clear after this step.
    free: tuple[int, ...] = ()
    #: Check scalar inputs for NaN/Inf before calling (the operation forbids them).
    finite_inputs: bool = False
    #: Where the operation is, for error messages.
    where: Location | None = None
    #: Name the profile files the call under (``kind``, or e.g. ``conv+add+relu`` when fused).
    label: str = ""


@dataclass
class InputSpec:
    """A tensor the caller feeds before each run (an ``external``)."""

    name: str
    dtype: str
    shape: tuple | None
    slot: int


@dataclass
class VariableSpec:
    """A variable tensor: its state key (lower-cased label), initial data and slot."""

    name: str
    key: str
    label: str
    dtype: str
    shape: tuple
    initial: np.ndarray
    #: Slot the variable is loaded into at the start of a run (-1 when no step reads it).
    slot: int
    op: Operation


@dataclass
class UpdateSpec:
    """At the end of a run, the variable ``key`` takes the value in ``slot``."""

    key: str
    variable: str
    value: str
    slot: int
    op: Operation
    index: int


@dataclass
class Plan:
    """Everything needed to run a graph repeatedly, decided once."""

    graph: Graph
    backend: str
    storage: dict[str, np.dtype]
    steps: list[Step]
    inputs: list[InputSpec]
    variables: list[VariableSpec]
    updates: list[UpdateSpec]
    #: (name, slot, NNEF dtype, shape) of each graph output, in graph order.
    outputs: list[tuple[str, int, str, tuple | None]]
    #: Register list with the constant slots filled in; copied at the start of each run.
    template: list[Any]
    n_slots: int
    folded: int = 0
    pruned: int = 0
    source: str | None = None
    #: Slots holding constants (never cleared, never handed out again).
    constant_slots: frozenset[int] = field(default_factory=frozenset)
    #: Operations merged into a preceding ``conv`` (see ``fuse`` of :func:`compile_plan`).
    fused: int = 0

    def summary(self) -> str:
        """One line for ``nnefx run`` and the demo: what the planner did."""
        def count(n: int, word: str) -> str:
            return f"{n} {word}{'' if n == 1 else 's'}"

        fused = f"{self.fused} fused, " if self.fused else ""
        return (f"plan: {count(len(self.steps), 'kernel call')} ({self.backend}), {self.folded} folded, "
                f"{fused}{self.pruned} unused dropped, {count(len(self.variables), 'variable')}, "
                f"{count(len(self.updates), 'update')}, "
                f"{count(self.n_slots - len(self.constant_slots), 'buffer')}")


def _flat(values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flat(v))
        else:
            out.append(v)
    return out


def _op_location(op: Operation, index: int, source: str | None) -> Location:
    if op.location is not None:
        return op.location if op.location.file or not source else op.location.with_file(source)
    names = ", ".join(op.output_names())
    return Location(source, field=f"operation #{index} '{op.op}' -> {names}")


def _shape_tuple(shape: Any) -> tuple | None:
    if shape is None:
        return None
    return tuple(None if d is None else int(d) for d in shape)


def _known(shape: tuple | None) -> tuple | None:
    if shape is None or any(d is None for d in shape):
        return None
    return shape


def _volume(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _Slots:
    """Hands out register slots, reusing cleared ones."""

    def __init__(self) -> None:
        self.count = 0
        self.free: list[int] = []

    def take(self) -> int:
        if self.free:
            return self.free.pop()
        self.count += 1
        return self.count - 1

    def give(self, slot: int) -> None:
        self.free.append(slot)


def compile_plan(graph: Graph, backend: str = "fast", *, storage: Mapping[str, Any] | None = None,
                 fold: bool = True, resolve: Resolver | None = None, source: str | None = None,
                 check_shapes: bool = True, release: bool = True,
                 variables: Mapping[str, Any] | None = None, fetch: Sequence[str] = (),
                 fuse: bool = True) -> Plan:
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
    never pruned), e.g. to compare a layer's activations with another tool.  ``fuse`` (fast
    backend only) runs a ``conv`` followed by its only reader ``relu``, or by a residual
    ``add`` (and that one's only reader ``relu``), as one kernel that finishes each batch
    item in place (:func:`_fuse_conv_epilogues`); same results, bit for bit.
    """
    if backend not in ("fast", "formal"):
        raise NNEFXError(f"unknown backend '{backend}' (expected 'fast' or 'formal')")
    resolve = resolve or registry.get
    store = storage_map(storage)
    ops = list(graph.operations)
    given = {str(k).lower(): v for k, v in (variables or {}).items()}
    labels = {str(op.attribs.get("label", op.output_names()[0] if op.output_names() else "")).lower()
              for op in ops if op.op == "variable"}
    for key in given:
        if key not in labels:
            raise NNEFXError(f"no variable of graph '{graph.name}' has label '{key}'")

    # ---- 1. order and structure --------------------------------------------------------
    defined: dict[str, int] = {}  # tensor -> index of defining op
    alias: dict[str, str] = {}    # update result -> the value tensor it reads as
    var_key_of: dict[str, str] = {}  # variable tensor -> state key
    var_specs: dict[str, VariableSpec] = {}
    updates: list[tuple[int, Operation, str, str, str]] = []  # (index, op, key, var, value)
    updated_keys: dict[str, int] = {}
    input_names: list[str] = []
    for i, op in enumerate(ops):
        for name in op.input_names():
            if name not in graph.tensors:
                raise NNEFXError(f"operation '{op.op}' reads unknown tensor '{name}'",
                                 _op_location(op, i, source))
            if name not in defined:
                raise NNEFXError(f"operation '{op.op}' reads tensor '{name}' before it is defined "
                                 "(operations are not in topological order)", _op_location(op, i, source))
        outs = op.output_names()
        for name in outs:
            if name not in graph.tensors:
                raise NNEFXError(f"operation '{op.op}' writes unknown tensor '{name}'",
                                 _op_location(op, i, source))
            if name in defined:
                raise NNEFXError(f"tensor '{name}' is written twice (operations #{defined[name]} "
                                 f"and #{i})", _op_location(op, i, source))
            defined[name] = i
        if op.op == "variable":
            if len(outs) != 1:
                raise NNEFXError("'variable' must have exactly one result", _op_location(op, i, source))
            spec = _variable_spec(graph, op, i, outs[0], store, source, given)
            for other in var_specs.values():
                if other.key == spec.key and other.shape != spec.shape:
                    raise NNEFXError(f"variables with label '{spec.label}' share data but have shapes "
                                     f"{list(other.shape)} and {list(spec.shape)}", _op_location(op, i, source))
            var_specs[outs[0]] = spec
            var_key_of[outs[0]] = spec.key
        elif op.op == "external":
            if len(outs) != 1:
                raise NNEFXError("'external' must have exactly one result", _op_location(op, i, source))
            input_names.append(outs[0])
        elif op.op == "update":
            refs = [v for v in op.inputs.values()]
            if len(refs) != 2 or not all(isinstance(r, str) for r in refs):
                raise NNEFXError("'update' takes a variable and a tensor value",
                                 _op_location(op, i, source))
            var, value = refs
            if var not in var_key_of:
                raise NNEFXError(f"first argument of 'update' must be a variable, '{var}' is not",
                                 _op_location(op, i, source))
            key = var_key_of[var]
            if key in updated_keys:
                raise NNEFXError(f"variable '{var_specs[var].label}' is updated twice in one cycle "
                                 f"(operations #{updated_keys[key]} and #{i})", _op_location(op, i, source))
            updated_keys[key] = i
            vshape = _known(_shape_tuple(graph.tensors[value].shape))
            if vshape is not None and vshape != var_specs[var].shape:
                raise NNEFXError(f"'update' of variable '{var_specs[var].label}' with shape "
                                 f"{list(var_specs[var].shape)} gets a value of shape {list(vshape)}",
                                 _op_location(op, i, source))
            for name in outs:
                alias[name] = alias.get(value, value)
            updates.append((i, op, key, var, value))
    for name in graph.inputs:
        if name not in graph.tensors:
            raise NNEFXError(f"graph '{graph.name}' names unknown tensor '{name}' as input")
        if name not in defined:
            input_names.append(name)  # an input without an 'external' operation
            defined[name] = -1
    for name in graph.outputs:
        if name not in graph.tensors:
            raise NNEFXError(f"graph '{graph.name}' names unknown tensor '{name}' as output")
        if name not in defined:
            raise NNEFXError(f"graph output '{name}' is never computed")
    for name in fetch:
        if name not in defined:
            raise NNEFXError(f"cannot fetch '{name}': graph '{graph.name}' has no such tensor")
    result_names = list(dict.fromkeys(list(graph.outputs) + list(fetch)))
    input_names = list(dict.fromkeys([n for n in graph.inputs if n in input_names] + input_names))

    def canon(name: str) -> str:
        return alias.get(name, name)

    # ---- 2. constants, foldable values, kernels ------------------------------------------
    const_values: dict[str, np.ndarray] = {}
    for name, spec in var_specs.items():
        if spec.key not in updated_keys:
            const_values[name] = spec.initial  # never changes: a constant for this plan
    literal_slots: list[np.ndarray] = []  # literal arrays, slot assigned later

    pending: list[tuple[int, Operation, OpDef, Callable[..., Any], list[Any], dict[str, Any]]] = []
    folded = 0
    for i, op in enumerate(ops):
        if op.op == "constant":
            if len(op.output_names()) != 1:
                raise NNEFXError("'constant' must have exactly one result", _op_location(op, i, source))
            out = op.output_names()[0]
            const_values[out] = _constant_value(graph, op, i, out, store, source)
            continue
        if op.op in SPECIAL:
            continue
        if op.op in graph.declarations:
            raise NNEFXError(f"no kernel for '{op.op}': the document declares it without a body (a custom "
                             "primitive), so nnefx can check and shape it but not run it",
                             _op_location(op, i, source))
        try:
            opdef = resolve(op.op)
            kernel = opdef.kernel(backend)
        except NNEFXError as exc:
            raise NNEFXError(exc.message, _op_location(op, i, source)) from None
        generic = op.dtype or _generic_dtype(graph, op, opdef)
        args = _arguments(graph, op, opdef, generic, i, store, source, literal_slots, canon)
        kwargs = dict(op.attribs)
        if opdef.generic:
            kwargs["dtype"] = generic
        if fold and _all_constant(args, const_values, literal_slots):
            _fold(graph, op, i, kernel, args, kwargs, const_values, literal_slots, store, source)
            folded += 1
            continue
        pending.append((i, op, opdef, kernel, args, kwargs))

    # ---- 3. drop what nothing needs ------------------------------------------------------
    needed: set[str] = {canon(n) for n in result_names}
    for _, _, _, _, value in updates:
        needed.add(canon(value))
    kept: list[tuple[int, Operation, OpDef, Callable[..., Any], list[Any], dict[str, Any]]] = []
    for entry in reversed(pending):
        op = entry[1]
        if any(n in needed for n in op.output_names()):
            kept.append(entry)
            for a in _flat(entry[4]):
                if isinstance(a, str):
                    needed.add(a)
    kept.reverse()
    pruned = len(pending) - len(kept)
    labels: dict[int, str] = {}
    if fuse and backend == "fast":
        protected = {canon(n) for n in result_names} | {canon(u[4]) for u in updates}
        kept, labels = _fuse_conv_epilogues(kept, resolve, protected, graph)
    if backend == "fast":
        kept = _prepare_constant_filters(kept, resolve, const_values)
    fused = sum(label.count("+") for label in labels.values())

    # ---- 4. slots and lifetimes ----------------------------------------------------------
    template: list[Any] = []
    slot_of: dict[str, int] = {}
    lit_slot: dict[int, int] = {}

    def const_slot(value: np.ndarray) -> int:
        template.append(value)
        return len(template) - 1

    for name in result_names:
        c = canon(name)
        if c in const_values and c not in slot_of:
            slot_of[c] = const_slot(const_values[c])
    for _, _, _, _, value in updates:
        c = canon(value)
        if c in const_values and c not in slot_of:
            slot_of[c] = const_slot(const_values[c])
    for entry in kept:
        for a in _flat(entry[4]):
            if isinstance(a, str) and a in const_values and a not in slot_of:
                slot_of[a] = const_slot(const_values[a])
            elif isinstance(a, int) and a not in lit_slot:
                lit_slot[a] = const_slot(literal_slots[a])
    n_const = len(template)
    slots = _Slots()
    slots.count = n_const

    end = len(kept)
    last_use: dict[str, int] = {}
    for k, entry in enumerate(kept):
        for a in _flat(entry[4]):
            if isinstance(a, str):
                last_use[a] = k
    for name in result_names:
        last_use[canon(name)] = end
    for _, _, _, _, value in updates:
        last_use[canon(value)] = end

    inputs: list[InputSpec] = []
    for name in input_names:
        t = graph.tensors[name]
        producer = ops[defined[name]] if defined[name] >= 0 else None
        dtype = (producer.dtype if producer is not None and producer.dtype else None) or t.dtype
        if dtype not in store:
            raise NNEFXError(f"input '{name}' has unknown data type '{dtype}' (expected scalar, integer or "
                             "logical)", _op_location(producer, defined[name], source) if producer else None)
        shape = _shape_tuple(t.shape)
        if shape is None and producer is not None and "shape" in producer.attribs:
            shape = _shape_tuple(producer.attribs["shape"])
        slot = slots.take() if name in last_use else -1
        if slot >= 0:
            slot_of[name] = slot
        inputs.append(InputSpec(name, dtype, shape, slot))
    variables: list[VariableSpec] = []
    for name, spec in var_specs.items():
        if name not in slot_of and name in last_use and name not in const_values:
            spec.slot = slot_of[name] = slots.take()
        variables.append(spec)

    steps: list[Step] = []
    for k, (i, op, _opdef, kernel, args, kwargs) in enumerate(kept):
        arg_slots = [_slot_args(a, slot_of, lit_slot) for a in args]
        # results: allocate before clearing this step's dead inputs (no aliasing of slots)
        outs: list[Any] = []
        out_names: list[Any] = []
        for value in op.outputs.values():
            if isinstance(value, (list, tuple)):
                group = []
                for name in value:
                    group.append(_result_slot(name, slot_of, slots))
                outs.append(group)
                out_names.append(list(value))
            else:
                outs.append(_result_slot(value, slot_of, slots))
                out_names.append(value)
        dead: list[int] = []
        for a in _flat(args):
            if isinstance(a, str) and last_use.get(a) == k and slot_of[a] >= n_const:
                if slot_of[a] not in dead:
                    dead.append(slot_of[a])
        for name in op.output_names():
            if name not in last_use:
                dead.append(slot_of[name])  # computed but unused (e.g. one result of split)
        if not release:
            dead = []
        flat_names = _flat(out_names)
        out_storage = [(_storage_of(store, graph.tensors[n].dtype, n, op, i, source), graph.tensors[n].dtype)
                       for n in flat_names]
        out_shapes = [_known(_shape_tuple(graph.tensors[n].shape)) if check_shapes else None
                      for n in flat_names]
        steps.append(Step(op=op, index=i, kind=op.op, kernel=kernel, args=arg_slots, kwargs=kwargs,
                          outs=outs, out_names=out_names, out_storage=out_storage,
                          out_shapes=out_shapes, free=tuple(dead),
                          finite_inputs=bool(_opdef.extra.get("finite_inputs", False)),
                          where=_op_location(op, i, source), label=labels.get(id(op), op.op)))
        for slot in dead:
            slots.give(slot)

    outputs = []
    for name in result_names:
        c = canon(name)
        t = graph.tensors[name]
        outputs.append((name, slot_of[c], t.dtype, _shape_tuple(t.shape)))
    update_specs = [UpdateSpec(key, var, value, slot_of[canon(value)], op, i)
                    for i, op, key, var, value in updates]
    template.extend([None] * (slots.count - n_const))
    return Plan(graph=graph, backend=backend, storage=store, steps=steps, inputs=inputs,
                variables=variables, updates=update_specs, outputs=outputs, template=template,
                n_slots=slots.count, folded=folded, pruned=pruned, source=source,
                constant_slots=frozenset(range(n_const)), fused=fused)


# ---- fusion -------------------------------------------------------------------------------

Entry = tuple  # (index, Operation, OpDef, kernel, args, kwargs), as built by compile_plan


def _fuse_conv_epilogues(kept: list[Entry], resolve: Resolver, protected: set[str],
                         graph: Graph) -> tuple[list[Entry], dict[int, str]]:
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
    Returns the new entry list and, for each fused operation (by ``id``), its profile label.
    """
    from ..ops.sliding import fused_conv

    try:
        defs = {name: resolve(name) for name in ("conv", "add", "relu")}
    except NNEFXError:
        return kept, {}
    registry_defs = {name: registry.get(name) for name in defs}
    if any(defs[n] is not registry_defs[n] for n in defs):
        return kept, {}
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
    return [e for e in entries if e is not None], labels


def _prepare_constant_filters(kept: list[Entry], resolve: Resolver,
                              const_values: Mapping[str, np.ndarray]) -> list[Entry]:
    """Let ``conv`` steps with a constant 3×3 filter keep its Winograd transform across runs.

    Why: the fast kernel computes 3×3 stride-1 convolutions of many channels by Winograd
    F(2×2, 3×3), whose transformed filter costs about as much as the convolution itself.
    A filter that is a constant of the plan (a ``constant``, or a ``variable`` no ``update``
    changes; :meth:`Session.assign` compiles a new plan) is the same, unchanged array in
    every run, so its step's kernel is wrapped by :func:`nnefx.ops.sliding.prepared_conv`,
    which caches the transform for that array.  Filters computed at run time or fed as
    inputs are transformed on every call.  Only the registry's ``conv`` (plain or fused).
    """
    from ..ops.sliding import prepared_conv

    try:
        conv_def = resolve("conv")
    except NNEFXError:
        return kept
    if conv_def is not registry.get("conv"):
        return kept
    out: list[Entry] = []
    for entry in kept:
        i, op, opdef, kernel, args, kwargs = entry
        if opdef is conv_def and len(args) >= 2 and isinstance(args[1], str):
            value = const_values.get(args[1])
            if value is not None and getattr(value, "ndim", 0) == 4 and tuple(value.shape[2:]) == (3, 3):
                entry = (i, op, opdef, prepared_conv(kernel), args, kwargs)
        out.append(entry)
    return out


# ---- helpers ------------------------------------------------------------------------------

def _storage_of(store: dict[str, np.dtype], dtype: str, name: str, op: Operation, index: int,
                source: str | None) -> np.dtype:
    try:
        return store[dtype]
    except KeyError:
        raise NNEFXError(f"tensor '{name}' has unknown data type '{dtype}' (expected scalar, integer "
                         "or logical)", _op_location(op, index, source)) from None


def _variable_spec(graph: Graph, op: Operation, index: int, name: str, store: dict[str, np.dtype],
                   source: str | None, given: Mapping[str, Any]) -> VariableSpec:
    t = graph.tensors[name]
    where = _op_location(op, index, source)
    label = str(op.attribs.get("label", name))
    dtype = op.dtype or t.dtype
    shape = _shape_tuple(op.attribs.get("shape", t.shape))
    if label.lower() in given:
        raw = np.asarray(given[label.lower()])  # a value passed in: never quantized codes
        if raw.dtype == object:
            raise NNEFXError(f"value given for variable '{label}' is not a numeric array", where)
        data = to_storage(raw, dtype, store, f"value given for variable '{label}'", where)
        if tuple(data.shape) != tuple(shape or data.shape):
            raise NNEFXError(f"variable '{label}' has shape {list(shape)}; the value given has shape "
                             f"{list(data.shape)}", where)
        data = data.copy() if np.may_share_memory(data, raw) else data  # the caller keeps theirs
        data.setflags(write=False)
        return VariableSpec(name=name, key=label.lower(), label=label, dtype=dtype, shape=tuple(data.shape),
                            initial=data, slot=-1, op=op)
    if t.data is None:
        raise NNEFXError(f"variable '{label}' has no data (load the model with its weights, or give "
                         "its value)", where)
    raw = np.asarray(t.data)
    if dtype == "scalar" and raw.dtype.kind in "iu":
        # quantized codes from the tensor file: real values through the graph.quant entry
        raw = dequantize(raw, t.quant or {}, f"variable '{label}'", where)
    data = to_storage(raw, dtype, store, f"data of variable '{label}'", where)
    if shape is None:
        shape = tuple(data.shape)
    if tuple(data.shape) != tuple(shape):
        raise NNEFXError(f"variable '{label}' is declared with shape {list(shape)} but its data has "
                         f"shape {list(data.shape)}", where)
    # A read-only view, not a copy: weights (often memory-mapped by the loader) are used in
    # place, and no kernel can write into the model's arrays through it.
    data = data.view()
    data.setflags(write=False)
    return VariableSpec(name=name, key=label.lower(), label=label, dtype=dtype, shape=tuple(shape),
                        initial=data, slot=-1, op=op)


def _constant_value(graph: Graph, op: Operation, index: int, name: str, store: dict[str, np.dtype],
                    source: str | None) -> np.ndarray:
    where = _op_location(op, index, source)
    t = graph.tensors[name]
    dtype = op.dtype or t.dtype
    shape = _shape_tuple(op.attribs.get("shape", t.shape))
    if shape is None or any(d is None or d < 0 for d in shape):
        raise NNEFXError(f"constant '{name}' has no definite shape", where)
    volume = _volume(shape)
    if volume > MAX_CONSTANT_ITEMS:
        raise NNEFXError(f"constant '{name}' of shape {list(shape)} is too large "
                         f"({volume} items, limit {MAX_CONSTANT_ITEMS})", where)
    raw = op.attribs.get("value")
    if raw is None:
        raise NNEFXError(f"constant '{name}' has no value", where)
    try:
        values = to_storage(np.asarray(raw).reshape(-1), dtype, store, f"value of constant '{name}'", where)
    except ValueError as exc:
        raise NNEFXError(f"constant '{name}' has an unusable value ({exc})", where) from None
    if values.size == 1:
        array = np.full(shape, values[0], dtype=values.dtype)
    elif values.size == volume:
        array = values.reshape(shape).copy()
    else:
        raise NNEFXError(f"constant '{name}' of shape {list(shape)} needs {volume} values or 1, "
                         f"got {values.size}", where)
    array.setflags(write=False)
    return array


def _generic_dtype(graph: Graph, op: Operation, opdef: OpDef) -> str:
    """The type bound to ``?`` when the graph did not record it: from a generic argument."""
    params = tensor_params(opdef.declaration) or ()
    for p in params:
        if p.dtype is None:
            value = op.inputs.get(p.name)
            for v in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(v, str):
                    return graph.tensors[v].dtype
    for name in op.output_names():
        return graph.tensors[name].dtype
    return "scalar"


def _arguments(graph: Graph, op: Operation, opdef: OpDef, generic: str, index: int, store: dict[str, np.dtype],
               source: str | None, literals: list[np.ndarray], canon: Callable[[str], str]) -> list[Any]:
    """Positional arguments: tensor names (str), or literal indices (int) into ``literals``."""
    params = tensor_params(opdef.declaration)
    where = _op_location(op, index, source)
    if params is None:
        # Declaration unreadable: trust the graph's (declaration-ordered) inputs.
        ordered = [(name, value, None) for name, value in op.inputs.items()]
    else:
        known = {p.name for p in params}
        for name in op.inputs:
            if name not in known:
                raise NNEFXError(f"operation '{op.op}' has no tensor parameter '{name}'", where)
        ordered = []
        skipped: str | None = None  # a left-out parameter whose default only the kernel knows
        for p in params:
            dtype = p.dtype or generic
            if p.name in op.inputs:
                if skipped is not None:
                    raise NNEFXError(f"operation '{op.op}' is missing tensor argument '{skipped}'", where)
                ordered.append((p.name, op.inputs[p.name], dtype))
            elif p.has_default and skipped is None:
                ordered.append((p.name, p.default, dtype))
            elif p.declared_default:
                skipped = skipped or p.name
            else:
                raise NNEFXError(f"operation '{op.op}' is missing tensor argument '{p.name}'", where)

    def one(value: Any, dtype: str | None) -> Any:
        if isinstance(value, str):
            return canon(value)
        if isinstance(value, (bool, int, float, np.generic)):
            literals.append(literal_array(value, dtype, store))
            return len(literals) - 1
        raise NNEFXError(f"operation '{op.op}' has an unsupported tensor argument {value!r}", where)

    args: list[Any] = []
    for _name, value, dtype in ordered:
        if isinstance(value, (list, tuple)):
            args.append([one(v, dtype) for v in value])
        else:
            args.append(one(value, dtype))
    return args


def _all_constant(args: list[Any], const_values: dict[str, np.ndarray], literals: list[np.ndarray]) -> bool:
    for a in _flat(args):
        if isinstance(a, str) and a not in const_values:
            return False
    return True


def _fold(graph: Graph, op: Operation, index: int, kernel: Callable[..., Any], args: list[Any],
          kwargs: dict[str, Any], const_values: dict[str, np.ndarray], literals: list[np.ndarray],
          store: dict[str, np.dtype], source: str | None) -> None:
    def value(a: Any) -> Any:
        if isinstance(a, list):
            return [value(x) for x in a]
        return const_values[a] if isinstance(a, str) else literals[a]

    where = _op_location(op, index, source)
    results = call_kernel(op, kernel, [value(a) for a in args], kwargs, where)
    flat_names = op.output_names()
    flat_results = _flat_results(op, results, where)
    for name, result in zip(flat_names, flat_results, strict=True):
        t = graph.tensors[name]
        array = check_result(op, name, result, _storage_of(store, t.dtype, name, op, index, source), t.dtype,
                             _known(_shape_tuple(t.shape)), where)
        array = np.array(array, copy=True)
        array.setflags(write=False)
        const_values[name] = array


def _slot_args(a: Any, slot_of: dict[str, int], lit_slot: dict[int, int]) -> Any:
    if isinstance(a, list):
        return [_slot_args(x, slot_of, lit_slot) for x in a]
    return slot_of[a] if isinstance(a, str) else lit_slot[a]


def _result_slot(name: str, slot_of: dict[str, int], slots: _Slots) -> int:
    slot = slots.take()
    slot_of[name] = slot
    return slot


# ---- shared by folding and the run loop ------------------------------------------------------

def call_kernel(op: Operation, kernel: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                where: Location) -> Any:
    """Call ``kernel``; any failure becomes an :class:`NNEFXError` naming the operation."""
    try:
        with np.errstate(all="ignore"):
            return kernel(*args, **kwargs)
    except NNEFXError as exc:
        loc = exc.location if exc.location is not None and (exc.location.line or exc.location.field) else where
        message = exc.message if f"'{op.op}'" in exc.message else f"in operation '{op.op}': {exc.message}"
        raise NNEFXError(message, loc) from None
    except MemoryError:
        raise NNEFXError(f"operation '{op.op}' ran out of memory", where) from None
    except Exception as exc:  # a kernel bug or an argument it cannot handle
        raise NNEFXError(f"operation '{op.op}' failed: {type(exc).__name__}: {exc}", where) from None


def _flat_results(op: Operation, results: Any, where: Location) -> list[Any]:
    n = len(op.outputs)
    if n == 1 and not (isinstance(results, tuple) and len(results) == 1):
        results = (results,)
    if not isinstance(results, tuple) or len(results) != n:
        raise NNEFXError(f"kernel of '{op.op}' returned {_count(results)} results, expected {n}", where)
    flat: list[Any] = []
    for declared, got in zip(op.outputs.values(), results, strict=True):
        if isinstance(declared, (list, tuple)):
            if not isinstance(got, (list, tuple)) or len(got) != len(declared):
                raise NNEFXError(f"kernel of '{op.op}' returned {_count(got)} tensors for a result of "
                                 f"{len(declared)}", where)
            flat.extend(got)
        else:
            flat.append(got)
    return flat


def _count(value: Any) -> int:
    return len(value) if isinstance(value, (list, tuple)) else 1


def check_result(op: Operation, name: str, result: Any, storage: np.dtype, nnef_dtype: str,
                 shape: tuple | None, where: Location) -> np.ndarray:
    """A kernel result as an array of the graph's storage dtype, with its declared shape."""
    array = result if isinstance(result, np.ndarray) else np.asarray(result)
    if array.dtype != storage:
        if array.dtype.kind not in {"scalar": "f", "integer": "iu", "logical": "b"}[nnef_dtype]:
            raise NNEFXError(f"operation '{op.op}' produced {array.dtype} data for {nnef_dtype} result "
                             f"'{name}'", where)
        array = array.astype(storage)
    if shape is not None and array.shape != shape:
        raise NNEFXError(f"operation '{op.op}' produced shape {list(array.shape)} for '{name}', "
                         f"declared {list(shape)}", where)
    return array
