"""Benchmark: what the warm-start design buys on the default ablation (`attn-yolo ablate`, synthetic shapes,
yolo11n vs + CBAM).

1. Runs the default exactly as `attn-yolo ablate` does (shared start trained once, arms fine-tuned from it, seeds
   chosen by the stopping rule) into ``<out>/warm``, timed, and prints its summary.
2. Runs the same arms **from scratch** (no ``start``) with the same per-arm schedule (epochs, fraction, batch, imgsz)
   and the same seeds the warm run used, into ``<out>/scratch``. Only the learning-rate schedule is the from-scratch
   one (``lr0``/``warmup_epochs`` of the default's start, i.e. ``QUICK_TRAIN_ARGS``): the fine-tuning rate would
   handicap a random initialisation.
3. Prints, per design: the per-seed Δ mAP50-95 (+ CBAM − baseline), their SD over seeds, and the smallest |Δ| the
   design detects with 80 % power with those seeds (``stats.detectable_delta`` from the seed variance and the
   validation set's common variance of the image bootstrap); and the ratio of the SDs.

    python scripts/bench_warmstart.py                       # out: runs/bench/warmstart
    python scripts/bench_warmstart.py --out /tmp/wsb        # elsewhere (a rerun reuses finished runs)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path

import yaml

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def measure(ab) -> dict:
    """Per-seed Δ mAP50-95 of every arm, the SD over seeds and the detectable |Δ| of the ablation in ``ab.out``."""
    from attn_yolo.ablate.reports.report import analyze
    from attn_yolo.ablate.runs.results import collect_records
    from attn_yolo.ablate.runs.runner import plan
    from attn_yolo.ablate.statistics import comparisons
    from attn_yolo.ablate.statistics.stats import PRIMARY, detectable_delta

    planned = {(s.variant, s.seed): s.fingerprint for s in plan(ab, ab.data)}
    rows = [r for r in collect_records(ab.out)[0] if planned.get((r["variant"], r["seed"])) == r["fingerprint"]]
    boot = analyze(ab, rows)
    out = {}
    for arm in comparisons.arms(ab):
        d = comparisons.paired_diffs(ab, rows, arm)
        c = boot["compare"].get(arm, {}).get(PRIMARY)
        test_var = c["hier"]["test_var"] if c else 0.0
        sd = statistics.stdev(d) if len(d) > 1 else math.nan
        base = [r["map50_95"] for r in rows if r["variant"] == ab.baseline and r["status"] == "ok"]
        out[arm] = {"diffs": d, "n": len(d), "sd": sd, "test_sd": math.sqrt(test_var),
                    "mde": detectable_delta(sd**2, test_var, len(d)), "baseline": statistics.fmean(base)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/bench/warmstart", help="folder for both ablations")
    args = ap.parse_args()
    out = Path(args.out)

    import attn_yolo  # noqa: F401  registers the blocks
    from attn_yolo.ablate.config.ablation import apply_overrides, load_config
    from attn_yolo.ablate.config.validate import validate
    from attn_yolo.ablate.runs.runner import run_ablation

    load = os.getloadavg()
    raw, base, name, source = load_config(None)  # the default `attn-yolo ablate` runs
    warm = validate(apply_overrides(raw, [f"out={out / 'warm'}"]), base, name, source)
    t0 = time.perf_counter()
    code = run_ablation(warm)
    warm_s = time.perf_counter() - t0
    w = measure(warm)
    seeds = list(range(max((x["n"] for x in w.values()), default=3)))  # the paired seeds the warm run used

    scratch_raw = {k: v for k, v in raw.items() if k != "start"}
    scratch_raw["seeds"] = seeds
    scratch_raw["train"] = {**raw["train"], **{k: raw["start"][k] for k in ("lr0", "warmup_epochs")}}
    scratch = validate(apply_overrides(scratch_raw, [f"out={out / 'scratch'}"]), base, name, source)
    t0 = time.perf_counter()
    code = max(code, run_ablation(scratch))
    scratch_s = time.perf_counter() - t0
    s = measure(scratch)

    tr = ", ".join(f"{k}={warm.train[k]}" for k in ("epochs", "fraction", "imgsz", "batch"))
    print("\n## Warm start vs from scratch on the default ablation (Δ mAP50-95, + CBAM − baseline)\n")
    print(f"Per-arm schedule: {tr}; warm: {warm.start.describe()}; load average at start "
          f"{load[0]:.1f}, at end {os.getloadavg()[0]:.1f} (2 cores)\n")
    print("| design | seeds | baseline mAP50-95 | per-seed Δ | SD of Δ over seeds | validation-set SD | "
          "detectable \\|Δ\\| (80 % power) | wall time |")
    print("|---|---|---|---|---|---|---|---|")
    for label, m, secs in (("warm start (default)", w, warm_s), ("from scratch", s, scratch_s)):
        for arm, x in m.items():
            ds = ", ".join(f"{d:+.4f}" for d in x["diffs"])
            print(f"| {label}: {arm} | {x['n']} | {x['baseline']:.4f} | {ds} | {x['sd']:.4f} | {x['test_sd']:.4f} | "
                  f"{x['mde']:.4f} | {secs / 60:.1f} min |")
    for arm in w:
        if arm in s and w[arm]["sd"] > 0:
            print(f"\n{arm}: SD of Δ from scratch / warm start = {s[arm]['sd'] / w[arm]['sd']:.1f}x "
                  f"(target >= 5x); detectable |Δ| with the default's {w[arm]['n']} seeds: {w[arm]['mde']:.4f} "
                  "(target <= 0.02)")
    (out / "bench.yaml").write_text(yaml.safe_dump({"warm": w, "scratch": s, "warm_s": warm_s,
                                                    "scratch_s": scratch_s, "load": list(load)}))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
