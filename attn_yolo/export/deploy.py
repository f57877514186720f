"""``attn-yolo export format=openvino|engine``: refuse bad input first, export, verify, print and save the report.

The ONNX flow lives in ``attn_yolo.export.main``; this is the same flow for the formats without an opset:

* ``format=openvino``: Ultralytics' OpenVINO exporter (``openvino_export``), folder ``best_openvino_model/`` next to
  ``best.pt`` (``out=<name>_openvino_model``), verified on OpenVINO's CPU plugin (``verify_openvino``), the report
  ``best_openvino_model/best.verify.json``; ``openvino=<folder or .xml>`` re-verifies an existing IR.
* ``format=engine``: TensorRT, static, on a CUDA GPU (``tensorrt_export``); without one it is refused before anything
  else (``require_cuda``).

Exit codes as for ONNX: 0 exported and verified, 1 a check failed (the files are kept), 2 bad input (``UsageError``).
"""

from __future__ import annotations

from pathlib import Path

from attn_yolo.export.checks import TOLERANCE
from attn_yolo.export.cli_steps import load_model, print_report, refuse_to_replace, usage
from attn_yolo.export.end2end import E2E_RAW_SCALE, end2end_checks, use_end2end
from attn_yolo.export.report import report_path

NAMES = {"openvino": "OpenVINO", "engine": "TensorRT"}


def run_format(fmt: str, a: dict, imgsz) -> int:
    """Export (unless ``openvino=`` / ``engine=`` names an existing file), verify, print and save the report.

    Args:
        fmt: ``openvino`` or ``engine``.
        a: the parsed ``attn-yolo export`` keys (``attn_yolo.export.DEFAULTS``), already type-checked.
        imgsz: the checked export size.

    Returns:
        int: 0 exported (and verified), 1 a verification check failed.

    Raises:
        UsageError: keys that do not apply (``opset=``, ``onnx=``, ``dynamic=True`` for engine), an existing output
            without ``overwrite=True``, an unreadable file, image or model.
    """
    _refuse_other_formats_keys(fmt, a)
    existing = _existing_file(fmt, a)
    _check_out(fmt, a, existing)
    yolo = load_model(a)
    e2e = use_end2end(yolo)  # yolo26: exported and verified through its NMS-free head
    target = _refuse_to_replace_outputs(fmt, a, yolo, existing)
    _print_half_note(fmt, a)
    f = existing if existing is not None else _export(fmt, a, yolo, imgsz, target)
    if not a["verify"]:
        print(f"Exported {f} (not verified: verify=False)")
        return 0
    report = _verify(fmt, a, f, yolo, e2e)
    path = report.save(overwrite=a["overwrite"])
    return print_report(report, path, f"Verification FAILED; the exported files are kept for inspection: {f}")


def _refuse_other_formats_keys(fmt: str, a: dict) -> None:
    """Refuse the keys of another format: ``opset=``, ``onnx=``, the other format's file; ``dynamic=True`` for an
    engine."""
    for k in ("opset", "onnx"):
        if a[k] is not None:
            raise usage(f"{k}= applies to format=onnx only; format={fmt} ({NAMES[fmt]}) has none")
    other = "engine" if fmt == "openvino" else "openvino"
    if a[other] is not None:
        raise usage(f"{other}= verifies a format={other} file; not with format={fmt}")
    if fmt == "engine" and a["dynamic"]:
        raise usage("format=engine with dynamic=True is not verified here (the engine's optimisation profile caps "
                    "the input at the export size); export a static engine")


def _existing_file(fmt: str, a: dict) -> Path | None:
    """The file ``openvino=`` / ``engine=`` names to re-verify (the IR's ``.xml``), None to export; the images are
    read first so that a bad ``source=`` fails before exporting.

    Raises:
        UsageError: unreadable images, a file that does not exist, a folder that is not an OpenVINO IR.
    """
    from attn_yolo.export.openvino_export import openvino_xml
    from attn_yolo.export.verify import load_images

    try:
        if a["verify"]:
            load_images(a["source"])  # fail before exporting
        if a[fmt] is None:
            return None
        f = openvino_xml(a[fmt]) if fmt == "openvino" else Path(a[fmt])
        if not f.is_file():
            raise ValueError(f"{fmt}={str(f)!r}: no such file")
        return f
    except ValueError as e:
        raise usage(str(e)) from None


def _check_out(fmt: str, a: dict, existing: Path | None) -> None:
    """Refuse an ``out=`` with a file to re-verify, or one not named for the format (``<name>_openvino_model``,
    ``*.engine``)."""
    from attn_yolo.export.openvino_export import SUFFIX

    if a["out"] is None:
        return
    want = f"a folder named <name>{SUFFIX}" if fmt == "openvino" else "a *.engine path"
    o = Path(str(a["out"]))
    ok = (o.name.endswith(SUFFIX) and o.name != SUFFIX) if fmt == "openvino" else o.suffix.lower() == ".engine"
    if existing is not None or not ok:
        why = f"not with {fmt}= (the file is verified where it is)" if existing is not None else f"expected {want}"
        raise usage(f"out={str(a['out'])!r}: {why}")


def _refuse_to_replace_outputs(fmt: str, a: dict, yolo, existing: Path | None) -> Path | None:
    """The folder / engine to export to (None: re-verify ``existing``), refused with its report if either exists
    without ``overwrite=True`` (the report only if it is to be written)."""
    from attn_yolo.export.openvino_export import SUFFIX, default_openvino_path
    from attn_yolo.export.tensorrt_export import default_engine_path

    if existing is not None:
        refuse_to_replace([(report_path(existing), "the report")] if a["verify"] else [], a["overwrite"])
        return None
    target = Path(a["out"]) if a["out"] is not None else (
        default_openvino_path(yolo) if fmt == "openvino" else default_engine_path(yolo))
    stem = target.name[: -len(SUFFIX)] if fmt == "openvino" else target.stem
    rep = report_path(target / f"{stem}.xml" if fmt == "openvino" else target)
    what = "the OpenVINO folder" if fmt == "openvino" else "the engine"
    eg = f"{stem}-dynamic{SUFFIX}" if fmt == "openvino" else f"{stem}-fp16.engine"
    targets = [(target, what)] + ([(rep, "the report")] if a["verify"] else [])
    refuse_to_replace(targets, a["overwrite"], f", or out= another name to keep both (e.g. out={eg})")
    return target


def _print_half_note(fmt: str, a: dict) -> None:
    """With ``half=True``: how the format stores and runs fp16, and the tolerance it is verified with."""
    if a["half"]:
        how = "weights stored fp16 (quantize=16, compress_to_fp16); OpenVINO's CPU plugin asked for f16 inference" \
            if fmt == "openvino" else "fp16 engine (quantize=16)"
        print(f"half=True: {how}; verified against fp32 PyTorch with tolerance {TOLERANCE['fp16']:.0e}")


def _export(fmt: str, a: dict, yolo, imgsz, target: Path) -> Path:
    """Export ``yolo`` to ``target`` with Ultralytics' exporter: the IR's ``.xml`` or the ``.engine``."""
    from attn_yolo.export.openvino_export import export_openvino
    from attn_yolo.export.tensorrt_export import export_engine

    try:
        if fmt == "openvino":
            return export_openvino(yolo, imgsz, a["dynamic"], a["half"], out=target, overwrite=a["overwrite"])
        return export_engine(yolo, imgsz, a["half"], out=target, overwrite=a["overwrite"])
    except (FileExistsError, ValueError) as e:
        raise usage(str(e)) from None


def _verify(fmt: str, a: dict, f: Path, yolo, e2e: bool):
    """Verify ``f`` against ``yolo`` on the format's runtime; an end-to-end head through its own checks."""
    from attn_yolo.export.verify import verify_engine, verify_openvino

    kw = {"source": a["source"], "conf": a["conf"], "iou": a["iou"]}
    if e2e:
        kw["compare"] = end2end_checks(TOLERANCE["fp16" if a["half"] else "fp32"])
    try:
        report = verify_openvino(f, yolo, **kw) if fmt == "openvino" else verify_engine(f, yolo, **kw)
    except ValueError as e:  # not an OpenVINO IR / Ultralytics engine
        raise usage(str(e)) from None
    if e2e:
        report.tolerance["raw_definition"] = E2E_RAW_SCALE
    return report
