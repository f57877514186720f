"""TIDE's error types on a per-image record, and the AP after each oracle fix, under image weights (the bootstrap).

TIDE (Bolya et al., "TIDE: A General Toolbox for Identifying Object Detection Errors", ECCV 2020; its reference code
``tidecv`` 1.0.1, whose rules this module follows line by line) sorts every false positive of a detector, at a
foreground IoU threshold t_f, with the background threshold t_b = 0.1, into the first of:

- **Loc** (localisation): its best IoU with a ground-truth box of its own class lies in [t_b, t_f];
- **Cls** (classification): IoU >= t_f with a ground-truth box of another class;
- **Dupe** (duplicate): IoU >= t_f with a box of its class that a higher-scoring detection already matched;
- **Bkg** (background): IoU <= t_b with every ground-truth box (or the image has none);
- **Both**: any other false positive (wrong class and badly localised);

and every ground-truth box no detection matched, and that no Cls or Loc error targets, as **Miss**. The oracle fix
of each type (``ΔAP_e = AP after fixing every error of type e − AP``): a Cls error takes the class of its target
box, a Loc error its box, and either becomes a true positive, if that target is still unmatched and it is the
highest-scoring Cls or Loc error on it (every other one is suppressed, as ``tidecv.errors.error.BestGTMatch``);
Dupe, Bkg and Both errors are suppressed; a missed box is removed from the ground truth.

Where this differs from ``tidecv`` (on purpose, so that the AP before any fix is the ablation summary's AP):

- the matching is Ultralytics' (``BaseValidator.match_predictions`` of Ultralytics 8.4: detections in descending
  confidence order, each taking the best unmatched box of its class per threshold) on the record's boxes; it is the
  same greedy rule as tidecv's, and ``matches`` reproduces the record's own TP flags;
- AP is Ultralytics' (``ap_per_class``: 101-point precision envelope, trapezoid rule), computed by
  ``attn_yolo.ablate.statistics.weighted_ap`` under image weights, not tidecv's COCO sum; all detections count
  (Ultralytics' ``max_det`` 300, not tidecv's 100);
- TIDE is run at each of the 10 IoU thresholds 0.50:0.95 with t_f = that threshold, and AP averaged over them, so
  that the fixes explain mAP50-95 (tidecv's ``evaluate_range`` does the same for its plots);
- a class whose every box at a threshold was missed has no ground truth left after the Miss fix: its AP there is 1
  when no detection of it is left, else 0 (tidecv: 0, or the class dropped from the mean) so that the classes
  averaged are always those of the unfixed AP.

Why not ``tidecv`` itself (it installs and runs with numpy 2): it computes its own COCO-style AP on the images that
have ground truth, one evaluation at a time in Python, so it can neither reproduce the summary's AP nor weigh images
(2000 bootstrap resamples per run). The tests check this module's error types against it, threshold by threshold.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attn_yolo.ablate.runs.perimage import IOU_THRESHOLDS, SIZE_RANGES, Record
from attn_yolo.ablate.statistics.weighted_ap import Ranking, Weights

BG_THRESHOLD = 0.1  # TIDE's t_b
# error codes in Errors.pred_type; 0: a true positive
CLS, LOC, BOTH, DUPE, BKG, MISS = 1, 2, 3, 4, 5, 6
ERRORS = (("cls", CLS), ("loc", LOC), ("both", BOTH), ("dupe", DUPE), ("bkg", BKG), ("miss", MISS))
ERROR_NAMES = tuple(n for n, _ in ERRORS)
LABELS = {"cls": "classification", "loc": "localisation", "both": "both (class and box)", "dupe": "duplicate",
          "bkg": "background", "miss": "missed"}  # fmt: skip


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of (P, 4) and (G, 4) xyxy boxes: (P, G) float64 (0 where a union is empty)."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(2)
    area_a = (a[:, 2:] - a[:, :2]).clip(0).prod(1)
    area_b = (b[:, 2:] - b[:, :2]).clip(0).prod(1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def matches(iou: np.ndarray, pred_cls: np.ndarray, gt_cls: np.ndarray, thresholds=IOU_THRESHOLDS) -> np.ndarray:
    """Ultralytics' matching of one image (``BaseValidator.match_predictions``, greedy, Ultralytics 8.4), with the
    box each detection matched.

    Args:
        iou: (P, G) IoU of the image's detections (in descending confidence order, as NMS returns them) and boxes.
        pred_cls, gt_cls: (P,), (G,) classes.
        thresholds: (T,) IoU thresholds.

    Returns:
        (P, T) int: the index of the box each detection matched at each threshold, −1 where it is a false positive.
    """
    n_t = len(thresholds)
    out = np.full((len(pred_cls), n_t), -1, np.int64)
    if not iou.size:
        return out
    same = iou * (np.asarray(pred_cls)[:, None] == np.asarray(gt_cls)[None, :])
    claimed = np.zeros((iou.shape[1], n_t), bool)
    cols = np.arange(n_t)
    for j in np.flatnonzero((same >= np.min(thresholds)).any(1)):
        available = np.where(claimed, 0.0, same[j][:, None])  # (G, T)
        k = available.argmax(0)
        ok = available[k, cols] >= thresholds
        out[j, ok] = k[ok]
        claimed[k[ok], cols[ok]] = True
    return out


@dataclasses.dataclass
class Errors:
    """TIDE's classification of one record at each IoU threshold (N detections, M boxes, T = 10 thresholds).

    Attributes:
        pred_type: (N, T) int8: 0 for a true positive, else CLS / LOC / BOTH / DUPE / BKG.
        pred_target: (N, T) int: the record's box index a Cls / Loc / Dupe error refers to, −1 otherwise.
        pred_fixed: (N, T) bool: the Cls / Loc errors their fix turns into true positives (the best on an unmatched
            box); the other Cls / Loc errors are suppressed by the fix.
        missed: (M, T) bool: Miss errors.
        matched: (M, T) bool: boxes a detection matched.
        disagree: detections whose TP flag from ``matches`` differs from the record's (0 for a record Ultralytics
            made; where they differ the record's flag is kept).
    """

    pred_type: np.ndarray
    pred_target: np.ndarray
    pred_fixed: np.ndarray
    missed: np.ndarray
    matched: np.ndarray
    disagree: int = 0


def classify(rec: Record) -> Errors:
    """TIDE's error type of every false positive and missed box of ``rec`` at each of its IoU thresholds (see the
    module docstring), from the record's boxes and Ultralytics' matching.

    Raises:
        ValueError: the record holds no boxes (simulated records).
    """
    if rec.pred_box is None or rec.gt_box is None:
        raise ValueError("the per-image record holds no boxes (a simulated record): TIDE's errors need them")
    n, m, n_t = len(rec.pred_img), len(rec.gt_img), rec.pred_tp.shape[1]
    out = Errors(np.zeros((n, n_t), np.int8), np.full((n, n_t), -1, np.int64), np.zeros((n, n_t), bool),
                 np.zeros((m, n_t), bool), np.zeros((m, n_t), bool))
    p_start = np.searchsorted(rec.pred_img, np.arange(rec.n_images + 1))
    g_order = np.argsort(rec.gt_img, kind="stable")
    g_start = np.searchsorted(rec.gt_img[g_order], np.arange(rec.n_images + 1))
    for i in range(rec.n_images):
        p = np.arange(p_start[i], p_start[i + 1])
        g = g_order[g_start[i]:g_start[i + 1]]
        if len(p) or len(g):
            _classify_image(rec, p, g, out)
    return out


def _classify_image(rec: Record, p: np.ndarray, g: np.ndarray, out: Errors) -> None:
    """``classify`` for one image: detections ``p`` (record order), boxes ``g`` (record indices); fills ``out``."""
    n_t = rec.pred_tp.shape[1]
    thr = IOU_THRESHOLDS[:n_t]
    if not len(g):
        out.pred_type[p] = BKG
        return
    iou = box_iou(rec.pred_box[p], rec.gt_box[g])
    pc, gc = rec.pred_cls[p], rec.gt_cls[g]
    match = matches(iou, pc, gc, thr)
    tp = rec.pred_tp[p, :n_t]
    out.disagree += int(((match >= 0) != tp).any(1).sum())
    match = np.where(tp, match, -1)
    same = pc[:, None] == gc[None, :]
    cls_iou, other_iou = iou * same, iou * ~same
    score = rec.pred_conf[p].astype(np.float64)
    for t in range(n_t):
        used = np.zeros(len(g), bool)
        used[match[match[:, t] >= 0, t]] = True
        fp = ~tp[:, t]
        a_cls, a_oth = cls_iou.argmax(1), other_iou.argmax(1)
        m_cls, m_oth = cls_iou.max(1), other_iou.max(1)
        used_cls = cls_iou * used[None, :]
        loc = fp & (m_cls >= BG_THRESHOLD) & (m_cls <= thr[t])
        cls = fp & ~loc & (m_oth >= thr[t])
        dupe = fp & ~loc & ~cls & (used_cls.max(1) >= thr[t])
        bkg = fp & ~loc & ~cls & ~dupe & (iou.max(1) <= BG_THRESHOLD)
        both = fp & ~loc & ~cls & ~dupe & ~bkg
        kind = np.select([loc, cls, both, dupe, bkg], [LOC, CLS, BOTH, DUPE, BKG], 0).astype(np.int8)
        target = np.select([loc, cls, dupe], [a_cls, a_oth, used_cls.argmax(1)], -1)
        out.pred_type[p, t] = kind
        out.pred_target[p, t] = np.where(target >= 0, g[np.maximum(target, 0)], -1)
        # BestGTMatch: of the Cls / Loc errors on an unmatched box, the highest-scoring one is fixed
        fixable = (loc | cls) & ~used[np.maximum(target, 0)]
        usable = np.zeros(len(g), bool)
        for k in np.unique(target[fixable]):
            on_k = np.flatnonzero(fixable & (target == k))
            out.pred_fixed[p[on_k[np.argmax(score[on_k])]], t] = True
            usable[k] = True
        out.missed[g, t] = ~used & ~usable
        out.matched[g, t] = used


# --------------------------------------------------------------------------------------------- AP after fixes


def size_of(area: np.ndarray) -> np.ndarray:
    """Index into ``SIZE_RANGES`` of each area (px² of the original image; the first range that holds it)."""
    out = np.full(len(area), len(SIZE_RANGES) - 1)
    for a in reversed(range(len(SIZE_RANGES))):
        out[np.asarray(area) <= SIZE_RANGES[a][2]] = a
    return out


def error_sizes(rec: Record, err: Errors) -> tuple[np.ndarray, np.ndarray]:
    """The object size (index into ``SIZE_RANGES``) each error is counted under: (N, T) for detections, (M,) for
    boxes. A Cls / Loc / Dupe error and a missed box: the size of the box it refers to; Bkg and Both: the detection's
    own box."""
    from attn_yolo.ablate.runs.perimage import box_area

    own = size_of(box_area(rec.pred_box))[:, None]
    gt = size_of(rec.gt_area)
    pred = np.where(err.pred_target >= 0, gt[np.maximum(err.pred_target, 0)], own)
    return pred, gt


def fixed_arrays(rec: Record, err: Errors, fix: tuple[str, ...], pred_mask=None, gt_mask=None):
    """The record with the errors ``fix`` (names in ``ERROR_NAMES``) fixed, as per-threshold arrays.

    Args:
        pred_mask: (N, T) bool, None = all: only the detections' errors where it is True are fixed.
        gt_mask: (M,) bool, None = all: only these boxes' Miss errors are fixed.

    Returns:
        ``(tp, counted, cls, gt_keep)``: (N, T) bool TP, (N, T) bool counted (False: suppressed), (N, T) int class,
        (M, T) bool boxes kept.
    """
    codes = [c for name, c in ERRORS if name in fix]
    n_t = err.pred_type.shape[1]
    on = np.isin(err.pred_type, codes)
    if pred_mask is not None:
        on &= pred_mask
    tp = rec.pred_tp[:, :n_t].copy()
    counted = ~on | (np.isin(err.pred_type, (CLS, LOC)) & err.pred_fixed)
    tp |= on & err.pred_fixed
    cls = np.repeat(rec.pred_cls[:, None].astype(np.int64), n_t, 1)
    relabel = on & (err.pred_type == CLS) & err.pred_fixed
    cls[relabel] = rec.gt_cls[err.pred_target[relabel]]
    gone = err.missed if MISS in codes else np.zeros_like(err.missed)
    if gt_mask is not None:
        gone = gone & np.asarray(gt_mask)[:, None]
    return tp, counted, cls, ~gone


def fixed_ap(rec: Record, wt: np.ndarray, weights: Weights, tp, counted, cls, gt_keep) -> np.ndarray:
    """AP per resample, class and threshold of a record fixed by ``fixed_arrays``: (B, nc, T), NaN where the
    resample holds no box of the class (before any fix).

    Each (class, threshold) is one class of a ``weighted_ap.Ranking`` with one threshold, so that a fix can change
    a detection's class, and remove a box, at one threshold only.

    Args:
        wt: (n_images, B) int image weights; ``weights``: the same laid out (``Weights(wt)``, made once).
    """
    nc, n_t = rec.nc, tp.shape[1]
    r, t = np.nonzero(counted)  # row-major: within each (class, threshold) the record's order (ties as Ultralytics)
    key = cls[r, t] * n_t + t
    g, tg = np.nonzero(gt_keep)
    gkey = rec.gt_cls[g].astype(np.int64) * n_t + tg
    rank = Ranking(rec.n_images, nc * n_t, rec.pred_img[r], key, rec.pred_conf[r], tp[r, t][:, None], None,
                   rec.gt_img[g], gkey, "ultralytics")
    ap = rank.average_precision(weights)[:, :, 0].reshape(-1, nc, n_t)
    w = np.asarray(wt, np.float64)
    base_n = w.T @ _per_image(rec.gt_img, rec.gt_cls, rec.n_images, nc)  # (B, nc)
    left = w.T @ _per_image(rec.pred_img[r], key, rec.n_images, nc * n_t)  # detections left per (class, threshold)
    left = left.reshape(-1, nc, n_t)
    empty = np.isnan(ap) & (base_n > 0)[:, :, None]  # every box of the class removed at that threshold
    ap[empty] = (left[empty] == 0).astype(np.float64)
    return ap


def _per_image(img: np.ndarray, key: np.ndarray, n_images: int, n_keys: int) -> np.ndarray:
    """(n_images, n_keys) float64 counts of (image, key) pairs."""
    out = np.zeros((n_images, n_keys))
    np.add.at(out, (np.asarray(img, np.int64), np.asarray(key, np.int64)), 1.0)
    return out


def mean_ap(ap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mAP50-95 (B,), AP50-95 per class (B, nc))`` of ``fixed_ap``'s (B, nc, T), as Ultralytics averages: over
    thresholds, then over the classes present (0 when none is)."""
    ap_class = ap.mean(2)
    present = ~np.isnan(ap_class)
    total = np.where(present, ap_class, 0.0).sum(1)
    return np.where(present.any(1), total / np.maximum(present.sum(1), 1), 0.0), ap_class
