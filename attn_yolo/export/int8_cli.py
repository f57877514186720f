"""``attn-yolo export ... quantize=8``: refuse bad input first, export INT8 (keep-float where it pays), verify, report.

    attn-yolo export model=best.pt format=onnx quantize=8 [data=data.yaml] [fraction=1.0] [keep_float=auto]
        [int8_max_drop=0.55] [out=best_int8.onnx] [overwrite=True]
    attn-yolo export model=best.pt format=openvino quantize=8 ...

``keep_float=auto`` (default) exports with Ultralytics' own rules first; only if that drops more than
``int8_max_drop`` and the model has a keep-float list (``attn_yolo.export.int8.keep_float_scopes``) is it exported
again with the list, and the export with the smaller drop is kept: the report gives both drops. For a model with an
end-to-end head (yolo26) the list also keeps the head's own ops float (its decode and top-k:
``attn_yolo.export.end2end.head_decode_nodes``), named ``head`` in the report. ``True`` always
applies the list, ``False`` never. Exit codes: 0 within the threshold, 1 not (the file is kept), 2 bad input.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from attn_yolo.args import UsageError
from attn_yolo.checkpoint import load_yolo
from attn_yolo.export.cli_steps import print_report, refuse_to_replace
from attn_yolo.export.end2end import use_end2end
from attn_yolo.export.int8 import (
    INT8_FORMATS,
    Int8Error,
    calibration_count,
    calibration_data,
    default_int8_path,
    export_int8,
    keep_float_scopes,
)
from attn_yolo.export.report import report_path


def check_int8_args(fmt: str, a: dict) -> None:
    """Refuse bad INT8 keys in one line (``UsageError``): a format without an INT8 path, keys that do not apply, a
    threshold, fraction or keep_float out of range."""
    err = "attn-yolo export: "
    if fmt not in INT8_FORMATS:
        raise UsageError(f"{err}quantize=8: format={fmt!r} has no INT8 path here; allowed: "
                         f"{', '.join(INT8_FORMATS)} (ONNX Runtime static QDQ, OpenVINO NNCF)")
    for k, why in (("half", "half=True"), ("dynamic", "dynamic=True")):
        if a[k]:
            raise UsageError(f"{err}quantize=8 with {why}: INT8 is exported and verified static, fp32 in/out; drop {k}")
    for k in ("onnx", "openvino", "opset"):
        if a[k] is not None:
            raise UsageError(f"{err}quantize=8 with {k}=: not supported here (INT8 exports at Ultralytics' opset); "
                             f"drop {k}=")
    d = a["int8_max_drop"]
    if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 < d <= 100):
        raise UsageError(f"{err}int8_max_drop: {d!r}; expected mAP50-95 points in (0, 100]")
    f = a["fraction"]
    ok = isinstance(f, (int, float)) and not isinstance(f, bool) and (0 < f <= 1 or (isinstance(f, int) and f >= 1))
    if not ok:
        raise UsageError(f"{err}fraction: {f!r}; expected a share in (0, 1] or a count of images >= 1")
    if a["keep_float"] not in ("auto", True, False):
        raise UsageError(f"{err}keep_float: {a['keep_float']!r}; expected auto, True, False")


def run_int8(fmt: str, a: dict, imgsz) -> int:
    """Export ``a["model"]`` to INT8 in ``fmt``, verify it (``verify_int8``), print and save the report.

    Returns:
        int: 0 if the mAP50-95 drop and the other checks pass, 1 if not (the file is kept).

    Raises:
        UsageError: bad keys (``check_int8_args``), no calibration images, an existing output without overwrite.
    """
    from attn_yolo.export.int8_verify import INT8_MAX_DROP, verify_int8
    from attn_yolo.export.verify import load_images

    check_int8_args(fmt, a)
    max_drop = INT8_MAX_DROP if a["int8_max_drop"] is None else float(a["int8_max_drop"])
    try:
        if a["source"] is not None:
            load_images(a["source"])
        yolo = load_yolo(a["model"], "model", trust=a["trust"])
        e2e = use_end2end(yolo)  # yolo26: exported and verified through its NMS-free head
        data, n_train, _ = calibration_data(yolo, a["data"])
    except (ValueError, Int8Error) as e:
        raise UsageError(f"attn-yolo export: {e}") from None
    out = Path(a["out"]) if a["out"] is not None else default_int8_path(yolo, fmt)
    ok = out.suffix.lower() == ".onnx" if fmt == "onnx" else out.name.endswith("_openvino_model")
    if not ok:
        want = "a *.onnx path" if fmt == "onnx" else "a folder named <name>_openvino_model"
        raise UsageError(f"attn-yolo export: out={str(out)!r}: expected {want}")
    stem = out.name[: -len("_openvino_model")] if fmt == "openvino" else out.stem
    rep = report_path(out / f"{stem}.xml" if fmt == "openvino" else out)
    refuse_to_replace([(out, "the INT8 export"), (rep, "the report")], a["overwrite"], ", or out= another name")
    scopes = keep_float_scopes(yolo.model)  # an end-to-end head's decode and top-k join the list (``keep_head``)
    calib = {"data": data, "images": calibration_count(n_train, a["fraction"]), "fraction": a["fraction"]}
    print(f"quantize=8: {fmt} INT8 calibrated on {calib['images']} training images of {data}; keep_float="
          f"{a['keep_float']} ({len(scopes)} keep-float scopes)")

    def attempt(keep: bool, target: Path):
        f, kept = export_int8(yolo, fmt, imgsz, data, a["fraction"], keep, target, True, keep_head=keep and e2e)
        return f, kept, verify_int8(fmt, f, yolo, data, max_drop, a["source"], a["conf"], a["iou"])

    f, kept, report = attempt(a["keep_float"] is True, out)
    note, drops = "", {("with" if a["keep_float"] is True else "without"): report.int8["drop"]}
    if a["keep_float"] == "auto" and not report.passed and (scopes or e2e):
        with tempfile.TemporaryDirectory(prefix="attn-yolo-kf-") as tmp:
            f2, kept2, r2 = attempt(True, Path(tmp) / out.name)
            drops["with"] = r2.int8["drop"]
            if r2.int8["drop"] < report.int8["drop"]:
                shutil.rmtree(out) if out.is_dir() else out.unlink()
                shutil.move(str(f2.parent if fmt == "openvino" else f2), out)
                f = out / f2.name if fmt == "openvino" else out
                r2.file, kept, report = str(f), kept2, r2
                note = "kept: the keep-float export (smaller drop)"
            else:
                note = "the keep-float export did not lower the drop; kept Ultralytics' rules"
    elif a["keep_float"] == "auto":
        note = "not needed (within the threshold)" if report.passed else "the model has no keep-float scopes"
    report.int8["calibration"] = calib
    report.int8["keep_float"] = {"mode": a["keep_float"], "nodes": kept, "drops": drops, "note": note}
    path = report.save(rep, overwrite=True)
    return print_report(report, path, f"INT8 verification FAILED; the exported file is kept for inspection: {f}")
