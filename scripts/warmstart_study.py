"""The warm-start study: which way of training new blocks from the shared start makes their attention matter.

Each group is one ablation on the warm design's data and train arguments
(``attn_yolo.ablate.config.ablation.SHAPES_WARM_CONFIG_YAML``) from one shared start, with a fixed list of seeds, so
that every choice in a group is paired with the same baseline runs: CBAM, SE and ECA after the backbone's P3/P4/P5, each
under every choice of its group (an arm's own ``new_blocks:``). Groups differ in what the baseline does too: a probe
phase (the baseline held still for as many steps) and longer arms (the baseline longer too). Per block and choice the
table gives the attention check's figures (``attn_yolo.ablate.statistics.treatment``): A, the mean-ablation effect (mean
over seeds of |Δ mAP50-95| with the gates at their mean), the identity's and the re-initialised blocks' effects beside
it, the gates' normalised entropy (1 = flat) and the share of seeds with a block flagged ``uniform``, mean |γ|, Δ
mAP50-95 against the group's baseline, the SD of Δ over seeds, the resolution (half-width of the fixed-n hierarchical 95
% interval at the study's seeds), whether A reaches it, and the mean seconds per run.

    python scripts/warmstart_study.py                      # out=runs/study/warmstart, seeds 0..2 (~40 min, 2 cores)
    python scripts/warmstart_study.py out=/tmp/w seeds=4 start=runs/ablate/synthetic-quick/start/weights/best.pt
    python scripts/warmstart_study.py groups=same,longer blocks=SE,ECA   # some groups' arms, of some blocks only

``start=``: a checkpoint to start every group from (default: the first group trains the default's start once and the
others reuse it). A rerun with the same ``out`` reuses the finished runs (the ablation runner's resume).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import yaml

BLOCKS = (("CBAM", [16, 7]), ("SE", [16]), ("ECA", []))
GROUPS = (  # name, train overrides (every arm, baseline too), the design's new_blocks, {choice: the arm's new_blocks
    # and, under "blocks", the blocks it is tried on when not all)
    ("same", {}, {}, {
        "lr1-g0.3": {"lr_mult": 1, "gamma": 0.3},  # today's default
        "lr30-g0.3": {"lr_mult": 30, "gamma": 0.3},
        "lr100-g0.3": {"lr_mult": 100, "gamma": 0.3},
        "lr30-g1": {"lr_mult": 30, "gamma": 1.0, "blocks": ("CBAM",)},  # another start: the whole block at step 0
    }),
    ("probe", {}, {"probe_steps": 31}, {  # half the 62 steps: the new blocks alone, then the whole model
        "probe31x100-lr10-g0.3": {"probe_steps": 31, "probe_lr_mult": 100, "lr_mult": 10, "gamma": 0.3},
    }),
    ("longer", {"epochs": 2}, {}, {
        "2ep-lr30-g0.3": {"lr_mult": 30, "gamma": 0.3},
    }),
)


def config(group: tuple, out: Path, seeds: int, start, blocks: tuple[str, ...] = ()) -> dict:
    """The default ablation with the group's arms (of ``blocks`` only, where given), seeds 0 .. seeds − 1."""
    from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML

    name, train, top, choices = group
    cfg = yaml.safe_load(SHAPES_WARM_CONFIG_YAML)
    cfg["variants"] = [cfg["variants"][0]] + [
        {"name": f"{b.lower()}-{c}", "base": "yolo11n.yaml", "module": b, "at": "backbone", "args": args,
         "new_blocks": {k: v for k, v in nb.items() if k != "blocks"}}
        for b, args in BLOCKS for c, nb in choices.items()
        if b in nb.get("blocks", (b,)) and (not blocks or b in blocks)]
    cfg["seeds"], cfg["out"], cfg["new_blocks"] = list(range(seeds)), str(out / name), top
    cfg["train"].update(train)
    if start:
        cfg["start"] = str(start)
    return cfg


def row(ab, rows: list[dict], boot: dict, arm: str) -> list[str]:
    """One table row: the arm's attention check, its Δ and its cost."""
    from attn_yolo.ablate.statistics import comparisons, treatment
    from attn_yolo.ablate.statistics.stats import PRIMARY
    from attn_yolo.health.report import arm_health

    c = (boot["compare"].get(arm) or {}).get(PRIMARY)
    if c is None:
        return [arm, f"no comparison ({boot['why'].get(arm, 'runs missing')})"]
    h = c["hier"]
    seeds = comparisons.paired_seeds(ab, rows, arm)
    t = treatment.check(treatment.effect(rows, arm, seeds), h["lo"], h["hi"])
    health = arm_health([r for r in rows if r["variant"] == arm])
    secs = [r["train_time_s"] for r in rows if r["variant"] == arm and r.get("train_time_s")]
    sd = statistics.stdev(c["deltas"]) if len(c["deltas"]) > 1 else math.nan
    return [arm, f"{t['A']:.4f}", f"{t['knockout']:.4f}", f"{t['reinit']:.4f}", f"{health['entropy']:.4f}",
            f"{health['uniform'] * 100:.0f} %", f"{health['gamma']:.3g}", f"{h['mean']:+.4f}", f"{sd:.4f}",
            f"±{t['resolution']:.4f}", t["status"], f"{sum(secs) / max(len(secs), 1):.0f}"]


def table(results: list[tuple]) -> list[str]:
    head = ("arm (block-choice)", "A: mean ablation", "identity", "re-initialised", "gate entropy", "uniform seeds",
            "mean \\|γ\\|", "Δ mAP50-95", "SD of Δ", "resolution", "check", "s / run")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ab, rows, boot in results:
        out += ["| " + " | ".join(row(ab, rows, boot, v.name)) + " |" for v in ab.variants if v.name != ab.baseline]
    return out


def main(argv: list[str]) -> int:
    from attn_yolo import ablate
    from attn_yolo.ablate.reports.report import analyze
    from attn_yolo.ablate.runs.results import collect_records

    args = dict(a.split("=", 1) for a in argv)
    out, seeds, start = Path(args.get("out", "runs/study/warmstart")).resolve(), int(args.get("seeds", 3)), \
        args.get("start")
    names = {g[0] for g in GROUPS}
    groups = [g for g in GROUPS if g[0] in (args["groups"].split(",") if "groups" in args else names)]
    blocks = tuple(args["blocks"].split(",")) if "blocks" in args else ()
    if unknown := {*args} - {"out", "seeds", "start", "groups", "blocks"}:
        sys.exit(f"unknown argument(s) {sorted(unknown)}; allowed: out, seeds, start, groups, blocks")
    if not groups or not {*blocks} <= {b for b, _ in BLOCKS}:
        sys.exit(f"groups: one or more of {sorted(names)}; blocks: one or more of {[b for b, _ in BLOCKS]}")
    out.mkdir(parents=True, exist_ok=True)
    results, codes, t0 = [], [], time.time()
    for group in groups:
        path = out / f"{group[0]}.yaml"
        path.write_text(yaml.safe_dump(config(group, out, seeds, start, blocks), sort_keys=False))
        codes.append(ablate.run(str(path)))
        raw, base, name, source = ablate.load_config(path)
        ab = ablate.prepare(ablate.validate(raw, base, name, source))
        rows = [r for r in collect_records(ab.out)[0] if r["status"] == "ok"]
        results.append((ab, rows, analyze(ab, rows)))
        start = start or str(ab.out / "start" / "weights" / "best.pt")
    print(f"\nWarm-start study: {sum(len(g[3]) for g in groups)} choices, {len(blocks or BLOCKS)} blocks, "
          f"seeds 0..{seeds - 1}, wall {(time.time() - t0) / 60:.1f} min (exit codes {codes})\n")
    print("\n".join(table(results)))
    return max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
