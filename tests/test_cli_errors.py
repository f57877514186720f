"""Bad tool input: exit code 2 and a one-line message naming the key and value, before any heavy work or output."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

import attn_yolo_console as cli

MODELS = Path(__file__).resolve().parents[1] / "models"
SE_VARIANT = {"name": "se", "base": "yolo11n.yaml", "module": "SE", "at": "sppf"}  # an ablation needs two variants


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    """A text file named .pt, a text file named .onnx, an existing plain file, a 1×2000 image."""
    (tmp_path / "text.pt").write_text("not a checkpoint\n")
    (tmp_path / "text.onnx").write_text("not an onnx model\n")
    (tmp_path / "a-file").write_text("")
    (tmp_path / "empty.pt").write_bytes(b"")
    cv2.imwrite(str(tmp_path / "thin.png"), np.full((1, 2000, 3), 127, np.uint8))
    return {"pt": tmp_path / "text.pt", "onnx": tmp_path / "text.onnx", "file": tmp_path / "a-file",
            "thin": tmp_path / "thin.png", "empty": tmp_path / "empty.pt"}  # fmt: skip


IMGSZ = "an int in 32..4096 (pixels; rounded up to a multiple of the stride, 32)"  # attn_yolo.args.imgsz_problem
CASES = {
    "export model=nofile.pt": (["export", "model=nofile.pt"], "attn-yolo export: model='nofile.pt': no such file"),
    "export opset=99": (["export", "model=nofile.pt", "opset=99"],
                        "attn-yolo export: opset=99 is newer than this export can write: allowed 9.."),
    "export onnx=<not ONNX>": (["export", "model=nofile.pt", "onnx={onnx}"],
                               "attn-yolo export: '{onnx}' is not an ONNX model file: DecodeError"),
    "insert pretrained=<text .pt>": (
        ["insert", "base=yolo11n.yaml", "pretrained={pt}", "out={dir}/yolo11n-cbam.yaml"],
        "attn-yolo insert: pretrained='{pt}' is not a checkpoint: neither a torch.save zip archive nor torch's "
        "legacy format (17 bytes, starting b'not a ch'); check that the path names the .pt that training wrote"),
    "heatmap out=<a file>": (["heatmap", "model=nofile.pt", "out={file}"],
                             "attn-yolo heatmap: out='{file}' is an existing file; expected a folder"),
    "heatmap on a 1x2000 image": (
        ["heatmap", f"model={MODELS / 'yolo11-se.yaml'}", "source={thin}", "imgsz=64", "out={dir}/maps"],
        "attn-yolo heatmap: image '{thin}' is 1×2000 (H×W); each side must be at least 10 px"),
    "ablat": (["ablat"], "attn-yolo: unknown command 'ablat'. Did you mean 'attn-yolo ablate'?"),
    "foo": (["foo"], "attn-yolo: unknown command 'foo'. Tools: modules, insert, ablate, export, heatmap, bench"),
    "export imgsz=100000": (["export", "model=nofile.pt", "imgsz=100000"],
                            f"attn-yolo export: imgsz: 100000; expected {IMGSZ}, or h,w"),
    "export imgsz=16": (["export", "model=nofile.pt", "imgsz=16"], f"attn-yolo export: imgsz: 16; "
                        f"expected {IMGSZ}"),  # the range every tool checks (was 1..4096 here, >= 32 in heatmap)
    "heatmap imgsz=5000": (["heatmap", "model=nofile.pt", "imgsz=5000"],
                           f"attn-yolo heatmap: imgsz: 5000; expected {IMGSZ} (the long side)"),
    "train imgsz=-64 batch=-5": (["train", "model=yolo11n.yaml", "data=coco8.yaml", "imgsz=-64", "batch=-5",
                                  "epochs=1", "project={dir}"], f"attn-yolo train: imgsz: -64; expected "
                                 f"{IMGSZ}, or h,w of two such ints"),
    "train batch=-5": (["train", "model=yolo11n.yaml", "data=coco8.yaml", "batch=-5", "epochs=1", "project={dir}"],
                       "attn-yolo train: batch: -5; expected a positive int, -1 (auto batch at 60% of GPU "
                       "memory) or a float in (0, 1)"),
    "val imgsz=100000": (["val", "model=yolo11n.yaml", "imgsz=100000", "project={dir}"],
                         f"attn-yolo val: imgsz: 100000; expected {IMGSZ}"),
    "bench imgsz=8192": (["bench", "imgsz=8192"], f"attn-yolo bench: imgsz: 8192; expected {IMGSZ}"),
    "val model=<empty .pt>": (["val", "model={empty}"], "model='{empty}' is empty (0 bytes), not a checkpoint"),
    "val model=<text .pt>": (["val", "model={pt}"], "model='{pt}' is not a checkpoint: neither a torch.save zip "
                             "archive nor torch's legacy format"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line(case, files, tmp_path, capsys):
    argv, message = CASES[case]
    fill = {**{k: str(v) for k, v in files.items()}, "dir": str(tmp_path)}
    before = {p.name for p in tmp_path.iterdir()}
    assert cli.main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {err.removeprefix('error: ')}" and "\n" not in err, err  # one line, no traceback
    assert message.format(**fill) in err
    assert "trust=True" not in err or "refused to load" in err  # a file that is no checkpoint: no trust hint
    assert {p.name for p in tmp_path.iterdir()} == before  # refused before writing anything


def test_ablate_out_is_an_existing_file(files, tmp_path, capsys):
    """Refused at validation, with the config's other problems, before any data preparation or training."""
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "shapes", n_train=2, n_val=1, imgsz=64, seed=0)
    cfg = tmp_path / "ablation.yaml"
    cfg.write_text(yaml.safe_dump({"data": str(data),
                                   "variants": [{"name": "base", "model": "yolo11n.yaml"}, SE_VARIANT],
                                   "train": {"epochs": 1, "imgsz": 64}}))  # fmt: skip
    capsys.readouterr()
    assert cli.main(["ablate", str(cfg), f"out={files['file']}"]) == 2
    err = capsys.readouterr().err
    assert f": out: '{files['file']}' is an existing file; expected a folder" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert files["file"].read_text() == ""


UNWRITABLE = {"/sys/x": "cannot write in /sys (Operation not permitted)",
              "/proc/x": "cannot write in /proc (No such file or directory)",
              "{file}/x": "{file} is a file, not a folder, so nothing can be written under it"}  # fmt: skip


@pytest.mark.parametrize("out", list(UNWRITABLE))
@pytest.mark.parametrize("tool", ["insert", "export", "heatmap", "ablate"])
def test_an_impossible_out_is_one_line(tool, out, files, tmp_path, capsys):
    """An out= that cannot be written (a pseudo file system, a path under a file): exit 2, one line, before any work."""
    if out.startswith(("/sys", "/proc")) and not Path("/" + out.split("/")[1]).exists():
        pytest.skip(f"no {out.split('/')[1]} here")
    out = out.format(file=files["file"])
    yaml_model = str(MODELS / "yolo11-se.yaml")
    if tool == "ablate":
        from attn_yolo.synthetic import generate

        data = generate(tmp_path / "shapes", n_train=2, n_val=1, imgsz=64, seed=0)
        cfg = tmp_path / "ablation.yaml"
        cfg.write_text(yaml.safe_dump({"data": str(data),
                                   "variants": [{"name": "base", "model": "yolo11n.yaml"}, SE_VARIANT],
                                       "train": {"epochs": 1, "imgsz": 64}}))  # fmt: skip
    argv = {"insert": ["insert", "base=yolo11n.yaml", f"out={out}/m.yaml"],
            "export": ["export", f"model={yaml_model}", "imgsz=64", f"out={out}/m.onnx"],
            "heatmap": ["heatmap", f"model={yaml_model}", "imgsz=64", f"out={out}"],
            "ablate": ["ablate", str(tmp_path / "ablation.yaml"), f"out={out}"]}[tool]  # fmt: skip
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    key = next(k for k in UNWRITABLE if k.format(file=files["file"]) == out)
    assert UNWRITABLE[key].format(file=files["file"]) in err
    assert not Path(out).exists()


def test_ablate_config_with_a_huge_imgsz_and_an_after_detect_variant_lists_both(tmp_path, capsys):
    """``train.imgsz: 100000`` (the tools' one range) and a variant whose YAML has attention after Detect (said as the
    build says it, not as a guessed task 'None'): exit 2, both problems named by key, nothing written."""
    from ultralytics.nn.tasks import yaml_model_load

    d = yaml_model_load("yolo11n.yaml")
    d["head"].append([-1, 1, "CBAM", []])
    d.pop("yaml_file", None)
    (tmp_path / "after.yaml").write_text(yaml.safe_dump(d))
    cfg = tmp_path / "ablation.yaml"
    cfg.write_text(yaml.safe_dump({"variants": [{"name": "base", "model": "yolo11n.yaml"},
                                                {"name": "after", "model": str(tmp_path / "after.yaml")}],
                                   "train": {"epochs": 1, "imgsz": 100000}, "out": str(tmp_path / "out")}))
    capsys.readouterr()
    assert cli.main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert ("train.imgsz: 100000; expected an int in 32..4096 (pixels; rounded up to a multiple of the stride, 32) "
            "(square training size)") in err
    assert ("variants[1] (after).model: model YAML row 24: CBAM after Detect (row 23); attention must come before "
            "the head's Detect") in err and "is a None model" not in err
    assert {p.name for p in tmp_path.iterdir()} == {"after.yaml", "ablation.yaml"}


@pytest.mark.parametrize("word", ["--version", "version"])
def test_version_names_attn_yolo_ultralytics_and_torch_without_importing_them(word):
    """``attn-yolo --version`` prints one line with attn-yolo's, Ultralytics' and torch's installed versions (their
    distributions' metadata), exit 0, and imports none of them (Ultralytics' own ``--version`` names itself only)."""
    import importlib.metadata
    import subprocess
    import sys

    code = ("import sys, attn_yolo_console as c\n"
            f"rc = c.main([{word!r}])\n"
            "print('rc', rc, sorted(m for m in ('torch', 'ultralytics', 'attn_yolo') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    v = {name: importlib.metadata.version(name) for name in ("attn-yolo", "ultralytics", "torch")}
    expected = f"attn-yolo {v['attn-yolo']}, ultralytics {v['ultralytics']}, torch {v['torch']}"
    assert out.stdout.splitlines() == [expected, "rc 0 []"], out.stdout + out.stderr


@pytest.mark.parametrize("argv", [["ablat"], ["foo"], ["vall", "model=x.yaml"]])
def test_a_mistyped_command_is_answered_before_torch_is_imported(argv):
    """The console script refuses an unknown first word (exit 2, one line) without importing attn_yolo, Ultralytics
    or torch; ``attn-yolo help`` prints attn-yolo's help before it imports them."""
    import subprocess
    import sys

    code = ("import sys, attn_yolo_console as c\n"
            f"rc = c.main({argv!r})\n"
            "print('rc', rc, sorted(m for m in ('torch', 'ultralytics', 'attn_yolo') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[-2] == "rc 2 []", out.stdout + out.stderr
    assert out.stderr.startswith(f"error: attn-yolo: unknown command {argv[0]!r}") and out.stderr.count("\n") == 1

    code = ("import sys, attn_yolo_console as c\n"
            "class Stop:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'attn_yolo':\n"
            "            raise ImportError('stopped')\n"
            "sys.meta_path.insert(0, Stop())\n"
            "try:\n"
            "    c.main(['help'])\n"
            "except ImportError:\n"
            "    print('stopped at the package import; torch imported:', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("attn-yolo: Ultralytics' own CLI") and \
        out.stdout.endswith("stopped at the package import; torch imported: False\n"), \
        out.stdout[-2000:] + out.stderr[-2000:]
