"""Hardened reading of IR ``.xml`` files into plain records (no graph building here).

Why a SAX pass instead of ``ElementTree``: we want line/column numbers for every element so
that errors can point back into the file, and we want to count elements as they arrive so
that a hostile file cannot make us build an unbounded tree.  ``defusedxml`` does the
security part: DTDs are refused outright (``forbid_dtd``), as are entity declarations and
external references, so "billion laughs" and XXE inputs fail before any expansion.

The records mirror the file 1:1 and keep attribute values as strings; interpretation
(which attribute is an int list, what a precision means) belongs to the mapping layer.
Both IR generations are read by the same code:

* legacy (``version`` <= 9): ``Input`` layers, ``precision`` attributes on layers,
  ``<blobs>`` (``<weights>``, ``<biases>``, ``<custom>``) with ``offset``/``size``, and
  ``<weights>``/``<biases>`` directly inside a layer (the oldest form);
* versions 10/11: ``Parameter``/``Const``/``Result`` with ``element_type``/``shape``/
  ``offset``/``size`` in ``<data>``, ``version="opsetN"`` on layers, ``names`` on ports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from xml.sax.handler import ContentHandler

from ...diagnostics import Location, NNEFXError

#: Refuse XML files larger than this (bytes); weights live in the ``.bin``, so real IR
#: descriptions are far smaller.
MAX_XML_BYTES = 256 * 1024 * 1024
#: Refuse files with more elements than this (one layer is ~10 elements).
MAX_ELEMENTS = 4_000_000
#: Nesting limit (TensorIterator/Loop bodies nest a full ``<net>`` per level).
MAX_DEPTH = 64


@dataclass
class Element:
    """One XML element with its position (for diagnostics)."""

    tag: str
    attrib: dict[str, str]
    line: int
    column: int
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def find(self, tag: str) -> Element | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def findall(self, tag: str) -> list[Element]:
        return [c for c in self.children if c.tag == tag]


@dataclass
class Port:
    """An ``<input>`` or ``<output>`` port: id, dims (None = dynamic), precision, names."""

    id: int
    dims: tuple | None  # tuple[int | None, ...]; None when the port lists no dims at all
    precision: str | None = None
    names: list[str] = field(default_factory=list)
    line: int = 0


@dataclass
class Blob:
    """A reference into the ``.bin`` file (legacy ``<blobs>``/``<weights>``/``<biases>``)."""

    name: str
    offset: int
    size: int
    precision: str | None = None
    line: int = 0


@dataclass
class Layer:
    id: int
    name: str
    type: str
    version: str | None
    precision: str | None
    data: dict[str, str]
    inputs: list[Port]
    outputs: list[Port]
    blobs: dict[str, Blob]
    line: int
    #: The ``<body>`` net of TensorIterator/Loop, and their port maps / back edges, raw.
    body: Net | None = None
    port_map: Element | None = None
    back_edges: list[Edge] = field(default_factory=list)
    #: Every attribute of the ``<layer>`` element itself (``output_names``, ...).
    attrs: dict[str, str] = field(default_factory=dict)
    #: If's ``then_body``/``else_body`` nets and their ``then_port_map``/``else_port_map``.
    branches: dict[str, Net] = field(default_factory=dict)
    branch_maps: dict[str, Element] = field(default_factory=dict)

    def where(self) -> str:
        """The field text used in every diagnostic about this layer."""
        return f"layer {self.id} '{self.name}' ({self.type})"


@dataclass
class Edge:
    from_layer: int
    from_port: int
    to_layer: int
    to_port: int
    line: int = 0


@dataclass
class Net:
    name: str
    version: int
    layers: list[Layer]
    edges: list[Edge]
    file: str | None = None
    #: Precision of the whole net in legacy files (``<net precision="FP32">``).
    precision: str | None = None


class _TreeBuilder(ContentHandler):
    """Builds :class:`Element` records, counting and bounding as it goes."""

    def __init__(self, file: str | None, max_elements: int):
        super().__init__()
        self.file = file
        self.max_elements = max_elements
        self.count = 0
        self.stack: list[Element] = []
        self.root: Element | None = None
        self._locator = None

    def setDocumentLocator(self, locator) -> None:  # noqa: N802 (SAX API name)
        self._locator = locator

    def _pos(self) -> tuple[int, int]:
        if self._locator is None:
            return 0, 0
        return int(self._locator.getLineNumber() or 0), int(self._locator.getColumnNumber() or 0) + 1

    def startElement(self, name, attrs) -> None:  # noqa: N802
        self.count += 1
        line, col = self._pos()
        if self.count > self.max_elements:
            raise NNEFXError(f"XML has more than {self.max_elements} elements; refusing to read it",
                             Location(self.file, line, col))
        if len(self.stack) >= MAX_DEPTH * 8:
            raise NNEFXError("XML nesting is too deep", Location(self.file, line, col))
        el = Element(name, {k: attrs[k] for k in attrs.keys()}, line, col)
        if self.stack:
            self.stack[-1].children.append(el)
        else:
            self.root = el
        self.stack.append(el)

    def endElement(self, name) -> None:  # noqa: N802
        self.stack.pop()

    def characters(self, content) -> None:
        if self.stack:
            el = self.stack[-1]
            if len(el.text) < 4096:  # only <dim> texts matter; never accumulate without bound
                el.text += content


def parse_xml(data: bytes, file: str | None = None, *, max_elements: int = MAX_ELEMENTS) -> Element:
    """Parse XML bytes into an :class:`Element` tree, refusing DTDs, entities and externals."""
    from xml.sax import SAXParseException

    import defusedxml
    import defusedxml.sax

    handler = _TreeBuilder(file, max_elements)
    try:
        defusedxml.sax.parseString(data, handler, forbid_dtd=True, forbid_entities=True,
                                   forbid_external=True)
    except NNEFXError:
        raise
    except defusedxml.DTDForbidden:
        raise NNEFXError("XML document type declarations (DTD) are not allowed in IR files",
                         Location(file, *handler._pos())) from None
    except defusedxml.EntitiesForbidden:
        raise NNEFXError("XML entity declarations are not allowed in IR files",
                         Location(file, *handler._pos())) from None
    except defusedxml.ExternalReferenceForbidden:
        raise NNEFXError("external references are not allowed in IR files",
                         Location(file, *handler._pos())) from None
    except defusedxml.DefusedXmlException as exc:
        raise NNEFXError(f"refused XML construct: {exc}", Location(file, *handler._pos())) from None
    except SAXParseException as exc:
        raise NNEFXError(f"malformed XML: {exc.getMessage()}",
                         Location(file, exc.getLineNumber(), (exc.getColumnNumber() or 0) + 1)) from None
    except (ValueError, UnicodeError) as exc:
        raise NNEFXError(f"malformed XML: {exc}", Location(file)) from None
    if handler.root is None:
        raise NNEFXError("empty XML document", Location(file))
    return handler.root


def read_xml_file(path: str, *, max_bytes: int = MAX_XML_BYTES, max_elements: int = MAX_ELEMENTS) -> Element:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise NNEFXError(f"cannot read IR file: {exc.strerror}", Location(path)) from None
    if size > max_bytes:
        raise NNEFXError(f"IR XML file is {size} bytes, more than the limit of {max_bytes}",
                         Location(path))
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise NNEFXError(f"cannot read IR file: {exc.strerror}", Location(path)) from None
    return parse_xml(data, path, max_elements=max_elements)


# --- records ---------------------------------------------------------------------------------


def _int(text: str | None, what: str, loc: Location) -> int:
    if text is None:
        raise NNEFXError(f"missing {what}", loc)
    try:
        return int(text.strip())
    except ValueError:
        raise NNEFXError(f"{what} must be an integer, got '{text}'", loc) from None


def _dim(text: str, loc: Location) -> int | None:
    t = text.strip()
    if t in ("?", "-1") or ".." in t:  # "1..10": an interval, dynamic for our purposes
        return None
    try:
        v = int(t)
    except ValueError:
        raise NNEFXError(f"dimension must be an integer or '?', got '{t}'", loc) from None
    if v < 0:
        raise NNEFXError(f"dimension must not be negative (got {v}; -1 means dynamic)", loc)
    return v


def _ports(el: Element | None, file: str | None, where: str) -> list[Port]:
    if el is None:
        return []
    ports = []
    seen: set[int] = set()
    for p in el.findall("port"):
        loc = Location(file, p.line, p.column, where)
        pid = _int(p.attrib.get("id"), "port id", loc)
        if pid in seen:
            raise NNEFXError(f"port id {pid} appears twice", loc)
        seen.add(pid)
        dims_el = p.findall("dim")
        dims = tuple(_dim(d.text, loc) for d in dims_el)
        names_text = p.attrib.get("names")
        names = _split_names(names_text) if names_text else []
        ports.append(Port(pid, dims, p.attrib.get("precision"), names, p.line))
    return ports


def _split_names(text: str) -> list[str]:
    """Port ``names`` are comma-separated; a literal comma inside a name is written ``\\,``."""
    out, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == ",":
            cur.append(",")
            i += 2
            continue
        if ch == ",":
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur).strip())
    return [n for n in out if n]


def _blob(el: Element, file: str | None, where: str) -> Blob:
    loc = Location(file, el.line, el.column, where)
    offset = _int(el.attrib.get("offset"), f"<{el.tag}> offset", loc)
    size = _int(el.attrib.get("size"), f"<{el.tag}> size", loc)
    if offset < 0 or size < 0:
        raise NNEFXError(f"<{el.tag}> offset and size must not be negative", loc)
    return Blob(el.tag, offset, size, el.attrib.get("precision"), el.line)


def _edge(el: Element, file: str | None, where: str = "edges", ports_optional: bool = False) -> Edge:
    """An edge; back edges of opset TensorIterator/Loop name only layers (Result -> Parameter)."""
    loc = Location(file, el.line, el.column, where)

    def port(key: str) -> int:
        if ports_optional and key not in el.attrib:
            return 0
        return _int(el.attrib.get(key), f"edge {key}", loc)

    return Edge(_int(el.attrib.get("from-layer"), "edge from-layer", loc), port("from-port"),
                _int(el.attrib.get("to-layer"), "edge to-layer", loc), port("to-port"), el.line)


def _layer(el: Element, file: str | None, depth: int, version: int = 0) -> Layer:
    loc = Location(file, el.line, el.column, "layer")
    lid = _int(el.attrib.get("id"), "layer id", loc)
    name = el.attrib.get("name", str(lid))
    ltype = el.attrib.get("type")
    if not ltype:
        raise NNEFXError("layer has no type", Location(file, el.line, el.column, f"layer {lid} '{name}'"))
    where = f"layer {lid} '{name}' ({ltype})"
    data_el = el.find("data")
    data = dict(data_el.attrib) if data_el is not None else {}
    blobs: dict[str, Blob] = {}
    blobs_el = el.find("blobs")
    for b in (blobs_el.children if blobs_el is not None else []):
        blobs[b.tag] = _blob(b, file, where)
    for tag in ("weights", "biases"):  # the oldest form: directly inside the layer
        b = el.find(tag)
        if b is not None:
            blobs[tag] = _blob(b, file, where)
    layer = Layer(lid, name, ltype, el.attrib.get("version"), el.attrib.get("precision"), data,
                  _ports(el.find("input"), file, where), _ports(el.find("output"), file, where),
                  blobs, el.line, attrs=dict(el.attrib))
    for tag in ("then_body", "else_body"):
        branch = el.find(tag)
        if branch is not None:
            if depth >= MAX_DEPTH:
                raise NNEFXError("sub-network nesting is too deep", Location(file, el.line, el.column, where))
            layer.branches[tag] = _net(branch, file, depth + 1, version=version)
            pm = el.find(tag.replace("_body", "_port_map"))
            if pm is not None:
                layer.branch_maps[tag] = pm
    body = el.find("body")
    if body is not None:
        if depth >= MAX_DEPTH:
            raise NNEFXError("sub-network nesting is too deep", Location(file, el.line, el.column, where))
        layer.body = _net(body, file, depth + 1, version=version)  # bodies share the IR version
        layer.port_map = el.find("port_map")
        be = el.find("back_edges")
        layer.back_edges = [_edge(e, file, where, ports_optional=True)
                            for e in (be.findall("edge") if be is not None else [])]
    return layer


def _net(el: Element, file: str | None, depth: int, version: int | None) -> Net:
    layers_el = el.find("layers")
    layers = [_layer(x, file, depth, version or 0)
              for x in (layers_el.findall("layer") if layers_el is not None else [])]
    edges_el = el.find("edges")
    edges = [_edge(x, file) for x in (edges_el.findall("edge") if edges_el is not None else [])]
    return Net(el.attrib.get("name", "network"), version or 0, layers, edges, file, el.attrib.get("precision"))


def read_net(path: str, **limits) -> Net:
    """Read an IR ``.xml`` into a :class:`Net` (layers, ports, edges; nothing interpreted)."""
    root = read_xml_file(path, **limits)
    return net_from_root(root, path)


def net_from_root(root: Element, file: str | None) -> Net:
    if root.tag != "net":
        raise NNEFXError(f"not an IR file: root element is <{root.tag}>, expected <net>",
                         Location(file, root.line, root.column))
    loc = Location(file, root.line, root.column, "net")
    version = _int(root.attrib.get("version", "0"), "net version", loc)
    if version < 1 or version > 11:
        raise NNEFXError(f"unsupported IR version {version} (nnefx reads versions 1-11)", loc)
    if root.find("layers") is None:
        raise NNEFXError("IR file has no <layers>", loc)
    return _net(root, file, 0, version)
