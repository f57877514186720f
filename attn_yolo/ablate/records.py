"""One run of an ablation: what it trains (``RunSpec``) and its record, the metrics it yields (one results.csv row)."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

# A record's fields, in results.csv column order, and the ones parsed as numbers when read back.
FIELDS = (
    "variant", "seed", "status", "params", "gflops", "precision", "recall", "map50", "map50_95", "ap_small",
    "ap_medium", "ap_large", "best_epoch", "epochs", "train_time_s", "latency_ms", "device", "run_dir", "model", "error",
    "fingerprint",
)  # fmt: skip
INT_FIELDS = {"seed", "params", "best_epoch", "epochs"}
FLOAT_FIELDS = {"gflops", "precision", "recall", "map50", "map50_95", "ap_small", "ap_medium", "ap_large",
                "train_time_s", "latency_ms"}


@dataclasses.dataclass
class RunSpec:
    """Everything one training run needs; picklable (parallel runs execute in worker processes)."""

    variant: str
    seed: int
    model: str
    model_dict: dict | None
    data: str
    train: dict
    imgsz: int
    latency: dict
    run_dir: str
    params: int
    gflops: float
    fingerprint: str


def new_record(spec: RunSpec, device: str, model: str | None = None, error: str = "") -> dict:
    """The record of ``spec`` before any metrics: status ``failed`` until the run sets ``ok``.

    Args:
        spec: the run.
        device: the device it runs on, as recorded.
        model: the model file it trains from (default ``spec.model``).
        error: the error, one line, for a run that failed before it could fill in the record.
    """
    return {
        "variant": spec.variant, "seed": spec.seed, "status": "failed", "params": spec.params, "gflops": spec.gflops,
        "device": device, "run_dir": spec.run_dir, "model": spec.model if model is None else model, "error": error,
        "fingerprint": spec.fingerprint,
    }  # fmt: skip


def box_metrics(metrics) -> dict | None:
    """``precision``, ``recall``, ``map50``, ``map50_95`` of Ultralytics detection metrics (or their results_dict);
    None when they hold no box metrics."""
    d = getattr(metrics, "results_dict", metrics)
    if not isinstance(d, dict) or "metrics/mAP50-95(B)" not in d:
        return None
    return {
        "precision": float(d["metrics/precision(B)"]),
        "recall": float(d["metrics/recall(B)"]),
        "map50": float(d["metrics/mAP50(B)"]),
        "map50_95": float(d["metrics/mAP50-95(B)"]),
    }


def epoch_table(csv_path: Path) -> dict[str, list[float]]:
    """Columns of an Ultralytics run's results.csv (stripped names → floats)."""
    if not csv_path.exists():
        return {}
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = {}
    for row in rows:
        for k, v in row.items():
            try:
                cols.setdefault(k.strip(), []).append(float(v))
            except (TypeError, ValueError):
                cols.setdefault(k.strip(), []).append(math.nan)
    return cols


def epoch_fields(run_dir: Path) -> dict:
    """``epochs`` (validated epochs in the run folder's results.csv) and ``best_epoch`` (1-based; absent when none)."""
    epochs = epoch_table(run_dir / "results.csv")
    curve = epochs.get("metrics/mAP50-95(B)", [])
    out = {"epochs": len(curve)}
    if curve:  # Ultralytics 8.4 saves best.pt at the epoch of best fitness = mAP50-95 (first on ties)
        out["best_epoch"] = int(epochs["epoch"][max(range(len(curve)), key=lambda i: (curve[i], -i))])
    return out
