"""`nnefx inspect` / `nnefx convert` on model containers."""

from __future__ import annotations

import os
import tarfile

import numpy as np

import nnefx
from nnefx.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io")
SMALL = os.path.join(FIXTURES, "small")
QUANTIZED = os.path.join(FIXTURES, "quantized")


def test_inspect_lists_variables_with_storage_and_totals(capsys):
    assert main(["inspect", SMALL]) == 0
    out = capsys.readouterr().out
    assert "variables: 3 (12 items, 39 bytes)" in out
    assert "  layer/w: scalar (float32) [2, 3] 24 bytes" in out
    assert "  mask: logical (bool) [1, 3] 3 bytes" in out
    assert main(["inspect", QUANTIZED]) == 0
    assert "w: scalar (int8 codes, zero_point_linear_quantize) [4, 2] 8 bytes" in capsys.readouterr().out


def test_inspect_of_a_lone_document_says_no_data(capsys):
    assert main(["inspect", os.path.join(SMALL, "graph.nnef")]) == 0
    assert "layer/w: scalar (no data) [2, 3] 0 bytes" in capsys.readouterr().out


def test_convert_between_folder_archive_and_document(tmp_path, capsys):
    tgz, tar, folder, doc = (str(tmp_path / n) for n in ("m.tgz", "m.tar", "back", "one.nnef"))
    assert main(["convert", SMALL, tgz]) == 0
    assert main(["convert", tgz, tar]) == 0
    assert main(["convert", tar, folder]) == 0
    assert main(["convert", folder, doc]) == 0
    with tarfile.open(tgz) as t:
        assert "layer/w.dat" in t.getnames()
    for a, b in (("layer/w.dat", "layer/w.dat"), ("mask.dat", "mask.dat")):
        assert open(os.path.join(SMALL, a), "rb").read() == open(os.path.join(folder, b), "rb").read()
    assert nnefx.load(doc).graph.tensors["w"].data is None
    np.testing.assert_array_equal(nnefx.load(tar).weights["layer/b"], nnefx.load(SMALL).weights["layer/b"])
    assert sorted(os.listdir(tmp_path)) == ["back", "m.tar", "m.tgz", "one.nnef"]


def test_convert_to_a_lone_document_says_the_weights_are_left_out(tmp_path, capsys):
    """A lone .nnef holds structure only: the command says what it left out and how to keep it."""
    doc = str(tmp_path / "one.nnef")
    assert main(["convert", SMALL, doc]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {doc} (structure only: a lone document holds no tensor data, so the data of 3 "
                          "variables (39 bytes) is not in it")
    assert f"a folder ({tmp_path / 'one'}) or an archive ({tmp_path / 'one'}.tgz)" in out
    assert main(["convert", doc, str(tmp_path / "two.nnef")]) == 0   # nothing to leave out: nothing said
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'two.nnef'}"


def test_broken_tensor_file_exits_1_with_location(tmp_path, capsys):
    import shutil

    model = tmp_path / "m"
    shutil.copytree(SMALL, model)
    data = bytearray((model / "mask.dat").read_bytes())
    data[48] = 9
    (model / "mask.dat").write_bytes(bytes(data))
    assert main(["check", str(model)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{model / 'mask.dat'}: [item_type]: error: item_type is 9")
