"""The command line meets every fixture and every documented mistake without a traceback.

Every subcommand runs over every model file the repository ships (the test fixtures, the
examples) and over the mistakes the README and ``--help`` name; each run must end with a
documented exit status (0 ok, 1 invalid input, 2 usage; 3 only for a bug, never here) and
print no Python traceback: a failure is one ``FILE...: error: MESSAGE`` line on stderr.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnefx.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DIGITS = str(ROOT / "examples" / "digits" / "model")
CVM = FIXTURES / "cvm" / "ex01_conv_pool_dense"


def _models() -> list[Path]:
    found: list[Path] = [Path(DIGITS), *sorted((ROOT / "examples" / "readme").glob("*.*"))]
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_dir() and (path / "graph.nnef").exists():
            found.append(path)
        elif path.suffix in (".nnef", ".xml", ".onnx", ".tgz", ".tar") and path.name != "graph.nnef":
            found.append(path)
        elif path.suffix == ".json" and path.with_suffix(".params").exists():
            found.append(path)
    return [p for p in found if p.suffix not in (".py", ".npy", ".quant", ".bin", ".params")]


MODELS = _models()


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``nnefx ARGV`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:  # argparse: --help, usage errors
            rc = exc.code if isinstance(exc.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def assert_clean(rc: int, err: str, allowed=(0, 1)) -> None:
    assert rc in allowed, f"exit status {rc}:\n{err}"
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == 1:
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and ": error: " in lines[0] or lines[0].startswith("error: "), err


def test_the_matrix_covers_every_format():
    suffixes = {p.suffix or "folder" for p in MODELS}
    assert {"folder", ".nnef", ".xml", ".json", ".onnx"} <= suffixes, suffixes
    assert len(MODELS) > 150


@pytest.mark.parametrize("model", MODELS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_subcommand_on_every_model(model, tmp_path):
    path = str(model)
    extra = ["--params", str(model.with_suffix(".params"))] if model.suffix == ".json" else []
    rc, out, err = cli("check", path, *extra)
    assert_clean(rc, err)
    valid = rc == 0
    for argv in (["inspect", path], ["inspect", "--json", path], ["run", path, "--seed", "1"],
                 ["convert", path, str(tmp_path / "as_folder")], ["convert", path, str(tmp_path / "m.tgz")],
                 ["query", path, "--backend", "fast", "--backend", "onnxruntime"],
                 ["draw", path, "-o", str(tmp_path / "g.dot")]):
        rc, out, err = cli(*argv, *extra)
        assert_clean(rc, err)
        if argv[0] == "inspect":
            assert rc == (0 if valid else 1), (argv, err)  # inspect accepts exactly what check accepts
    if valid:
        assert cli("check", str(model), "--format", "onnx")[0] in (0, 1)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary files left behind"


# --- documented mistakes ----------------------------------------------------------------------

def _files(tmp: Path) -> dict[str, str]:
    (tmp / "text.npy").write_text("1 2 3\n")
    np.savez(tmp / "two.npz", a=np.zeros(3))
    np.save(tmp / "four.npy", np.zeros((4, 1, 8, 8), np.float32))
    np.save(tmp / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp / "not_a_model").mkdir()
    (tmp / "not_a_model" / "notes.txt").write_text("mine")
    (tmp / "empty.nnef").write_text("")
    (tmp / "garbage.onnx").write_bytes(b"\x00\xff" * 10)
    (tmp / "file").write_text("x")
    return {k: str(tmp / k) for k in ("text.npy", "two.npz", "four.npy", "obj.npy", "not_a_model",
                                      "empty.nnef", "garbage.onnx", "file")}


USAGE = [  # exit 2: argparse reports the usage
    [], ["frobnicate", DIGITS], ["check"], ["run", DIGITS, "--seed", "-1"], ["run", DIGITS, "--seed", "x"],
    ["run", DIGITS, "--steps", "0"], ["run", DIGITS, "--steps", "1.5"], ["run", DIGITS, "-i", "input"],
    ["run", DIGITS, "-i", "=x.npy"], ["run", DIGITS, "-i", "input="], ["check", DIGITS, "--shape", "input"],
    ["check", DIGITS, "--shape", "input=a,b"], ["check", DIGITS, "--shape", "input=1,0"],
    ["check", DIGITS, "--shape", "=1,2"], ["run", DIGITS, "--backend", "gpu"], ["check", DIGITS, "--format", "pb"],
    ["convert", DIGITS, "x", "--to", "pb"], ["check", DIGITS, "--dialect", "2.0"], ["convert", DIGITS],
    ["inspect", DIGITS, "--bogus"], ["batch", DIGITS], ["batch", DIGITS, "--inputs", "x", "--output", "o", "--workers", "0"],
    ["batch", DIGITS, "--inputs", "x", "--output", "o", "--column", "pixels"],
    ["query", DIGITS, "--backend", "tensorrt"], ["compile", DIGITS], ["compile", DIGITS, "-o", "x", "--backend", "torch"],
    ["bench", DIGITS, "--threads", "0"], ["bench", DIGITS, "--time", "soon"], ["draw", DIGITS],
]


@pytest.mark.parametrize("argv", USAGE, ids=lambda a: " ".join(a).replace(DIGITS, "M") or "(none)")
def test_usage_mistakes_exit_2_with_the_usage(argv):
    rc, out, err = cli(*argv)
    assert rc == 2, err
    assert "usage: nnefx" in err and "Traceback" not in err


INVALID = [  # exit 1: one located line
    (["check", "nothere.onnx"], "nothere.onnx: error: no such file or folder"),
    (["check", "nothere"], "nothere: error: no such file or folder"),
    (["check", "{not_a_model}"], "error:"),
    (["check", "{empty.nnef}"], "empty.nnef"),
    (["check", "{garbage.onnx}"], "garbage.onnx"),
    (["check", "{file}"], "cannot tell the format"),
    (["check", str(CVM) + ".json", "--params", "nothere.params"], "nothere.params"),
    (["check", DIGITS, "--shape", "foo=1,2"], "a shape is given for 'foo', which is not an input"),
    (["run", DIGITS, "-i", "foo={four.npy}"], "--input names 'foo', which is not an input"),
    (["run", DIGITS, "-i", "input=nothere.npy"], "nothere.npy: error: no such file"),
    (["run", DIGITS, "-i", "input={text.npy}"], "not a .npy file"),
    (["run", DIGITS, "-i", "input={two.npz}"], "an .npz archive"),
    (["run", DIGITS, "-i", "input={obj.npy}"], "never unpickles"),
    (["run", DIGITS, "-i", "input={four.npy}"], "add --shape input=4,1,8,8"),
    (["run", DIGITS, "--quantize"], "--quantize: no activation"),
    (["run", DIGITS, "-o", "{file}"], "cannot create the output folder"),
    (["convert", DIGITS, "{tmp}/out.pb"], "known: a folder (no suffix), .tar.gz"),
    (["convert", DIGITS, "{not_a_model}"], "not an NNEF model"),
    (["convert", DIGITS, "/nonexistent/dir/m.tgz"], "m.tgz"),
    (["check", str(ROOT / "examples" / "readme" / "evil.xml")], "(DTD) are not allowed"),
    (["convert", str(ROOT / "examples" / "readme" / "roi.nnef"), "{tmp}/roi.onnx"], "not static"),
]


@pytest.mark.parametrize("argv, message", INVALID, ids=lambda a: " ".join(a).replace(DIGITS, "M")
                         if isinstance(a, list) else None)
def test_invalid_input_exits_1_with_one_located_line(argv, message, tmp_path):
    files = {**_files(tmp_path), "tmp": str(tmp_path)}
    for key, value in files.items():
        argv = [a.replace("{" + key + "}", value) for a in argv]
    rc, out, err = cli(*argv)
    assert rc == 1, err
    assert_clean(rc, err)
    assert message in err, err
    assert not (tmp_path / "out.pb").exists() and not (tmp_path / "roi.onnx").exists()
    assert os.listdir(tmp_path / "not_a_model") == ["notes.txt"]  # never replaced


def test_convert_refuses_a_suffix_it_does_not_write_and_writes_the_ones_it_knows(tmp_path):
    rc, _, err = cli("convert", DIGITS, str(tmp_path / "out.pb"))
    assert rc == 1 and not (tmp_path / "out.pb").exists()
    for name in ("folder", "m.nnef", "m.tgz", "m.tar", "m.tar.gz", "m.xml", "m.onnx"):
        assert cli("convert", DIGITS, str(tmp_path / name))[0] == 0, name
        assert cli("check", str(tmp_path / name))[0] == 0, name
    assert cli("convert", DIGITS, str(tmp_path / "model.v2"), "--to", "folder")[0] == 0
    assert (tmp_path / "model.v2" / "graph.nnef").exists()


def test_an_unexpected_exception_is_one_line_and_exit_3(monkeypatch):
    import nnefx.cli

    def broken(args):
        raise KeyError("oops")

    monkeypatch.setattr(nnefx.cli, "cmd_check", broken)
    rc, out, err = cli("check", DIGITS)
    assert rc == 3 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith("nnefx: internal error: KeyError: 'oops' -- a bug in nnefx; please report it")
    assert "--debug" in err
    for argv in (("--debug", "check", DIGITS), ("check", DIGITS, "--debug")):
        rc, out, err = cli(*argv)
        assert rc == 3 and "Traceback" in err and "KeyError: 'oops'" in err


def test_help_teaches_every_subcommand():
    rc, out, _ = cli("--help")
    assert rc == 0 and "``" not in out and "exit status: 0 ok, 1 invalid input" in out
    for command in ("check", "inspect", "convert", "run", "batch", "draw", "compare", "query", "compile", "bench"):
        rc, text, _ = cli(command, "--help")
        assert rc == 0 and "``" not in text
        assert text.count(f"\n  nnefx {command} ") >= 2, text  # examples
        options = text.split("options:", 1)[1].split("examples:", 1)[0]
        for line in options.splitlines():  # every argument is described
            if line.startswith("  -"):
                assert len(line.split("  ")) > 2 or options.split(line, 1)[1].startswith("\n     "), line
    rc, out, _ = cli("--version")
    assert rc == 0 and out.startswith("nnefx ") and "extras found:" in out and "extras missing:" in out


def test_the_installed_command_prints_no_traceback(tmp_path):
    """The real entry point, as a user's shell starts it (one process; the rest run in-process)."""
    (tmp_path / "x.npy").write_text("hello\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "nnefx", "run", DIGITS, "-i", f"input={tmp_path / 'x.npy'}"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("write input arrays with numpy.save")


def test_a_missing_optional_package_comes_after_a_missing_file_and_names_its_extra(monkeypatch, tmp_path):
    """Without the onnx package: a missing file is still a missing file; an existing .onnx
    file names the extra to install."""
    for name in [m for m in sys.modules if m == "onnx" or m.startswith(("onnx.", "nnefx.formats.onnx"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx -> ImportError
    rc, _, err = cli("check", "nothere.onnx")
    assert rc == 1 and err.strip() == "nothere.onnx: error: no such file or folder"
    rc, _, err = cli("check", str(ROOT / "examples" / "readme" / "net.onnx"))
    assert rc == 1 and "'onnx' package" in err and "pip install nnefx[onnx]" in err


def test_a_dynamic_batch_torch_export_checks_and_runs_at_any_batch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    net = str(ROOT / "examples" / "readme" / "net.onnx")  # torch.onnx.export(..., dynamic_axes={batch})
    rc, out, err = cli("inspect", net)
    assert rc == 0 and "input: scalar [?, 3, 32, 32]" in out and "logits: scalar [?, 10]" in out
    x = np.random.default_rng(1).standard_normal((3, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = cli("run", net, "-i", f"input={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out"))
    assert rc == 0, err
    want = ort.InferenceSession(net).run(None, {"input": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "logits.npy"), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("command", ["check", "inspect", "run", "convert"])
def test_the_help_examples_run(command, tmp_path, monkeypatch):
    """The examples each subcommand's --help gives run as written, from the repository root."""
    from nnefx.cli import _EXAMPLES

    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.chdir(tmp_path)  # outputs land here, paths resolve to the repository's files
    lines = [x.split(" # ", 1)[0].split() for x in _EXAMPLES[command].splitlines()[1:]]
    assert len(lines) >= 3
    for argv in lines:
        assert argv[0] == "nnefx"
        rc, out, err = cli(*argv[1:])
        assert rc == 0, (argv, err)
