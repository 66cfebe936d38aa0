"""``nnefx draw``: a model's graph as a picture (Graphviz DOT, SVG or PNG).

What the picture shows, and why:

* one box per operation with its name, its attributes (long values shortened) and the
  name and shape of what it computes, coloured by operator family;
* variables and constants *collapsed* into the operations that read them (a line
  ``filter [16, 1, 3, 3]`` inside the ``conv`` box): weights are not data flow, and as
  nodes they would double the picture;
* graph inputs and outputs as ovals;
* clusters, so that large graphs stay readable: the operations one invocation of a
  document fragment expanded to, the operations an expanded standard compound became
  (``--expand``), and, for IR and ONNX models, the ``/``-separated scopes of their tensor
  names (``/layers/0/conv1/Conv_output_0`` lies in ``layers`` → ``0`` → ``conv1``).

The DOT text is built with the ``graphviz`` package (the ``viz`` extra); SVG and PNG need
Graphviz's ``dot`` program as well, ``.dot`` output does not.
"""

from __future__ import annotations

import html
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Location, NNEFXError
from ..graph import Graph, Model, Operation

#: Output formats by file suffix.
SUFFIXES = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot"}
#: Attribute values longer than this are shortened with an ellipsis.
MAX_VALUE_CHARS = 32
#: Deepest nesting of name-scope clusters drawn.
MAX_SCOPE_DEPTH = 3

_FAMILY_COLOURS = {
    "sliding": "#cfe2f3", "linalg": "#cfe2f3", "activation": "#fde9c9", "elementwise": "#eeeeee",
    "reduce": "#d9ead3", "normalization": "#ead1dc", "shape": "#fff2cc", "tensors": "#fff2cc",
    "resize": "#d0e0e3", "quantization": "#f4cccc", "roi": "#d9d2e9", "multi": "#d9d2e9",
}
_DEFAULT_COLOUR = "#f3f3f3"


def output_format(path: str) -> str:
    """The picture format a path asks for; a usage error names the known suffixes."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        raise NNEFXError(f"cannot tell the picture format of '{path}': use one of "
                         f"{', '.join(sorted(SUFFIXES))}")
    return SUFFIXES[suffix]


def _shape(shape: Any) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _family(op_name: str) -> str:
    try:
        from ..ops import registry

        return registry.get(op_name).family or ""
    except Exception:  # noqa: BLE001 -- an operator the registry lacks is drawn uncoloured
        return ""


@dataclass
class _Cluster:
    key: str
    label: str
    ops: list[int] = field(default_factory=list)
    children: dict[str, _Cluster] = field(default_factory=dict)


def _fragment_spans(graph: Graph) -> dict[str, list[tuple[str, int, int]]]:
    """Document fragments' line spans per file: ``file → [(name, first, last line)]``."""
    files = {op.location.file for op in graph.operations if op.location is not None and op.location.file}
    spans: dict[str, list[tuple[str, int, int]]] = {}
    for file in files:
        if not os.path.isfile(file) or os.path.getsize(file) > (64 << 20):
            continue
        try:
            from ..syntax.parser import parse_document

            with open(file, encoding="utf-8") as f:
                doc = parse_document(f.read(), file)
        except Exception:  # noqa: BLE001 -- no clusters rather than no picture
            continue
        found = []
        for frag in getattr(doc, "fragments", None) or ():
            loc, end = getattr(frag, "loc", None), getattr(frag, "end", None)
            if loc is not None and end is not None and loc.line is not None:
                found.append((frag.name, loc.line, end[0]))  # end: (line, column)
        if found:
            spans[file] = found
    return spans


def _invocation_clusters(graph: Graph, ops: list[Operation],
                         compounds: dict[tuple[Any, ...], str]) -> list[_Cluster]:
    """Runs of operations one fragment invocation or one expanded compound produced."""
    spans = _fragment_spans(graph)
    clusters: list[_Cluster] = []
    current: _Cluster | None = None
    seen: set[Any] = set()
    for k, op in enumerate(ops):
        loc = op.location
        key = None if loc is None else (loc.file, loc.line, loc.column)
        label = None
        if loc is not None and loc.line is not None:
            for name, first, last in spans.get(loc.file or "", ()):
                if first <= loc.line <= last:
                    label = f"fragment {name}"
                    break
            if label is None and key in compounds:
                label = compounds[key]
        if label is None:
            current = None
            continue
        if label.startswith("fragment "):
            # one invocation's body runs through distinct statements; a repeat starts the next
            same = current is not None and current.label == label and key not in seen
        else:
            same = current is not None and current.label == label and key in seen
        if not same:
            current = _Cluster(key=f"c{len(clusters)}", label=label)
            clusters.append(current)
            seen = set()
        seen.add(key)
        current.ops.append(k)
    return [c for c in clusters if len(c.ops) > 1]


def _scope_clusters(ops: list[Operation]) -> _Cluster | None:
    """Nested clusters from ``/``-separated tensor-name scopes (IR, ONNX names)."""
    root = _Cluster(key="s", label="")
    any_scope = False
    for k, op in enumerate(ops):
        outs = op.output_names()
        parts = [p for p in (outs[0] if outs else "").split("/") if p][:-1][:MAX_SCOPE_DEPTH]
        node = root
        for part in parts:
            node = node.children.setdefault(part, _Cluster(key=f"{node.key}_{len(node.children)}", label=part))
            any_scope = True
        node.ops.append(k)
    return root if any_scope else None


def _op_label(graph: Graph, op: Operation, collapsed: set[str]) -> str:
    rows = [f'<TR><TD><B>{html.escape(op.op)}</B></TD></TR>']
    small = '<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="9"{colour}>{text}</FONT></TD></TR>'
    for param, value in op.inputs.items():
        names = value if isinstance(value, (list, tuple)) else [value]
        for name in names:
            if isinstance(name, str) and name in collapsed:
                t = graph.tensors.get(name)
                rows.append(small.format(colour=' COLOR="#3d5a80"',
                                         text=html.escape(f"{param} {_shape(t.shape if t else None)}")))
            elif not isinstance(name, str) and name is not None:
                rows.append(small.format(colour="", text=html.escape(f"{param} = {_short(name)}")))
    for key, value in op.attribs.items():
        if value in ([], (), None, ""):
            continue
        rows.append(small.format(colour="", text=html.escape(f"{key} = {_short(value)}")))
    for name in op.output_names():
        t = graph.tensors.get(name)
        shown = name.rsplit("/", 1)[-1] if "/" in name.strip("/") else name  # the cluster names the scope
        rows.append(small.format(colour=' COLOR="#555555"',
                                 text=html.escape(f"→ {_short(shown)} {_shape(t.shape if t else None)}")))
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">' + "".join(rows) + "</TABLE>>"


def build_dot(model: Model, *, compounds: dict[tuple[Any, ...], str] | None = None) -> Any:
    """The graph as a ``graphviz.Digraph`` (``compounds``: call site → compound label, for
    clusters of an expanded model)."""
    try:
        import graphviz
    except ImportError:
        raise NNEFXError("drawing needs the 'graphviz' Python package: pip install 'nnefx[viz]'") from None
    g = model.graph
    collapsed = {op.output_names()[0] for op in g.operations
                 if op.op in ("variable", "constant") and op.output_names()}
    ops = [op for op in g.operations if op.op not in ("external", "variable", "constant")]
    dot = graphviz.Digraph(name=g.name or "graph", graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "label": f"{g.name} ({model.format})", "labelloc": "t",
        "nodesep": "0.25", "ranksep": "0.35"},
        node_attr={"fontname": "Helvetica", "fontsize": "11"}, edge_attr={"color": "#666666", "arrowsize": "0.6"})
    producer: dict[str, str] = {}
    for k, op in enumerate(g.operations):
        if op.op == "external":
            name = op.output_names()[0]
            t = g.tensors.get(name)
            dot.node(f"in{k}", f"{name}\n{_shape(t.shape if t else None)}", shape="oval", style="filled",
                     fillcolor="#e2f0d9")
            producer[name] = f"in{k}"

    def op_node(container: Any, k: int) -> None:
        op = ops[k]
        container.node(f"op{k}", _op_label(g, op, collapsed), shape="box", style="rounded,filled",
                       fillcolor=_FAMILY_COLOURS.get(_family(op.op), _DEFAULT_COLOUR),
                       tooltip=", ".join(op.output_names()) + (f" ({op.location})" if op.location else ""))

    drawn: set[int] = set()

    def add_cluster(container: Any, cluster: _Cluster) -> None:
        if len(cluster.ops) + len(cluster.children) == 1 and not cluster.children:
            op_node(container, cluster.ops[0])  # a one-operation scope frames nothing
            drawn.add(cluster.ops[0])
            return
        with container.subgraph(name=f"cluster_{cluster.key}") as sub:
            sub.attr(label=cluster.label, style="rounded,dashed", color="#888888", fontsize="10")
            for k in cluster.ops:
                op_node(sub, k)
                drawn.add(k)
            for child in cluster.children.values():
                add_cluster(sub, child)

    for cluster in _invocation_clusters(g, ops, compounds or {}):
        add_cluster(dot, cluster)
    scopes = _scope_clusters(ops)
    if scopes is not None:
        for k in scopes.ops:
            if k not in drawn:
                op_node(dot, k)
                drawn.add(k)
        for child in scopes.children.values():
            _prune(child, drawn)
            if _count(child):
                add_cluster(dot, child)
    for k in range(len(ops)):
        if k not in drawn:
            op_node(dot, k)
    for k, op in enumerate(ops):
        for name in op.output_names():
            if op.op != "update":
                producer[name] = f"op{k}"
    for k, op in enumerate(ops):
        for name in dict.fromkeys(op.input_names()):
            if name in producer:
                dot.edge(producer[name], f"op{k}")
    for j, name in enumerate(g.outputs):
        t = g.tensors.get(name)
        dot.node(f"out{j}", f"{name}\n{_shape(t.shape if t else None)}", shape="oval", style="filled",
                 fillcolor="#fce5cd")
        if name in producer:
            dot.edge(producer[name], f"out{j}")
    return dot


def _prune(cluster: _Cluster, drawn: set[int]) -> None:
    """Drop operations already in an invocation cluster, and clusters left empty."""
    cluster.ops = [k for k in cluster.ops if k not in drawn]
    for child in cluster.children.values():
        _prune(child, drawn)
    cluster.children = {k: c for k, c in cluster.children.items() if _count(c)}


def _count(cluster: _Cluster) -> int:
    return len(cluster.ops) + sum(_count(c) for c in cluster.children.values())


def compound_sites(atomic: Model) -> dict[tuple[Any, ...], str]:
    """Call site → ``"softmax → probabilities"`` for every compound operation of a model
    loaded with compounds atomic: the labels of ``--expand`` clusters."""
    from ..ops import registry

    sites: dict[tuple[Any, ...], str] = {}
    for op in atomic.graph.operations:
        loc = op.location
        try:
            compound = registry.get(op.op).compound
        except Exception:  # noqa: BLE001
            compound = False
        if loc is not None and compound:
            outs = op.output_names()
            sites[(loc.file, loc.line, loc.column)] = f"{op.op} → {outs[0]}" if outs else op.op
    return sites


def render(dot: Any, path: str, fmt: str) -> None:
    """Write ``dot`` to ``path`` as ``fmt`` (atomically, with the umask's permissions)."""
    from ..formats.export.context import write_atomically

    source = dot.source
    if fmt == "dot":
        write_atomically([(path, source.encode("utf-8"))])
        return
    if shutil.which("dot") is None:
        raise NNEFXError(f"writing .{fmt} needs Graphviz's 'dot' program (Debian/Ubuntu: apt-get install "
                         "graphviz; macOS: brew install graphviz); a .dot file needs nothing more",
                         Location(path))
    import graphviz

    try:
        data = graphviz.Source(source).pipe(format=fmt)
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError) as exc:
        raise NNEFXError(f"Graphviz's 'dot' failed: {exc}", Location(path)) from None
    write_atomically([(path, data)])


def draw_command(args: Any, load: Any) -> int:
    """``nnefx draw MODEL -o FILE``; ``load(args, **options)`` is the CLI's model loader."""
    fmt = output_format(args.output)
    compounds = None
    model = load(args)
    if args.expand and model.format.startswith("nnef"):
        compounds = compound_sites(model)
        model = load(args, expand_all=True)
    from .progress import activity

    with activity(f"drawing {args.output}"):
        render(build_dot(model, compounds=compounds), args.output, fmt)
    print(f"wrote {args.output}")
    return 0


def add_parser(sub: Any) -> None:
    """The ``draw`` subcommand's arguments (called by ``nnefx.cli.build_parser``)."""
    import argparse

    p = sub.add_parser(
        "draw", help="draw a model's graph as a picture (SVG, PNG or Graphviz DOT)",
        description="Draw a model's graph: one box per operation with its attributes and output shapes, "
                    "variables collapsed into the operations that read them, clusters for fragment "
                    "invocations and name scopes. SVG and PNG need Graphviz's 'dot' program; .dot does not.",
        epilog="examples:\n"
               "  nnefx draw examples/digits/model -o digits.svg\n"
               "  nnefx draw examples/digits/model -o digits.png --expand\n"
               "  nnefx draw examples/digits/model -o digits.dot",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the model: NNEF folder/.nnef/archive, IR .xml, CVM .json or .onnx")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the picture to write: .svg, .png or .dot (.gv); the suffix picks the format")
    p.add_argument("--expand", action="store_true",
                   help="NNEF models: draw standard compounds (linear, softmax, ...) as the primitives "
                        "they are defined by, each in a cluster named after it")
    return p
