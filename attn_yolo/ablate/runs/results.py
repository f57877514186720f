"""results.csv, the index of an ablation's runs: rebuilt from the records in the run folders, written atomically.

The run folders hold the truth (``<run folder>/result.json``); results.csv is rewritten from them as each run ends.
A damaged, edited, foreign or deleted results.csv therefore loses nothing: ``check_index`` says what was wrong with it
(one warning naming the file and the first bad line) and the runner rebuilds it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from attn_yolo.ablate.runs.outdir import RUN_MARKER, is_ours
from attn_yolo.ablate.runs.records import FIELDS, FLOAT_FIELDS, INT_FIELDS, read_record
from attn_yolo.files import atomic_write


def read_results(path: Path) -> list[dict]:
    """Rows of an ablation results.csv, numbers parsed (empty cells → None).

    Raises:
        ValueError: a cell that should hold a number does not (naming the file, line and column).
    """
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
        for k in INT_FIELDS | FLOAT_FIELDS:
            v = row.get(k)
            try:
                row[k] = None if v in (None, "") else int(float(v)) if k in INT_FIELDS else float(v)
            except ValueError:
                raise ValueError(f"{path}: line {i + 2}, column {k}: {v!r} is not a number") from None
    return rows


def _csv_lines(rows: list[dict]) -> list[str]:
    """results.csv as lines: the header, then one line per record."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else "" if v is None else v) for k, v in row.items()})
    return buf.getvalue().splitlines(keepends=True)


def write_results(path: Path, rows: list[dict]) -> None:
    """Write results.csv atomically (a temporary file renamed over the old one)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text("".join(_csv_lines(rows)), newline=""))


def collect_records(out: Path) -> tuple[list[dict], list[str]]:
    """Every run record under ``out/runs`` (folders the runner made only).

    Returns:
        (records in folder-name order, one warning per unreadable record; such a run counts as not run).
    """
    records, warnings = [], []
    runs = Path(out) / "runs"
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not is_ours(folder, RUN_MARKER):
            continue
        try:
            row = read_record(folder)
        except ValueError as e:
            warnings.append(f"{e}; the run is redone")
            continue
        if row is not None:
            records.append(row)
    return records, warnings


def check_index(path: Path, rows: list[dict]) -> str | None:
    """What is wrong with results.csv given the run records ``rows``: None when it indexes exactly them (in any order),
    else one message naming the file and the first bad line."""
    expected = _csv_lines(rows)
    if not path.exists():
        return f"{path}: not found; rebuilt from {len(rows)} run record(s)" if rows else None
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as e:
        return f"{path}: unreadable ({e}); rebuilt from {len(rows)} run record(s)"
    if not lines or lines[0] != expected[0]:
        got = lines[0].strip() if lines else ""
        return f"{path}: line 1 {got[:80]!r} is not the results.csv header; rebuilt from {len(rows)} run record(s)"
    want, seen = set(expected[1:]), set()
    for i, line in enumerate(lines[1:], start=2):
        if line not in want or line in seen:
            why = "repeats an earlier line" if line in seen else "matches no run record (damaged or edited)"
            return f"{path}: line {i} {line.strip()[:80]!r} {why}; rebuilt from {len(rows)} run record(s)"
        seen.add(line)
    missing = len(want - set(lines[1:]))
    if missing:
        return f"{path}: lacks {missing} of {len(rows)} run record(s); rebuilt from the run folders"
    return None
