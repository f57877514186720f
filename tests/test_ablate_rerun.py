"""Finished runs are results: a changed setting stops before any work (exit 2, naming keys and runs); redo=True
replaces an old run folder only after its new run has finished, so a kill mid-run leaves the old record."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.runs.records import new_record
from attn_yolo.ablate.runs.rerun import default_out, ran_name
from attn_yolo.args import UsageError
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]

DRIVER = """
import os, sys, time
from pathlib import Path
from attn_yolo import ablate
from attn_yolo.ablate.runs.records import new_record

def runner(spec, device):
    Path(spec.run_dir, "started").write_text(str(os.getpid()))
    if spec.variant in os.environ.get("HANG", "").split(","):
        time.sleep(600)
    return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
            "map50_95": 0.3, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1, "latency_ms": 1.0}

if __name__ == "__main__":
    sys.exit(ablate.run(sys.argv[1], sys.argv[2:], runner=runner))
"""


def fake(spec, device):
    return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
            "map50_95": 0.2 + 0.01 * spec.seed, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1, "latency_ms": 1.0}


def records(out: Path) -> dict:
    return {p.parent.name: p.read_bytes() for p in sorted((out / "runs").glob("*/result.json"))}


def test_the_embedded_default_is_named_after_its_data_and_arms():
    """``ran_name``: the data (a YAML by its file name, a ``data.yaml`` by its folder's) and every arm but the
    baseline; never the embedded default's own name."""
    cbam = [{"name": "baseline", "model": "yolo11n.yaml"}, {"name": "cbam", "base": "yolo11n.yaml"}]
    assert ran_name({"data": "synthetic", "variants": cbam}) == "synthetic-cbam"
    assert ran_name({"data": "path/to/coco128/data.yaml", "variants": cbam}) == "coco128-cbam"
    assert ran_name({"data": "coco128.yaml", "variants": [*cbam, {"name": "se x", "baseline": False}]}) == \
        "coco128-cbam-se-x"
    assert ran_name({"data": "VOC.yaml", "variants": [{"name": "cbam"}, {"name": "b", "baseline": True}]}) == "VOC-cbam"
    assert len(ran_name({"data": "d.yaml", "variants": [{"name": "x" * 80}] * 2})) <= 48


@pytest.mark.parametrize("argv, folder, name", [
    ([], "runs/ablate/synthetic-key-cbam", "synthetic-key-cbam"),
    (["data={data}", "imgsz=64"], "runs/ablate/own-cbam-imgsz64", "own-cbam"),
    (["data={data}", "out=mine"], "mine", "own-cbam"),  # an override: its own folder, as given
])
def test_the_embedded_defaults_folder_and_title_name_what_ran(argv, folder, name, tmp_path, monkeypatch):
    """``attn-yolo ablate data=path/to/own/data.yaml imgsz=64`` writes to ``runs/ablate/own-cbam-imgsz64`` under the
    title "Ablation `own-cbam`" (was ``synthetic-quick-datadata-imgsz64``, "Ablation `synthetic-quick`")."""
    from attn_yolo.ablate.runs import runner
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "own", n_train=2, n_val=2, imgsz=64, seed=0)
    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(runner, "run_ablation", lambda ab, **k: ran.append(ab) or 0)
    assert runner.run(None, [a.format(data=data) for a in argv]) == 0
    assert ran[0].out == (tmp_path / folder).resolve() and ran[0].name == name


def test_default_out_names_the_settings_it_holds():
    raw = {"out": "runs/ablate/quick"}
    assert default_out(raw, ["epochs=1", "imgsz=96"], "quick")["out"] == "runs/ablate/quick-epochs1-imgsz96"
    assert default_out(raw, ["data=path/to/coco.yaml"], "quick")["out"] == "runs/ablate/quick-datacoco"
    assert default_out(raw, ["device=cpu", "seeds=[0,1]", "verbose=True"], "quick") == raw  # change no result
    assert default_out(raw, ["out=runs/x", "epochs=1"], "quick") == raw  # out= given: as given
    assert default_out({}, ["epochs=3"], "cfg")["out"] == "runs/ablate/cfg-epochs3"
    long = default_out(raw, [f"lr0=0.00{i}" for i in range(30)], "quick")["out"]
    assert len(long) < len("runs/ablate/quick-") + 50  # long suffixes end in a hash


def test_changed_setting_stops_before_any_work(tmp_path, tiny_data, capsys):
    cfg = write_config(tmp_path, tiny_data)
    out = tmp_path / "out"
    assert ablate.run(cfg, runner=fake) == 0
    before, config_before = records(out), (out / "config.yaml").read_text()
    assert len(before) == 4
    calls = []
    code = cli_main(["ablate", str(cfg), f"out={out}", "imgsz=96"])  # the real runner: must stop before any training
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "4 finished run(s)" in err and "train.imgsz: 64 -> 96" in err
    assert "baseline-seed0, baseline-seed1, cbam-seed0, cbam-seed1" in err
    assert "out=" in err and "redo=True" in err
    assert records(out) == before and (out / "config.yaml").read_text() == config_before  # every record intact
    cfg.write_text(cfg.read_text().replace("epochs: 1", "epochs: 2"))  # an edited config: the same stop
    with pytest.raises(UsageError, match=r"train.epochs: 1 -> 2"):
        ablate.run(cfg, runner=lambda s, d: calls.append(s) or fake(s, d))
    assert calls == [] and records(out) == before
    assert ablate.run(cfg, [f"out={tmp_path / 'new'}"], runner=fake) == 0  # out=: a new folder, the old one kept
    assert records(out) == before and len(records(tmp_path / "new")) == 4


def test_redo_replaces_a_run_only_after_it_finished(tmp_path, tiny_data):
    cfg = write_config(tmp_path, tiny_data)
    out = tmp_path / "out"
    assert ablate.run(cfg, runner=fake) == 0
    before = records(out)
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    args = [sys.executable, str(script), str(cfg), f"out={out}", "imgsz=96", "redo=True"]
    proc = subprocess.Popen(args, start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO), "HANG": "cbam"},
                            stdout=subprocess.DEVNULL)
    try:
        started = out / ".redo" / "cbam-seed0" / "started"
        t0 = time.time()
        while not started.exists():
            assert time.time() - t0 < 120 and proc.poll() is None, "the hanging run did not start"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # a kill mid-run: no handler, no cleanup
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    after = records(out)
    assert after["cbam-seed0"] == before["cbam-seed0"] and after["cbam-seed1"] == before["cbam-seed1"]  # old kept
    for run in ("baseline-seed0", "baseline-seed1"):  # finished before the kill: replaced by their new records
        new = json.loads(after[run])
        assert new["fingerprint"] != json.loads(before[run])["fingerprint"]
        assert new["run_dir"] == str(out / "runs" / run)
        assert (out / "runs" / run / "started").exists()
    assert ablate.run(cfg, [f"out={out}", "imgsz=96", "redo=True"], runner=fake) == 0  # the rest, then clean
    assert all(json.loads(r)["fingerprint"] != json.loads(before[k])["fingerprint"] for k, r in records(out).items())
    assert not any((out / ".redo").iterdir())
    assert ablate.run(cfg, [f"out={out}", "imgsz=96"], runner=lambda s, d: pytest.fail("nothing to redo")) == 0
