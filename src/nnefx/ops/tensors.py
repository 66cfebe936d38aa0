"""Tensor-introducing operations (NNEF 1.0.5 §4.1) and ``update`` (§4.8).

The runtime session feeds ``external`` inputs, loads ``variable`` data and applies
``update`` itself (they are about *where* data comes from, not arithmetic), so the kernels
here only cover what is a pure function: filling a ``constant`` and the value side of
``update``.  Shape rules validate the attributes so every front-end gets the same errors.
"""

from __future__ import annotations

from .registry import define

external = define("external", "tensors", """
fragment external<? = scalar>( shape: integer[] ) -> ( output: tensor<?> );
""", generic=True)

variable = define("variable", "tensors", """
fragment variable<? = scalar>( shape: integer[], label: string ) -> ( output: tensor<?> );
""", generic=True)

constant = define("constant", "tensors", """
fragment constant<? = scalar>( shape: integer[], value: ?[] ) -> ( output: tensor<?> );
""", generic=True)

update = define("update", "tensors", """
fragment update<?>( variable: tensor<?>, value: tensor<?> ) -> ( result: tensor<?> );
""", generic=True)
