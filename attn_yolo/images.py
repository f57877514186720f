"""Reading the images a tool runs on: files, folders, globs, and Ultralytics' sample photos as the default."""

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
