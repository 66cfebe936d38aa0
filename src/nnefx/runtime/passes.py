"""The planner's passes: validate → bind → fold → prune → (backend passes) → allocate.

Each pass reads and extends one :class:`PlanState`; :func:`nnefx.runtime.planner.compile_plan`
runs them in that order.  The core passes know no backend: what a backend adds (the fast
backend's convolution epilogue fusion and Winograd filter preparation) is registered with
the backend (:mod:`nnefx.runtime.backend`) and runs between ``prune`` and ``allocate``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import etypes
from ..diagnostics import NNEFXError
from ..graph import Graph, Operation, Tensor
from ..graph import flat_values as _flat
from ..ops._common import wide_floats
from ..ops.registry import OpDef
from .backend import Backend
from .dtypes import dequantize, literal_array, to_storage
from .plan import (
    InputSpec,
    Plan,
    Step,
    UpdateSpec,
    VariableSpec,
    _flat_results,
    _known,
    _op_location,
    _shape_tuple,
    _volume,
    call_kernel,
    check_result,
)
from .signature import tensor_params

Entry = tuple  # (index, Operation, OpDef, kernel, args, kwargs): one bound operation

#: Operations the session handles itself instead of calling a kernel.
SPECIAL = ("external", "variable", "constant", "update")

#: Largest ``constant`` the planner will materialise (items): a hostile document must not be
#: able to make nnefx allocate unbounded memory from a one-line declaration.
MAX_CONSTANT_ITEMS = 1 << 28

Resolver = Callable[[str], OpDef]


@dataclass
class PlanState:
    """What the passes share while a plan is built: the graph and options, then what each
    pass finds (structure, constants, bound operations, labels of fused steps)."""

    graph: Graph
    backend: Backend
    resolve: Resolver
    store: dict[str, np.dtype]
    source: str | None = None
    given: dict[str, Any] = field(default_factory=dict)
    fetch: Sequence[str] = ()
    check_shapes: bool = True
    release: bool = True
    ops: list[Operation] = field(default_factory=list)
    #: how deep inside bodies this graph is (0: the model's graph), bounded by
    #: :data:`nnefx.runtime.subgraphs.MAX_DEPTH`
    depth: int = 0
    #: options a body of this graph is compiled with (``compile_plan`` keywords)
    body_options: dict[str, Any] = field(default_factory=dict)
    #: the ``call`` hook of this graph's control-flow operations (made on first need)
    caller: Any = None
    # found by validate
    defined: dict[str, int] = field(default_factory=dict)  # tensor -> index of defining op
    alias: dict[str, str] = field(default_factory=dict)    # update result -> the value tensor it reads as
    var_key_of: dict[str, str] = field(default_factory=dict)  # variable tensor -> state key
    var_specs: dict[str, VariableSpec] = field(default_factory=dict)
    updates: list[tuple[int, Operation, str, str, str]] = field(default_factory=list)  # (index, op, key, var, value)
    updated_keys: dict[str, int] = field(default_factory=dict)
    input_names: list[str] = field(default_factory=list)
    result_names: list[str] = field(default_factory=list)
    # found by bind, fold, prune and the backend's passes
    const_values: dict[str, np.ndarray] = field(default_factory=dict)
    literal_slots: list[np.ndarray] = field(default_factory=list)  # literal arrays, slot assigned later
    entries: list[Entry] = field(default_factory=list)
    folded: int = 0
    pruned: int = 0
    #: Profile label of each fused operation (by ``id``), e.g. ``conv+add+relu``.
    labels: dict[int, str] = field(default_factory=dict)

    def canon(self, name: str) -> str:
        """The tensor a name reads as (an ``update`` result reads as its value)."""
        return self.alias.get(name, name)

    @property
    def protected(self) -> set[str]:
        """Tensors someone outside the steps observes (outputs, fetched, ``update`` values):
        a pass must not stop materialising them."""
        return {self.canon(n) for n in self.result_names} | {self.canon(u[4]) for u in self.updates}


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



def validate(s: PlanState) -> None:
    """Order and structure: every tensor defined before it is read and written once, one
    ``update`` per variable and only of a variable, outputs and fetched tensors computed,
    variables' given values matched by label."""
    labels = {str(op.attribs.get("label", op.output_names()[0] if op.output_names() else "")).lower()
              for op in s.ops if op.op == "variable"}
    for key in s.given:
        if key not in labels:
            raise NNEFXError(f"no variable of graph '{s.graph.name}' has label '{key}'")
    graph, ops, store, source, given = s.graph, s.ops, s.store, s.source, s.given
    defined, alias, var_key_of, var_specs = s.defined, s.alias, s.var_key_of, s.var_specs
    updates, updated_keys, input_names = s.updates, s.updated_keys, s.input_names
    fetch = s.fetch
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
    s.result_names = list(dict.fromkeys(list(graph.outputs) + list(fetch)))
    s.input_names = list(dict.fromkeys([n for n in graph.inputs if n in input_names] + input_names))


def bind(s: PlanState) -> None:
    """Kernels and values: ``constant`` operations and never-updated variables become
    arrays, every other operation is resolved to its kernel for the backend (an unsupported
    one fails here, before any run, at its location) with declaration-ordered arguments
    (tensor names, or literals turned into arrays of the declared type) and attributes."""
    graph, store, source, canon = s.graph, s.store, s.source, s.canon
    for name, spec in s.var_specs.items():
        if spec.key not in s.updated_keys:
            s.const_values[name] = spec.initial  # never changes: a constant for this plan
    for i, op in enumerate(s.ops):
        if op.op == "constant":
            if len(op.output_names()) != 1:
                raise NNEFXError("'constant' must have exactly one result", _op_location(op, i, source))
            out = op.output_names()[0]
            s.const_values[out] = _constant_value(graph, op, i, out, store, source)
            continue
        if op.op in SPECIAL:
            continue
        if op.op in graph.declarations:
            raise NNEFXError(f"no kernel for '{op.op}': the document declares it without a body (a custom "
                             "primitive), so nnefx can check and shape it but not run it",
                             _op_location(op, i, source))
        try:
            opdef = s.resolve(op.op)
            kernel = opdef.kernel(s.backend.kernel)
        except NNEFXError as exc:
            raise NNEFXError(exc.message, _op_location(op, i, source)) from None
        generic = op.dtype or _generic_dtype(graph, op, opdef)
        wide = _float64_operation(graph, op)
        args = _arguments(graph, op, opdef, generic, i, _wide_store(store) if wide else store, source,
                          s.literal_slots, canon)
        kernel = _widening(kernel, args, graph, s.backend.kernel == "formal", s.const_values, _stored_inputs(opdef))
        if wide:
            kernel = wide_floats(kernel)
        kwargs = dict(op.attribs)
        if opdef.generic:
            kwargs["dtype"] = generic
        if "call" in opdef.extra.get("runtime_keywords", ()):
            if "body_shapes" in opdef.extra.get("runtime_keywords", ()):
                # tract's scan body: parameters of unfixed shape, a plan per input shapes
                from .bodies import BodyRunner

                kwargs["call"] = BodyRunner(graph, s.backend.kernel)
            else:
                kwargs["call"] = _caller(s, op, i)
        s.entries.append((i, op, opdef, kernel, args, kwargs))


def fold(s: PlanState) -> None:
    """Run, once, every operation whose inputs are all constants (it would compute the same
    value on every run); its results become constants of the plan."""
    kept: list[Entry] = []
    for entry in s.entries:
        i, op, _opdef, kernel, args, kwargs = entry
        if _all_constant(args, s.const_values, s.literal_slots):
            _fold(s.graph, op, i, kernel, args, kwargs, s.const_values, s.literal_slots, s.store, s.source)
            s.folded += 1
        else:
            kept.append(entry)
    s.entries = kept


def prune(s: PlanState) -> None:
    """Drop the operations that feed no output, fetched tensor or ``update``."""
    canon = s.canon
    needed: set[str] = {canon(n) for n in s.result_names}
    for _, _, _, _, value in s.updates:
        needed.add(canon(value))
    kept: list[Entry] = []
    for entry in reversed(s.entries):
        op = entry[1]
        if any(n in needed for n in op.output_names()):
            kept.append(entry)
            for a in _flat(entry[4]):
                if isinstance(a, str):
                    needed.add(a)
    kept.reverse()
    s.pruned = len(s.entries) - len(kept)
    s.entries = kept


def allocate(s: PlanState) -> Plan:
    """Slots and lifetimes: each tensor gets a register slot, constants first; a slot is
    cleared after the last step that reads it and handed to a later result."""
    graph, ops, store, source, canon = s.graph, s.ops, s.store, s.source, s.canon
    result_names, updates, const_values, literal_slots = s.result_names, s.updates, s.const_values, s.literal_slots
    kept, defined, var_specs, labels = s.entries, s.defined, s.var_specs, s.labels
    input_names, release, check_shapes = s.input_names, s.release, s.check_shapes
    fused = sum(label.count("+") for label in labels.values())
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
        kind = container_kind(graph, name)
        inputs.append(InputSpec(name, dtype, None if kind else shape, slot, kind or "tensor",
                                etype=None if kind else t.etype))
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
        # a sequence or optional result is checked by its kind (storage slot holds the kind)
        out_storage = [(container_kind(graph, n) or _storage_of(store, graph.tensors[n], n, op, i, source),
                        graph.tensors[n].dtype) for n in flat_names]
        out_shapes = [_known(_shape_tuple(graph.tensors[n].shape)) if check_shapes and not container_kind(graph, n)
                      else None for n in flat_names]
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
    return Plan(graph=graph, backend=s.backend.name, storage=store, steps=steps, inputs=inputs,
                variables=variables, updates=update_specs, outputs=outputs, template=template,
                n_slots=slots.count, folded=s.folded, pruned=s.pruned, source=source,
                constant_slots=frozenset(range(n_const)), fused=fused)


# ---- helpers ------------------------------------------------------------------------------

def _caller(s: PlanState, op: Operation, index: int) -> Any:
    """The graph's ``call`` hook (:mod:`nnefx.runtime.subgraphs`), with the bodies ``op`` names
    compiled now: a body's unsupported operation is refused at load, at its location."""
    from .subgraphs import SubgraphCaller

    where = _op_location(op, index, s.source)
    if s.caller is None:
        s.caller = SubgraphCaller(s.graph.subgraphs, s.body_options, s.depth, where)
    for value in op.attribs.values():
        names = value if isinstance(value, (list, tuple)) else [value]
        for name in names:
            if isinstance(name, str) and name in s.graph.subgraphs:
                s.caller.prepare(name, where)
    return s.caller


def container_kind(graph: Graph, name: str) -> str | None:
    """The kind of tensor ``name`` when it is a sequence or an optional, else None."""
    kind = getattr(graph.tensors[name], "kind", "tensor")
    return None if kind == "tensor" else kind


def _storage_of(store: dict[str, np.dtype], tensor: Tensor, name: str, op: Operation, index: int,
                source: str | None) -> np.dtype:
    """A tensor's storage: its concrete element type's numpy dtype, else its data type's."""
    try:
        return etypes.storage(tensor.etype, tensor.dtype, store)
    except KeyError:
        raise NNEFXError(f"tensor '{name}' has unknown data type '{tensor.dtype}' (expected scalar, integer "
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
        data = to_storage(raw, dtype, store, f"value given for variable '{label}'", where, t.etype)
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
    if dtype == "scalar" and raw.dtype.kind in "iu" and t.etype is None:
        # quantized codes from the tensor file: real values through the graph.quant entry
        raw = dequantize(raw, t.quant or {}, f"variable '{label}'", where)
    data = to_storage(raw, dtype, store, f"data of variable '{label}'", where, t.etype)
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
        values = to_storage(np.asarray(raw).reshape(-1), dtype, store, f"value of constant '{name}'", where,
                            t.etype)
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
        kind = container_kind(graph, name)
        if kind:
            const_values[name] = check_result(op, name, result, kind, t.dtype, None, where)
            continue
        array = check_result(op, name, result, _storage_of(store, t, name, op, index, source), t.dtype,
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




def _float64_operation(graph: Graph, op: Operation) -> bool:
    """Whether ``op`` reads or writes a float64 tensor: its kernel then computes in float64
    (:func:`nnefx.ops._common.wide_floats`; the contract of :mod:`nnefx.etypes`: accumulate at
    least as wide as the element type) and its scalar literals are float64."""
    tensors = graph.tensors
    for name in _flat(list(op.inputs.values()) + list(op.outputs.values())):
        if isinstance(name, str):
            t = tensors.get(name)
            if t is not None and t.etype == "f64":
                return True
    return False


def _wide_store(store: dict[str, np.dtype]) -> dict[str, np.dtype]:
    """``store`` with float64 scalars: the literals of a float64 operation."""
    return {**store, "scalar": np.dtype(np.float64)}


def _stored_inputs(opdef: OpDef) -> frozenset[int]:
    """Positions of the tensor parameters an operation takes in their stored element type
    (``define(..., stored_inputs=(...))``): a quantizer's zero point names its code type."""
    names = opdef.extra.get("stored_inputs", ())
    if not names:
        return frozenset()
    params = tensor_params(opdef.declaration) or []
    return frozenset(k for k, p in enumerate(params) if p.name in names)


def _widening(kernel: Callable[..., Any], args: list[Any], graph: Graph, formal: bool,
              constants: Mapping[str, np.ndarray], stored: frozenset[int] = frozenset()) -> Callable[..., Any]:
    """``kernel``, handed its narrow-float and sub-byte integer arguments widened.

    The arithmetic contract of :mod:`nnefx.etypes` for every operation at once: a float16 (or
    bfloat16, float8, float4) argument reaches the kernel as float32 (fast) or float64
    (formal), an int4 as int64; the result is rounded (wrapped) once to its own element type
    when the step stores it (:func:`~nnefx.runtime.plan.check_result`).  Arguments that are
    constants of the plan (float16 weights) are widened once, here, not on every call.
    Kernels of graphs without such tensors are returned as they are; ``stored`` are the
    positions of parameters the operation takes as stored (:func:`_stored_inputs`).
    """
    def target(a: Any) -> Any:
        if isinstance(a, list):
            inner = [target(x) for x in a]
            return inner if any(t is not None for t in inner) else None
        if isinstance(a, str):
            et = graph.tensors[a].etype
            dt = etypes.kernel_dtype(et, formal) if et is not None else None
            if dt is not None and a in constants:
                return ("constant", np.asarray(constants[a]).astype(dt))
            return dt
        return None

    targets = [None if k in stored else target(a) for k, a in enumerate(args)]
    if all(t is None for t in targets):
        return kernel

    def widen(value: Any, t: Any) -> Any:
        if t is None:
            return value
        if isinstance(t, tuple):
            return t[1]
        if isinstance(t, list):
            return [widen(v, x) for v, x in zip(value, t, strict=True)]
        return np.asarray(value).astype(t)

    def widened(*call_args: Any, **kwargs: Any) -> Any:
        return kernel(*[widen(v, t) for v, t in zip(call_args, targets, strict=False)], **kwargs)

    widened.__wrapped__ = kernel  # type: ignore[attr-defined]
    return widened
