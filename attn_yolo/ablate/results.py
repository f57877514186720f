"""results.csv, the index of an ablation's runs: one record per row, read with numbers parsed, written atomically."""

from __future__ import annotations

import csv
from pathlib import Path

from attn_yolo.ablate.records import FIELDS, FLOAT_FIELDS, INT_FIELDS
from attn_yolo.checkpoint import atomic_write


def read_results(path: Path) -> list[dict]:
    """Rows of an ablation results.csv, numbers parsed (empty cells → None)."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for k in INT_FIELDS | FLOAT_FIELDS:
            v = row.get(k)
            row[k] = None if v in (None, "") else int(float(v)) if k in INT_FIELDS else float(v)
    return rows


def write_results(path: Path, rows: list[dict]) -> None:
    """Write results.csv atomically (a temporary file renamed over the old one)."""

    def write(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
            w.writeheader()
            for row in rows:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else "" if v is None else v) for k, v in row.items()})

    atomic_write(path, write)
