"""The ``attn-yolo explain`` tool: where an ablation's Δ comes from, on which images, what attention did there.

Explain an ablation's Δ: where each variant gains or loses (TIDE's error types), on which images, and what its
attention did there — from ``attn-yolo ablate``'s outputs, without retraining.

    attn-yolo explain out=runs/ablate/synthetic-key-cbam              # every variant against the baseline
    attn-yolo explain out=runs/ablate/mine variants=cbam,se top=5     # these variants; 5 images each way

Writes into the ablation's ``out``: ``explain.md`` (per variant: Δ mAP50-95 decomposed by TIDE error type -
classification, localisation, both, duplicate, background, missed - each part with a hierarchical interval at the
summary's level, under the summary's verdict it explains, the parts summing to the summary's Δ; the same by object
size and by class; the images whose AP moved most each way over the seeds; each run's Δ beside its blocks' last-epoch
health and how knock-out and entropy moved in training) and ``changed-<variant>.png`` (those images: both models'
recorded detections, the baseline's and the variant's CAM, the variant's attention maps, same image and seed, on the
heatmap tool's fixed [0, 1] scale).

Nothing it did not write is replaced: an existing explain.md without its first-line mark, or a PNG without the
project's plot tag (``ablate.reports.plots.is_own_plot``), stops it (exit 2, naming the files) unless
``overwrite=True``. Bad input (no such out, no finished runs, runs without ``perimage.npz``, a variant that is not
there, an unknown key) exits 2 with one line, before any heavy work.

The package, bottom layer first (a module imports only modules above it):
    inputs      the out folder checked and read: config, runs, records, the files explain writes
    tide        TIDE's error types on a per-image record; the AP after each oracle fix, under image weights
    decompose   Δ mAP50-95 decomposed by error type (and size, class), paired by seed, hierarchical intervals
    changed     each image's paired AP change over the seeds; the images that moved most
    health      Δ beside the blocks' gates.csv
    figure      changed-<variant>.png (the heatmap tool's maps and CAMs)
    report      explain.md
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attn_yolo.ablate.runs.outdir import OutLock
from attn_yolo.args import Key, Schema
from attn_yolo.explain import decompose
from attn_yolo.explain.changed import changed_images
from attn_yolo.explain.health import health_rows
from attn_yolo.explain.inputs import REPORT_NAME, TOOL, Runs, check_writes, read_runs
from attn_yolo.progress import bar

__all__ = ["DEFAULTS", "SCHEMA", "Runs", "explain", "main", "read_runs"]

CAMS = ("eigencam", "gradcam", "none")
SCHEMA = Schema([
    Key("out", "path", help="the out folder of an attn-yolo ablate run",
        required=": the out folder of an attn-yolo ablate run (e.g. out=runs/ablate/synthetic-key-cbam)"),
    Key("variants", "any", help="variants to explain, comma-separated; default: all"),
    Key("top", "int", 3, help="images shown each way per variant", low=1),
    Key("cam", "choice", "eigencam", help="the CAM columns of the figure", choices=CAMS),
    Key("overwrite", "bool", False, help="replace files of explain's names it did not write"),
])
"""``attn-yolo explain`` keys."""
DEFAULTS = SCHEMA.defaults()

USAGE = f"""attn-yolo explain out=runs/ablate/<name> [variants=all|a,b] [top=3] [cam=eigencam|gradcam|none]
                  [overwrite=False]

{__doc__.split("The package")[0].strip()}"""


def explain(out, variants=None, top: int = 3, cam: str | None = "eigencam", overwrite: bool = False,
            figures: bool = True) -> dict:
    """Explain the ablation in ``out``; writes explain.md and (``figures``) changed-<variant>.png there.

    Args:
        out: the ablation's out folder. variants: names (comma-separated or a list), None = all.
        top: images each way per variant. cam: ``eigencam``, ``gradcam`` or None (no CAM columns).
        overwrite: replace files of explain's names it did not write.

    Returns:
        ``{"runs": Runs, "results": {variant: {"decomposition", "images": (up, down), "health", "figure",
        "no_figure", "disagree"}}, "text": explain.md, "paths": [written files]}``.

    Raises:
        UsageError: bad input (see ``inputs.read_runs``, ``inputs.check_writes``), or an ablation running in ``out``
            (its lock, ``ablate.runs.outdir.OutLock``), before any heavy work.
    """
    runs = read_runs(out, variants)
    check_writes(runs.out, runs.variants, overwrite)
    with OutLock(runs.out):  # no ablation writes into out meanwhile (nor a second explain)
        return _explain(runs, top, cam, figures)


def _explain(runs: Runs, top: int, cam: str | None, figures: bool) -> dict:
    """``explain`` once its input is checked and ``out`` locked."""
    from attn_yolo.ablate.reports.plots import save_figure
    from attn_yolo.ablate.statistics.verdicts import VERDICTS_NAME, read_verdicts
    from attn_yolo.explain.figure import best_weights, changed_figure
    from attn_yolo.explain.report import explain_markdown, figure_path
    from attn_yolo.files import atomic_write

    verdicts, level = read_verdicts(runs.out / VERDICTS_NAME) or ({}, 0.95)  # the summary's, computed once
    first = next(iter(runs.records.values()))
    wt = decompose.resample_weights(first.n_images, runs.resamples, runs.boot_seed)
    with ThreadPoolExecutor(min(2, os.cpu_count() or 1)) as ex:
        keys = list(runs.records)
        done = ex.map(lambda k: decompose.fixed_maps(runs.records[k], wt), keys)
        maps = dict(zip(keys, bar(done, "explain: errors of each run", total=len(keys), unit="run")))
    results, written = {}, []
    for v in bar(runs.variants, "explain: images and figures", unit="variant"):
        seeds = runs.seeds[v]
        dec = decompose.decompose(maps, v, runs.baseline, seeds, level)
        up, down = changed_images(runs.records, v, runs.baseline, seeds, top)
        res = {"decomposition": dec, "images": (up, down), "figure": None, "no_figure": "",
               "health": health_rows(runs, v, dict(zip(seeds, dec["per_seed"]["total"]))),
               "disagree": sum(maps[(m, s)]["errors"].disagree for s in seeds for m in (v, runs.baseline))}
        missing = [str(best_weights(runs.rows[(m, im.seed)])) for im in up + down for m in (v, runs.baseline)
                   if not best_weights(runs.rows[(m, im.seed)]).is_file()]
        if not figures:
            res["no_figure"] = "figures=False"
        elif missing:
            res["no_figure"] = f"no checkpoint {missing[0]}"
        elif not up + down:
            res["no_figure"] = "no image changed"
        else:
            fig = changed_figure(runs, v, up + down, None if str(cam).lower() == "none" else cam)
            save_figure(fig, figure_path(runs, v))
            res["figure"] = figure_path(runs, v).name
            written.append(figure_path(runs, v))
        results[v] = res
    text = explain_markdown(runs, results, first.names, verdicts, level)
    atomic_write(runs.out / REPORT_NAME, lambda p: Path(p).write_text(text))
    return {"runs": runs, "results": results, "text": text, "paths": [runs.out / REPORT_NAME, *written]}


def largest_part(parts: dict) -> str:
    """The part of a Δ's decomposition with the largest |mean|: one of the six TIDE error types, or their
    ``interaction`` (what no single type's fix attributes), whichever is larger."""
    return max((*decompose.PARTS[:6], "interaction"), key=lambda k: abs(parts[k]["mean"]))


def main(argv: list[str]) -> int:
    """``attn-yolo explain out=... [key=value ...]``; returns an exit code."""
    if argv and argv[0] in ("help", "-h", "--help"):
        print(USAGE)
        return 0
    a = SCHEMA.parse(argv, "explain")
    res = explain(a["out"], a["variants"], a["top"], str(a["cam"]).lower(), a["overwrite"])
    for v, r in res["results"].items():
        parts = r["decomposition"]["parts"]
        big = largest_part(parts)
        name = "interaction (not one error type's)" if big == "interaction" else big
        print(f"{TOOL}: {v}: Δ mAP50-95 {parts['total']['mean']:+.4f}; largest part: {name} "
              f"{parts[big]['mean']:+.4f}")
    print(f"{TOOL}: wrote {', '.join(str(p) for p in res['paths'])}")
    return 0
