"""TensorRT export (``format=engine``) through Ultralytics' exporter, on a CUDA GPU only; refused at once without one.

Ultralytics 8.4.190 builds an engine by exporting ONNX and running TensorRT's ONNX parser (``onnx2engine``); it needs
a CUDA device and the ``tensorrt`` package. ``require_cuda`` checks the device first, before any model is loaded, so
``attn-yolo export format=engine`` on a CPU machine fails in one line (exit 2).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.checkpoint import load_yolo
from attn_yolo.files import check_out


class NoCudaError(RuntimeError):
    """No CUDA device: a TensorRT engine can be neither built nor run here."""


def require_cuda() -> None:
    """Raise ``NoCudaError`` (one line) unless torch sees a CUDA device."""
    if not torch.cuda.is_available():
        raise NoCudaError(
            f"format=engine (TensorRT) needs a CUDA GPU; none is visible (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}). Use "
            "format=onnx or format=openvino here, or run on a machine with an NVIDIA GPU"
        )


def default_engine_path(yolo) -> Path:
    """Where Ultralytics writes the ``.engine`` of ``yolo``: next to its ``.pt`` (a YAML model: working directory)."""
    file = api.model_file(yolo)
    return (Path(file.name) if file.suffix in (".yaml", ".yml") else file).with_suffix(".engine")


def engine_info(path) -> dict:
    """How an Ultralytics ``.engine`` was exported, from the JSON header Ultralytics writes before the engine bytes
    (4-byte little-endian length, then the metadata): dynamic, precision, export size, stride.

    Raises:
        ValueError: no such file, or no Ultralytics header.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{str(p)!r}: no such file")
    with open(p, "rb") as f:
        n = int.from_bytes(f.read(4), byteorder="little")
        try:
            meta = json.loads(f.read(n)) if 0 < n <= p.stat().st_size - 4 else None
        except ValueError:
            meta = None
    if not isinstance(meta, dict) or "imgsz" not in meta:
        raise ValueError(f"{str(p)!r} is not an Ultralytics TensorRT engine (no metadata header)")
    args = meta.get("args", {}) or {}
    half = args.get("quantize") == 16 or bool(args.get("half"))
    return {"opset": None, "dynamic": bool(args.get("dynamic")), "precision": "fp16" if half else "fp32",
            "imgsz": [int(v) for v in meta["imgsz"]], "stride": int(meta.get("stride", 32))}


def export_engine(model, imgsz: int | tuple[int, int] = 640, half: bool = True, out=None, overwrite: bool = False,
                  trust: bool = False, device: int = 0) -> Path:
    """Export a detection model to a static TensorRT engine on CUDA ``device`` with Ultralytics' exporter.

    Args:
        half: fp16 engine (Ultralytics' ``quantize=16``); False: fp32.
        out: the ``.engine`` to write; None: ``default_engine_path``.

    Returns:
        Path: the ``.engine`` file.

    Raises:
        NoCudaError: no CUDA device (checked first).
        FileExistsError: ``out`` exists and not ``overwrite``.
        ValueError: ``out`` not ``*.engine``; a model path that does not load.
    """
    require_cuda()
    yolo = load_yolo(model, trust=trust)
    out = Path(out) if out is not None else default_engine_path(yolo)
    if out.suffix.lower() != ".engine":
        raise ValueError(f"out={str(out)!r}: expected a *.engine path")
    check_out(out, overwrite)
    check_out(out.with_suffix(".onnx"), overwrite, key="the intermediate ONNX file Ultralytics writes beside out")
    out.parent.mkdir(parents=True, exist_ok=True)
    with api.export_named(yolo, out.with_suffix(".pt")):  # the exporter then writes <out>.engine (and .onnx)
        f = yolo.export(format="engine", imgsz=imgsz, device=device, **({"quantize": 16} if half else {}))
    return Path(f).resolve()
