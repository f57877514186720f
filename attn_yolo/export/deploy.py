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

from attn_yolo.args import UsageError
from attn_yolo.checkpoint import load_yolo
from attn_yolo.export.checks import TOLERANCE
from attn_yolo.export.end2end import E2E_RAW_SCALE, end2end_checks, use_end2end
from attn_yolo.export.report import report_path
from attn_yolo.files import check_writable


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
    from attn_yolo.export.openvino_export import SUFFIX, default_openvino_path, export_openvino, openvino_xml
    from attn_yolo.export.tensorrt_export import default_engine_path, export_engine
    from attn_yolo.export.verify import load_images, verify_engine, verify_openvino

    name = {"openvino": "OpenVINO", "engine": "TensorRT"}[fmt]
    for k in ("opset", "onnx"):
        if a[k] is not None:
            raise UsageError(f"attn-yolo export: {k}= applies to format=onnx only; format={fmt} ({name}) has none")
    other = "engine" if fmt == "openvino" else "openvino"
    if a[other] is not None:
        raise UsageError(f"attn-yolo export: {other}= verifies a format={other} file; not with format={fmt}")
    if fmt == "engine" and a["dynamic"]:
        raise UsageError("attn-yolo export: format=engine with dynamic=True is not verified here (the engine's "
                         "optimisation profile caps the input at the export size); export a static engine")
    existing = a[fmt]
    try:
        if a["verify"]:
            load_images(a["source"])  # fail before exporting
        if existing is not None:
            f = openvino_xml(existing) if fmt == "openvino" else Path(existing)
            if not f.is_file():
                raise ValueError(f"{fmt}={str(f)!r}: no such file")
    except ValueError as e:
        raise UsageError(f"attn-yolo export: {e}") from None
    if a["out"] is not None:
        want = f"a folder named <name>{SUFFIX}" if fmt == "openvino" else "a *.engine path"
        o = Path(str(a["out"]))
        ok = (o.name.endswith(SUFFIX) and o.name != SUFFIX) if fmt == "openvino" else o.suffix.lower() == ".engine"
        if existing is not None or not ok:
            why = f"not with {fmt}= (the file is verified where it is)" if existing is not None else f"expected {want}"
            raise UsageError(f"attn-yolo export: out={str(a['out'])!r}: {why}")
    try:
        yolo = load_yolo(a["model"], "model", trust=a["trust"])
    except ValueError as e:
        raise UsageError(f"attn-yolo export: {e}") from None
    e2e = use_end2end(yolo)  # yolo26: exported and verified through its NMS-free head
    if existing is None:
        target = Path(a["out"]) if a["out"] is not None else (
            default_openvino_path(yolo) if fmt == "openvino" else default_engine_path(yolo))
        stem = target.name[: -len(SUFFIX)] if fmt == "openvino" else target.stem
        rep = report_path(target / f"{stem}.xml" if fmt == "openvino" else target)
        what = "the OpenVINO folder" if fmt == "openvino" else "the engine"
        eg = f"{stem}-dynamic{SUFFIX}" if fmt == "openvino" else f"{stem}-fp16.engine"
        for p, w in ((target, what), (rep, "the report")):
            if p.exists() and not a["overwrite"] and (p is target or a["verify"]):
                raise UsageError(f"attn-yolo export: {w} {str(p)!r} exists; pass overwrite=True to replace it, "
                                 f"or out= another name to keep both (e.g. out={eg})")
            check_writable(p, "out", lambda msg: UsageError(f"attn-yolo export: {msg}"))
    else:
        rep = report_path(f)
        if rep.exists() and a["verify"] and not a["overwrite"]:
            raise UsageError(f"attn-yolo export: the report {str(rep)!r} exists; pass overwrite=True to replace it")
    if a["half"]:
        how = "weights stored fp16 (quantize=16, compress_to_fp16); OpenVINO's CPU plugin asked for f16 inference" \
            if fmt == "openvino" else "fp16 engine (quantize=16)"
        print(f"half=True: {how}; verified against fp32 PyTorch with tolerance {TOLERANCE['fp16']:.0e}")
    if existing is None:
        try:
            if fmt == "openvino":
                f = export_openvino(yolo, imgsz, a["dynamic"], a["half"], out=target, overwrite=a["overwrite"])
            else:
                f = export_engine(yolo, imgsz, a["half"], out=target, overwrite=a["overwrite"])
        except (FileExistsError, ValueError) as e:
            raise UsageError(f"attn-yolo export: {e}") from None
    if not a["verify"]:
        print(f"Exported {f} (not verified: verify=False)")
        return 0
    kw = {"source": a["source"], "conf": a["conf"], "iou": a["iou"]}
    if e2e:
        kw["compare"] = end2end_checks(TOLERANCE["fp16" if a["half"] else "fp32"])
    try:
        report = verify_openvino(f, yolo, **kw) if fmt == "openvino" else verify_engine(f, yolo, **kw)
    except ValueError as e:  # not an OpenVINO IR / Ultralytics engine
        raise UsageError(f"attn-yolo export: {e}") from None
    if e2e:
        report.tolerance["raw_definition"] = E2E_RAW_SCALE
    path = report.save(overwrite=a["overwrite"])
    print(report.summary())
    print(f"Report saved to {path}")
    if not report.passed:
        print(f"Verification FAILED; the exported files are kept for inspection: {f}")
    return 0 if report.passed else 1
