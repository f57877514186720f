"""What ``attn-yolo explain`` reads: an ablation's out folder, checked before any heavy work.

Config, runs, per-image records and the files it writes are checked; every problem is a one-line
``UsageError``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from attn_yolo.ablate.config.ablation import BOOTSTRAP_DEFAULTS
from attn_yolo.ablate.reports.plots import is_own_plot
from attn_yolo.ablate.runs.perimage import PERIMAGE_NAME, Record, RecordError, load_record
from attn_yolo.ablate.runs.results import collect_records
from attn_yolo.args import UsageError

TOOL = "attn-yolo explain"
REPORT_NAME = "explain.md"
REPORT_MARK = "<!-- written by attn-yolo explain -->"  # first line of explain.md: only such a file is replaced


def figure_name(variant: str) -> str:
    """The changed-images figure of one variant, in out: ``changed-<variant>.png``."""
    return f"changed-{variant}.png"


@dataclasses.dataclass
class Runs:
    """An ablation's finished runs, as explain uses them.

    Attributes:
        out: the ablation's out folder.
        variants: the variants to explain (config order), baseline excluded.
        baseline: the baseline's name.
        seeds: ``{variant: [paired seeds]}`` (both the variant's and the baseline's run ok, with a record).
        rows: ``{(variant, seed): run record}`` (``results.csv`` fields; ``run_dir``).
        records: ``{(variant, seed): perimage.Record}`` of every run used.
        imgsz: the runs' training image size (``train.imgsz``), pixels.
        resamples, boot_seed: the summary's image bootstrap (``bootstrap`` in config.yaml).
    """

    out: Path
    variants: list[str]
    baseline: str
    seeds: dict[str, list[int]]
    rows: dict
    records: dict
    imgsz: int
    resamples: int
    boot_seed: int


def _config(out: Path) -> dict:
    path = out / "config.yaml"
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"{TOOL}: {path}: no readable config.yaml ({type(e).__name__}); out= must be the out "
                         "folder of an attn-yolo ablate run") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("variants"), list):
        raise UsageError(f"{TOOL}: {path}: not an ablation's resolved config (no variants list)")
    return cfg


def _chosen(variants, names: list[str], baseline: str, out: Path) -> list[str]:
    """The variants= key checked: None/all → every non-baseline variant; else names from the config."""
    allowed = [n for n in names if n != baseline]
    if variants is None or variants == "all":
        return allowed
    given = variants if isinstance(variants, list | tuple) else str(variants).split(",")
    given = [str(v).strip() for v in given if str(v).strip()]
    bad = [v for v in given if v not in allowed]
    if bad or not given:
        raise UsageError(f"{TOOL}: variants={','.join(bad) or variants!r}: no such variant in {out} (the baseline "
                         f"{baseline!r} is what they are compared to); allowed: {', '.join(allowed) or '(none)'}")
    return [v for v in allowed if v in given]


def read_runs(out, variants=None) -> Runs:
    """The runs of the ablation in ``out`` that explain needs, their records loaded.

    Raises:
        UsageError: ``out`` is not a folder with an ablation's config.yaml and finished runs; a variant in
            ``variants`` (comma-separated names, a list, None or ``"all"``) is not there; a variant has no seed
            paired with the baseline; a run lacks its per-image record (or it holds no boxes).
    """
    out = Path(str(out)).expanduser()
    if not out.is_dir():
        raise UsageError(f"{TOOL}: out={str(out)!r}: no such folder; give the out= folder of an attn-yolo ablate run")
    cfg = _config(out)
    names = [str(v.get("name")) for v in cfg["variants"] if isinstance(v, dict)]
    baseline = next((n for v, n in zip(cfg["variants"], names) if v.get("baseline")), names[0] if names else "")
    rows, _ = collect_records(out)
    ok = {(r["variant"], int(r["seed"])): r for r in rows if r["status"] == "ok"}
    if not ok:
        raise UsageError(f"{TOOL}: out={str(out)!r} holds no finished runs (runs/<variant>-seed<k>/result.json "
                         "with status ok); run attn-yolo ablate first")
    names += sorted({v for v, _ in ok} - set(names))  # the design's arms (reference, <variant>-placebo) after them
    chosen = _chosen(variants, names, baseline, out)
    seeds = {v: sorted(s for (w, s) in ok if w == v and (baseline, s) in ok) for v in chosen}
    if variants is None or variants == "all":  # all: those that can be paired
        chosen = [v for v in chosen if seeds[v]] or chosen
    unpaired = [v for v in chosen if not seeds[v]]
    if unpaired or not chosen:
        raise UsageError(f"{TOOL}: variants {', '.join(unpaired) or '(none)'}: no finished run paired with a "
                         f"finished run of the baseline {baseline!r} of the same seed in {out}")
    records = {}
    for key in sorted({(m, s) for v in chosen for s in seeds[v] for m in (v, baseline)}):
        records[key] = _record(Path(ok[key]["run_dir"]))
    boot = {**BOOTSTRAP_DEFAULTS, **(cfg.get("bootstrap") or {})}
    return Runs(out=out, variants=chosen, baseline=baseline, seeds=seeds, rows=ok, records=records,
                imgsz=int((cfg.get("train") or {}).get("imgsz", 640)), resamples=int(boot["resamples"]),
                boot_seed=int(boot["seed"]))


def _record(run_dir: Path) -> Record:
    path = run_dir / PERIMAGE_NAME
    try:
        rec = load_record(path)
    except RecordError as e:
        raise UsageError(f"{TOOL}: {e}; explain needs every paired run's {PERIMAGE_NAME} (runs made before attn-yolo "
                         "kept them: rerun the ablation with redo=True)") from None
    if rec.pred_box is None or rec.gt_box is None:
        raise UsageError(f"{TOOL}: {path}: the per-image record holds no boxes; explain needs them")
    return rec


def is_own_report(path: Path) -> bool:
    """Whether ``path`` is an explain.md this tool wrote (its first line is ``REPORT_MARK``)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip() == REPORT_MARK
    except (OSError, UnicodeDecodeError):
        return False


def check_writes(out: Path, variants: list[str], overwrite: bool) -> list[Path]:
    """The files explain writes into ``out``; refuses, unless ``overwrite``, any of them that it did not write.

    Raises:
        UsageError: naming the files not written by explain, and ``overwrite=True``.
    """
    paths = [out / REPORT_NAME, *(out / figure_name(v) for v in variants)]
    foreign = [p for p in paths if (p.exists() or p.is_symlink())
               and not (is_own_report(p) if p.suffix == ".md" else is_own_plot(p))]
    if foreign and not overwrite:
        raise UsageError(f"{TOOL}: {', '.join(str(p) for p in foreign)} exist(s) and attn-yolo explain did not write "
                         "them; move them away, or pass overwrite=True to replace them")
    return paths
