"""What a new user found in the ablation, each fixed: a Ctrl-C names the interrupted run's folder (it stays and is
redone), ``overwrite=True`` names each user file it replaces and keeps a copy, summary.md and config.yaml hold no
absolute path of this machine, MLflow's store is not created in the working directory unasked, and the
synthetic-shapes dataset is not announced as being prepared when it is cached."""

import os
from pathlib import Path

import yaml
from conftest import write_config

from attn_yolo import ablate, synthetic
from attn_yolo.ablate.runs import tracking
from attn_yolo.ablate.runs.outdir import USER_COPY
from attn_yolo.ablate.runs.records import new_record


def runner(spec, device):
    return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
            "map50_95": 0.3 + 0.001 * spec.seed, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1}


def test_ctrl_c_names_the_interrupted_runs_folder_which_is_redone(tmp_path, tiny_data, capsys):
    cfg = write_config(tmp_path, tiny_data)
    calls = []

    def interrupted(spec, device):
        if len(calls) == 1:
            (Path(spec.run_dir) / "half.txt").write_text("a run cut short")
            raise KeyboardInterrupt
        calls.append(spec)
        return runner(spec, device)

    assert ablate.run(cfg, runner=interrupted) == 130
    err = capsys.readouterr().err
    assert "The interrupted run folder runs/baseline-seed1 stays (unfinished, no record) and is redone" in err
    assert "nothing half-written is kept" not in err
    assert (tmp_path / "out" / "runs" / "baseline-seed1" / "half.txt").exists()  # as said: the folder stays
    redone = []
    assert ablate.run(cfg, runner=lambda s, d: redone.append(s.run_dir) or runner(s, d)) == 0
    assert str(tmp_path / "out" / "runs" / "baseline-seed1") in redone  # ... and is redone


def test_overwrite_names_each_user_file_replaced_and_keeps_a_copy(tmp_path, tiny_data, capsys):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "summary.md").write_text("my own summary")
    (user / "results.csv").write_text("my,own\n1,2\n")
    (user / "notes.txt").write_text("untouched")
    cfg = write_config(tmp_path, tiny_data, out=str(user))
    assert ablate.run(cfg, ["overwrite=True"], runner=runner) == 0
    err = capsys.readouterr().err
    for name, text in (("summary.md", "my own summary"), ("results.csv", "my,own\n1,2\n")):
        assert f"{user / name} is replaced by the ablation's own {name}; yours is kept as {name}{USER_COPY}" in err
        assert (user / f"{name}{USER_COPY}").read_text() == text
        assert (user / name).read_text() != text
    assert (user / "notes.txt").read_text() == "untouched" and "notes.txt" not in err


def test_summary_and_config_hold_no_absolute_path_of_this_machine(tmp_path, tiny_data, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    cfg = write_config(tmp_path, tiny_data, out=str(work / "runs" / "x"), start={"epochs": 1})
    assert ablate.run(cfg, runner=runner) == 0
    out = work / "runs" / "x"
    for name in ("summary.md", "config.yaml"):
        text = (out / name).read_text()
        assert str(tmp_path) not in text and "/tmp/" not in text, name
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["out"] == "runs/x" and config["data"] == os.path.relpath(tiny_data, work)
    assert "into runs/x/start" in (out / "summary.md").read_text()


def test_mlflow_store_is_in_out_not_in_the_working_directory(tmp_path, tiny_data, monkeypatch):
    """(Named test_mlflow_*: Ultralytics' and attn-yolo's MLflow logging is on only in such tests under pytest.)"""
    import pytest

    pytest.importorskip("mlflow")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = write_config(tmp_path, tiny_data, out=str(tmp_path / "out"))
    if not tracking.mlflow_enabled():
        pytest.skip("MLflow logging is off in Ultralytics' settings")
    assert tracking.tracking_uri(tmp_path / "out") == f"sqlite:///{tmp_path / 'out' / tracking.STORE_NAME}"
    assert ablate.run(cfg, runner=runner) == 0
    assert not (work / "mlflow.db").exists() and not (work / "mlruns").exists() and not list(work.iterdir())
    assert (tmp_path / "out" / tracking.STORE_NAME).is_file()
    assert list((tmp_path / "out" / tracking.ARTIFACTS_NAME).rglob("summary.md"))  # the summary's artifacts too
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")  # the user's choice wins
    assert tracking.tracking_uri(tmp_path / "out") == "sqlite:///elsewhere.db"


def test_cached_synthetic_dataset_is_not_announced(tmp_path, tiny_data, monkeypatch, capsys):
    import importlib

    prepare = importlib.import_module("attn_yolo.ablate.runs.prepare")  # (ablate.prepare is also a function's name)
    cfg = write_config(tmp_path, tiny_data)
    raw, base, name, source = ablate.load_config(cfg)
    raw["data"] = "synthetic"
    monkeypatch.setattr(synthetic, "default_data_yaml", lambda name=None: tiny_data)  # the tiny set: the cache
    for cached in (True, False):
        root = tiny_data.parent if cached else tmp_path / "no"
        monkeypatch.setattr(synthetic, "default_root", lambda name=None, r=root: r)
        ab = ablate.validate(dict(raw), base, name, source)
        prepare.prepare(ab)
        said = capsys.readouterr().out
        assert ("[dataset] generating the synthetic-shapes dataset" in said) is not cached, said
        assert ab.data == str(tiny_data)


def test_a_public_yaml_arm_says_how_its_rows_were_read(tmp_path, tiny_data, log):
    """The ablation keeps Ultralytics quiet while it builds its arms, but not attn-yolo's line on a row written for
    other code: ``CoordAtt, [1024]`` as the collections' copies write it (reduction 8, hidden floor 32) is read with
    the authors' r = 32 and said, with the edit for the copy's block, once; it is never read silently."""
    from ultralytics.nn.tasks import yaml_model_load

    from attn_yolo.conventions import OWN_KEY
    from attn_yolo.insertion import insert_dict

    d = insert_dict("yolo11n.yaml", "CoordAtt", "sppf", [], check=False)
    rows = {k: v for k, v in d.items() if k not in (OWN_KEY, "yaml_file", "scale")}  # a public YAML: no marker
    rows["backbone"][-1][3] = [1024]  # its channel count, as written there
    (tmp_path / "yolo11n-ca.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    assert OWN_KEY not in yaml_model_load(str(tmp_path / "yolo11n-ca.yaml"))
    cfg = write_config(tmp_path, tiny_data, variants=[{"name": "baseline", "model": "yolo11n.yaml"},
                                                      {"name": "ca", "model": str(tmp_path / "yolo11n-ca.yaml")}])
    assert ablate.run(cfg, runner=runner) == 0
    said = [line for line in log if "CoordAtt, [1024] read as CoordAtt(" in line]
    assert len(said) == 1 and "r, min_hidden left out" in said[0] and said[0].endswith("write [8, 32] for that")


def test_mlflow_the_shared_start_is_tracked_in_outs_store_too(tmp_path, tiny_data, monkeypatch):
    """The shared start trains like an arm, in a worker: it logs to the ablation's own store under its own name, not
    to MLflow's default store in the working directory (a ``mlflow.db`` and ``mlruns/`` the user did not ask for)."""
    import pytest

    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    if not tracking.mlflow_enabled():
        pytest.skip("MLflow logging is off in Ultralytics' settings")
    seen = []

    def recorded(spec, device):
        seen.append(spec)
        return runner(spec, device)

    out = tmp_path / "out"
    ablate.run(write_config(tmp_path, tiny_data, out=str(out), start={"epochs": 1}), runner=recorded)
    start = next(s for s in seen if s.variant == "start")
    assert start.env["MLFLOW_TRACKING_URI"] == f"sqlite:///{out / tracking.STORE_NAME}"
    assert start.env["MLFLOW_RUN"] == "start"
