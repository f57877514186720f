"""explain.md: per variant, Δ mAP50-95 decomposed by TIDE error type, object size and class.

The error types carry their intervals; then the images that changed and the blocks' health beside Δ."""

from __future__ import annotations

from pathlib import Path

from attn_yolo.ablate.runs.perimage import SIZES
from attn_yolo.ablate.statistics.verdicts import BETTER, WORSE, level_words
from attn_yolo.explain import decompose, tide
from attn_yolo.explain.health import largest_moved
from attn_yolo.explain.inputs import REPORT_MARK, figure_name
from attn_yolo.markdown import table
from attn_yolo.text import bracket, number

N_CLASSES = 5  # classes shown per variant: those whose AP moved most (either way)
PART_LABELS = {**tide.LABELS, "interaction": "interaction (not one type's)", "ceiling": "ceiling (after all fixes)"}


def _ci(h: dict) -> str:
    return bracket(h["lo"], h["hi"])


def _reading(h: dict, settled: bool) -> str:
    """A part's interval read beside the verdict: ``exploratory`` where it excludes 0 while the verdict does not."""
    off = h["lo"] > 0 or h["hi"] < 0
    return "exploratory: excludes 0, the verdict does not" if off and not settled else ""


def parts_table(dec: dict, level: float = 0.95, settled: bool = True) -> list[str]:
    """The decomposition table: each part's mean over seeds, its hierarchical CI at ``level`` (the summary's), its
    share of Δ, per seed, and ``exploratory`` where its interval excludes 0 while the verdict (``settled``: better or
    worse) does not."""
    total = dec["parts"]["total"]["mean"]
    rows = []
    for k in (*decompose.PARTS, "total"):
        h = dec["parts"][k]
        share = f"{100 * h['mean'] / total:+.0f} %" if total and k != "total" else ""
        seeds = ", ".join(number(x, sign=True) for x in dec["per_seed"][k])
        label = "**total (the summary's Δ)**" if k == "total" else PART_LABELS[k]
        rows.append([label, number(h["mean"], sign=True), _ci(h), share, seeds, _reading(h, settled)])
    heads = ["part", "Δ mAP50-95", f"hierarchical {level_words(level)} CI", "share of Δ", "per seed", "reading"]
    return [table(heads, rows)]


def verdict_lines(v: str, verdict, baseline: str) -> list[str]:
    """The verdict a variant's section explains, as the summary states it (``verdicts.json``)."""
    if verdict is None:
        return ["**Verdict**: not recorded (no verdicts.json in the out folder: run `attn-yolo ablate` on its config "
                "again to write it); the parts below explain a Δ, they decide nothing.", ""]
    iv = f", {verdict.interval.text()}, n = {verdict.n} paired seeds" if verdict.interval is not None else ""
    return [f"**Verdict (summary.md)**: `{v}` vs `{baseline}`: **{verdict.words}** "
            f"(Δ {number(verdict.mean, sign=True)}{iv}). The "
            "parts below explain this Δ; their intervals do not decide, and a part whose interval excludes 0 where "
            "the verdict's does not is exploratory.", ""]


def sizes_table(dec: dict) -> list[str]:
    """Per error type and object size: the variant's gain when only that size's errors are fixed, with its CI."""
    if not dec["sizes"]:
        return []
    rows = [[tide.LABELS[e], *(f"{number(dec['sizes'][(e, s)]['mean'], sign=True)} {_ci(dec['sizes'][(e, s)])}"
                               for s in SIZES)] for e in tide.ERROR_NAMES]
    return [table(["error", *SIZES], rows)]


def classes_table(dec: dict, names: list[str]) -> list[str]:
    """The classes whose AP50-95 moved most: Δ with its CI, and its decomposition (means over seeds)."""
    movers = sorted(dec["class_total"], key=lambda c: -abs(dec["class_total"][c]["mean"]))[:N_CLASSES]
    if not movers:
        return []
    rows = [[names[c] if c < len(names) else c, number(dec["classes"][c]["total"], sign=True),
             _ci(dec["class_total"][c]), *(number(dec["classes"][c][k], sign=True) for k in decompose.PARTS)]
            for c in movers]
    return [table(["class", "Δ AP50-95", "CI", *tide.ERROR_NAMES, "interaction", "ceiling"], rows)]


def images_table(up: list, down: list) -> list[str]:
    """The images that rose (``up``) and fell (``down``), ``changed.ChangedImage``s, as Markdown rows."""
    rows = [[f"`{Path(im.path).name}`", number(im.delta, 3, sign=True),
             ", ".join(f"{s}: {number(d, 3, sign=True)}" for s, d in im.per_seed.items()),
             f"seed {im.seed}: {im.ap_baseline:.3f} → {im.ap_variant:.3f}"] for im in up + down]
    return [table(["image", "Δ AP50-95 (mean over seeds)", "per seed", "shown: seed, baseline → variant"], rows)]


def health_table(rows: list[dict]) -> list[str]:
    """``health.health_rows`` as Markdown rows (the largest |Δ| in bold), then ``health.largest_moved``."""
    if not any(r["block"] for r in rows):
        return ["No gates.csv in the variant's run folders (no attention blocks, or `health: false`)."]
    cells = []
    for r in rows:
        seed = f"**{r['seed']}** (largest |Δ|)" if r["largest"] else str(r["seed"])  # the table escapes the bars
        if not r["block"]:
            cells.append([seed, number(r["delta"], sign=True), "(no gates.csv)", *[""] * 6])
            continue
        cells.append([seed, number(r["delta"], sign=True), r["block"], f"{r['knockout']:.3g}",
                      f"{r['d_knockout']:+.3g}", number(r["entropy"]), number(r["d_entropy"], sign=True),
                      number(r["gate_mean"], 3), ", ".join(r["flags"]) or "-"])
    heads = ["seed", "Δ mAP50-95", "block", "knock-out", "(moved)", "entropy", "(moved)", "gate mean", "flags"]
    return [table(heads, cells), ""] + [f"- {s}" for s in largest_moved(rows)]


def variant_section(v: str, res: dict, names: list[str], baseline: str, verdict=None, level: float = 0.95
                    ) -> list[str]:
    """The Markdown of one variant (``res``: ``decompose``'s result, ``images``, ``health``, ``figure``), opening
    with the summary's ``verdict`` (``verdicts.Verdict``; None: not recorded) it explains."""
    dec = res["decomposition"]
    settled = verdict is not None and verdict.status in (BETTER, WORSE)
    lines = [f"## {v} vs {baseline} ({len(dec['seeds'])} paired seeds: {', '.join(map(str, dec['seeds']))})", "",
             *verdict_lines(v, verdict, baseline), "### Δ mAP50-95 by TIDE error type", "",
             *parts_table(dec, level, settled), ""]
    if res["disagree"]:
        lines += [f"({res['disagree']} detection-threshold flags where the boxes as recorded, clipped to the image, "
                  "match otherwise than Ultralytics' validation did: the record's flags are kept)", ""]
    if dec["sizes"]:
        lines += [f"### By object size (only the errors on objects of that size fixed; mean over seeds and "
                  f"{level_words(level)} CI; exploratory)", "",
                  *sizes_table(dec), ""]
    lines += [f"### By class (the {N_CLASSES} that moved most; parts: means over seeds)", "",
              *classes_table(dec, names), "", "### The images that changed", "", *images_table(*res["images"]), ""]
    lines += [f"Figure: `{res['figure']}`" if res["figure"] else f"No figure: {res['no_figure']}", ""]
    lines += ["### Attention health beside Δ (gates.csv, last epoch; moved: since the first measured epoch)", "",
              *health_table(res["health"]), ""]
    return lines


HOW = ("How to read it: TIDE (Bolya et al., ECCV 2020) sorts each false positive and missed box into classification, "
       "localisation, both, duplicate, background or missed, at each IoU threshold 0.50:0.95; ΔAP_e is the AP gained "
       "by fixing every error of type e (an oracle). A part is ΔAP_e(baseline) − ΔAP_e(variant): positive when the "
       "variant has less to gain from fixing that type, i.e. it makes fewer or cheaper such errors. Interaction: "
       "what the fixes of single types leave unexplained (they overlap); ceiling: the difference after every fix. "
       "The parts sum to the summary's Δ mAP50-95, seed by seed. Intervals: hierarchical (seeds and the same image "
       "resamples), at the level of the summary's intervals; they explain the Δ, the verdict is the summary's. "
       "Images: each image's own mAP50-95, variant − baseline, mean over seeds (the seed shown is the one where it "
       "moved most).")


def explain_markdown(runs, results: dict, names: list[str], verdicts: dict | None = None, level: float = 0.95) -> str:
    """explain.md's text: ``REPORT_MARK``, then one section per variant (``variant_section``), each opening with the
    summary's verdict of that variant (``verdicts``: ``verdicts.read_verdicts``) and its intervals at ``level``."""
    said = [f"- `{v}`: **{verdicts[v].words}**" + (f" ({verdicts[v].interval.text()})" if verdicts[v].interval else "")
            for v in runs.variants if v in (verdicts or {})]
    opening = (["The verdicts explained (summary.md, vs `" + runs.baseline + "`):", "", *said, ""] if said else
               verdict_lines("", None, runs.baseline))
    lines = [REPORT_MARK, f"# Why the Δ: {runs.out.name}", "", *opening, HOW, "",
             f"- image bootstrap: {runs.resamples} resamples (seed {runs.boot_seed}), as the summary's", ""]
    for v in runs.variants:
        lines += variant_section(v, results[v], names, runs.baseline, (verdicts or {}).get(v), level)
    return "\n".join(lines)


def figure_path(runs, v: str) -> Path:
    """Where variant ``v``'s changed-images figure goes: ``out/changed-<v>.png``."""
    return runs.out / figure_name(v)
