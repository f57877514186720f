"""The verification report of an exported detector: header, one PASS / FAIL / NOT RUN line per check, verdict, JSON.

The same for every format: the printed ``summary()`` and ``<stem>.verify.json`` next to the exported file
(``report_path``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attn_yolo.export.checks import IOU_MIN, Check, _num
from attn_yolo.files import atomic_write, check_out

FORMATS = {"onnx": "ONNX", "openvino": "OpenVINO", "engine": "TensorRT"}
"""Export format (Ultralytics' ``format=``) → the name a report uses."""


@dataclass
class VerifyReport:
    """Result of a verification (``verify_onnx``, ``verify_openvino``, ``verify_engine``): the file, how it was
    exported, the runtime that ran it, the tolerances and every check.

    ``file`` is the ``.onnx``, the OpenVINO ``.xml`` or the ``.engine``; ``opset`` is None for a format without one
    (OpenVINO IR, TensorRT); ``runtime`` names the runtime and its settings (e.g. OpenVINO's inference precision).
    """

    file: str
    model: str
    opset: int | None
    dynamic: bool
    precision: str
    export_imgsz: list[int]
    images: list[str]
    tolerance: dict
    checks: list[Check] = field(default_factory=list)
    format: str = "onnx"
    runtime: str = ""
    int8: dict = field(default_factory=dict)
    """INT8 only (``attn_yolo.export.int8_verify``): calibration, keep-float list, mAP figures, paired latency."""

    @property
    def passed(self) -> bool:
        """No check that ran failed (checks not run count neither way; ``summary`` states them)."""
        return not self.failures

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed and not c.not_run]

    @property
    def not_run(self) -> list[Check]:
        """The checks that compared nothing (e.g. ``nms`` when no box scores above ``conf``)."""
        return [c for c in self.checks if c.not_run]

    def to_dict(self) -> dict:
        ran = len(self.checks) - len(self.not_run)
        return {**asdict(self), "passed": self.passed, "checks_run": ran, "checks_not_run": len(self.not_run)}

    def save(self, path=None, overwrite: bool = False) -> Path:
        """Write the report as JSON (default ``<stem>.verify.json`` next to the file); return its path.

        Raises:
            FileExistsError: the file exists and not ``overwrite``.
        """
        path = Path(path) if path else report_path(self.file)
        check_out(path, overwrite)
        text = json.dumps(self.to_dict(), indent=2, default=float)
        atomic_write(path, lambda p: Path(p).write_text(text))
        return path

    def summary(self) -> str:
        """The printed report: header, one line per check, verdict with the tolerances."""
        h, w = self.export_imgsz
        kind = "dynamic" if self.dynamic else "static"
        head = (
            f"{FORMATS.get(self.format, self.format)} verification: {self.file} against {self.model}\n"
            f"  {f'opset {self.opset}, ' if self.opset is not None else ''}{kind}, {self.precision}, export size "
            f"{h}x{w}, images: {', '.join(self.images)}" + (f"\n  runtime: {self.runtime}" if self.runtime else "")
        )
        t = self.tolerance
        ran = len(self.checks) - len(self.not_run)
        tail = f"{'PASSED' if self.passed else 'FAILED'}: {ran - len(self.failures)}/{ran} checks"
        empty = [c for c in self.not_run if not c.detail.get("n_torch", 0) + c.detail.get("n_export", 0)]
        if empty:
            top = max(c.detail.get("max_score", 0.0) for c in empty)
            tail += (f", {len(empty)} not run: no detections above conf={t['conf']} to compare (highest class "
                     f"score {top:.3g}; rerun with a conf= below it to compare them)")
        if len(empty) < len(self.not_run):
            tail += (f", {len(self.not_run) - len(empty)} not run: every detection within the score margin of a tie, "
                     f"none matched (rerun with a higher conf=)")
        tail += (
            f". Tolerance: raw {_num(t['raw_rel'])} ({t['raw_definition']}); NMS conf={t['conf']} iou={t['iou']}, "
            f"matched IoU >= {t['iou_min']}, same class."
        )
        if self.int8:
            tail += "\n" + int8_text(self.int8, t)
        if self.failures:
            more = f"; and {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
            tail += "\nFailed: " + "; ".join(failure_text(c) for c in self.failures[:3]) + more
        return "\n".join([head, *(c.line() for c in self.checks), tail])


def int8_text(d: dict, t: dict) -> str:
    """The INT8 lines of the printed report: tolerances, calibration, what was kept float, what ran in INT8 per
    attention block, latency."""
    lines = [f"INT8 tolerance: raw per head {t['raw_rel']}, matched IoU >= {t['iou_min']}, at most "
             f"{t['unmatched']:.0%} of either side's detections unmatched; mAP50-95 drop <= {t['int8_max_drop']} "
             f"points (int8_max_drop)."]
    if "fp32_val" in d:
        v = d["fp32_val"]
        lines.append(f"fp32 mAP50-95 as `attn-yolo val` gives it (batch {v['batch']}, rect: each batch padded to one "
                     f"rectangle; imgsz {v['imgsz']}): {v['map50_95']:.2f}; the paired comparison above differs in "
                     f"batch and rect: batch 1, rect False, each image alone in a square letterbox (the INT8 file's "
                     f"static input): fp32 {d['fp32']:.2f}, INT8 {d['int8']:.2f}.")
    if "calibration" in d:
        c = d["calibration"]
        lines.append(f"Calibration: {c['images']} training images of {c['data']} (fraction={c['fraction']}).")
    if "keep_float" in d:
        kf = d["keep_float"]
        kept = [f"{p} ({len(n)} nodes)" for p, n in kf.get("nodes", {}).items()]
        drops = ", ".join(f"{k} the list {v:+.2f}" for k, v in kf.get("drops", {}).items())
        lines.append(f"Keep-float: {kf['mode']}, {'applied: ' + ', '.join(kept) if kept else 'not applied'}"
                     + (f"; {kf['note']}" if kf.get("note") else "") + (f"; mAP50-95 drop {drops}" if drops else ""))
    if "ran_in_int8" in d:
        from attn_yolo.export.int8_graph import ran_in_int8_text

        lines.append(ran_in_int8_text(d["ran_in_int8"]))
    if "latency" in d:
        la = d["latency"]
        lines.append(f"Latency (batch 1, paired): fp32 {la['fp32']:.2f} ms, INT8 {la['int8']:.2f} ms, INT8/fp32 "
                     f"{la['ratio']:.2f} (load {la['load']:.1f})")
        if "cpu" in la:
            from attn_yolo.export.cpu import cpu_line, slower_note

            fmt = d.get("format", "onnx")
            lines.append(slower_note(fmt, la["ratio"], la["cpu"]) or f"CPU: {cpu_line(la['cpu'])}.")
    return "\n".join(lines)


def failure_text(c: Check) -> str:
    """One failed check in a sentence (the report's ``Failed:`` line)."""
    d = c.detail
    if c.name == "raw" and "boxes" in d:
        return (
            f"raw {c.case}: rel diff {c.value:.3g} > {c.limit:.0e} (max abs: boxes {d['boxes']['max_abs']:.3g} px, "
            f"scores {d['scores']['max_abs']:.3g})"
        )
    if c.name == "nms":
        return (
            f"nms {c.case}: {d['unmatched_torch']} torch / {d['unmatched_export']} {c.label} detections unmatched "
            f"(IoU < {c.limit if c.limit is not None else IOU_MIN} or different class), min IoU "
            f"{d['min_iou'] if d['min_iou'] is None else format(d['min_iou'], '.3g')}"
        )
    return f"{c.name} {c.case}: {d.get('message', '')}"


def report_path(path) -> Path:
    """Where the verification report of an exported file is saved: ``<stem>.verify.json`` next to it (for OpenVINO,
    next to the ``.xml`` inside the ``*_openvino_model`` folder; for a TensorRT ``best.engine``,
    ``best-engine.verify.json``, apart from the report of the ``best.onnx`` Ultralytics builds it from)."""
    p = Path(path)
    if p.suffix.lower() == ".engine":
        return p.with_name(f"{p.stem}-engine.verify.json")
    return p.with_suffix(".verify.json")

