"""IR v11 writer: NNEF graphs built with GraphBuilder -> ``.xml``/``.bin`` -> OpenVINO runs them
and agrees with nnefx; nnefx reads its own output back; unsupported operations fail with a
location and leave nothing behind."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError
from nnefx.io.builder import GraphBuilder
from nnefx.runtime.session import Session

RNG = np.random.default_rng(7)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def run_openvino(xml: str, feeds: dict) -> dict:
    ov = pytest.importorskip("openvino")
    cm = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = cm(feeds)
    return {o.get_any_name(): np.asarray(res[o]) for o in cm.outputs}


def close(got, want, rtol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == np.bool_ or want.dtype.kind in "iu":
        np.testing.assert_array_equal(got.astype(want.dtype), want)
        return
    scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) if want.size else 0.0
    assert err <= rtol * scale, f"max abs error {err} (scale {scale})"


def check(model, feeds: dict, tmp_path, rtol=1e-4, roundtrip=True, **save_opts) -> str:
    """Save as IR v11, run with OpenVINO and nnefx (original and re-read): all must agree.

    ``roundtrip=False`` where a written layer type is one nnefx's opset reader does not map
    (yet): OpenVINO agreement is still required.
    """
    want = Session(model, "fast").run(feeds)
    xml = str(tmp_path / "model.xml")
    nnefx.save(model, xml, **save_opts)
    got = run_openvino(xml, feeds)
    assert set(got) == set(want), (sorted(got), sorted(want))
    bad = []
    for k in want:
        try:
            close(got[k], want[k], rtol)
        except AssertionError as exc:
            bad.append(f"{k}: {exc}")
    assert not bad, bad
    if not roundtrip:
        return xml
    back = Session(nnefx.load(xml), "fast").run(feeds)
    assert list(back) == list(want)
    for k in want:
        close(back[k], want[k], rtol)
    return xml


def cnn() -> tuple:
    b = GraphBuilder("cnn")
    x = b.external("input", shape=(2, 4, 9, 8))
    y = b.op("conv", x, b.variable("c1/w", rand(8, 2, 3, 3)), b.variable("c1/b", rand(1, 8)), groups=2,
             padding=[(1, 1), (0, 1)], stride=[2, 1])
    y = b.op("relu", y)
    p1 = b.op("max_pool", y, size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border="constant",
              stride=[1, 1, 2, 2])
    p2 = b.op("max_pool", y, size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border="ignore",
              stride=[1, 1, 2, 2])
    p3 = b.op("avg_pool", y, size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border="ignore",
              stride=[1, 1, 2, 2])
    p4 = b.op("avg_pool", y, size=[1, 1, 3, 3], padding=[], border="constant", stride=[1, 1, 2, 2])
    s = b.op("add", b.op("sub", p1, p2), b.op("mul", p3, p4))
    z = b.op("conv", s, b.variable("c2/w", rand(6, 8, 2, 2)), b.variable("c2/b", rand(1, 6)), padding=[])
    z = b.op("conv", z, b.variable("dw/w", rand(6, 1, 3, 3)), groups=0, padding=[], border="reflect")
    f = b.op("reshape", z, shape=[2, -1])
    fc = b.op("linear", f, b.variable("fc/w", rand(5, 72)), b.variable("fc/b", rand(1, 5)))
    b.output(b.op("softmax", fc), name="probs")
    b.output(p1, name="pooled")
    return b.build(), {"input": rand(2, 4, 9, 8, lo=-2, hi=2)}


def test_cnn_grouped_conv_pooling_borders_linear_softmax(tmp_path):
    model, feeds = cnn()
    xml = check(model, feeds, tmp_path)
    text = open(xml).read()
    assert 'version="11"' in text and 'type="GroupConvolution"' in text and 'names="probs"' in text
    assert os.path.getsize(xml[:-4] + ".bin") > 0


def test_compress_to_fp16_stores_half_behind_convert(tmp_path):
    model, feeds = cnn()
    xml = str(tmp_path / "m16.xml")
    nnefx.save(model, xml, compress_to_fp16=True)
    text = open(xml).read()
    assert 'element_type="f16"' in text and 'destination_type="f32"' in text
    want = Session(model, "fast").run(feeds)
    got = run_openvino(xml, feeds)
    back = Session(nnefx.load(xml), "fast").run(feeds)
    for k in want:  # weights rounded to f16: agreement to f16 precision only
        close(got[k], want[k], rtol=2e-2)
        close(back[k], got[k], rtol=1e-4)   # both read the same f16 weights
    nnefx.save(model, str(tmp_path / "m32.xml"))
    assert os.path.getsize(str(tmp_path / "m16.bin")) < 0.6 * os.path.getsize(str(tmp_path / "m32.bin"))


def test_shape_ops_and_nnef_broadcasting(tmp_path):
    b = GraphBuilder("shapes")
    x = b.external("x", shape=(2, 3, 4, 5))
    v = b.external("v", shape=(2, 3))                  # NNEF: aligned from dim 0 -> [2, 3, 1, 1]
    c = b.variable("c", rand(1, 3))
    y = b.op("add", x, v)
    y = b.op("mul", y, c)
    y = b.op("sub", y, 0.5)
    t = b.op("transpose", y, axes=[0, 2, 1, 3])
    cat = b.op("concat", [t, t], axis=3)
    sl = b.op("slice", cat, axes=[1, 3], begin=[1, -8], end=[4, -1], stride=[2, 3])
    sl2 = b.op("slice", cat, axes=[3], begin=[-1], end=[-11], stride=[-2])
    parts = b.op("split", cat, axis=3, ratios=[2, 3], outputs=2)
    sq = b.op("squeeze", b.op("unsqueeze", v, axes=[0, 3]), axes=[0])
    r = b.op("reshape", x, shape=[0, -1], axis_start=1, axis_count=2)
    b.output(sl, name="sliced")
    b.output(sl2, name="reversed")
    b.output(parts[1], name="part")
    b.output(sq, name="sq")
    b.output(r, name="r")
    b.output(b.op("select", b.op("gt", x, v), x, b.op("clamp", x, -0.5, 0.25)), name="sel")
    b.output(b.op("pad", v, padding=[(1, 0), (0, 2)], border="reflect"), name="padded")
    b.output(b.op("tile", v, repeats=[2, 1]), name="tiled")
    b.output(b.op("mean_reduce", x, axes=[2, 3]), name="mean")
    b.output(b.op("max_reduce", x, axes=[1]), name="max")
    b.output(b.op("sum_reduce", x, axes=[0, 3], normalize=False), name="sum")
    b.output(b.op("softmax", x, axes=[2, 3]), name="sm23")
    check(b.build(), {"x": rand(2, 3, 4, 5), "v": rand(2, 3)}, tmp_path)


def test_elementwise_family(tmp_path):
    b = GraphBuilder("elt")
    x = b.external("x", shape=(3, 4))
    p = b.op("add", b.op("abs", x), 0.5)
    outs = {
        "u": b.op("add", b.op("exp", x), b.op("log", p)),
        "v": b.op("mul", b.op("sqrt", p), b.op("rsqrt", p)),
        "w": b.op("sub", b.op("sigmoid", x), b.op("tanh", x)),
        "e": b.op("elu", x, alpha=0.7),
        "lr": b.op("leaky_relu", x, alpha=0.1),
        "pr": b.op("prelu", x, b.variable("slope", rand(3, 1))),
        "g": b.op("gelu", x),
        "s": b.op("silu", x),
        "sp": b.op("softplus", x),
        "rd": b.op("round", b.op("mul", x, 4.0)),
        "fl": b.op("add", b.op("floor", x), b.op("ceil", x)),
        "sg": b.op("mul", b.op("sign", x), b.op("sqr", x)),
        "rc": b.op("rcp", p),
        "mn": b.op("min", b.op("max", x, -0.2), 0.3),
        "pw": b.op("pow", p, 1.5),
        "lg": b.op("log2", p),
        "neg": b.op("neg", x),
    }
    for k, v in outs.items():
        b.output(v, name=k)
    x_in = rand(3, 4, lo=-3, hi=3)
    x_in[0, :2] = [0.5, -1.5]    # round's ties
    check(b.build(), {"x": x_in}, tmp_path)


def test_matmul_batchnorm_lrn_upsample_deconv(tmp_path):
    b = GraphBuilder("misc")
    x = b.external("x", shape=(1, 4, 5, 6))
    a = b.external("a", shape=(2, 3, 4))
    m = b.op("matmul", a, b.variable("mb", rand(2, 5, 4)), transposeB=True)
    bn = b.op("batch_normalization", x, b.variable("mean", rand(1, 4)), b.variable("var", rand(1, 4, lo=0.1, hi=1)),
              b.variable("off", rand(1, 4)), b.variable("scale", rand(1, 4)), epsilon=1e-3)
    up = b.op("nearest_upsample", x, factor=[2, 3])
    dc = b.op("deconv", x, b.variable("dw", rand(4, 3, 3, 3)), b.variable("db", rand(1, 3)), stride=[2, 2],
              padding=[(1, 1), (0, 1)])
    dg = b.op("deconv", x, b.variable("gw", rand(4, 1, 2, 2)), stride=[2, 2], padding=[], groups=2)
    l2 = b.op("l2_normalization", x, axes=[1], epsilon=1e-6)
    ad = b.op("area_downsample", x, factor=[1, 2])
    for k, v in {"m": m, "bn": bn, "up": up, "dc": dc, "dg": dg, "l2": l2, "ad": ad}.items():
        b.output(v, name=k)
    check(b.build(), {"x": rand(1, 4, 5, 6), "a": rand(2, 3, 4)}, tmp_path)


@pytest.mark.parametrize("bias", [1.0, 1.5])
def test_local_response_normalization(tmp_path, bias):
    b = GraphBuilder("lrn")
    x = b.external("x", shape=(1, 6, 3, 4))
    b.output(b.op("local_response_normalization", x, size=[1, 3, 1, 1], alpha=0.2, beta=0.75, bias=bias), name="y")
    check(b.build(), {"x": rand(1, 6, 3, 4, lo=-2, hi=2)}, tmp_path)


def test_nnef_folder_convert_command(tmp_path):
    from nnefx.cli import main

    model, feeds = cnn()
    folder = str(tmp_path / "cnn_nnef")
    nnefx.save(model, folder)
    xml = str(tmp_path / "cnn.xml")
    assert main(["convert", folder, xml]) == 0
    want = Session(nnefx.load(folder), "fast").run(feeds)
    got = run_openvino(xml, feeds)
    for k in want:
        close(got[k], want[k])


def test_unsupported_operation_is_located_and_nothing_written(tmp_path):
    b = GraphBuilder("bad")
    x = b.external("x", shape=(1, 2, 4, 4))
    y = b.op("relu", x)
    b.output(b.op("argmax_pool", y, size=[1, 1, 2, 2], stride=[1, 1, 2, 2]), name="idx")
    model = b.build()
    xml = tmp_path / "bad.xml"
    with pytest.raises(NNEFXError) as e:
        nnefx.save(model, str(xml))
    msg = str(e.value)
    assert "argmax_pool" in msg and "no opset equivalent" in msg
    assert e.value.location is not None and e.value.location.line is not None
    assert os.listdir(tmp_path) == []


def test_inexact_attributes_are_refused(tmp_path):
    b = GraphBuilder("lrn")
    x = b.external("x", shape=(1, 4, 3, 3))
    b.output(b.op("local_response_normalization", x, size=[1, 2, 1, 1]), name="y")
    with pytest.raises(NNEFXError, match="local_response_normalization.*window size"):
        nnefx.save(b.build(), str(tmp_path / "lrn.xml"))
    assert os.listdir(tmp_path) == []


def test_variables_with_update_become_read_value_and_assign(tmp_path):
    """State: an updated variable becomes ReadValue-6 (initialised from its data) + Assign-6;
    OpenVINO's infer request carries it across inferences as a Session does across runs."""
    text = """version 1.0;
extension KHR_enable_operator_expressions;  # nested invocations below
graph g( x ) -> ( y, v2 )
{
    x = external<scalar>(shape = [1, 2]);
    v = variable<scalar>(shape = [1, 2], label = 'acc');
    y = add(mul(x, 2.0), v);
    v2 = update(v, y);
}
"""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "graph.nnef").write_text(text)
    from nnefx.io.binary import write_tensor

    write_tensor(str(folder / "acc.dat"), np.array([[0.5, -1.0]], np.float32))
    model = nnefx.load(str(folder))
    xml = str(tmp_path / "state.xml")
    nnefx.save(model, xml)
    assert 'type="ReadValue"' in open(xml).read() and 'type="Assign"' in open(xml).read()
    ov = pytest.importorskip("openvino")
    request = ov.Core().compile_model(xml, "CPU").create_infer_request()
    sess = Session(model, "fast")
    for step in range(4):
        if step == 3:
            request.reset_state()
            sess.reset()
        feeds = {"x": rand(1, 2)}
        want = sess.run(feeds)
        got = request.infer(feeds)
        close(got["y"], want["y"])
        close(got["v2"], want["v2"])


def test_failed_write_leaves_old_files_alone(tmp_path):
    model, _ = cnn()
    xml = tmp_path / "m.xml"
    xml.write_text("old")
    (tmp_path / "m.bin").mkdir()          # the .bin cannot be replaced: the save must fail whole
    with pytest.raises(NNEFXError, match="cannot write"):
        nnefx.save(model, str(xml))
    assert xml.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["m.bin", "m.xml"]


@pytest.mark.parametrize("name", ["cnn", "lstm", "transformer"])
def test_openvino_written_files_rewrite(tmp_path, name):
    """IR v11 files written by OpenVINO (fixtures, dynamic batch fixed while loading) -> nnefx ->
    IR v11 again: OpenVINO's recorded outputs are reproduced by the rewritten file."""
    d = "tests/fixtures/ir/opset"
    x = np.load(f"{d}/{name}.x.npy")
    model = nnefx.load(f"{d}/{name}.xml", shapes={"x": x.shape})
    xml = check(model, {"x": x}, tmp_path)
    got = run_openvino(xml, {"x": x})
    close(got["y"], np.load(f"{d}/{name}.y.npy"))


def test_trigonometric_logical_and_remaining_reductions(tmp_path):
    b = GraphBuilder("rest")
    x = b.external("x", shape=(2, 3, 4, 6))
    u = b.op("mul", b.op("tanh", x), 0.9)                 # inside (-1, 1)
    g = b.op("add", b.op("abs", x), 1.5)                  # > 1
    outs = {
        "trig": b.op("add", b.op("add", b.op("sin", x), b.op("cos", x)), b.op("tan", u)),
        "arc": b.op("add", b.op("add", b.op("asin", u), b.op("acos", u)), b.op("atan", x)),
        "hyp": b.op("add", b.op("add", b.op("sinh", u), b.op("cosh", u)), b.op("asinh", x)),
        "ahyp": b.op("add", b.op("acosh", g), b.op("atanh", u)),
        "selu": b.op("selu", x),
        "minr": b.op("min_reduce", x, axes=[1, 2]),
        "down": b.op("nearest_downsample", x, factor=[2, 3]),
    }
    pos, neg = b.op("gt", x, 0.0), b.op("lt", x, -0.5)
    logic = b.op("or", b.op("and", pos, b.op("not", neg)), b.op("eq", x, 0.0))
    logic = b.op("and", logic, b.op("or", b.op("le", x, 0.25), b.op("ge", x, 0.75)))
    logic = b.op("or", logic, b.op("and", b.op("eq", b.op("floor", x), 0.0), b.op("ne", b.op("ceil", x), 1.0)))
    outs["any"] = b.op("any_reduce", logic, axes=[3])
    outs["all"] = b.op("all_reduce", logic, axes=[2])
    outs["masked"] = b.op("select", logic, x, 0.0)
    for k, v in outs.items():
        b.output(v, name=k)
    check(b.build(), {"x": rand(2, 3, 4, 6, lo=-2, hi=2)}, tmp_path)


def test_upsampling_moments_box_rms_argmax(tmp_path):
    b = GraphBuilder("more")
    x = b.external("x", shape=(1, 3, 4, 5))
    outs = {
        "sym": b.op("multilinear_upsample", x, factor=[2, 3], method="symmetric", border="replicate"),
        "asym": b.op("multilinear_upsample", x, factor=[2, 2], method="asymmetric", border="replicate"),
        "aligned": b.op("multilinear_upsample", x, factor=[3, 2], method="aligned", border="constant"),
        "box": b.op("box", x, size=[1, 1, 3, 2], padding=[(0, 0), (0, 0), (1, 1), (0, 1)], border="ignore"),
        "boxn": b.op("box", x, size=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (1, 0), (0, 1)], border="ignore",
                     normalize=True),
        "boxr": b.op("box", x, size=[1, 1, 3, 3], padding=[], border="reflect", stride=[1, 1, 2, 1]),
        "rms": b.op("rms_pool", x, size=[1, 1, 2, 2], stride=[1, 1, 2, 2], padding=[(0, 0), (0, 0), (0, 0), (0, 1)]),
        "amax": b.op("argmax_reduce", b.op("round", b.op("mul", x, 2.0)), axes=[1]),
    }
    mean, var = b.op("moments", x, axes=[2, 3], outputs=2)
    outs["mean"], outs["var"] = mean, var
    for k, v in outs.items():
        b.output(v, name=k)
    check(b.build(), {"x": rand(1, 3, 4, 5, lo=-2, hi=2)}, tmp_path)


def test_multilinear_with_zero_border_is_refused(tmp_path):
    b = GraphBuilder("mlu")
    x = b.external("x", shape=(1, 1, 3, 3))
    b.output(b.op("multilinear_upsample", x, factor=[2, 2], method="symmetric", border="constant"), name="y")
    with pytest.raises(NNEFXError, match="multilinear_upsample.*border 'constant' has no Interpolate form"):
        nnefx.save(b.build(), str(tmp_path / "m.xml"))


def test_more_compounds(tmp_path):
    b = GraphBuilder("compounds")
    x = b.external("x", shape=(2, 4, 6, 5))
    v = b.external("v", shape=(2, 4))
    parts = b.op("unstack", v, axis=1, outputs=4)
    outs = {
        "addn": b.op("add_n", [x, v, b.op("abs", x)]),
        "stacked": b.op("stack", [v, b.op("neg", v)], axis=1),
        "u2": parts[2],
        "rsqr": b.op("rsqr", b.op("add", b.op("abs", x), 0.5)),
        "softabs": b.op("softabs", x, epsilon=0.01),
        "amin": b.op("argmin_reduce", b.op("round", x), axes=[2]),
        "l1": b.op("l1_normalization", x, axes=[1, 3], bias=0.1, epsilon=1e-3),
        "sep": b.op("separable_conv", x, b.variable("plane", rand(4, 1, 3, 2)), b.variable("point", rand(6, 2, 1, 1)),
                    b.variable("sb", rand(1, 6)), padding=[(1, 1), (0, 1)], stride=[2, 1], groups=2),
    }
    a, c = b.op("copy_n", v, times=2, outputs=2)
    outs["c0"], outs["c1"] = a, c
    for k, val in outs.items():
        b.output(val, name=k)
    check(b.build(), {"x": rand(2, 4, 6, 5, lo=-2, hi=2), "v": rand(2, 4)}, tmp_path)


def test_compounds_without_exporter_are_written_through_their_definition(tmp_path):
    b = GraphBuilder("defs")
    x = b.external("x", shape=(1, 2, 6, 5))
    outs = {"lmn": b.op("local_mean_normalization", x, size=[1, 1, 3, 3]),
            "lcn": b.op("local_contrast_normalization", x, size=[1, 1, 3, 3], bias=0.5, epsilon=1e-3),
            "lvn": b.op("local_variance_normalization", x, size=[1, 1, 3, 1], bias=0.1, epsilon=1e-3),
            "lq": b.op("linear_quantize", x, -0.5, 0.7, bits=4),
            "lgq": b.op("logarithmic_quantize", b.op("abs", x), 1.0, bits=3)}
    for k, v in outs.items():
        b.output(v, name=k)
    model = b.build()
    assert {op.op for op in model.graph.operations} >= {"local_contrast_normalization", "linear_quantize"}
    check(model, {"x": rand(1, 2, 6, 5)}, tmp_path)


def test_definition_using_an_unexportable_operation_is_located(tmp_path):
    b = GraphBuilder("mpi")
    x = b.external("x", shape=(1, 1, 4, 4))
    y, idx = b.op("max_pool_with_index", x, size=[1, 1, 2, 2], stride=[1, 1, 2, 2], outputs=2)
    b.output(y, name="y")
    b.output(idx, name="idx")
    with pytest.raises(NNEFXError) as e:
        nnefx.save(b.build(), str(tmp_path / "m.xml"))
    assert "max_pool_with_index" in str(e.value) and "argmax_pool" in str(e.value)
    assert e.value.location is not None and e.value.location.line is not None
    assert os.listdir(tmp_path) == []
