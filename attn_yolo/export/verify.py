"""Verification of an exported ``.onnx`` against its PyTorch model on real images, and onnxruntime latency.

``verify_onnx`` runs the file with onnxruntime (CPU provider) on real, letterboxed images and compares it with the
PyTorch model (eval mode, same input tensor):

* ``onnx.checker``: ``onnx.checker.check_model(path, full_check=True)`` passes;
* ``raw``: the head output ``(B, 4 + nc, anchors)`` in two parts; each part's max absolute difference relative to its
  output scale must be ≤ the tolerance (fp32: 1e-4; fp16: 1e-2). The scale of the boxes (xywh, pixels) is
  ``max|torch boxes|``; that of the class scores (probabilities) is 1, their range;
* ``nms``: Ultralytics' ``non_max_suppression`` on both raw outputs; detections are matched one-to-one (same class,
  IoU ≥ 0.99), so both sides keep the same count and classes. Only a detection that the measured score difference
  can flip may stay unmatched, and is counted: ``borderline`` (score at the threshold), ``tie`` (two classes, or two
  overlapping boxes, scored within the difference), ``cascade`` (suppressed by or suppressing such a box).

Static exports are checked at the export size, batch 1. Dynamic exports (``dynamic=True``) also at batch 3 and at two
other sizes, one square and one rectangular (``other_sizes``). The report is printed and saved as
``<stem>.verify.json`` next to the ``.onnx``; a failed check makes ``main`` return 1 and keeps the file.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from attn_yolo.checkpoint import atomic_write, check_out, load_yolo
from attn_yolo.images import default_images, read_image, read_sources

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}
"""Maximum ``max|onnx − torch| / output scale`` per raw output part (``RAW_SCALE``), by exported precision."""

IOU_MIN = 0.99
"""Minimum IoU of a matched ONNX detection with its PyTorch detection."""

RAW_SCALE = (
    "max|onnx - torch| / output scale, per head-output part: boxes (rows 0-3, xywh px) / max|torch boxes|; "
    "class scores (rows 4+, probabilities) / 1, their range"
)


def load_images(source=None) -> list[tuple[str, np.ndarray]]:
    """Read ``source`` (image file, folder, glob, or a list of them; None: Ultralytics' ``bus.jpg`` and ``zidane.jpg``)
    as ``[(name, BGR)]``, with the same reader as ``attn-yolo heatmap``.

    Raises:
        ValueError: a path that does not exist, a folder without images, a file OpenCV cannot read.
    """
    return [(p.name, read_image(p)) for p in read_sources(source)]


def letterbox_batch(images: list[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """Letterbox BGR images to exactly ``shape`` (h, w) as Ultralytics' predictor does: ``(B, 3, h, w)`` RGB, [0, 1]."""
    from ultralytics.data.augment import LetterBox

    lb = LetterBox(new_shape=shape, auto=False)
    x = np.stack([lb(image=im)[..., ::-1].transpose(2, 0, 1) for im in images])
    return np.ascontiguousarray(x, dtype=np.float32) / 255.0


def other_sizes(shape: tuple[int, int], stride: int = 32) -> list[tuple[int, int]]:
    """Two sizes besides the export size for a dynamic check: square-ish 1.25x, and rectangular 0.75h x 1.25w.

    Multiples of ``stride``; e.g. 640 → (800, 800), (480, 800); 128 → (160, 160), (96, 160).
    """
    r = lambda v: max(stride, round(v / stride) * stride)  # noqa: E731
    h, w = shape
    return [(r(1.25 * h), r(1.25 * w)), (r(0.75 * h), r(1.25 * w))]


# ------------------------------------------------------------------------------------------------------------- runners
def ort_session(onnx_path, threads: int | None = None):
    """onnxruntime ``InferenceSession`` on the CPU provider (``threads``: intra-op threads, default torch's count)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads or torch.get_num_threads()
    so.log_severity_level = 3
    return ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])


def ort_raw(sess, x: np.ndarray) -> np.ndarray:
    """Run an ONNX detection model on ``x`` ``(B, 3, h, w)``; its first output ``(B, 4 + nc, anchors)`` as float32."""
    return np.asarray(sess.run(None, {sess.get_inputs()[0].name: x})[0], dtype=np.float32)


@torch.inference_mode()
def torch_raw(model: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    """Run the PyTorch detection model (eval) on ``x``; its raw head output ``(B, 4 + nc, anchors)`` as float32."""
    p = next(model.parameters())
    y = model.eval()(torch.from_numpy(x).to(p.device, p.dtype))
    y = y[0] if isinstance(y, (list, tuple)) else y
    return y.float().cpu().numpy()


# ------------------------------------------------------------------------------------------------------------- checks
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
                f"rel boxes {d['boxes']['rel']:.2e} scores {d['scores']['rel']:.2e} (limit {self.limit:.0e}); "
                f"max abs {d['boxes']['max_abs']:.2e} / {d['scores']['max_abs']:.2e}, "
                f"mean abs {d['boxes']['mean_abs']:.2e} / {d['scores']['mean_abs']:.2e}"
            )
        elif self.name == "nms":
            iou = "-" if d["min_iou"] is None else f"{d['min_iou']:.4f}"
            v = (
                f"{d['matched']} matched of {d['n_torch']} torch / {d['n_onnx']} onnx boxes (conf {d['conf']}), "
                f"min IoU {iou} (limit {self.limit}), "
                f"unmatched {d['unmatched_torch'] + d['unmatched_onnx']} (excused: borderline {d['borderline']}, "
                f"tie {d['tie']}, cascade {d['cascade']})"
            )
        else:
            v = ""
        return f"  {self.status:<7}  {self.name:<13} {self.case:<22} {v}"


def compare_raw(ref: np.ndarray, out: np.ndarray, tol: float) -> Check:
    """Compare raw head outputs ``(B, 4 + nc, A)`` in two parts, each relative to its output scale (``RAW_SCALE``).

    Boxes (rows 0-3, xywh in pixels): ``max|Δ| / max|torch boxes|``. Class scores (rows 4+, probabilities):
    ``max|Δ|``, their scale being their range [0, 1]. (An image's largest score can be 1e-3, e.g. for an untrained
    model; relative to that, rounding differences of 1e-7 would read as 1e-4.) Mean absolute differences are reported.
    """
    if ref.shape != out.shape:
        return Check("raw", "", False, math.inf, tol, {"message": f"shape onnx {out.shape} != torch {ref.shape}"})
    parts = {}
    for part, sl in (("boxes", slice(0, 4)), ("scores", slice(4, None))):
        r, o = ref[:, sl].astype(np.float64), out[:, sl].astype(np.float64)
        diff = np.abs(o - r)
        scale = (float(np.abs(r).max()) or 1.0) if part == "boxes" else 1.0
        max_abs = float(diff.max()) if np.isfinite(diff).all() else math.inf
        parts[part] = {"max_abs": max_abs, "mean_abs": float(diff.mean()), "scale": scale, "rel": max_abs / scale}
    rel = max(p["rel"] for p in parts.values())
    return Check("raw", "", rel <= tol, rel, tol, {**parts, "shape": list(ref.shape)})


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


def compare_detections(ref: np.ndarray, out: np.ndarray, conf: float, iou: float, margin: float) -> Check:
    """Compare post-NMS detections of raw outputs ``ref`` (torch) and ``out`` (onnx) ``(B, 4 + nc, A)``, per image.

    NMS is Ultralytics' ``non_max_suppression(conf, iou, max_det=300)``. Detections are matched one-to-one per image
    (Hungarian method on IoU, same class only); a match needs IoU ≥ ``IOU_MIN``. ``margin`` is the score difference
    the raw check allowed (measured, +1e-6). An unmatched detection is excused, and counted, only if a difference of
    ``margin`` can flip it:

    * ``borderline``: its score is within ``margin`` of the threshold (``conf``, or the lowest kept score once
      ``max_det`` is reached);
    * ``tie``: its two best class scores are within ``2 margin`` (the class may flip), or an overlapping same-class
      candidate (IoU > ``iou`` − 0.01) scores within ``2 margin`` of it (NMS may keep either one);
    * ``cascade``: it overlaps a detection excused above (on either side), whose flip changes what NMS suppresses.

    Passes if no detection on either side is left unmatched and unexcused: same count and classes up to those.
    Not run (``Check.not_run``) if nothing was compared: neither side has a detection, or none matched and every one
    was excused (a check that verified no detection is never a pass).
    """
    from scipy.optimize import linear_sum_assignment
    from ultralytics.utils.nms import non_max_suppression

    max_det = 300
    margin = margin + 1e-6
    kw = dict(conf_thres=conf, iou_thres=iou, max_det=max_det, max_time_img=60.0)
    dt = non_max_suppression(torch.from_numpy(ref.copy()), **kw)
    do = non_max_suppression(torch.from_numpy(out.copy()), **kw)
    keys = ("n_torch", "n_onnx", "matched", "borderline", "tie", "cascade", "unmatched_torch", "unmatched_onnx")
    n = dict.fromkeys(keys, 0)
    ious = []  # IoU of each matched pair, and the best same-class IoU of each unexcused unmatched detection
    for k, (a, b) in enumerate(zip(dt, do)):
        a, b = a.double().numpy(), b.double().numpy()
        n["n_torch"] += len(a)
        n["n_onnx"] += len(b)
        m = _iou(a[:, :4], b[:, :4]) * (a[:, 5:6] == b[:, 5][None]) if len(a) and len(b) else np.zeros((len(a), len(b)))
        ri, ci = linear_sum_assignment(-m) if m.size else ([], [])
        good = [(i, j) for i, j in zip(ri, ci) if m[i, j] >= IOU_MIN]
        ious += [m[i, j] for i, j in good]
        n["matched"] += len(good)
        lo = max([conf] + [d[:, 4].min() for d in (a, b) if len(d) == max_det])
        unmatched = {"torch": sorted(set(range(len(a))) - {i for i, _ in good}),
                     "onnx": sorted(set(range(len(b))) - {j for _, j in good})}
        dets, raws, best = {"torch": a, "onnx": b}, {"torch": ref[k], "onnx": out[k]}, {"torch": m, "onnx": m.T}
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
        changed = True
        while changed and left:  # cascades: overlapping an excused detection, transitively
            changed = False
            for side, i in list(left):
                d = dets[side][i]
                if excused and _overlaps(d, np.array(excused), iou).any():
                    n["cascade"] += 1
                    excused.append(d)
                    left.remove((side, i))
                    changed = True
        for side, i in left:
            n[f"unmatched_{side}"] += 1
            ious.append(float(best[side][i].max()) if best[side].shape[1] else 0.0)
    min_iou = float(min(ious)) if ious else None  # None: no detection to compare
    top = float(max(ref[:, 4:].max(), out[:, 4:].max())) if ref.shape[1] > 4 and ref.size else 0.0
    detail = {"conf": conf, "iou": iou, **n, "min_iou": min_iou, "score_margin": margin, "max_score": top}
    if n["n_torch"] == 0 and n["n_onnx"] == 0:
        why = (f"no box scores above conf={conf} in the torch or the onnx output (highest class score {top:.3g}), so "
               f"there are no detections to compare; to compare them, pass a conf= below {top:.3g}")
        return Check("nms", "", False, None, IOU_MIN, detail, not_run=why)
    passed = n["unmatched_torch"] == 0 and n["unmatched_onnx"] == 0
    if passed and n["matched"] == 0:  # every detection excused as a near tie or borderline score: nothing verified
        why = (f"none of the {n['n_torch']} torch / {n['n_onnx']} onnx detections could be matched: each one's score "
               f"is within the raw check's margin ({margin:.2g}) of a threshold or a rival, so NMS may keep either "
               f"and nothing was verified; to compare them, pass a higher conf= (fewer, clearer detections)")
        return Check("nms", "", False, None, IOU_MIN, detail, not_run=why)
    return Check("nms", "", passed, min_iou, IOU_MIN, detail)


# -------------------------------------------------------------------------------------------------------------- verify
@dataclass
class VerifyReport:
    """Result of ``verify_onnx``: the file, how it was exported, the tolerances and every check."""

    onnx: str
    model: str
    opset: int
    dynamic: bool
    precision: str
    export_imgsz: list[int]
    images: list[str]
    tolerance: dict
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No check that ran failed (checks not run count neither way; ``summary`` states them)."""
        return not self.failures

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed and not c.not_run]

    @property
    def not_run(self) -> list[Check]:
        """The checks that compared nothing (e.g. ``nms`` when no box scores above ``conf``)."""
        return [c for c in self.checks if c.not_run]

    def to_dict(self) -> dict:
        ran = len(self.checks) - len(self.not_run)
        return {**asdict(self), "passed": self.passed, "checks_run": ran, "checks_not_run": len(self.not_run)}

    def save(self, path=None, overwrite: bool = False) -> Path:
        """Write the report as JSON (default ``<onnx stem>.verify.json`` next to the file); return its path.

        Raises:
            FileExistsError: the file exists and not ``overwrite``.
        """
        path = Path(path) if path else report_path(self.onnx)
        check_out(path, overwrite)
        text = json.dumps(self.to_dict(), indent=2, default=float)
        atomic_write(path, lambda p: Path(p).write_text(text))
        return path

    def summary(self) -> str:
        """The printed report: header, one line per check, verdict with the tolerances."""
        h, w = self.export_imgsz
        kind = "dynamic" if self.dynamic else "static"
        head = (
            f"ONNX verification: {self.onnx} against {self.model}\n"
            f"  opset {self.opset}, {kind}, {self.precision}, export size {h}x{w}, images: {', '.join(self.images)}"
        )
        t = self.tolerance
        ran = len(self.checks) - len(self.not_run)
        tail = f"{'PASSED' if self.passed else 'FAILED'}: {ran - len(self.failures)}/{ran} checks"
        empty = [c for c in self.not_run if not c.detail.get("n_torch", 0) + c.detail.get("n_onnx", 0)]
        if empty:
            top = max(c.detail.get("max_score", 0.0) for c in empty)
            tail += (f", {len(empty)} not run: no detections above conf={t['conf']} to compare (highest class "
                     f"score {top:.3g}; rerun with a conf= below it to compare them)")
        if len(empty) < len(self.not_run):
            tail += (f", {len(self.not_run) - len(empty)} not run: every detection within the score margin of a tie, "
                     f"none matched (rerun with a higher conf=)")
        tail += (
            f". Tolerance: raw {t['raw_rel']:.0e} ({t['raw_definition']}); NMS conf={t['conf']} iou={t['iou']}, "
            f"matched IoU >= {t['iou_min']}, same class."
        )
        if self.failures:
            more = f"; and {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
            tail += "\nFailed: " + "; ".join(_failure_text(c) for c in self.failures[:3]) + more
        return "\n".join([head, *(c.line() for c in self.checks), tail])


def _failure_text(c: Check) -> str:
    d = c.detail
    if c.name == "raw" and "boxes" in d:
        return (
            f"raw {c.case}: rel diff {c.value:.3g} > {c.limit:.0e} (max abs: boxes {d['boxes']['max_abs']:.3g} px, "
            f"scores {d['scores']['max_abs']:.3g})"
        )
    if c.name == "nms":
        return (
            f"nms {c.case}: {d['unmatched_torch']} torch / {d['unmatched_onnx']} onnx detections unmatched "
            f"(IoU < {IOU_MIN} or different class), min IoU {d['min_iou']:.3g}"
        )
    return f"{c.name} {c.case}: {d.get('message', '')}"


def report_path(onnx_path) -> Path:
    """Where the verification report of ``onnx_path`` is saved: ``<stem>.verify.json`` next to it."""
    return Path(onnx_path).with_suffix(".verify.json")


def onnx_info(onnx_path) -> dict:
    """How an ONNX file was exported: opset, dynamic axes, precision (fp16 if a weight is), export size, stride.

    Raises:
        ValueError: the file is not an ONNX model with an image input ``(B, 3, H, W)``.
    """
    import onnx

    try:
        m = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as e:  # google.protobuf DecodeError, or onnx's own errors
        raise ValueError(f"{str(onnx_path)!r} is not an ONNX model file: {type(e).__name__}: {e}") from None
    if not m.graph.input or len(m.graph.input[0].type.tensor_type.shape.dim) != 4:
        raise ValueError(f"{str(onnx_path)!r} is not an ONNX detection model: expected an image input (B, 3, H, W)")
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dynamic = any(d.dim_param or not d.dim_value for d in dims)
    meta = {p.key: p.value for p in m.metadata_props}
    if "imgsz" in meta:  # Ultralytics' metadata
        imgsz = [int(v) for v in json.loads(meta["imgsz"])]
    else:
        imgsz = [dims[2].dim_value or 640, dims[3].dim_value or 640]
    fp16 = any(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    stride = int(meta.get("stride", 32))
    precision = "fp16" if fp16 else "fp32"
    return {"opset": opset, "dynamic": dynamic, "precision": precision, "imgsz": imgsz, "stride": stride}


def verify_onnx(
    onnx_path,
    model,
    source=None,
    conf: float = 0.25,
    iou: float = 0.7,
    tol: float | None = None,
    sizes: list[tuple[int, int]] | None = None,
    trust: bool = False,
) -> VerifyReport:
    """Verify an exported detection ``.onnx`` against its PyTorch ``model`` (path, YAML or ``YOLO``).

    Args:
        onnx_path: the exported file; opset, dynamic axes, precision and export size are read from it.
        model: the PyTorch model it was exported from.
        source: images (file, directory or list); None: the first 2 validation images of the model's own dataset
            when it is at hand (``images.default_images``), else Ultralytics' ``bus.jpg`` and ``zidane.jpg``.
        conf, iou: NMS thresholds of the detection check.
        tol: raw-output tolerance; None: ``TOLERANCE[precision]``.
        sizes: extra (h, w) sizes for a dynamic file; None: ``other_sizes(export size)``.
        trust: unpickle a checkpoint path fully (may run code it contains); else weights-only.

    Returns:
        VerifyReport: ``.passed``, ``.checks``, ``.summary()``, ``.save()``. Checks: ``onnx.checker``; per case
        (batch x size) ``raw`` and ``nms``. Static: batch 1 at the export size (each image). Dynamic: also batch 3
        (images cycled) at the export size, batch 1 at each extra size, batch 3 at the last (rectangular) one.
    """
    import onnx

    info = onnx_info(onnx_path)
    tol = TOLERANCE[info["precision"]] if tol is None else tol
    yolo = load_yolo(model, trust=trust)
    images = load_images(default_images(yolo)[0] if source is None else source)
    report = VerifyReport(
        onnx=str(onnx_path),
        model=str(getattr(model, "ckpt_path", None) or getattr(model, "model_name", None) or model),
        opset=info["opset"],
        dynamic=info["dynamic"],
        precision=info["precision"],
        export_imgsz=info["imgsz"],
        images=[n for n, _ in images],
        tolerance={"raw_rel": tol, "raw_definition": RAW_SCALE, "conf": conf, "iou": iou, "iou_min": IOU_MIN},
    )
    try:
        onnx.checker.check_model(str(onnx_path), full_check=True)
        report.checks.append(Check("onnx.checker", "", True, detail={"message": "check_model(full_check=True) ok"}))
    except Exception as e:  # onnx.checker.ValidationError, shape inference errors
        report.checks.append(Check("onnx.checker", "", False, detail={"message": f"{type(e).__name__}: {e}"}))

    shape = tuple(info["imgsz"])
    cases = [(1, shape)]
    if info["dynamic"]:
        extra = other_sizes(shape, info["stride"]) if sizes is None else [tuple(s) for s in sizes]
        cases += [(3, shape), *((1, s) for s in extra), (3, extra[-1])]
    torch_model = yolo.model
    try:
        sess = ort_session(onnx_path)
    except Exception as e:  # onnxruntime cannot load the file (unknown op, bad graph)
        report.checks.append(Check("onnxruntime", "", False, detail={"message": f"{type(e).__name__}: {e}"}))
        return report
    for batch, hw in cases:
        groups = [[im] for _, im in images] if batch == 1 else [[images[i % len(images)][1] for i in range(batch)]]
        case = f"b{batch} {hw[0]}x{hw[1]}" + (f" ({len(groups)} images)" if batch == 1 else "")
        ref, out = [], []
        try:
            for g in groups:
                x = letterbox_batch(g, hw)
                ref.append(torch_raw(torch_model, x))
                out.append(ort_raw(sess, x))
        except Exception as e:  # onnxruntime error at this shape (e.g. a Reshape frozen at the export size)
            report.checks.append(Check("run", case, False, detail={"message": f"{type(e).__name__}: {e}"}))
            continue
        ref, out = np.concatenate(ref), np.concatenate(out)
        raw = compare_raw(ref, out, tol)
        raw.case = case
        report.checks.append(raw)
        if "scores" in raw.detail:
            sc = raw.detail["scores"]  # score flips allowed up to the measured difference, at most the tolerance
            nms = compare_detections(ref, out, conf, iou, min(sc["max_abs"], tol * sc["scale"]))
            nms.case = case
            report.checks.append(nms)
    return report


# ------------------------------------------------------------------------------------------------------------- latency
def onnx_latency_ms(onnx_path, imgsz: int | tuple[int, int] = 640, repeats: int = 50, warmup: int = 5,
                    batch: int = 1, threads: int | None = None) -> float:
    """Median wall time (ms) of one onnxruntime CPU inference of ``onnx_path`` on a ``(batch, 3, h, w)`` input.

    The input is uniform noise in [0, 1] (fixed seed); ``warmup`` untimed runs first. ``threads``: intra-op threads
    (default torch's thread count, so it compares with PyTorch in the same process).

    Raises:
        ValueError: ``imgsz``/``batch`` differ from a static file's input shape, or ``repeats < 1``.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r}; expected an int >= 1")
    h, w = (imgsz, imgsz) if isinstance(imgsz, int) else tuple(imgsz)
    sess = ort_session(onnx_path, threads)
    inp = sess.get_inputs()[0]
    fixed = [d if isinstance(d, int) else None for d in inp.shape]
    want = [batch, 3, h, w]
    if any(f is not None and f != v for f, v in zip(fixed, want)):
        raise ValueError(f"{onnx_path}: static input shape {inp.shape}, asked for {want}; export with dynamic=True")
    x = np.random.default_rng(0).random(want, dtype=np.float32)
    for _ in range(warmup):
        sess.run(None, {inp.name: x})
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sess.run(None, {inp.name: x})
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))
