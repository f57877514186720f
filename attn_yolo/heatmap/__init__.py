"""Attention heatmaps: the maps each attention block applied in one forward pass, drawn over the image.

    attn-yolo heatmap model=runs/detect/train/weights/best.pt source=images/ layers=all imgsz=640 out=runs/heatmap/exp

For every attention block of a model (any of ``attn_yolo.MODULES``; or only the ``layers=`` chosen)
forward hooks record what the block applied while the model predicts on each image. Per image one PNG is written: the
image with its detections, then one panel per map (layer index, block, stride, the map resized onto the image with a
colour bar, its statistics); the raw maps as ``.npy``; and one ``stats.csv`` row per map (min, max, mean, entropy),
so a collapsed block (a uniform or one-hot map) shows in numbers as well as in pictures.

Nothing is overwritten silently: when ``out`` already holds files of the names the run writes (``stats.csv``,
``<stem>_heatmaps.png``, ``<stem>_<map>.npy``), the command stops (exit 2, naming them) before the model predicts,
unless ``overwrite=True``, which replaces those files and touches nothing else in ``out``. ``save`` and
``write_stats`` refuse likewise (``FileExistsError``) unless ``overwrite=True``.

``maps`` defines the maps (``spatial``, ``channel``, ``received``, ``query<k>``, ...) and their statistics; ``model``
loads the model and finds its attention blocks; ``capture`` records the maps with forward hooks; ``letterbox`` makes
the model input as Ultralytics' predictor does; ``predict`` predicts each image with its maps; ``cam`` adds
class-activation maps (``cam``); ``figure`` draws and writes them; this module is the ``attn-yolo heatmap`` command.

Python:
    >>> from attn_yolo.heatmap import heatmaps, save
    >>> for item in heatmaps("best.pt", "bus.jpg", imgsz=640):
    ...     print([(m.name, m.map.shape, m.stats["entropy_norm"]) for m in item.maps])
    ...     save(item, "runs/heatmap/exp")
"""

from __future__ import annotations

from pathlib import Path

from attn_yolo.args import Key, Schema, UsageError
from attn_yolo.files import check_writable
from attn_yolo.heatmap.cam import CAM_METHODS, class_activation_map
from attn_yolo.heatmap.capture import AttentionCapture
from attn_yolo.heatmap.figure import (
    SCALES,
    STATS_NAME,
    check_new,
    figure_size,
    plot,
    save,
    stats_rows,
    write_stats,
    written_by_heatmap,
)
from attn_yolo.heatmap.maps import AttentionMap, map_stats
from attn_yolo.heatmap.model import HeatmapError, NoAttentionError, as_model
from attn_yolo.heatmap.predict import ImageHeatmaps, heatmaps, image_names, predict_with_maps
from attn_yolo.images import default_images, read_sources

__all__ = [
    "AttentionCapture",
    "AttentionMap",
    "HeatmapError",
    "ImageHeatmaps",
    "NoAttentionError",
    "class_activation_map",
    "figure_size",
    "heatmaps",
    "main",
    "map_stats",
    "plot",
    "predict_with_maps",
    "save",
    "stats_rows",
    "write_stats",
    "written_by_heatmap",
]

SCHEMA = Schema([
    Key("model", "path", help="checkpoint (.pt) or model YAML",
        required=", e.g. model=runs/detect/train/weights/best.pt"),
    Key("source", "any", help="image, folder or glob; default: 2 val images of the model's dataset, else bus.jpg, "
        "zidane.jpg"),
    Key("layers", "any", "all", help="'all', a layer index or a comma-separated list (5,8)"),
    Key("out", "path", help="output folder; default runs/heatmap/exp"),
    Key("imgsz", "imgsz", 640, help="inference size", note="(the long side)"),
    Key("conf", "float", 0.25, help="detection confidence threshold", low=0, high=1),
    Key("iou", "float", 0.7, help="NMS IoU threshold", low=0, high=1),
    Key("query", "any", help="MHSA query maps: none, det (each detection's centre) or x,y"),
    Key("cam", "choice", help="class-activation maps (none: attention maps only)", choices=CAM_METHODS),
    Key("device", "any", help="cpu, 0, ...; default: Ultralytics' choice"),
    Key("trust", "bool", False, help="unpickle model= fully (may run code it contains); else weights-only"),
    Key("scale", "choice", "fixed", help="gate colours on a fixed [0, 1] or each map's own min..max",
        choices=SCALES),
    Key("overwrite", "bool", False, help="replace files of the names this run writes in out"),
])
"""``attn-yolo heatmap`` keys."""
DEFAULTS = SCHEMA.defaults()

USAGE = """attn-yolo heatmap model=best.pt [source=img|folder|glob] [layers=all|5,8] [out=dir] [imgsz=640]
                  [conf=0.25] [iou=0.7] [query=none|det|x,y] [cam=none|eigencam|gradcam] [device=cpu|0]
                  [trust=False] [scale=fixed|panel] [overwrite=False]

Writes per image <stem>_heatmaps.png (detections + one panel per attention map), <stem>_L<i>_<block>_<kind>.npy
(raw maps on the feature grid) and stats.csv (min/max/mean/entropy per map) into out (default runs/heatmap/exp).
Default source: 2 validation images of the model's own dataset when it is at hand, else Ultralytics' bus.jpg and
zidane.jpg. The checkpoint loads weights-only; trust=True unpickles it fully
(may run code it contains: only for a file from a source you trust). scale=fixed (default) colours every gate map on
[0, 1], so that a gate spanning 0.475-0.509 looks as flat as it is; scale=panel uses each map's own min..max.
An out that already holds files of those names is refused before the model predicts (exit 2, naming them);
overwrite=True replaces them and touches nothing else in out."""


def main(argv: list[str]) -> int:
    """``attn-yolo heatmap key=value ...``; returns an exit code."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(USAGE)
        return 0
    a = SCHEMA.parse(argv, "heatmap")
    if a["out"] is not None and Path(str(a["out"])).exists() and not Path(str(a["out"])).is_dir():
        raise UsageError(f"attn-yolo heatmap: out={str(a['out'])!r} is an existing file; expected a folder")
    check_writable(Path(str(a["out"] or "runs/heatmap/exp")), "out",
                   lambda msg: UsageError(f"attn-yolo heatmap: {msg}"))
    out = None if a["out"] is None else Path(str(a["out"]))

    def check_out(files):  # before the model predicts: files of the names this run writes are not replaced silently
        if out is not None and not a["overwrite"]:
            check_new(written_by_heatmap(out, [stem for _, stem in image_names(files)]))

    try:
        files = None if a["source"] is None else read_sources(a["source"], HeatmapError)
        if files is not None:
            check_out(files)  # before the model is even loaded
        net = as_model(a["model"], a["trust"])
        if files is None:  # the model's own val images (or Ultralytics' photos): known once it is loaded
            files = default_images(net)[0]
            check_out(files)
        items = heatmaps(net, files, layers=a["layers"], imgsz=a["imgsz"], conf=float(a["conf"]), iou=float(a["iou"]),
                         query=a["query"], cam=a["cam"], device=a["device"], trust=a["trust"])
    except (HeatmapError, FileExistsError) as e:
        raise UsageError(f"attn-yolo heatmap: {e}") from None
    if out is None:
        from ultralytics.utils.files import increment_path

        out = increment_path(Path("runs/heatmap/exp"), mkdir=True)
    for it in items:
        print(f"{save(it, out, a['scale'], overwrite=a['overwrite'])['png']}")
    stats = write_stats(items, out / STATS_NAME, overwrite=a["overwrite"])
    print(f"\n{'image':<16}{'map':<24}{'stride':>6}{'shape':>9}{'min':>9}{'max':>9}{'mean':>9}{'H/lnN':>7}  flag")
    for r in stats_rows(items):
        print(f"{r['image'][:15]:<16}{r['map'][:23]:<24}{r['stride']:>6}{r['h']:>4}×{r['w']:<4}{r['min']:>9.3g}"
              f"{r['max']:>9.3g}{r['mean']:>9.3g}{r['entropy_norm']:>7.3f}  {r['flag']}")
    print(f"\nstats: {stats}")
    print("colour scale: " + ("gate maps on a fixed [0, 1]; MHSA received/query maps on their own min..max "
                              "(scale=panel: every map on its own)" if a["scale"] == "fixed"
                              else "each map on its own min..max"))
    return 0
