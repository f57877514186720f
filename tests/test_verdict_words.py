"""One verdict vocabulary: the Δ table's mAP50-95 row carries the headline's words, the secondary metrics are marked
exploratory (never a verdict), and the power line's figures are those of the interval that decides (the confidence
sequence's with seeds chosen by the data: never "needs 2 paired seeds" where it is unbounded below 3)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.runs.records import new_record
from attn_yolo.ablate.statistics import seqpower, sequential, stats, verdicts
from attn_yolo.ablate.statistics.sequential import SeedRule


def fake(deltas: dict):
    def runner(spec, device):
        d = deltas[spec.seed] if spec.variant == "cbam" else 0.0
        return {**new_record(spec, device), "status": "ok", "precision": 0.5 + 3 * d, "recall": 0.5 + 2 * d,
                "map50": 0.5 + d, "map50_95": 0.3 + d, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1}

    return runner


def test_delta_table_speaks_the_headlines_words_and_secondary_metrics_are_exploratory(tmp_path, tiny_data):
    """P and R move by 3× and 2× a Δ clearly above 0 (their intervals exclude 0): they read "exploratory: interval
    above 0", not "better"; the mAP50-95 row reads what the headline says."""
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    assert ablate.run(cfg, runner=fake({0: 0.004, 1: 0.005, 2: 0.0045})) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    head = text.split("## Verdict")[1].split("## Setup")[0]
    words = head.split("- **cbam**: **")[1].split("**")[0]
    assert words == "better"
    table = {line.split("|")[2].strip(): line.split("|")[-2].strip() for line in text.splitlines()
             if line.startswith("| cbam |")}  # fmt: skip
    assert table["mAP50-95"] == words
    for label in ("P", "R", "mAP50"):
        assert table[label] == "exploratory: interval above 0", (label, table[label])
    assert "better" not in [v for k, v in table.items() if k != "mAP50-95"]
    assert "no detectable difference" not in text  # the headline's vocabulary only
    assert "Only mAP50-95 carries a verdict" in text


def test_no_difference_words_are_the_same_in_headline_and_table(tmp_path, tiny_data):
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    assert ablate.run(cfg, runner=fake({0: 0.001, 1: -0.001, 2: 0.0005})) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    words = text.split("## Verdict")[1].split("- **cbam**: **")[1].split("**")[0]
    assert words.startswith("no difference beyond ±")
    row = next(line for line in text.splitlines() if line.startswith("| cbam | mAP50-95 |"))
    assert row.rstrip(" |").endswith(words)


def _ab(rule):
    return SimpleNamespace(seed_rule=rule, variants=[SimpleNamespace(name="baseline"), SimpleNamespace(name="cbam")],
                           baseline="baseline", placebos={})  # fmt: skip


def test_power_line_of_the_sequential_design_never_asks_fewer_seeds_than_its_first_look():
    """A tiny seed SD: the fixed-n design would 'need 2 paired seeds'; the design that decides (alpha spending over
    the looks 3 .. 6) reads nothing before its first look, so its figure is at least 3, and equals the first n whose
    design fitted to n seeds detects 0.01 at its last look."""
    rule = SeedRule(min=3, max=6)
    diffs = [0.0004, -0.0002, 0.0001]
    h = {"seed_var": float(np.var(diffs, ddof=1)), "test_var": 0.0, "n": 3}
    assert stats.seeds_needed(h["seed_var"], 0.0, 0.01) == 2  # what the line used to print
    seq = sequential.decide(diffs, rule)
    line, mde = verdicts.power_line(_ab(rule), "cbam", h, seq, 200)
    need = seqpower.seeds_for(0.01, h["seed_var"], rule, 0.0)
    assert need >= sequential.first_bounded(rule) == 3
    assert f"needs {need} paired seeds (this design fitted to seeds.max {need}; now 6)" in line
    assert "needs 2 paired seeds" not in line and "(group-sequential, at 95%)" in line
    half = (seq["hi"] - seq["lo"]) / 2
    assert mde >= half and f"resolves ±{half:.4f}" in line and f"detects |Δ| >= {mde:.4f}" in line


def test_power_line_blames_the_seeds_or_the_images_by_which_one_is_too_noisy():
    """Seeds that disagree (SD of Δ 0.1, the default on the key data) need more seeds than the search tries, not
    more validation images; a validation set whose own noise alone hides Δ = 0.01 needs more images."""
    rule = SeedRule(min=3, max=6)
    diffs = [0.0, 0.2, -0.05, 0.1, -0.1, 0.05]
    seq = sequential.decide(diffs, rule)
    seedy = {"seed_var": float(np.var(diffs, ddof=1)), "test_var": 1e-6, "n": 6}
    line, _ = verdicts.power_line(_ab(rule), "cbam", seedy, seq, 200)
    assert f"Δ = 0.01 needs more than {seqpower.SEEDS_LIMIT} paired seeds" in line
    assert "validation images" not in line
    assert seqpower.seeds_for(0.01, 0.0, rule, 1e-6) is not None  # the images alone would resolve it
    noisy = {"seed_var": 1e-6, "test_var": 0.02 ** 2, "n": 6}
    line, _ = verdicts.power_line(_ab(rule), "cbam", noisy, seq, 200)
    assert "Δ = 0.01 is out of reach by adding seeds: use more validation images" in line


def test_power_line_of_a_fixed_design_counts_seeds_at_the_joint_level():
    """18 arms with fixed seeds: each interval is at 1 − 0.05/18. The seeds the line says Δ = 0.01 needs are those
    at which a design at that level detects it (the line used to count them at 95 % beside a detectable Δ at 99.7 %,
    and said 3 seeds where 3 detected only 0.018)."""
    ab = SimpleNamespace(seed_rule=None, baseline="baseline", placebos={},
                         variants=[SimpleNamespace(name=n) for n in ["baseline", *(f"arm{i}" for i in range(18))]])
    h = {"seed_var": 0.0016 ** 2, "test_var": 0.0001 ** 2, "n": 3}
    line, mde = verdicts.power_line(ab, "arm0", h, None, 200)
    alpha = 0.05 / 18
    need = stats.seeds_needed(h["seed_var"], h["test_var"], 0.01, alpha=alpha)
    assert mde == pytest.approx(stats.detectable_delta(h["seed_var"], h["test_var"], 3, alpha), rel=1e-3) and mde > 0.01
    assert need > 3 and f"needs {need} paired seeds" in line
    assert stats.detectable_delta(h["seed_var"], h["test_var"], need, alpha) <= 0.01
    assert stats.detectable_delta(h["seed_var"], h["test_var"], need - 1, alpha) > 0.01


@pytest.mark.parametrize("design", ["spending", "cs"])
def test_detectable_delta_of_the_design_by_simulation(design):
    """At the true Δ = ``seqpower.detectable`` (known SD, as the formula takes it) the design's interval after n
    seeds excludes 0 in about 80 % of simulated ablations (the sample SD's spread moves it a little)."""
    sd, n = 0.008, 6
    rule = SeedRule(min=3, max=n, design=design)
    delta = seqpower.detectable(sd**2, n, rule)
    rng = np.random.default_rng(0)
    x = rng.normal(delta, sd, (4000, n))
    lo = sequential._intervals(x, rule.confidence, 0.0, naive=False, rule=rule)[0][:, -1]  # confidence_sequence's
    assert 0.65 <= np.mean(lo > 0) <= 0.9
    assert seqpower.half_width(sd**2, 2, rule) == math.inf and seqpower.detectable(sd**2, 2, rule) == math.inf


@pytest.mark.parametrize("design", ["spending", "cs"])
def test_half_width_is_the_designs_own(design):
    x = np.random.default_rng(1).normal(0.002, 0.01, 7)
    s2 = float(np.var(x, ddof=1))
    rule = SeedRule(min=3, max=8, confidence=0.975, design=design)
    for tv in (0.0, 1e-6):
        lo, hi = sequential.confidence_sequence(x, rule, tv)
        assert seqpower.half_width(s2, 7, rule, tv) == pytest.approx((hi - lo) / 2, rel=1e-9)
