"""The runtime's "ops" (gas) measure of an integer graph, for ``nnefx inspect --cost``.

    total = sum over variables of 5 * size(v)
          + sum over operations of base(op) * size(output 0) + 5 * sum of size(outputs)

``base`` is each operation's ``OpDef.extra["cost"]`` rule (1 when it has none), written from
what the runtime computes (cvm.md §4) -- which differs from its documentation table for
dense, sum and non_max_suppression.  Graph inputs count as variables; the input-saturation
clip the CVM loader inserts is the runtime's ``set_input``, not an operator, and costs
nothing (in a graph without CVM loader metadata: a ``cvm_cvm_clip`` applied directly to an
``external`` is taken to be that saturation).  Limits as in the runtime: a base above 2^30 or a running sum above 2^40 is refused.
"""

from __future__ import annotations

from ...diagnostics import NNEFXError
from ...graph import Model
from ...graph import flat_values as _flat
from ...ops import registry
from ...ops.integer._int import size_of

_LIMIT_BASE = 2**30
_LIMIT_SUM = 2**40


def model_cost(model: Model) -> int:
    """The runtime's ops count of ``model`` (its graph must have shapes)."""
    g = model.graph
    if "cvm" in model.extras:
        skip = set(model.extras["cvm"].get("saturated", {}).values())
    else:
        # A graph from elsewhere (e.g. an NNEF document written from a CVM model): the clip
        # applied directly to an input is that input's saturation, as the CVM loader writes it.
        inputs = {op.output_names()[0] for op in g.operations if op.op == "external"}
        skip = {n for op in g.operations if op.op == "cvm_cvm_clip" and op.input_names()[0] in inputs
                for n in op.output_names()}

    def size(name: str, op) -> int:
        shape = g.tensors[name].shape
        if shape is None or any(d is None for d in shape):
            raise NNEFXError(f"cost: the shape of '{name}' is unknown", op.location)
        return size_of(shape)

    ops = 0
    memory = 0
    for op in g.operations:
        outs = op.output_names()
        if op.op in ("external", "variable", "constant"):
            memory += 5 * size(outs[0], op)
            continue
        if any(n in skip for n in outs):
            continue
        entry = registry.get(op.op)
        if entry.domain != "cvm":
            raise NNEFXError(f"cost: the ops measure is defined for the integer operator set only; "
                             f"'{op.op}' is not one of them", op.location)
        rule = entry.extra.get("cost")
        base = 1
        if rule is not None:
            shapes = [g.tensors[v].shape if isinstance(v, str) else () for v in _flat(op.inputs.values())]
            base = int(rule(shapes, [g.tensors[n].shape for n in outs], **op.attribs))
        if base > _LIMIT_BASE:
            raise NNEFXError(f"cost: operation '{op.op}' costs {base} per element (limit 2^30)", op.location)
        ops += base * size(outs[0], op)
        memory += 5 * sum(size(n, op) for n in outs)
        if ops > _LIMIT_SUM or memory > _LIMIT_SUM:
            raise NNEFXError("cost: the model exceeds the runtime's limit of 2^40 ops", op.location)
    return ops + memory
