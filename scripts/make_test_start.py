"""Train the small detector the attention-check tests start from: ``tests/data/shapes64-yolo11n.pt``.

yolo11n trained from scratch on an easy synthetic-shapes set (plain backgrounds, large shapes, 64 px; the same
``generate`` arguments as ``tests/test_attention_check.py``'s data), so that the tests validate a model that detects
(mAP50-95 0.14 on its 64 validation images) without training one for minutes in every test run. Deterministic on
CPU for a given Ultralytics and torch; written in FP16 as Ultralytics saves, weights-only loadable.

    python scripts/make_test_start.py            # ~4 min on 2 cores; overwrites the file
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "shapes64-yolo11n.pt"
DATA = {"n_train": 640, "n_val": 64, "imgsz": 64, "seed": 3, "clutter": 0.0, "size_range": (0.3, 0.5)}
TRAIN = {"epochs": 20, "imgsz": 64, "batch": 16, "optimizer": "AdamW", "lr0": 0.003, "warmup_epochs": 0.3,
         "mosaic": 0.0, "val": False, "plots": False, "device": "cpu", "workers": 0, "seed": 0}


def main() -> int:
    from ultralytics import YOLO

    import attn_yolo  # noqa: F401  (the blocks registered, as in every tool)
    from attn_yolo.checkpoint import load_model, save_checkpoint
    from attn_yolo.synthetic import generate

    with tempfile.TemporaryDirectory() as tmp:
        data = generate(Path(tmp) / "data", **DATA)
        yolo = YOLO("yolo11n.yaml")
        metrics = yolo.train(data=str(data), project=tmp, name="start", exist_ok=True, verbose=False, **TRAIN)
        model = load_model(Path(tmp) / "start" / "weights" / "best.pt", "weights", suffixes=(".pt",))
        save_checkpoint(model, OUT, overwrite=True, note="tests' start: scripts/make_test_start.py")
        shutil.rmtree(Path(tmp) / "start", ignore_errors=True)
    print(f"{OUT}: mAP50-95 {metrics.box.map:.4f} on its {DATA['n_val']} validation images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
