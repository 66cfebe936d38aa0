"""Writing NNEF for tract (``nnefx.save(..., dialect="tract")``, ``convert --dialect tract``):
each written model is loaded and run by tract itself (its Python bindings, in a child process:
a panic in tract aborts its process) and compared with nnefx's formal backend on the source
model — within 1e-4 relative for floats, exactly for integers and booleans."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

pytest.importorskip("tract")
ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(7)

_CHILD = """
import pickle, sys, numpy as np, tract
jobs = pickle.load(open(sys.argv[1], 'rb'))
out = {}
for key, (folder, feed) in jobs.items():
    try:
        model = tract.nnef().load(folder).into_runnable()
        out[key] = [r.to_numpy() for r in model.run(feed)]
    except Exception as exc:
        out[key] = str(exc).split('Stack backtrace')[0]
pickle.dump(out, open(sys.argv[2], 'wb'))
"""


def _tract_run(jobs: dict, tmp: Path) -> dict:
    src, dst = tmp / "jobs.pkl", tmp / "out.pkl"
    src.write_bytes(pickle.dumps(jobs))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(dst)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return pickle.loads(dst.read_bytes())


def _feed(model) -> list[np.ndarray]:
    from nnefx import etypes

    feed = []
    for name in model.graph.inputs:
        op = next(o for o in model.graph.operations if name in o.output_names())
        shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in op.attribs["shape"])
        t = model.graph.tensors[name]
        dt = etypes.numpy_dtype(etypes.of(t))
        if dt.kind == "f":
            feed.append(RNG.uniform(-3, 3, shape).astype(dt))
        elif dt.kind == "b":
            feed.append(RNG.integers(0, 2, shape).astype(bool))
        else:
            feed.append(RNG.integers(0, 3, shape).astype(dt))
    return feed


def _check(models: dict, tmp_path: Path, feeds: dict | None = None, written: dict | None = None) -> None:
    """Write each model for tract (unless ``written`` has it), run it there and in nnefx (formal),
    compare."""
    jobs, refs = {}, {}
    for key, model in models.items():
        folder = (written or {}).get(key) or tmp_path / key
        if not (written or {}).get(key):
            nnefx.save(model, folder, dialect="tract")
        feed = (feeds or {}).get(key) or _feed(model)
        session = nnefx.Session(model, backend="formal")
        refs[key] = list(session.run(dict(zip(model.graph.inputs, feed, strict=True))).values())
        jobs[key] = (str(folder), feed)
    got = _tract_run(jobs, tmp_path)
    for key, ref in refs.items():
        assert not isinstance(got[key], str), f"{key}: tract refused: {got[key]}"
        assert len(got[key]) == len(ref), key
        for r, g in zip(ref, got[key], strict=True):
            r = np.asarray(r)
            assert g.shape == r.shape, (key, g.shape, r.shape)
            if r.dtype.kind == "f":
                scale = max(float(np.max(np.abs(r))), 1e-30) if r.size else 1.0
                assert float(np.max(np.abs(g.astype(np.float64) - r), initial=0.0)) / scale <= 1e-4, key
            else:
                np.testing.assert_array_equal(g, r, err_msg=key)


def test_real_models_run_in_tract(tmp_path):
    models = {
        "digits": nnefx.load(ROOT / "examples/digits/model"),
        "ir_cnn": nnefx.load(ROOT / "tests/fixtures/ir/opset/cnn.xml"),
        "ir_transformer": nnefx.load(ROOT / "tests/fixtures/ir/opset/transformer.xml"),
    }
    _check(models, tmp_path)
    text = (tmp_path / "ir_transformer" / "graph.nnef").read_text()
    assert "extension tract_registry tract_core;" in text and "tract_core_erf(" in text
    assert "= constant" not in text   # tract's library has no 'constant'


def test_onnx_model_runs_in_tract(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.up = torch.nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2)
            self.fc = torch.nn.Linear(6, 5)

        def forward(self, x):
            y = torch.nn.functional.gelu(self.up(torch.relu(self.conv(x))))
            return self.fc(y.mean(dim=(2, 3))).softmax(-1)

    torch.manual_seed(0)
    path = tmp_path / "net.onnx"
    torch.onnx.export(Net().eval(), (torch.randn(1, 3, 6, 6),), str(path), input_names=["x"],
                      output_names=["y"], dynamo=False)
    _check({"onnx_net": nnefx.load(path)}, tmp_path)


_DOC = "version 1.0;\nextension nnefx_ops;\n\ngraph g( {ins} ) -> ( {outs} )\n{{\n{body}\n}}\n"

#: one small graph per rule: (inputs as 'name: type[shape]', outputs, body)
RULE_CASES = {
    "mish": ("x = external<scalar>(shape = [2, 5]);", "y", "y = mish(x);"),
    "erf_gather_topk": ("x = external<scalar>(shape = [2, 3, 4]); i = external<integer>(shape = [2]);",
                        "y, v, k",
                        """e = erf(x);
    s = tensor_shape(x);
    r = reshape_to(e, s, special_zero = true);
    y = gather_axis(r, i, axis = 2);
    (v, k) = top_k(x, k = 2, axis = 2, mode = 'max', sort = 'value');"""),
    "topk_min": ("x = external<scalar>(shape = [3, 5]);", "v, k",
                 "(v, k) = top_k(x, k = 3, axis = 1, mode = 'min', sort = 'value');"),
    "broadcast": ("x = external<scalar>(shape = [3, 1]); z = external<scalar>(shape = [4]);", "y, b, e",
                  """s = constant<integer>(shape = [3], value = [2, 3, 4]);
    y = broadcast_to(x, s, mode = 'numpy');
    b = broadcast_to(x, s, mode = 'bidirectional');
    t = constant<integer>(shape = [2], value = [4, 2]);
    e = broadcast_to(z, t, mode = 'explicit', axes_mapping = [0]);"""),
    "convert": ("x = external<scalar>(shape = [12]); n = external<integer>(shape = [4]);", "a, b, c, d, f",
                """w = constant<scalar>(shape = [12], value = [-2.5, 2.5, 300.7, -300.7, 1e10, -1e10, 3e9, 0.49,
        -0.0, 65535.9, 2147483647.0, -2147483648.0]);
    v = add(x, w);
    a = convert_element_type<integer>(w, destination_type = 'i32');
    b = convert_element_type<integer>(v, destination_type = 'u8');
    c = convert_element_type<integer>(v, destination_type = 'i64');
    d = convert_element_type<scalar>(n, destination_type = 'f32');
    f = convert_element_type<logical>(v, destination_type = 'boolean');"""),
    "indexing": ("x = external<scalar>(shape = [3, 4]); i = external<integer>(shape = [3, 2]);", "y, z",
                 """y = gather_elements(x, i, axis = 1);
    j = constant<integer>(shape = [2, 2], value = [0, 1, 2, 3]);
    z = gather_nd(x, j, batch_dims = 0);"""),
    "reductions": ("x = external<scalar>(shape = [2, 3, 4]);", "p, r, e",
                   """p = prod_reduce(x, axes = [1, 2]);
    h = constant<scalar>(shape = [6], value = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]);
    r = round_with_mode(h, mode = 'half_to_even');
    y = constant<scalar>(shape = [4, 2], value = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    e = einsum([x, y], equation = 'abc,cd->abd');"""),
    "arith": ("x = external<scalar>(shape = [2, 3]); y = external<scalar>(shape = [3]); "
              "i = external<integer>(shape = [2, 3]); j = external<integer>(shape = [3]);", "a, d, p, m, c",
              """a = integer_arith(x, y, op = 'add');
    d = integer_arith(x, y, op = 'divide');
    p = integer_arith(y, x, op = 'maximum');
    m = integer_arith(i, j, op = 'multiply');
    c = integer_compare(x, y, op = 'less_equal');"""),
    "one_hot": ("i = external<integer>(shape = [2, 3]);", "y",
                """on = constant<scalar>(shape = [], value = [5.0]);
    off = constant<scalar>(shape = [], value = [-1.0]);
    y = one_hot(i, on, off, depth = 3, axis = 1);"""),
}


def _doc(tmp_path: Path, key: str) -> nnefx.Model:
    ins, outs, body = RULE_CASES[key]
    names = [s.split("=")[0].strip() for s in ins.split(";") if s.strip()]
    text = _DOC.format(ins=", ".join(names), outs=outs, body="    " + ins.replace("; ", ";\n    ") + "\n    " + body)
    path = tmp_path / f"{key}.nnef"
    path.write_text(text)
    return nnefx.load(path)


def test_each_rule_matches_tract(tmp_path):
    models = {key: _doc(tmp_path, key) for key in RULE_CASES}
    feeds = {"one_hot": [np.array([[0, 2, 1], [1, 0, 2]], np.int64)]}
    _check(models, tmp_path, feeds)


def test_convert_cli_writes_for_tract(tmp_path, capsys):
    from nnefx.cli import main

    source = ROOT / "tests/fixtures/ir/opset/transformer.xml"
    out = tmp_path / "t"
    assert main(["convert", str(source), str(out), "--dialect", "tract"]) == 0
    assert "extension tract_registry tract_core;" in (out / "graph.nnef").read_text()
    _check({"cli": nnefx.load(source)}, tmp_path, written={"cli": out})


@pytest.mark.parametrize("source,message", [
    ("tests/fixtures/ir/opset/lstm.xml", "cannot write operation 'tensor_shape' for tract"),
    ("tests/fixtures/cvm/ex03_gvc_nms.json", "cannot write operation 'cvm_get_valid_counts' for tract"),
])
def test_no_exact_form_is_a_located_error(tmp_path, source, message):
    kw = {"params": str(ROOT / source)[:-5] + ".params"} if source.endswith(".json") else {}
    model = nnefx.load(ROOT / source, **kw)
    with pytest.raises(NNEFXError, match=message) as info:
        nnefx.save(model, tmp_path / "out", dialect="tract")
    assert info.value.location is not None
    assert not (tmp_path / "out").exists()


def test_topk_sorted_by_index_refused(tmp_path):
    (tmp_path / "k.nnef").write_text(_DOC.format(ins="x", outs="v, k", body="""    x = external<scalar>(shape = [5]);
    (v, k) = top_k(x, k = 2, axis = 0, mode = 'max', sort = 'index');"""))
    with pytest.raises(NNEFXError, match=r"'top_k' for tract: sort 'index'") as info:
        nnefx.save(nnefx.load(tmp_path / "k.nnef"), tmp_path / "out", dialect="tract")
    assert info.value.location.line == 7


def test_tract_dialect_is_nnef_only(tmp_path):
    model = nnefx.load(ROOT / "examples/digits/model")
    with pytest.raises(NNEFXError, match="dialect 'tract' is NNEF"):
        nnefx.save(model, tmp_path / "m.onnx", dialect="tract")


CVM_FIXTURES = sorted(p.stem for p in (ROOT / "tests/fixtures/cvm").glob("ex*.json") if p.stem != "ex03_gvc_nms")


def test_cvm_examples_run_in_tract_exactly(tmp_path):
    cvm = ROOT / "tests/fixtures/cvm"
    models = {k: nnefx.load(cvm / f"{k}.json", params=str(cvm / f"{k}.params")) for k in CVM_FIXTURES}
    feeds = {k: [np.load(cvm / f"{k}.in.npy")] for k in CVM_FIXTURES}
    _check(models, tmp_path, feeds)
    assert "tract_core_external(shape = [1, 3, 7, 7], datum_type = 'i32')" in \
        (tmp_path / "ex01_conv_pool_dense" / "graph.nnef").read_text()


I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
EDGES = np.array([I32_MAX, I32_MIN + 1, 0, 1, -1, 2, -2, 3, -3, 127, -128, 1 << 20, -(1 << 20), 5, -7, 8],
                 np.int32).reshape(4, 4)

#: one small graph per integer rule: (inputs, outputs, body); inputs are int32 [4, 4] unless shaped
CVM_CASES = {
    "elementwise": ("a, b", "c1, c2, r, n, m, s, d",
                    """c1 = cvm_cvm_clip(a, precision = 8);
    c2 = cvm_clip(a, a_min = -5, a_max = 100);
    r = cvm_relu(a);
    n = cvm_negative(b);
    m = cvm_abs(b);
    s = cvm_elemwise_sub(cvm_elemwise_add(a, b), b);
    d = cvm_broadcast_div(a, b);"""),
    "shifts": ("a, b", "r1, r2, r32, l, p",
               """r1 = cvm_cvm_right_shift(a, precision = 32, shift_bit = 1);
    r2 = cvm_cvm_right_shift(b, precision = 8, shift_bit = 3);
    r32 = cvm_cvm_right_shift(a, precision = 32, shift_bit = 32);
    l = cvm_cvm_left_shift(b, precision = 32, shift_bit = 31);
    p = cvm_cvm_precision(a);"""),
    "broadcast": ("a, b", "s, m, x, g",
                  """row = cvm_strided_slice(b, begin = [1, 0], end = [2, 4]);
    s = cvm_broadcast_sub(a, row);
    m = cvm_broadcast_mul(a, row);
    x = cvm_broadcast_max(a, row);
    g = cvm_broadcast_greater(a, row);"""),
    "reduce_shape": ("a, b", "s0, s1, m0, m1, t, f, w",
                     """s0 = cvm_sum(b, axis = [1], keepdims = true);
    s1 = cvm_sum(b, axis = [0], exclude = true);
    m0 = cvm_max(b);
    m1 = cvm_max(b, axis = [0, 1]);
    t = cvm_transpose(cvm_reshape(a, shape = [2, 8]), axes = [1, 0]);
    f = cvm_flatten(cvm_expand_dims(b, axis = 1, num_newaxis = 2));
    w = cvm_where(a, b, cvm_tile(cvm_squeeze(cvm_strided_slice(b, begin = [3, 3], end = [-5, -5],
                                                               stride = [-1, -1]), axis = []), reps = [1]));"""),
    "gathers": ("a, b", "k, l, p, u, y",
                """k = cvm_take(a, b, axis = [1]);
    l = cvm_cvm_lut(b, a, in_dim = 16);
    p = cvm_repeat(a, repeats = 2, axis = 0);
    u = cvm_upsampling(cvm_reshape(a, shape = [1, 1, 4, 4]), scale = 2);
    y = cvm_slice_like(a, cvm_strided_slice(b, begin = [0, 0], end = [3, 2]), axis = []);"""),
    "nn": ("a, b", "c, g, q, d",
           """x = cvm_reshape(cvm_cvm_clip(a, precision = 8), shape = [1, 4, 2, 2]);
    k = cvm_reshape(cvm_cvm_clip(b, precision = 8), shape = [4, 2, 2, 1]);
    bias = cvm_reshape(cvm_strided_slice(b, begin = [0, 0], end = [1, 4]), shape = [4]);
    c = cvm_conv2d(x, k, bias, channels = 4, kernel_size = [2, 1], strides = [1, 2], padding = [1, 1],
                   dilation = [1, 1], groups = 2);
    g = cvm_conv2d(cvm_reshape(cvm_cvm_clip(a, precision = 8), shape = [1, 1, 4, 4]),
                   cvm_reshape(cvm_strided_slice(b, begin = [0, 0], end = [3, 3]), shape = [1, 1, 3, 3]),
                   channels = 1, kernel_size = [3, 3], padding = [2, 2], dilation = [2, 2], use_bias = false);
    q = cvm_max_pool2d(cvm_reshape(a, shape = [1, 1, 4, 4]), pool_size = [3, 3], strides = [2, 2],
                       padding = [1, 1], ceil_mode = true);
    d = cvm_dense(cvm_cvm_clip(a, precision = 8), cvm_cvm_clip(b, precision = 8), bias, units = 4);"""),
}


def test_each_integer_rule_matches_tract_exactly(tmp_path):
    models, feeds = {}, {}
    small = np.array([[3, -1, 40, 2], [0, -7, 5, 17], [-2, 9, 1, -3], [6, 0, -4, 1]], np.int32)
    for key, (ins, outs, body) in CVM_CASES.items():
        decl = "\n".join(f"    {n.strip()} = external<integer>(shape = [4, 4]);" for n in ins.split(","))
        text = f"version 1.0;\nextension nnefx_cvm;\nextension KHR_enable_operator_expressions;\n\ngraph g( {ins} ) -> ( {outs} )\n{{\n{decl}\n    {body}\n}}\n"
        (tmp_path / f"{key}.nnef").write_text(text)
        models[key] = nnefx.load(tmp_path / f"{key}.nnef")
        feeds[key] = [EDGES, small]
    _check(models, tmp_path, feeds)
