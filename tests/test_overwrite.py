"""Nothing a user wrote is overwritten or deleted: heatmap's and ablate's ``out`` refused unless ``overwrite=True``,
every check before the first write, and with ``overwrite=True`` only the tools' own files replaced."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, write_config

from attn_yolo import ablate
from attn_yolo.ablate.reports.plots import is_own_plot, save_figure
from attn_yolo.ablate.runs import runner as ablate_runner
from attn_yolo.ablate.runs.outdir import LOCK_NAME, OUT_MARKER, RUN_MARKER
from attn_yolo.args import UsageError
from attn_yolo.images import default_sources
from attn_yolo_console import main as cli_main

SE_YAML = REPO / "models" / "yolo11n-se.yaml"


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path → bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# ------------------------------------------------------------------------------------------------------- heatmap --
def test_heatmap_refuses_to_overwrite_before_any_work(tmp_path, capsys, monkeypatch):
    import attn_yolo.heatmap as hm

    out = tmp_path / "hm" / "b"
    out.mkdir(parents=True)
    for name in ("stats.csv", "bus_heatmaps.png", "notes.txt"):
        (out / name).write_text("mine")
    before = contents(out)
    bus = default_sources()[0]
    argv = ["heatmap", f"model={SE_YAML}", f"source={bus}", "imgsz=64", f"out={out}"]

    with monkeypatch.context() as m:  # refused before the model is loaded or predicts
        m.setattr(hm, "as_model", lambda *a, **k: pytest.fail("model loaded before the out check"))
        assert cli_main(argv) == 2
    err = one_line_error(capsys)
    assert f"out={str(out)!r} already holds bus_heatmaps.png, stats.csv, which heatmap writes" in err
    assert "overwrite=True" in err and "notes.txt" not in err
    assert contents(out) == before

    assert cli_main([*argv, "overwrite=True"]) == 0  # replaces heatmap's own files only
    after = contents(out)
    assert after["stats.csv"] != b"mine" and after["bus_heatmaps.png"].startswith(b"\x89PNG")
    assert after["notes.txt"] == b"mine" and any(k.startswith("bus_L") and k.endswith(".npy") for k in after)

    capsys.readouterr()
    assert cli_main(argv) == 2  # a rerun into the same out: refused too, its own earlier files named
    assert "bus_L" in one_line_error(capsys) and contents(out) == after
    assert cli_main(["heatmap", f"model={SE_YAML}", f"source={bus}", "imgsz=64", f"out={out}", "overwrite=1"]) == 2
    assert "overwrite: 1; expected True or False" in one_line_error(capsys)


def test_heatmap_default_images_checked_before_predicting(tmp_path, capsys, monkeypatch):
    """Without ``source=`` the images (here Ultralytics' bus.jpg, zidane.jpg) are known once the model is loaded:
    checked then, before any prediction."""
    import attn_yolo.heatmap as hm

    out = tmp_path / "maps"
    out.mkdir()
    (out / "zidane_L02_SE_channel.npy").write_text("mine")
    (out / "zidane_features.npy").write_text("mine too")  # not a name heatmap writes: never in the way
    monkeypatch.setattr(hm, "heatmaps", lambda *a, **k: pytest.fail("predicted before the out check"))
    assert cli_main(["heatmap", f"model={SE_YAML}", "imgsz=64", f"out={out}"]) == 2
    err = one_line_error(capsys)
    assert "already holds zidane_L02_SE_channel.npy, which heatmap writes" in err and "features" not in err
    assert (out / "zidane_L02_SE_channel.npy").read_text() == "mine"


def test_heatmap_python_api_save_and_stats_refuse_without_overwrite(tmp_path):
    from attn_yolo.heatmap import heatmaps, save, write_stats

    (item,) = heatmaps(str(SE_YAML), default_sources()[0], imgsz=64)
    paths = save(item, tmp_path)
    npy = [p for k, p in paths.items() if k != "png"]
    for p in npy:
        p.unlink()
    (tmp_path / "bus_heatmaps.png").write_text("mine")
    with pytest.raises(FileExistsError, match=r"holds bus_heatmaps.png, which heatmap writes; pass overwrite=True"):
        save(item, tmp_path)
    assert not any(p.exists() for p in npy)  # nothing written: the check came first
    assert (tmp_path / "bus_heatmaps.png").read_text() == "mine"
    save(item, tmp_path, overwrite=True)
    assert (tmp_path / "bus_heatmaps.png").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "stats.csv").write_text("mine")
    with pytest.raises(FileExistsError, match="stats.csv"):
        write_stats([item], tmp_path / "stats.csv")
    assert (tmp_path / "stats.csv").read_text() == "mine"
    assert write_stats([item], tmp_path / "stats.csv", overwrite=True).read_text().startswith("image,map,")


# -------------------------------------------------------------------------------------------------------- ablate --
def fake_runner(spec, device):
    """Stands in for execute_run (no training)."""
    Path(spec.run_dir, "weights.txt").write_text(f"{spec.variant} {spec.seed}")
    return {"variant": spec.variant, "seed": spec.seed, "status": "ok", "params": spec.params, "gflops": spec.gflops,
            "precision": 0.5, "recall": 0.5, "map50": 0.5, "map50_95": 0.1 * (spec.seed + 1), "best_epoch": 1,
            "epochs": 1, "train_time_s": 0.3, "latency_ms": 1.0, "device": device, "run_dir": spec.run_dir,
            "model": spec.model, "error": "", "fingerprint": spec.fingerprint}


def test_ablate_user_out_refused_then_overwrite_deletes_nothing(tmp_path, tiny_data, capsys, monkeypatch):
    user = tmp_path / "userdir2"
    user.mkdir()
    mine = {"summary.md": "my summary", "ablation.png": "my plot", "curves.png": "my curves",
            "delta.png": "my delta"}  # fmt: skip
    for name, text in mine.items():
        (user / name).write_text(text)
    cfg = write_config(tmp_path, tiny_data, out=str(user))
    before = contents(user)

    with monkeypatch.context() as m:  # refused before any arm is built
        m.setattr(ablate_runner, "prepare", lambda ab: pytest.fail("built before the out check"))
        assert cli_main(["ablate", str(cfg)]) == 2
    err = one_line_error(capsys)
    assert f"out={str(user)!r} exists and holds ablation.png, curves.png, delta.png, summary.md" in err
    assert f"no {OUT_MARKER} marker" in err and "overwrite=True" in err
    assert contents(user) == before  # nothing written: no config.yaml, no lock, no marker

    assert ablate.run(cfg, ["overwrite=True"], runner=fake_runner) == 0
    assert (user / OUT_MARKER).is_file()
    for name in ("summary.md", "ablation.png", "curves.png"):  # the ablation's own names: replaced, as allowed
        assert (user / name).read_text(errors="replace") != mine[name]
    assert is_own_plot(user / "ablation.png") and is_own_plot(user / "curves.png")
    assert (user / "delta.png").read_text() == "my delta"  # no Δ plot this time: the user's delta.png is kept

    calls = []  # claimed: a resume needs no overwrite and trains nothing again
    assert ablate.run(cfg, runner=lambda s, d: calls.append(s) or fake_runner(s, d)) == 0 and calls == []
    assert (user / "delta.png").read_text() == "my delta"
    capsys.readouterr()

    from matplotlib.figure import Figure

    (user / "delta.png").unlink()  # a Δ plot the runner wrote earlier is still removed when it no longer applies
    save_figure(Figure(), user / "delta.png")
    assert ablate.run(cfg, runner=fake_runner) == 0 and not (user / "delta.png").exists()


def test_ablate_foreign_run_folder_refused_before_config_yaml_is_written(tmp_path, tiny_data, capsys):
    out = tmp_path / "out"
    foreign = out / "runs" / "baseline-seed0"
    foreign.mkdir(parents=True)
    (foreign / "best.pt").write_text("my weights")
    (out / "config.yaml").write_text("mine: true\n")
    cfg = write_config(tmp_path, tiny_data)
    before = contents(out)

    assert cli_main(["ablate", str(cfg)]) == 2  # out is not the runner's
    assert f"out={str(out)!r} exists and holds config.yaml, runs/" in one_line_error(capsys)
    assert contents(out) == before

    assert cli_main(["ablate", str(cfg), "overwrite=True"]) == 2  # allowed into out, but a run folder is the user's
    want = f"{foreign}: a folder that attn-yolo ablate did not create (no {RUN_MARKER} marker)"
    assert want in one_line_error(capsys)
    left = {k: v for k, v in contents(out).items() if k != LOCK_NAME}  # the (empty) lock file: the only addition
    assert left == before and not (out / OUT_MARKER).exists()  # config.yaml untouched, out not claimed
    with pytest.raises(UsageError, match="overwrite='yes'; expected True or False"):
        ablate.run(cfg, ["overwrite=yes"], runner=fake_runner)
