"""Health next to Δ: each paired run's Δ mAP50-95 beside its blocks' last-epoch health.

The health comes from ``gates.csv`` (``attn_yolo.health``); beside it, how knock-out and entropy moved from before
training to the last epoch."""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.health import CSV_NAME, read_csv


def run_health(run_dir) -> dict[str, dict]:
    """``{block name: {"first": row at the first epoch recorded (0: before training), "last": row at the last}}`` of
    a run's ``gates.csv`` (``attn_yolo.health.read_csv`` rows); empty without one."""
    path = Path(run_dir) / CSV_NAME
    if not path.is_file():
        return {}
    rows = read_csv(path)
    out: dict[str, dict] = {}
    for r in sorted(rows, key=lambda r: r["epoch"]):
        out.setdefault(r["name"], {"first": r})["last"] = r
    return out


def moved(first: float, last: float) -> float:
    """``last − first`` (NaN where either is missing)."""
    return last - first if not (math.isnan(first) or math.isnan(last)) else math.nan


def health_rows(runs, variant: str, deltas: dict[int, float]) -> list[dict]:
    """One row per (seed, block) of ``variant``, seeds by Δ (largest first).

    Args:
        runs: ``inputs.Runs``.
        deltas: ``{seed: Δ mAP50-95}`` of the variant's paired runs.

    Returns:
        rows with ``seed``, ``delta``, ``largest`` (the seed with the largest |Δ|), ``block`` (None: the run has no
        gates.csv), ``knockout``, ``entropy``, ``gate_mean`` (last epoch), ``d_knockout``, ``d_entropy`` (last −
        first epoch), ``flags`` (last epoch).
    """
    largest = max(deltas, key=lambda s: abs(deltas[s]))
    out = []
    for s in sorted(deltas, key=lambda s: -deltas[s]):
        blocks = run_health(runs.rows[(variant, s)]["run_dir"])
        base = {"seed": s, "delta": deltas[s], "largest": s == largest}
        if not blocks:
            out.append({**base, "block": None})
        for name, h in blocks.items():
            first, last = h["first"], h["last"]
            out.append({**base, "block": name, "knockout": last["knockout"], "entropy": last["entropy"],
                        "gate_mean": last["gate_mean"], "d_knockout": moved(first["knockout"], last["knockout"]),
                        "d_entropy": moved(first["entropy"], last["entropy"]), "flags": last["flags"]})
    return out


def largest_moved(rows: list[dict]) -> list[str]:
    """Sentences: per block, how knock-out and entropy moved in the run with the largest |Δ| against the mean of
    the other runs (``health_rows``)."""
    lines = []
    for name in dict.fromkeys(r["block"] for r in rows if r["block"]):
        mine = [r for r in rows if r["block"] == name]
        top = next((r for r in mine if r["largest"]), None)
        rest = [r for r in mine if not r["largest"]]
        if top is None:
            continue

        def mean(k, rest=rest):
            v = [r[k] for r in rest if not math.isnan(r[k])]
            return sum(v) / len(v) if v else math.nan

        lines.append(f"{name}: in the run with the largest |Δ| (seed {top['seed']}, Δ {top['delta']:+.4f}) "
                     f"knock-out moved {top['d_knockout']:+.3g} to {top['knockout']:.3g} and entropy "
                     f"{top['d_entropy']:+.4f} to {top['entropy']:.4f} during training; in the other "
                     f"{len(rest)} run(s), on average, {mean('d_knockout'):+.3g} and {mean('d_entropy'):+.4f}")
    return lines
