"""The comparisons with the baseline: paired Δ, the family and its joint level, the stopping decision, the check.

Used by the runner after every round (``decision``) and by the verdicts (``attn_yolo.ablate.statistics.verdicts``).

Every figure is a paired Δ mAP50-95 (arm − baseline, same seed). With seeds chosen by the data (``seeds: {min, max,
...}``) intervals and verdicts come from the sequential design of ``attn_yolo.ablate.statistics.sequential`` (alpha
spending over the planned looks by default), valid at whichever look the rule stopped; with a fixed list of seeds from
the hierarchical interval (``stats``), or the seeds-only t-interval where the runs have no per-image record.
"""

from __future__ import annotations

import math

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.statistics.stats import CONFIDENCE, PRIMARY


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
    from attn_yolo.ablate.statistics.sequential import joint_confidence

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
    from attn_yolo.ablate.statistics.sequential import decide_all

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


def paired_seeds(ab: Ablation, rows: list[dict], arm: str, n: int | None = None) -> list[int]:
    """The first ``n`` (all: None) seeds at which ``arm`` and the baseline both ran ok, in seed order."""
    ok = _ok(rows)
    seeds = [s for s in ab.seeds if (arm, s) in ok and (ab.baseline, s) in ok]
    return seeds if n is None else seeds[:n]


def treated(ab: Ablation, rows: list[dict], arm: str, r: dict) -> dict:
    """The attention check of ``arm`` (``attn_yolo.ablate.statistics.treatment``) against its reading ``r``:
    ``{"status": "passed" | "failed" | "n/a" | "not applicable", ...}`` with its figures, its attention health and, when
    failed, the likely cause. ``not applicable`` for an arm that adds no blocks to the baseline (another model)."""
    from attn_yolo.ablate.statistics import treatment
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
        trained = ab.start is not None and ab.start.kind != "init"
        out["cause"], out["remedy"] = treatment.likely_cause(out, health, trained)
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
    """The words of a failed attention check: ``not tested: <cause> (<deciding figure> < <resolution>; <controls>);
    <remedy>``."""
    what = "mean ablation" if t["criterion"] == "mean ablation" else "the identity in place of the blocks"
    if t["A"] == 0:
        head = f"{what} changes nothing (Δ mAP50-95 0 in every seed)"
    else:
        head = f"{what} Δ mAP50-95 {t['A']:.4f} < the ±{t['resolution']:.4f} this design resolves"
    controls = check_figures(t).split(", ")[1:]  # the deciding figure is the head's
    gamma = t.get("health", {}).get("gamma", math.nan)
    if math.isfinite(gamma):
        controls.append(f"|γ| {gamma:.3g}")
    remedy = f"; {t['remedy']}" if t.get("remedy") else ""
    return f"not tested: {t['cause']} ({'; '.join([head, *controls])}){remedy}"


def stopping(ab: Ablation, dec: dict | None) -> list[str]:
    """The stopping rule's lines: why it stopped (or not) and each arm's decision."""
    if dec is None:
        return []
    rule = ab.seed_rule
    prec = f", precision {rule.precision:g}" if rule.precision is not None else ""
    from attn_yolo.ablate.statistics.sequential import guarantee

    lines = [(f"Rule: min {rule.min}, max {rule.max} paired seeds{prec}, {rule.words()} (the verdicts above use it); "
              "each arm stops on its own at a look where its interval excludes 0, is narrower than the precision, or "
              f"reaches the maximum. {guarantee(rule, family_size(ab))}"), "",
             f"**{dec['text'][0].upper() + dec['text'][1:]}**", ""]
    lines += [f"- `{a}`: {d['text']}" for a, d in dec["variants"].items()]
    return lines
