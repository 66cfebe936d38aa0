"""ONNX control flow (If, Loop, Scan, SequenceMap), sequences and optionals: read into bodies
filed in ``Graph.subgraphs``, run on both numpy backends through the planner's ``call`` hook,
written back as ONNX nodes, unrolled for NNEF/IR where static and refused (located) elsewhere.

Cross-checked against the ONNX backend node suite's own expected outputs and onnxruntime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

#: Node-suite cases of this family that nnefx runs (run-time Slice bounds inside a body, f16/i32
#: values included).
CASES = [
    "test_if", "test_if_seq", "test_if_opt", "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state",
    "test_scan9_scalar", "test_identity_sequence", "test_identity_opt", "test_sequence_insert_at_back",
    "test_sequence_insert_at_front", "test_split_to_sequence_1", "test_split_to_sequence_2",
    "test_split_to_sequence_nokeepdims", "test_sequence_map_identity_1_sequence",
    "test_sequence_map_identity_1_sequence_expanded", "test_sequence_map_identity_2_sequences",
    "test_sequence_map_identity_2_sequences_expanded", "test_sequence_map_identity_1_sequence_1_tensor",
    "test_sequence_map_identity_1_sequence_1_tensor_expanded", "test_sequence_map_add_2_sequences",
    "test_sequence_map_add_2_sequences_expanded", "test_sequence_map_add_1_sequence_1_tensor",
    "test_sequence_map_add_1_sequence_1_tensor_expanded", "test_optional_get_element_optional_tensor",
    "test_optional_get_element_tensor", "test_optional_get_element_optional_sequence",
    "test_optional_get_element_sequence", "test_optional_has_element_tensor_input",
    "test_optional_has_element_optional_input", "test_optional_has_element_empty_no_input_name_tensor_input",
    "test_optional_has_element_empty_no_input_tensor_input", "test_optional_has_element_empty_optional_input",
    "test_optional_has_element_empty_no_input_name_optional_input",
    "test_optional_has_element_empty_no_input_optional_input", "test_range_float_type_positive_delta_expanded",
    "test_linear_attention_linear_expanded", "test_linear_attention_gated_delta_gqa_expanded",
    "test_loop11", "test_loop13_seq", "test_loop16_seq_none", "test_linear_attention_fp16_expanded",
    "test_range_int32_type_negative_delta_expanded",
]


def _suite() -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        return {c.name: c for c in collect_testcases(None) if c.kind == "node" and c.name in CASES}


_CASES: dict = {}


def _case(name: str):
    if not _CASES:
        _CASES.update(_suite())
    return _CASES[name]


def _same(got, want, rtol=1e-5, atol=1e-6) -> None:
    if want is None:
        assert got is None
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w, rtol, atol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def _run(model_or_path, backend: str, inputs: list) -> list:
    model = nnefx.load(model_or_path) if isinstance(model_or_path, str) else model_or_path
    session = Session(model, backend)
    return list(session.run(dict(zip([i.name for i in session.inputs], inputs, strict=False))).values())


def _save(tmp_path, model, name="m.onnx") -> str:
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("name", CASES)
def test_node_suite_case_matches_its_expected_outputs(tmp_path, name, backend):
    case = _case(name)
    path = _save(tmp_path, case.model)
    for inputs, outputs in case.data_sets:
        got = _run(path, backend, list(inputs))
        assert len(got) == len(outputs)
        for g, w in zip(got, outputs, strict=True):
            _same(g, w, case.rtol, case.atol)


@pytest.mark.parametrize("name", ["test_if_seq", "test_if_opt", "test_scan9_multi_state", "test_split_to_sequence_2",
                                  "test_loop13_seq",
                                  "test_sequence_map_add_1_sequence_1_tensor_expanded",
                                  "test_optional_get_element_optional_sequence",
                                  "test_range_float_type_positive_delta_expanded"])
def test_onnx_written_back_runs_the_same_in_nnefx_and_onnxruntime(tmp_path, name):
    case = _case(name)
    model = nnefx.load(_save(tmp_path, case.model))
    out = str(tmp_path / "back.onnx")
    nnefx.save(model, out)
    written = onnx.load(out)
    assert {n.op_type for n in written.graph.node} & {"If", "Loop", "Scan", "SequenceMap", "SequenceConstruct",
                                                      "SplitToSequence", "OptionalGetElement", "SequenceLength"}
    sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    for inputs, outputs in case.data_sets:
        mine = _run(out, "fast", list(inputs))
        theirs = sess.run(None, dict(zip([i.name for i in sess.get_inputs()],
                                         [v if isinstance(v, list) or v is None else np.asarray(v) for v in inputs],
                                         strict=False)))
        for m, t, w in zip(mine, theirs, outputs, strict=True):
            _same(m, w, case.rtol, case.atol)
            _same(t if not isinstance(w, list) else list(t), w, case.rtol, case.atol)


# --- hand-built models: captured outer names, nesting, growing values, bounds ------------------

def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _growing_loop(trips: int | None = 4, w_dims: tuple = ()):
    """Loop: y = concat(y, y + w) per iteration (w read from the outer graph inside a nested
    If that also reads the outer 'flag'), plus a scan output of the iteration number.  A
    ``w`` with dims is a tensor constant both branches materialise, each in its own graph."""
    then_g = helper.make_graph([helper.make_node("Add", ["y_in", "w"], ["t"])], "then", [],
                               [_vi("t", None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["y_in", "w"], ["e"])], "else", [],
                               [_vi("e", None)])
    body = helper.make_graph(
        [helper.make_node("If", ["flag"], ["delta"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Concat", ["y_in", "delta"], ["y_out"], axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT)],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [None])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [None]), _vi("i_f", [])])
    inits = [helper.make_tensor("w", TensorProto.FLOAT, list(w_dims), [0.5] * int(np.prod(w_dims)))]
    ins = ["M" if trips is not None else "", "", "y0"]
    if trips is not None:
        inits.append(helper.make_tensor("M", TensorProto.INT64, [], [trips]))
    loop = helper.make_node("Loop", ins, ["y", "iters"], body=body)
    return _model([loop], [_vi("y0", [1]), _vi("flag", [], TensorProto.BOOL)], [_vi("y", [None]), _vi("iters", [None])],
                  inits)


@pytest.mark.parametrize("w_dims", [(), (1,)])
@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("flag", [True, False])
def test_loop_with_growing_values_and_a_nested_if_reading_outer_names_matches_onnxruntime(tmp_path, backend, flag,
                                                                                         w_dims):
    path = _save(tmp_path, _growing_loop(w_dims=w_dims))
    feeds = [np.array([1.0], np.float32), np.array(flag)]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"y0": feeds[0], "flag": feeds[1]})
    got = _run(path, backend, feeds)
    assert got[0].shape == (16,)
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    model = nnefx.load(path)
    (body,) = model.graph.subgraphs.values()
    assert body.inputs[3:] == ["flag", "w"] or body.inputs[3:] == ["flag"]  # captured outer tensors are inputs
    assert len(body.subgraphs) == 2  # the If's branches, filed inside the body


def test_loop_with_a_constant_trip_count_unrolls_to_nnef_that_reads_back_the_same(tmp_path):
    model = nnefx.load(_save(tmp_path, _growing_loop(3)))
    feeds = [np.array([2.0], np.float32), np.array(True)]
    before = _run(model, "fast", feeds)
    out = tmp_path / "unrolled.nnef"
    with pytest.raises(NNEFXError, match="onnx_if"):  # the If's condition is an input: not static
        nnefx.save(model, str(out))
    # with the flag a constant, the If picks its branch and the Loop unrolls
    m = _growing_loop(3)
    m.graph.initializer.append(helper.make_tensor("flag", TensorProto.BOOL, [], [True]))
    del m.graph.input[1]
    model = nnefx.load(_save(tmp_path, m, "const.onnx"))
    nnefx.save(model, str(out))
    text = out.read_text()
    assert "onnx_loop(" not in text and "onnx_if(" not in text and "stack" in text
    after = _run(nnefx.load(str(out)), "formal", feeds[:1])
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_loop_that_never_stops_is_a_located_error(tmp_path, monkeypatch):
    from nnefx.runtime import subgraphs

    monkeypatch.setattr(subgraphs, "MAX_ITERATIONS", 50)
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Neg", ["y_in"], ["y_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [2])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [2])])
    # a condition the body passes on unchanged: only the iteration budget stops it
    m = _model([helper.make_node("Loop", ["", "c", "y0"], ["y"], body=body)],
               [_vi("c", [], TensorProto.BOOL), _vi("y0", [2])], [_vi("y", [2])])
    model = nnefx.load(_save(tmp_path, m))
    with pytest.raises(NNEFXError, match=r"onnx_loop.*ran 50 iterations") as info:
        Session(model, "fast").run({"c": np.array(True), "y0": np.zeros((2,), np.float32)})
    assert info.value.location is not None and "Loop" in str(info.value.location)
    # neither a trip count nor a condition: refused before the first iteration
    m = _model([helper.make_node("Loop", ["", "", "y0"], ["y"], body=body)], [_vi("y0", [2])], [_vi("y", [2])])
    with pytest.raises(NNEFXError, match=r"onnx_loop.*neither a trip count nor a condition: it never stops"):
        Session(nnefx.load(_save(tmp_path, m)), "fast").run({"y0": np.zeros((2,), np.float32)})


def test_loop_without_a_static_trip_count_is_refused_for_nnef_and_ir(tmp_path):
    """NNEF has no loops; IR's Loop-5 needs a body of static shapes, and this one grows."""
    model = nnefx.load(_save(tmp_path, _growing_loop(None)))
    for target in ("x.nnef", "x.xml"):
        with pytest.raises(NNEFXError, match=r"cannot write operation 'onnx_(loop|if)'|"
                                             r"cannot write operation 'onnx_loop' as IR v11: its body .* is not static"
                           ) as info:
            nnefx.save(model, str(tmp_path / target))
        assert info.value.location is not None
        assert not (tmp_path / target).exists()


def test_subgraphs_nested_too_deep_are_refused_with_their_location(tmp_path, monkeypatch):
    from nnefx.formats.onnx import reader

    monkeypatch.setattr(reader, "MAX_SUBGRAPH_DEPTH", 1)
    with pytest.raises(NNEFXError, match="nest more than 1 deep") as info:
        nnefx.load(_save(tmp_path, _growing_loop()))
    assert "body: node 0" in str(info.value)


def test_an_unsupported_operation_in_a_body_is_refused_at_load_with_the_body_path(tmp_path):
    body = helper.make_graph([helper.make_node("Bernoulli", ["x"], ["y"])], "then", [], [_vi("y", [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "else", [], [_vi("z", [2])])
    m = _model([helper.make_node("If", ["c"], ["out"], then_branch=body, else_branch=other)],
               [_vi("c", [], TensorProto.BOOL), _vi("x", [2])], [_vi("out", [2])])
    with pytest.raises(NNEFXError, match="Bernoulli") as info:
        nnefx.load(_save(tmp_path, m))
    assert "then_branch: node 0" in str(info.value)


def test_sequence_inputs_and_outputs_are_lists_and_errors_name_positions(tmp_path):
    m = _model([helper.make_node("SequenceAt", ["s", "k"], ["t"])],
               [helper.make_value_info("s", helper.make_sequence_type_proto(
                   helper.make_tensor_type_proto(TensorProto.FLOAT, [None]))), _vi("k", [], TensorProto.INT64)],
               [_vi("t", [None])])
    session = Session(nnefx.load(_save(tmp_path, m)), "formal")
    seq = [np.arange(3, dtype=np.float32), np.arange(5, dtype=np.float32)]
    np.testing.assert_array_equal(session.run({"s": seq, "k": np.array(-1)})["t"], seq[1])
    with pytest.raises(NNEFXError, match=r"position 2 is outside \[-2, 1\]"):
        session.run({"s": seq, "k": np.array(2)})
    with pytest.raises(NNEFXError, match="must be a sequence"):
        session.run({"s": seq[0], "k": np.array(0)})
