"""Loading user models and writing output files, for every tool: one model loader, atomic writes, no silent overwrite."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

import torch

MODEL_SUFFIXES = (".pt", ".yaml", ".yml")


def check_out(path: str | Path, overwrite: bool, key: str = "out", error: type[Exception] = FileExistsError) -> None:
    """Refuse to replace an existing output unless ``overwrite``.

    Raises:
        error: ``"<key>='<path>' exists; pass overwrite=True to replace it"``.
    """
    if Path(path).exists() and not overwrite:
        raise error(f"{key}={str(path)!r} exists; pass overwrite=True to replace it")


def atomic_write(path: str | Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then move it onto ``path`` (never a half-written file).

    The file gets the permissions a plain ``open(path, "w")`` would give it (``0o666`` less the user's umask), not the
    owner-only ``0o600`` of ``mkstemp``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_yolo(model, what: str = "model", error: type[Exception] = ValueError, suffixes=MODEL_SUFFIXES):
    """``ultralytics.YOLO`` for a checkpoint or model-YAML path, or an existing ``YOLO`` (returned as is).

    Args:
        model: a path (``*.pt``, or a model YAML where ``suffixes`` allows it) or a ``YOLO`` object.
        what: the key or argument name used in messages (``"model"``, ``"base"``, ``"pretrained"``).
        error: the tool's error class.
        suffixes: allowed file suffixes.

    Raises:
        error: a missing file or a file with another suffix.
    """
    from ultralytics.engine.model import Model

    if isinstance(model, Model):
        return model
    if not isinstance(model, (str, Path)):
        raise error(f"{what}: expected a checkpoint path or a YOLO object, got {type(model).__name__}")
    path = Path(model)
    if not path.is_file():
        raise error(f"{what}={str(model)!r}: no such file (give a checkpoint such as runs/detect/train/weights/best.pt)")
    if path.suffix.lower() not in suffixes:
        raise error(f"{what}={str(model)!r}: expected {' or '.join(f'*{s}' for s in suffixes)}")
    from ultralytics import YOLO

    from attn_yolo.registry import register

    register()  # the blocks must be resolvable before Ultralytics parses a YAML or unpickles a checkpoint

    return YOLO(str(path))


def load_model(model, what: str = "model", error: type[Exception] = ValueError, suffixes=MODEL_SUFFIXES):
    """The Ultralytics ``nn.Module`` (e.g. ``DetectionModel``) of a path, checkpoint dict, ``YOLO`` object or module.

    Raises:
        error: a missing file, a file with another suffix, or an object that is not an Ultralytics model.
    """
    from ultralytics.engine.model import Model

    if isinstance(model, dict) and ("model" in model or "ema" in model):
        return (model.get("ema") or model["model"]).float()
    if isinstance(model, (str, Path, Model)):
        model = load_yolo(model, what, error, suffixes).model
    if isinstance(model, torch.nn.Module) and isinstance(getattr(model, "model", None), torch.nn.Sequential):
        return model
    raise error(f"{what}: expected a checkpoint path, checkpoint dict, YOLO object or its nn.Module, got "
                f"{type(model).__name__}")


def save_checkpoint(model: torch.nn.Module, path: str | Path, *, overwrite: bool = False, note: str = "",
                    key: str = "out_weights", error: type[Exception] = FileExistsError) -> Path:
    """Write ``model`` as an Ultralytics checkpoint (the fields ``YOLO.save`` writes; FP16 as Ultralytics saves).

    ``YOLO(path)`` loads it; ``YOLO(path).train(data=...)`` rebuilds the model from its YAML and loads these weights
    by name (all of them match).

    Raises:
        error: ``path`` exists and not ``overwrite``.
    """
    from datetime import datetime

    from ultralytics import __version__

    path = Path(path)
    check_out(path, overwrite, key, error)
    ckpt = {
        "date": datetime.now().astimezone().isoformat(),
        "version": __version__,
        "license": "AGPL-3.0 License (https://ultralytics.com/license)",
        "docs": "https://docs.ultralytics.com",
        "model": copy.deepcopy(model).half(),
        "ema": None,
        "attn_yolo": note,
    }
    atomic_write(path, lambda p: torch.save(ckpt, p))
    return path
