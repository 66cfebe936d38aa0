"""The data model every part of nnefx meets in.

Front-ends (NNEF text, IR XML, CVM JSON, ONNX) produce a :class:`Graph`; the shape pass
fills in shapes; the runtime plans and executes it; exporters print it.  The model mirrors
NNEF's own notion of a flat graph (NNEF 1.0 §2.1): data nodes (:class:`Tensor`) and
operation nodes (:class:`Operation`), where tensor *introduction* (``external``,
``variable``, ``constant``) is itself an operation, exactly as in an NNEF document.

Conventions:

* ``Operation.inputs`` maps parameter names to *values*: a tensor reference is a ``str``
  (the tensor's name), a literal is a Python ``bool``/``int``/``float``, and tensor arrays
  are ``list``s (tuples stay ``tuple``s).  Tensor parameters can never hold strings, so a
  ``str`` there is always a reference.
* ``Operation.attribs`` holds non-tensor parameters as plain Python values.
* ``Operation.outputs`` maps result names to tensor names (or lists of them).
* Shapes are tuples of ints; ``None`` stands for a dimension not known yet, a
  :class:`nnefx.dims.Dim` for one known by name (``B``, ``2*S``: the graph's ``symbols``),
  and a ``Tensor.shape`` of ``None`` means nothing is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .diagnostics import Location, NNEFXError

#: The three NNEF tensor data types.  The provisional dialect spells ``integer`` as
#: ``extent`` in source text but the model uses the final names throughout.
DTYPES = ("scalar", "integer", "logical")
#: Beside them the data model knows one type NNEF lacks: ``"string"``, tensors of text (ONNX
#: ``STRING``, element type ``string``), stored as numpy object arrays of Python ``str``.  It
#: reaches only operations that declare it; NNEF writers refuse it, located.
STRING = "string"

Shape = tuple  # tuple[int | None, ...]

#: What a data node holds (ONNX's value kinds, IR spec "Types"): a tensor; a sequence of
#: tensors (element shapes may differ); an optional tensor; an optional sequence.  For the
#: non-tensor kinds ``Tensor.dtype``/``etype`` describe the elements and ``Tensor.shape`` the
#: shape every element has (None extents where they may differ; None when even the rank is
#: not known); the runtime never compares a container with it.
KINDS = ("tensor", "sequence", "optional", "optional_sequence")


class TensorSequence(tuple):
    """The run-time value of a ``sequence`` tensor: a tuple of arrays (element shapes may
    differ).  An ``optional`` value is ``None`` when empty, else its element (an array, or a
    :class:`TensorSequence` for ``optional_sequence``).

    ``shape`` is the number of elements as a one-item tuple, so generic code that asks
    ``numpy.shape`` of a value (the operator contract's prechecks) never tries to stack
    elements of different shapes.
    """

    __slots__ = ()

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)


@dataclass
class Tensor:
    """A data node: a named tensor with its type, shape and (for variables/constants) data."""

    name: str
    dtype: str = "scalar"
    shape: Shape | None = None
    data: np.ndarray | None = None
    #: Quantization info, e.g. ``{"op_name": "linear_quantize", "min": 0.0, "max": 1.0, ...}``
    #: (from ``graph.quant`` or a binary header); None when not quantized.
    quant: dict[str, Any] | None = None
    #: The concrete element type (:mod:`nnefx.etypes`: ``"f16"``, ``"i8"``, ...) beside the
    #: abstract ``dtype``; None means the abstract type's default storage (f32 / i64 / bool).
    etype: str | None = None
    #: What the node holds (:data:`KINDS`): ``"tensor"`` unless a sequence or an optional.
    kind: str = "tensor"

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass
class Operation:
    """An operation node: one invocation of a registered operator."""

    op: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    attribs: dict[str, Any] = field(default_factory=dict)
    #: Resolved generic data type (NNEF ``<?>``), e.g. ``"scalar"``; None when not generic.
    dtype: str | None = None
    #: Where the invocation came from, so runtime errors can point back into the file.
    location: Location | None = None

    def input_names(self) -> list[str]:
        """All tensor names this operation reads, flattened, in parameter order."""
        return [v for v in _flatten(self.inputs.values()) if isinstance(v, str)]

    def output_names(self) -> list[str]:
        return [v for v in _flatten(self.outputs.values()) if isinstance(v, str)]


@dataclass
class Graph:
    """A flat graph: named inputs/outputs, tensors by name, operations in topological order."""

    name: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    operations: list[Operation] = field(default_factory=list)
    #: Declaration-only fragments of the source document (custom primitives, NNEF spec
    #: §2.4 with ``KHR_enable_fragment_definitions``): name → declaration text.  Operations
    #: of these names have no registry entry: the shape pass leaves their results unknown
    #: (or asks a caller's shape function), the planner refuses them ("no kernel"), and the
    #: NNEF printer writes the declarations back.
    declarations: dict[str, str] = field(default_factory=dict)
    #: names of the symbolic extents (:class:`nnefx.dims.Dim`) the shapes may use, bound
    #: from the inputs when a session runs
    symbols: list[str] = field(default_factory=list)
    #: constraints on those symbols (:class:`nnefx.dims.Assertion`), checked at load where
    #: extents are known and when a session binds the symbols
    assertions: list[Any] = field(default_factory=list)
    #: Bodies the graph's control-flow operations run (ONNX ``If`` branches, ``Loop``/``Scan``/
    #: ``SequenceMap`` bodies; tract's ``tract_core_scan`` body fragment), by the name an operation's string attribute gives (``body``,
    #: ``then_branch``, ...).  Each is a self-contained graph: its inputs are the body's formal
    #: parameters followed by the outer tensors it reads (the operation passes those as its
    #: ``captured`` inputs), and its own ``subgraphs`` hold the bodies nested inside it.
    subgraphs: dict[str, Graph] = field(default_factory=dict)

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise NNEFXError(f"graph '{self.name}' has no tensor named '{name}'") from None

    def producers(self) -> dict[str, Operation]:
        """Map each tensor name to the operation that writes it (``update`` excluded)."""
        out: dict[str, Operation] = {}
        for op in self.operations:
            if op.op == "update":
                continue
            for name in op.output_names():
                out[name] = op
        return out

    def variables(self) -> Iterator[tuple[Operation, Tensor]]:
        """The ``variable`` operations with their tensors, in graph order."""
        for op in self.operations:
            if op.op == "variable":
                name = op.output_names()[0]
                yield op, self.tensors[name]

    def validate_structure(self) -> None:
        """Check references: every input read is defined before use, every name is known.

        Importers call this after building a graph so that later passes can rely on a
        valid topological order.
        """
        defined: set[str] = set()
        for op in self.operations:
            for name in op.input_names():
                if name not in self.tensors:
                    raise NNEFXError(f"operation '{op.op}' reads unknown tensor '{name}'", op.location)
                if name not in defined:
                    raise NNEFXError(f"operation '{op.op}' reads tensor '{name}' before it is defined",
                                     op.location)
            for name in op.output_names():
                if name not in self.tensors:
                    raise NNEFXError(f"operation '{op.op}' writes unknown tensor '{name}'", op.location)
                if op.op != "update":
                    defined.add(name)
        for name in self.inputs + self.outputs:
            if name not in self.tensors:
                raise NNEFXError(f"graph '{self.name}' names unknown tensor '{name}' as input/output")


@dataclass
class Model:
    """A graph with everything that travels with it: where it came from and its extras.

    Variable data lives in ``graph.tensors[...].data``.  ``format`` names the container the
    model was read from (``"nnef-folder"``, ``"nnef-archive"``, ``"nnef-file"``, ``"ir"``,
    ``"cvm"``, ``"onnx"``) and ``source`` the path, so errors and ``save`` know both.
    """

    graph: Graph
    format: str = "memory"
    source: str | None = None
    #: Fragment definitions or other format-specific metadata an exporter may want back.
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """Variable data by variable label (or tensor name where no label is known)."""
        result: dict[str, np.ndarray] = {}
        for op, tensor in self.graph.variables():
            if tensor.data is not None:
                result[str(op.attribs.get("label", tensor.name))] = tensor.data
        return result


#: The operation kind that stands for a :class:`Deferred` node in a graph.
DEFERRED = "deferred"


@dataclass(eq=False)
class Deferred:
    """A node whose parameters (axes, pads, sizes, repeats, ...) arrive as tensors whose
    values are known only when the graph runs.

    Readers that need a parameter's *value* to choose the registry operations of a node
    (its attributes, its result shapes) and find a tensor computed at run time in its place
    record the node as one ``deferred`` operation (``Operation.attribs["node"]``): its
    inputs and results are ordinary graph tensors, ``values`` names the inputs whose values
    it needs, and ``build`` turns it into ordinary registry operations once they are known
    (the reader run again with those inputs as constants).  A
    :class:`~nnefx.runtime.session.Session` does that per set of values and keeps a plan for
    each (:mod:`nnefx.runtime.values`); writers write back the file's own record of the node
    (``source``) where their format has one, and refuse it, located, elsewhere.
    """

    #: the node's operator as its file names it (``Resize``) and where it is (diagnostics)
    kind: str
    where: str
    #: tensors whose values ``build`` needs (it may ask for more: :class:`ValueNeeded`)
    values: list[str]
    #: ``build(graph, values) -> operations``: the node as registry operations, writing its
    #: results into the tensors named by the deferred operation's outputs; new tensors are
    #: added to ``graph.tensors``
    build: Callable[[Graph, Mapping[str, np.ndarray]], list[Operation]]
    #: the format the node came from and its own record there (ONNX: the NodeProto bytes)
    format: str = ""
    source: Any = None
    #: tensors whose *shapes* it needs: results of other deferred operations, known once
    #: those are built (a node reading them is deferred until then)
    shapes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<deferred {self.kind} at {self.where}, values of {', '.join(self.values) or '-'}>"


class ValueNeeded(NNEFXError):
    """Raised by a reader that needs the value of an input it finds computed at run time.

    ``value`` is the reader's record of that input (the reading layer's ``Value``; its
    ``tensor`` names the graph tensor).  Its message is the refusal a reader gives when
    nothing defers the node."""

    def __init__(self, message: str, location: Location | None = None, value: Any = None):
        super().__init__(message, location)
        self.value = value

    @property
    def tensor(self) -> str | None:
        return getattr(self.value, "tensor", None)


def reachable_operations(graph: Graph, *, keep_updates: bool = False) -> set[int]:
    """Indices of the operations the graph outputs depend on (the rest is not written);
    with ``keep_updates`` also those the ``update`` operations depend on (stateful targets)."""
    producer: dict[str, int] = {}
    for k, op in enumerate(graph.operations):
        if op.op != "update":
            for n in op.output_names():
                producer[n] = k
    need: set[int] = set()
    stack = [producer[n] for n in graph.outputs if n in producer]
    if keep_updates:
        stack += [k for k, op in enumerate(graph.operations) if op.op == "update"]
    while stack:
        k = stack.pop()
        if k in need:
            continue
        need.add(k)
        stack.extend(producer[n] for n in graph.operations[k].input_names() if n in producer)
    return need


def deferred_operations(graph: Graph) -> list[Operation]:
    """The graph's :class:`Deferred` operations, in order."""
    return [op for op in graph.operations if op.op == DEFERRED]


def flat_values(values: Any) -> list[Any]:
    """The items of argument values with nested lists/tuples (``tensor[]`` arguments) spread out."""
    return list(_flatten(values))


def _flatten(values: Any) -> Iterator[Any]:
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v
