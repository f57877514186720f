"""Ablation runner: model variants × seeds trained with Ultralytics, one table with statistics, and plots.

    attn-yolo ablate                                          # quick default: synthetic-shapes, baseline vs CBAM
    attn-yolo ablate configs/ablation/coco128-quick.yaml
    attn-yolo ablate my.yaml out=runs/ablate/try2 epochs=5 seeds=[0,1]   # overrides: config keys or train args
    attn-yolo ablate my.yaml backend=ray ray_address=auto                # every run a Ray task on a cluster

Config (YAML). Input paths (``data``, ``model``, ``base``, ``train.pretrained``) resolve relative to the config
file's folder first, then as given (working directory, Ultralytics' built-in configs); ``out`` resolves relative to
the working directory, like Ultralytics' ``project``::

    data: synthetic                 # an Ultralytics dataset YAML, or `synthetic` (generated on first use, no download)
    variants:                       # the first one, or the one with `baseline: true`, is the baseline
      - {name: baseline, model: yolo11n.yaml}
      - {name: se, model: ../../models/yolo11n-se.yaml}                               # a model YAML
      - {name: cbam, base: yolo11n.yaml, module: CBAM, at: backbone, args: [16, 7]}   # an insert spec
    start: {epochs: 6}              # one shared start trained once into out/start (or a checkpoint: base.pt)
    seeds: {min: 3, max: 20, precision: 0.005}   # seeds chosen by the data; a list [0, 1, 2] is a fixed design
    reference: {model: yolo11s.yaml}              # optional yardstick arm: a known, larger change
    placebo: true                   # optional: per variant a Placebo arm (same parameters and place, no attention)
    train: {epochs: 2, imgsz: 192, batch: 16}    # passed to YOLO.train (any Ultralytics train argument)
    out: runs/ablate/my-study       # default runs/ablate/<config name>; the embedded default's: data-arms
    latency: {repeats: 50, warmup: 10}           # batch-1 forward timing of best.pt, median of `repeats`
    devices: [0, 1]                 # optional: run in parallel, one run per device at a time
    copy_data: auto                 # copy the dataset into out/data first: auto (if read-only) | true | false
    trust: false                    # true: load train.pretrained by a full unpickle (may run code); else weights-only
    backend: local                  # local (this host) | ray (one Ray task per run, placed by Ray's scheduler)
    ray_address: auto               # backend ray: auto, ray://host:port; absent: a local Ray instance for this run
    resources: {num_cpus: 4, num_gpus: 1}   # backend ray: per run
    bootstrap: {resamples: 2000, seed: 0}   # image resamples of the per-image bootstrap (seeded: reruns agree)
    new_blocks: {lr_mult: 1.0, gamma: 0.3, probe_steps: 0, probe_lr_mult: 10}  # how inserted blocks train; per arm
    treatment: {threshold: 1.0}             # mean-ablation effect needed for a verdict, in half-widths of its interval

Outputs in ``out``: ``runs/<variant>-seed<k>/`` (Ultralytics' run folder, plus ``result.json``: the run's record,
written atomically, and ``perimage.npz``: the final validation of best.pt image by image; an arm that adds blocks
also ``perimage-knockout.npz``, the same validation with its blocks replaced by the identity), ``results.csv`` (an
index of the records, rebuilt from the run folders as each run ends, with COCO AP small / medium / large: a damaged,
edited or deleted results.csv loses nothing), ``summary.md`` (first the attention check: whether what each arm's
blocks attend to matters to its model enough for a verdict, else "not tested"; mean ± std per variant; paired
differences to the
baseline with three intervals - seeds only (t), images only (bootstrap of the validation images) and hierarchical
(both), each at the joint level of the ablation's comparisons, the verdict from the hierarchical one (or the
group-sequential one with seeds chosen by the data), the power of the design, per-class Δ; "learned nothing" for
variants whose metrics are all 0), ``ablation.png`` (mAP50-95 vs GFLOPs), ``curves.png`` (validation mAP per
epoch), ``delta.png`` (Δ with its three intervals per variant and metric) and ``config.yaml`` (the resolved
config). Run folders without ``perimage.npz`` (made before it existed) are summarised with the seeds-only interval,
and summary.md says so. With Ultralytics' MLflow integration on, the runs are grouped in one MLflow experiment
named after the ablation (``attn_yolo.ablate.runs.tracking``).

Re-running the same command skips runs recorded ``ok`` with the same settings and redoes runs that are missing
(interrupted) or failed. Finished runs whose settings changed (model, data, train args) stop the ablation before any
work (exit 2, naming the keys and runs) unless ``redo=True``, which replaces each old run folder only after its new
run has finished; without ``out=``, overrides that change a run's result name their own folder
(``<out>-epochs1-imgsz96``). On the terminal: one line per run under a progress bar; each run's full Ultralytics
output is in ``runs/<run>/train.log`` (``verbose=True``: on the terminal too). Safety: one ablation at a
time per ``out`` (a lock; a second one exits 2 naming the holder's pid and host); an existing non-empty ``out`` the
runner did not create (no ``.attn-yolo-ablate`` marker) is refused before any work (exit 2) unless ``overwrite=True``,
which writes the ablation's own files there and deletes nothing else; the runner deletes or replaces only
folders it created (a marker file in each; anything else in the way: exit 2 naming it); SIGINT/SIGTERM stop every
worker and keep the finished runs. Exit code: 0 every run ok, 1 some run failed, 2 bad config or ``out`` in use or
in the way, 130 after Ctrl-C (SIGINT), 143 after SIGTERM.
"""

# The package, by job (a sub-package per job; the modules named as before):
#   config/      ablation (the embedded default, the declared keys, Ablation and Variant, loading, overrides),
#                checks (one check per key the declarations cannot hold), variants (checked, model dicts composed),
#                design (start, seeds as a rule, reference, placebo: checks and the arms they add), validate (the
#                whole config at once: cheap, nothing built → Ablation)
#   statistics/  spending and sequential (the sequential design and stopping rule), seqpower, weighted_ap (AP under
#                image weights), stats (mean ± std, paired differences, bootstrap, CIs, p-values: the only place),
#                treatment (the attention check), comparisons (paired Δ, the family and its joint level, the stopping
#                decision), verdicts (each arm's verdict computed once as data: every output reads it)
#   runs/        records, perimage, results, outdir, rerun, console, start, prepare, train, latency, tracking,
#                eta (the expected wall time: each run's cost, the schedule's rounds, the seeds the rule still needs),
#                scheduling, session, runner (the lock, dataset, and the steps: plan, resume, check, execute, report)
#   reports/     summary (summary.md as ordered sections), controls (check, positive control, yardstick, placebo
#                lines from the verdicts), plots (ablation.png, curves.png, delta.png), report (the report step)
#   here         the `attn-yolo ablate` command

from __future__ import annotations

from attn_yolo.ablate.config.ablation import (
    DEFAULT_CONFIG_YAML,
    Ablation,
    ConfigError,
    Variant,
    apply_overrides,
    load_config,
)
from attn_yolo.ablate.config.validate import validate
from attn_yolo.ablate.reports.report import write_report
from attn_yolo.ablate.runs.prepare import prepare
from attn_yolo.ablate.runs.records import RunSpec
from attn_yolo.ablate.runs.results import read_results, write_results
from attn_yolo.ablate.runs.runner import run, run_ablation
from attn_yolo.ablate.runs.train import NonFiniteLossError, execute_run
from attn_yolo.ablate.statistics.stats import paired_difference, summarize, verdict

__all__ = [
    "DEFAULT_CONFIG_YAML", "Ablation", "ConfigError", "NonFiniteLossError", "RunSpec", "Variant", "apply_overrides",
    "execute_run", "load_config", "main", "paired_difference", "prepare", "read_results", "run", "run_ablation",
    "summarize", "validate", "verdict", "write_report", "write_results",
]  # fmt: skip


def config_main(argv: list[str], doc: str, run_config) -> int:
    """``<tool> [config.yaml] [key=value ...]``: ``help`` prints ``doc``, else ``run_config(config or None, the
    key=value tokens)``."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(doc)
        return 0
    config = None
    if argv and "=" not in argv[0]:
        config, argv = argv[0], argv[1:]
    return run_config(config, argv)


def main(argv: list[str]) -> int:
    """``attn-yolo ablate [config.yaml] [key=value ...]``; no config runs the embedded synthetic-quick ablation."""
    return config_main(argv, __doc__, run)
