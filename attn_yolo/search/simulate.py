"""The search's rule chosen by simulation: candidate families on the same simulated searches, within the budget.

Every candidate runs on the same draws (``attn_yolo.ablate.statistics.sequential.family_draws``: per seed the
baseline's run noise shared by every arm, Δ of seed SD ``sd``), with the default search's budget of training runs
(``max_runs``), and is scored by what the issue asks of a search (issue 45): is an arm 2 seed-SDs better returned, does
the search end in an answer at w ≤ 0.01 mAP50-95, how often is any of its verdicts false, the runs it used and its
bound at the stop.

Candidates (``CANDIDATES``): the earlier rule (every pair of arms, ``attn_yolo.search.allpairs``); each arm against
the baseline and the best (``attn_yolo.search.rule``) on each comparison's own spread, or on the pooled spread (the
rule chosen); the K comparisons with the baseline alone on the pooled spread (an arm dropped where two intervals do
not overlap); e-values: each arm's normal-mixture e-process against Δ = 0 (``sequential.mixture_martingale``, its
confidence sequence tuned to ``max``) at α/K. e-BH (Wang & Ramdas 2022) rejects nothing e-Bonferroni does not until
its first rejection, so in these cases (one arm better, or none) it is e-Bonferroni; it controls the false discovery
rate, not the family-wise one the other candidates keep.
"""

from __future__ import annotations

import math

import numpy as np

from attn_yolo.ablate.statistics.sequential import family_draws, radius_factor, tuned_tau2
from attn_yolo.search.allpairs import PairsRule, replay_pairs
from attn_yolo.search.config import default_rule
from attn_yolo.search.rule import SearchRule, levels, pooled_sd, pooled_spread, replay

W = 0.01  # the answer's resolution the issue asks for (mAP50-95)


def own_spread(d, have, n, share, rule):
    """Each comparison on its own spread (df n − 1): t-intervals for each arm against the baseline and one-sided
    bounds between arms, at the rule's levels and the look's share (``pooled_spread``'s shapes)."""
    from scipy.special import stdtrit

    e, k, _ = d.shape
    a_b, a_e = levels(k, rule.confidence)
    x = np.where(have, d, np.nan)
    with np.errstate(invalid="ignore"):
        s_arm = np.nanstd(x[..., :n], axis=2, ddof=1)
        s_pair = np.nanstd(x[:, :, None, :n] - x[:, None, :, :n], axis=3, ddof=1)
        q_b, q_e = stdtrit(n - 1, 1 - a_b * share / 2), stdtrit(n - 1, 1 - a_e * share) if k > 1 else math.inf
    sd, df = pooled_sd(d, have)
    return (np.nan_to_num(q_b * s_arm / math.sqrt(n), nan=np.inf, posinf=np.inf),
            np.nan_to_num(q_e * s_pair / math.sqrt(n), nan=np.inf, posinf=np.inf), sd, df)


def evalue_spread(d, have, n, share, rule):
    """e-values: each arm's mixture-martingale confidence sequence at α/K (valid at every n, so no look's share),
    τ² tuned to ``max``; arms dropped where their sequences do not overlap."""
    e, k, _ = d.shape
    alpha = (1 - rule.confidence) / k
    x = np.where(have, d, np.nan)
    with np.errstate(invalid="ignore"):
        s_arm = np.nanstd(x[..., :n], axis=2, ddof=1)
    half = np.nan_to_num(float(radius_factor(n, alpha, tuned_tau2(rule.max, alpha))) * s_arm / math.sqrt(n),
                         nan=np.inf, posinf=np.inf)
    sd, df = pooled_sd(d, have)
    return half, half[:, :, None] + half[:, None, :], sd, df


def _baseline_only(d, have, n, share, rule):
    return pooled_spread(d, have, n, share, rule, between=False)


CANDIDATES = {  # name: the replay's spread (None: the earlier rule)
    "every pair (earlier rule)": None,
    "each vs baseline and best, own spread": own_spread,
    "each vs baseline and best, pooled spread (chosen)": pooled_spread,
    "each vs baseline only, pooled spread": _baseline_only,
    "e-values (e-BH = e-Bonferroni here)": evalue_spread,
}


def outcome(r: dict, delta: np.ndarray) -> dict:
    """What a replay's searches answered, against the true effects ``delta`` (K,): the rates of an arm returned that
    is the best (``returned``; NaN where no single arm is best), of an answer at w ≤ ``W`` (an arm returned, or none
    better than the baseline beyond ≤ W), of any false verdict, and the mean runs and median bound at the stop."""
    top = int(np.argmax(delta)) if (delta == delta.max()).sum() == 1 else None
    lo, hi, state = r["lo"], r["hi"], r["state"]
    wrong = np.where(delta > 0, hi < 0, np.where(delta < 0, lo > 0, (lo > 0) | (hi < 0))) & (r["n"] > 0)
    left = state == 0
    best_left = np.where(left, delta[None], -np.inf).max(1)
    false_drop = ((state == 2) & (delta[None] > best_left[:, None])).any(1)
    answer = r.get("answer", np.where(np.take_along_axis(lo, np.maximum(r["best"], 0)[:, None], 1)[:, 0] > 0, 1, 2))
    bound = r.get("bound", np.where(left, hi, -np.inf).max(1))
    false_none = (answer == 2) & (delta.max() > bound)
    false_gap = (answer == 1) & (delta.max() - delta[np.maximum(r["best"], 0)] > r.get("gap", np.inf))
    returned = (answer == 1) & (r["best"] == top) if top is not None else None
    lead = np.take_along_axis((hi - lo) / 2, np.maximum(r["best"], 0)[:, None], 1)[:, 0]
    return {"returned": float(returned.mean()) if returned is not None else math.nan,
            "answered": float(((answer == 1) | ((answer == 2) & (bound <= W))).mean()),
            "any_false": float((wrong.any(1) | false_drop | false_none | false_gap).mean()),
            "runs": float(r["runs"].mean()), "bound": float(np.median(bound)), "half": float(np.median(lead))}


def run_candidate(name: str, d: np.ndarray, rule: SearchRule, max_runs: int) -> dict:
    """One candidate's replay on the draws ``d`` (E, K, N) within ``max_runs``."""
    spread = CANDIDATES[name]
    if spread is None:
        return replay_pairs(d, PairsRule(), max_runs)
    return replay(d, rule, max_runs=max_runs, spread=spread)


def simulate(deltas, sd: float, rule: SearchRule | None = None, searches: int = 1000, seed: int = 0,
             max_runs: int | None = None, candidates=None, spreads=None) -> dict:
    """Every candidate (``candidates``: names of ``CANDIDATES``, default all) on the same ``searches`` simulated
    searches of arms with true Δ ``deltas`` (mAP50-95) and seed SD of Δ ``sd``, under ``rule`` (default: the
    embedded default search's, ``config.default_rule``), each within ``max_runs`` (default: 6 rounds of every arm and
    the baseline, the default search's budget). ``spreads`` (K,): each arm's own seed SD
    of Δ in units of ``sd`` (unequal spreads; default all 1). Returns {candidate: ``outcome``}."""
    delta = np.asarray(deltas, np.float64)
    k = len(delta)
    rule = rule or default_rule()
    n = max(rule.max, 12)
    d = family_draws(delta, sd, n, searches, seed)
    if spreads is not None:  # unequal spreads: scale each arm's noise about its mean (the baseline's share too)
        d = delta[None, :, None] + (d - delta[None, :, None]) * np.asarray(spreads, np.float64)[None, :, None]
    budget = max_runs or (k + 1) * 6
    return {c: outcome(run_candidate(c, d[..., : (12 if CANDIDATES[c] is None else rule.max)], rule, budget), delta)
            for c in (candidates or CANDIDATES)}
