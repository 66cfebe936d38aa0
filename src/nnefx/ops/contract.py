"""The operator contract, enforced once for every registered operation.

Why a module of its own: every caller of a shape rule or a kernel — the front-end's shape
pass, the importers, ``compat``, the planner, another kernel — must get the same checks and
the same attribute values, whatever family the operation comes from.  So
:func:`nnefx.ops.registry.define` installs them on the entry itself and no family module
(nor a caller) repeats them:

* **attribute guard** (:func:`guard`): an attribute the declaration does not have, or of
  the wrong type (a bare int where ``integer[]`` is declared, a string for a ``scalar``,
  ...), is an :class:`NNEFXError` naming the operation, the attribute and its value, before
  any arithmetic sees it; kernels first run the shape rule, so bad shapes and oversized
  results are refused before anything is allocated;
* **attribute normalisation**: an attribute left out takes the declaration's default
  (:meth:`Signature.attribute_defaults`), so the default is written once, in the NNEF
  declaration, and a rule or kernel called without it sees exactly what the front-end
  would have passed (NNEF spec §2.5 "Fragment definition": parameters with default values
  may be omitted in invocations);
* **one shape-rule runner** (:func:`run_shape_rule`, also :meth:`OpDef.infer`): how the
  generic ``dtype`` is passed, how results are normalised to one shape per result, and
  what an exception means (a rule error, or "cannot decide with unknown extents").

The checks are pure functions of the attribute values and argument shapes, so they are
memoised per (shapes, attributes): a plan that calls an operation with the same shapes on
every run pays for them once (they cost more than the kernel for small tensors).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..dims import Dim
from .signature import signature

#: Largest number of elements a kernel result may have (2^31: 8 GiB of float32); kernels
#: refuse larger results before allocating (shape rules leave size policies to loaders).
MAX_ELEMENTS = 2 ** 31

_PASSED_LIMIT = 4096
#: Exact types :func:`_frozen` keys as ``(type, value)`` without further tests.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _op_error(op: str, message: str) -> NNEFXError:
    return NNEFXError(f"operation '{op}': {message}")


# --- what the declaration says ------------------------------------------------------------------

def attribute_types(declaration: str) -> dict[str, str]:
    """Non-tensor parameter name -> declared type text."""
    sig = signature(declaration)
    return {} if sig is None else sig.attribute_types


def attribute_defaults(declaration: str) -> dict[str, Any]:
    """Non-tensor parameter name -> declared default value (literal defaults only)."""
    sig = signature(declaration)
    return {} if sig is None else sig.attribute_defaults


def _fresh(value: Any) -> Any:
    """A copy of a default a callee may not share (lists are mutable)."""
    return [_fresh(v) for v in value] if type(value) is list else value


def normalise_attributes(op: Any, attribs: dict[str, Any]) -> dict[str, Any]:
    """``attribs`` with every left-out attribute set to the declaration's default (a new dict
    when something is added; the same dict otherwise)."""
    defaults = attribute_defaults(op.declaration)
    if not defaults or attribs.keys() >= defaults.keys():
        return attribs
    out = {k: _fresh(v) for k, v in defaults.items() if k not in attribs}
    out.update(attribs)
    return out


# --- attribute types -----------------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _fits(value: Any, typ: str) -> bool:
    if isinstance(value, np.ndarray) and value.ndim == 0 and not typ.endswith("[]") and not typ.startswith("("):
        value = value.item()  # a rank-0 array (a value computed at run time) is its item
    if typ.endswith("[]"):
        if isinstance(value, np.ndarray):
            value = value.tolist() if value.ndim else None
        return isinstance(value, (list, tuple)) and all(_fits(v, typ[:-2]) for v in value)
    if typ.startswith("("):
        items = typ[1:-1].split(",")
        if isinstance(value, np.ndarray):
            value = value.tolist() if value.ndim else None
        return isinstance(value, (list, tuple)) and len(value) == len(items) and \
            all(_fits(v, t) for v, t in zip(value, items, strict=True))
    if typ == "integer":
        return _is_int(value) or isinstance(value, Dim)  # a symbolic extent (nnefx.dims)
    if typ == "scalar":
        return _is_int(value) or (isinstance(value, (float, np.floating)))
    if typ == "logical":
        return isinstance(value, (bool, np.bool_))
    if typ == "string":
        return isinstance(value, str)
    return True  # generic '?'


def _frozen(value: Any) -> Any:
    """A hashable, type-exact copy of an attribute value (``TypeError`` if it has none).

    Types are kept next to values because ``1``, ``1.0`` and ``True`` hash alike but are
    different NNEF types to the attribute check.
    """
    t = type(value)
    if t in _ATOMS:  # the common exact types first (same result as the general rules below)
        return (t, value)
    if t is list or t is tuple:
        return (t, *[_frozen(v) for v in value])
    if isinstance(value, (list, tuple)):
        return (type(value),) + tuple(_frozen(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool, np.generic)):
        return (type(value), value)
    raise TypeError("unhashable attribute")


def _check_key(args: tuple, kwargs: dict, is_shape_rule: bool) -> Any:
    """What the attribute check and shape precheck depend on, or ``None`` if not hashable."""
    try:
        attrs = tuple([(k, _frozen(v)) for k, v in kwargs.items()])
    except TypeError:
        return None
    if is_shape_rule:
        return attrs
    shapes = tuple(tuple(np.shape(v) for v in a) if isinstance(a, list) else np.shape(a) for a in args)
    return shapes, attrs


def _check_volume(op: str, result: Any) -> None:
    shapes = result if isinstance(result, list) or (result and isinstance(result[0], (tuple, list))) else [result]
    for shape in shapes:
        if not isinstance(shape, (tuple, list)):
            continue
        n = 1
        for d in shape:
            if d is not None:
                n *= d
        if n > MAX_ELEMENTS:
            raise _op_error(op, f"result shape {tuple(shape)} has {n} elements, more than the {MAX_ELEMENTS} "
                                "nnefx supports")


def guard(op: Any, fn: Any, is_shape_rule: bool = False) -> Any:
    """``fn`` (a shape rule or kernel of ``op``) wrapped in the contract: defaults filled in,
    attribute names and types checked, the shape rule run before a kernel, result size
    bounded, errors of a compound's body named after the compound.  Idempotent."""
    if fn is None or getattr(fn, "_guarded", False):
        return fn
    types = attribute_types(op.declaration)
    #: Keywords a runtime passes that are not attributes (e.g. a hook to run a body
    #: fragment): declared with ``define(..., runtime_keywords=(...))``, never type-checked.
    hooks = frozenset(op.extra.get("runtime_keywords", ()))
    names = {"dtype"} | set(types) | hooks
    defaults = attribute_defaults(op.declaration)
    needed = frozenset(defaults)

    def check(kwargs: dict) -> None:
        for key, value in kwargs.items():
            if key not in names:
                raise _op_error(op.name, f"has no attribute '{key}'")
            typ = types.get(key)
            if typ is not None and not _fits(value, typ):
                raise NNEFXError(f"operation '{op.name}': attribute '{key}' = {value!r} is not of the "
                                 f"declared type {typ}")

    def precheck(args: tuple, kwargs: dict) -> None:
        """Run the (guarded) shape rule first: bad shapes and oversized results are refused
        before the kernel allocates anything."""
        shapes = [[np.shape(v) for v in a] if isinstance(a, list) else np.shape(a) for a in args]
        try:
            result = op.shape_rule(*shapes, **{k: v for k, v in kwargs.items() if k != "dtype" and k not in hooks})
        except NNEFXError:
            raise
        except Exception:  # noqa: BLE001 - the kernel reports its own, more specific error
            return
        _check_volume(op.name, result)

    passed: dict = {}  # frozen (shapes, attributes) that already passed both checks
    positional: list[str] = []  # fn's positional parameter names, read on first need

    def fill(args: tuple, kwargs: dict) -> dict:
        """Defaults for the attributes neither passed by keyword nor — in calls between
        kernels, which may pass attributes in the function's own order — by position."""
        if not positional:
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                params = []
            positional.extend(p.name for p in params
                              if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD)) or positional.append("")
        bound = positional[:len(args)]
        filled = {k: _fresh(v) for k, v in defaults.items() if k not in kwargs and k not in bound}
        if not filled:
            return kwargs
        filled.update(kwargs)
        return filled

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if needed and not kwargs.keys() >= needed:
            kwargs = fill(args, kwargs)
        key = _check_key(args, kwargs, is_shape_rule)
        if key is None or key not in passed:
            check(kwargs)
            if not is_shape_rule and op.shape_rule is not None:
                precheck(args, kwargs)
            if key is not None:
                if len(passed) >= _PASSED_LIMIT:
                    passed.clear()
                passed[key] = None
        try:
            return fn(*args, **kwargs)
        except (OverflowError, MemoryError) as exc:
            raise _op_error(op.name, f"the result is too large to compute ({type(exc).__name__}: {exc})") from None
        except NNEFXError as exc:
            # A compound reports through the primitives of its body: say whose body.
            if f"'{op.name}'" not in exc.message:
                exc.message = f"operation '{op.name}': {exc.message}"
                exc.args = (exc.message,)
            raise

    guarded._guarded = True  # type: ignore[attr-defined]
    guarded.__wrapped__ = fn  # type: ignore[attr-defined]
    guarded.__doc__ = fn.__doc__
    guarded.__name__ = getattr(fn, "__name__", op.name)
    return guarded


# --- the one shape-rule runner ------------------------------------------------------------------

class Undecided(Exception):
    """A shape rule could not decide with unknown extents (``None``) among its inputs."""


#: rule -> whether it takes ``dtype`` (``inspect.signature`` costs ~20 µs; rules are
#: module-level functions, so the table stays as small as the registry).
_DTYPE_RULES: dict[Any, bool] = {}


def _accepts_dtype(rule: Any) -> bool:
    rule = getattr(rule, "__wrapped__", rule)
    known = _DTYPE_RULES.get(rule)
    if known is None:
        try:
            params = inspect.signature(rule).parameters
        except (TypeError, ValueError):
            known = True
        else:
            known = "dtype" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if len(_DTYPE_RULES) < 4096:
            _DTYPE_RULES[rule] = known
    return known


def _dims(v: Any) -> bool:
    for d in v:
        if type(d) is not int and d is not None and (not isinstance(d, (int, np.integer)) or isinstance(d, bool)):
            return False
    return True


def is_shape(v: Any) -> bool:
    """Whether ``v`` is one shape: a tuple of extents (ints, ``None`` for unknown)."""
    return isinstance(v, tuple) and _dims(v)


def _has_unknown(args: Sequence[Any]) -> bool:
    for a in args:
        if isinstance(a, list):
            if any(None in s for s in a):
                return True
        elif None in a:
            return True
    return False


def run_shape_rule(op: Any, input_shapes: Sequence[Any], attribs: dict[str, Any],
                   dtype: str | None = None) -> tuple:
    """Result shapes of ``op`` for ``input_shapes`` (one per tensor parameter in declaration
    order; a list of shapes for a ``tensor[]`` parameter) and ``attribs``.

    Returns a tuple with one entry per declared result (a shape tuple, or a list of shapes
    for a ``tensor[]`` result).  ``dtype`` (the resolved generic data type) is passed to
    rules of generic operations that take it.  Raises :class:`NNEFXError` when the rule
    rejects the arguments (no location: callers add theirs) — also for any other exception
    when every extent is known (a rule that fails on known shapes never leaves a shape
    silently unknown) — and :class:`Undecided` when it fails on unknown extents.
    """
    rule = op.shape_rule
    if rule is None:
        raise NNEFXError(f"operation '{op.name}' has no shape rule")
    if op.generic and dtype is not None and _accepts_dtype(rule):
        kwargs = dict(attribs)
        kwargs["dtype"] = dtype
    else:
        kwargs = attribs
    try:
        result = rule(*input_shapes, **kwargs)
    except NNEFXError:
        raise
    except Exception as exc:  # noqa: BLE001 - a rule that cannot handle unknown extents
        if _has_unknown(input_shapes):
            raise Undecided(str(exc)) from None
        raise NNEFXError(f"'{op.name}': invalid arguments ({type(exc).__name__}: {exc})") from None
    if not isinstance(result, tuple) or is_shape(result):
        result = (result,)
    return result
