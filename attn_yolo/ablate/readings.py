"""What the design reads off the runs: stopping decisions, yardstick fractions and placebo verdicts.

What the design reads off the runs: the stopping rule's decision over the paired seeds, the yardstick fractions and
the placebo verdicts, with their summary lines (used by the runner after every round and by the report).

Every figure is a paired Δ mAP50-95 (arm − baseline, same seed). With seeds chosen by the data (``seeds: {min, max,
...}``) intervals and verdicts come from the sequential design of ``attn_yolo.ablate.sequential`` (alpha spending
over the planned looks by default), valid at whichever look the rule stopped; with a fixed list of seeds from the
hierarchical interval (``stats``), or the seeds-only t-interval where the runs have no per-image record.
"""

from __future__ import annotations

import math

from attn_yolo.ablate.config import Ablation
from attn_yolo.ablate.stats import CONFIDENCE, PRIMARY, paired_difference, verdict


def _ok(rows: list[dict]) -> dict:
    return {(r["variant"], r["seed"]): r for r in rows if r["status"] == "ok" and r.get(PRIMARY) is not None}


def paired_diffs(ab: Ablation, rows: list[dict], arm: str, against: str | None = None) -> list[float]:
    """Per-seed Δ mAP50-95 of ``arm`` − ``against`` (default: the baseline) over the seeds both ran ok, in seed
    order."""
    ok, against = _ok(rows), against or ab.baseline
    return [ok[(arm, s)][PRIMARY] - ok[(against, s)][PRIMARY] for s in ab.seeds
            if (arm, s) in ok and (against, s) in ok]


def test_var(boot: dict | None, arm: str) -> float:
    """The validation set's variance common to all seeds for ``arm``'s Δ (the image bootstrap), 0 without records."""
    c = ((boot or {}).get("compare", {}).get(arm) or {}).get(PRIMARY)
    v = c["hier"]["test_var"] if c else 0.0
    return v if isinstance(v, float) and math.isfinite(v) and v >= 0 else 0.0


def arms(ab: Ablation) -> list[str]:
    """The arms compared with the baseline (variants, placebos, the reference)."""
    return [v.name for v in ab.variants if v.name != ab.baseline]


def family_size(ab: Ablation) -> int:
    """K, the comparisons whose verdicts hold jointly: every arm against the baseline (the placebo arms, before or after
    ``prepare`` adds them, included) and every variant against its placebo."""
    others = [v.name for v in ab.variants if v.name != ab.baseline and v.name not in ab.placebos]
    return max(1, len(others) + 2 * len(ab.placebos))


def joint_level(ab: Ablation) -> float:
    """The level of each of the ablation's K intervals so that all K hold at once with probability 95 %
    (``sequential.joint_confidence``)."""
    from attn_yolo.ablate.sequential import joint_confidence

    return joint_confidence(ab.seed_rule.confidence if ab.seed_rule else CONFIDENCE, family_size(ab))


def joint_rule(ab: Ablation):
    """The seed rule of each of the ablation's K intervals: ``ab.seed_rule`` at ``joint_level``."""
    import dataclasses

    return dataclasses.replace(ab.seed_rule, confidence=joint_level(ab))


def joint_words(ab: Ablation) -> str:
    """How the verdicts hold jointly, one sentence for the summary."""
    k = family_size(ab)
    conf = ab.seed_rule.confidence if ab.seed_rule else CONFIDENCE
    if k == 1:
        return f"one comparison, its interval at {100 * conf:g} %"
    return (f"{k} comparisons, jointly at {100 * conf:g} % (Bonferroni: each interval at "
            f"{100 * joint_level(ab):.3g} %): the chance of any false better / worse among them is at most "
            f"{100 * (1 - conf):g} %")


def decision(ab: Ablation, rows: list[dict], boot: dict | None = None) -> dict | None:
    """The stopping rule over every arm (``sequential.decide_all``) on the runs so far; None for a fixed list of
    seeds. ``{"stop", "n", "variants": {arm: decide(...)}, "text": why it stopped or goes on}``."""
    if ab.seed_rule is None:
        return None
    from attn_yolo.ablate.sequential import decide_all

    names = arms(ab)
    out = decide_all({a: paired_diffs(ab, rows, a) for a in names}, ab.seed_rule,
                     {a: test_var(boot, a) for a in names}, family_size(ab))
    per = out["variants"]
    n = out["n"]
    if not per:
        out["text"] = "no arm to compare with the baseline"
    elif out["stop"]:
        reasons = {d["reason"] for d in per.values()}
        if "max" in reasons:
            why = f"the maximum of {ab.seed_rule.max} seeds"
        elif reasons == {"settled"}:
            why = "every arm settled (its interval excludes 0)"
        elif reasons == {"precision"}:
            why = f"every interval is narrower than the requested precision {ab.seed_rule.precision:g}"
        else:
            why = "every arm settled (its interval excludes 0) or is narrower than the requested precision"
        out["text"] = f"stopped after {n} paired seed{'s' * (n != 1)}: {why}"
    else:
        going = [a for a, d in per.items() if not d["stop"]]
        out["text"] = (f"not finished after {n} paired seed{'s' * (n != 1)} (at most {ab.seed_rule.max}): "
                       f"{', '.join(going)} not decided; run the same command again to continue")
    return out


def reading(ab: Ablation, rows: list[dict], boot: dict | None, arm: str, dec: dict | None = None) -> dict:
    """``arm``'s Δ mAP50-95 against the baseline: ``{"mean", "lo", "hi", "n", "verdict", "interval"}`` from the
    confidence sequence (seeds chosen by the data), else the hierarchical or seeds-only interval."""
    if dec is not None and arm in dec["variants"]:
        d = dec["variants"][arm]
        from attn_yolo.ablate.sequential import kind

        return {"mean": d["mean"], "lo": d["lo"], "hi": d["hi"], "n": d["n"], "verdict": d["verdict"],
                "interval": kind(ab.seed_rule)}  # fmt: skip
    c = ((boot or {}).get("compare", {}).get(arm) or {}).get(PRIMARY)
    if c is not None:
        h = c["hier"]
        return {"mean": h["mean"], "lo": h["lo"], "hi": h["hi"], "n": h["n"], "verdict": c["verdict"],
                "interval": "hierarchical"}  # fmt: skip
    d = paired_difference(paired_diffs(ab, rows, arm), joint_level(ab))
    return {**d, "verdict": verdict(d), "interval": "seeds only"}


def paired_seeds(ab: Ablation, rows: list[dict], arm: str, n: int | None = None) -> list[int]:
    """The first ``n`` (all: None) seeds at which ``arm`` and the baseline both ran ok, in seed order."""
    ok = _ok(rows)
    seeds = [s for s in ab.seeds if (arm, s) in ok and (ab.baseline, s) in ok]
    return seeds if n is None else seeds[:n]


def treated(ab: Ablation, rows: list[dict], arm: str, r: dict) -> dict:
    """The attention check of ``arm`` (``attn_yolo.ablate.treatment``) against its reading ``r``: ``{"status":
    "passed" | "failed" | "n/a" | "not applicable", ...}`` with its figures, its attention health and, when failed,
    the likely cause. ``not applicable`` for an arm that adds no blocks to the baseline (another model)."""
    from attn_yolo.ablate import treatment
    from attn_yolo.health.report import arm_health

    v = next((x for x in ab.variants if x.name == arm), None)
    if v is None or not v.new_blocks:
        return {"status": "not applicable"}
    seeds = paired_seeds(ab, rows, arm, r["n"])
    out = treatment.check(treatment.effect(rows, arm, seeds), r["lo"], r["hi"],
                          (ab.treatment.threshold if ab.treatment else treatment.THRESHOLD))
    health = arm_health([x for x in rows if x["variant"] == arm and x["seed"] in seeds])
    out["health"] = health
    if out["status"] == "failed":
        out["cause"] = treatment.likely_cause(out, health)
    return out


def check_figures(t: dict) -> str:
    """The attention check's figures in words: the deciding effect, then the identity and re-initialisation
    controls beside it (``mean ablation Δ 0.0003, identity Δ 0.0240, re-initialised Δ 0.0011``)."""
    first = "mean ablation" if t["criterion"] == "mean ablation" else "knock-out"
    figs = [f"{first} Δ {t['A']:.4f}"]
    figs += [f"{w} Δ {t[k]:.4f}" for k, w in (("knockout", "identity"), ("reinit", "re-initialised"))
             if not (k == "knockout" and t["criterion"] == "knock-out") and math.isfinite(t.get(k, math.nan))]
    return ", ".join(figs)


def not_tested(t: dict) -> str:
    """The words of a failed attention check: ``not tested: <cause> (<deciding figure> < <resolution>; <controls>)``."""
    what = "mean ablation" if t["criterion"] == "mean ablation" else "the identity in place of the blocks"
    if t["A"] == 0:
        head = f"{what} changes nothing (Δ mAP50-95 0 in every seed)"
    else:
        head = f"{what} Δ mAP50-95 {t['A']:.4f} < the ±{t['resolution']:.4f} this design resolves"
    controls = check_figures(t).split(", ")[1:]  # the deciding figure is the head's
    gamma = t.get("health", {}).get("gamma", math.nan)
    if math.isfinite(gamma):
        controls.append(f"|γ| {gamma:.3g}")
    return f"not tested: {t['cause']} ({'; '.join([head, *controls])})"


def _ci(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "[unbounded]"
    return f"[{lo:+.4f}, {hi:+.4f}]"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if abs(x) >= 0.1 else f"{100 * x:.2g} %"


def yardstick(ab: Ablation, rows: list[dict], stats: dict, boot: dict | None, dec: dict | None) -> list[str]:
    """Per variant: its Δ as a fraction of the reference's Δ, and its extra GFLOPs as a fraction of the reference's."""
    ref = ab.reference
    if ref is None:
        return []
    r = reading(ab, rows, boot, ref, dec)
    g = {v: stats["variants"][v]["gflops"] for v in stats["variants"]}
    head = (f"Yardstick: the reference `{ref}` vs `{ab.baseline}`: Δ mAP50-95 {r['mean']:+.4f}, {r['interval']} "
            f"{int(CONFIDENCE * 100)}% CI {_ci(r['lo'], r['hi'])} ({r['verdict']}), GFLOPs "
            f"{g.get(ref) or math.nan:.3f} vs {g.get(ab.baseline) or math.nan:.3f}")
    lines = ["", "## Yardstick", "", head, ""]
    if not (r["n"] and r["mean"] > 0 and r["lo"] > 0):
        lines.append(f"- no fractions: the reference's gain is not established ({r['verdict']}); a yardstick needs a "
                     "change known to help (e.g. the next model scale) and enough training to show it")
        return lines
    extra_ref = (g.get(ref) or 0) - (g.get(ab.baseline) or 0)
    for v in arms(ab):
        if v == ref or v in ab.placebos:
            continue
        x = reading(ab, rows, boot, v, dec)
        if not x["n"]:
            continue
        if treated(ab, rows, v, x)["status"] == "failed":
            lines.append(f"- **{v}**: not tested (see the Attention check): no fraction of the `{ref}` gain")
            continue
        frac = x["mean"] / r["mean"]
        extra = (g.get(v) or 0) - (g.get(ab.baseline) or 0)
        cost = (f"at {_pct(extra / extra_ref)} of its extra GFLOPs ({extra:+.4f} vs {extra_ref:+.4f})"
                if extra_ref > 0 else f"(extra GFLOPs {extra:+.4f}; the reference adds none)")
        lines.append(f"- **{v}**: {_pct(frac)} of the `{ref}` gain {cost}; Δ {x['mean']:+.4f} {_ci(x['lo'], x['hi'])}"
                     f" vs {r['mean']:+.4f}, {x['verdict']}")
    return lines


def placebo(ab: Ablation, rows: list[dict], stats: dict, boot: dict | None, dec: dict | None) -> list[str]:
    """Per placebo arm: its own verdict against the baseline, and whether its variant's gain is matched by it."""
    if not ab.placebos:
        return []
    lines = ["", "## Placebo (capacity control)", "",
             ("A placebo arm puts a `Placebo` block (a residual pointwise MLP: no pooling, no gate, no attention) "
              "where each of the variant's blocks sits, with the block's parameter count; a gain the placebo "
              "matches is extra capacity, not attention."), ""]
    for p, v in ab.placebos.items():
        x, y = reading(ab, rows, boot, p, dec), reading(ab, rows, boot, v, dec)
        untested = [a for a, r in ((v, y), (p, x)) if r["n"] and treated(ab, rows, a, r)["status"] == "failed"]
        if untested:
            lines.append(f"- **{p}**: not tested: the attention check failed for {' and '.join(untested)} (see the "
                         "Attention check); no placebo comparison")
            continue
        sv, sp, sb = (stats["variants"][k] for k in (v, p, ab.baseline))
        size = ""
        if sv["params"] and sp["params"] and sb["params"]:
            size = f" (extra params {sp['params'] - sb['params']:+,} vs {v}'s {sv['params'] - sb['params']:+,})"
        lines.append(f"- **{p}**{size}: **{x['verdict']}** vs `{ab.baseline}` (Δ {x['mean']:+.4f}, {x['interval']} "
                     f"CI {_ci(x['lo'], x['hi'])}, n = {x['n']})")
        diffs = paired_diffs(ab, rows, v, p)
        if len(diffs) < 2:
            lines.append(f"- `{v}` − `{p}`: n/a ({len(diffs)} paired seed(s))")
            continue
        if ab.seed_rule is not None:
            from attn_yolo.ablate.sequential import confidence_sequence
            from attn_yolo.ablate.sequential import kind as sequential_kind

            lo, hi = confidence_sequence(diffs, joint_rule(ab))
            kind = f"joint {sequential_kind(ab.seed_rule)}"
        else:
            d = paired_difference(diffs, joint_level(ab))
            lo, hi, kind = d["lo"], d["hi"], "seeds only"
        mean = sum(diffs) / len(diffs)
        if y["verdict"] != "better":
            what = f"`{v}` shows no gain over the baseline ({y['verdict']}), so there is none for the placebo to match"
        elif lo > 0:
            what = f"`{v}` beats its placebo: its gain is more than the extra capacity"
        else:
            what = f"`{v}`'s gain is matched by its placebo: extra capacity, not attention"
        lines.append(f"- `{v}` − `{p}`: Δ {mean:+.4f}, {kind} CI {_ci(lo, hi)}, n = {len(diffs)}: {what}")
    return lines


def stopping(ab: Ablation, dec: dict | None) -> list[str]:
    """The stopping rule's lines: why it stopped (or not) and each arm's decision."""
    if dec is None:
        return []
    rule = ab.seed_rule
    prec = f", precision {rule.precision:g}" if rule.precision is not None else ""
    from attn_yolo.ablate.sequential import guarantee

    lines = ["", "## Seeds chosen by the data", "",
             (f"Rule: min {rule.min}, max {rule.max} paired seeds{prec}, {rule.words()} (the verdicts above use it); "
              "each arm stops on its own at a look where its interval excludes 0, is narrower than the precision, or "
              f"reaches the maximum. {guarantee(rule, family_size(ab))}"), "",
             f"**{dec['text'][0].upper() + dec['text'][1:]}**", ""]
    lines += [f"- `{a}`: {d['text']}" for a, d in dec["variants"].items()]
    return lines


def treatment_lines(ab: Ablation, rows: list[dict], boot: dict | None, dec: dict | None) -> list[str]:
    """The summary's first section: per arm that adds blocks, whether what they attend to mattered to its model
    enough for a verdict (``treated``), with the criterion in one sentence."""
    from attn_yolo.ablate.treatment import THRESHOLD

    th = ab.treatment.threshold if ab.treatment else THRESHOLD
    lines = ["## Attention check: did the blocks attend?", "",
             (f"An arm's verdict needs its blocks' attention to matter to its own model: its mean-ablation effect "
              f"(mean over seeds of |mAP50-95 of its best.pt − the same with every gate and attention map of its new "
              f"blocks held at its mean over the validation images|) must be at least {th:g} × the half-width of "
              f"the interval that decides its verdict (the resolution of this design); otherwise the arm is **not "
              f"tested**: its blocks act as a fixed rescale, and its Δ says nothing about attention. Beside it, the "
              f"identity in place of the blocks and their weights re-initialised (γ kept). Blocks without gates or "
              f"attention (a placebo) are checked by the identity in their place."), ""]
    shown = 0
    for arm in arms(ab):
        r = reading(ab, rows, boot, arm, dec)
        if not r["n"] or arm in (boot or {}).get("nothing", ()):  # no comparison: nothing to check
            continue
        t = treated(ab, rows, arm, r)
        if t["status"] == "not applicable":
            continue
        shown += 1
        lines.append(f"- **{arm}**: {_check_line(t, th)}")
    return lines + [""] if shown else []


def _check_line(t: dict, th: float) -> str:
    """One arm's attention check in the summary's first section."""
    h = t.get("health", {})
    health = ", ".join(x for x in (
        f"|γ| {h['gamma']:.3g}" if math.isfinite(h.get("gamma", math.nan)) and t["status"] != "failed" else "",
        f"gate entropy {h['entropy']:.3f}" if math.isfinite(h.get("entropy", math.nan)) else "",
        f"gates flagged uniform in {round(h['uniform'] * h['runs'])}/{h['runs']} seeds" if h.get("runs") else "",
        f"switched off in {round(h['switched_off'] * h['runs'])}/{h['runs']} seeds" if h.get("runs") else "",
    ) if x)  # fmt: skip
    health = f"; attention health: {health}" if health else ""
    if t["status"] == "passed":
        return f"**passed**: {check_figures(t)}; {t['A']:.4f} >= {th:g} × ±{t['resolution']:.4f}{health}"
    if t["status"] == "failed":
        return f"**{not_tested(t)}**{health}"
    return f"n/a: {t['why']} (the verdict stands without the check){health}"
