"""tract's scan as documents write it, lowered to its graph form (:mod:`nnefx.ops.tract.scan`).

A document calls ``tract_core_scan(body = 'f', scan = [('x_t', x, 0, 1)], full = [('W', W)],
state = [('h', h0, 'h_next')], output = [...])``: tensors inside tuples, and a body named by a
string.  The graph keeps tensors as an operation's inputs, so the call becomes one operation
with three ``tensor[]`` inputs (the scanned, whole and state tensors, in order) and the rest of
each tuple as attributes; the body fragment is expanded once into a graph of its own,
``Graph.subgraphs[body]`` (its parameters are ``external`` inputs, its results the outputs),
which the shape rule and the kernels run (tract ``nnef/src/ops/core/scan.rs``, ``de_scan``).
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Operation, Tensor
from .evaluator import TensorLiteral, TensorRef

OP = "tract_core_scan"


def lower_scan(exp: Any, args: dict[str, Any], target: Any, loc: Location) -> Any:
    """Emit the graph form of one ``tract_core_scan`` call; returns its results."""
    where = exp._loc(loc)
    name = args["body"]
    frag = exp.fragments.get(name)
    if frag is None or frag.origin != "document" or frag.body is None:
        raise NNEFXError(f"'{OP}': body '{name}' is not a fragment defined in the document", where)
    graph = exp.graph
    inputs: dict[str, list] = {"scan_inputs": [], "full_inputs": [], "state_inputs": []}
    scan, full, state = [], [], []
    for entry in args["scan"]:
        pname, x, axis, chunk = entry
        inputs["scan_inputs"].append(_tensor(exp, x, where))
        scan.append((pname, axis, chunk))
    for pname, x in args["full"]:
        inputs["full_inputs"].append(_tensor(exp, x, where))
        full.append(pname)
    for pname, x, result in args["state"]:
        inputs["state_inputs"].append(_tensor(exp, x, where))
        state.append((pname, result))
    output = [tuple(e) if len(e) == 4 else (*e, 1) for e in args["output"]]
    params = {p.name for p in frag.params}
    given = [e[0] for e in scan] + full + [e[0] for e in state]
    for pname in given:
        if pname not in params:
            raise NNEFXError(f"'{OP}': '{name}' has no parameter '{pname}'", where)
    missing = [p for p in params if p not in given]
    if missing:
        raise NNEFXError(f"'{OP}': parameters {', '.join(sorted(missing))} of '{name}' receive no tensor", where)
    results = {r.name for r in frag.results}
    for result in [r for _, r in state] + [e[0] for e in output]:
        if result not in results:
            raise NNEFXError(f"'{OP}': '{name}' has no result '{result}'", where)
    if name not in graph.subgraphs:
        graph.subgraphs[name] = _body_graph(exp, frag, where)
    names = list(target) if isinstance(target, (tuple, list)) and len(target) == len(output) else [None] * len(output)
    outs = []
    for t in names:
        out = t if isinstance(t, str) and t not in graph.tensors else f"{exp.fresh(OP)}_{len(outs) + 1}"
        graph.tensors[out] = Tensor(name=out, dtype="scalar")
        outs.append(out)
    attribs = {"body": name, "scan": scan, "full": full, "state": state, "output": output}
    for key in ("skip", "reset_every_turn", "external_state"):
        if key in args:
            attribs[key] = args[key]
    graph.operations.append(Operation(op=OP, inputs=inputs, outputs={"outputs": outs}, attribs=attribs,
                                      location=where))
    refs = [TensorRef(n, "scalar") for n in outs]
    return tuple(refs) if isinstance(target, tuple) else refs


def _tensor(exp: Any, value: Any, where: Location) -> str:
    if isinstance(value, TensorRef):
        return value.name
    if isinstance(value, TensorLiteral) or isinstance(value, (int, float)) and not isinstance(value, bool):
        v = value.value if isinstance(value, TensorLiteral) else value
        name = exp.fresh("constant")
        exp.graph.tensors[name] = Tensor(name=name, dtype="scalar")
        exp.graph.operations.append(Operation(op="constant", outputs={"output": name},
                                              attribs={"shape": [], "value": [float(v)]}, dtype="scalar",
                                              location=where))
        return name
    raise NNEFXError(f"'{OP}': expected a tensor in a scan tuple, found {value!r}", where)


def _body_graph(exp: Any, frag: Any, where: Location) -> Graph:
    """The body fragment expanded into a graph of its own (shapes filled per use)."""
    from .expander import Expander

    sub = Expander(exp.fragments, exp.dialect, lowered=exp.lowered, expand_all=exp.expand_all,
                   atomic=exp.atomic)
    sub.tolerance, sub.symbols = exp.tolerance, exp.symbols
    body = Graph(name=frag.name, inputs=[p.name for p in frag.params], outputs=[r.name for r in frag.results])
    sub.graph = body
    sub.reserved = set(body.inputs) | set(body.outputs)
    sub.doc_loc = where
    args = {}
    for p in frag.params:
        t = p.type.type
        if not t.is_tensor() or not hasattr(t, "dtype"):
            raise NNEFXError(f"'{OP}': parameter '{p.name}' of body '{frag.name}' must be a tensor", where)
        dtype = t.dtype if t.dtype not in (None, "?") else "scalar"
        body.tensors[p.name] = Tensor(name=p.name, dtype=dtype)
        body.operations.append(Operation(op="external", outputs={"output": p.name}, attribs={"shape": []},
                                         dtype=dtype, location=where))
        args[p.name] = TensorRef(p.name, dtype)
    target: Any = body.outputs[0] if len(body.outputs) == 1 else tuple(body.outputs)
    sub.expand(frag, args, None, target, where)
    return body


def specialized_body(body: Graph, shapes: dict[str, tuple]) -> Graph:
    """A copy of ``body`` with its parameters of the given shapes, shaped throughout."""
    import copy

    from .shapes import infer_shapes

    g = copy.deepcopy(body)
    for op in g.operations:
        if op.op == "external":
            (name,) = op.output_names()
            if name not in shapes:
                raise NNEFXError(f"'{OP}': body '{body.name}' parameter '{name}' receives no tensor", op.location)
            op.attribs["shape"] = list(shapes[name])
    return infer_shapes(g)


def body_shapes_hook(graph: Graph) -> Any:
    """The ``body_shapes(body, parameter shapes) -> result shapes`` hook over ``graph``'s bodies."""
    def body_shapes(name: str, shapes: dict[str, tuple]) -> dict[str, tuple | None]:
        body = graph.subgraphs.get(name)
        if body is None:
            raise NNEFXError(f"'{OP}': the graph has no body '{name}'")
        g = specialized_body(body, shapes)
        return {n: g.tensors[n].shape for n in g.outputs}
    return body_shapes
