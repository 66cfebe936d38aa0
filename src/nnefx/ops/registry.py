"""The operator registry: one entry per operation, everything about it side by side.

An :class:`OpDef` holds

* ``declaration`` — the NNEF fragment text in the final (1.0.5) dialect: the signature for
  primitives (``fragment relu( x: tensor<scalar> ) -> ( y: tensor<scalar> );``), the full
  definition with body for compound operations.  The NNEF front-end builds its standard
  library from these texts, so the declared signature *is* the one the checker enforces.
* ``shape`` — the shape rule ``shape(*input_shapes, **attribs) -> tuple of result shapes``.
* ``formal`` — the reference kernel, written to read like the mathematical definition
  (loops are fine); it is the arbiter when kernels disagree.
* ``fast`` — a vectorised kernel that must agree with ``formal`` (bit-exactly for integer
  and logical results, within a documented bound for floats).

Calling conventions shared by shape rules and kernels:

* Positional arguments follow the order of the *tensor* parameters in the declaration;
  a ``tensor[]`` parameter arrives as a list.  Non-tensor parameters (attributes) arrive
  as keyword arguments with their declared names.  A generic operation (``<?>``) also gets
  the keyword ``dtype`` with the resolved data type (``"scalar"``, ``"integer"`` or
  ``"logical"``) when its entry sets ``generic=True``.
* Shapes are tuples of ints (``None`` for an unknown dimension in shape rules).
* Results are returned as a tuple in the declaration's result order; a single result may
  be returned bare.  A ``tensor[]`` result is a list.

Families live in one module each under :mod:`nnefx.ops` (``elementwise``, ``reduce``,
``sliding``, ``shape``, ...; ``integer/`` for the deterministic integer set; ``ir`` for the
IR extension operations).  Importing :mod:`nnefx.ops` imports them all, so merely defining
an operation registers it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..diagnostics import NNEFXError
from .contract import guard, normalise_attributes, run_shape_rule

Kernel = Callable[..., Any]
ShapeRule = Callable[..., Any]

#: Domains group operations by where they come from.  ``nnef`` = the NNEF 1.0.5 standard
#: operations; ``cvm`` = the deterministic integer set (the CVM runtime's operators); ``ir`` = IR layers with
#: no NNEF counterpart; ``tract`` = the primitives of tract's registries (``tract_core_*``,
#: ``tract_transformers_*``), which a document enables with ``extension tract_registry NAME;``.
#: ``onnx`` = ONNX operators with no NNEF counterpart (``onnx_*``, extension ``nnefx_onnx``).
#: Non-``nnef`` operations are extensions in NNEF documents.
DOMAINS = ("nnef", "cvm", "ir", "nnefx", "tract", "onnx")


@dataclass
class OpDef:
    """Everything nnefx knows about one operation."""

    name: str
    family: str
    declaration: str
    domain: str = "nnef"
    #: True for compound operations whose declaration carries a body that expands them; their
    #: formal kernel is that body (:mod:`nnefx.ops.derived`) unless a written one replaces it.
    compound: bool = False
    #: True when kernels take the resolved generic data type as keyword ``dtype``.
    generic: bool = False
    shape_rule: ShapeRule | None = None
    formal_kernel: Kernel | None = None
    fast_kernel: Kernel | None = None
    #: Element-type rule ``rule(*input_etypes, **attribs) -> result etypes`` (same calling
    #: convention as shape rules, with :mod:`nnefx.etypes` names in place of shapes).  None
    #: means: each result takes the element type of the first tensor input of the same
    #: abstract data type, else that type's default (see :func:`nnefx.etypes.of`).
    etype_rule: Callable[..., Any] | None = None
    #: Free-form facts for tooling: integer precision rule, cost, peer notes, ...
    extra: dict[str, Any] = field(default_factory=dict)
    doc: str = ""
    #: Set by :func:`define`: rules and kernels assigned from then on (``@op.shape``,
    #: ``@op.formal``, ``@op.fast`` or plain assignment) are wrapped in the contract
    #: (:mod:`nnefx.ops.contract`).  An ``OpDef`` built by hand (tests) is left as given.
    contracted: bool = field(default=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CONTRACT_SLOTS and value is not None and self.__dict__.get("contracted"):
            value = guard(self, value, is_shape_rule=name == "shape_rule")
        object.__setattr__(self, name, value)

    def attributes(self, attribs: Mapping[str, Any]) -> dict[str, Any]:
        """``attribs`` with every left-out attribute set to its declared default: the one
        place defaults come from (the declaration), for callers that build operations."""
        return normalise_attributes(self, dict(attribs))

    def infer(self, input_shapes: Sequence[Any], attribs: Mapping[str, Any], dtype: str | None = None) -> tuple:
        """Result shapes from input shapes and attributes: the one shape-rule runner, used by
        the front-end, the importers and ``compat`` (see :func:`nnefx.ops.contract.run_shape_rule`;
        raises its ``Undecided`` when the rule cannot decide with unknown extents)."""
        return run_shape_rule(self, input_shapes, attribs, dtype)

    # Decorator helpers so a family module reads: define(...); @op.shape; @op.formal; @op.fast
    def shape(self, fn: ShapeRule) -> ShapeRule:
        self.shape_rule = fn
        return fn

    def formal(self, fn: Kernel) -> Kernel:
        self.formal_kernel = fn
        return fn

    def fast(self, fn: Kernel) -> Kernel:
        self.fast_kernel = fn
        return fn

    def etypes(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.etype_rule = fn
        return fn

    def kernel(self, backend: str) -> Kernel:
        """The kernel for ``backend`` (``"formal"`` or ``"fast"``); fast falls back to formal."""
        if backend == "formal":
            k = self.formal_kernel
        elif backend == "fast":
            k = self.fast_kernel or self.formal_kernel
        else:
            raise NNEFXError(f"unknown backend '{backend}' (expected 'formal' or 'fast')")
        if k is None:
            raise NNEFXError(f"operation '{self.name}' has no {backend} kernel")
        return k


_CONTRACT_SLOTS = frozenset({"shape_rule", "formal_kernel", "fast_kernel"})

_REGISTRY: dict[str, OpDef] = {}
_TABLE_VIEW: Mapping[str, OpDef] = MappingProxyType(_REGISTRY)


def define(name: str, family: str, declaration: str, *, domain: str = "nnef", compound: bool = False,
           generic: bool = False, doc: str = "", **extra: Any) -> OpDef:
    """Create and register an operation; returns the entry for decorating its rules.

    The entry owns its contract: every shape rule and kernel given to it afterwards is
    wrapped by :func:`nnefx.ops.contract.guard` (attribute names and types checked against
    the declaration, left-out attributes set to the declared defaults, shapes checked before
    a kernel runs), whatever the domain — family modules add nothing for it.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}")
    if name in _REGISTRY:
        raise ValueError(f"operation {name!r} is defined twice "
                         f"({_REGISTRY[name].family} and {family})")
    entry = OpDef(name=name, family=family, declaration=declaration.strip(), domain=domain,
                  compound=compound, generic=generic, doc=doc, extra=dict(extra), contracted=True)
    if compound:
        # A compound is defined by its body: its formal kernel runs that body through the
        # primitives' formal kernels.  A family module replaces it only where a written one
        # is needed, and says why next to it.
        from .derived import formal_from_body

        entry.formal_kernel = formal_from_body(entry)
    _REGISTRY[name] = entry
    return entry


def get(name: str) -> OpDef:
    """The entry for ``name``; raises :class:`NNEFXError` naming the operation if unknown."""
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise NNEFXError(f"unsupported operation '{name}'") from None


def find(name: str) -> OpDef | None:
    _ensure_loaded()
    return _REGISTRY.get(name)


def table() -> Mapping[str, OpDef]:
    """The whole registry, read-only, in registration order: for readers that run per
    document and only need to notice a change (the front-end's stdlib cache key), where
    :func:`all_ops`'s sort would cost more than the rest of a small document's header."""
    _ensure_loaded()
    return _TABLE_VIEW


def all_ops(domain: str | None = None) -> Iterator[OpDef]:
    """All entries (optionally of one domain), in name order, for tests and tooling."""
    _ensure_loaded()
    for name in sorted(_REGISTRY):
        entry = _REGISTRY[name]
        if domain is None or entry.domain == domain:
            yield entry


def declarations(domain: str = "nnef") -> str:
    """The NNEF source of every declaration in ``domain``, for the front-end's stdlib.

    Primitives come first, then compounds in dependency order (each after every operation
    its body invokes), because one-pass readers such as the official ``nnef`` parser
    reject an invocation of a fragment defined further down.
    """
    ops = list(all_ops(domain))
    names = {op.name for op in ops}
    ordered: list[OpDef] = [op for op in ops if not op.compound]
    done = {op.name for op in ordered}
    pending = [op for op in ops if op.compound]
    while pending:
        progress = False
        for op in list(pending):
            body = op.declaration.split("{", 1)[1] if "{" in op.declaration else ""
            used = {n for n in re.findall(r"\b([A-Za-z_]\w*)\s*[(<]", body) if n in names}
            if used <= done | {op.name}:
                ordered.append(op)
                done.add(op.name)
                pending.remove(op)
                progress = True
        if not progress:  # a dependency cycle: keep the remaining ones in name order
            ordered.extend(pending)
            break
    return "\n\n".join(op.declaration for op in ordered)


_loaded = False


def _ensure_loaded() -> None:
    """Import every family module once (they register themselves on import)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import load_all

    load_all()
