"""Ablation runner: model variants × seeds trained with Ultralytics, one table with statistics, and plots.

    attn-yolo ablate                                          # quick default: synthetic-shapes, baseline vs CBAM
    attn-yolo ablate configs/ablation/coco128-quick.yaml
    attn-yolo ablate my.yaml out=runs/ablate/try2 epochs=5 seeds=[0,1]   # overrides: config keys or train args

Config (YAML). Input paths (``data``, ``model``, ``base``, ``train.pretrained``) resolve relative to the config
file's folder first, then as given (working directory, Ultralytics' built-in configs); ``out`` resolves relative to
the working directory, like Ultralytics' ``project``::

    data: synthetic                 # an Ultralytics dataset YAML, or `synthetic` (generated on first use, no download)
    variants:                       # the first one, or the one with `baseline: true`, is the baseline
      - {name: baseline, model: yolo11n.yaml}
      - {name: se, model: ../../models/yolo11n-se.yaml}                               # a model YAML
      - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}   # an insert spec
    seeds: [0, 1, 2]
    train: {epochs: 10, imgsz: 192, batch: 16}   # passed to YOLO.train (any Ultralytics train argument)
    out: runs/ablate/synthetic-quick
    latency: {repeats: 50, warmup: 10}           # batch-1 forward timing of best.pt, median of `repeats`
    devices: [0, 1]                 # optional: run in parallel, one run per device at a time
    copy_data: auto                 # copy the dataset into out/data first: auto (if read-only) | true | false
    bootstrap: {resamples: 2000, seed: 0}   # image resamples of the per-image bootstrap (seeded: reruns agree)

Outputs in ``out``: ``results.csv`` (one row per run, rewritten as each run ends; with COCO AP small / medium /
large), ``summary.md`` (mean ± std per variant; paired differences to the baseline with three 95% intervals - seeds
only (t), images only (bootstrap of the validation images) and hierarchical (both), the verdict from the
hierarchical one, the power of the design, per-class Δ; "learned nothing" for variants whose metrics are all 0),
``ablation.png`` (mAP50-95 vs GFLOPs), ``curves.png`` (validation mAP per epoch), ``delta.png`` (Δ with its three
intervals per variant and metric), ``config.yaml`` (the resolved config) and ``runs/<variant>-seed<k>/``
(Ultralytics' run folders, each with ``perimage.npz``: the final validation of best.pt image by image). Run folders
without ``perimage.npz`` (made before it existed) are summarised with the seeds-only interval, and summary.md says so.

Re-running the same command skips runs recorded ``ok`` in results.csv with the same settings; it redoes runs that are
missing (interrupted), that failed, or whose settings changed (model, data, train args or seed). The exit code is 0
when every run is ok, 1 when any failed, 130 after Ctrl-C and 2 for a bad config.
"""

# The package, bottom layer first (a module imports only modules listed above it):
#   config       the embedded default, loading, overrides, validation → Ablation
#   records      one run: RunSpec (what it trains) and its record (the metrics it yields)
#   perimage     the per-image record of a run's final validation (capture, perimage.npz, recomputed mAP)
#   weighted_ap  mAP, per-class AP and size AP of a per-image record under image weights (bootstrap resamples)
#   results      results.csv: the index of every run's record
#   stats        mean ± std, paired differences, bootstrap, CIs, p-values, power, verdicts (the only place for them)
#   report       summary.md, ablation.png, curves.png, delta.png
#   train        one training run → its record (and its perimage.npz)
#   runner       dataset preparation, the plan of runs, scheduling over devices, resuming
#   here         the `attn-yolo ablate` command

from __future__ import annotations

from attn_yolo.ablate.config import (
    DEFAULT_CONFIG_YAML,
    Ablation,
    ConfigError,
    Variant,
    apply_overrides,
    load_config,
    validate,
)
from attn_yolo.ablate.records import RunSpec
from attn_yolo.ablate.report import write_report
from attn_yolo.ablate.results import read_results, write_results
from attn_yolo.ablate.runner import run, run_ablation
from attn_yolo.ablate.stats import paired_difference, summarize, verdict
from attn_yolo.ablate.train import NonFiniteLossError, execute_run

__all__ = [
    "DEFAULT_CONFIG_YAML", "Ablation", "ConfigError", "NonFiniteLossError", "RunSpec", "Variant", "apply_overrides",
    "execute_run", "load_config", "main", "paired_difference", "read_results", "run", "run_ablation", "summarize",
    "validate", "verdict", "write_report", "write_results",
]  # fmt: skip


def main(argv: list[str]) -> int:
    """``attn-yolo ablate [config.yaml] [key=value ...]``; no config runs the embedded synthetic-quick ablation."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(__doc__)
        return 0
    config = None
    if argv and "=" not in argv[0]:
        config, argv = argv[0], argv[1:]
    return run(config, argv)
