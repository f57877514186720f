"""The planned looks' boundaries: Lan–DeMets alpha spending on the studentised paired Δ, and the tuned sequence.

The seed rule looks at a comparison a handful of times, at the planned looks (every number of paired seeds from
``min`` to ``max`` unless ``looks`` lists them), never after ``max``. Two designs give an interval at each look that
holds, with probability ≥ 1 − α, at *every* look at once, so at whichever look the rule (or an arm on its own, or a
user) stops:

- ``spending``: repeated confidence intervals of a group-sequential design with alpha spending (Lan & DeMets,
  "Discrete sequential boundaries for clinical trials", Biometrika 1983; Jennison & Turnbull, "Interim analyses: the
  repeated confidence interval approach", JRSS B 1989). At look j (n_j seeds, information fraction t_j = n_j / max)
  the interval is x̄ ± c_j·s/√n_j, where c_j is set so that the chance of a first crossing |T_j| ≥ c_j at look j is
  α(t_j) − α(t_{j−1}), T_j the t-statistic of the first n_j seeds at the true mean. The joint law of (T_j) is
  pivotal (it depends on neither the mean nor σ), so the c_j are computed once by simulation of ``PATHS`` standard
  normal paths with a fixed seed (deterministic, cached), exact for Gaussian Δ up to that Monte Carlo error (about
  1 % of α at K = 1). Spending functions: ``obf``, the O'Brien–Fleming type α(t) = 2 − 2Φ(z_{1−α/2}/√t) (O'Brien &
  Fleming, "A multiple testing procedure for clinical trials", Biometrics 1979): almost nothing spent early, the
  final look close to the fixed-n interval; ``pocock``, the Pocock type α(t) = α·ln(1 + (e − 1)t) (Pocock,
  "Group sequential methods in the design and analysis of clinical trials", Biometrika 1977): even boundaries.
- ``cs``: the normal-mixture t-confidence sequence of ``sequential.radius_factor``, valid at every n, with its
  mixture variance τ² chosen before the data to make it tightest at ``max`` seeds (``sequential.tuned_tau2``).

Both are fitted to ``max``: a rerun that changes the design (``max`` included) on finished runs is refused
(``rerun.check_seed_design``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

DESIGNS = ("spending", "cs")
SPENDING = ("obf", "pocock")
PATHS = 1 << 18  # simulated null paths of the spending boundaries
MC_SEED = 49  # their seed: every boundary is the same on every machine


def spent(t, alpha: float, kind: str) -> np.ndarray:
    """Lan–DeMets spending function: the two-sided α spent by information fraction ``t`` (0 < t ≤ 1; α at t = 1).
    ``obf``: O'Brien–Fleming type; ``pocock``: Pocock type (module docstring)."""
    from scipy.special import ndtr, ndtri

    t = np.minimum(np.asarray(t, np.float64), 1.0)
    if kind == "obf":
        return 2 - 2 * ndtr(ndtri(1 - alpha / 2) / np.sqrt(t))
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1) * t)
    raise ValueError(f"spending function {kind!r}; expected one of {', '.join(SPENDING)}")


_NULL: dict = {"n": 0}  # the null paths' running sums and |T_n| columns, grown on demand


def null_t(n: int) -> np.ndarray:
    """|T_n| of ``PATHS`` standard normal paths (n ≥ 2, float32): the t-statistic of their first n draws at the true
    mean. Draw n of every path depends only on n (``MC_SEED``); columns are computed once, in order, and kept."""
    s = _NULL
    if s["n"] == 0:
        s.update(sum=np.zeros(PATHS), squares=np.zeros(PATHS), abs_t={})
    while s["n"] < n:
        k = s["n"] = s["n"] + 1
        z = np.random.default_rng([MC_SEED, k]).standard_normal(PATHS)
        s["sum"] += z
        s["squares"] += z * z
        if k >= 2:
            mean = s["sum"] / k
            sd = np.sqrt(np.maximum(s["squares"] - k * mean * mean, 1e-300) / (k - 1))
            s["abs_t"][k] = (np.abs(mean) * math.sqrt(k) / sd).astype(np.float32)
    return s["abs_t"][n]


@functools.lru_cache(maxsize=256)
def boundaries(looks: tuple[int, ...], n_max: int, alpha: float, kind: str) -> tuple[float, ...]:
    """The critical values c_j of |T| at ``looks`` (seed counts ≥ 2, increasing, the last ``n_max``) spending ``alpha``
    two-sided by ``kind`` over the information fractions n_j / ``n_max``; inf where the look spends less than one
    simulated path (the early looks of ``obf``: no verdict there). Module docstring: method, source."""
    target = np.floor(PATHS * spent(np.array(looks) / n_max, alpha, kind)).astype(np.int64)
    alive = np.ones(PATHS, bool)
    crossed, out = 0, []
    for j in range(len(looks)):
        need = int(target[j]) - crossed
        t = null_t(looks[j])
        col = t[alive]
        if need <= 0 or col.size == 0:
            out.append(math.inf)
            continue
        c = float(np.partition(col, col.size - need)[col.size - need])  # the need-th largest among those alive
        hit = alive & (t >= c)
        crossed += int(hit.sum())
        alive &= ~hit
        out.append(c)
    return tuple(out)
