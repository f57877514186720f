"""The placement search's rule: each arm against the baseline and against the best arm, on the seeds' pooled spread.

Data: per seed i, Δ_ki = mAP50-95(arm k, seed i) − mAP50-95(baseline, seed i), for K arms. The family (issue 45;
the earlier one, every pair of arms at 1 − α/(K(K+1)/2), is ``attn_yolo.search.allpairs``) is

- each arm against the baseline: K two-sided intervals, each at 1 − (2α/3)/K;
- each arm against the best arm: Hsu's multiple comparisons with the best ("Constrained simultaneous confidence
  intervals for multiple comparisons with the best", Ann. Statist. 1984). Arm i is dropped when an arm j still in
  has a one-sided lower bound for δ_j − δ_i above 0, each bound at 1 − (α/3)/(K − 1). Whichever arm b is truly best,
  only its K − 1 bounds decide whether it is dropped, so with probability ≥ 1 − α/3 it never is: a dropped arm is
  never better than every arm left, and the leader L (the highest mean Δ among the arms left) is at most
  g = max_j (Δ̄_j − Δ̄_L + h)⁺ below the best arm searched (h the one-sided bounds' margin, j over the arms left).

By the union bound every verdict holds at once with probability ≥ 1 − α, whatever stopped the search.

The spread: the arms' Δ share the baseline's run, so per seed Δ_·i ~ N(δ, σ²/2 · (I + J)) (every run's noise of
variance σ²/2, σ the seed SD of Δ, assumed the same for every arm). σ² is pooled over every arm's seeds (the residual
of the two-way layout run × seed, ``pooled_sd``), with Σ_k (n_k − 1) degrees of freedom: 16 for 8 arms at 3 seeds
rather than each arm's 2. That, not the smaller family, is what lets 8 arms answer within 6 rounds (each arm on its
own spread, the same family returns a 2-SD arm in 24 % of searches: ``attn_yolo.search.simulate``). Each interval
is a t-interval on that spread. Unequal spreads (0.5–1.5 × σ) kept the false rate at 4.0–4.5 % in simulation.

The looks: after ``min`` paired seeds and at ``looks`` (default every round) up to ``max``. Each look j is given the
share α(t_j) − α(t_{j−1}) of every comparison's α (Lan–DeMets spending function ``spending``, t = seeds / ``max``,
``attn_yolo.ablate.statistics.spending.spent``), and the looks are joined by the union bound: no joint law of the
looks is needed, so the pooled spread's degrees of freedom may change with the arms left.

A round adds one paired seed for the baseline and every arm still in. At each look an arm is dropped below the
baseline (its interval lies below 0) or below another arm (that arm's bound over it lies above 0), and the answer so
far is read:

- an arm returned: the leader's interval against the baseline lies above 0 (it stops the search once g ≤
  ``precision``, w, or it is the only arm left: *settled*);
- else none better than the baseline beyond B, the largest upper bound of the arms left: no arm searched is better
  by more than B, the dropped ones included (none is better than the best). It stops the search once B ≤ w, or no
  arm is left.

At ``max`` or the budget the answer so far stands with its B. The rule is replayed from the per-seed Δ (``replay``),
vectorised over many searches, so the simulation (``attn_yolo.search.simulate``) and a real search
(``attn_yolo.search.rounds``) run the same code, and a resumed search takes the same decisions.

The intervals cover the mean Δ over seeds on this validation set (no image bootstrap: the arms' runs alone).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attn_yolo.ablate.statistics.spending import spent

STOPS = ("running", "settled", "answered", "max", "budget")  # why a search stopped (budget: set by the caller)
DROPS = ("in", "below the baseline", "below another arm", "failed")  # an arm's state
ANSWERS = ("none yet", "arm returned", "none better than the baseline beyond the bound")  # the answer so far


@dataclasses.dataclass
class SearchRule:
    """Seeds of a search (config: ``search: {seeds: {min: 3, max: 8, looks: [3, 4, 6, 8]}, precision: 0.003}``).

    Args:
        min: paired seeds before the first look (≥ 2; default 3).
        max: seeds at most for any arm (≥ min).
        precision: w, the resolution at which the search stops (mAP50-95): an arm better than the baseline and
            within w of the best arm, or none better than the baseline by more than w; None: only a settled arm, no
            arm left, ``max`` or the budget stops. The default, 0.003, is the smallest gain users hope for.
        confidence: joint level of all the search's verdicts (0 < confidence < 1).
        spending: how α is shared over the looks: ``pocock`` (even; a search drops arms early) or ``obf``.
        looks: the seed counts at which the rule looks (``max`` always one); None: every count from ``min``.
    """

    max: int = 8
    min: int | None = None
    precision: float | None = 0.003
    confidence: float = 0.95
    spending: str = "pocock"
    looks: list[int] | None = None

    def at(self, arms: int) -> SearchRule:
        """This rule with ``min`` filled in (``arms``: kept for the callers' symmetry with the family's size)."""
        return dataclasses.replace(self, min=self.min or min(3, self.max))

    def planned(self) -> tuple[int, ...]:
        """The looks: the seed counts at which the rule decides, ``max`` always among them."""
        first = self.min or min(3, self.max)
        return tuple(sorted({*(int(n) for n in (self.looks or range(first, self.max + 1))), int(self.max)}))

    def shares(self) -> dict[int, float]:
        """{look: the share of α it is given} (the spending function's increments; they sum to 1)."""
        looks = self.planned()
        a = spent(np.array(looks) / self.max, 1.0, self.spending)
        return dict(zip(looks, np.diff(np.concatenate([[0.0], a])).tolist()))


def levels(arms: int, confidence: float) -> tuple[float, float]:
    """(α of each comparison with the baseline, two-sided; α of each one-sided bound between arms), before the
    looks' shares: 2α/3 over K, α/3 over K − 1 (all of α to the baseline's when K = 1). The split was chosen by
    simulation (``attn_yolo.search.simulate``; 1/2 returned the better arm about 1 % less often)."""
    alpha = 1 - confidence
    if arms <= 1:
        return alpha, 0.0
    return 2 * alpha / 3 / arms, alpha / 3 / (arms - 1)


def guarantee(rule: SearchRule, arms: int) -> str:
    """The guarantee, one sentence for the summary."""
    b, e = levels(arms, rule.confidence)
    between = (f", every drop below another arm and the returned arm's distance to the best (the best arm's "
               f"{arms - 1} one-sided bounds, {100 * (1 - e):.4g} % each)" if arms > 1 else "")
    kind = "Pocock" if rule.spending == "pocock" else "O'Brien–Fleming"
    return (f"With probability at least {rule.confidence:.0%}, every verdict of this search holds at once, whatever "
            f"stopped it: {'the arm' if arms == 1 else f'each of the {arms} arms'} against the baseline (two-sided, "
            f"{100 * (1 - b):.4g} % before the looks' shares){between}, over the looks after "
            f"{', '.join(map(str, rule.at(arms).planned()))} paired seeds ({kind}-type spending)"
            + (", if every arm's seed spread of Δ is the same (it is pooled)." if arms > 1 else "."))


def pooled_sd(d: np.ndarray, have: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The seed SD of Δ pooled over every arm and its degrees of freedom, each (E,), from the per-seed Δ ``d``
    (E, K, N) where ``have`` (E, K, N) marks the seeds counted; NaN where df = 0.

    The residual mean square of the two-way layout run × seed (y_vi = μ_v + β_i + ε_vi, the baseline's cells at 0
    with every seed: Δ is y less the baseline's, which the seed effects absorb), least squares on the cells observed,
    so arms dropped after fewer seeds count with theirs: df = Σ_k (n_k − 1); SD of Δ = √(2 · RSS / df)."""
    e, k, n = d.shape
    w = np.concatenate([np.ones((e, 1, n)), have], 1)  # (E, V, N) observed cells, the baseline's every seed
    y = np.concatenate([np.zeros((e, 1, n)), np.where(have, d, 0.0)], 1)
    v, p = k + 1, k + n  # unknowns: μ_0..μ_K, β_1..β_{N−1} (β_0 = 0)
    a = np.zeros((e, p, p))
    cnt = w.sum(2)
    a[:, np.arange(v), np.arange(v)] = np.where(cnt > 0, cnt, 1.0)  # an arm without seeds: μ = 0, no residual
    a[:, :v, v:] = w[:, :, 1:]
    a[:, v:, :v] = w[:, :, 1:].transpose(0, 2, 1)
    a[:, np.arange(v, p), np.arange(v, p)] = w[:, :, 1:].sum(1)
    rhs = np.concatenate([(w * y).sum(2), (w * y).sum(1)[:, 1:]], 1)
    sol = np.linalg.solve(a, rhs[..., None])[..., 0]
    beta = np.concatenate([np.zeros((e, 1)), sol[:, v:]], 1)
    rss = (w * (y - sol[:, :v, None] - beta[:, None, :]) ** 2).sum((1, 2))
    df = (w.sum((1, 2)) - (v + n - 1) + (cnt == 0).sum(1)).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(df > 0, np.sqrt(np.maximum(2 * rss, 0) / np.maximum(df, 1)), np.nan), df


def pooled_spread(d: np.ndarray, have: np.ndarray, n: int, share: float, rule: SearchRule, between: bool = True
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The margins at a look of ``n`` seeds given the look's ``share`` of α: (half-width against the baseline (E, K),
    margin h of the one-sided bounds between arms (E, K, K), pooled SD (E,), df (E,)); module docstring.
    ``between=False``: no comparisons between arms (all of α to the K with the baseline); an arm is then dropped
    below another only where their intervals against the baseline do not overlap (h = both half-widths)."""
    from scipy.special import stdtrit

    e, k, _ = d.shape
    sd, df = pooled_sd(d, have)
    a_b, a_e = levels(k, rule.confidence) if between else (levels(1, rule.confidence)[0] / k, 0.0)
    with np.errstate(invalid="ignore"):
        q_b = np.where(df > 0, stdtrit(np.maximum(df, 1), 1 - a_b * share / 2), np.inf)
        q_e = np.where(df > 0, stdtrit(np.maximum(df, 1), 1 - a_e * share), np.inf) if between else 2 * q_b
    se = np.where(np.isfinite(sd), sd / math.sqrt(n), np.inf)
    return (np.broadcast_to((q_b * se)[:, None], (e, k)), np.broadcast_to((q_e * se)[:, None, None], (e, k, k)),
            sd, df)


def replay(d: np.ndarray, rule: SearchRule, failed: np.ndarray | None = None, max_runs: int | None = None,
           spread=pooled_spread) -> dict:
    """The search's decisions on per-seed Δ ``d`` (E searches, K arms, N seeds; NaN where a seed was not run).

    Seeds beyond what every arm still in has are not looked at (the search waits for them). ``failed`` (E, K):
    arms whose run failed (out from then on, never called worse). ``max_runs``: a round that would pass it is not
    run (the simulation's budget; a real search's budget is ``attn_yolo.search.rounds.budget_left``). ``spread``:
    the margins at a look (``pooled_spread``; the simulation's other candidates, ``attn_yolo.search.simulate``).

    Returns:
        ``state`` (E, K) index into ``DROPS``; ``n`` (E, K) the seeds each arm used; ``lo``, ``hi``, ``mean`` (E, K)
        against the baseline at its last look; ``by`` (E, K) the arm that beat it (−1: none or the baseline);
        ``stop`` (E,) index into ``STOPS`` (0: more seeds needed); ``rounds`` (E,) seeds run; ``runs`` (E,) training
        runs; ``best`` (E,) the leader (−1: none left); ``settled`` (E,); ``answer`` (E,) index into ``ANSWERS``;
        ``gap`` (E,) how far below the best arm the leader may be; ``bound`` (E,) the most any arm may be better
        than the baseline (the largest upper bound of the arms left); ``sd``, ``df`` (E,) the pooled spread.
    """
    if d.shape[2] == 0:
        d = np.full((*d.shape[:2], 1), np.nan)
    e, k, n_max = d.shape
    rule = rule.at(k)
    s = _State(e, k, failed)
    shares = rule.shares()
    for n in range(1, n_max + 1):
        alive = (s.state == 0) & (s.stop == 0)[:, None]
        ready = (np.isfinite(d[:, :, n - 1]) | ~alive).all(1) & (s.stop == 0)
        batch = (1 + alive.sum(1)) * (rule.min if n == rule.min else 1)
        if max_runs is not None and n >= rule.min:
            over = ready & (s.runs + batch > max_runs)
            s.stop = np.where(over, 4, s.stop)
            ready &= ~over
        if n >= rule.min:
            s.runs = np.where(ready, s.runs + batch, s.runs)
        s.n = np.where(alive & ready[:, None], n, s.n)
        if n in shares and n >= rule.min:
            _look(d, n, rule, shares[n], ready, s, spread)
    return s.result(d, rule)


class _State:
    """The replay's running state over E searches of K arms."""

    def __init__(self, e: int, k: int, failed):
        self.state = np.where(failed, 3, 0) if failed is not None else np.zeros((e, k), np.int64)
        self.n = np.zeros((e, k), np.int64)
        self.by = np.full((e, k), -1)
        self.stop, self.runs, self.answer = (np.zeros(e, np.int64) for _ in range(3))
        self.lo, self.hi = np.full((e, k), -np.inf), np.full((e, k), np.inf)
        self.mean = np.full((e, k), np.nan)
        self.gap, self.sd, self.df = np.full(e, np.inf), np.full(e, np.nan), np.zeros(e, np.int64)

    def result(self, d: np.ndarray, rule: SearchRule) -> dict:
        left = self.state == 0
        mean = _means(d, self.n)
        best = np.where(left.any(1), np.argmax(np.where(left, mean, -np.inf), axis=1), -1)
        bound = np.where(left.any(1), np.where(left, self.hi, -np.inf).max(1),
                         np.where(self.n > 0, self.hi, -np.inf).max(1))
        return {"state": self.state, "n": self.n, "lo": self.lo, "hi": self.hi, "mean": mean, "by": self.by,
                "stop": self.stop, "rounds": self.n.max(1, initial=0), "runs": self.runs, "best": best,
                "settled": (self.answer == 1) & (left.sum(1) == 1), "answer": self.answer, "gap": self.gap,
                "bound": bound, "sd": self.sd, "df": self.df, "rule": rule}  # fmt: skip


def _means(d: np.ndarray, n_used: np.ndarray) -> np.ndarray:
    have = np.arange(d.shape[2])[None, None] < n_used[..., None]
    with np.errstate(invalid="ignore"):
        return np.where(n_used > 0, np.where(have, d, 0.0).sum(2) / np.maximum(n_used, 1), np.nan)


def _look(d: np.ndarray, n: int, rule: SearchRule, share: float, ready: np.ndarray, s: _State, spread) -> None:
    """One look at ``n`` seeds for the searches ``ready``: intervals, drops, the answer and the stop (in ``s``)."""
    have = (np.arange(d.shape[2])[None, None] < s.n[..., None]) & np.isfinite(d)
    half, h, sd, df = spread(d, have, n, share, rule)
    alive = (s.state == 0) & ready[:, None]
    mean = _means(d, s.n)
    s.lo, s.hi = np.where(alive, mean - half, s.lo), np.where(alive, mean + half, s.hi)
    s.mean = np.where(alive, mean, s.mean)
    s.sd, s.df = np.where(ready, sd, s.sd), np.where(ready, df, s.df)
    lower = mean[:, :, None] - mean[:, None, :] - h  # [e, j, i]: one-sided lower bound of δ_j − δ_i
    beats = (lower > 0) & alive[:, :, None] & alive[:, None, :]
    beaten = beats.any(1) & alive
    s.by = np.where(beaten & (s.by < 0), np.argmax(beats, axis=1), s.by)
    s.state = np.where(alive & (s.hi < 0), 1, np.where(beaten, 2, s.state))
    _answer(n, rule, ready, mean, h, s)


def _answer(n: int, rule: SearchRule, ready: np.ndarray, mean: np.ndarray, h: np.ndarray, s: _State) -> None:
    """The answer at this look (module docstring) and the stop, for the searches ``ready``."""
    left = (s.state == 0) & ready[:, None]
    count = left.sum(1)
    lead = np.argmax(np.where(left, mean, -np.inf), axis=1)
    rows = np.arange(len(lead))
    lead_mean = mean[rows, lead]
    others = left.copy()
    others[rows, lead] = False
    margin = h[rows, :, lead]  # h of δ_j − δ_lead, for each j
    gap = np.where(others, np.maximum(mean - lead_mean[:, None] + margin, 0.0), 0.0).max(1)
    s.gap = np.where(ready, np.where(count > 0, gap, np.inf), s.gap)
    w = rule.precision if rule.precision is not None else -math.inf
    returned = (count > 0) & (s.lo[rows, lead] > 0)
    better = (left & (s.lo > 0)).any(1)  # an arm better than the baseline: go on to return it, not "none better"
    bound = np.where(left, s.hi, -np.inf).max(1)
    done = (returned & ((count == 1) | (gap <= w))) | (count == 0) | ((bound <= w) & ~better)
    code = np.where(done & returned & (count == 1), 1, np.where(done, 2, np.where(n >= rule.max, 3, 0)))
    s.answer = np.where(ready & (s.stop == 0), np.where(returned, 1, 2), s.answer)
    s.stop = np.where(ready & (s.stop == 0), code, s.stop)
