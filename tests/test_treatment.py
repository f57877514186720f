"""The attention check: which blocks an arm adds (golden paths), the identity in their place (against hooks by hand),
the criterion and its edge cases, the new blocks' own learning rate and γ, and the design keys' bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import yaml
from conftest import randomized, write_config

from attn_yolo import ablate
from attn_yolo.ablate.statistics import treatment
from attn_yolo.ablate.statistics.treatment import NewBlocks, check_new_blocks, check_treatment
from attn_yolo_console import main as cli_main


def model_of(d: dict):
    from ultralytics.nn.tasks import DetectionModel

    return DetectionModel(copy.deepcopy(d), nc=4, verbose=False).eval()


@pytest.fixture(scope="module")
def dicts():
    from ultralytics.nn.tasks import yaml_model_load

    from attn_yolo.insertion import insert_dict

    base = yaml_model_load("yolo11n.yaml")
    return {
        "base": base,
        "cbam": insert_dict("yolo11n.yaml", "CBAM", "backbone", [16, 7], identity=True),
        "csp": insert_dict("yolo11n.yaml", "C3k2_CBAM", 4, identity=True),
        "s": yaml_model_load("yolo11s.yaml"),
    }


# ------------------------------------------------------------------------------------------------ which blocks


def test_new_block_paths_are_the_inserted_rows_and_the_blocks_inside_replaced_rows(dicts):
    """Golden lists: CBAM after the backbone's P3/P4/P5 outputs (yolo11n rows 4, 6, 10 → arm rows 5, 8, 13); C3k2_CBAM
    in place of row 4: the CBAM of its bottleneck; the baseline adds nothing; another model: not applicable."""
    b = dicts["base"]
    assert treatment.new_block_paths(b, dicts["cbam"], model_of(dicts["cbam"])) == ["model.5", "model.8", "model.13"]
    csp = model_of(dicts["csp"])
    paths = treatment.new_block_paths(b, dicts["csp"], csp)
    assert paths and all(p.startswith("model.4.") for p in paths)
    assert all(type(csp.get_submodule(p)).__name__ == "CBAM" for p in paths)
    assert treatment.new_block_paths(b, b, model_of(b)) == []
    assert treatment.new_block_paths(b, dicts["s"], model_of(dicts["s"])) is None


def test_knocked_out_equals_the_blocks_replaced_by_the_identity_with_hooks(dicts):
    """knocked_out (modules replaced) against an independent knock-out: forward hooks that return each block's input;
    with random blocks at γ = 1 both differ from the model itself, and agree with each other exactly."""
    for key in ("cbam", "csp"):
        m = model_of(dicts[key])
        paths = treatment.new_block_paths(dicts["base"], dicts[key], m)
        m = randomized(m, std=0.3).eval()  # float64, no weight at its init value (γ = 1 is set below)
        assert treatment.set_gamma(m, paths, 1.0) == len(paths)
        x = torch.rand(2, 3, 64, 64, dtype=torch.float64)
        with torch.no_grad():
            full = m(x)[0]
            ko = treatment.knocked_out(m, paths)(x)[0]
            hooks = [m.get_submodule(p).register_forward_hook(lambda mod, a, o: a[0]) for p in paths]
            by_hand = m(x)[0]
            for h in hooks:
                h.remove()
        assert torch.equal(ko, by_hand), key
        assert float((full - ko).norm() / full.norm()) > 1e-3, key
        assert torch.equal(m(x)[0], full)  # the model itself is untouched


def test_block_parameters_and_gamma(dicts):
    m = model_of(dicts["cbam"])
    names = treatment.block_parameters(m, ["model.5", "model.8"])
    assert names and all(n.startswith(("model.5.", "model.8.")) for n in names)
    assert not any(n.startswith("model.13.") for n in names)
    assert treatment.set_gamma(m, ["model.5"], 0.25) == 1
    g5, g8 = (m.model[i].scale.gamma.detach() for i in (5, 8))
    assert float(g5.abs().mean()) == 0.25 and float(g8.abs().max()) == 0


# ------------------------------------------------------------------------------------------------ the criterion


def rows_with(ts: list[float], arm: str = "cbam", knockout: float = 0.02, check: str = "mean ablation") -> list[dict]:
    return [{"variant": arm, "seed": s, "status": "ok", "mean_ablation_effect": t, "knockout_effect": knockout,
             "reinit_effect": 0.001, "attention_check": check} for s, t in enumerate(ts)]


@pytest.mark.parametrize("ts, lo, hi, status", [
    ([0.02, 0.03, 0.025], -0.01, 0.01, "passed"),      # A = 0.025 >= 0.01
    ([0.0003, -0.0001, 0.0002], -0.003, 0.002, "failed"),  # A = 0.0002 < 0.0025: the gates' mean does as well
    ([0.0, 0.0, 0.0], 0.0, 0.0, "failed"),            # identical arms: width 0, and the attention changes nothing
    ([0.01, -0.01, 0.012], -0.005, 0.005, "passed"),  # |a|: attention that matters either way
    ([0.02, 0.02, 0.02], -math.inf, math.inf, "n/a"),  # unbounded: no verdict to check
])
def test_criterion(ts, lo, hi, status):
    fx = treatment.effect(rows_with(ts), "cbam", [0, 1, 2])
    assert fx["A"] == pytest.approx(sum(map(abs, ts)) / 3) and fx["criterion"] == "mean ablation"
    assert fx["knockout"] == pytest.approx(0.02) and fx["reinit"] == pytest.approx(0.001)
    assert treatment.check(fx, lo, hi)["status"] == status


def test_a_large_knock_out_does_not_pass_flat_gates():
    """Today's default failure: the identity in place of the blocks moves mAP by 0.024, their mean gates by 0.0003:
    a fixed rescale, not tested, with the cause in words."""
    fx = treatment.effect(rows_with([0.0003, -0.0002, 0.0004], knockout=0.024), "cbam", [0, 1, 2])
    t = treatment.check(fx, -0.006, 0.006)
    assert t["status"] == "failed" and fx["knockout"] > t["resolution"]
    cause, remedy = treatment.likely_cause(t, {"gamma": 0.3, "entropy": 0.997})
    assert "fixed rescale" in cause and "entropy 0.997" in cause and "0.0240" in cause
    assert "start: init" in remedy and "0.0240" not in remedy


def test_the_words_put_the_arms_figures_after_its_cause_and_the_remedy_last():
    """The figures in parentheses are the arm's own, so they follow the cause, never the remedy's clause."""
    from attn_yolo.ablate.statistics.comparisons import not_tested

    fx = treatment.effect(rows_with([0.0003, -0.0002, 0.0004], knockout=0.024), "cbam", [0, 1, 2])
    t = treatment.check(fx, -0.006, 0.006)
    t["cause"], t["remedy"] = treatment.likely_cause(t, {"gamma": 0.3, "entropy": 0.997})
    t["health"] = {"gamma": 0.3}
    words = not_tested(t)
    assert words.startswith(f"not tested: {t['cause']} (mean ablation Δ mAP50-95 0.0003 < the ±0.0060")
    assert words.endswith(f"|γ| 0.3); {t['remedy']}")


def test_blocks_without_gates_are_checked_by_the_identity():
    """A placebo (nothing to hold at a mean) is checked by the identity in its place."""
    fx = treatment.effect(rows_with([math.nan] * 3, knockout=0.02, check="knock-out"), "cbam", [0, 1, 2])
    assert fx["criterion"] == "knock-out" and fx["A"] == pytest.approx(0.02)
    assert treatment.check(fx, -0.01, 0.01)["status"] == "passed"


def test_criterion_threshold_and_missing_figures():
    fx = treatment.effect(rows_with([0.006, 0.006]), "cbam", [0, 1])
    assert treatment.check(fx, -0.005, 0.005, 1.0)["status"] == "passed"
    assert treatment.check(fx, -0.005, 0.005, 2.0)["status"] == "failed"
    none = treatment.effect([{"variant": "cbam", "seed": 0, "status": "ok"}], "cbam", [0])
    assert none["n"] == 0 and treatment.check(none, -0.01, 0.01)["status"] == "n/a"


def test_likely_cause_reads_the_health():
    fx = treatment.check(treatment.effect(rows_with([0.001] * 3, knockout=0.001), "cbam", [0, 1, 2]), -0.01, 0.01)
    assert "near the identity" in treatment.likely_cause(fx, {"gamma": 0.002})[0]
    assert "does not rely" in treatment.likely_cause(fx, {"gamma": 0.2})[0]


def test_blocks_that_attend_in_some_seeds_only_are_named_so():
    """The default on the key data: the gates carry the key in 4 of 6 seeds (mean-ablation effects 0.14-0.24) and
    not in the other 2, so A (0.12) falls below the resolution (±0.13) that the bimodal Δ leaves."""
    per_seed = [-0.0004, 0.1535, 0.1436, 0.2435, 0.0002, 0.1783]
    fx = treatment.check(treatment.effect(rows_with(per_seed, knockout=0.167), "cbam", list(range(6))), -0.1304,
                         0.1304)
    assert fx["status"] == "failed" and fx["A"] == pytest.approx(0.1199, abs=1e-4)
    cause, remedy = treatment.likely_cause(fx, {"gamma": 0.998, "entropy": 0.992})
    assert cause.startswith("the blocks attend in 4 of 6 seeds only") and "±0.1304" in cause
    assert "more seeds" in remedy and "validation images" not in remedy


def test_seeds_that_attend_outrank_a_large_identity_effect():
    """The key reference's CBAM at the neck: its gates mattered in 3 of 10 seeds (0.185-0.251 against a resolution of
    ±0.1017) and the identity in its place cost 0.17 on average. Those seeds show attention that attends, so the cause
    is the seeds that did not learn it, never "a fixed rescale" (what the reference's summary said before)."""
    per_seed = [0.0195, 0.0138, -0.0008, -0.0003, 0.1854, 0.0003, 0.2512, 0.0102, -0.0005, 0.1908]
    fx = treatment.check(treatment.effect(rows_with(per_seed, knockout=0.1699), "cbam", list(range(10))), -0.1017,
                         0.1017)
    assert fx["status"] == "failed" and fx["knockout"] >= max(2 * fx["A"], fx["resolution"])
    cause, _ = treatment.likely_cause(fx, {"gamma": 0.991, "entropy": 0.992})
    assert cause.startswith("the blocks attend in 3 of 10 seeds only"), cause


def test_the_rescale_remedy_names_the_design_the_arm_had():
    """Flat gates from a trained start: the remedy points to training with the model from its initialisation. From
    that initialisation already (``start: init``, or no start), it must not: it says the data did not make the gates
    needed."""
    fx = treatment.effect(rows_with([0.0003, -0.0002, 0.0004], arm="se", knockout=0.024), "se", [0, 1, 2])
    fx = treatment.check(fx, -0.006, 0.006)
    _, warm = treatment.likely_cause(fx, {"gamma": 0.99, "entropy": 1.0}, trained_start=True)
    cause, init = treatment.likely_cause(fx, {"gamma": 0.99, "entropy": 1.0}, trained_start=False)
    assert "fixed rescale" in cause
    assert "trained start" in warm and "start: init" in warm
    assert "trained start" not in init and "from its initialisation, the blocks learned no input-dependent gate" in init


# ------------------------------------------------------------------------------------------------ new blocks' lr


def test_boost_params_gives_the_new_blocks_their_own_groups_on_the_schedule(dicts):
    """Every Ultralytics group (weight / bn / bias) is split: the new blocks' parameters at lr_mult × lr0 with the
    group's tag and options; LambdaLR then scales each group from its own initial_lr."""
    from ultralytics.models.yolo.detect import DetectionTrainer

    from attn_yolo import ultralytics_api as api

    m = model_of(dicts["cbam"])
    trainer = DetectionTrainer.__new__(DetectionTrainer)
    trainer.args = type("A", (), {"lr0": 0.001, "optimizer": "AdamW"})()
    opt = DetectionTrainer.build_optimizer(trainer, m, name="AdamW", lr=0.001, momentum=0.9, decay=5e-4)
    names = set(treatment.block_parameters(m, ["model.5", "model.8", "model.13"]))
    ids = {id(p) for n, p in m.named_parameters() if n in names}
    moved = api.boost_params(opt, ids, 20.0)
    assert moved == len(names)
    new = [g for g in opt.param_groups if any(id(p) in ids for p in g["params"])]
    assert all(g["lr"] == pytest.approx(0.02) and all(id(p) in ids for p in g["params"]) for g in new)
    assert {g["param_group"] for g in new} <= {"weight", "bn", "bias"}
    assert all(g["lr"] == 0.001 for g in opt.param_groups if g not in new)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(m.parameters()))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=lambda e: 0.5 ** e)
    opt.step()
    sched.step()
    assert all(g["lr"] == pytest.approx(0.01) for g in new)


# ------------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("raw, key", [
    ({"lr_mult": 0}, "new_blocks.lr_mult"), ({"lr_mult": -3}, "new_blocks.lr_mult"),
    ({"lr_mult": "fast"}, "new_blocks.lr_mult"), ({"gamma": 2}, "new_blocks.gamma"),
    ({"lr": 10}, "new_blocks.lr"), ("20", "new_blocks"), ({"probe_steps": -1}, "new_blocks.probe_steps"),
    ({"probe_steps": 2.5}, "new_blocks.probe_steps"), ({"probe_lr_mult": 0}, "new_blocks.probe_lr_mult"),
    ({"probe_lr_mult": 5000}, "new_blocks.probe_lr_mult"), ({"prob_steps": 10}, "new_blocks.prob_steps"),
])
def test_bad_new_blocks_names_the_key(raw, key):
    _, problems = check_new_blocks(raw)
    assert problems and problems[0].startswith(key + ":")


@pytest.mark.parametrize("raw, key", [({"threshold": 0}, "treatment.threshold"), ({"threshold": 11},
                                      "treatment.threshold"), ({"min": 1}, "treatment.min"), (True, "treatment")])
def test_bad_treatment_names_the_key(raw, key):
    _, problems = check_treatment(raw)
    assert problems and problems[0].startswith(key + ":")


@pytest.mark.parametrize("over, key", [
    ({"new_blocks": {"lr_mult": -1}}, "new_blocks.lr_mult"),
    ({"treatment": {"threshold": 50}}, "treatment.threshold"),
    ({"new_blok": {"lr_mult": 2}}, "new_blok"),
    ({"new_blocks": {"probe_steps": -3}}, "new_blocks.probe_steps"),
    ({"new_blocks": {"probe_lr_mult": 1e6}}, "new_blocks.probe_lr_mult"),
    ({"new_blocks": {"probe_stepz": 3}}, "new_blocks.probe_stepz"),
    ({"new_blocks": {"probe_steps": 10}, "train": {"epochs": 1, "imgsz": 64, "warmup_epochs": 1}},
     "new_blocks.probe_steps"),
])
def test_cli_exits_2_before_any_training(tmp_path, tiny_data, capsys, over, key):
    cfg = write_config(tmp_path, tiny_data, **over)
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_arms_own_new_blocks_and_the_fingerprint(tmp_path, tiny_data):
    """A variant's own new_blocks is its arm's; the baseline's runs do not depend on it, the arm's do; a baseline with
    new_blocks is refused."""
    cfg = write_config(tmp_path, tiny_data, new_blocks={"lr_mult": 5})
    raw = yaml.safe_load(cfg.read_text())
    raw["variants"].append({**raw["variants"][1], "name": "cbam30", "new_blocks": {"lr_mult": 30, "gamma": 0.05}})
    ab = ablate.validate(raw, tmp_path)
    specs = {(s.variant, s.seed): s for s in ablate.runs.runner.plan(ab, ab.data)}
    assert specs[("cbam", 0)].lr_mult == 5 and specs[("cbam30", 0)].lr_mult == 30
    assert specs[("cbam30", 0)].gamma == 0.0  # no start: γ stays as inserted
    assert specs[("baseline", 0)].new_blocks is None and specs[("cbam", 0)].new_blocks == ["model.5", "model.8",
                                                                                         "model.13"]
    other = ablate.validate({**raw, "new_blocks": {"lr_mult": 7}}, tmp_path)
    again = {(s.variant, s.seed): s for s in ablate.runs.runner.plan(other, other.data)}
    assert again[("baseline", 0)].fingerprint == specs[("baseline", 0)].fingerprint
    assert again[("cbam", 0)].fingerprint != specs[("cbam", 0)].fingerprint
    raw["variants"][0]["new_blocks"] = {"lr_mult": 2}
    with pytest.raises(ablate.ConfigError, match=r"variants\[0\] \(baseline\)\.new_blocks"):
        ablate.validate(raw, tmp_path)
    assert NewBlocks(gamma=0.0).describe().endswith("identity at step 0")
    assert NewBlocks().describe().endswith("γ = 0.3 at step 0, not the identity")


def test_a_seed_rule_too_short_for_the_joint_intervals_names_seeds_max(tmp_path, tiny_data):
    """Two variants: each joint interval is at 97.5 %; alpha spending (the default) is bounded from its first look, so
    max 3 is accepted. A confidence sequence (``design: cs``) over 36 comparisons is unbounded at 2 seeds: max 2 is
    refused, naming seeds.max and the seeds it needs."""
    from attn_yolo.ablate.statistics.sequential import SeedRule, family_problems

    cfg = write_config(tmp_path, tiny_data, seeds={"min": 2, "max": 3})
    raw = yaml.safe_load(cfg.read_text())
    raw["variants"].append({**raw["variants"][1], "name": "cbam2", "args": [8, 7]})
    assert ablate.validate(raw, tmp_path).seed_rule.max == 3
    assert family_problems(SeedRule(min=2, max=2, design="cs"), 36, 0) == [
        "seeds.max: 2; the 36 comparisons' joint intervals (each at 99.9 %) are unbounded until 3 seeds: set "
        "seeds.max >= 3 or compare fewer arms"]


# ------------------------------------------------------------------------------------------------ real training


@pytest.mark.slow
def test_real_training_frozen_block_is_not_tested_and_a_block_that_matters_passes(tmp_path):
    """Real training on the embedded data (a 2-epoch start that detects, then 1-epoch arms, 3 fixed seeds), one
    criterion for both arms (threshold 0.5: 3 seeds resolve little): a CBAM whose γ stays at 0 (gamma 0, lr_mult
    1e-6) gets "not tested", never a "no difference" verdict. Its knock-out figure equals an independent one: the
    blocks replaced by the identity with forward hooks on
    the arm's best.pt, scored by Ultralytics' own DetectionValidator."""
    from ultralytics.models.yolo.detect import DetectionValidator

    from attn_yolo.ablate.runs.results import collect_records
    from attn_yolo.checkpoint import load_model
    from attn_yolo.synthetic import default_data_yaml

    cbam = {"base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]}
    raw = {"data": str(default_data_yaml()),
           "variants": [{"name": "baseline", "model": "yolo11n.yaml"},
                        {"name": "frozen", **cbam, "new_blocks": {"lr_mult": 1e-6, "gamma": 0.0}},
                        {"name": "matters", **cbam, "new_blocks": {"gamma": 0.3, "lr_mult": 1}}],
           "treatment": {"threshold": 0.5},
           "start": {"epochs": 2, "fraction": 0.5, "lr0": 0.003, "warmup_epochs": 0.3, "val": False},
           "seeds": [0, 1, 2], "devices": ["cpu", "cpu"], "health": True,
           "train": {"epochs": 1, "fraction": 0.2, "imgsz": 96, "batch": 8, "nbs": 8, "optimizer": "AdamW",
                     "lr0": 0.0005, "warmup_epochs": 0, "mosaic": 0.0, "val": False, "plots": False},
           "out": str(tmp_path / "out"), "latency": {"repeats": 1, "warmup": 0}}
    ab = ablate.validate(raw, tmp_path)
    assert ablate.run_ablation(ab) == 0
    text = (ab.out / "summary.md").read_text()
    verdicts = {line.split("**")[1]: line for line in text.split("## Verdict")[1].split("\n## ")[0].splitlines()
                if line.startswith("- **")}
    mAP_words = verdicts["frozen"].split("; cost:")[0]  # the latency's own words follow the cost
    assert "**not tested: " in mAP_words and "no difference" not in mAP_words
    check = text.split("## Verdict")[0]
    assert "- **frozen**: **not tested" in check  # CBAM from γ = 0.3 acts as a rescale here too (BENCHMARKS.md, 12);
    # a block whose attention matters passes: tests/test_attention_check.py

    rows = {(r["variant"], r["seed"]): r for r in collect_records(ab.out)[0]}
    r = rows[("matters", 0)]
    assert r["map50_95"] > 0.05 and abs(r["knockout_effect"]) > 0  # the start detects; the blocks matter
    model = load_model(f"{r['run_dir']}/weights/best.pt", "weights", suffixes=(".pt",))
    spec = next(s for s in ablate.runs.runner.plan(ab, ab.data) if s.variant == "matters")
    hooks = [model.get_submodule(p).register_forward_hook(lambda mod, a, o: a[0]) for p in spec.new_blocks]
    v = DetectionValidator(args={"model": f"{r['run_dir']}/weights/best.pt", "data": ab.data, "imgsz": 96,
                                 "batch": 8, "rect": True, "device": "cpu", "plots": False, "mode": "val",
                                 "project": str(tmp_path), "name": "by-hand", "verbose": False})
    by_hand = v(model=model)["metrics/mAP50-95(B)"]
    for h in hooks:
        h.remove()
    assert by_hand == pytest.approx(r["knockout_map50_95"], abs=1e-9)


def test_an_arms_own_new_blocks_merge_over_the_configs_and_the_reference_is_checked(tmp_path, tiny_data):
    """An arm's partial new_blocks takes its keys over the config's (not the defaults'); a reference that is the
    start with blocks inserted has its new_blocks checked and used; on another model it is refused."""
    cfg = write_config(tmp_path, tiny_data, start={"epochs": 1}, new_blocks={"gamma": 0.0},
                       reference={"base": "yolo11n.yaml", "module": "SE", "at": "neck", "new_blocks": {"lr_mult": 4}})
    raw = yaml.safe_load(cfg.read_text())
    raw["variants"][1]["new_blocks"] = {"lr_mult": 5}
    ab = ablate.validate(raw, tmp_path)
    by = {v.name: v for v in ab.variants}
    assert by["cbam"].block_training == NewBlocks(lr_mult=5.0, gamma=0.0)
    assert by["reference"].block_training == NewBlocks(lr_mult=4.0, gamma=0.0)
    bad = {**raw, "reference": {**raw["reference"], "new_blocks": {"lr_mult": 0}}}
    with pytest.raises(ablate.ConfigError, match=r"reference\.new_blocks\.lr_mult: 0"):
        ablate.validate(bad, tmp_path)
    other = {**raw, "reference": {"model": "yolo11s.yaml", "new_blocks": {"gamma": 0.5}}}
    with pytest.raises(ablate.ConfigError, match=r"reference\.new_blocks: the reference is another model"):
        ablate.validate(other, tmp_path)


def test_changed_new_blocks_are_named_in_the_rerun_stop():
    from attn_yolo.ablate.runs.rerun import changed_keys

    old = {"new_blocks": {"lr_mult": 1.0, "gamma": 0.0}, "variants": [{"name": "se", "module": "SE", "args": [16]}]}
    new = {"new_blocks": {"lr_mult": 1.0, "gamma": 0.1},
           "variants": [{"name": "se", "module": "SE", "args": [16], "new_blocks": {"lr_mult": 5}}]}
    got = changed_keys(old, new, set())
    assert got == ["new_blocks.gamma: 0.0 -> 0.1", "variants (se).new_blocks: (unset) -> {lr_mult: 5}"], got
