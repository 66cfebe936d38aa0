"""Make the small files the README's examples use (committed; rerun to rebuild them).

* ``net.onnx`` — a small CNN exported by ``torch.onnx.export`` with a dynamic batch
  (``dynamic_axes``), as torch users write them: input ``input`` [batch, 3, 32, 32], output
  ``logits`` [batch, 10];
* ``digit.npy`` — the first held-out image of the digits example, [1, 1, 8, 8] float32;
* ``bad.nnef`` — a final-dialect document with a type error; ``roi.nnef`` — a RoI pooling
  over an input of unknown extents (which ONNX export refuses); ``evil.xml`` — an IR file
  with a document type declaration (which the IR reader refuses).

Needs torch (``make venv``) and scikit-learn: ``.venv/bin/python examples/readme/make_files.py``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def net_onnx(path: str) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(16, 10)).eval()
    torch.onnx.export(net, torch.zeros(1, 3, 32, 32), path, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                      dynamo=False)


def digit_npy(path: str) -> None:
    sys.path.insert(0, os.path.join(HERE, "..", "digits"))
    import digits_data

    _, _, images, _ = digits_data.split()
    np.save(path, images[:1])


BAD = """version 1.0;

graph G( x ) -> ( y ) {
    x = external<scalar>(shape = [1, 4]);
    y = add(x, 1);
}
"""

ROI = """version 1.0;

graph G( x, rois, index ) -> ( y ) {
    x = external<scalar>(shape = [1, 1, 0, 4]);
    rois = external<scalar>(shape = [2, 4]);
    index = external<integer>(shape = [2]);
    y = max_roi_pool(x, rois, index, output_size = [2, 2]);
}
"""

EVIL = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY boom "boom">]>
<net name="evil" version="11"><layers/><edges/></net>
"""


if __name__ == "__main__":
    net_onnx(os.path.join(HERE, "net.onnx"))
    digit_npy(os.path.join(HERE, "digit.npy"))
    for name, text in (("bad.nnef", BAD), ("roi.nnef", ROI), ("evil.xml", EVIL)):
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
