"""The seed stopping rule: its confidence sequence stays valid under optional stopping (simulation, fixed seed), the
naive re-checked t-interval does not on the same simulations, the closed-form boundary equals a numerical
integration of the mixture, and the edge cases (too few seeds, equal diffs, NaN, bad rules)."""

import dataclasses
import math
import re

import numpy as np
import pytest

from attn_yolo.ablate.statistics import sequential as sq
from attn_yolo.ablate.statistics.sequential import SeedRule, confidence_sequence, decide, naive_decide, simulate

EXPERIMENTS = 4000
SD = 0.008  # seed SD of Δ mAP50-95 with a warm start (issue 18)
RULE = SeedRule(min=3, max=6)  # the default ablation's design: looks after 3, 4, 5 and 6 seeds


# ------------------------------------------------------------------------------------------ optional stopping


def test_type_one_error_under_optional_stopping_and_naive_exceeds_it():
    """Δ = 0: the rule (min 3, max 20, stopping at the first interval that excludes 0) gives a verdict in at most
    5 % ± 1.5 % of 4,000 experiments; the t-interval re-checked after every seed on the SAME draws (same seed of
    the simulation) gives one far more often."""
    rule = SeedRule(min=3, max=20)
    cs = simulate(rule, 0.0, SD, experiments=EXPERIMENTS, seed=1)
    naive = simulate(rule, 0.0, SD, experiments=EXPERIMENTS, seed=1, naive=True)
    assert cs["better"] + cs["worse"] <= 0.05 + 0.015
    assert naive["better"] + naive["worse"] > 0.05 + 0.015  # about 0.24: the test can fail
    assert naive["better"] + naive["worse"] > 3 * (cs["better"] + cs["worse"])


def test_naive_decide_is_the_rechecked_t_interval():
    """naive_decide is what simulate(naive=True) runs: its first stop on each row equals the simulation's count."""
    rule = SeedRule(min=3, max=12)
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, SD, (EXPERIMENTS, rule.max))
    verdicts = 0
    for row in x[:300]:
        for n in range(1, rule.max + 1):
            d = naive_decide(row[:n], rule)
            if d["stop"]:
                verdicts += d["reason"] == "settled" or (d["lo"] > 0 or d["hi"] < 0)
                break
    sim = simulate(rule, 0.0, SD, experiments=300, seed=1, naive=True)
    assert verdicts == round((sim["better"] + sim["worse"]) * 300)


@pytest.mark.parametrize("rule, bound", [(SeedRule(min=2, max=200, design="cs"), 0.05),
                                         (SeedRule(min=3, max=12), 0.05 + 0.01),
                                         (SeedRule(min=3, max=12, spending="pocock"), 0.05 + 0.01)])
def test_every_look_at_once_without_stopping(rule, bound):
    """The design's intervals hold the mean at every look at once in ≥ 95 % of 2,000 paths: the confidence sequence
    at every n ≤ 200 (Ville's inequality), the alpha-spending ones at each of their looks (exact but for the
    simulation's error); the t-interval re-checked at every n does not."""
    rng = np.random.default_rng(2)
    x = rng.normal(0.3, 2.0, (2000, rule.max))
    lo, hi = sq._intervals(x, 0.95, 0.0, naive=False, rule=rule)
    ever_out = ((lo > 0.3) | (hi < 0.3)).any(1).mean()
    assert ever_out <= bound
    lo_t, hi_t = sq._intervals(x, 0.95, 0.0, naive=True)
    assert ((lo_t > 0.3) | (hi_t < 0.3)).any(1).mean() > 0.15  # the t-interval: about 0.22 at 12 looks, 0.6 at 200


@pytest.mark.parametrize("delta", [0.5 * SD, 1.0 * SD, -2.0 * SD])
def test_coverage_at_nonzero_delta(delta):
    """Δ ≠ 0: the interval at the (data-chosen) stop holds the true Δ in ≥ 94 % of 4,000 experiments."""
    res = simulate(SeedRule(min=3, max=20, precision=0.01), delta, SD, experiments=EXPERIMENTS, seed=3)
    assert res["coverage"] >= 0.94


def test_large_effect_stops_early():
    """|Δ| = 3 seed SDs: the mean seeds used is well below max, and the verdict is right."""
    rule = SeedRule(min=3, max=20)
    for delta in (3 * SD, -3 * SD):
        res = simulate(rule, delta, SD, experiments=EXPERIMENTS, seed=4)
        assert res["mean_seeds"] < rule.max / 2
        assert res["better" if delta > 0 else "worse"] > 0.99


def test_test_var_widens_and_covers():
    """With the validation set's common offset drawn per experiment, the interval given test_var covers Δ (the
    population over images); the seeds-only one, given test_var = 0, does not."""
    rule = SeedRule(min=3, max=20)
    g = (2 * SD) ** 2
    with_g = simulate(rule, 0.0, SD, test_var=g, experiments=EXPERIMENTS, seed=5)
    assert with_g["better"] + with_g["worse"] <= 0.065
    rng = np.random.default_rng(5)  # the same draws, interval ignoring the offset
    x = rng.normal(0.0, SD, (EXPERIMENTS, rule.max)) + rng.normal(0.0, math.sqrt(g), (EXPERIMENTS, 1))
    lo, hi = sq._intervals(x, 0.95, 0.0, naive=False, rule=rule)
    assert ((lo[:, -1] > 0) | (hi[:, -1] < 0)).mean() > 0.3
    a, b = confidence_sequence([0.01, 0.02, 0.015, 0.012], RULE, test_var=0.0)
    c, d = confidence_sequence([0.01, 0.02, 0.015, 0.012], RULE, test_var=1e-4)
    assert c < a and d > b


def test_precision_stop():
    """A requested width stops a null ablation before max with 'precision', and the sentence says so."""
    rule = SeedRule(min=3, max=40, precision=0.02)
    res = simulate(rule, 0.0, SD, experiments=EXPERIMENTS, seed=6)
    assert res["reasons"]["precision"] > 0.9 and res["mean_seeds"] < 40
    rng = np.random.default_rng(0)
    x = rng.normal(0, SD, 40)
    d = next(decide(x[:n], rule) for n in range(3, 41) if decide(x[:n], rule)["stop"])
    assert d["reason"] == "precision" and d["hi"] - d["lo"] < 0.02 and "precision 0.02" in d["text"]


# ------------------------------------------------------------------------------------------ the boundary


def _mixture_numeric(x: np.ndarray, mu: float, tau2: float) -> float:
    """M_n(μ) by numerical integration (trapezoid on a fine grid, in logs) of the Gaussian likelihood of x − μ over
    log σ (Haar prior dσ/σ) and over the standardized effect θ ~ N(0, τ²), divided by the same at θ = 0."""
    from scipy.special import logsumexp
    from scipy.stats import norm

    y = (x - mu) / np.sqrt(np.mean((x - mu) ** 2))  # scale-free: the ratio does not depend on it
    log_s = np.linspace(-8, 6, 561)[:, None]
    theta = np.linspace(-10, 10, 801)[None, :] * math.sqrt(tau2)
    log_lik = sum(norm.logpdf(yi / np.exp(log_s) - theta) for yi in y) - len(y) * log_s  # (S, Θ)
    num = logsumexp(log_lik + norm.logpdf(theta, 0, math.sqrt(tau2))) + math.log(theta[0, 1] - theta[0, 0])
    den = logsumexp(log_lik[:, 400])  # θ = 0 (grid centre); the log σ step cancels
    return math.exp(num - den)


def test_closed_form_equals_numerical_mixture():
    """The closed-form M_n equals the integrated mixture, and at the ends of the confidence sequence tuned to 6 seeds
    (``design: cs``) M_n = 1/α with its τ² (the boundary)."""
    rng = np.random.default_rng(7)
    x = rng.normal(0.01, SD, 6)
    for mu in (0.0, 0.004, 0.02):
        assert sq.mixture_martingale(x, mu) == pytest.approx(_mixture_numeric(x, mu, sq.PRIOR_SCALE2), rel=1e-9)
    tau2 = sq.tuned_tau2(6, 0.05)
    lo, hi = confidence_sequence(x, SeedRule(min=3, max=6, design="cs"))
    for end in (lo, hi):
        assert _mixture_numeric(x, end, tau2) == pytest.approx(20.0, rel=1e-9)
    inside = (lo + hi) / 2
    assert sq.mixture_martingale(x, inside, tau2) < 20 and sq.mixture_martingale(x, hi + 1e-4, tau2) > 20


def test_radius_factor_wider_than_t_and_finite_from_3():
    """Anytime validity costs width: the factor exceeds t_{n−1} at every n, and is finite from 3 seeds (95 %)."""
    from scipy.stats import t

    n = np.arange(2, 60)
    k = sq.radius_factor(n, 0.05)
    assert math.isinf(k[0]) and np.isfinite(k[1:]).all()
    assert (k[1:] > t.ppf(0.975, n[1:] - 1)).all()
    assert (np.diff(k[1:]) < 0).all()


# ------------------------------------------------------------------------------------------ edge cases


def test_too_few_seeds_unbounded():
    """Before the first look (and while the confidence sequence is unbounded) the interval is unbounded."""
    assert confidence_sequence([], RULE) == (-math.inf, math.inf)
    assert confidence_sequence([0.1], RULE) == (-math.inf, math.inf)
    assert confidence_sequence([0.1, 0.2], RULE) == (-math.inf, math.inf)
    d = decide([0.1, 0.2], SeedRule(min=2, max=5, design="cs"))
    assert d["reason"] == "continue" and "unbounded" in d["text"]


def test_all_equal_diffs():
    """Equal diffs: zero width (the scale-invariant statistic sees no spread), so a settled verdict for non-zero,
    a precision stop for 0; with test_var the width is the validation set's term."""
    assert confidence_sequence([0.01] * 4, RULE) == (0.01, 0.01)
    d = decide([0.01] * 4, SeedRule(min=3, max=10))
    assert d["stop"] and d["reason"] == "settled" and d["verdict"] == "better"
    assert decide([0.0] * 4, SeedRule(min=3, max=10, precision=0.005))["reason"] == "precision"
    assert decide([0.0] * 4, SeedRule(min=3, max=10))["reason"] == "continue"
    lo, hi = confidence_sequence([0.01] * 4, RULE, test_var=1e-4)
    assert lo < 0.01 < hi and math.isfinite(lo)


@pytest.mark.parametrize("bad", [[0.1, math.nan, 0.2], [0.1, math.inf]])
def test_nan_refused(bad):
    with pytest.raises(ValueError, match="finite"):
        confidence_sequence(bad, RULE)
    with pytest.raises(ValueError, match="finite"):
        decide(bad, SeedRule())


def test_rule_bounds_and_reasons():
    """Never stops before min (even when the interval excludes 0), always at max; reasons in the sentence."""
    rule = SeedRule(min=5, max=6)
    clear = [0.1, 0.11, 0.1, 0.105]
    assert not decide(clear, rule)["stop"] and decide(clear, SeedRule(min=4, max=6))["reason"] == "settled"
    d = decide([0.01, -0.01, 0.02, -0.02, 0.0, 0.01], rule)
    assert d["stop"] and d["reason"] == "max" and d["text"].startswith("stopped at the maximum of 6 seeds")
    s = decide([0.010, 0.012, 0.009, 0.011, 0.013], SeedRule(min=3, max=10))
    assert s["text"].startswith("stopped after 5 seeds: the interval [+0.") and "excludes 0" in s["text"]
    w = decide([-0.010, -0.012, -0.009, -0.011, -0.013], SeedRule(min=3, max=10))
    assert w["verdict"] == "worse" and w["hi"] < 0


@pytest.mark.parametrize("kw, key", [({"min": 5, "max": 3}, "seeds.max"), ({"precision": 0}, "seeds.precision"),
                                     ({"precision": -0.1}, "seeds.precision"), ({"min": 1}, "seeds.min"),
                                     ({"max": 2.5}, "seeds.max"), ({"confidence": 1.0}, "seeds.confidence"),
                                     ({"design": "gs"}, "seeds.design: 'gs'; expected one of spending, cs"),
                                     ({"spending": "linear"}, "seeds.spending: 'linear'; expected one of obf, pocock"),
                                     ({"looks": [3, 5, 4]}, "seeds.looks: [3, 5, 4]; expected increasing"),
                                     ({"looks": [2, 4]}, "seeds.looks: [2, 4]; expected seed counts from seeds.min"),
                                     ({"min": 3, "max": 6, "looks": [8, 10]}, "seeds.max: 6; below the first look")])
def test_bad_rule_names_key(kw, key):
    with pytest.raises(ValueError, match=re.escape(key)):
        SeedRule(**kw)


def test_decide_all():
    rule = SeedRule(min=3, max=10)
    out = sq.decide_all({"cbam": [0.01, 0.012, 0.011, 0.0105], "se": [0.01, -0.01, 0.0, 0.005]}, rule)
    assert not out["stop"] and out["variants"]["cbam"]["stop"] and not out["variants"]["se"]["stop"]


# ------------------------------------------------------------------------------------------ glue and speed paths


def test_kernel_blocks_do_not_mix_resamples():
    """weighted_ap's kernel takes resamples BLOCK at a time: the layout holds resample j of image i at
    blocks[j // BLOCK, i, j % BLOCK] with zero padding, and each resample's metrics are the same computed among
    BLOCK + 7 others or alone."""
    from attn_yolo.ablate.runs import perimage
    from attn_yolo.ablate.statistics.weighted_ap import BLOCK, WeightedMetrics, Weights

    rng = np.random.default_rng(8)
    rec = perimage.simulate_run(rng, perimage.simulate_val_set(rng, 25, 3, 2.0), fp_per_image=2)
    wt = rng.integers(0, 4, (rec.n_images, BLOCK + 7))
    w = Weights(wt)
    assert w.blocks.shape == (2, rec.n_images, BLOCK) and w.blocks.dtype == np.uint8
    np.testing.assert_array_equal(w.blocks[1, :, :7], wt[:, BLOCK:])
    assert not w.blocks[1, :, 7:].any() and np.array_equal(w.blocks[0], wt[:, :BLOCK])
    wm = WeightedMetrics(rec)
    together = wm(w)
    for j in (0, BLOCK - 1, BLOCK, BLOCK + 6):
        alone = wm(wt[:, j:j + 1])
        for key, v in alone.items():
            np.testing.assert_array_equal(together[key][j], v[0], err_msg=f"{key}, resample {j}")


def test_resample_cache_reuses_and_refreshes():
    """resample_records(cache=): unchanged runs come from the cache (same objects), equal to a fresh computation; a
    changed record is recomputed."""
    from attn_yolo.ablate.runs import perimage
    from attn_yolo.ablate.statistics import stats

    rng = np.random.default_rng(9)
    val = perimage.simulate_val_set(rng, 40, 2, 2.0)
    recs = {("b", 0): perimage.simulate_run(rng, val), ("v", 0): perimage.simulate_run(rng, val, skill=1.3)}
    cache = {}
    first = stats.resample_records(recs, 50, cache=cache)
    again = stats.resample_records(recs, 50, cache=cache)
    assert all(again[k] is first[k] for k in recs) and len(cache) == 2
    fresh = stats.resample_records(recs, 50)
    for k in recs:
        for m in fresh[k]["boot"]:
            np.testing.assert_array_equal(fresh[k]["boot"][m], first[k]["boot"][m])
    recs[("v", 0)] = perimage.simulate_run(rng, val, skill=0.2)
    third = stats.resample_records(recs, 50, cache=cache)
    assert third[("b", 0)] is first[("b", 0)] and third[("v", 0)] is not first[("v", 0)] and len(cache) == 3
    assert stats.resample_records(recs, 60, cache=cache)[("b", 0)] is not first[("b", 0)]  # other resamples


def test_decide_from_bootstrap_reads_deltas_and_test_var():
    """The per-seed decision from bootstrap_compare's output: Δ of the primary metric, its test-set variance."""
    hier = {"test_var": 4e-6}
    compared = {"cbam": {"map50_95": {"deltas": [0.01, 0.012, 0.011, 0.0105], "hier": hier}},
                "se": {"seeds": []}}  # no records: left out
    out = sq.decide_from_bootstrap(compared, SeedRule(min=3, max=10))
    assert list(out["variants"]) == ["cbam"]
    assert (out["variants"]["cbam"]["lo"], out["variants"]["cbam"]["hi"]) == confidence_sequence(
        [0.01, 0.012, 0.011, 0.0105], SeedRule(min=3, max=10), test_var=4e-6)


def test_per_seed_bench_runs(capsys):
    """scripts/bench_bootstrap.py --per-seed prints one decision row per seed (tiny sizes)."""
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_bootstrap.py"
    argv = sys.argv
    sys.argv = [str(script), "--per-seed", "--seeds", "3", "--images", "30", "--resamples", "50"]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    assert e.value.code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 3 and "stopped" in rows[-1] and "continue" in rows[0] and "per-seed decision:" in out


# ------------------------------------------------------------------------------------------ joint verdicts


def test_joint_verdicts_hold_across_ten_variants_and_the_uncorrected_rule_does_not():
    """2,000 simulated ablations of 10 variants at Δ = 0, each variant stopping on its own as soon as its interval
    excludes 0 (optional stopping, min 3, max 20): with the Bonferroni split the rate of ablations with any false
    verdict is at most 5 % ± 1.5 %; the per-variant rule at 95 % each, on the SAME draws, exceeds it (about 1 in 3).
    Power at a real effect (one variant 2 seed-SDs better) is reported beside it."""
    rule = SeedRule(min=3, max=20)
    joint = sq.simulate_family(rule, [0.0] * 10, SD, experiments=2000, seed=11)
    naive = sq.simulate_family(rule, [0.0] * 10, SD, experiments=2000, seed=11, joint=False)
    assert joint["family"] == 10 and joint["confidence"] == pytest.approx(0.995)
    assert joint["any_false"] <= 0.05 + 0.015
    assert naive["any_false"] > 0.05 + 0.015  # about 0.30
    power = sq.simulate_family(rule, [0.0] * 9 + [2 * SD], SD, experiments=2000, seed=12)
    print(f"\nany false verdict, 10 null variants: joint {joint['any_false']:.4f}, uncorrected "
          f"{naive['any_false']:.4f}; power at Δ = 2 SD: {power['power'][9]:.3f}; runs {power['runs']:.0f} of "
          f"{power['full_runs']}")
    assert power["power"][9] >= 0.9 and power["any_false"] <= 0.065


def test_simulate_family_matches_decide_all_on_its_own_draws():
    """simulate_family's verdicts are decide_all's: re-run decide_all on the draws of one simulated ablation (the same
    generator calls) and compare the rate of false verdicts row by row."""
    rule, k, e, sd = SeedRule(min=3, max=8), 4, 60, SD
    rng = np.random.default_rng(5)
    base = rng.normal(0.0, sd / math.sqrt(2), (e, 1, rule.max))
    x = rng.normal(0.0, sd / math.sqrt(2), (e, k, rule.max)) - base
    false = 0
    for row in x:
        out = sq.decide_all({f"v{i}": row[i] for i in range(k)}, rule)
        false += any(d["verdict"] in ("better", "worse") for d in out["variants"].values())
    sim = sq.simulate_family(rule, [0.0] * k, sd, experiments=e, seed=5)
    assert sim["any_false"] == pytest.approx(false / e)


def test_one_comparison_is_unchanged_and_a_stopped_arm_keeps_its_decision():
    """family = 1: the interval is the design's at the rule's level. A comparison that settled at seed 3 keeps that
    decision when later seeds (run for other arms) would reopen it."""
    rule = SeedRule(min=3, max=10)
    one = sq.decide_all({"cbam": [0.01, 0.0101, 0.0099, 0.0105]}, rule)
    assert one["family"] == 1 and one["confidence"] == 0.95
    assert (one["variants"]["cbam"]["lo"], one["variants"]["cbam"]["hi"]) == confidence_sequence(
        [0.01, 0.0101, 0.0099], rule)  # stopped (settled) at 3 seeds: the 4th does not change it
    later = sq.decide_all({"cbam": [0.01, 0.0101, 0.0099, -0.05, 0.04]}, rule)["variants"]["cbam"]
    assert later["n"] == 3 and later["verdict"] == "better"


def test_joint_level_widens_each_interval_and_needs_more_seeds():
    """Two comparisons: each interval is at 97.5 %, wider than at 95 %. The alpha-spending design is bounded from its
    first look; the confidence sequence tuned to 10 seeds (its mixture fitted there) only from 5 (first_bounded)."""
    x = [0.01, 0.02, 0.015, 0.012, 0.011]
    rule = SeedRule(min=5, max=10)
    two = sq.decide_all({"a": x, "b": x}, rule)
    lo, hi = confidence_sequence(x, dataclasses.replace(rule, confidence=0.975))
    assert (two["variants"]["a"]["lo"], two["variants"]["a"]["hi"]) == (lo, hi)
    assert hi - lo > np.subtract(*confidence_sequence(x, rule)[::-1])
    assert sq.first_bounded(rule) == 5 and sq.first_bounded(dataclasses.replace(rule, confidence=0.975)) == 5
    cs = SeedRule(min=2, max=10, design="cs")
    assert sq.first_bounded(cs) == 5 and sq.first_bounded(dataclasses.replace(cs, confidence=0.975)) == 5
    with pytest.raises(ValueError, match="family"):
        sq.joint_confidence(0.95, 0)
