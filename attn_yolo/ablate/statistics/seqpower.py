"""The power of the sequential design that decides a seed-rule verdict: half-width, detectable Δ, seeds.

The power of the interval that decides a seed-rule verdict (``attn_yolo.ablate.statistics.sequential``'s design: the
alpha- spending boundaries or the tuned confidence sequence, at its look): its half-width after n seeds, the smallest Δ
it detects with a given power, and the seeds it needs for a Δ (a design fitted to that many seeds), never a fixed-n
t-interval's.
"""

from __future__ import annotations

import dataclasses
import math

from attn_yolo.ablate.statistics.sequential import TEST_SHARE, SeedRule, factors


def half_width(seed_var: float, n: int, rule: SeedRule, test_var: float = 0.0) -> float:
    """The design's half-width after ``n`` seeds whose Δ has variance ``seed_var`` (the interval of
    ``confidence_sequence`` at a sample SD of √seed_var, at ``rule.confidence``); inf before the first look or while
    unbounded."""
    from scipy.special import ndtri

    alpha = 1 - rule.confidence
    share = TEST_SHARE if test_var > 0 else 0.0
    k, at = factors(rule, alpha * (1 - share), n)
    m = int(at[-1]) + 1  # the look whose interval stands after n seeds
    if m < 1 or not (math.isfinite(k[m - 1]) and math.isfinite(seed_var)):
        return math.inf
    return float(k[m - 1]) * math.sqrt(seed_var / m) + (float(ndtri(1 - alpha * share / 2)) * math.sqrt(test_var)
                                                        if share else 0.0)


def detectable(seed_var: float, n: int, rule: SeedRule, test_var: float = 0.0, power: float = 0.8) -> float:
    """The smallest true Δ that the design's interval after ``n`` seeds excludes 0 for with probability ``power``: its
    half-width plus z_power · SE (SE² = seed_var / n + test_var, the spread of the mean Δ). inf while unbounded."""
    from scipy.special import ndtri

    h = half_width(seed_var, n, rule, test_var)
    return h + float(ndtri(power)) * math.sqrt(seed_var / n + test_var) if math.isfinite(h) else math.inf


SEEDS_LIMIT = 40
"""The most paired seeds ``seeds_for`` tries."""


def seeds_for(delta: float, seed_var: float, rule: SeedRule, test_var: float = 0.0, power: float = 0.8,
              limit: int = SEEDS_LIMIT) -> int | None:
    """Fewest paired seeds N (≥ ``rule.min``) at which the rule's design fitted to N seeds (``seeds.max`` N, looks
    from ``seeds.min``) detects ``delta`` with ``power`` at its last look (``detectable``); None when no N up to
    ``limit`` does (the validation set's own noise too large, or ``limit`` passed)."""
    for n in range(rule.min, limit + 1):
        fitted = dataclasses.replace(rule, max=n, looks=None)
        if detectable(seed_var, n, fitted, test_var, power) <= delta:
            return n
    return None
