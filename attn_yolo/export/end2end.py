"""YOLO26's NMS-free end-to-end head in export and verification: select it, and compare its detections.

A model with a one-to-one head (``Detect.one2one_cv2``: yolo26, yolov10) is exported and verified through that head,
as it is meant to be deployed: Ultralytics 8.4.190 exports it with ``nms=False`` (its default ``nms=None`` exports
the one-to-many head for external NMS instead). The graph then ends in the head's top-k: ``(B, max_det, 6)`` rows
``x1, y1, x2, y2, score, class``, sorted by score, no NMS. ``use_end2end`` selects it on a ``YOLO`` (the model's
``end2end`` and ``overrides["nms"] = False``, which ``YOLO.export`` and the validator read).

The checks (``end2end_checks``), on the same images as for a raw head:

* ``raw``: each image's scores (sorted, all ``max_det``) against PyTorch's, max absolute difference ≤ the tolerance
  (their scale is 1, the probability range); and the boxes of the matched detections relative to
  ``max|torch boxes|``. Row order is not compared: two scores within the tolerance may swap places in the top-k;
* ``nms`` (the end-to-end detections): rows above ``conf`` matched one-to-one (Hungarian on IoU, same class), a match
  needs IoU ≥ ``iou_min``; a detection left unmatched is excused only when its score is within the measured score
  difference (at most the tolerance) of ``conf`` (``borderline``). Passes with none left (fp32), or at most
  ``max_unmatched`` of either side (INT8).
"""

from __future__ import annotations

import numpy as np

from attn_yolo.export.checks import Check

E2E_RAW_SCALE = ("end-to-end rows (x1, y1, x2, y2, score, class): scores sorted per image, max|exported - torch| "
                 "(scale 1); boxes of matched detections / max|torch boxes|")
"""The ``raw`` check's definition for an end-to-end head (the report's ``tolerance["raw_definition"]``)."""


def has_end2end(model) -> bool:
    """Whether the detection model (``yolo.model``) has a one-to-one (NMS-free) head."""
    head = model.model[-1] if hasattr(model, "model") else None
    return getattr(head, "one2one_cv2", None) is not None


def use_end2end(yolo, on: bool | None = None) -> bool:
    """Select the one-to-one head of ``yolo`` for export, PyTorch inference and validation (``on`` None: whenever the
    model has one); returns whether it is selected."""
    on = has_end2end(yolo.model) if on is None else bool(on and has_end2end(yolo.model))
    if on:
        yolo.model.end2end = True
        yolo.overrides["nms"] = False
    return on


def is_end2end_output(y: np.ndarray) -> bool:
    """An end-to-end output ``(B, max_det, 6)`` (a raw head's is ``(B, 4 + nc, anchors)``)."""
    return y.ndim == 3 and y.shape[-1] == 6


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of xyxy boxes ``(n, 4)`` × ``(m, 4)``."""
    lt, rb = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=-1)
    area = lambda x: np.prod(x[:, 2:] - x[:, :2], axis=-1)  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None] - inter + 1e-9)


def match(a: np.ndarray, b: np.ndarray, iou_min: float) -> list[tuple[int, int, float]]:
    """One-to-one matches ``(i, j, IoU)`` of detections ``a`` and ``b`` (rows xyxy, score, class): Hungarian method on
    IoU within a class, a match needing IoU ≥ ``iou_min``."""
    from scipy.optimize import linear_sum_assignment

    if not len(a) or not len(b):
        return []
    m = _iou(a[:, :4], b[:, :4]) * (a[:, 5:6] == b[:, 5][None])
    ri, ci = linear_sum_assignment(-m)
    return [(i, j, float(m[i, j])) for i, j in zip(ri, ci) if m[i, j] >= iou_min]


def compare_end2end(ref: np.ndarray, out: np.ndarray, conf: float, tol: float, label: str = "export",
                    iou_min: float = 0.99, max_unmatched: float = 0.0) -> list[Check]:
    """The ``raw`` and ``nms`` checks (module docstring) of end-to-end outputs ``ref`` (PyTorch) and ``out``
    (exported), ``(B, max_det, 6)`` each."""
    ref, out = ref.astype(np.float64), out.astype(np.float64)
    ds = np.abs(-np.sort(-ref[..., 4], axis=1) + np.sort(-out[..., 4], axis=1))
    margin = min(float(ds.max()), tol) + 1e-6  # a score may flip across conf by what the raw check allows
    n = dict.fromkeys(("n_torch", "n_export", "matched", "borderline", "tie", "cascade", "unmatched_torch",
                       "unmatched_export"), 0)
    ious, box_err, left = [], [], {"torch": 0, "export": 0}
    for a, b in zip(ref, out):
        a, b = a[a[:, 4] >= conf], b[b[:, 4] >= conf]
        n["n_torch"] += len(a)
        n["n_export"] += len(b)
        good = match(a, b, iou_min)
        n["matched"] += len(good)
        ious += [v for _, _, v in good]
        box_err += [np.abs(a[i, :4] - b[j, :4]).max() for i, j, _ in good]
        for side, d, used in (("torch", a, {i for i, _, _ in good}), ("export", b, {j for _, j, _ in good})):
            for k in set(range(len(d))) - used:
                if abs(d[k, 4] - conf) <= margin:
                    n["borderline"] += 1
                else:
                    left[side] += 1
    n["unmatched_torch"], n["unmatched_export"] = left["torch"], left["export"]
    scale = max(float(np.abs(ref[..., :4]).max()), 1e-9)
    boxes = {"max_abs": float(max(box_err, default=0.0)), "mean_abs": float(np.mean(box_err)) if box_err else 0.0}
    boxes["rel"] = boxes["max_abs"] / scale
    scores = {"max_abs": float(ds.max()), "mean_abs": float(ds.mean()), "rel": float(ds.max()), "scale": 1.0}
    raw = Check("raw", "end2end", scores["rel"] <= tol and boxes["rel"] <= tol, max(scores["rel"], boxes["rel"]), tol,
                {"boxes": boxes, "scores": scores}, label=label)
    share = max((left[s] / max(n[f"n_{s}"], 1)) for s in left)
    ok = share <= max_unmatched if max_unmatched else not any(left.values())
    det = Check("nms", "end2end", ok, float(sum(left.values())), iou_min,
                {**n, "conf": conf, "min_iou": min(ious) if ious else None}, label=label)
    if not n["matched"] and not any(left.values()):
        det.not_run = (f"no end-to-end detection above conf={conf} on either side" if not n["n_torch"] + n["n_export"]
                       else "every detection borderline, none matched")
        det.detail["max_score"] = float(max(ref[..., 4].max(), out[..., 4].max()))
    return [raw, det]


def end2end_checks(tol: float, iou_min: float = 0.99, max_unmatched: float = 0.0):
    """The ``compare`` function of ``verify_exported`` for an end-to-end head (``compare_end2end``)."""

    def compare(ref, out, conf, iou, label):
        return compare_end2end(ref, out, conf, tol, label, iou_min, max_unmatched)

    return compare


def head_path(model) -> str:
    """Module path of the detection head (``model.23``)."""
    return f"model.{len(model.model) - 1}"


def head_decode_nodes(g, model) -> list[str]:
    """The ops of the head's own scope in graph ``g`` (``attn_yolo.export.int8.Graph``), none of its convs: the box
    decode, the scores' sigmoid, the top-k and the gathers that build the ``(B, max_det, 6)`` rows, whose class
    indices and coordinates an 8-bit tensor cannot hold. Kept float by ``export_int8(keep_head=True)``."""
    path = head_path(model)
    out = []
    for n in g.op:
        if g.kind == "openvino":
            own = n.removeprefix("__module.").split("/")[0] == path
        else:
            own = [s for s in n.strip("/").split("/")[:-1]] == [path]
        if own and g.op[n] not in ("Constant", "Parameter"):
            out.append(n)
    return out
