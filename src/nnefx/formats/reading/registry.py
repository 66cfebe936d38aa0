"""Where readers find the per-operator reading code: tables filled by the family modules.

Three tables, one per vocabulary, each filled by decorators in
``nnefx/formats/families/<family>.py`` (one module per operator family, mirroring
``nnefx/ops/``) and read by the format packages, which therefore never import one another:

* :func:`operator` — the **numpy-style operator set**: operators named and versioned as in
  the OpenVINO opsets (``Add``, ``Slice`` of opset 8, ``Interpolate`` of opset 11, ...),
  whose semantics (right-aligned broadcasting, negative axes, clamped slice bounds,
  coordinate modes) ONNX shares.  An IR v10/11 layer of that type is read by it directly;
  an ONNX node spells itself through it with :meth:`.context.NodeContext.apply`.
* :func:`ir_layer` — IR-only layers: the legacy catalog (IR <= 9) and layers that need the
  file itself (blobs, sub-networks).
* :func:`onnx_node` — ONNX node readers ``fn(reader, attrs, inputs)``.

:func:`fold` registers a constant-folding function ``fn(ctx, arrays)`` for an operator or IR
layer type: whenever every input is known while loading it is tried first and returns the
output arrays, or None to read the node normally.

Versions: ``None`` means any version; :data:`OPSETS` every opset version (not ``"legacy"``);
lookups try the exact version first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

ReadFn = Callable[..., Any]

#: ``versions`` value meaning "every opset version" (any version but ``"legacy"``).
OPSETS = ("opset*",)
#: ``versions`` value meaning "any version".
ANY = None

_OPERATORS: dict[tuple[str, str | None], ReadFn] = {}
_IR_LAYERS: dict[tuple[str, str | None], ReadFn] = {}
_FOLDS: dict[tuple[str, str | None], ReadFn] = {}
_ONNX: dict[str, ReadFn] = {}


def _register(table: dict, what: str, types: str | Iterable[str], versions: Iterable[str] | None,
              others: tuple[dict, ...] = ()) -> Callable[[ReadFn], ReadFn]:
    names = (types,) if isinstance(types, str) else tuple(types)
    vers: tuple[str | None, ...] = (None,) if versions is None else tuple(versions)

    def deco(fn: ReadFn) -> ReadFn:
        for t in names:
            for v in vers:
                old = table.get((t, v))
                for other in others:
                    old = old or other.get((t, v))
                if old is not None and old.__qualname__ == fn.__qualname__ and old.__module__ == fn.__module__:
                    continue  # the same module imported again (e.g. after a failed import)
                if old is not None:
                    raise ValueError(f"{what} reader for {t!r} version {v!r} is registered twice")
                table[(t, v)] = fn
        return fn

    return deco


def operator(types: str | Iterable[str], versions: Iterable[str] | None = None) -> Callable[[ReadFn], ReadFn]:
    """Register the reader ``fn(ctx: NodeContext)`` of numpy-style operator(s)."""
    return _register(_OPERATORS, "operator", types, versions, (_IR_LAYERS,))


def ir_layer(types: str | Iterable[str], versions: Iterable[str] | None = None) -> Callable[[ReadFn], ReadFn]:
    """Register the reader ``fn(ctx: LayerContext)`` of IR-only layer type(s)."""
    return _register(_IR_LAYERS, "IR layer", types, versions, (_OPERATORS,))


def fold(types: str | Iterable[str], versions: Iterable[str] | None = None) -> Callable[[ReadFn], ReadFn]:
    """Register a constant-folding function ``fn(ctx, arrays) -> array | list | None``."""
    names = (types,) if isinstance(types, str) else tuple(types)
    vers: tuple[str | None, ...] = (None,) if versions is None else tuple(versions)

    def deco(fn: ReadFn) -> ReadFn:
        for t in names:
            for v in vers:
                _FOLDS[(t, v)] = fn
        return fn

    return deco


def onnx_node(*names: str, domain: str = "") -> Callable[[ReadFn], ReadFn]:
    """Register the reader ``fn(reader, attrs, inputs)`` of ONNX operation(s) of ``domain``
    (``""``: the default domain, also spelled ``ai.onnx``; else e.g. ``ai.onnx.ml``)."""
    def deco(fn: ReadFn) -> ReadFn:
        for n in names:
            key = _onnx_key(domain, n)
            if key in _ONNX and _ONNX[key].__qualname__ != fn.__qualname__:
                raise ValueError(f"ONNX reader for {key!r} is registered twice")
            _ONNX[key] = fn
        return fn
    return deco


def _onnx_key(domain: str, op_type: str) -> str:
    """The table key of an ONNX operator: its name in the default domain, ``domain.name`` else."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"


_loaded = False


def load_families() -> None:
    """Import the family modules (they register their readers), once."""
    global _loaded
    if _loaded:
        return
    from .. import families  # noqa: F401 - (a failed import is retried by the next lookup)

    _loaded = True


def find_operator(kind: str, version: str | None) -> ReadFn | None:
    load_families()
    return _OPERATORS.get((kind, version)) or _OPERATORS.get((kind, None))


def find_ir_layer(kind: str, version: str | None) -> ReadFn | None:
    """The reader of an IR layer: an IR-only one, else the numpy-style operator."""
    load_families()
    return (_IR_LAYERS.get((kind, version)) or _OPERATORS.get((kind, version))
            or _IR_LAYERS.get((kind, None)) or _OPERATORS.get((kind, None)))


def find_fold(kind: str, version: str | None = None) -> ReadFn | None:
    load_families()
    keys = [(kind, version)] + ([(kind, OPSETS[0])] if version != "legacy" else []) + [(kind, None)]
    for key in keys:
        if key in _FOLDS:
            return _FOLDS[key]
    return None


def find_onnx_node(op_type: str, domain: str = "") -> ReadFn | None:
    load_families()
    return _ONNX.get(_onnx_key(domain, op_type))


def ir_types() -> list[tuple[str, str | None]]:
    """Every (IR layer type, version) with a reader."""
    load_families()
    return sorted(set(_IR_LAYERS) | set(_OPERATORS), key=lambda k: (k[0], k[1] or ""))


def onnx_types() -> list[str]:
    """Every ONNX operator with a reader: default-domain names, others as ``domain.name``."""
    load_families()
    return sorted(_ONNX)
