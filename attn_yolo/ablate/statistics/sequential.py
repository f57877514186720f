"""Seeds chosen by the data: the stopping rule on a sequential design for the mean paired Δ, fitted to its looks.

The data are the per-seed differences of the paired design, Δ_i = variant − baseline of seed i (same seed, same
validation set). After each new seed the rule asks whether to train another; the interval it reads must therefore
hold at a time the data chose, which a t-interval re-checked after every seed does not (``naive_decide``: its
error rate grows with every look, see tests/test_sequential.py). The rule looks only at its planned looks
(``SeedRule.planned``: after ``min`` seeds, then after each one up to ``max``, or ``looks``), and the interval of
each look, with probability ≥ 1 − α, holds the true mean at every look at once: so at any stopping time among them,
whatever made the rule stop (a verdict, a width, the maximum, an arm on its own, a user's Ctrl-C). Between looks
the interval of the last look stands (``factors``).

Designs (``SeedRule.design``; the boundaries in ``attn_yolo.ablate.statistics.spending``):

- ``spending`` (default): repeated confidence intervals of a group-sequential design with Lan–DeMets alpha spending
  on the studentised Δ (Lan & DeMets 1983; O'Brien & Fleming 1979; Pocock 1977): x̄ ± c_j·s/√n_j at look j. With
  O'Brien–Fleming-type spending (default) the last look costs about 1.1× the fixed-n t-interval at 6 seeds, against
  1.8× for the sequence below (scripts/sequential_power.py, BENCHMARKS.md section 18).
- ``cs``: a confidence sequence, valid at every n, tuned to ``max`` (``tuned_tau2``), described below.

Both are fitted to ``max`` (its information fraction, its tuning): a rerun may not change the design on the same
runs (``rerun.check_seed_design``).

The confidence sequence: the scale-invariant normal-mixture t-confidence sequence for a Gaussian mean with unknown
variance (Lai, "On confidence sequences", Ann. Statist. 1976; Wang & Ramdas, "Anytime-valid t-tests and confidence
sequences for Gaussian means with unknown variance", Sequential Analysis 2023). For a candidate mean μ, the
likelihood ratio of the scale-invariant part of the data (x − μ up to a positive factor; Haar prior dc/c on σ,
Wijsman's representation) mixed over the standardized effect θ = (mean − μ)/σ ~ N(0, τ²) is, with n seeds,
d = x̄ − μ and SS = Σ(x_i − x̄)²,

    M_n(μ) = (1 + nτ²)^(−1/2) · (1 − a_n ρ_n)^(−n/2),   ρ_n = n d² / (SS + n d²),   a_n = nτ² / (1 + nτ²),

a nonnegative martingale under μ with M_1 = 1. By Ville's inequality P(∃n: M_n(μ) ≥ 1/α) ≤ α, so
{μ: M_n(μ) < 1/α} is a confidence sequence. Solved for μ it is x̄ ± sqrt(r_n / (1 − r_n) · SS / n), with
r_n = (1 − (α² / (1 + nτ²))^(1/n)) / a_n: unbounded while r_n ≥ 1 (too few seeds), then closing like
sqrt(log n / n). Earlier versions used τ² = ``PRIOR_SCALE2`` = 10 at every n (a half-width of 5.4 s/√n at 5 seeds
and 4.2 s/√n at 10; the fixed-n t-interval: 2.8 and 2.3); ``design: cs`` chooses τ² to make it tightest at ``max``.
Both designs are exact for Gaussian Δ (a sum of many small training effects); the data are assumed i.i.d. over
seeds.

What it covers: the Δ of seeds are exchangeable draws *on this validation set*, so the design's interval covers
the mean Δ over seeds on these images. The per-seed spread already holds the part of the test-set noise that
differs between seeds; the part common to all seeds (images that happen to favour the variant favour it for every
seed, see ``stats.hierarchical_interval``) no number of seeds removes. Given its variance ``test_var`` (the
bootstrap's g), the interval for the population over images is the seeds' interval at level
α·(1 − ``TEST_SHARE``), widened by z_{1 − α·TEST_SHARE/2}·√test_var (the fixed validation set's offset: one normal
interval, valid at every n since the offset does not change with n); by a union bound both hold, at every n at
once, with probability ≥ 1 − α. With ``test_var`` = 0 it is the seeds' interval at the full α. The 1/5 share is
fixed before the data (a data-chosen split would break the guarantee): at the warm-start figures (seed SD ≈ 0.008)
the seeds' term dominates, and it costs 6 % of width at 5 seeds. ``test_var`` is the bootstrap's estimate,
re-estimated as seeds are added: its own error is not covered (as in the hierarchical interval).

Several comparisons (variants, placebos, the reference, each variant against its placebo): the verdicts hold
*jointly*. Each of the K comparisons of one ablation gets its design's intervals at level 1 − α/K (Bonferroni's
split of α, ``joint_confidence``); by the union bound all K hold, at every look at once, with probability ≥ 1 − α,
so the family-wise error rate (the chance of any false better / worse verdict among all K) is ≤ α whatever made the
rule stop. A one-comparison ablation (K = 1) is unchanged. The family-wise rate, rather than the false discovery
rate (e-BH), because an ablation reports every verdict it reaches as a finding and K is small (a handful of arms):
a user reads "CBAM better, SE worse" as two claims, each of which should hold. The split needs no assumption about
how the comparisons depend on each other (they share the baseline's runs).
``decide_all`` runs another seed while any comparison continues. ``simulate_family`` checks the joint rate, with the
baseline's seed noise shared by every variant as in a real ablation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from attn_yolo.ablate.statistics.spending import DESIGNS, SPENDING, boundaries
from attn_yolo.args import Key, Schema
from attn_yolo.text import bracket

PRIOR_SCALE2 = 10.0  # τ² of earlier versions' sequence: the mixture's variance of the effect (mean Δ − μ) / σ
TEST_SHARE = 0.2  # of α given to the validation set's common offset when test_var > 0
REASONS = ("continue", "settled", "precision", "max")


@dataclasses.dataclass
class SeedRule:
    """When to stop adding paired seeds (config: ``seeds: {min: 3, max: 6, precision: 0.005, design: spending}``).

    Args:
        min: seeds always run (≥ 2; the rule never stops before).
        max: seeds at most (≥ min; the rule always stops there).
        precision: stop once the interval's full width (hi − lo, mAP units) is below it; None = only a verdict
            or ``max`` stops.
        confidence: of the interval (0 < confidence < 1).
        design: ``spending`` (alpha spending over the looks) or ``cs`` (a confidence sequence tuned to ``max``);
            ``attn_yolo.ablate.statistics.spending``.
        spending: the spending function of ``design: spending``: ``obf`` (O'Brien–Fleming type) or ``pocock``.
        looks: the seed counts at which the rule may stop (``max`` always one); None: every count from ``min``.

    Raises:
        ValueError: every value out of range (``problems``), one line each, each naming its key (``seeds.min`` ...).
    """

    min: int = 3
    max: int = 10
    precision: float | None = None
    confidence: float = 0.95
    design: str = "spending"
    spending: str = "obf"
    looks: list[int] | None = None

    def __post_init__(self):
        self.design, self.spending = (SEED_RULE[k].value(getattr(self, k)) for k in ("design", "spending"))  # CS → cs
        if found := self.problems():
            raise ValueError("\n".join(found))

    def problems(self) -> list[str]:
        """Every value out of range, each naming its key (``seed_rule_problems``); empty if the rule is valid."""
        return seed_rule_problems(dataclasses.asdict(self))

    def planned(self) -> tuple[int, ...]:
        """The looks: the seed counts at which the rule may stop, ``max`` always among them."""
        return tuple(sorted({*(int(n) for n in (self.looks or range(self.min, self.max + 1))), int(self.max)}))

    def words(self) -> str:
        """The design in a few words, for the summary."""
        looks = self.planned()
        at = f"{looks[0]} to {looks[-1]} paired seeds" if self.looks is None else f"{', '.join(map(str, looks))} seeds"
        if self.design == "cs":
            return f"a confidence sequence tuned to {self.max} seeds, read at the looks after {at}"
        kind = "an O'Brien–Fleming" if self.spending == "obf" else "a Pocock"
        return f"{kind}-type alpha-spending design over the looks after {at}"


def _looks_shape(lk) -> str | None:
    """``looks`` as a list: increasing seed counts (their range against min and max is ``seed_rule_problems``')."""
    ok = isinstance(lk, (list, tuple)) and lk and all(_is_int(n) for n in lk) and list(lk) == sorted(set(lk))
    return None if ok else SEED_RULE["looks"].words


MAX_SEEDS = 1000
"""The most paired seeds a rule may plan (``seeds.max``): the design's boundaries are computed for every look."""

SEED_RULE = Schema([  # config `seeds: {...}` (the ablation's) and `search.seeds` (the search's): SeedRule's fields
    Key("min", "int", 3, "paired seeds at the first look", low=2, note="(a paired Δ needs 2 seeds for a spread)"),
    Key("max", "int", 10, "paired seeds at most", low=2, high=MAX_SEEDS,
        note=f"(a paired Δ needs 2 seeds for a spread; more than {MAX_SEEDS} is no design this tool runs)"),
    Key("precision", "float", None, "the full width of the interval, mAP50-95, at which the rule stops", low=0,
        low_open=True, note="(the full width of the interval, mAP50-95, at which the rule stops)"),
    Key("confidence", "float", 0.95, "the interval's confidence", low=0, high=1, low_open=True, high_open=True),
    Key("design", "choice", DESIGNS[0], "the stopping rule", choices=DESIGNS,
        note="(spending: alpha spending over the looks; cs: a confidence sequence tuned to max)"),
    Key("spending", "choice", SPENDING[0], "the alpha-spending function", choices=SPENDING,
        note="(obf: O'Brien–Fleming type; pocock: Pocock type)"),
    Key("looks", "any", None, "the seed counts at which the rule may stop", check=_looks_shape,
        words="increasing seed counts such as [3, 6, 9, 12], or leave it out (a look after every seed from min to "
              "max)"),
])
"""The seed rule's keys declared once: types, ranges, defaults (``seed_rule_problems``; ``SeedRule`` holds them)."""


def seed_rule_problems(values: dict, where: str = "seeds.") -> list[str]:
    """The one check of a seed rule, the ablation's (``seeds: {min, max, ...}``) and the search's (``search.seeds``):
    every value given that is out of what ``SEED_RULE`` declares, one line each, ``<where><key>: <value>; expected
    <allowed>``; then the checks across keys (``max`` >= ``min``, ``looks`` from ``min`` to ``max``).

    Args:
        values: ``{min, max, precision, confidence, design, spending, looks}``; a key left out is not checked, a
            ``min`` of None is the search's default (``min(3, max)``).
        where: the keys' prefix (``seeds.``, ``search.seeds.``).
    """
    given = {k: v for k, v in values.items() if not (k == "min" and v is None)}  # None: the search's default min
    out = [f"{where}{k.name}: {given[k.name]!r}; expected {why}" for k in SEED_RULE
           if k.name in given and (why := k.problem(given[k.name]))]
    bad = {p.removeprefix(where).split(":")[0] for p in out}
    mn, mx = values.get("min"), values.get("max")
    if bad & {"min", "max"} or mx is None:
        return out
    if mn is not None and mx < mn:
        return out + [f"{where}max: {mx}; expected an int >= {where}min ({mn})"]
    if values.get("looks") is None or "looks" in bad:
        return out
    return out + _look_problems(values["looks"], mn if mn is not None else min(3, mx), mx, where)


def _look_problems(lk, first: int, mx: int, where: str) -> list[str]:
    """``looks`` (increasing seed counts, ``_looks_shape``) from the first look (``min``) to ``max``."""
    if mx < lk[0]:
        return [f"{where}max: {mx}; below the first look of {where}looks ({lk[0]}): set {where}max >= {lk[0]}"]
    if lk[0] < first or lk[-1] > mx:
        return [f"{where}looks: {list(lk)!r}; expected seed counts from {where}min ({first}) to {where}max ({mx})"]
    return []


def _is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, np.integer))


# ------------------------------------------------------------------------------------------------ the sequence


def radius_factor(n, alpha: float, tau2: float = PRIOR_SCALE2) -> np.ndarray:
    """Half-width of the confidence sequence in units of s/√n (s the sample SD of the n diffs); inf while the
    sequence is unbounded. Vectorised over ``n`` (≥ 1)."""
    n = np.asarray(n, np.float64)
    a = n * tau2 / (1 + n * tau2)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -np.expm1(np.log(alpha**2 / (1 + n * tau2)) / n) / a
        k = np.sqrt(r / (1 - r) * (n - 1))
    return np.where((r < 1) & (n >= 2), k, np.inf)


def mixture_martingale(diffs: Sequence[float], mu: float, tau2: float = PRIOR_SCALE2) -> float:
    """M_n(μ) of the module docstring (closed form): the e-value against "the mean Δ is μ" after these seeds."""
    x = _checked(diffs)
    n = len(x)
    if n == 0:
        return 1.0
    d = x.mean() - mu
    ss = float(((x - x.mean()) ** 2).sum())
    den = ss + n * d * d
    rho = n * d * d / den if den > 0 else 0.0
    a = n * tau2 / (1 + n * tau2)
    return float((1 + n * tau2) ** -0.5 * (1 - a * rho) ** (-n / 2))


def _checked(diffs) -> np.ndarray:
    x = np.asarray(diffs, np.float64).ravel()
    if not np.isfinite(x).all():
        raise ValueError(f"paired differences must be finite numbers, got {list(diffs)!r}")
    return x


def tuned_tau2(n: int, alpha: float) -> float:
    """τ² of the mixture that makes the confidence sequence's half-width smallest at ``n`` seeds, on a log grid from
    0.01 to 1000 (Howard, Ramdas, McAuliffe & Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence
    sequences", Ann. Statist. 2021, section 3.5: a mixture tuned to the sample size where it will be read)."""
    grid = np.logspace(-2, 3, 501)
    return float(grid[np.argmin(radius_factor(n, alpha, grid))])


def factors(rule: SeedRule, alpha: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The design's interval after 1 .. ``n`` seeds, at level 1 − ``alpha``: (factor, at), each (n,). ``factor``: its
    half-width in units of s/√n at each look (inf elsewhere, or while unbounded); ``at``: the look whose interval
    stands after each number of seeds (the last look at or before it; −1 before the first). Alpha spending's
    boundaries (``spending.boundaries``) or the confidence sequence tuned to ``rule.max`` (``tuned_tau2``)."""
    looks = rule.planned()
    k = np.full(n, np.inf)
    if rule.design == "cs":
        cs = radius_factor(np.arange(1, n + 1), alpha, tuned_tau2(rule.max, alpha))
        idx = [m - 1 for m in looks if m <= n]
        k[idx] = cs[idx]
    else:
        for m, c in zip(looks, boundaries(looks, rule.max, float(alpha), rule.spending), strict=True):
            if m <= n:
                k[m - 1] = c  # the interval x̄ ± c·s/√m
    at = np.searchsorted(np.array(looks), np.arange(1, n + 1), side="right") - 1
    return k, np.where(at >= 0, np.array(looks)[np.maximum(at, 0)] - 1, -1)


def _intervals(x: np.ndarray, confidence: float, test_var: float, naive: bool, rule: SeedRule | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Intervals after each prefix of every row of ``x`` (E, N): (lo, hi), each (E, N). The rule's design (``factors``:
    each look's interval, standing until the next look) unless ``naive`` (the fixed-n t-interval at every n)."""
    from scipy.special import ndtri, stdtrit  # the kernels of scipy.stats' norm.ppf and t.ppf (not its import)

    if not (math.isfinite(test_var) and test_var >= 0):
        raise ValueError(f"test_var must be a finite variance >= 0, got {test_var!r}")
    alpha = 1 - confidence
    n = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    y = x - x[:, :1]  # shifted by the first value: no cancellation in the sums of squares
    mean_y = np.cumsum(y, 1) / n
    ss = np.maximum(np.cumsum(y * y, 1) - n * mean_y**2, 0.0)
    mean = mean_y + x[:, :1]
    sd_mean = np.sqrt(ss / np.maximum(n - 1, 1) / n)  # s/√n
    if naive:
        with np.errstate(invalid="ignore"):
            q = np.where(n >= 2, stdtrit(np.maximum(n - 1, 1), 1 - alpha / 2), np.inf)
            half = np.where(n >= 2, q * np.sqrt(sd_mean**2 + test_var), np.inf)
        at = np.arange(x.shape[1])
    else:
        share = TEST_SHARE if test_var > 0 else 0.0
        k, at = factors(rule, alpha * (1 - share), x.shape[1])
        with np.errstate(invalid="ignore"):
            half = np.where(np.isinf(k), np.inf, k * sd_mean)
        if test_var > 0:
            half = half + ndtri(1 - alpha * share / 2) * math.sqrt(test_var)
    half = np.where(np.isnan(half), np.inf, half)
    lo, hi = mean - half, mean + half
    before = at < 0
    return np.where(before, -np.inf, lo[:, np.maximum(at, 0)]), np.where(before, np.inf, hi[:, np.maximum(at, 0)])


def confidence_sequence(diffs: Sequence[float], rule: SeedRule, test_var: float = 0.0) -> tuple[float, float]:
    """The design's interval for the mean paired Δ after ``len(diffs)`` seeds (module docstring: coverage): the one of
    the last look of ``rule`` at or before them, at level ``rule.confidence``, which holds together with the intervals
    of every other look with probability ≥ ``rule.confidence``.

    Args:
        diffs: per-seed Δ (variant − baseline, same seed), in seed order.
        rule: the design (``SeedRule``: its looks, design and confidence).
        test_var: variance of the validation set's offset common to all seeds (``hierarchical_interval``'s
            ``test_var``); 0 = the interval covers the mean over seeds on this validation set.

    Returns:
        (lo, hi); (−inf, inf) before the first look or while unbounded. Equal diffs give a zero-width interval (plus
        the validation set's term).

    Raises:
        ValueError: a NaN or infinite diff, or a negative ``test_var``.
    """
    x = _checked(diffs)
    if len(x) == 0:
        return -math.inf, math.inf
    lo, hi = _intervals(x[None], rule.confidence, float(test_var), naive=False, rule=rule)
    return float(lo[0, -1]), float(hi[0, -1])


# ------------------------------------------------------------------------------------------------ the stopping rule


def _reason_codes(lo, hi, n, rule: SeedRule) -> np.ndarray:
    """Index into REASONS for each interval (vectorised): settled before precision before max."""
    lo, hi, n = np.asarray(lo), np.asarray(hi), np.asarray(n)
    code = np.zeros(np.broadcast(lo, hi, n).shape, np.int8)
    code = np.where(n >= rule.max, 3, code)
    if rule.precision is not None:
        code = np.where(hi - lo < rule.precision, 2, code)
    code = np.where((lo > 0) | (hi < 0), 1, code)
    return np.where(n < rule.min, 0, code)


def _fmt(lo: float, hi: float) -> str:
    """``the interval [+0.0012, +0.0034]`` (3 decimals from 0.01 wide on), ``the interval [unbounded]``."""
    return "the interval " + bracket(lo, hi, 4 if hi - lo < 0.01 else 3)


def _decision(x: np.ndarray, rule: SeedRule, lo: float, hi: float) -> dict:
    n = len(x)
    reason = REASONS[int(_reason_codes(lo, hi, n, rule))]
    iv = _fmt(lo, hi)
    from attn_yolo.ablate.statistics.stats import (
        verdict as one_rule,  # the one rule (stats imports config, which imports this)
    )

    settled = lo > 0 or hi < 0
    verdict = one_rule({"n": n, "lo": lo, "hi": hi})
    if reason == "settled":
        text = f"stopped after {n} seeds: {iv} excludes 0 ({verdict})"
    elif reason == "precision":
        text = (f"stopped after {n} seeds: {iv} is {hi - lo:.4f} wide, narrower than the requested precision "
                f"{rule.precision:g}, and includes 0")
    elif reason == "max":
        text = f"stopped at the maximum of {rule.max} seeds: {iv}" + (
            "" if not math.isfinite(hi - lo) else " excludes 0" if settled else " includes 0")
    elif n < rule.min:
        text = f"continue: {n} of the minimum {rule.min} seeds run"
    else:
        wide = f" and is wider than the requested {rule.precision:g}" if rule.precision is not None else ""
        text = f"continue after {n} of at most {rule.max} seeds: {iv} includes 0{wide}"
    return {"stop": reason != "continue", "reason": reason, "lo": lo, "hi": hi, "n": n,
            "mean": float(x.mean()) if n else math.nan, "verdict": verdict, "text": text}  # fmt: skip


def decide(diffs: Sequence[float], rule: SeedRule, test_var: float = 0.0) -> dict:
    """Whether to run another paired seed, from the confidence sequence after the seeds so far.

    Stops (in this order of reasons) when the interval excludes 0 (``settled``), when its full width is below
    ``rule.precision`` (``precision``), or at ``rule.max`` (``max``); never before ``rule.min``. Valid whichever
    reason stops it (module docstring).

    Returns:
        ``{"stop", "reason": "settled" | "precision" | "max" | "continue", "lo", "hi", "n", "mean", "verdict":
        "better" | "worse" | "no detectable difference", "text": one sentence for the summary}``.

    Raises:
        ValueError: a NaN or infinite diff, or a negative ``test_var``.
    """
    x = _checked(diffs)
    lo, hi = confidence_sequence(x, rule, test_var)
    return _decision(x, rule, lo, hi)


def naive_decide(diffs: Sequence[float], rule: SeedRule, test_var: float = 0.0) -> dict:
    """``decide`` on the fixed-n t-interval (mean ± t_{n−1}·sqrt(s²/n + test_var)) re-checked after every seed.

    NOT valid under optional stopping (each look is another chance of a false verdict); kept only to show that in
    the tests and the simulation (``simulate(naive=True)``).
    """
    x = _checked(diffs)
    if len(x) == 0:
        return _decision(x, rule, -math.inf, math.inf)
    lo, hi = _intervals(x[None], rule.confidence, float(test_var), naive=True)
    return _decision(x, rule, float(lo[0, -1]), float(hi[0, -1]))


def joint_confidence(confidence: float, family: int) -> float:
    """The level of each of ``family`` intervals so that all hold at once with probability ≥ ``confidence``:
    1 − (1 − confidence) / family (Bonferroni; module docstring)."""
    if isinstance(family, bool) or not isinstance(family, int) or family < 1:
        raise ValueError(f"family must be an int >= 1 (the number of comparisons), got {family!r}")
    return 1 - (1 - confidence) / family


def kind(rule: SeedRule) -> str:
    """The interval's name in the summary: ``group-sequential`` (alpha spending) or ``anytime-valid`` (``cs``)."""
    return "group-sequential" if rule.design == "spending" else "anytime-valid"


def guarantee(rule: SeedRule, family: int = 1) -> str:
    """The guarantee of the verdicts, one sentence for the summary: ``family`` comparisons (Bonferroni) under ``rule``
    at its joint ``confidence``."""
    each = joint_confidence(rule.confidence, family)
    which = "the interval holds" if family == 1 else (
        f"the intervals of all {family} comparisons (each at {100 * each:.3g} %) hold")
    return (f"With probability at least {100 * rule.confidence:g} %, {which} the true mean Δ at every look at "
            f"once ({rule.words()}), so every better / worse verdict holds jointly whichever look each arm stopped "
            "at: its own verdict, the precision, the maximum or an interruption; the design is fitted to its "
            "seeds.max, which a rerun on the same runs may not change.")


def first_bounded(rule: SeedRule) -> int | None:
    """The fewest seeds at which the rule's interval at ``rule.confidence`` is bounded (its first look whose factor is
    finite); None when it is unbounded at every look up to ``rule.max``."""
    k = factors(rule, 1 - rule.confidence, rule.max)[0]
    ok = np.isfinite(k)
    return int(np.argmax(ok)) + 1 if ok.any() else None


def first_stop(diffs: Sequence[float], rule: SeedRule, test_var: float = 0.0) -> dict:
    """``decide`` at the first number of seeds at which the rule stops for these diffs (a stopping time: it depends
    only on the seeds before it), or after all of them while it does not. A comparison that stopped keeps that
    decision: seeds run after it (a round that ran on for the other arms) do not reopen it."""
    x = _checked(diffs)
    for m in range(rule.min, len(x) + 1):
        d = decide(x[:m], rule, test_var)
        if d["stop"]:
            return d
    return decide(x, rule, test_var)


def family_problems(rule: SeedRule, arms: int, placebos: int) -> list[str]:
    """A seed rule whose ``max`` is too small for the joint intervals of ``arms`` arms (against the baseline) and
    ``placebos`` placebo arms (each also a variant − placebo comparison) ever to be bounded: ``seeds.max`` named."""
    k = max(1, arms + 2 * placebos)
    each = dataclasses.replace(rule, confidence=joint_confidence(rule.confidence, k))
    if first_bounded(each) is not None:
        return []
    need = next((m for m in range(rule.max + 1, 201) if first_bounded(dataclasses.replace(each, max=m, looks=None))),
                None)
    return [f"seeds.max: {rule.max}; the {k} comparisons' joint intervals (each at {100 * each.confidence:.3g} %) are "
            f"unbounded until {need or 'over 200'} seeds: set seeds.max >= {need or 200}"
            + (" or compare fewer arms" if k > 1 else "")]


def decide_all(diffs: dict[str, Sequence[float]], rule: SeedRule, test_var: dict[str, float] | None = None,
               family: int | None = None) -> dict:
    """The rule over several comparisons, each stopping on its own (``first_stop``): an arm whose comparison
    stopped needs no more seeds; another round runs while any comparison continues.

    Args:
        diffs: per comparison, its per-seed Δ in seed order.
        rule: the stopping rule; its ``confidence`` is the joint level of the family.
        test_var: per comparison, the validation set's common variance (0 if absent).
        family: comparisons whose verdicts must hold jointly (default: ``len(diffs)``); each interval is at
            ``joint_confidence(rule.confidence, family)``.

    Returns:
        ``{"stop": bool, "n": the most seeds any comparison used, "family": K, "confidence": each interval's
        level, "variants": {name: decide(...) at its own stop}}``.
    """
    test_var = test_var or {}
    k = max(1, len(diffs)) if family is None else family
    each = dataclasses.replace(rule, confidence=joint_confidence(rule.confidence, k))
    per = {v: first_stop(d, each, test_var.get(v, 0.0)) for v, d in diffs.items()}
    return {"stop": all(d["stop"] for d in per.values()), "n": max((d["n"] for d in per.values()), default=0),
            "family": k, "confidence": each.confidence, "variants": per}  # fmt: skip


def decide_from_bootstrap(compared: dict, rule: SeedRule, metric: str = "map50_95", family: int | None = None
                          ) -> dict:
    """``decide_all`` on ``stats.bootstrap_compare``'s output: each variant's per-seed Δ of ``metric`` (in seed order)
    with the validation set's common variance of its hierarchical interval as ``test_var``.

    Returns:
        ``decide_all``'s dict; a variant without the metric (no per-image records) is left out of ``variants``.
    """
    diffs, test_var = {}, {}
    for v, res in compared.items():
        if metric not in res:
            continue
        diffs[v] = res[metric]["deltas"]
        g = res[metric]["hier"].get("test_var", 0.0)
        test_var[v] = g if g is not None and math.isfinite(g) else 0.0  # fewer than 2 seeds: unbounded anyway
    return decide_all(diffs, rule, test_var, family)


# ------------------------------------------------------------------------------------------------ simulation


def simulate(rule: SeedRule, delta: float, sd: float, test_var: float = 0.0, experiments: int = 2000, seed: int = 0,
             naive: bool = False) -> dict:
    """Run the stopping rule on simulated ablations: per-seed Δ ~ N(delta, sd²) i.i.d., vectorised.

    With ``test_var`` > 0 each experiment also draws one validation-set offset ~ N(0, test_var) shared by its seeds
    (the mean it should cover stays ``delta``).

    Returns:
        ``mean_seeds`` (mean seeds used), ``better`` / ``worse`` (rates of each verdict at the stop), ``coverage``
        (rate of intervals at the stop holding ``delta``), ``reasons`` ({reason: rate}), ``experiments``.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(delta, sd, (experiments, rule.max))
    if test_var > 0:
        x += rng.normal(0.0, math.sqrt(test_var), (experiments, 1))
    lo, hi = _intervals(x, rule.confidence, float(test_var), naive, rule)
    n = np.arange(1, rule.max + 1)
    code = _reason_codes(lo, hi, n[None], rule)
    stop = np.argmax(code > 0, axis=1)  # always stops at max
    rows = np.arange(experiments)
    lo_s, hi_s, code_s = lo[rows, stop], hi[rows, stop], code[rows, stop]
    return {
        "experiments": experiments,
        "mean_seeds": float((stop + 1).mean()),
        "better": float((lo_s > 0).mean()),
        "worse": float((hi_s < 0).mean()),
        "coverage": float(((lo_s <= delta) & (delta <= hi_s)).mean()),
        "reasons": {r: float((code_s == i).mean()) for i, r in enumerate(REASONS) if i},
    }


def family_draws(deltas, sd: float, n: int, experiments: int, seed: int = 0) -> np.ndarray:
    """Per-seed Δ of simulated ablations (or searches) of K = ``len(deltas)`` arms against one baseline, (E, K, N): per
    seed i the baseline's run draws b_i ~ N(0, sd²/2) and arm k's v_ki ~ N(δ_k, sd²/2), so that Δ_ki = v_ki − b_i has
    SD ``sd`` and every two arms share the baseline's noise (correlation 1/2), as in a real ablation."""
    d = np.asarray(deltas, np.float64)
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, sd / math.sqrt(2), (experiments, 1, n))
    return d[None, :, None] + rng.normal(0.0, sd / math.sqrt(2), (experiments, len(d), n)) - base


def family_outcome(lo: np.ndarray, hi: np.ndarray, deltas, rule: SeedRule) -> dict:
    """What ``decide_all`` decides on intervals after every seed (``lo``, ``hi``: (E, K, N), N = ``rule.max``) of arms
    with true effects ``deltas``: each arm stops on its own (settled, narrower than ``rule.precision``, or ``rule.max``,
    never before ``rule.min``) and its verdict is its interval's there.

    Returns:
        ``any_false`` (rate of ablations with at least one false verdict: better / worse where δ = 0, or of the
        wrong sign), ``power`` ({k: rate of the right verdict} for each δ_k ≠ 0), ``seeds`` ({k: mean seeds arm k
        used}), ``half`` (median half-width at the stop over every arm), ``runs`` (mean training runs per ablation, the
        baseline's included) against ``full_runs`` (every arm to ``rule.max``), ``experiments``, ``family``.
    """
    d = np.asarray(deltas, np.float64)
    experiments, k, n_max = lo.shape
    codes = _reason_codes(lo, hi, np.arange(1, n_max + 1)[None, None], rule)
    stop = np.argmax(codes > 0, axis=2)  # (E, K): each arm's own stop; always by max
    e, j = np.meshgrid(np.arange(experiments), np.arange(k), indexing="ij")
    lo_s, hi_s = lo[e, j, stop], hi[e, j, stop]
    better, worse = lo_s > 0, hi_s < 0
    false = np.where(d[None] > 0, worse, np.where(d[None] < 0, better, better | worse))
    right = np.where(d[None] > 0, better, worse)
    runs = (stop + 1).sum(axis=1) + stop.max(axis=1) + 1  # the arms' runs and the baseline's
    return {"experiments": experiments, "family": k, "any_false": float(false.any(axis=1).mean()),
            "power": {i: float(right[:, i].mean()) for i in range(k) if d[i] != 0},
            "seeds": {i: float((stop[:, i] + 1).mean()) for i in range(k)},
            "half": float(np.median((hi_s - lo_s) / 2)), "runs": float(runs.mean()),
            "full_runs": (k + 1) * n_max}  # fmt: skip


def simulate_family(rule: SeedRule, deltas: Sequence[float], sd: float, experiments: int = 1000, seed: int = 0,
                    joint: bool = True) -> dict:
    """Run ``decide_all`` on simulated ablations of K = ``len(deltas)`` variants against one baseline
    (``family_draws``), vectorised: ``family_outcome`` of the design's intervals.

    Args:
        joint: each interval at ``joint_confidence(rule.confidence, K)``; False: each at ``rule.confidence`` (the
            uncorrected per-variant rule).

    Returns:
        ``family_outcome``'s dict, with ``confidence`` (of each interval).
    """
    k = len(deltas)
    x = family_draws(deltas, sd, rule.max, experiments, seed)
    each = dataclasses.replace(rule, confidence=joint_confidence(rule.confidence, k) if joint else rule.confidence)
    lo, hi = _intervals(x.reshape(experiments * k, rule.max), each.confidence, 0.0, naive=False, rule=each)
    shape = (experiments, k, rule.max)
    return {**family_outcome(lo.reshape(shape), hi.reshape(shape), deltas, each), "confidence": each.confidence}
