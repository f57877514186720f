"""Safe by default: every tool loads a user checkpoint weights-only; a crafted one is refused before it can run code.

The crafted checkpoint is a real Ultralytics checkpoint plus one object whose unpickling calls ``open(marker, "w")``:
the marker file exists afterwards exactly when something unpickled the file without restriction.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
import yaml
from ultralytics import YOLO
from ultralytics.nn import tasks

import attn_yolo
import attn_yolo_console as cli
from attn_yolo.checkpoint import load_yolo
from attn_yolo.export import export_onnx
from attn_yolo.heatmap import HeatmapError, heatmaps
from attn_yolo.insertion import InsertionError

ULTRALYTICS_LOADER = tasks.torch_safe_load
OPEN = f"{open.__module__}.{open.__qualname__}"  # how pickle names the payload's callable ("io.open")
TINY = {  # three stride-2 convs, SE at P3, two more convs, Detect on P3-P5; nc=2: builds and exports in a second
    "nc": 2,
    "backbone": [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [32, 3, 2]], [-1, 1, "Conv", [32, 3, 2]],
                 [-1, 1, "SE", [4]], [-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [64, 3, 2]]],
    "head": [[[3, 4, 5], 1, "Detect", ["nc"]]],
}  # fmt: skip


class CreatesFile:
    """Unpickling this object calls ``open(path, "w")``, which creates the file (any code could run instead)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    """``tiny.yaml``, ``legit.pt`` (its random checkpoint), ``crafted.pt`` (+ the payload), ``foreign.pt`` (+ an
    ``argparse.Namespace``, harmless but outside the allow-list) and the payload's ``marker`` path."""
    d = tmp_path_factory.mktemp("ckpts")
    (d / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    torch.manual_seed(0)
    YOLO(str(d / "tiny.yaml")).save(str(d / "legit.pt"))
    ckpt = torch.load(d / "legit.pt", weights_only=False)
    torch.save({**ckpt, "extra": CreatesFile(d / "marker")}, d / "crafted.pt")
    torch.save({**ckpt, "opt": argparse.Namespace(lr0=0.01)}, d / "foreign.pt")
    return {"yaml": d / "tiny.yaml", "legit": d / "legit.pt", "crafted": d / "crafted.pt",
            "foreign": d / "foreign.pt", "marker": d / "marker"}  # fmt: skip


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    from attn_yolo.synthetic import generate

    return generate(tmp_path_factory.mktemp("data") / "shapes", n_train=4, n_val=2, imgsz=64, seed=0)


def ablation_config(folder: Path, data: Path, pretrained: Path, variant: Path | str, **extra) -> Path:
    cfg = {"data": str(data), "variants": [{"name": "base", "model": str(variant)},
                                           {"name": "se", "base": str(variant), "module": "SE", "at": "sppf"}],
           "train": {"epochs": 1, "imgsz": 64, "batch": 2, "pretrained": str(pretrained)},
           "out": str(folder / "ablation"), **extra}  # fmt: skip
    path = folder / "ablation.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_payload_works_when_unpickled(ckpts):
    """Control: a plain (unsafe) unpickle of the crafted file runs the payload, so the tests below can fail."""
    torch.load(ckpts["crafted"], weights_only=False)
    assert ckpts["marker"].exists()
    ckpts["marker"].unlink()


@pytest.mark.parametrize("tool", ["insert", "heatmap", "export", "export-openvino", "ablate"])
def test_every_tool_refuses_the_crafted_checkpoint(tool, ckpts, tiny_data, tmp_path, capsys):
    crafted = ckpts["crafted"]
    argv = {
        "insert": ["insert", "base=yolo11n.yaml", "module=SE", "at=sppf", f"pretrained={crafted}",
                   f"out={tmp_path / 'yolo11n-se.yaml'}"],
        "heatmap": ["heatmap", f"model={crafted}", f"out={tmp_path / 'maps'}", "imgsz=64"],
        "export": ["export", f"model={crafted}", "imgsz=64"],
        "export-openvino": ["export", f"model={crafted}", "imgsz=64", "format=openvino"],
        "ablate": ["ablate", str(ablation_config(tmp_path, tiny_data, crafted, "yolo11n.yaml"))],
    }[tool]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    key = {"insert": "pretrained", "heatmap": "model", "ablate": "train.pretrained"}.get(tool, "model")
    assert f"{key}='{crafted}': refused to load: the checkpoint references {OPEN}, outside the weights-only" in err
    assert "only if you trust the file's source, pass trust=True" in err
    assert not ckpts["marker"].exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"ablation.yaml"}  # nothing written (but the test's config)
    assert not list(crafted.parent.glob("*.onnx")) and not list(crafted.parent.glob("*_openvino_model"))
    assert tasks.torch_safe_load is ULTRALYTICS_LOADER  # Ultralytics' own loading is left as it was


def test_python_api_refuses_the_crafted_checkpoint(ckpts):
    crafted, msg = ckpts["crafted"], f"refused to load: the checkpoint references {OPEN}"
    with pytest.raises(InsertionError, match=msg):
        attn_yolo.transfer(crafted, ckpts["yaml"])
    with pytest.raises(HeatmapError, match=msg):
        heatmaps(crafted)
    with pytest.raises(ValueError, match=msg):
        export_onnx(crafted, imgsz=64)
    with pytest.raises(ValueError, match=msg):
        load_yolo(crafted)
    assert not ckpts["marker"].exists()


def test_plain_yolo_runs_the_payload_and_attn_yolo_load_refuses_it(ckpts):
    """Ultralytics' ``YOLO(path)`` after ``import attn_yolo`` is its full unpickle: the payload runs (what README says).
    ``attn_yolo.load`` refuses the same file with one error naming the global, and the file is not written."""
    import os

    if os.environ.get("ULTRALYTICS_SAFE_LOAD", "") in ("", "0", "false", "False"):
        YOLO(str(ckpts["crafted"]))
        assert ckpts["marker"].exists()
        ckpts["marker"].unlink()
    with pytest.raises(attn_yolo.CheckpointError) as e:
        attn_yolo.load(ckpts["crafted"])
    msg = str(e.value)
    assert msg == (f"path='{ckpts['crafted']}': refused to load: the checkpoint references {OPEN}, outside the "
                   "weights-only allow-list (torch, Ultralytics and attn-yolo model classes), and unpickling it could "
                   "run code; only if you trust the file's source, pass trust=True")
    assert not ckpts["marker"].exists()
    assert tasks.torch_safe_load is ULTRALYTICS_LOADER


def test_attn_yolo_load_returns_the_model_and_trust_opts_out(ckpts):
    y = attn_yolo.load(ckpts["legit"])
    assert isinstance(y, YOLO) and type(y.model.model[3]) is attn_yolo.SE
    with pytest.raises(attn_yolo.CheckpointError, match="references argparse.Namespace"):
        attn_yolo.load(ckpts["foreign"])
    assert type(attn_yolo.load(ckpts["foreign"], trust=True).model.model[3]) is attn_yolo.SE
    assert type(attn_yolo.load(ckpts["yaml"]).model.model[3]) is attn_yolo.SE  # a model YAML, built


def test_a_file_that_is_no_checkpoint_says_so_without_the_trust_hint(tmp_path, ckpts):
    """Empty and garbage files are not checkpoints (trust=True would not help); only torch's legacy format, which
    cannot be read weights-only, gets the trust hint."""
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "garbage.pt").write_bytes(b"\x00\x01garbage" * 10)
    legacy = tmp_path / "legacy.pt"
    torch.save({"model": None}, legacy, _use_new_zipfile_serialization=False)
    for name, want in [("empty.pt", "is empty (0 bytes), not a checkpoint"),
                       ("garbage.pt", "is not a checkpoint: neither a torch.save zip archive nor torch's legacy")]:
        for trust in (False, True):
            with pytest.raises(attn_yolo.CheckpointError) as e:
                attn_yolo.load(tmp_path / name, trust=trust)
            assert want in str(e.value) and "trust=True" not in str(e.value)
    with pytest.raises(attn_yolo.CheckpointError, match=r"legacy \(pre-1.6\) checkpoint format.*pass trust=True"):
        attn_yolo.load(legacy)


def test_trust_loads_a_foreign_checkpoint(ckpts, tiny_data, tmp_path, capsys):
    """A checkpoint with a harmless class outside the allow-list: refused by default, loaded with trust=True."""
    foreign = ckpts["foreign"]
    with pytest.raises(ValueError, match="references argparse.Namespace, outside the weights-only allow-list"):
        load_yolo(foreign)
    y = load_yolo(foreign, trust=True)
    legit = load_yolo(ckpts["legit"])  # the plain checkpoint loads weights-only
    assert y.model.yaml == legit.model.yaml and type(y.model.model[3]) is attn_yolo.SE

    base = ["base=" + str(ckpts["yaml"]), "module=ECA", "at=1", f"pretrained={foreign}", f"out={tmp_path / 'eca.yaml'}"]
    assert cli.main(["insert", *base]) == 2
    assert cli.main(["insert", *base, "trust=True"]) == 0
    assert "transferred" in capsys.readouterr().out and (tmp_path / "eca.pt").exists()
    assert cli.main(["heatmap", f"model={foreign}", f"out={tmp_path / 'maps'}", "imgsz=64", "trust=True"]) == 0
    assert (tmp_path / "maps" / "stats.csv").exists()
    assert cli.main(["export", f"model={foreign}", "imgsz=64", "verify=False", "trust=True",
                     f"out={tmp_path / 'foreign.onnx'}"]) == 0  # fmt: skip
    assert (tmp_path / "foreign.onnx").exists()

    from attn_yolo.ablate import load_config, validate
    from attn_yolo.ablate.runs.runner import plan

    cfg = ablation_config(tmp_path, tiny_data, foreign, ckpts["yaml"])
    assert cli.main(["ablate", str(cfg), "trust=maybe"]) == 2
    assert "trust: 'maybe'; expected true or false" in capsys.readouterr().err
    raw, folder, name, source = load_config(cfg)
    with pytest.raises(ValueError, match="train.pretrained=.*references argparse.Namespace"):
        validate(raw, folder, name, source)
    ab = validate({**raw, "trust": True}, folder, name, source)
    assert ab.trust and ab.config["trust"] is True
    assert all(s.trust for s in plan(ab, ab.data))  # each run's transfer of train.pretrained gets it


@pytest.mark.parametrize("mode", ["val", "predict", "train"])
def test_pass_through_commands_refuse_the_crafted_checkpoint(mode, ckpts, tiny_data, assets, capsys):
    """``attn-yolo val/predict/train`` load checkpoints weights-only too: one line naming the global, exit 2, no
    payload run."""
    crafted = ckpts["crafted"]
    key = "pretrained" if mode == "train" else "model"
    argv = {"val": ["val", f"model={crafted}", f"data={tiny_data}", "imgsz=64"],
            "predict": ["predict", f"model={crafted}", f"source={assets / 'bus.jpg'}", "imgsz=64"],
            "train": ["train", f"model={ckpts['yaml']}", f"pretrained={crafted}", f"data={tiny_data}",
                      "epochs=1"]}[mode]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {key}='{crafted}': refused to load: the checkpoint references {OPEN}, outside")
    assert "\n" not in err and "Traceback" not in err
    assert not ckpts["marker"].exists()
    assert tasks.torch_safe_load is ULTRALYTICS_LOADER


def test_pass_through_loads_a_plain_checkpoint_weights_only_and_trust_opts_out(ckpts, assets, tmp_path, monkeypatch):
    calls = []
    loader = tasks.torch_safe_load

    def counted(w, safe_only=None):
        calls.append(safe_only)
        return loader(w, safe_only)

    monkeypatch.setattr(tasks, "torch_safe_load", counted)
    src, out = f"source={assets / 'bus.jpg'}", f"project={tmp_path}"
    assert cli.main(["predict", f"model={ckpts['legit']}", src, "imgsz=64", out, "save=False"]) == 0
    assert calls and all(calls)  # every load weights-only
    calls.clear()
    assert cli.main(["predict", f"model={ckpts['foreign']}", src, "imgsz=64", out, "save=False", "trust=True"]) == 0
    assert calls and not any(calls)  # trust=True: as Ultralytics loads by default
