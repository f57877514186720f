"""The power of the confidence sequence that decides a seed-rule verdict: half-width, detectable Δ, seeds.

The power of the confidence sequence that decides a seed-rule verdict: its half-width after n seeds, the smallest
Δ it detects with a given power, and the seeds it needs for a Δ (``attn_yolo.ablate.sequential``'s interval, not a
fixed-n t-interval's: unbounded below 3 seeds at 95 %, so it never asks for 2).
"""

from __future__ import annotations

import math

from attn_yolo.ablate.sequential import TEST_SHARE, radius_factor


def half_width(seed_var: float, n: int, confidence: float = 0.95, test_var: float = 0.0) -> float:
    """The confidence sequence's half-width after ``n`` seeds whose Δ has variance ``seed_var`` (the interval of
    ``confidence_sequence`` at a sample SD of √seed_var); inf while unbounded (fewer than 3 seeds at 95 %)."""
    from scipy.special import ndtri

    alpha = 1 - confidence
    share = TEST_SHARE if test_var > 0 else 0.0
    k = float(radius_factor(n, alpha * (1 - share)))
    if not (math.isfinite(k) and math.isfinite(seed_var)):
        return math.inf
    return k * math.sqrt(seed_var / n) + (float(ndtri(1 - alpha * share / 2)) * math.sqrt(test_var) if share else 0.0)


def detectable(seed_var: float, n: int, confidence: float = 0.95, test_var: float = 0.0, power: float = 0.8
               ) -> float:
    """The smallest true Δ that the confidence sequence after ``n`` seeds excludes 0 for with probability ``power``:
    its half-width plus z_power · SE (SE² = seed_var / n + test_var, the spread of the mean Δ). inf while the sequence
    is unbounded: the power figure of the interval that decides, not of a fixed-n t-interval."""
    from scipy.special import ndtri

    h = half_width(seed_var, n, confidence, test_var)
    return h + float(ndtri(power)) * math.sqrt(seed_var / n + test_var) if math.isfinite(h) else math.inf


def seeds_for(delta: float, seed_var: float, confidence: float = 0.95, test_var: float = 0.0, power: float = 0.8,
              limit: int = 1000) -> int | None:
    """Fewest paired seeds at which the confidence sequence detects ``delta`` with ``power`` (``detectable``); None
    when no number up to ``limit`` does (the validation set's own noise too large, or ``limit`` passed)."""
    for n in range(2, limit + 1):
        if detectable(seed_var, n, confidence, test_var, power) <= delta:
            return n
    return None
