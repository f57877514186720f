"""Ablation runner: config validation, statistics against hand computations, a real tiny ablation (CSV, summary,
plots, resume, an injected failing variant), interruption, parallel devices and the dataset copy."""

import csv
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML
from attn_yolo.ablate.runs import perimage
from attn_yolo.ablate.runs import train as ablate_train
from attn_yolo.ablate.runs.runner import prepare_data
from attn_yolo.ablate.runs.train import check_finite_loss
from attn_yolo.args import UsageError
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]
T975 = {1: 12.706204736174705, 2: 4.302652729911275}  # Student t 0.975 quantiles (tables), df 1 and 2


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fmt(x: float, dec: int, sign: bool = False) -> str:
    return f"{x:+.{dec}f}" if sign else f"{x:.{dec}f}"


# ------------------------------------------------------------------------------------------------ default config


def test_default_config_is_the_repo_file():
    """`attn-yolo ablate` without a config runs configs/ablation/synthetic-quick.yaml, embedded in the package: the key
    data from a shared initialisation per seed; the old warm design is configs/ablation/shapes-warm.yaml, embedded
    too."""
    from attn_yolo.synthetic import QUICK_TRAIN_ARGS, SETTINGS

    assert (REPO / "configs/ablation/synthetic-quick.yaml").read_text() == ablate.DEFAULT_CONFIG_YAML
    assert (REPO / "configs/ablation/shapes-warm.yaml").read_text() == SHAPES_WARM_CONFIG_YAML
    cfg = yaml.safe_load(ablate.DEFAULT_CONFIG_YAML)
    assert cfg["data"] == "synthetic-key" and SETTINGS["synthetic-key"] == {"key": "select"} and cfg["start"] == "init"
    quick = {k: v for k, v in QUICK_TRAIN_ARGS.items() if k != "epochs"}
    assert quick.items() <= cfg["train"].items(), "the default's train args drifted from QUICK_TRAIN_ARGS"
    assert cfg["seeds"] == {"min": 3, "max": 6} and cfg["train"]["epochs"] == 3
    assert cfg["new_blocks"] == {"lr_mult": 1.0, "gamma": 1.0}
    warm = yaml.safe_load(SHAPES_WARM_CONFIG_YAML)
    assert warm["data"] == "synthetic-shapes" and warm["new_blocks"] == {"lr_mult": 1.0, "gamma": 0.3}
    assert quick.items() <= {**warm["train"], **warm["start"]}.items() and warm["train"]["epochs"] == 1


# ---------------------------------------------------------------------------------------------------- statistics


def test_paired_difference_against_hand_computation():
    # diffs 0.01, 0.02, 0.03: mean 0.02, sd 0.01, se 0.01/sqrt(3); df 2, whose t CDF is 1/2 + t / (2 sqrt(2 + t^2))
    d = ablate.paired_difference([0.01, 0.02, 0.03])
    se = 0.01 / math.sqrt(3)
    t = 0.02 / se
    assert d["n"] == 3 and d["mean"] == pytest.approx(0.02)
    assert d["lo"] == pytest.approx(0.02 - T975[2] * se) and d["hi"] == pytest.approx(0.02 + T975[2] * se)
    assert d["p"] == pytest.approx(1 - t / math.sqrt(2 + t * t))  # two-sided: 2 (1 - F(t))
    assert ablate.verdict(d) == "no detectable difference"  # CI [-0.0048, 0.0448] contains 0

    better = ablate.paired_difference([0.05, 0.06, 0.07])
    assert better["lo"] == pytest.approx(0.06 - T975[2] * se) and better["lo"] > 0
    assert ablate.verdict(better) == "better" and ablate.verdict(better, sense=-1) == "worse"  # e.g. latency
    worse = ablate.paired_difference([-0.05, -0.06, -0.07])
    assert ablate.verdict(worse) == "worse" and ablate.verdict(worse, sense=-1) == "better"

    one = ablate.paired_difference([0.1])
    assert one["mean"] == 0.1 and math.isnan(one["lo"]) and math.isnan(one["p"])
    assert ablate.verdict(one).startswith("n/a")
    same = ablate.paired_difference([0.0, 0.0])
    assert (same["lo"], same["hi"], same["p"]) == (0.0, 0.0, 1.0) and ablate.verdict(same) == "no detectable difference"


def test_summarize_pairs_by_seed_against_hand_computation():
    def row(v, seed, m, lat, status="ok"):
        return {"variant": v, "seed": seed, "status": status, "params": 100 if v == "b" else 110, "gflops": 1.5,
                "precision": 0.5, "recall": 0.4, "map50": m + 0.2, "map50_95": m, "best_epoch": 3,
                "train_time_s": 10.0, "latency_ms": lat}

    rows = [row("b", 0, 0.30, 10.0), row("b", 1, 0.34, 11.0), row("b", 2, 0.32, 12.0), row("b", 3, 0.9, 1, "failed"),
            row("x", 2, 0.36, 12.5), row("x", 0, 0.33, 10.4), row("x", 1, 0.36, 11.6)]  # seeds out of order
    s = ablate.summarize(rows, ["b", "x"], "b")
    b = s["variants"]["b"]
    assert (b["n"], b["runs"], b["failed"], b["params"]) == (3, 4, 1, 100)
    assert b["map50_95"][0] == pytest.approx(0.32)  # (0.30 + 0.34 + 0.32) / 3; the failed run is left out
    assert b["map50_95"][1] == pytest.approx(math.sqrt((0.02**2 + 0.02**2 + 0) / 2))  # sample std
    d = s["diffs"]["x"]["map50_95"]  # per seed: 0.33-0.30, 0.36-0.34, 0.36-0.32 = 0.03, 0.02, 0.04
    assert d["n"] == 3 and d["mean"] == pytest.approx(0.03)
    assert d["hi"] - d["mean"] == pytest.approx(T975[2] * 0.01 / math.sqrt(3))
    assert d["verdict"] == "better"  # 0.03 ± 0.0248
    assert "latency_ms" not in s["diffs"]["x"]  # a run's own latency is no verdict (timed apart: ablate.latency)


def test_check_finite_loss():
    from types import SimpleNamespace

    import torch

    check_finite_loss(SimpleNamespace(tloss={"box_loss": torch.tensor(1.0)}, epoch=0))
    with pytest.raises(ablate.NonFiniteLossError, match=r"epoch 3: .*box_loss=nan"):
        check_finite_loss(SimpleNamespace(tloss={"box_loss": torch.tensor(float("nan"))}, epoch=2))


def test_first_run_eta_from_dataset_size_and_epochs():
    """A run's work: training steps × epochs plus validation passes, against a hand count."""
    from attn_yolo.ablate.runs.eta import Cost, work

    train = {"epochs": 3, "batch": 8, "val": True, "imgsz": 128}
    cost = Cost(0.0, 0.5, 0.2 / 16, "test")  # a validation batch of 16 images: 0.2 s
    # 1000 images / batch 8 = 125 steps × 3 epochs; val: 200 images after each of 3 epochs + best.pt
    assert cost.seconds(work(train, 1000, 200)) == pytest.approx(125 * 3 * 0.5 + 4 * 200 / 16 * 0.2)
    train.update(val=False, fraction=0.1)  # 100 images → 13 steps per epoch; validated once + best.pt
    assert cost.seconds(work(train, 1000, 200)) == pytest.approx(13 * 3 * 0.5 + 2 * 200 / 16 * 0.2)
    train["epochs"] = 6  # twice the epochs: twice the training
    assert cost.seconds(work(train, 1000, 200)) == pytest.approx(13 * 6 * 0.5 + 2 * 200 / 16 * 0.2)


# ---------------------------------------------------------------------------------------------------- validation


def test_validation_reports_every_problem_at_once(tmp_path, tiny_data):
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    raw["seed"] = 3
    raw["data"] = "nowhere/data.yaml"
    raw["train"].update({"epochz": 2, "seed": 1, "batch": "big"})
    raw["latency"] = {"repeats": 0}
    raw["variants"] += [
        {"name": "cbam", "model": "yolo11n.yaml"},  # duplicate name
        {"name": "typo", "base": "yolo11n.yaml", "module": "CBMA", "at": "backbone"},
        {"name": "missing", "model": "models/yolo11n-nothing.yaml"},
        {"name": "both", "model": "yolo11n.yaml", "base": "yolo11n.yaml", "module": "SE"},
        {"name": "mhsa7", "base": "yolo11n.yaml", "module": "MHSA", "at": "sppf", "args": [7]},  # 256 % 7 at scale n
        {"name": "extra", "model": "yolo11n.yaml", "lr": 1},
        {"name": "cls", "model": "yolo11n-cls.yaml"},
    ]
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate(raw, tmp_path, "t", str(cfg))
    problems = e.value.problems
    expect = [
        "seed: unknown key (did you mean 'seeds'?)",
        "data: 'nowhere/data.yaml' does not resolve",
        "train.epochz: unknown Ultralytics train argument (did you mean 'epochs'?)",
        "train.seed: set by the ablation runner (use seeds)",
        "train.batch:",
        "latency.repeats: 0",
        "variants[2].name: duplicate variant name 'cbam' (also variants[1])",
        "variants[3] (typo).module: unknown module 'CBMA' (did you mean 'CBAM'?)",
        "variants[4] (missing).model: does not load: FileNotFoundError",
        "variants[5] (both): give either `model`",
        "variants[7] (extra).lr: unknown key",
        "variants[8] (cls).model: is a classify model; ablations train detect models",
    ]  # mhsa7 plans fine: that heads=7 does not fit its layer shows only when it is built, in the run
    for want in expect:
        assert any(p.startswith(want) for p in problems), f"{want!r} not in {problems}"
    assert len(problems) == len(expect), problems
    assert not (tmp_path / "out").exists()  # nothing ran

    # through the CLI: exit code 2 and the list on stderr, before any training
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**raw, "variants": raw["variants"][3:4]}))
    assert cli_main(["ablate", str(tmp_path / "bad.yaml")]) == 2


def test_validation_builds_no_model_and_writes_no_dataset(tmp_path, monkeypatch):
    """validate is cheap and changes nothing: the default config (data: synthetic-key, a shared initialisation,
    a CBAM insert spec) validates with every model build (``parse_model``) and the dataset generator made to fail,
    and no file appears; nothing is sized yet. prepare (in the run) generates the data and builds each arm."""
    import ultralytics.nn.tasks as tasks

    from attn_yolo import synthetic

    def boom(*args, **kwargs):
        raise AssertionError("validate built a model or generated the dataset")

    cache, out = tmp_path / "cache", tmp_path / "out"
    monkeypatch.setenv("ATTN_YOLO_DATA", str(cache))
    monkeypatch.setattr(tasks, "parse_model", boom)
    monkeypatch.setattr(synthetic, "generate", boom)
    raw, base, name, source = ablate.load_config(None)
    ab = ablate.validate(ablate.apply_overrides(raw, [f"out={out}"]), base, name, source)
    assert list(tmp_path.iterdir()) == []  # no dataset, no out, nothing else
    assert [v.name for v in ab.variants] == ["baseline", "cbam"] and not ab.prepared
    assert [(v.params, v.gflops) for v in ab.variants] == [(None, None)] * 2
    root = synthetic.default_root("synthetic-key").resolve()
    assert ab.data == str(root / "data.yaml") and ab.nc == len(synthetic.CLASS_NAMES)
    with pytest.raises(AssertionError, match="validate built a model"):  # the oracle can fail: prepare builds
        ablate.prepare(ab)


def test_the_generator_settings_by_name(tmp_path, monkeypatch, capsys):
    """``data: synthetic-key`` (a named setting of the embedded generator) validates without generating anything and
    points at that setting's own cached dataset; a name that is no setting exits 2 naming the key, the value and the
    settings that exist, before any training."""
    from attn_yolo import synthetic

    monkeypatch.setenv("ATTN_YOLO_DATA", str(tmp_path / "cache"))
    raw, base, name, source = ablate.load_config(None)
    ab = ablate.validate(ablate.apply_overrides(raw, ["data=synthetic-key", f"out={tmp_path / 'out'}"]), base)
    assert ab.data == str(synthetic.default_root("synthetic-key").resolve() / "data.yaml")
    assert ab.data != str(synthetic.default_root().resolve() / "data.yaml") and not (tmp_path / "cache").exists()
    assert cli_main(["ablate", "data=synthetic-keys", f"out={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert "data: 'synthetic-keys'; expected one of synthetic, synthetic-shapes, synthetic-key, synthetic-key-decoy" \
        in err and not (tmp_path / "out").exists()


def test_a_block_that_does_not_fit_fails_in_the_run_before_any_training(tmp_path, tiny_data, capsys):
    """A hyperparameter that does not fit its layer (MHSA heads=7 at a 256-channel P5, scale n) passes validation and
    is refused when the run builds the arms: before any run or start trains, nothing written into out, the key and
    the inserted row named; on the command line exit 2."""
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    raw["variants"].append({"name": "mhsa7", "base": "yolo11n.yaml", "module": "MHSA", "at": "sppf", "args": [7]})
    ab = ablate.validate(raw, tmp_path, "t")
    calls = []
    with pytest.raises(ablate.ConfigError) as e:
        ablate.run_ablation(ab, runner=counting(calls))
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(
        "variants[2] (mhsa7): does not build: InsertionError: MHSA after base layer 10 (P5/32, C=256): heads=7 is "
        "invalid"), e.value.problems
    assert calls == [] and not (tmp_path / "out").exists()
    cfg.write_text(yaml.safe_dump(raw))
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "variants[2] (mhsa7): does not build" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_values_ultralytics_would_misread_are_refused(tmp_path, tiny_data, capsys):
    """`seeds: 3` is not three seeds; batch takes a positive int or Ultralytics' auto batch (-1, a float in (0, 1));
    (fraction: Ultralytics' own check); latency repeats and warmup are bounded. All listed at once, with the edit to
    make."""
    raw = yaml.safe_load(write_config(tmp_path, tiny_data).read_text())
    bad = {**raw, "seeds": 3, "train": {**raw["train"], "batch": 0},
           "latency": {"repeats": 10**9, "warmup": 1001}}  # fmt: skip
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate(bad, tmp_path, "t")
    assert e.value.problems == [
        "latency.repeats: 1000000000; expected an int in [1, 10000]",  # the declared keys first (config.SHAPE)
        "latency.warmup: 1001; expected an int in [0, 1000]",
        (
            "train.batch: 0; expected a positive int, -1 (auto batch at 60% of GPU memory) or a float in (0, 1) "
            "(auto batch at that fraction of GPU memory)"
        ),
        "seeds: 3; expected a list of ints, e.g. seeds: [0, 1, 2] for 3 seeds, or seeds: [3] for seed 3 alone",
    ]
    for batch in (-3, 1.0, 2.5, 0):
        with pytest.raises(ablate.ConfigError) as e:
            ablate.validate({**raw, "train": {**raw["train"], "batch": batch}}, tmp_path, "t")
        assert [p.split(":")[0] for p in e.value.problems] == ["train.batch"], e.value.problems
    for batch, fraction in ((-1, 1), (0.7, 0.25), (1, 1.0), (4, 2)):  # the edges Ultralytics means (2: two images)
        ab = ablate.validate({**raw, "seeds": [3], "train": {**raw["train"], "batch": batch, "fraction": fraction},
                              "latency": {"repeats": 10000, "warmup": 0}}, tmp_path, "t")  # fmt: skip
        assert (ab.seeds, ab.train["batch"], ab.train["fraction"]) == ([3], batch, float(fraction))
    assert cli_main(["ablate", str(write_config(tmp_path, tiny_data)), "seeds=2"]) == 2  # also on the command line
    assert "seeds: 2; expected a list of ints, e.g. seeds: [0, 1] for 2 seeds" in capsys.readouterr().err


def test_insert_specs_take_the_new_blocks(tmp_path, tiny_data):
    """Insert specs name the seven newer blocks like the others; a group count that does not fit is reported."""
    raw = yaml.safe_load(write_config(tmp_path, tiny_data).read_text())
    raw["variants"] = [
        {"name": "baseline", "model": "yolo11n.yaml"},
        {"name": "ema", "base": "yolo11n.yaml", "module": "EMA", "at": "backbone", "args": [16]},
        {"name": "sa", "base": "yolo11n.yaml", "module": "ShuffleAttention", "at": "neck"},
    ]
    ab = ablate.prepare(ablate.validate(raw, tmp_path, "t"))
    base, ema, sa = ab.variants
    assert [r[2:] for r in ema.model_dict["backbone"] if r[2] == "EMA"] == [["EMA", [16]]] * 3
    assert ema.params > base.params and sa.params > base.params
    raw["variants"][2]["args"] = [5]
    with pytest.raises(ablate.ConfigError) as e:
        ablate.prepare(ablate.validate(raw, tmp_path, "t"))
    assert "variants[2] (sa): does not build" in e.value.problems[0] and "groups=5 is invalid" in e.value.problems[0]


def test_insert_specs_take_block_aliases(tmp_path, tiny_data):
    """``module:`` takes the aliases of public YAMLs (``CA``, ``NAMAttention``), resolved as ``attn-yolo insert`` does:
    the inserted rows carry the canonical name; a name that is no block or alias is still refused."""
    raw = yaml.safe_load(write_config(tmp_path, tiny_data).read_text())
    raw["variants"] = [
        {"name": "baseline", "model": "yolo11n.yaml"},
        {"name": "ca", "base": "yolo11n.yaml", "module": "CA", "at": "sppf"},
        {"name": "nam", "base": "yolo11n.yaml", "module": "NAMAttention", "at": "sppf"},
    ]
    _, ca, nam = ablate.validate(raw, tmp_path, "t").variants
    assert [r[2] for r in ca.model_dict["backbone"]][-1] == "CoordAtt"
    assert [r[2] for r in nam.model_dict["backbone"]][-1] == "NAM"
    raw["variants"][1]["module"] = "CoordAttn"
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate(raw, tmp_path, "t")
    assert e.value.problems == [
        (
            "variants[1] (ca).module: unknown module 'CoordAttn' (did you mean 'CoordAtt'?); one of "
            "SE, ECA, SAM, CBAM, MHSA, CoordAtt, EMA, SimAM, GAM, ShuffleAttention, TripletAttention, NAM, "
            "LSKA, MLCA, ELA, CAA, SKAttention, BiLevelRoutingAttention or an alias (`attn-yolo modules`)"
        )
    ]


def test_overrides():
    raw = {"data": "d.yaml", "train": {"epochs": 5}}
    out = ablate.apply_overrides(raw, ["epochs=1", "imgsz=64", "out=runs/x", "seeds=[0, 1]", "devices=cpu,cpu"])
    assert out == {"data": "d.yaml", "train": {"epochs": 1, "imgsz": 64}, "out": "runs/x", "seeds": [0, 1],
                   "devices": ["cpu", "cpu"]}
    assert raw == {"data": "d.yaml", "train": {"epochs": 5}}  # not modified
    assert ablate.apply_overrides({}, ["seeds=0,1"])["seeds"] == [0, 1]
    # where the runs go: the command line's device replaces the config's devices, and the other way round
    both = {"devices": ["cpu", "cpu"], "train": {"epochs": 5}}
    assert ablate.apply_overrides(both, ["device=0"]) == {"train": {"epochs": 5, "device": 0}}
    assert ablate.apply_overrides({"train": {"device": 0}}, ["devices=0,1"]) == {"train": {}, "devices": [0, 1]}
    raw_default = ablate.load_config(None)[0]
    assert raw_default["devices"] == ["cpu", "cpu"]  # the default uses both cores of a 2-core CPU machine
    assert "devices" not in ablate.apply_overrides(raw_default, ["device=cpu"])
    with pytest.raises(UsageError, match=r"epoch: unknown key \(did you mean 'epochs'\?\); allowed: "):
        ablate.apply_overrides(raw, ["epoch=1"])
    with pytest.raises(UsageError, match="expected key=value"):
        ablate.apply_overrides(raw, ["epochs"])


def test_backend_keys(tmp_path, tiny_data):
    """backend, ray_address and resources: validated with the rest, before any run; settable on the command line."""
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate({**raw, "backend": "spark", "ray_address": "auto", "resources": {"num_gpu": 1, "num_cpus": 0}},
                        tmp_path)
    assert sorted(e.value.problems) == [
        "backend: 'spark'; expected one of local, ray",
        "ray_address: only with backend=ray",
        "resources.num_cpus: 0; expected a number > 0",
        "resources.num_gpu: unknown key (did you mean 'num_gpus'?); allowed: num_cpus, num_gpus",
    ]
    pytest.importorskip("ray")
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate({**raw, "backend": "ray", "devices": ["cpu"], "train": {**raw["train"], "device": "0"}},
                        tmp_path)
    assert sorted(e.value.problems) == [
        "devices: not with backend=ray (Ray places each run; set resources.num_gpus)",
        "train.device: '0' not with backend=ray; runs get their device from resources.num_gpus (0: cpu)",
        "train.device: not with `devices` (each run gets one of `devices`); remove one of them",
    ]
    raw = ablate.apply_overrides(raw, ["backend=ray", "ray_address=ray://head:10001"])
    assert ablate.validate(raw, tmp_path).train["device"] == "cpu"  # consistent with num_gpus: 0
    del raw["train"]["device"]
    ab = ablate.validate({**raw, "resources": {"num_cpus": 4, "num_gpus": 0.5}}, tmp_path)
    assert (ab.backend, ab.ray_address, ab.resources) == ("ray", "ray://head:10001", {"num_cpus": 4, "num_gpus": 0.5})
    from attn_yolo.ablate.runs.scheduling import ray_device

    assert [ray_device({"num_gpus": g}) for g in (0, 0.5, 1, 2)] == ["cpu", "0", "0", "0,1"]


# ------------------------------------------------------------------------------------------- a real tiny ablation


def test_tiny_ablation_end_to_end(tmp_path, tiny_data, monkeypatch, capsys):
    """2 variants (Ultralytics YAML, insert spec) × 2 seeds + a variant whose loss turns NaN, 1 epoch at 64 px."""
    from ultralytics.engine.model import Model

    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    raw["variants"].append({"name": "nan", "model": "yolo11n.yaml"})
    cfg.write_text(yaml.safe_dump(raw))
    trained, train = [], Model.train

    def poison(trainer):  # a NaN loss in the `nan` variant's first epoch
        trainer.tloss = {k: v * float("nan") for k, v in trainer.tloss.items()}

    def counting_train(self, **kw):
        trained.append(kw["name"])
        if kw["name"].startswith("nan-"):
            self.callbacks["on_train_epoch_end"].insert(0, poison)
        return train(self, **kw)

    monkeypatch.setattr(Model, "train", counting_train)
    assert cli_main(["ablate", str(cfg)]) == 1  # a run failed
    out = capsys.readouterr().out
    assert re.search(r"attn-yolo ablate: \[runs\] 6 run\(s\) to go, ETA ~\d+m\d\ds \(set-up per run not yet measured\)",
                     out)  # the runs' phase, with its one time left
    assert re.search(r"attn-yolo ablate: plan: 6 run\(s\) on 1 worker\(s\): expected ~\d+m\d\ds \(one timed step"
                     r".*8 train / 4 val images\)", out)
    assert "[done 6/6] variant=nan seed=1: FAILED" in out
    assert sorted(trained) == sorted(f"{v}-seed{s}" for v in ("baseline", "cbam", "nan") for s in (0, 1))

    o = tmp_path / "out"
    rows = read_csv(o / "results.csv")
    assert [(r["variant"], r["seed"], r["status"]) for r in rows] == [
        (v, str(s), "failed" if v == "nan" else "ok") for v in ("baseline", "cbam", "nan") for s in (0, 1)
    ]
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        assert int(r["params"]) > 2_500_000 and float(r["gflops"]) > 0
        assert all(0 <= float(r[k]) <= 1 for k in ("precision", "recall", "map50", "map50_95"))
        assert (r["best_epoch"], r["epochs"]) == ("1", "1")
        assert float(r["train_time_s"]) > 0 and "latency_ms" not in r and r["device"] == "cpu"
        assert (Path(r["run_dir"]) / "weights" / "best.pt").exists()
    assert int(rows[2]["params"]) > int(rows[0]["params"])  # CBAM adds parameters
    model = Path(rows[2]["model"])  # the insert spec, written into the run folder under a name with its scale
    assert model.name == "yolo11n-cbam.yaml" and model.parent == Path(rows[2]["run_dir"])
    for r in rows[4:]:
        assert "NonFiniteLossError: non-finite training loss in epoch 1" in r["error"]
        assert (Path(r["run_dir"]) / "error.txt").exists()

    # every ok run kept its final validation image by image; its mAP is what results.csv holds
    for r in ok:
        rec = perimage.load_record(Path(r["run_dir"]) / perimage.PERIMAGE_NAME)
        got = perimage.recompute(rec)
        assert (got["map50"], got["map50_95"]) == (rec.reported["map50"], rec.reported["map50_95"])
        assert fmt(got["map50_95"], 6) == fmt(float(r["map50_95"]), 6) and rec.n_images == 4
        assert {"ap_small", "ap_medium", "ap_large"} <= r.keys() and r["ap_small"] != ""

    # 1 epoch on 8 images learns nothing: said so, and no comparison is made (no "no detectable difference")
    text = (o / "summary.md").read_text()
    assert "- **cbam**: **learned nothing**: P, R, mAP50 and mAP50-95 are 0 in every run; no comparison" in text
    diff_table = text.split("## Difference")[1].split("## Intervals")[0]
    assert "**no detectable difference**" not in text and "| cbam |" not in diff_table
    assert not (o / "delta.png").exists()
    assert "| nan | 0 | NonFiniteLossError" in text and "**nan**: **n/a" in text
    assert "runs: 4 ok, 2 failed, 0 not run" in text
    assert "| baseline | 2/2 |" in text and "baseline (baseline)" not in text  # the name already says it
    # attention health (on by default): each CBAM run measured its blocks; the summary puts them beside the verdict
    for r in ok:
        assert (Path(r["run_dir"]) / "gates.csv").exists() == (r["variant"] == "cbam")
    assert "## Attention health" in text and "| cbam | learned nothing | L05_CBAM |" in text
    assert "| baseline | baseline | no attention blocks |" in text

    # resume: finished runs are skipped, the failed ones redone; ok rows stay as they were
    trained.clear()
    assert cli_main(["ablate", str(cfg)]) == 1
    assert sorted(trained) == ["nan-seed0", "nan-seed1"]
    again = read_csv(o / "results.csv")
    assert again[:4] == rows[:4]
    assert "4/6 run(s) already finished" in capsys.readouterr().out


def test_tiny_ablation_with_intervals_end_to_end(tmp_path, monkeypatch, oracle):
    """A real 2 × 2 ablation (1 epoch) whose validations score far from 0: Ultralytics' validator runs as usual but
    on detections made from the labels (``oracle``), different per run. results.csv gets the size-AP columns,
    summary.md the three intervals, the verdict from the hierarchical one and the power line, delta.png is drawn;
    a rerun prints the same numbers; a run folder without its per-image record falls back to seeds only."""
    import matplotlib.image
    from ultralytics.models.yolo.detect import DetectionValidator

    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "data", n_train=8, n_val=8, imgsz=256, seed=3, size_range=(0.06, 0.5))
    monkeypatch.setattr(perimage.RecordingValidator, "update_metrics", lambda self, preds, batch:
                        DetectionValidator.update_metrics(self, oracle(self, batch, Path(self.save_dir).name), batch))
    cfg = write_config(tmp_path, data, bootstrap={"resamples": 500, "seed": 1})
    # the oracle scores every model alike, its blocks mean-ablated or not: the attention check is moot here
    monkeypatch.setattr(ablate_train, "attention_figures", lambda spec, best, train: {
        "attention_check": "mean ablation", "mean_ablation_effect": 10.0, "knockout_effect": 10.0})
    assert cli_main(["ablate", str(cfg)]) == 0
    o = tmp_path / "out"
    rows = read_csv(o / "results.csv")
    for r in rows:
        assert all(0 < float(r[k]) < 1 for k in ("map50_95", "ap_small", "ap_medium", "ap_large")), r
        assert (Path(r["run_dir"]) / perimage.PERIMAGE_NAME).exists()
    text = (o / "summary.md").read_text()
    assert "Each line shows the one interval that decides its verdict, at 95%: the hierarchical interval" in text
    assert "- image bootstrap: 500 resamples (seed 1) of the 8 validation images" in text
    verdict = next(line for line in text.split("## Verdict")[1].splitlines() if line.startswith("- **cbam**"))
    assert ", hierarchical 95% CI [" in verdict and "n = 2 paired seeds" in verdict, verdict
    assert verdict.count("[") == 1 and "p = " not in verdict  # the deciding interval alone; the others do not decide
    other = next(line for line in text.split("## Not deciding")[1].splitlines() if line.startswith("- `cbam`"))
    assert "seeds-only [" in other and "images-only [" in other and "p = " in other, other
    assert "Power (mAP50-95" in text and "- `cbam`: with 2 seeds and 8 images this design detects |Δ| >= " in text

    # the seeds-only column against a hand computation from results.csv (t with 1 degree of freedom)
    by = {(r["variant"], int(r["seed"])): r for r in rows}
    metrics = (("map50_95", "mAP50-95", 4), ("ap_small", "AP small", 4))
    for key, label, dec in metrics:
        diffs = [float(by[("cbam", s)][key]) - float(by[("baseline", s)][key]) for s in (0, 1)]
        m, half = statistics.fmean(diffs), T975[1] * statistics.stdev(diffs) / math.sqrt(2)
        row = next(line for line in text.splitlines() if line.startswith(f"| cbam | {label} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        lo, hi = (float(x) for x in cells[3].strip("[]").split(","))  # results.csv holds 6 significant digits
        assert (lo, hi) == pytest.approx((m - half, m + half), abs=1.5 * 10**-dec), row
        assert cells[4].startswith("[") and cells[5].startswith("[") and cells[8], row
    assert "Images-only intervals per seed (mAP50-95)" in text and "## Per-class Δ AP50-95" in text

    img = matplotlib.image.imread(o / "delta.png")
    assert img.shape[0] > 200 and img.shape[1] > 600 and img[..., :3].std() > 0.01

    # a rerun (every run finished) prints the same numbers
    assert cli_main(["ablate", str(cfg)]) == 0
    again = (o / "summary.md").read_text()
    for part in (lambda s: s.split("## Verdict")[1].split("## Setup")[0], lambda s: s.split("## Results")[1]):
        assert part(again) == part(text)  # the setup's wall time differs

    # a run folder from before per-image records: seeds-only, and said why
    (o / "runs" / "cbam-seed0" / perimage.PERIMAGE_NAME).unlink()
    assert cli_main(["ablate", str(cfg)]) == 0
    text = (o / "summary.md").read_text()
    assert "- `cbam`: seeds-only t-interval only: no per-image record in run folder(s) cbam-seed0" in text
    verdict = next(line for line in text.split("## Verdict")[1].splitlines() if line.startswith("- **cbam**"))
    assert "seeds-only 95% CI" in verdict and "hierarchical" not in verdict
    assert not (o / "delta.png").exists()


# ------------------------------------------------------------------------------------ resume logic, fake runners


def fake_runner(spec, device):
    """Stands in for execute_run: no training (writes a stand-in weights file); module-level so that worker processes
    can unpickle it."""
    time.sleep(0.3)
    Path(spec.run_dir, "weights.txt").write_text(f"{spec.variant} {spec.seed}")
    return {"variant": spec.variant, "seed": spec.seed, "status": "ok", "params": spec.params, "gflops": spec.gflops,
            "precision": 0.5, "recall": 0.5, "map50": 0.5, "map50_95": 0.1 * (spec.seed + 1), "best_epoch": 1,
            "epochs": 1, "train_time_s": 0.3, "latency_ms": 1.0 + spec.seed, "device": device,
            "run_dir": spec.run_dir, "model": spec.model, "error": "", "fingerprint": spec.fingerprint,
            "pid": os.getpid()}


def test_interrupt_resume_and_changed_settings(tmp_path, tiny_data):
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    calls = []

    def interrupted(spec, device):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append((spec.variant, spec.seed))
        return fake_runner(spec, device)

    assert ablate.run(cfg, runner=interrupted) == 130  # Ctrl-C in the third run
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert [(r["variant"], r["seed"]) for r in rows] == [("baseline", "0"), ("baseline", "1")]
    assert "runs: 2 ok, 0 failed, 4 not run" in (tmp_path / "out" / "summary.md").read_text()

    calls.clear()
    assert ablate.run(cfg, runner=lambda s, d: calls.append((s.variant, s.seed)) or fake_runner(s, d)) == 0
    assert calls == [("baseline", 2), ("cbam", 0), ("cbam", 1), ("cbam", 2)]  # the lost run and the rest

    calls.clear()  # another imgsz changes every run's settings: a folder of its own (out-imgsz96), all runs done there
    assert ablate.run(cfg, ["imgsz=96"], runner=lambda s, d: calls.append(s.variant) or fake_runner(s, d)) == 0
    assert len(calls) == 6 and len(read_csv(tmp_path / "out-imgsz96" / "results.csv")) == 6
    calls.clear()  # device and plots change no result: the same folder, nothing to redo
    again = ["imgsz=96", "device=mps", "plots=True"]
    assert ablate.run(cfg, again, runner=lambda s, d: calls.append(1) or fake_runner(s, d)) == 0
    assert calls == []


def test_learned_nothing_and_records_missing(tmp_path, tiny_data):
    """All-zero metrics: no comparison (not "no detectable difference, p = 1"); runs without per-image records (as
    from before they existed): seeds-only intervals, and the summary says why."""

    def zero_baseline(spec, device):
        row = fake_runner(spec, device)
        if spec.variant == "baseline":
            row |= {k: 0.0 for k in ("precision", "recall", "map50", "map50_95")}
        return row

    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    assert ablate.run(cfg, runner=zero_baseline) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "- **cbam**: **n/a**: the baseline `baseline` learned nothing (all its metrics are 0); no comparison" in text
    assert "no detectable difference" not in text.split("## Intervals")[0]

    # out2: fake runs, cbam with the baseline's mAP50-95 per seed (Δ = 0, 0, 0: a zero-width interval at 0, worded as
    # such); se shifted by Δ = 0.001, 0.003, 0.002 per seed. Two comparisons: each interval at 97.5 % (Bonferroni).
    # se's verdict from its interval, computed here by hand: mean 0.002, sample SD 0.001, SE 0.001 / √3,
    # t(0.9875, 2) = 6.2053: CI [-0.0016, +0.0056] holds 0 and lies within ±0.01 (the Δ the summary asks about), so
    # "no difference beyond ±0.0056" (its larger bound, rounded up); p = 2 (1 − F2(t)) = 1 − t / √(2 + t²) at
    # t = mean / SE, in the section of what does not decide
    deltas = (0.001, 0.003, 0.002)

    def shifted(spec, device):
        row = fake_runner(spec, device)
        return row | ({"map50_95": row["map50_95"] + deltas[spec.seed]} if spec.variant == "se" else {})

    se_variant = {"name": "se", "base": "yolo11n.yaml", "module": "SE", "at": "backbone", "args": [16]}
    variants = [*yaml.safe_load(cfg.read_text())["variants"], se_variant]
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2], out=str(tmp_path / "out2"), variants=variants)
    assert ablate.run(cfg, runner=shifted) == 0
    text = (tmp_path / "out2" / "summary.md").read_text()
    assert "- **cbam**: **no difference beyond ±0.0000** (Δ +0.0000, seeds-only 97.5% CI [+0.0000, +0.0000]" in text
    why = next(line for line in text.splitlines() if line.startswith("- `cbam`: seeds-only t-interval only: "))
    assert "no per-image record in run folder(s) baseline-seed0" in why and " and 3 more (made before" in why
    se, mean = 0.001 / math.sqrt(3), sum(deltas) / 3
    lo, hi, t = mean - 6.205346816570706 * se, mean + 6.205346816570706 * se, mean / se
    assert lo < 0 < hi <= 0.01 and math.ceil(hi * 1e4) == 56
    p = 1 - t / math.sqrt(2 + t * t)
    want = f"- **se**: **no difference beyond ±0.0056** (Δ {mean:+.4f}, seeds-only 97.5% CI [{lo:+.4f}, {hi:+.4f}], "
    assert want + "n = 3 paired seeds" in text
    assert want == "- **se**: **no difference beyond ±0.0056** (Δ +0.0020, seeds-only 97.5% CI [-0.0016, +0.0056], "
    assert f"- `se`: p = {p:.3g} (seeds-only); no image-level interval: " in text.split("## Not deciding")[1]


def test_class_movers_are_the_five_largest_each_way():
    from attn_yolo.ablate.reports.summary import class_movers

    means = [0.05, -0.01, 0.03, -0.2, 0.0, 0.1, -0.05, 0.02, 0.07, -0.03, 0.04, -0.15, 0.06]
    classes = {c: {"mean": m, "lo": m - 0.01, "hi": m + 0.01, "variant": 0.5 + m, "baseline": 0.5} for c, m in
               enumerate(means)}
    rows = class_movers({"v": {"classes": classes}}, [f"c{c}" for c in range(len(means))])
    assert [row[1] for row in rows] == ["c5", "c8", "c12", "c0", "c10", "c3", "c11", "c6", "c9", "c1"]
    assert rows[0] == ["v", "c5", "+0.1000", "[+0.0900, +0.1100]", "0.6000", "0.5000"]


def test_parallel_devices(tmp_path, tiny_data, capsys):
    """devices: [cpu, cpu] runs two worker processes, one run per device at a time."""
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    del raw["train"]["device"]
    raw["devices"] = ["cpu", "cpu"]
    cfg.write_text(yaml.safe_dump(raw))
    assert ablate.run(cfg, runner=fake_runner) == 0
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert len(rows) == 4 and {r["device"] for r in rows} == {"cpu"}
    pids = {json.loads((Path(r["run_dir"]) / "result.json").read_text())["pid"] for r in rows}
    assert len(pids) == 2 and os.getpid() not in pids  # one worker process per device
    out = capsys.readouterr().out  # off a terminal: no bar, a line per finished run and the time left once
    assert len(set(re.findall(r"\[done \d/4\] variant=\w+ seed=\d", out))) == 4
    assert out.count("ETA") == 1 and "attn-yolo ablate: [runs] 4 run(s) to go, ETA" in out

    raw["train"]["device"] = "cpu"  # both: ambiguous
    with pytest.raises(ablate.ConfigError, match="train.device: not with `devices`"):
        ablate.validate(raw, tmp_path)


# ------------------------------------------------------------------------- faults: records, folders, lock, signals


def counting(calls: list):
    """A fake runner that notes each run it is asked to train."""
    return lambda spec, device: calls.append(f"{spec.variant}-seed{spec.seed}") or fake_runner(spec, device)


def test_damaged_results_csv_loses_nothing(tmp_path, tiny_data, capsys):
    """results.csv is an index of the records in the run folders: damaged, foreign or deleted, it is rebuilt (one
    warning naming the file and the bad line) and no finished run is retrained."""
    cfg = write_config(tmp_path, tiny_data)
    assert ablate.run(cfg, runner=fake_runner) == 0
    csv_path = tmp_path / "out" / "results.csv"
    good = csv_path.read_bytes()
    lines = good.decode().splitlines(keepends=True)
    damages = {  # damage → what the warning says
        "garbage line": (lambda: csv_path.write_text("".join(lines[:2] + ["baseline,1,ok,x,y,z\n"] + lines[2:]),
                                                     newline=""), "line 3 'baseline,1,ok,x,y,z' matches no run record"),
        "damaged header": (lambda: csv_path.write_text("".join(["variant;seed;stat\n"] + lines[1:]), newline=""),
                           "line 1 'variant;seed;stat' is not the results.csv header"),
        "deleted": (csv_path.unlink, "not found"),
        "foreign": (lambda: csv_path.write_text("epoch,time,train/box_loss\n1,2.0,0.5\n"),
                    "line 1 'epoch,time,train/box_loss' is not the results.csv header"),
        "lost row": (lambda: csv_path.write_text("".join(lines[:-1]), newline=""), "lacks 1 of 4 run record(s)"),
    }  # fmt: skip
    for damage, (do, want) in damages.items():
        do()
        capsys.readouterr()
        calls = []
        assert ablate.run(cfg, runner=counting(calls)) == 0
        assert calls == [], damage  # no finished run is retrained
        assert csv_path.read_bytes() == good, damage
        for r in read_csv(csv_path):  # the run folders are kept
            assert (Path(r["run_dir"]) / "weights.txt").read_text() == f"{r['variant']} {r['seed']}"
        warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
        assert len(warnings) == 1 and f"{csv_path}: {want}" in warnings[0], (damage, warnings)
    capsys.readouterr()
    assert ablate.run(cfg, runner=fake_runner) == 0 and "warning" not in capsys.readouterr().err  # intact: quiet


def test_foreign_folder_in_the_way_is_kept(tmp_path, tiny_data, capsys):
    """Only folders with the runner's marker are replaced; anything else stops the ablation (exit 2) before any run."""
    cfg = write_config(tmp_path, tiny_data)
    mine = tmp_path / "out" / "runs" / "cbam-seed1"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my notes")
    assert cli_main(["ablate", str(cfg)]) == 2  # out itself is not the runner's (tests/test_overwrite.py)
    assert "attn-yolo ablate did not create it" in capsys.readouterr().err
    assert cli_main(["ablate", str(cfg), "overwrite=True"]) == 2  # allowed into out: the run folder still refused
    assert f"{mine}: a folder that attn-yolo ablate did not create" in capsys.readouterr().err
    calls = []
    with pytest.raises(UsageError, match="cbam-seed1: a folder"):
        ablate.run(cfg, ["overwrite=True"], runner=counting(calls))
    assert calls == [] and (mine / "notes.txt").read_text() == "my notes"
    (mine / "notes.txt").rename(tmp_path / "notes.txt")
    mine.rmdir()
    mine.write_text("a file")  # a file in the way: also kept
    with pytest.raises(UsageError, match="cbam-seed1: a file"):
        ablate.run(cfg, ["overwrite=True"], runner=counting(calls))
    mine.unlink()
    mine.mkdir()  # an empty folder: nothing to lose
    assert ablate.run(cfg, ["overwrite=True"], runner=counting(calls)) == 0 and len(calls) == 4
    assert (mine / ".attn-yolo-run").is_file()  # the runner's own folder, replaced when the run is redone
    calls.clear()  # changed settings into the same out: redone only with redo=True, into the runner's own folders
    assert ablate.run(cfg, [f"out={tmp_path / 'out'}", "imgsz=96", "redo=True"], runner=counting(calls)) == 0
    assert len(calls) == 4
    assert (mine / "weights.txt").read_text() == "cbam 1" and len(list(mine.iterdir())) == 4  # + record, marker, log
    assert f"out={tmp_path / 'out'} (outside the working directory {Path.cwd()})" in capsys.readouterr().out


def test_copy_data_replaces_only_its_own_copy(tmp_path, tiny_data):
    from types import SimpleNamespace

    ab = SimpleNamespace(data=str(tiny_data), copy_data=True, out=tmp_path / "out")
    dest = tmp_path / "out" / "data" / tiny_data.parent.name
    dest.mkdir(parents=True)
    (dest / "mine.txt").write_text("mine")
    with pytest.raises(UsageError, match=f"{dest}: a folder that attn-yolo ablate did not create"):
        prepare_data(ab)
    assert (dest / "mine.txt").read_text() == "mine"
    (dest / "mine.txt").unlink()
    dest.rmdir()
    copied = Path(prepare_data(ab))
    assert copied == dest / "data.yaml" and (dest / ".attn-yolo-data").is_file()
    copied.unlink()  # an interrupted copy (data.yaml is written last) of ours is redone
    (dest / "stale.txt").write_text("left by an interrupted copy")
    assert Path(prepare_data(ab)) == copied and not (dest / "stale.txt").exists()


DRIVER = """
import multiprocessing, os, sys, time
from pathlib import Path
from attn_yolo import ablate
from attn_yolo.ablate.runs.records import new_record

def runner(spec, device):
    if os.environ.get("RUN_LOG"):
        with open(os.environ["RUN_LOG"], "a") as f:
            f.write(f"{spec.variant}-seed{spec.seed}\\n")
    if spec.variant in os.environ.get("HANG", "").split(","):  # a child process (like a dataloader worker), then hang
        multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,), daemon=True).start()
        Path(spec.run_dir, "started").write_text(str(os.getpid()))
        time.sleep(600)
    Path(spec.run_dir, "started").write_text(str(os.getpid()))
    while os.environ.get("GATE") and not Path(os.environ["GATE"]).exists():
        time.sleep(0.1)
    return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
            "map50_95": 0.25, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1, "latency_ms": 1.0}

if __name__ == "__main__":
    sys.exit(ablate.run(sys.argv[1], sys.argv[2:], runner=runner))
"""


def start_driver(tmp_path: Path, cfg: Path, *overrides: str, **env):
    """``ablate.run(cfg)`` in a subprocess (its own session) with the fake runner of DRIVER."""
    import subprocess

    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    return subprocess.Popen([sys.executable, str(script), str(cfg), *overrides], start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **env})


def wait_for(condition, timeout: float = 180.0, what: str = "condition"):
    t0 = time.time()
    while not condition():
        assert time.time() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_second_ablation_into_the_same_out_exits_2(tmp_path, tiny_data, capsys):
    import socket

    cfg = write_config(tmp_path, tiny_data)
    log, gate = tmp_path / "runs.log", tmp_path / "go"
    first = start_driver(tmp_path, cfg, RUN_LOG=str(log), GATE=str(gate))
    try:
        holder = tmp_path / "out" / ".attn-yolo-ablate.lock.json"
        wait_for(lambda: (tmp_path / "out/runs/baseline-seed0/started").exists(), what="the first run")
        assert json.loads(holder.read_text())["pid"] == first.pid
        assert cli_main(["ablate", str(cfg)]) == 2  # the second ablation stops at once
        err = capsys.readouterr().err
        assert f"is in use by another ablation (pid {first.pid} on host {socket.gethostname()}" in err
        calls = []
        with pytest.raises(UsageError, match=f"pid {first.pid}"):
            ablate.run(cfg, runner=counting(calls))
        assert calls == []
        gate.touch()
        assert first.wait(timeout=180) == 0
    finally:
        first.kill()
    assert sorted(log.read_text().split()) == sorted(f"{v}-seed{s}" for v in ("baseline", "cbam") for s in (0, 1))
    assert not holder.exists()
    assert ablate.run(cfg, runner=counting(calls)) == 0 and calls == []  # released: the next ablation runs (nothing)


def test_stale_lock_is_taken_over(tmp_path, tiny_data, capsys):
    import socket
    import subprocess

    cfg = write_config(tmp_path, tiny_data, seeds=[0])
    holder = tmp_path / "out" / ".attn-yolo-ablate.lock.json"
    holder.parent.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": time.time()}))
    assert ablate.run(cfg, runner=fake_runner) == 0  # the holder died without releasing: taken over
    err = capsys.readouterr().err
    assert f"{holder}: taking over the stale lock of the ablation (pid {dead.pid} on host {socket.gethostname()}" in err
    assert not holder.exists()

    alive = subprocess.Popen(["sleep", "60"])  # a live holder whose lock file was deleted: still refused
    try:
        holder.write_text(json.dumps({"pid": alive.pid, "host": socket.gethostname(), "started": time.time()}))
        with pytest.raises(UsageError, match=f"pid {alive.pid} on host .*delete {holder}"):
            ablate.run(cfg, runner=fake_runner)
        assert holder.exists()
    finally:
        alive.kill()


def session_processes(sid: int) -> list:
    """Live (not zombie) processes of a session."""
    import psutil

    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    return out


@pytest.mark.parametrize("sig, devices, code", [("SIGTERM", ["cpu", "cpu"], 143), ("SIGINT", None, 130)])
def test_signal_stops_every_process_and_keeps_finished_runs(tmp_path, tiny_data, sig, devices, code):
    """SIGTERM (parallel workers) and SIGINT (in-process run): exit 143 / 130, no process left in the session, the
    finished runs kept and not retrained."""
    import signal

    pytest.importorskip("psutil")
    cfg = write_config(tmp_path, tiny_data)
    if devices:
        raw = yaml.safe_load(cfg.read_text())
        del raw["train"]["device"]
        cfg.write_text(yaml.safe_dump({**raw, "devices": devices}))
    proc = start_driver(tmp_path, cfg, HANG="cbam")
    try:
        hanging = ["cbam-seed0", "cbam-seed1"] if devices else ["cbam-seed0"]
        wait_for(lambda: all((tmp_path / "out/runs" / r / "started").exists() for r in hanging), what="hanging runs")
        assert len(session_processes(proc.pid)) >= 1 + len(hanging)  # driver, workers, their children
        os.kill(proc.pid, getattr(signal, sig))
        assert proc.wait(timeout=60) == code
        wait_for(lambda: not session_processes(proc.pid), timeout=20, what="every process of the session to end")
    finally:
        for p in session_processes(proc.pid):
            p.kill()
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert [(r["variant"], r["seed"], r["status"]) for r in rows] == [("baseline", "0", "ok"), ("baseline", "1", "ok")]
    calls = []
    assert ablate.run(cfg, ["devices=[cpu]"] if devices else [], runner=counting(calls)) == 0  # in this process
    assert sorted(calls) == ["cbam-seed0", "cbam-seed1"]


# ------------------------------------------------------------------------------------------- experiment tracking


def test_mlflow_groups_the_runs_of_an_ablation(tmp_path, tiny_data, monkeypatch):
    """With Ultralytics' MLflow integration on, every run goes to one experiment named after the ablation, named
    <variant>-seed<k> and tagged with the ablation's out folder; summary.md and results.csv are artifacts of a `summary`
    run per out folder (reused when the same out is run again). MLflow's local file store."""
    mlflow = pytest.importorskip("mlflow")
    from ultralytics.utils import SETTINGS

    from attn_yolo.ablate.runs.tracking import OUT_TAG

    if not SETTINGS["mlflow"]:
        pytest.skip("Ultralytics' MLflow integration is off (yolo settings mlflow=False)")
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store in maintenance mode
    for k in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN", "MLFLOW_RUN_CONTEXT"):
        monkeypatch.delenv(k, raising=False)
    cfg = write_config(tmp_path, tiny_data, seeds=[0])
    raw = yaml.safe_load(cfg.read_text())
    raw["train"]["imgsz"] = 32
    cfg.write_text(yaml.safe_dump(raw))
    outs = [tmp_path / "out", tmp_path / "out2"]
    assert ablate.run(cfg) == 0
    assert ablate.run(cfg, [f"out={outs[1]}"]) == 0  # the same config into another folder
    assert ablate.run(cfg) == 0  # the first again: its runs are done, its summary run is logged again

    client = mlflow.MlflowClient(store.as_uri())
    experiments = {e.name: e for e in client.search_experiments()}
    assert "ablation" in experiments  # the config file's name
    runs = client.search_runs([experiments["ablation"].experiment_id])
    by_out = {}
    for r in runs:
        by_out.setdefault(r.data.tags.get(OUT_TAG), {})[r.info.run_name] = r
    assert sorted(by_out) == [str(o) for o in outs] and len(runs) == 6
    for out in outs:
        by_name = by_out[str(out)]
        assert sorted(by_name) == ["baseline-seed0", "cbam-seed0", "summary"]
        for name in ("baseline-seed0", "cbam-seed0"):
            assert by_name[name].info.status == "FINISHED"
            assert "metrics/mAP50-95B" in by_name[name].data.metrics
        artifacts = {a.path for a in client.list_artifacts(by_name["summary"].info.run_id)}
        assert {"summary.md", "results.csv"} <= artifacts
        dl = tmp_path / "dl" / out.name
        got = Path(client.download_artifacts(by_name["summary"].info.run_id, "results.csv", str(dl)))
        assert got.read_text() == (out / "results.csv").read_text()
    other = [r.info.run_name for e in experiments.values() if e.name != "ablation"
             for r in client.search_runs([e.experiment_id])]
    assert other == []  # nothing logged elsewhere (e.g. under Ultralytics' default, the project folder)


# -------------------------------------------------------------------------------------------- data, pretrained


def test_read_only_dataset_is_copied(tmp_path, tiny_data):
    import shutil
    from types import SimpleNamespace

    src = tmp_path / "ro"
    shutil.copytree(tiny_data.parent, src)
    meta = yaml.safe_load((src / "data.yaml").read_text())
    (src / "data.yaml").write_text(yaml.safe_dump({**meta, "path": str(src)}))
    labels = src / "labels"
    ab = SimpleNamespace(data=str(src / "data.yaml"), copy_data="auto", out=tmp_path / "out")
    assert prepare_data(ab) == ab.data  # writable: used in place
    labels.chmod(0o555)
    try:
        copied = Path(prepare_data(ab))
        assert copied == tmp_path / "out" / "data" / "ro" / "data.yaml"
        d = yaml.safe_load(copied.read_text())
        assert d["path"] == str(copied.parent) and d["train"] == "images/train" and d["names"] == meta["names"]
        assert len(list((copied.parent / "labels" / "train").glob("*.txt"))) == 8
        assert prepare_data(SimpleNamespace(**{**vars(ab), "copy_data": False})) == ab.data
    finally:
        labels.chmod(0o755)


def test_pretrained_must_fit_every_variant(tmp_path, tiny_data):
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.insertion import save_checkpoint

    ckpt = save_checkpoint(DetectionModel("yolo11n.yaml", nc=5, verbose=False), tmp_path / "base.pt")
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    raw["train"]["pretrained"] = "base.pt"  # relative to the config's folder
    raw["variants"].append({"name": "v8", "model": "yolov8n.yaml"})
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate(raw, tmp_path)
    assert len(e.value.problems) == 1
    assert e.value.problems[0].startswith("variants[2] (v8): is not the train.pretrained")
    raw["variants"].pop()
    ab = ablate.validate(raw, tmp_path)
    assert ab.train["pretrained"] == str(ckpt.resolve())


def test_script_wrapper(monkeypatch, capsys):
    """scripts/ablate.py is `attn-yolo ablate`: help, and exit code 2 for bad input."""
    import runpy

    for argv, code in ((["help"], 0), (["epoch=1"], 2)):
        monkeypatch.setattr(sys, "argv", ["scripts/ablate.py", *argv])
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(REPO / "scripts" / "ablate.py"), run_name="__main__")
        assert e.value.code == code
    out, err = capsys.readouterr()
    assert "attn-yolo ablate configs/ablation/coco128-quick.yaml" in out
    assert "epoch: unknown key (did you mean 'epochs'?)" in err


# ------------------------------------------------------------------------------------------- real configs (slow)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["coco128-quick", "synthetic-quick"])
def test_repo_configs_run_with_tiny_overrides(tmp_path, name):
    if name == "coco128-quick" and not (REPO.parent / "shared/data/coco128/data.yaml").exists():
        pytest.skip("COCO128 not found beside the repository")
    args = [str(REPO / "configs/ablation" / f"{name}.yaml"), f"out={tmp_path / 'out'}", "epochs=1", "seeds=[0]",
            "imgsz=64", "fraction=0.1", "device=cpu"]
    assert cli_main(["ablate", *args]) == 0
    rows = read_csv(tmp_path / "out" / "results.csv")
    assert len(rows) == len(yaml.safe_load((REPO / "configs/ablation" / f"{name}.yaml").read_text())["variants"])
    assert all(r["status"] == "ok" for r in rows)
    for r in rows:  # each run's per-image record gives back its mAP; results.csv has its size APs
        rec = perimage.load_record(Path(r["run_dir"]) / perimage.PERIMAGE_NAME)
        assert fmt(perimage.recompute(rec)["map50_95"], 6) == fmt(float(r["map50_95"]), 6)
        assert all(r[k] != "" for k in ("ap_small", "ap_medium", "ap_large"))
    if name == "coco128-quick":
        assert (tmp_path / "out" / "data" / "coco128" / "data.yaml").exists()  # the read-only copy was not written


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_discarded_interrupt_does_not_deafen_the_next_signal():
    """A KeyboardInterrupt raised by the handler inside a ``__del__`` (or weakref) callback is discarded by Python
    ("Exception ignored in ..."); the next SIGTERM must still stop the ablation. During a scheduler's cleanup, signals
    are only recorded."""
    import signal as sig_
    import time as time_

    from attn_yolo.ablate.runs.scheduling import cleaning, stop_on_signals

    class Discards:
        def __del__(self):
            os.kill(os.getpid(), sig_.SIGTERM)
            time_.sleep(0.05)  # the handler runs here, inside __del__: its exception is discarded

    fired = []
    with stop_on_signals(fired):
        Discards()
        assert fired == [sig_.SIGTERM]  # handled, and swallowed: still running
        with cleaning():
            os.kill(os.getpid(), sig_.SIGINT)
            time_.sleep(0.05)  # recorded, not raised
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), sig_.SIGTERM)
            time_.sleep(1)
    assert fired == [sig_.SIGTERM, sig_.SIGINT, sig_.SIGTERM]


def test_each_setting_is_held_once(tmp_path, tiny_data):
    """imgsz lives in the train arguments alone (the Ablation and each RunSpec read it from there), sdpa beside them,
    not in them: a changed imgsz reaches every view, and no dataclass holds a copy."""
    import dataclasses

    from attn_yolo.ablate.config.ablation import load_config
    from attn_yolo.ablate.config.validate import validate
    from attn_yolo.ablate.runs.runner import plan

    cfg = write_config(tmp_path, tiny_data, train={"epochs": 1, "imgsz": 96, "batch": 4, "device": "cpu"})
    ab = validate(*load_config(cfg)[:2])
    specs = plan(ab, ab.data)
    assert ab.imgsz == 96 and {s.imgsz for s in specs} == {96} and not ab.sdpa and not any(s.sdpa for s in specs)
    ab.train["imgsz"] = 160  # one place to change
    assert ab.imgsz == 160
    for cls in (ablate.Ablation, ablate.RunSpec):
        assert not {"imgsz"} & {f.name for f in dataclasses.fields(cls)}
