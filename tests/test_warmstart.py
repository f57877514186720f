"""The ablation design: one shared start (identity at insertion, same data and augmentation per seed in every arm),
seeds chosen by the data in rounds, the reference yardstick, the placebo control, and bad design input refused."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path

import pytest
import torch
import yaml
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.config import design
from attn_yolo.ablate.runs.records import RunSpec
from attn_yolo.ablate.runs.start import start_spec
from attn_yolo.ablate.runs.train import build_arm, execute_run
from attn_yolo.ablate.statistics import comparisons
from attn_yolo.ablate.statistics.treatment import NewBlocks
from attn_yolo.args import UsageError
from attn_yolo.ultralytics_api.loader import loader_seed_problem
from attn_yolo_console import main as cli_main


class Stop(Exception):
    """Raised from inside a training run once it has shown what a test looks at."""


def capturing_trainer(seen: dict, batches: int = 2):
    """A RecordingTrainer that keeps, at step 0, the model's eval predictions on ``seen["x"]``, and the first
    ``batches`` training batches as they leave the dataloader (images after augmentation, files), then stops."""
    from attn_yolo.ablate.runs.perimage import RecordingTrainer

    class Capture(RecordingTrainer):
        def _setup_train(self):
            super()._setup_train()
            m = copy.deepcopy(self.model).float().eval()
            with torch.no_grad():
                seen["pred"] = m(seen["x"])[0]
            seen["blocks"] = sorted({type(layer).__name__ for layer in m.model} & {"CBAM", "Placebo"})
            seen["imgs"], seen["files"] = [], []

        def preprocess_batch(self, batch):
            batch = super().preprocess_batch(batch)
            seen["imgs"].append(batch["img"].clone())
            seen["files"].append(list(batch["im_file"]))
            if len(seen["imgs"]) == batches:
                raise Stop
            return batch

    return Capture


@pytest.fixture(scope="module")
def warm(tiny_data, tmp_path_factory):
    """A tiny ablation with a recipe start (trained here for real, 1 epoch) and a placebo arm, validated; the new
    blocks at γ = 0 (identity at step 0; the default starts them at 0.3)."""
    folder = tmp_path_factory.mktemp("warm")
    cfg = write_config(folder, tiny_data, start={"epochs": 1}, placebo=True, seeds=[0, 1], new_blocks={"gamma": 0.0},
                       train={"epochs": 1, "imgsz": 64, "batch": 4, "workers": 0, "plots": False, "device": "cpu",
                              "hsv_h": 0.1, "hsv_s": 0.7, "hsv_v": 0.4, "fliplr": 0.5, "translate": 0.2,
                              "scale": 0.5, "mosaic": 1.0})  # augmentation on: it must repeat per seed
    raw, base, name, source = ablate.load_config(cfg)
    ab = ablate.validate(raw, base, name, source)
    spec = start_spec(ab, ab.start, ab.data)
    row = execute_run(spec)
    assert row["status"] == "ok", row
    return ab


def arm_run(ab, arm: str, seed: int, seen: dict):
    """Fine-tune arm ``arm`` with ``seed`` as the runner does, stopping after two batches."""
    spec = next(s for s in ablate.runs.runner.plan(ab, ab.data) if s.variant == arm and s.seed == seed)
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    model = spec.model
    if spec.model_dict is not None:
        model = str(run_dir / spec.model)
        Path(model).write_text(yaml.safe_dump(spec.model_dict, sort_keys=False))
    train = dict(spec.train)
    yolo = build_arm(spec, model, train)
    with pytest.raises(Stop):
        yolo.train(data=spec.data, seed=seed, project=str(run_dir.parent), name=run_dir.name, exist_ok=True,
                   trainer=capturing_trainer(seen), **train)
    return spec


def test_every_arm_starts_at_the_start_and_sees_the_same_batches(warm):
    """At step 0 of fine-tuning every arm (the baseline, + CBAM, + its placebo) predicts exactly what the trained
    shared start predicts; and with one seed every arm gets the same first batches, augmentation included (another
    seed: other batches)."""
    import cv2

    from attn_yolo.checkpoint import load_model

    ab = warm
    img = cv2.imread(str(sorted((Path(ab.data).parent / "images" / "val").glob("*"))[0]))
    img = cv2.resize(img, (64, 64))[:, :, ::-1].transpose(2, 0, 1).copy()  # BGR HWC -> RGB CHW
    x = torch.as_tensor(img)[None].float() / 255
    start = load_model(ab.start.weights, "start", suffixes=(".pt",)).float().eval()
    with torch.no_grad():
        ref = start(x)[0]
    assert ref.abs().sum() > 0 and torch.isfinite(ref).all()

    runs = {}
    for arm, seed in (("baseline", 0), ("cbam", 0), ("cbam-placebo", 0), ("baseline", 1)):
        seen = {"x": x}
        spec = arm_run(ab, arm, seed, seen)
        assert spec.start == ab.start.weights
        runs[(arm, seed)] = seen
    for arm in ("baseline", "cbam", "cbam-placebo"):
        assert torch.equal(runs[(arm, 0)]["pred"], ref), arm  # identity at insertion, weights carried by layer
    assert runs[("cbam", 0)]["blocks"] == ["CBAM"] and runs[("cbam-placebo", 0)]["blocks"] == ["Placebo"]

    b0, b1 = runs[("baseline", 0)], runs[("baseline", 1)]
    for arm in ("cbam", "cbam-placebo"):
        s = runs[(arm, 0)]
        assert s["files"] == b0["files"], arm  # data order
        assert all(torch.equal(a, b) for a, b in zip(s["imgs"], b0["imgs"])), arm  # augmentation
    assert b1["files"] != b0["files"] or not all(torch.equal(a, b) for a, b in zip(b1["imgs"], b0["imgs"]))
    assert not torch.equal(b1["imgs"][0], b0["imgs"][0])


def test_an_arm_is_built_the_same_for_a_seed_whatever_ran_before(warm, tmp_path):
    """The inserted blocks' own weights (not in the start) depend on the run's seed only, not on what the process
    drew before (the runner builds arms in-process one after another, or in fresh worker processes): the
    serial-vs-worker difference the default's + CBAM runs showed before build_arm seeded."""
    spec = next(s for s in ablate.runs.runner.plan(warm, warm.data) if s.variant == "cbam" and s.seed == 1)
    model = str(tmp_path / spec.model)
    Path(model).write_text(yaml.safe_dump(spec.model_dict, sort_keys=False))
    states = []
    for drawn in (0, 123):  # another process history: other global RNG draws before the build
        torch.manual_seed(drawn)
        torch.rand(drawn + 1)
        states.append(build_arm(spec, model, dict(spec.train)).model.state_dict())
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    other = next(s for s in ablate.runs.runner.plan(warm, warm.data) if s.variant == "cbam" and s.seed == 0)
    third = build_arm(other, model, dict(other.train)).model.state_dict()
    assert any(not torch.equal(states[0][k], third[k]) for k in third)  # another seed: other block weights


def test_an_ultralytics_that_ignores_the_seed_is_refused(tiny_data, tmp_path, monkeypatch):
    """The installed Ultralytics seeds its dataloader from `seed`; one that does not (a constant generator, as earlier
    8.4.x builds) is refused before any training, naming `seeds`."""
    import ultralytics.data.build as build

    assert loader_seed_problem() is None
    original = build.build_dataloader

    def constant(*args, **kwargs):
        torch.manual_seed(1)  # every seed: one data order
        return original(*args, **kwargs)

    monkeypatch.setattr(build, "build_dataloader", constant)
    assert "ignores `seed`" in loader_seed_problem()
    cfg = write_config(tmp_path, tiny_data)
    raw, base, name, source = ablate.load_config(cfg)
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate(raw, base, name, source)
    assert any(p.startswith("seeds: Ultralytics") and "ignores `seed`" in p for p in e.value.problems)


# ------------------------------------------------------------------------------------------------ rounds, yardstick

EFFECT = {"baseline": 0.0, "cbam": 0.010, "cbam-placebo": 0.002, "reference": 0.050}


def designed_runner(spec: RunSpec, device):
    """Stands in for execute_run with known per-arm effects: mAP50-95 = 0.3 + effect + a per-seed offset shared by
    every arm (so that paired Δ are exact) + a tiny per-(arm, seed) jitter. A start writes its weights file."""
    Path(spec.run_dir, "weights").mkdir(parents=True, exist_ok=True)
    Path(spec.run_dir, "weights", "best.pt").write_text("stand-in")
    jitter = 2e-5 * ((spec.seed * 7 + len(spec.variant)) % 5 - 2) if spec.variant in EFFECT else 0.0
    m = 0.3 + EFFECT.get(spec.variant, 0.0) + 0.01 * (spec.seed % 3) + jitter
    return {"variant": spec.variant, "seed": spec.seed, "status": "ok", "params": spec.params, "gflops": spec.gflops,
            "precision": 0.5, "recall": 0.5, "map50": m + 0.2, "map50_95": m, "best_epoch": 1, "epochs": 1,
            "train_time_s": 0.1, "latency_ms": 1.0, "device": device, "run_dir": spec.run_dir, "model": spec.model,
            "error": "", "fingerprint": spec.fingerprint,
            **(figures(spec) if spec.new_blocks else {})}  # blocks whose attention matters: the check passes


def figures(spec: RunSpec) -> dict:
    """The attention check's figures of an arm that adds blocks: its attention matters (a placebo: no gates, checked
    by the identity in its place)."""
    if spec.variant.endswith("-placebo"):
        return {"attention_check": "knock-out", "knockout_effect": 0.02}
    return {"attention_check": "mean ablation", "mean_ablation_effect": 0.02, "knockout_effect": 0.03,
            "reinit_effect": 0.01}


def test_rounds_stop_by_the_rule_and_the_summary_gives_the_yardstick_and_placebo(tiny_data, tmp_path, capsys):
    """A tiny config with `reference:` and a placebo: seeds run in rounds until every arm settles, the summary says
    why it stopped, gives CBAM's Δ as a fraction of the reference's and its extra GFLOPs as a fraction of the
    reference's, the placebo's verdict and whether CBAM's gain is matched; the reference (another scale) gets a start
    of its own, trained once by the same recipe. A rerun with a larger max continues where it stopped."""
    cfg = write_config(tmp_path, tiny_data, start={"epochs": 1}, seeds={"min": 3, "max": 6}, placebo=True,
                       reference={"name": "yolo11s", "model": "yolo11s.yaml"})
    raw, base, name, source = ablate.load_config(cfg)
    ab = ablate.validate(raw, base, name, source)
    EFFECT["yolo11s"] = EFFECT["reference"]
    try:
        assert [v.name for v in ab.variants] == ["baseline", "cbam", "yolo11s"]  # placebos are sized by prepare
        assert [v.name for v in ablate.prepare(ab).variants] == ["baseline", "cbam", "cbam-placebo", "yolo11s"]
        assert ab.reference == "yolo11s" and ab.placebos == {"cbam-placebo": "cbam"}
        assert set(ab.arm_starts) == {"yolo11s"}  # another scale: its own start, by the same recipe
        calls = []

        def runner(spec, device):
            calls.append((spec.variant, spec.seed))
            return designed_runner(spec, device)

        assert ablate.run_ablation(ab, runner=runner) == 0
        assert calls[:2] == [("start", 0), ("start-yolo11s", 0)]
        arms = {(v, s) for v, s in calls[2:]}
        # 4 comparisons (3 arms, cbam − placebo): each joint interval at 98.75 %, alpha spending from the first look
        assert arms == {(v, s) for v in EFFECT if v != "reference" for s in range(3)}  # settled at the first look
        text = (ab.out / "summary.md").read_text()
        assert "- seeds chosen by the data: stopped after 3 paired seeds: every arm settled" in text
        assert ("With probability at least 95 %, the intervals of all 4 comparisons (each at 98.8 %) hold the true "
                "mean Δ at every look at once (an O'Brien–Fleming-type alpha-spending design over the looks after 3 "
                "to 6 paired seeds)") in text
        assert "4 comparisons, jointly at 95 % (Bonferroni: each interval at 98.8 %)" in text
        assert "- **cbam**: **passed**: mean ablation Δ 0.0200, identity Δ 0.0300, re-initialised Δ 0.0100" in (
            text.split("## Verdict")[0])
        g = {v.name: v.gflops for v in ab.variants}
        frac_g = (g["cbam"] - g["baseline"]) / (g["yolo11s"] - g["baseline"])
        yard = text.split("## Yardstick")[1].split("\n## ")[0]
        line = next(x for x in yard.splitlines() if x.startswith("- **cbam**: "))
        got = re.match(r"- \*\*cbam\*\*: 20 % of the `yolo11s` gain at ([0-9.e-]+) % of its extra GFLOPs", line)
        assert got and float(got.group(1)) == pytest.approx(100 * frac_g, rel=0.05), line
        assert "Yardstick: the reference `yolo11s` vs `baseline`: Δ mAP50-95 +0.05" in yard
        assert "- **cbam-placebo** (extra params +" in text and "**better** vs `baseline` (Δ +0.0020" in text
        assert "`cbam` beats its placebo: its gain is more than the extra capacity" in text
        assert "design: **warm start**" in text and "arm `yolo11s`: warm start from yolo11s.yaml" in text

        # a rerun reuses the starts and every run; a larger min would change the design the runs were read under:
        # refused before any run (exit 2 from the command line), naming the key
        calls.clear()
        ab2 = ablate.validate({**raw, "seeds": {"min": 5, "max": 6}}, base, name, source)
        with pytest.raises(UsageError, match=r"seeds\.min: 3 -> 5: the \d+ finished run\(s\)"):
            ablate.run_ablation(ab2, runner=runner)
        assert ablate.run_ablation(ablate.validate(raw, base, name, source), runner=runner) == 0 and calls == []
    finally:
        EFFECT.pop("yolo11s", None)


def test_a_rerun_with_a_larger_max_is_refused_and_the_same_design_continues(tiny_data, tmp_path, capsys):
    """No effect: the rule runs to max. A rerun into the same out with a larger max exits 2 naming seeds.max before
    any run (the design is fitted to max); the default out of ``seeds.max=5`` is a new folder, where it runs. Between
    rounds the run says which seeds come next (not "run the same command again", which only a stop short of the
    decision says)."""
    cfg = write_config(tmp_path, tiny_data, seeds={"min": 3, "max": 3})
    raw, base, name, source = ablate.load_config(cfg)
    calls = []

    def runner(spec, device):
        calls.append((spec.variant, spec.seed))
        row = designed_runner(spec, device)
        row["map50_95"] = 0.3 + 0.01 * ((spec.seed * 7 + (spec.variant == "cbam") * 3) % 5)  # Δ noise, mean ~0
        return row

    assert ablate.run_ablation(ablate.validate(raw, base, name, source), runner=runner) == 0
    assert len(calls) == 6
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "stopped after 3 paired seeds: the maximum of 3 seeds" in text
    assert "design: **from scratch**" in text
    said = re.findall(r"attn-yolo ablate: seeds: [^\r\n]*", capsys.readouterr().out)  # lines above the bar
    assert said == ["attn-yolo ablate: seeds: 0 of the rule's minimum 3 paired seeds done; running seeds 0, 1, 2",
                    "attn-yolo ablate: seeds: stopped after 3 paired seeds: the maximum of 3 seeds"]
    calls.clear()
    assert cli_main(["ablate", str(cfg), "seeds.max=5", f"out={tmp_path / 'out'}"]) == 2
    assert "seeds.max: 3 -> 5: the 6 finished run(s)" in capsys.readouterr().err and calls == []
    assert ablate.run_ablation(ablate.validate({**raw, "seeds": {"min": 3, "max": 5}, "out": str(tmp_path / "out5")},
                                               base, name, source), runner=runner) == 0
    assert sorted(calls) == sorted((v, s) for v in ("baseline", "cbam") for s in range(5))
    said = re.findall(r"attn-yolo ablate: seeds: [^\r\n]*", capsys.readouterr().out)
    assert said[1] == "attn-yolo ablate: seeds: cbam not decided after 3 paired seeds; running seed 3", said
    assert said[-1] == "attn-yolo ablate: seeds: stopped after 5 paired seeds: the maximum of 5 seeds"


def test_decision_matches_the_sequential_rule():
    """The runner's decision is sequential.decide_all on the paired Δ of every arm, in seed order."""
    from attn_yolo.ablate.statistics.sequential import SeedRule, decide_all

    ab = dataclasses.make_dataclass("A", ["baseline", "seeds", "variants", "seed_rule", "placebos"])(
        "b", [0, 1, 2, 3], [dataclasses.make_dataclass("V", ["name"])(n) for n in ("b", "x")], SeedRule(3, 4), {})
    rows = [{"variant": v, "seed": s, "status": "ok", "map50_95": 0.3 + (0.02 + 0.001 * s if v == "x" else 0)}
            for v in ("b", "x") for s in range(3)]
    dec = comparisons.decision(ab, rows)
    want = decide_all({"x": [0.02, 0.021, 0.022]}, SeedRule(3, 4))
    assert dec["variants"]["x"]["lo"] == pytest.approx(want["variants"]["x"]["lo"])
    assert dec["stop"] == want["stop"]


# --------------------------------------------------------------------------------------------------- bad input


def other_classes_checkpoint(folder: Path) -> Path:
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.checkpoint import save_checkpoint

    return save_checkpoint(DetectionModel("yolo11n.yaml", nc=80, verbose=False), folder / "coco80.pt")


@pytest.mark.parametrize("over, key, text", [
    ({"seeds": {"min": 5, "max": 3}}, "seeds.max", "3; expected an int >= seeds.min (5)"),
    ({"seeds": {"min": 3, "max": 6, "precision": 0}}, "seeds.precision", "expected a number > 0"),
    ({"seeds": {"min": 3, "max": 6, "precision": -0.01}}, "seeds.precision", "expected a number > 0"),
    ({"seeds": {"min": 3, "most": 6}}, "seeds.most", "unknown key"),
    ({"seeds": {"min": 3, "max": 6, "design": "bayes"}}, "seeds.design", "'bayes'; expected one of spending, cs"),
    ({"seeds": {"min": 3, "max": 6, "spending": "linear"}}, "seeds.spending", "'linear'; expected one of obf, pocock"),
    ({"seeds": {"min": 3, "max": 6, "looks": "every"}}, "seeds.looks", "expected increasing seed counts"),
    ({"seeds": {"min": 3, "max": 6, "looks": [8, 12]}}, "seeds.max", "6; below the first look of seeds.looks (8)"),
    ({"reference": {"model": "yolo11n.yaml"}}, "reference", "is the baseline model"),
    ({"reference": {"base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]}}, "reference",
     "the same model as variants[1] (cbam); the yardstick needs a known change of its own"),
    ({"variants": [{"name": "baseline", "model": "yolo11n.yaml"}]}, "variants",
     "only the baseline ('baseline'); an ablation compares variants with it: add one"),
    ({"start": "COCO80"}, "start", "is a model for 80 classes, the data has 4"),
    ({"start": {"epochs": 1, "seed": -1}}, "start.seed", "expected an int >= 0"),
    ({"start": {"epochs": 1, "data": "x.yaml"}}, "start.data", "set by the ablation runner"),
    ({"placebo": ["nope"]}, "placebo", "is not a variant other than the baseline"),
    ({"start": {"epochs": 1}, "reference": {"model": "yolo11s.yaml", "start": "x.pt"}}, "reference.start",
     "only where"),
])  # fmt: skip
def test_bad_design_input_exits_2_naming_the_key_before_any_training(tiny_data, tmp_path, capsys, over, key, text):
    if over.get("start") == "COCO80":
        over = {**over, "start": str(other_classes_checkpoint(tmp_path))}
    cfg = write_config(tmp_path, tiny_data, **over)
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{key}: " in err and text in err, err  # one problem: one line (several: a list, each with its key)
    assert not (tmp_path / "out").exists()  # nothing trained, nothing written


def test_every_problem_listed_at_once_and_command_line_values_named(tiny_data, tmp_path, capsys):
    """A seed rule's problems all at once (not precision's, then min's after the fix); a bad value given on the
    command line says it came from there, not from the file."""
    cfg = write_config(tmp_path, tiny_data, seeds={"min": 1, "max": 2, "precision": 0})
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "2 problems in the ablation config" in err and "seeds.precision: 0; expected a number > 0" in err, err
    assert "seeds.min: 1; expected an int >= 2" in err
    assert cli_main(["ablate", str(write_config(tmp_path, tiny_data)), "seeds=abc", "epochs=-3"]) == 2
    err = capsys.readouterr().err
    assert "seeds: 'abc'; expected a list of ints" in err and "(from the command line: seeds=abc)" in err, err
    assert "(from the command line: epochs=-3)" in err
    assert not (tmp_path / "out").exists()


def test_a_start_checkpoint_is_carried_into_every_arm(tiny_data, tmp_path):
    """`start: path.pt` (the data's classes): loaded weights-only at validation, every run starts from it and its
    fingerprint covers the file's bytes (another checkpoint: every run redone)."""
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.checkpoint import save_checkpoint

    ck = save_checkpoint(DetectionModel("yolo11n.yaml", nc=4, verbose=False), tmp_path / "base.pt")
    cfg = write_config(tmp_path, tiny_data, start=str(ck))
    raw, base, name, source = ablate.load_config(cfg)
    ab = ablate.validate(raw, base, name, source)
    assert ab.start.kind == "checkpoint" and ab.start.weights == str(ck.resolve())
    specs = ablate.runs.runner.plan(ab, ab.data)
    assert all(s.start == str(ck.resolve()) for s in specs)
    ck2 = save_checkpoint(DetectionModel("yolo11n.yaml", nc=4, verbose=False), tmp_path / "base.pt", overwrite=True)
    specs2 = ablate.runs.runner.plan(ablate.validate(raw, base, name, source), ab.data)
    assert ck2 == ck and {s.fingerprint for s in specs}.isdisjoint({s.fingerprint for s in specs2})


def test_placebo_matches_each_blocks_parameters_and_starts_as_the_identity():
    """Each Placebo of a variant's placebo arm has its block's parameter count within C weights (2·C·hidden against
    the block's own count, counted here from the built blocks), sits where the block sits, and with init_values 0 is
    the identity; a parameter-free block (SimAM) gets no placebo."""
    from ultralytics.nn.tasks import DetectionModel, yaml_model_load

    from attn_yolo.insertion import insert_dict
    from attn_yolo.nn.common import AttnBuildError
    from attn_yolo.nn.placebo import Placebo

    base = yaml_model_load("yolo11n.yaml")
    cbam = insert_dict("yolo11n.yaml", "CBAM", at="backbone", args=[16, 7], identity=True)
    spec = design.placebo_spec("cbam", cbam, base, "yolo11n.yaml", 4)
    assert spec["name"] == "cbam-placebo" and spec["module"] == ["Placebo"] * 3 and spec["at"] == [4, 6, 10]
    placebo = insert_dict("yolo11n.yaml", spec["module"], at=spec["at"], args=spec["args"])
    mc, mp = (DetectionModel(d, nc=4, verbose=False) for d in (cbam, placebo))
    blocks = [(m, p) for m, p in zip(mc.model, mp.model) if type(m).__name__ == "CBAM"]
    assert len(blocks) == 3 and all(type(p).__name__ == "Placebo" for _, p in blocks)
    for m, p in blocks:
        own = sum(t.numel() for k, t in m.named_parameters() if not k.startswith("scale."))
        assert abs(sum(t.numel() for k, t in p.named_parameters() if not k.startswith("scale.")) - own) <= m.c1
    x = torch.randn(2, 64, 8, 8)
    assert torch.equal(Placebo(64, 5, 0.0)(x), x)
    assert not torch.equal(Placebo(64, 5)(x), x)
    with pytest.raises(AttnBuildError, match="hidden"):
        Placebo(64)
    simam = insert_dict("yolo11n.yaml", "SimAM", at="backbone")
    with pytest.raises(ValueError, match="no parameters"):
        design.placebo_spec("simam", simam, base, "yolo11n.yaml", 4)


def test_the_default_gamma_starts_the_blocks_off_the_identity(warm):
    """With the default new_blocks (γ = 0.3, the study's pick) a + CBAM arm's inserted gates start at 0.3, not at the
    identity; with gamma 0.0 (the fixture) every arm starts as the start's copy (the test above)."""
    ab = warm
    spec = next(s for s in ablate.runs.runner.plan(ab, ab.data) if s.variant == "cbam" and s.seed == 0)
    spec = dataclasses.replace(spec, gamma=0.3)
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    model = str(run_dir / spec.model)
    Path(model).write_text(yaml.safe_dump(spec.model_dict, sort_keys=False))
    yolo = build_arm(spec, model, dict(spec.train))
    gammas = [yolo.model.get_submodule(p).scale.gamma.detach() for p in spec.new_blocks]
    assert all(torch.all(g == 0.3) for g in gammas) and len(gammas) == 3
    assert NewBlocks().gamma == 0.3 and NewBlocks().lr_mult == 1.0


# ------------------------------------------------------------------------------------------------ a start too weak
def test_a_start_that_detects_nothing_stops_before_any_arm(tiny_data, tmp_path, capsys):
    """Real training: a 1-epoch start on 8 tiny images scores mAP50-95 below the floor; the ablation exits 2 right
    after it with one line naming what it measured and the fixes, and no arm runs. The same design with a start above
    the floor (stand-in runs) proceeds."""
    from attn_yolo.ablate.runs.start import START_FLOOR

    cfg = write_config(tmp_path, tiny_data, start={"epochs": 1}, seeds=[0])
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = next(x for x in err if "start" in x and "scores mAP50-95" in x)
    for part in (f"below {START_FLOOR:g}", "start: path/to/yolo11n.pt", "start: {epochs: 30}", "imgsz=640"):
        assert part in line, line
    assert "Traceback" not in "\n".join(err)
    runs = tmp_path / "out" / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # no arm ran
    (tmp_path / "ok").mkdir()
    again = write_config(tmp_path / "ok", tiny_data, start={"epochs": 1}, seeds=[0])
    raw, base, name, source = ablate.load_config(again)
    assert ablate.run_ablation(ablate.validate(raw, base, name, source), runner=designed_runner) == 0
