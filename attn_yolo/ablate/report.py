"""The ablation report: summary.md (setup, verdicts with their intervals, tables), and the plots written beside it.

The plots themselves (ablation.png, curves.png, delta.png) are drawn by ``attn_yolo.ablate.plots``.
"""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.ablate import control, latency, readings, seqpower
from attn_yolo.ablate.config import Ablation
from attn_yolo.ablate.outdir import shown
from attn_yolo.ablate.perimage import PERIMAGE_NAME, RecordError, load_record
from attn_yolo.ablate.plots import arm_epochs, is_own_plot, plot_ablation, plot_curves, plot_delta
from attn_yolo.ablate.sequential import kind
from attn_yolo.ablate.start import summary_line
from attn_yolo.ablate.stats import (
    CONFIDENCE,
    METRICS,
    POWER,
    PRIMARY,
    TARGET_DELTA,
    bootstrap_compare,
    detectable_delta,
    detectable_from_t,
    learned_nothing,
    resample_records,
    seeds_needed,
    summarize,
)
from attn_yolo.checkpoint import atomic_write
from attn_yolo.health import health_section


def _fmt(x, dec: int, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{dec}f}" if sign else f"{x:.{dec}f}"


def duration(s: float) -> str:
    """Seconds as ``1m05s`` (or ``2h03m`` from an hour on), for the summary and the ETA."""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


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
    out |= {"compare": bootstrap_compare(resampled, [base, *todo], base, ab.seeds, readings.joint_level(ab)),
            "names": first.names,
            "n_images": first.n_images}
    return out


def verdict_words(verdict: str, lo: float, hi: float, detectable: float) -> str:
    """A verdict as the summary words it. ``better`` / ``worse`` stand; an interval that contains 0 reads
    ``no difference beyond ±w`` when it lies within ±``TARGET_DELTA`` (w: its larger bound in absolute value, rounded
    up at the 4th decimal), else ``inconclusive: this design detects only |Δ| ≥ X`` (X: the smallest Δ the design
    detects with 80 % power, ``stats.detectable_delta``), never a bare "no detectable difference"."""
    if verdict != "no detectable difference" or not (math.isfinite(lo) and math.isfinite(hi)):
        return verdict
    w = max(abs(lo), abs(hi))
    if w <= TARGET_DELTA:
        return f"no difference beyond ±{math.ceil(w * 1e4 - 1e-9) / 1e4:.4f}"
    if math.isfinite(detectable):
        return f"inconclusive: this design detects only |Δ| ≥ {detectable:.4f}"
    return f"inconclusive: the interval spans [{lo:+.4f}, {hi:+.4f}]"


def _ci(lo, hi, dec: int) -> str:
    return "n/a" if lo is None or math.isnan(lo) else f"[{_fmt(lo, dec, True)}, {_fmt(hi, dec, True)}]"


def _cost(b: dict, s: dict, timing: dict | None = None, arm: str = "") -> list[str]:
    cost = []
    if b["params"] and s["params"]:
        cost.append(f"params {100 * (s['params'] / b['params'] - 1):+.2f}%")
    if b["gflops"] and s["gflops"]:
        cost.append(f"GFLOPs {100 * (s['gflops'] / b['gflops'] - 1):+.2f}%")
    if words := latency.cost_words(timing, arm):  # timed apart from training (attn_yolo.ablate.latency)
        cost.append(words)
    return cost


def exploratory(c: dict | None, d: dict) -> str:
    """The reading of a secondary metric's interval (``c``: its bootstrap comparison, else ``d``: seeds only): where
    it lies, marked exploratory (uncorrected for the metrics beside the primary one), never a verdict."""
    lo, hi = (c["hier"]["lo"], c["hier"]["hi"]) if c is not None else (d["lo"], d["hi"])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "exploratory: n/a"
    where = "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"
    return f"exploratory: interval {where}"


def power_line(ab: Ablation, v: str, h: dict, seq: dict | None, n_images: int) -> tuple[str, float]:
    """The power line of arm ``v`` for the interval that decides its verdict (the joint sequential one with seeds
    chosen by the data, else the hierarchical one at the joint level), and the smallest |Δ| it detects with
    ``POWER``: ``(line, detectable)``. With seeds chosen by the data both figures are the sequential design's
    (``seqpower.detectable``, ``seqpower.seeds_for``), never the fixed-n interval's."""
    level = readings.joint_level(ab)
    sv, tv, n = h["seed_var"], h["test_var"], h["n"]
    sd = f"(SD of Δ over seeds {math.sqrt(sv):.4f}, of the validation set's common part {math.sqrt(tv):.4f})"
    if seq is not None:
        rule = readings.joint_rule(ab)
        mde = seqpower.detectable(sv, n, rule, tv, POWER)
        need = seqpower.seeds_for(TARGET_DELTA, sv, rule, tv, POWER)
        half = (seq["hi"] - seq["lo"]) / 2
        hw = f"resolves ±{half:.4f}" if math.isfinite(half) else "is unbounded"
        det = f"detects |Δ| >= {mde:.4f}" if math.isfinite(mde) else "detects no Δ yet (unbounded)"
        need = (f"Δ = {TARGET_DELTA} needs {need} paired seeds (this design fitted to seeds.max {need}; now "
                f"{ab.seed_rule.max})" if need else
                f"Δ = {TARGET_DELTA} is out of reach by adding seeds: use more validation images")
        return (f"- `{v}`: with {n} seeds and {n_images} images the interval that decides ({kind(rule)}, at "
                f"{100 * level:.3g}%) {hw} and {det} with {int(POWER * 100)}% power; {need} {sd}", mde)
    mde = detectable_delta(sv, tv, n, 1 - level)
    need = seeds_needed(sv, tv, TARGET_DELTA)
    need = (f"Δ = {TARGET_DELTA} needs {need} paired seeds" if need else f"Δ = {TARGET_DELTA} is out of reach by "
            "adding seeds, the validation set's own noise is too large: use more validation images")
    return (f"- `{v}`: with {n} seeds and {n_images} images this design detects |Δ| >= {_fmt(mde, 4)} with "
            f"{int(POWER * 100)}% power (the hierarchical interval that decides, at {100 * level:.3g}%); {need} "
            f"{sd}", mde)


def summary_markdown(ab: Ablation, rows: list[dict], stats: dict, boot: dict | None = None,
                     wall_s: float | None = None, timing: dict | None = None) -> str:
    """The summary.md text: first the verdicts with their three intervals and the power of the design, then the
    setup, per-variant table (mean ± std), paired differences, per-class movers, how the intervals are made, failures.

    Args:
        ab: the ablation.
        rows: the planned runs' records.
        stats: ``stats.summarize`` of ``rows``.
        boot: ``analyze`` of ``rows`` (None: seeds-only intervals everywhere).
        wall_s: wall time of this invocation.
        timing: ``latency.measure``'s result (None: latency not timed).
    """
    boot = boot or {"compare": {}, "why": {}, "nothing": set(), "names": [], "n_images": 0}
    names = [v.name for v in ab.variants]
    cmp_, conf = boot["compare"], int(CONFIDENCE * 100)
    each = f"{100 * readings.joint_level(ab):.3g}"  # each interval's level (Bonferroni over the comparisons)
    seq_kind = kind(ab.seed_rule) if ab.seed_rule is not None else ""
    tr = ", ".join(f"{k}={v}" for k, v in ab.train.items())
    n_ok = sum(r["status"] == "ok" for r in rows)
    setup = [
        f"- data: `{shown(ab.data)}` ({ab.nc} classes); seeds: {', '.join(map(str, ab.seeds))}; baseline: "
        f"`{ab.baseline}`",
        f"- train: {tr or 'Ultralytics defaults'}; GFLOPs and latency at imgsz {ab.imgsz}; out: "
        f"`{shown(ab.out)}`",
        f"- runs: {n_ok} ok, {len(rows) - n_ok} failed, {len(names) * len(ab.seeds) - len(rows)} not run"
        + (f"; wall time {duration(wall_s)} (this invocation)" if wall_s is not None else "")
        + f"; training time, sum over runs: {duration(sum(r['train_time_s'] or 0 for r in rows))}",
    ]
    setup.append(summary_line(ab))
    dec = readings.decision(ab, rows, boot)
    if dec is not None:
        setup.append(f"- seeds chosen by the data: {dec['text']}")
    if cmp_:
        setup.append(f"- image bootstrap: {ab.bootstrap['resamples']} resamples (seed {ab.bootstrap['seed']}) of the "
                     f"{boot['n_images']} validation images, the same resamples for every run")
    lines = [f"# Ablation `{ab.name}`", "", *control.positive_control(ab, rows, boot, dec),
             *readings.treatment_lines(ab, rows, boot, dec),
             f"## Verdict: mAP50-95 vs `{ab.baseline}`", "",
             (f"Joint verdicts: {readings.joint_words(ab)}; an arm whose blocks failed the attention check is "
              "**not tested**, whatever its interval. "
              f"Verdicts use the hierarchical interval (each at {each}%), which accounts for training noise (seeds) "
              "and for the "
              "finite validation set (images); the seeds-only and images-only intervals are shown beside it. Where "
              "runs have no per-image record, the seeds-only t-interval decides (see Intervals). An interval that "
              f"contains 0 reads \"no difference beyond ±w\" when it lies within ±{TARGET_DELTA}, else "
              f"\"inconclusive\" with the smallest |Δ| the design detects ({int(POWER * 100)}% power).")
             + (f" Seeds were chosen by the data: the verdict is the {seq_kind} interval's, valid at whichever "
                "look the rule stopped; the fixed-n intervals beside it are not (see Seeds chosen by the data)."
                if dec is not None else ""), ""]
    power, words_of = [], {}
    joint = "joint " if readings.family_size(ab) > 1 else ""
    for v in names:
        if v == ab.baseline:
            continue
        d = stats["diffs"][v][PRIMARY]
        b, s = stats["variants"][ab.baseline], stats["variants"][v]
        if d["n"] < 2:
            mean = f" (Δ {_fmt(d['mean'], 4, True)} from 1 seed)" if d["n"] == 1 else ""
            lines.append(f"- **{v}**: **n/a**: {d['n']} seed(s) with ok runs of both, needs >= 2{mean}")
            continue
        if v in boot["nothing"]:
            lines.append(f"- **{v}**: **learned nothing**: P, R, mAP50 and mAP50-95 are 0 in every run; no comparison")
            continue
        if ab.baseline in boot["nothing"]:
            lines.append(f"- **{v}**: **n/a**: the baseline `{ab.baseline}` learned nothing (all its metrics are 0); "
                         "no comparison")
            continue
        cost = _cost(b, s, timing, v)
        cost = f"; cost: {', '.join(cost)}" if cost else ""
        c = cmp_.get(v, {}).get(PRIMARY)
        seq = dec["variants"].get(v) if dec is not None else None
        t = readings.treated(ab, rows, v, readings.reading(ab, rows, boot, v, dec))
        untested = readings.not_tested(t) if t["status"] == "failed" else None
        if c is None and seq is not None:
            words = untested or verdict_words(seq["verdict"], seq["lo"], seq["hi"], math.nan)
            words_of[v] = "not tested" if untested else words
            lines.append(f"- **{v}**: **{words}** (Δ {_fmt(d['mean'], 4, True)}, {joint}{seq_kind} {conf}% CI "
                         f"{_ci(seq['lo'], seq['hi'], 4)}, n = {d['n']} paired seeds; no image-level interval: "
                         f"{boot['why'].get(v, 'no per-image records')}){cost}")
            continue
        if c is None:
            words = untested or verdict_words(d["verdict"], d["lo"], d["hi"],
                                             detectable_from_t(d["lo"], d["hi"], d["n"]))
            words_of[v] = "not tested" if untested else words
            lines.append(f"- **{v}**: **{words}** (Δ {_fmt(d['mean'], 4, True)}, seeds-only {conf}% CI "
                         f"{_ci(d['lo'], d['hi'], 4)}, p = {_fmt(d['p'], 3)}, n = {d['n']} paired seeds; no "
                         f"image-level interval: {boot['why'].get(v, 'no per-image records')}){cost}")
            continue
        h = c["hier"]
        line, mde = power_line(ab, v, h, seq, boot["n_images"])
        power.append(line)
        words = untested or (verdict_words(seq["verdict"], seq["lo"], seq["hi"], mde) if seq is not None else
                             verdict_words(c["verdict"], h["lo"], h["hi"], mde))
        words_of[v] = "not tested" if untested else words
        lines.append(
            (f"- **{v}**: **{words}** "
             f"(Δ {_fmt(h['mean'], 4, True)}; {joint}{seq_kind} {conf}% CI "
             f"{_ci(seq['lo'], seq['hi'], 4)}; fixed-n hierarchical {_ci(h['lo'], h['hi'], 4)}, p = "
             f"{_fmt(h['p'], 3)}; seeds only {_ci(c['t']['lo'], c['t']['hi'], 4)}; images only {_ci(*c['image'], 4)}; "
             f"n = {h['n']} paired seeds){cost}") if seq is not None else
            f"- **{v}**: **{words}** (Δ {_fmt(h['mean'], 4, True)}; "
            f"{joint}hierarchical {conf}% CI "
            f"{_ci(h['lo'], h['hi'], 4)}, p = {_fmt(h['p'], 3)}; seeds only {_ci(c['t']['lo'], c['t']['hi'], 4)}; "
            f"images only {_ci(*c['image'], 4)}; n = {h['n']} paired seeds){cost}"
        )
    lines += readings.stopping(ab, dec) + readings.yardstick(ab, rows, stats, boot, dec)
    lines += readings.placebo(ab, rows, stats, boot, dec)
    if power:
        lines += ["", f"Power (mAP50-95, two-sided {100 - conf}% level, from the measured seed and image variances):",
                  ""] + power
    lines += ["", "## Setup", "", *setup]
    head = ["variant", "ok runs", "params (M)", "GFLOPs"] + [label for _, label, _, _ in METRICS]
    lines += ["", "## Results (mean ± std over seeds)", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)]  # fmt: skip
    for v in names:
        s = stats["variants"][v]
        label = f"{v} (baseline)" if v == ab.baseline and "baseline" not in v.lower() else v
        cells = [label, f"{s['n']}/{len(ab.seeds)}",
                 _fmt(s["params"] / 1e6 if s["params"] else None, 3), _fmt(s["gflops"], 3)]  # fmt: skip
        for key, _, dec, _ in METRICS:
            mean, sd = s[key]
            cells.append(_fmt(mean, dec) + ("" if math.isnan(sd) else f" ± {_fmt(sd, dec)}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Difference to `{ab.baseline}` (paired by seed, intervals each at {each}%)",
        "",
        "| variant | metric | Δ mean | seeds only (t) | images only | hierarchical | p | n | verdict (mAP50-95 only) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in names:
        if v == ab.baseline or v in boot["nothing"] or ab.baseline in boot["nothing"]:
            continue
        for key, label, dec, _ in METRICS:
            if key not in stats["diffs"][v]:
                continue
            d = stats["diffs"][v][key]
            if d["n"] == 0 or math.isnan(d["mean"]):
                continue
            c = cmp_.get(v, {}).get(key)
            # one vocabulary: the primary metric's row carries the headline's words, the others are exploratory
            reading = words_of.get(v, d["verdict"]) if key == PRIMARY else exploratory(c, d)
            if c is None:
                cells = [_fmt(d["mean"], dec, True), _ci(d["lo"], d["hi"], dec), "—", "—", _fmt(d["p"], 3), d["n"],
                         reading]  # fmt: skip
            else:
                h = c["hier"]
                cells = [_fmt(h["mean"], dec, True), _ci(c["t"]["lo"], c["t"]["hi"], dec), _ci(*c["image"], dec),
                         _ci(h["lo"], h["hi"], dec), _fmt(h["p"], 3), h["n"], reading]  # fmt: skip
            lines.append(f"| {v} | {label} | " + " | ".join(map(str, cells)) + " |")
    lines += ["", (f"Only mAP50-95 carries a verdict (the headline's words). The other metrics are exploratory: their "
                   f"intervals are not corrected for the {len(METRICS) - 1} metrics read beside it, so by chance alone "
                   "about one in twenty lies off 0; a finding there needs an ablation of its own.")]
    lines += latency.summary_lines(ab.baseline, timing)
    per_seed = [(v, c) for v, c in cmp_.items() if PRIMARY in c]
    if per_seed:
        lines += ["", "Images-only intervals per seed (mAP50-95):", "", "| variant | seed | Δ | images only |",
                  "|---|---|---|---|"]
        for v, c in per_seed:
            for seed, delta, (lo, hi) in zip(c["seeds"], c[PRIMARY]["deltas"], c[PRIMARY]["image_seed"]):
                lines.append(f"| {v} | {seed} | {_fmt(delta, 4, True)} | {_ci(lo, hi, 4)} |")
    movers = _class_movers(cmp_, boot["names"])
    if movers:
        lines += ["", (f"## Per-class Δ AP50-95 (hierarchical intervals, each at {each}%; the {N_MOVERS} classes "
                       "that moved "
                       "most each way)"), "", "| variant | class | Δ mean | hierarchical | variant AP | baseline AP |",
                  "|---|---|---|---|---|---|"]
        lines += movers
    lines += [
        "",
        "## Intervals",
        "",
        ("- seeds only: t-interval of the paired per-seed Δ (t with n − 1 degrees of freedom); ignores that the "
         "validation set is a sample of images."),
        (f"- images only: paired bootstrap of the validation images ({ab.bootstrap['resamples']} resamples, seed "
         f"{ab.bootstrap['seed']}): each resample is drawn once and used for the variant, the baseline and every "
         "seed; per seed, and pooled (Δ averaged over seeds); ignores training noise."),
        ("- hierarchical: SE² = (variance of Δ over seeds)/n + the test-set variance common to all seeds (from the "
         "shared image resamples), t quantile with Welch–Satterthwaite degrees of freedom, never narrower than the "
         "seeds-only interval; it accounts for both. Δ = variant − baseline, per seed."),
        ("- AP small / medium / large: COCO AP50-95 over boxes of area < 32², 32²–96², > 96² px (original image), "
         "each prediction matched by pycocotools within the size range; per-image records in "
         f"`runs/<run>/{PERIMAGE_NAME}`."),
    ]
    for v, why in boot["why"].items():
        lines.append(f"- `{v}`: seeds-only t-interval only: {why}.")
    verdicts = {v: "learned nothing" if v in boot["nothing"] else words_of.get(v) or
                (cmp_.get(v, {}).get(PRIMARY) or stats["diffs"][v][PRIMARY]).get("verdict", "n/a")
                for v in names if v != ab.baseline}  # the headline's words
    lines += health_section(names, rows, {**verdicts, ab.baseline: "baseline"})
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        lines += ["", "## Failed runs", "", "| variant | seed | error | run folder |", "|---|---|---|---|"]
        lines += [f"| {r['variant']} | {r['seed']} | {r['error'].replace('|', '/')} | `{shown(r['run_dir'])}` |"
                  for r in failed]
    lines += ["", "Plots: `ablation.png` (Δ mAP50-95 with the interval that decides vs the extra GFLOPs and latency), "
              + curves_caption(ab, rows)
              + (", `delta.png` (Δ with its intervals per variant and metric; the one that decides, "
                 + (seq_kind if ab.seed_rule is not None else "hierarchical") + ", drawn thick)"
                 if cmp_ else "")
              + "; every run: `results.csv`.", ""]
    return "\n".join(lines)


N_MOVERS = 5


def _class_movers(cmp_: dict, names: list[str]) -> list[str]:
    lines = []
    for v, c in cmp_.items():
        classes = sorted(c.get("classes", {}).items(), key=lambda kv: kv[1]["mean"])
        down = [kv for kv in classes[:N_MOVERS] if kv[1]["mean"] < 0]
        up = [kv for kv in classes[::-1][:N_MOVERS] if kv[1]["mean"] > 0]
        for k, h in up + down:
            name = names[k] if k < len(names) else str(k)
            lines.append(f"| {v} | {name} | {_fmt(h['mean'], 4, True)} | {_ci(h['lo'], h['hi'], 4)} | "
                         f"{_fmt(h['variant'], 4)} | {_fmt(h['baseline'], 4)} |")
    return lines


def tradeoff_points(ab: Ablation, rows: list[dict], stats: dict, boot: dict, timing: dict | None) -> list[dict]:
    """Per arm compared with the baseline, what ``plots.plot_ablation`` draws: its Δ mAP50-95 with the interval that
    decides its verdict (``readings.reading``), its extra GFLOPs in %, its latency Δ (where compared) and its words."""
    dec = readings.decision(ab, rows, boot)
    g = {v: stats["variants"][v]["gflops"] for v in stats["variants"]}
    points = []
    for v in readings.arms(ab):
        r = readings.reading(ab, rows, boot, v, dec)
        if r["n"] < 2 or not math.isfinite(r["mean"]):
            continue
        pct = 100 * (g[v] / g[ab.baseline] - 1) if g.get(v) and g.get(ab.baseline) else None
        lat = (timing or {}).get("diffs", {}).get(v)
        lat = (lat["mean"], lat["lo"], lat["hi"]) if lat is not None and lat["verdict"] is not None and \
            not lat["words"].startswith("not compared") and math.isfinite(lat["lo"]) else None
        points.append({"variant": v, "delta": r["mean"], "lo": r["lo"], "hi": r["hi"], "gflops_pct": pct,
                       "latency": lat, "interval": r["interval"]})
    return points


def curves_caption(ab: Ablation, rows: list[dict]) -> str:
    """What curves.png shows, for the summary's list of plots: the curves, or for arms of one epoch (no curve) the
    points ``plots.plot_points`` draws instead."""
    if arm_epochs(rows) > 1:
        return "`curves.png` (validation mAP per epoch, after the shared start's)"
    start = ", against the shared start's last validation" if ab.start is not None and ab.start.kind == "recipe" else ""
    return f"`curves.png` (each arm's validation mAP after its one epoch, a dot per seed{start}: one epoch is no curve)"


def write_report(ab: Ablation, rows: list[dict], wall_s: float | None = None) -> str:
    """Write summary.md, ablation.png, curves.png and (with per-image records) delta.png from the planned runs'
    rows (and ``out/latency.json``, ``latency.measure``'s timing); returns the summary text."""
    names = [v.name for v in ab.variants]
    stats = summarize(rows, names, ab.baseline)
    boot = analyze(ab, rows)
    timing = latency.read(ab.out)
    text = summary_markdown(ab, rows, stats, boot, wall_s, timing)
    atomic_write(ab.out / "summary.md", lambda p: Path(p).write_text(text))
    if any(r["status"] == "ok" for r in rows):
        points = tradeoff_points(ab, rows, stats, boot, timing)
        deciding = points[0]["interval"] if points else "hierarchical"
        load = (timing or {}).get("load", {})
        note = ("latency not drawn: not timed (no best.pt of the baseline and an arm)" if not timing else
                f"latency not drawn: the machine was busy during the timing (other processes used "
                f"{load['others_cores']:.1f} of {load['cores']} cores)" if load.get("busy") else "")
        plot_ablation(ab.out / "ablation.png", points, ab.baseline, ab.imgsz, deciding, note)
        start = Path(ab.start.folder) / "results.csv" if ab.start is not None and ab.start.kind == "recipe" else None
        plot_curves(ab.out / "curves.png", rows, names, start)
    compared = {v: c for v, c in boot["compare"].items() if PRIMARY in c}
    if compared:
        dec = readings.decision(ab, rows, boot)
        seq = {v: (d["lo"], d["hi"]) for v, d in dec["variants"].items()} if dec is not None else None
        plot_delta(ab.out / "delta.png", compared, ab.baseline, readings.joint_level(ab), seq,
                   kind(ab.seed_rule) if ab.seed_rule is not None else "hierarchical")
    elif is_own_plot(ab.out / "delta.png"):  # an earlier report's plot would no longer match this summary
        (ab.out / "delta.png").unlink()  # (a delta.png the runner did not write is left alone)
    return text
