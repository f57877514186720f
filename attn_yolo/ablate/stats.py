"""Ablation statistics, the only place they are computed: mean ± std, paired differences to the baseline, verdicts.

Differences are paired by seed; their CI comes from the t distribution and p from the two-sided paired t-test.
"""

from __future__ import annotations

import math
import statistics

# Summary metrics: results.csv column, label, decimals, sense (+1 higher is better, -1 lower is better).
METRICS = (
    ("precision", "P", 4, +1),
    ("recall", "R", 4, +1),
    ("map50", "mAP50", 4, +1),
    ("map50_95", "mAP50-95", 4, +1),
    ("best_epoch", "best epoch", 1, 0),
    ("train_time_s", "train time (s)", 1, 0),
    ("latency_ms", "latency (ms)", 2, -1),
)
PRIMARY = "map50_95"
CONFIDENCE = 0.95


def paired_difference(diffs: list[float], confidence: float = CONFIDENCE) -> dict:
    """Mean of paired differences (variant − baseline, one per seed), its t-distribution CI and paired t-test p.

    Returns:
        dict with ``n``, ``mean``, ``lo``, ``hi`` (CI bounds) and ``p`` (two-sided); CI and p are NaN for n < 2.
        Identical differences (zero spread) give a CI of zero width and p = 0 (or 1 when they are all 0).
    """
    from scipy.stats import t

    n = len(diffs)
    mean = statistics.fmean(diffs) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "lo": math.nan, "hi": math.nan, "p": math.nan}
    se = statistics.stdev(diffs) / math.sqrt(n)
    if se == 0:
        return {"n": n, "mean": mean, "lo": mean, "hi": mean, "p": 1.0 if mean == 0 else 0.0}
    half = float(t.ppf(0.5 + confidence / 2, n - 1)) * se
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half, "p": float(2 * t.sf(abs(mean) / se, n - 1))}


def verdict(stats: dict, sense: int = +1) -> str:
    """``better`` / ``worse`` when the CI excludes 0 (``sense`` −1: lower is better), else ``no detectable
    difference``; ``n/a`` with fewer than 2 paired seeds."""
    if stats["n"] < 2:
        return "n/a (needs >= 2 paired seeds)"
    if stats["lo"] > 0 or stats["hi"] < 0:
        return "better" if (stats["lo"] > 0) == (sense > 0) else "worse"
    return "no detectable difference"


def summarize(rows: list[dict], variants: list[str], baseline: str) -> dict:
    """Per-variant statistics over the ``ok`` runs, and paired differences to the baseline.

    Returns:
        ``{"variants": {name: {"n", "runs", "failed", "params", "gflops", metric: (mean, std)}}, "diffs": {name:
        {metric: paired_difference(...) + {"verdict"}}}}``; std is NaN for n < 2.
    """
    ok = {v: {r["seed"]: r for r in rows if r["variant"] == v and r["status"] == "ok"} for v in variants}
    out = {"variants": {}, "diffs": {}}
    for v in variants:
        runs = list(ok[v].values())
        s = {"n": len(runs), "runs": sum(r["variant"] == v for r in rows),
             "failed": sum(r["variant"] == v and r["status"] != "ok" for r in rows)}  # fmt: skip
        for key in ("params", "gflops"):
            s[key] = next((r[key] for r in rows if r["variant"] == v and r[key] is not None), None)
        for key, *_ in METRICS:
            vals = [r[key] for r in runs if r[key] is not None]
            mean = statistics.fmean(vals) if vals else math.nan
            s[key] = (mean, statistics.stdev(vals) if len(vals) > 1 else math.nan)
        out["variants"][v] = s
        if v != baseline:
            seeds = sorted(set(ok[v]) & set(ok[baseline]))
            out["diffs"][v] = {}
            for key, _, _, sense in METRICS:
                if sense == 0:
                    continue
                pairs = [(ok[v][k][key], ok[baseline][k][key]) for k in seeds]
                d = paired_difference([a - b for a, b in pairs if a is not None and b is not None])
                out["diffs"][v][key] = {**d, "verdict": verdict(d, sense)}
    return out
