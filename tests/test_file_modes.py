"""Files nnefx writes get the permissions ``open()``/``mkdir`` would give under the umask.

Writers go through a temporary beside the target (``tempfile``: 0600 files, 0700 folders)
and rename it into place; the target must still end up with the umask's mode, or, replaced
in place, with the mode it had.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nnefx.cli import main

ROOT = Path(__file__).resolve().parent.parent
DIGITS = str(ROOT / "examples" / "digits" / "model")
CVM = ROOT / "tests" / "fixtures" / "cvm" / "ex01_conv_pool_dense"


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_writer_gives_the_umask_mode(tmp_path, umask):
    file_mode, dir_mode = 0o666 & ~umask, 0o777 & ~umask
    outputs = ["folder", "m.nnef", "m.tgz", "m.tar", "m.xml", "m.onnx"]
    for name in outputs:
        assert main(["convert", DIGITS, str(tmp_path / name)]) == 0
    assert main(["convert", str(CVM) + ".json", str(tmp_path / "cvm_nnef"), "--params", str(CVM) + ".params"]) == 0
    assert main(["convert", str(tmp_path / "cvm_nnef"), str(tmp_path / "c.json")]) == 0
    assert main(["run", DIGITS, "-o", str(tmp_path / "outs")]) == 0
    files = [tmp_path / n for n in ("m.nnef", "m.tgz", "m.tar", "m.xml", "m.bin", "m.onnx", "c.json", "c.params",
                                    "outs/probabilities.npy")]
    files += [p for p in (tmp_path / "folder").rglob("*") if p.is_file()]
    folders = [tmp_path / "folder", tmp_path / "cvm_nnef", tmp_path / "outs"]
    folders += [p for p in (tmp_path / "folder").rglob("*") if p.is_dir()]
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in files if mode(p) != file_mode} == {}
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in folders if mode(p) != dir_mode} == {}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_in_place_conversion_keeps_the_original_mode(tmp_path):
    folder, archive = tmp_path / "folder", tmp_path / "m.tgz"
    assert main(["convert", DIGITS, str(folder)]) == 0 and main(["convert", DIGITS, str(archive)]) == 0
    folder.chmod(0o750)
    archive.chmod(0o640)
    assert main(["convert", str(folder), str(folder)]) == 0
    assert main(["convert", str(archive), str(archive)]) == 0
    assert mode(folder) == 0o750 and mode(archive) == 0o640
    assert main(["check", str(folder)]) == 0 and main(["check", str(archive)]) == 0
