"""One run of an ablation: what it trains (``RunSpec``) and its record, the metrics it yields, kept in its run folder.

The record (``<run folder>/result.json``, written atomically) is the truth about a run: results.csv is an index
rebuilt from the records (``attn_yolo.ablate.runs.results``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import socket
from pathlib import Path

from attn_yolo.ablate.config.ablation import train_imgsz
from attn_yolo.files import atomic_write
from attn_yolo.ultralytics_api.flops import versions

# A record's fields, in results.csv column order, and the ones parsed as numbers when read back.
FIELDS = (
    "variant", "seed", "status", "params", "gflops", "precision", "recall", "map50", "map50_95", "ap_small",
    "ap_medium", "ap_large", "best_epoch", "epochs", "train_time_s", "attention_check", "mean_ablation_effect",
    "knockout_effect", "reinit_effect", "knockout_map50_95", "device", "run_dir", "model", "error", "fingerprint",
)  # fmt: skip
INT_FIELDS = {"seed", "params", "best_epoch", "epochs"}
FLOAT_FIELDS = {"gflops", "precision", "recall", "map50", "map50_95", "ap_small", "ap_medium", "ap_large",
                "train_time_s", "mean_ablation_effect", "knockout_effect", "reinit_effect",
                "knockout_map50_95"}
RECORD_NAME = "result.json"  # a run's record, in its run folder


@dataclasses.dataclass
class RunSpec:
    """Everything one training run needs; picklable (parallel runs execute in worker processes)."""

    variant: str
    seed: int
    model: str
    model_dict: dict | None
    data: str
    train: dict  # Ultralytics train arguments (imgsz among them: ``imgsz`` reads it)
    run_dir: str
    params: int
    gflops: float
    fingerprint: str
    trust: bool = False  # load train.pretrained by a full unpickle (the config's `trust`)
    env: dict = dataclasses.field(default_factory=dict)  # environment variables set during the run (tracking)
    health: bool = True  # attention health per epoch (attn_yolo.health): gates.csv, gates.png, NaN/inf guard
    start: str | None = None  # checkpoint the run starts from (the design's `start`), carried by layer; None: scratch
    new_blocks: list[str] | None = None  # module paths of the blocks the arm adds to the baseline (attention check)
    lr_mult: float = 1.0  # learning rate of the new blocks' parameters, × lr0 (the design's `new_blocks`)
    gamma: float = 0.0  # the new blocks' residual gates' γ at step 0 (with a start; 0.0: as inserted)
    probe_steps: int = 0  # steps of the probe phase first: the new blocks alone train (the baseline: nothing does)
    probe_lr_mult: float = 10.0  # the new blocks' learning rate in the probe phase, × lr0
    sdpa: bool = False  # Ultralytics' Attention/AAttn on fused SDPA (attn_yolo.sdpa), in training

    @property
    def imgsz(self) -> int:
        """The square size the run trains, validates and is timed at, pixels (``train["imgsz"]``)."""
        return train_imgsz(self.train)


def new_record(spec: RunSpec, device: str, model: str | None = None, error: str = "") -> dict:
    """The record of ``spec`` before any metrics: status ``failed`` until the run sets ``ok``.

    It names the versions the run's numbers come from, read in the process that runs it (a Ray or worker process may
    have other ones): ``ultralytics_version``, ``torch_version`` and ``thop_version`` (ultralytics-thop, which counts
    the GFLOPs; None if not installed), in result.json only (results.csv keeps its columns).

    Args:
        spec: the run.
        device: the device it runs on, as recorded.
        model: the model file it trains from (default ``spec.model``).
        error: the error, one line, for a run that failed before it could fill in the record.
    """
    return {
        "variant": spec.variant, "seed": spec.seed, "status": "failed", "params": spec.params, "gflops": spec.gflops,
        "device": device, "run_dir": spec.run_dir, "model": spec.model if model is None else model, "error": error,
        "fingerprint": spec.fingerprint, "host": socket.gethostname(), **versions(),
    }  # fmt: skip


def complete(row: dict) -> dict:
    """A record with every field (None where a failed run has no value), fields in results.csv order, extras after."""
    return {k: row.get(k) for k in FIELDS} | {k: v for k, v in row.items() if k not in FIELDS}


def write_record(row: dict) -> Path:
    """Write a run's record to ``<row["run_dir"]>/result.json`` atomically (never half-written); returns the path."""
    path = Path(row["run_dir"]) / RECORD_NAME
    atomic_write(path, lambda p: Path(p).write_text(json.dumps(row, indent=1) + "\n"))
    return path


def read_record(run_dir: str | Path) -> dict | None:
    """The record in a run folder, with ``run_dir`` set to where the folder is now; None when it has none.

    Raises:
        ValueError: the record is not a JSON object with the record fields (naming the file).
    """
    path = Path(run_dir) / RECORD_NAME
    if not path.is_file():
        return None
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable run record ({e})") from None
    if not isinstance(row, dict) or not {"variant", "seed", "status", "fingerprint"} <= row.keys():
        raise ValueError(f"{path}: not a run record (expected the keys variant, seed, status, fingerprint)")
    old, row["run_dir"] = str(row.get("run_dir") or ""), str(Path(run_dir))
    if old and isinstance(row.get("model"), str) and row["model"].startswith(old + "/"):  # out was moved
        row["model"] = row["run_dir"] + row["model"][len(old):]
    return complete(row)


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
