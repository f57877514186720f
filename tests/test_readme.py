"""README.md runs as written, offline: its Python example and every `attn-yolo` (and `python scripts/...`) command it
shows, parsed from its code blocks and inline code, in README order, in a scratch folder that holds the repository's
models/, configs/, data/ and scripts/.

The data is the embedded synthetic dataset, made tiny (8 train / 4 val images at 64 px) wherever the README uses it:
`data: synthetic` / `data=synthetic` and `default_data_yaml()` (module defaults patched, cache in the scratch
folder); Ultralytics' datasets_dir points at an empty scratch path, and no command may write a second copy there.
Paths the README marks for the user to fill in (`path/to/...`) get tiny stand-ins. The network is cut off (socket
lookups and connections fail). Commands that would train or measure for long get tiny overrides appended (later
`key=value` tokens win). The commands later in the README use the files the earlier ones wrote
(runs/detect/train/weights/best.pt), as a reader's would, so the cases run in README order.
"""

from __future__ import annotations

import re
import runpy
import shlex
import socket
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import yaml
from conftest import trained_start

from attn_yolo import synthetic
from attn_yolo_console import TOOLS
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
COCO128 = REPO.parent / "shared" / "data" / "coco128" / "data.yaml"
TINY = {"n_train": 8, "n_val": 4, "imgsz": 64}
TRAIN_KW = {"epochs": 1, "imgsz": 64, "batch": 4, "workers": 0, "device": "cpu", "plots": False}
TRAIN = [f"{k}={v}" for k, v in TRAIN_KW.items()]
BENCH = ["quick=True", "sections=timm", "variants=eca", "repeats=1", "rounds=1", "threads=2", "out="]


def readme_commands(text: str = README) -> list[str]:
    """Every `attn-yolo ...` and `python scripts/<x>.py ...` command of the README, in order, each once: lines of
    ```bash blocks (after `&&`, without `  # comments`; comment lines are output) and inline code that is a whole
    command (a sub-command, then `help` or key=value tokens: not `attn-yolo ...` or `attn-yolo <tool> help`)."""
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```|`([^`]+)`", text, re.DOTALL | re.MULTILINE):
        if m.group(3) is not None:  # inline code, possibly wrapped over lines
            span = " ".join(m.group(3).split())
            if re.fullmatch(r"(attn-yolo [a-z]+|python scripts/\w+\.py)( help| [\w.]+=\S+| \S+\.yaml)*", span):
                found.append(span)
            continue
        if m.group(1) != "bash":
            continue
        for line in m.group(2).splitlines():
            line = line.split("  #")[0].strip()
            for part in ([] if line.startswith("#") else line.split("&&")):
                if part.strip().startswith(("attn-yolo ", "python scripts/")):
                    found.append(part.strip())
    return list(dict.fromkeys(found))


def python_examples(text: str = README) -> list[str]:
    """The ```python blocks of the README."""
    return re.findall(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


COMMANDS = readme_commands()


def test_readme_commands_are_found():
    """The parser sees the README's commands: every tool, a pass-through mode, a script, and the opening command."""
    tools = {shlex.split(c)[1] for c in COMMANDS if c.startswith("attn-yolo ")}
    guided = {t for t in TOOLS if (REPO / "docs" / "guides" / f"{t}.md").is_file()}  # documented in its own guide
    assert set(TOOLS) - guided <= tools and {"train", "val"} <= tools, COMMANDS
    assert COMMANDS[0] == "attn-yolo ablate"  # the main job of the opening lines
    assert any(c.startswith("python scripts/") for c in COMMANDS)
    assert not any("..." in c or "<" in c for c in COMMANDS)
    assert len(python_examples()) == 1


def offline(name: str):
    """A stand-in for a socket function that fails as on a machine without a network (Ultralytics' own online checks
    then take their offline path; anything that needs a download fails the command)."""

    def refuse(*args, **kwargs):
        raise OSError(f"network disabled in the README test ({name})")

    return refuse


def test_readme_install_and_caches(monkeypatch):
    """The CPU/GPU choice comes before the opening commands: the CPU-only torch install from PyTorch's CPU index,
    then the two opening commands (the project, the tests); the caches the code writes are listed where the code puts
    them (docs/reference/files.md); scale-letter model names are explained."""
    from attn_yolo.bench import parse_args

    blocks = re.findall(r"^```(\w*)\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
    bash = "\n".join(body for lang, body in blocks if lang == "bash")
    lines = [line.split("  #")[0].strip() for line in bash.splitlines()]
    cpu = "pip install torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cpu"
    assert lines[:3] == [cpu, "pip install -e . && attn-yolo ablate", 'pip install -e ".[dev]" && pytest']
    before = " ".join(README[:README.index(cpu)].split())
    assert "without a CUDA GPU, install the CPU build first" in before and "skip that line" in before
    caches = (REPO / "docs" / "reference" / "files.md").read_text()
    monkeypatch.delenv("ATTN_YOLO_DATA", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    home_cache = "~/" + synthetic.cache_dir().relative_to(Path.home()).as_posix()
    shapes = yaml.safe_load((REPO / "data" / "synthetic-shapes.yaml").read_text())["path"]
    bench_cache = Path(parse_args([])["cache"])
    assert bench_cache.parent == Path(tempfile.gettempdir())
    for where in ("$ATTN_YOLO_DATA", f"{home_cache}/synthetic-shapes-v{synthetic.VERSION}-<key>/",
                  f"<datasets_dir>/{shapes}/", f"`<temp folder>/{bench_cache.name}/`"):
        assert where in caches, where
    for name in re.findall(r"models/yolo11[nslmx]-\w+\.yaml", README):  # no such files: the scale letter says why
        assert not (REPO / name).exists() and (REPO / re.sub(r"yolo11[nslmx]-", "yolo11-", name)).is_file()
    flat = " ".join(README.split())
    assert "There is no file models/yolo11n-cbam.yaml: Ultralytics reads the scale letter n from the name" in flat


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A scratch working directory as a reader's checkout, with tiny data; returns (folder, placeholder paths)."""
    from ultralytics import YOLO

    root = tmp_path_factory.mktemp("readme")
    for name in ("models", "configs", "data", "scripts"):
        (root / name).symlink_to(REPO / name)
    tiny = synthetic.generate(root / "tiny", **TINY)
    images = root / "images"
    images.mkdir()
    for f in sorted((tiny.parent / "images" / "val").glob("*.jpg"))[:2]:
        (images / f.name).write_bytes(f.read_bytes())
    YOLO("yolo11n.yaml").save(str(root / "yolo11n.pt"))
    fill = {"path/to/data.yaml": tiny, "path/to/coco128/data.yaml": tiny, "path/to/yolo11n.pt": root / "yolo11n.pt",
            "path/to/images": images}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket, "getaddrinfo", offline("getaddrinfo"))  # offline: any lookup or connection fails
        mp.setattr(socket.socket, "connect", offline("connect"))
        mp.setattr(socket.socket, "connect_ex", offline("connect_ex"))
        mp.chdir(root)
        mp.setenv("ATTN_YOLO_DATA", str(root / "cache"))  # data: synthetic, default_data_yaml()
        for key, value in TINY.items():
            mp.setattr(synthetic, key.upper(), value)
        mp.setattr("ultralytics.data.utils.DATASETS_DIR", root / "datasets")
        mp.setattr(sys, "argv", list(sys.argv))  # the pass-through CLI sets sys.argv
        yield root, {k: str(v) for k, v in fill.items()}


def tiny_checkpoint(root: Path) -> Path:
    """A 1-epoch yolo11n on the README's (tiny) embedded data, trained once per workspace."""
    from attn_yolo.synthetic import default_data_yaml

    best = root / "start" / "start" / "weights" / "best.pt"
    return best if best.exists() else trained_start(default_data_yaml(), root / "start")


def tiny_overrides(argv: list[str], root: Path) -> list[str]:
    """Tokens appended to a README command so that it runs in seconds (none for `help` and quick commands)."""
    tool = argv[0]
    if "help" in argv:
        return []
    if tool in ("ablate", "scripts/ablate.py"):
        default = not any(a.endswith((".yaml", ".yml")) for a in argv[1:])  # the embedded config: a warm start
        # its shared start: a 1-epoch checkpoint, not a 5-epoch recipe; a 1-epoch recipe detects nothing and stops the
        # ablation (attn_yolo.ablate.runs.start.START_FLOOR)
        start = [f"start={tiny_checkpoint(root)}"] if default else []
        return [*TRAIN, "seeds=[0]", "latency={'repeats':3,'warmup':1}", *start]
    if tool in ("bench", "scripts/bench.py"):
        return BENCH
    if tool in ("export", "heatmap"):
        return ["imgsz=64"]
    if tool == "explain":  # the README's ablations ran with the overrides above: their out folders carry suffixes
        done = sorted(p.parent for p in (root / "runs" / "ablate").glob("*/config.yaml"))
        return [f"out={done[0]}", "cam=none"] if done else []
    if tool == "scripts/export_matrix.py":  # one block, ONNX columns, BENCHMARKS.md left alone
        return ["blocks=SE", "formats=onnx", "write="]
    if tool == "scripts/gpu_check.py":  # exits 2 at once without CUDA (checked below)
        return []
    if tool == "scripts/joint_verdicts.py":
        return ["experiments=200"]
    if tool == "scripts/bench_bootstrap.py":
        return ["--variants", "2", "--seeds", "2", "--images", "50", "--resamples", "50"]
    if tool not in TOOLS:  # an Ultralytics mode (train, val): Ultralytics would write under its own runs_dir
        return [*TRAIN, f"project={root / 'runs' / 'detect'}"]
    return []


def confident(best: Path, images: list[Path], top: float = 0.6) -> None:
    """Make a barely trained checkpoint emit boxes: add one constant to every class logit of its Detect head (the
    last conv of each ``cv3`` branch) so that its highest score on ``images`` becomes ``top``. The ranking of its
    scores and its box regression stay its own, so the export check compares real torch and onnxruntime detections
    (a 1-epoch model on 8 images scores ~1e-3 everywhere: nothing above conf=0.25 to compare)."""
    import math

    import cv2
    from ultralytics import YOLO

    ckpt = torch.load(best, weights_only=False)  # this test's own file
    yolo = YOLO(str(best))
    pmax = max(float(r.boxes.conf.max()) for r in yolo.predict([cv2.imread(str(f)) for f in images], conf=1e-9,
                                                                    imgsz=64, verbose=False) if len(r.boxes))
    shift = math.log(top / (1 - top)) - math.log(pmax / (1 - pmax))
    for key in ("model", "ema"):
        if ckpt.get(key) is not None:
            for branch in ckpt[key].model[-1].cv3:
                branch[-1].bias.data += shift
    torch.save(ckpt, best)


def run_as_reader(command: str, root: Path, fill: dict, where: str = "README") -> tuple[int, list[str]]:
    """Run a documented command as a reader would, in the workspace ``root``: placeholders filled in from ``fill``,
    tiny overrides appended; ``python scripts/<x>.py`` as ``__main__``, anything else through ``attn-yolo``'s main.
    Before the first export, the trained best.pt is made to emit boxes (``confident``). Returns (exit code, argv)."""
    for placeholder in re.findall(r"/?path/to/[\w./-]+", command):
        assert placeholder in fill, f"{where} placeholder {placeholder!r} has no stand-in in this test"
        command = command.replace(placeholder, fill[placeholder])
    argv = shlex.split(command)
    if argv[0] == "python":  # python scripts/<x>.py ...: the script as __main__
        script, args = argv[1], argv[2:]
        args += tiny_overrides([script, *args], root)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "argv", [script, *args])
            with pytest.raises(SystemExit) as e:
                runpy.run_path(str(REPO / script), run_name="__main__")
        return e.value.code, argv
    args = argv[1:] + tiny_overrides(argv[1:], root)
    best = root / "runs/detect/train/weights/best.pt"
    if argv[1] == "export" and best.exists() and not (root / "confident").exists():
        confident(best, sorted((root / "cache").rglob("images/val/*.jpg"))[:2])  # data=synthetic: the cache
        (root / "confident").touch()
    with pytest.MonkeyPatch.context() as mp:  # Ultralytics' CLI reads the sys.argv it saw at import, not ours
        mp.setattr("ultralytics.cfg.ARGV", ["attn-yolo", *args])
        return cli_main(args), argv


@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.slow) if ("coco128-quick.yaml" in c and "path/to" not in c)
     or "warmstart_study.py" in c else c  # the study: 8 arms x 8 seeds of the default (about 40 min)
     for c in COMMANDS],
)
def test_readme_command(command, workspace, capsys):
    """The command as the README shows it, placeholders filled in, tiny overrides appended: exit code 0."""
    root, fill = workspace
    if "ray_address=auto" in command:  # tests/test_ablate_ray.py runs the Ray backend on a local instance
        pytest.skip("needs a running Ray cluster (`ray start --head` first)")
    if "coco128-quick.yaml" in command and "path/to" not in command and not COCO128.exists():
        pytest.skip(f"COCO128 not found at {COCO128}")  # the config's data lies beside the repository
    code, argv = run_as_reader(command, root, fill)
    out = capsys.readouterr()
    assert not (root / "datasets").exists(), f"{command}: a second copy of the dataset under datasets_dir"
    if command.startswith("python scripts/gpu_check.py") and not torch.cuda.is_available():
        assert code == 2 and "gpu_check: no CUDA device" in out.out + out.err  # said at once, before any work
        return
    assert code == 0, f"{command}\n{out.out[-3000:]}\n{out.err[-3000:]}"
    if argv[1:2] == ["export"] and "onnx=" not in command:  # the model's own val images, detections compared
        nms = [line for line in out.out.splitlines() if line.strip().startswith(("PASS", "FAIL", "NOT RUN"))
               and " nms " in line]
        assert nms and all(line.strip().startswith("PASS") and " matched of " in line for line in nms), out.out
        assert "images: val_00000.jpg, val_00001.jpg" in out.out and "bus.jpg" not in out.out, out.out


@pytest.mark.parametrize("index", range(len(python_examples())))
def test_readme_python_example(index, workspace, monkeypatch):
    """Each Python example, executed as written; Ultralytics' train gets the tiny overrides."""
    from ultralytics.engine.model import Model

    root, _ = workspace
    train, seen = Model.train, []

    def tiny_train(self, **kw):
        seen.append(kw)
        return train(self, **{**kw, **TRAIN_KW, "project": str(root / "runs" / "python")})

    monkeypatch.setattr(Model, "train", tiny_train)
    code = python_examples()[index]
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102  the README example, as a reader runs it
    assert len(seen) == 1 and Path(seen[0]["data"]) == synthetic.default_data_yaml()  # the embedded data, no download
    assert list((root / "runs" / "python").glob("*/weights/best.pt"))
