"""One training run: train a variant with one seed, validate its best.pt (kept image by image), time it, and return
the run's record."""

from __future__ import annotations

import math
import shutil
import statistics
import time
import traceback
from pathlib import Path

import yaml

from attn_yolo.ablate.config import first_line
from attn_yolo.ablate.perimage import (
    RECORD_NAME,
    RecordingTrainer,
    RecordingValidator,
    record_from_validator,
    save_record,
)
from attn_yolo.ablate.records import RunSpec, box_metrics, epoch_fields, new_record
from attn_yolo.ablate.weighted_ap import size_ap
from attn_yolo.checkpoint import load_model


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN/Inf loss; the run is recorded as failed."""


def check_finite_loss(trainer) -> None:
    """Ultralytics ``on_train_epoch_end`` callback: raise ``NonFiniteLossError`` when the epoch's mean loss is NaN/Inf.

    Ultralytics continues after a NaN loss in the first epoch and retries later ones from last.pt; an ablation
    records such a run as failed instead.
    """
    tloss = getattr(trainer, "tloss", None)
    if tloss is None:
        return
    items = tloss.items() if isinstance(tloss, dict) else enumerate(tloss.reshape(-1).tolist())
    values = {str(k): float(v) for k, v in items}
    if not all(math.isfinite(v) for v in values.values()):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
        raise NonFiniteLossError(f"non-finite training loss in epoch {trainer.epoch + 1}: {shown}")


def measure_latency(weights: str | Path, imgsz: int, device=None, repeats: int = 50, warmup: int = 10) -> float:
    """Median batch-1 forward time of a checkpoint, in ms: fused, fp32, eval, no grad, ``imgsz`` × ``imgsz`` input.

    Args:
        weights: Ultralytics checkpoint (best.pt).
        imgsz: input side, pixels.
        device: Ultralytics device string (``"cpu"``, ``"0"``, ``""`` for auto); the first of a list is used.
        repeats: timed forward passes (the median is returned).
        warmup: untimed forward passes before.
    """
    import torch
    from ultralytics.utils.torch_utils import select_device

    dev = select_device(str(device or "").split(",")[0], verbose=False)
    model = load_model(weights, "weights", suffixes=(".pt",)).fuse().eval().to(dev)
    x = torch.zeros(1, 3, imgsz, imgsz, device=dev)
    times = []
    with torch.inference_mode():
        for i in range(warmup + repeats):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            model(x)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def execute_run(spec: RunSpec, device: str | None = None) -> dict:
    """Train one variant with one seed, validate its best checkpoint, time it; never raises for a failed run.

    The run folder is emptied first (a run is redone from scratch). An insert spec's model dict is written to the
    run folder as YAML and trained from there.

    Args:
        spec: the run.
        device: device for this run (from ``devices``), or None to use ``spec.train['device']``.

    Returns:
        The results.csv row: status ``ok``, or ``failed`` with the error (traceback in ``<run_dir>/error.txt``).
    """
    from ultralytics import YOLO  # attn_yolo (this package) has registered the blocks in this process

    run_dir = Path(spec.run_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    model = spec.model
    if spec.model_dict is not None:
        model = str(run_dir / spec.model)
        head = f"# attn-yolo ablate: variant {spec.variant}, made by attn_yolo.insert (spec in the ablation's config)\n"
        Path(model).write_text(head + yaml.safe_dump(spec.model_dict, sort_keys=False))
    train = dict(spec.train)
    if device is not None:
        train["device"] = device
    row = new_record(spec, str(train.get("device", "")) or "auto", model)
    t0 = time.perf_counter()
    try:
        yolo = YOLO(model)
        if isinstance(train.get("pretrained"), str):  # carry every weight to its layer, also past inserted blocks
            from attn_yolo.insertion import transfer

            print(f"attn-yolo ablate: {transfer(train.pop('pretrained'), yolo, strict=False, verbose=False)}")
        yolo.add_callback("on_train_epoch_end", check_finite_loss)
        metrics = yolo.train(data=spec.data, seed=spec.seed, project=str(run_dir.parent), name=run_dir.name,
                             exist_ok=True, trainer=RecordingTrainer, **train)
        row["train_time_s"] = time.perf_counter() - t0
        best = run_dir / "weights" / "best.pt"
        if not best.exists():
            raise FileNotFoundError(f"training wrote no {best}")
        box, validator = box_metrics(metrics), yolo.trainer.validator
        if box is None:  # e.g. multi-GPU training validates in its worker: validate best.pt here
            validator = RecordingValidator(args={
                "model": str(best), "data": spec.data, "imgsz": spec.imgsz, "batch": train.get("batch", 16),
                "rect": True, "device": str(train.get("device", "")).split(",")[0], "plots": False, "mode": "val",
                "project": str(run_dir), "name": "val", "exist_ok": True,
            })  # fmt: skip
            box = box_metrics(validator(model=str(best)))
        row.update(box)
        try:  # the final validation, image by image (perimage.npz): image-level intervals, size APs
            record = record_from_validator(validator, box)
            save_record(record, run_dir / RECORD_NAME)
            row.update(size_ap(record))
        except Exception as e:  # the run stands; its comparisons fall back to seeds-only intervals
            (run_dir / "perimage-error.txt").write_text(traceback.format_exc())
            print(f"attn-yolo ablate: WARNING no per-image record for {run_dir.name}: {first_line(e)}", flush=True)
        row.update(epoch_fields(run_dir))
        if not all(math.isfinite(v) for v in box.values()):
            raise NonFiniteLossError(f"non-finite validation metrics of best.pt: {box}")
        row["latency_ms"] = measure_latency(best, spec.imgsz, train.get("device"), **spec.latency)
        row["status"] = "ok"
    except Exception as e:
        row.setdefault("train_time_s", time.perf_counter() - t0)
        row["error"] = first_line(e)
        (run_dir / "error.txt").write_text(traceback.format_exc())
    return row
