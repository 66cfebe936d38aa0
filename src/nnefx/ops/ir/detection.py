"""Object-detection layers of the OpenVINO IR layer catalog ("Intermediate Representation Notation Reference Catalog"): PriorBox, PriorBoxClustered,
DetectionOutput, Proposal, SimplerNMS, RegionYolo, ReorgYolo.

None of these has an NNEF counterpart: they are box generators and greedy post-processing
steps with data-dependent control flow, so each is one extension operation.  Where the
catalog text is terse or has a typo the public documentation of the same system (the legacy
IR layer reference) fills the gap; each such place is noted next to the code.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import float_type
from ..registry import define
from ._common import nms_fast, nms_formal, require

# ---------------------------------------------------------------------------------------------
# PriorBox
# ---------------------------------------------------------------------------------------------

prior_box = define(
    "ir_prior_box", "ir.detection", """
fragment ir_prior_box( input: tensor<scalar>, image: tensor<scalar>, min_size: scalar[],
    max_size: scalar[] = [], aspect_ratio: scalar[] = [], flip: logical = false,
    clip: logical = false, step: scalar = 0.0, offset: scalar = 0.5, variance: scalar[] = [],
    scale_all_sizes: logical = true ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="SSD prior boxes for every cell of `input`'s H x W grid, normalised by `image`'s size; "
        "output [1, 2, 4*H*W*P]: channel 0 boxes, channel 1 variances.")


def _aspect_ratios(aspect_ratio: list, flip: bool) -> list[float]:
    ratios = [1.0]
    for ar in aspect_ratio:
        if any(abs(float(ar) - r) < 1e-6 for r in ratios):
            continue
        ratios.append(float(ar))
        if flip:
            ratios.append(1.0 / float(ar))
    return ratios


def _check_prior_box(min_size: list, max_size: list, aspect_ratio: list, variance: list,
                     scale_all_sizes: bool) -> None:
    op = "ir_prior_box"
    require(len(min_size) > 0, op, "'min_size' must not be empty")
    require(all(s > 0 for s in min_size), op, f"'min_size' items must be > 0, got {list(min_size)}")
    require(len(max_size) <= len(min_size), op, "'max_size' must not be longer than 'min_size'")
    require(all(m > s for m, s in zip(max_size, min_size, strict=False)), op, "each 'max_size' must exceed its 'min_size'")
    require(all(a > 0 for a in aspect_ratio), op, f"'aspect_ratio' items must be > 0, got {list(aspect_ratio)}")
    require(len(variance) in (0, 1, 4), op, f"'variance' must have 0, 1 or 4 items, got {len(variance)}")
    require(scale_all_sizes, op, "scale_all_sizes = false is not supported")


def _num_priors(min_size: list, max_size: list, aspect_ratio: list, flip: bool) -> int:
    return len(_aspect_ratios(aspect_ratio, flip)) * len(min_size) + len(max_size)


@prior_box.shape
def _prior_box_shape(input, image, *, min_size, max_size=(), aspect_ratio=(), flip=False, clip=False,
                     step=0.0, offset=0.5, variance=(), scale_all_sizes=True):
    _check_prior_box(min_size, max_size, aspect_ratio, variance, scale_all_sizes)
    require(len(input) >= 4 and len(image) >= 4, "ir_prior_box", "inputs must be 4-D (N, C, H, W)")
    h, w = input[2], input[3]
    if h is None or w is None:
        return ((1, 2, None),)
    return ((1, 2, 4 * h * w * _num_priors(min_size, max_size, aspect_ratio, flip)),)


def _variances(variance: list) -> list[float]:
    if len(variance) == 0:
        return [0.1] * 4          # the legacy layer's default variance
    if len(variance) == 1:
        return [float(variance[0])] * 4
    return [float(v) for v in variance]


@prior_box.formal
def _prior_box_formal(input, image, *, min_size, max_size=(), aspect_ratio=(), flip=False, clip=False,
                      step=0.0, offset=0.5, variance=(), scale_all_sizes=True):
    _check_prior_box(min_size, max_size, aspect_ratio, variance, scale_all_sizes)
    H, W = input.shape[2], input.shape[3]
    IH, IW = image.shape[2], image.shape[3]
    ratios = _aspect_ratios(aspect_ratio, flip)
    # Catalog: "if step equals 0: center = (w + 0.5)", then divides by the *image* size; the
    # evident intent (and the documented implementation) measures the grid in image pixels,
    # i.e. a step of IW / W resp. IH / H.  The catalog's "(center - s)/2 / W" is a typo for
    # "(center - s/2) / W".
    step_w, step_h = (float(step), float(step)) if step > 0 else (IW / W, IH / H)
    off = float(offset) if step > 0 else 0.5
    boxes = []
    for h in range(H):
        for w in range(W):
            cx, cy = (w + off) * step_w, (h + off) * step_h
            for s, ms in enumerate(min_size):
                sizes = [(float(ms), float(ms))]
                if s < len(max_size):
                    side = math.sqrt(float(ms) * float(max_size[s]))
                    sizes.append((side, side))
                for ar in ratios:
                    if abs(ar - 1.0) < 1e-6:
                        continue
                    sizes.append((ms * math.sqrt(ar), ms / math.sqrt(ar)))
                for bw, bh in sizes:
                    box = [(cx - bw / 2) / IW, (cy - bh / 2) / IH, (cx + bw / 2) / IW, (cy + bh / 2) / IH]
                    if clip:
                        box = [min(max(c, 0.0), 1.0) for c in box]
                    boxes.extend(box)
    var = _variances(variance)
    out = np.zeros((1, 2, len(boxes)), dtype=float_type())
    out[0, 0] = boxes
    for i in range(len(boxes)):
        out[0, 1, i] = var[i % 4]
    return out


@prior_box.fast
def _prior_box_fast(input, image, *, min_size, max_size=(), aspect_ratio=(), flip=False, clip=False,
                    step=0.0, offset=0.5, variance=(), scale_all_sizes=True):
    _check_prior_box(min_size, max_size, aspect_ratio, variance, scale_all_sizes)
    H, W = input.shape[2], input.shape[3]
    IH, IW = image.shape[2], image.shape[3]
    ratios = _aspect_ratios(aspect_ratio, flip)
    step_w, step_h = (float(step), float(step)) if step > 0 else (IW / W, IH / H)
    off = float(offset) if step > 0 else 0.5
    sizes = []
    for s, ms in enumerate(min_size):
        sizes.append((float(ms), float(ms)))
        if s < len(max_size):
            side = math.sqrt(float(ms) * float(max_size[s]))
            sizes.append((side, side))
        sizes.extend((ms * math.sqrt(ar), ms / math.sqrt(ar)) for ar in ratios if abs(ar - 1.0) >= 1e-6)
    sz = np.asarray(sizes, dtype=np.float64)                        # (P, 2)
    cy, cx = np.meshgrid((np.arange(H) + off) * step_h, (np.arange(W) + off) * step_w, indexing="ij")
    cx, cy = cx.reshape(-1, 1), cy.reshape(-1, 1)
    boxes = np.stack([(cx - sz[:, 0] / 2) / IW, (cy - sz[:, 1] / 2) / IH,
                      (cx + sz[:, 0] / 2) / IW, (cy + sz[:, 1] / 2) / IH], axis=-1).reshape(-1)
    if clip:
        boxes = np.clip(boxes, 0.0, 1.0)
    var = np.tile(np.asarray(_variances(variance)), boxes.size // 4)
    return np.stack([boxes, var]).reshape(1, 2, -1).astype(float_type())


# ---------------------------------------------------------------------------------------------
# PriorBoxClustered
# ---------------------------------------------------------------------------------------------

prior_box_clustered = define(
    "ir_prior_box_clustered", "ir.detection", """
fragment ir_prior_box_clustered( input: tensor<scalar>, image: tensor<scalar>, width: scalar[],
    height: scalar[], clip: logical = false, step: scalar = 0.0, step_w: scalar = 0.0,
    step_h: scalar = 0.0, offset: scalar = 0.5, variance: scalar[] = [], img_w: integer = 0,
    img_h: integer = 0 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Prior boxes of explicit (width, height) pairs per grid cell; output [1, 2, 4*H*W*P].")


def _check_pbc(width, height, variance):
    op = "ir_prior_box_clustered"
    require(len(width) == len(height) and len(width) > 0, op,
            f"'width' and 'height' must be non-empty and equally long, got {len(width)} and {len(height)}")
    require(len(variance) in (0, 1, 4), op, f"'variance' must have 0, 1 or 4 items, got {len(variance)}")


@prior_box_clustered.shape
def _pbc_shape(input, image, *, width, height, variance=(), **_):
    _check_pbc(width, height, variance)
    h, w = input[2], input[3]
    return ((1, 2, None if h is None or w is None else 4 * h * w * len(width)),)


def _pbc_geometry(input, image, step, step_w, step_h, img_w, img_h):
    H, W = input.shape[2], input.shape[3]
    IH = img_h if img_h > 0 else image.shape[2]
    IW = img_w if img_w > 0 else image.shape[3]
    sw = step_w if step_w > 0 else (step if step > 0 else IW / W)
    sh = step_h if step_h > 0 else (step if step > 0 else IH / H)
    return H, W, IH, IW, float(sw), float(sh)


@prior_box_clustered.formal
def _pbc_formal(input, image, *, width, height, clip=False, step=0.0, step_w=0.0, step_h=0.0, offset=0.5,
                variance=(), img_w=0, img_h=0):
    _check_pbc(width, height, variance)
    H, W, IH, IW, sw, sh = _pbc_geometry(input, image, step, step_w, step_h, img_w, img_h)
    boxes = []
    for h in range(H):
        for w in range(W):
            cx, cy = (w + offset) * sw, (h + offset) * sh
            for bw, bh in zip(width, height, strict=False):
                # The catalog writes "center - width/2" for xmax and ymax too: a typo, the
                # maxima are "center + size/2".
                box = [(cx - bw / 2) / IW, (cy - bh / 2) / IH, (cx + bw / 2) / IW, (cy + bh / 2) / IH]
                if clip:
                    box = [min(max(c, 0.0), 1.0) for c in box]
                boxes.extend(box)
    var = _variances(variance)
    out = np.zeros((1, 2, len(boxes)), dtype=float_type())
    out[0, 0] = boxes
    for i in range(len(boxes)):
        out[0, 1, i] = var[i % 4]
    return out


@prior_box_clustered.fast
def _pbc_fast(input, image, *, width, height, clip=False, step=0.0, step_w=0.0, step_h=0.0, offset=0.5,
              variance=(), img_w=0, img_h=0):
    _check_pbc(width, height, variance)
    H, W, IH, IW, sw, sh = _pbc_geometry(input, image, step, step_w, step_h, img_w, img_h)
    bw, bh = np.asarray(width, dtype=np.float64), np.asarray(height, dtype=np.float64)
    cy, cx = np.meshgrid((np.arange(H) + offset) * sh, (np.arange(W) + offset) * sw, indexing="ij")
    cx, cy = cx.reshape(-1, 1), cy.reshape(-1, 1)
    boxes = np.stack([(cx - bw / 2) / IW, (cy - bh / 2) / IH, (cx + bw / 2) / IW, (cy + bh / 2) / IH],
                     axis=-1).reshape(-1)
    if clip:
        boxes = np.clip(boxes, 0.0, 1.0)
    var = np.tile(np.asarray(_variances(variance)), boxes.size // 4)
    return np.stack([boxes, var]).reshape(1, 2, -1).astype(float_type())


# ---------------------------------------------------------------------------------------------
# DetectionOutput
# ---------------------------------------------------------------------------------------------

detection_output = define(
    "ir_detection_output", "ir.detection", """
fragment ir_detection_output( loc: tensor<scalar>, conf: tensor<scalar>, prior: tensor<scalar>,
    num_classes: integer, background_label_id: integer = 0, top_k: integer = -1,
    keep_top_k: integer = -1, code_type: string = 'CORNER', share_location: logical = true,
    nms_threshold: scalar, confidence_threshold: scalar = 0.0,
    variance_encoded_in_target: logical = false, clip_before_nms: logical = false,
    clip_after_nms: logical = false ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="SSD post-processing: decode boxes against priors, per-class greedy NMS, keep the best; "
        "output [1, 1, R, 7] rows [image, label, score, x1, y1, x2, y2], the row after the last "
        "detection has image = -1.")

CODE_TYPES = ("CORNER", "CENTER_SIZE", "CORNER_SIZE")


def _do_rows(loc_shape, conf_shape, num_classes, top_k, keep_top_k, share_location):
    n = loc_shape[0]
    num_priors = None if conf_shape[1] is None else conf_shape[1] // num_classes
    if n is None:
        return None
    if keep_top_k > 0:
        return n * keep_top_k
    if top_k > 0:
        return n * top_k * num_classes
    return None if num_priors is None else n * num_priors * num_classes


def _check_do(loc_shape, conf_shape, prior_shape, num_classes, code_type, nms_threshold, share_location,
              background_label_id, variance_encoded_in_target):
    op = "ir_detection_output"
    require(num_classes > 0, op, f"'num_classes' must be > 0, got {num_classes}")
    require(code_type in CODE_TYPES, op, f"'code_type' must be one of {', '.join(CODE_TYPES)}, got '{code_type}'")
    require(0.0 <= nms_threshold <= 1.0, op, f"'nms_threshold' must lie in [0, 1], got {nms_threshold}")
    require(-1 <= background_label_id < num_classes, op,
            f"'background_label_id' must lie in [-1, num_classes), got {background_label_id}")
    require(len(loc_shape) >= 2 and len(conf_shape) >= 2 and len(prior_shape) == 3, op,
            "expects loc [N, P*L*4], conf [N, P*classes] and prior [1|N, 1|2, P*4]")
    if conf_shape[1] is not None:
        require(conf_shape[1] % num_classes == 0, op, "conf's second extent must be a multiple of num_classes")
        p = conf_shape[1] // num_classes
        loc_classes = 1 if share_location else num_classes
        if loc_shape[1] is not None:
            require(loc_shape[1] == p * loc_classes * 4, op,
                    f"loc's second extent must be {p * loc_classes * 4}, got {loc_shape[1]}")
        if prior_shape[2] is not None:
            require(prior_shape[2] == p * 4, op, f"prior's last extent must be {p * 4}, got {prior_shape[2]}")
    require(prior_shape[1] in (None, 1, 2), op, "prior's second extent must be 1 or 2")
    require(prior_shape[1] != 1 or variance_encoded_in_target, op,
            "prior without variances needs variance_encoded_in_target = true")


@detection_output.shape
def _do_shape(loc, conf, prior, *, num_classes, background_label_id=0, top_k=-1, keep_top_k=-1,
              code_type="CORNER", share_location=True, nms_threshold, variance_encoded_in_target=False,
              **_):
    _check_do(loc, conf, prior, num_classes, code_type, nms_threshold, share_location, background_label_id,
              variance_encoded_in_target)
    return ((1, 1, _do_rows(loc, conf, num_classes, top_k, keep_top_k, share_location), 7),)


def _decode_one(p, v, l, code_type):
    """Decode one box ``l`` (4 offsets) against prior ``p`` with variances ``v``."""
    if code_type == "CORNER":
        return [p[0] + v[0] * l[0], p[1] + v[1] * l[1], p[2] + v[2] * l[2], p[3] + v[3] * l[3]]
    pw, ph = p[2] - p[0], p[3] - p[1]
    if code_type == "CORNER_SIZE":
        return [p[0] + v[0] * l[0] * pw, p[1] + v[1] * l[1] * ph, p[2] + v[2] * l[2] * pw, p[3] + v[3] * l[3] * ph]
    pcx, pcy = (p[0] + p[2]) / 2, (p[1] + p[3]) / 2
    cx, cy = v[0] * l[0] * pw + pcx, v[1] * l[1] * ph + pcy
    w, h = math.exp(v[2] * l[2]) * pw, math.exp(v[3] * l[3]) * ph
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def _finish_do(dets_per_image, rows):
    out = np.zeros((1, 1, rows, 7), dtype=float_type())
    r = 0
    for n, dets in enumerate(dets_per_image):
        for label, score, box in dets:
            if r >= rows:
                break
            out[0, 0, r] = [n, label, score, *box]
            r += 1
    if r < rows:
        out[0, 0, r, 0] = -1
    return out


def _select_do(per_class: dict, keep_top_k: int):
    """Apply keep_top_k over all classes; return [(label, idx, score)] grouped by ascending label,
    in descending score order within a label (the layer's output order)."""
    pairs = [(score, label, idx) for label in sorted(per_class) for idx, score in per_class[label]]
    if keep_top_k > -1 and len(pairs) > keep_top_k:
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0])[:keep_top_k]
        pairs = [pairs[i] for i in order]
        pairs = sorted(pairs, key=lambda t: t[1])      # stable: keeps score order within a label
    return [(label, idx, score) for score, label, idx in pairs]


@detection_output.formal
def _do_formal(loc, conf, prior, *, num_classes, background_label_id=0, top_k=-1, keep_top_k=-1,
               code_type="CORNER", share_location=True, nms_threshold, confidence_threshold=0.0,
               variance_encoded_in_target=False, clip_before_nms=False, clip_after_nms=False):
    _check_do(loc.shape, conf.shape, prior.shape, num_classes, code_type, nms_threshold, share_location,
              background_label_id, variance_encoded_in_target)
    N = loc.shape[0]
    P = conf.shape[1] // num_classes
    L = 1 if share_location else num_classes
    rows = _do_rows(loc.shape, conf.shape, num_classes, top_k, keep_top_k, share_location)
    loc = loc.reshape(N, P, L, 4)
    conf = conf.reshape(N, P, num_classes)
    results = []
    for n in range(N):
        pn = n if prior.shape[0] > 1 else 0
        decoded = {}
        for c in range(L):
            for p in range(P):
                pr = [float(t) for t in prior[pn, 0, 4 * p:4 * p + 4]]
                var = [1.0] * 4 if variance_encoded_in_target else [float(t) for t in prior[pn, 1, 4 * p:4 * p + 4]]
                box = _decode_one(pr, var, [float(t) for t in loc[n, p, c]], code_type)
                if clip_before_nms:
                    box = [min(max(t, 0.0), 1.0) for t in box]
                decoded[c, p] = box
        per_class = {}
        for c in range(num_classes):
            if c == background_label_id:
                continue
            lc = 0 if share_location else c
            cand = [p for p in range(P) if float(conf[n, p, c]) > confidence_threshold]
            cand = sorted(cand, key=lambda p: -float(conf[n, p, c]))       # stable
            if top_k > -1:
                cand = cand[:top_k]
            boxes = {p: decoded[lc, p] for p in cand}
            kept = nms_formal(boxes, cand, nms_threshold, 0.0)
            if kept:
                per_class[c] = [(p, float(conf[n, p, c])) for p in kept]
        dets = []
        for label, p, score in _select_do(per_class, keep_top_k):
            box = decoded[0 if share_location else label, p]
            if clip_after_nms:
                box = [min(max(t, 0.0), 1.0) for t in box]
            dets.append((label, score, box))
        results.append(dets)
    return _finish_do(results, rows)


def _decode_fast(pr, var, l, code_type):
    if code_type == "CORNER":
        return pr + var * l
    pw, ph = pr[..., 2] - pr[..., 0], pr[..., 3] - pr[..., 1]
    if code_type == "CORNER_SIZE":
        size = np.stack([pw, ph, pw, ph], axis=-1)
        return pr + var * l * size
    pcx, pcy = (pr[..., 0] + pr[..., 2]) / 2, (pr[..., 1] + pr[..., 3]) / 2
    cx, cy = var[..., 0] * l[..., 0] * pw + pcx, var[..., 1] * l[..., 1] * ph + pcy
    w, h = np.exp(var[..., 2] * l[..., 2]) * pw, np.exp(var[..., 3] * l[..., 3]) * ph
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


@detection_output.fast
def _do_fast(loc, conf, prior, *, num_classes, background_label_id=0, top_k=-1, keep_top_k=-1,
             code_type="CORNER", share_location=True, nms_threshold, confidence_threshold=0.0,
             variance_encoded_in_target=False, clip_before_nms=False, clip_after_nms=False):
    _check_do(loc.shape, conf.shape, prior.shape, num_classes, code_type, nms_threshold, share_location,
              background_label_id, variance_encoded_in_target)
    N = loc.shape[0]
    P = conf.shape[1] // num_classes
    L = 1 if share_location else num_classes
    rows = _do_rows(loc.shape, conf.shape, num_classes, top_k, keep_top_k, share_location)
    loc = loc.reshape(N, P, L, 4).astype(np.float64)
    conf = conf.reshape(N, P, num_classes)
    results = []
    for n in range(N):
        pn = n if prior.shape[0] > 1 else 0
        pr = prior[pn, 0].reshape(P, 1, 4).astype(np.float64)
        var = (np.ones((P, 1, 4)) if variance_encoded_in_target
               else prior[pn, 1].reshape(P, 1, 4).astype(np.float64))
        dec = _decode_fast(pr, var, loc[n], code_type)                 # (P, L, 4)
        if clip_before_nms:
            dec = np.clip(dec, 0.0, 1.0)
        per_class = {}
        for c in range(num_classes):
            if c == background_label_id:
                continue
            scores = conf[n, :, c].astype(np.float64)
            cand = np.nonzero(scores > confidence_threshold)[0]
            cand = cand[np.argsort(-scores[cand], kind="stable")]
            if top_k > -1:
                cand = cand[:top_k]
            kept = nms_fast(dec[:, 0 if share_location else c], cand, nms_threshold, 0.0)
            if kept.size:
                per_class[c] = [(int(p), float(scores[p])) for p in kept]
        dets = []
        for label, p, score in _select_do(per_class, keep_top_k):
            box = dec[p, 0 if share_location else label]
            if clip_after_nms:
                box = np.clip(box, 0.0, 1.0)
            dets.append((label, score, [float(t) for t in box]))
        results.append(dets)
    return _finish_do(results, rows)


# ---------------------------------------------------------------------------------------------
# Proposal / SimplerNMS (region-proposal networks)
# ---------------------------------------------------------------------------------------------

proposal = define(
    "ir_proposal", "ir.detection", """
fragment ir_proposal( cls_prob: tensor<scalar>, bbox_pred: tensor<scalar>, im_info: tensor<scalar>,
    base_size: integer, pre_nms_topn: integer, post_nms_topn: integer, nms_thresh: scalar,
    feat_stride: integer, min_size: integer, ratio: scalar[], scale: scalar[],
    clip_before_nms: logical = true, clip_after_nms: logical = false, normalize: logical = false,
    box_size_scale: scalar = 1.0, box_coordinate_scale: scalar = 1.0 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="RPN proposals: anchors shifted over the grid, decoded by bbox_pred, size-filtered, sorted by "
        "foreground score, greedy NMS; output [N*post_nms_topn, 5] rows [image, x1, y1, x2, y2]; in "
        "each image's block the row after the last proposal has image = -1, the rest are zeros.")


def generate_anchors(base_size: float, ratios, scales, offset: float = 1.0) -> np.ndarray:
    """Anchors centred on the base cell: for each ratio (outer) and scale (inner), a box whose
    area is about base_size^2 * scale^2 with height/width = ratio (rounded to whole pixels)."""
    center = 0.5 * (base_size - offset)
    area = base_size * base_size
    anchors = []
    for r in ratios:
        rw = math.floor(math.sqrt(area / r) + 0.5)
        rh = math.floor(rw * r + 0.5)
        for s in scales:
            hw, hh = 0.5 * (rw * s - offset), 0.5 * (rh * s - offset)
            anchors.append([center - hw, center - hh, center + hw, center + hh])
    return np.asarray(anchors, dtype=np.float64).reshape(-1, 4)


def _check_proposal(cls_shape, bbox_shape, info_shape, num_anchors, pre, post, thresh, feat_stride):
    op = "ir_proposal"
    require(len(cls_shape) == 4 and len(bbox_shape) == 4, op, "cls_prob and bbox_pred must be 4-D")
    require(cls_shape[1] in (None, 2 * num_anchors), op,
            f"cls_prob needs {2 * num_anchors} channels (2 per anchor), got {cls_shape[1]}")
    require(bbox_shape[1] in (None, 4 * num_anchors), op,
            f"bbox_pred needs {4 * num_anchors} channels (4 per anchor), got {bbox_shape[1]}")
    require(len(info_shape) in (1, 2) and info_shape[-1] in (None, 3, 4), op,
            "im_info must hold [height, width, scale] or [height, width, scale_h, scale_w]")
    require(pre > 0 and post > 0, op, f"pre_nms_topn and post_nms_topn must be > 0, got {pre} and {post}")
    require(0.0 <= thresh <= 1.0, op, f"'nms_thresh' must lie in [0, 1], got {thresh}")
    require(feat_stride > 0, op, f"'feat_stride' must be > 0, got {feat_stride}")


@proposal.shape
def _proposal_shape(cls_prob, bbox_pred, im_info, *, base_size, pre_nms_topn, post_nms_topn, nms_thresh,
                    feat_stride, min_size, ratio, scale, **_):
    require(len(ratio) > 0 and len(scale) > 0, "ir_proposal", "'ratio' and 'scale' must not be empty")
    _check_proposal(cls_prob, bbox_pred, im_info, len(ratio) * len(scale), pre_nms_topn, post_nms_topn,
                    nms_thresh, feat_stride)
    n = cls_prob[0]
    return ((None if n is None else n * post_nms_topn, 5),)


def _im_info(im_info, n):
    row = im_info.reshape(-1, im_info.shape[-1])
    row = row[n if row.shape[0] > 1 else 0]
    h, w, sh = float(row[0]), float(row[1]), float(row[2])
    sw = float(row[3]) if row.shape[0] > 3 else sh
    return h, w, sh, sw


def _proposals_formal(cls_prob, bbox_pred, n, anchors, feat_stride, img_h, img_w, min_w, min_h, clip_before,
                      offset, coord_scale=1.0, size_scale=1.0, score_floor=None):
    """All (score, box) candidates of image ``n`` in grid order (h, w, anchor)."""
    A = anchors.shape[0]
    H, W = cls_prob.shape[2], cls_prob.shape[3]
    cands = []
    for h in range(H):
        for w in range(W):
            for a in range(A):
                x0, y0, x1, y1 = (float(anchors[a, 0]) + w * feat_stride, float(anchors[a, 1]) + h * feat_stride,
                                  float(anchors[a, 2]) + w * feat_stride, float(anchors[a, 3]) + h * feat_stride)
                dx, dy, dw, dh = (float(bbox_pred[n, 4 * a + k, h, w]) for k in range(4))
                dx, dy, dw, dh = dx / coord_scale, dy / coord_scale, dw / size_scale, dh / size_scale
                ww, hh = x1 - x0 + offset, y1 - y0 + offset
                cx, cy = x0 + 0.5 * ww, y0 + 0.5 * hh
                pcx, pcy = dx * ww + cx, dy * hh + cy
                pw, ph = math.exp(dw) * ww, math.exp(dh) * hh
                box = [pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph]
                if clip_before:
                    box = [min(max(box[0], 0.0), img_w - offset), min(max(box[1], 0.0), img_h - offset),
                           min(max(box[2], 0.0), img_w - offset), min(max(box[3], 0.0), img_h - offset)]
                score = float(cls_prob[n, A + a, h, w])
                # Catalog step 3: boxes smaller than min_size (scaled to the image) are filtered out.
                # (OpenVINO's implementation instead keeps them with score 0, so they can pad the
                # output after the real proposals; the catalog's definition is followed here.)
                if box[2] - box[0] + offset < min_w or box[3] - box[1] + offset < min_h:
                    continue
                if score_floor is not None and score < score_floor:
                    continue
                cands.append((score, box))
    return cands


def _proposals_fast(cls_prob, bbox_pred, n, anchors, feat_stride, img_h, img_w, min_w, min_h, clip_before,
                    offset, coord_scale=1.0, size_scale=1.0, score_floor=None):
    A = anchors.shape[0]
    H, W = cls_prob.shape[2], cls_prob.shape[3]
    sy, sx = np.meshgrid(np.arange(H) * feat_stride, np.arange(W) * feat_stride, indexing="ij")
    shift = np.stack([sx, sy, sx, sy], axis=-1).reshape(H, W, 1, 4).astype(np.float64)
    anc = shift + anchors.reshape(1, 1, A, 4)
    d = bbox_pred[n].reshape(A, 4, H, W).transpose(2, 3, 0, 1).astype(np.float64)
    d = d / np.array([coord_scale, coord_scale, size_scale, size_scale])
    ww, hh = anc[..., 2] - anc[..., 0] + offset, anc[..., 3] - anc[..., 1] + offset
    cx, cy = anc[..., 0] + 0.5 * ww, anc[..., 1] + 0.5 * hh
    pcx, pcy = d[..., 0] * ww + cx, d[..., 1] * hh + cy
    pw, ph = np.exp(d[..., 2]) * ww, np.exp(d[..., 3]) * hh
    box = np.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph], axis=-1).reshape(-1, 4)
    if clip_before:
        box[:, 0::2] = np.clip(box[:, 0::2], 0.0, img_w - offset)
        box[:, 1::2] = np.clip(box[:, 1::2], 0.0, img_h - offset)
    score = cls_prob[n, A:].transpose(1, 2, 0).reshape(-1).astype(np.float64)
    keep = (box[:, 2] - box[:, 0] + offset >= min_w) & (box[:, 3] - box[:, 1] + offset >= min_h)
    if score_floor is not None:
        keep &= score >= score_floor
    return score[keep], box[keep]


def _rpn_formal(cls_prob, bbox_pred, im_info, anchors, feat_stride, min_size, pre, post, thresh,
                clip_before, clip_after, normalize, coord_scale, size_scale, score_floor=None):
    N = cls_prob.shape[0]
    out = np.zeros((N * post, 5), dtype=float_type())
    scores = np.zeros((N * post,), dtype=float_type())
    for n in range(N):
        img_h, img_w, sh, sw = _im_info(im_info, n)
        cands = _proposals_formal(cls_prob, bbox_pred, n, anchors, feat_stride, img_h, img_w, min_size * sw,
                                  min_size * sh, clip_before, 1.0, coord_scale, size_scale, score_floor)
        order = sorted(range(len(cands)), key=lambda i: -cands[i][0])[:pre]
        kept = nms_formal([c[1] for c in cands], order, thresh, 1.0, post)
        for r, i in enumerate(kept):
            x0, y0, x1, y1 = cands[i][1]
            if clip_after:          # after NMS the boxes are clipped to the image itself
                x0, x1 = (min(max(t, 0.0), img_w) for t in (x0, x1))
                y0, y1 = (min(max(t, 0.0), img_h) for t in (y0, y1))
            if normalize:
                x0, x1, y0, y1 = x0 / img_w, x1 / img_w, y0 / img_h, y1 / img_h
            out[n * post + r] = [n, x0, y0, x1, y1]
            scores[n * post + r] = cands[i][0]
        if len(kept) < post:
            out[n * post + len(kept), 0] = -1        # end marker, as the layer writes it
    return out, scores


def _rpn_fast(cls_prob, bbox_pred, im_info, anchors, feat_stride, min_size, pre, post, thresh,
              clip_before, clip_after, normalize, coord_scale, size_scale, score_floor=None):
    N = cls_prob.shape[0]
    out = np.zeros((N * post, 5), dtype=float_type())
    scores = np.zeros((N * post,), dtype=float_type())
    for n in range(N):
        img_h, img_w, sh, sw = _im_info(im_info, n)
        score, box = _proposals_fast(cls_prob, bbox_pred, n, anchors, feat_stride, img_h, img_w, min_size * sw,
                                     min_size * sh, clip_before, 1.0, coord_scale, size_scale, score_floor)
        order = np.argsort(-score, kind="stable")[:pre]
        kept = nms_fast(box, order, thresh, 1.0, post)
        b = box[kept].copy()
        if clip_after:
            b[:, 0::2] = np.clip(b[:, 0::2], 0.0, img_w)
            b[:, 1::2] = np.clip(b[:, 1::2], 0.0, img_h)
        if normalize:
            b = b / np.array([img_w, img_h, img_w, img_h])
        out[n * post:n * post + len(kept), 0] = n
        out[n * post:n * post + len(kept), 1:] = b
        scores[n * post:n * post + len(kept)] = score[kept]
        if len(kept) < post:
            out[n * post + len(kept), 0] = -1
    return out, scores


def _proposal_kernel(rpn, cls_prob, bbox_pred, im_info, *, base_size, pre_nms_topn, post_nms_topn, nms_thresh,
                     feat_stride, min_size, ratio, scale, clip_before_nms=True, clip_after_nms=False,
                     normalize=False, box_size_scale=1.0, box_coordinate_scale=1.0):
    """(proposals, their scores) through ``rpn`` (the formal or the fast pipeline).

    The one place that names the attributes and their defaults: the four kernels of
    ``ir_proposal``/``ir_proposal_scored`` below only pick the pipeline and the outputs.
    """
    anchors = generate_anchors(base_size, ratio, scale)
    _check_proposal(cls_prob.shape, bbox_pred.shape, im_info.shape, anchors.shape[0], pre_nms_topn,
                    post_nms_topn, nms_thresh, feat_stride)
    return rpn(cls_prob, bbox_pred, im_info, anchors, feat_stride, min_size, pre_nms_topn, post_nms_topn,
               nms_thresh, clip_before_nms, clip_after_nms, normalize, box_coordinate_scale, box_size_scale)


@proposal.formal
def _proposal_formal(cls_prob, bbox_pred, im_info, **attrs):
    return _proposal_kernel(_rpn_formal, cls_prob, bbox_pred, im_info, **attrs)[0]


@proposal.fast
def _proposal_fast(cls_prob, bbox_pred, im_info, **attrs):
    return _proposal_kernel(_rpn_fast, cls_prob, bbox_pred, im_info, **attrs)[0]


proposal_scored = define(
    "ir_proposal_scored", "ir.detection", """
fragment ir_proposal_scored( cls_prob: tensor<scalar>, bbox_pred: tensor<scalar>, im_info: tensor<scalar>,
    base_size: integer, pre_nms_topn: integer, post_nms_topn: integer, nms_thresh: scalar,
    feat_stride: integer, min_size: integer, ratio: scalar[], scale: scalar[],
    clip_before_nms: logical = true, clip_after_nms: logical = false, normalize: logical = false,
    box_size_scale: scalar = 1.0, box_coordinate_scale: scalar = 1.0 )
    -> ( output: tensor<scalar>, scores: tensor<scalar> );""",
    domain="ir",
    doc="ir_proposal plus the foreground score of each proposal row ([N*post_nms_topn], zero after "
        "each image's last proposal): the two outputs of the opset-4 Proposal layer.")


@proposal_scored.shape
def _proposal_scored_shape(cls_prob, bbox_pred, im_info, **attrs):
    (rows,) = _proposal_shape(cls_prob, bbox_pred, im_info, **attrs)
    return rows, (rows[0],)


@proposal_scored.formal
def _proposal_scored_formal(cls_prob, bbox_pred, im_info, **attrs):
    return _proposal_kernel(_rpn_formal, cls_prob, bbox_pred, im_info, **attrs)


@proposal_scored.fast
def _proposal_scored_fast(cls_prob, bbox_pred, im_info, **attrs):
    return _proposal_kernel(_rpn_fast, cls_prob, bbox_pred, im_info, **attrs)


simpler_nms = define(
    "ir_simpler_nms", "ir.detection", """
fragment ir_simpler_nms( cls_prob: tensor<scalar>, bbox_pred: tensor<scalar>, im_info: tensor<scalar>,
    pre_nms_topn: integer, post_nms_topn: integer, iou_threshold: scalar, min_bbox_size: integer,
    feat_stride: integer, scale: scalar[], cls_threshold: scalar = 0.0 )
    -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="The catalog's 8-step SimplerNMS: anchors of base size 16 with ratios 0.5, 1, 2 and the given "
        "scales, decoded, size- and score-filtered, sorted, NMS; output [post_nms_topn, 5].")

SIMPLER_NMS_BASE = 16
SIMPLER_NMS_RATIOS = (0.5, 1.0, 2.0)


@simpler_nms.shape
def _snms_shape(cls_prob, bbox_pred, im_info, *, pre_nms_topn, post_nms_topn, iou_threshold, min_bbox_size,
                feat_stride, scale, **_):
    require(len(scale) > 0, "ir_simpler_nms", "'scale' must not be empty")
    _check_proposal(cls_prob, bbox_pred, im_info, len(scale) * 3, pre_nms_topn, post_nms_topn, iou_threshold,
                    feat_stride)
    n = cls_prob[0]
    return ((None if n is None else n * post_nms_topn, 5),)


def _snms(kernel, cls_prob, bbox_pred, im_info, pre_nms_topn, post_nms_topn, iou_threshold, min_bbox_size,
          feat_stride, scale, cls_threshold):
    anchors = generate_anchors(SIMPLER_NMS_BASE, SIMPLER_NMS_RATIOS, scale)
    _check_proposal(cls_prob.shape, bbox_pred.shape, im_info.shape, anchors.shape[0], pre_nms_topn,
                    post_nms_topn, iou_threshold, feat_stride)
    return kernel(cls_prob, bbox_pred, im_info, anchors, feat_stride, min_bbox_size, pre_nms_topn,
                  post_nms_topn, iou_threshold, True, False, False, 1.0, 1.0, score_floor=cls_threshold)[0]


@simpler_nms.formal
def _snms_formal(cls_prob, bbox_pred, im_info, *, pre_nms_topn, post_nms_topn, iou_threshold, min_bbox_size,
                 feat_stride, scale, cls_threshold=0.0):
    return _snms(_rpn_formal, cls_prob, bbox_pred, im_info, pre_nms_topn, post_nms_topn, iou_threshold,
                 min_bbox_size, feat_stride, scale, cls_threshold)


@simpler_nms.fast
def _snms_fast(cls_prob, bbox_pred, im_info, *, pre_nms_topn, post_nms_topn, iou_threshold, min_bbox_size,
               feat_stride, scale, cls_threshold=0.0):
    return _snms(_rpn_fast, cls_prob, bbox_pred, im_info, pre_nms_topn, post_nms_topn, iou_threshold,
                 min_bbox_size, feat_stride, scale, cls_threshold)


# ---------------------------------------------------------------------------------------------
# RegionYolo / ReorgYolo
# ---------------------------------------------------------------------------------------------

region_yolo = define(
    "ir_region_yolo", "ir.detection", """
fragment ir_region_yolo( input: tensor<scalar>, coords: integer = 4, classes: integer,
    num: integer, do_softmax: logical = true, mask: integer[] = [], axis: integer = 1,
    end_axis: integer = 3 ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="YOLO region activations: logistic on box x, y and objectness, softmax (do_softmax) or "
        "logistic on class scores, per anchor and cell; with do_softmax the axes axis..end_axis "
        "are flattened.")


def _ry_anchors(shape, coords, classes, num, do_softmax, mask):
    op = "ir_region_yolo"
    require(coords > 0 and classes > 0 and num > 0, op, "'coords', 'classes' and 'num' must be > 0")
    require(len(shape) == 4, op, f"input must be 4-D, got rank {len(shape)}")
    used = num if do_softmax else len(mask)
    require(used > 0, op, "'mask' must not be empty when do_softmax = false")
    if shape[1] is not None:
        require(shape[1] == used * (coords + 1 + classes), op,
                f"input needs {used * (coords + 1 + classes)} channels, got {shape[1]}")
    return used


def _ry_out_shape(shape, do_softmax, axis, end_axis):
    if not do_softmax:
        return tuple(shape)
    r = len(shape)
    a, e = axis % r, end_axis % r
    require(a <= e, "ir_region_yolo", f"'axis' {axis} must not follow 'end_axis' {end_axis}")
    mid = shape[a:e + 1]
    vol = None if any(d is None for d in mid) else int(np.prod(mid))
    return tuple(shape[:a]) + (vol,) + tuple(shape[e + 1:])


@region_yolo.shape
def _ry_shape(input, *, coords=4, classes, num, do_softmax=True, mask=(), axis=1, end_axis=3):
    _ry_anchors(input, coords, classes, num, do_softmax, mask)
    return (_ry_out_shape(input, do_softmax, axis, end_axis),)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@region_yolo.formal
def _ry_formal(input, *, coords=4, classes, num, do_softmax=True, mask=(), axis=1, end_axis=3):
    used = _ry_anchors(input.shape, coords, classes, num, do_softmax, mask)
    N, _, H, W = input.shape
    out = input.astype(np.float64).copy()
    step = coords + 1 + classes
    for n in range(N):
        for a in range(used):
            base = a * step
            for h in range(H):
                for w in range(W):
                    for k in (0, 1, coords):
                        out[n, base + k, h, w] = _sigmoid(float(input[n, base + k, h, w]))
                    cls = [float(input[n, base + coords + 1 + c, h, w]) for c in range(classes)]
                    if do_softmax:
                        m = max(cls)
                        e = [math.exp(v - m) for v in cls]
                        total = sum(e)
                        vals = [v / total for v in e]
                    else:
                        vals = [_sigmoid(v) for v in cls]
                    for c in range(classes):
                        out[n, base + coords + 1 + c, h, w] = vals[c]
    return out.astype(float_type()).reshape(_ry_out_shape(input.shape, do_softmax, axis, end_axis))


@region_yolo.fast
def _ry_fast(input, *, coords=4, classes, num, do_softmax=True, mask=(), axis=1, end_axis=3):
    used = _ry_anchors(input.shape, coords, classes, num, do_softmax, mask)
    N, _, H, W = input.shape
    x = input.astype(np.float64).reshape(N, used, coords + 1 + classes, H, W).copy()
    idx = [0, 1, coords]
    x[:, :, idx] = 0.5 * (1.0 + np.tanh(0.5 * x[:, :, idx]))
    c = x[:, :, coords + 1:]
    if do_softmax:
        e = np.exp(c - c.max(axis=2, keepdims=True))
        x[:, :, coords + 1:] = e / e.sum(axis=2, keepdims=True)
    else:
        x[:, :, coords + 1:] = 0.5 * (1.0 + np.tanh(0.5 * c))
    return x.astype(float_type()).reshape(_ry_out_shape(input.shape, do_softmax, axis, end_axis))


reorg_yolo = define(
    "ir_reorg_yolo", "ir.detection", """
fragment ir_reorg_yolo( input: tensor<scalar>, stride: integer ) -> ( output: tensor<scalar> );""",
    domain="ir",
    doc="Darknet 'reorg' (the backward index map, as the layer's reference applies it): [N, C, H, W] -> "
        "[N, C*s*s, H/s, W/s]; walking the output's flat order with the *input's* (C, H, W) "
        "coordinates k, j, i, element (k, j, i) reads the input viewed as [C/(s*s), H*s, W*s] at "
        "(k mod C', j*s + (k div C') div s, i*s + (k div C') mod s), C' = C/(s*s).  Not a plain "
        "space-to-depth.")


def _reorg_check(shape, stride):
    op = "ir_reorg_yolo"
    require(stride > 0, op, f"'stride' must be > 0, got {stride}")
    require(len(shape) == 4, op, f"input must be 4-D, got rank {len(shape)}")
    for d, name in ((shape[1], "channels"), (shape[2], "height"), (shape[3], "width")):
        div = stride * stride if name == "channels" else stride
        require(d is None or d % div == 0, op, f"input {name} {d} is not divisible by {div}")


@reorg_yolo.shape
def _reorg_shape(input, *, stride):
    _reorg_check(input, stride)
    n, c, h, w = input
    return ((n, None if c is None else c * stride * stride, None if h is None else h // stride,
             None if w is None else w // stride),)


@reorg_yolo.formal
def _reorg_formal(input, *, stride):
    _reorg_check(input.shape, stride)
    N, C, H, W = input.shape
    s = stride
    src = input.reshape(N, -1)
    dst = np.empty_like(src)
    out_c = C // (s * s)
    for b in range(N):
        for k in range(C):
            for j in range(H):
                for i in range(W):
                    c2, offset = k % out_c, k // out_c
                    w2, h2 = i * s + offset % s, j * s + offset // s
                    dst[b, i + W * (j + H * k)] = src[b, w2 + W * s * (h2 + H * s * c2)]
    return dst.reshape(N, C * s * s, H // s, W // s)


@reorg_yolo.fast
def _reorg_fast(input, *, stride):
    _reorg_check(input.shape, stride)
    N, C, H, W = input.shape
    s = stride
    out_c = C // (s * s)
    k = np.arange(C).reshape(-1, 1, 1)
    j = np.arange(H).reshape(1, -1, 1)
    i = np.arange(W).reshape(1, 1, -1)
    offset = k // out_c
    index = (i * s + offset % s) + W * s * ((j * s + offset // s) + H * s * (k % out_c))
    return input.reshape(N, -1)[:, index.reshape(-1)].reshape(N, C * s * s, H // s, W // s)
