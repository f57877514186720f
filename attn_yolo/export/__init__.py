"""Export with the attention blocks registered (ONNX, OpenVINO, TensorRT), verified against PyTorch; the CLI.

    attn-yolo export model=best.pt format=onnx [imgsz=640] [dynamic=True] [half=True] [opset=N] [simplify=True]
    attn-yolo export model=best.pt format=openvino [imgsz=640] [dynamic=True] [half=True]
    attn-yolo export model=best.pt sdpa=True     # Ultralytics' Attention/AAttn exported as SDPA (opset >= 14)
    attn-yolo export model=best.pt format=onnx|openvino quantize=8 [data=] [fraction=1.0] [keep_float=auto]
        [int8_max_drop=0.55]                     # INT8 (attn_yolo.export.int8_cli), verified against fp32

``onnx_export`` runs Ultralytics' exporter after checking the requested opset against every block in the model
(``MIN_OPSET``); ``verify`` compares the file with the PyTorch model under onnxruntime (``onnx.checker``, raw head
outputs, post-NMS detections) and writes ``<stem>.verify.json`` next to the ``.onnx``. A failed check makes ``main``
return 1 and keeps the file; a check that compared nothing (no detection above ``conf``) is reported as not run.

Outputs are never replaced silently: an existing ``.onnx`` or report is refused before exporting unless
``overwrite=True``. Ultralytics names the file after the checkpoint (``best.onnx``) whatever ``dynamic``/``half``, so a
second export of the same checkpoint with other settings needs ``out=`` (``out=best-dynamic.onnx``) or ``overwrite``.
The checkpoint loads weights-only (``attn_yolo.checkpoint.load_yolo``) unless ``trust=True``.

``format=openvino`` and ``format=engine`` (TensorRT, CUDA only: refused at once without a GPU) take the same flow in
``attn_yolo.export.deploy``, with one runtime each (``attn_yolo.export.runtime``) and the same checks and report.
"""

from __future__ import annotations

from pathlib import Path

from attn_yolo.args import Key, Schema
from attn_yolo.export.checks import TOLERANCE, Check
from attn_yolo.export.cli_steps import load_model, print_report, refuse_to_replace, usage
from attn_yolo.export.end2end import E2E_RAW_SCALE, end2end_checks, use_end2end
from attn_yolo.export.int8 import export_int8, keep_float_scopes
from attn_yolo.export.int8_cli import run_int8
from attn_yolo.export.onnx_export import (
    MIN_OPSET,
    OpsetError,
    block_min_opsets,
    check_opset,
    default_onnx_path,
    default_opset,
    export_onnx,
    max_opset,
    onnx_info,
    toposort_onnx,
    valid_opset,
)
from attn_yolo.export.openvino_export import export_openvino, openvino_info
from attn_yolo.export.report import VerifyReport, report_path
from attn_yolo.export.runtime import OpenVINORuntime, OrtRuntime, latency_ms, onnx_latency_ms, ort_session
from attn_yolo.export.tensorrt_export import NoCudaError, require_cuda
from attn_yolo.export.verify import load_images, verify_engine, verify_onnx, verify_openvino
from attn_yolo.sdpa import fuse_attention
from attn_yolo.text import did_you_mean
from attn_yolo.ultralytics_api.cli_checks import export_format_names

__all__ = [
    "MIN_OPSET",
    "TOLERANCE",
    "Check",
    "NoCudaError",
    "OpenVINORuntime",
    "OpsetError",
    "OrtRuntime",
    "VerifyReport",
    "block_min_opsets",
    "check_opset",
    "default_onnx_path",
    "default_opset",
    "export_int8",
    "export_onnx",
    "export_openvino",
    "keep_float_scopes",
    "latency_ms",
    "main",
    "max_opset",
    "onnx_info",
    "onnx_latency_ms",
    "openvino_info",
    "ort_session",
    "report_path",
    "require_cuda",
    "toposort_onnx",
    "valid_opset",
    "verify_engine",
    "verify_onnx",
    "verify_openvino",
]


SCHEMA = Schema([
    Key("model", "path", help=".pt checkpoint or model YAML", required=" (a .pt checkpoint or a model YAML)"),
    Key("format", "str", "onnx", help="onnx, openvino or engine (TensorRT)"),
    Key("imgsz", "imgsz", 640, help="export size: int or h,w", pair=True),
    Key("dynamic", "bool", False, help="dynamic batch/height/width"),
    Key("half", "bool", False, help="fp16 weights (CPU: Ultralytics converts the graph)"),
    Key("opset", "any", help="ONNX opset; default: Ultralytics' choice (18)"),
    Key("simplify", "bool", True, help="onnxslim"),
    Key("verify", "bool", True, help="run the checks against PyTorch"),
    Key("source", "any", help="images for the checks; default: 2 val images of the model's dataset, else bus.jpg, "
        "zidane.jpg"),
    Key("conf", "float", 0.25, help="NMS confidence threshold of the detection check", low=0, high=1),
    Key("iou", "float", 0.7, help="NMS IoU threshold of the detection check", low=0, high=1),
    Key("onnx", "path", help="verify this .onnx instead of exporting"),
    Key("openvino", "path", help="verify this OpenVINO IR folder instead of exporting"),
    Key("engine", "path", help="verify this TensorRT engine instead of exporting"),
    Key("out", "path", help="the file (folder for openvino) to write; default: next to model="),
    Key("overwrite", "bool", False, help="replace an existing export and its .verify.json"),
    Key("trust", "bool", False, help="unpickle model= fully (may run code it contains); else weights-only"),
    Key("sdpa", "bool", False, help="trace Ultralytics' own Attention/AAttn on scaled_dot_product_attention"),
    Key("quantize", "any", help="8: INT8 (ONNX Runtime static QDQ, OpenVINO NNCF), calibrated and verified; 16: as "
        "half=True; 32: fp32"),
    Key("data", "any", help="INT8: dataset YAML to calibrate and verify on; default: the one the model was trained on"),
    Key("fraction", "any", 1.0, help="INT8: share (0, 1] or count (>= 1) of training images to calibrate on"),
    Key("keep_float", "any", "auto", help="INT8: keep the blocks' gates/softmax in float: auto (only if the drop "
        "exceeds int8_max_drop), True, False"),
    Key("int8_max_drop", "any", help="INT8: the mAP50-95 points INT8 may lose against fp32 (default 0.55)"),
])
"""``attn-yolo export`` keys. ``onnx=file.onnx`` (``openvino=best_openvino_model``, ``engine=best.engine``) verifies an
existing file against ``model=`` instead of exporting."""
DEFAULTS = SCHEMA.defaults()

HELP = """attn-yolo export model=best.pt format=onnx [imgsz=640] [dynamic=True] [half=True] [opset=N] [simplify=True]
    [verify=True] [source=img.jpg|dir] [conf=0.25] [iou=0.7] [onnx=existing.onnx] [out=file.onnx] [overwrite=True]
    [trust=True] [sdpa=True]
attn-yolo export model=best.pt format=openvino [imgsz=640] [dynamic=True] [half=True] [openvino=existing_openvino_model]
attn-yolo export model=best.pt format=engine [imgsz=640] [half=True]     (TensorRT: a CUDA GPU, static only)

Ultralytics' ONNX exporter with the attention blocks registered, then verification against PyTorch (onnx.checker,
onnxruntime CPU vs PyTorch raw head outputs, post-NMS detections; dynamic: batch 1 and 3, two more sizes). The report
is printed and saved as <stem>.verify.json next to the .onnx. Exit code 1 if a check fails (the file is kept).
  model     .pt checkpoint or model YAML (required)         imgsz   export size: int or h,w (default 640)
  dynamic   dynamic batch/height/width (default False)       half    fp16 weights (CPU: Ultralytics converts the graph)
  opset     ONNX opset (default: Ultralytics' choice, 18)    simplify  onnxslim (default True)
  verify    run the checks (default True)                    source  images for the checks (default: 2 val images
                                                             of the model's dataset if at hand, else bus.jpg,
                                                             zidane.jpg)
  conf, iou NMS thresholds for the detection check           onnx    verify this file instead of exporting
  out       the .onnx to write (default: best.onnx next to best.pt, whatever dynamic/half: name each export)
  overwrite replace an existing .onnx / .verify.json (default False: refused before exporting)
  trust     unpickle model= fully, which may run code it contains (default False: weights-only)
  sdpa      trace Ultralytics' own Attention/AAttn (C2PSA, A2C2f) on scaled_dot_product_attention (attn_yolo.sdpa;
            same math, needs opset >= 14; default False: Ultralytics' explicit softmax)
format=openvino: Ultralytics' OpenVINO exporter (TorchScript -> OpenVINO, no ONNX), verified on OpenVINO's CPU plugin
  (fp32: f32 inference; half: fp16 weights) with the same checks; out=<name>_openvino_model (default
  best_openvino_model/ next to best.pt); report <folder>/best.verify.json.
format=engine: TensorRT via Ultralytics, verified against PyTorch on CUDA; refused at once without a CUDA GPU.
quantize=8 (format=onnx: ONNX Runtime static QDQ; format=openvino: NNCF), static, Ultralytics' exporter:
  data      calibration/validation dataset (default: the one the model was trained on; data=synthetic: embedded)
  fraction  share (or count, an int > 1) of the training split that calibrates (default 1.0: all, as Ultralytics)
  keep_float  auto (default: the block keep-float list only if Ultralytics' rules drop more than int8_max_drop),
            True, False
  int8_max_drop  largest mAP50-95 drop INT8 vs fp32 PyTorch on the val split, points (default 0.55); exit 1 above
  out       best_int8.onnx / best_int8_openvino_model (default, next to best.pt); report <stem>.verify.json
"""


def main(argv: list[str]) -> int:
    """``attn-yolo export``: export (unless ``onnx=``), verify (unless ``verify=False``), print and save the report.

    Returns:
        int: 0 if exported (and verified), 1 if a verification check failed (the file is kept).

    Raises:
        UsageError: bad keys or values, a format other than onnx, an opset too old for a block.
    """
    if argv and argv[0] in ("help", "-h", "--help"):
        print(HELP)
        return 0
    _refuse_engine_without_cuda(argv)
    a = SCHEMA.parse(argv, "export")
    fmt = _format_of(a)
    _check_quantize(a)
    if a["quantize"] == 8:
        return run_int8(fmt, a, a["imgsz"])
    for k in ("data", "int8_max_drop"):
        if a[k] is not None:
            raise usage(f"{k}= applies to quantize=8 (INT8) only")
    _check_verified_format(fmt, a["format"])
    if fmt != "onnx":
        from attn_yolo.export.deploy import run_format

        return run_format(fmt, a, a["imgsz"])
    return _run_onnx(a)


def _refuse_engine_without_cuda(argv: list[str]) -> None:
    """Refuse ``format=engine`` / ``engine=`` at once without a CUDA GPU: nothing else is worth checking."""
    tokens = [t.partition("=") for t in argv]
    int8 = ("quantize", "=", "8") in tokens  # INT8 names its own formats (no TensorRT INT8 path here)
    if not int8 and any(k == "engine" or (k == "format" and v.lower() == "engine") for k, _, v in tokens):
        try:
            require_cuda()
        except NoCudaError as e:
            raise usage(str(e)) from None


def _format_of(a: dict) -> str:
    """The format to run: ``format=``, or that of ``openvino=<IR>`` / ``engine=<file>`` (a file to re-verify)."""
    fmt = str(a["format"]).lower()
    for k in ("openvino", "engine"):
        fmt = k if a[k] is not None and fmt == "onnx" else fmt
    return fmt


def _check_quantize(a: dict) -> None:
    """Refuse a ``quantize=`` other than 8, 16 or 32; ``quantize=16`` means ``half=True``."""
    if a["quantize"] not in (None, 8, 16, 32):
        raise usage(f"quantize: {a['quantize']!r}; expected 8 (INT8), 16 (as half=True), 32, or omit it")
    if a["quantize"] == 16:
        a["half"] = True


def _check_verified_format(fmt: str, given) -> None:
    """Refuse a format this tool does not verify: a typo (with the closest name), or one only Ultralytics exports."""
    verified, known = ("onnx", "openvino", "engine"), export_format_names()
    if fmt not in verified and fmt not in known:  # a typo: Ultralytics' exporter would not take it either
        raise usage(
            f"format={given!r}: unknown format.{did_you_mean(fmt, known, sentence=True)} "
            f"Verified here: {', '.join(verified)}; Ultralytics' exporter also takes "
            f"{', '.join(k for k in known if k not in verified)}"
        )
    if fmt not in verified:
        raise usage(
            f"format={given!r} is not verified here; allowed: onnx, openvino, engine. For other formats run "
            f"Ultralytics' exporter with the blocks registered: attn-yolo mode=export model=... format={given}"
        )


def _run_onnx(a: dict) -> int:
    """``format=onnx``: check the inputs, load the model, refuse to replace outputs, export, verify and report."""
    if a["half"]:
        print("half=True: fp16 ONNX via Ultralytics (quantize=16; on CPU the fp32 graph is converted, I/O stays fp32); "
              f"verified against fp32 PyTorch with tolerance {TOLERANCE['fp16']:.0e}")
    _check_onnx_inputs(a)
    yolo = load_model(a)
    if a["sdpa"]:
        fuse_attention(yolo)  # the exporter's deep copy keeps it (attn_yolo.sdpa); check_opset sees it
    e2e = use_end2end(yolo)  # yolo26: exported and verified through its NMS-free head
    f = _onnx_target(a, yolo)
    if not a["onnx"]:
        try:
            f = export_onnx(yolo, a["imgsz"], a["dynamic"], a["half"], a["opset"], a["simplify"], out=f,
                            overwrite=a["overwrite"])
        except OpsetError as e:
            raise usage(str(e)) from e
    if not a["verify"]:
        print(f"Exported {f} (not verified: verify=False)")
        return 0
    report = verify_onnx(f, yolo, source=a["source"], conf=a["conf"], iou=a["iou"],
                         compare=end2end_checks(TOLERANCE["fp16" if a["half"] else "fp32"]) if e2e else None)
    if e2e:
        report.tolerance["raw_definition"] = E2E_RAW_SCALE
    path = report.save(overwrite=a["overwrite"])
    return print_report(report, path, f"Verification FAILED; the exported file is kept for inspection: {f}")


def _check_onnx_inputs(a: dict) -> None:
    """Refuse, before loading the model, a bad opset, unreadable images, a missing or non-ONNX ``onnx=`` file and an
    ``out=`` that is not a ``*.onnx`` path (or comes with ``onnx=``)."""
    try:
        if not a["onnx"]:
            valid_opset(a["opset"])
        if a["verify"]:
            load_images(a["source"])  # fail before exporting
        if a["onnx"]:
            f = Path(a["onnx"])
            if not f.is_file():
                raise ValueError(f"onnx={str(f)!r}: no such file")
            onnx_info(f)  # an ONNX model file, before loading the checkpoint
    except ValueError as e:  # OpsetError, unreadable image or ONNX file
        raise usage(str(e)) from None
    if a["out"] is not None and (a["onnx"] or Path(str(a["out"])).suffix.lower() != ".onnx"):
        why = "not with onnx= (the file is verified where it is)" if a["onnx"] else "expected a *.onnx path"
        raise usage(f"out={str(a['out'])!r}: {why}")


def _onnx_target(a: dict, yolo) -> Path:
    """The ``.onnx`` to write (``out=``, else next to the checkpoint) or to re-verify (``onnx=``), refused if it or its
    report exists without ``overwrite=True``."""
    if a["onnx"]:
        f = Path(a["onnx"])
    else:
        f = Path(a["out"]) if a["out"] is not None else default_onnx_path(yolo)
    targets = ([] if a["onnx"] else [(f, "the ONNX file")]) + ([(report_path(f), "the report")] if a["verify"] else [])
    keep = "" if a["onnx"] else f", or out= another name to keep both (e.g. out={f.stem}-dynamic.onnx)"
    refuse_to_replace(targets, a["overwrite"], keep)
    return f
