"""What an operator reader sees of the node it reads: :class:`NodeContext`.

A reader (IR layer, ONNX node, any later format) builds one context per node: the node's
kind and name, its attributes (already typed, or as text — the getters parse both), its
input :class:`~.values.Value`s, the output dims/element types the file declares (if it
does), and the location diagnostics name.  Operator readers never see the file: they read
attributes and inputs here, emit registry operations through :meth:`NodeContext.emit`
(shape rules run at once) and return one Value per output.

:meth:`NodeContext.apply` reads a node of the numpy-style operator set (see
:mod:`.registry`) in place of this one — how an ONNX node spells itself through an
operator whose semantics it shares — folding it when every input is known.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Operation, ValueNeeded
from .graph import ImportGraph
from .shapes import infer_etypes, infer_operation, result_names
from .values import Dim, Value, etype_for, etype_of_array, reading_etype

_ATTR_MISSING = object()

#: Largest constant a fold may create (items); beyond it a file is more likely hostile than real.
MAX_FOLD_ITEMS = 1 << 26


class NodeContext:
    """Everything an operator reader may use about the node being read."""

    def __init__(self, builder: ImportGraph, kind: str, name: str, attrs: dict[str, Any],
                 values: list[Value], version: str | None, location: Location | None, *,
                 out_dims: list | None = None, out_etypes: list | None = None, where: str = ""):
        self.builder = builder
        self.kind = kind
        self.name = name
        self.attrs = attrs
        self.values = values
        self.version = version
        self.location = location
        #: declared dims (or None) and element types (or None) of each output
        self.declared_dims: list = list(out_dims) if out_dims is not None else [None]
        self.declared_etypes: list = list(out_etypes) if out_etypes is not None else []
        self._where = where or f"'{name}' ({kind})"
        self.ops: list[Operation] = []

    # --- identity ------------------------------------------------------------------------
    @property
    def type(self) -> str:
        return self.kind

    def where(self) -> str:
        return self._where

    @property
    def n_outputs(self) -> int:
        return len(self.declared_dims)

    def error(self, message: str) -> NNEFXError:
        return NNEFXError(message, self.location)

    # --- attributes ----------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.attrs

    def _raw(self, key: str, default: Any) -> Any:
        if key in self.attrs:
            return self.attrs[key]
        if default is _ATTR_MISSING:
            raise self.error(f"missing attribute '{key}'")
        return default

    def str(self, key: str, default: Any = _ATTR_MISSING) -> str:
        v = self._raw(key, default)
        return v.strip() if isinstance(v, str) else v

    def choice(self, key: str, options: Iterable[str], default: Any = _ATTR_MISSING) -> str:
        v = self.str(key, default)
        opts = tuple(options)
        if isinstance(v, str) and v.lower() in opts:
            return v.lower()
        if v in opts:
            return v
        raise self.error(f"attribute '{key}' must be one of {', '.join(opts)}; got '{v}'")

    def int(self, key: str, default: Any = _ATTR_MISSING) -> int:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        try:
            return int(v.strip())
        except ValueError:
            try:
                f = float(v)
            except ValueError:
                raise self.error(f"attribute '{key}' must be an integer, got '{v}'") from None
            if not math.isfinite(f) or f != int(f):
                raise self.error(f"attribute '{key}' must be an integer, got '{v}'") from None
            return int(f)

    def float(self, key: str, default: Any = _ATTR_MISSING) -> float:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        try:
            return float(v.strip())
        except ValueError:
            raise self.error(f"attribute '{key}' must be a number, got '{v}'") from None

    def bool(self, key: str, default: Any = _ATTR_MISSING) -> bool:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        t = v.strip().lower()
        if t in ("true", "1", "yes"):
            return True
        if t in ("false", "0", "no"):
            return False
        raise self.error(f"attribute '{key}' must be true or false, got '{v}'")

    def ints(self, key: str, default: Any = _ATTR_MISSING) -> list[int]:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        items = [s for s in v.replace(" ", "").split(",") if s != ""]
        try:
            return [int(s) for s in items]
        except ValueError:
            raise self.error(f"attribute '{key}' must be a list of integers, got '{v}'") from None

    def floats(self, key: str, default: Any = _ATTR_MISSING) -> list[float]:
        v = self._raw(key, default)
        if not isinstance(v, str):
            return v
        items = [s for s in v.replace(" ", "").split(",") if s != ""]
        try:
            return [float(s) for s in items]
        except ValueError:
            raise self.error(f"attribute '{key}' must be a list of numbers, got '{v}'") from None

    # --- inputs --------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.values)

    def expect_inputs(self, *counts: int) -> None:
        if len(self.values) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.error(f"expects {want} inputs, has {len(self.values)}")

    def input(self, i: int) -> Value:
        if i >= len(self.values):
            raise self.error(f"input {i} is missing (the node has {len(self.values)} inputs)")
        return self.values[i]

    def is_const(self, i: int) -> bool:
        return self.input(i).is_const

    def const(self, i: int, what: str = "") -> np.ndarray:
        v = self.input(i)
        if v.const is None:
            raise ValueNeeded(f"input {i}{' (' + what + ')' if what else ''} must be a constant known when "
                              "the model is loaded; computing it at run time is not supported", self.location, v)
        return v.const

    def const_ints(self, i: int, what: str = "") -> list[int]:
        a = self.const(i, what)
        if a.dtype.kind not in "iub":
            if a.dtype.kind == "f" and np.all(np.floor(a) == a):
                return [int(x) for x in a.reshape(-1)]
            raise self.error(f"input {i}{' (' + what + ')' if what else ''} must hold integers")
        return [int(x) for x in a.reshape(-1)]

    def tensor(self, i: int) -> str:
        v = self.input(i)
        return self.builder.materialise(v, f"{self.name}_in{i}" if v.tensor is None else "", self.location)

    def tensor_of(self, value: Value, hint: str = "") -> str:
        return self.builder.materialise(value, hint or f"{self.name}_c", self.location)

    def in_shape(self, i: int) -> tuple | None:
        return self.input(i).shape

    def in_rank(self, i: int) -> int:
        s = self.in_shape(i)
        if s is None:
            raise self.error(f"the rank of input {i} is not known")
        return len(s)

    def in_etype(self, i: int) -> str:
        return self.input(i).etype

    def out_dims(self, i: int = 0) -> tuple | None:
        if i >= len(self.declared_dims):
            raise self.error(f"output port {i} is missing")
        return self.declared_dims[i]

    def out_etype(self, i: int = 0, default: str = "f32") -> str:
        if i < len(self.declared_etypes) and self.declared_etypes[i]:
            return self.declared_etypes[i]
        return default

    def check_items(self, shape: Iterable[int]) -> None:
        """Refuse to build a load-time constant of ``shape`` if it is absurdly large."""
        n = 1
        for d in shape:
            if d < 0:
                raise self.error(f"negative extent {d} in {list(shape)}")
            n *= int(d)
            if n > MAX_FOLD_ITEMS:
                raise self.error(f"a constant of shape {list(shape)} would be too large "
                                 f"(more than {MAX_FOLD_ITEMS} items)")

    # --- emitting --------------------------------------------------------------------------
    def emit(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, *,
             outputs: int | list[int] = 1, dtype: str | None = None, out_dtype: str | None = None,
             result_name: str = "output") -> list[str]:
        """Append an Operation; returns its output tensor names (in result order).

        ``inputs`` maps parameter names to tensor names or literals (in declaration order);
        ``outputs`` is the number of results, or for a ``tensor[]`` result a one-item list
        with the array length.  Result parameter names come from the registry declaration.
        ``dtype`` is the generic data type (NNEF ``<?>``); ``out_dtype`` the data type of the
        results (defaults to ``dtype`` or ``scalar``).
        """
        names_of_results = result_names(op, result_name)
        kind = out_dtype or dtype or "scalar"
        outs: dict[str, Any] = {}
        flat: list[str] = []
        if isinstance(outputs, list):
            names = [self.builder.add_tensor(f"{self.name}_{op}", kind) for _ in range(outputs[0])]
            outs[names_of_results[0]] = names
            flat = names
        else:
            for k in range(outputs):
                rn = names_of_results[k] if k < len(names_of_results) else f"result{k}"
                n = self.builder.add_tensor(f"{self.name}_{op}", kind)
                outs[rn] = n
                flat.append(n)
        operation = Operation(op, dict(inputs), outs, dict(attribs or {}), dtype=dtype, location=self.location)
        self.builder.graph.operations.append(operation)
        self.ops.append(operation)
        infer_operation(self.builder.graph, operation)
        if self.builder.concrete:
            infer_etypes(self.builder.graph, operation)
        return flat

    def emit1(self, op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, **kw: Any) -> str:
        return self.emit(op, inputs, attribs, **kw)[0]

    def result(self, tensor: str, etype: str | None = None, port: int = 0) -> Value:
        """The Value of output ``port`` held in graph tensor ``tensor``."""
        t = self.builder.graph.tensors[tensor]
        if self.builder.concrete:
            # the tensor's element type is what the graph computes; a reader's claim is checked
            # against the file's declared type by the format reader
            return Value(tensor=tensor, etype=reading_etype(t.etype, t.dtype), shape=t.shape)
        et = etype or self.out_etype(port, default=etype_for(t.dtype))
        return Value(tensor=tensor, etype=et, shape=t.shape)

    def folded(self, array: Any, etype: str | None = None) -> Value:
        """A load-time constant result (nothing is emitted unless someone needs a tensor)."""
        arr = np.asarray(array)
        et = etype or etype_of_array(arr)
        return Value(const=arr, etype=et, shape=tuple(int(d) for d in arr.shape))

    # --- reading through another operator -----------------------------------------------
    def apply(self, kind: str, attrs: dict[str, Any], values: list[Value], *, version: str = "opset8",
              n_out: int = 1, out_dims: list | None = None) -> list[Value]:
        """Read ``kind`` of the numpy-style operator set on ``values`` for this node.

        The result is folded while loading when every input is a constant and the operator
        has a fold; diagnostics keep naming this node.
        """
        outs, ops = apply_operator(self.builder, self.name, self.location, self._where, kind, attrs, values,
                                   version=version, n_out=n_out, out_dims=out_dims)
        self.ops.extend(ops)
        return outs

    def apply1(self, kind: str, attrs: dict[str, Any], values: list[Value], **kw: Any) -> Value:
        return self.apply(kind, attrs, values, **kw)[0]


def apply_operator(builder: ImportGraph, name: str, location: Location | None, where: str, kind: str,
                   attrs: dict[str, Any], values: list[Value], *, version: str = "opset8", n_out: int = 1,
                   out_dims: list | None = None) -> tuple[list[Value], list[Operation]]:
    """Read node ``name`` as numpy-style operator ``kind``: its output Values and the operations
    emitted (none when it folds: every input known while loading and the operator has a fold)."""
    from .registry import find_fold, find_operator

    fn = find_operator(kind, version)
    if fn is None:
        raise NNEFXError(f"internal: no reader of the numpy-style operator '{kind}' ({version})", location)
    sub = NodeContext(builder, kind, name, dict(attrs), values, version, location,
                      out_dims=out_dims if out_dims is not None else [None] * n_out, where=where)
    folder = find_fold(kind, version)
    if folder is not None and values and all(v.is_const or v.sym is not None for v in values):
        folded = fold_known(sub, fn, folder, values)
        if folded is not None:
            return folded, []
    res = fn(sub)
    return (res if isinstance(res, list) else [res]), sub.ops


def fold_known(sub: NodeContext, fn: Any, folder: Any, values: list[Value], what: str = "node") -> list[Value] | None:
    """Evaluate an operator whose inputs are all known while loading, or None to read it normally.

    Fully constant inputs give constants.  Partially known integer vectors (a shape with a
    dynamic batch: :class:`Dim` items) are folded as far as the fold goes on object arrays
    (gathering, concatenating, unsqueezing a shape keeps its unknown extents symbolic); where
    it cannot (arithmetic on an unknown extent) the operator is read normally and runs at run
    time.  A symbolic result is emitted as a graph tensor only when something needs one.
    """
    symbolic = any(v.sym is not None for v in values)
    try:
        res = folder(sub, [v.sym if v.sym is not None else v.const for v in values])
    except NNEFXError:
        if symbolic:
            return None
        raise
    except (ValueError, IndexError, TypeError, OverflowError, ZeroDivisionError, AttributeError) as exc:
        if symbolic:
            return None
        raise sub.error(f"cannot evaluate constant {what}: {exc}") from None
    if res is None:
        return None
    outs = res if isinstance(res, list) else [res]
    cache: dict[str, list[Value]] = {}

    def runtime(i: int) -> Callable[[], str]:
        def thunk() -> str:
            if "v" not in cache:
                r = fn(sub)
                cache["v"] = r if isinstance(r, list) else [r]
            return sub.tensor_of(cache["v"][i])
        return thunk

    result: list[Value] = []
    for i, o in enumerate(outs):
        if isinstance(o, Value):
            result.append(o)
            continue
        arr = np.asarray(o)
        if arr.dtype == object:
            if any(isinstance(x, Dim) for x in arr.reshape(-1)):
                result.append(Value(sym=arr, etype=sub.out_etype(i, default="i64"), shape=tuple(arr.shape),
                                    lazy=runtime(i)))
                continue
            if not all(isinstance(x, (int, np.integer)) for x in arr.reshape(-1)):
                return None
            arr = arr.astype(np.int64)
        result.append(sub.folded(arr))
    return result
