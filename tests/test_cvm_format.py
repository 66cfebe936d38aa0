"""CVM model format: every malformed or refused model gives an NNEFXError with a location
(file + JSON node/field, or line/column for JSON syntax), never a traceback."""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnefx
from nnefx import NNEFXError
from nnefx.cli import main
from nnefx.formats.cvm import read_params, write_params

FIX = Path(__file__).parent / "fixtures" / "cvm"


def _doc(name):
    return json.loads((FIX / f"{name}.json").read_text())


def _write(tmp_path, doc, params=None, name="m"):
    path = tmp_path / f"{name}.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    ppath = tmp_path / f"{name}.params"
    if params is not None:
        ppath.write_bytes(params)
    return str(path), str(ppath) if params is not None else None


def _refused(tmp_path, doc, params=None, match=None, field=None):
    path, ppath = _write(tmp_path, doc, params)
    with pytest.raises(NNEFXError, match=match) as info:
        nnefx.load(path, params=ppath)
    loc = info.value.location
    assert loc is not None and loc.file is not None
    if field is not None:
        assert loc.field is not None and field in loc.field, loc
    return info.value


def _op_attrs(doc):
    return doc["attrs"]["op_attrs"][1]


PARAMS01 = (FIX / "ex01_conv_pool_dense.params").read_bytes()


# --- JSON structure --------------------------------------------------------------------------

def test_malformed_json_reports_line_and_column(tmp_path):
    path, _ = _write(tmp_path, '{"nodes": [\n  {"op": "null",, }]}')
    with pytest.raises(NNEFXError, match="malformed JSON") as info:
        nnefx.load(path)
    assert info.value.location.line == 2 and info.value.location.column is not None


def test_unknown_top_level_key(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["extra"] = 1
    _refused(tmp_path, doc, match="unknown top-level key 'extra'", field="extra")


def test_unknown_node_key_and_bad_op_kind(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][1]["foo"] = 1
    _refused(tmp_path, doc, match="unknown node key 'foo'", field="nodes[1]")
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][1]["op"] = "tvm_op"
    _refused(tmp_path, doc, match="null", field="nodes[1].op")


def test_unknown_operator_names_the_node(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][2]["attrs"]["func_name"] = "softmax"
    _refused(tmp_path, doc, match="unknown operator 'softmax'", field="nodes[2]")


def test_func_name_digit_suffix_is_stripped(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][3]["attrs"]["func_name"] = "negative_17"
    path, _ = _write(tmp_path, doc)
    assert nnefx.load(path).graph.operations[4].op == "cvm_negative"


def test_unknown_attribute_is_refused_but_hidden_ones_are_ignored(tmp_path):
    doc = _doc("ex04_reduce_chain")
    _op_attrs(doc)[2] = '{"shift_bit": "3", "precision": "8", "rounding": "up"}'
    _refused(tmp_path, doc, match="unknown attribute 'rounding'", field="op_attrs[2]")
    _op_attrs(doc)[2] = '{"shift_bit": "3", "precision": "8", "__hidden__": "x"}'
    path, _ = _write(tmp_path, doc)
    nnefx.load(path)


def test_attribute_values_must_be_strings_of_the_right_type(tmp_path):
    doc = _doc("ex04_reduce_chain")
    _op_attrs(doc)[2] = '{"shift_bit": 3, "precision": "8"}'
    _refused(tmp_path, doc, match="must be a string", field="op_attrs[2]")
    _op_attrs(doc)[2] = '{"shift_bit": "2.0", "precision": "8"}'
    _refused(tmp_path, doc, match="expected an integer", field="op_attrs[2]")
    _op_attrs(doc)[2] = '{"precision": "8"}'
    _refused(tmp_path, doc, match="needs attribute 'shift_bit'", field="op_attrs[2]")


def test_attribute_ranges_are_checked_at_load(tmp_path):
    doc = _doc("ex04_reduce_chain")
    _op_attrs(doc)[2] = '{"shift_bit": "33", "precision": "8"}'
    err = _refused(tmp_path, doc, match="shift_bit", field="nodes[2]")
    assert "33" in err.message
    doc = _doc("ex04_reduce_chain")
    _op_attrs(doc)[1] = '{"axis": "(-1, 2)"}'
    _refused(tmp_path, doc, match="repeats an axis", field="nodes[1]")


def test_wrong_input_count(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][3]["inputs"].append([0, 0, 0])
    _refused(tmp_path, doc, match="takes 1 inputs, got 2", field="nodes[3]")


def test_stored_shape_must_equal_inferred(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["attrs"]["shape"][1][1] = [3, 5]
    _refused(tmp_path, doc, match="differs from the inferred", field="nodes[1]")


def test_shape_limits(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["attrs"]["shape"][1][0] = [3, 4, 5, 1, 1, 1, 1]
    _refused(tmp_path, doc, match="1..6 dims", field="attrs.shape[0]")


def test_row_ptr_and_arg_nodes_are_checked_for_version_1_0(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["node_row_ptr"] = [0, 1, 2, 3, 4, 6]
    _refused(tmp_path, doc, match="node_row_ptr", field="node_row_ptr")
    doc["version"] = "cvm_1.1.0"  # recomputed, not read
    path, _ = _write(tmp_path, doc)
    nnefx.load(path)
    doc["version"] = "cvm_2.0"
    _refused(tmp_path, doc, match="unsupported version", field="version")


def test_inputs_must_come_before_their_consumer(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][2]["inputs"] = [[3, 0, 0]]
    _refused(tmp_path, doc, match="not computed before", field="nodes[2]")


def test_storage_sharing_only_for_in_place_operators(tmp_path):
    doc = _doc("ex04_reduce_chain")
    sid = doc["attrs"]["storage_id"][1]
    sid[1] = sid[0]  # sum may not write into its input's storage
    _refused(tmp_path, doc, match="not in-place", field="storage_id[1]")
    doc = _doc("ex04_reduce_chain")
    sid = doc["attrs"]["storage_id"][1]
    sid[2:5] = [0, 1, 0]  # cvm_right_shift may write into its input's storage
    path, _ = _write(tmp_path, doc)
    nnefx.load(path)


def test_precision_list_values(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["attrs"]["precision"][1][0] = -1
    _refused(tmp_path, doc, match="no precision", field="nodes[0]")
    doc["attrs"]["precision"][1][0] = 33
    _refused(tmp_path, doc, match="each -1 or 1..32", field="attrs.precision")


def test_heads_must_name_entries(tmp_path):
    doc = _doc("ex04_reduce_chain")
    doc["heads"] = [[9, 0, 0]]
    _refused(tmp_path, doc, match="names no entry", field="heads[0]")
    doc["heads"] = []
    _refused(tmp_path, doc, match="non-empty", field="heads")


# --- precision refusals (the runtime's overflow guard) ----------------------------------------

def test_conv_input_above_8_bits_is_refused(tmp_path):
    doc = _doc("ex01_conv_pool_dense")
    doc["attrs"]["precision"][1][0] = 9
    _refused(tmp_path, doc, PARAMS01, match="at most 8 bits", field="nodes[3]")


def test_clip_to_int32_max_needs_33_bits_and_is_refused(tmp_path):
    doc = _doc("ex13_clip_family")
    i = next(k for k, n in enumerate(doc["nodes"]) if n.get("attrs", {}).get("func_name") == "clip")
    _op_attrs(doc)[i] = '{"a_min": "3", "a_max": "2147483647"}'
    params = (FIX / "ex13_clip_family.params").read_bytes()
    _refused(tmp_path, doc, params, match="33 bits", field=f"nodes[{i}]")


def test_left_shift_past_32_bits_is_refused(tmp_path):
    doc = _doc("ex11_shift_roundtrip")
    _op_attrs(doc)[1] = '{"shift_bit": "21", "precision": "20"}'
    _refused(tmp_path, doc, match="exceeds 32 bits", field="nodes[1]")


def test_ceil_mode_window_starting_in_padding_is_refused(tmp_path):
    doc = _doc("ex01_conv_pool_dense")
    # pool input is (1, 4, 7, 7): pool 2, stride 3, padding 1, ceil -> last window starts at 7
    _op_attrs(doc)[6] = '{"strides": "(3, 3)", "pool_size": "(2, 2)", "padding": "1", "ceil_mode": "True"}'
    _refused(tmp_path, doc, PARAMS01, match="ceil_mode", field="nodes[6]")


# --- params ---------------------------------------------------------------------------------

def test_params_junk_tail_is_ignored(tmp_path):
    doc = _doc("ex01_conv_pool_dense")
    path, ppath = _write(tmp_path, doc, PARAMS01 + b"\x07" * 100)
    assert nnefx.load(path, params=ppath).weights["d_b"].shape == (5,)


def test_params_roundtrip_through_writer():
    values = read_params(PARAMS01)
    again = read_params(write_params(values))
    assert list(again) == list(values)
    for k in values:
        np.testing.assert_array_equal(again[k], values[k])


def test_params_lying_nbytes_is_refused(tmp_path):
    blob = bytearray(write_params({"c_w": np.zeros((4, 3, 3, 3), np.int32)}))
    pos = blob.index(struct.pack("<q", 4 * 108))
    blob[pos:pos + 8] = struct.pack("<q", 4 * 108 + 4)
    with pytest.raises(NNEFXError, match="does not match shape") as info:
        read_params(bytes(blob), "p.params")
    assert "nbytes" in info.value.location.field


def test_params_truncated_and_lying_counts_are_refused():
    with pytest.raises(NNEFXError, match="truncated"):
        read_params(PARAMS01[:200], "p.params")
    blob = bytearray(PARAMS01)
    blob[16:24] = struct.pack("<Q", 2**40)
    with pytest.raises(NNEFXError, match="more than the file can hold"):
        read_params(bytes(blob), "p.params")
    with pytest.raises(NNEFXError, match="bad list magic"):
        read_params(b"\0" * 40, "p.params")


def test_params_must_match_graph(tmp_path):
    doc = _doc("ex01_conv_pool_dense")
    values = read_params(PARAMS01)
    bad = dict(values, c_b=np.zeros((5,), np.int32))
    _refused(tmp_path, doc, write_params(bad), match="has shape", field="params 'c_b'")
    bad = dict(values, extra=np.zeros((1,), np.int32))
    _refused(tmp_path, doc, write_params(bad), match="not a variable", field="params 'extra'")
    bad = {k: v for k, v in values.items() if k != "d_w"}
    _refused(tmp_path, doc, write_params(bad), match="not supplied", field="params 'd_w'")
    bad = dict(values, c_w=np.full((4, 3, 3, 3), 128, np.int32))  # precision 8 holds +-127
    _refused(tmp_path, doc, write_params(bad), match="outside its precision", field="params 'c_w'")


def test_missing_params_file_is_an_error(tmp_path):
    doc = _doc("ex01_conv_pool_dense")
    path, _ = _write(tmp_path, doc)
    with pytest.raises(NNEFXError, match="no params file"):
        nnefx.load(path)


def test_cli_reports_located_error_and_exit_1(tmp_path, capsys):
    doc = _doc("ex04_reduce_chain")
    doc["nodes"][2]["attrs"]["func_name"] = "softmax"
    path, _ = _write(tmp_path, doc)
    assert main(["check", path]) == 1
    err = capsys.readouterr().err
    assert err.startswith(path) and "nodes[2]" in err and "Traceback" not in err


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(nodes="x"),
    lambda d: d.update(heads=[["a", 0]]),
    lambda d: d["attrs"].update(shape=["list_int", []]),
    lambda d: d["attrs"]["op_attrs"][1].pop(),
    lambda d: d["attrs"]["op_attrs"][1].__setitem__(1, "{not json"),
    lambda d: d["attrs"]["op_attrs"][1].__setitem__(1, "[1]"),
    lambda d: d["nodes"][1].update(attrs={"func_name": 5}),
    lambda d: d["nodes"][1].update(inputs=[[0]]),
    lambda d: d["attrs"].update(device_index=["list_int", [0]]),
    lambda d: d["attrs"]["dltype"][1].__setitem__(0, "float32"),
])
def test_hostile_documents_never_raise_anything_else(tmp_path, mutate):
    doc = copy.deepcopy(_doc("ex04_reduce_chain"))
    mutate(doc)
    path, _ = _write(tmp_path, doc)
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path)
    assert info.value.location is not None


# --- builder (generated networks) ---------------------------------------------------------------

def test_generated_resnet_like_network_loads_and_backends_agree(tmp_path):
    from nnefx.formats.cvm import model_cost
    from nnefx.formats.cvm.builder import resnet_like

    text, params = resnet_like(channels=4, blocks=1, size=6, classes=3)
    path, ppath = _write(tmp_path, text, params, name="resnet_like")
    model = nnefx.load(path, params=ppath)
    assert model.extras["cvm"]["output_precision"] == 8 + 8 + 6  # dense: 8 + 8 + bitlen(K = 36)
    x = np.random.default_rng(0).integers(-200, 200, (1, 3, 6, 6)).astype(np.int32)  # saturated
    a = nnefx.Session(model, backend="formal").run({"data": x})
    b = nnefx.Session(model, backend="fast").run({"data": x})
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert model_cost(model) > 0


def test_json_escapes_beyond_the_runtimes_are_refused(tmp_path):
    text = (FIX / "ex04_reduce_chain.json").read_text().replace('"name": "sum_0"', '"name": "s\\/um_0"')
    path, _ = _write(tmp_path, text)
    with pytest.raises(NNEFXError, match=r"unsupported string escape '\\/'") as info:
        nnefx.load(path)
    assert info.value.location.line is not None
    ok = (FIX / "ex04_reduce_chain.json").read_text().replace('"name": "sum_0"', '"name": "s\\\\um_0"')
    path, _ = _write(tmp_path, ok)
    nnefx.load(path)


def test_options_of_other_formats_are_refused(tmp_path):
    with pytest.raises(NNEFXError, match="option 'dialect' does not apply"):
        nnefx.load(str(FIX / "ex04_reduce_chain.json"), dialect="final")


def test_load_from_memory():
    text = (FIX / "ex01_conv_pool_dense.json").read_text()
    model = nnefx.load("in_memory.json", json_text=text, params_bytes=PARAMS01)
    assert model.weights["d_w"].shape == (5, 36)


# --- fuzz: any mutation of a real document gives NNEFXError or a valid model, nothing else ---------

def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**33) | st.text(max_size=6)
    | st.sampled_from(["{}", "(1, 2)", "True", "-1", "list_int", "null", "cvm_op", "[0, 0, 0]"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=6)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(["ex01_conv_pool_dense", "ex03_gvc_nms", "ex06_transform_chain"]))
def test_fuzzed_documents_fail_cleanly(data, name):
    doc = _doc(name)
    paths = list(_paths(doc))[1:]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(_JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    params = (FIX / f"{name}.params").read_bytes()
    try:
        nnefx.load(f"{name}.json", json_text=json.dumps(doc), params_bytes=params)
    except NNEFXError as exc:
        assert exc.location is not None


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fuzzed_params_fail_cleanly(data):
    blob = bytearray(PARAMS01)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    blob = bytes(blob[: data.draw(st.integers(0, len(blob)))])
    text = (FIX / "ex01_conv_pool_dense.json").read_text()
    try:
        nnefx.load("m.json", json_text=text, params_bytes=blob)
    except NNEFXError as exc:
        assert exc.location is not None
