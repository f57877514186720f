"""Ray backend of the ablation runner: runs as Ray tasks copied back into the same run folders, records and results.csv
as the local backend, equal metrics on CPU, a dead worker's run recorded failed and redone, a local instance started and
stopped by the run itself."""

import csv
import json
import os
import signal
import sys
from functools import partial
from pathlib import Path

import pytest
import yaml
from conftest import write_config as write_ablation_config

from attn_yolo import ablate

ray = pytest.importorskip("ray")

FIELDS_EQUAL = ("variant", "seed", "status", "params", "gflops", "precision", "recall", "map50", "map50_95",
                "best_epoch", "epochs", "device", "error", "fingerprint")  # results.csv columns equal local vs Ray


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray instance started here (Ray's start costs seconds; share it among tests that may): the ablation
    uses it and leaves it running."""
    if ray.is_initialized():
        ray.shutdown()
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield
    ray.shutdown()


def write_config(folder: Path, data: Path, **over) -> Path:
    """The tiny two-variant ablation of ``conftest.write_config`` on the Ray backend (32 px, no device pinned)."""
    train = {"epochs": 1, "imgsz": 32, "batch": 4, "workers": 0, "plots": False}
    return write_ablation_config(folder, data, **{"train": train, "latency": {"repeats": 1, "warmup": 0},
                                                  "backend": "ray", **over})


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fake_runner(spec, device, kill_once: str | None = None):
    """No training; with ``kill_once`` (a flag file), kills its own worker the first time it runs cbam seed 0."""
    if kill_once and spec.variant == "cbam" and spec.seed == 0 and not Path(kill_once).exists():
        Path(kill_once).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"variant": spec.variant, "seed": spec.seed, "status": "ok", "params": spec.params, "gflops": spec.gflops,
            "precision": 0.5, "recall": 0.5, "map50": 0.5, "map50_95": 0.1 * (spec.seed + 1), "best_epoch": 1,
            "epochs": 1, "train_time_s": 0.1, "latency_ms": 1.0, "device": device, "run_dir": spec.run_dir,
            "model": spec.model, "error": "", "fingerprint": spec.fingerprint}


def test_ray_matches_local(tmp_path, tiny_data, capsys):
    """2 variants x 1 seed of real (tiny) training. Without ray_address (and no Ray session) the run starts a local
    Ray instance and shuts it down. Ray writes the same run folders and results.csv rows as the local backend, with
    the same metrics and per-epoch losses (CPU training with a fixed seed is deterministic), from run folders copied
    back from the workers' temporary folders."""
    if ray.is_initialized():
        ray.shutdown()
    cfg = write_config(tmp_path, tiny_data, seeds=[0])  # one seed: the equality is per run, a second adds nothing
    assert ablate.run(cfg, [f"out={tmp_path / 'ray'}"]) == 0
    assert not ray.is_initialized()
    assert "backend ray (a local Ray instance), per run num_cpus=1, num_gpus=0" in capsys.readouterr().out
    assert ablate.run(cfg, [f"out={tmp_path / 'local'}", "backend=local", "device=cpu"]) == 0
    local, remote = read_csv(tmp_path / "local" / "results.csv"), read_csv(tmp_path / "ray" / "results.csv")
    assert len(local) == len(remote) == 2
    for a, b in zip(local, remote):
        assert {k: a[k] for k in FIELDS_EQUAL} == {k: b[k] for k in FIELDS_EQUAL}
        assert a["status"] == "ok" and float(b["train_time_s"]) > 0 and "latency_ms" not in b  # timed after the runs
        da, db = Path(a["run_dir"]), Path(b["run_dir"])
        assert (da.relative_to(tmp_path / "local"), Path(a["model"]).name) == \
            (db.relative_to(tmp_path / "ray"), Path(b["model"]).name)
        assert json.loads((db / "result.json").read_text())["run_dir"] == str(db)  # paths rebased to the driver's
        files = {str(f.relative_to(da)) for f in da.rglob("*")}
        assert files == {str(f.relative_to(db)) for f in db.rglob("*")}
        assert {"weights/best.pt", "weights/last.pt", "args.yaml", "results.csv", "result.json"} <= files
        worker_dir = Path(yaml.safe_load((db / "args.yaml").read_text())["save_dir"])  # where Ultralytics trained
        assert worker_dir.name == db.name and worker_dir.parent.name.startswith("attn-yolo-ray-")  # copied back
        ea, eb = read_csv(da / "results.csv"), read_csv(db / "results.csv")  # Ultralytics' per-epoch table
        losses = [k for k in ea[0] if "loss" in k or "metrics" in k]
        assert len(losses) >= 6 and [{k: e[k] for k in losses} for e in ea] == [{k: e[k] for k in losses} for e in eb]


def test_dead_ray_worker_gives_a_failed_record_redone_on_rerun(tmp_path, tiny_data, ray_session, capsys):
    cfg = write_config(tmp_path, tiny_data, out=str(tmp_path / "out"))
    flag = tmp_path / "killed"
    runner = partial(fake_runner, kill_once=str(flag))
    assert ablate.run(cfg, runner=runner) == 1
    assert flag.exists()
    rows = {(r["variant"], r["seed"]): r for r in read_csv(tmp_path / "out" / "results.csv")}
    assert len(rows) == 4 and rows[("cbam", "0")]["status"] == "failed"
    assert rows[("cbam", "0")]["error"].startswith("Ray task failed: WorkerCrashedError")
    assert all(r["status"] == "ok" for k, r in rows.items() if k != ("cbam", "0"))
    assert "FAILED: Ray task failed" in capsys.readouterr().out
    assert ablate.run(cfg, runner=runner) == 0  # only the failed run is redone
    out = capsys.readouterr().out
    assert "3/4 run(s) already finished" in out
    assert "attn-yolo ablate: [runs] 1 run(s) to go" in out  # the runs' phase: only the failed one
    again = {(r["variant"], r["seed"]): r for r in read_csv(tmp_path / "out" / "results.csv")}
    assert again[("cbam", "0")]["status"] == "ok"
    assert {k: v for k, v in again.items() if k != ("cbam", "0")} == \
        {k: v for k, v in rows.items() if k != ("cbam", "0")}
