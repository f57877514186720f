"""``changed-<variant>.png``: both models' detections, CAMs and attention maps on the images that changed most.

Same image and seed; the baseline's and the variant's CAM, the variant's attention maps, on the heatmap tool's
fixed [0, 1] scale.

The maps and CAMs are the heatmap tool's own (``heatmap.predict_with_maps``, ``heatmap.class_activation_map``,
``ImageHeatmaps.on_image``, ``heatmap.figure.colour_range``), of each run's ``weights/best.pt``. The detections drawn
are those of the run's recorded final validation (``perimage.npz``: the ones its AP was computed from) with
confidence >= ``DRAW_CONF``: green a true positive at IoU 0.5, red a false positive; the ground truth dashed white.
Every axes carries a gid ``"<panel>|<model>|<image index>|<seed>"`` and every box a gid ``"gt"``, ``"tp:<k>"`` or
``"fp:<k>"`` (k: the detection's index in the record), so that what the figure shows can be read back from it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from attn_yolo.explain.changed import ChangedImage
from attn_yolo.progress import bar

DRAW_CONF = 0.25  # detections drawn: Ultralytics' predict default
MAX_MAPS = 6  # attention-map columns at most (the first ones in layer order)
PANEL_IN = 2.3  # inches per panel
PANEL_PX = 230  # pixels per panel at the figure's 100 dpi
CAM = "eigencam"


def best_weights(row: dict) -> Path:
    """A run's ``weights/best.pt``."""
    return Path(row["run_dir"]) / "weights" / "best.pt"


def draw_detections(ax, rec, index: int, conf: float = DRAW_CONF) -> None:
    """The ground truth (dashed white) and the recorded detections >= ``conf`` (green TP at IoU 0.5, red FP, class
    and confidence) of image ``index`` of ``rec`` on ``ax``, in original-image pixels."""
    from matplotlib.patches import Rectangle

    for b in rec.gt_box[rec.gt_img == index]:
        ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False, ec="white", ls="--", lw=1.0,
                               gid="gt"))
    for k in np.flatnonzero((rec.pred_img == index) & (rec.pred_conf >= conf)):
        b, tp = rec.pred_box[k], bool(rec.pred_tp[k, 0])
        colour = "lime" if tp else "red"
        ax.add_patch(Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1], fill=False, ec=colour, lw=1.2,
                               gid=f"{'tp' if tp else 'fp'}:{k}"))
        ax.text(b[0], b[1], f"{rec.names[rec.pred_cls[k]]} {rec.pred_conf[k]:.2f}", color=colour, fontsize=5,
                va="bottom", clip_on=True)


def heat_items(runs, variant: str, item: ChangedImage, cam: str | None, models: dict) -> dict:
    """``{model name: heatmap.ImageHeatmaps}`` of the image in the item's seed: the variant's attention maps (and
    CAM), the baseline's CAM; ``models`` caches the loaded networks by (model, seed), and the image size by
    ("imgsz", stride)."""
    import torch
    from ultralytics.utils.checks import check_imgsz

    from attn_yolo.capture import attention_blocks
    from attn_yolo.heatmap import as_model, class_activation_map, predict_with_maps
    from attn_yolo.images import read_image

    image = read_image(Path(item.path))
    out = {}
    for name in (runs.baseline, variant):
        key = (name, item.seed)
        if key not in models:
            models[key] = as_model(str(best_weights(runs.rows[key])))
        net = models[key]
        capture = name == variant and bool(attention_blocks(net))
        stride = int(max(getattr(net, "stride", torch.tensor([32.0])).max(), 32))
        if ("imgsz", stride) not in models:  # as the heatmap tool and training round it (one warning)
            models[("imgsz", stride)] = check_imgsz(runs.imgsz, stride=stride)
        imgsz = models[("imgsz", stride)]
        it = predict_with_maps(net, image, imgsz=imgsz, path=item.path, capture=capture)
        it.maps = it.maps[:MAX_MAPS]
        if cam:
            it.maps.append(class_activation_map(net, image, cam, imgsz=imgsz))
        out[name] = it
    return out


def show(ax, a: np.ndarray, **kw) -> None:
    """``ax.imshow`` of ``a`` (H0, W0[, 3]) resized once to the panel's pixels (``PANEL_PX`` on its long side: the
    drawing stays fast for large photos) and laid over original-image pixel coordinates, where the boxes are."""
    import cv2

    h0, w0 = a.shape[:2]
    k = PANEL_PX / max(h0, w0)
    if k < 1:
        a = cv2.resize(np.ascontiguousarray(a), (max(1, round(w0 * k)), max(1, round(h0 * k))),
                       interpolation=cv2.INTER_AREA)
    ax.imshow(a, extent=(0, w0, h0, 0), interpolation="nearest" if k < 1 else "antialiased", **kw)


def _overlay(ax, it, m) -> str:
    """Draw map ``m`` of ``it`` over its image on ``ax`` (heatmap colour range); returns the panel's title."""
    from attn_yolo.heatmap.figure import colour_range

    lo, hi = colour_range(m, "fixed")
    show(ax, it.image[..., ::-1])
    show(ax, it.on_image(m), cmap="jet", alpha=0.5, vmin=lo, vmax=hi)
    what = "CAM" if m.kind == "cam" else f"L{m.where} {m.block} {m.kind}"
    return f"{what} [{lo:.2g}, {hi:.2g}]"


def changed_figure(runs, variant: str, images: list[ChangedImage], cam: str | None = CAM):
    """The matplotlib ``Figure`` of ``changed-<variant>.png``: one row per image (``images``, those that rose then
    those that fell), columns: baseline detections, variant detections, baseline CAM, variant CAM (``cam`` None or
    grad-cam missing: none), the variant's attention maps (at most ``MAX_MAPS``). A shared colour bar [0, 1].

    Raises:
        attn_yolo.heatmap.HeatmapError: a run's best.pt cannot be loaded.
    """
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    if cam and importlib.util.find_spec("pytorch_grad_cam") is None:
        cam = None
    models: dict = {}
    shown = bar(images, f"explain: {variant}'s maps", unit="image")
    heat = [heat_items(runs, variant, im, cam, models) for im in shown]
    n_maps = max((len(h[variant].maps) - bool(cam) for h in heat), default=0)
    cols = 2 + 2 * bool(cam) + n_maps
    fig = Figure(figsize=(cols * PANEL_IN + 0.8, max(1, len(images)) * (PANEL_IN + 0.6) + 0.95), dpi=100)
    axes = fig.subplots(max(1, len(images)), cols, squeeze=False)
    for r, (im, h) in enumerate(zip(images, heat)):
        panels = [("det", runs.baseline, None), ("det", variant, None)]
        if cam:
            panels += [("cam", runs.baseline, h[runs.baseline].maps[-1]), ("cam", variant, h[variant].maps[-1])]
        panels += [("map", variant, m) for m in h[variant].maps[: len(h[variant].maps) - bool(cam)]]
        for c, ax in enumerate(axes[r]):
            ax.set_axis_off()
            if c >= len(panels):
                continue
            kind, model, m = panels[c]
            ax.set_gid(f"{kind}|{model}|{im.index}|{im.seed}")
            rec = runs.records[(model, im.seed)]
            if kind == "det":
                show(ax, h[model].image[..., ::-1])
                draw_detections(ax, rec, im.index)
                ap = im.ap_baseline if model == runs.baseline else im.ap_variant
                title = f"{model}: AP50-95 {ap:.3f}"
            else:
                title = f"{model} {_overlay(ax, h[model], m)}"
                draw_detections(ax, runs.records[(runs.baseline, im.seed)], im.index, conf=2.0)  # ground truth only
            if c == 0:
                title = f"{Path(im.path).name} · seed {im.seed}\nΔ {im.delta:+.3f} (mean over seeds)\n{title}"
            ax.set_title(title, fontsize=7)
    top = 1 - 0.95 / fig.get_figheight()
    fig.subplots_adjust(left=0.01, right=1 - 0.8 / fig.get_figwidth(), bottom=0.01, top=top, wspace=0.04,
                        hspace=0.35)
    fig.colorbar(ScalarMappable(Normalize(0.0, 1.0), "jet"), cax=fig.add_axes(
        (1 - 0.65 / fig.get_figwidth(), 0.25, 0.15 / fig.get_figwidth(), 0.5)), label="gate / CAM (fixed [0, 1])")
    fig.suptitle(f"{variant} vs {runs.baseline}: the images whose AP50-95 changed most (green TP, red FP at IoU 0.5, "
                 f"conf >= {DRAW_CONF}; dashed: ground truth)", fontsize=9)
    return fig
