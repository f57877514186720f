"""Loading and saving user models for every tool: one model loader, weights-only by default, checkpoints written.

Safe by default: every attn-yolo tool loads a user checkpoint weights-only (``load_yolo``), so a crafted ``.pt`` cannot
run code; ``trust=True`` (a key of each tool, ``trust: true`` in an ablation config) opts into a full unpickle for a
file whose source the user trusts. Ultralytics' own commands through the CLI (``attn-yolo train/val/predict``) load
weights-only too (``weights_only``, as ``ULTRALYTICS_SAFE_LOAD=1`` would), ``trust=True`` opting out.
"""

from __future__ import annotations

import copy
import zipfile
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.files import atomic_write, check_out

MODEL_SUFFIXES = (".pt", ".yaml", ".yml")


def unsafe_globals(path: str | Path) -> list[str]:
    """Names (``module.Name``) of the classes and functions a checkpoint references outside the weights-only
    allow-list (torch's, plus what ``torch.serialization.add_safe_globals`` registered), read from the pickle's
    opcodes without unpickling (``torch.serialization.get_unsafe_globals_in_checkpoint``).

    Raises:
        ValueError: ``path`` is not a ``torch.save`` zip archive.
    """
    return torch.serialization.get_unsafe_globals_in_checkpoint(str(path))


weights_only = api.weights_only
"""Within the block, ``YOLO(path)`` loads checkpoints weights-only (``attn_yolo.ultralytics_api.weights_only``)."""


LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
"""How a file in torch's legacy (pre-1.6, non-zip) ``torch.save`` format starts: pickle protocol 2, then torch's magic
number ``0x1950a86a20f9469cfc6c`` (``torch.serialization.MAGIC_NUMBER``)."""


def not_a_checkpoint(path: Path) -> str | None:
    """Why ``path`` is no ``torch.save`` file at all (empty, or neither a zip archive nor torch's legacy format), or
    None when it is one of those formats (which does not mean it loads)."""
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes), not a checkpoint"
    if zipfile.is_zipfile(path):
        return None
    with open(path, "rb") as f:
        head = f.read(len(LEGACY_MAGIC))
    if head == LEGACY_MAGIC:
        return None
    return (f"is not a checkpoint: neither a torch.save zip archive nor torch's legacy format ({size} bytes, "
            f"starting {head[:8]!r}); check that the path names the .pt that training wrote")


def _load_checkpoint(path: Path, what: str, error: type[Exception], trust: bool):
    """``YOLO(path)`` for a ``.pt``: weights-only unless ``trust``; every failure as ``error`` with one line."""
    from ultralytics import YOLO

    if why := not_a_checkpoint(path):
        raise error(f"{what}={str(path)!r} {why}")
    if not trust and not zipfile.is_zipfile(path):
        raise error(f"{what}={str(path)!r} is in torch's legacy (pre-1.6) checkpoint format, which cannot be loaded "
                    f"weights-only; only if it comes from a source you trust, pass trust=True")
    try:
        if trust:
            return YOLO(str(path))
        with weights_only():
            return YOLO(str(path))
    except Exception as e:  # Ultralytics/torch raise TypeError, UnpicklingError, KeyError, ... for unloadable files
        try:
            bad = [] if trust else unsafe_globals(path)
        except (ValueError, RuntimeError, OSError):  # a zip archive that torch.save did not write
            bad = []
        if bad:
            raise error(
                f"{what}={str(path)!r}: refused to load: the checkpoint references {', '.join(bad)}, outside the "
                f"weights-only allow-list (torch, Ultralytics and attn-yolo model classes), and unpickling it could "
                f"run code; only if you trust the file's source, pass trust=True"
            ) from e
        msg = " ".join(str(e).split()).removeprefix("ERROR ❌️ ")
        raise error(f"{what}={str(path)!r} is not a loadable Ultralytics checkpoint: {type(e).__name__}: {msg}") from e


def _yaml_exists(path: Path) -> bool:
    """Whether Ultralytics resolves the model YAML ``path``: the file, its scale-less name (``yolo11n-cbam.yaml`` ->
    ``yolo11-cbam.yaml``, as ``yaml_model_load`` does) or a YAML shipped with Ultralytics."""
    from ultralytics.utils.checks import check_yaml

    unified = api.unscaled_yaml_path(path)
    return path.is_file() or bool(check_yaml(str(path), hard=False) or check_yaml(unified, hard=False))


def load_yolo(model, what: str = "model", error: type[Exception] = ValueError, suffixes=MODEL_SUFFIXES, *,
              trust: bool = False):
    """``ultralytics.YOLO`` for a checkpoint or model-YAML path, or an existing ``YOLO`` (returned as is).

    A checkpoint is loaded **weights-only** (``torch.load(weights_only=True)`` through Ultralytics' own loader,
    ``torch_safe_load(safe_only=True)``), with torch's, Ultralytics' and attn-yolo's model classes allowed: unpickling
    cannot run code. A checkpoint that references anything else is refused, naming it, before anything is unpickled
    from it. ``trust=True`` loads as Ultralytics does by default (a full unpickle, unless ``ULTRALYTICS_SAFE_LOAD=1``):
    only for files from a source you trust.

    Args:
        model: a path (``*.pt``, or a model YAML where ``suffixes`` allows it) or a ``YOLO`` object.
        what: the key or argument name used in messages (``"model"``, ``"base"``, ``"pretrained"``).
        error: the tool's error class.
        suffixes: allowed file suffixes.
        trust: unpickle the whole checkpoint (may run code it contains).

    Raises:
        error: a missing file, a file with another suffix, a file that is not a checkpoint, or (unless ``trust``) a
            checkpoint referencing classes or functions outside the allow-list.
    """
    from ultralytics.engine.model import Model

    if isinstance(model, Model):
        return model
    if not isinstance(model, (str, Path)):
        raise error(f"{what}: expected a checkpoint path or a YOLO object, got {type(model).__name__}")
    path = Path(model)
    if path.suffix.lower() not in suffixes:
        raise error(f"{what}={str(model)!r}: expected {' or '.join(f'*{s}' for s in suffixes)}")
    is_yaml = path.suffix.lower() in (".yaml", ".yml")
    if not (path.is_file() or (is_yaml and _yaml_exists(path))):
        raise error(f"{what}={str(model)!r}: no such file (give a checkpoint, e.g. runs/detect/train/weights/best.pt)")
    from ultralytics import YOLO

    from attn_yolo.registry import register

    register()  # the blocks must be resolvable before Ultralytics parses a YAML or unpickles a checkpoint

    return YOLO(str(path)) if is_yaml else _load_checkpoint(path, what, error, trust)


class CheckpointError(ValueError):
    """A file ``attn_yolo.load`` refuses: missing, not a checkpoint, or referencing code outside the allow-list."""


def load(path: str | Path, trust: bool = False):
    """An Ultralytics ``YOLO`` for a checkpoint (or model YAML), the checkpoint loaded **weights-only**, with torch's,
    Ultralytics' and attn-yolo's model classes allowed: the Python form of what every attn-yolo tool and the CLI do.

    Plain ``YOLO("best.pt")`` is Ultralytics' full unpickle (unless ``ULTRALYTICS_SAFE_LOAD=1``): a crafted ``.pt`` runs
    its code the moment it is loaded, ``import attn_yolo`` or not. Here such a file is refused before anything of it is
    unpickled, naming what it references. Once a file has loaded weights-only it references allow-listed classes only,
    so Ultralytics reading it again later (``.train()``, ``.val()``) constructs nothing else.

    Args:
        path: a ``.pt`` checkpoint (or a model ``.yaml``, built as ``YOLO`` builds it).
        trust: unpickle the whole file as Ultralytics does by default: only for files from a source you trust.

    Returns:
        ultralytics.YOLO: the model, the blocks registered.

    Raises:
        CheckpointError: one line naming the file: no such file, not a checkpoint (empty, or not a ``torch.save``
            file), or (unless ``trust``) a checkpoint referencing globals outside the allow-list, e.g.
            ``path='evil.pt': refused to load: the checkpoint references builtins.exec, ...; only if you trust the
            file's source, pass trust=True``.
    """
    return load_yolo(path, what="path", error=CheckpointError, trust=trust)


def load_model(model, what: str = "model", error: type[Exception] = ValueError, suffixes=MODEL_SUFFIXES, *,
               trust: bool = False):
    """The Ultralytics ``nn.Module`` (e.g. ``DetectionModel``) of a path, checkpoint dict, ``YOLO`` object or module.

    A path is loaded with ``load_yolo`` (weights-only unless ``trust``).

    Raises:
        error: a missing file, a file with another suffix, a refused checkpoint (see ``load_yolo``), or an object
            that is not an Ultralytics model.
    """
    from ultralytics.engine.model import Model

    if isinstance(model, dict) and ("model" in model or "ema" in model):
        return (model.get("ema") or model["model"]).float()
    if isinstance(model, (str, Path, Model)):
        model = load_yolo(model, what, error, suffixes, trust=trust).model
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
