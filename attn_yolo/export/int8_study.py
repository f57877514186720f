"""The INT8 study on trained detectors: each block fine-tuned from the shared start, exported INT8, measured.

Detectors worth deploying: each block is inserted at the backbone of the warm design's shared start and fine-tuned
as the ablation does, its attention checked, exported INT8 for ONNX Runtime and OpenVINO, and its loss measured
against the baseline's.

1. **Training** is an ablation (``attn_yolo.ablate.run``): the old default's warm design (``SHAPES_WARM_CONFIG_YAML``:
   the recipe start, yolo11n 5 epochs on synthetic-shapes at 128 px, about 0.58 mAP50-95; every arm fine-tuned from it,
   the inserted blocks at γ = 0.3) with one arm per block at the backbone (``study_config``) and a fixed list of
   seeds. Each arm's attention check (mean ablation against the resolution of the arm's interval) is the ablation's
   own, read from its ``verdicts.json``; a block that fails it is listed as such.
2. **INT8** (``measure``): the first paired seed's ``best.pt`` of every arm and of the baseline is exported by
   Ultralytics' exporter (``quantize=8``, calibrated on the training split, ``fraction``) with the block's keep-float
   list (``attn_yolo.export.int8.export_int8``), for ONNX Runtime (static QDQ) and OpenVINO (NNCF). Per model and
   runtime: the fp32 and INT8 mAP50-95 on the validation split image by image (``int8_verify.records``: batch 1,
   square letterbox), the drop with its paired image-bootstrap interval (``int8_verify.map_check``), the drop's excess
   over the baseline's drop with an interval over the same image resamples (``excess``), the INT8/fp32 latency
   (``int8_verify.latency``) and what ran in INT8 in the block (``attn_yolo.export.int8_graph``).
3. **The page** (``render``): one table, the command, the machine (``attn_yolo.export.cpu``), and for each runtime
   whose INT8 was slower than fp32 the note naming the CPU's VNNI/AMX and the faster runtime measured here.

``python scripts/int8_study.py`` runs all three and writes ``docs/benchmarks/int8.md``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import yaml

from attn_yolo.text import bracket

FORMATS = ("onnx", "openvino")
RUNTIME = {"onnx": "ONNX Runtime", "openvino": "OpenVINO"}
MARKERS = ("<!-- int8-study:begin -->", "<!-- int8-study:end -->")
"""The study's section of ``docs/benchmarks/int8.md``."""
FP32_FLOOR = 40.0
"""fp32 mAP50-95 (points) every model of the study should reach: a detector worth deploying (issue 47)."""


class StudyError(RuntimeError):
    """The study's ablation stopped before its arms (a refused config, a start that detects nothing, an interrupt)
    or finished none of them."""


def study_config(out, blocks: list[str], seeds: list[int], **over) -> dict:
    """The ablation of the study: the warm design (``SHAPES_WARM_CONFIG_YAML``) with one arm per block (at
    ``backbone``, the block's default args) beside the baseline, ``seeds`` fixed, into ``out``. ``over``: top-level
    keys replaced (``data``, ``devices``, ``start`` given as a checkpoint path) or, for a ``start`` or ``train``
    mapping, merged into the design's."""
    from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML

    cfg = yaml.safe_load(SHAPES_WARM_CONFIG_YAML)
    base = cfg["variants"][0]
    cfg["variants"] = [base] + [{"name": b.lower(), "base": base["model"], "module": b, "at": "backbone"}
                                for b in blocks]
    cfg["seeds"], cfg["out"] = list(seeds), str(out)
    for k, v in over.items():
        if k in ("start", "train") and isinstance(v, dict):
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = v
    return cfg


def train_arms(cfg: dict, folder: Path):
    """Run the study's ablation (written to ``folder/study.yaml``; a rerun reuses finished runs) and read it back:
    ``(ablation, ok rows, {arm: attention check})``, each check its verdict's (``out/verdicts.json``).

    Raises:
        StudyError: the ablation stopped before its arms (exit 2; it printed why).
    """
    from attn_yolo import ablate
    from attn_yolo.ablate.runs.results import collect_records
    from attn_yolo.ablate.statistics.verdicts import read_verdicts

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    try:
        code = ablate.run(str(path))
    except ablate.ConfigError as e:  # a bad override (devices, start, imgsz): one line, nothing trained
        raise StudyError(str(e)) from None
    if code == 2:  # refused (bad config, or a start that detects nothing): the ablation printed why
        raise StudyError(f"the study's ablation {path} stopped before its arms (exit 2): see its message above")
    if code in (130, 143):  # Ctrl-C or SIGTERM: the finished runs are kept, nothing is measured or written
        raise StudyError(f"the study's ablation {path} was interrupted (exit {code}); no model was measured and no "
                         "page written: the same command resumes it")
    raw, base, name, source = ablate.load_config(path)
    ab = ablate.prepare(ablate.validate(raw, base, name, source))
    rows = [r for r in collect_records(ab.out)[0] if r["status"] == "ok"]
    found = read_verdicts(ab.out / "verdicts.json")  # the ablation's own verdicts, written by its report
    return ab, rows, {arm: v.check for arm, v in (found[0] if found else {}).items()}


def checkpoint(ab, rows: list[dict], arm: str) -> Path | None:
    """``best.pt`` of ``arm``'s first seed that ran ok (the baseline's too), or None."""
    got = sorted((r["seed"], r["run_dir"]) for r in rows if r["variant"] == arm)
    return Path(got[0][1]) / "weights" / "best.pt" if got else None


def measure(pt, fmt: str, folder: Path, imgsz: int, fraction=1.0, n_boot: int = 1000) -> dict:
    """One model in one runtime at ``imgsz`` (pixels, the size it trained at): INT8 with the keep-float list, its
    records, drop, latency and what ran in INT8.

    Returns:
        ``{"fp32", "int8", "drop", "lo", "hi", "n_images", "latency": {...}, "ran": {block: {role: counts}},
        "kept": n nodes, "records": {"fp32", "int8"}}`` (mAP in points).
    """
    from ultralytics import YOLO

    from attn_yolo.export.int8 import calibration_data, export_int8
    from attn_yolo.export.int8_graph import ran_in_int8, summarize
    from attn_yolo.export.int8_verify import latency, map_check, records

    yolo = YOLO(str(pt))
    data = calibration_data(yolo)[0]
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / ("int8.onnx" if fmt == "onnx" else "int8_openvino_model")
    f, kept = export_int8(yolo, fmt, imgsz, data, fraction, keep_float=True, out=out, overwrite=True)
    recs = records(yolo, f, data, imgsz, folder / "val")
    check = map_check(recs, math.inf, n_boot)
    return {**{k: check.detail[k] for k in ("fp32", "int8", "drop", "lo", "hi", "n_images")},
            "latency": latency(fmt, f, yolo, [imgsz, imgsz]), "ran": summarize(ran_in_int8(fmt, f, yolo.model)),
            "kept": sum(len(v) for v in kept.values()), "records": recs}


def excess(block: dict, base: dict, n_boot: int = 1000) -> dict:
    """The block's INT8 drop minus the baseline's, in points, with a percentile interval over the same image
    resamples of all four records (both models on the same validation images): ``{"excess", "lo", "hi"}``."""
    from attn_yolo.ablate.statistics.stats import CONFIDENCE, percentile_interval, resample_records

    recs = {"bf": block["records"]["fp32"], "bi": block["records"]["int8"],
            "af": base["records"]["fp32"], "ai": base["records"]["int8"]}
    r = resample_records(recs, n_boot=n_boot)
    val = {k: 100 * np.asarray(r[k]["boot"]["map50_95"], np.float64) for k in recs}
    boot = (val["bf"] - val["bi"]) - (val["af"] - val["ai"])
    lo, hi = percentile_interval(boot, CONFIDENCE)
    return {"excess": block["drop"] - base["drop"], "lo": lo, "hi": hi}


def run_study(cfg: dict, folder: Path, fraction=1.0, n_boot: int = 1000) -> dict:
    """Train (``train_arms``), measure every arm and the baseline in both runtimes, and return the results as data
    (also saved as ``folder/int8-study.json``): ``{"start", "arms": {arm: {"block", "check", fmt: measure + excess}},
    "cpu", "minutes", "loads"}``."""
    import os

    from attn_yolo.ablate.runs.start import record
    from attn_yolo.export.cpu import cpu_info

    t0, loads = time.time(), [os.getloadavg()[0]]
    ab, rows, checks = train_arms(cfg, folder)
    start = record(ab.start) if ab.start is not None else None
    arms: dict = {}
    for v in ab.variants:
        pt = checkpoint(ab, rows, v.name)
        if pt is None:
            arms[v.name] = {"block": v.name, "missing": "no run finished"}
            continue
        block = next((s.get("module") for s in cfg["variants"] if s["name"] == v.name and "module" in s), "baseline")
        arms[v.name] = {"block": block, "check": checks.get(v.name), "pt": str(pt)}
        for fmt in FORMATS:
            arms[v.name][fmt] = measure(pt, fmt, folder / "int8" / v.name / fmt, ab.imgsz, fraction, n_boot)
            loads.append(os.getloadavg()[0])
            print(f"int8 study: {v.name} {fmt}: drop {arms[v.name][fmt]['drop']:+.2f}", flush=True)
    if not any(fmt in a for a in arms.values() for fmt in FORMATS):
        raise StudyError(f"no run of the study's ablation {ab.out} finished: nothing to export or measure")
    base = arms.get(ab.baseline, {})
    for arm, a in arms.items():
        for fmt in FORMATS:
            if arm != ab.baseline and fmt in a and fmt in base:
                a[fmt]["excess"] = excess(a[fmt], base[fmt], n_boot)
    out = {"start": {"map50_95": (start or {}).get("map50_95")}, "arms": arms, "baseline": ab.baseline,
           "imgsz": ab.imgsz, "seeds": list(ab.seeds), "cpu": cpu_info(), "minutes": (time.time() - t0) / 60,
           "loads": loads}
    (folder / "int8-study.json").write_text(json.dumps(_jsonable(out), indent=1, default=float))
    return out


def _jsonable(d):
    """``d`` without the per-image records (not JSON)."""
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items() if k != "records"}
    return d


# ------------------------------------------------------------------------------------------------------- rendering
def _check_text(t: dict | None) -> str:
    if t is None:
        return "– (baseline)"
    if t.get("status") in ("passed", "failed"):
        return f"{t['status']}: {t['why']}"
    return f"{t.get('status', 'n/a')}" + (f": {t['why']}" if t.get("why") else "")


def _ran_text(ran: dict) -> str:
    from attn_yolo.export.int8_graph import count_text

    roles = next(iter(ran.values()), {})
    return " · ".join(f"{r} {count_text(c)}" for r, c in roles.items()) or "–"


def table(res: dict) -> list[str]:
    """The study's table rows (markdown), one per arm and runtime."""
    head = ("block", "attention check", "runtime", "fp32 mAP50-95", "INT8 drop [95 % CI]", "baseline's drop",
            "excess over the baseline's drop [95 % CI]", "INT8/fp32 latency", "block ops in INT8 / float")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = res["arms"].get(res["baseline"], {})
    for a in res["arms"].values():
        if "missing" in a:
            out.append(f"| {a['block']} | {a['missing']} |" + " |" * (len(head) - 2))
            continue
        for fmt in FORMATS:
            m, b = a[fmt], base.get(fmt)
            ex = m.get("excess")
            cells = [a["block"], _check_text(a["check"]), RUNTIME[fmt],
                     f"{m['fp32']:.2f}" + (" (below 40)" if m["fp32"] < FP32_FLOOR else ""),
                     f"{m['drop']:+.2f} {bracket(m['lo'], m['hi'], 2)}",
                     f"{b['drop']:+.2f}" if b else "–",
                     f"{ex['excess']:+.2f} {bracket(ex['lo'], ex['hi'], 2)}" if ex else "–",
                     f"{m['latency']['ratio']:.2f}", _ran_text(m["ran"])]
            out.append("| " + " | ".join(cells) + " |")
    return out


def notes(res: dict) -> list[str]:
    """The lines under the table: the start, models below the fp32 floor, failed checks, and per runtime whose INT8
    ran slower than its fp32 (median over the models), the CPU and the faster runtime (``cpu.slower_note``)."""
    from attn_yolo.export.cpu import slower_note

    arms = {k: a for k, a in res["arms"].items() if "missing" not in a}
    ratio = {f: float(np.median([a[f]["latency"]["ratio"] for a in arms.values()])) for f in FORMATS if arms}
    low = sorted({a["block"] for a in arms.values() for f in FORMATS if a[f]["fp32"] < FP32_FLOOR})
    failed = sorted(a["block"] for a in arms.values() if (a.get("check") or {}).get("status") == "failed")
    start = res["start"].get("map50_95")
    lines = [f"- Shared start: mAP50-95 {100 * start:.2f} at {res['imgsz']} px (its own validation)." if start
             is not None else "- Shared start: its record has no mAP."]
    lines.append(f"- fp32 mAP50-95 below {FP32_FLOOR:g}: {', '.join(low)}." if low else
                 f"- Every model's fp32 mAP50-95 is at least {FP32_FLOOR:g}.")
    undecided = sorted(a["block"] for a in arms.values() if (a.get("check") or {}).get("status") == "n/a")
    lines.append(f"- Attention check failed (their INT8 figures describe a block whose attention did not matter): "
                 f"{', '.join(failed)}." if failed else "- No block failed the attention check.")
    if undecided:
        lines.append(f"- Attention check not decided (n/a: no bounded interval, e.g. one seed): "
                     f"{', '.join(undecided)}.")
    for f in FORMATS:
        if f in ratio:
            note = slower_note(f, ratio[f], res["cpu"], ratio)
            lines.append(f"- {RUNTIME[f]}: median INT8/fp32 latency {ratio[f]:.2f}." + (f" {note}" if note else ""))
    return lines


def render(res: dict, cmd: str) -> str:
    """The page section: command, machine, method, table, notes."""
    from datetime import datetime, timezone

    from attn_yolo.export.cpu import cpu_line

    loads = res["loads"]
    return "\n".join([
        f"Regenerate: `{cmd}` ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {res['minutes']:.0f} min; "
        f"{cpu_line(res['cpu'])}; 1-min load {min(loads):.1f}–{max(loads):.1f}).", "",
        "Each model: the warm design's shared start (configs/ablation/shapes-warm.yaml: yolo11n trained by its "
        "recipe), with the block "
        f"inserted at the backbone and fine-tuned as the ablation does (seeds {res['seeds']}; the first seed's "
        "best.pt is exported); the baseline is the start fine-tuned alike. INT8: Ultralytics' exporter (`quantize=8`), "
        "calibrated on the training split, with the block's keep-float list. Drops: mAP50-95 points, fp32 PyTorch − "
        "INT8 on the validation split (batch 1, square letterbox), 95 % paired image bootstrap; the excess is the "
        "block's drop minus the baseline's over the same image resamples. Latency: batch 1, paired alternating "
        "rounds; < 1: INT8 faster. Attention check: the ablation's (mean ablation against the arm's resolution).", "",
        *table(res), "", *notes(res)])
