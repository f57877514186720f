"""Reading the images a tool runs on: files, folders, globs, else the model's own validation images.

By default the model's own validation images when its dataset is at hand, else Ultralytics' sample photos."""

from __future__ import annotations

import glob
from pathlib import Path

import cv2
import numpy as np


def default_sources() -> list[Path]:
    """Ultralytics' sample photos ``bus.jpg`` and ``zidane.jpg`` (shipped in ``ultralytics/assets``)."""
    import ultralytics

    assets = Path(ultralytics.__file__).parent / "assets"
    return [assets / "bus.jpg", assets / "zidane.jpg"]


VAL_IMAGES = 2  # validation images a tool takes by default from the model's own dataset


def model_dataset(model) -> str | None:
    """The dataset YAML a model was trained on: ``train_args["data"]`` of its checkpoint, which Ultralytics puts in
    ``model.args`` when it loads one (a ``YOLO``, its ``nn.Module``); None for a model built from a YAML."""
    from ultralytics.engine.model import Model

    net = model.model if isinstance(model, Model) else model
    for args in (getattr(net, "args", None), getattr(model, "overrides", None)):
        data = args.get("data") if isinstance(args, dict) else getattr(args, "data", None)
        if isinstance(data, str) and data:
            return data
    return None


def dataset_images(model, n: int = VAL_IMAGES) -> tuple[list[Path], str] | None:
    """The first ``n`` validation images (sorted by name) of the dataset the model was trained on, when that dataset
    is at hand (nothing is downloaded), with a description such as ``"2 val images of data.yaml"``; else None.

    On its own images a trained model finds objects, so a check of its detections (export's NMS comparison) or its
    attention (heatmaps) has something to look at, unlike on photos of another domain."""
    from ultralytics.data.utils import check_det_dataset

    data = model_dataset(model)
    if data is None:
        return None
    try:
        files = split_files(check_det_dataset(data, autodownload=False), "val")
    except Exception:  # noqa: BLE001  not at hand (moved, another machine, a download dataset): the defaults apply
        return None
    files = sorted(files, key=lambda f: f.name)[:n]
    return (files, f"{len(files)} val images of {Path(data).name}") if files else None


def default_images(model) -> tuple[list[Path], str]:
    """``dataset_images(model)`` when the model's dataset is at hand, else Ultralytics' bus.jpg and zidane.jpg."""
    return dataset_images(model) or (default_sources(), "Ultralytics' bus.jpg, zidane.jpg")


def split_files(info: dict, split: str) -> list[Path]:
    """Image files of ``split`` (``train``, ``val``) of a dataset as Ultralytics' ``check_det_dataset`` resolves it:
    folders, ``.txt`` image lists, or lists of them; empty when the split names none.

    Raises:
        ValueError: a folder of the split that does not exist or has no images.
    """
    v = info.get(split)
    if not v:
        return []
    splits = [Path(s) for s in (v if isinstance(v, list) else [v])]
    listed = [Path(line.strip()) for s in splits if s.suffix == ".txt" and s.is_file()
              for line in s.read_text(encoding="utf-8-sig").splitlines() if line.strip()]  # a .txt image list
    return read_sources([str(s) for s in splits if s.suffix != ".txt"]) if not listed else listed


def read_sources(source=None, error: type[Exception] = ValueError) -> list[Path]:
    """Image files of ``source``: a file, a folder (its images, sorted), a glob, or a list of these; None: defaults.

    Raises:
        error: nothing matches, or a path does not exist.
    """
    from ultralytics.data.utils import IMG_FORMATS

    if source is None:
        return default_sources()
    files = []
    for s in source if isinstance(source, list | tuple) else [source]:
        p = Path(str(s)).expanduser()
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix[1:].lower() in IMG_FORMATS)
            if not found:
                raise error(f"source={s}: folder has no images ({', '.join(sorted(IMG_FORMATS))})")
            files += found
        elif p.is_file():
            files.append(p)
        elif glob.has_magic(str(s)):
            found = sorted(Path(f) for f in glob.glob(str(p), recursive=True) if Path(f).is_file())
            if not found:
                raise error(f"source={s}: the pattern matches no file")
            files += found
        else:
            raise error(f"source={s}: no such file or folder")
    return files


def read_image(path: Path, error: type[Exception] = ValueError) -> np.ndarray:
    """BGR image ``(H, W, 3)`` uint8 of ``path`` via OpenCV.

    Raises:
        error: unreadable (missing, not an image, unsupported format), naming the file.
    """
    im = cv2.imread(str(path))
    if im is None:
        raise error(f"cannot read image {str(path)!r}: not an image file OpenCV can decode")
    return im
