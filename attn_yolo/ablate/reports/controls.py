"""The controls beside the verdicts, read from them: attention check, positive control, yardstick and placebo.

Every arm's Δ, interval, level and words come from its ``verdicts.Verdict``; only the comparison of a variant with
its placebo (one of the ablation's K comparisons) is computed here, at the same joint level.

The positive control is the yardstick read as one: an ablation with ``reference: {model: yolo11s.yaml}`` compares the
next model scale with the baseline as one more arm. A gain of a model scale is larger than any the blocks are hoped to
give, so a design that cannot call the reference better than the baseline cannot resolve the blocks' effects either:
its "no difference" says nothing of them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.statistics.stats import paired_difference
from attn_yolo.ablate.statistics.verdicts import BETTER, NOT_TESTED, SEEDS_ONLY, Interval, Verdict, verdict_words

SCALE = re.compile(r"^(?P<stem>.*?\d+)(?P<scale>[nsmlx])(?P<rest>[-.].*)?$")  # yolo11n.yaml, yolov8s-p2.yaml


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if abs(x) >= 0.1 else f"{100 * x:.2g} %"


def treatment_lines(ab: Ablation, verdicts: dict[str, Verdict]) -> list[str]:
    """The attention-check section: per compared arm that adds blocks, whether what they attend to mattered to its
    model enough for a verdict (``comparisons.treated``, kept in its verdict), with the criterion in one sentence."""
    from attn_yolo.ablate.statistics.treatment import THRESHOLD

    th = ab.treatment.threshold if ab.treatment else THRESHOLD
    shown = [f"- **{v.arm}**: {_check_line(v.check, th)}" for v in verdicts.values()
             if v.interval is not None and v.check.get("status", "not applicable") != "not applicable"]
    if not shown:
        return []
    return [(f"An arm's verdict needs its blocks' attention to matter to its own model: its mean-ablation effect "
             f"(mean over seeds of |mAP50-95 of its best.pt − the same with every gate and attention map of its new "
             f"blocks held at its mean over the validation images|) must be at least {th:g} × the half-width of "
             f"the interval that decides its verdict (the resolution of this design); otherwise the arm is **not "
             f"tested**: its blocks act as a fixed rescale, and its Δ says nothing about attention. Beside it, the "
             f"identity in place of the blocks and their weights re-initialised (γ kept). Blocks without gates or "
             f"attention (a placebo) are checked by the identity in their place."), "", *shown]


def _check_line(t: dict, th: float) -> str:
    """One arm's attention check in the summary's first section."""
    h = t.get("health", {})
    health = ", ".join(x for x in (
        f"|γ| {h['gamma']:.3g}" if math.isfinite(h.get("gamma", math.nan)) and t["status"] != "failed" else "",
        f"gate entropy {h['entropy']:.3f}" if math.isfinite(h.get("entropy", math.nan)) else "",
        _uniform(h) if h.get("runs") else "",
        f"switched off in {round(h['switched_off'] * h['runs'])}/{h['runs']} seeds" if h.get("runs") else "",
    ) if x)  # fmt: skip
    health = f"; attention health: {health}" if health else ""
    if t["status"] == "passed":
        return f"**passed**: {comparisons.check_figures(t)}; {t['A']:.4f} >= {th:g} × ±{t['resolution']:.4f}{health}"
    if t["status"] == "failed":
        return f"**{comparisons.not_tested(t)}**{health}"
    return f"n/a: {t['why']} (the verdict stands without the check){health}"


def _uniform(h: dict) -> str:
    """How many seeds' runs had a block's gates flagged ``uniform``, and (with several blocks) every block's."""
    some, n = round(h["uniform"] * h["runs"]), h["runs"]
    every = h.get("all_uniform", math.nan)
    if math.isnan(every) or round(every * n) == some:
        return f"gates flagged uniform in {some}/{n} seeds"
    return f"a block's gates flagged uniform in {some}/{n} seeds, every block's in {round(every * n)}/{n}"


def scale_change(base: str, ref: str) -> str | None:
    """``"yolo11n → yolo11s"`` when ``ref`` is ``base`` at another model scale (the same family, another n/s/m/l/x
    letter), else None."""
    a, b = SCALE.match(Path(base).name), SCALE.match(Path(ref).name)
    if a and b and a["stem"] == b["stem"] and (a["rest"] or "") == (b["rest"] or "") and a["scale"] != b["scale"]:
        return f"{Path(base).stem} → {Path(ref).stem}"
    return None


def positive_control(ab: Ablation, verdicts: dict[str, Verdict]) -> list[str]:
    """The positive-control paragraph, from the reference's own verdict: [] without a reference; else whether the
    reference was called better than the baseline (passed), not yet readable (fewer than 2 paired seeds), or not
    (failed: the design cannot resolve even a model-scale change, or the reference's change where it is not another
    scale)."""
    ref = ab.reference
    if ref is None or ref not in verdicts:
        return []
    v = {x.name: x for x in ab.variants}
    change = scale_change(v[ab.baseline].model, v[ref].model)
    what = f"a model-scale change, {change}" if change else f"the change to `{Path(v[ref].model).name}`"
    r = verdicts[ref]
    if r.n < 2:
        return [f"**Positive control: not read yet**: the reference `{ref}` ({what}) has {r.n} paired seed(s) "
                "with the baseline; it needs 2 or more.", ""]
    figs = (f"Δ mAP50-95 {r.mean:+.4f}, {r.interval.text()}, n = {r.n}" if r.interval is not None else
            f"no comparison: {r.why}")
    if r.status == BETTER:
        return [f"**Positive control passed**: the design calls the reference `{ref}` ({what}) better than "
                f"`{ab.baseline}` ({figs}): it resolves a change of that size.", ""]
    even = "even a model-scale change" if change else "even the reference's change"
    return [f"**Positive control failed: this design cannot resolve {even}**: the reference `{ref}` ({what}) is not "
            f"called better than `{ab.baseline}` ({r.label}; {figs}). Its other verdicts cannot tell \"the block "
            "does not help\" from \"this design cannot see it\": train longer, on more data, or with more seeds "
            "until the reference is called better.", ""]


def yardstick(ab: Ablation, stats: dict, verdicts: dict[str, Verdict]) -> list[str]:
    """Per variant: its Δ as a fraction of the reference's Δ, and its extra GFLOPs as a fraction of the reference's;
    every Δ, interval and word is the arm's verdict's."""
    ref = ab.reference
    if ref is None or ref not in verdicts:
        return []
    r = verdicts[ref]
    g = {v: stats["variants"][v]["gflops"] for v in stats["variants"]}
    iv = r.interval.text() if r.interval is not None else "no interval"
    head = (f"Yardstick: the reference `{ref}` vs `{ab.baseline}`: Δ mAP50-95 {r.mean:+.4f}, {iv} ({r.label}), GFLOPs "
            f"{g.get(ref) or math.nan:.3f} vs {g.get(ab.baseline) or math.nan:.3f}")
    lines = [head, ""]
    if r.status != BETTER:
        lines.append(f"- no fractions: the reference's gain is not established ({r.label}); a yardstick needs a "
                     "change known to help (e.g. the next model scale) and enough training to show it")
        return lines
    extra_ref = (g.get(ref) or 0) - (g.get(ab.baseline) or 0)
    for v, x in verdicts.items():
        if v == ref or v in ab.placebos or x.interval is None:
            continue
        if x.status == NOT_TESTED:
            lines.append(f"- **{v}**: not tested (see the Attention check): no fraction of the `{ref}` gain")
            continue
        extra = (g.get(v) or 0) - (g.get(ab.baseline) or 0)
        cost = (f"at {_pct(extra / extra_ref)} of its extra GFLOPs ({extra:+.4f} vs {extra_ref:+.4f})"
                if extra_ref > 0 else f"(extra GFLOPs {extra:+.4f}; the reference adds none)")
        lines.append(f"- **{v}**: {_pct(x.mean / r.mean)} of the `{ref}` gain {cost}; Δ {x.mean:+.4f} "
                     f"{x.interval.text()} vs {r.mean:+.4f}, {x.label}")
    return lines


def against_placebo(ab: Ablation, rows: list[dict], v: str, p: str) -> tuple[float, Interval, int] | None:
    """Variant ``v`` − its placebo ``p``, paired by seed: ``(mean, interval at the joint level, n)``, the joint
    sequential interval with seeds chosen by the data, else the seeds-only one; None below 2 paired seeds."""
    diffs = comparisons.paired_diffs(ab, rows, v, p)
    if len(diffs) < 2:
        return None
    level = comparisons.joint_level(ab)
    if ab.seed_rule is not None:
        from attn_yolo.ablate.statistics.sequential import confidence_sequence, kind

        lo, hi = confidence_sequence(diffs, comparisons.joint_rule(ab))
        iv = Interval(kind(ab.seed_rule), level, lo, hi, True)
    else:
        d = paired_difference(diffs, level)
        iv = Interval(SEEDS_ONLY, level, d["lo"], d["hi"], True, d["p"])
    return sum(diffs) / len(diffs), iv, len(diffs)


def placebo(ab: Ablation, rows: list[dict], stats: dict, verdicts: dict[str, Verdict]) -> list[str]:
    """Per placebo arm: its own verdict against the baseline, and whether its variant's gain is matched by it."""
    if not ab.placebos:
        return []
    lines = [("A placebo arm puts a `Placebo` block (a residual pointwise MLP: no pooling, no gate, no attention) "
              "where each of the variant's blocks sits, with the block's parameter count; a gain the placebo "
              "matches is extra capacity, not attention."), ""]
    for p, v in ab.placebos.items():
        x, y = verdicts[p], verdicts[v]
        untested = [a.arm for a in (y, x) if a.status == NOT_TESTED]
        if untested:
            lines.append(f"- **{p}**: not tested: the attention check failed for {' and '.join(untested)} (see the "
                         "Attention check); no placebo comparison")
            continue
        sv, sp, sb = (stats["variants"][k] for k in (v, p, ab.baseline))
        size = ""
        if sv["params"] and sp["params"] and sb["params"]:
            size = f" (extra params {sp['params'] - sb['params']:+,} vs {v}'s {sv['params'] - sb['params']:+,})"
        iv = x.interval.text() if x.interval is not None else x.why
        lines.append(f"- **{p}**{size}: **{x.label}** vs `{ab.baseline}` (Δ {x.mean:+.4f}, {iv}, n = {x.n})")
        pair = against_placebo(ab, rows, v, p)
        if pair is None:
            lines.append(f"- `{v}` − `{p}`: n/a (fewer than 2 paired seeds)")
            continue
        mean, iv, n = pair
        words = verdict_words(iv.lo, iv.hi, n)[1]
        if y.status != BETTER:
            what = f"`{v}` shows no gain over the baseline ({y.label}), so there is none for the placebo to match"
        elif iv.lo > 0:
            what = f"`{v}` beats its placebo: its gain is more than the extra capacity"
        else:
            what = f"`{v}`'s gain is matched by its placebo: extra capacity, not attention"
        lines.append(f"- `{v}` − `{p}`: Δ {mean:+.4f}, {iv.text()}, n = {n} ({words}): {what}")
    return lines
