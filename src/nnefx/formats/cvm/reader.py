"""CVM graph JSON + params -> nnefx :class:`Model`, validated as the runtime validates at load.

Order of checks (cvm.md §1.6): JSON structure; unique variable names, ``op_attrs`` per node,
operator names, attributes and input counts; storage ids (including the in-place rule);
entry shapes (1..6 dims, each 1..2^24, at most 2^30 items); precision list; version rules;
topological order; shape inference (the stored shapes must be exactly the inferred ones);
precision inference; then the params (names, shapes, dtypes, value ranges).

The graph is built so that the generic Session reproduces the runtime:

* variable ``data`` is an ``external`` input followed by ``cvm_cvm_clip(precision = p_data)``,
  the runtime's input saturation made explicit; every reader of ``data`` reads the clipped
  tensor;
* parameters are ``variable`` operations holding int32 data;
* operator node ``k`` becomes ``cvm_<func_name>`` with its attributes typed;
* ``heads`` become the graph outputs, in head order.

Every error carries a :class:`Location` with the file and the JSON node/field.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from ...diagnostics import Location, NNEFXError
from ...graph import Graph, Model, Operation, Tensor
from ...ops import registry
from ...ops.integer._int import alpha
from . import attrs as A
from .params import read_params
from .precision import infer_precisions

_TOP_KEYS = {"nodes", "heads", "attrs", "arg_nodes", "node_row_ptr", "version", "postprocess"}
_NODE_KEYS = {"op", "name", "inputs", "attrs", "precision"}
_NODE_ATTR_KEYS = {"func_name", "num_inputs", "num_outputs", "flatten_data", "op_attrs"}
_GRAPH_ATTRS = {"shape": "list_shape", "precision": "list_int", "op_attrs": "list_str",
                "storage_id": "list_int", "dltype": "list_str", "device_index": "list_int",
                "dtype": "list_int"}
_VERSIONS = ("cvm_1.0.0", "cvm_1.1.0")
MAX_JSON_BYTES = 256 * 2**20
_SUFFIX = re.compile(r"_\d+$")
# Backslash pairs scanned left to right: any escape but \" \\ \n \r \t is refused.
_ESCAPE = re.compile(r"\\(.)", re.S)


def _bad_escape(text: str) -> re.Match | None:
    for m in _ESCAPE.finditer(text):  # non-overlapping, left to right: a doubled backslash is one escape
        if m.group(1) not in '"\\nrt':
            return m
    return None


def _err(msg: str, file: str | None, field: str) -> NNEFXError:
    return NNEFXError(msg, Location(file, field=field))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _tensor_param_names(entry: registry.OpDef) -> tuple[list[str], list[str]]:
    """(tensor parameter names, result names) from the operation's NNEF declaration."""
    decl = entry.declaration
    head, _, results = decl.partition("->")
    params = re.findall(r"(\w+)\s*:\s*tensor<\w+>(\[\])?", head)
    outs = re.findall(r"(\w+)\s*:\s*tensor<", results)
    return [p[0] for p in params], outs


def _read_bytes(path: str, what: str) -> bytes:
    try:
        size = os.path.getsize(path)
        if size > MAX_JSON_BYTES and what == "graph":
            raise NNEFXError(f"graph JSON is too large ({size} bytes)", Location(path))
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise NNEFXError(f"cannot read {what} file: {exc.strerror or exc}", Location(path)) from None


def parse_json(text: bytes | str, file: str | None) -> dict[str, Any]:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NNEFXError(f"graph JSON is not UTF-8 ({exc.reason})", Location(file)) from None
    bad_escape = _bad_escape(text)
    if bad_escape is not None:
        line = text.count("\n", 0, bad_escape.start()) + 1
        col = bad_escape.start() - (text.rfind("\n", 0, bad_escape.start()) + 1) + 1
        raise NNEFXError(f"unsupported string escape '{bad_escape.group(0)}' (the runtime accepts only "
                         "\\\" \\\\ \\n \\r \\t)", Location(file, line, col))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NNEFXError(f"malformed JSON: {exc.msg}", Location(file, exc.lineno, exc.colno)) from None
    except RecursionError:
        raise NNEFXError("malformed JSON: nested too deeply", Location(file)) from None
    if not isinstance(doc, dict):
        raise _err("graph JSON must be an object", file, "top level")
    return doc


def _graph_attr(attrs: dict, key: str, file, required: bool = True) -> list | None:
    if key not in attrs:
        if required:
            raise _err(f"missing graph attribute '{key}'", file, "attrs")
        return None
    v = attrs[key]
    tag = _GRAPH_ATTRS[key]
    if not (isinstance(v, list) and len(v) == 2 and v[0] == tag and isinstance(v[1], list)):
        raise _err(f"graph attribute '{key}' must be [\"{tag}\", [...]]", file, f"attrs.{key}")
    return v[1]


def _entry_ref(ref: Any, file, field: str) -> tuple[int, int]:
    if not (isinstance(ref, list) and len(ref) in (2, 3) and all(_is_int(v) for v in ref)):
        raise _err("entry reference must be [node_id, output_index(, version)]", file, field)
    return ref[0], ref[1]


_NNEF_KEYWORDS = {"version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical",
                  "string", "true", "false", "for", "in", "if", "else", "yield", "length_of", "shape_of",
                  "range_of"}


class _Names:
    """NNEF-identifier tensor names, unique within the graph."""

    def __init__(self):
        self.used: set[str] = set()

    def take(self, name: str) -> str:
        base = re.sub(r"\W", "_", name) or "t"
        if not re.match(r"[A-Za-z_]", base):
            base = "t_" + base
        if base in _NNEF_KEYWORDS:
            base += "_"
        cand, k = base, 1
        while cand in self.used:
            cand = f"{base}_{k}"
            k += 1
        self.used.add(cand)
        return cand


def load_graph_json(doc: dict[str, Any], file: str | None, name: str = "cvm") -> tuple[Model, dict]:
    """Validate the JSON document and build the model (without params data)."""
    for key in doc:
        if key not in _TOP_KEYS:
            raise _err(f"unknown top-level key '{key}'", file, key)
    for key in ("nodes", "heads", "attrs"):
        if key not in doc:
            raise _err(f"missing top-level key '{key}'", file, "top level")
    version = doc.get("version", "cvm_1.0.0")
    if version not in _VERSIONS:
        raise _err(f"unsupported version '{version}' (expected {' or '.join(_VERSIONS)})", file, "version")
    postprocess = doc.get("postprocess", "")
    if not isinstance(postprocess, str):
        raise _err("postprocess must be a string", file, "postprocess")
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise _err("nodes must be a non-empty array", file, "nodes")
    gattrs = doc["attrs"]
    if not isinstance(gattrs, dict):
        raise _err("attrs must be an object", file, "attrs")
    for key in gattrs:
        if key not in _GRAPH_ATTRS:
            raise _err(f"unknown graph attribute '{key}'", file, f"attrs.{key}")

    # -- 1. nodes: structure, operator names, attributes, arity ---------------------------------
    parsed = []  # (kind, name, inputs[(nid, idx)], runtime op or None, attribs)
    var_names: set[str] = set()
    op_attrs = _graph_attr(gattrs, "op_attrs", file)
    if len(op_attrs) != len(nodes):
        raise _err(f"op_attrs has {len(op_attrs)} entries for {len(nodes)} nodes", file, "attrs.op_attrs")
    for nid, node in enumerate(nodes):
        where = f"nodes[{nid}]"
        if not isinstance(node, dict):
            raise _err("node must be an object", file, where)
        for key in node:
            if key not in _NODE_KEYS:
                raise _err(f"unknown node key '{key}'", file, where)
        kind, nname = node.get("op"), node.get("name")
        if kind not in ("null", "cvm_op"):
            raise _err(f"node op must be \"null\" or \"cvm_op\", got {kind!r}", file, where + ".op")
        if not isinstance(nname, str):
            raise _err("node name must be a string", file, where + ".name")
        where = f"nodes[{nid}] '{nname}'"
        inputs = node.get("inputs", [])
        if not isinstance(inputs, list):
            raise _err("inputs must be an array", file, where + ".inputs")
        refs = [_entry_ref(r, file, f"{where}.inputs[{k}]") for k, r in enumerate(inputs)]
        if kind == "null":
            if refs:
                raise _err("a variable node has no inputs", file, where + ".inputs")
            if nname in var_names:
                raise _err(f"variable name '{nname}' is used twice", file, where + ".name")
            var_names.add(nname)
            parsed.append(("null", nname, [], None, {}))
            continue
        nattrs = node.get("attrs")
        if not isinstance(nattrs, dict):
            raise _err("operator node needs an 'attrs' object with 'func_name'", file, where + ".attrs")
        for key, value in nattrs.items():
            if key not in _NODE_ATTR_KEYS:
                raise _err(f"unknown node attribute '{key}'", file, f"{where}.attrs.{key}")
            if not isinstance(value, str):
                raise _err(f"node attribute '{key}' must be a JSON string", file, f"{where}.attrs.{key}")
        if "func_name" not in nattrs:
            raise _err("operator node needs attrs.func_name", file, where + ".attrs")
        rt = _SUFFIX.sub("", nattrs["func_name"])
        if rt not in A.SCHEMAS:
            raise _err(f"unknown operator '{nattrs['func_name']}'", file, where + ".attrs.func_name")
        text = op_attrs[nid]
        field = f"attrs.op_attrs[{nid}] ('{nname}')"
        if not isinstance(text, str):
            raise _err("operator attributes must be a JSON object text", file, field)
        try:
            raw = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise _err(f"operator attributes are not valid JSON: {exc}", file, field) from None
        if not isinstance(raw, dict):
            raise _err("operator attributes must be a JSON object", file, field)
        try:
            attribs = A.parse_attrs(rt, raw)
        except ValueError as exc:
            raise _err(str(exc), file, field) from None
        need = A.expected_inputs(rt, attribs)
        if (need is None and not refs) or (need is not None and len(refs) != need):
            raise _err(f"operator '{rt}' takes {need if need is not None else 'at least 1'} inputs, "
                       f"got {len(refs)}", file, where + ".inputs")
        parsed.append(("op", nname, refs, rt, attribs))

    # -- entries --------------------------------------------------------------------------------
    row_ptr = [0]
    for kind, _, _, rt, _ in parsed:
        row_ptr.append(row_ptr[-1] + (1 if kind == "null" else A.num_outputs(rt)))
    n_entries = row_ptr[-1]
    arg_nodes = [i for i, p in enumerate(parsed) if p[0] == "null"]
    if version == "cvm_1.0.0":
        for key, expect in (("arg_nodes", arg_nodes), ("node_row_ptr", row_ptr)):
            if key not in doc:
                raise _err(f"missing '{key}' (required by {version})", file, key)
            if doc[key] != expect:
                raise _err(f"'{key}' is {doc[key]!r}, the nodes give {expect!r}", file, key)

    # -- storage ids, shapes, precisions, dltype --------------------------------------------------
    storage = _graph_attr(gattrs, "storage_id", file)
    if len(storage) != n_entries or not all(_is_int(s) and s >= 0 for s in storage):
        raise _err(f"storage_id must list {n_entries} non-negative ints", file, "attrs.storage_id")
    shapes_raw = _graph_attr(gattrs, "shape", file)
    if len(shapes_raw) != n_entries:
        raise _err(f"shape lists {len(shapes_raw)} entries, the graph has {n_entries}", file, "attrs.shape")
    shapes = []
    for e, s in enumerate(shapes_raw):
        if not (isinstance(s, list) and 1 <= len(s) <= 6 and all(_is_int(d) and 1 <= d <= 2**24 for d in s)):
            raise _err(f"entry {e} shape {s!r} must have 1..6 dims, each 1..2^24", file, f"attrs.shape[{e}]")
        if int(np.prod(s, dtype=object)) > 2**30:
            raise _err(f"entry {e} shape {s!r} has more than 2^30 items", file, f"attrs.shape[{e}]")
        shapes.append(tuple(s))
    precs_raw = _graph_attr(gattrs, "precision", file)
    if len(precs_raw) != n_entries or not all(_is_int(p) and (p == -1 or 1 <= p <= 32) for p in precs_raw):
        raise _err(f"precision must list {n_entries} values, each -1 or 1..32", file, "attrs.precision")
    dev = _graph_attr(gattrs, "device_index", file, required=False)
    if dev:
        raise _err("device_index must be empty", file, "attrs.device_index")
    dltype = _graph_attr(gattrs, "dltype", file, required=version == "cvm_1.0.0")
    if dltype is not None and (len(dltype) != n_entries or any(t != "int32" for t in dltype)):
        raise _err(f"dltype must list {n_entries} times \"int32\"", file, "attrs.dltype")

    slot_bytes: dict[int, int] = {}
    for e, sid in enumerate(storage):
        nbytes = 4 * int(np.prod(shapes[e], dtype=object))
        slot_bytes[sid] = max(slot_bytes.get(sid, 0), nbytes)
    if sum(slot_bytes.values()) > 2**32:
        raise _err("the storage plan needs more than 2^32 bytes", file, "attrs.storage_id")

    # -- topological order, in-place rule ----------------------------------------------------------
    for nid, (kind, nname, refs, rt, _) in enumerate(parsed):
        for k, (src, idx) in enumerate(refs):
            field = f"nodes[{nid}] '{nname}'.inputs[{k}]"
            if not 0 <= src < len(parsed) or not 0 <= idx < row_ptr[src + 1] - row_ptr[src]:
                raise _err(f"input [{src}, {idx}] names no entry", file, field)
            if row_ptr[src] + idx >= row_ptr[nid]:
                raise _err(f"input [{src}, {idx}] is not computed before node {nid}", file, field)
        if kind == "op" and rt not in A.INPLACE:
            ins = {storage[row_ptr[s] + i] for s, i in refs}
            for e in range(row_ptr[nid], row_ptr[nid + 1]):
                if storage[e] in ins:
                    raise _err(f"output storage_id {storage[e]} is shared with an input of a "
                               f"'{rt}' operator (not in-place)", file, f"attrs.storage_id[{e}]")

    heads_raw = doc["heads"]
    if not isinstance(heads_raw, list) or not heads_raw:
        raise _err("heads must be a non-empty array", file, "heads")
    heads = [_entry_ref(h, file, f"heads[{k}]") for k, h in enumerate(heads_raw)]
    for k, (src, idx) in enumerate(heads):
        if not 0 <= src < len(parsed) or not 0 <= idx < row_ptr[src + 1] - row_ptr[src]:
            raise _err(f"head [{src}, {idx}] names no entry", file, f"heads[{k}]")

    # -- build the graph, checking shapes op by op -----------------------------------------------
    names = _Names()
    g = Graph(name)
    entry_name: dict[int, str] = {}
    known_prec: dict[str, int] = {}
    saturated: dict[str, str] = {}
    variables: dict[str, tuple[str, tuple, int]] = {}
    for nid, (kind, nname, refs, rt, attribs) in enumerate(parsed):
        loc = Location(file, field=f"nodes[{nid}] '{nname}'")
        e = row_ptr[nid]
        if kind == "null":
            p = precs_raw[e]
            if p == -1:
                raise NNEFXError(f"variable '{nname}' has no precision (-1)", loc)
            tname = names.take(nname)
            g.tensors[tname] = Tensor(tname, "integer", shapes[e])
            known_prec[tname] = p
            if nname == "data":
                g.inputs.append(tname)
                g.operations.append(Operation("external", {}, {"output": tname},
                                              {"shape": list(shapes[e])}, dtype="integer", location=loc))
                sat = names.take(nname + "_saturated")
                g.tensors[sat] = Tensor(sat, "integer", shapes[e])
                g.operations.append(Operation("cvm_cvm_clip", {"x": tname}, {"y": sat}, {"precision": p},
                                              location=loc))
                saturated[tname] = sat
                entry_name[e] = sat
            else:
                g.operations.append(Operation("variable", {}, {"output": tname},
                                              {"shape": list(shapes[e]), "label": nname}, dtype="integer",
                                              location=loc))
                variables[nname] = (tname, shapes[e], p)
                entry_name[e] = tname
            continue
        opname = "cvm_" + rt
        entry = registry.get(opname)
        pnames, rnames = _tensor_param_names(entry)
        in_names = [entry_name[row_ptr[s] + i] for s, i in refs]
        in_shapes = [shapes[row_ptr[s] + i] for s, i in refs]
        nattribs = A.to_nnefx(rt, attribs)
        if rt == "concatenate":
            inputs: dict[str, Any] = {pnames[0]: in_names}
            shape_args: list[Any] = [in_shapes]
        else:
            inputs = dict(zip(pnames, in_names, strict=False))
            shape_args = list(in_shapes)
            if rt in ("conv2d", "dense") and not attribs.get("use_bias", True):
                inputs[pnames[2]] = 0
        try:
            inferred = entry.infer(shape_args, nattribs)
        except NNEFXError as exc:
            raise NNEFXError(exc.message, loc) from None
        inferred = list(inferred[0]) if A.num_outputs(rt) > 1 and isinstance(inferred[0], list) else list(inferred)
        outputs = {}
        for k, rname in enumerate(rnames):
            stored = shapes[e + k]
            if tuple(inferred[k]) != stored:
                raise NNEFXError(f"operator '{rt}': stored shape {list(stored)} of output {k} differs "
                                 f"from the inferred {list(inferred[k])}", loc)
            tname = names.take(nname if k == 0 else f"{nname}_{rname}")
            g.tensors[tname] = Tensor(tname, "integer", stored)
            outputs[rname] = tname
            entry_name[e + k] = tname
        g.operations.append(Operation(opname, inputs, outputs, nattribs, location=loc))
    g.outputs = [entry_name[row_ptr[s] + i] for s, i in heads]
    g.validate_structure()

    # -- precisions ---------------------------------------------------------------------------------
    prec = infer_precisions(g, known_prec)
    info = {
        "version": version,
        "postprocess": postprocess,
        "precision": prec,
        "output_precision": max(prec[n] for n in g.outputs),
        "saturated": saturated,
        "storage_id": list(storage),
    }
    # int32 storage: the session then feeds and checks int32 arrays, as the runtime does.
    extras = {"cvm": info, "storage": {"integer": "int32"}}
    return Model(g, format="cvm", source=file, extras=extras), variables


def attach_params(model: Model, variables: dict[str, tuple[str, tuple, int]],
                  params: dict[str, np.ndarray], file: str | None) -> None:
    """Check the params against the graph (names, shapes, ranges) and store them as data."""
    for pname, arr in params.items():
        field = f"params '{pname}'"
        if pname == "data":
            continue  # accepted and overwritten by the input, as in the runtime
        if pname not in variables:
            raise _err(f"parameter '{pname}' is not a variable of the graph", file, field)
        tname, shape, p = variables[pname]
        if tuple(arr.shape) != tuple(shape):
            raise _err(f"parameter '{pname}' has shape {list(arr.shape)}, the graph says {list(shape)}",
                       file, field)
        a = alpha(p)
        if arr.size and (int(arr.min()) < -a or int(arr.max()) > a):
            raise _err(f"parameter '{pname}' holds values outside its precision {p} "
                       f"([{-a}, {a}]; params are not saturated)", file, field)
        model.graph.tensors[tname].data = arr
    for pname, (tname, _, _) in variables.items():
        if model.graph.tensors[tname].data is None:
            raise _err(f"variable '{pname}' is not supplied by the params", file, f"params '{pname}'")


def load(path: str, *, params: str | None = None, json_text: str | bytes | None = None,
         params_bytes: bytes | None = None) -> Model:
    """Read ``path`` (graph JSON) and its params (``params=`` or ``<stem>.params`` beside it)."""
    text = json_text if json_text is not None else _read_bytes(path, "graph")
    doc = parse_json(text, path)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0]) or "cvm"
    if not re.match(r"[A-Za-z_]", stem):
        stem = "g_" + stem  # graph names are NNEF identifiers
    model, variables = load_graph_json(doc, path, stem)
    ppath = params
    if params_bytes is None:
        if ppath is None:
            guess = os.path.splitext(path)[0] + ".params"
            ppath = guess if os.path.exists(guess) else None
        if ppath is not None:
            params_bytes = _read_bytes(ppath, "params")
            model.extras["cvm"]["params_file"] = ppath
    if params_bytes is None:
        if variables:
            raise NNEFXError(f"the graph has parameters ({', '.join(sorted(variables))}) but no params file "
                             "was given (--params FILE)", Location(path))
        return model
    values = read_params(params_bytes, ppath)
    attach_params(model, variables, values, ppath)
    return model
