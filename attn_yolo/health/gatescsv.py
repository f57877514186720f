"""gates.csv: one row per epoch and attention block (``measure``'s columns and the flags); written and read back."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from attn_yolo.health.measure import COLUMNS

CSV_NAME = "gates.csv"
CSV_FIELDS = ("epoch", "name", "layer", "block", *COLUMNS, "flags")
"""Columns: ``epoch`` (completed epochs; 0: before the first step), ``name`` (``L06_CBAM``), ``layer`` (``6`` or
``6.1``), ``block`` (class), ``measure.COLUMNS``, ``flags`` (``;``-separated, empty for none). An empty cell: not
applicable (no gate, no residual gate, a 1×1 map)."""


def _fmt(v) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else format(v, ".12g")
    return str(v)


def read_csv(path: str | Path) -> list[dict]:
    """Rows of a ``gates.csv``: numbers as floats (NaN for an empty cell), ``epoch`` as int, ``flags`` as a list."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = {"epoch": int(r["epoch"]), "name": r["name"], "layer": r["layer"], "block": r["block"],
                   "flags": [x for x in r["flags"].split(";") if x]}  # fmt: skip
            row.update({k: float(r[k]) if r.get(k) else math.nan for k in COLUMNS})
            rows.append(row)
    return rows


def write_csv(rows: list[dict], path: str | Path) -> Path:
    """Write ``rows`` (dicts with ``CSV_FIELDS``; ``flags`` a list) to ``path`` atomically; floats with 12 digits."""
    from attn_yolo.files import atomic_write

    def write(p):
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(CSV_FIELDS)
            for r in rows:
                w.writerow([";".join(r[k]) if k == "flags" else _fmt(r[k]) for k in CSV_FIELDS])

    atomic_write(path, write)
    return Path(path)
