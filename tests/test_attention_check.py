"""The attention check on really trained detectors: mean ablation against hooks written here, a block whose gates act
as a fixed rescale fails it, a block whose input-dependent gate matters passes it, and runs that reproduce.

One start serves every test: yolo11n really trained here on an easy synthetic set until it detects (about 3 minutes:
those tests are ``slow``, opt-in with ``pytest -m slow``); the tests run in one worker (``tests/conftest.py``:
SHARE_A_WORKER)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from conftest import trained_start

from attn_yolo.ablate.statistics import treatment
from attn_yolo.health.mean_ablation import MeanAblation

DATA = {"n_train": 640, "n_val": 64, "imgsz": 64, "seed": 3, "clutter": 0.0, "size_range": (0.3, 0.5)}  # easy shapes
TRAIN = {"epochs": 20, "imgsz": 64, "batch": 16, "optimizer": "AdamW", "lr0": 0.003, "warmup_epochs": 0.3,
         "mosaic": 0.0}  # from scratch to mAP50-95 0.14 on the 64 validation images (about 3 min on 2 cores)
IMGSZ = DATA["imgsz"]
slow = pytest.mark.slow  # the tests on the trained detector: its training alone is about 3 minutes


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """``(data.yaml, best.pt)``: yolo11n trained here from scratch on easy synthetic shapes until it detects
    (mAP50-95 > 0.1 on its validation images), so that mAP can move."""
    from attn_yolo.synthetic import generate

    root = tmp_path_factory.mktemp("check")
    data = generate(root / "data", **DATA)
    best = trained_start(data, root, **TRAIN)
    assert validate(data, load(best))["metrics/mAP50-95(B)"] > 0.1
    return data, best


def load(path):
    from attn_yolo.checkpoint import load_model

    return load_model(path, "weights", suffixes=(".pt",))


def validate(data, model, on_batch=None) -> dict:
    """Ultralytics' own DetectionValidator on ``model``; ``on_batch``: an ``on_val_batch_start`` callback."""
    from ultralytics.models.yolo.detect import DetectionValidator

    v = DetectionValidator(args={"data": str(data), "imgsz": IMGSZ, "batch": 8, "rect": True, "device": "cpu",
                                 "plots": False, "mode": "val", "verbose": False})
    if on_batch is not None:
        v.add_callback("on_val_batch_start", on_batch)
    return v(model=model)


def arm(start_pt, block: str, args: list, gamma: float, seed: int = 0):
    """The start with ``block`` after the backbone's P3/P4/P5 (weights carried by layer), its γ at ``gamma``; the
    block's own weights drawn with ``seed`` (N(0, 1)) so that its gates vary over images. Returns (model, paths)."""
    from attn_yolo.insertion import insert_dict, transfer

    d = insert_dict("yolo11n.yaml", block, "backbone", args, identity=True)
    model = transfer(str(start_pt), d, strict=True, verbose=False).model
    paths = ["model.5", "model.8", "model.13"]
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in paths:
            for n, w in model.get_submodule(p).named_parameters():
                if not n.endswith("gamma"):
                    w.copy_(torch.randn_like(w))
    treatment.set_gamma(model, paths, gamma)
    return model.eval(), paths


# ------------------------------------------------------------------------------- an independent mean ablation
GATES = {  # block → its gate submodules and the axes averaged besides the images, named here (not read from the code)
    "CBAM": {"channel.gate": (2, 3), "spatial.gate": (2, 3)},  # (B, C, 1, 1) per channel; (B, 1, H, W) in total
    "SE": {"gate": (2, 3)}, "CoordAtt": {"gate_h": (2, 3), "gate_w": (2, 3)},  # per channel
    "ECA": {"gate": ()},  # (B, 1, C): per channel
}


def by_hand(model, paths: list[str], block: str, data) -> float:
    """mAP50-95 of ``model`` with its blocks' gates replaced by their mean, written here: one validation keeps every
    gate output (after the first validation batch starts), the means are taken per image over the axes of ``GATES``,
    then over images; a second validation returns them. MHSA: each head's output is the plain mean
    of its values over the keys (uniform attention, explicitly)."""
    blocks = [model.get_submodule(p) for p in paths]
    if block == "MHSA":
        for b in blocks:
            b.attend = lambda q, k, v: (v.mean(-2, keepdim=True).expand_as(v).contiguous(), None)
        try:
            return validate(data, model)["metrics/mAP50-95(B)"]
        finally:
            for b in blocks:
                del b.attend
    seen, on = {}, []
    gates = [(b.get_submodule(g), (i, g)) for i, b in enumerate(blocks) for g in GATES[block]]
    hooks = [m.register_forward_hook(lambda mod, a, o, key=key: seen.setdefault(key, []).append(o.detach().double())
                                     if on else None) for m, key in gates]
    validate(data, model, lambda v: on.append(1))
    for h in hooks:
        h.remove()
    axes = {(i, g): GATES[block][g] for i, g in seen}
    means = {k: torch.cat([o.mean(axes[k], keepdim=True) if axes[k] else o for o in outs]).mean(0, keepdim=True)
             for k, outs in seen.items()}  # per image over the axes, then over images
    hooks = [m.register_forward_hook(lambda mod, a, o, key=key: means[key].to(o.dtype).expand_as(o))
             for m, key in gates]
    try:
        return validate(data, model)["metrics/mAP50-95(B)"]
    finally:
        for h in hooks:
            h.remove()


def by_tool(model, paths: list[str], data) -> float:
    mean = MeanAblation(model, paths)
    with mean.recording():
        validate(data, model, mean.arm)
    with mean.replacing():
        return validate(data, model)["metrics/mAP50-95(B)"]


@slow
@pytest.mark.parametrize("block, args", [("CBAM", [16, 7]), ("SE", [16]), ("ECA", [3]), ("CoordAtt", [32]),
                                         ("MHSA", [2])])
def test_mean_ablation_equals_hooks_written_here(start, block, args):
    """On the trained start with a random block at γ = 1: the tool's mean ablation and the one by hand give the same
    mAP50-95 to 1e-9, and it differs from the model's own (the ablation did something)."""
    data, best = start
    model, paths = arm(best, block, args, gamma=1.0)
    own = validate(data, copy.deepcopy(model))["metrics/mAP50-95(B)"]
    ref = by_hand(copy.deepcopy(model), paths, block, data)
    got = by_tool(copy.deepcopy(model), paths, data)
    assert got == pytest.approx(ref, abs=1e-9)
    assert got != own  # the ablation changed what the model detects


def test_the_warm_up_pass_is_not_counted():
    """Forward passes before ``arm`` (a validator's warm-up on an empty tensor, FLOPs in fuse) add nothing."""
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.insertion import insert_dict

    m = DetectionModel(insert_dict("yolo11n.yaml", "SE", "backbone", [16]), nc=4, verbose=False).eval()
    mean = MeanAblation(m, ["model.5"])
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad(), mean.recording():
        m(torch.full((1, 3, 64, 64), 1e6))  # before arm: ignored
        mean.arm()
        m(x)
    _, gate, g = mean.gates[0]
    seen = []
    h = gate.register_forward_hook(lambda mod, a, o: seen.append(o))
    with torch.no_grad():
        m(x)
    h.remove()
    assert torch.allclose(g.total / g.images, seen[0].double().mean((0, 2, 3)), atol=1e-12) and g.images == 2


@slow
# ------------------------------------------------------------------------------- both directions
def test_a_fixed_rescale_fails_and_attention_that_matters_passes(start, tmp_path):
    """Real validation of really trained starts through the run's own figures (``attention_figures``):

    - CBAM inserted at γ = 0.3 and not trained: its gates sit near 0.5 whatever the input, so it is a fixed rescale;
      the identity in its place moves mAP (the old knock-out criterion passed it), its mean gates barely do: not
      tested at the default design's resolution;
    - SAM whose spatial gate is hand-set to a steep function of the channel mean (``σ(8 (mean_c x − 0.5))``, γ = 1):
      the gate depends on the input, the model's outputs depend on it, and its mean in its place moves mAP by far
      more than the resolution: passed."""
    from attn_yolo.ablate.runs.records import RunSpec
    from attn_yolo.ablate.runs.train import attention_figures
    from attn_yolo.checkpoint import save_checkpoint

    data, best = start
    resolution = 0.006  # the default design's half-width at its stop
    figures = {}
    for name, block, args, gamma in (("rescale", "CBAM", [16, 7], 0.3), ("attends", "SAM", [7], 1.0)):
        model, paths = arm(best, block, args, gamma)
        if name == "rescale":  # CBAM's own init, untrained: redraw what arm() randomised
            model = treatment.reinitialised(model, paths, seed=0)
        else:
            for p in paths:
                conv = model.get_submodule(p).spatial.conv
                with torch.no_grad():
                    conv.weight.zero_()
                    conv.weight[0, 0, conv.kernel_size[0] // 2, conv.kernel_size[1] // 2] = 8.0
                    conv.bias.fill_(-4.0)
        pt = tmp_path / name / "best.pt"
        pt.parent.mkdir()
        save_checkpoint(model, pt)
        spec = RunSpec(variant=name, seed=0, model="", model_dict=None, data=str(data), train={"imgsz": IMGSZ},
                       run_dir=str(pt.parent), params=0, gflops=0.0, fingerprint="", new_blocks=paths)
        figures[name] = attention_figures(spec, pt, {"batch": 8, "device": "cpu"})
    rows = [{"variant": k, "seed": 0, "status": "ok", **f} for k, f in figures.items()]
    rescale = treatment.check(treatment.effect(rows, "rescale", [0]), -resolution, resolution)
    attends = treatment.check(treatment.effect(rows, "attends", [0]), -resolution, resolution)
    assert rescale["status"] == "failed" and rescale["knockout"] > resolution > rescale["A"]
    assert attends["status"] == "passed" and attends["A"] > resolution
    assert all(math.isfinite(f["reinit_effect"]) for f in figures.values())


# ------------------------------------------------------------------------------- runs that reproduce
RUNS = """
import json, pickle, random, sys
import attn_yolo
from attn_yolo.ablate.runs.train import execute_run
from ultralytics.utils import callbacks
once = []  # the first run of the process draws from Python's generator once, as MLflow's first run start does
callbacks.default_callbacks["on_pretrain_routine_start"].append(lambda t: once or once.append(random.random()))
print("MAPS", json.dumps([execute_run(spec)["map50_95"] for spec in pickle.load(open(sys.argv[1], "rb"))]))
"""


def in_process(specs: list, tmp_path, tag: str) -> list[float]:
    """The runs ``specs`` one after the other in one new Python process (as an ablation's worker runs them)."""
    import json
    import os
    import pickle
    import subprocess
    import sys

    path = tmp_path / f"{tag}.pkl"
    path.write_bytes(pickle.dumps(specs))
    out = subprocess.run([sys.executable, "-c", RUNS, str(path)], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "YOLO_OFFLINE": "1"})
    line = next((x for x in out.stdout.splitlines() if x.startswith("MAPS ")), None)
    assert line, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(line[5:])


@slow
def test_a_run_depends_only_on_its_settings_and_seed(start, tmp_path):
    """The same fine-tuning run (the baseline from the start, seed 0, flips on) in a new process, in a process after
    two other runs (another seed, a CBAM arm), and with validation after every epoch switched off: the same
    mAP50-95 to the last digit. Each process's first run draws once from Python's generator after the trainer
    seeded it, as Ultralytics' MLflow callback does (``mlflow.start_run`` names the run with it; measured: the same
    run gave 0.5820 as a process's first and 0.5854 after another): without ``attn_yolo.ultralytics_api.reseed``
    the first run's flips differ from a later one's."""
    import dataclasses

    from attn_yolo import ablate

    data, best = start
    raw = {"data": str(data), "start": str(best), "seeds": [0, 1, 2], "out": str(tmp_path / "out"), "health": False,
           "variants": [{"name": "baseline", "model": "yolo11n.yaml"},
                        {"name": "cbam", "base": "yolo11n.yaml", "module": "CBAM", "at": "backbone", "args": [16, 7]}],
           "train": {"epochs": 1, "fraction": 0.3, "imgsz": IMGSZ, "batch": 8, "nbs": 8, "optimizer": "AdamW",
                     "lr0": 0.0005, "warmup_epochs": 0, "mosaic": 0.0, "fliplr": 0.5, "val": True, "plots": False,
                     "device": "cpu", "workers": 0}}
    ab = ablate.validate(raw, tmp_path)
    specs = {(s.variant, s.seed): s for s in ablate.runs.runner.plan(ab, ab.data)}
    run = specs[("baseline", 0)]

    def at(spec, name, **train):
        return dataclasses.replace(spec, run_dir=str(tmp_path / name), train={**spec.train, **train})

    fresh = in_process([at(run, "fresh")], tmp_path, "fresh")[0]
    later = in_process([at(specs[("baseline", 2)], "b2"), at(specs[("cbam", 1)], "c1"), at(run, "later")], tmp_path,
                       "later")[-1]
    no_val = in_process([at(run, "noval", val=False)], tmp_path, "noval")[0]
    assert fresh > 0.05 and fresh == later == no_val
