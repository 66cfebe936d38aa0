"""Executing graphs: the execution half of NNEF 1.0 §2.4.1 (graph compilation and execution).

* :mod:`.planner` — :func:`compile_plan` turns a flat graph into a :class:`Plan` once
  (order checks, kernel lookup, constant folding, pruning, buffer lifetimes);
* :mod:`.session` — :class:`Session` feeds inputs, runs the plan, applies ``update`` to
  variables, resets and saves them;
* :mod:`.quantize` — simulated quantization of activations from ``graph.quant``;
* :mod:`.dtypes` — NNEF data types ↔ numpy storage, dequantization of stored codes;
* :mod:`.profile` — time per operation kind; :mod:`.cli` — ``nnefx run``;
* :func:`blas_info` — the OpenBLAS kernels numpy uses and what nnefx chose for them
  (:mod:`nnefx.blas`; :func:`nnefx.blas.configure` chooses them, before numpy is imported).

Nothing is imported here eagerly: ``import nnefx`` stays cheap, and ``nnefx.Session`` loads
this package (and every operator family) on first use.
"""

from ..blas import blas_info  # noqa: E402  (no numpy import: cheap)

__all__ = ["blas_info"]
