"""The docs' pictures, made from a real run on the embedded data: the default ablation's ``delta.png``,
``ablation.png`` and ``curves.png``, and of the CBAM run whose gates mattered most to its model (the largest
mean-ablation effect in ``results.csv``) its ``gates.png`` and a heatmap of its ``best.pt`` at the training size (128).

    python scripts/docs_figures.py                                   # the default `attn-yolo ablate`, then the figures
    python scripts/docs_figures.py out=runs/ablate/synthetic-key-cbam    # an ablation folder already run: figures only

Runs ``attn-yolo ablate`` (the embedded default config; a finished ``out`` is resumed, nothing retrained), then
``attn-yolo heatmap`` on that CBAM run's checkpoint, and writes each picture into ``docs/img/``, scaled down
to at most ``width`` pixels (default 900) so that the repository stays small. Extra ``key=value`` tokens go to the
ablation (e.g. ``seeds=[0,1,2]``). Exit code: that of the first step that fails, else 0.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMG = REPO / "docs" / "img"
FIGURES = {  # docs/img name → file, relative to the ablation's out
    "delta.png": "delta.png",
    "ablation.png": "ablation.png",
    "curves.png": "curves.png",
}


def shrink(src: Path, dst: Path, width: int) -> None:
    """Copy a PNG to ``dst``, scaled to at most ``width`` pixels wide (aspect kept), as a 256-colour palette PNG."""
    from PIL import Image

    with Image.open(src) as image:
        image = image.convert("RGB")
        if image.width > width:
            image = image.resize((width, round(image.height * width / image.width)), Image.Resampling.LANCZOS)
        image.quantize(256).save(dst, optimize=True)


def most_attending(out: Path) -> Path:
    """The run folder of the ``cbam`` arm with the largest mean-ablation effect (``mean_ablation_effect``)."""
    from attn_yolo.ablate.runs.results import read_results

    rows = [r for r in read_results(out / "results.csv")
            if r["variant"] == "cbam" and r["mean_ablation_effect"] is not None]
    return Path(max(rows, key=lambda r: r["mean_ablation_effect"])["run_dir"])


def main(argv: list[str]) -> int:
    from attn_yolo_console import main as cli_main

    keys = dict(a.split("=", 1) for a in argv if a.startswith(("out=", "width=")))
    rest = [a for a in argv if not a.startswith(("out=", "width="))]
    out = Path(keys.get("out", "runs/ablate/synthetic-key-cbam"))
    width = int(keys.get("width", 900))
    code = cli_main(["ablate", f"out={out}", *rest])
    if code:
        return code
    IMG.mkdir(parents=True, exist_ok=True)
    for name, rel in FIGURES.items():
        shrink(out / rel, IMG / name, width)
    run = most_attending(out)
    shrink(run / "gates.png", IMG / "gates.png", width)
    with tempfile.TemporaryDirectory() as tmp:
        best = run / "weights" / "best.pt"
        code = cli_main(["heatmap", f"model={best}", "layers=all", "imgsz=128", f"out={tmp}"])
        if code:
            return code
        first = sorted(Path(tmp).glob("*_heatmaps.png"))[0]
        shrink(first, IMG / "heatmap.png", width)
    print("docs_figures: wrote " + ", ".join(f"docs/img/{n}" for n in [*FIGURES, "gates.png", "heatmap.png"])
          + f" (CBAM: {run.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
