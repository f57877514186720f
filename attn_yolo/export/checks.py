"""The checks of an exported detector against PyTorch: raw head outputs and post-NMS detections, and their result.

Shared by every runtime (onnxruntime, OpenVINO, TensorRT; ``attn_yolo.export.runtime``):

* ``raw`` (``compare_raw``): the head output ``(B, 4 + nc, anchors)`` in two parts; each part's max absolute difference
  relative to its output scale must be ≤ the tolerance (fp32: 1e-4; fp16: 1e-2). The scale of the boxes (xywh,
  pixels) is ``max|torch boxes|``; that of the class scores (probabilities) is 1, their range;
* ``nms`` (``compare_detections``): Ultralytics' ``non_max_suppression`` on both raw outputs; detections are matched
  one-to-one (same class, IoU ≥ 0.99), so both sides keep the same count and classes. Only a detection that the
  measured score difference can flip may stay unmatched, and is counted: ``borderline`` (score at the threshold),
  ``tie`` (two classes, or two overlapping boxes, scored within the difference), ``cascade`` (suppressed by or
  suppressing such a box).

A check that compared nothing is ``NOT RUN`` (``Check.not_run`` says why), never a pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}
"""Maximum ``max|exported − torch| / output scale`` per raw output part (``RAW_SCALE``), by exported precision."""

IOU_MIN = 0.99
"""Minimum IoU of a matched detection of the exported model with its PyTorch detection."""

RAW_SCALE = (
    "max|exported - torch| / output scale, per head-output part: boxes (rows 0-3, xywh px) / max|torch boxes|; "
    "class scores (rows 4+, probabilities) / 1, their range"
)


@dataclass
class Check:
    """One verification check: its name, the case it ran on, whether it passed, its measured value and limit.

    A check that compared nothing (``not_run``: why) is not a pass: ``passed`` is False, and the report counts it as
    not run, apart from the passed and failed checks.
    """

    name: str
    case: str
    passed: bool
    value: float | None = None
    limit: float | None = None
    detail: dict = field(default_factory=dict)
    not_run: str = ""
    label: str = "export"
    """What the exported side is called in the printed line (``onnx``, ``openvino``, ``engine``)."""

    @property
    def status(self) -> str:
        """``PASS``, ``FAIL`` or ``NOT RUN``."""
        return "NOT RUN" if self.not_run else "PASS" if self.passed else "FAIL"

    def line(self) -> str:
        """One line of the printed report."""
        d = self.detail
        if self.not_run:
            v = self.not_run
        elif "message" in d:
            v = d["message"]
        elif self.name == "raw":
            v = (
                f"rel boxes {d['boxes']['rel']:.2e} scores {d['scores']['rel']:.2e} (limit {_num(self.limit)}); "
                f"max abs {d['boxes']['max_abs']:.2e} / {d['scores']['max_abs']:.2e}, "
                f"mean abs {d['boxes']['mean_abs']:.2e} / {d['scores']['mean_abs']:.2e}"
            )
        elif self.name == "nms":
            iou = "-" if d["min_iou"] is None else f"{d['min_iou']:.4f}"
            v = (
                f"{d['matched']} matched of {d['n_torch']} torch / {d['n_export']} {self.label} boxes "
                f"(conf {d['conf']}), "
                f"min IoU {iou} (limit {self.limit}), "
                f"unmatched {d['unmatched_torch'] + d['unmatched_export']} (excused: borderline {d['borderline']}, "
                f"tie {d['tie']}, cascade {d['cascade']})"
            )
        else:
            v = ""
        return f"  {self.status:<7}  {self.name:<13} {self.case:<22} {v}"


def _num(v: float) -> str:
    """A tolerance as printed: ``1e-04`` for fp32/fp16's, ``0.15`` for INT8's."""
    return f"{v:.0e}" if v < 0.1 else f"{v:.2g}"


def compare_raw(ref: np.ndarray, out: np.ndarray, tol: float, label: str = "export") -> Check:
    """Compare raw head outputs ``(B, 4 + nc, A)`` in two parts, each relative to its output scale (``RAW_SCALE``).

    Boxes (rows 0-3, xywh in pixels): ``max|Δ| / max|torch boxes|``. Class scores (rows 4+, probabilities):
    ``max|Δ|``, their scale being their range [0, 1]. (An image's largest score can be 1e-3, e.g. for an untrained
    model; relative to that, rounding differences of 1e-7 would read as 1e-4.) Mean absolute differences are reported.
    """
    if ref.shape != out.shape:
        msg = f"shape {label} {out.shape} != torch {ref.shape}"
        return Check("raw", "", False, math.inf, tol, {"message": msg}, label=label)
    parts = {}
    for part, sl in (("boxes", slice(0, 4)), ("scores", slice(4, None))):
        r, o = ref[:, sl].astype(np.float64), out[:, sl].astype(np.float64)
        diff = np.abs(o - r)
        scale = (float(np.abs(r).max()) or 1.0) if part == "boxes" else 1.0
        max_abs = float(diff.max()) if np.isfinite(diff).all() else math.inf
        parts[part] = {"max_abs": max_abs, "mean_abs": float(diff.mean()), "scale": scale, "rel": max_abs / scale}
    rel = max(p["rel"] for p in parts.values())
    return Check("raw", "", rel <= tol, rel, tol, {**parts, "shape": list(ref.shape)}, label=label)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of xyxy boxes ``a (N, 4)`` and ``b (M, 4)``."""
    from ultralytics.utils.metrics import box_iou

    return box_iou(torch.from_numpy(a).double(), torch.from_numpy(b).double()).numpy()


def _candidates(raw: np.ndarray, conf: float) -> np.ndarray:
    """Pre-NMS candidates of one image's raw output ``(4 + nc, A)``: rows ``(x1, y1, x2, y2, score, class, gap)``.

    ``gap`` is the best minus the second-best class score (inf for one class): how far the class is from flipping.
    """
    from ultralytics.utils.ops import xywh2xyxy

    p = raw.T.astype(np.float64)
    s = np.sort(p[:, 4:], 1)
    score, cls = s[:, -1], p[:, 4:].argmax(1)
    gap = s[:, -1] - s[:, -2] if s.shape[1] > 1 else np.full(len(s), np.inf)
    keep = score > conf
    return np.concatenate([xywh2xyxy(p[keep, :4]), score[keep, None], cls[keep, None], gap[keep, None]], 1)


def _tied(d: np.ndarray, cand: np.ndarray, iou: float, margin: float) -> bool:
    """Whether a score difference of ``margin / 2`` can change detection ``d`` through a tie: its class (best two
    class scores within ``margin``), or which box NMS keeps (an overlapping same-class candidate within ``margin``)."""
    own = np.all(np.abs(cand[:, :5] - d[:5]) <= 1e-6 * (1 + np.abs(d[:5])), 1)
    if (cand[own, 6] <= margin).any():
        return True
    return int((_overlaps(d, cand, iou) & (np.abs(cand[:, 4] - d[4]) <= margin)).sum()) > 1  # not only d itself


def _overlaps(d: np.ndarray, boxes: np.ndarray, iou: float) -> np.ndarray:
    """Mask of the rows of ``boxes`` (x1, y1, x2, y2, score, class, ...) of ``d``'s class with IoU > ``iou`` − 0.01."""
    if not len(boxes):
        return np.zeros(0, bool)
    return (boxes[:, 5] == d[5]) & (_iou(d[None, :4], boxes[:, :4])[0] > iou - (1 - IOU_MIN))


MAX_DET = 300
"""Ultralytics' ``max_det``: the most detections NMS keeps per image."""

COUNTS = ("n_torch", "n_export", "matched", "borderline", "tie", "cascade", "unmatched_torch", "unmatched_export")
"""The counts of the ``nms`` check's detail, over all images."""


def compare_detections(ref: np.ndarray, out: np.ndarray, conf: float, iou: float, margin: float,
                       label: str = "export", iou_min: float = IOU_MIN, max_unmatched: float = 0.0) -> Check:
    """Compare post-NMS detections of raw outputs ``ref`` (torch) and ``out`` (exported) ``(B, 4 + nc, A)``, per image.

    NMS is Ultralytics' ``non_max_suppression(conf, iou, max_det=300)``. Detections are matched one-to-one per image
    (Hungarian method on IoU, same class only); a match needs IoU ≥ ``IOU_MIN``. ``margin`` is the score difference
    the raw check allowed (measured, +1e-6). An unmatched detection is excused, and counted, only if a difference of
    ``margin`` can flip it:

    * ``borderline``: its score is within ``margin`` of the threshold (``conf``, or the lowest kept score once
      ``max_det`` is reached);
    * ``tie``: its two best class scores are within ``2 margin`` (the class may flip), or an overlapping same-class
      candidate (IoU > ``iou`` − 0.01) scores within ``2 margin`` of it (NMS may keep either one);
    * ``cascade``: it overlaps a detection excused above (on either side), whose flip changes what NMS suppresses.

    Passes if no detection on either side is left unmatched and unexcused: same count and classes up to those; or,
    with ``max_unmatched`` > 0 (INT8's looser tolerance), if at most that share of the detections of either side is.
    ``iou_min``: the IoU a match needs (default ``IOU_MIN``).
    Not run (``Check.not_run``) if nothing was compared: neither side has a detection, or none matched and every one
    was excused (a check that verified no detection is never a pass).
    """
    margin = margin + 1e-6
    n = dict.fromkeys(COUNTS, 0)
    ious = []  # IoU of each matched pair, and the best same-class IoU of each unexcused unmatched detection
    for k, (a, b) in enumerate(zip(_nms(ref, conf, iou), _nms(out, conf, iou))):
        ious += _match_image(a.double().numpy(), b.double().numpy(), ref[k], out[k], conf, iou, margin, iou_min, n)
    return _detections_check(n, ious, ref, out, conf, iou, margin, label, iou_min, max_unmatched)


def _nms(raw: np.ndarray, conf: float, iou: float) -> list:
    """Ultralytics' ``non_max_suppression`` of raw outputs ``(B, 4 + nc, A)``: per image ``(n, 6)`` xyxy, score,
    class."""
    from ultralytics.utils.nms import non_max_suppression

    kw = dict(conf_thres=conf, iou_thres=iou, max_det=MAX_DET, max_time_img=60.0)
    return non_max_suppression(torch.from_numpy(raw.copy()), **kw)


def _match_image(a: np.ndarray, b: np.ndarray, raw_a: np.ndarray, raw_b: np.ndarray, conf: float, iou: float,
                 margin: float, iou_min: float, n: dict) -> list[float]:
    """Match one image's torch ``a`` and exported ``b`` detections, excuse the unmatched that ``margin`` can flip, and
    add the counts to ``n``. Returns the IoU of each match and the best IoU of each unexcused unmatched detection."""
    from scipy.optimize import linear_sum_assignment

    n["n_torch"] += len(a)
    n["n_export"] += len(b)
    m = _iou(a[:, :4], b[:, :4]) * (a[:, 5:6] == b[:, 5][None]) if len(a) and len(b) else np.zeros((len(a), len(b)))
    ri, ci = linear_sum_assignment(-m) if m.size else ([], [])
    good = [(i, j) for i, j in zip(ri, ci) if m[i, j] >= iou_min]
    ious = [m[i, j] for i, j in good]
    n["matched"] += len(good)
    lo = max([conf] + [d[:, 4].min() for d in (a, b) if len(d) == MAX_DET])  # the score a detection must beat
    unmatched = {"torch": sorted(set(range(len(a))) - {i for i, _ in good}),
                 "export": sorted(set(range(len(b))) - {j for _, j in good})}
    dets, raws, best = {"torch": a, "export": b}, {"torch": raw_a, "export": raw_b}, {"torch": m, "export": m.T}
    excused, left = _excuse_flips(unmatched, dets, raws, lo, conf, iou, margin, n)
    _excuse_cascades(left, excused, dets, iou, n)
    for side, i in left:
        n[f"unmatched_{side}"] += 1
        ious.append(float(best[side][i].max()) if best[side].shape[1] else 0.0)
    return ious


def _excuse_flips(unmatched: dict, dets: dict, raws: dict, lo: float, conf: float, iou: float, margin: float,
                  n: dict) -> tuple[list, list]:
    """Split the unmatched detections into those a ``margin`` can flip (``borderline``, ``tie``; counted in ``n``) and
    the rest: ``(excused detections, [(side, index)] left)``."""
    excused, left = [], []
    for side, idx in unmatched.items():
        cand = _candidates(raws[side], conf - margin) if idx else None
        for i in idx:
            d = dets[side][i]
            if abs(d[4] - lo) <= margin:
                n["borderline"] += 1
                excused.append(d)
            elif _tied(d, cand, iou, 2 * margin):
                n["tie"] += 1
                excused.append(d)
            else:
                left.append((side, i))
    return excused, left


def _excuse_cascades(left: list, excused: list, dets: dict, iou: float, n: dict) -> None:
    """Excuse (and count in ``n``) the detections of ``left`` that overlap an excused one, transitively; both lists
    change in place."""
    changed = True
    while changed and left:
        changed = False
        for side, i in list(left):
            d = dets[side][i]
            if excused and _overlaps(d, np.array(excused), iou).any():
                n["cascade"] += 1
                excused.append(d)
                left.remove((side, i))
                changed = True


def _detections_check(n: dict, ious: list, ref: np.ndarray, out: np.ndarray, conf: float, iou: float, margin: float,
                      label: str, iou_min: float, max_unmatched: float) -> Check:
    """The ``nms`` check from the counts: passed, failed, or not run when nothing was compared."""
    min_iou = float(min(ious)) if ious else None  # None: no detection to compare
    top = float(max(ref[:, 4:].max(), out[:, 4:].max())) if ref.shape[1] > 4 and ref.size else 0.0
    detail = {"conf": conf, "iou": iou, **n, "min_iou": min_iou, "score_margin": margin, "max_score": top}
    if n["n_torch"] == 0 and n["n_export"] == 0:
        why = (f"no box scores above conf={conf} in the torch or the {label} output (highest class score "
               f"{top:.3g}), so there are no detections to compare; to compare them, pass a conf= below {top:.3g}")
        return Check("nms", "", False, None, iou_min, detail, not_run=why, label=label)
    passed = (n["unmatched_torch"] <= max_unmatched * n["n_torch"]
              and n["unmatched_export"] <= max_unmatched * n["n_export"])
    if passed and n["matched"] == 0:  # every detection excused as a near tie or borderline score: nothing verified
        why = (f"none of the {n['n_torch']} torch / {n['n_export']} {label} detections could be matched: each "
               f"one's score is within the raw check's margin ({margin:.2g}) of a threshold or a rival, so NMS may "
               f"keep either and nothing was verified; to compare them, pass a higher conf= (fewer, clearer "
               f"detections)")
        return Check("nms", "", False, None, iou_min, detail, not_run=why, label=label)
    return Check("nms", "", passed, min_iou, iou_min, detail, label=label)
