"""The known-answer tables: a reference ablation's verdicts, and how quick designs on the same data agree with them.

The reference is an ablation with many fixed seeds (``configs/ablation/key-reference.yaml``); a quick design is any
ablation or search out folder on the same data and training with seeds of its own (the main job, a quick search).
Nothing is measured again: every figure is the runs' own, read from ``verdicts.json`` and ``results.csv`` (a
search's from ``search.csv``).

Reference table, per arm: Δ mAP50-95 against the baseline with the interval that decides it, its verdict (the
attention check included), A (the mean-ablation effect) and the seeds whose own mean-ablation effect exceeds
``CARRY`` (the gates carry the input), then the baseline's per-seed mAP50-95. Agreement table, per quick design and
arm in both: the two Δ and verdicts, whether the signs agree, whether the verdicts agree, and whether the quick Δ lies
inside the reference interval. Used for BENCHMARKS.md section 12.6.

    python scripts/known_answer.py <reference out> [<quick out>[:arm=reference arm,...] ...]

(``runs/ablate/synthetic-key-cbam:cbam=cbam.backbone``: the main job's ``cbam`` is the reference's ``cbam.backbone``.)
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CARRY = 0.05  # a seed's mean-ablation effect above this: its gates carry the input (section 12.5)
REFERENCE = ("arm", "Δ mAP50-95", "deciding interval", "verdict", "A: mean ablation", "gates carry the input",
             "seeds")
AGREEMENT = ("quick design", "arm", "reference Δ [interval]", "reference verdict", "quick Δ [interval]",
             "quick verdict", "sign agrees", "verdict agrees", "quick Δ inside the reference interval")


def load(folder: Path) -> dict | None:
    """The verdicts of an out folder, by arm: an ablation's (``read_verdicts``), or a search's ranked table
    (``search.csv``: each arm's Δ, joint interval and verdict against the baseline); None where it has neither."""
    import csv
    from types import SimpleNamespace

    from attn_yolo.ablate.statistics.verdicts import read_verdicts

    if (folder / "search.csv").is_file():
        return {r["arm"]: SimpleNamespace(mean=float(r["delta"]), status=r["verdict"], n=int(r["seeds"]), check={},
                                          interval=SimpleNamespace(lo=float(r["lo"]), hi=float(r["hi"]), kind="joint"))
                for r in csv.DictReader((folder / "search.csv").open())}
    found = read_verdicts(folder / "verdicts.json")
    return None if found is None else found[0]


def interval(v, kind: bool = True) -> str:
    """A verdict's deciding interval, ``[lo, hi]`` (``kind``: with its name), or ``none``."""
    from attn_yolo.text import bracket

    if v.interval is None:
        return "none"
    return bracket(v.interval.lo, v.interval.hi) + (f" ({v.interval.kind})" if kind else "")


def reference_rows(verdicts: dict) -> list[tuple]:
    """One row per arm of the reference (``REFERENCE``)."""
    from attn_yolo.text import number

    out = []
    for arm, v in verdicts.items():
        check = v.check or {}
        per_seed = [x for x in check.get("per_seed", []) if x is not None and math.isfinite(x)]
        carry = f"{sum(abs(x) > CARRY for x in per_seed)} of {len(per_seed)}" if per_seed else "n/a"
        out.append((arm, number(v.mean, sign=True), interval(v), v.status, number(check.get("A")), carry, v.n))
    return out


def agreement_rows(name: str, reference: dict, quick: dict, renamed: dict) -> list[tuple]:
    """One row per arm in both (``AGREEMENT``); ``renamed``: a quick arm's name -> the reference arm it is."""
    from attn_yolo.text import number

    quick = {renamed.get(a, a): v for a, v in quick.items()}
    out = []
    for arm in [a for a in reference if a in quick]:
        r, q = reference[arm], quick[arm]
        sign = "yes" if math.copysign(1, r.mean) == math.copysign(1, q.mean) else "no"
        inside = "n/a" if r.interval is None else ("yes" if r.interval.lo <= q.mean <= r.interval.hi else "no")
        r_text, q_text = (f"{number(v.mean, sign=True)} {interval(v, kind=False)}" for v in (r, q))
        out.append((name, arm, r_text, r.status, q_text, q.status, sign, "yes" if r.status == q.status else "no",
                    inside))
    return out


def main(argv: list[str]) -> int:
    from attn_yolo.markdown import table
    from attn_yolo.text import number

    usage = "usage: python scripts/known_answer.py <reference out> [<quick out>[:arm=reference arm,...] ...]"
    if argv in (["-h"], ["--help"], ["help"]):
        print(usage)
        return 0
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    quick = [(Path(a.split(":")[0]), dict(p.split("=", 1) for p in a.split(":", 1)[1].split(",") if "=" in p)
              if ":" in a else {}) for a in argv[1:]]
    missing = [str(p) for p in [Path(argv[0]), *(q for q, _ in quick)] if not p.is_dir()]
    if missing:
        print(f"known_answer: {missing[0]}: no such folder (an ablation's or a search's out folder)", file=sys.stderr)
        return 2
    from attn_yolo.ablate.runs.results import read_results

    loaded = {str(p): load(p) for p in [Path(argv[0]), *(q for q, _ in quick)]}
    unread = [p for p, v in loaded.items() if v is None]
    if unread or not (Path(argv[0]) / "results.csv").is_file():
        print(f"known_answer: {unread[0] if unread else argv[0]}: neither a search's search.csv nor an ablation's "
              "readable verdicts.json and results.csv (has the report been written?)", file=sys.stderr)
        return 2
    reference, rows = loaded[str(Path(argv[0]))], read_results(Path(argv[0]) / "results.csv")
    print(table(REFERENCE, reference_rows(reference)))
    base = sorted((r["seed"], r["map50_95"]) for r in rows if r["variant"] == "baseline" and r["status"] == "ok")
    print("\nbaseline mAP50-95 per seed: " + ", ".join(f"{s}: {number(m)}" for s, m in base))
    agree = [row for folder, renamed in quick
             for row in agreement_rows(folder.name, reference, loaded[str(folder)], renamed)]
    if agree:
        print()
        print(table(AGREEMENT, agree))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
