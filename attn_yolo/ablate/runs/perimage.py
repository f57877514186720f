"""The per-image record of a run: Ultralytics' final validation of best.pt kept image by image, stored as an .npz.

What it keeps, per validation image, is exactly what Ultralytics' ``DetectionValidator`` computes its metrics from:

- every prediction: its image, class, confidence, TP flags at the 10 IoU thresholds 0.50:0.95 (Ultralytics' own
  matcher), and its box in pixels of the original image;
- every ground-truth box: its image, class, box and area in pixels of the original image;
- every prediction's COCO status per object size (small / medium / large): TP, FP or ignored at each IoU threshold,
  from pycocotools' own matcher on those boxes. COCO evaluates each size range with its own matching: ground truth
  outside the range is ignored, a prediction matched to ignored ground truth is ignored, and so is an unmatched
  prediction whose own box lies outside the range (COCO 2014 detection evaluation; areas 0-32², 32²-96², 96²-∞ px).

``recompute`` turns a record back into mAP50 / mAP50-95 / per-class AP with Ultralytics' ``ap_per_class``; it equals
what Ultralytics reported for the run. ``attn_yolo.ablate.statistics.weighted_ap`` computes the same metrics, and the size APs,
under image weights (the bootstrap). ``simulate_val_set`` / ``simulate_run`` make records with a known structure
for tests and the benchmark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path

import numpy as np

from attn_yolo.files import atomic_write
from attn_yolo.ultralytics_api.training import PerImageTrainer, PerImageValidator

PERIMAGE_NAME = "perimage.npz"  # in the run folder
RECORD_VERSION = 1
IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
# COCO's object-size ranges: (name, lowest area, highest area) in px² of the original image, bounds inclusive.
SIZE_RANGES = (("small", 0.0, 32.0**2), ("medium", 32.0**2, 96.0**2), ("large", 96.0**2, 1e5**2))
SIZES = tuple(name for name, _, _ in SIZE_RANGES)
# size_status codes
IGNORED, FP, TP = 0, 1, 2


class RecordError(ValueError):
    """A per-image record file is missing, unreadable or inconsistent."""


@dataclasses.dataclass
class Record:
    """The per-image record of one run (see the module docstring). N predictions, M ground-truth boxes.

    Attributes:
        names: class names, index = class id.
        images: validation image files, in validation order; index = image id.
        pred_img, pred_cls: (N,) int image and class of each prediction, predictions grouped by image.
        pred_conf: (N,) float32 confidence.
        pred_tp: (N, 10) bool, Ultralytics' TP flags at IoU 0.50:0.95.
        gt_img, gt_cls: (M,) int image and class of each ground-truth box.
        gt_area: (M,) float64 area in px² of the original image.
        size_status: (N, 3, 10) uint8 COCO status (IGNORED / FP / TP) per size range and IoU threshold, or None.
        pred_box, gt_box: (N, 4) / (M, 4) float32 xyxy boxes in px of the original image, or None (simulated).
        reported: metrics Ultralytics reported for this validation (``map50``, ``map50_95``), may be empty.
    """

    names: list[str]
    images: list[str]
    pred_img: np.ndarray
    pred_cls: np.ndarray
    pred_conf: np.ndarray
    pred_tp: np.ndarray
    gt_img: np.ndarray
    gt_cls: np.ndarray
    gt_area: np.ndarray
    size_status: np.ndarray | None = None
    pred_box: np.ndarray | None = None
    gt_box: np.ndarray | None = None
    reported: dict = dataclasses.field(default_factory=dict)

    @property
    def n_images(self) -> int:
        return len(self.images)

    @property
    def nc(self) -> int:
        return len(self.names)


# ----------------------------------------------------------------------------------------------------- storage

_ARRAYS = ("pred_img", "pred_cls", "pred_conf", "pred_tp", "gt_img", "gt_cls", "gt_area")
_OPTIONAL = ("size_status", "pred_box", "gt_box")


def save_record(record: Record, path: str | Path) -> Path:
    """Write ``record`` as a compressed .npz (atomically: never a half-written file). Returns the path."""
    path = Path(path)
    arrays = {k: getattr(record, k) for k in _ARRAYS}
    arrays |= {k: getattr(record, k) for k in _OPTIONAL if getattr(record, k) is not None}
    arrays |= {
        "version": np.array(RECORD_VERSION),
        "names": np.array(record.names, dtype=str),
        "images": np.array(record.images, dtype=str),
        "reported_keys": np.array(list(record.reported), dtype=str),
        "reported_values": np.array(list(record.reported.values()), dtype=np.float64),
    }

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)

    atomic_write(path, write)
    return path


def load_record(path: str | Path) -> Record:
    """Read a record written by ``save_record``.

    Raises:
        RecordError: the file is missing, not a record, of another version, or its arrays disagree in length.
    """
    path = Path(path)
    if not path.is_file():
        raise RecordError(f"{path}: no per-image record")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise RecordError(f"{path}: not a readable .npz ({type(e).__name__}: {e})") from e
    missing = [k for k in (*_ARRAYS, "version", "names", "images") if k not in data]
    if missing:
        raise RecordError(f"{path}: not a per-image record (missing {', '.join(missing)})")
    if int(data["version"]) != RECORD_VERSION:
        raise RecordError(f"{path}: record version {int(data['version'])}, this attn-yolo reads {RECORD_VERSION}")
    keys = data.get("reported_keys", np.zeros(0, str)).tolist()
    rec = Record(
        names=data["names"].tolist(), images=data["images"].tolist(),
        **{k: data[k] for k in _ARRAYS}, **{k: data.get(k) for k in _OPTIONAL},
        reported=dict(zip(keys, data.get("reported_values", np.zeros(0)).tolist())),
    )  # fmt: skip
    n, m = len(rec.pred_img), len(rec.gt_img)
    bad = [k for k in ("pred_cls", "pred_conf", "pred_tp", "size_status", "pred_box") if
           getattr(rec, k) is not None and len(getattr(rec, k)) != n]
    bad += [k for k in ("gt_cls", "gt_area", "gt_box") if getattr(rec, k) is not None and len(getattr(rec, k)) != m]
    if bad:
        raise RecordError(f"{path}: arrays {', '.join(bad)} do not match the number of predictions / boxes")
    return rec


# ----------------------------------------------------------------------------------------------------- capture


class RecordingValidator(PerImageValidator):
    """Ultralytics' ``DetectionValidator`` that also keeps its per-image matching results in ``self.per_image``.

    Only a final or standalone validation (not the per-epoch ones during training) is kept. Each entry holds the
    image file, and as numpy arrays: ``tp`` (N, 10) from Ultralytics' per-image matching, ``conf``, ``cls``, the
    predicted boxes and the ground-truth classes and boxes, scaled to the original image (xyxy px)
    (``attn_yolo.ultralytics_api.training.image_entry``).
    """


class RecordingTrainer(PerImageTrainer):
    """Ultralytics' ``DetectionTrainer`` whose validator is a ``RecordingValidator``: after ``train()``,
    ``trainer.validator.per_image`` holds the final validation of best.pt image by image."""

    validator_class = RecordingValidator


def record_from_validator(validator: RecordingValidator, reported: dict | None = None) -> Record:
    """The ``Record`` of a ``RecordingValidator``'s last final/standalone validation.

    Args:
        validator: a validator that has run (``per_image`` filled).
        reported: Ultralytics' box metrics of that validation (``map50``, ``map50_95``, ...): stored, and the
            record's own mAP must equal them.

    Raises:
        RecordError: the validator kept nothing (it only ran per-epoch validations, or it ran on another rank), or
            the mAP recomputed from the record differs from ``reported``.
    """
    images = getattr(validator, "per_image", None)
    if not images:
        raise RecordError("the validator kept no per-image results (no final validation ran in this process)")
    counts = [len(im["conf"]) for im in images]
    gcounts = [len(im["gt_cls"]) for im in images]
    cat = np.concatenate
    pred_box = cat([im["box"] for im in images]).astype(np.float32)
    gt_box = cat([im["gt_box"] for im in images]).astype(np.float32)
    rec = Record(
        names=[str(validator.names[i]) for i in range(len(validator.names))],
        images=[im["file"] for im in images],
        pred_img=np.repeat(np.arange(len(images), dtype=np.int32), counts),
        pred_cls=cat([im["cls"] for im in images]).astype(np.int32),
        pred_conf=cat([im["conf"] for im in images]).astype(np.float32),
        pred_tp=cat([im["tp"] for im in images]).astype(bool).reshape(-1, len(IOU_THRESHOLDS)),
        gt_img=np.repeat(np.arange(len(images), dtype=np.int32), gcounts),
        gt_cls=cat([im["gt_cls"] for im in images]).astype(np.int32),
        gt_area=box_area(gt_box),
        pred_box=pred_box,
        gt_box=gt_box,
        reported=dict(reported or {}),
    )
    got = recompute(rec)
    for k in ("map50", "map50_95"):
        if k in rec.reported and not abs(got[k] - rec.reported[k]) <= 1e-9:
            raise RecordError(f"{k} recomputed from the per-image record is {got[k]!r}, Ultralytics reported "
                              f"{rec.reported[k]!r}")
    rec.size_status = size_status(rec)
    return rec


def box_area(box: np.ndarray) -> np.ndarray:
    """Areas (px², float64) of (K, 4) xyxy boxes: width × height as COCO's ``bbox`` area."""
    b = np.asarray(box, dtype=np.float64).reshape(-1, 4)
    return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])


def coco_inputs(rec: Record) -> tuple[dict, list[dict]]:
    """A record as COCO ground truth (dataset dict) and detections (loadRes list), 1-based ids.

    Image id = record image index + 1, category id = class + 1, annotation / detection id = index + 1 (loadRes
    numbers detections in list order). Boxes are ``[x, y, w, h]`` in px of the original image.
    """
    g = np.asarray(rec.gt_box, dtype=np.float64)
    p = np.asarray(rec.pred_box, dtype=np.float64)
    gt = {
        "images": [{"id": i + 1} for i in range(rec.n_images)],
        "categories": [{"id": c + 1} for c in range(rec.nc)],
        "annotations": [
            {"id": k + 1, "image_id": int(rec.gt_img[k]) + 1, "category_id": int(rec.gt_cls[k]) + 1,
             "bbox": [g[k, 0], g[k, 1], g[k, 2] - g[k, 0], g[k, 3] - g[k, 1]], "area": float(rec.gt_area[k]),
             "iscrowd": 0}
            for k in range(len(g))
        ],
    }  # fmt: skip
    dets = [
        {"image_id": int(rec.pred_img[k]) + 1, "category_id": int(rec.pred_cls[k]) + 1,
         "bbox": [p[k, 0], p[k, 1], p[k, 2] - p[k, 0], p[k, 3] - p[k, 1]], "score": float(rec.pred_conf[k])}
        for k in range(len(p))
    ]  # fmt: skip
    return gt, dets


def size_status(rec: Record) -> np.ndarray:
    """Each prediction's COCO status per size range and IoU threshold: (N, 3, 10) uint8 of IGNORED / FP / TP.

    Runs pycocotools' ``COCOeval.evaluate`` (its own per-range matching, at most 100 detections per image and
    class) on the record's boxes. A prediction beyond the 100 best of its image and class is IGNORED everywhere,
    as COCO drops it.
    """
    status = np.zeros((len(rec.pred_img), len(SIZE_RANGES), len(IOU_THRESHOLDS)), np.uint8)
    if not len(rec.pred_img) or not len(rec.gt_img):  # nothing to match; without ground truth no AP either
        return status
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt_dict, dets = coco_inputs(rec)
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
        gt = COCO()
        gt.dataset = gt_dict
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(dets), "bbox")
        ev.params.areaRng = [[lo, hi] for _, lo, hi in SIZE_RANGES]
        ev.params.maxDets = [100]
        ev.evaluate()
    n_img = len(ev.params.imgIds)
    for i, e in enumerate(ev.evalImgs):
        a = i // n_img % len(SIZE_RANGES)  # evalImgs is ordered [category][area range][image]
        if e is None or not e["dtIds"]:
            continue
        idx = np.asarray(e["dtIds"]) - 1
        matched, ignored = np.asarray(e["dtMatches"]) > 0, np.asarray(e["dtIgnore"]).astype(bool)
        status[idx, a, :] = np.where(ignored, IGNORED, np.where(matched, TP, FP)).T
    return status


# --------------------------------------------------------------------------------------------------- recompute


def recompute(rec: Record) -> dict:
    """mAP50, mAP50-95 and per-class AP50-95 of a record with Ultralytics' ``ap_per_class``.

    Returns:
        ``{"map50", "map50_95", "ap_class"}``; ``ap_class`` is (nc,) with NaN for classes without ground truth.
        Equals Ultralytics' own figures for the validation the record was kept from (same arrays, same function).
    """
    from ultralytics.utils.metrics import ap_per_class

    ap_class = np.full(rec.nc, np.nan)
    if not len(rec.gt_cls):
        return {"map50": 0.0, "map50_95": 0.0, "ap_class": ap_class}
    ap, classes = ap_per_class(rec.pred_tp, rec.pred_conf, rec.pred_cls, rec.gt_cls)[5:7]
    ap_class[classes] = ap.mean(1)
    return {"map50": float(ap[:, 0].mean()), "map50_95": float(ap.mean()), "ap_class": ap_class}


# -------------------------------------------------------------------------------------------------- simulation


@dataclasses.dataclass
class SimulatedValSet:
    """A simulated validation set: ground truth only, shared by every simulated run evaluated on it."""

    n_images: int
    nc: int
    gt_img: np.ndarray
    gt_cls: np.ndarray
    gt_area: np.ndarray
    gt_difficulty: np.ndarray  # hard for every model alike (standard normal)
    gt_affinity: np.ndarray  # suits some models better than others (standard normal): see simulate_run


def simulate_val_set(rng: np.random.Generator, n_images: int, nc: int = 4, gt_per_image: float = 3.0
                     ) -> SimulatedValSet:
    """Ground truth for ``n_images``: Poisson(``gt_per_image``) boxes each, classes uniform over ``nc``, areas
    log-uniform over 8²-300² px² (about a third small, medium and large), a difficulty and an affinity per box."""
    counts = rng.poisson(gt_per_image, n_images)
    m = int(counts.sum())
    return SimulatedValSet(
        n_images=n_images, nc=nc, gt_img=np.repeat(np.arange(n_images, dtype=np.int32), counts),
        gt_cls=rng.integers(0, nc, m).astype(np.int32), gt_area=np.exp(rng.uniform(np.log(64), np.log(9e4), m)),
        gt_difficulty=rng.standard_normal(m), gt_affinity=rng.standard_normal(m),
    )  # fmt: skip


def simulate_run(rng: np.random.Generator, val: SimulatedValSet, skill: float = 1.0, small_skill: float = 0.0,
                 affinity: float = 0.0, run_noise: float = 1.0, fp_per_image: float = 3.0) -> Record:
    """A simulated run's record on ``val``: a detector of the given skill, with TP flags and COCO size statuses.

    A box is found when logit + run_noise·L > 0, logit = skill + small_skill·[small] + affinity·gt_affinity −
    difficulty, L standard logistic noise of this run (so with run_noise 1 it is found with probability
    sigmoid(logit)). The difficulty is shared by all models; the affinity term makes one model's gain depend on which
    boxes the validation set happens to hold (test-set noise common to all seeds), run_noise sets how much each run
    differs in which boxes it finds (test-set noise that differs per seed). It is found at an IoU drawn from
    0.3 + 0.7·Beta(4, 1.5) (TP at the thresholds it reaches, FP at the others), with a higher confidence than the
    Poisson(``fp_per_image``) background false positives. Each prediction matches at most its own box, so its COCO
    status follows from the areas (see the module docstring).

    Args:
        rng: random generator (the run's "seed").
        val: the validation set.
        skill: logit of finding an average box.
        small_skill: extra logit for small boxes (an attention block's claimed gain).
        affinity: weight of the boxes' affinity in the logit.
        run_noise: scale of the run's own randomness in which boxes it finds (0: found iff logit > 0).
        fp_per_image: mean background false positives per image.
    """
    small = val.gt_area <= SIZE_RANGES[0][2]
    logit = skill + small_skill * small + affinity * val.gt_affinity - val.gt_difficulty
    u = rng.random(len(logit))
    found = logit + run_noise * np.log(u / (1 - u)) > 0
    k = int(found.sum())
    iou = 0.3 + 0.7 * rng.beta(4.0, 1.5, k)
    det_conf = 1 / (1 + np.exp(-(logit[found] + rng.normal(0.0, 1.0, k))))
    det_area = val.gt_area[found] * np.exp(rng.normal(0.0, 0.1, k))
    n_fp = rng.poisson(fp_per_image, val.n_images)
    f = int(n_fp.sum())
    fp_img = np.repeat(np.arange(val.n_images, dtype=np.int32), n_fp)
    fp_conf = 1 / (1 + np.exp(-rng.normal(-2.5, 1.2, f)))
    fp_area = np.exp(rng.uniform(np.log(64), np.log(9e4), f))

    img = np.concatenate([val.gt_img[found], fp_img])
    order = np.argsort(img, kind="stable")  # predictions grouped by image, as Ultralytics keeps them
    tp = np.concatenate([iou[:, None] >= IOU_THRESHOLDS - 1e-12, np.zeros((f, 10), bool)])[order]
    area = np.concatenate([det_area, fp_area])[order]
    gt_range = np.concatenate([_size_index(val.gt_area[found]), np.full(f, -1)])[order]
    status = np.zeros((len(img), len(SIZE_RANGES), 10), np.uint8)
    for a, (_, lo, hi) in enumerate(SIZE_RANGES):
        own = ((area >= lo) & (area <= hi))[:, None]
        # matched to a box of this range: TP; matched to another range's box: ignored; unmatched: FP if in range
        status[:, a, :] = np.where(tp, np.where(gt_range[:, None] == a, TP, IGNORED), np.where(own, FP, IGNORED))
    return Record(
        names=[f"class{c}" for c in range(val.nc)], images=[f"im{i}.jpg" for i in range(val.n_images)],
        pred_img=img[order], pred_cls=np.concatenate([val.gt_cls[found], rng.integers(0, val.nc, f)])[order]
        .astype(np.int32), pred_conf=np.concatenate([det_conf, fp_conf])[order].astype(np.float32), pred_tp=tp,
        gt_img=val.gt_img, gt_cls=val.gt_cls, gt_area=val.gt_area, size_status=status,
    )  # fmt: skip


def _size_index(area: np.ndarray) -> np.ndarray:
    """Index into SIZE_RANGES of each area (the first range that holds it; COCO's bounds are inclusive)."""
    out = np.full(len(area), len(SIZE_RANGES) - 1)
    for a in reversed(range(len(SIZE_RANGES))):
        out[area <= SIZE_RANGES[a][2]] = a
    return out
