"""Deterministic synthetic detection dataset ("synthetic-shapes") for quick, offline ablations.

Draws 4 target classes (circle, square, triangle, cross; 12-40 % of the image side, random colour and fill, upright
within +-20 degrees, 4-10 per image, partial overlaps and occluders) on cluttered, textured backgrounds with
distractors (stars, bars, elongated ellipses, arcs, scribbles, cut-off shape fragments, blobs coloured like a nearby
target) and writes an Ultralytics-format detection dataset: ``images/{train,val}/*.jpg``, ``labels/{train,val}/*.txt``
(``cls cx cy w h``, normalised to [0, 1]) and a ``data.yaml``. Every image is drawn from its own ``numpy`` Generator
seeded by ``(seed, split, index)``, so equal arguments give byte-identical files and a bigger split extends a smaller
one. Depends only on numpy, OpenCV and PyYAML. Stock yolo11n trained from scratch with QUICK_TRAIN_ARGS reaches mAP50
about 0.62 on the default val split in about 2 CPU-minutes.

Named settings (``SETTINGS``; ``data: <name>`` in an ablation config) give datasets with a known answer:
``synthetic-key`` draws a key marker in half of the images, and the marker decides which shapes are targets, so a
detector must read a cue that may be anywhere in the image (planted for global channel attention);
``synthetic-key-decoy`` draws the same images with every shape a target (its null twin).

Example:
    >>> from attn_yolo.synthetic import default_data_yaml, QUICK_TRAIN_ARGS
    >>> from ultralytics import YOLO
    >>> YOLO("yolo11n.yaml").train(data=str(default_data_yaml()), device="cpu", **QUICK_TRAIN_ARGS)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import yaml

NAME = "synthetic-shapes"
VERSION = 1  # bump whenever the drawn content for given arguments changes (invalidates caches)
CLASS_NAMES = ("circle", "square", "triangle", "cross")
EXTRA_SHAPES = ("star",)  # drawn only as (partial) distractors

# Generator defaults, used by default_data_yaml() and data/synthetic-shapes.yaml.
N_TRAIN = 1000  # images
N_VAL = 200  # images
IMGSZ = 128  # image side, pixels
SIZE_RANGE = (0.12, 0.40)  # object side as a fraction of the image side (log-uniform)
CLUTTER = 0.7  # background/distractor strength, 0 (plain) .. 1 (heavy)
JPEG_QUALITY = 92
OBJECTS = (4, 10)  # (min, max) targets attempted per image; fewer fit when placement fails
MAX_ROTATION = 20.0  # degrees; targets stay roughly upright (squares are not diamonds), distractors turn freely

# Recommended Ultralytics train() arguments for the quick default ablation: stock yolo11n.yaml from scratch reaches
# mAP50 ~0.6 on the default val split in ~2 min on one CPU core (Ultralytics trains with cpu_count - 1 torch threads,
# i.e. 1 on a 2-core machine). Device, workers, seed, project/name etc. are left to the caller.
QUICK_TRAIN_ARGS = {
    "epochs": 2,  # x N_TRAIN images = 2000 image passes
    "imgsz": IMGSZ,
    "batch": 8,
    "nbs": 8,  # nominal batch = batch: one optimizer step per batch (default 64 would accumulate 8 batches)
    "optimizer": "AdamW",
    "lr0": 0.003,
    "warmup_epochs": 0.3,  # ~40 iterations; note warmup_bias_lr (0.1) applies during warmup
    "mosaic": 0.0,  # every training image already holds 4-10 objects
    "close_mosaic": 0,
    "scale": 0.0,  # train and val come from the same generator; augmentation only slows a 2-epoch run
    "translate": 0.0,
    "hsv_h": 0.0,
    "hsv_s": 0.0,
    "hsv_v": 0.0,
    "val": False,  # skip per-epoch validation; Ultralytics still validates after the last epoch
}

_SPLIT_IDS = {"train": 0, "val": 1}
KEY_SIDE = 0.11  # key marker side as a fraction of the image side
KEYED = (0, 1)  # key "select": the classes that are targets where the marker is (elsewhere the others are)


def _unit_polygon(name: str) -> np.ndarray:
    """Outline of a target shape in unit coordinates (extent about [-1, 1]).

    Args:
        name: one of CLASS_NAMES.

    Returns:
        (N, 2) float64 array of polygon vertices.
    """
    if name == "circle":
        t = np.linspace(0, 2 * np.pi, 48, endpoint=False)
        return np.stack([np.cos(t), np.sin(t)], 1)
    if name == "square":
        return 0.85 * np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float)
    if name == "triangle":
        t = np.deg2rad([-90, 30, 150])
        return np.stack([np.cos(t), np.sin(t) + 0.25], 1)
    if name == "cross":
        a = 0.34
        q = [(a, -1), (a, -a), (1, -a), (1, a), (a, a), (a, 1)]
        return np.array(q + [(-x, -y) for x, y in q], float)
    if name == "star":
        t = np.linspace(-np.pi / 2, 1.5 * np.pi, 10, endpoint=False)
        r = np.where(np.arange(10) % 2 == 0, 1.0, 0.45)
        return np.stack([r * np.cos(t), r * np.sin(t)], 1)
    raise ValueError(f"unknown shape {name!r}")


ALL = CLASS_NAMES + EXTRA_SHAPES
_UNIT = {n: _unit_polygon(n) for n in ALL}


def _place(poly: np.ndarray, half: float, angle: float, centre: tuple[float, float]) -> np.ndarray:
    """Scale (pixels), rotate (radians) and translate (pixels) a unit polygon."""
    c, s = np.cos(angle), np.sin(angle)
    return poly @ np.array([[c, s], [-s, c]]) * half + np.asarray(centre)


def _random_colour(rng: np.random.Generator, sat=(0.45, 1.0), val=(0.35, 1.0)) -> np.ndarray:
    """Random BGR colour (float32, 0..255) drawn in HSV space."""
    hsv = np.uint8([[[rng.integers(0, 180), 255 * rng.uniform(*sat), 255 * rng.uniform(*val)]]])
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0].astype(np.float32)


def _fill(rng: np.random.Generator, colour: np.ndarray, h: int, w: int) -> np.ndarray:
    """Paint for one shape: solid (60%), linear gradient (25%) or noisy texture (15%); (h, w, 3) float32."""
    u = rng.random()
    if u < 0.6:
        return np.broadcast_to(colour, (h, w, 3))
    if u < 0.85:
        a = rng.uniform(0, 2 * np.pi)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        ramp = (np.cos(a) * xx + np.sin(a) * yy) / max(h, w)  # about -1..1 across the image
        return np.clip(colour * (1 + 0.35 * ramp[..., None]), 0, 255)
    noise = cv2.resize(rng.normal(0, 30, (8, 8, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_NEAREST)
    return np.clip(colour + noise, 0, 255)


def _paint(img: np.ndarray, polys: list[np.ndarray], paint, *, thickness: int = 0, closed=True, alpha=1.0):
    """Alpha-blend ``paint`` into ``img`` (in place) through an anti-aliased polygon mask.

    Args:
        img: (H, W, 3) float32 canvas, 0..255.
        polys: polygons in pixel coordinates.
        paint: BGR colour (3,) or (H, W, 3) array.
        thickness: 0 fills the polygons, > 0 draws their outlines this many pixels wide.
        closed: close outlines (only with thickness > 0).
        alpha: opacity in [0, 1].
    """
    h, w = img.shape[:2]
    allp = np.concatenate(polys)
    pad = thickness + 2
    x0, y0 = np.clip(np.floor(allp.min(0)).astype(int) - pad, 0, (w, h))
    x1, y1 = np.clip(np.ceil(allp.max(0)).astype(int) + pad, 0, (w, h))
    if x1 <= x0 or y1 <= y0:
        return  # entirely outside the image
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)  # work on the bounding rectangle only
    pts = [np.round((p - (x0, y0)) * 16).astype(np.int32) for p in polys]  # 4 fractional bits
    if thickness:
        cv2.polylines(mask, pts, closed, 255, thickness, cv2.LINE_AA, shift=4)
    else:
        cv2.fillPoly(mask, pts, 255, cv2.LINE_AA, shift=4)
    a = mask[..., None].astype(np.float32) * (alpha / 255)
    if np.ndim(paint) == 3:
        paint = paint[y0:y1, x0:x1]
    roi = img[y0:y1, x0:x1]
    roi *= 1 - a
    roi += a * paint


def _background(rng: np.random.Generator, h: int, w: int, clutter: float) -> np.ndarray:
    """Textured clutter: two-colour gradient, low-frequency noise, lines and translucent blobs; float32 (h, w, 3).

    ``clutter`` scales the noise amplitude and the number of lines and blobs (0 leaves a plain gradient).
    """
    c1, c2 = _random_colour(rng, (0.0, 0.6), (0.2, 0.9)), _random_colour(rng, (0.0, 0.6), (0.2, 0.9))
    a = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    t = np.clip(0.5 + (np.cos(a) * (xx - w / 2) + np.sin(a) * (yy - h / 2)) / max(h, w), 0, 1)[..., None]
    img = c1 * (1 - t) + c2 * t
    g = int(rng.integers(3, 9))
    img += cv2.resize(rng.normal(0, 22 * clutter, (g, g, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    for _ in range(round(rng.integers(2, 9) * clutter)):  # random lines
        p = rng.uniform(-0.1, 1.1, (2, 2)) * (w, h)
        _paint(img, [p], _random_colour(rng), thickness=int(rng.integers(1, 4)), closed=False)
    for _ in range(round(rng.integers(2, 7) * clutter)):  # translucent blobs
        _paint(img, [_ellipse(rng, h, w, rng.uniform(0.05, 0.25) * max(h, w), (1.8, 4))], _random_colour(rng),
               alpha=rng.uniform(0.2, 0.6))
    return img


def _ellipse(rng: np.random.Generator, h: int, w: int, r: float, aspect: tuple[float, float]) -> np.ndarray:
    """Random rotated ellipse polygon of major semi-axis ``r`` pixels anywhere in the image."""
    t = np.linspace(0, 2 * np.pi, 36, endpoint=False)
    unit = np.stack([np.cos(t), np.sin(t) / rng.uniform(*aspect)], 1)
    return _place(unit, r, rng.uniform(0, np.pi), rng.uniform(0, 1, 2) * (w, h))


def _distractor(rng: np.random.Generator, img: np.ndarray, size: float, centre=None, colour=None):
    """Draw one non-target thing: elongated ellipse, bar, thick arc, scribble, star or a partial (cut) shape.

    Args:
        rng: random generator.
        img: (H, W, 3) float32 canvas, modified in place.
        size: rough extent in pixels.
        centre: (x, y) pixels; random when None.
        colour: BGR; random when None.
    """
    h, w = img.shape[:2]
    centre = rng.uniform(0, 1, 2) * (w, h) if centre is None else np.asarray(centre, float)
    colour = _random_colour(rng) if colour is None else colour
    kind = rng.choice(6, p=[0.2, 0.2, 0.15, 0.15, 0.2, 0.1])
    angle = rng.uniform(0, np.pi)
    if kind == 0:  # elongated ellipse (never circle-like)
        t = np.linspace(0, 2 * np.pi, 36, endpoint=False)
        _paint(img, [_place(np.stack([np.cos(t), np.sin(t) / rng.uniform(2.5, 5)], 1), size / 2, angle, centre)],
               _fill(rng, colour, h, w))
    elif kind == 1:  # bar
        bar = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float) * (1, 1 / rng.uniform(3, 8))
        _paint(img, [_place(bar, size / 2, angle, centre)], _fill(rng, colour, h, w))
    elif kind == 2:  # thick arc
        t = np.linspace(0, rng.uniform(0.6, 1.4) * np.pi, 24)
        arc = _place(np.stack([np.cos(t), np.sin(t)], 1), size / 2, angle, centre)
        _paint(img, [arc], colour, thickness=max(1, int(size * rng.uniform(0.06, 0.15))), closed=False)
    elif kind == 3:  # scribble
        pts = centre + np.cumsum(rng.normal(0, size / 4, (int(rng.integers(3, 7)), 2)), 0)
        _paint(img, [pts], colour, thickness=int(rng.integers(1, 4)), closed=False)
    elif kind == 4:  # complete shape of a non-target kind
        poly = _place(_UNIT[EXTRA_SHAPES[rng.integers(len(EXTRA_SHAPES))]], size / 2, angle, centre)
        _paint(img, [poly], _fill(rng, colour, h, w))
    else:  # partial shape: a thin sliver of a shape, cut by a half-plane, so it is clearly incomplete
        poly = _place(_UNIT[ALL[rng.integers(len(ALL))]], size / 2, angle, centre)
        keep = np.zeros(img.shape[:2], np.float32)
        cv2.fillPoly(keep, [np.round(poly).astype(np.int32)], 1.0)
        n = np.array([np.cos(angle), np.sin(angle)])
        yy, xx = np.mgrid[0:h, 0:w]
        keep *= ((xx - centre[0]) * n[0] + (yy - centre[1]) * n[1]) > size * rng.uniform(0.15, 0.3)
        img[:] = img * (1 - keep[..., None]) + keep[..., None] * colour


def _iou_and_cover(box: np.ndarray, boxes: list[np.ndarray]) -> tuple[float, float]:
    """Max IoU and max intersection/min-area between ``box`` and ``boxes`` (xyxy, pixels)."""
    iou = cover = 0.0
    for b in boxes:
        iw = max(0.0, min(box[2], b[2]) - max(box[0], b[0]))
        ih = max(0.0, min(box[3], b[3]) - max(box[1], b[1]))
        inter = iw * ih
        a1, a2 = (box[2] - box[0]) * (box[3] - box[1]), (b[2] - b[0]) * (b[3] - b[1])
        iou, cover = max(iou, inter / (a1 + a2 - inter)), max(cover, inter / min(a1, a2))
    return iou, cover


def _key(rng: np.random.Generator, img: np.ndarray, boxes: list[np.ndarray], side: float) -> None:
    """Draw the key marker, a black-and-white 4 × 4 checkerboard of ``side`` pixels, where it covers no target box."""
    h, w = img.shape[:2]
    for _try in range(30):
        x0, y0 = rng.uniform(0, 1, 2) * (w - side, h - side)
        if _iou_and_cover(np.array([x0, y0, x0 + side, y0 + side]), boxes)[1] == 0:
            break
    cells = (np.add.outer(np.arange(4), np.arange(4)) % 2 * 255).astype(np.float32)
    patch = cv2.resize(cells, (round(side), round(side)), interpolation=cv2.INTER_NEAREST)
    y, x = round(y0), round(x0)
    img[y:y + patch.shape[0], x:x + patch.shape[1]] = patch[:h - y, :w - x, None]


def render(rng: np.random.Generator, imgsz: int = IMGSZ, size_range=SIZE_RANGE, objects=None, clutter=CLUTTER,
           key: str | None = None, key_side: float = KEY_SIDE):
    """Draw one image and its labels.

    Args:
        rng: random generator (all randomness comes from it).
        imgsz: image side, pixels.
        size_range: (min, max) object side as a fraction of ``imgsz``; sampled log-uniformly.
        objects: (min, max) number of targets attempted per image; default OBJECTS.
        clutter: background/distractor strength, 0 (plain gradient, isolated shapes) .. 1 (heavy); default CLUTTER.
        key: None, or a key marker (a small checkerboard, see ``_key``) drawn in half of the images, anywhere. With
            ``"select"`` the marker decides which shapes are targets: where it is, circles and squares (``KEYED``)
            are labelled and triangles and crosses are drawn but not labelled; elsewhere the reverse. Whether a
            shape is a target thus depends on a cue that may be far from it, which a global channel gate (SE, ECA,
            CBAM) reads in one step. With ``"decoy"`` the same marker is drawn and every target is labelled.
        key_side: the marker's side as a fraction of ``imgsz`` (default ``KEY_SIDE``, 14 px at 128).

    Returns:
        (image, labels): uint8 BGR (imgsz, imgsz, 3) and an (N, 5) float64 array ``cls cx cy w h``, normalised.
    """
    h = w = imgsz
    img = _background(rng, h, w, clutter)
    for _ in range(round(rng.integers(0, 3) * clutter)):  # background distractors
        _distractor(rng, img, rng.uniform(0.08, 0.35) * imgsz)

    boxes, labels, objs = [], [], []
    lo, hi = objects or OBJECTS
    for _ in range(rng.integers(lo, hi + 1)):
        cls = int(rng.integers(len(CLASS_NAMES)))
        half = imgsz * np.exp(rng.uniform(*np.log(size_range))) / 2
        for _try in range(20):
            angle = np.deg2rad(rng.uniform(-MAX_ROTATION, MAX_ROTATION))
            poly = _place(_UNIT[CLASS_NAMES[cls]], half, angle, rng.uniform(0, 1, 2) * (w, h))
            full = np.r_[poly.min(0), poly.max(0)]
            box = np.clip(full, 0, [w, h, w, h])
            bw, bh = box[2] - box[0], box[3] - box[1]
            if bw < 3 or bh < 3 or bw * bh < 0.6 * (full[2] - full[0]) * (full[3] - full[1]):
                continue  # mostly outside the image
            iou, cover = _iou_and_cover(box, boxes)
            if iou < 0.3 and cover < 0.45:  # allow only partial overlap
                break
        else:
            continue
        x0, y0, x1, y1 = np.round(box).astype(int)
        local = img[y0:y1, x0:x1].reshape(-1, 3).mean(0)
        for _try in range(10):  # keep the object distinguishable from what is under it
            colour = _random_colour(rng)
            if np.abs(colour - local).sum() > 180:
                break
        _paint(img, [poly], _fill(rng, colour, h, w))
        boxes.append(box)
        labels.append([cls, (box[0] + box[2]) / 2 / w, (box[1] + box[3]) / 2 / h, bw / w, bh / h])
        objs.append((box, colour, half))

    for box, colour, half in objs:
        if rng.random() < 0.15 * clutter:  # small occluder over part of the object
            corner = box[:2] + rng.uniform(0, 1, 2) * (box[2:] - box[:2])
            _distractor(rng, img, half * rng.uniform(0.4, 0.8), centre=corner)
        if rng.random() < 0.2 * clutter:  # colour-similar clutter elsewhere
            _distractor(rng, img, half * rng.uniform(0.8, 1.6), colour=np.clip(colour + rng.normal(0, 12, 3), 0, 255))

    if key is not None:
        shown = rng.random() < 0.5
        if shown:
            _key(rng, img, boxes, key_side * imgsz)
        if key == "select":
            labels = [lab for lab in labels if (lab[0] in KEYED) == shown]
    img += rng.normal(0, rng.uniform(2, 9) * clutter, img.shape).astype(np.float32)
    img = np.clip(img, 0, 255).astype(np.uint8)
    if rng.random() < 0.3:
        img = cv2.GaussianBlur(img, (3, 3), 0)
    return img, np.array(labels, float).reshape(-1, 5)


def _write_split(root: Path, split: str, n: int, seed: int, **render_kw) -> None:
    """Render ``n`` images of ``split`` into ``root/images/split`` and ``root/labels/split``."""
    (root / "images" / split).mkdir(parents=True)
    (root / "labels" / split).mkdir(parents=True)
    for i in range(n):
        rng = np.random.default_rng([seed, _SPLIT_IDS[split], i])
        img, lab = render(rng, **render_kw)
        stem = f"{split}_{i:05d}"
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise OSError(f"JPEG encoding failed for {stem}")
        (root / "images" / split / f"{stem}.jpg").write_bytes(buf.tobytes())
        text = "".join(f"{int(c)} {x:.6f} {y:.6f} {bw:.6f} {bh:.6f}\n" for c, x, y, bw, bh in lab)
        (root / "labels" / split / f"{stem}.txt").write_text(text)


def generate(
    root: str | Path,
    *,
    n_train: int = N_TRAIN,
    n_val: int = N_VAL,
    imgsz: int = IMGSZ,
    seed: int = 0,
    size_range: tuple[float, float] = SIZE_RANGE,
    clutter: float = CLUTTER,
    key: str | None = None,
    key_side: float = KEY_SIDE,
    overwrite: bool = False,
) -> Path:
    """Write the synthetic-shapes dataset in Ultralytics detection format.

    The data is rendered into a temporary sibling directory and renamed to ``root`` at the end, so ``root`` either
    does not exist or is complete, and concurrent callers cannot corrupt it (the loser of the rename race discards
    its copy; both copies are identical since generation is deterministic).

    Args:
        root: dataset directory to create.
        n_train: number of training images.
        n_val: number of validation images.
        imgsz: image side, pixels (images are square).
        seed: base seed; equal arguments give byte-identical images and labels.
        size_range: (min, max) object side as a fraction of ``imgsz``.
        clutter: background/distractor strength, 0 (plain) .. 1 (heavy).
        key: None, ``"select"`` or ``"decoy"``: the key marker of ``render``.
        key_side: the key marker's side as a fraction of ``imgsz`` (``render``), in (0, 0.5].
        overwrite: replace an existing ``root``; otherwise an existing complete dataset is returned unchanged.

    Returns:
        Path of ``root/data.yaml`` (absolute ``path``, ``train``, ``val``, ``names``).

    Raises:
        FileExistsError: ``root`` exists, is not empty and holds no ``data.yaml``, and ``overwrite`` is False.
        ValueError: non-positive counts or image size, an invalid ``size_range`` or ``key``.
    """
    if n_train < 1 or n_val < 1 or imgsz < 32:
        raise ValueError(f"need n_train, n_val >= 1 and imgsz >= 32, got {n_train}, {n_val}, {imgsz}")
    if not 0 < size_range[0] <= size_range[1] <= 1:
        raise ValueError(f"size_range must satisfy 0 < min <= max <= 1, got {size_range}")
    if key not in (None, "select", "decoy"):
        raise ValueError(f"key: {key!r}; expected None, 'select' or 'decoy'")
    if not 0 < key_side <= 0.5:
        raise ValueError(f"key_side: {key_side!r}; expected a fraction of the image side in (0, 0.5]")
    root = Path(root).expanduser().resolve()
    data_yaml = root / "data.yaml"
    if data_yaml.exists() and not overwrite:
        return data_yaml
    if root.exists() and any(root.iterdir()) and not overwrite:
        raise FileExistsError(f"{root} exists and is not a synthetic-shapes dataset; pass overwrite=True")

    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the dataset should be readable like any other folder
    try:
        for split, n in (("train", n_train), ("val", n_val)):
            _write_split(tmp, split, n, seed, imgsz=imgsz, size_range=size_range, clutter=clutter, key=key,
                         key_side=key_side)
        meta = {"path": str(root), "train": "images/train", "val": "images/val", "names": dict(enumerate(CLASS_NAMES)),
                "attn_yolo": {"generator": f"attn_yolo.synthetic v{VERSION}", "seed": seed, "n_train": n_train,
                              "n_val": n_val, "imgsz": imgsz, "size_range": list(size_range), "clutter": clutter,
                              "key": key, **({"key_side": key_side} if key else {})}}  # provenance
        (tmp / "data.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        if overwrite and root.exists():
            shutil.rmtree(root)
        try:
            os.rename(tmp, root)  # atomic; fails if another process got there first (non-empty root)
        except OSError:
            if not data_yaml.exists():
                raise
        else:
            mib = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
            what = f"{NAME} dataset" if key is None else f"{NAME} dataset with key markers ({key})"
            print(f"attn-yolo: wrote the {what} ({n_train} train / {n_val} val images, "
                  f"{mib:.0f} MiB) to {root}; later runs reuse it, delete that folder to clear it", file=sys.stderr,
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return data_yaml


def cache_dir() -> Path:
    """Directory holding generated datasets: ``$ATTN_YOLO_DATA``, else ``$XDG_CACHE_HOME/attn_yolo``
    (default ``~/.cache/attn_yolo``)."""
    if os.environ.get("ATTN_YOLO_DATA"):
        return Path(os.environ["ATTN_YOLO_DATA"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attn_yolo"


# Named settings of the generator, each a dataset of its own (`data: <name>` in an ablation config; `synthetic` is
# the first). The key settings are the known-answer pair (docs/guides/ablation.md, "Known answers"): the same images,
# in one the targets chosen by a far-away cue, in the other every shape a target.
SETTINGS = {
    "synthetic-shapes": {},
    "synthetic-key": {"key": "select"},  # planted: whether a shape is a target depends on a cue anywhere in the image
    "synthetic-key-decoy": {"key": "decoy"},  # its null twin: the same marker, which changes no label
    # the same rule with an 8-px marker: too small for the backbone's stride-32 map (SPPF, C2PSA) to see, which is
    # how a plain yolo11n reads the 14-px one
    "synthetic-key-small": {"key": "select", "key_side": 0.0625},
    "synthetic-key-small-decoy": {"key": "decoy", "key_side": 0.0625},
}
ALIAS = "synthetic"  # = the first setting


def setting(name: str) -> str:
    """The setting a ``data:`` keyword names (``synthetic`` is ``synthetic-shapes``).

    Raises:
        ValueError: ``name`` names no setting; the message lists those that exist.
    """
    name = NAME if name == ALIAS else name
    if name not in SETTINGS:
        raise ValueError(f"{name!r}; expected one of {', '.join((ALIAS, *SETTINGS))}")
    return name


def _defaults(name: str = NAME) -> dict:
    """The generator's arguments for setting ``name``: the defaults above, read when called, and the setting's own."""
    return {"n_train": N_TRAIN, "n_val": N_VAL, "imgsz": IMGSZ, "size_range": tuple(SIZE_RANGE), "clutter": CLUTTER,
            **SETTINGS[setting(name)]}


def default_root(name: str = NAME) -> Path:
    """Folder of setting ``name``'s dataset, whether or not it has been generated yet: ``cache_dir() /
    "<name>-v<VERSION>-<key>"``, where ``key`` hashes this module's source and the setting's arguments, so editing
    the generator never reuses stale data (its name therefore identifies the data)."""
    args = _defaults(name)
    key = hashlib.sha256(Path(__file__).read_bytes() + repr(sorted(args.items())).encode()).hexdigest()[:10]
    return cache_dir() / f"{setting(name)}-v{VERSION}-{key}"


def setting_of(data_yaml: str | Path) -> str | None:
    """The setting whose ``default_root`` holds ``data_yaml`` (the same attn-yolo, the same folder name), else None."""
    folder = Path(data_yaml).parent.name
    return next((n for n in SETTINGS if folder == default_root(n).name), None)


def default_data_yaml(name: str = NAME) -> Path:
    """Path of setting ``name``'s dataset YAML, generating the data on first use.

    Idempotent and safe to call from several processes at once (see ``generate``). The data lives in
    ``default_root(name)``, outside the repository (about 15 MB on disk; the first call says where it wrote them;
    delete ``cache_dir()`` to clear them).

    Returns:
        Absolute path of the dataset's ``data.yaml``.

    Raises:
        ValueError: ``name`` names no setting.
    """
    return generate(default_root(name), **_defaults(name))
