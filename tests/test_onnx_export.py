"""ONNX writer: nnefx graphs -> ``.onnx`` -> onnxruntime runs them and agrees with nnefx's fast
backend; every standard operation either exports exactly or is refused with a located error;
real networks round-trip; the CLI writes ONNX and reports bad cases as ``FILE:LINE:COL``.

Tolerances: per-op samples agree within 1e-5 relative to max(1, max|want|) (both sides
compute in float32; only the summation order differs), integer and logical results exactly;
networks within 1e-4 relative, as the real-network tests measure nnefx against torch.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import nnefx  # noqa: E402
from _export_helpers import run_ort, save_onnx  # noqa: E402
from _ops_samples import SAMPLES  # noqa: E402
from _ops_samples import nnef_literal as _literal  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.io.builder import GraphBuilder  # noqa: E402
from nnefx.ops import registry  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402
from nnefx.semantics.frontend import compile_document  # noqa: E402

RNG = np.random.default_rng(11)
HEADER = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"
_TYPE = {np.dtype(np.float32): "scalar", np.dtype(np.int64): "integer", np.dtype(np.bool_): "logical"}

#: Standard operations ONNX (opset 18) has no exact form for: none since the RoI operations
#: are written as Gather / cell-mask compositions (tests/test_onnx_export_roi.py tests them
#: and their refusal of unknown spatial extents).
REFUSED: set[str] = set()
NOT_OPERATIONS = {"external", "variable", "constant", "update"}


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def close(got, want, rtol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    # non-finite values must match exactly (same NaN positions, same infinities)
    bad = ~np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[bad & ~np.isnan(want)], want[bad & ~np.isnan(want)])
    got, want = got[~bad], want[~bad]
    if not want.size:
        return
    scale = max(float(np.abs(want).max()), 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    assert err <= rtol * scale, f"max abs error {err} (scale {scale})"


def check(model, feeds: dict, tmp_path, rtol=1e-5) -> str:
    """Save as ONNX, check it, run it with onnxruntime and nnefx: the outputs must agree."""
    want = Session(model, "fast").run(feeds)
    path = save_onnx(model, str(tmp_path / "model.onnx"))
    got = run_ort(path, feeds)
    assert list(got) == list(want)
    for k in want:
        close(got[k], want[k], rtol)
    return path


# --- every standard operation, from the shared sample table -----------------------------------

def _document(name: str):
    op = registry.get(name)
    args, attrs = SAMPLES[name]
    feeds, lines, refs = {}, [], []
    for value in args:
        items = value if isinstance(value, list) else [value]
        names = []
        for item in items:
            arr = np.asarray(item)
            if arr.ndim == 0:
                arr = arr.reshape(1)
            t = f"t{len(feeds)}"
            feeds[t] = arr
            lines.append(f"{t} = external<{_TYPE[arr.dtype]}>(shape = {list(arr.shape)});")
            names.append(t)
        refs.append("[" + ", ".join(names) + "]" if isinstance(value, list) else names[0])
    kwargs = [f"{k} = {_literal(v)}" for k, v in attrs.items() if k != "dtype"]
    results = op.declaration.split("->", 1)[1].split("{")[0]
    count = results.count(":")
    array = "[]" in results
    if name == "split":
        count = len(attrs["ratios"])
    elif name == "unstack":
        count = np.shape(args[0])[attrs["axis"]]
    elif name == "copy_n":
        count = attrs["times"]
    outs = [f"r{k}" for k in range(count)]
    lhs = ("[" + ", ".join(outs) + "]") if array else ", ".join(outs)
    generic = f"<{attrs['dtype']}>" if "dtype" in attrs and "<?>" in op.declaration.split("(")[0] else ""
    lines.append(f"{lhs} = {name}{generic}({', '.join(refs + kwargs)});")
    text = HEADER + f"graph G({', '.join(feeds)}) -> ({', '.join(outs)})\n{{\n" + "\n".join(lines) + "\n}\n"
    return text, feeds


def test_samples_cover_every_standard_operation():
    names = {op.name for op in registry.all_ops("nnef")} - NOT_OPERATIONS
    assert names <= set(SAMPLES), sorted(names - set(SAMPLES))
    assert REFUSED <= names


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - NOT_OPERATIONS - REFUSED))
def test_operation_exports_and_agrees(name):
    from nnefx.formats.onnx.writer import build

    text, feeds = _document(name)
    graph = compile_document(text, file="op.nnef")
    want = Session(graph, "fast").run(feeds)
    proto = build(graph)
    onnx.checker.check_model(proto, full_check=True)
    got = run_ort(proto, feeds)
    assert list(got) == list(want)
    for k in want:
        close(got[k], want[k])


# --- conventions: broadcasting, padding, borders, names ----------------------------------------

def test_nnef_broadcasting_from_the_left(tmp_path):
    b = GraphBuilder("bcast")
    x = b.external("x", shape=(2, 3, 4, 5))
    v = b.external("v", shape=(2, 3))                  # NNEF: [2, 3] against [2, 3, 4, 5] is [2, 3, 1, 1]
    bias = b.variable("bias", rand(1, 3))
    y = b.op("add", b.op("mul", x, v), bias)
    outs = {"y": y, "sel": b.op("select", b.op("gt", x, v), x, 0.5), "cl": b.op("clamp", x, v, 0.75),
            "pr": b.op("prelu", x, b.variable("slope", rand(1, 3))), "mx": b.op("max", v, x),
            "bn": b.op("batch_normalization", x, b.variable("m", rand(1, 3)), b.variable("s", rand(1, 3, lo=0.5)),
                       b.variable("o", rand(1, 3)), b.variable("g", rand(1, 3)), epsilon=1e-3),
            "bn2": b.op("batch_normalization", x, v, b.op("abs", v), 0.5, 2.0, epsilon=1e-3)}
    for k, val in outs.items():
        b.output(val, name=k)
    path = check(b.build(), {"x": rand(2, 3, 4, 5), "v": rand(2, 3)}, tmp_path)
    types = [n.op_type for n in onnx.load(path).graph.node]
    assert "Unsqueeze" in types and "BatchNormalization" in types


@pytest.mark.parametrize("border", ["constant", "replicate", "reflect", "reflect-even"])
def test_convolution_borders_and_automatic_padding(tmp_path, border):
    b = GraphBuilder("conv")
    x = b.external("x", shape=(1, 4, 7, 6))
    y = b.op("conv", x, b.variable("w", rand(6, 2, 3, 3)), b.variable("b", rand(1, 6)), groups=2, padding=[],
             stride=[2, 1], border=border)
    z = b.op("conv", y, b.variable("dw", rand(6, 1, 3, 2)), padding=[(2, 1), (0, 1)], dilation=[1, 2], groups=0,
             border=border)
    b.output(z, name="z")
    b.output(b.op("conv", x, b.variable("w2", rand(3, 4, 2, 2)), padding=[(-1, 1), (1, 0)], border=border), name="neg")
    check(b.build(), {"x": rand(1, 4, 7, 6)}, tmp_path)


@pytest.mark.parametrize("border", ["constant", "ignore", "replicate", "reflect", "reflect-even"])
def test_pooling_borders(tmp_path, border):
    b = GraphBuilder("pool")
    x = b.external("x", shape=(2, 3, 7, 6))
    win = dict(size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 2), (2, 1)], stride=[1, 1, 2, 2], border=border)
    b.output(b.op("max_pool", x, **win), name="max")
    b.output(b.op("avg_pool", x, **win), name="avg")
    b.output(b.op("box", x, **win), name="box")
    b.output(b.op("rms_pool", b.op("abs", x), **win), name="rms")
    b.output(b.op("avg_pool", x, size=[1, 2, 2, 1], padding=[], border=border), name="chan")
    path = check(b.build(), {"x": rand(2, 3, 7, 6, lo=-2, hi=2)}, tmp_path)
    pool = {n.op_type: n for n in onnx.load(path).graph.node if n.op_type == "AveragePool"}
    want = 0 if border == "ignore" else 1
    assert {a.i for a in pool["AveragePool"].attribute if a.name == "count_include_pad"} == {want}


def test_deconvolution_with_output_padding_and_groups(tmp_path):
    b = GraphBuilder("deconv")
    x = b.external("x", shape=(1, 4, 3, 5))
    b.output(b.op("deconv", x, b.variable("w", rand(4, 3, 3, 3)), b.variable("b", rand(1, 3)), stride=[2, 2],
                  padding=[(1, -1), (0, 1)]), name="y")
    b.output(b.op("deconv", x, b.variable("g", rand(4, 1, 2, 3)), stride=[2, 3], padding=[], groups=2), name="gy")
    b.output(b.op("deconv", x, b.variable("d", rand(4, 2, 2, 2)), padding=[], groups=0, dilation=[2, 1]), name="dy")
    check(b.build(), {"x": rand(1, 4, 3, 5)}, tmp_path)


def test_shapes_slices_reductions(tmp_path):
    b = GraphBuilder("shapes")
    x = b.external("x", shape=(2, 3, 4, 5))
    outs = {
        "r": b.op("reshape", x, shape=[0, -1], axis_start=1, axis_count=2),
        "r2": b.op("reshape", x, shape=[6, 20]),
        "sl": b.op("slice", x, axes=[1, 3], begin=[1, -4], end=[3, -1], stride=[1, 2]),
        "rev": b.op("slice", x, axes=[3], begin=[-1], end=[-6], stride=[-2]),
        "pad": b.op("pad", x, padding=[(0, 0), (1, -1), (2, 0), (-2, 3)], border="reflect-even"),
        "padc": b.op("pad", x, padding=[(0, 0), (0, 0), (1, 1), (0, 2)], value=1.5),
        # beyond the extent the reflections repeat periodically
        "padr": b.op("pad", x, padding=[(0, 0), (2, 7), (9, 4), (0, 1)], border="reflect"),
        "pade": b.op("pad", x, padding=[(3, 0), (0, 0), (5, 13), (6, 0)], border="reflect-even"),
        "pad1": b.op("pad", b.op("slice", x, axes=[2], begin=[0], end=[1]), padding=[(0, 0), (0, 0), (2, 3), (0, 0)],
                     border="reflect"),
        "sum": b.op("sum_reduce", x, axes=[1, 3]),
        "mean": b.op("mean_reduce", x, axes=[3]),
        "amax": b.op("argmax_reduce", x, axes=[1, 3]),
        "amin": b.op("argmin_reduce", x, axes=[2]),
        "sm": b.op("softmax", x, axes=[1, 2]),
        "lrn": b.op("local_response_normalization", x, size=[1, 2, 1, 1], alpha=0.3, beta=0.6, bias=1.5),
        "lrn3": b.op("local_response_normalization", x, size=[1, 1, 3, 3]),
        "mm": b.op("matmul", x, x, transposeB=True),
        "lin": b.op("linear", b.op("reshape", x, shape=[2, -1]), b.variable("fc", rand(7, 60)), b.variable("fb", rand(1, 7))),
    }
    for k, v in outs.items():
        b.output(v, name=k)
    check(b.build(), {"x": rand(2, 3, 4, 5)}, tmp_path)


def test_round_and_cast_follow_nnef(tmp_path):
    b = GraphBuilder("rounding")
    x = b.external("x", shape=(8,))
    b.output(b.op("round", x), name="r")
    b.output(b.op("cast", x, dtype="integer"), name="i")
    b.output(b.op("cast", x, dtype="logical"), name="l")
    feeds = {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 0.49999997, 3.2], np.float32)}
    check(b.build(), feeds, tmp_path)
    got = run_ort(str(tmp_path / "model.onnx"), feeds)
    np.testing.assert_array_equal(got["r"], [1, 2, 3, 0, -1, -3, 0, 3])    # ties up, not to even
    np.testing.assert_array_equal(got["i"], [0, 1, 2, -1, -2, -3, 0, 3])   # floor, not toward zero


def test_names_initializers_and_aliased_outputs(tmp_path):
    b = GraphBuilder("names")
    x = b.external("x", shape=(2, 3))
    w = b.variable("layer/w", rand(2, 3))
    y = b.op("add", x, w, name="y")
    b.output(y, name="y")
    b.output(b.op("copy", y), name="same")
    b.output(x, name="x_out")
    model = b.build()
    path = check(model, {"x": rand(2, 3)}, tmp_path)
    m = onnx.load(path)
    assert [i.name for i in m.graph.input] == ["x"]
    assert [o.name for o in m.graph.output] == ["y", "same", "x_out"]
    (var, tensor), = model.graph.variables()
    assert var.attribs["label"] == "layer/w" and tensor.name in {i.name for i in m.graph.initializer}
    assert m.opset_import[0].version == 18 and m.producer_name == "nnefx"


@pytest.mark.parametrize("name", ["cnn", "lstm", "transformer"])
def test_symbolic_batch_from_an_ir_network(tmp_path, name):
    """IR networks written by OpenVINO keep a dynamic batch: it becomes a symbolic ONNX dim,
    and the file runs at several batch sizes with the outputs OpenVINO recorded (and those
    nnefx computes with the batch fixed)."""
    d = "tests/fixtures/ir/opset"
    model = nnefx.load(f"{d}/{name}.xml")
    assert model.graph.tensors["x"].shape[0] is None
    path = save_onnx(model, str(tmp_path / f"{name}.onnx"))
    dim = onnx.load(path).graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param and not dim.dim_value
    x = np.load(f"{d}/{name}.x.npy")
    close(run_ort(path, {"x": x})["y"], np.load(f"{d}/{name}.y.npy"), 1e-4)
    x2 = np.concatenate([x, x[::-1], x])
    want = Session(nnefx.load(f"{d}/{name}.xml", shapes={"x": x2.shape}), "fast").run({"x": x2})
    got = run_ort(path, {"x": x2})
    for k in want:
        close(got[k], want[k], 1e-4)


# --- refusals and writing --------------------------------------------------------------------

STATEFUL = """version 1.0;
graph g( x ) -> ( y, v2 )
{
    x = external<scalar>(shape = [1, 2]);
    v = variable<scalar>(shape = [1, 2], label = 'acc');
    y = add(x, v);
    v2 = update(v, y);
}
"""


def test_stateful_graph_is_refused(tmp_path):
    graph = compile_document(STATEFUL, file="state.nnef")
    with pytest.raises(NNEFXError, match="update.*no state") as e:
        nnefx.save(nnefx.Model(graph), str(tmp_path / "s.onnx"))
    assert e.value.location.line == 7
    assert os.listdir(tmp_path) == []


def test_failed_write_keeps_the_old_file(tmp_path):
    b = GraphBuilder("bad")
    x = b.external("x", shape=(1, 1, 0, 4))   # RoI pooling needs static spatial extents
    rois, index = b.external("rois", shape=(1, 4)), b.external("index", shape=(1,), dtype="integer")
    b.output(b.op("max_roi_pool", x, rois, index, output_size=[2, 2]), name="y")
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    with pytest.raises(NNEFXError, match="max_roi_pool"):
        nnefx.save(b.build(), str(target))
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["m.onnx"]


def test_missing_onnx_package_is_a_clear_error(tmp_path, monkeypatch):
    b = GraphBuilder("g")
    b.output(b.op("relu", b.external("x", shape=(1, 2))), name="y")
    model = b.build()
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(NNEFXError, match=r"needs the 'onnx' package: pip install nnefx\[onnx\]"):
        nnefx.save(model, str(tmp_path / "m.onnx"))


def test_weights_beyond_the_protobuf_limit_are_refused(tmp_path, monkeypatch):
    from nnefx.formats.onnx import writer

    monkeypatch.setattr(writer, "MAX_BYTES", 1000)
    b = GraphBuilder("big")
    b.output(b.op("add", b.external("x", shape=(1, 400)), b.variable("w", rand(1, 400))), name="y")
    with pytest.raises(NNEFXError, match="2 GB limit"):
        nnefx.save(b.build(), str(tmp_path / "m.onnx"))
    assert os.listdir(tmp_path) == []


def test_unknown_save_option(tmp_path):
    b = GraphBuilder("g")
    b.output(b.op("relu", b.external("x", shape=(1, 2))), name="y")
    with pytest.raises(NNEFXError, match="unknown option"):
        nnefx.save(b.build(), str(tmp_path / "m.onnx"), external_data=True)


# --- recurrent sequences from IR / ONNX imports ------------------------------------------------

SEQUENCES = [("lstm_sequence", "forward", False), ("lstm_sequence", "reverse", False),
             ("lstm_sequence", "bidirectional", False), ("gru_sequence", "forward", False),
             ("gru_sequence", "reverse", True), ("gru_sequence", "bidirectional", True),
             ("rnn_sequence", "forward", False), ("rnn_sequence", "bidirectional", False)]


@pytest.mark.parametrize("kind, direction, lbr", SEQUENCES)
@pytest.mark.parametrize("weights", ["variables", "inputs"])
def test_recurrent_sequences(tmp_path, kind, direction, lbr, weights):
    """IR LSTM/GRU/RNNSequence-5 (batch first, LSTM gates f,i,c,o) -> ONNX LSTM/GRU/RNN (time
    first, gates i,o,f,c): shorter sequences, reversed directions, clipping, the GRU's
    linear_before_reset bias and run-time weights all agree with nnefx."""
    n, t, i, h = 3, 5, 4, 3
    d = 2 if direction == "bidirectional" else 1
    gates = {"lstm_sequence": 4, "gru_sequence": 3, "rnn_sequence": 1}[kind]
    params = {"W": rand(d, gates * h, i), "R": rand(d, gates * h, h), "B": rand(d, (gates + lbr) * h)}
    data = {"x": rand(n, t, i), "h": rand(n, d, h)}
    if kind == "lstm_sequence":
        data["c"] = rand(n, d, h)
    lens = np.array([5, 3, 1], np.int64)
    lines = [f"{k} = external<scalar>(shape = {list(v.shape)});" for k, v in data.items()]
    lines.append("lens = variable<integer>(shape = [3], label = 'lens');")
    for k, v in params.items():
        lines.append(f"{k} = external<scalar>(shape = {list(v.shape)});" if weights == "inputs" else
                     f"{k} = variable<scalar>(shape = {list(v.shape)}, label = '{k}');")
    args = ", ".join(list(data) + ["lens", "W", "R", "B"])
    extra = {"lstm_sequence": "", "gru_sequence": f", linear_before_reset = {'true' if lbr else 'false'}",
             "rnn_sequence": ", activation = 'relu'" if direction == "forward" else ""}[kind]
    clip = 1.5 if direction == "reverse" else 0.0
    outs = ["y", "yh", "yc"][: 3 if kind == "lstm_sequence" else 2]
    lines.append(f"{', '.join(outs)} = {kind}({args}, direction = '{direction}', clip = {clip}{extra});")
    feeds = dict(data) | (params if weights == "inputs" else {})
    text = (f"version 1.0;\nextension nnefx_ir;\nextension nnefx_ops;\ngraph G({', '.join(feeds)}) -> ({', '.join(outs)})\n{{\n"
            + "\n".join(lines) + "\n}\n")
    graph = compile_document(text, file="seq.nnef")
    for op, tensor in graph.variables():
        tensor.data = lens if op.attribs["label"] == "lens" else params[op.attribs["label"]]
    path = check(nnefx.Model(graph), feeds, tmp_path)
    kinds = {n.op_type for n in onnx.load(path).graph.node}
    assert {"lstm_sequence": "LSTM", "gru_sequence": "GRU", "rnn_sequence": "RNN"}[kind] in kinds


def test_extension_operations_without_an_onnx_reader_form(tmp_path):
    """top_k (ties keep the lower index), gather_nd, arange, round_with_mode away from zero:
    written from NNEF text with the nnefx_ops extension, checked against nnefx."""
    text = """version 1.0;
extension nnefx_ir;
extension nnefx_ops;
graph G( a, idx ) -> ( tv, ti, sv, si, nd, rg, rz )
{
    a = external<scalar>(shape = [3, 4]);
    idx = external<integer>(shape = [2, 2]);
    tv, ti = top_k(a, k = 2, axis = 1);
    sv, si = top_k(a, k = 1, axis = 0, mode = 'min', sort = 'index');
    nd = gather_nd<scalar>(a, idx);
    rg = arange<scalar>(0.5, 3.0, 0.75);
    rz = round_with_mode(a, mode = 'half_away_from_zero');
}
"""
    graph = compile_document(text, file="ext.nnef")
    a = rand(3, 4, lo=-3, hi=3)
    a[0, :3] = [0.5, -1.5, 2.5]
    a[1, 1] = a[1, 3]
    a[2, 0] = a[0, 0]
    check(nnefx.Model(graph), {"a": a, "idx": np.array([[2, 1], [0, 3]], np.int64)}, tmp_path)


def test_compress_to_fp16_stores_half_weights_behind_cast(tmp_path):
    model = nnefx.load("examples/digits/model")
    path16, path32 = str(tmp_path / "m16.onnx"), str(tmp_path / "m32.onnx")
    save_onnx(model, path16, compress_to_fp16=True)
    nnefx.save(model, path32)
    m = onnx.load(path16)
    floats = {i.data_type for i in m.graph.initializer if len(i.dims) and np.prod(i.dims) > 1} - {
        onnx.TensorProto.INT64}   # (the Reshape's target shape)
    assert floats == {onnx.TensorProto.FLOAT16}
    assert [n.op_type for n in m.graph.node].count("Cast") >= 4
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert os.path.getsize(path16) < 0.6 * os.path.getsize(path32)
    x = np.random.default_rng(2).uniform(0, 1, (1, 1, 8, 8)).astype(np.float32)
    want = Session(model, "fast").run({"input": x})["probabilities"]
    close(run_ort(path16, {"input": x})["probabilities"], want, rtol=1e-2)   # weights rounded to f16


def test_model_with_integer_runtime_storage_is_refused(tmp_path):
    b = GraphBuilder("g")
    b.output(b.op("relu", b.external("x", shape=(1, 2))), name="y")
    model = b.build()
    model.extras["storage"] = {"integer": "int32"}
    with pytest.raises(NNEFXError, match="storage"):
        nnefx.save(model, str(tmp_path / "m.onnx"))


def test_windows_wholly_in_the_padding_and_empty_axes(tmp_path):
    """Under 'ignore' a window with no input tap gives 0 in nnefx but -inf / NaN in ONNX
    pooling: refused.  An empty axes list reduces nothing (ONNX's empty axes: everything)."""
    b = GraphBuilder("edge")
    x = b.external("x", shape=(1, 1, 3, 3))
    b.output(b.op("avg_pool", x, size=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (2, 0), (0, 0)], border="ignore"),
             name="y")
    with pytest.raises(NNEFXError, match="whole windows under border 'ignore'"):
        nnefx.save(b.build(), str(tmp_path / "m.onnx"))
    b = GraphBuilder("empty")
    x = b.external("x", shape=(2, 3))
    b.output(b.op("softmax", x, axes=[]), name="sm")
    b.output(b.op("sum_reduce", x, axes=[]), name="s")
    mean, var = b.op("moments", x, axes=[], outputs=2)
    b.output(mean, name="m")
    b.output(var, name="v")
    check(b.build(), {"x": rand(2, 3)}, tmp_path)


INTERPOLATIONS = [(m, c, nm, sc) for m in ("nearest", "linear_onnx", "cubic")
                  for c in ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn")
                  for nm in (("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple") if m == "nearest"
                             else ("round_prefer_floor",))
                  for sc in ((2.0, 1.5), (0.5, 0.75), (1 / 3, 5 / 3))]


@pytest.mark.parametrize("mode, coord, nearest, scales", INTERPOLATIONS)
def test_interpolate_convert_reverse_sequence(tmp_path, mode, coord, nearest, scales):
    """interpolate (Resize with the given scales), convert_element_type (Cast chains with OpenVINO's
    truncation and wrap-around), ir_reverse_sequence, against nnefx."""
    h, w = 6, 8
    sizes = [int(np.floor(h * scales[0])), int(np.floor(w * scales[1]))]
    text = f"""version 1.0;
extension nnefx_ir;
extension nnefx_ops;
graph G( x, lens ) -> ( y, u8, f16, b, i32, rs )
{{
    x = external<scalar>(shape = [2, 3, {h}, {w}]);
    lens = external<scalar>(shape = [3]);
    y = interpolate(x, axes = [2, 3], sizes = {sizes}, scales = {list(scales)}, mode = '{mode}',
                       coordinate_transformation_mode = '{coord}', nearest_mode = '{nearest}');
    u8 = convert_element_type<integer>(x, destination_type = 'u8');
    f16 = convert_element_type<scalar>(x, destination_type = 'f16');
    b = convert_element_type<logical>(x, destination_type = 'boolean');
    i32 = convert_element_type<integer>(u8, destination_type = 'i8');
    rs = ir_reverse_sequence(x, lens, seq_axis = 0, batch_axis = 1);
}}
"""
    graph = compile_document(text, file="interp.nnef")
    x = np.round(rand(2, 3, h, w, lo=-300, hi=300), 1)
    x[0, 0, 0, :4] = [0.0, -2.5, 2.5, 255.9]
    lens = np.array([2, 1, 2], np.float32)
    check(nnefx.Model(graph), {"x": x.astype(np.float32), "lens": lens}, tmp_path, rtol=1e-5)


def test_rank_zero_tensors_stay_rank_zero(tmp_path):
    b = GraphBuilder("scalars")
    s = b.external("s", shape=())
    v = b.external("v", shape=(3,))
    b.output(b.op("add", b.op("mul", s, 2.0), 1.0), name="y")
    b.output(b.op("sub", v, s), name="z")
    check(b.build(), {"s": np.asarray(1.5, np.float32), "v": rand(3)}, tmp_path)


@pytest.mark.parametrize("size", [(2, 7), (5, 3), (9, 12)])
def test_legacy_resampling_and_strided_slice(tmp_path, size):
    """ir_resample (nearest as per-axis Gathers of nnefx's own source indices, linear as
    Resize half_pixel), ir_interp (Caffe bilinear: Resize asymmetric / align_corners) and
    ir_strided_slice (resolved begin/end/stride) against nnefx."""
    h, w = size
    text = f"""version 1.0;
extension nnefx_ir;
graph G( x ) -> ( rn, rl, ia, ic, ss, sr )
{{
    x = external<scalar>(shape = [1, 2, 7, 5]);
    rn = ir_resample(x, output_size = [{h}, {w}], mode = 'nearest');
    rl = ir_resample(x, output_size = [{h}, {w}], mode = 'linear');
    ia = ir_interp(x, height = {h}, width = {w}, align_corners = true);
    ic = ir_interp(x, height = {h}, width = {w});
    ss = ir_strided_slice<scalar>(x, begin = [0, 1, 1, 4], end = [1, 2, 7, -1], stride = [1, 1, 2, -2]);
    sr = ir_strided_slice<scalar>(x, begin = [0, 0, 6, 0], end = [1, 2, 0, 5], stride = [1, 1, -3, 1]);
}}
"""
    graph = compile_document(text, file="legacy.nnef")
    check(nnefx.Model(graph), {"x": rand(1, 2, 7, 5)}, tmp_path)


def test_legacy_ir_catalog_examples(tmp_path):
    """The legacy IR catalog's example layers (Interp, Resample, Crop, DepthToSpace, Pad, ...)
    written as ONNX agree with nnefx; the large catalog stops at PSROIPooling, located."""
    model = nnefx.load("tests/fixtures/ir/legacy/catalog_examples.xml")
    rng = np.random.default_rng(0)
    feeds = {}
    for name in model.graph.inputs:
        t = model.graph.tensors[name]
        feeds[name] = rng.uniform(-1, 1, t.shape).astype(np.float32)
    check(model, feeds, tmp_path)
    with pytest.raises(NNEFXError, match=r"catalog_large_examples.xml:16:1 .*'psroi'.*ir_psroi_pooling"):
        nnefx.save(nnefx.load("tests/fixtures/ir/legacy/catalog_large_examples.xml"), str(tmp_path / "l.onnx"))
