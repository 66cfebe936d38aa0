"""torch → ONNX → NNEF through the official ``nnef-tools`` converter, at test time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch


def export_onnx(net, x, path: Path, opset: int = 14) -> Path:
    torch.onnx.export(net, x, str(path), opset_version=opset, dynamo=False,
                      input_names=["input"], output_names=["output"])
    return path


def onnx_to_nnef(onnx_path: Path, out_dir: Path) -> Path:
    """Run ``python -m nnef_tools.convert``; returns the NNEF model folder."""
    result = subprocess.run(
        [sys.executable, "-m", "nnef_tools.convert", "--input-model", str(onnx_path), "--input-format", "onnx",
         "--output-format", "nnef", "--output-model", str(out_dir), "--keep-io-names"],
        capture_output=True, text=True, timeout=300)
    if result.returncode != 0 or not (out_dir / "graph.nnef").exists():
        raise RuntimeError(f"nnef-tools conversion failed:\n{result.stdout}\n{result.stderr}")
    return out_dir
