"""The search's earlier rule, kept to compare against: every arm against the baseline and every pair of arms.

The family of the placement search before issue 45: every arm against the baseline (K comparisons) and every two arms
against each other (K(K−1)/2), M = K(K+1)/2 comparisons, each the ablation's sequential design (``SeedRule``) at
1 − α/M (Bonferroni). An arm is dropped when its interval against the baseline lies below 0 or its interval against
another arm still in lies below 0; the search stops when no arm is left, one is left and excludes 0, every interval
among the arms left is narrower than ``precision``, or at ``max``. ``attn_yolo.search.simulate`` runs it on the same
draws as the current rule (``attn_yolo.search.rule``): at 8 arms and 6 seeds its intervals are about ±0.03 mAP50-95
(BENCHMARKS.md section 16), which is why it was replaced.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from attn_yolo.ablate.statistics.sequential import SeedRule, _intervals, joint_confidence


@dataclasses.dataclass
class PairsRule:
    """The earlier rule's seeds: the earlier default search's (3 to 12 paired seeds, Pocock-type spending)."""

    max: int = 12
    min: int = 3
    confidence: float = 0.95
    design: str = "spending"
    spending: str = "pocock"
    looks: list[int] | None = None


def family(arms: int) -> int:
    """Comparisons of the earlier family: every arm against the baseline and every two arms, K(K+1)/2."""
    return max(1, arms * (arms + 1) // 2)


def each_design(rule, arms: int) -> SeedRule:
    """The design of each comparison (the rule's ``SeedRule`` at 1 − α/``family``), ``min`` at least 2."""
    return SeedRule(min=rule.min, max=rule.max, confidence=joint_confidence(rule.confidence, family(arms)),
                    design=rule.design, spending=rule.spending, looks=rule.looks)


def prefix_intervals(d: np.ndarray, each: SeedRule) -> tuple[np.ndarray, ...]:
    """Intervals after every number of seeds under the design ``each``: against the baseline ``(E, K, N)`` and
    between arms ``(E, K, K, N)`` (``[e, i, j]``: arm i − arm j), from per-seed Δ ``d`` (E, K, N); NaN seeds (not
    run) give unbounded intervals."""
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


def replay_pairs(d: np.ndarray, rule: PairsRule, max_runs: int | None = None) -> dict:
    """The earlier rule on per-seed Δ ``d`` (E, K, N): ``state`` (E, K: 0 in, 1 below the baseline, 2 below another
    arm), ``by`` (E, K), ``n`` (E, K), ``lo``, ``hi``, ``mean`` (E, K) at each arm's last seed, ``runs`` (E,),
    ``best`` (E,: the highest mean left, −1: none), with rounds refused once they would pass ``max_runs``."""
    e, k, n_max = d.shape
    lo_b, hi_b, lo_p, hi_p = prefix_intervals(d, each_design(rule, k))
    state, by = np.zeros((e, k), np.int64), np.full((e, k), -1)
    n_used, stop = np.zeros((e, k), np.int64), np.zeros(e, bool)
    runs = np.zeros(e, np.int64)
    for n in range(1, n_max + 1):
        alive = state == 0
        batch = 1 + alive.sum(1) if n > rule.min else (1 + k) * rule.min
        going = ~stop & ((max_runs is None) | (runs + batch <= (max_runs or 0))) if n >= rule.min else ~stop
        stop |= ~going & (n >= rule.min)
        if n < rule.min:
            n_used = np.where(alive, n, n_used)
            continue
        runs = np.where(going, runs + batch, runs)
        n_used = np.where(alive & going[:, None], n, n_used)
        lb, hb, lp = lo_b[..., n - 1], hi_b[..., n - 1], lo_p[..., n - 1]
        beats = (lp > 0) & alive[:, :, None] & alive[:, None, :]
        below = alive & going[:, None] & (hb < 0)
        beaten = beats.any(1) & alive & going[:, None]
        by = np.where(beaten & (by < 0), np.argmax(beats, axis=1), by)
        state = np.where(below, 1, np.where(beaten, 2, state))
        left = state == 0
        one = (left.sum(1) == 0) | ((left.sum(1) == 1) & (np.where(left, lb, 0) > 0).any(1))
        stop |= going & (one | (n >= rule.max))
    rows = np.arange(e)[:, None], np.arange(k)[None]
    last = np.maximum(n_used - 1, 0)
    mean = np.cumsum(d, axis=2)[rows[0], rows[1], last] / np.maximum(n_used, 1)
    left = state == 0
    best = np.where(left.any(1), np.argmax(np.where(left, mean, -np.inf), axis=1), -1)
    return {"state": state, "by": by, "n": n_used, "lo": lo_b[rows[0], rows[1], last],
            "hi": hi_b[rows[0], rows[1], last], "mean": mean, "runs": runs, "best": best}
