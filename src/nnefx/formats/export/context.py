"""What every exporter (IR v11, ONNX) needs besides its own format.

Both writers walk a flat :class:`~nnefx.graph.Graph`, keep only the operations the outputs
(and, where the format has state, the updates) depend on, look each operation up in a
table of per-operation exporters, and write a compound operation without an exporter of
its own through its NNEF definition.  These steps are the same whatever the target
format, so they live here once, together with the part of the exporters' context that
does not depend on the format (:class:`ExportContextBase`: which graph tensor is which
format value, the load-time data of variables and constants, and how a refusal is worded
and located) and the temporary-then-rename file write.  What NNEF's attributes *mean*
(padding, borders, coordinate transforms, ...) is in :mod:`.attrs`.

Keeping one copy matters beyond tidiness: a refusal must read the same (``cannot write
operation 'X' as FORMAT: ...`` at the operation's source position) whichever format was
asked for, and a fix to the bookkeeping (an output never produced, a file half written)
must reach both writers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...dims import Dim
from ...graph import Graph, Operation, Tensor, reachable_operations
from ...io.files import set_final_mode

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


class ExporterTable(Generic[F]):
    """Operation name -> the function that writes it in one target format."""

    def __init__(self) -> None:
        self._table: dict[str, F] = {}

    def exporter(self, *names: str) -> Callable[[F], F]:
        """Decorator: ``fn`` writes the operations ``names``."""
        def deco(fn: F) -> F:
            for n in names:
                self._table[n] = fn
            return fn
        return deco

    def find(self, op: str) -> F | None:
        return self._table.get(op)

    def names(self) -> list[str]:
        return sorted(self._table)


def single_operation_graph(graph: Graph, op: Operation,
                           shape_of: Callable[[str], tuple]) -> tuple[Graph, dict[str, str]]:
    """``op`` alone as a graph whose externals stand for its tensor inputs.

    Printed and compiled with ``expand_all=True``, it expands the operation through its
    fragment body exactly as any NNEF document would be, which is how an exporter writes a
    compound it has no direct form for.  Returns the graph and the map from ``graph``'s
    tensor names to the local ones (``t0``, ``t1``, ...).  ``shape_of`` gives each input's
    shape; whatever it raises propagates.
    """
    local: dict[str, str] = {}
    sub = Graph(name="g")

    def ident(name: str) -> str:
        if name not in local:
            local[name] = f"t{len(local)}"
        return local[name]

    def dtype_of(name: str) -> str:
        return graph.tensors[name].dtype if name in graph.tensors else "scalar"

    for name in op.input_names():
        if name in local:
            continue
        n = ident(name)
        shape = tuple(shape_of(name))
        sub.inputs.append(n)
        sub.tensors[n] = Tensor(n, dtype_of(name), shape)
        sub.operations.append(Operation("external", {}, {"output": n}, {"shape": list(shape)},
                                        dtype=dtype_of(name)))

    def rename(v: Any) -> Any:
        if isinstance(v, str):
            return ident(v)
        if isinstance(v, list):
            return [rename(x) for x in v]
        if isinstance(v, tuple):
            return tuple(rename(x) for x in v)
        return v

    outs = {k: rename(v) for k, v in op.outputs.items()}
    for n in op.output_names():
        sub.tensors[ident(n)] = Tensor(ident(n), dtype_of(n))
    sub.operations.append(Operation(op.op, {k: rename(v) for k, v in op.inputs.items()}, outs, dict(op.attribs),
                                    dtype=op.dtype))
    sub.outputs = [ident(n) for n in op.output_names()]
    return sub, local


def graph_with_shapes(graph: Graph) -> Graph:
    """``graph`` itself when every tensor shape is known, else a copy with shapes inferred:
    writers declare every value's shape."""
    if any(t.shape is None and t.kind == "tensor" for t in graph.tensors.values()):
        from ...semantics.shapes import infer_shapes

        return infer_shapes(graph)
    return graph


def is_compound(name: str) -> bool:
    """Whether ``name`` is a compound (fragment-defined) operation: one a writer may write
    through its NNEF definition when it has no exporter of its own."""
    from ...ops import registry

    d = registry.find(name)
    return d is not None and bool(d.compound)


#: The largest finite float16 value.
FP16_MAX = 65504.0


def fp16_storable(arr: np.ndarray) -> bool:
    """Whether weights ``arr`` are stored as float16 under ``compress_to_fp16``: float32 data
    of more than one item (scalars stay exact) whose finite values all fit float16's range
    (a larger one would become infinite).  One rule, so that ``--fp16`` keeps the same
    weights exact in IR and in ONNX."""
    return arr.dtype == np.float32 and arr.size > 1 and bool(np.all(np.abs(arr[np.isfinite(arr)]) <= FP16_MAX))


def operations_to_write(graph: Graph, *, keep_updates: bool = False) -> Iterator[Operation]:
    """The operations a writer walks, in graph order: those :func:`reachable_operations`
    keeps, without the ``external`` ones (a writer declares its inputs itself)."""
    needed = reachable_operations(graph, keep_updates=keep_updates)
    return (op for k, op in enumerate(graph.operations) if k in needed and op.op != "external")


def input_shape(graph: Graph, name: str) -> tuple:
    """The declared shape of graph input ``name``; a writer cannot declare an input without one."""
    t = graph.tensors[name]
    if t.shape is None:
        raise NNEFXError(f"input '{name}' has no known shape", Location(field=name))
    return tuple(None if isinstance(d, Dim) else d for d in t.shape)   # a symbolic extent: unknown here


def constant_array(op: Operation, shape: tuple) -> np.ndarray | None:
    """The value of a ``constant`` operation filling ``shape``, or None where it does not.

    NNEF's ``constant`` repeats a single value over the shape, or lists every item in
    row-major order; any other count is an error the caller words.
    """
    value = np.asarray(op.attribs.get("value", 0.0)).reshape(-1)
    if value.size == 1:
        return np.full(shape, value[0])
    if value.size == int(np.prod(shape, dtype=np.int64)):
        return value.reshape(shape)
    return None


def unique_name(hint: str, used: set[str]) -> str:
    """``hint``, else the first free ``hint_1``, ``hint_2``, ...; the name is added to ``used``.

    (Layer names in IR and node names in ONNX must each be unique within the file.)
    """
    name, k = hint, 0
    while name in used:
        k += 1
        name = f"{hint}_{k}"
    used.add(name)
    return name


class ExportContextBase(Generic[R]):
    """The format-independent half of what a per-operation exporter sees.

    ``refs`` maps graph tensor names to the format's values (an IR ``(layer, port)``, an
    ONNX value name); ``consts`` holds the load-time data of ``variable``/``constant``
    tensors that has not been written yet (an exporter may use it directly, e.g. a bias
    folded into a layer, before it ever becomes a Const / initializer); ``op`` is the
    operation being written, whose name and source position every refusal carries.
    Subclasses add the format's value factory (``ref``, ``const``, ``layer``/``node``).
    """

    #: The format's name as refusals spell it ("IR v11", "ONNX").
    FORMAT = "?"
    #: Python literal types whose value :meth:`data` returns as an array.
    LITERALS: tuple[type, ...] = (bool, int, float)

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.refs: dict[str, R] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.op: Operation | None = None

    def fail(self, message: str) -> NNEFXError:
        """The error refusing the current operation, at its source position (else the graph)."""
        op = self.op
        where = op.location if op is not None and op.location is not None else Location(field=self.graph.name)
        prefix = f"cannot write operation '{op.op}' as {self.FORMAT}: " if op is not None else ""
        return NNEFXError(prefix + message, where)

    def data(self, value: Any) -> np.ndarray | None:
        """Load-time data of a literal or a ``variable``/``constant`` tensor, else None."""
        if isinstance(value, str):
            return self.consts.get(value)
        if isinstance(value, self.LITERALS):
            return np.asarray(value)
        return None

    def ref(self, value: Any) -> R:
        """The format value holding tensor ``value`` (materialised on demand): the writer's."""
        raise NotImplementedError

    def output_ref(self, name: str) -> R:
        """The value of graph output ``name``; an output that is a ``variable``/``constant``
        (never bound by an exporter) is materialised here."""
        if name not in self.refs:
            self.ref(name)
        return self.refs[name]

    def bind(self, name: str, ref: R) -> None:
        """Graph tensor ``name`` is the format value ``ref``."""
        self.refs[name] = ref

    def check_outputs(self, op: Operation) -> None:
        """Every output of ``op`` was bound by its exporter (a missing one is a bug, said so)."""
        for n in op.output_names():
            if n not in self.refs:
                raise self.fail(f"exporter did not produce output '{n}'")

    def run_exporter(self, fn: Callable[[Any, Operation], None], op: Operation) -> None:
        """``fn(self, op)``, then :meth:`check_outputs`; an error an exporter raised without a
        location (a helper's, a kernel rule's) gets ``op``'s source position.  A result larger
        than nnefx computes is refused first: exporters build tables and constants sized by the
        results' extents (a Resize to 2e9 × 2e9 asked for 15 GiB of gather indices)."""
        from ...ops.contract import MAX_ELEMENTS

        for name in op.output_names():
            t = self.graph.tensors.get(name)
            shape = t.shape if t is not None else None
            if shape and all(isinstance(d, int) for d in shape) and np.prod(shape, dtype=object) > MAX_ELEMENTS:
                raise self.fail(f"result '{name}' of shape {list(shape)} has {np.prod(shape, dtype=object)} items, "
                                f"more than the {MAX_ELEMENTS} nnefx supports")
        try:
            fn(self, op)
        except NNEFXError as exc:
            if exc.location is None:
                exc.location = op.location
            raise
        self.check_outputs(op)

    def constant_value(self, op: Operation, shape: tuple, shown: Any = None) -> np.ndarray:
        """The value of ``constant`` operation ``op`` over ``shape`` (:func:`constant_array`),
        refused where its items do not fill the shape; ``shown`` is the shape as the message
        prints it (the writers' messages differ there: IR shows a tuple, ONNX a list)."""
        arr = constant_array(op, shape)
        if arr is None:
            size = np.asarray(op.attribs.get("value", 0.0)).size
            raise self.fail(f"constant value of {size} items does not fill shape {shape if shown is None else shown}")
        return arr


def export_copy_n(ctx: ExportContextBase[Any], op: Operation) -> None:
    """``copy_n``: every output is the input itself.  No node or layer is needed in any
    format (a value may feed any number of consumers), so one exporter serves all."""
    x = ctx.ref(op.inputs["x"])
    for n in op.output_names():
        ctx.bind(n, x)


def compile_expanded(sub: Graph, atomic: set[str]) -> Graph:
    """``sub`` (from :func:`single_operation_graph`) printed and compiled with every compound
    expanded except the ``atomic`` operations (those the writer has exporters for)."""
    from ...semantics.frontend import compile_document
    from ...syntax.printer import print_graph

    return compile_document(print_graph(sub), expand_all=True, atomic=atomic)


def export_definition(ctx: ExportContextBase[Any], op: Operation, expanded: Graph, local: dict[str, str],
                      child: ExportContextBase[Any], constant: Callable[[Operation, str], np.ndarray],
                      export: Callable[[Operation], None]) -> None:
    """Write ``op`` through its expanded definition ``expanded`` (see :func:`compile_expanded`).

    ``child`` is a context over ``expanded`` sharing ``ctx``'s output file; the definition's
    inputs are bound to ``op``'s, each ``variable``/``constant`` of the body becomes
    load-time data (``constant(operation, name)``), every other operation is written by
    ``export`` (with ``child.op`` set to it), and ``op``'s outputs are bound to the body's.
    """
    back = {v: k for k, v in local.items()}
    for name in expanded.inputs:
        child.bind(name, ctx.ref(back[name]))
    for sop in expanded.operations:
        if sop.op == "external":
            continue
        child.op = sop
        if sop.op in ("variable", "constant"):
            (n,) = sop.output_names()
            child.consts[n] = constant(sop, n)
            continue
        export(sop)
    ctx.op = op
    for n in op.output_names():
        ctx.bind(n, child.ref(local[n]))


def write_atomically(items: list[tuple[str, bytes | bytearray]]) -> None:
    """Write every ``(path, data)`` to a temporary beside its target, then rename all into
    place: an error (a full disk, a missing folder) never leaves a half-written model, and
    a model of several files (IR's ``.xml`` + ``.bin``) is replaced only when all are written.
    """
    temps: list[tuple[str, str]] = []
    try:
        for target, data in items:
            folder = os.path.dirname(os.path.abspath(target))
            fd, tmp = tempfile.mkstemp(prefix=".nnefx-", suffix=".tmp", dir=folder)
            temps.append((tmp, target))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            set_final_mode(tmp, target, False)   # mkstemp's 0600 -> what open() would have made
        for tmp, target in temps:
            os.replace(tmp, target)
        temps = []
    except OSError as exc:
        raise NNEFXError(f"cannot write '{items[-1][0]}': {exc.strerror or exc}", Location(items[-1][0])) from None
    finally:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
