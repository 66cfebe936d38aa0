"""The user-facing tools: ``inspect``'s compute summary, ``draw``, ``compare``, ``run --fetch``/
``--stats`` and progress bars, through the command line as a user meets them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import nnefx
from nnefx import cli
from nnefx.tools import progress
from nnefx.tools.compare import difference
from nnefx.tools.cost import graph_cost
from nnefx.tools.stats import tensor_stats

ROOT = Path(__file__).resolve().parent.parent
DIGITS = str(ROOT / "examples" / "digits" / "model")
SVG = "{http://www.w3.org/2000/svg}"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _document(tmp_path: Path, body: str, name: str = "g.nnef", inputs: str = "input",
              outputs: str = "output", fragments: str = "") -> str:
    ext = "extension KHR_enable_fragment_definitions;\n" if fragments else ""
    text = f"version 1.0;\n{ext}{fragments}\ngraph g( {inputs} ) -> ( {outputs} )\n{{\n{body}\n}}\n"
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- inspect: parameters, MACs, FLOPs ---------------------------------------------------------

def test_digits_totals_follow_the_documented_rules():
    cost = graph_cost(nnefx.load(DIGITS).graph)
    # conv1: 16x8x8 outputs x 1x3x3; conv2: 32x4x4 x 16x3x3; fc: 10 x 128
    assert cost.macs == 1024 * 9 + 512 * 144 + 10 * 128
    # 2 per MAC + one bias add per output item + pools (4 per output) + relus + softmax (3 per item)
    assert cost.flops == 2 * cost.macs + (1024 + 512 + 10) + 4 * (256 + 128) + (1024 + 512) + 3 * 10
    assert cost.params == 16 * 9 + 16 + 32 * 144 + 32 + 1280 + 10
    assert cost.unknown == 0


@pytest.mark.parametrize("body, op, macs, flops", [
    # deconv: input items x (output channels per group x kernel)
    ("input = external<scalar>(shape = [1, 4, 5, 5]);\n w = variable<scalar>(shape = [4, 6, 3, 3], label = 'w');\n"
     " output = deconv(input, w);", "deconv", 100 * 54, 2 * 100 * 54),
    # matmul with transposed A: the contracted extent is A's rows
    ("input = external<scalar>(shape = [2, 7, 3]);\n b = variable<scalar>(shape = [2, 7, 5], label = 'b');\n"
     " output = matmul(input, b, transposeA = true);", "matmul", 2 * 3 * 5 * 7, 2 * 2 * 3 * 5 * 7),
    # grouped convolution: input channels per group
    ("input = external<scalar>(shape = [1, 8, 6, 6]);\n w = variable<scalar>(shape = [8, 2, 3, 3], label = 'w');\n"
     " output = conv(input, w, groups = 4, padding = [(1, 1), (1, 1)]);", "conv", 8 * 36 * 18, 2 * 8 * 36 * 18),
    # separable_conv: depthwise (3x3 per channel) + pointwise (4 -> 6)
    ("input = external<scalar>(shape = [1, 4, 5, 5]);\n p = variable<scalar>(shape = [4, 1, 3, 3], label = 'p');\n"
     " q = variable<scalar>(shape = [6, 4, 1, 1], label = 'q');\n"
     " output = separable_conv(input, p, q, padding = [(1, 1), (1, 1)]);", "separable_conv",
     4 * 25 * 9 + 6 * 25 * 4, 2 * (4 * 25 * 9 + 6 * 25 * 4)),
    ("input = external<scalar>(shape = [2, 3, 4]);\n output = add_n([input, input, input]);", "add_n", 0, 2 * 24),
    ("input = external<scalar>(shape = [2, 3, 4]);\n output = sum_reduce(input, axes = [1]);", "sum_reduce", 0, 24),
    ("input = external<scalar>(shape = [2, 3, 4]);\n output = transpose(input, axes = [0, 2, 1]);", "transpose", 0, 0),
])
def test_counting_rules(tmp_path, body, op, macs, flops):
    cost = graph_cost(nnefx.load(_document(tmp_path, body)).graph)
    (row,) = [r for r in cost.rows if r.op.op == op]
    assert (row.macs, row.flops) == (macs, flops)


def test_summary_shows_table_and_totals_and_unknown_costs(tmp_path, capsys):
    body = ("input = external<scalar>(shape = [1, 2, 8, 8]);\n rois = external<scalar>(shape = [3, 4]);\n"
            " index = external<integer>(shape = [3]);\n"
            " pooled = avg_roi_pool(input, rois, index, output_size = [2, 2]);\n output = relu(pooled);")
    path = _document(tmp_path, body, inputs="input, rois, index")
    code, out, err = run_cli(capsys, "inspect", path, "--ops", "--cost")
    assert code == 0, err
    assert "avg_roi_pool: 1  MACs      ?  FLOPs      ?" in out
    assert "1 operation without a known cost left out" in out
    table = out[out.index("per operation:"):]
    assert "avg_roi_pool" in table and "?" in table and "relu" in table and "[3,2,2,2]" in table
    # --cost (the integer runtime's measure) does not apply to float models: said, not aborted
    assert "cost: unknown (" in out


def test_summary_of_digits(capsys):
    code, out, _ = run_cli(capsys, "inspect", DIGITS)
    assert code == 0
    assert "compute: params 6.09K (6090), MACs 84.2K (84224), FLOPs 173K (173096)" in out
    assert "conv: 2      MACs  82.9K  FLOPs   167K" in out


# ---- draw ---------------------------------------------------------------------------------------

def _svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_draw_dot_needs_no_graphviz_program(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    out = tmp_path / "digits.dot"
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(out))
    assert code == 0, err
    text = out.read_text()
    assert text.startswith("digraph digits")
    assert "<B>conv</B>" in text and "filter [16, 1, 3, 3]" in text and "→ conv1 [1, 16, 8, 8]" in text
    assert "conv1_filter" not in text.replace("label = 'conv1/filter'", "")  # variables collapsed, no nodes
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(tmp_path / "digits.svg"))
    assert code == 1 and "needs Graphviz's 'dot' program" in err and "Traceback" not in err
    assert not (tmp_path / "digits.svg").exists()


def test_draw_refuses_unknown_suffix(tmp_path, capsys):
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(tmp_path / "digits.jpg"))
    assert code == 1 and ".dot, .gv, .png, .svg" in err


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed "
                               "(make test installs it where apt-get is available)")


@needs_dot
def test_draw_svg_shows_operations_attributes_shapes(tmp_path, capsys):
    out = tmp_path / "digits.svg"
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(out))
    assert code == 0, err
    texts = _svg_texts(out)
    assert texts.count("conv") == 2 and "softmax" in texts and "linear" in texts
    assert "filter [32, 16, 3, 3]" in texts and "→ conv2_pool [1, 32, 2, 2]" in texts
    assert "padding = [(1, 1), (1, 1)]" in texts
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@needs_dot
def test_draw_expand_and_fragment_clusters(tmp_path, capsys):
    out = tmp_path / "expanded.svg"
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(out), "--expand")
    assert code == 0, err
    texts = _svg_texts(out)
    assert "softmax → probabilities" in texts and "linear → logits" in texts  # compound clusters
    assert "softmax" not in texts and "exp" in texts and "matmul" in texts
    fragment = "fragment block( x: tensor<scalar>, w: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n" \
               "    c = conv(x, w);\n    y = relu(c);\n}\n"
    body = ("input = external<scalar>(shape = [1, 3, 8, 8]);\n w1 = variable<scalar>(shape = [4, 3, 3, 3], label = 'w1');\n"
            " w2 = variable<scalar>(shape = [4, 4, 3, 3], label = 'w2');\n h = block(input, w1);\n"
            " output = block(h, w2);")
    doc = _document(tmp_path, body, fragments=fragment)
    code, _, err = run_cli(capsys, "draw", doc, "-o", str(out))
    assert code == 0, err
    root = ET.parse(out).getroot()
    clusters = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cluster"]
    labels = [t.text for c in clusters for t in c.iter(f"{SVG}text") if t.text == "fragment block"]
    assert len(labels) == 2  # one cluster per invocation


@needs_dot
@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="headless Chromium not installed (apt-get install chromium)")
def test_draw_svg_renders_in_a_browser(tmp_path, capsys):
    image = pytest.importorskip("PIL.Image")
    svg = tmp_path / "digits.svg"
    assert run_cli(capsys, "draw", DIGITS, "-o", str(svg))[0] == 0
    shot = tmp_path / "shot.png"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=400,1400", svg.as_uri()],
                   capture_output=True, timeout=120, check=False)
    pixels = np.asarray(image.open(shot).convert("RGB")).astype(int)
    # the page is not blank: drawn boxes in the conv colour and dark text are there
    assert (np.abs(pixels - [0xCF, 0xE2, 0xF3]).sum(axis=2) < 12).sum() > 1000
    assert (pixels.sum(axis=2) < 150).sum() > 500


# ---- compare --------------------------------------------------------------------------------------

def test_compare_two_backends_agree(capsys):
    code, out, err = run_cli(capsys, "compare", DIGITS, "--backend", "fast", "--backend", "formal", "--tensors")
    assert code == 0, err
    assert "probabilities  [1, 10]" in out and "conv2_pool" in out
    assert "agree: 1 output and 8 intermediate tensors within atol 1e-05, rtol 0.0001" in out


def test_compare_names_first_divergence(tmp_path, capsys):
    changed = tmp_path / "changed"
    shutil.copytree(DIGITS, changed)
    graph = changed / "graph.nnef"
    graph.write_text(graph.read_text().replace("conv(conv1_pool, conv2_filter, conv2_bias", "conv(conv1_pool, conv2_filter, 0.0"))
    code, out, _ = run_cli(capsys, "compare", DIGITS, str(changed), "--tensors")
    assert code == 4
    assert "conv1_pool  [1, 16, 4, 4]" in out and "first diverging tensor: conv2 (operation 'conv' at " in out
    assert "graph.nnef:13:13" in out and "DIFFER:" in out
    # a tolerance wide enough to cover the missing bias agrees
    code, out, _ = run_cli(capsys, "compare", DIGITS, str(changed), "--atol", "100")
    assert code == 0


def test_compare_nnef_with_its_onnx_export(tmp_path, capsys):
    pytest.importorskip("onnx")
    onnx_path = tmp_path / "digits.onnx"
    assert run_cli(capsys, "convert", DIGITS, str(onnx_path))[0] == 0
    code, out, err = run_cli(capsys, "compare", DIGITS, str(onnx_path))
    assert code == 0, err
    pytest.importorskip("onnxruntime")
    code, out, err = run_cli(capsys, "compare", DIGITS, str(onnx_path), "--backend", "formal",
                             "--backend", "onnxruntime", "--seed", "3")
    assert code == 0, err
    assert "(onnxruntime)" in out and "random (seed 3)" in out


@pytest.mark.parametrize("argv, message", [
    (["--backend", "fast"], "compare one model on two backends"),
    (["--seed", "-1", "--backend", "fast", "--backend", "formal"], "--seed must be 0 or more"),
])
def test_compare_usage_errors(capsys, argv, message):
    code, _, err = run_cli(capsys, "compare", DIGITS, *argv)
    assert code == 2 and message in err


def test_difference_rules():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    assert difference("t", a, a.copy(), 0, 0).ok  # NaN in the same place agrees
    b = np.array([1.0, 2.0, 3.0], np.float32)
    d = difference("t", a, b, 1, 1)
    assert not d.ok and d.max_abs == np.inf and "first at [1]" in d.why
    d = difference("t", np.array([1.0, 2.0]), np.array([1.0, 2.002]), 1e-5, 1e-3)
    assert d.ok and d.max_abs == pytest.approx(0.002) and d.max_rel == pytest.approx(0.002 / 2.002)
    assert not difference("t", np.zeros(3), np.zeros(4), 1, 1).ok


# ---- run --fetch / --stats -------------------------------------------------------------------------

def test_run_fetch_and_stats(tmp_path, capsys):
    code, out, err = run_cli(capsys, "run", DIGITS, "--fetch", "conv1,flat", "--stats", "-o", str(tmp_path))
    assert code == 0, err
    assert "tensor conv1: scalar [1, 16, 8, 8]" in out and "tensor flat: scalar [1, 128]" in out
    saved = np.load(tmp_path / "flat.npy")
    expected = nnefx.Session(nnefx.load(DIGITS)).run(
        {"input": np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)}, fetch=["flat"])["flat"]
    np.testing.assert_array_equal(saved, expected)
    header = [line for line in out.splitlines() if line.startswith("tensor ") and "shape" in line]
    assert header and header[0].split() == ["tensor", "shape", "min", "max", "mean", "std", "NaN", "Inf"]
    row = next(line for line in out.splitlines() if line.startswith("flat  "))
    assert f"{saved.max():.6g}" in row and f"{saved.std(dtype=np.float64):.6g}" in row


def test_run_fetch_all_and_nan_counts(tmp_path, capsys):
    body = "input = external<scalar>(shape = [2, 3]);\n l = log(input);\n output = mul(l, 2.0);"
    doc = _document(tmp_path, body)
    np.save(tmp_path / "x.npy", np.array([[1, -1, 0], [2, -3, 4]], np.float32))
    code, out, err = run_cli(capsys, "run", doc, "--fetch", "*", "--stats", "-i", f"input={tmp_path / 'x.npy'}")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith(("l ", "output "))]
    stats = {r[0]: r for r in rows}
    assert stats["l"][-2:] == ["2", "1"] and stats["output"][-2:] == ["2", "1"]  # 2 NaN, 1 -inf


def test_run_fetch_unknown_tensor(capsys):
    code, _, err = run_cli(capsys, "run", DIGITS, "--fetch", "nope")
    assert code == 1 and "--fetch names 'nope'" in err and "conv1" in err


def test_tensor_stats_ignore_non_finite():
    s = tensor_stats(np.array([1.0, np.nan, np.inf, 3.0]))
    assert (s.min, s.max, s.mean, s.nan, s.inf) == (1.0, 3.0, 2.0, 1, 1)
    assert tensor_stats(np.array([True, False])).mean == 0.5


# ---- progress ------------------------------------------------------------------------------------

def test_progress_silent_when_not_a_terminal(capsys, monkeypatch):
    monkeypatch.delenv("NNEFX_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "DELAY", 0)
    code, _, err = run_cli(capsys, "run", DIGITS, "--steps", "50")
    assert code == 0 and err == ""


def test_progress_forced_and_quiet(capsys, monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setenv("NNEFX_PROGRESS", "1")
    monkeypatch.setattr(progress, "DELAY", 0)
    code, _, err = run_cli(capsys, "run", DIGITS, "--steps", "50")
    assert code == 0 and "steps:" in err and "/50 [" in err
    code, _, err = run_cli(capsys, "run", DIGITS, "--steps", "50", "--quiet")
    progress.set_quiet(False)
    assert code == 0 and err == ""


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_shown_on_a_terminal(tmp_path):
    pytest.importorskip("tqdm")
    import fcntl
    import pty
    import struct
    import termios

    script = ("import sys; from nnefx.tools import progress; progress.DELAY = 0; from nnefx import cli; "
              f"sys.exit(cli.main(['run', {DIGITS!r}, '--steps', '40'] + sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if k != "NNEFX_PROGRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])

    def on_terminal(*extra: str) -> str:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
        proc = subprocess.Popen([sys.executable, "-c", script, *extra], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=follower, env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
        os.close(leader)
        assert proc.returncode == 0
        return b"".join(chunks).decode("utf-8", "replace")

    assert "/40 [" in on_terminal()
    assert "/40 [" not in on_terminal("--quiet")


def test_recurrent_sequence_rule():
    """An IR LSTMSequence (batch 2, 5 steps, 4 features, hidden 6): 4 gates x 6 hidden per step
    and item, each a product over features + hidden."""
    model = nnefx.load(str(ROOT / "tests" / "fixtures" / "ir" / "opset" / "lstm.xml"), input_shapes={"x": (2, 5, 4)})
    cost = graph_cost(model.graph)
    (row,) = [r for r in cost.rows if r.op.op == "lstm_sequence"]
    gate_items = 2 * 5 * 24
    assert row.macs == gate_items * (4 + 6)
    assert row.flops == 2 * row.macs + 2 * gate_items + 3 * gate_items // 4
    assert cost.unknown == 0


def test_draw_without_the_graphviz_package_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    code, _, err = run_cli(capsys, "draw", DIGITS, "-o", str(tmp_path / "d.dot"))
    assert code == 1 and "pip install 'nnefx[viz]'" in err and "Traceback" not in err


def test_integer_cvm_model_counts():
    base = ROOT / "tests" / "fixtures" / "cvm" / "ex01_conv_pool_dense"
    cost = graph_cost(nnefx.load(f"{base}.json", params=f"{base}.params").graph)
    # conv 3->4 channels 3x3 over 7x7 outputs; dense 36 -> 5
    assert cost.macs == 4 * 49 * 27 + 5 * 36 and cost.unknown == 0
