"""``nnefx run`` on in-memory models built from registry operations."""

from __future__ import annotations

import numpy as np
import pytest

from nnefx import Model, NNEFXError
from nnefx.cli import build_parser
from nnefx.runtime.cli import describe_array, load_npy, parse_input_option, run_command, safe_file_name
from runtime_graphs import Builder


def model() -> Model:
    """y = relu(x * 2 + bias); acc' = acc + y (a recurrent accumulator)."""
    b = Builder("cli")
    x = b.external("x", [1, 3])
    bias = b.variable("bias", np.array([[-1.0, 0.0, 1.0]], np.float32), label="layer/bias")
    acc = b.variable("acc", np.zeros((1, 3), np.float32), label="acc")
    t = b.op("mul", {"x": x, "y": 2.0}, "t", [1, 3], result="z")
    u = b.op("add", {"x": t, "y": bias}, "u", [1, 3], result="z")
    y = b.op("relu", {"x": u}, "y", [1, 3])
    s = b.op("add", {"x": acc, "y": y}, "s", [1, 3], result="z")
    b.update(acc, s, "total")
    return Model(b.output("y", "total"), source="cli.nnef")


def run(argv: list[str], m: Model | None = None) -> int:
    args = build_parser().parse_args(["run", "cli.nnef", *argv])
    return run_command(args, m or model())


def test_run_with_given_input_writes_npy_outputs(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.array([[1.0, -3.0, 0.5]], np.float32))
    out = tmp_path / "out"
    assert run(["--input", f"x={tmp_path / 'x.npy'}", "--output", str(out), "--steps", "3"]) == 0
    text = capsys.readouterr().out
    assert f"input  x: scalar [1, 3] <- {tmp_path / 'x.npy'}" in text
    assert "output y: scalar [1, 3]  values [1., 0., 2.]" in text
    assert "output total: scalar [1, 3]  values [3., 0., 6.]" in text  # three steps accumulated
    assert "ran 3 steps" in text
    np.testing.assert_array_equal(np.load(out / "y.npy"), [[1.0, 0.0, 2.0]])
    np.testing.assert_array_equal(np.load(out / "total.npy"), [[3.0, 0.0, 6.0]])
    assert sorted(p.name for p in out.iterdir()) == ["total.npy", "y.npy"]  # no temp files left


@pytest.mark.parametrize("backend", ["fast", "formal"])
def test_random_inputs_are_seeded_and_profile_is_printed(tmp_path, capsys, backend):
    outs = []
    for seed in (5, 5, 6):
        d = tmp_path / f"{backend}{seed}{len(outs)}"
        assert run(["--seed", str(seed), "--output", str(d), "--backend", backend, "--profile"]) == 0
        outs.append(np.load(d / "y.npy"))
    text = capsys.readouterr().out
    assert "input  x: scalar [1, 3] <- random (seed 5)" in text
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2])
    lines = text.splitlines()
    header = max(i for i, line in enumerate(lines) if line.startswith("operation"))
    end = lines.index("", header) if "" in lines[header:] else len(lines)
    kinds = {line.split()[0] for line in lines[header + 1:end] if not line.startswith("(")}
    assert kinds == {"add", "mul", "relu"}


def test_run_errors(tmp_path, capsys):
    for bad in (["--input", "x"], ["--steps", "0"], ["--seed", "-1"], ["--steps", "two"]):
        with pytest.raises(SystemExit) as info:  # malformed options: usage errors, found while parsing
            run(bad)
        assert info.value.code == 2
    assert "argument --steps: expects a whole number, got 'two'" in capsys.readouterr().err
    with pytest.raises(NNEFXError, match=r"--input names 'z', which is not an input of the model \(inputs: x\)"):
        run(["--input", f"z={tmp_path / 'z.npy'}"])
    with pytest.raises(NNEFXError) as info:
        run(["--input", f"x={tmp_path / 'missing.npy'}"])
    assert str(info.value) == f"{tmp_path / 'missing.npy'}: error: no such file"
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(NNEFXError, match="not a readable .npy array"):
        run(["--input", f"x={tmp_path / 'bad.npy'}"])
    (tmp_path / "text.npy").write_text("1 2 3\n")
    with pytest.raises(NNEFXError, match=r"not a \.npy file \(it starts with b'1 2 3\\n'.*numpy.save") as info:
        run(["--input", f"x={tmp_path / 'text.npy'}"])
    assert "pickle" not in str(info.value)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(NNEFXError, match="holds Python objects .* never unpickles"):
        load_npy(str(tmp_path / "obj.npy"))  # never unpickled
    np.savez(tmp_path / "two.npz", a=np.zeros(3))
    with pytest.raises(NNEFXError, match="an .npz archive"):
        load_npy(str(tmp_path / "two.npz"))
    np.save(tmp_path / "rank.npy", np.zeros((3,), np.float32))
    with pytest.raises(NNEFXError, match=r"input 'x' must have shape \[1, 3\], got \[3\]"):
        run(["--input", f"x={tmp_path / 'rank.npy'}"])
    np.save(tmp_path / "wrong.npy", np.zeros((4, 3), np.float32))  # another batch size: say how to run it
    with pytest.raises(NNEFXError, match=r"has shape \[4, 3\] but the model takes \[1, 3\]; .* --shape x=4,3"):
        run(["--input", f"x={tmp_path / 'wrong.npy'}"])
    with pytest.raises(NNEFXError, match="--quantize: no activation of this model has a graph.quant entry"):
        run(["--quantize"])
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(NNEFXError) as info:
        run(["--output", str(tmp_path / "file")])
    assert str(info.value).startswith(f"{tmp_path / 'file'}: error: cannot create the output folder")


def test_random_inputs_are_bounded():
    b = Builder("huge")
    x = b.external("x", [1 << 20, 1 << 20])
    b.op("neg", {"x": x}, "y", [1 << 20, 1 << 20])
    with pytest.raises(NNEFXError, match="too large for random data"):
        run([], Model(b.output("y")))


def test_helpers():
    assert parse_input_option("a=b=c.npy") == ("a", "b=c.npy")
    assert safe_file_name("conv1/out:0") == "conv1_out_0"
    assert safe_file_name("../x") == "_x"
    assert describe_array(np.arange(10, dtype=np.float32)) == "min 0  max 9  mean 4.5"
    assert describe_array(np.array([np.nan] * 8, np.float32)) == "no finite values  (8 NaN/Inf)"
    assert describe_array(np.ones(10, bool)) == "10 of 10 true"


def test_quantize_flag_applies_activation_hints(capsys, tmp_path):
    m = model()
    m.graph.tensors["y"].quant = {"op_name": "zero_point_linear_quantize", "zero_point": 0, "scale": 1.0,
                                  "bits": 8, "signed": True, "symmetric": False}
    np.save(tmp_path / "x.npy", np.array([[0.3, 0.2, 0.35]], np.float32))
    assert run(["-i", f"x={tmp_path / 'x.npy'}"], m) == 0
    assert "output y: scalar [1, 3]  values [0. , 0.4, 1.7]" in capsys.readouterr().out
    assert run(["-i", f"x={tmp_path / 'x.npy'}", "--quantize"], m) == 0
    text = capsys.readouterr().out
    assert "output y: scalar [1, 3]  values [0., 0., 2.]" in text and "simulated quantization" in text


def test_nnefx_run_steps_a_saved_recurrent_model(tmp_path, capsys):
    pytest.importorskip("nnefx.io.builder")
    import nnefx
    from nnefx.cli import main
    from nnefx.io.builder import GraphBuilder

    b = GraphBuilder("counter")
    x = b.external("x", shape=(1, 3))
    acc = b.variable("state/acc", np.full((1, 3), 10.0, np.float32))
    b.output(b.op("update", acc, b.op("add", acc, x)), name="total")
    nnefx.save(b.build(), tmp_path / "counter")
    np.save(tmp_path / "x.npy", np.array([[1.0, 2.0, 3.0]], np.float32))
    assert main(["run", str(tmp_path / "counter"), "-i", f"x={tmp_path / 'x.npy'}", "--steps", "4",
                 "-o", str(tmp_path / "out")]) == 0
    assert "values [14., 18., 22.]" in capsys.readouterr().out
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "total.npy"), [[14.0, 18.0, 22.0]])
    # the model on disk is unchanged by running it
    assert nnefx.load(tmp_path / "counter").weights["state/acc"].tolist() == [[10.0, 10.0, 10.0]]
