"""The placement search's rule: arms dropped in rounds by anytime-valid intervals that hold jointly.

The placement search's rule: paired seeds in rounds, arms dropped by anytime-valid intervals, verdicts that hold
jointly over every arm searched.

Data: per seed i, Δ_ki = mAP50-95(arm k, seed i) − mAP50-95(baseline, seed i), for K arms. The family is every arm
against the baseline (K comparisons) and every two arms against each other (K(K−1)/2; Δ_ki − Δ_ji, the same seeds).
Each of these M = K(K+1)/2 comparisons gets the sequential design of ``ablate.statistics.sequential`` (the ablation's
``SeedRule``: alpha spending over the looks ``min`` .. ``max`` by default, or the tuned confidence sequence) at level
1 − α/M (Bonferroni, ``family``): with probability ≥ 1 − α all M hold at every look at once, so every claim below is
true together, whatever made the search stop (a settled best, the precision, ``max``, a budget of runs or minutes, a
signal), and a rerun with a larger budget continues the same design (its ``max`` unchanged).

After each round (one more paired seed for the baseline and every arm still in), from ``min`` seeds on, an arm is
dropped when its interval shows it cannot be the best placement: its interval against the baseline lies below 0
(the model without it is better), or its interval against another arm still in lies below 0 (that arm is better).
The search stops when no arm is left, or one is left and its interval against the baseline excludes 0 (settled),
when every interval among the arms left is narrower than ``precision``, or at ``max`` seeds. The rule is replayed
from the per-seed Δ (``replay``), vectorised over many searches, so the simulation (``simulate``) and a real search
(``attn_yolo.search.rounds``) run the same code, and a resumed search takes the same decisions.

The intervals cover the mean Δ over seeds on this validation set (no image bootstrap: the arms' runs alone).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attn_yolo.ablate.statistics.sequential import SeedRule, _intervals, first_bounded, joint_confidence
from attn_yolo.ablate.statistics.sequential import family_draws as draws  # the ablation's simulated arms, as a search's

STOPS = ("running", "settled", "precision", "max", "budget")  # why a search stopped (budget: set by the caller)
DROPS = ("in", "below the baseline", "below another arm", "failed")  # an arm's state


@dataclasses.dataclass
class SearchRule:
    """Seeds of a search (config: ``search: {seeds: {min: 5, max: 20, design: spending}, precision: 0.01}``).

    Args:
        min: paired seeds before any arm is dropped (≥ 2; default: the first look from 3 seeds at which the joint
            intervals are bounded, ``first_bounded``: a look at 2 seeds, one degree of freedom, would spend α on
            intervals too wide to drop anything).
        max: seeds at most for any arm (≥ min).
        precision: stop once every interval among the arms left is narrower (full width, mAP50-95); None: never.
        confidence: joint level of all the search's verdicts (0 < confidence < 1).
        design, spending, looks: the sequential design, as the ablation's ``seeds`` (``SeedRule``); ``pocock`` by
            default, not the ablation's ``obf``: stopped by its budget at half of ``max`` (the default search's 6 of
            12 seeds), O'Brien–Fleming's interval is 3× Pocock's, which is no wider than the confidence sequence's
            there and narrower at ``max`` (docs/guides/search.md).
    """

    max: int = 20
    min: int | None = None
    precision: float | None = None
    confidence: float = 0.95
    design: str = "spending"
    spending: str = "pocock"  # even spending: a search often stops by its budget before max, and drops arms early
    looks: list[int] | None = None

    def at(self, arms: int) -> SearchRule:
        """This rule for ``arms`` arms: ``min`` filled in."""
        first = first_bounded(dataclasses.replace(self, min=min(3, self.max), looks=None).seeds(arms))
        return dataclasses.replace(self, min=self.min or min(self.max, first or 3))

    def seeds(self, arms: int) -> SeedRule:
        """The design of each of the comparisons of ``arms`` arms: the ``SeedRule`` at ``level``."""
        return SeedRule(min=self.min or 2, max=self.max, confidence=level(self.confidence, arms), design=self.design,
                        spending=self.spending, looks=self.looks)


def family(arms: int) -> int:
    """Comparisons whose verdicts hold jointly: every arm against the baseline and every two arms, K(K+1)/2."""
    return max(1, arms * (arms + 1) // 2)


def level(confidence: float, arms: int) -> float:
    """The level of each comparison's interval (Bonferroni over ``family(arms)``)."""
    return joint_confidence(confidence, family(arms))


def guarantee(rule: SearchRule, arms: int) -> str:
    """The guarantee, one sentence for the summary."""
    confidence = rule.confidence
    return (f"With probability at least {confidence:.0%}, every verdict of this search holds at once (each arm "
            f"against the baseline, and each arm dropped below another), over all {arms} arms searched and whatever "
            f"stopped it: each of the {family(arms)} comparisons is an interval of {rule.seeds(arms).words()} at "
            f"{100 * level(confidence, arms):.4g} %.")


def prefix_intervals(d: np.ndarray, each: SeedRule) -> tuple[np.ndarray, ...]:
    """Intervals after every number of seeds under the design ``each`` (at its confidence): against the baseline
    ``(E, K, N)`` and between arms ``(E, K, K, N)`` (``[e, i, j]``: arm i − arm j), from per-seed Δ ``d`` (E, K, N);
    NaN seeds (not run) give unbounded intervals."""
    e, k, n = d.shape
    lo_b, hi_b = _flat(d.reshape(e * k, n), each)
    pair = d[:, :, None, :] - d[:, None, :, :]
    lo_p, hi_p = _flat(pair.reshape(e * k * k, n), each)
    return (lo_b.reshape(e, k, n), hi_b.reshape(e, k, n), lo_p.reshape(e, k, k, n), hi_p.reshape(e, k, k, n))


def _flat(x: np.ndarray, each: SeedRule) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(x)
    lo, hi = _intervals(np.where(ok, x, 0.0), each.confidence, 0.0, naive=False, rule=each)
    seen = np.cumsum(~ok, axis=1) == 0  # every seed up to here was run
    return np.where(seen, lo, -np.inf), np.where(seen, hi, np.inf)


def replay(d: np.ndarray, rule: SearchRule, failed: np.ndarray | None = None) -> dict:
    """The search's decisions on per-seed Δ ``d`` (E searches, K arms, N seeds; NaN where a seed was not run).

    Seeds beyond what every arm still in has are not looked at (the search waits for them). ``failed`` (E, K):
    arms whose run failed (out from then on, never called worse).

    Returns:
        ``state`` (E, K) index into ``DROPS``; ``n`` (E, K) the seeds each arm used; ``lo``, ``hi``, ``mean`` (E, K)
        against the baseline at its last seed; ``by`` (E, K) the arm that beat it (−1: none or the baseline);
        ``stop`` (E,) index into ``STOPS`` (0: still running: more seeds needed); ``rounds`` (E,) seeds run;
        ``best`` (E,) the arm with the highest mean among those still in (−1: none left); ``settled`` (E,) whether
        ``best`` is settled (the only arm left, better than the baseline).
    """
    if d.shape[2] == 0:  # no paired seed yet
        d = np.full((*d.shape[:2], 1), np.nan)
    e, k, n_max = d.shape
    rule = rule.at(k)
    each = rule.seeds(k)
    lo_b, hi_b, lo_p, hi_p = prefix_intervals(d, each)
    state = np.where(failed, 3, 0) if failed is not None else np.zeros((e, k), np.int64)
    n_used = np.zeros((e, k), np.int64)
    by = np.full((e, k), -1)
    stop = np.zeros(e, np.int64)
    for n in range(1, n_max + 1):
        live = stop == 0
        alive = (state == 0) & live[:, None]
        live &= (np.isfinite(d[:, :, n - 1]) | ~alive).all(axis=1)  # every arm still in has seed n
        n_used = np.where((state == 0) & live[:, None], n, n_used)
        if n >= rule.min:
            state, by, stop = _round(n, rule, live, state, by, stop, (lo_b, hi_b, lo_p, hi_p))
    rows = np.arange(e)[:, None], np.arange(k)[None]
    last = np.maximum(n_used - 1, 0)
    lo, hi = lo_b[rows[0], rows[1], last], hi_b[rows[0], rows[1], last]
    csum = np.nancumsum(d, axis=2)
    mean = np.where(n_used > 0, csum[rows[0], rows[1], last] / np.maximum(n_used, 1), np.nan)
    left = state == 0
    best = np.where(left.any(axis=1), np.argmax(np.where(left, mean, -np.inf), axis=1), -1)
    settled = (left.sum(axis=1) == 1) & (np.where(left, lo, 0) > 0).any(axis=1)
    return {"state": state, "n": n_used, "lo": lo, "hi": hi, "mean": mean, "by": by, "stop": stop,
            "rounds": n_used.max(axis=1, initial=0), "best": best, "settled": settled, "rule": rule,
            "level": each.confidence}  # fmt: skip


def _round(n: int, rule: SearchRule, live, state, by, stop, iv) -> tuple[np.ndarray, ...]:
    """One round's decisions at ``n`` seeds for the searches ``live``: the drops (``state``, ``by``) and the stop."""
    lo_b, hi_b, lo_p, hi_p = (x[..., n - 1] for x in iv)
    alive = (state == 0) & live[:, None]
    below_base = alive & (hi_b < 0)
    beats = (lo_p > 0) & alive[:, :, None] & alive[:, None, :]  # [e, i, j]: arm i better than arm j
    beaten = beats.any(axis=1) & alive
    by = np.where(beaten & (by < 0), np.argmax(beats, axis=1), by)
    state = np.where(below_base, 1, np.where(beaten, 2, state))
    left = (state == 0) & live[:, None]
    count = left.sum(axis=1)
    settled = (count == 0) | ((count == 1) & (np.where(left, lo_b, 0) > 0).any(axis=1))
    width = np.where(left, hi_b - lo_b, 0).max(axis=1, initial=0)
    pw = np.where(left[:, :, None] & left[:, None, :], hi_p - lo_p, 0).max(axis=(1, 2), initial=0)
    narrow = np.maximum(width, pw) < (rule.precision or -1)
    code = np.where(settled, 1, np.where(narrow, 2, np.where(n >= rule.max, 3, 0)))
    return state, by, np.where(live & (stop == 0), code, stop)


def naive_replay(d: np.ndarray, rule: SearchRule) -> dict:
    """A naive search on the same data, to show what the rule guards against: from ``min`` seeds on, each round
    drops the arms whose mean Δ is below the median of those still in (by point estimate), until one is left or
    ``max``; each arm's verdict is its fixed-n t-interval at 95 % at its last seed (no correction for the looks or
    for the K arms). Returns ``lo``, ``hi``, ``n``, ``best`` as ``replay``."""
    e, k, n_max = d.shape
    rule = rule.at(k)
    lo_all, hi_all = _intervals(d.reshape(e * k, n_max), rule.confidence, 0.0, naive=True)
    lo_all, hi_all = lo_all.reshape(e, k, n_max), hi_all.reshape(e, k, n_max)
    mean_all = np.cumsum(d, axis=2) / np.arange(1, n_max + 1)
    alive = np.ones((e, k), bool)
    n_used = np.full((e, k), n_max)
    for n in range(rule.min, n_max):
        m = np.where(alive, mean_all[:, :, n - 1], np.nan)
        med = np.nanmedian(m, axis=1)
        going = alive.sum(axis=1) > 1
        drop = alive & going[:, None] & (m < med[:, None])
        n_used = np.where(drop, n, n_used)
        alive &= ~drop
    rows = np.arange(e)[:, None], np.arange(k)[None]
    last = n_used - 1
    mean = mean_all[rows[0], rows[1], last]
    return {"lo": lo_all[rows[0], rows[1], last], "hi": hi_all[rows[0], rows[1], last], "n": n_used,
            "best": np.argmax(np.where(alive, mean, -np.inf), axis=1)}


def simulate(deltas, sd: float, rule: SearchRule, searches: int = 500, seed: int = 0) -> dict:
    """The rule and the naive rule on the same simulated searches with known arm effects ``deltas``.

    Returns:
        ``found`` (rate at which the search's best is the arm of the largest δ, where one is largest),
        ``settled`` (rate at which it is also settled), ``any_false`` (rate of searches with any false verdict:
        an arm called better / worse than the baseline against the sign of its δ, or dropped below an arm that is
        not better), ``runs`` (mean runs, the baseline's included) against ``full_runs`` (every arm and the
        baseline to ``max``), and the naive rule's ``naive_found`` and ``naive_any_false`` (its verdicts' errors).
    """
    delta = np.asarray(deltas, np.float64)
    rule = rule.at(len(delta))
    d = draws(delta, sd, rule.max, searches, seed)
    r, nv = replay(d, rule), naive_replay(d, rule)
    top = int(np.argmax(delta)) if (delta == delta.max()).sum() == 1 else None

    def wrong(lo, hi):
        return np.where(delta > 0, hi < 0, np.where(delta < 0, lo > 0, (lo > 0) | (hi < 0)))

    false_drop = (r["state"] == 2) & (r["by"] >= 0) & (delta[np.maximum(r["by"], 0)] <= delta[None])
    false_base = (r["state"] == 1) & (delta[None] >= 0)
    any_false = (wrong(r["lo"], r["hi"]) | false_drop | false_base).any(axis=1)
    runs = r["n"].sum(axis=1) + r["rounds"]
    return {"searches": searches, "arms": len(delta), "min": rule.min, "max": rule.max,
            "found": float((r["best"] == top).mean()) if top is not None else math.nan,
            "settled": float(((r["best"] == top) & r["settled"]).mean()) if top is not None else math.nan,
            "any_false": float(any_false.mean()), "runs": float(runs.mean()), "full_runs": (len(delta) + 1) * rule.max,
            "naive_found": float((nv["best"] == top).mean()) if top is not None else math.nan,
            "naive_any_false": float(wrong(nv["lo"], nv["hi"]).any(axis=1).mean())}  # fmt: skip
