"""summary.md as an ordered list of sections, each a short function of the ablation's results and verdicts.

The terminal shows the first ``LEAD`` sections (``lead_markdown``); summary.md holds them all (``summary_markdown``).
Every verdict, interval and level comes from ``attn_yolo.ablate.statistics.verdicts``: no section decides anything
itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.reports import controls
from attn_yolo.ablate.reports.plots import arm_epochs
from attn_yolo.ablate.runs import latency
from attn_yolo.ablate.runs.outdir import shown
from attn_yolo.ablate.runs.perimage import PERIMAGE_NAME
from attn_yolo.ablate.runs.start import summary_line
from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.statistics.stats import METRICS, POWER, PRIMARY, TARGET_DELTA
from attn_yolo.ablate.statistics.verdicts import (
    FIXED_N,
    HIERARCHICAL,
    SEEDS_ONLY,
    Verdict,
    all_verdicts,
    level_words,
)
from attn_yolo.markdown import Section, render, table
from attn_yolo.text import bracket, number

N_MOVERS = 5


@dataclass
class Results:
    """What the summary's sections read: the ablation, its runs, their statistics and the verdicts.

    Attributes:
        ab: the ablation. rows: the planned runs' records. stats: ``stats.summarize`` at the joint level.
        boot: ``report.analyze`` of ``rows``. timing: ``latency.measure``'s result (None: not timed).
        wall_s: wall time of this invocation (None: not shown). dec: ``comparisons.decision`` (None: fixed seeds).
        verdicts: ``verdicts.all_verdicts``, one per arm.
    """

    ab: Ablation
    rows: list[dict]
    stats: dict
    boot: dict
    timing: dict | None
    wall_s: float | None
    dec: dict | None
    verdicts: dict[str, Verdict]

    @property
    def level(self) -> str:
        """Each interval's level, in words (Bonferroni over the ablation's comparisons)."""
        return level_words(comparisons.joint_level(self.ab))


def results(ab: Ablation, rows: list[dict], stats: dict, boot: dict | None = None, wall_s: float | None = None,
            timing: dict | None = None) -> Results:
    """The ``Results`` of ``rows``: the stopping decision and every arm's verdict, each computed once."""
    boot = boot or {"compare": {}, "why": {}, "nothing": set(), "names": [], "n_images": 0}
    dec = comparisons.decision(ab, rows, boot)
    return Results(ab, rows, stats, boot, timing, wall_s, dec, all_verdicts(ab, rows, stats, boot, timing, dec))


def duration(s: float) -> str:
    """Seconds as ``1m05s`` (or ``2h03m`` from an hour on), for the summary and the ETA."""
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# ------------------------------------------------------------------------------------------------------ the sections


def title(r: Results) -> Section:
    return Section(f"Ablation `{r.ab.name}`", level=1)


def positive_control(r: Results) -> Section | None:
    """Whether the design called the reference (the yardstick) better than the baseline: first, since every other
    "no difference" depends on it."""
    body = controls.positive_control(r.ab, r.verdicts)
    return Section(None, body[:-1]) if body else None


def attention_check(r: Results) -> Section | None:
    """Per arm that adds blocks and is compared: whether its blocks' attention mattered enough for a verdict."""
    body = controls.treatment_lines(r.ab, r.verdicts)
    return Section("Attention check: did the blocks attend?", body) if body else None


def _deciding_words(r: Results) -> str:
    """Which interval decides, from the verdicts themselves (each arm's own)."""
    kinds = {v.interval.kind for v in r.verdicts.values() if v.interval is not None}
    said = {HIERARCHICAL: "the hierarchical interval, which accounts for training noise (seeds) and for the finite "
                          "validation set (images)",
            SEEDS_ONLY: "the seeds-only t-interval, where runs have no per-image record (see Intervals)"}
    seq = [k for k in kinds if k not in said]
    parts = [f"the {k} interval (seeds chosen by the data: valid at whichever look the rule stopped)" for k in seq]
    parts += [said[k] for k in (HIERARCHICAL, SEEDS_ONLY) if k in kinds]
    return "; ".join(parts) if parts else "none (no arm is compared)"


def verdict_section(r: Results) -> Section:
    """The verdict lines: per arm its Δ, the one interval that decides, its words, its check and its cost."""
    intro = (f"Joint verdicts: {comparisons.joint_words(r.ab)}; an arm whose blocks failed the attention check is "
             f"**not tested**, whatever its interval. Each line shows the one interval that decides its verdict, at "
             f"{r.level}: {_deciding_words(r)}. An interval that contains 0 reads \"no difference beyond ±w\" when it "
             f"lies within ±{TARGET_DELTA}, else \"inconclusive\" with the smallest |Δ| the design detects "
             f"({int(POWER * 100)}% power). The other intervals and p-values do not decide (see Not deciding).")
    return Section(f"Verdict: mAP50-95 vs `{r.ab.baseline}`", [intro, "", *(v.line() for v in r.verdicts.values())])


def not_deciding(r: Results) -> Section | None:
    """The other intervals, p-values and secondary metrics: shown, and said not to decide."""
    body = []
    for v in r.verdicts.values():
        if v.interval is None:
            continue
        p = v.interval.p
        parts = ([f"p = {p:.3g} ({v.interval.kind})"] if math.isfinite(p) else []) + [
            f"{o.kind} {bracket(o.lo, o.hi)}" + (f", p = {o.p:.3g}" if math.isfinite(o.p) else "") for o in v.others]
        no_image = f"; no image-level interval: {v.why}" if v.why else ""
        body.append(f"- `{v.arm}`: {'; '.join(parts) or 'none'}{no_image}")
        body.append(f"  - secondary metrics (exploratory, uncorrected): {_secondary(r, v.arm)}")
    if not body:
        return None
    head = (f"These intervals (each at {r.level}), p-values and secondary metrics do **not** decide any verdict: only "
            "the interval on each verdict line does. An interval here that excludes 0 where the verdict does not is "
            "no finding; the secondary metrics are exploratory and not corrected for the metrics read beside them.")
    return Section("Not deciding: other intervals, p-values, secondary metrics", [head, "", *body])


def _secondary(r: Results, arm: str) -> str:
    out = []
    for key, label, dec, sense in METRICS:
        d = r.stats["diffs"][arm].get(key)
        if key == PRIMARY or d is None or sense == 0 or d["n"] == 0 or math.isnan(d["mean"]):
            continue
        where = exploratory(r.boot["compare"].get(arm, {}).get(key), d).removeprefix("exploratory: ")
        out.append(f"{label} {number(d['mean'], dec, sign=True)} ({where})")
    return ", ".join(out) or "none"


def exploratory(c: dict | None, d: dict) -> str:
    """The reading of a secondary metric's interval (``c``: its bootstrap comparison, else ``d``: seeds only): where
    it lies, marked exploratory (uncorrected for the metrics beside the primary one), never a verdict."""
    lo, hi = (c["hier"]["lo"], c["hier"]["hi"]) if c is not None else (d["lo"], d["hi"])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "exploratory: n/a"
    where = "above 0" if lo > 0 else "below 0" if hi < 0 else "contains 0"
    return f"exploratory: interval {where}"


def stopping(r: Results) -> Section | None:
    lines = comparisons.stopping(r.ab, r.dec)
    return Section("Seeds chosen by the data", lines) if lines else None


def yardstick(r: Results) -> Section | None:
    lines = controls.yardstick(r.ab, r.stats, r.verdicts)
    return Section("Yardstick", lines) if lines else None


def placebo(r: Results) -> Section | None:
    lines = controls.placebo(r.ab, r.rows, r.stats, r.verdicts)
    return Section("Placebo (capacity control)", lines) if lines else None


def power(r: Results) -> Section | None:
    lines = [v.power for v in r.verdicts.values() if v.power]
    if not lines:
        return None
    kinds = {v.interval.kind for v in r.verdicts.values() if v.power}
    return Section(None, [f"Power (mAP50-95, of the interval that decides: {', '.join(sorted(kinds))}, each at "
                          f"{r.level}; from the measured seed and image variances):", "", *lines])


def setup(r: Results) -> Section:
    ab, rows = r.ab, r.rows
    tr = ", ".join(f"{k}={v}" for k, v in ab.train.items())
    n_ok = sum(x["status"] == "ok" for x in rows)
    lines = [
        f"- data: `{shown(ab.data)}` ({ab.nc} classes); seeds: {', '.join(map(str, ab.seeds))}; baseline: "
        f"`{ab.baseline}`",
        f"- train: {tr or 'Ultralytics defaults'}; GFLOPs and latency at imgsz {ab.imgsz}; out: `{shown(ab.out)}`",
        f"- runs: {n_ok} ok, {len(rows) - n_ok} failed, {len(ab.variants) * len(ab.seeds) - len(rows)} not run"
        + (f"; wall time {duration(r.wall_s)} (this invocation)" if r.wall_s is not None else "")
        + f"; training time, sum over runs: {duration(sum(x['train_time_s'] or 0 for x in rows))}",
        summary_line(ab),
    ]
    if r.dec is not None:
        lines.append(f"- seeds chosen by the data: {r.dec['text']}")
    if r.boot["compare"]:
        lines.append(f"- image bootstrap: {ab.bootstrap['resamples']} resamples (seed {ab.bootstrap['seed']}) of the "
                     f"{r.boot['n_images']} validation images, the same resamples for every run")
    return Section("Setup", lines)


def results_table(r: Results) -> Section:
    ab = r.ab
    head = ["variant", "ok runs", "params (M)", "GFLOPs"] + [label for _, label, _, _ in METRICS]
    rows = []
    for v in (x.name for x in ab.variants):
        s = r.stats["variants"][v]
        label = f"{v} (baseline)" if v == ab.baseline and "baseline" not in v.lower() else v
        cells = [label, f"{s['n']}/{len(ab.seeds)}", number(s["params"] / 1e6 if s["params"] else None, 3),
                 number(s["gflops"], 3)]  # fmt: skip
        for key, _, dec, _ in METRICS:
            mean, sd = s[key]
            cells.append(number(mean, dec) + ("" if math.isnan(sd) else f" ± {number(sd, dec)}"))
        rows.append(cells)
    return Section("Results (mean ± std over seeds)", [table(head, rows)])


def difference_table(r: Results) -> Section:
    """Every metric's paired Δ with its intervals, each at the joint level; the verdict column reads the verdicts."""
    rows = []
    for v, x in r.verdicts.items():
        if x.interval is None and x.status != "n/a" or r.ab.baseline in r.boot["nothing"]:
            continue
        for key, label, dec, _ in METRICS:
            d = r.stats["diffs"][v].get(key)
            if d is None or d["n"] == 0 or math.isnan(d["mean"]):
                continue
            c = r.boot["compare"].get(v, {}).get(key)
            reading = x.label if key == PRIMARY else exploratory(c, d)
            if c is None:
                rows.append([v, label, number(d["mean"], dec, sign=True), bracket(d["lo"], d["hi"], dec), "—", "—",
                             number(d["p"], 3), d["n"], reading])  # fmt: skip
            else:
                h = c["hier"]
                rows.append([v, label, number(h["mean"], dec, sign=True), bracket(c["t"]["lo"], c["t"]["hi"], dec),
                             bracket(*c["image"], dec), bracket(h["lo"], h["hi"], dec), number(h["p"], 3), h["n"],
                             reading])  # fmt: skip
    head = ["variant", "metric", "Δ mean", "seeds only (t)", "images only", "hierarchical", "p", "n",
            "verdict (mAP50-95 only)"]
    note = (f"Only mAP50-95 carries a verdict (the headline's words, from the interval on its verdict line). The other "
            f"metrics are exploratory: their intervals are not corrected for the {len(METRICS) - 1} metrics read "
            "beside it, so by chance alone about one in twenty lies off 0; a finding there needs an ablation of its "
            "own.")
    return Section(f"Difference to `{r.ab.baseline}` (paired by seed, intervals each at {r.level})",
                   [table(head, rows), "", note])


def latency_section(r: Results) -> Section | None:
    lines = latency.summary_lines(r.ab.baseline, r.timing)
    return Section(None, lines[1:]) if lines else None


def per_seed(r: Results) -> Section | None:
    rows = [[v, seed, number(delta, sign=True), bracket(lo, hi)] for v, c in r.boot["compare"].items() if PRIMARY in c
            for seed, delta, (lo, hi) in zip(c["seeds"], c[PRIMARY]["deltas"], c[PRIMARY]["image_seed"])]
    if not rows:
        return None
    return Section(None, [f"Images-only intervals per seed (mAP50-95), each at {r.level}; they do not decide:", "",
                          table(["variant", "seed", "Δ", "images only"], rows)])


def class_movers(compare: dict, names: list[str]) -> list[list[str]]:
    """Per arm the ``N_MOVERS`` classes whose AP50-95 rose most and fell most (``stats.bootstrap_compare``'s
    ``classes``), as table rows: arm, class, Δ, hierarchical interval, the arm's AP, the baseline's AP."""
    rows = []
    for v, c in compare.items():
        classes = sorted(c.get("classes", {}).items(), key=lambda kv: kv[1]["mean"])
        down = [kv for kv in classes[:N_MOVERS] if kv[1]["mean"] < 0]
        up = [kv for kv in classes[::-1][:N_MOVERS] if kv[1]["mean"] > 0]
        for k, h in up + down:
            name = names[k] if k < len(names) else str(k)
            rows.append([v, name, number(h["mean"], sign=True), bracket(h["lo"], h["hi"]), number(h["variant"]),
                         number(h["baseline"])])
    return rows


def movers(r: Results) -> Section | None:
    rows = class_movers(r.boot["compare"], r.boot["names"])
    if not rows:
        return None
    return Section(f"Per-class Δ AP50-95 (hierarchical intervals, each at {r.level}; the {N_MOVERS} classes that "
                   "moved most each way; exploratory)",
                   [table(["variant", "class", "Δ mean", "hierarchical", "variant AP", "baseline AP"], rows)])


def intervals(r: Results) -> Section:
    ab = r.ab
    lines = [
        ("- seeds only: t-interval of the paired per-seed Δ (t with n − 1 degrees of freedom); ignores that the "
         "validation set is a sample of images."),
        (f"- images only: paired bootstrap of the validation images ({ab.bootstrap['resamples']} resamples, seed "
         f"{ab.bootstrap['seed']}): each resample is drawn once and used for the variant, the baseline and every "
         "seed; per seed, and pooled (Δ averaged over seeds); ignores training noise."),
        ("- hierarchical: SE² = (variance of Δ over seeds)/n + the test-set variance common to all seeds (from the "
         "shared image resamples), t quantile with Welch–Satterthwaite degrees of freedom, never narrower than the "
         f"seeds-only interval; it accounts for both ({FIXED_N}: the same at a fixed n, beside a sequential "
         "interval). Δ = variant − baseline, per seed."),
        ("- AP small / medium / large: COCO AP50-95 over boxes of area < 32², 32²–96², > 96² px (original image), "
         "each prediction matched by pycocotools within the size range; per-image records in "
         f"`runs/<run>/{PERIMAGE_NAME}`."),
    ]
    lines += [f"- `{v}`: seeds-only t-interval only: {why}." for v, why in r.boot["why"].items()]
    return Section("Intervals", lines)


def health(r: Results) -> Section | None:
    from attn_yolo.health import health_section

    names = [v.name for v in r.ab.variants]
    return health_section(names, r.rows, {**{v: x.label for v, x in r.verdicts.items()}, r.ab.baseline: "baseline"})


def failed(r: Results) -> Section | None:
    bad = [x for x in r.rows if x["status"] != "ok"]
    if not bad:
        return None
    return Section("Failed runs", [table(["variant", "seed", "error", "run folder"],
                                         [[x["variant"], x["seed"], x["error"].replace("|", "/"),
                                           f"`{shown(x['run_dir'])}`"] for x in bad])])


def plots(r: Results) -> Section:
    kinds = sorted({v.interval.kind for v in r.verdicts.values() if v.interval is not None and v.others})
    delta = (f", `delta.png` (Δ with its intervals per variant and metric; the one that decides ({', '.join(kinds)}) "
             "drawn thick)") if r.boot["compare"] else ""
    return Section(None, ["Plots: `ablation.png` (Δ mAP50-95 with the interval that decides vs the extra GFLOPs and "
                          f"latency; arms without a verdict drawn apart), {curves_caption(r.ab, r.rows)}{delta}; every "
                          "run: `results.csv`."])


def curves_caption(ab: Ablation, rows: list[dict]) -> str:
    """What curves.png shows, for the summary's list of plots: the curves, or for arms validated once (one epoch, or
    ``val: false``: no curve) the points ``plots.plot_points`` draws instead."""
    if arm_epochs(rows) > 1:
        return "`curves.png` (validation mAP per epoch, after the shared start's)"
    start = ", against the shared start's last validation" if ab.start is not None and ab.start.kind == "recipe" else ""
    return (f"`curves.png` (each arm's validation mAP after its last epoch, a dot per seed{start}: an arm validated "
            "once is no curve)")


SECTIONS = (title, positive_control, attention_check, verdict_section, not_deciding, stopping, yardstick, placebo,
            power, setup, results_table, difference_table, latency_section, per_seed, movers, intervals, health, failed,
            plots)
LEAD = SECTIONS.index(setup) + 1  # the terminal shows the sections up to the setup; the tables are in summary.md


def summary_markdown(r: Results) -> str:
    """summary.md: every section of ``SECTIONS``, in order."""
    return render(f(r) for f in SECTIONS)


def lead_markdown(r: Results) -> str:
    """What the terminal shows: the first ``LEAD`` sections (the verdicts, their check, power and the setup)."""
    return render(f(r) for f in SECTIONS[:LEAD]) + "\n(tables, per-class Δ and how the intervals are made: summary.md)"
