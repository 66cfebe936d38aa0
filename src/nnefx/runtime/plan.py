"""What the planner produces and the run loop consumes: :class:`Plan` and its parts.

A :class:`Plan` is a list of :class:`Step`\\ s over register slots, with the inputs, variables,
updates and outputs around them; :mod:`nnefx.runtime.passes` builds it and
:mod:`nnefx.runtime.session` runs it.  :func:`call_kernel` and :func:`check_result` are
shared by constant folding and the run loop, so a kernel failure or a wrong result reads
the same whether it happens while planning or while running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import etypes
from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation


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
    #: what the caller feeds (:data:`nnefx.graph.KINDS`): a tensor, or a sequence/optional
    kind: str = "tensor"
    #: The concrete element type (:mod:`nnefx.etypes`), None for the data type's default.
    etype: str | None = None


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


_KIND_OF_DTYPE = {"scalar": "f", "integer": "iu", "logical": "b", "string": "O"}


def _check_container(op: Operation, name: str, result: Any, kind: str, nnef_dtype: str, where: Location) -> Any:
    from .subgraphs import check_container

    try:
        value = check_container(result, kind, f"result '{name}' of operation '{op.op}'")
    except NNEFXError as exc:
        raise NNEFXError(exc.message, where) from None
    elements = value if isinstance(value, tuple) else () if value is None else (value,)
    for element in elements:
        if element.dtype.kind not in _KIND_OF_DTYPE.get(nnef_dtype, "fiub"):
            raise NNEFXError(f"operation '{op.op}' produced {element.dtype} data in {kind} result '{name}' of "
                             f"{nnef_dtype} elements", where)
    return value


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
    if n == 1 and not (type(results) is tuple and len(results) == 1):  # a TensorSequence is one result
        results = (results,)
    if type(results) is not tuple or len(results) != n:
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
    """A kernel result as an array of the graph's storage dtype, with its declared shape.

    For a sequence or optional result ``storage`` is its kind (:data:`nnefx.graph.KINDS`):
    the value is checked to be of that kind and its elements of ``nnef_dtype``."""
    if isinstance(storage, str):
        return _check_container(op, name, result, storage, nnef_dtype, where)
    array = result if isinstance(result, np.ndarray) else np.asarray(result)
    if array.dtype != storage:
        if not etypes.kind_fits(array.dtype, nnef_dtype):
            raise NNEFXError(f"operation '{op.op}' produced {array.dtype} data for {nnef_dtype} result "
                             f"'{name}'", where)
        # the one rounding (floats) or wrap-around (integers) to the result's element type
        with np.errstate(over="ignore", invalid="ignore"):
            array = array.astype(storage)
    if shape is not None and array.shape != shape:
        raise NNEFXError(f"operation '{op.op}' produced shape {list(array.shape)} for '{name}', "
                         f"declared {list(shape)}", where)
    return array
