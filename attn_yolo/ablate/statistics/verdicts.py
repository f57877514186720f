"""Each arm's verdict against the baseline, computed once as data: what every report, table and plot reads.

A ``Verdict`` holds the interval that decides (its kind, level and bounds), the other intervals marked as not deciding,
the words, the attention check and the cost. ``judge`` is the one rule (and ``STATUSES`` the one word list) that turns
an interval into words: the ablation's summary, its plots, the search's table and ``explain.md`` all go through it.
``verdicts.json`` in the ablation's out folder holds the verdicts for the tools that read them later (``explain``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace

from attn_yolo.ablate.config.ablation import Ablation
from attn_yolo.ablate.statistics import comparisons, seqpower
from attn_yolo.ablate.statistics.stats import (
    POWER,
    PRIMARY,
    TARGET_DELTA,
    detectable_delta,
    detectable_from_t,
    paired_difference,
    seeds_needed,
    verdict,
)
from attn_yolo.text import bracket

VERDICTS_NAME = "verdicts.json"
# The one word list: a verdict's status is one of these, its words start with it.
BETTER, WORSE, NO_DIFFERENCE, INCONCLUSIVE = "better", "worse", "no difference", "inconclusive"
NOT_TESTED, LEARNED_NOTHING, NA = "not tested", "learned nothing", "n/a"
STATUSES = (BETTER, WORSE, NO_DIFFERENCE, INCONCLUSIVE, NOT_TESTED, LEARNED_NOTHING, NA)
COMPARED = (BETTER, WORSE, NO_DIFFERENCE, INCONCLUSIVE)  # the statuses an interval decides
# The intervals' names (``sequential.kind`` adds ``group-sequential`` and ``anytime-valid``).
HIERARCHICAL, SEEDS_ONLY, IMAGES_ONLY, FIXED_N = "hierarchical", "seeds-only", "images-only", "fixed-n hierarchical"


def level_words(level: float) -> str:
    """An interval's level as the reports write it: ``95%``, ``98.3%``."""
    return f"{100 * level:.3g}%"


@dataclass(frozen=True)
class Interval:
    """One interval of an arm's Δ mAP50-95 (arm − baseline, mean over paired seeds).

    Attributes:
        kind: its name (``hierarchical``, ``seeds-only``, ``images-only``, ``fixed-n hierarchical``,
            ``group-sequential``, ``anytime-valid``).
        level: its confidence level (each interval of the family, Bonferroni: ``comparisons.joint_level``).
        lo, hi: its bounds (mAP units; ±inf: unbounded, NaN: none).
        deciding: whether it decides the verdict (exactly one interval of a compared arm does).
        p: the two-sided p-value that goes with it (NaN: none).
    """

    kind: str
    level: float
    lo: float
    hi: float
    deciding: bool = False
    p: float = math.nan

    def text(self, dec: int = 4) -> str:
        """``hierarchical 95% CI [+0.0012, +0.0034]``."""
        return f"{self.kind} {level_words(self.level)} CI {bracket(self.lo, self.hi, dec)}"


@dataclass
class Verdict:
    """One arm's verdict against the baseline on mAP50-95, the primary metric.

    Attributes:
        arm: its name.
        status: one of ``STATUSES``.
        words: what the reports print (``no difference beyond ±0.0040``, ``not tested: <cause> (...)``, ...).
        mean: Δ mAP50-95, mean over the paired seeds (NaN: none).
        n: paired seeds.
        interval: the interval that decides (None: no comparison, ``why`` says why).
        others: the other intervals of the same Δ, none of which decides.
        check: the attention check (``comparisons.treated``; ``{}`` without a comparison).
        cost: the cost words (params, GFLOPs, latency).
        why: why there is no comparison, or why the image-level intervals are missing.
        detectable: the smallest |Δ| the deciding interval's design detects with 80% power (NaN: not known).
        power: the power line of the summary ("" without per-image records).
    """

    arm: str
    status: str
    words: str
    mean: float = math.nan
    n: int = 0
    interval: Interval | None = None
    others: tuple[Interval, ...] = ()
    check: dict = field(default_factory=dict)
    cost: tuple[str, ...] = ()
    why: str = ""
    detectable: float = math.nan
    power: str = ""

    @property
    def compared(self) -> bool:
        """Whether an interval decides it (better, worse, no difference, inconclusive)."""
        return self.status in COMPARED

    @property
    def label(self) -> str:
        """The short words for a table cell or a plot's label: ``not tested`` without its cause, else ``words``."""
        return NOT_TESTED if self.status == NOT_TESTED else self.words

    def line(self) -> str:
        """The verdict line of the summary: Δ, the deciding interval (the only one), the words, the check, the cost."""
        if self.interval is None:
            return f"- **{self.arm}**: **{self.words}**: {self.why}"
        check = {"passed": "; attention check passed", "failed": ""}.get(self.check.get("status"), "")
        cost = f"; cost: {', '.join(self.cost)}" if self.cost else ""
        return (f"- **{self.arm}**: **{self.words}** (Δ {self.mean:+.4f}, {self.interval.text()}, n = {self.n} paired "
                f"seeds{check}){cost}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        iv = d.get("interval")
        return cls(**{**d, "interval": Interval(**iv) if iv else None,
                      "others": tuple(Interval(**o) for o in d.get("others", ())), "cost": tuple(d.get("cost", ()))})


def verdict_words(lo: float, hi: float, n: int, detectable: float = math.nan) -> tuple[str, str]:
    """The one rule: ``(status, words)`` of a deciding interval [lo, hi] over ``n`` paired seeds (higher is better).

    ``better`` / ``worse`` when it excludes 0; one that contains 0 reads ``no difference beyond ±w`` when it lies
    within ±``TARGET_DELTA`` (w: its larger bound in absolute value, rounded up at the 4th decimal), else
    ``inconclusive: this design detects only |Δ| ≥ X`` (X: ``detectable``, the smallest Δ the design detects with 80%
    power), never a bare "no detectable difference"; ``n/a`` below 2 paired seeds.
    """
    raw = verdict({"n": n, "lo": lo, "hi": hi})
    if n < 2:
        return NA, raw
    if raw in (BETTER, WORSE):
        return raw, raw
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE, "inconclusive: the interval is unbounded"
    w = max(abs(lo), abs(hi))
    if w <= TARGET_DELTA:
        return NO_DIFFERENCE, f"no difference beyond ±{math.ceil(w * 1e4 - 1e-9) / 1e4:.4f}"
    if math.isfinite(detectable):
        return INCONCLUSIVE, f"inconclusive: this design detects only |Δ| ≥ {detectable:.4f}"
    return INCONCLUSIVE, f"inconclusive: the interval spans {bracket(lo, hi)}"


def judge(lo: float, hi: float, n: int, check: dict | None = None, detectable: float = math.nan) -> tuple[str, str]:
    """``verdict_words`` of the deciding interval, unless the attention check failed: then ``not tested`` (whatever
    the interval) with its cause (``comparisons.not_tested``)."""
    if n >= 2 and (check or {}).get("status") == "failed":
        return NOT_TESTED, comparisons.not_tested(check)
    return verdict_words(lo, hi, n, detectable)


def cost_words(b: dict, s: dict, timing: dict | None = None, arm: str = "") -> tuple[str, ...]:
    """An arm's cost beside the baseline: params and GFLOPs in %, and its latency Δ where it was timed (its interval
    in the summary's latency section, ``latency.summary_lines``)."""
    cost = []
    if b["params"] and s["params"]:
        cost.append(f"params {100 * (s['params'] / b['params'] - 1):+.2f}%")
    if b["gflops"] and s["gflops"]:
        cost.append(f"GFLOPs {100 * (s['gflops'] / b['gflops'] - 1):+.2f}%")
    d = (timing or {}).get("diffs", {}).get(arm)  # timed apart from training (attn_yolo.ablate.runs.latency)
    if d is not None:  # its interval is in the latency section: the verdict line holds one interval, the Δ mAP's
        cost.append(f"latency {d['mean']:+.2f} ms ({d['words']})")
    return tuple(cost)


def power_line(ab: Ablation, v: str, h: dict, seq: dict | None, n_images: int) -> tuple[str, float]:
    """The power line of arm ``v`` for the interval that decides its verdict (the joint sequential one with seeds
    chosen by the data, else the hierarchical one at the joint level), and the smallest |Δ| it detects with
    ``POWER``: ``(line, detectable)``. With seeds chosen by the data both figures are the sequential design's
    (``seqpower.detectable``, ``seqpower.seeds_for``), never the fixed-n interval's."""
    from attn_yolo.ablate.statistics.sequential import kind

    level = comparisons.joint_level(ab)
    sv, tv, n = h["seed_var"], h["test_var"], h["n"]
    sd = f"(SD of Δ over seeds {math.sqrt(sv):.4f}, of the validation set's common part {math.sqrt(tv):.4f})"
    if seq is not None:
        rule = comparisons.joint_rule(ab)
        mde = seqpower.detectable(sv, n, rule, tv, POWER)
        need = seqpower.seeds_for(TARGET_DELTA, sv, rule, tv, POWER)
        half = (seq["hi"] - seq["lo"]) / 2
        hw = f"resolves ±{half:.4f}" if math.isfinite(half) else "is unbounded"
        det = f"detects |Δ| >= {mde:.4f}" if math.isfinite(mde) else "detects no Δ yet (unbounded)"
        if need:
            need = (f"Δ = {TARGET_DELTA} needs {need} paired seeds (this design fitted to seeds.max {need}; now "
                    f"{ab.seed_rule.max})")
        elif seqpower.seeds_for(TARGET_DELTA, 0.0, rule, tv, POWER) is None:  # not even without seed noise
            need = f"Δ = {TARGET_DELTA} is out of reach by adding seeds: use more validation images"
        else:  # the seeds disagree too much
            need = f"Δ = {TARGET_DELTA} needs more than {seqpower.SEEDS_LIMIT} paired seeds"
        return (f"- `{v}`: with {n} seeds and {n_images} images the interval that decides ({kind(rule)}, at "
                f"{level_words(level)}) {hw} and {det} with {int(POWER * 100)}% power; {need} {sd}", mde)
    mde = detectable_delta(sv, tv, n, 1 - level)
    need = seeds_needed(sv, tv, TARGET_DELTA, alpha=1 - level)  # at the level whose interval decides
    need = (f"Δ = {TARGET_DELTA} needs {need} paired seeds" if need else f"Δ = {TARGET_DELTA} is out of reach by "
            "adding seeds, the validation set's own noise is too large: use more validation images")
    mde_s = "n/a" if math.isnan(mde) else f"{mde:.4f}"
    return (f"- `{v}`: with {n} seeds and {n_images} images this design detects |Δ| >= {mde_s} with "
            f"{int(POWER * 100)}% power (the hierarchical interval that decides, at {level_words(level)}); {need} "
            f"{sd}", mde)


def _no_comparison(ab: Ablation, rows: list[dict], stats: dict, boot: dict, v: str) -> Verdict | None:
    """The verdict of an arm that cannot be compared (fewer than 2 paired seeds, it or the baseline learned
    nothing), else None."""
    d = stats["diffs"][v][PRIMARY]
    if v in boot["nothing"]:
        return Verdict(v, LEARNED_NOTHING, LEARNED_NOTHING, d["mean"], d["n"],
                       why="P, R, mAP50 and mAP50-95 are 0 in every run; no comparison")
    if ab.baseline in boot["nothing"]:
        return Verdict(v, NA, NA, d["mean"], d["n"],
                       why=f"the baseline `{ab.baseline}` learned nothing (all its metrics are 0); no comparison")
    if d["n"] < 2:
        mean = f" (Δ {d['mean']:+.4f} from 1 seed)" if d["n"] == 1 else ""
        return Verdict(v, NA, NA, d["mean"], d["n"], why=f"{d['n']} seed(s) with ok runs of both, needs >= 2{mean}")
    return None


def arm_verdict(ab: Ablation, rows: list[dict], stats: dict, boot: dict, dec: dict | None, timing: dict | None,
                v: str) -> Verdict:
    """Arm ``v``'s verdict: the interval that decides is the sequential one (seeds chosen by the data), else the
    hierarchical one (per-image records), else the seeds-only t-interval; every one at the joint level."""
    from attn_yolo.ablate.statistics.sequential import kind

    none = _no_comparison(ab, rows, stats, boot, v)
    if none is not None:
        return none
    level = comparisons.joint_level(ab)
    c = boot["compare"].get(v, {}).get(PRIMARY)
    seq = dec["variants"].get(v) if dec is not None else None
    t = paired_difference(comparisons.paired_diffs(ab, rows, v), level) if c is None else c["t"]
    others = [Interval(SEEDS_ONLY, level, t["lo"], t["hi"], p=t["p"])]
    power, why = "", "" if c is not None else boot["why"].get(v, "no per-image records")
    if c is not None:
        h = c["hier"]
        power, mde = power_line(ab, v, h, seq, boot["n_images"])
        hier = Interval(FIXED_N if seq is not None else HIERARCHICAL, level, h["lo"], h["hi"], p=h["p"])
        others = [hier, *others, Interval(IMAGES_ONLY, level, *c["image"])]
        mean, n = h["mean"], h["n"]
    else:
        mde = math.nan if seq is not None else detectable_from_t(t["lo"], t["hi"], t["n"], level)
        mean, n = t["mean"], t["n"]
    if seq is not None:  # its Δ and n are those of the look the rule stopped at
        deciding = Interval(kind(ab.seed_rule), level, seq["lo"], seq["hi"], True)
        mean, n = seq["mean"], seq["n"]
    else:
        deciding = replace(others.pop(0), deciding=True)
    check = comparisons.treated(ab, rows, v, {"lo": deciding.lo, "hi": deciding.hi, "n": n})
    status, words = judge(deciding.lo, deciding.hi, n, check, mde)
    b, s = stats["variants"][ab.baseline], stats["variants"][v]
    return Verdict(v, status, words, mean, n, deciding, tuple(others), check, cost_words(b, s, timing, v), why, mde,
                   power)


def all_verdicts(ab: Ablation, rows: list[dict], stats: dict, boot: dict | None = None, timing: dict | None = None,
             dec: dict | None = None) -> dict[str, Verdict]:
    """Every arm's verdict against the baseline (config order), computed once for every output.

    Args:
        ab: the ablation. rows: the planned runs' records. stats: ``stats.summarize`` of ``rows``.
        boot: ``report.analyze`` of ``rows`` (None: seeds-only intervals).
        timing: ``latency.measure``'s result (None: not timed).
        dec: ``comparisons.decision`` of ``rows`` (computed here when None and the seeds are chosen by the data).
    """
    boot = boot or {"compare": {}, "why": {}, "nothing": set(), "names": [], "n_images": 0}
    if dec is None:
        dec = comparisons.decision(ab, rows, boot)
    return {v: arm_verdict(ab, rows, stats, boot, dec, timing, v) for v in comparisons.arms(ab)}


def write_verdicts(path, ab: Ablation, found: dict[str, Verdict]) -> None:
    """``verdicts.json``: the baseline, the joint level and every arm's verdict (``Verdict.to_dict``)."""
    from pathlib import Path

    from attn_yolo.files import atomic_write

    data = {"baseline": ab.baseline, "family": comparisons.family_size(ab), "level": comparisons.joint_level(ab),
            "verdicts": {v: x.to_dict() for v, x in found.items()}}
    text = json.dumps(data, indent=1, default=lambda o: sorted(o) if isinstance(o, set) else str(o))
    atomic_write(path, lambda p: Path(p).write_text(text))


def read_verdicts(path) -> tuple[dict[str, Verdict], float] | None:
    """The verdicts ``write_verdicts`` wrote and the level of each interval, or None where there is no readable
    file."""
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text())
        return {v: Verdict.from_dict(d) for v, d in data["verdicts"].items()}, float(data["level"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # missing, not JSON, not the shape
        return None
