"""Small helpers the families' ONNX readers share (inputs that must be present or known).

An input whose value a reader needs but which is computed at run time raises
:class:`~nnefx.graph.ValueNeeded`: the ONNX reader then defers the node to run time
(:class:`~nnefx.graph.Deferred`), other readers report it as the refusal it says."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import etypes
from ...graph import ValueNeeded
from ..reading.values import Value, concrete


def onnx_need(r: Any, ins: list, i: int, what: str) -> Value:
    """Input ``i`` of the node, which must be given."""
    if i >= len(ins) or ins[i] is None:
        raise r.error(f"input {i} ({what}) is missing")
    return ins[i]


def onnx_ints(r: Any, v: Value | None, what: str) -> list[int] | None:
    """The integers of an input known while loading (None when the input is omitted)."""
    if v is None:
        return None
    if not v.is_const:
        raise ValueNeeded(f"{what} must be known when the model is loaded", r.error("").location, v)
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def onnx_rank(r: Any, v: Value) -> int:
    if v.shape is None:
        raise r.error("the input rank is not known")
    return len(v.shape)


def onnx_const(r: Any, v: Value, what: str) -> np.ndarray:
    if not v.is_const:
        raise ValueNeeded(f"{what} must be known when the model is loaded", r.error("").location, v)
    return v.const


#: The element types a graph holds exactly as the model states them today: the default storage
#: of NNEF's three data types (``scalar`` float32, ``integer`` int64, ``logical`` bool).  Any
#: other (float16, float64, int8, uint16, ...) would be computed and returned in that storage,
#: so a reader that cannot keep it refuses the node instead of answering in the wrong type.
KEPT_ETYPES = ("f32", "i64", "boolean")


def _kept(r: Any, etype: str, narrow: bool) -> bool:
    """Whether the graph keeps ``etype`` for this operation: the defaults always; in a graph
    that carries concrete element types (ONNX) every type the runtime stores, except — unless
    the reader says its kernel handles them (``narrow``) — bfloat16, the float8/float4 kinds
    and 2/4-bit integers, which reach kernels widened (:func:`nnefx.etypes.kernel_dtype`)."""
    if etype in KEPT_ETYPES:
        return True
    if not getattr(r.builder, "concrete", False) or etype == "u1":
        return False
    return narrow or etype == "f16" or etypes.kernel_dtype(concrete(etype)) is None


def _not_kept(r: Any) -> str:
    if getattr(r.builder, "concrete", False):
        return "this operation does not keep bfloat16, float8 or 2/4-bit tensors yet (its kernel would see them widened)"
    return f"this operation keeps only {', '.join(KEPT_ETYPES)} tensors so far"


def onnx_kept_etypes(r: Any, ins: list, *, widened: tuple[int, ...] = (), outputs: tuple[str, ...] = (),
                     narrow: bool = False) -> None:
    """Refuse (at the node) inputs or result element types the graph does not keep (``_kept``).

    ``widened`` names the inputs of integer type whose values alone matter to the operation
    (indices, labels, zero points read as numbers): held as int64 they mean the same.
    ``outputs`` are the result element types the node states.
    """
    for i, v in enumerate(ins):
        if v is None or _kept(r, v.etype, narrow):
            continue
        if i in widened and v.etype[:1] in "iu":
            continue
        raise r.error(f"input {i} has element type {v.etype}; {_not_kept(r)}")
    for k, et in enumerate(outputs):
        if not _kept(r, et, narrow):
            raise r.error(f"output {k} would have element type {et}; {_not_kept(r)}")


def onnx_present(ins: list, i: int) -> Value | None:
    """Input ``i`` if the node gives it (an omitted optional input is None or missing)."""
    return ins[i] if i < len(ins) else None


def onnx_emit(r: Any, op: str, inputs: dict[str, Value | None], attribs: dict[str, Any], *,
              results: list[str], dtype: str | None = None) -> list[Value]:
    """Emit registry operation ``op`` for the node being read, at the node's location.

    ``inputs`` maps the operation's tensor parameters to Values (None: left to the declared
    default); ``results`` gives the element type of each result, in declaration order.
    """
    from ..reading.values import nnef_dtype

    given = [v for v in inputs.values() if v is not None]
    ctx = r.ctx(given)
    tensors = {k: ctx.tensor_of(v, f"{ctx.name}_{k}") for k, v in inputs.items() if v is not None}
    names = ctx.emit(op, tensors, attribs, outputs=len(results), dtype=dtype,
                     out_dtype=nnef_dtype(results[0]))
    graph = r.builder.graph
    outs = []
    for name, et in zip(names, results, strict=True):
        graph.tensors[name].dtype = nnef_dtype(et)
        outs.append(ctx.result(name, et))
    return outs


def onnx_write(ctx: Any, op: Any, op_type: str, inputs: list, opset: int, *, keep: tuple[str, ...] = (),
               domain: str = "", **attrs: Any) -> None:
    """Write an onnx-domain operation back as the ONNX node it stands for (opset ``opset`` of
    ``domain``: the default one, or ``ai.onnx.ml`` ...).

    ``inputs`` are the operation's tensors in the node's input order (None: omitted, as is a
    literal equal to the declared default); every result of the operation becomes an output.
    An attribute whose operation attribute of the same name holds its declared default is left
    out: the ONNX default means the same (``Attention``'s ``scale`` 0 is "1/sqrt(head size)"),
    and attributes an opset added later (its window sizes) are not written where unused;
    ``keep`` names attributes written even then (where onnx's shape inference ignores a default).
    """
    from ...ops import registry
    from ...ops.signature import signature

    defaults = {p.name: p.default for p in signature(registry.get(op.op).declaration).params}
    names = list(op.inputs)
    refs: list[str] = []
    for v in inputs:
        if v is None:
            refs.append("")
        elif isinstance(v, str):
            refs.append(ctx.ref(v))
        else:
            key = next((k for k in names if op.inputs[k] is v), None)
            if key is not None and _same(v, defaults.get(key)):
                refs.append("")
                continue
            arr = np.asarray(v)
            dt = np.bool_ if arr.dtype == np.bool_ else np.int64 if arr.dtype.kind in "iu" else np.float32
            refs.append(ctx.const(arr, dt))
    while refs and refs[-1] == "":
        refs.pop()
    results = op.output_names()
    attrs = {k: v for k, v in attrs.items()
             if v is not None and (k in keep or not (k in op.attribs and _same(op.attribs[k], defaults.get(k))))}
    outs = ctx.node(op_type, refs, outputs=[(ctx.dims(n), ctx.dtype(n)) for n in results], domain=domain, **attrs)
    for name, ref in zip(results, outs, strict=True):
        ctx.bind(name, ref)
    ctx.e.need_opset(opset, domain)


def _same(value: Any, default: Any) -> bool:
    from ...ops.signature import NO_DEFAULT

    try:
        return default is not NO_DEFAULT and bool(np.all(np.asarray(value) == np.asarray(default)))
    except (TypeError, ValueError):
        return False


def onnx_convert(r: Any, x: Value, etype: str) -> Value:
    """``x`` converted to ``etype`` by ONNX's Cast (``onnx_cast``: exact where the values fit,
    floats to integers truncated toward zero): how a reader computes an operator of one element
    type through an operation of another, where both conversions keep the meaning."""
    from ..reading.values import nnef_dtype

    c = r.ctx([x])
    y = c.emit1("onnx_cast", {"input": c.tensor(0)}, {"to": etype, "saturate": True, "round_mode": "up"},
                dtype=nnef_dtype(etype))
    return c.result(y, etype)


def onnx_scalar_like(v: Value, number: float) -> Value:
    """A load-time scalar constant of ``v``'s element type (so arithmetic keeps that type)."""
    from ...etypes import numpy_dtype

    et = "bool" if v.etype == "boolean" else v.etype
    return Value(const=np.asarray(number, dtype=numpy_dtype(et)), etype=v.etype, shape=())


def onnx_widened(r: Any, x: Value) -> tuple[Value, str | None]:
    """``x`` as float32 when it is a float narrower than float16's exactness allows a composition
    to keep (bfloat16, the float8 and float4 kinds), with the element type to round the result
    back to (None: ``x`` as it is).

    A reader that writes an operator as several registry operations would otherwise store, and
    round, every intermediate result in the narrow type; widened, the composition computes in
    float32 and :func:`onnx_narrowed` rounds its result once (the arithmetic contract of
    :mod:`nnefx.etypes`).  Float32 holds every such value exactly, so the widening changes nothing.
    """
    if x.is_const or x.etype not in etypes.FLOATS or x.etype in ("f16", "f32", "f64") \
            or not getattr(r.builder, "concrete", False):
        return x, None
    return _onnx_cast_to(r, x, "f32"), x.etype


def onnx_narrowed(r: Any, y: Value, etype: str | None) -> Value:
    """The result of a composition widened by :func:`onnx_widened`, rounded once to ``etype``."""
    return y if etype is None else _onnx_cast_to(r, y, etype)


def _onnx_cast_to(r: Any, x: Value, etype: str) -> Value:
    c = r.ctx([x])
    out = c.emit1("onnx_cast", {"input": c.tensor(0)}, {"to": etype, "saturate": True, "round_mode": "up"},
                  dtype="scalar")
    return c.result(out, etype)


def onnx_carried(r: Any, *values: Value, floating: bool = False, moved: bool = False) -> None:
    """Refuse, located, data whose element type the readers' operations would not return as is.

    Readers built on the abstract NNEF types compute float16/float64/int32... data in their
    type's default element type (float32, int64), so their results would come back in another
    type than the ONNX model declares: refused, never returned in a silently different type.
    ``floating``: only floating-point data (of the kept types: float32) is meant.  ``moved``: the
    reader's operations only move or select these values (a gather, a one-hot), so a widened
    bfloat16/float8/2-4-bit item comes back exactly as it was: every stored type is kept.
    """
    for v in values:
        if v is None:
            continue
        is_float = v.etype in ("f16", "bf16", "f32", "f64") or v.etype.startswith("f8")
        if (floating and not is_float) or not _kept(r, v.etype, moved):
            kept = ("f32",) if floating else KEPT_ETYPES
            raise r.error(f"{r.node.op_type} of {v.etype} data is not supported (supported element types: "
                          f"{', '.join(kept)})")
