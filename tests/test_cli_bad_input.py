"""Bad input end to end, as a user meets it: hostile ONNX files and engine failures through the
command line (``check``/``run``/``convert``/``compile``/``query``) and the API — each a located
``NNEFXError`` (exit 1, one line, no traceback), nothing written on failure."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx import engines  # noqa: E402
from nnefx.cli import main  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

F = TensorProto.FLOAT
INSTALLED = [name for name, e in engines.engines().items() if e.available()]


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _save(path, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())  # not onnx.save: its checker would refuse some of these
    return str(path)


def _one_error_line(capsys, *fragments):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


# --- the reader: names and declarations --------------------------------------------------------

@pytest.mark.parametrize("inputs, inits, message", [
    ([_vi("x", [2]), _vi("x", [2])], [], "[input 'x']: error: the name 'x' is given to more than one input"),
    ([_vi("x", [2])], [numpy_helper.from_array(np.ones(2, np.float32), "w")] * 2,
     "[initializer 'w']: error: the name 'w' is given to more than one initializer"),
    ([_vi("x", [2]), _vi("w", [3])], [numpy_helper.from_array(np.ones(2, np.float32), "w")],
     "[input 'w']: error: the initializer of the same name has shape [2], the input declares [3]"),
    ([_vi("x", [2]), _vi("w", [2], TensorProto.INT32)], [numpy_helper.from_array(np.ones(2, np.float32), "w")],
     "[input 'w']: error: the initializer of the same name is f32, the input declares i32"),
    ([_vi("x", [-5])], [], "[input 'x']: error: declares the extent -5"),
])
def test_names_and_declarations_that_contradict_each_other(tmp_path, capsys, inputs, inits, message):
    model = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "x"], ["y"])], inputs, [_vi("y", None)], inits)
    for command in (["check", model], ["run", model], ["convert", model, str(tmp_path / "out.onnx")]):
        assert main(command) == 1
        _one_error_line(capsys, message)
    assert not (tmp_path / "out.onnx").exists()


def test_an_initialized_input_of_the_declared_type_is_its_constant(tmp_path):
    w = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    model = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [2]), _vi("w", [2])],
                  [_vi("y", [2])], [w])
    assert Session(nnefx.load(model)).run({"x": np.zeros(2, np.float32)})["y"].tolist() == [1.0, 2.0]


# --- engines: scalars, bounds, their own failures ---------------------------------------------

@pytest.mark.parametrize("engine", INSTALLED)
def test_rank_0_inputs_keep_their_rank_on_every_engine(tmp_path, engine):
    model = _save(tmp_path / "s.onnx", [helper.make_node("Add", ["x", "c"], ["y"])], [_vi("x", [])], [_vi("y", [])],
                  [numpy_helper.from_array(np.array(2.0, np.float32), "c")])
    y = Session(nnefx.load(model), engine).run({"x": np.array(1.0, np.float32)})["y"]
    assert y.shape == () and float(y) == 3.0


@pytest.mark.parametrize("engine", INSTALLED)
def test_engines_refuse_what_nnefx_bounds_before_allocating(tmp_path, engine):
    pads = numpy_helper.from_array(np.array([0, 0, 1 << 40, 0, 0, 0, 0, 0], np.int64), "p")
    model = _save(tmp_path / "pad.onnx", [helper.make_node("Pad", ["x", "p"], ["y"], name="c")], [_vi("x", [1, 1, 4, 4])],
                  [_vi("y", None)], [pads])
    with pytest.raises(NNEFXError, match=r"operation 'pad': result shape \[1, 1, 1099511627780, 4\] has "
                                         r"4398046511120 elements, more than the 2147483648") as e:
        Session(nnefx.load(model), engine)
    assert "node 0 'c' (Pad)" in str(e.value)
    body = _doubling_body()
    model = _save(tmp_path / "loop.onnx", [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="L")],
                  [_vi("x", [2])], [_vi("y", [2])], [numpy_helper.from_array(np.array(1 << 40, np.int64), "M")])
    with pytest.raises(NNEFXError, match=r"node 0 'L' \(Loop\).*trip count 1099511627776 is more than the 1048576"):
        Session(nnefx.load(model), engine)


def test_a_loop_nothing_stops_is_refused_before_its_first_iteration(tmp_path, capsys):
    body = _doubling_body()
    model = _save(tmp_path / "loop.onnx", [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="L")],
                  [_vi("x", [2])], [_vi("y", [2])], [numpy_helper.from_array(np.array(1 << 40, np.int64), "M")])
    for backend in ("fast", "formal"):
        assert main(["run", model, "--backend", backend]) == 1
        _one_error_line(capsys, "[node 0 'L' (Loop)]", "trip count 1099511627776 is more than the 1048576")


@pytest.mark.skipif("onnxruntime" not in INSTALLED, reason="onnxruntime is not installed")
def test_an_engine_failing_on_a_run_is_one_error_naming_it(tmp_path, capsys):
    model = _save(tmp_path / "g.onnx", [helper.make_node("Gather", ["x", "i"], ["y"], name="g")],
                  [_vi("x", [3]), _vi("i", [2], TensorProto.INT64)], [_vi("y", None)])
    np.save(tmp_path / "i.npy", np.array([7, 0]))
    assert main(["run", model, "-i", f"i={tmp_path / 'i.npy'}", "--backend", "onnxruntime"]) == 1
    _one_error_line(capsys, "error: backend 'onnxruntime' failed on this run: ", "idx=7")  # ORT's own log is quiet
    assert main(["run", model, "-i", f"i={tmp_path / 'i.npy'}", "--backend", "fast"]) == 1
    _one_error_line(capsys, "[node 0 'g' (Gather)]", "index out of range for extent 3")


@pytest.mark.skipif("onnxruntime" not in INSTALLED, reason="onnxruntime is not installed")
def test_a_compiled_model_takes_its_inputs_in_their_element_type(tmp_path, capsys):
    model = _save(tmp_path / "c.onnx", [helper.make_node("Clip", ["x", "lo"], ["y"], name="c")],
                  [_vi("x", [4], TensorProto.INT32), _vi("lo", [], TensorProto.INT32)], [_vi("y", [4], TensorProto.INT32)],
                  opset=13)
    out = tmp_path / "c.compiled"
    assert main(["compile", model, "-o", str(out), "--backend", "onnxruntime", "-q"]) == 0
    assert main(["run", str(out)]) == 0  # random inputs drawn as int64, taken as the int32 they fit in
    capsys.readouterr()
    compiled = nnefx.load(str(out))
    assert compiled.inputs[1] == {"name": "lo", "shape": [], "dtype": "int32"}
    assert compiled.run({"x": np.arange(4), "lo": np.array(2)})["y"].tolist() == [2, 2, 2, 3]
    with pytest.raises(NNEFXError, match=r"input 'x' must be i32 \(integer\) data, got float64"):
        compiled.run({"x": np.arange(4.0), "lo": np.array(2)})
    with pytest.raises(NNEFXError, match=r"input 'x' has values outside the int32 range"):
        compiled.run({"x": np.arange(4) + (1 << 40), "lo": np.array(2)})


def _doubling_body():
    return helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_out"]),
                              helper.make_node("Add", ["v", "v"], ["v_out"])], "body",
                             [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v", [2])],
                             [_vi("cond_out", [], TensorProto.BOOL), _vi("v_out", [2])])


def test_a_loop_with_neither_trip_count_nor_condition_never_stops(tmp_path, capsys):
    model = _save(tmp_path / "loop.onnx", [helper.make_node("Loop", ["", "", "x"], ["y"], body=_doubling_body(),
                                                            name="L")], [_vi("x", [2])], [_vi("y", [2])])
    for backend in ("fast", "formal", *INSTALLED):
        assert main(["run", model, "--backend", backend]) == 1
        _one_error_line(capsys, "[node 0 'L' (Loop)]", "neither a trip count nor a condition: it never stops")


def test_engines_take_only_loops_a_load_time_trip_count_bounds(tmp_path, capsys):
    # The body's condition ends this loop (v doubles until it passes 100): the numpy backends stop
    # any loop at their iteration bound, an engine runs it to its end, so engines refuse it.
    body = helper.make_graph([helper.make_node("Add", ["v", "v"], ["v_out"]),
                              helper.make_node("ReduceMax", ["v_out"], ["m"], keepdims=0),
                              helper.make_node("Less", ["m", "hundred"], ["cond_out"])], "body",
                             [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v", [2])],
                             [_vi("cond_out", [], TensorProto.BOOL), _vi("v_out", [2])],
                             [numpy_helper.from_array(np.array(100.0, np.float32), "hundred")])
    model = _save(tmp_path / "loop.onnx", [helper.make_node("Loop", ["", "c", "x"], ["y"], body=body, name="L")],
                  [_vi("x", [2])], [_vi("y", [2])], [numpy_helper.from_array(np.array(True), "c")])
    x = np.array([1.0, 3.0], np.float32)
    for engine in INSTALLED:
        with pytest.raises(NNEFXError, match=r"node 0 'L' \(Loop\).*trip count is not known when the model is "
                                             r"loaded, so an engine could not be stopped"):
            Session(nnefx.load(model), engine)
    expected = [64.0, 192.0]  # 3 doubles to 192 > 100 after 6 iterations
    assert Session(nnefx.load(model), "fast").run({"x": x})["y"].tolist() == expected
    if INSTALLED:
        auto = Session(nnefx.load(model), "auto")
        assert auto.run({"x": x})["y"].tolist() == expected


def test_writers_refuse_results_larger_than_nnefx_computes(tmp_path, capsys):
    """A Resize to 2e9 x 2e9: the ONNX writer's gather tables alone would be 15 GiB."""
    scales = numpy_helper.from_array(np.array([1, 1, 1e9, 1e9], np.float32), "sc")
    model = _save(tmp_path / "r.onnx", [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="r")],
                  [_vi("x", [1, 1, 2, 2])], [_vi("y", None)], [scales], opset=13)
    for suffix, fmt in ((".onnx", "ONNX"), (".xml", "IR v11")):
        assert main(["convert", model, str(tmp_path / f"out{suffix}")]) == 1
        _one_error_line(capsys, "[node 0 'r' (Resize)]", f"cannot write operation 'interpolate' as {fmt}: ",
                        "has 4000000000000000000 items, more than the 2147483648 nnefx supports")
        assert not (tmp_path / f"out{suffix}").exists()
    assert main(["query", model, "--backend", "onnxruntime", "--backend", "openvino"]) == 1
    assert "more than the 2147483648 nnefx supports" in capsys.readouterr().out


def test_a_graph_input_passed_straight_out_is_a_copy_of_its_own(tmp_path):
    model = _save(tmp_path / "id.onnx", [], [_vi("x", [2])], [_vi("x", [2])])
    m = nnefx.load(model)
    assert m.graph.inputs == ["x"] and m.graph.outputs == ["x_1"]
    for backend in ("fast", *INSTALLED):
        assert Session(m, backend).run({"x": np.ones(2, np.float32)})["x_1"].tolist() == [1.0, 1.0]
    for out in ("back.onnx", "back"):
        nnefx.save(m, str(tmp_path / out))
        assert nnefx.load(str(tmp_path / out)).graph.outputs == ["x_1"]


def test_bench_of_a_model_that_does_not_load_is_one_located_error(tmp_path, capsys):
    model = _save(tmp_path / "p.onnx", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[9, 1], name="c")],
                  [_vi("x", [1, 1, 4, 4])], [_vi("y", None)])
    assert main(["bench", model, "--backend", "fast", "--time", "0.1"]) == 1
    _one_error_line(capsys, "[node 0 'c' (MaxPool)]: error: ")


@pytest.mark.skipif("onnxruntime" not in INSTALLED, reason="onnxruntime is not installed")
def test_verify_beyond_the_bound_on_the_command_line(monkeypatch, capsys):
    import os

    from nnefx.engines import onnxruntime as ort_engine

    original = ort_engine.OrtModel.__call__
    monkeypatch.setattr(ort_engine.OrtModel, "__call__",
                        lambda self, feeds: {k: v * 1.5 for k, v in original(self, feeds).items()})
    digits = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")
    assert main(["run", digits, "--backend", "onnxruntime", "--verify"]) == 1
    _one_error_line(capsys, "graph.nnef:", "disagrees with the formal backend: probabilities:", "bound",
                    "first diverging: operation")


# --- compiled models: the artifact and its manifest are files from a stranger ------------------

@pytest.fixture(scope="module")
def compiled_digits(tmp_path_factory):
    if "onnxruntime" not in INSTALLED:
        pytest.skip("onnxruntime is not installed")
    import os
    import shutil

    root = tmp_path_factory.mktemp("compiled")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model"), root / "model")
    assert main(["compile", str(root / "model"), "-o", str(root / "c"), "--backend", "onnxruntime", "-q"]) == 0
    return root


def _edited(root, tmp_path, edit):
    import json
    import shutil

    out = tmp_path / "c"
    shutil.copytree(root / "c", out)
    manifest = json.loads((out / "nnefx-compiled.json").read_text())
    text = edit(manifest)
    (out / "nnefx-compiled.json").write_text(text if isinstance(text, str) else json.dumps(manifest))
    return str(out)


@pytest.mark.parametrize("edit, message", [
    (lambda m: "[" * 100_000 + "]" * 100_000, "unreadable manifest (nested too deeply)"),
    (lambda m: m.pop("inputs"), "the manifest's 'inputs' must be a list of objects with a 'name'"),
    (lambda m: m.__setitem__("outputs", "y"), "the manifest's 'outputs' must be a list of objects with a 'name'"),
    (lambda m: m["inputs"][0].__setitem__("shape", ["a"]), "shapes of non-negative whole numbers"),
    (lambda m: m["inputs"][0].__setitem__("dtype", "float99"), "numeric element types (input 'input': 'float99')"),
    (lambda m: m["inputs"][0].__setitem__("dtype", "object"), "numeric element types"),
    (lambda m: m.__setitem__("threads", 10 ** 9), "the manifest's 'threads' must be a whole number from 1 to 4096"),
    (lambda m: m.__setitem__("precision", "f8"), "the manifest's 'precision' must be f32, f16 or bf16"),
])
def test_an_edited_manifest_is_refused_at_its_field(compiled_digits, tmp_path, capsys, edit, message):
    out = _edited(compiled_digits, tmp_path, edit)
    assert main(["run", out]) == 1
    _one_error_line(capsys, "nnefx-compiled.json: error: ", message)


def test_other_commands_on_a_compiled_model_say_what_it_is(compiled_digits, capsys):
    out = str(compiled_digits / "c")
    assert main(["bench", out, "--time", "0.1"]) == 1
    _one_error_line(capsys, "is a compiled model (nnefx compile): it can be run with nnefx run")
    assert main(["compile", out, "-o", str(compiled_digits / "again")]) == 1
    _one_error_line(capsys, "this is a compiled model (nnefx compile) already: compile its source")
    assert not (compiled_digits / "again").exists()
    assert main(["run", out, "--backend", "openvino", "--verify"]) == 1  # not silently dropped
    _one_error_line(capsys, "--backend, --verify do not apply to a compiled model")


def test_ray_notices_that_tell_a_batch_user_nothing_are_dropped_and_its_security_warning_kept():
    import logging

    from nnefx.batch.job import _quiet_ray_notices

    _quiet_ray_notices()
    _quiet_ray_notices()  # once per logger, however often a job connects
    auth = logging.getLogger("ray._private.authentication.authentication_token_setup")
    progress = logging.getLogger("ray.data._internal.progress")
    assert len(auth.filters) == 1 and len(progress.filters) == 1

    def shown(log, message):
        return log.filter(log.makeRecord(log.name, logging.WARNING, __file__, 1, message, (), None))

    assert not shown(auth, "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled ...")
    assert shown(auth, "Token authentication is disabled for this Ray cluster. Anyone with network access ...")
    assert not shown(progress, "Progress bars disabled. To enable, set ...")
    assert shown(progress, "something else")


def test_a_hostile_regex_runs_in_linear_time_or_is_refused(tmp_path, monkeypatch):
    import sys
    import time

    from nnefx.ops.onnx import re2 as translation

    pytest.importorskip("re2")
    model = _save(tmp_path / "r.onnx", [helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(a+)+$", name="r")],
                  [_vi("x", [1], TensorProto.STRING)], [_vi("y", [1], TensorProto.BOOL)], opset=20)
    x = np.array(["a" * 100_000 + "!"], dtype=object)   # exponential for a backtracking matcher
    started = time.perf_counter()
    for backend in ("fast", "formal"):
        assert Session(nnefx.load(model), backend).run({"x": x})["y"].tolist() == [False]
    assert time.perf_counter() - started < 30
    translation.compile_re2.cache_clear()
    monkeypatch.setitem(sys.modules, "re2", None)
    try:
        with pytest.raises(NNEFXError, match=r"needs RE2 \(google-re2: pip install 'nnefx\[onnx\]'\)"):
            Session(nnefx.load(model)).run({"x": x})
    finally:
        translation.compile_re2.cache_clear()


@pytest.mark.parametrize("command", ["run", "bench", "compile"])
def test_threads_beyond_what_an_engine_is_asked_for_are_a_usage_error(command, capsys):
    import os

    digits = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")
    extra = ["-o", "never-written"] if command == "compile" else []
    with pytest.raises(SystemExit) as done:
        main([command, digits, "--threads", "100000", *extra])
    assert done.value.code == 2
    assert "--threads: must be at most 4096, got 100000" in capsys.readouterr().err
    assert not os.path.exists("never-written")
    if INSTALLED:
        with pytest.raises(NNEFXError, match="threads must be from 1 to 4096"):
            Session(nnefx.load(digits), INSTALLED[0], threads=100000)
