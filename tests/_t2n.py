"""Export small random-initialised torch models with torch-to-nnef, offline, for the tests.

torch-to-nnef's ``TractNNEF`` target wants a tract command-line binary (it downloads one by
default, to check outputs); the tests check outputs themselves (against torch, and tract's
Python bindings where they load the file), so a stand-in that only reports the version is
enough: ``check_io=False`` never runs it.
"""

from __future__ import annotations

import logging
import os
import stat
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

TRACT_VERSION = "0.23.8"   # the newest tract torch-to-nnef 0.24.12 is tested against


def fake_tract(folder: Path) -> Path:
    path = folder / "tract"
    if not path.exists():
        path.write_text(f"#!/bin/sh\necho 'tract {TRACT_VERSION}'\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def export(model: Any, args: tuple, folder: Path, name: str, *, mode: str = "tract", archive: bool = False,
           dynamic_axes: dict[str, dict[int, str]] | None = None, input_names: list[str] | None = None,
           output_names: list[str] | None = None) -> Path:
    """Export ``model`` called on ``args`` to ``folder/name`` (a folder or a ``.nnef.tgz``)."""
    from torch_to_nnef import export_model_to_nnef
    from torch_to_nnef.inference_target import KhronosNNEF, TractNNEF

    logging.getLogger("torch_to_nnef").setLevel(logging.ERROR)
    input_names = input_names or [f"input_{i}" for i in range(len(args))]
    if mode == "tract":
        target = TractNNEF(TRACT_VERSION, check_io=False, dynamic_axes=dynamic_axes or {},
                           specific_tract_binary_path=fake_tract(folder))
    else:
        target = KhronosNNEF("1.0.5", check_io=False)
    path = folder / (name + (".nnef.tgz" if archive else ".nnef"))
    cwd = os.getcwd()
    try:
        export_model_to_nnef(model, args, path, target, input_names=input_names,
                             output_names=output_names or ["output"], log_level=logging.ERROR)
    finally:
        os.chdir(cwd)
    if archive:
        return path
    # for a ".nnef" path torch-to-nnef writes an uncompressed "NAME.nnef.tar": unpack it
    # (members at the archive root) into the folder a user would get from `tar x`
    tar_path = Path(str(path) + ".tar")
    folder_path = folder / name
    folder_path.mkdir()
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            assert member.isfile() and "/" not in member.name.strip("./"), member.name
            (folder_path / member.name).write_bytes(tar.extractfile(member).read())
    tar_path.unlink()
    return folder_path


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref| (0 when both are zero)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = np.abs(ref).max() if ref.size else 0.0
    diff = np.abs(got - ref).max() if ref.size else 0.0
    return float(diff / scale) if scale else float(diff)
