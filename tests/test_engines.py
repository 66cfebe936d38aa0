"""Engine backends (onnxruntime, OpenVINO, torch) against the formal backend: every standard
operation's sample, state across steps, shape variants, auto, verify, and their errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from nnefx import engines
from nnefx.diagnostics import NNEFXError
from nnefx.io.builder import GraphBuilder
from nnefx.runtime.session import Session
from nnefx.semantics.frontend import compile_document

pytest.importorskip("onnx")
from test_onnx_export import NOT_OPERATIONS, SAMPLES, _document  # noqa: E402

DIGITS = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")
INSTALLED = [name for name, e in engines.engines().items() if e.available()]

#: (engine, operation) pairs an engine is known not to run, each with the reason its query gives.
#: The test asserts the refusal is reported (never a wrong answer); the list only documents.
CASES = [(engine, op) for engine in INSTALLED for op in sorted(set(SAMPLES) - NOT_OPERATIONS)]


@pytest.mark.parametrize("engine,name", CASES)
def test_each_operation_agrees_with_formal_or_is_refused(engine, name):
    text, feeds = _document(name)
    graph = compile_document(text, file="op.nnef")
    problems = engines.get(engine).problems(graph)
    if problems:
        with pytest.raises(NNEFXError, match=f"backend '{engine}' cannot run this graph"):
            Session(graph, engine)
        assert all(p.reason for p in problems)
        return
    session = Session(graph, engine, verify=True)
    session.run(feeds)
    assert session.verification and all(c.ok for c in session.verification)


def _common_network():
    """The operations of real networks, with ordinary attributes (windows over spatial dims only)."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("common")
    x = b.external("x", [2, 3, 8, 8])
    w = b.variable("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3)
    y = b.conv(x, w, padding=[(1, 1), (1, 1)])
    y = b.batch_normalization(y, b.variable("m", rng.standard_normal((1, 4)).astype(np.float32)),
                              b.variable("v", rng.random((1, 4), dtype=np.float32) + 0.5),
                              b.variable("o", rng.standard_normal((1, 4)).astype(np.float32)),
                              b.variable("s", rng.random((1, 4), dtype=np.float32) + 0.5), epsilon=1e-5)
    y = b.relu(y)
    y = b.avg_pool(y, size=[1, 1, 2, 2], stride=[1, 1, 2, 2])
    z = b.max_pool(y, size=[1, 1, 3, 3], stride=[1, 1, 1, 1], border="ignore")
    y = b.concat([y, z], axis=1)
    y = b.reshape(y, shape=[2, 8, 16])
    y = b.transpose(y, axes=[0, 2, 1])
    att = b.softmax(b.matmul(y, y, transposeB=True), axes=[2])
    y = b.add(b.matmul(att, y), b.mul(b.sigmoid(y), b.tanh(y)))
    y = b.sub(y, b.mean_reduce(y, axes=[2]))
    y = b.div(y, b.sqrt(b.add(b.sum_reduce(b.sqr(y), axes=[2]), 1.0)))
    y = b.clamp(b.slice(y, axes=[1], begin=[2], end=[14]), -0.5, 0.5)
    y = b.linear(b.reshape(y, shape=[2, 96]), b.variable("fc", rng.standard_normal((5, 96)).astype(np.float32)))
    b.output(b.exp(y), "out")
    return b.build()


@pytest.mark.parametrize("engine", INSTALLED)
def test_engines_run_the_common_operations(engine):
    model = _common_network()
    assert engines.get(engine).problems(model.graph) == []
    session = Session(model, engine, verify=True)
    session.run({"x": np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)})
    assert all(c.ok for c in session.verification)


@pytest.mark.parametrize("engine", INSTALLED)
def test_digits_outputs_and_variable_batches(engine):
    model = nnefx.load(DIGITS)
    rng = np.random.default_rng(0)
    session = Session(model, engine, input_shapes={"input": (None, 1, 8, 8)}, verify=True)
    for batch in (1, 5, 1):
        out = session.run({"input": rng.random((batch, 1, 8, 8), dtype=np.float32)})["probabilities"]
        assert out.shape == (batch, 10) and out.dtype == np.float32
    assert len(session._engine._variants) == 2


def _counter():
    """A stateful graph: s <- s * 0.5 + x each step; y = s + 1."""
    b = GraphBuilder("counter")
    x = b.external("x", [2, 3])
    s = b.variable("s", np.ones((2, 3), np.float32))
    new = b.add(b.mul(s, 0.5), x)
    b.op("update", s, new)
    b.output(b.add(new, 1.0), "y")
    return b.build()


@pytest.mark.parametrize("engine", INSTALLED)
def test_state_is_carried_between_steps(engine):
    model = _counter()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ref, eng = Session(model, "formal"), Session(model, engine, verify=True)
    for _ in range(3):
        np.testing.assert_allclose(eng.run({"x": x})["y"], ref.run({"x": x})["y"], rtol=1e-6)
    np.testing.assert_allclose(eng.variables["s"], ref.variables["s"], rtol=1e-6)
    eng.reset()
    np.testing.assert_array_equal(eng.variables["s"], np.ones((2, 3), np.float32))


@pytest.mark.parametrize("engine", INSTALLED)
def test_listed_constants_of_a_typed_graph_fill_their_shape(engine, tmp_path):
    # An ONNX float16 initializer reaches the engines as a constant listing every item; the torch
    # engine once broadcast the flat list onto the shape and failed.
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = np.arange(12, dtype=np.float16).reshape(3, 4)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "m.onnx")
    model = nnefx.load(str(tmp_path / "m.onnx"))
    a = np.random.default_rng(0).random((2, 3)).astype(np.float16)
    out = Session(model, engine).run({"a": a})["y"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), (a.astype(np.float32) @ w.astype(np.float32)), rtol=2e-3)


def test_auto_picks_a_measured_backend_and_says_why():
    model = nnefx.load(DIGITS)
    x = np.random.default_rng(1).random((1, 1, 8, 8), dtype=np.float32)
    session = Session(model, "auto")
    out = session.run({"input": x})["probabilities"]
    assert session.backend_reason.startswith("auto: ")
    chosen = session.backend_reason.split()[1].rstrip(",")
    assert chosen in ["fast", *INSTALLED]
    assert "fastest on the first inputs" in session.backend_reason
    np.testing.assert_allclose(out, Session(model, "formal").run({"input": x})["probabilities"], rtol=1e-4, atol=1e-6)


def test_verify_reports_a_disagreement(monkeypatch):
    if "onnxruntime" not in INSTALLED:
        pytest.skip("onnxruntime is not installed")
    from nnefx.engines import onnxruntime as ort_engine

    original = ort_engine.OrtModel.__call__

    def wrong(self, feeds):
        out = original(self, feeds)
        return {k: v + 0.01 for k, v in out.items()}

    monkeypatch.setattr(ort_engine.OrtModel, "__call__", wrong)
    session = Session(nnefx.load(DIGITS), "onnxruntime", verify=True)
    with pytest.raises(NNEFXError, match=r"disagrees with the formal backend: probabilities: .*bound 0.0001") as err:
        session.run({"input": np.zeros((1, 1, 8, 8), np.float32)})
    # Every traced tensor is off by 0.01: the first operation of the graph is named, with its position.
    assert "first diverging: operation 'conv'" in str(err.value)
    assert err.value.location is not None and err.value.location.line


def test_errors_name_the_backend_and_what_to_install(monkeypatch):
    with pytest.raises(NNEFXError, match="unknown backend 'tensorrt'"):
        Session(nnefx.load(DIGITS), "tensorrt")
    engine = engines.get("openvino")
    monkeypatch.setattr(type(engine), "module", lambda self: self._import("openvino_not_installed"))
    monkeypatch.setattr(engines, "get", lambda name: engine)
    with pytest.raises(NNEFXError, match=r"pip install 'nnefx\[openvino\]'"):
        Session(nnefx.load(DIGITS), "openvino")


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed")
def test_torch_reduced_precision_reports_its_error():
    session = Session(nnefx.load(DIGITS), "torch", precision="bf16", verify=True,
                      input_shapes={"input": (4, 1, 8, 8)})
    session.run({"input": np.random.default_rng(2).random((4, 1, 8, 8), dtype=np.float32)})
    (comparison,) = session.verification
    assert 0 < comparison.max_rel <= comparison.bound == 5e-2


def test_cuda_device_is_refused_cleanly_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        session = Session(nnefx.load(DIGITS), "torch", device="cuda", verify=True)
        session.run({"input": np.zeros((1, 1, 8, 8), np.float32)})
        assert session.verification[0].ok
    else:
        with pytest.raises(NNEFXError, match="no CUDA device"):
            Session(nnefx.load(DIGITS), "torch", device="cuda").run({"input": np.zeros((1, 1, 8, 8), np.float32)})


# ---- query, compile, bench, run: the command line --------------------------------------------

def _nnefx(*args, cwd=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "nnefx", *args], capture_output=True, text=True, cwd=cwd)


def test_query_lists_every_operation_that_stops_a_backend(tmp_path):
    text = ("version 1.0;\ngraph G(x) -> (y, z)\n{\n x = external<scalar>(shape = [1, 4, 6, 6]);\n"
            " a = box(x, size = [1, 2, 2, 2], border = 'constant');\n"
            " y = max_pool(a, size = [1, 2, 1, 1]);\n z = relu(x);\n}\n")
    (tmp_path / "g.nnef").write_text(text)
    from nnefx.engines.query import query

    found = query(nnefx.load(str(tmp_path / "g.nnef")))
    assert found["fast"] == [] and found["formal"] == []
    if "openvino" in INSTALLED:
        problems = found["openvino"]
        assert [(p.operation, p.location.line) for p in problems] == [("box", 5), ("max_pool", 6)]
    done = _nnefx("query", str(tmp_path / "g.nnef"), "--backend", "openvino", "--backend", "fast")
    if "openvino" in INSTALLED:
        assert done.returncode == 1, done.stderr
        assert "openvino: cannot run the graph: 2 operations (box, max_pool)" in done.stdout
        assert "g.nnef:5:" in done.stdout and "g.nnef:6:" in done.stdout
    assert "fast: can run the graph" in done.stdout


@pytest.mark.parametrize("engine", [e for e in ("onnxruntime", "openvino") if e in INSTALLED])
def test_compile_then_load_without_the_source(tmp_path, engine):
    import shutil
    import time

    model_dir = tmp_path / "model"
    shutil.copytree(DIGITS, model_dir)
    out = tmp_path / "digits.compiled"
    done = _nnefx("compile", str(model_dir), "-o", str(out), "--backend", engine)
    assert done.returncode == 0, done.stderr
    manifest = json_load(out / "nnefx-compiled.json")
    assert manifest["engine"] == engine and manifest["inputs"][0]["shape"] == [1, 1, 8, 8]
    x = np.random.default_rng(5).random((1, 1, 8, 8), dtype=np.float32)
    started = time.perf_counter()
    compiled = nnefx.load(str(out))
    load_compiled = time.perf_counter() - started
    want = Session(nnefx.load(str(model_dir)), "formal").run({"input": x})["probabilities"]
    np.testing.assert_allclose(compiled.run({"input": x})["probabilities"], want, rtol=1e-4, atol=1e-6)
    assert load_compiled < 5.0
    with pytest.raises(NNEFXError, match=r"compiled for shape \[1, 1, 8, 8\], got \[2, 1, 8, 8\]"):
        compiled.run({"input": np.zeros((2, 1, 8, 8), np.float32)})
    run = _nnefx("run", str(out))
    assert run.returncode == 0 and "compiled" in run.stdout, run.stderr
    check = _nnefx("check", str(out))
    assert check.returncode == 1 and "is a compiled model" in check.stderr and "Traceback" not in check.stderr
    artifact = next(p for p in out.iterdir() if p.name.startswith("model."))
    data = artifact.read_bytes()
    artifact.write_bytes(data[: len(data) // 2])
    with pytest.raises(NNEFXError, match="truncated or edited"):
        nnefx.load(str(out))
    # Edited in place, same size and modification time: the digest (not a stamp) catches it.
    stat = artifact.stat()
    artifact.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    os.utime(artifact, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(NNEFXError, match="truncated or edited"):
        nnefx.load(str(out))
    for broken in (b"", None, *(("fifo",) if hasattr(os, "mkfifo") else ())):
        if broken is None:
            artifact.unlink()
        elif broken == "fifo":  # must be refused, not waited on
            os.mkfifo(artifact)
        else:
            artifact.write_bytes(broken)
        with pytest.raises(NNEFXError, match="missing, truncated or edited"):
            nnefx.load(str(out))
    artifact.unlink()
    artifact.write_bytes(data)
    manifest["engine_version"] = "0.0.1"
    (out / "nnefx-compiled.json").write_text(__import__("json").dumps(manifest))
    with pytest.raises(NNEFXError, match=r"compiled by .* 0.0.1, but .* is installed: compile it again"):
        nnefx.load(str(out))
    redo = _nnefx("compile", str(model_dir), "-o", str(out), "--backend", engine)
    assert redo.returncode == 0, redo.stderr
    with open(model_dir / "graph.nnef", "a") as f:
        f.write("\n")
    with pytest.raises(NNEFXError, match="changed since it was compiled"):
        nnefx.load(str(out))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    refused = _nnefx("compile", str(model_dir), "-o", str(tmp_path / "taken"), "--backend", engine)
    assert refused.returncode == 1 and (tmp_path / "taken" / "keep.txt").read_text() == "mine"


@pytest.mark.skipif("onnxruntime" not in INSTALLED, reason="onnxruntime is not installed")
def test_compiled_onnxruntime_weights_are_external_data_checked_like_the_graph(tmp_path, monkeypatch):
    from nnefx.engines import compiled as compiled_module

    b = GraphBuilder("dense")
    x = b.external("x", shape=(2, 64))
    b.output(b.op("relu", b.op("linear", x, b.variable("w", np.random.default_rng(1).standard_normal(
        (32, 64)).astype(np.float32)), b.variable("bias", np.ones((1, 32), np.float32)))), name="y")
    source = tmp_path / "dense"
    nnefx.save(b.build(), str(source))
    out = tmp_path / "dense.compiled"
    done = _nnefx("compile", str(source), "-o", str(out), "--backend", "onnxruntime")
    assert done.returncode == 0, done.stderr
    assert sorted(json_load(out / "nnefx-compiled.json")["artifact"]) == ["model.data", "model.onnx"]
    feeds = {"x": np.random.default_rng(2).standard_normal((2, 64)).astype(np.float32)}
    want = Session(nnefx.load(str(source)), "formal").run(feeds)["y"]
    np.testing.assert_allclose(nnefx.load(str(out)).run(feeds)["y"], want, rtol=1e-5, atol=1e-5)
    # a file replaced between its check and the engine's opening it is refused
    real = compiled_module._same_file
    monkeypatch.setattr(compiled_module, "_same_file", lambda f, path: not path.endswith("model.data") and real(f, path))
    with pytest.raises(NNEFXError, match="replaced while it was loaded"):
        nnefx.load(str(out))
    monkeypatch.setattr(compiled_module, "_same_file", real)
    data = (out / "model.data").read_bytes()
    for broken in (data[:-4] + bytes(4), data[: len(data) // 2]):   # edited, truncated: the digest says so
        (out / "model.data").write_bytes(broken)
        with pytest.raises(NNEFXError, match="truncated or edited"):
            nnefx.load(str(out))


@pytest.mark.parametrize("algorithm", ["blake3", "sha256"])
def test_artifact_chunks_are_each_checked_and_groups_handed_out_apart(tmp_path, algorithm):
    from nnefx.engines import compiled as compiled_module

    if algorithm == "blake3":
        pytest.importorskip("blake3")
    rng = np.random.default_rng(3)
    (tmp_path / "graph").write_bytes(rng.bytes(5 * compiled_module.MIN_CHUNK + 123))
    (tmp_path / "weights").write_bytes(rng.bytes(3 * compiled_module.MIN_CHUNK))
    entries = {name: compiled_module._digests(str(tmp_path / name), compiled_module.MIN_CHUNK, algorithm)
               for name in ("graph", "weights")}
    assert len(entries["graph"]["digests"]) == 6 and compiled_module._valid_entry(entries["graph"])
    if algorithm == "sha256":
        import hashlib

        data = (tmp_path / "graph").read_bytes()
        assert entries["graph"]["digests"][1] == hashlib.sha256(
            data[compiled_module.MIN_CHUNK:2 * compiled_module.MIN_CHUNK]).hexdigest()

    def check():
        return compiled_module._Check(str(tmp_path), [{"graph": entries["graph"]}, {"weights": entries["weights"]}])

    done = check()
    assert set(done.group(0)) == {"graph"} and set(done.group(1)) == {"weights"}
    done.close()
    data = (tmp_path / "weights").read_bytes()
    # an edit in the last chunk of the second group: the first group is still handed out
    (tmp_path / "weights").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    done = check()
    assert set(done.group(0)) == {"graph"}
    with pytest.raises(NNEFXError, match="truncated or edited") as refused:
        done.group(1)
    assert "weights" in str(refused.value.location)
    done.close()
    (tmp_path / "weights").write_bytes(data + b"\0")   # grown: not the manifest's size, refused unhashed
    done = check()
    with pytest.raises(NNEFXError, match="truncated or edited"):
        done.group(1)
    done.close()
    # entries a hostile manifest could write are refused before any file is opened
    for bad in ({**entries["graph"], "chunk": 1}, {**entries["graph"], "digests": entries["graph"]["digests"][:-1]},
                {**entries["graph"], "size": -1}, {**entries["graph"], "size": True},
                {**entries["graph"], "algorithm": "md5"}, [], None):
        assert not compiled_module._valid_entry(bad)


def test_blake3_digests_without_the_package_name_what_to_install(tmp_path, monkeypatch):
    import builtins

    from nnefx.engines import compiled as compiled_module

    pytest.importorskip("blake3")
    (tmp_path / "blob").write_bytes(b"x" * 1000)
    entry = compiled_module._digests(str(tmp_path / "blob"))
    assert entry["algorithm"] == "blake3"
    real_import = builtins.__import__

    def no_blake3(name, *args, **kwargs):
        if name == "blake3":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_blake3)
    monkeypatch.delitem(__import__("sys").modules, "blake3")
    assert compiled_module._algorithm() == "sha256"
    with pytest.raises(NNEFXError, match="pip install blake3"):
        compiled_module._Check(str(tmp_path), [{"blob": entry}])


@pytest.mark.skipif("onnxruntime" not in INSTALLED, reason="onnxruntime is not installed")
def test_compiled_manifest_with_a_malformed_entry_is_refused(tmp_path):
    import json

    out = tmp_path / "digits.compiled"
    done = _nnefx("compile", DIGITS, "-o", str(out), "--backend", "onnxruntime")
    assert done.returncode == 0, done.stderr
    manifest = json_load(out / "nnefx-compiled.json")
    manifest["artifact"]["model.onnx"]["digests"].append("0" * 64)
    (out / "nnefx-compiled.json").write_text(json.dumps(manifest))
    with pytest.raises(NNEFXError, match="entry for model.onnx is malformed"):
        nnefx.load(str(out))
    manifest["version"] = 2
    (out / "nnefx-compiled.json").write_text(json.dumps(manifest))
    with pytest.raises(NNEFXError, match="written by another nnefx version"):
        nnefx.load(str(out))


def json_load(path):
    import json

    with open(path) as f:
        return json.load(f)


def test_bench_rows_per_backend():
    done = _nnefx("bench", DIGITS, "--backend", "fast", "--backend", "formal", "--time", "0.2", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:5] == ["backend", "runs", "p50", "ms", "p90"]
    assert [line.split()[0] for line in lines[1:3]] == ["fast", "formal"]
    bad = _nnefx("bench", DIGITS, "--time", "-1")
    assert bad.returncode == 1 and "--time must be positive" in bad.stderr


def test_run_with_an_engine_and_verify_on_the_command_line():
    engine = INSTALLED[0] if INSTALLED else "fast"
    done = _nnefx("run", DIGITS, "--backend", engine, "--verify", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert "verify: probabilities: max |diff|" in done.stdout
    bad = _nnefx("run", DIGITS, "--backend", "nope")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch is not installed")
def test_verify_names_the_first_operation_that_diverges(monkeypatch):
    from nnefx.engines import torch as torch_engine

    monkeypatch.setitem(torch_engine._UNARY, "relu", lambda t, x: x)  # a wrong relu: the identity
    session = Session(nnefx.load(DIGITS), "torch", verify=True)
    x = np.random.default_rng(6).standard_normal((1, 1, 8, 8)).astype(np.float32)
    with pytest.raises(NNEFXError, match=r"first diverging: operation 'relu' \(conv1_relu: max \|diff\|") as err:
        session.run({"input": x})
    assert err.value.location.line == 9


@pytest.mark.skipif("openvino" not in INSTALLED, reason="openvino is not installed")
def test_openvino_bf16_where_the_cpu_has_it():
    import openvino as ov

    model = nnefx.load(DIGITS)
    has_bf16 = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if not has_bf16:
        with pytest.raises(NNEFXError, match="cannot compute in bf16 on this CPU"):
            Session(model, "openvino", precision="bf16")
        return
    session = Session(model, "openvino", precision="bf16", verify=True, input_shapes={"input": (8, 1, 8, 8)})
    session.run({"input": np.random.default_rng(7).random((8, 1, 8, 8), dtype=np.float32)})
    (comparison,) = session.verification
    assert 0 < comparison.max_rel <= comparison.bound == 5e-2
    full = Session(model, "openvino", verify=True, input_shapes={"input": (8, 1, 8, 8)})
    full.run({"input": np.random.default_rng(7).random((8, 1, 8, 8), dtype=np.float32)})
    assert full.verification[0].max_rel < 1e-5  # f32 is asked for explicitly: no silent bf16
