"""Shared test setup: offline Ultralytics, headless plotting, parallel workers (pytest-xdist) kept apart, real-data
fixtures (skipped when absent).

The default run uses pytest-xdist (``pytest_cmdline_main`` below): one worker per CPU core (at most 4), each with one
torch / OpenMP thread, tests spread one by one except the groups of SHARE_A_WORKER, each run whole in one worker, in
order (``pytest_xdist_make_scheduler``). ``pytest -n 0`` or ``pytest -p no:xdist`` runs
serially; ``-n N`` sets the workers. Every process of a run (each worker, or the one serial process) gets its own
scratch folder, removed at its end, for the user-wide state the code reads and writes: Ultralytics' settings
(``YOLO_CONFIG_DIR``, with its datasets, runs and weights folders inside; the user's own settings are neither read
nor changed) and the synthetic-shapes cache (``ATTN_YOLO_DATA``). Everything else a test writes goes to its
``tmp_path`` (Ultralytics itself puts runs without an absolute ``project`` under its ``tests/tmp/runs/<worker>``).
"""

import json
import os
import tempfile

WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", ... in an xdist worker (set before conftest runs)
if WORKER:  # one thread per worker: 2 workers x 2 torch threads on 2 cores oversubscribe them (OpenMP spin-waits)
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[_var] = "1"  # read by torch and numpy at import, and by the subprocesses the tests start
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import hashlib  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

SCRATCH: str | None = None  # this pytest process's scratch folder (pytest_configure); not made where a test's
# subprocess (a Ray worker unpickling a test function) imports this module for its helpers
MAX_WORKERS = 4  # each worker holds torch, Ultralytics and OpenVINO (~1-2 GiB): more cores than this stay unused
SHARE_A_WORKER = {  # test-id prefix → group: a group's tests run in one worker, in order (pytest_xdist_make_scheduler)
    "tests/test_ablate_ray.py": "ray",  # one Ray instance at a time ...
    "tests/test_one_line_errors.py::test_ray_address_without_a_cluster_is_one_line": "ray",  # ... none while this runs
    "tests/test_readme.py": "readme",  # README order: later commands use the files earlier ones wrote
    "tests/test_docs.py": "docs",  # the guides' commands in page order, on one workspace
    "tests/test_warmstart.py": "warmstart",  # its module fixture trains a start: once
    "tests/test_health.py": "health",  # its module fixtures train and calibrate models: once
    "tests/test_explain.py": "explain",  # its module fixture runs a tiny ablation: once
    "tests/test_attention_check.py": "check",  # its module fixture trains a start that detects: once
}
_DEFAULT_DIST: list = []  # non-empty when pytest_cmdline_main chose the distribution


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With pytest-xdist installed and no ``-n`` given: one worker per usable CPU core (at most MAX_WORKERS); without
    ``--dist``: tests one by one, SHARE_A_WORKER's groups whole. Not in addopts, so that ``pytest -p no:xdist`` still
    parses. (Not xdist's ``loadgroup``: with pytest 9 its ``xdist_group`` marks group nothing.)"""
    if not config.pluginmanager.hasplugin("xdist") or WORKER:
        return
    if config.getoption("numprocesses", None) is None and not config.getoption("collectonly"):
        config.option.numprocesses = max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))
    if config.option.numprocesses and config.getoption("dist") == "no":
        config.option.dist = "loadscope"
        _DEFAULT_DIST.append(True)


def group_of(nodeid: str) -> str:
    """The scheduling unit of a test: its SHARE_A_WORKER group, else the test itself."""
    for prefix, group in SHARE_A_WORKER.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return group
    return nodeid


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown under `-p no:xdist`
def pytest_xdist_make_scheduler(config, log):
    """xdist's load-scope scheduler with ``group_of`` as the scope (largest units first, then one test at a time)."""
    if not _DEFAULT_DIST:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_configure(config):
    """This process's scratch folder: ``ATTN_YOLO_DATA`` and ``YOLO_CONFIG_DIR`` (a settings.json with the datasets,
    runs and weights folders inside it), set before any test module imports Ultralytics; one torch thread in a
    worker."""
    global SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix=f"attn-yolo-tests-{WORKER or 'main'}-")
    os.environ["ATTN_YOLO_DATA"] = os.path.join(SCRATCH, "data")
    os.environ["YOLO_CONFIG_DIR"] = os.path.join(SCRATCH, "config")  # read when Ultralytics is first imported
    os.makedirs(os.path.join(SCRATCH, "config", "Ultralytics"))
    dirs = {k: os.path.join(SCRATCH, k.removesuffix("_dir")) for k in ("datasets_dir", "runs_dir", "weights_dir")}
    with open(os.path.join(SCRATCH, "config", "Ultralytics", "settings.json"), "w") as f:
        json.dump(dirs, f)  # Ultralytics completes the other keys at its import, next line
    import logging

    import torch

    logging.disable(logging.WARNING)  # Ultralytics' one "settings updated to the latest schema" warning
    try:
        import ultralytics.utils  # noqa: F401  completes settings.json, before a test's subprocess reads it
    finally:
        logging.disable(logging.NOTSET)
    if WORKER:
        torch.set_num_threads(1)


def pytest_unconfigure(config):
    if SCRATCH:
        shutil.rmtree(SCRATCH, ignore_errors=True)


REPO = Path(__file__).resolve().parents[1]
COCO128 = REPO.parent / "shared" / "data" / "coco128"


@pytest.fixture(scope="session")
def assets() -> Path:
    """Folder of Ultralytics' bundled photos (bus.jpg, zidane.jpg)."""
    import ultralytics

    return Path(ultralytics.__file__).parent / "assets"


@pytest.fixture(scope="session")
def coco_few(tmp_path_factory) -> Path:
    """A writable copy of a few COCO128 images (8 train, 4 val) with labels; returns its data.yaml. Skips if absent."""
    if not (COCO128 / "data.yaml").exists():
        pytest.skip(f"COCO128 not found at {COCO128}")

    root = tmp_path_factory.mktemp("coco_few")
    for split, n in (("train2017", 8), ("val2017", 4)):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for img in sorted((COCO128 / "images" / split).glob("*.jpg"))[:n]:
            shutil.copy(img, root / "images" / split / img.name)
            label = COCO128 / "labels" / split / f"{img.stem}.txt"
            if label.exists():
                shutil.copy(label, root / "labels" / split / label.name)
    names = yaml.safe_load((COCO128 / "data.yaml").read_text())["names"]
    data = {"path": str(root), "train": "images/train2017", "val": "images/val2017", "names": names}
    (root / "data.yaml").write_text(yaml.safe_dump(data))
    return root / "data.yaml"


def oracle_predictions(validator, batch: dict, salt: str = "") -> list[dict]:
    """Detections for a validation batch made from its labels, in the validator's (letterboxed) pixels: 80% of the
    boxes found with 10% jitter (15% of them with the wrong class), three false positives per image, confidences
    sorted as NMS returns them. Deterministic per image file name and ``salt`` (not their folders: the same in every
    test session). Lets a 1-epoch test run score far from zero through Ultralytics' real validation."""
    import torch

    out = []
    for si in range(len(batch["im_file"])):
        gt = validator._prepare_batch(si, batch)
        g = torch.Generator().manual_seed(int.from_bytes(hashlib.sha256((Path(gt["im_file"]).name + salt).encode())
                                                         .digest()[:8], "little"))
        boxes, cls = gt["bboxes"].cpu().float().reshape(-1, 4), gt["cls"].cpu().float().reshape(-1)
        wh = (boxes[:, 2:] - boxes[:, :2]).repeat(1, 2)
        keep = torch.rand(len(boxes), generator=g) < 0.8
        noisy = boxes + 0.1 * wh * torch.randn(boxes.shape, generator=g)
        flip = torch.rand(len(boxes), generator=g) < 0.15
        cls = torch.where(flip, (cls + 1) % validator.nc, cls)
        side = float(min(batch["img"].shape[2:]))
        xy = torch.rand(3, 2, generator=g) * side * 0.7
        fp = torch.cat([xy, xy + side * (0.1 + 0.2 * torch.rand(3, 2, generator=g))], 1)
        conf = torch.cat([0.3 + 0.7 * torch.rand(int(keep.sum()), generator=g), 0.5 * torch.rand(3, generator=g)])
        order = conf.argsort(descending=True)
        out.append({
            "bboxes": torch.cat([noisy[keep], fp])[order].to(validator.device),
            "conf": conf[order].to(validator.device),
            "cls": torch.cat([cls[keep], torch.randint(0, validator.nc, (3,), generator=g).float()])[order]
            .to(validator.device),
            "extra": torch.zeros(len(conf), 0, device=validator.device),
        })  # fmt: skip
    return out


@pytest.fixture
def oracle():
    """``oracle_predictions`` (see there)."""
    return oracle_predictions


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    """8 train / 4 val synthetic-shapes images at 64 px."""
    from attn_yolo.synthetic import generate

    return generate(tmp_path_factory.mktemp("tiny") / "data", n_train=8, n_val=4, imgsz=64, seed=0)


def write_config(folder: Path, data: Path, **over) -> Path:
    """A tiny two-variant ablation config (baseline yolo11n, + CBAM at the backbone) on ``data``; ``over``: keys."""
    cfg = {
        "data": str(data),
        "variants": [
            {"name": "baseline", "model": "yolo11n.yaml"},
            {"name": "cbam", "base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]},
        ],
        "seeds": [0, 1],
        "train": {"epochs": 1, "imgsz": 64, "batch": 4, "workers": 0, "plots": False, "device": "cpu"},
        "out": str(folder / "out"),
        "latency": {"repeats": 3, "warmup": 1},
        **over,
    }
    path = folder / "ablation.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# ------------------------------------------------------------------------------- float64 references of the blocks
def randomized(m, seed: int = 0, std: float = 0.7):
    """``m`` in float64 with every parameter ~ N(0, std²) and BatchNorm statistics random, so no term can hide at
    its init value (the blocks' float64 reference tests)."""
    import torch

    torch.manual_seed(seed)
    m = m.double()
    for p in m.parameters():
        p.data = torch.randn_like(p) * std
    for b in m.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            b.running_mean.normal_(0, 0.5)
            b.running_var.uniform_(0.5, 2.0)
    return m


def bn(t, mod, train: bool):
    """BatchNorm over axis 1 of ``t`` written out: batch statistics (biased variance) in training, running ones in
    eval."""
    import torch

    dims = [d for d in range(t.dim()) if d != 1]
    shape = [1, -1] + [1] * (t.dim() - 2)
    if train:
        mean, var = t.mean(dims, keepdim=True), t.var(dims, unbiased=False, keepdim=True)
    else:
        mean, var = mod.running_mean.view(shape), mod.running_var.view(shape)
    return (t - mean) / torch.sqrt(var + mod.eps) * mod.weight.view(shape) + mod.bias.view(shape)


def x64(*shape, seed: int = 1):
    """A float64 input ~ N(0, 2²) of ``shape``, seeded."""
    import torch

    torch.manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64) * 2


class _AttnYoloLines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        if record.getMessage().startswith("attn-yolo: "):
            self.lines.append(record.getMessage())


@pytest.fixture
def log():
    """attn-yolo's lines (``attn-yolo: ...``) in Ultralytics' LOGGER during the test. The compatibility notes said
    before it are forgotten: each is said once per process (``attn_yolo.conventions.said_once``), so once per test."""
    from attn_yolo.conventions import forget_said

    forget_said()
    handler, logger = _AttnYoloLines(), logging.getLogger("ultralytics")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def truncated(d: dict, rows: int) -> dict:
    """Model dict ``d`` with its first ``rows`` rows only (the rest cannot change how those are built)."""
    all_rows, nb = d["backbone"] + d["head"], len(d["backbone"])
    return {**d, "backbone": all_rows[: min(rows, nb)], "head": all_rows[nb:rows]}


def trained_start(data: Path, folder: Path, **train) -> Path:
    """``best.pt`` of yolo11n trained on ``data`` into ``folder`` (1 epoch at 64 px unless ``train`` says otherwise):
    a checkpoint ``start:`` for a test ablation. A checkpoint start is not held to the recipe start's mAP floor
    (``attn_yolo.ablate.runs.start.START_FLOOR``), which a 1-epoch recipe on a few images would not reach."""
    from ultralytics import YOLO

    args = {"epochs": 1, "imgsz": 64, "batch": 4, "val": False, "plots": False, "device": "cpu", "workers": 0,
            "seed": 0, "verbose": False, **train}
    YOLO("yolo11n.yaml").train(data=str(data), project=str(folder), name="start", exist_ok=True, **args)
    return folder / "start" / "weights" / "best.pt"


def load_script(name: str):
    """A script of ``scripts/`` (``scripts/<name>.py``) as a module, for its ``main`` and tables."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
