"""String tensors end to end: the ONNX reader (STRING inputs, initializers, casts), the
string operators on both backends against the node suite and onnxruntime, the ONNX writer
(read back by nnefx and run by onnxruntime), NNEF/IR writers refusing them located, and
RegexFullMatch keeping RE2's meaning or refusing."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.ops import registry  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

BACKENDS = ("fast", "formal")
STRING_OPS = ("StringConcat", "StringSplit", "StringNormalizer", "RegexFullMatch", "TfIdfVectorizer")


@pytest.fixture(scope="module")
def suite():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in collect_testcases(None) if c.kind == "node"]


@pytest.fixture(scope="module")
def cases(suite):
    found = [c for c in suite if any(n.op_type in STRING_OPS for n in c.model.graph.node)
             or c.name.startswith("test_equal_string")]
    assert len(found) >= 29
    return found


def _run(path, inputs, backend="fast"):
    session = Session(nnefx.load(path), backend)
    return list(session.run(dict(zip([i.name for i in session.inputs], inputs, strict=False))).values())


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_suite_string_cases_match_exactly(cases, backend, tmp_path):
    for case in cases:
        path = os.path.join(tmp_path, case.name + ".onnx")
        onnx.save(case.model, path)
        for inputs, outputs in case.data_sets:
            got = _run(path, inputs, backend)
            assert len(got) == len(outputs), case.name
            for g, w in zip(got, outputs, strict=True):
                assert _same(g, w), (case.name, g, w)


def test_written_onnx_runs_in_onnxruntime_and_reads_back(cases, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    for case in cases:
        src = os.path.join(tmp_path, case.name + ".onnx")
        onnx.save(case.model, src)
        out = os.path.join(tmp_path, case.name + ".out.onnx")
        nnefx.save(nnefx.load(src), out)
        inputs, outputs = case.data_sets[0]
        for g, w in zip(_run(out, inputs), outputs, strict=True):
            assert _same(g, w), case.name
        if any(n.op_type == "StringNormalizer" for n in case.model.graph.node):
            continue  # onnxruntime builds a C++ locale for it, which this machine may lack
        session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
        got = session.run(None, dict(zip([i.name for i in session.get_inputs()], inputs, strict=False)))
        for g, w in zip(got, outputs, strict=True):
            assert _same(g, w), case.name


def _model(tmp_path, nodes, inputs, outputs, opset=20, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save(model, path)
    return path


def _concat(tmp_path):
    return _model(tmp_path, [helper.make_node("StringConcat", ["x", "y"], ["z"])],
                  [helper.make_tensor_value_info("x", TensorProto.STRING, [2]),
                   helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
                  [helper.make_tensor_value_info("z", TensorProto.STRING, [2])])


@pytest.mark.parametrize("suffix,why", [(".nnef", "tensor 'x' as NNEF: it holds strings"),
                                        (".xml", "tensor 'x' as IR: its element type string")])
def test_nnef_and_ir_writers_refuse_strings_located(tmp_path, suffix, why):
    model = nnefx.load(_concat(tmp_path))
    target = os.path.join(tmp_path, "out" + suffix)
    with pytest.raises(NNEFXError, match=why) as info:
        nnefx.save(model, target)
    assert info.value.location is not None
    assert not os.path.exists(target)


def test_string_inputs_take_str_arrays_and_refuse_numbers(tmp_path):
    session = Session(nnefx.load(_concat(tmp_path)))
    z = session.run({"x": np.array(["a", "bé"]), "y": np.array(["1", "2"], dtype=object)})["z"]
    assert z.dtype == object and z.tolist() == ["a1", "bé2"]
    with pytest.raises(NNEFXError, match="input 'x' must be string data"):
        session.run({"x": np.array([1.0, 2.0]), "y": np.array(["1", "2"])})
    with pytest.raises(NNEFXError, match="input 'x' is not a numeric or string array"):
        session.run({"x": np.array([b"a", 3], dtype=object), "y": np.array(["1", "2"])})


def test_equal_orders_no_strings(tmp_path):
    path = _model(tmp_path, [helper.make_node("Less", ["x", "y"], ["z"])],
                  [helper.make_tensor_value_info("x", TensorProto.STRING, [2]),
                   helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
                  [helper.make_tensor_value_info("z", TensorProto.BOOL, [2])])
    with pytest.raises(NNEFXError, match="string tensor, which Less does not take"):
        nnefx.load(path)


# --- Cast to and from strings, against onnxruntime ------------------------------------------------

def _cast(tmp_path, src, to, x):
    path = _model(tmp_path, [helper.make_node("Cast", ["x"], ["y"], to=to)],
                  [helper.make_tensor_value_info("x", src, list(x.shape))],
                  [helper.make_tensor_value_info("y", to, list(x.shape))], opset=21)
    return path


@pytest.mark.parametrize("src,to,values", [
    (TensorProto.FLOAT, TensorProto.STRING, np.array([0.1, 1e20, -3, np.nan, np.inf, -np.inf, 1 / 3, 1e-7], np.float32)),
    (TensorProto.DOUBLE, TensorProto.STRING, np.array([0.1, 2.5e-300, 1 / 3], np.float64)),
    (TensorProto.FLOAT16, TensorProto.STRING, np.array([0.1, 65504, -0.0], np.float16)),
    (TensorProto.INT8, TensorProto.STRING, np.array([-128, 7], np.int8)),
    (TensorProto.BOOL, TensorProto.STRING, np.array([True, False])),
    (TensorProto.STRING, TensorProto.FLOAT, np.array(["3.14", "1e-5", "INF", "-inf", "NaN", "+Inf", " 2", "7."], object)),
    (TensorProto.STRING, TensorProto.DOUBLE, np.array(["0.1", "-2.5E8", ".5"], object)),
    (TensorProto.STRING, TensorProto.INT32, np.array(["100", "-7", "3000000000", "100.5"], object)),
    (TensorProto.STRING, TensorProto.UINT8, np.array(["300", "255", "0"], object)),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_with_strings_matches_onnxruntime(tmp_path, src, to, values, backend):
    ort = pytest.importorskip("onnxruntime")
    path = _cast(tmp_path, src, to, values)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": values})[0]
    (got,) = _run(path, [values], backend)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    else:
        assert got.tolist() == want.tolist() and (got.dtype == object) == (want.dtype == object)


def test_cast_of_a_non_number_string_names_the_item(tmp_path):
    path = _cast(tmp_path, TensorProto.STRING, TensorProto.FLOAT, np.array(["1", "x1"], object))
    with pytest.raises(NNEFXError, match=r"item \[1\] of the string input, 'x1', is not a number"):
        _run(path, [np.array(["1", "x1"], object)])


# --- the kernels, formal against fast and against peers --------------------------------------------

def _kernels(name):
    op = registry.get(name)
    return op.formal_kernel, op.fast_kernel


def _strs(*items):
    a = np.empty(len(items), dtype=object)
    a[:] = list(items)
    return a


@pytest.mark.parametrize("delimiter,maxsplit", [("", -1), (",", -1), (",", 1), ("ab", -1), ("", 1), (" ", 0)])
def test_string_split_is_pythons_split_padded(delimiter, maxsplit):
    x = _strs("a,b,,c", "  lead  and trail ", "", "abXabab", ",", "one")
    for kernel in _kernels("onnx_string_split"):
        y, z = kernel(x, delimiter=delimiter, maxsplit=maxsplit)
        for k, s in enumerate(x):
            parts = s.split(delimiter or None, maxsplit)
            assert z[k] == len(parts) and y[k, :len(parts)].tolist() == parts
            assert all(v == "" for v in y[k, len(parts):])
        assert y.shape == (len(x), max(z))


def test_string_split_refuses_a_result_padded_past_its_bound(monkeypatch):
    from nnefx.ops.onnx import strings

    monkeypatch.setattr(strings, "MAX_SPLIT_ITEMS", 1000)
    x = _strs(*(["a"] * 99 + [" ".join(["w"] * 20)]))  # 100 strings, the longest split 20 wide
    for kernel in _kernels("onnx_string_split"):
        with pytest.raises(NNEFXError, match="100 x 20 items"):
            kernel(x, delimiter="", maxsplit=-1)


def test_string_normalizer_rules():
    x = _strs("Monday", "tuesday", "MONDAY", "Wednesday")
    for kernel in _kernels("onnx_string_normalizer"):
        got = kernel(x, case_change_action="UPPER", is_case_sensitive=False, locale="en_US", stopwords=["monday"])
        assert got.tolist() == ["TUESDAY", "WEDNESDAY"]
        got = kernel(x.reshape(1, 4), case_change_action="LOWER", is_case_sensitive=True, locale="",
                     stopwords=["Monday"])
        assert got.tolist() == [["tuesday", "monday", "wednesday"]]
        assert kernel(_strs("a"), case_change_action="NONE", is_case_sensitive=False, locale="",
                      stopwords=["A"]).tolist() == [""]
        with pytest.raises(NNEFXError, match="locale"):
            kernel(x, case_change_action="LOWER", is_case_sensitive=False, locale="tr_TR", stopwords=[])
        with pytest.raises(NNEFXError, match=r"\[C\] or \[1, C\]"):
            kernel(x.reshape(2, 2), case_change_action="NONE", is_case_sensitive=False, locale="", stopwords=[])


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_agrees_with_the_onnx_reference(strings, mode):
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(7)
    words = ["a", "b", "c", "d", "e"]
    pool_items = [0, 1, 2, 3, 4, 0, 1, 1, 2, 2, 0, 3, 4, 0, 1, 2]  # 5 unigrams, 4 bigrams, 1 trigram
    attrs = dict(max_gram_length=3, min_gram_length=1, max_skip_count=2, mode=mode, ngram_counts=[0, 5, 13],
                 ngram_indexes=[9, 8, 7, 6, 5, 4, 3, 2, 1, 0], weights=[float(w) for w in rng.uniform(0.5, 2, 10)])
    if strings:
        attrs["pool_strings"] = [words[i] for i in pool_items]
        x = np.asarray([[words[i] for i in row] for row in rng.integers(0, 5, (3, 9))], dtype=object)
        elem = TensorProto.STRING
    else:
        attrs["pool_int64s"] = pool_items
        x = rng.integers(0, 5, (3, 9)).astype(np.int64)
        elem = TensorProto.INT64
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [3, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 10])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    kernel_attrs = {k: v for k, v in attrs.items()}
    kernel_attrs.setdefault("pool_int64s", [])
    kernel_attrs.setdefault("pool_strings", [])
    for kernel in _kernels("onnx_tfidf_vectorizer"):
        got = kernel(x, **kernel_attrs)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(kernel(x[1], **kernel_attrs), want[1], rtol=1e-6)


# --- RegexFullMatch: RE2's meaning, or a refusal -------------------------------------------------

REGEX_CASES = [
    (r"\d+", "123", True), (r"\d+", "١٢٣", False),            # RE2's \d is ASCII
    (r"a\sb", "a\vb", False), (r"a\sb", "a\tb", True),          # RE2's \s lacks \v
    (r"\w+", "héllo", False), (r"[\w.]+@x\.com", "a.b_c@x.com", True),
    (r"[[:alpha:]]+[[:digit:]]", "abc1", True), (r"[[:upper:]]", "a", False),
    (r"(?i)hello", "HeLLo", True), (r"(?i:ab)c", "ABc", True), (r"(?i:ab)c", "ABC", False),
    (r"(?P<x>a)b|c", "ab", True), (r"(?<x>a)+", "aaa", True),
    (r"a{2,3}", "aaaa", False), (r"a{,2}", "a{,2}", True),      # {,n} is a literal in RE2
    (r"\x{e9}t\x41", "étA", True), (r"a.c", "a\nc", False), (r"(?s)a.c", "a\nc", True),
    (r"abc$", "abc", True), (r"a\z", "a", True), (r".*\bword\b.*", "a word here", True),
    (r"x*?y", "xxy", True), (r"[^a-c]", "d", True), (r"[]a]", "]", True), (r"", "", True),
    (r"(?i)straße", "STRASSE", False), (r"(?i)(?s)a.B", "A\nb", True), (r"a$\n", "a\n", False), (r"(?m)a$\n", "a\n", True), (r"\W", "é", True),
]


@pytest.mark.parametrize("pattern,text,matches", REGEX_CASES)
def test_regex_keeps_re2_meaning(pattern, text, matches):
    for kernel in _kernels("onnx_regex_full_match"):
        assert bool(kernel(_strs(text), pattern=pattern)[0]) is matches, (pattern, text)


@pytest.mark.parametrize("pattern,why", [
    (r"(a)\1", "back-references"), (r"a(?=b)", "look-around"), (r"(?<!a)b", "look-around"),
    (r"a*+", "repetition"), (r"a++", "repetition"), (r"a{1001}", "above 1000"), (r"\p{L}", r"\\p"),
    (r"(?U)a*", "ungreedy"), (r"(?>a)", "atomic"), (r"a(?i)b", "middle"), (r"\Qa.b\E", r"\\Q"),
    (r"[[:^alpha:]]", "negated POSIX"), (r"(a", "missing \\)|valid"), (r"*a", "missing argument"), (r"\Z", r"\\Z"),
])
def test_regex_refuses_what_re2_would(pattern, why):
    for kernel in _kernels("onnx_regex_full_match"):
        with pytest.raises(NNEFXError, match=why):
            kernel(_strs("a"), pattern=pattern)


# --- ImageDecoder: Pillow's pixels, hostile bytes refused -------------------------------------------

@pytest.fixture(scope="module")
def image_cases(suite):
    return [c for c in suite if any(n.op_type == "ImageDecoder" for n in c.model.graph.node)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_image_decoder_cases_match_the_suite_pixels(image_cases, backend, tmp_path):
    pytest.importorskip("PIL")
    assert len(image_cases) >= 9
    for case in image_cases:
        path = os.path.join(tmp_path, case.name + ".onnx")
        onnx.save(case.model, path)
        inputs, outputs = case.data_sets[0]
        (got,) = _run(path, inputs, backend)
        assert _same(got, outputs[0]), case.name


def _decoder(tmp_path, fmt="RGB"):
    return _model(tmp_path, [helper.make_node("ImageDecoder", ["x"], ["y"], pixel_format=fmt)],
                  [helper.make_tensor_value_info("x", TensorProto.UINT8, [None])],
                  [helper.make_tensor_value_info("y", TensorProto.UINT8, [None, None, None])])


@pytest.mark.parametrize("data,why", [
    (b"not an image at all", "no image of a format ImageDecoder reads"),
    (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 1 1\n", "no image of a format"),  # EPS: never opened
    (b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "no image of a format"),               # not a listed format
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "cannot be decoded|no image"),            # truncated PNG
])
def test_image_decoder_refuses_hostile_bytes_located(tmp_path, data, why):
    pytest.importorskip("PIL")
    session = Session(nnefx.load(_decoder(tmp_path)))
    with pytest.raises(NNEFXError, match=why) as info:
        session.run({"x": np.frombuffer(data, np.uint8)})
    assert "ImageDecoder" in str(info.value) or "onnx_image_decoder" in str(info.value)


def test_image_decoder_refuses_huge_images_before_decoding(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    import io
    import zlib

    from nnefx.ops.onnx import image

    buf = io.BytesIO()
    PIL.new("L", (1, 1)).save(buf, "PNG")
    png = bytearray(buf.getvalue())
    png[16:24] = (10000).to_bytes(4, "big") * 2  # IHDR claims 10000 x 10000 pixels
    png[29:33] = zlib.crc32(bytes(png[12:29])).to_bytes(4, "big")  # with a valid checksum
    with pytest.raises(NNEFXError, match="10000 x 10000 pixels .more than"):
        image._decoder(np.frombuffer(bytes(png), np.uint8))


def test_image_decoder_without_pillow_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "PIL", None)
    session = Session(nnefx.load(_decoder(tmp_path)))
    with pytest.raises(NNEFXError, match=r"pip install nnefx\[images\]"):
        session.run({"x": np.zeros(4, np.uint8)})


def test_regex_agrees_with_onnxruntimes_re2(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    for pattern, text, _ in REGEX_CASES:
        path = _model(tmp_path, [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)],
                      [helper.make_tensor_value_info("x", TensorProto.STRING, [1])],
                      [helper.make_tensor_value_info("y", TensorProto.BOOL, [1])])
        x = _strs(text)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert _run(path, [x])[0].tolist() == want.tolist(), (pattern, text)


# --- string graphs on the engines and at the command line ---------------------------------------

def _concat_regex(tmp_path):
    return _model(tmp_path, [helper.make_node("StringConcat", ["x", "x"], ["y"]),
                             helper.make_node("RegexFullMatch", ["y"], ["m"], pattern="[a-z]+")],
                  [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.STRING, [2]),
                   helper.make_tensor_value_info("m", TensorProto.BOOL, [2])])


def test_engines_run_or_refuse_string_graphs_located(tmp_path):
    pytest.importorskip("onnxruntime")
    model = nnefx.load(_concat_regex(tmp_path))
    x = _strs("ab", "é")
    for backend in ("onnxruntime", "auto"):
        out = Session(model, backend).run({"x": x})
        assert out["y"].tolist() == ["abab", "éé"] and out["m"].tolist() == [True, False]
    pytest.importorskip("torch")
    with pytest.raises(NNEFXError, match="holds strings, which torch tensors cannot") as info:
        Session(model, "torch")
    assert info.value.location is not None


def test_nnefx_run_makes_and_saves_string_tensors(tmp_path, capsys):
    from nnefx.cli import main

    path = _concat_regex(tmp_path)
    given = os.path.join(tmp_path, "x.npy")
    np.save(given, np.array(["hi", "wörld"]))
    out = os.path.join(tmp_path, "outs")
    assert main(["run", path, "--input", f"x={given}", "-o", out]) == 0
    assert np.load(os.path.join(out, "y.npy")).tolist() == ["hihi", "wörldwörld"]
    assert np.load(os.path.join(out, "m.npy")).tolist() == [True, False]
    assert main(["run", path, "--seed", "0"]) == 0
    assert "input  x: string [2] <- random" in capsys.readouterr().out


def test_data_movement_and_sequences_carry_strings(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    sh = helper.make_tensor("sh", TensorProto.INT64, [2], [2, 1])
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=0), helper.make_node("Reshape", ["g", "sh"], ["r"]),
             helper.make_node("Concat", ["r", "r"], ["c"], axis=0), helper.make_node("Transpose", ["c"], ["t"]),
             helper.make_node("SplitToSequence", ["x"], ["s"], keepdims=0),
             helper.make_node("SequenceAt", ["s", "k"], ["e"])]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.STRING, [3]),
                                    helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
                                    helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("t", TensorProto.STRING, [1, 4]),
                   helper.make_tensor_value_info("e", TensorProto.STRING, [])], opset=18, initializers=[sh])
    feeds = {"x": _strs("a", "bé", "c"), "i": np.array([2, 0]), "k": np.array(-2)}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in BACKENDS:
        got = Session(nnefx.load(path), backend).run(feeds)
        assert [g.tolist() for g in got.values()] == [w.tolist() for w in want]
        assert all(g.dtype == object for g in got.values())


def test_text_given_to_a_numeric_operator_is_refused_at_its_node(tmp_path):
    path = _model(tmp_path, [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"], name="r")],
                  [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    with pytest.raises(NNEFXError, match=r"node 1 'r' \(Relu\).*input 0 \('i'\) is a string tensor, which Relu does "
                                         r"not take \(it takes tensor\(bfloat16\)"):
        nnefx.load(path)
