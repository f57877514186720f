"""The key study: on the known-answer data (``synthetic-key``), which design lets a new block learn to read the key.

``synthetic-key`` hides a small key marker in half of the images, and the marker decides which shapes are targets, so
a detector that does not read it loses about half of its mAP. A global channel gate (CBAM's channel attention, SE)
reads it in one step. Each design below is one ablation (``attn-yolo ablate``) with a fixed list of seeds, its arms
paired with the same baseline runs; the table gives, per arm, the mean mAP50-95 of the baseline and of the arm, and
the attention check's figures (``attn_yolo.ablate.statistics.treatment``, from each run's record): A, the
mean-ablation effect (mean over seeds of |Δ mAP50-95| with the new blocks' gates held at their mean over the
validation images), and the identity's and the re-initialised blocks' effects beside it, with the mean seconds of
training per run.

    python scripts/key_study.py                     # out=runs/study/key, every design (~90 min on 2 quiet cores)
    python scripts/key_study.py designs=scratch     # one design (comma-separated names)

The warm designs share one start (``warm-start``: yolo11n trained 5 epochs on the key data, the default's recipe
start); a rerun with the same ``out`` reuses every finished run (the ablation runner's resume).
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

import yaml

CBAM = {"module": "CBAM", "at": "backbone", "args": [16, 7]}
CBAM_NECK = {"module": "CBAM", "at": "neck", "args": [16, 7]}
SE_NECK = {"module": "SE", "at": "neck", "args": [16]}
FINE = {"epochs": 1, "fraction": 0.5, "lr0": 0.0005, "warmup_epochs": 0, "val": True}  # the warm default's arm
LONG = {"epochs": 2, "fraction": 1.0, "lr0": 0.003, "warmup_epochs": 0}  # two full epochs at the start's rate
START = {"epochs": 5, "fraction": 1.0, "lr0": 0.003, "warmup_epochs": 0.3, "val": False}
DESIGNS = {  # name: (start: a recipe, "shared" = the warm start's best.pt, None = from scratch; train; new_blocks;
    # arms; seeds)
    "warm": ("recipe", FINE, {"lr_mult": 1.0, "gamma": 0.3}, {"cbam": CBAM}, 3),
    "warm-lr30": ("shared", FINE, {"lr_mult": 30.0, "gamma": 0.3}, {"cbam": CBAM, "cbam-neck": CBAM_NECK,
                                                                     "se-neck": SE_NECK}, 1),
    "warm-lr30-g1": ("shared", FINE, {"lr_mult": 30.0, "gamma": 1.0}, {"cbam": CBAM, "cbam-neck": CBAM_NECK}, 1),
    "warm-2ep": ("shared", LONG, {"lr_mult": 1.0, "gamma": 0.3}, {"cbam": CBAM, "cbam-neck": CBAM_NECK}, 1),
    "warm-2ep-g1": ("shared", LONG, {"lr_mult": 1.0, "gamma": 1.0}, {"cbam-neck": CBAM_NECK}, 1),
    "short-start": ({**START, "epochs": 2}, {**LONG, "epochs": 3}, {"lr_mult": 1.0, "gamma": 0.3},
                    {"cbam": CBAM, "cbam-neck": CBAM_NECK}, 1),
    "scratch": (None, {"epochs": 5, "fraction": 1.0, "lr0": 0.003, "warmup_epochs": 0.3, "val": False}, None,
                {"cbam-neck": CBAM_NECK}, 1),
    # a start that detects every shape and has never needed the key (trained on synthetic-key-decoy), then 2 epochs
    # in which reading the key is the one new thing to learn
    "decoy-start": ("decoy", LONG, {"lr_mult": 1.0, "gamma": 0.3}, {"cbam-neck": CBAM_NECK, "se-neck": SE_NECK}, 2),
    # one shared epoch, then 4 epochs per arm at the start's rate: most of the from-scratch training, from one point
    "one-epoch-start": ({**START, "epochs": 1}, {"epochs": 4, "fraction": 1.0, "lr0": 0.003, "warmup_epochs": 0,
                                                 "val": False}, {"lr_mult": 1.0, "gamma": 0.3},
                        {"cbam-neck": CBAM_NECK}, 2),
}


def config(name: str, out: Path) -> dict:
    """The warm design's train arguments (``SHAPES_WARM_CONFIG_YAML``, the default when this study ran) on
    ``synthetic-key`` with the design's start, schedule and arms."""
    from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML

    start, train, new_blocks, arms, seeds = DESIGNS[name]
    cfg = yaml.safe_load(SHAPES_WARM_CONFIG_YAML)
    cfg["data"], cfg["seeds"], cfg["out"] = "synthetic-key", list(range(seeds)), str(out / name)
    cfg["variants"] = [{"name": "baseline", "model": "yolo11n.yaml"}] + [
        {"name": arm, "base": "yolo11n.yaml", **spec} for arm, spec in arms.items()]
    cfg["train"].update(train)
    cfg["health"] = False
    cfg.pop("start", None), cfg.pop("new_blocks", None)
    if start == "recipe":
        cfg["start"] = START
    elif start == "shared":
        cfg["start"] = str(out / "warm" / "start" / "weights" / "best.pt")
    elif start == "decoy":
        cfg["start"] = str(decoy_start(out))
    elif start is not None:
        cfg["start"] = start
    if new_blocks is not None:
        cfg["new_blocks"] = new_blocks
    return cfg


def decoy_start(out: Path) -> Path:
    """yolo11n trained on ``synthetic-key-decoy`` (every shape a target) with the start's recipe (seed 0), once:
    the ``decoy-start`` design's start checkpoint."""
    weights = out / "decoy-start-model" / "weights" / "last.pt"
    if not weights.is_file():
        from ultralytics import YOLO

        from attn_yolo.synthetic import QUICK_TRAIN_ARGS, default_data_yaml

        YOLO("yolo11n.yaml").train(data=str(default_data_yaml("synthetic-key-decoy")), device="cpu", seed=0,
                                   project=str(out), name="decoy-start-model", exist_ok=True, plots=False,
                                   **{**QUICK_TRAIN_ARGS, **START})
    return weights


def rows(name: str, out: Path) -> list[str]:
    """The design's table rows, one per arm, from its results.csv."""
    recs = list(csv.DictReader((out / name / "results.csv").open()))

    def mean(arm: str, key: str, fn=float) -> float:
        vals = [fn(float(r[key])) for r in recs if r["variant"] == arm and r["status"] == "ok" and r[key] != ""]
        return statistics.fmean(vals) if vals else float("nan")

    base = mean("baseline", "map50_95")
    return [f"| {name} | {arm} | {base:.4f} | {mean(arm, 'map50_95'):.4f} "
            f"| {mean(arm, 'mean_ablation_effect', abs):.4f}"
            f" | {mean(arm, 'knockout_effect', abs):.4f} | {mean(arm, 'reinit_effect', abs):.4f} | "
            f"{len({r['seed'] for r in recs if r['variant'] == arm})} | {mean(arm, 'train_time_s'):.0f} |"
            for arm in DESIGNS[name][3]]


def main(argv: list[str]) -> int:
    from attn_yolo import ablate

    args = dict(a.split("=", 1) for a in argv)
    out = Path(args.get("out", "runs/study/key")).resolve()
    names = args["designs"].split(",") if "designs" in args else list(DESIGNS)
    if "warm" not in names and any(DESIGNS[n][0] == "shared" for n in names):
        names.insert(0, "warm")  # the shared start is the warm design's
    out.mkdir(parents=True, exist_ok=True)
    codes, t0 = [], time.time()
    for name in names:
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config(name, out), sort_keys=False))
        codes.append(ablate.run(str(path)))
    print(f"\nKey study: designs {', '.join(names)}; wall {(time.time() - t0) / 60:.1f} min (exit codes {codes})\n")
    print("| design | arm | baseline mAP50-95 | arm mAP50-95 | A: mean ablation | identity | re-initialised | seeds "
          "| s / run |\n|---|---|---|---|---|---|---|---|---|")
    print("\n".join(line for name in names for line in rows(name, out)))
    return max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
