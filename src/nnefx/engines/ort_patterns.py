"""Give onnxruntime the node patterns its graph optimiser fuses, without changing the meaning.

NNEF aligns the shapes of a binary operation's operands by their *leading* dimensions
(missing trailing dimensions count as 1), ONNX by their *trailing* ones (numpy
broadcasting).  So an NNEF graph that adds a bias of shape ``[C]`` to ``[N, T, C]`` must
first ``unsqueeze`` the bias to ``[1, 1, C]`` (nnef-tools writes exactly that), and
nnefx's ONNX export keeps those ``Unsqueeze`` nodes, and the ``Identity`` nodes of NNEF
``copy``.  Their results are the same, but onnxruntime's fusions match the node patterns
of framework exports — ``LayerNormalization`` wants its scale and bias as 1-D initializers,
``MatMul`` + ``Add`` becomes ``Gemm`` only for a 2-D constant right operand — and do not
fire on ``Mul(x, Unsqueeze(gamma))`` or ``MatMul(x, Unsqueeze(W))``.  Measured on a
4-layer transformer encoder: none of 8 layer norms and none of 16 products fused, 1.6x
torch's own export's time (BENCHMARKS.md).

This pass, run on the exported model before onnxruntime sees it, removes exactly the nodes
whose removal cannot change any value or shape (ONNX operator docs, "Broadcasting in ONNX"
and ``MatMul``, which broadcasts its batch dimensions like numpy.matmul):

* ``Identity`` of an initializer: its users read the initializer itself;
* ``Unsqueeze`` of an initializer on leading axes ``0 .. k-1`` only, when every user is a
  multidirectionally broadcasting operation (``Add``, ``Sub``, ``Mul``, ``Div``, ``Pow``,
  ``Where``) or a ``MatMul`` (whose operand keeps rank >= 2), and each user's other operands
  have at least the unsqueezed rank: leading 1s then add nothing to the broadcast shape.

Names used inside subgraphs (``If``/``Loop``/``Scan`` bodies may read outer names) and graph
outputs are never touched.  The engine's results stay checked against the formal backend
by the test suite, as for every export.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

#: Operations that broadcast all their inputs against each other (ONNX "multidirectional").
BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Where"})
#: The NNEF operations nnefx writes as those (or as MatMul).
NNEF_USERS = frozenset({"add", "sub", "mul", "div", "pow", "select", "matmul"})


def worth_simplifying(graph: Any) -> bool:
    """Whether the nnefx graph has an ``unsqueeze`` of a weight (possibly through ``copy``)
    that a product or a broadcasting operation reads: the only case the pass can change,
    checked before paying for parsing the export (0.1-0.3 s for ResNet-18's 47 MB)."""
    producers = {name: op for op in graph.operations for name in op.output_names()}
    used_by = {name for op in graph.operations if op.op in NNEF_USERS for name in op.input_names()}
    for op in graph.operations:
        if op.op != "unsqueeze" or not set(op.output_names()) & used_by:
            continue
        source = producers.get(op.input_names()[0]) if op.input_names() else None
        while source is not None and source.op == "copy" and source.input_names():
            source = producers.get(source.input_names()[0])
        if source is not None and source.op in ("variable", "constant"):
            return True
    return False


def simplify_for_onnxruntime(data: bytes) -> bytes:
    """``data`` (a serialised ONNX model) with the no-op nodes above removed (``data`` itself
    when there are none, so most models pay one parse and no shape inference)."""
    import onnx

    model = onnx.load_from_string(data)
    graph = model.graph
    initializers = {t.name: len(t.dims) for t in graph.initializer}
    if not any(n.op_type in ("Identity", "Unsqueeze") and n.input and n.input[0] in initializers
               for n in graph.node):
        return data
    protected = {o.name for o in graph.output} | _subgraph_names(graph)
    users: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for node in graph.node:
        for k, name in enumerate(node.input):
            users[name].append((node, k))
    removed: list[Any] = []
    for node in graph.node:  # Identity of an initializer: read the initializer
        if node.op_type == "Identity" and node.input[0] in initializers and node.output[0] not in protected:
            for user, k in users.pop(node.output[0], []):
                user.input[k] = node.input[0]
                users[node.input[0]].append((user, k))
            removed.append(node)
    candidates = [n for n in graph.node if n.op_type == "Unsqueeze" and n.input[0] in initializers
                  and n.output[0] not in protected and users.get(n.output[0])]
    if candidates:
        ranks = _ranks(model)
        for node in candidates:
            axes = _axes(node, graph)
            if axes is None or sorted(axes) != list(range(len(axes))):
                continue
            rank = initializers[node.input[0]] + len(axes)
            if all(_leading_ones_are_free(user, k, rank, initializers[node.input[0]], ranks)
                   for user, k in users[node.output[0]]):
                for user, k in users.pop(node.output[0]):
                    user.input[k] = node.input[0]
                removed.append(node)
    if not removed:
        return data
    for node in removed:
        graph.node.remove(node)
    return model.SerializeToString()


def _leading_ones_are_free(user: Any, k: int, rank: int, source_rank: int, ranks: dict[str, int]) -> bool:
    others = [name for j, name in enumerate(user.input) if j != k and name]
    if user.op_type in BROADCASTING:
        return bool(others) and all(ranks.get(name, -1) >= rank for name in others)
    if user.op_type == "MatMul":
        return source_rank >= 2 and ranks.get(others[0], -1) >= rank if len(others) == 1 else False
    return False


def _axes(node: Any, graph: Any) -> list[int] | None:
    """An Unsqueeze's axes: its attribute (opset < 13) or its constant second input."""
    from onnx import numpy_helper

    for attr in node.attribute:
        if attr.name == "axes":
            return list(attr.ints)
    if len(node.input) < 2:
        return None
    for t in graph.initializer:
        if t.name == node.input[1]:
            return [int(a) for a in numpy_helper.to_array(t).ravel()]
    return None


def _ranks(model: Any) -> dict[str, int]:
    """The rank of every tensor shape inference can tell.  It runs on a light copy: large
    weights enter it as graph inputs of their type and shape (their values do not matter;
    small constants keep theirs, which inference reads for ``Reshape`` and the like)."""
    import onnx
    from onnx import helper

    g = model.graph
    light = onnx.ModelProto(ir_version=model.ir_version)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    light.graph.node.extend(g.node)
    light.graph.input.extend(g.input)
    light.graph.output.extend(g.output)
    for t in g.initializer:
        count = 1
        for d in t.dims:
            count *= d
        if count <= 64:
            light.graph.initializer.append(t)
        else:
            light.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    shapes = {t.name: len(t.dims) for t in g.initializer}
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False)
    except Exception:  # noqa: BLE001 - no ranks means nothing is removed, never a wrong removal
        return shapes
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes.setdefault(vi.name, len(t.shape.dim))
    return shapes


def _subgraph_names(graph: Any) -> set[str]:
    """Every name a nested graph (attribute of type GRAPH/GRAPHS) reads."""
    names: set[str] = set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                for inner in sub.node:
                    names.update(inner.input)
                names |= _subgraph_names(sub)
    return names
