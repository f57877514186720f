"""The attention check's figures for the arms of an ablation folder, measured again on their ``best.pt``.

For every run of an arm that adds blocks, its ``best.pt`` is validated as trained, with its blocks' gates and attention
held at their mean (mean ablation), with the blocks replaced by the identity, and with their weights re-initialised
(``attn_yolo.ablate.runs.train.attention_figures``, the same validator settings as the run's). Prints one row per run
and the arm's means; the run folders are not changed (the validations go to a temporary folder). Used for the "before"
rows of BENCHMARKS.md (ablations run before the check existed).

    python scripts/recheck_attention.py runs/ablate/synthetic-quick
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    from attn_yolo import ablate
    from attn_yolo.ablate.config.ablation import CONFIG_KEYS
    from attn_yolo.ablate.runs.results import collect_records
    from attn_yolo.ablate.runs.train import attention_figures

    out = Path(argv[0]).resolve()
    raw, base, name, source = ablate.load_config(out / "config.yaml")  # the resolved config the ablation wrote
    done = collect_records(out)[0]
    raw = {**{k: v for k, v in raw.items() if k in CONFIG_KEYS}, "out": str(out),
           "seeds": sorted({r["seed"] for r in done})}  # the seeds that ran, as a fixed list: plan() builds them
    ab = ablate.prepare(ablate.validate(raw, base, name, source))
    specs = {(s.variant, s.seed): s for s in ablate.runs.runner.plan(ab, ab.data)}
    rows = [r for r in done if r["status"] == "ok" and specs[(r["variant"], r["seed"])].new_blocks]
    print("| run | mAP50-95 | mean ablation Δ | identity Δ | re-initialised Δ |\n|---|---|---|---|---|")
    per_arm: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows:
            run_dir = str(Path(tmp) / Path(r["run_dir"]).name)
            spec = dataclasses.replace(specs[(r["variant"], r["seed"])], run_dir=run_dir)
            f = attention_figures(spec, Path(r["run_dir"]) / "weights" / "best.pt", spec.train)
            per_arm.setdefault(r["variant"], []).append(f)
            print(f"| {Path(r['run_dir']).name} | {f['standalone_map50_95']:.4f} | {f['mean_ablation_effect']:+.4f} | "
                  f"{f['knockout_effect']:+.4f} | {f['reinit_effect']:+.4f} |", flush=True)
    for arm, fs in per_arm.items():
        mean = {k: statistics.fmean(abs(f[k]) for f in fs) for k in ("mean_ablation_effect", "knockout_effect",
                                                                      "reinit_effect")}
        print(f"\n{arm}: {len(fs)} seeds; mean |Δ|: mean ablation {mean['mean_ablation_effect']:.4f}, identity "
              f"{mean['knockout_effect']:.4f}, re-initialised {mean['reinit_effect']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
