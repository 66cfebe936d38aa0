"""What the IR v11 and ONNX writers share (nnefx.formats.export: context, attrs): the refusal
wording and location, the bookkeeping of their contexts, the constant fill rule, the
temporary-then-rename write, and what NNEF's attributes mean (slices, windows, reductions,
resize transforms).  Both writers rely on these, so they are checked once here,
and through both writers where the wording must name the format."""

from __future__ import annotations

import os

import numpy as np
import pytest

from nnefx.diagnostics import Location, NNEFXError
from nnefx.formats.export import attrs
from nnefx.formats.export.context import (
    ExportContextBase,
    constant_array,
    input_shape,
    operations_to_write,
    unique_name,
    write_atomically,
)
from nnefx.graph import Graph, Operation, Tensor
from nnefx.io.builder import GraphBuilder


def _graph() -> Graph:
    b = GraphBuilder("g")
    x = b.external("x", shape=(1, 3))
    b.op("exp", x)                       # not needed by the output: never written
    b.output(b.op("neg", x), name="y")
    return b.build().graph


def test_operations_to_write_skip_externals_and_dead_code():
    assert [op.op for op in operations_to_write(_graph())] == ["neg"]


def test_input_without_shape_is_refused_at_the_input():
    g = Graph(name="g", inputs=["x"], tensors={"x": Tensor("x", "scalar", None)})
    with pytest.raises(NNEFXError, match="input 'x' has no known shape") as info:
        input_shape(g, "x")
    assert info.value.location == Location(field="x")


def test_constant_array_repeats_or_lists_values():
    op = Operation("constant", {}, {"output": "c"}, {"shape": [2, 2], "value": [1.5]})
    assert constant_array(op, (2, 2)).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    op.attribs["value"] = [1.0, 2.0, 3.0, 4.0]
    assert constant_array(op, (2, 2)).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    op.attribs["value"] = [1.0, 2.0, 3.0]
    assert constant_array(op, (2, 2)) is None


def test_unique_name_numbers_repeats():
    used: set[str] = set()
    assert [unique_name("conv", used) for _ in range(3)] == ["conv", "conv_1", "conv_2"]
    assert used == {"conv", "conv_1", "conv_2"}


class _Ctx(ExportContextBase[str]):
    FORMAT = "TESTFMT"


def test_fail_names_operation_format_and_position():
    g = _graph()
    ctx = _Ctx(g)
    err = ctx.fail("no form")
    assert err.message == "no form" and err.location == Location(field="g")
    op = Operation("neg", {"x": "x"}, {"y": "y"}, {}, location=Location("m.nnef", 3, 5))
    ctx.op = op
    err = ctx.fail("no form")
    assert err.message == "cannot write operation 'neg' as TESTFMT: no form"
    assert err.location == Location("m.nnef", 3, 5)
    with pytest.raises(NNEFXError, match="exporter did not produce output 'y'"):
        ctx.check_outputs(op)
    ctx.bind("y", "v")
    ctx.check_outputs(op)


def test_constant_value_and_its_refusal():
    ctx = _Ctx(_graph())
    op = Operation("constant", {}, {"output": "c"}, {"shape": [2, 2], "value": [1.0, 2.0, 3.0]},
                   location=Location("m.nnef", 4, 9))
    ctx.op = op
    with pytest.raises(NNEFXError, match=r"as TESTFMT: constant value of 3 items does not fill shape \(2, 2\)$"):
        ctx.constant_value(op, (2, 2))
    with pytest.raises(NNEFXError, match=r"does not fill shape \[2, 2\]$") as info:
        ctx.constant_value(op, (2, 2), [2, 2])
    assert info.value.location == Location("m.nnef", 4, 9)
    op.attribs["value"] = [7.0]
    assert ctx.constant_value(op, (2, 2)).tolist() == [[7.0, 7.0], [7.0, 7.0]]


def test_run_exporter_locates_unlocated_errors():
    ctx = _Ctx(_graph())
    op = Operation("neg", {"x": "x"}, {"y": "y"}, {}, location=Location("m.nnef", 6, 5))

    def broken(c, o):
        raise NNEFXError("a helper's complaint")

    with pytest.raises(NNEFXError) as info:
        ctx.run_exporter(broken, op)
    assert info.value.location == Location("m.nnef", 6, 5)
    ctx.op = op
    with pytest.raises(NNEFXError, match="did not produce output 'y'"):
        ctx.run_exporter(lambda c, o: None, op)
    ctx.run_exporter(lambda c, o: c.bind("y", "v"), op)


def test_data_of_literals_and_constants():
    ctx = _Ctx(_graph())
    ctx.consts["w"] = np.ones(2)
    assert ctx.data("w").tolist() == [1.0, 1.0]
    assert ctx.data("x") is None
    assert ctx.data(2.5).item() == 2.5
    assert ctx.data(np.ones(2)) is None          # not a literal of the base context


@pytest.mark.parametrize("fmt", ["IR v11", "ONNX"])
def test_both_writers_word_refusals_alike(tmp_path, fmt):
    if fmt == "ONNX":
        pytest.importorskip("onnx")
    from nnefx.semantics.frontend import compile_document

    text = ("version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 2, 4, 4]);\n"
            "    w = constant<scalar>(shape = [2, 2, 3, 3], value = [1.0]);\n"
            "    y = deconv(x, w, border = 'reflect');\n}\n")
    g = compile_document(text, file="m.nnef")
    if fmt == "ONNX":
        from nnefx.formats.onnx.writer import write_onnx as write
        target = tmp_path / "m.onnx"
    else:
        from nnefx.formats.ir.writer import write_ir as write
        target = tmp_path / "m.xml"
    with pytest.raises(NNEFXError) as info:
        write(g, target)
    assert info.value.message.startswith(f"cannot write operation 'deconv' as {fmt}: border 'reflect' of a "
                                         "deconvolution has no ")
    assert info.value.location.file == "m.nnef" and info.value.location.line == 6
    assert os.listdir(tmp_path) == []


def test_write_atomically_all_or_nothing(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "a.xml"
    a.write_bytes(b"old")
    with pytest.raises(NNEFXError, match="cannot write") as info:
        write_atomically([(str(a), b"new"), (str(tmp_path / "missing" / "a.xml"), b"x")])
    assert info.value.location.file == str(tmp_path / "missing" / "a.xml")
    assert a.read_bytes() == b"old"                              # untouched
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]            # no temporaries left
    write_atomically([(str(a), b"new"), (str(b), b"xml")])
    assert a.read_bytes() == b"new" and b.read_bytes() == b"xml"
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "a.xml"]
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(a).st_mode & 0o777 == 0o666 & ~mask


# --- NNEF attribute semantics (nnefx.formats.export.attrs) -----------------------------------


def _op(name: str, **attribs) -> Operation:
    return Operation(name, {"input": "x"}, {"output": "y"}, attribs)


def test_backward_slices_stop_through_index_0():
    assert attrs.slice_stop(-1, -1) == attrs.INT64_MIN
    assert attrs.slice_stop(-1, 1) == -1 and attrs.slice_stop(0, -1) == 0
    # (axis, first, step, count): 4 items backward from 3 run through index 0
    assert attrs.slice_bounds([(1, 3, -1, 4), (2, 0, 2, 3)]) == ([1, 2], [3, 0], [attrs.INT64_MIN, 6], [-1, 2])
    x = np.arange(10)
    assert x[3:None:-1].tolist() == [3, 2, 1, 0]   # what INT64_MIN stands for


def test_window_padding_asks_extents_only_when_automatic():
    def never() -> tuple:
        raise AssertionError("extents asked for")

    op = _op("max_pool", size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (0, 2)], stride=[], dilation=[])
    assert attrs.window_padding(op, 4, [1, 1, 3, 3], never) == ([(0, 0), (0, 0), (1, 1), (0, 2)], [1] * 4, [1] * 4)
    op = _op("conv", padding=[], stride=[2, 2], dilation=[1, 1])
    # automatic: output ceil(5 / 2) = 3, total padding (3 - 1) * 2 + 3 - 5 = 2, split 1 / 1
    assert attrs.window_padding(op, 2, [3, 3], lambda: (5, 6)) == ([(1, 1), (0, 1)], [2, 2], [1, 1])


def test_window_span():
    assert attrs.window_span(3, 3, 2, 1) == 7     # windows at 0, 2, 4, each 3 long
    assert attrs.window_span(1, 3, 1, 2) == 5     # one dilated window: taps 0, 2, 4


def test_box_mode_and_reductions():
    assert attrs.box_mode(_op("box", border="ignore")) == ("constant", False)
    assert attrs.box_mode(_op("box", border="ignore", normalize=True)) == ("ignore", True)
    assert attrs.box_mode(_op("avg_pool", border="ignore")) == ("ignore", True)
    assert attrs.box_mode(_op("rms_pool")) == ("constant", True)
    assert attrs.reduction(_op("sum_reduce", normalize=True)) == "mean"
    assert attrs.reduction(_op("sum_reduce")) == "sum"
    assert attrs.reduction(_op("any_reduce")) == "any"
    assert attrs.reduced_shape((2, 3, 4), [0, 2]) == (1, 3, 1)


def test_clamp_bounds_and_defaults():
    assert attrs.literal_bounds(0.0, 6) == (0.0, 6.0)
    assert attrs.literal_bounds(1.0, 0.0) is None          # max(min(x, 0), 1) = 1 everywhere
    assert attrs.literal_bounds("a", 1.0) is None
    assert attrs.lrn_params(_op("local_response_normalization")) == (1.0, 0.5, 1.0)
    bn = Operation("batch_normalization", {"input": "x", "mean": "m", "variance": "v"}, {"output": "y"}, {})
    assert attrs.batch_norm_inputs(bn) == {"mean": "m", "variance": "v", "offset": 0.0, "scale": 1.0}


@pytest.mark.parametrize(("method", "border", "transform"), [
    ("symmetric", "replicate", "half_pixel"), ("asymmetric", "replicate", "asymmetric"),
    ("aligned", "replicate", "align_corners"), ("aligned", "constant", "align_corners"),
    ("symmetric", "constant", None), ("asymmetric", "constant", None)])
def test_linear_upsample_transform(method, border, transform):
    op = _op("multilinear_upsample", method=method, border=border)
    assert attrs.linear_upsample_transform(op) == (method, border, transform)


def test_fp16_storage_rule():
    from nnefx.formats.export.context import fp16_storable

    assert fp16_storable(np.ones(4, np.float32))
    assert not fp16_storable(np.ones(1, np.float32))                          # a scalar stays exact
    assert not fp16_storable(np.ones(4, np.float64))
    assert not fp16_storable(np.array([1.0, 70000.0], np.float32))           # would become inf
    assert fp16_storable(np.array([np.inf, -65504.0], np.float32))          # infinities stay infinite


def test_transpose_perm_keeps_trailing_dims():
    assert attrs.transpose_perm(_op("transpose", axes=[1, 0]), 4) == [1, 0, 2, 3]
    assert attrs.transpose_perm(_op("transpose", axes=[2, 0, 1]), 3) == [2, 0, 1]


# --- the lowering both writers share (nnefx.formats.export.lowering) -----------------------------

def _negative_padding_model():
    rng = np.random.default_rng(3)
    b = GraphBuilder("neg")
    x = b.external("x", shape=(1, 2, 7, 6))
    w = b.variable("w", rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32))
    b.output(b.op("max_pool", x, size=[1, 1, 3, 2], padding=[(0, 0), (0, 0), (-1, 1), (1, -2)],
                  border="constant"), name="mp")
    b.output(b.op("avg_pool", x, size=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (0, -1), (-1, 0)],
                  border="ignore"), name="ap")
    b.output(b.op("conv", x, w, padding=[(-1, 1), (0, -1)], border="reflect"), name="cv")
    b.output(b.op("pad", x, padding=[(0, 0), (0, 0), (-2, 1), (1, -3)], border="replicate"), name="pd")
    feeds = {"x": rng.uniform(-2, -0.5, (1, 2, 7, 6)).astype(np.float32)}   # negative: a zero pad shows
    return b.build(), feeds


@pytest.mark.parametrize("fmt", ["xml", "onnx"])
def test_negative_padding_crops_in_both_writers(tmp_path, fmt):
    # decided once (lowering.pad / lowering.crop): a negative padding removes elements, in
    # pad, convolutions and pools alike, so both formats write a slice and then pad the rest
    import nnefx
    from nnefx.runtime.session import Session

    model, feeds = _negative_padding_model()
    want = Session(model, "formal").run(feeds)
    path = str(tmp_path / f"m.{fmt}")
    nnefx.save(model, path)
    if fmt == "xml":
        ov = pytest.importorskip("openvino")
        cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        res = cm(feeds)
        got = {o.get_any_name(): np.asarray(res[o]) for o in cm.outputs}
    else:
        from _export_helpers import run_ort

        got = run_ort(path, feeds)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("fmt", ["xml", "onnx"])
def test_round_ties_up_exactly_in_both_writers(tmp_path, fmt):
    # NNEF round is floor(x + 0.5); written as f + (x - f >= 0.5): exact at 0.49999997, where
    # x + 0.5 rounds up to 1 in float32
    import nnefx
    from nnefx.runtime.session import Session

    b = GraphBuilder("r")
    x = b.external("x", shape=(1, 6))
    b.output(b.op("round", x), name="y")
    model = b.build()
    feeds = {"x": np.array([[0.49999997, 0.5, -0.5, 1.5, -2.5, 2.4999998]], np.float32)}
    want = Session(model, "formal").run(feeds)["y"]
    assert want.tolist() == [[0.0, 1.0, 0.0, 2.0, -2.0, 2.0]]
    path = str(tmp_path / f"m.{fmt}")
    nnefx.save(model, path)
    if fmt == "xml":
        ov = pytest.importorskip("openvino")
        cm = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        got = np.asarray(cm(feeds)[cm.outputs[0]])
    else:
        from _export_helpers import run_ort

        got = run_ort(path, feeds)["y"]
    np.testing.assert_array_equal(got, want)


def test_compound_lowering_uses_the_format_form_or_the_definition():
    # rcp: ONNX has Reciprocal, IR writes the definition 1 / x; silu: IR has Swish, ONNX
    # writes x * sigmoid(x)
    from nnefx.formats.ir.writer import build as build_ir
    from nnefx.formats.onnx.writer import build as build_onnx

    b = GraphBuilder("c")
    x = b.external("x", shape=(2, 3))
    b.output(b.op("rcp", x), name="r")
    b.output(b.op("silu", x), name="s")
    graph = b.build().graph
    ir_types = [lay.type for lay in build_ir(graph).layers]
    assert "Divide" in ir_types and "Swish" in ir_types
    pytest.importorskip("onnx")
    onnx_types = [n.op_type for n in build_onnx(graph).graph.node]
    assert "Reciprocal" in onnx_types and "Sigmoid" in onnx_types and "Mul" in onnx_types
