"""One training run: train a variant with one seed, validate its best.pt image by image, and return its record.

Its latency is timed after all runs, apart from training (``attn_yolo.ablate.runs.latency``)."""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from pathlib import Path

import yaml

from attn_yolo import ultralytics_api as api
from attn_yolo.ablate.config.ablation import first_line
from attn_yolo.ablate.runs.perimage import (
    PERIMAGE_NAME,
    RecordingTrainer,
    RecordingValidator,
    record_from_validator,
    save_record,
)
from attn_yolo.ablate.runs.records import RunSpec, box_metrics, epoch_fields, new_record
from attn_yolo.ablate.statistics.treatment import KNOCKOUT_NAME, block_parameters, knocked_out, reinitialised, set_gamma
from attn_yolo.ablate.statistics.weighted_ap import size_ap
from attn_yolo.checkpoint import load_model
from attn_yolo.health import attach
from attn_yolo.health.mean_ablation import MeanAblation
from attn_yolo.sdpa import fuse_attention


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN/Inf loss; the run is recorded as failed."""


def check_finite_loss(trainer) -> None:
    """Ultralytics ``on_train_epoch_end`` callback: raise ``NonFiniteLossError`` when the epoch's mean loss is NaN/Inf.

    Ultralytics continues after a NaN loss in the first epoch and retries later ones from last.pt; an ablation
    records such a run as failed instead.
    """
    values = api.epoch_losses(trainer)
    if values is None:
        return
    if not all(math.isfinite(v) for v in values.values()):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        raise NonFiniteLossError(f"non-finite training loss in epoch {trainer.epoch + 1}: {shown}")


def count_images(split) -> int:
    """Images of a dataset split as Ultralytics lists them: a folder (searched recursively), a ``.txt`` list of image
    paths, or a list of these."""
    from ultralytics.data.utils import IMG_FORMATS

    n = 0
    for p in map(Path, split if isinstance(split, list) else [split]):
        if p.is_dir():
            n += sum(f.suffix[1:].lower() in IMG_FORMATS for f in p.rglob("*.*"))
        elif p.is_file():
            n += sum(1 for line in p.read_text(encoding="utf-8-sig").splitlines() if line.strip())
    return n


def time_steps(spec: RunSpec, nc: int, device=None) -> tuple[float, float]:
    """``(step_s, val_s)`` for the first estimate of a run (``eta.prior``): one timed forward + backward of the run's
    model on a random training batch (``batch × 3 × imgsz²``), and one forward without gradients of twice that batch,
    after one untimed step each. No weights are saved; the run itself builds its own model."""
    import torch
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils.torch_utils import select_device

    batch = spec.train.get("batch", 16)
    batch = batch if isinstance(batch, int) and batch > 0 else 16
    dev = select_device(str(device if device is not None else spec.train.get("device", "")).split(",")[0],
                        verbose=False)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    model = DetectionModel(spec.model_dict or spec.model, nc=nc, verbose=False).to(dev)
    x = torch.rand(batch, 3, spec.imgsz, spec.imgsz, device=dev)

    def total(o):  # a scalar from the model's training output (tensors, lists or dicts of them)
        if torch.is_tensor(o):
            return o.float().sum()
        return sum(total(v) for v in (o.values() if isinstance(o, dict) else o))

    def step():
        model.train()
        total(model(x)).backward()

    def val():
        model.eval()
        with torch.no_grad():
            model(torch.cat([x, x]))

    out = []
    for fn in (step, val):
        fn()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out[0], out[1]


@contextlib.contextmanager
def environment(env: dict):
    """Set environment variables for the duration of a ``with`` block, then restore them."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_arm(spec: RunSpec, model: str, train: dict):
    """The YOLO a run trains: built from ``model``; with ``spec.start`` (the design's shared start) or
    ``train['pretrained']`` (popped), every weight of that checkpoint carried to its layer (``attn_yolo.transfer``),
    inserted blocks at the identity, so that at step 0 the arm predicts exactly what the start predicts.

    The model is built right after ``torch.manual_seed(spec.seed)``: the weights no checkpoint provides (an inserted
    block's, a model from scratch) are the same for the same seed in any process, also where the trainer keeps them
    (a warm start's model goes to the trainer as it is, built before Ultralytics seeds its own RNG).

    Raises:
        InsertionError: the checkpoint does not fit (with ``spec.start``, any tensor that does not load).
    """
    import torch
    from ultralytics import YOLO

    torch.manual_seed(spec.seed)
    yolo = YOLO(model)
    carry = spec.start or train.pop("pretrained", None)
    train.pop("pretrained", None)
    if isinstance(carry, str):  # carry every weight to its layer, also past inserted blocks
        from attn_yolo.insertion import transfer

        report = transfer(carry, yolo, strict=spec.start is not None, verbose=False, trust=spec.trust)
        print(f"attn-yolo ablate: {'start' if spec.start else 'pretrained'}: {report}")
        if spec.new_blocks and spec.gamma:  # the design's new_blocks.gamma: γ ≠ 0 at step 0
            n = set_gamma(yolo.model, spec.new_blocks, spec.gamma)
            print(f"attn-yolo ablate: new blocks: {n} residual gates start at γ = {spec.gamma:g}")
    return yolo


def arm_trainer(spec: RunSpec) -> type:
    """The trainer class of a run: ``RecordingTrainer``, whose optimizer gives the arm's new blocks
    (``spec.new_blocks``) ``spec.lr_mult`` × lr0 (``ultralytics_api.boost_params``), and which runs the probe phase
    first (``spec.probe_steps``: the new blocks alone at ``spec.probe_lr_mult`` × lr0; in the baseline, which has none,
    every weight still: ``ultralytics_api.probe_phase``)."""
    if not spec.probe_steps and (not spec.new_blocks or spec.lr_mult == 1):
        return RecordingTrainer
    paths, mult = tuple(spec.new_blocks or ()), spec.lr_mult
    steps, probe_mult = spec.probe_steps, spec.probe_lr_mult

    class ArmTrainer(RecordingTrainer):
        """``RecordingTrainer`` with the new blocks' parameters in parameter groups of their own at ``mult`` × lr."""

        def build_optimizer(self, model, *args, **kwargs):
            optimizer = super().build_optimizer(model, *args, **kwargs)
            names = set(block_parameters(model, list(paths)))
            own = {id(p) for n, p in model.named_parameters() if n in names}
            moved = api.boost_params(optimizer, own, mult)
            print(f"attn-yolo ablate: new blocks: {moved} parameter tensors at {mult:g} × lr0", flush=True)
            if steps:
                self.add_callback("on_train_batch_start", api.probe_phase(own, steps, probe_mult))
                print(f"attn-yolo ablate: probe phase: {steps} steps, new blocks alone at {probe_mult:g} × lr0",
                      flush=True)
            return optimizer

    return ArmTrainer


def standalone_val_args(spec: RunSpec, best: Path, train: dict, name: str, **extra) -> dict:
    """Ultralytics validator arguments that validate a run's ``best.pt`` on its data outside the trainer, into
    ``<run_dir>/<name>``: its imgsz, batch and (first) device, rectangular batches, no plots."""
    return {"model": str(best), "data": spec.data, "imgsz": spec.imgsz, "batch": train.get("batch", 16), "rect": True,
            "device": str(train.get("device", "")).split(",")[0], "plots": False, "mode": "val",
            "project": str(spec.run_dir), "name": name, "exist_ok": True, **extra}


def _validate(spec: RunSpec, model, args: dict, on_batch=None):
    """``(box metrics, validator)`` of ``model`` validated with standalone ``args``; ``on_batch``: an
    ``on_val_batch_start`` callback (after any warm-up pass, so that it sees only the validation images)."""
    validator = RecordingValidator(args=args)
    if on_batch is not None:
        validator.add_callback("on_val_batch_start", on_batch)
    return box_metrics(validator(model=model)), validator


CHECK_PASSES = 4  # validations of best.pt by the attention check (``attention_figures``), after the run's own


def attention_figures(spec: RunSpec, best: Path, train: dict) -> dict:
    """The attention check's figures of a run (``attn_yolo.ablate.statistics.treatment``): its ``best.pt`` validated with the
    same standalone validator settings four times: as trained (recording its new blocks' mean gates), with its gates
    and attention held at their mean (``MeanAblation``), with every new block knocked out (the identity; image by
    image in ``perimage-knockout.npz``) and with the blocks' weights re-initialised, ``γ`` kept (``reinitialised``).

    Returns:
        ``{"attention_check", "standalone_map50_95", "knockout_map50_95", "mean_ablation_effect",
        "knockout_effect", "reinit_effect"}``: ``attention_check`` the criterion that applies (``"mean
        ablation"``, or ``"knock-out"`` for blocks with nothing to hold at a mean); the last three are the
        standalone mAP50-95 minus the mean-ablated (NaN for blocks without gates or attention, e.g. a ``Placebo``),
        knocked-out and re-initialised ones.
    """
    args = standalone_val_args(spec, best, train, "val-knockout", verbose=False)
    model = load_model(best, "weights", suffixes=(".pt",))
    mean = MeanAblation(model, spec.new_blocks)
    with mean.recording():
        box, _ = _validate(spec, model, args, mean.arm)
    out = {"standalone_map50_95": box["map50_95"], "mean_ablation_effect": math.nan,
           "attention_check": "mean ablation" if mean.parts else "knock-out"}
    if mean.parts:
        with mean.replacing():
            out["mean_ablation_effect"] = box["map50_95"] - _validate(spec, model, args)[0]["map50_95"]
    fresh = load_model(best, "weights", suffixes=(".pt",))
    ko, validator = _validate(spec, knocked_out(fresh, spec.new_blocks), args)
    save_record(record_from_validator(validator, ko), Path(spec.run_dir) / KNOCKOUT_NAME)
    out["knockout_map50_95"] = ko["map50_95"]
    out["knockout_effect"] = box["map50_95"] - ko["map50_95"]
    redrawn = reinitialised(fresh, spec.new_blocks, seed=spec.seed)
    out["reinit_effect"] = box["map50_95"] - _validate(spec, redrawn, args)[0]["map50_95"]
    return out


def execute_run(spec: RunSpec, device: str | None = None) -> dict:
    """Train one variant with one seed, validate its best checkpoint, time it; never raises for a failed run.

    Trains into ``spec.run_dir``, which the runner has emptied (created if missing). An insert spec's model dict is
    written to the run folder as YAML and trained from there. ``spec.env`` is set during the run (tracking names).

    Args:
        spec: the run.
        device: device for this run (from ``devices``), or None to use ``spec.train['device']``.

    Returns:
        The results.csv row: status ``ok``, or ``failed`` with the error (traceback in ``<run_dir>/error.txt``).
    """
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    model = spec.model
    if spec.model_dict is not None:
        model = str(run_dir / spec.model)
        head = f"# attn-yolo ablate: variant {spec.variant}, made by attn_yolo.insert (spec in the ablation's config)\n"
        Path(model).write_text(head + yaml.safe_dump(spec.model_dict, sort_keys=False))
    train = dict(spec.train)
    if device is not None:
        train["device"] = device
    row = new_record(spec, str(train.get("device", "")) or "auto", model)
    with environment(spec.env):  # read by Ultralytics callbacks (MLflow experiment and run names)
        t0 = time.perf_counter()
        try:
            yolo = build_arm(spec, model, train)
            yolo.add_callback("on_train_start", api.reseed)  # the same run, the same batches, in any process
            yolo.add_callback("on_train_epoch_end", check_finite_loss)
            if spec.health:  # gates.csv, gates.png per run; stops the run at a NaN/inf in a block (attn_yolo.health)
                yolo.add_callback("on_pretrain_routine_start", attach)
            if spec.sdpa:
                fuse_attention(yolo)  # its trainer's model and EMA, also in DDP workers
            metrics = yolo.train(data=spec.data, seed=spec.seed, project=str(run_dir.parent), name=run_dir.name,
                                 exist_ok=True, trainer=arm_trainer(spec), **train)
            row["train_time_s"] = time.perf_counter() - t0
            best = run_dir / "weights" / "best.pt"
            if not best.exists():
                raise FileNotFoundError(f"training wrote no {best}")
            box, validator = box_metrics(metrics), yolo.trainer.validator
            if box is None:  # e.g. multi-GPU training validates in its worker: validate best.pt here
                validator = RecordingValidator(args=standalone_val_args(spec, best, train, "val"))
                box = box_metrics(validator(model=str(best)))
            row.update(box)
            try:  # the final validation, image by image (perimage.npz): image-level intervals, size APs
                record = record_from_validator(validator, box)
                save_record(record, run_dir / PERIMAGE_NAME)
                row.update(size_ap(record))
            except Exception as e:  # the run stands; its comparisons fall back to seeds-only intervals
                (run_dir / "perimage-error.txt").write_text(traceback.format_exc())
                print(f"attn-yolo ablate: WARNING no per-image record for {run_dir.name}: {first_line(e)}", flush=True)
            row.update(epoch_fields(run_dir))
            if not all(math.isfinite(v) for v in box.values()):
                raise NonFiniteLossError(f"non-finite validation metrics of best.pt: {box}")
            if spec.new_blocks:  # the attention check: does what the arm's blocks attend to matter to its model?
                row.update(attention_figures(spec, best, train))
            row["status"] = "ok"
        except Exception as e:
            row.setdefault("train_time_s", time.perf_counter() - t0)
            row["error"] = first_line(e)
            (run_dir / "error.txt").write_text(traceback.format_exc())
    return row
