"""Formal vs fast kernels of the IR extension operations at realistic sizes (SSD300 / Faster
R-CNN / YOLOv2 heads).  Prints one Markdown table row per operation: best-of-N wall time of
each backend and the speed-up.  Usage: ``python benchmarks/ir_legacy_ops.py [--repeat 3]``."""

from __future__ import annotations

import argparse
import time

import numpy as np

from nnefx.ops import registry


def cases(rng):
    P, C = 8732, 21                           # SSD300: 8732 priors, 21 classes
    xy = rng.uniform(0, 0.8, (P, 2))
    priors = np.concatenate([xy, xy + rng.uniform(0.02, 0.2, (P, 2))], 1).reshape(-1)
    prior = np.stack([priors, np.tile([0.1, 0.1, 0.2, 0.2], P)])[None].astype("f4")
    conf = rng.dirichlet(np.ones(C), P).reshape(1, -1).astype("f4")
    yield ("ir_detection_output", "SSD300: 8732 priors x 21 classes, top_k 400, keep 200",
           (rng.normal(0, 0.3, (1, P * 4)).astype("f4"), conf, prior),
           dict(num_classes=C, top_k=400, keep_top_k=200, code_type="CENTER_SIZE", nms_threshold=0.45,
                confidence_threshold=0.01))
    yield ("ir_prior_box", "38x38 grid, 4 priors per cell",
           (np.zeros((1, 512, 38, 38), "f4"), np.zeros((1, 3, 300, 300), "f4")),
           dict(min_size=[30.0], max_size=[60.0], aspect_ratio=[2.0], flip=True, clip=False, step=8.0,
                variance=[0.1, 0.1, 0.2, 0.2]))
    A = 12
    yield ("ir_proposal", "RPN: 12 anchors on 38x50, pre 6000 / post 300",
           (rng.uniform(0, 1, (1, 2 * A, 38, 50)).astype("f4"), rng.normal(0, 0.2, (1, 4 * A, 38, 50)).astype("f4"),
            np.array([[600, 800, 1.0]], "f4")),
           dict(base_size=16, pre_nms_topn=6000, post_nms_topn=300, nms_thresh=0.7, feat_stride=16, min_size=16,
                ratio=[0.5, 1.0, 2.0], scale=[8.0, 16.0, 32.0, 64.0]))
    rois = np.concatenate([np.zeros((300, 1)), rng.uniform(0, 400, (300, 2)), rng.uniform(400, 799, (300, 2))], 1)
    yield ("ir_roi_pooling", "300 RoIs on 512x38x50, 7x7",
           (rng.normal(size=(1, 512, 38, 50)).astype("f4"), rois.astype("f4")),
           dict(pooled_h=7, pooled_w=7, spatial_scale=1 / 16))
    yield ("ir_region_yolo", "YOLOv2 head 425x13x13, softmax",
           (rng.normal(size=(1, 425, 13, 13)).astype("f4"),), dict(coords=4, classes=80, num=5, do_softmax=True))
    yield ("ir_reorg_yolo", "64x26x26, stride 2", (rng.normal(size=(1, 64, 26, 26)).astype("f4"),), dict(stride=2))


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| operation | case | formal | fast | speed-up |")
    print("|---|---|---|---|---|")
    for name, what, inputs, attrs in cases(rng):
        op = registry.get(name)
        tf = best(lambda op=op, i=inputs, a=attrs: op.kernel("formal")(*i, **a), args.repeat)
        tq = best(lambda op=op, i=inputs, a=attrs: op.kernel("fast")(*i, **a), args.repeat)
        a = op.kernel("formal")(*inputs, **attrs)
        b = op.kernel("fast")(*inputs, **attrs)
        assert np.allclose(a, b, rtol=1e-4, atol=1e-4), name
        print(f"| `{name}` | {what} | {tf * 1e3:.1f} ms | {tq * 1e3:.1f} ms | {tf / tq:.0f}x |")


if __name__ == "__main__":
    main()
