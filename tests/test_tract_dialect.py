"""tract's NNEF dialect: header lines, symbols, assertions, properties, item types, safetensors.

The operations of tract's registries are tested with their family modules; these tests use
standard operations (``external`` accepts symbols as tract's does) so they run on the
front-end alone.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

import nnefx
from nnefx import dims
from nnefx.diagnostics import NNEFXError
from nnefx.io import binary
from nnefx.io import tract_items as ti
from nnefx.semantics.frontend import compile_document

HEADER = """version 1.0;
extension tract_registry tract_core;
extension tract_symbol B;
"""

PROPS = """
fragment tract_core_properties(
) -> (properties: (string, tensor<scalar>)[])
{
  properties = [
    ("tract_target_version", "0.23.8"),
    ("exported_py_class", "M"),
    ("layers", 3)
  ];
}
"""

# a fragment without KHR_enable_fragment_definitions, with operator expressions, its
# attribute 'eps' receiving a variable (tract reads the value), softmax's axes positional
BODY = """
fragment norm( x: tensor<scalar>, axes: integer[], eps: scalar ) -> ( y: tensor<scalar> )
{
    m = sum_reduce(x, axes = axes, normalize = true);
    y = (x - m) * rsqrt(sum_reduce(sqr(x - m), axes = axes, normalize = true) + eps);
}

graph network(x) -> (y)
{
    x = external(shape = [B, 8]);
    w = variable<scalar>(label = 'w', shape = [4, 8]);
    e = variable<scalar>(label = 'e', shape = []);
    l = linear(x, w);
    n = norm(l, axes = [1], eps = e);
    y = softmax(n, 1);
}
"""


def write_model(folder, text, rng=None):
    rng = rng or np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    binary.write_tensor(str(folder / "w.dat"), rng.standard_normal((4, 8)).astype(np.float32))
    binary.write_tensor(str(folder / "e.dat"), np.array(1e-5, np.float32))
    return folder


def reference(model, x):
    w = model.graph.tensors["w"].data.astype(np.float64)
    l_ = x.astype(np.float64) @ w.T
    m = l_.mean(1, keepdims=True)
    n = (l_ - m) / np.sqrt(((l_ - m) ** 2).mean(1, keepdims=True) + 1e-5)
    e = np.exp(n - n.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# --- header ------------------------------------------------------------------------------


def test_tract_document_loads_shapes_and_runs_with_symbols(tmp_path):
    model = nnefx.load(write_model(tmp_path / "m", HEADER + "extension tract_assert B >= 1;\n" + PROPS + BODY))
    g = model.graph
    assert g.symbols == ["B"]
    B = dims.symbol("B")
    assert g.tensors["x"].shape == (B, 8)
    assert g.tensors["y"].shape == (B, 4)
    assert [str(a) for a in g.assertions] == ["B >= 1"]
    assert model.extras["properties"] == {"tract_target_version": "0.23.8", "exported_py_class": "M",
                                          "layers": 3}
    session = nnefx.Session(model)
    for batch in (1, 3, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        y = session.run({"x": x})["y"]
        assert y.shape == (batch, 4)
        np.testing.assert_allclose(y, reference(model, x), rtol=1e-5, atol=1e-6)
    with pytest.raises(NNEFXError, match=r"tract_assert 'B >= 1' \(B = 0\)"):
        session.run({"x": np.zeros((0, 8), np.float32)})


def test_inspect_shows_properties_and_symbols(tmp_path):
    folder = write_model(tmp_path / "m", HEADER + PROPS + BODY)
    out = subprocess.run([sys.executable, "-m", "nnefx", "inspect", str(folder)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "symbols: B" in out.stdout
    assert "exported_py_class: M" in out.stdout
    assert "x: scalar [B, 8]" in out.stdout
    js = subprocess.run([sys.executable, "-m", "nnefx", "inspect", "--json", str(folder)],
                        capture_output=True, text=True)
    assert json.loads(js.stdout)["tensors"]["x"]["shape"] == ["B", 8]


@pytest.mark.parametrize("line, message", [
    ("extension tract_registry tract_nowhere;", "unknown tract registry 'tract_nowhere'"),
    ("extension tract_symbol B;", "symbol 'B' is declared twice"),
    ("extension tract_symbol C D;", "needs one symbol name"),
    ("extension tract_assert C >= 1;", "unknown symbol 'C'"),
    ("extension tract_assert B >= ;", "unexpected end"),
    ("extension tract_assert 1 >= 2;", "can never hold"),
    ("extension tract_frobnicate;", "unknown tract extension 'tract_frobnicate'"),
    ("extension tract_assert 2 * B == 3;\nextension tract_assert B == 3;\nextension tract_assert B == 4;",
     r"tract_assert 'B == 4' contradicts an earlier one \(B = 3\)"),
])
def test_bad_header_lines_are_located(line, message):
    text = HEADER + line + "\n" + BODY
    with pytest.raises(NNEFXError, match=message) as info:
        compile_document(text, file="g.nnef")
    assert info.value.location.file == "g.nnef"
    assert info.value.location.line == 4 + line.count("\n")


@pytest.mark.parametrize("registry", ["tract_core", "tract_transformers", "tract_resource", "tract_onnx",
                                      "tract_extra", "tract_pulse"])
def test_every_tract_registry_is_accepted(registry):
    g = compile_document(f"version 1.0;\nextension tract_registry {registry};\n"
                         "graph g(x) -> (y) { x = external(shape = [2]); y = relu(x); }")
    assert g.tensors["y"].shape == (2,)


def test_scenario_assertions_and_streaming_symbol():
    text = ("version 1.0;\nextension tract_pulse_streaming_symbol;\nextension tract_symbol T;\n"
            "extension tract_assert short: S == 1;\n"
            "graph g(x) -> (y) { x = external(shape = [1, S, T]); y = relu(x); }")
    g = compile_document(text)
    # the older streaming form: identifiers of an external shape are symbols
    assert g.symbols == ["T", "S"]
    assert g.tensors["y"].shape == (1, dims.symbol("S"), dims.symbol("T"))
    assert g.assertions == []   # a scenario is an alternative, not a constraint


def test_fragments_need_khr_outside_tract_dialect():
    text = "version 1.0;\n" + BODY.replace("[B, 8]", "[2, 8]")
    with pytest.raises(NNEFXError, match="fragment definitions need"):
        compile_document(text)


def test_symbol_mismatch_names_the_symbol_and_both_values(tmp_path):
    text = HEADER + """
graph g(a, b) -> (y)
{
    a = external(shape = [B, 4]);
    b = external(shape = [B, 4]);
    y = add(a, b);
}
"""
    g = compile_document(text)
    assert g.tensors["y"].shape == (dims.symbol("B"), 4)
    s = nnefx.Session(g)
    assert s.run({"a": np.ones((3, 4), np.float32), "b": np.ones((3, 4), np.float32)})["y"].shape == (3, 4)
    with pytest.raises(NNEFXError, match=r"input 'b': dimension 0 binds symbol 'B' to 5, but 'B' is already 3 "
                                         r"\(from input 'a', dimension 0\)"):
        s.run({"a": np.ones((3, 4), np.float32), "b": np.ones((5, 4), np.float32)})


def test_symbolic_arithmetic_in_attributes_runs():
    text = HEADER + """
graph g(x) -> (y)
{
    x = external(shape = [B, 2, 4]);
    y = reshape(x, shape = [B * 2, 4]);
}
"""
    g = compile_document(text)
    # the standard reshape rule does not reason about symbols: unknown, not a wrong number
    assert g.tensors["y"].shape is None
    s = nnefx.Session(g, backend="formal")
    x = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    np.testing.assert_array_equal(s.run({"x": x})["y"], x.reshape(6, 4))


# --- dims --------------------------------------------------------------------------------


def test_dims_answer_only_what_is_decidable():
    B, C = dims.symbol("B"), dims.symbol("C")
    assert (B * 8) // 8 == B and (B * 8) % 4 == 0 and B + 1 != B and B - B == 0
    assert str(2 * B + 1) == "2*B + 1" and dims.parse_dim("2*B + 1") == 2 * B + 1
    for question in (lambda: B == 1, lambda: B == C, lambda: B < 3, lambda: (B + 1) // 2, lambda: int(B),
                     lambda: bool(B)):
        with pytest.raises(dims.UnknownDim):
            question()
    assert None not in (B, 3)
    values: dict = {}
    dims.bind((B, 2 * C + 1), (4, 7), values, "input x")
    assert values == {"B": 4, "C": 3}
    with pytest.raises(NNEFXError, match="no value of symbol 'C'"):
        dims.bind((2 * C,), (7,), {}, "input x")


def test_broadcast_with_symbols_is_sound():
    from nnefx.ops._common import broadcast_shapes

    B, C = dims.symbol("B"), dims.symbol("C")
    assert broadcast_shapes("add", (B, 4), (1, 4)) == (B, 4)
    assert broadcast_shapes("add", (B, 4), (B, 1)) == (B, 4)
    assert broadcast_shapes("add", (B, 4), (3, 4)) == (3, 4)   # valid only with B in {1, 3}
    assert broadcast_shapes("add", (B,), (C,)) == (None,)


# --- tensor files ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int64, np.bool_, np.int32, np.uint8])
def test_standard_item_types_keep_their_element_type(tmp_path, dtype):
    nnef_type = {"f": "scalar", "i": "integer", "u": "integer", "b": "logical"}[np.dtype(dtype).kind]
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        f"version 1.0;\ngraph g(x) -> (y) {{ x = external<{nnef_type}>(shape = [2, 3]);\n"
        f"v = variable<{nnef_type}>(label = 'v', shape = [2, 3]);\n y = copy(v); }}")
    data = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    binary.write_tensor(str(folder / "v.dat"), data)
    t = nnefx.load(folder).graph.tensors["v"]
    assert t.data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.data, data)
    from nnefx import etypes

    assert etypes.of(t) == etypes.from_numpy(dtype)


def _q4(rng, m, k, code):
    codes = rng.integers(0, 16, size=m * k)
    scales = (rng.random(m * k // 32) + 0.25).astype(np.float16)
    ref = ((codes.reshape(-1, 32) - 8) * scales.astype(np.float32)[:, None]).reshape(m, k)
    return ti.encode_block_quant(codes, scales, (m, k), code), ref


@pytest.mark.parametrize("code", [ti.Q4_0, ti.Q4_0_OLD])
def test_q4_0_decodes_exactly(code):
    data, ref = _q4(np.random.default_rng(code), 3, 64, code)
    got, quant = binary.read_tensor(data)
    assert quant is None and got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("code", [ti.Q4_0, ti.Q4_0_OLD])
def test_q4_0_matches_tract(tmp_path, code):
    tract = pytest.importorskip("tract")
    data, ref = _q4(np.random.default_rng(7), 3, 64, code)
    (tmp_path / "w.dat").write_bytes(data)
    (tmp_path / "graph.nnef").write_text(
        "version 1.0;\nextension tract_registry tract_core;\ngraph g(x) -> (y) {\n"
        "  x = external(shape = [64, 64]);\n  w = variable(label = 'w', shape = [3, 64]);\n"
        "  y = matmul(x, w, transposeB = true);\n}\n")
    y = tract.nnef().load(str(tmp_path)).into_runnable().run([np.eye(64, dtype=np.float32)])[0].to_numpy()
    np.testing.assert_array_equal(y.T, binary.read_tensor(str(tmp_path / "w.dat"))[0])
    np.testing.assert_array_equal(y.T, ref)


@pytest.mark.parametrize("code", [0x3080, 0x3081])
def test_q8_1_decodes_exactly(code):
    rng = np.random.default_rng(3)
    codes = rng.integers(-128, 128, size=2 * 64)
    scales = (rng.random(4) + 0.25).astype(np.float16)
    got, _ = binary.read_tensor(ti.encode_block_quant(codes, scales, (2, 64), code))
    np.testing.assert_array_equal(got, (codes.reshape(-1, 32) * scales.astype(np.float32)[:, None]).reshape(2, 64))


def test_strings_decode():
    got, _ = binary.read_tensor(ti.encode_strings([["a", "bé"], ["", "xyz"]]))
    assert got.tolist() == [["a", "bé"], ["", "xyz"]]


def _patched(data: bytes, offset: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


@pytest.mark.parametrize("mutate, field, message", [
    (lambda d: d[:-5], "data_length", "truncated"),
    (lambda d: d + b"\0", "data", "trailing garbage"),
    (lambda d: _patched(d, 12, "<II", 4, 48), "extents", "not a multiple of the 32-value block"),
    (lambda d: _patched(d, 8, "<I", 1), "rank", "rank >= 2"),
    (lambda d: _patched(d, 4, "<I", 100), "data_length", "needs 108 bytes"),
    (lambda d: _patched(d, 48, "<HH", 0x3050, ti.VENDOR), "item_type", "not a tract item type"),
    (lambda d: _patched(d, 50, "<H", 0x4142), "item_type", "vendor-specific"),
    (lambda d: ti.encode_strings(["abc"])[:-1], "data", "past the end"),
])
def test_bad_vendor_tensors_are_located(mutate, field, message):
    data, _ = _q4(np.random.default_rng(0), 3, 64, ti.Q4_0)
    with pytest.raises(NNEFXError, match=message) as info:
        binary.read_tensor(mutate(data), name="w.dat")
    assert info.value.location.file == "w.dat" and info.value.location.field == field


# --- safetensors ----------------------------------------------------------------------------


def _safetensors_model(tmp_path, tensors):
    from safetensors.numpy import save_file

    folder = tmp_path / "st"
    folder.mkdir()
    (folder / "graph.nnef").write_text(HEADER + BODY)
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def test_safetensors_weights(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 8)).astype(np.float16)
    folder = _safetensors_model(tmp_path, {"w": w, "e": np.array(1e-5, np.float32),
                                           "unused": np.zeros(3, np.float32)})
    model = nnefx.load(folder)
    t = model.graph.tensors["w"]
    assert t.etype == "f16"
    np.testing.assert_array_equal(t.data, w)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(nnefx.Session(model).run({"x": x})["y"], reference(model, x), rtol=1e-5, atol=1e-6)
    # the same in a .tgz archive, files at its root
    import tarfile

    archive = tmp_path / "st.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    np.testing.assert_array_equal(nnefx.load(archive).graph.tensors["w"].data, w)


def _lying(path, edit):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    edit(header)
    hb = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])


@pytest.mark.parametrize("edit", [
    lambda h: h["w"].__setitem__("data_offsets", [0, 1 << 20]),           # out of range
    lambda h: h["e"].__setitem__("data_offsets", h["w"]["data_offsets"]),  # overlapping
    lambda h: h["w"].__setitem__("dtype", "F64"),                          # wrong dtype for the size
    lambda h: h["w"].__setitem__("shape", [5, 8]),                         # wrong shape for the size
])
def test_lying_safetensors_headers_are_located(tmp_path, edit):
    folder = _safetensors_model(tmp_path, {"w": np.zeros((4, 8), np.float16), "e": np.array(1e-5, np.float32)})
    _lying(folder / "model.safetensors", edit)
    with pytest.raises(NNEFXError, match="not a valid .safetensors file") as info:
        nnefx.load(folder)
    assert info.value.location.file.endswith("model.safetensors")


def test_safetensors_dtype_tract_does_not_read(tmp_path):
    folder = _safetensors_model(tmp_path, {"w": np.zeros((4, 8), np.int64), "e": np.array(1e-5, np.float32)})
    with pytest.raises(NNEFXError, match="tensor 'w' is int64; tract reads f32 and f16"):
        nnefx.load(folder)


# --- Khronos documents: strict by default, lenient on request ---------------------------------

KHRONOS = """version 1.0;
extension KHR_enable_fragment_definitions;
extension KHR_enable_operator_expressions;

fragment gelu( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    y = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
}

graph network(x) -> (y)
{
    x = external<scalar>(shape = [2, 4, 5, 5]);
    e = variable<scalar>(label = 'e', shape = []);
    m = variable<scalar>(label = 'm', shape = [1, 4]);
    v = variable<scalar>(label = 'v', shape = [1, 4]);
    p = pad(x, padding = [[0, 0], [0, 0], [1, 1], [0, 2]]);
    b = batch_normalization(p, m, v, 0.0, 1.0, epsilon = e);
    g = gelu(b, 0.0);
    y = softmax(g, 1);
}
"""

DEVIATIONS = ["redefined-standard-fragment", "nested-array-padding", "tensor-for-attribute", "extra-argument",
              "positional-attribute", "scalar-for-array"]


def _khronos_model(tmp_path):
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "graph.nnef").write_text(KHRONOS)
    binary.write_tensor(str(folder / "e.dat"), np.array(1e-3, np.float32))
    binary.write_tensor(str(folder / "m.dat"), np.array([[0.1, 0.2, -0.3, 0.0]], np.float32))
    binary.write_tensor(str(folder / "v.dat"), np.array([[1.0, 2.0, 0.5, 1.5]], np.float32))
    return folder


def test_khronos_deviations_strict_then_lenient(tmp_path):
    folder = _khronos_model(tmp_path)
    with pytest.raises(NNEFXError, match="fragment 'gelu' is already defined") as info:
        nnefx.load(folder)
    assert info.value.location.line == 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = nnefx.load(folder, lenient=True)
    found = [w.message for w in caught if isinstance(w.message, nnefx.diagnostics.NNEFXWarning)]
    kinds = [k for k in DEVIATIONS if any(f"'{k}'" in m.message for m in found)]
    assert kinds == DEVIATIONS
    assert all(m.location is not None and m.location.line for m in found)
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 5)).astype(np.float32)
    y = nnefx.Session(model).run({"x": x})["y"]
    p = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (0, 2)])
    b = (p - np.array([0.1, 0.2, -0.3, 0.0])[:, None, None]) / np.sqrt(
        np.array([1.0, 2.0, 0.5, 1.5])[:, None, None] + 1e-3)
    g = 0.5 * b * (1 + np.tanh(0.7978845608 * (b + 0.044715 * b ** 3)))
    ref = np.exp(g) / np.exp(g).sum(1, keepdims=True)
    assert np.abs(y - ref).max() / np.abs(ref).max() < 1e-5


def test_lenient_at_the_cli(tmp_path):
    folder = _khronos_model(tmp_path)
    strict = subprocess.run([sys.executable, "-m", "nnefx", "check", str(folder)], capture_output=True, text=True)
    assert strict.returncode == 1 and "graph.nnef:5:1: error:" in strict.stderr
    assert "Traceback" not in strict.stderr
    lenient = subprocess.run([sys.executable, "-m", "nnefx", "check", "--lenient", str(folder)],
                             capture_output=True, text=True)
    assert lenient.returncode == 0, lenient.stderr
    assert "graph.nnef:5:1: warning: accepted exporter deviation 'redefined-standard-fragment'" in lenient.stderr


def test_symbols_survive_an_nnef_round_trip_and_other_writers_see_unknowns(tmp_path):
    model = nnefx.load("tests/fixtures/tract/symbolic")
    nnefx.save(model, tmp_path / "again")
    text = (tmp_path / "again" / "graph.nnef").read_text()
    assert "extension tract_symbol B;" in text and "extension tract_assert B >= 1;" in text
    again = nnefx.load(tmp_path / "again")
    assert again.graph.tensors["y"].shape == (dims.symbol("B"), 4)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_array_equal(nnefx.Session(again).run({"x": x})["y"], nnefx.Session(model).run({"x": x})["y"])
    pytest.importorskip("onnx")
    nnefx.save(model, tmp_path / "m.onnx")
    import onnx

    dim0 = onnx.load(str(tmp_path / "m.onnx")).graph.input[0].type.tensor_type.shape.dim[0]
    assert not dim0.HasField("dim_value")    # unknown, never a made-up number


def test_symbolic_attribute_cannot_be_written_elsewhere(tmp_path):
    g = compile_document(HEADER + "graph g(x) -> (y) { x = external(shape = [B, 2]); "
                         "y = reshape(x, shape = [2 * B]); }", file="g.nnef")
    with pytest.raises(NNEFXError, match=r"attribute 'shape' holds a symbolic extent \(B\)") as info:
        nnefx.save(nnefx.graph.Model(g), tmp_path / "m.onnx")
    assert info.value.location.line == 4


@pytest.mark.parametrize("member", ["../evil.dat", "/abs.safetensors", "a/../../evil.safetensors"])
def test_hostile_archive_members_are_refused(tmp_path, member):
    import io
    import tarfile

    archive = tmp_path / "m.nnef.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("graph.nnef", (HEADER + BODY).encode()), (member, b"\0" * 16)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(NNEFXError, match="archive member") as info:
        nnefx.load(archive)
    assert info.value.location.file == str(archive)
    assert not (tmp_path.parent / "evil.dat").exists()


def test_input_shapes_at_load_bind_symbols():
    text = ("version 1.0;\nextension tract_symbol B;\nextension tract_assert B >= 2;\n"
            "graph g(x) -> (y) { x = external(shape = [B, 2]); y = reshape(x, shape = [2 * B]); }")
    g = compile_document(text, input_shapes={"x": (3, 2)})
    assert g.symbols == [] and g.tensors["y"].shape == (6,)
    np.testing.assert_array_equal(nnefx.Session(g).run({"x": np.ones((3, 2), np.float32)})["y"], np.ones(6))
    with pytest.raises(NNEFXError, match=r"violate tract_assert 'B >= 2' \(B = 1\)") as info:
        compile_document(text, file="g.nnef", input_shapes={"x": (1, 2)})
    assert info.value.location.line == 3


def test_engines_refuse_symbolic_graphs_cleanly_and_take_them_once_bound():
    pytest.importorskip("onnxruntime")
    from nnefx.cli import main

    folder = "tests/fixtures/tract/symbolic"
    with pytest.raises(NNEFXError, match=r"symbolic extents \(B\): give input_shapes"):
        nnefx.Session(nnefx.load(folder), backend="onnxruntime")
    from nnefx.engines.query import query

    problems = query(nnefx.load(folder), ["onnxruntime"])["onnxruntime"]
    assert "symbolic extents (B)" in str(problems[0])
    model = nnefx.load(folder, input_shapes={"x": (3, 8)})
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    ours = nnefx.Session(model, backend="onnxruntime").run({"x": x})["y"]
    np.testing.assert_allclose(ours, reference(model, x), rtol=1e-5, atol=1e-6)
    assert main(["check", folder]) == 0
