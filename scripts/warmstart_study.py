"""The warm-start study: how the default ablation's CBAM arm trains under each way of letting new blocks learn.

One ablation on the default's data, start and train arguments (``attn_yolo.ablate.config.DEFAULT_CONFIG_YAML``),
with one CBAM arm per choice of ``new_blocks`` (an arm's own ``new_blocks:`` key) and a fixed list of seeds, so that
every choice is paired with the same baseline runs. It prints one table row per choice: the blocks' mean |γ| and
raw-output knock-out (attention health, last epoch), their knock-out effect on mAP50-95 (the treatment check's T),
the mean Δ mAP50-95 against the baseline, the SD of Δ over seeds, the detectable |Δ| (80 % power, fixed n, the
hierarchical variances), the half-width of the 95 % anytime-valid interval that would decide the arm alone, whether
the arm passes the treatment check there, and the mean time per run.

    python scripts/warmstart_study.py            # out=runs/study/warmstart, seeds 0..7 (about 40 min on 2 cores)
    python scripts/warmstart_study.py out=/tmp/w seeds=5

A rerun with the same out reuses the finished runs (the ablation runner's resume).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import yaml

CHOICES = (  # name → new_blocks
    ("lr1-g0", {"lr_mult": 1, "gamma": 0.0}),  # the default before this study: Ultralytics' lr0 for every weight
    ("lr10-g0", {"lr_mult": 10, "gamma": 0.0}),
    ("lr30-g0", {"lr_mult": 30, "gamma": 0.0}),
    ("lr100-g0", {"lr_mult": 100, "gamma": 0.0}),
    ("lr1-g0.1", {"lr_mult": 1, "gamma": 0.1}),
    ("lr30-g0.1", {"lr_mult": 30, "gamma": 0.1}),
    ("lr10-g0.1", {"lr_mult": 10, "gamma": 0.1}),
    ("lr1-g0.3", {"lr_mult": 1, "gamma": 0.3}),
)
AT = 5  # the resolution and the check also at this many seeds (the default rule's max)


def config(out: str, seeds: int) -> dict:
    """The default ablation with one CBAM arm per choice and seeds 0 .. seeds − 1."""
    from attn_yolo.ablate.config import DEFAULT_CONFIG_YAML

    cfg = yaml.safe_load(DEFAULT_CONFIG_YAML)
    cbam = next(v for v in cfg["variants"] if v["name"] == "cbam")
    cfg["variants"] = [cfg["variants"][0]] + [{**cbam, "name": f"cbam-{n}", "new_blocks": nb} for n, nb in CHOICES]
    cfg["seeds"] = list(range(seeds))
    cfg["out"] = out
    cfg.pop("new_blocks", None)
    return cfg


def table(ab, rows: list[dict]) -> list[str]:
    """The study's table from the ablation's records: per choice, at the first ``AT`` seeds and at all of them."""
    from attn_yolo.ablate import readings, treatment
    from attn_yolo.ablate.report import analyze
    from attn_yolo.ablate.sequential import SeedRule, confidence_sequence
    from attn_yolo.ablate.stats import PRIMARY, detectable_delta
    from attn_yolo.health.report import arm_health

    boot = analyze(ab, rows)
    head = ("choice (new_blocks)", "mean \\|γ\\|", "raw knock-out", "T = knock-out Δ", "Δ mAP50-95", "SD of Δ",
            "detectable \\|Δ\\|", f"±resolution, {AT} seeds", f"check, {AT} seeds", "±resolution, all", "check, all",
            "s / run")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, nb in CHOICES:
        arm = f"cbam-{name}"
        c = (boot["compare"].get(arm) or {}).get(PRIMARY)
        if c is None:
            out.append(f"| {arm} | no comparison ({boot['why'].get(arm, 'runs missing')}) |")
            continue
        h = c["hier"]
        seeds = readings.paired_seeds(ab, rows, arm)
        fx = treatment.effect(rows, arm, seeds)
        checks = []
        design = SeedRule(min=max(2, min(AT, len(seeds))), max=max(2, len(seeds)))  # looks AT .. every seed run
        for n in (AT, len(seeds)):
            lo, hi = confidence_sequence(c["deltas"][:n], design, h["test_var"])
            t = treatment.check(treatment.effect(rows, arm, seeds[:n]), lo, hi)
            checks += [f"±{(hi - lo) / 2:.4f}", t["status"]]
        health = arm_health([r for r in rows if r["variant"] == arm])
        secs = [r["train_time_s"] for r in rows if r["variant"] == arm and r.get("train_time_s")]
        out.append("| " + " | ".join([
            f"{arm} ({', '.join(f'{k} {v:g}' for k, v in nb.items())})", f"{health['gamma']:.3g}",
            f"{health['knockout']:.3g}", f"{fx['T']:.4f}", f"{h['mean']:+.4f}", f"{math.sqrt(h['seed_var']):.4f}",
            f"{detectable_delta(h['seed_var'], h['test_var'], h['n']):.4f}", *checks, f"{sum(secs) / len(secs):.0f}",
        ]) + " |")  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    out, seeds = args.get("out", "runs/study/warmstart"), int(args.get("seeds", 8))
    from attn_yolo import ablate
    from attn_yolo.ablate.results import collect_records

    Path(out).mkdir(parents=True, exist_ok=True)
    path = Path(out) / "study.yaml"
    path.write_text(yaml.safe_dump(config(str(Path(out).resolve() / "ablation"), seeds), sort_keys=False))
    code = ablate.run(str(path))
    raw, base, name, source = ablate.load_config(path)
    ab = ablate.prepare(ablate.validate(raw, base, name, source))
    rows = [r for r in collect_records(ab.out)[0] if r["status"] == "ok"]
    print(f"\nWarm-start study: {len(CHOICES)} choices of new_blocks on the default ablation, seeds 0..{seeds - 1} "
          f"(exit code of the ablation: {code})\n")
    print("\n".join(table(ab, rows)))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
