"""Shared test setup: offline Ultralytics, headless plotting, real-data fixtures (skipped when absent)."""

import os

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COCO128 = REPO.parent / "shared" / "data" / "coco128"


@pytest.fixture(scope="session")
def assets() -> Path:
    """Folder of Ultralytics' bundled photos (bus.jpg, zidane.jpg)."""
    import ultralytics

    return Path(ultralytics.__file__).parent / "assets"


@pytest.fixture(scope="session")
def coco_few(tmp_path_factory) -> Path:
    """A writable copy of a few COCO128 images (8 train, 4 val) with labels; returns its data.yaml. Skips if absent."""
    if not (COCO128 / "data.yaml").exists():
        pytest.skip(f"COCO128 not found at {COCO128}")
    import yaml

    root = tmp_path_factory.mktemp("coco_few")
    for split, n in (("train2017", 8), ("val2017", 4)):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for img in sorted((COCO128 / "images" / split).glob("*.jpg"))[:n]:
            shutil.copy(img, root / "images" / split / img.name)
            label = COCO128 / "labels" / split / f"{img.stem}.txt"
            if label.exists():
                shutil.copy(label, root / "labels" / split / label.name)
    names = yaml.safe_load((COCO128 / "data.yaml").read_text())["names"]
    data = {"path": str(root), "train": "images/train2017", "val": "images/val2017", "names": names}
    (root / "data.yaml").write_text(yaml.safe_dump(data))
    return root / "data.yaml"
