"""Figures of captured maps: one PNG per image, ``.npy`` files and ``stats.csv``.

A PNG holds the detections, then a panel with a colour bar per map."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import cv2
import numpy as np

from attn_yolo.files import atomic_write
from attn_yolo.heatmap.predict import ImageHeatmaps

PANEL_PX = 480  # panel width, pixels: the image (PANEL_PX - CBAR_PX wide) and its colour bar
CBAR_PX = 72  # colour bar and its tick labels, pixels
HEADER_PX = 48  # two title lines above each panel, pixels
COLS = 3  # panels per row


def figure_size(image_shape, n_maps: int, panel_px: int = PANEL_PX, cols: int = COLS) -> tuple[int, int]:
    """``(height, width)`` in pixels of the PNG for an image of ``image_shape`` ``(H0, W0, ...)`` and ``n_maps`` maps.

    ``n_maps + 1`` panels (the detections first) in rows of ``cols``; a panel is ``panel_px`` wide and
    ``HEADER_PX + round((panel_px - CBAR_PX) · H0 / W0)`` high.
    """
    n = n_maps + 1
    c = min(n, cols)
    return math.ceil(n / c) * (HEADER_PX + _image_px(image_shape, panel_px)[0]), c * panel_px


def _image_px(image_shape, panel_px: int) -> tuple[int, int]:
    """``(height, width)`` in pixels of the image inside a panel."""
    w = panel_px - CBAR_PX
    return max(1, round(w * image_shape[0] / image_shape[1])), w  # at least 1 px for a very wide image


SCALES = ("fixed", "panel")  # colour scale of gate maps: fixed [0, 1] (default) or each panel's own min..max
GATE_RANGE = (0.0, 1.0)


def is_gate(m) -> bool:
    """Whether a map holds gate values in [0, 1] (spatial and channel gates, per-location gains, CAMs), as opposed
    to MHSA's received attention (mean 1, unbounded) or a query's softmax row."""
    return m.kind != "received" and not m.kind.startswith("query")


def colour_range(m, scale: str = "fixed") -> tuple[float, float]:
    """Colour scale of a map: gates on the fixed ``GATE_RANGE`` [0, 1] unless ``scale="panel"``, so that a gate
    spanning 0.475–0.509 looks as flat as it is; other maps (and every map with ``panel``) on their own range."""
    if scale == "fixed" and is_gate(m):
        return GATE_RANGE
    return _colour_range(m.stats)


def _colour_range(s: dict) -> tuple[float, float]:
    """A map's own min..max; a ``uniform`` map gets ``mean ± 5 %`` so it shows flat."""
    if s["flag"] == "uniform" or s["max"] <= s["min"]:
        d = max(0.05 * abs(s["mean"]), 1e-6)
        return s["mean"] - d, s["mean"] + d
    return s["min"], s["max"]


def plot(item: ImageHeatmaps, *, cmap: str = "jet", alpha: float = 0.5, panel_px: int = PANEL_PX, scale: str = "fixed"):
    """Matplotlib ``Figure`` of ``figure_size`` pixels: the image with its detections, then one panel per map.

    A map panel shows the map resized onto the image (``ImageHeatmaps.on_image``) over the photo, a colour bar in the
    map's units, and a title with layer, block, kind, stride, grid size, ``map_stats`` and the colour range. Gates
    are coloured on a fixed [0, 1] (``scale="fixed"``, the default; ``"panel"``: each map's own min..max, see
    ``colour_range``); a flagged map (``uniform``: drawn flat; ``one-hot``) is titled in red.
    """
    from matplotlib.figure import Figure

    dpi = 100
    fig_h, fig_w = figure_size(item.image.shape, len(item.maps), panel_px)
    ih, iw = _image_px(item.image.shape, panel_px)
    fig = Figure(figsize=(fig_w / dpi, fig_h / dpi), dpi=dpi)
    c = min(len(item.maps) + 1, COLS)
    shown = (iw - 8, ih)  # (width, height) drawn per panel: resize once here rather than in matplotlib
    rgb = cv2.resize(item.image, shown, interpolation=cv2.INTER_AREA)[..., ::-1]

    def box(r, col, x0, w):  # pixel box (left x0, width w) below the header of cell (r, col) → figure fractions
        top = r * (HEADER_PX + ih) + HEADER_PX
        return ((col * panel_px + x0) / fig_w, 1 - (top + ih) / fig_h, w / fig_w, ih / fig_h)

    for k in range(len(item.maps) + 1):
        r, col = divmod(k, c)
        ax = fig.add_axes(box(r, col, 4, iw - 8))
        ax.set_axis_off()
        if k == 0:
            ax.imshow(detections_image(item, shown)[..., ::-1])
            fit_title(ax, f"{item.name} {hw(*item.image.shape[:2])}\n{len(item.result.boxes)} detections · "
                      f"model input {hw(*item.input_shape)}", panel_px - 4, 9)
            continue
        m = item.maps[k - 1]
        s = m.stats
        vmin, vmax = colour_range(m, scale)
        ax.imshow(rgb)
        overlay = cv2.resize(item.on_image(m), shown, interpolation=cv2.INTER_AREA)
        im = ax.imshow(overlay, cmap=cmap, alpha=alpha, vmin=vmin, vmax=vmax)
        if m.query is not None:  # original-image pixels → panel pixels
            qx, qy = m.query[0] * shown[0] / item.image.shape[1], m.query[1] * shown[1] / item.image.shape[0]
            ax.plot(qx, qy, marker="x", color="white", markersize=12, markeredgewidth=3)
        what = m.kind if m.query is None else f"query ({m.query[0]:.0f}, {m.query[1]:.0f})"
        where = f"layer {m.where} " if m.layer >= 0 else ""
        flag = f" [{s['flag'].upper()}]" if s["flag"] else ""
        flag += f"  |γ| {m.gamma:.2g}" if m.gamma is not None else ""
        fit_title(ax, f"{where}{m.block} {what} · stride {m.stride} · {hw(*m.map.shape)}\n"
                  f"min {s['min']:.3g}  max {s['max']:.3g}  mean {s['mean']:.3g}  H/lnN {s['entropy_norm']:.3f}"
                  f"  colour [{vmin:.3g}, {vmax:.3g}]{flag}", panel_px - 4, 8, color="red" if s["flag"] else "black")
        cb = fig.colorbar(im, cax=fig.add_axes(box(r, col, iw, 12)))
        cb.ax.tick_params(labelsize=7)
        cb.formatter.set_useOffset(False)
        cb.update_ticks()
    return fig


MIN_TITLE_PT = 5.0  # the smallest title font a panel's title shrinks to


def fit_title(ax, text: str, width_px: float, fontsize: float, **kw):
    """Set ``ax``'s title at ``fontsize``, shrunk (down to ``MIN_TITLE_PT``) until it is no wider than its panel's
    ``width_px`` and lies inside the figure: a long block name or flag is not clipped at the figure's left edge nor
    drawn over the next panel. Measured with matplotlib's Agg renderer. Returns the title's Text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = ax.get_figure()
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    size = fontsize
    while True:
        t = ax.set_title(text, fontsize=size, **kw)
        box = t.get_window_extent(renderer)
        if (box.width <= width_px and box.x0 >= 0 and box.x1 <= fig.bbox.width) or size <= MIN_TITLE_PT:
            return t
        size -= 0.5


def hw(h: int, w: int) -> str:
    """A shape as ``"20×32 (H×W)"``: height first, as the console table and stats.csv give it."""
    return f"{h}×{w} (H×W)"


def detections_image(item: ImageHeatmaps, size: tuple[int, int]) -> np.ndarray:
    """The image with its detections drawn at display size ``size`` ``(width, height)``, BGR.

    The image is resized first and the boxes scaled to it, then Ultralytics' ``Results.plot`` draws them with its
    line width and font for that size. Drawn on the original image and then resized, a 128-px image would get labels
    sized for 128 px and blown up with it, covering the image.
    """
    from ultralytics.engine.results import Results

    h0, w0 = item.image.shape[:2]
    boxes = item.result.boxes.data.clone()
    boxes[:, :4] *= boxes.new_tensor([size[0] / w0, size[1] / h0] * 2)
    small = cv2.resize(item.image, size, interpolation=cv2.INTER_AREA if size[0] < w0 else cv2.INTER_LINEAR)
    return Results(small, path=str(item.path), names=item.result.names, boxes=boxes).plot()


STATS_NAME = "stats.csv"


def written_by_heatmap(out: str | Path, stems) -> list[Path]:
    """The files in folder ``out`` that a heatmap run over images with these output stems (``ImageHeatmaps.stem``)
    writes: ``stats.csv``, ``<stem>_heatmaps.png`` and ``<stem>_<map name>.npy`` (map names as
    ``AttentionMap.name``: ``L06_CBAM_spatial``, ``L06.1_CBAM_spatial``, ``EigenCAM_cam``). Empty when ``out`` is
    no folder. Which ``.npy`` files a run writes is known only once it has captured the maps, so every existing
    file of that form counts."""
    out = Path(out)
    if not out.is_dir():
        return []
    alt = "|".join(re.escape(s) for s in sorted(set(stems), key=len, reverse=True)) or "(?!)"
    own = re.compile(rf"(?:{alt})_(?:heatmaps\.png|(?:L\d+(?:\.[\w.]+)?_\w+_\w+|\w+_cam)\.npy)")
    return sorted(p for p in out.iterdir() if p.name == STATS_NAME or own.fullmatch(p.name))


def check_new(paths, overwrite: bool = False) -> None:
    """Refuse to replace existing files unless ``overwrite``.

    Raises:
        FileExistsError: one line naming the files that exist (up to 6, then how many more) and ``overwrite=True``.
    """
    found = [Path(p) for p in paths if Path(p).exists() or Path(p).is_symlink()]
    if found and not overwrite:
        names = ", ".join(p.name for p in found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
        raise FileExistsError(f"out={str(found[0].parent)!r} already holds {names}, which heatmap writes; pass "
                              "overwrite=True to replace them (nothing else there is touched), or choose another out=")


def save(item: ImageHeatmaps, out: str | Path, scale: str = "fixed", overwrite: bool = False) -> dict[str, Path]:
    """Write ``<stem>_heatmaps.png`` and one ``<stem>_<map name>.npy`` per map into ``out`` (``item.stem``: unique
    among the images of one ``heatmaps`` call, also for equal file names in different folders), each atomically
    (``files.atomic_write``: an interrupted run leaves no half-written file).

    Args:
        overwrite: replace those files where they exist; otherwise nothing is written when one of them exists.

    Returns:
        dict: ``"png"`` → the PNG, and map name → its ``.npy``.

    Raises:
        FileExistsError: one of the files exists and not ``overwrite`` (``check_new``).
    """
    out = Path(out)
    paths = {"png": out / f"{item.stem}_heatmaps.png", **{m.name: out / f"{item.stem}_{m.name}.npy" for m in item.maps}}
    check_new(paths.values(), overwrite)
    out.mkdir(parents=True, exist_ok=True)
    fig = plot(item, scale=scale)
    atomic_write(paths["png"], lambda p: fig.savefig(p, format="png"))
    for m in item.maps:
        atomic_write(paths[m.name], lambda p, a=m.map: _save_npy(p, a))
    return paths


STATS_FIELDS = ("image", "map", "layer", "part", "block", "kind", "stride", "h", "w", "min", "max", "mean", "std",
                "entropy_nats", "entropy_norm", "peak_share", "flag", "check", "gamma")


def stats_rows(items: list[ImageHeatmaps]) -> list[dict]:
    """One row per map (fields ``STATS_FIELDS``)."""
    return [
        {"image": it.name, "map": m.name, "layer": m.layer, "part": m.part, "block": m.block, "kind": m.kind,
         "stride": m.stride, "h": m.map.shape[0], "w": m.map.shape[1], **m.stats,
         "check": m.check, "gamma": m.gamma}
        for it in items for m in it.maps
    ]


def _save_npy(path: str, a: np.ndarray) -> None:
    with open(path, "wb") as f:  # a file object: np.save would append ".npy" to the temporary file's name
        np.save(f, a)


def write_stats(items: list[ImageHeatmaps], path: str | Path, overwrite: bool = False) -> Path:
    """Write ``stats_rows`` as CSV, atomically (floats to 6 significant digits; ``check``/``gamma`` empty when not
    applicable).

    Raises:
        FileExistsError: ``path`` exists and not ``overwrite``.
    """
    path = Path(path)
    check_new([path], overwrite)

    def write(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, STATS_FIELDS)
            w.writeheader()
            for r in stats_rows(items):
                w.writerow({k: f"{v:.6g}" if isinstance(v, float) else "" if v is None else v for k, v in r.items()})

    atomic_write(path, write)
    return path
