"""Writing NNEF for tract: ``nnefx.save(model, path, dialect="tract")``.

tract (Sonos' NNEF runtime) reads standard NNEF plus its own registries of primitives
(``extension tract_registry tract_core;``).  A model nnefx read from IR XML, ONNX or CVM JSON
carries operations tract does not know: the ``ir_*`` opset extensions, ``constant`` (tract's
standard library has no ``constant``; constants are ``variable`` data), shape sub-graphs
that only nnefx folds.  :func:`to_tract` rewrites such a graph, operation by operation,
into standard NNEF operations where they suffice and ``tract_core_*`` operations where they
do not, each with the same meaning (:mod:`.rules`); an operation without an exact form is a
located :class:`~nnefx.diagnostics.NNEFXError` naming it.  The rewritten model is then
written by the ordinary NNEF container writer, whose printer heads a graph of tract operations
with tract's ``extension tract_registry`` lines.
"""

from __future__ import annotations

from .rewrite import TRACT_UNKNOWN, to_tract

__all__ = ["TRACT_UNKNOWN", "to_tract"]
