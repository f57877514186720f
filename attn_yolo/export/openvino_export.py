"""OpenVINO export of a model with attention blocks through Ultralytics' exporter, and how an IR was exported.

``YOLO(model).export(format="openvino")`` in Ultralytics 8.4.190 traces the model with TorchScript and converts it
with ``openvino.convert_model`` (no ONNX in between); ``half=True`` is Ultralytics' ``quantize=16``, which stores the
weights as fp16 (``compress_to_fp16``). The result is a folder ``<stem>_openvino_model/`` holding ``<stem>.xml``,
``<stem>.bin`` and Ultralytics' ``metadata.yaml``; the folder suffix is how Ultralytics (``AutoBackend``) recognises
the format, so ``out=`` keeps it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from attn_yolo import ultralytics_api as api
from attn_yolo.checkpoint import load_yolo
from attn_yolo.files import check_out

SUFFIX = "_openvino_model"
"""Ultralytics' folder suffix of an OpenVINO export (``best.pt`` → ``best_openvino_model/``)."""


def default_openvino_path(yolo) -> Path:
    """Where Ultralytics writes the OpenVINO folder of ``yolo``: ``best_openvino_model/`` next to ``best.pt``; for a
    model built from a YAML, ``<yaml name>_openvino_model/`` in the working directory."""
    file = api.model_file(yolo)
    file = Path(file.name) if file.suffix in (".yaml", ".yml") else file
    return file.with_name(file.stem + SUFFIX)


def openvino_xml(path) -> Path:
    """The ``.xml`` of an OpenVINO IR given as the ``.xml`` itself or its folder.

    Raises:
        ValueError: no such file or folder, or a folder without exactly one ``.xml``.
    """
    p = Path(path)
    if p.is_file() and p.suffix.lower() == ".xml":
        return p
    if p.is_dir():
        xml = sorted(p.glob("*.xml"))
        if len(xml) == 1:
            return xml[0]
        raise ValueError(f"{str(p)!r}: expected one OpenVINO .xml in the folder, found {len(xml)}")
    raise ValueError(f"{str(p)!r}: no such OpenVINO model (expected a *{SUFFIX} folder or its .xml)")


def openvino_info(path) -> dict:
    """How an OpenVINO IR was exported, read from the IR (and Ultralytics' ``metadata.yaml`` beside it):
    dynamic input shape, precision (fp16 if a weight constant is), export size, stride.

    Raises:
        ValueError: not an OpenVINO IR with an image input ``(B, 3, H, W)`` (``openvino_xml``'s errors too).
    """
    import openvino as ov
    import yaml

    xml = openvino_xml(path)
    if not xml.with_suffix(".bin").is_file():
        raise ValueError(f"{str(xml)!r}: the weights file {xml.with_suffix('.bin').name} is missing")
    try:
        model = ov.Core().read_model(str(xml))
    except Exception as e:  # openvino's RuntimeError on a file that is not an IR
        first = str(e).splitlines()[0] if str(e) else ""
        raise ValueError(f"{str(xml)!r} is not an OpenVINO model: {type(e).__name__}: {first}") from None
    shape = model.input(0).get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 4:
        raise ValueError(f"{str(xml)!r} is not an OpenVINO detection model: expected an image input (B, 3, H, W)")
    meta_file = xml.parent / "metadata.yaml"
    meta = yaml.safe_load(meta_file.read_text()) if meta_file.is_file() else {}
    meta = meta if isinstance(meta, dict) else {}
    if "imgsz" in meta:
        imgsz = [int(v) for v in meta["imgsz"]]
    else:
        imgsz = [d.get_length() if d.is_static else 640 for d in (shape[2], shape[3])]
    fp16 = any(op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.f16 for op in model.get_ops())
    return {"opset": None, "dynamic": shape.is_dynamic, "precision": "fp16" if fp16 else "fp32", "imgsz": imgsz,
            "stride": int(meta.get("stride", 32))}


def export_openvino(
    model,
    imgsz: int | tuple[int, int] = 640,
    dynamic: bool = False,
    half: bool = False,
    out=None,
    overwrite: bool = False,
    trust: bool = False,
) -> Path:
    """Export a detection model (path, YAML or ``YOLO``) to OpenVINO with Ultralytics' exporter, on CPU.

    Args:
        imgsz: export size (int or (h, w)); the input shape of a static IR.
        dynamic: dynamic batch, height and width (the IR's input is ``[?, 3, ?, ?]``).
        half: fp16 weights (Ultralytics' ``quantize=16``: ``compress_to_fp16``).
        out: the ``*_openvino_model`` folder to write; None: ``default_openvino_path`` (``best_openvino_model/`` next
            to ``best.pt``, whatever ``dynamic``/``half``, so name each export).
        overwrite: write into an existing ``out``; otherwise it is refused before exporting.
        trust: unpickle a checkpoint path fully (may run code it contains); else weights-only.

    Returns:
        Path: the IR's ``.xml`` inside ``out``.

    Raises:
        FileExistsError: ``out`` exists and not ``overwrite``.
        ValueError: ``out`` not ending in ``_openvino_model``; a model path that does not load (``load_yolo``).
    """
    yolo = load_yolo(model, trust=trust)
    out = Path(out) if out is not None else default_openvino_path(yolo)
    if not out.name.endswith(SUFFIX) or out.name == SUFFIX:
        raise ValueError(f"out={str(out)!r}: expected a folder named <name>{SUFFIX} (Ultralytics' OpenVINO naming)")
    check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    stem = out.name[: -len(SUFFIX)]
    kw = {"quantize": 16} if half else {}
    threads = torch.get_num_threads()  # Ultralytics' select_device("cpu") resets it to its own NUM_THREADS
    try:
        with api.export_named(yolo, out.parent / f"{stem}.pt"):  # the exporter then writes <stem>_openvino_model/
            f = yolo.export(format="openvino", imgsz=imgsz, dynamic=dynamic, device="cpu", **kw)
    finally:
        torch.set_num_threads(threads)
    return openvino_xml(Path(f)).resolve()
