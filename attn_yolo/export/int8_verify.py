"""Verification of an INT8 export against fp32 PyTorch: raw outputs, detections, mAP50-95 and latency.

Raw outputs per head, matched detections, and mAP50-95 on the validation set with a paired image bootstrap
interval; INT8 and fp32 latency paired in one run.

* ``raw`` per head (P3, P4, P5: the anchors of each stride): ``compare_raw`` with ``INT8_TOLERANCE["raw_rel"]``;
* ``nms``: ``compare_detections`` with a match at IoU ≥ ``INT8_TOLERANCE["iou_min"]`` and at most
  ``INT8_TOLERANCE["unmatched"]`` of either side's detections unmatched (score flips allowed up to the raw limit);
* ``map``: Ultralytics' validator on the validation split, the fp32 PyTorch model and the INT8 file at the export
  size (batch 1, square letterbox: the same input images), each kept image by image (``RecordingValidator``); the
  drop ``mAP50-95(fp32) − mAP50-95(INT8)`` in points (×100) with a percentile interval over image resamples shared by
  both (``ablate.statistics.stats.resample_records``: the ablation's bootstrap). It passes when the drop is at most
  ``int8_max_drop`` (default ``INT8_MAX_DROP``).

The paired figures are not ``attn-yolo val``'s: it validates the checkpoint in batches of 16 padded together to one
rectangle each (``rect``), where the INT8 file's static input takes one image at a time in a square letterbox. The
report therefore also gives the fp32 figure as ``attn-yolo val`` does at the export size (``val_map``,
``VAL_SETTINGS``), naming the settings that differ.
"""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path

import numpy as np

from attn_yolo.export.checks import RAW_SCALE, Check, compare_detections, compare_raw
from attn_yolo.text import bracket

INT8_MAX_DROP = 0.55
"""Default ``int8_max_drop`` (mAP50-95 points): the anchor's upper end, yolo11 n/s/m/l on COCO val2017 losing
0.14–0.55 points in OpenVINO INT8 with the DFL kept float (Ultralytics PR #25306)."""

INT8_TOLERANCE = {"raw_rel": 0.15, "iou_min": 0.5, "unmatched": 0.25}
"""INT8 against fp32: max raw difference per head relative to its scale (``RAW_SCALE``); a matched detection's IoU;
the share of either side's detections allowed unmatched. Looser than fp16's (1e-2, 0.99, none): 8-bit activations
move scores by a few hundredths and boxes by a pixel or two, which shifts borderline detections."""


def head_slices(shape: tuple[int, int], strides) -> list[tuple[str, slice]]:
    """``[(name, anchor slice)]`` of each Detect head in the raw output: ``P3`` … by stride, ``(h/s)·(w/s)`` each."""
    out, a = [], 0
    for s in strides:
        n = (shape[0] // int(s)) * (shape[1] // int(s))
        out.append((f"P{int(np.log2(int(s)))}", slice(a, a + n)))
        a += n
    return out


def int8_checks(shape, strides):
    """The ``compare`` function of ``verify_exported`` for INT8: ``raw`` per head, then ``nms`` (module docstring)."""
    tol = INT8_TOLERANCE

    def compare(ref, out, conf, iou, label):
        checks = []
        for name, sl in head_slices(shape, strides):
            c = compare_raw(ref[..., sl], out[..., sl], tol["raw_rel"], label)
            c.case = name
            checks.append(c)
        nms = compare_detections(ref, out, conf, iou, tol["raw_rel"], label, tol["iou_min"], tol["unmatched"])
        return [*checks, nms]

    return compare


def records(yolo, file, data: str, imgsz, folder) -> dict:
    """Per-image records of the fp32 PyTorch model and the INT8 ``file`` on the validation split of ``data``, with
    Ultralytics' validator (batch 1, square letterbox at ``imgsz``, no plots): ``{"fp32": Record, "int8": Record}``."""
    from attn_yolo.ablate.runs.perimage import RecordingValidator, record_from_validator
    from attn_yolo.ablate.runs.records import box_metrics

    out = {}
    file = Path(file).parent if Path(file).suffix == ".xml" else Path(file)  # Ultralytics loads an IR by its folder
    for key, model in (("fp32", copy.deepcopy(yolo.model)), ("int8", str(file))):
        args = {"data": data, "imgsz": imgsz, "batch": 1, "rect": False, "device": "cpu", "plots": False,
                "mode": "val", "split": "val", "project": str(folder), "name": key, "exist_ok": True, "verbose": False,
                **_head_args(yolo)}
        v = RecordingValidator(args=args)
        out[key] = record_from_validator(v, box_metrics(v(model=model)))
    return out


def _head_args(yolo) -> dict:
    """Validator arguments selecting the head the export used: ``nms=False`` for an end-to-end (yolo26) head."""
    return {"nms": False} if getattr(yolo.model, "end2end", False) else {}


VAL_SETTINGS = {"rect": True}
"""How ``attn-yolo val`` (Ultralytics' ``Model.val``) validates a checkpoint where the paired INT8 comparison does not:
rectangular batches (each batch padded to one rectangle), at Ultralytics' default ``batch`` (``val_map`` reads it)."""


def val_map(yolo, data: str, imgsz, folder) -> dict:
    """The fp32 mAP50-95 (points) of ``yolo`` on the validation split of ``data`` as ``attn-yolo val`` computes it at
    ``imgsz`` (the export size): Ultralytics' validator with val's ``batch`` and ``rect`` (``VAL_SETTINGS``), on a
    copy of the model (the validator fuses it). ``{"map50_95", "batch", "rect", "imgsz"}``."""
    from ultralytics.cfg import DEFAULT_CFG_DICT
    from ultralytics.models.yolo.detect import DetectionValidator

    from attn_yolo.ablate.runs.records import box_metrics

    size = imgsz[0] if isinstance(imgsz, (list, tuple)) and len(set(imgsz)) == 1 else imgsz
    args = {"data": data, "imgsz": size, "batch": DEFAULT_CFG_DICT["batch"], **VAL_SETTINGS, "device": "cpu",
            "plots": False, "mode": "val", "split": "val", "project": str(folder), "name": "fp32-val",
            "exist_ok": True, "verbose": False, **_head_args(yolo)}
    m = box_metrics(DetectionValidator(args=args)(model=copy.deepcopy(yolo.model)))
    return {"map50_95": 100 * float(m["map50_95"]), "batch": args["batch"], "rect": True, "imgsz": size}


def map_check(recs: dict, max_drop: float, n_boot: int | None = None) -> Check:
    """The ``map`` check from the two records: drop in points, its paired bootstrap interval, pass if ≤ ``max_drop``."""
    from attn_yolo.ablate.statistics.stats import CONFIDENCE, N_BOOT, percentile_interval, resample_records

    n_boot = N_BOOT if n_boot is None else n_boot
    r = resample_records(recs, n_boot=n_boot)
    p = {k: 100 * float(r[k]["point"]["map50_95"][0]) for k in recs}
    boot = 100 * (np.asarray(r["fp32"]["boot"]["map50_95"]) - np.asarray(r["int8"]["boot"]["map50_95"]))
    lo, hi = percentile_interval(boot, CONFIDENCE)
    drop = p["fp32"] - p["int8"]
    n = recs["fp32"].n_images
    msg = (f"mAP50-95 fp32 {p['fp32']:.2f} → INT8 {p['int8']:.2f}: drop {drop:+.2f} points, {CONFIDENCE:.0%} "
           f"paired bootstrap interval {bracket(lo, hi, 2)} ({n} val images, {n_boot} resamples); limit {max_drop}")
    detail = {"message": msg, "fp32": p["fp32"], "int8": p["int8"], "drop": drop, "lo": lo, "hi": hi,
              "n_images": n, "n_boot": n_boot, "confidence": CONFIDENCE}
    return Check("map", f"val {n} images", drop <= max_drop, drop, max_drop, detail, label="int8")


def paired_latency(runtimes: dict, x: np.ndarray, rounds: int = 5, repeats: int = 10, warmup: int = 3) -> dict:
    """Median latency (ms) of each runtime on ``x``, measured in alternating rounds of ``repeats`` runs (so load
    changes hit every runtime alike): ``{name: ms, ..., "load": 1-min load average}``."""
    import os

    times: dict = {k: [] for k in runtimes}
    for rt in runtimes.values():
        for _ in range(warmup):
            rt.run(x)
    for _ in range(rounds):
        for k, rt in runtimes.items():
            for _ in range(repeats):
                t = time.perf_counter()
                rt.run(x)
                times[k].append((time.perf_counter() - t) * 1e3)
    return {**{k: float(np.median(v)) for k, v in times.items()}, "load": os.getloadavg()[0]}


def latency(fmt: str, int8_file, yolo, imgsz, threads: int | None = None) -> dict:
    """INT8 vs fp32 latency of ``fmt`` (onnxruntime / OpenVINO CPU) at ``imgsz``, batch 1, paired in one run: the
    fp32 file is exported here with Ultralytics' exporter into a temporary folder. ``{"fp32", "int8", "ratio",
    "load", "cpu"}`` (ms; ratio = INT8 / fp32; cpu: ``attn_yolo.export.cpu.cpu_info``, its name, VNNI and AMX)."""
    from attn_yolo.export.cpu import cpu_info
    from attn_yolo.export.onnx_export import export_onnx
    from attn_yolo.export.openvino_export import export_openvino
    from attn_yolo.export.runtime import open_runtime

    with tempfile.TemporaryDirectory(prefix="attn-yolo-fp32-") as tmp:
        if fmt == "onnx":
            f32 = export_onnx(yolo, imgsz, out=Path(tmp) / "fp32.onnx")
        else:
            f32 = export_openvino(yolo, imgsz, out=Path(tmp) / "fp32_openvino_model")
        rts = {"fp32": open_runtime(fmt, f32, "fp32", threads), "int8": open_runtime(fmt, int8_file, "fp32", threads)}
        h, w = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
        x = np.random.default_rng(0).random((1, 3, h, w), dtype=np.float32)
        t = paired_latency(rts, x)
    return {**t, "ratio": t["int8"] / t["fp32"], "cpu": cpu_info()}


def verify_int8(fmt: str, path, yolo, data: str, max_drop: float = INT8_MAX_DROP, source=None, conf: float = 0.25,
                iou: float = 0.7, n_boot: int | None = None, timing: bool = True, folder=None):
    """Verify the INT8 export ``path`` (``.onnx`` or the IR's ``.xml``) against its fp32 PyTorch ``yolo``.

    Returns:
        VerifyReport: precision ``int8``; checks: the format's load check, ``raw`` per head and ``nms`` on the
        ``source`` images (default: 2 val images of the model's dataset), ``map`` on the validation split of
        ``data``; ``report.int8``: the map figures, what ran in INT8 per attention block (``ran_in_int8``:
        ``attn_yolo.export.int8_graph``) and, if ``timing``, the paired latency.
    """
    from attn_yolo.export.end2end import E2E_RAW_SCALE, end2end_checks
    from attn_yolo.export.int8_graph import as_dicts, ran_in_int8
    from attn_yolo.export.onnx_export import onnx_info
    from attn_yolo.export.openvino_export import openvino_info
    from attn_yolo.export.verify import _onnx_checker, verify_exported

    info = dict(onnx_info(path) if fmt == "onnx" else openvino_info(path), precision="int8")
    shape = tuple(info["imgsz"])
    strides = [int(s) for s in yolo.model.stride]
    tol = INT8_TOLERANCE
    compare = (end2end_checks(tol["raw_rel"], tol["iou_min"], tol["unmatched"]) if getattr(yolo.model, "end2end", False)
               else int8_checks(shape, strides))
    report = verify_exported(fmt, path, info, yolo, source=source, conf=conf, iou=iou, tol=tol["raw_rel"],
                             load_check=_onnx_checker if fmt == "onnx" else None, compare=compare)
    e2e = getattr(yolo.model, "end2end", False)
    report.tolerance.update(iou_min=INT8_TOLERANCE["iou_min"], unmatched=INT8_TOLERANCE["unmatched"],
                            raw_definition=E2E_RAW_SCALE if e2e else RAW_SCALE + ", per head", int8_max_drop=max_drop)
    with tempfile.TemporaryDirectory(prefix="attn-yolo-int8-val-") as tmp:
        recs = records(yolo, path, data, list(shape), folder or tmp)
        as_val = val_map(yolo, data, list(shape), folder or tmp)
    check = map_check(recs, max_drop, n_boot)
    report.checks.append(check)
    report.int8 = {"format": fmt, **{k: check.detail[k] for k in ("fp32", "int8", "drop", "lo", "hi", "n_images",
                                                                    "n_boot")}}
    report.int8["fp32_val"] = as_val
    report.int8["ran_in_int8"] = as_dicts(ran_in_int8(fmt, path, yolo.model))
    if timing:
        report.int8["latency"] = latency(fmt, path, yolo, list(shape))
    return report
