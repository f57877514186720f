"""Prediction with maps: each image letterboxed, predicted and captured; the heatmaps of a whole source.

For display a map is upsampled (bilinear) to the letterboxed model input, the letterbox padding is cropped, and the
rest resized onto the image (``ImageHeatmaps.on_image``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attn_yolo.capture import attention_blocks
from attn_yolo.heatmap.cam import CAM_METHODS, class_activation_map
from attn_yolo.heatmap.capture import AttentionCapture
from attn_yolo.heatmap.letterbox import letterbox, letterbox_gain_pad
from attn_yolo.heatmap.maps import AttentionMap
from attn_yolo.heatmap.model import HeatmapError, as_model, resolve_layers
from attn_yolo.images import default_images, read_image, read_sources

MIN_SIDE = 10  # pixels: the smallest image side accepted, as Ultralytics' dataset check (verify_image_label) requires


@dataclass
class ImageHeatmaps:
    """Heatmaps of one image.

    Attributes:
        path (Path): the image file.
        image (np.ndarray): the original BGR image ``(H0, W0, 3)``.
        input_shape (tuple[int, int]): the letterboxed model input ``(H, W)``.
        result: ``ultralytics.engine.results.Results`` with the detections (original-image coordinates).
        maps (list[AttentionMap]): captured maps, in layer order (CAM last).
        name (str): the image as named in outputs: its file name, or, where several images of one call share a file
            name, its path relative to their common folder (``a/img.jpg``, ``b/img.jpg``); see ``image_names``.
        stem (str): prefix of its output files (``<stem>_heatmaps.png``), unique among the images of one call.
    """

    path: Path
    image: np.ndarray
    input_shape: tuple[int, int]
    result: object
    maps: list[AttentionMap]
    name: str = ""
    stem: str = ""

    def __post_init__(self):
        self.name = self.name or self.path.name
        self.stem = self.stem or self.path.stem

    def on_image(self, m: AttentionMap) -> np.ndarray:
        """``m.map`` resized onto the original image ``(H0, W0)``: bilinear to the model input, letterbox padding
        cropped, resized to the image (``ultralytics.utils.ops.scale_masks``)."""
        from ultralytics.utils import ops

        t = torch.from_numpy(m.map)[None, None].float()
        t = F.interpolate(t, self.input_shape, mode="bilinear", align_corners=False)
        return ops.scale_masks(t, self.image.shape[:2])[0, 0].numpy()


def image_names(files: list[Path]) -> list[tuple[str, str]]:
    """``(name, stem)`` per image for outputs, so that no two images write the same files.

    An image whose file stem no other image has keeps its file name and stem (``bus.jpg``, ``bus``). Images that
    share a stem are named by their path relative to the common folder of those images (``a/img.jpg``, stem
    ``a_img``), keeping the suffix in the stem where that alone differs (``img.jpg`` and ``img.png``: ``img_jpg``,
    ``img_png``); the same file given twice gets ``-2``, ``-3``, ... appended.
    """
    files = [Path(f) for f in files]
    stems = [f.stem for f in files]
    out = [(f.name, f.stem) for f in files]
    for stem in {s for s in stems if stems.count(s) > 1}:
        group = [k for k, s in enumerate(stems) if s == stem]
        root = Path(os.path.commonpath([str(files[k].resolve().parent) for k in group]))
        rel = {k: files[k].resolve().relative_to(root) for k in group}
        plain = {k: "_".join(rel[k].with_suffix("").parts) for k in group}
        for k in group:
            unique = list(plain.values()).count(plain[k]) == 1
            out[k] = (rel[k].as_posix(), plain[k] if unique else "_".join(rel[k].parts).replace(".", "_"))
    seen: dict[str, int] = {}
    for k, (name, stem) in enumerate(out):
        seen[stem] = seen.get(stem, 0) + 1
        if seen[stem] > 1:
            out[k] = (f"{name} ({seen[stem]})", f"{stem}-{seen[stem]}")
    return out


@torch.no_grad()
def predict_with_maps(
    model,
    image: np.ndarray,
    *,
    layers="all",
    imgsz: int = 640,
    conf: float = 0.25,
    iou: float = 0.7,
    query=None,
    max_queries: int = 3,
    path: str | Path = "image.jpg",
    capture: bool = True,
) -> ImageHeatmaps:
    """Predict on one BGR image while capturing the attention maps.

    Preprocessing as Ultralytics' predictor for ``.pt`` models (``LetterBox(imgsz, auto=True, stride)``, RGB, /255),
    postprocessing with its NMS and ``scale_boxes``; detections in an Ultralytics ``Results``.

    Args:
        model: checkpoint path, ``YOLO`` or its ``nn.Module`` (put in eval mode for the call, mode restored after).
        image: BGR ``(H0, W0, 3)`` uint8.
        layers: ``"all"`` or layer indices (see ``resolve_layers``).
        imgsz: inference size (long side), pixels.
        conf, iou: NMS thresholds.
        query: MHSA query points: None, ``"det"`` (the centres of the ``max_queries`` most confident detections) or a
            list of ``(x, y)`` original-image pixels.
        path: image path stored in the ``Results``.
        capture: False: detections only, no maps (a model without attention blocks).
    """
    from ultralytics.engine.results import Results
    from ultralytics.utils import nms, ops

    model = as_model(model)
    x = letterbox(model, image, imgsz)
    was_training = model.training
    model.eval()
    try:
        with AttentionCapture(model, layers) if capture else contextlib.nullcontext() as cap:
            preds = model(x)
    finally:
        model.train(was_training)
    det = nms.non_max_suppression(preds, conf, iou, max_det=300, end2end=getattr(model, "end2end", False))[0]
    det[:, :4] = ops.scale_boxes(x.shape[2:], det[:, :4], image.shape)  # original-image pixels, clipped
    if _is_det(query):
        points = [((x1 + x2) / 2, (y1 + y2) / 2) for x1, y1, x2, y2 in det[:max_queries, :4].tolist()]
        if not len(det) and capture:
            from ultralytics.utils import LOGGER

            LOGGER.warning(f"heatmap: query=det, but {Path(path).name} has no detection above conf={conf}: no query "
                           "map for it (lower conf=, or give x,y points)")
    else:
        points = _points(query) if query else []
    gx, gy, px, py = letterbox_gain_pad(image.shape, x.shape[2:])
    maps = cap.maps(0, [((qx * gx + px, qy * gy + py), (qx, qy)) for qx, qy in points]) if capture else []
    names = getattr(model, "names", None) or {i: str(i) for i in range(int(det[:, 5].max()) + 1 if len(det) else 0)}
    result = Results(image, path=str(path), names=names, boxes=det[:, :6].cpu())
    return ImageHeatmaps(Path(path), image, tuple(x.shape[2:]), result, maps)


def _is_det(query) -> bool:
    """``query`` asks for the detections' centres (``"det"``)."""
    return isinstance(query, str) and query.lower() in ("det", "dets", "detections")


def _points(query) -> list[tuple[float, float]]:
    """``(x, y)`` pairs from ``"x,y"``, ``(x, y)`` or a list of pairs."""
    try:
        if isinstance(query, str):
            v = [float(t) for t in query.replace("(", "").replace(")", "").split(",")]
        else:
            v = np.asarray(query, float).ravel().tolist()
        if not v or len(v) % 2:
            raise ValueError
    except (TypeError, ValueError):
        raise HeatmapError(f"query={query!r}: expected None, 'det' or x,y pixel coordinates") from None
    return [(float(a), float(b)) for a, b in zip(v[0::2], v[1::2])]


def check_model(net, layers, cam) -> bool:
    """Refuse ``layers`` / ``cam`` the model cannot give maps for, before reading any image; whether it has
    attention blocks.

    Raises:
        HeatmapError: an unknown ``cam`` or one without the grad-cam library; ``layers`` naming no attention layer
            (``NoAttentionError``: no blocks at all and no ``cam``).
    """
    if cam is not None and str(cam).lower() not in CAM_METHODS:
        raise HeatmapError(f"cam={cam!r}: expected one of {', '.join(CAM_METHODS)} (or none)")
    if cam is not None and importlib.util.find_spec("pytorch_grad_cam") is None:
        raise HeatmapError(f"cam={cam} needs the grad-cam library: pip install 'attn-yolo[cam]'")
    has_blocks = bool(attention_blocks(net))
    if has_blocks or cam is None:
        resolve_layers(net, layers)
    return has_blocks


def check_image(f, im: np.ndarray, imgsz: int, query) -> None:
    """Refuse an image (``(H, W, 3)``) the maps cannot be made of, before any work.

    Raises:
        HeatmapError: a side under ``MIN_SIDE`` px, a short side that scales to 0 px at ``imgsz``, or a ``query``
            point outside the image.
    """
    h, w = im.shape[:2]
    if min(h, w) < MIN_SIDE:
        raise HeatmapError(f"image {str(f)!r} is {h}×{w} (H×W); each side must be at least {MIN_SIDE} px")
    if round(min(h, w) * imgsz / max(h, w)) < 1:
        raise HeatmapError(
            f"image {str(f)!r} is {h}×{w} (H×W): at imgsz={imgsz} its short side scales to 0 px; "
            f"crop it or use a larger imgsz="
        )
    for qx, qy in [] if query is None or _is_det(query) else _points(query):
        if not (0 <= qx < w and 0 <= qy < h):
            raise HeatmapError(f"query={query!r}: point ({qx:g}, {qy:g}) lies outside image {str(f)!r}, which is "
                               f"{h}×{w} (H×W); allowed: 0 <= x < {w}, 0 <= y < {h} (original-image pixels)")


def heatmaps(
    model,
    source=None,
    *,
    layers="all",
    imgsz: int = 640,
    conf: float = 0.25,
    iou: float = 0.7,
    query=None,
    cam: str | None = None,
    device=None,
    trust: bool = False,
) -> list[ImageHeatmaps]:
    """Attention maps (and detections) for every image of ``source``.

    Args:
        model: checkpoint path (``best.pt``), ``YOLO`` object or its ``nn.Module``. Never trained or changed (except
            moved to ``device`` if one is given).
        source: image file, folder, glob, or a list of them; None: the first 2 validation images of the model's own
            dataset when it is at hand (``images.default_images``), else Ultralytics' ``bus.jpg`` and ``zidane.jpg``.
        layers: ``"all"`` (default) or attention layer indices.
        imgsz: inference size, pixels. conf, iou: NMS thresholds.
        query: MHSA query points: None, ``"det"`` or ``(x, y)`` original-image pixels.
        cam: None, ``"eigencam"`` or ``"gradcam"`` (needs ``grad-cam``): adds a ``cam`` map per image.
        device: None (keep the model where it is) or a device string (``"cpu"``, ``"0"``).
        trust: unpickle a checkpoint path fully (may run code it contains); by default it loads weights-only and a
            checkpoint referencing other classes is refused.

    Returns:
        list[ImageHeatmaps], one per image.

    Raises:
        HeatmapError: refused checkpoint, unreadable image or one with a side under ``MIN_SIDE`` px (or too thin to
            letterbox at ``imgsz``), bad ``layers``/``query``/``cam``; ``NoAttentionError`` for a model without
            attention blocks when ``cam`` is None.
    """
    net = as_model(model, trust)
    has_blocks = check_model(net, layers, cam)
    if device is not None:
        from ultralytics.utils.torch_utils import select_device

        net.to(select_device(str(device), verbose=False))
    from ultralytics.utils.checks import check_imgsz

    imgsz = check_imgsz(imgsz, stride=int(max(getattr(net, "stride", torch.tensor([32.0])).max(), 32)))  # 1 warning
    files = default_images(net)[0] if source is None else read_sources(source, HeatmapError)
    images = [read_image(f, HeatmapError) for f in files]  # fail on a bad file before any work
    for f, im in zip(files, images):
        check_image(f, im, imgsz, query)
    items = []
    for f, im, (name, stem) in zip(files, images, image_names(files)):
        if has_blocks:
            item = predict_with_maps(net, im, layers=layers, imgsz=imgsz, conf=conf, iou=iou, query=query, path=f)
        else:
            item = predict_with_maps(net, im, layers=None, imgsz=imgsz, conf=conf, iou=iou, path=f, capture=False)
        if cam is not None:
            item.maps.append(class_activation_map(net, im, str(cam).lower(), imgsz=imgsz, conf=conf))
        item.name, item.stem = name, stem
        items.append(item)
    return items
