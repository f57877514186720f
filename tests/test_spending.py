"""The sequential design fitted to the planned looks (issue 49): the spending functions and boundaries, the
false-verdict rate under the runner's stopping (every arm on its own) at K = 1 and 10, the width at 6 seeds against
the fixed-n interval, why a rerun may not raise ``max`` (and its refusal), and bad design keys."""

import dataclasses
import math

import numpy as np
import pytest

from attn_yolo.ablate.runs import rerun
from attn_yolo.ablate.statistics import sequential as sq
from attn_yolo.ablate.statistics import spending
from attn_yolo.ablate.statistics.sequential import SeedRule
from attn_yolo.args import UsageError

SD = 0.008  # seed SD of Δ mAP50-95 with a warm start (issue 18)
ABLATIONS = 2000  # per cell


def test_spending_functions_spend_alpha_by_the_last_look():
    """Lan–DeMets: both functions reach α at t = 1 and rise with t; O'Brien–Fleming's spends almost nothing early."""
    t = np.linspace(0.1, 1, 10)
    for kind in spending.SPENDING:
        a = spending.spent(t, 0.05, kind)
        assert a[-1] == pytest.approx(0.05) and (np.diff(a) > 0).all()
    assert spending.spent(0.25, 0.05, "obf") < 1e-4 < spending.spent(0.25, 0.05, "pocock")
    with pytest.raises(ValueError, match="spending function 'linear'"):
        spending.spent(t, 0.05, "linear")


def test_boundaries_are_deterministic_and_fall_to_near_the_fixed_n_one():
    """The boundaries (fixed simulation seed) come out the same when computed again; O'Brien–Fleming's fall with the
    looks to within 1.2× the fixed-n t quantile at the last look, Pocock's stay higher there."""
    from scipy.special import stdtrit

    looks = (3, 4, 5, 6)
    obf = spending.boundaries(looks, 6, 0.05, "obf")
    spending.boundaries.cache_clear()
    assert spending.boundaries(looks, 6, 0.05, "obf") == obf
    assert all(a > b for a, b in zip(obf, obf[1:], strict=False))
    fixed = float(stdtrit(5, 0.975))
    assert fixed < obf[-1] < 1.2 * fixed
    assert spending.boundaries(looks, 6, 0.05, "pocock")[-1] > obf[-1]


@pytest.mark.parametrize("k", [1, 10])
@pytest.mark.parametrize("rule", [SeedRule(min=3, max=6), SeedRule(min=3, max=12),
                                  SeedRule(min=3, max=12, spending="pocock", precision=2 * SD),
                                  SeedRule(min=3, max=6, design="cs")], ids=["obf-6", "obf-12", "pocock-12", "cs-6"])
def test_false_verdict_rate_under_the_runners_stopping(rule, k):
    """2,000 simulated ablations of K null arms sharing the baseline's noise, each arm stopping on its own at its
    first look where its interval excludes 0 (or is narrower than the precision, or at max), as the runner does
    (``decide_all``, ``first_stop``): the rate of ablations with any false verdict is at most 5 % ± 1.5 %; the
    alpha-spending designs spend nearly all of it (Bonferroni over correlated arms gives a little back)."""
    r = sq.simulate_family(rule, [0.0] * k, SD, experiments=ABLATIONS, seed=100 + k)
    assert r["any_false"] <= 0.05 + 0.015
    if rule.design == "spending" and rule.precision is None:
        assert r["any_false"] >= 0.05 - 0.015


def test_false_verdict_rate_with_arms_that_settle_early():
    """Ten arms, five with a real gain of 2 seed SDs that settle and stop early while the five null arms run on to
    max: the null arms' and the wrong-sign verdicts together stay within 5 % ± 1.5 %; the real gains are found."""
    r = sq.simulate_family(SeedRule(min=3, max=12), [0.0] * 5 + [2 * SD] * 5, SD, experiments=ABLATIONS, seed=7)
    assert r["any_false"] <= 0.05 + 0.015
    assert min(r["power"].values()) > 0.9 and r["runs"] < r["full_runs"]


def test_raising_max_on_a_rerun_would_break_the_guarantee_so_it_is_refused(tmp_path):
    """What a rerun raising max from 6 to 12 would do (2,000 null ablations read at 3..6 under the design fitted to 6,
    then at 7..12 under the one fitted to 12): a false-verdict rate well above 5 % (about 8 %). So the runner refuses
    it before any work (exit 2, ``UsageError``) naming the key, as any change of the design on finished runs; the
    precision may change, and an out folder without finished runs takes any design."""
    r6, r12 = SeedRule(min=3, max=6), SeedRule(min=3, max=12)
    x = np.random.default_rng(3).normal(0.0, SD, (ABLATIONS, 12))
    lo6, hi6 = sq._intervals(x[:, :6], 0.95, 0.0, naive=False, rule=r6)
    lo12, hi12 = sq._intervals(x, 0.95, 0.0, naive=False, rule=r12)
    raised = ((lo6 > 0) | (hi6 < 0)).any(1) | ((lo12 > 0) | (hi12 < 0))[:, 6:].any(1)
    assert raised.mean() > 0.05 + 0.015
    old, new = {"seeds": dataclasses.asdict(r6)}, {"seeds": dataclasses.asdict(r12)}
    with pytest.raises(UsageError, match=r"seeds\.max: 6 -> 12: the 8 finished run\(s\)") as e:
        rerun.check_seed_design(tmp_path, old, new, 8)
    assert "out=<new folder>" in str(e.value) and "\n" not in str(e.value)
    rerun.check_seed_design(tmp_path, old, new, 0)  # nothing read yet: any design
    rerun.check_seed_design(tmp_path, old, {"seeds": dataclasses.asdict(dataclasses.replace(r6, precision=0.01))}, 8)
    earlier = {"seeds": {"min": 3, "max": 6, "precision": None, "confidence": 0.95}}  # before this design existed
    with pytest.raises(UsageError, match=r"seeds\.design: \(the confidence sequence of versions before"):
        rerun.check_seed_design(tmp_path, earlier, old, 8)


def test_interval_at_six_seeds_and_two_comparisons_is_near_the_fixed_n_one():
    """K = 2 at 6 seeds (each interval at 97.5 %): on 2,000 simulated ablations that reach the last look, the
    interval is at most 1.4× the fixed-n t-interval on the same seeds at the same joint level (about 1.12×); the
    anytime-valid sequence of earlier versions (τ² = 10) is 1.8×, the one tuned to 6 seeds in between."""
    from scipy.special import stdtrit

    each = dataclasses.replace(SeedRule(min=3, max=6), confidence=sq.joint_confidence(0.95, 2))
    x = np.random.default_rng(5).normal(0.0, SD, (ABLATIONS, 6))
    lo, hi = sq._intervals(x, each.confidence, 0.0, naive=False, rule=each)
    lo_t, hi_t = sq._intervals(x, each.confidence, 0.0, naive=True)
    ratio = (hi - lo)[:, -1] / (hi_t - lo_t)[:, -1]
    assert ratio.max() <= 1.4
    fixed = float(stdtrit(5, 1 - 0.025 / 2))
    assert float(sq.radius_factor(6, 0.025)) / fixed > 1.75
    tuned = sq.factors(dataclasses.replace(each, design="cs"), 0.025, 6)[0][-1]
    assert 1.4 < tuned / fixed < float(sq.radius_factor(6, 0.025)) / fixed


def test_guarantee_sentence_names_the_design_and_the_family():
    text = sq.guarantee(SeedRule(min=3, max=6), 2)
    assert text.startswith("With probability at least 95 %, the intervals of all 2 comparisons (each at 97.5 %)")
    assert "O'Brien–Fleming-type alpha-spending design over the looks after 3 to 6 paired seeds" in text
    assert "Pocock-type" in SeedRule(spending="pocock").words() and "tuned to 10 seeds" in SeedRule(
        design="cs").words()
    assert sq.kind(SeedRule()) == "group-sequential" and sq.kind(SeedRule(design="cs")) == "anytime-valid"


def test_looks_given_stop_only_there():
    """``looks: [3, 6]``: no decision after 4 or 5 seeds (the interval there is the one of the look at 3); the gain
    is called at the look at 6."""
    rule = SeedRule(min=3, max=6, looks=[3, 6])
    x = [0.02, 0.0, 0.01, 0.01, 0.01, 0.01]
    assert math.isfinite(sq.confidence_sequence(x[:3], rule)[0]) and not sq.decide(x[:3], rule)["stop"]
    for n in (4, 5):
        assert sq.confidence_sequence(x[:n], rule) == sq.confidence_sequence(x[:3], rule)
        assert sq.decide(x[:n], rule)["reason"] == "continue"
    assert sq.decide(x, rule)["verdict"] == "better"


def test_the_report_of_a_sequential_ablation_with_per_image_records(tmp_path, tiny_data):
    """Seeds chosen by the data and runs with per-image records (fake ones): the report is written, its verdict line
    and delta.png name the design's interval (a regression: the report step once failed there, after every run)."""
    from pathlib import Path

    from conftest import write_config
    from test_ablate import fake_runner
    from test_bootstrap import box_record

    from attn_yolo import ablate
    from attn_yolo.ablate.runs import perimage

    def runner(spec, device):
        rec = box_record(np.random.default_rng(0), 12, 2)  # the same images and boxes in every run: paired
        rec.pred_tp = np.random.default_rng([spec.seed, spec.variant == "cbam"]).random(rec.pred_tp.shape) < 0.6
        perimage.save_record(rec, Path(spec.run_dir) / perimage.PERIMAGE_NAME)
        row = fake_runner(spec, device)
        return row | {"map50_95": row["map50_95"] + 0.001 * (spec.variant == "cbam") * (1 + spec.seed % 2)}

    cfg = write_config(tmp_path, tiny_data, seeds={"min": 3, "max": 4})
    assert ablate.run(cfg, runner=runner) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "group-sequential 95% CI" in text and "O'Brien–Fleming-type alpha-spending design" in text
    assert (tmp_path / "out" / "delta.png").is_file()
