"""Opset Proposal layers (IR v10/11) read by nnefx and checked against OpenVINO.

Proposal-1 maps onto ``ir_proposal``; Proposal-4 adds a score per proposal row, which is
``ir_proposal_scored``'s second output.  OpenVINO leaves the score rows after an image's last
proposal uninitialised and the box rows after the end marker unspecified, so only the rows up
to the end marker (the row whose image index is -1) are compared.
"""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.cli import main
from nnefx.ops import registry
from nnefx.runtime.session import Session

ov = pytest.importorskip("openvino")
o1 = pytest.importorskip("openvino.opset1")
o4 = pytest.importorskip("openvino.opset4")

RNG = np.random.default_rng(7)


def _inputs(A: int, h: int, w: int, info: list[float]) -> dict[str, np.ndarray]:
    return {"cls": RNG.uniform(0, 1, (1, 2 * A, h, w)).astype("f4"),
            "bbox": RNG.normal(0, 0.3, (1, 4 * A, h, w)).astype("f4"),
            "info": np.array(info, "f4")}


def _attrs(**kw) -> dict:
    a = {"base_size": np.uint32(16), "pre_nms_topn": np.uint32(40), "post_nms_topn": np.uint32(16),
         "nms_thresh": 0.6, "feat_stride": np.uint32(16), "min_size": np.uint32(4), "ratio": [0.5, 2.0],
         "scale": [2.0, 4.0, 8.0], "clip_before_nms": True, "clip_after_nms": False, "normalize": False,
         "box_size_scale": 1.0, "box_coordinate_scale": 1.0, "framework": ""}
    a.update(kw)
    return a


def _save(tmp_path, feeds: dict, build, name: str) -> tuple[str, dict]:
    params = [o1.parameter(list(v.shape), np.float32, name=k) for k, v in feeds.items()]
    node = build(*params)
    model = ov.Model(node.outputs(), params, name)
    path = str(tmp_path / f"{name}.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    cm = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = cm(feeds)
    return path, [np.asarray(res[o]) for o in cm.outputs]


def _rows(rois: np.ndarray) -> int:
    end = rois[:, 0] == -1
    return int(np.argmax(end)) if end.any() else rois.shape[0]


@pytest.mark.parametrize("kw", [{}, {"clip_after_nms": True, "normalize": True}, {"clip_before_nms": False},
                                {"box_size_scale": 2.0, "box_coordinate_scale": 0.5}])
def test_proposal_opset1_matches_openvino(tmp_path, kw):
    feeds = _inputs(6, 4, 5, [64, 80, 1.0])
    path, (ref,) = _save(tmp_path, feeds, lambda a, b, c: o1.proposal(a, b, c, _attrs(**kw)), "p1")
    model = nnefx.load(path)
    assert [op.op for op in model.graph.operations if op.op.startswith("ir_")] == ["ir_proposal"]
    for backend in ("fast", "formal"):
        (got,) = Session(model, backend).run(feeds).values()
        n = _rows(ref)
        assert n > 0
        np.testing.assert_allclose(got[:n + 1], ref[:n + 1], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("info", [[64, 80, 1.0], [64, 80, 1.5, 0.5]])
def test_proposal_opset4_scores_match_openvino(tmp_path, info):
    feeds = _inputs(6, 4, 5, info)
    path, (ref_rois, ref_scores) = _save(tmp_path, feeds, lambda a, b, c: o4.proposal(a, b, c, _attrs()), "p4")
    model = nnefx.load(path)
    for backend in ("fast", "formal"):
        rois, scores = Session(model, backend).run(feeds).values()
        n = _rows(ref_rois)
        assert n > 0
        np.testing.assert_allclose(rois[:n + 1], ref_rois[:n + 1], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(scores[:n], ref_scores[:n], rtol=1e-5)
        assert np.all(scores[n:] == 0)            # nnefx defines the rows OpenVINO leaves unset
        assert np.all(np.diff(scores[:n]) <= 0)   # sorted by score, as the layer promises


def test_proposal_opset4_round_trips_through_the_ir_writer(tmp_path):
    feeds = _inputs(6, 3, 4, [48, 64, 1.0])
    path, (ref_rois, ref_scores) = _save(tmp_path, feeds, lambda a, b, c: o4.proposal(a, b, c, _attrs()), "p4")
    out = str(tmp_path / "again.xml")
    assert main(["convert", path, out]) == 0
    cm = ov.Core().compile_model(out, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = [np.asarray(v) for v in cm(feeds).values()]
    n = _rows(ref_rois)
    np.testing.assert_allclose(res[0][:n + 1], ref_rois[:n + 1], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(res[1][:n], ref_scores[:n], rtol=1e-5)


def test_proposal_scored_kernels_agree_with_ir_proposal():
    feeds = _inputs(4, 5, 3, [[40, 50, 1.0]])
    feeds["cls"] = np.concatenate([feeds["cls"], feeds["cls"][:, ::-1]])
    feeds["bbox"] = np.concatenate([feeds["bbox"], feeds["bbox"]])
    feeds["info"] = np.array([[40, 50, 1.0], [30, 60, 1.5]], "f4")
    kw = dict(base_size=8, pre_nms_topn=12, post_nms_topn=6, nms_thresh=0.5, feat_stride=8, min_size=2,
              ratio=[0.5, 2.0], scale=[1.0, 2.0])
    args = (feeds["cls"], feeds["bbox"], feeds["info"])
    scored, plain = registry.get("ir_proposal_scored"), registry.get("ir_proposal")
    rf, sf = scored.kernel("formal")(*args, **kw)
    rq, sq = scored.kernel("fast")(*args, **kw)
    np.testing.assert_allclose(rq, rf, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sq, sf, rtol=1e-6)
    np.testing.assert_array_equal(rf, plain.kernel("formal")(*args, **kw))
    assert scored.shape_rule(*(a.shape for a in args), **kw) == ((12, 5), (12,))
    for img in range(2):
        block = rf[img * 6:(img + 1) * 6]
        live = block[:, 0] == img
        assert np.all(sf[img * 6:(img + 1) * 6][~live] == 0) and np.all(sf[img * 6:(img + 1) * 6][live] > 0)
