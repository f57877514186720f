"""Paths that used to end in a raw traceback or a misleading message: each is one line (exit 2, or 130 after
Ctrl-C), says what is wrong, and runs nothing heavy first."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import write_config

from attn_yolo import ablate
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]
MODELS_DIR = REPO / "models"

IMGSZ_100 = "imgsz=[100] must be multiple of max stride 32, updating to [128]"  # Ultralytics' warning


def one_line(err: str) -> str:
    err = err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def after_detect(tmp_path) -> Path:
    from ultralytics.nn.tasks import yaml_model_load

    d = yaml_model_load("yolo11n.yaml")
    d["head"].append([-1, 1, "CBAM", []])
    path = tmp_path / "after-detect.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in d.items() if k != "yaml_file"}))
    return path


def test_attention_after_detect_names_both_rows(after_detect, tiny_data, capsys):
    from ultralytics import YOLO

    from attn_yolo.registry import ModelYamlError

    msg = "model YAML row 24: CBAM after Detect (row 23); attention must come before the head's Detect"
    with pytest.raises(ModelYamlError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        YOLO(str(after_detect))  # not Ultralytics' "'None' task" NotImplementedError
    assert cli_main(["train", f"model={after_detect}", f"data={tiny_data}", "epochs=1", "imgsz=64"]) == 2
    assert one_line(capsys.readouterr().err) == f"error: {msg}"


def test_bad_yaml_through_train_is_one_line(tmp_path, tiny_data, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("nc: 4\nbackbone:\n  - [-1, 1, Conv, [16, 3, 2]]\n  - [-1, 1, CBMA, [16]]\nhead:\n"
                   "  - [[1], 1, Detect, [nc]]\n")
    assert cli_main(["train", f"model={bad}", f"data={tiny_data}", "epochs=1", "imgsz=64"]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith("error: model YAML row 1 (backbone): unknown module 'CBMA'. Did you mean 'CBAM'?")


def test_ray_address_without_a_cluster_is_one_line(tmp_path, tiny_data, capsys, monkeypatch):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray session is already open in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = write_config(tmp_path, tiny_data)
    raw = yaml.safe_load(cfg.read_text())
    del raw["train"]["device"]
    cfg.write_text(yaml.safe_dump({**raw, "backend": "ray", "ray_address": "auto"}))
    capsys.readouterr()
    assert cli_main(["ablate", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ray_address='auto': no Ray cluster reachable (ConnectionError: Could not find any")
    assert "ray start --head" in err and "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "out" / "runs").exists() or not any((tmp_path / "out" / "runs").iterdir())  # no run began


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `attn-yolo ablate &` in a script (no job control) starts it


@pytest.mark.parametrize("sig, parent_ignores_sigint, code, said", [
    (signal.SIGINT, True, 130, "interrupted (Ctrl-C)"),
    (signal.SIGTERM, False, 143, "terminated (SIGTERM)"),
], ids=["SIGINT-started-in-background", "SIGTERM"])  # fmt: skip
def test_ctrl_c_while_the_synthetic_dataset_is_generated(tmp_path, sig, parent_ignores_sigint, code, said):
    """SIGINT (or SIGTERM) during the first use of the default's ``data: synthetic-key``: exit 130 (143), one line, no
    traceback, no half dataset; within seconds. SIGINT is sent to a process whose parent left SIGINT ignored
    (inherited through exec, as by a shell's background job): the ablation still stops, as it does during its runs."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "ATTN_YOLO_DATA": str(tmp_path / "cache"), "YOLO_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "attn_yolo_console", "ablate", f"out={tmp_path / 'out'}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignore_sigint if parent_ignores_sigint else None)
    try:
        t0 = time.time()
        while not list((tmp_path / "cache").glob(".synthetic-*.tmp-*/images/train/*")):
            assert time.time() - t0 < 120 and proc.poll() is None, "the dataset generation did not start"
            time.sleep(0.05)
        proc.send_signal(sig)
        sent = time.time()
        _, err = proc.communicate(timeout=60)  # ~1 s; the whole generation would take far longer (1200 images)
    finally:
        proc.kill()  # no process outlives a failed test
    assert proc.returncode == code, err
    assert one_line(err) == f"attn-yolo ablate: {said}; nothing half-written is kept"
    assert time.time() - sent < 30  # stopped, not run to its end
    assert list((tmp_path / "cache").iterdir()) == []  # the temporary folder is gone; no dataset claims to be complete


@pytest.fixture
def warnings_(monkeypatch) -> list[str]:
    """What Ultralytics' LOGGER warns (check_imgsz's rounding warning goes there)."""
    from ultralytics.utils import LOGGER

    said = []
    monkeypatch.setattr(LOGGER, "warning", lambda msg, *a, **k: said.append(str(msg)))
    return said


def test_imgsz_follows_ultralytics_rounding_with_one_warning(tmp_path, tiny_data, warnings_):
    """imgsz=100 is not a multiple of the stride 32: Ultralytics' check_imgsz rounds it to 128, with its one warning
    (not a "does not build" per variant)."""
    cfg = write_config(tmp_path, tiny_data)
    raw, base, name, source = ablate.load_config(cfg)
    ab = ablate.validate(ablate.apply_overrides(raw, ["imgsz=100"]), base, name, source)
    assert ab.imgsz == 128 and ab.train["imgsz"] == 128 and len(ab.variants) == 2
    assert [w for w in warnings_ if "imgsz" in w] == [IMGSZ_100]


def test_heatmap_rounds_imgsz_with_one_warning(tmp_path, warnings_):
    assert cli_main(["heatmap", f"model={REPO / 'models' / 'yolo11n-se.yaml'}", "imgsz=100",
                     f"out={tmp_path / 'maps'}"]) == 0  # bus.jpg and zidane.jpg: one warning, not one per image
    assert [w for w in warnings_ if "imgsz" in w] == [IMGSZ_100]


def test_insert_names_a_mismatched_pretrained_file_and_warns_on_stacking(tmp_path, capsys):
    from ultralytics import YOLO

    v8 = tmp_path / "v8n.pt"
    YOLO("yolov8n.yaml").save(str(v8))
    assert cli_main(["insert", "base=yolo11n.yaml", f"pretrained={v8}", f"out={tmp_path / 'a.yaml'}"]) == 2
    err = one_line(capsys.readouterr().err)
    assert f"pretrained='{v8}' is not a checkpoint of base='yolo11n.yaml', so its weights cannot be carried" in err
    assert not (tmp_path / "a.yaml").exists()

    assert cli_main(["insert", "base=yolo11n.yaml", f"out={tmp_path / 'cbam.yaml'}"]) == 0
    cbam = tmp_path / "cbam.pt"
    YOLO(str(tmp_path / "cbam.yaml")).save(str(cbam))  # a checkpoint that already holds CBAM (row 5)
    capsys.readouterr()
    argv = ["insert", "base=yolo11n.yaml", "module=SE", f"pretrained={cbam}", f"out={tmp_path / 'a.yaml'}"]
    assert cli_main(argv) == 2
    err = one_line(capsys.readouterr().err)  # each row named by the model it is in: the checkpoint's CBAM at row 5
    assert ("cannot be carried over: checkpoint row 5 [1, 'CBAM', []] is not where the model has it: model row 6 is "
            "[1, 'Conv', [512, 3, 2]], neither that row nor an inserted attention block, so the model is not the "
            "checkpoint with blocks inserted") in err, err
    assert not (tmp_path / "a.yaml").exists()

    assert cli_main(["insert", "base=yolo11n.yaml", f"out={tmp_path / 'b.yaml'}"]) == 0  # CBAM at rows 5, 8, 13
    capsys.readouterr()
    assert cli_main(["insert", f"base={tmp_path / 'b.yaml'}", "at=5", f"out={tmp_path / 'c.yaml'}"]) == 0
    err = capsys.readouterr().err
    assert "warning: row 6: CBAM right after CBAM (row 5): the block is stacked on itself" in err
    assert cli_main(["insert", "base=yolo11n.yaml", "module=SE", f"out={tmp_path / 'd.yaml'}"]) == 0
    assert "stacked" not in capsys.readouterr().err  # SE after C3k2: no warning


def test_pass_through_with_a_missing_checkpoint_is_one_line(tmp_path, capsys):
    assert cli_main(["val", f"model={tmp_path / 'nofile.pt'}", "data=coco8.yaml"]) == 2
    assert one_line(capsys.readouterr().err) == (f"error: attn-yolo val: model='{tmp_path / 'nofile.pt'}': no such "
                                                 "file (give a checkpoint, e.g. runs/detect/train/weights/best.pt)")


@pytest.fixture
def ran(monkeypatch) -> list:
    """The command lines that reached Ultralytics' entrypoint (``run_cli``, stubbed: nothing runs)."""
    import attn_yolo.ultralytics_api as api

    calls = []
    monkeypatch.setattr(api, "run_cli", calls.append)
    return calls


PASS_THROUGH = {  # argv (with {tmp}) -> the one line, exit 2, before Ultralytics' entrypoint runs
    "typo of sdpa": (["predict", "model=x.pt", "source=bus.jpg", "imgsz=64", "spda=True"],
                     "error: attn-yolo predict: 'spda' is not a valid YOLO argument. Similar arguments are i.e. "
                     "['sdpa=False']."),
    "typo of an Ultralytics key": (["train", "model=yolo11n.yaml", "data=coco8.yaml", "epoch=3"],
                                   "error: attn-yolo train: 'epoch' is not a valid YOLO argument. Similar arguments "
                                   "are i.e. ['epochs=100'"),
    "missing model YAML": (["train", "model={tmp}/nope.yaml", "data=coco8.yaml"],
                           "error: attn-yolo train: model='{tmp}/nope.yaml': no such file; give a model YAML"),
    "missing data YAML": (["train", "model=yolo11n.yaml", "data={tmp}/nope.yaml"],
                          "error: attn-yolo train: data='{tmp}/nope.yaml': no such file; give a dataset YAML"),
    "epochs=abc": (["train", "model=yolo11n.yaml", "data=coco8.yaml", "epochs=abc"],
                   "error: attn-yolo train: 'epochs=abc' is of invalid type str. 'epochs' must be an int"),
    "lr0 out of range": (["train", "model=yolo11n.yaml", "data=coco8.yaml", "lr0=5"],
                         "error: attn-yolo train: 'lr0=5' is an invalid value. Valid 'lr0' values are between 0.0 "
                         "and 1.0."),
    "scale letter": (["train", "model={tmp}/m/yolo11-t6537x.yaml", "data=coco8.yaml"],
                     "error: attn-yolo train: model='{tmp}/m/yolo11-t6537x.yaml': no such file (nor "
                     "'{tmp}/m/yolo11-t6537.yaml', the name without its scale letter, where Ultralytics also looks)"),
    "a synthetic setting that does not exist": (
        ["train", "model=yolo11n.yaml", "data=synthetic-nope"],
        "error: attn-yolo train: data='synthetic-nope': no such file or setting; expected a dataset YAML or one of "
        "synthetic, synthetic-shapes, synthetic-key,"),
    "no model=, offline: Ultralytics' default weights": (
        ["train", "data=coco8.yaml", "epochs=1"],
        "error: attn-yolo train: model= not given: Ultralytics would load its default 'yolo26n.pt', which is not on "
        "this machine and cannot be downloaded here (offline); give a model YAML"),
    "an official checkpoint name not on disk, offline": (
        ["val", "model=yolo11s.pt", "data=coco8.yaml"],
        "error: attn-yolo val: model='yolo11s.pt', which is not on this machine and cannot be downloaded here"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(PASS_THROUGH))
def test_pass_through_input_errors_are_one_line_before_ultralytics_runs(case, ran, tmp_path, capsys):
    argv, message = PASS_THROUGH[case]
    assert cli_main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert one_line(capsys.readouterr().err).startswith(message.format(tmp=tmp_path))
    assert ran == []  # refused before Ultralytics' entrypoint (no model built, no dataset read)


def test_pass_through_valid_input_reaches_ultralytics(ran, tmp_path, tiny_data):
    """No false refusal: official names (found in Ultralytics' own cfg folder), attn-yolo's keys, a YAML found by its
    scale-less name as Ultralytics finds it, and a --key / trailing comma as its entrypoint reads them."""
    from ultralytics.nn.tasks import yaml_model_load

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "yolo11-t6537.yaml").write_text((MODELS_DIR / "yolo11-cbam.yaml").read_text())
    scaled = f"model={tmp_path}/m/yolo11-t6537x.yaml"
    assert yaml_model_load(scaled.partition("=")[2])["backbone"]  # Ultralytics itself finds it
    for argv in (["train", "model=yolo11n.yaml", f"data={tiny_data}", "epochs=1", "imgsz=64", "sdpa=True",
                  "health=False"],
                 ["train", scaled, f"data={tiny_data}", "--epochs=1", "batch=2,"],
                 ["val", "model=yolo11n.yaml", f"data={tiny_data}", "trust=False"],
                 ["settings", "runs_dir=/tmp/x"], ["solutions", "count", "show=False"]):  # special commands' own keys
        assert cli_main(argv) == 0
    assert [a[0] for a in ran] == ["train", "train", "val", "settings", "solutions"]
    assert "sdpa=True" not in ran[0] and "trust=False" not in ran[2]  # attn-yolo's own keys are taken out


@pytest.mark.parametrize("tool", ["ablate", "search"])
@pytest.mark.parametrize("text, where", [
    ("data: synthetic\nvariants: [a, b\n  c: 1\n", "line 3, column 4: expected ',' or ']', but got ':' (in the flow "
                                                    "sequence that opens at line 2, column 11)"),
    ("data: synthetic\n\tvariants: []\n", "line 2, column 1: found character '\\t' that cannot start any token"),
])
def test_a_broken_config_yaml_is_one_line_with_its_file_line_and_column(tool, text, where, tmp_path, capsys):
    """A config file with a YAML syntax error: exit 2, one line naming the file, the line and column where the
    parser stopped (counted from 1) and what it expected; never the parser's multi-line message."""
    bad = tmp_path / "broken.yaml"
    bad.write_text(text)
    assert cli_main([tool, str(bad)]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"error: {bad}: not valid YAML at {where}")


@pytest.mark.parametrize("gone", ["data.yaml", "images"])
def test_a_dataset_that_vanishes_after_the_config_check_is_one_line(gone, tmp_path, capsys, monkeypatch):
    """``data=`` is checked with the config; deleted (or its images) before the ablation reads it again: exit 2, one
    line naming the dataset YAML and what is missing, never a traceback; nothing is trained."""
    import shutil

    import attn_yolo.ablate.runs.runner as runner
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "own", n_train=2, n_val=2, imgsz=64, seed=0)
    capsys.readouterr()  # the generator's line
    checked = runner.validate

    def then_deleted(*a, **k):
        ab = checked(*a, **k)
        (data.unlink() if gone == "data.yaml" else shutil.rmtree(data.parent / "images"))
        return ab

    monkeypatch.setattr(runner, "validate", then_deleted)
    assert cli_main(["ablate", str(write_config(tmp_path, data))]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"error: attn-yolo ablate: data: {data} is no longer usable (it was when the config was "
                          "checked): ") and err.endswith("; restore it, or give data= a dataset that stays")
    assert (f"'{data}' does not exist" if gone == "data.yaml" else f"missing path '{data.parent / 'images'}") in err
    assert not (tmp_path / "out" / "runs").exists()  # nothing trained


@pytest.mark.parametrize("argv, head", [
    (["ablate", "train.epochs=x"], "error: the default config of attn-yolo ablate "
                                   "(configs/ablation/synthetic-quick.yaml): train.epochs: "),
    (["ablate", "data=DATA", "seeds.min=x"], "error: the default config of attn-yolo ablate "
                                             "(configs/ablation/synthetic-quick.yaml): seeds.min: "),
    (["search", "seeds=3"], "error: the default config of attn-yolo search: seeds: "),
    (["search", "budget.x=1"], "error: attn-yolo search: budget.x: unknown key"),
    (["search", "nope.yaml"], "error: attn-yolo search: config file not found: nope.yaml"),
])
def test_the_embedded_defaults_problems_name_the_default_config_and_the_tool(argv, head, tiny_data, capsys,
                                                                             monkeypatch, tmp_path):
    """A problem of the embedded default config is named by what it is (the tool's default config, and the file of the
    same text), never by its own name (`<default synthetic-quick>` for a run on other data); a search's own problems
    name `attn-yolo search`; a key given on the command line says so, dotted ones too."""
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("DATA", str(tiny_data)) for a in argv]
    assert cli_main(argv) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(head) and "synthetic-quick>" not in err and "<default" not in err, err
    if "." in argv[1] and "=" in argv[1] and "budget" not in argv[1]:
        assert err.endswith(f"(from the command line: {argv[-1]})"), err


def test_an_empty_data_value_is_refused_as_such(capsys):
    """``data=`` with nothing after it names the empty value, not whatever YAML Ultralytics' file search finds."""
    assert cli_main(["ablate", "data="]) == 2
    assert "data: ''; expected a dataset YAML path or a setting name such as `synthetic`" in one_line(
        capsys.readouterr().err)


def test_a_named_synthetic_setting_reaches_ultralytics_as_its_yaml(ran, tiny_data, monkeypatch):
    """``data=synthetic-key`` on a pass-through command is that setting's cached YAML, as ``data: synthetic-key`` in
    an ablation config (the generator stubbed by a tiny dataset: the setting it was asked for is recorded)."""
    from attn_yolo import synthetic

    asked = []
    monkeypatch.setattr(synthetic, "default_data_yaml", lambda name: asked.append(name) or tiny_data)
    assert cli_main(["train", "model=yolo11n.yaml", "data=synthetic-key", "epochs=1"]) == 0
    assert asked == ["synthetic-key"] and f"data={tiny_data}" in ran[0]


def test_a_pass_through_dataset_without_its_images_is_one_line(ran, tmp_path, capsys):
    """``attn-yolo train data=...`` whose image folders are gone: one line from Ultralytics' own dataset check, exit 2,
    before its entrypoint runs (a traceback of two chained exceptions before)."""
    import shutil

    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "own", n_train=2, n_val=2, imgsz=64, seed=0)
    shutil.rmtree(data.parent / "images")
    capsys.readouterr()
    assert cli_main(["train", "model=yolo11n.yaml", f"data={data}", "epochs=1"]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"error: attn-yolo train: data='{data}' is not usable: Dataset") and "missing path" in err
    assert ran == []


def test_a_dataset_gone_while_the_command_runs_is_one_line(tmp_path, tiny_data, capsys, monkeypatch):
    """Deleted after the checks, while Ultralytics runs: its dataset error is one line (exit 2); any other error of
    Ultralytics' is not mistaken for it."""
    import attn_yolo.ultralytics_api as api

    def gone(argv):
        raise RuntimeError(f"Dataset '{tiny_data}' error ❌ Dataset images not found, missing path '/x/images'\nNote")

    monkeypatch.setattr(api, "run_cli", gone)
    assert cli_main(["train", "model=yolo11n.yaml", f"data={tiny_data}", "epochs=1"]) == 2
    assert one_line(capsys.readouterr().err) == (
        f"error: attn-yolo train: Dataset '{tiny_data}' error ❌ Dataset images not found, missing path '/x/images' "
        "(it was usable when the command started)")

    def other(argv):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(api, "run_cli", other)
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        cli_main(["train", "model=yolo11n.yaml", f"data={tiny_data}", "epochs=1"])


def test_a_typo_is_never_pointed_at_a_key_the_runner_refuses(capsys):
    """``seedz=3`` once got "did you mean 'seed'?", a train argument the runner sets itself and refuses (``seeds``)."""
    assert cli_main(["ablate", "seedz=3"]) == 2
    err = one_line(capsys.readouterr().err)
    assert "seedz: unknown key (did you mean 'seeds'?)" in err and "'seed'?" not in err


def test_an_image_size_out_of_range_is_refused_without_a_rounding_warning_first(capsys, warnings_):
    """``imgsz=5000`` once printed Ultralytics' "updating to [5024]" before refusing the value: one line now."""
    assert cli_main(["ablate", "imgsz=5000"]) == 2
    assert "train.imgsz: 5000; expected an int in 32..4096" in one_line(capsys.readouterr().err)
    assert warnings_ == []


def test_a_search_key_given_on_the_command_line_is_marked_so(capsys):
    """As the ablation's: a bad ``search.<key>=`` names where it came from (it read as a train argument before)."""
    assert cli_main(["search", "search.precision=-1"]) == 2
    assert one_line(capsys.readouterr().err).endswith("(from the command line: search.precision=-1)")
