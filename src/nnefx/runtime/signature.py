"""The tensor parameters of an operation, as the planner needs them.

Kernels take tensor arguments positionally in declaration order (see
:mod:`nnefx.ops.registry`).  ``Operation.inputs`` should already be in that order, but the
declaration is the authority: reading it lets the planner put arguments in the right place,
fill in a defaulted tensor argument that a graph left out (``conv``'s ``bias = 0.0``) and
give a literal argument (``add(x, 1.0)``) the declared data type.  The declaration itself is
read by :mod:`nnefx.ops.signature`, the one reader of declaration headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..ops.signature import NO_DEFAULT, signature


@dataclass(frozen=True)
class TensorParam:
    name: str
    #: ``scalar``/``integer``/``logical``, None for the generic ``?``, "" for ``tensor<>``.
    dtype: str | None
    is_array: bool
    default: Any = NO_DEFAULT
    #: True when the declaration gives a default, even one too complex to evaluate here.
    declared_default: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@cache
def tensor_params(declaration: str) -> tuple[TensorParam, ...] | None:
    """The declaration's tensor parameters in order, or None if the header is unreadable."""
    sig = signature(declaration)
    if sig is None:
        return None
    return tuple(TensorParam(p.name, p.tensor_dtype, p.is_array, p.default, p.default_text is not None)
                 for p in sig.tensor_params)
