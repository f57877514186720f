"""Attention health: flags on blocks with known states, knock-out of an identity-initialised block, gates.csv against
an independent float64 recomputation, the loggers, the NaN/inf guard, the CLI and ablation switches."""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

import attn_yolo_console as console
from attn_yolo import cli
from attn_yolo.health import CSV_NAME, PNG_NAME, attach, flags, health_section, measure, read_csv
from attn_yolo.health.callback import load_images
from attn_yolo.nn import CBAM

MODELS = Path(__file__).resolve().parents[1] / "models"


def _model(name: str):
    """``models/yolo11-<block>.yaml`` at scale n with 4 classes, seeded weights (``name``: ``yolo11n-<block>.yaml``)."""
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    return DetectionModel(str(MODELS / name), nc=4, verbose=False)


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    """bus.jpg and zidane.jpg letterboxed to 128 px, (2, 3, 128, 128)."""
    import ultralytics

    assets = Path(ultralytics.__file__).parent / "assets"
    return load_images([assets / "bus.jpg", assets / "zidane.jpg"], 128, "cpu")


def calibrated(model, x):
    """BatchNorm running statistics from ``x`` (an untrained yolo11n has features of ~1e-10 otherwise)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def logits_of(model, gate: nn.Module, x) -> torch.Tensor:
    """The input the gate (its sigmoid) receives on ``x``."""
    got = []
    h = gate.register_forward_hook(lambda m, a, o: got.append(a[0].detach()))
    with torch.no_grad():
        model(x)
    h.remove()
    return got[0]


def realistic(model, x, k_channel: float = 1.5, k_spatial: float = 2.5):
    """Give every CBAM the gains of a trained one: each gate's logits on ``x`` rescaled to mean 0 and standard
    deviation ``k`` (channel gate: logits over channels; spatial gate: over locations), so gates spread over (0, 1)
    following the features, as trained CBAM maps do, without saturating."""
    for b in [m for m in model.modules() if isinstance(m, CBAM)]:
        with torch.no_grad():
            b.channel.mlp[2].weight.normal_(0, 0.5)
            lg = logits_of(model, b.channel.gate, x)  # = mlp(avg) + mlp(max): affine in the last conv's parameters
            mu, sd = lg.mean(), lg.std()
            conv = b.channel.mlp[2]
            conv.weight *= k_channel / sd
            conv.bias.copy_((conv.bias - mu / 2) * k_channel / sd)  # the bias enters twice (avg and max branch)
            lg = logits_of(model, b.spatial.gate, x)
            mu, sd = lg.mean(), lg.std()
            b.spatial.conv.weight *= k_spatial / sd
            b.spatial.conv.bias.copy_((b.spatial.conv.bias - mu) * k_spatial / sd)
    return model


@pytest.fixture(scope="module")
def cbam_model(photos):
    """yolo11n-cbam (4 classes), BatchNorm calibrated on the photos, every CBAM with realistic gains."""
    return realistic(calibrated(_model("yolo11n-cbam.yaml"), photos), photos)


def _flags(model, x) -> dict[str, list[str]]:
    return {name: flags(row) for name, row in measure(model, x).items()}


def test_realistic_cbam_raises_no_flag(cbam_model, photos):
    h = measure(cbam_model, photos)
    assert list(h) == ["L05_CBAM", "L08_CBAM", "L13_CBAM"]
    for name, row in h.items():
        assert flags(row) == [], (name, row)
        assert 0.05 < row["gate_mean"] < 0.95 and row["saturated"] < 0.2 and row["entropy"] < 0.99
        assert row["knockout"] > 1e-3 and math.isnan(row["gamma"]) and row["nonfinite"] == 0


def test_constant_gate_is_uniform_and_a_gate_of_one_switched_off(cbam_model, photos):
    m = copy.deepcopy(cbam_model)
    half, one = m.model[5], m.model[8]
    with torch.no_grad():
        for b, bias in ((half, 0.0), (one, 40.0)):  # σ(0) = 0.5 everywhere; σ(40) = 1.0 exactly in float32
            for conv in (b.channel.mlp[2], b.spatial.conv):
                conv.weight.zero_()
                conv.bias.fill_(bias)
    h = measure(m, photos)
    assert flags(h["L05_CBAM"]) == ["uniform"]  # it halves... quarters x: not switched off, but it emphasises nothing
    assert h["L05_CBAM"]["entropy"] == pytest.approx(1.0, abs=1e-9) and h["L05_CBAM"]["gate_std"] < 1e-7
    assert h["L05_CBAM"]["knockout"] > 1e-3
    assert h["L05_CBAM"]["mean_ablation"] == 0.0  # a gate that is its own mean: holding it there changes nothing
    assert flags(h["L08_CBAM"]) == ["uniform", "saturated", "switched off"]
    assert h["L08_CBAM"]["knockout"] == 0.0  # x ⊙ 1 ⊙ 1 = x: removing it changes nothing, to the bit
    assert flags(h["L13_CBAM"]) == []


def test_weights_set_to_saturate_are_flagged_saturated(cbam_model, photos):
    m = copy.deepcopy(cbam_model)
    with torch.no_grad():
        for conv in (m.model[8].channel.mlp[2], m.model[8].spatial.conv):
            conv.weight *= 1000
            conv.bias *= 1000
    h = measure(m, photos)["L08_CBAM"]
    assert "saturated" in flags(h) and "uniform" not in flags(h) and h["saturated"] >= 0.9


def test_switched_off_by_gamma_and_non_finite_rows():
    assert flags({"knockout": 0.5, "gamma": 1e-4}) == ["switched off"]
    assert flags({"knockout": 5e-5, "gamma": math.nan}) == ["switched off"]
    assert flags({"entropy": 0.2, "peak_share": 0.7, "knockout": 0.1}) == ["one-hot"]
    assert flags({"knockout": 0.1, "nonfinite": 3}) == ["non-finite"]
    assert flags({"knockout": math.inf}) == ["non-finite"]


def test_flat_maps_are_uniform_only_where_the_block_acts_as_a_fixed_rescale():
    """Entropy cannot tell gates that read the input from a fixed rescale; what holding them at their mean does to
    the detections can."""
    flat = {"entropy": 0.995, "knockout": 0.1}
    assert flags({**flat, "mean_ablation": 0.29}) == []  # the key-reading CBAM's P3 block (BENCHMARKS 12.1)
    assert flags({**flat, "mean_ablation": 0.0047}) == ["uniform"]  # the most of any warm-started block there
    assert flags({**flat, "mean_ablation": 0.01}) == []  # the threshold itself: not below it
    assert flags({**flat, "mean_ablation": math.nan}) == ["uniform"]  # not measured: entropy alone decides
    assert flags({"entropy": 0.5, "knockout": 0.1, "mean_ablation": 0.0}) == []  # maps with structure


def test_mean_ablation_equals_an_independent_recomputation(cbam_model, photos):
    """Each block's ``mean_ablation``: its channel gate held at the mean over the images per channel, its spatial
    gate at the mean over the images and positions (hooks of the test's own), and the largest change of a class
    probability averaged over the anchors that detect (> 0.25) in either pass, from an explicit sigmoid."""
    m = copy.deepcopy(cbam_model)
    with torch.no_grad():
        m.model[-1].cv3[0][-1].bias.fill_(0.0)  # class logits near 0: anchors near the 0.25 line on both sides
        ref_logits = m(photos)[1]["scores"].double()
    got = measure(m, photos)
    for layer in (5, 8, 13):
        b = m.model[layer]
        means = {}
        rec = [g.register_forward_hook(lambda mod, a, o, k=k: means.__setitem__(k, o.detach().double()))
               for k, g in (("c", b.channel.gate), ("s", b.spatial.gate))]
        with torch.no_grad():
            m(photos)
        for h in rec:
            h.remove()
        held = {"c": means["c"].mean(0, keepdim=True), "s": means["s"].mean((0, 2, 3), keepdim=True)}
        rep = [g.register_forward_hook(lambda mod, a, o, k=k: held[k].to(o.dtype).expand_as(o))
               for k, g in (("c", b.channel.gate), ("s", b.spatial.gate))]
        with torch.no_grad():
            logits = m(photos)[1]["scores"].double()
        for h in rep:
            h.remove()
        p, q = 1 / (1 + torch.exp(-ref_logits)), 1 / (1 + torch.exp(-logits))  # (B, nc, A)
        detects = (p.max(1).values > 0.25) | (q.max(1).values > 0.25)
        assert 0 < int(detects.sum()) < detects.numel()
        want = float((q - p).abs().max(1).values[detects].mean())
        assert want > 1e-4  # the realistic gates depend on the image
        assert got[f"L{layer:02d}_CBAM"]["mean_ablation"] == pytest.approx(want, rel=1e-9)


SHIPPED_N = sorted(p.name.replace("yolo11-", "yolo11n-") for p in MODELS.glob("yolo11-*.yaml"))


@pytest.mark.parametrize("yaml_name", SHIPPED_N)
def test_every_block_is_measured(yaml_name, photos):
    """Every block family yields finite health (gates in [0, 1], entropies in [0, 1]) on calibrated features."""
    x = photos[:, :, ::2, ::2].contiguous()  # 64 px
    h = measure(calibrated(_model(yaml_name), x), x)
    assert h
    for name, row in h.items():
        assert row["nonfinite"] == 0 and math.isfinite(row["knockout"]), name
        if row["block"] == "LSKA":  # its attention map A is not squashed: no [0, 1] gate, no saturation
            assert math.isfinite(row["gate_mean"]) and math.isnan(row["saturated"]), name
        elif row["block"] not in ("MHSA", "BiLevelRoutingAttention"):  # no gates: attention over tokens
            assert 0 <= row["gate_mean"] <= 1 and 0 <= row["saturated"] <= 1, name
        assert math.isnan(row["entropy"]) or 0 <= row["entropy"] <= 1 + 1e-9, name


# ----------------------------------------------------------------------------------------- a short training run --
MIXED = "yolo11-cbam.yaml"  # rows 5, 8, 13 become CBAM(init_values=0), SE, MHSA


def _mlflow_run() -> tuple[str, str] | None:
    """``(tracking URI, run id)`` of the active MLflow run (the one Ultralytics logs to), None without one."""
    try:
        import mlflow
    except ImportError:
        return None
    run = mlflow.active_run()
    return (mlflow.get_tracking_uri(), run.info.run_id) if run else None


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data):
    """yolo11n with an identity-initialised CBAM at P3, SE at P4 and MHSA at P5, trained 2 epochs at 64 px with the
    health callback; the EMA model as measured each epoch, what a logger saw in trainer.metrics, MLflow's store."""
    from ultralytics import YOLO

    tmp = tmp_path_factory.mktemp("health")
    text = (MODELS / MIXED).read_text()
    for i, row in ((5, "CBAM, [16, 7, 0.0]"), (8, "SE, [16]"), (13, "MHSA, [4]")):
        old = f"  - [-1, 1, CBAM, [16, 7]] # {i} inserted"
        assert old in text
        text = text.replace(old, f"  - [-1, 1, {row}] # {i} inserted")
    model_yaml = tmp / "yolo11n-mixed.yaml"
    model_yaml.write_text(text)
    env = {"MLFLOW_TRACKING_URI": (tmp / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true",
           "MLFLOW_EXPERIMENT_NAME": "health"}  # fmt: skip
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    snaps, seen = {}, {}
    try:
        yolo = YOLO(str(model_yaml))
        yolo.add_callback("on_pretrain_routine_start", attach)
        # what a logger appended to on_fit_epoch_end sees (as Ultralytics' own integrations are)
        yolo.add_callback("on_fit_epoch_end", lambda t: seen.__setitem__(t.epoch + 1, dict(t.metrics)))
        yolo.add_callback("on_fit_epoch_end", lambda t: snaps.__setitem__(t.epoch + 1, copy.deepcopy(t.ema.ema)))
        yolo.add_callback("on_train_start", lambda t: snaps.__setitem__(0, copy.deepcopy(t.ema.ema)))
        yolo.add_callback("on_fit_epoch_end", lambda t: seen.__setitem__("mlflow", _mlflow_run()))
        yolo.train(data=str(tiny_data), epochs=2, imgsz=64, batch=4, nbs=4, warmup_epochs=0, optimizer="AdamW",
                   lr0=0.01, workers=0, plots=False, device="cpu", project=str(tmp), name="run", exist_ok=True,
                   val=True, seed=0)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    monitor = yolo.trainer.attn_health
    return {"dir": tmp / "run", "snaps": snaps, "seen": seen, "monitor": monitor, "store": tmp / "mlruns",
            "mlflow_active": getattr(yolo.trainer, "_mlflow_active", False),
            "created_by": os.environ.get("PYTEST_CURRENT_TEST", "")}


def test_mlflow_and_every_logger_see_the_values_results_csv_keeps_its_columns(trained, monkeypatch):
    """First of the tests on `trained`: Ultralytics logs to MLflow under pytest only for a test named test_mlflow*,
    and the fixture trains while the first test that asks for it runs."""
    from ultralytics.utils import SETTINGS

    rows = read_csv(trained["dir"] / CSV_NAME)
    for epoch in (1, 2):
        seen = trained["seen"][epoch]
        for r in (r for r in rows if r["epoch"] == epoch):
            assert seen[f"health/{r['name']}/knockout"] == pytest.approx(r["knockout"], abs=1e-12)
            assert seen[f"health/{r['name']}/entropy"] == pytest.approx(r["entropy"], abs=1e-12)
    assert "health/L08_SE/gamma" not in trained["seen"][1]  # no LayerScale: nothing logged, not NaN
    header = (trained["dir"] / "results.csv").read_text().splitlines()[0]
    assert "health" not in header
    if SETTINGS["mlflow"] and "test_mlflow" in trained["created_by"]:
        assert trained["mlflow_active"] and trained["seen"]["mlflow"]
        mlflow = pytest.importorskip("mlflow")
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        uri, run_id = trained["seen"]["mlflow"]  # the store an earlier test's set_tracking_uri may have left in place
        hist = mlflow.MlflowClient(uri).get_metric_history(run_id, "health/L05_CBAM/knockout")
        assert [h.step for h in hist] == [0, 1]  # Ultralytics' MLflow step is the 0-based epoch
        last = next(r for r in rows if r["epoch"] == 2 and r["name"] == "L05_CBAM")
        assert hist[-1].value == pytest.approx(last["knockout"], rel=1e-6)


def test_identity_block_knockout_is_zero_at_step_0_and_not_after_training(trained):
    rows = read_csv(trained["dir"] / CSV_NAME)
    cbam = {r["epoch"]: r for r in rows if r["name"] == "L05_CBAM"}
    assert sorted(cbam) == [0, 1, 2]
    assert cbam[0]["knockout"] == 0.0 and cbam[0]["gamma"] == 0.0 and "switched off" in cbam[0]["flags"]
    assert cbam[2]["knockout"] > 0 and cbam[2]["gamma"] > 0
    assert {r["name"] for r in rows} == {"L05_CBAM", "L08_SE", "L13_MHSA"}
    assert (trained["dir"] / PNG_NAME).stat().st_size > 10_000


def _raw(out) -> torch.Tensor:
    preds = out[1]
    return torch.cat([preds["boxes"].flatten(1), preds["scores"].flatten(1)], 1)


def _entropy(p: torch.Tensor) -> torch.Tensor:
    """Normalised entropy of each row of ``p`` (rows of non-negative mass), float64."""
    p = p / p.sum(-1, keepdim=True)
    return -(p * torch.log(p.clamp_min(1e-300))).sum(-1) / math.log(p.shape[-1])


def recompute(model, x) -> dict[str, dict]:
    """gates.csv's values from first principles in float64: own hooks on the gates, the maps and entropies by their
    formulas, MHSA's attention by an explicit softmax, knock-out by replacing each block's forward with the identity."""
    m = copy.deepcopy(model).double().eval()
    x = x.double()
    cbam, se, mhsa = m.model[5], m.model[8], m.model[13]
    rec = {}
    hooks = [cbam.register_forward_pre_hook(lambda mod, a: rec.__setitem__("x5", a[0])),
             cbam.channel.gate.register_forward_hook(lambda mod, a, o: rec.__setitem__("c5", o)),
             cbam.spatial.gate.register_forward_hook(lambda mod, a, o: rec.__setitem__("s5", o)),
             se.register_forward_pre_hook(lambda mod, a: rec.__setitem__("x8", a[0])),
             se.gate.register_forward_hook(lambda mod, a, o: rec.__setitem__("c8", o)),
             mhsa.register_forward_pre_hook(lambda mod, a: rec.__setitem__("x13", a[0]))]
    with torch.no_grad():
        ref = _raw(m(x))
    for h in hooks:
        h.remove()

    def gain(xin, s):  # Σ_c s_c |x_c| / Σ_c |x_c| per location, (B, H·W)
        a = xin.abs()
        return ((a * s).sum(1) / (a.sum(1) + 1e-12)).flatten(1)

    def gate_stats(*gs):
        v = torch.cat([g.flatten() for g in gs])
        return {"gate_mean": v.mean().item(), "gate_std": v.std(unbiased=False).item(),
                "saturated": ((v < 0.01) | (v > 0.99)).double().mean().item()}  # fmt: skip

    def maps_stats(*maps):  # per map kind: entropy and peak share averaged over images; min / max over kinds
        ent = [_entropy(mp).mean().item() for mp in maps]
        peak = [(mp / mp.sum(-1, keepdim=True)).amax(-1).mean().item() for mp in maps]
        return {"entropy": min(ent), "peak_share": max(peak)}

    out = {
        "L05_CBAM": {**gate_stats(rec["c5"], rec["s5"]),
                     **maps_stats(gain(rec["x5"], rec["c5"]), rec["s5"].flatten(1)),
                     "gamma": cbam.scale.gamma.abs().mean().item()},
        "L08_SE": {**gate_stats(rec["c8"]), **maps_stats(gain(rec["x8"], rec["c8"])), "gamma": math.nan},
    }
    xm = rec["x13"]
    b, c, hh, ww = xm.shape
    t = (mhsa.pos(xm) + xm).flatten(2).transpose(1, 2)
    qkv = mhsa.norm1(t) @ mhsa.qkv.weight.T + mhsa.qkv.bias
    q, k, _ = (z.reshape(b, hh * ww, mhsa.heads, -1).transpose(1, 2) for z in qkv.split(c, -1))
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    out["L13_MHSA"] = {"entropy": _entropy(w).mean().item(), "peak_share": w.amax(-1).mean().item(),
                       "gamma": math.nan}  # fmt: skip
    for name, block in (("L05_CBAM", cbam), ("L08_SE", se), ("L13_MHSA", mhsa)):
        block.forward = lambda z: z  # the block replaced by the identity
        with torch.no_grad():
            out[name]["knockout"] = ((_raw(m(x)) - ref).norm() / ref.norm()).item()
        del block.forward
    return out


def test_gates_csv_agrees_with_an_independent_float64_recomputation(trained):
    rows = read_csv(trained["dir"] / CSV_NAME)
    x = trained["monitor"].images_t
    assert x.shape == (4, 3, 64, 64)  # every val image of tiny_data (4 < 16), the same each epoch
    compared = 0
    for epoch in (0, 1, 2):
        want = recompute(trained["snaps"][epoch], x)
        for r in (r for r in rows if r["epoch"] == epoch):
            for key, v in want[r["name"]].items():
                got = r[key]
                if math.isnan(v):
                    assert math.isnan(got), (epoch, r["name"], key)
                else:
                    assert got == pytest.approx(v, abs=1e-6, rel=0), (epoch, r["name"], key, got, v)
                    compared += 1
    assert compared == 3 * (7 + 6 + 3)


def test_nan_in_a_block_stops_attn_yolo_train_naming_it(tmp_path, tiny_data, capsys):
    from ultralytics import YOLO

    from attn_yolo.checkpoint import save_checkpoint

    yolo = YOLO(str(MODELS / "yolo11n-cbam.yaml"))
    with torch.no_grad():
        yolo.model.model[8].spatial.conv.bias.fill_(float("nan"))  # layer 8's spatial-gate logits become NaN
    pt = save_checkpoint(yolo.model, tmp_path / "nan.pt")
    code = console.main(["train", f"model={pt}", f"data={tiny_data}", "epochs=1", "imgsz=32", "batch=4", "workers=0",
                     "plots=False", "device=cpu", f"project={tmp_path}", "name=nan", "exist_ok=True", "val=False"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == ("error: non-finite attention during training: epoch 1, batch 1: layer 8 CBAM (L08_CBAM): "
                       "NaN/inf in the logits of gate 'spatial.gate' (its input)")
    assert not (tmp_path / "nan" / "weights" / "best.pt").exists()


def test_cli_health_switch(capsys):
    assert cli.take_flag(["train", "model=a.yaml"], "health", None, "") == (["train", "model=a.yaml"], None)
    assert cli.take_flag(["train", "health=False"], "health", None, "") == (["train"], False)
    with pytest.raises(cli.UsageError, match=r"health: 'maybe'; expected True or False"):
        cli.take_flag(["train", "health=maybe"], "health", None, "")
    assert console.main(["train", "health=maybe"]) == 2
    assert console.main(["val", "model=a.yaml", "health=True"]) == 2
    assert "health= applies to training only" in capsys.readouterr().err


def test_ablation_config_health_key(tmp_path, tiny_data):
    from conftest import write_config

    from attn_yolo import ablate
    from attn_yolo.ablate.runs.runner import plan

    raw = yaml.safe_load(write_config(tmp_path, tiny_data).read_text())
    ab = ablate.validate(raw, tmp_path, "t")
    assert ab.health and ab.config["health"] and all(s.health for s in plan(ab, ab.data))
    ab = ablate.validate({**raw, "health": False}, tmp_path, "t")
    assert not ab.health and not any(s.health for s in plan(ab, ab.data))
    with pytest.raises(ablate.ConfigError) as e:
        ablate.validate({**raw, "health": 3}, tmp_path, "t")
    assert e.value.problems == ["health: 3; expected true or false (false: no attention health per run)"]


def test_health_section_puts_verdicts_beside_block_health(tmp_path):
    def run(name, flag, ko, held):
        d = tmp_path / name
        d.mkdir()
        (d / CSV_NAME).write_text(
            "epoch,name,layer,block,gate_mean,gate_std,saturated,entropy,peak_share,gamma,knockout,mean_ablation,"
            f"nonfinite,flags\n1,L05_CBAM,5,CBAM,0.5,0.1,0,0.999,0.01,,{ko},{held},0,{flag}\n")
        return str(d)

    rows = [{"variant": "baseline", "seed": 0, "status": "ok", "run_dir": str(tmp_path / "none"), "error": ""},
            {"variant": "cbam", "seed": 0, "status": "ok", "run_dir": run("a", "uniform;switched off", 1e-6, 0.002)},
            {"variant": "cbam", "seed": 1, "status": "ok", "run_dir": run("b", "uniform", 0.02, 0.004)},
            {"variant": "bad", "seed": 0, "status": "failed", "run_dir": str(tmp_path / "c"),
             "error": "NonFiniteAttentionError: non-finite attention during training: epoch 1, batch 3: layer 5"}]
    text = "\n".join(health_section(["baseline", "cbam", "bad"], rows,
                                    {"baseline": "baseline", "cbam": "no detectable difference", "bad": "n/a"}).lines())
    assert "| baseline | baseline | no attention blocks |" in text
    assert ("| cbam | no detectable difference | L05_CBAM | 0.500 | 0.0 % | 0.9990 | - | 0.01 | 0.0030 | "
            "uniform (2/2), switched off (1/2) |") in text
    assert "| bad | n/a | (training stopped) |  |  |  |  |  |  | non-finite (1 runs) |" in text
    assert health_section(["baseline"], rows[:1], {}) is None


@pytest.mark.slow  # two trainings: a smoke run of the benchmark script, opt-in
def test_cost_script_runs(tiny_data, capsys):
    import runpy
    import sys

    script = Path(__file__).resolve().parents[1] / "scripts" / "health_cost.py"
    argv, sys.argv = sys.argv, [str(script), "pairs=1", "epochs=1", "imgsz=32", "batch=4", f"data={tiny_data}"]
    try:
        with pytest.raises(SystemExit) as e:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "| 1 on, 1 off, 1 epochs each |" in out and "load average (1, 5, 15 min) before" in out


def test_an_arm_with_one_attending_block_is_not_counted_as_all_flat(tmp_path):
    """With several blocks, the attention line counts the seeds with a block flagged uniform and, apart, those with
    every block flagged (the key data's CBAM reads the key at P3 while its P4/P5 blocks stay flat)."""
    from attn_yolo.ablate.reports.controls import _uniform
    from attn_yolo.health.report import arm_health

    def run(name, flags_p3, flags_p4):
        d = tmp_path / name
        d.mkdir()
        head = ("epoch,name,layer,block,gate_mean,gate_std,saturated,entropy,peak_share,gamma,knockout,mean_ablation,"
                "nonfinite,flags\n")
        (d / CSV_NAME).write_text(head + f"1,L05_CBAM,5,CBAM,0.5,0.1,0,0.999,0.01,1,0.1,0.2,0,{flags_p3}\n"
                                  f"1,L08_CBAM,8,CBAM,0.5,0.1,0,0.999,0.01,1,0.1,0.001,0,{flags_p4}\n")
        return {"variant": "cbam", "seed": name, "status": "ok", "run_dir": str(d), "error": ""}

    h = arm_health([run("0", "uniform", "uniform"), run("1", "", "uniform"), run("2", "", "uniform")])
    assert (h["runs"], h["uniform"], h["all_uniform"]) == (3, 1.0, pytest.approx(1 / 3))
    assert _uniform(h) == "a block's gates flagged uniform in 3/3 seeds, every block's in 1/3"
    same = arm_health([run("3", "uniform", "uniform"), run("4", "", "")])  # a seed's blocks all flat or none
    assert _uniform(same) == "gates flagged uniform in 1/2 seeds"
