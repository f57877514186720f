"""Section 4: training throughput (images/s) of each variant vs the baseline, on fixed random batches."""

from __future__ import annotations

import statistics

import torch
from torch import nn

from attn_yolo.bench.blocks import build_detector, detector_yamls
from attn_yolo.bench.common import Section, fmt, interleaved_times, median_ms, paired_ratio
from attn_yolo.markdown import table


def random_detection_batch(batch: int, imgsz: int, nc: int = 80, per_image: int = 4, seed: int = 0) -> dict:
    """A fixed random Ultralytics detection batch: ``img`` in [0, 1], ``per_image`` boxes (normalised xywh) each."""
    g = torch.Generator().manual_seed(seed)
    n = batch * per_image
    xy = torch.rand(n, 2, generator=g) * 0.6 + 0.2
    wh = torch.rand(n, 2, generator=g) * 0.25 + 0.05
    return {
        "img": torch.rand(batch, 3, imgsz, imgsz, generator=g),
        "batch_idx": torch.arange(batch).repeat_interleave(per_image).float(),
        "cls": torch.randint(0, nc, (n, 1), generator=g).float(),
        "bboxes": torch.cat((xy, wh), 1),
    }


def train_step_fn(model: nn.Module, batch: dict):
    """One training step of an Ultralytics detection model: loss forward, backward, SGD (Ultralytics' defaults)."""
    from ultralytics.cfg import get_cfg

    model.args = get_cfg()  # loss gains (box, cls, dfl) as the trainer sets them
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)

    def step():
        opt.zero_grad(set_to_none=True)
        loss, _ = model.loss(batch)
        loss.sum().backward()
        opt.step()

    return step


def train_section(cfg: dict) -> Section:
    """Section 4: images/s of loss forward+backward+SGD step, each variant vs baseline, interleaved."""
    imgsz, bs, iters = cfg["train_imgsz"], cfg["train_batch"], cfg["train_iters"]
    s = Section(f"4. Training throughput at {imgsz} (batch {bs})")
    batch = random_detection_batch(bs, imgsz)
    steps = {k: train_step_fn(build_detector(y).model, batch) for k, y in detector_yamls(cfg["variants"]).items()}
    torch.set_num_threads(cfg["threads"])
    t = interleaved_times(steps, iters)
    rows = [[k, fmt(median_ms(v)), fmt(bs / statistics.median(v)), fmt(1 / paired_ratio(v, t["baseline"]))]
            for k, v in t.items()]
    s.body += [
        f"Not Ultralytics' trainer (dataloader, EMA and AMP checks would dominate a few iterations): each step is "
        f"`model.loss(batch)` (Ultralytics' detection loss, default gains) forward+backward + SGD (lr 0.01, momentum "
        f"0.937, Nesterov) on one fixed random batch of {bs}×3×{imgsz}×{imgsz} with 4 boxes/image, from-scratch "
        f"weights, {cfg['threads']} threads. One warm-up round, then {iters} round-robin rounds; "
        "throughput ratio = 1 / median of per-round step-time ratios.",
        "",
        table(["model", "step ms", "images/s", "throughput × baseline"], rows),
    ]
    return s
