"""The ablation's report step: summary.md (``reports.summary``), verdicts.json and the plots written beside it.

The plots themselves (ablation.png, curves.png, delta.png) are drawn by ``attn_yolo.ablate.reports.plots``.
"""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.reports.plots import is_own_plot, plot_ablation, plot_curves, plot_delta
from attn_yolo.ablate.reports.summary import Results, lead_markdown, results, summary_markdown
from attn_yolo.ablate.runs import latency
from attn_yolo.ablate.runs.perimage import PERIMAGE_NAME, RecordError, load_record
from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.statistics.stats import PRIMARY, bootstrap_compare, learned_nothing, resample_records, summarize
from attn_yolo.ablate.statistics.verdicts import VERDICTS_NAME, write_verdicts
from attn_yolo.files import atomic_write


def analyze(ab: Ablation, rows: list[dict], cache: dict | None = None) -> dict:
    """The per-image bootstrap of an ablation: load the runs' records, resample, compare to the baseline.

    ``cache``: a dict kept between calls (the seed rounds of a sequential ablation), so that runs already resampled
    are not resampled again (``stats.resample_records``).

    Returns:
        ``{"compare": stats.bootstrap_compare(...) for the variants it could run on, "why": {variant: reason for
        seeds-only intervals}, "nothing": variants that learned nothing, "names": class names, "n_images": int}``.
    """
    names = [v.name for v in ab.variants]
    base = ab.baseline
    ok = {(r["variant"], r["seed"]): r for r in rows if r["status"] == "ok"}
    out = {"compare": {}, "why": {}, "nothing": {v for v in names if learned_nothing(rows, v)}, "names": [],
           "n_images": 0}  # fmt: skip
    records, missing = {}, {}
    for key, r in ok.items():
        try:
            records[key] = rec = load_record(Path(r["run_dir"]) / PERIMAGE_NAME)
            rec.pred_box = rec.gt_box = None  # not needed here (the size statuses are in the record)
        except RecordError as e:
            missing[key] = str(e)
    todo = []
    for v in names:
        if v == base or v in out["nothing"] or base in out["nothing"]:
            continue
        pairs = [k for s in ab.seeds if (v, s) in ok and (base, s) in ok for k in ((v, s), (base, s))]
        if not pairs:
            continue
        lacking = sorted({Path(ok[k]["run_dir"]).name for k in pairs if k in missing})
        if lacking:
            more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
            out["why"][v] = (f"no per-image record in run folder(s) {', '.join(lacking[:3])}{more} (made before "
                             "attn-yolo kept them, or writing it failed: see perimage-error.txt there)")
        else:
            todo.append(v)
    if not todo:
        return out
    keys = {k for v in todo for s in ab.seeds if (v, s) in ok and (base, s) in ok for k in ((v, s), (base, s))}
    try:
        resampled = resample_records({k: records[k] for k in sorted(keys)}, ab.bootstrap["resamples"],
                                     ab.bootstrap["seed"], cache=cache)
    except ValueError as e:
        out["why"] |= {v: f"the runs' per-image records cannot be paired: {e}" for v in todo}
        return out
    first = records[next(iter(sorted(keys)))]
    out |= {"compare": bootstrap_compare(resampled, [base, *todo], base, ab.seeds, comparisons.joint_level(ab)),
            "names": first.names,
            "n_images": first.n_images}
    return out


def tradeoff_points(r: Results) -> list[dict]:
    """Per arm, what ``plots.plot_ablation`` draws: its Δ mAP50-95 with the interval that decides its verdict (kind
    and level), its extra GFLOPs in %, its latency Δ (where compared), its status and its words; an arm without a
    comparison (learned nothing, n/a) or not tested carries its status and no interval."""
    ab, g = r.ab, {v: r.stats["variants"][v]["gflops"] for v in r.stats["variants"]}
    points = []
    for v, x in r.verdicts.items():
        pct = 100 * (g[v] / g[ab.baseline] - 1) if g.get(v) and g.get(ab.baseline) else None
        lat = (r.timing or {}).get("diffs", {}).get(v)
        lat = (lat["mean"], lat["lo"], lat["hi"]) if lat is not None and lat["verdict"] is not None and \
            not lat["words"].startswith("not compared") and math.isfinite(lat["lo"]) else None
        iv = x.interval
        points.append({"variant": v, "delta": x.mean, "lo": iv.lo if iv else math.nan, "hi": iv.hi if iv else math.nan,
                       "gflops_pct": pct, "latency": lat, "interval": iv.kind if iv else "",
                       "level": iv.level if iv else math.nan, "status": x.status, "words": x.label})
    return points


def _plots(r: Results) -> None:
    """ablation.png and curves.png (with ok runs), delta.png (with image-level intervals) from the verdicts."""
    ab, rows, names = r.ab, r.rows, [v.name for v in r.ab.variants]
    if any(x["status"] == "ok" for x in rows):
        load = (r.timing or {}).get("load", {})
        note = ("latency not drawn: not timed (no best.pt of the baseline and an arm)" if not r.timing else
                f"latency not drawn: the machine was busy during the timing (other processes used "
                f"{load['others_cores']:.1f} of {load['cores']} cores)" if load.get("busy") else "")
        plot_ablation(ab.out / "ablation.png", tradeoff_points(r), ab.baseline, ab.imgsz, note)
        start = Path(ab.start.folder) / "results.csv" if ab.start is not None and ab.start.kind == "recipe" else None
        plot_curves(ab.out / "curves.png", rows, names, start)
    compared = {v: c for v, c in r.boot["compare"].items() if PRIMARY in c}
    if compared:
        plot_delta(ab.out / "delta.png", compared, ab.baseline, comparisons.joint_level(ab), r.verdicts)
    elif is_own_plot(ab.out / "delta.png"):  # an earlier report's plot would no longer match this summary
        (ab.out / "delta.png").unlink()  # (a delta.png the runner did not write is left alone)


def write_report(ab: Ablation, rows: list[dict], wall_s: float | None = None) -> tuple[str, str]:
    """Write summary.md, verdicts.json, ablation.png, curves.png and (with per-image records) delta.png from the
    planned runs' rows (and ``out/latency.json``, ``latency.measure``'s timing); every output reads the verdicts
    computed once (``verdicts.all_verdicts``). Returns the summary text and its lead (what the terminal shows)."""
    names = [v.name for v in ab.variants]
    stats = summarize(rows, names, ab.baseline, comparisons.joint_level(ab))
    r = results(ab, rows, stats, analyze(ab, rows), wall_s, latency.read(ab.out))
    text = summary_markdown(r)
    atomic_write(ab.out / "summary.md", lambda p: Path(p).write_text(text))
    write_verdicts(ab.out / VERDICTS_NAME, ab, r.verdicts)
    _plots(r)
    return text, lead_markdown(r)
