"""Measure: the health of every attention block of a detector on one fixed batch of images.

For each block (``attn_yolo.capture.attention_blocks``), one forward pass under ``capture.GateCapture`` records the
gates the block applied and turns them into the same maps the heatmap tool draws (``GATE_MAPS``, one definition of
a block's maps for both tools). From them, over the batch:

- ``gate_mean``, ``gate_std``: mean and standard deviation of every element of every gate the block applied
  (``GATE_MAPS``' gate submodules' outputs, e.g. CBAM's ``(B, C, 1, 1)`` channel gate and ``(B, 1, H, W)`` spatial
  gate, pooled); ``saturated``: the share of those elements ``< 0.01`` or ``> 0.99``.
- ``entropy``: the normalised Shannon entropy ``H(p) / ln N`` of each of the block's maps (``map_stats``'
  ``entropy_norm``, ``p = map / Σ map`` over the ``N = h·w`` cells), averaged over the images, then the smallest over
  the block's map kinds (the most structured one: 1.0 means every map of the block is flat). For ``MHSA`` it is the
  attention entropy of Zhai et al. (ICML 2023): ``H(softmax(q_i Kᵀ/√d)) / ln N`` per query ``i`` and head, averaged.
  NaN where ``N = 1`` (a 1×1 grid has no spatial structure to measure).
- ``peak_share``: the largest cell's share of a map's mass (``map_stats``), averaged over images, the largest over the
  block's maps; for ``MHSA`` the mean over queries and heads of the largest attention weight.
- ``gamma``: mean ``|γ|`` of the residual gate (``LayerScale``, ``init_values``); NaN without one.
- ``knockout``: ``‖f₋ᵦ(X) − f(X)‖₂ / ‖f(X)‖₂``, the relative change of the detector's raw head outputs (box
  distributions and class logits of ``Detect``, every anchor of every image) when this one block is replaced by the
  identity (its output replaced by its input). 0.0 exactly for a block that computes the identity (``γ = 0``).
- ``mean_ablation``: what the block's dependence on the input does to the detections: with this one block's gates
  held at their mean over the images and its attention uniform over its keys (``attn_yolo.health.mean_ablation``),
  the largest change of a class probability (sigmoid of ``Detect``'s class logits, in [0, 1]) at each anchor that
  detects something (a class probability ``> DETECTED``, 0.25, with or without the ablation), averaged over those
  anchors. A block that only rescales its input leaves the detections' scores as they were (``< 0.01``); one whose
  gates read a cue in the image and switch the detector with it moves them by tenths. NaN for a block that declares
  no gates or attention, or where no anchor detects anything.
- ``nonfinite``: NaN/inf elements in the block's gates or output in this pass.

All in float64 from the model's float32 tensors. The model is put in eval mode for the call and its mode restored.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
from torch import nn

from attn_yolo.capture import GateCapture, attention_blocks, attention_rows, block_gates, has_attention_weights
from attn_yolo.health.mean_ablation import MeanAblation
from attn_yolo.ultralytics_api.layers import head_tensors

SATURATION = 0.01  # a gate element < SATURATION or > 1 − SATURATION is saturated
DETECTED = 0.25  # an anchor with a class probability above it detects something (Ultralytics' default predict conf)
COLUMNS = ("gate_mean", "gate_std", "saturated", "entropy", "peak_share", "gamma", "knockout", "mean_ablation",
           "nonfinite")
"""The measured columns of a block's health, in ``gates.csv`` order."""


def block_name(key: tuple[int, str], block: nn.Module) -> str:
    """A block's name in outputs: ``L06_CBAM``, ``L06.1_CBAM`` (second repeat of layer 6)."""
    i, part = key
    return f"L{i:02d}{'.' + part if part else ''}_{type(block).__name__}"


def raw_outputs(out) -> torch.Tensor:
    """The detector's raw head outputs, flattened to ``(B, K)`` float64: ``Detect``'s ``boxes`` (DFL logits) and
    ``scores`` (class logits) of every anchor (``head_tensors``); every tensor of ``out`` when it has no such dict."""
    found = head_tensors(out)
    if not found:
        def every(o):
            if torch.is_tensor(o):
                yield o
            elif isinstance(o, dict | list | tuple):
                for v in o.values() if isinstance(o, dict) else o:
                    yield from every(v)

        found = list(every(out))
    b = found[0].shape[0]
    return torch.cat([t.detach().reshape(b, -1).double() for t in found], 1)


def class_probabilities(out) -> torch.Tensor:
    """``Detect``'s class probabilities ``(B, nc, A)`` float64: the sigmoid of its ``scores`` logits, every head
    branch's anchors concatenated (``head_tensors``); empty without them."""
    found = head_tensors(out, ("scores",))
    return torch.cat([t.detach().double().sigmoid() for t in found], -1) if found else torch.empty(0)


def detection_change(ablated: torch.Tensor, ref: torch.Tensor) -> float:
    """Mean over the anchors that detect in either pass (a class probability ``> DETECTED``) of the largest change
    of a class probability, ``(B, nc, A)`` each; NaN where none detects."""
    if not ref.numel():
        return math.nan
    detects = (ref.amax(1) > DETECTED) | (ablated.amax(1) > DETECTED)
    return float((ablated - ref).abs().amax(1)[detects].mean()) if bool(detects.any()) else math.nan


def relative_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """``‖a − b‖₂ / ‖b‖₂`` in float64 (0.0 when both are 0; inf when only ``b`` is)."""
    num, den = float((a - b).norm()), float(b.norm())
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


@torch.no_grad()
def attention_entropy(q: torch.Tensor, k: torch.Tensor, chunk: int = 256) -> tuple[float, float]:
    """``(mean normalised entropy, mean peak weight)`` of the attention rows ``softmax(q_i Kᵀ/√d)``.

    Args:
        q, k: ``(B, h, N, d)`` queries and keys (``explicit_attention_maps``' record).
        chunk: queries per block of weights (memory ``O(N · chunk)``).

    Returns:
        ``H_i / ln N`` and ``max_j w_ij``, each averaged over images, heads and queries ``i``; ``(nan, nan)`` if N = 1.
    """
    n = k.shape[2]
    if n < 2:
        return math.nan, math.nan
    h_sum = peak_sum = 0.0
    for s in range(0, q.shape[2], chunk):
        w = attention_rows(q[:, :, s : s + chunk].double(), k.double())  # (B, h, chunk, N)
        h_sum += float(-(w * torch.log(w.clamp_min(1e-300))).sum(-1).sum())
        peak_sum += float(w.amax(-1).sum())
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    return h_sum / rows / math.log(n), peak_sum / rows


def _gate_stats(gates: list[torch.Tensor]) -> dict:
    """Mean, std and saturated share of every element of ``gates`` pooled (NaN without gates; the saturated share is
    NaN for a map that is not a gate in ``[0, 1]``, such as LSKA's unsquashed attention ``A``)."""
    if not gates:
        return {"gate_mean": math.nan, "gate_std": math.nan, "saturated": math.nan}
    v = torch.cat([g.detach().double().reshape(-1) for g in gates])
    v = v[torch.isfinite(v)]
    if not v.numel():
        return {"gate_mean": math.nan, "gate_std": math.nan, "saturated": math.nan}
    bounded = bool(((v >= 0) & (v <= 1)).all())
    sat = float(((v < SATURATION) | (v > 1 - SATURATION)).double().mean()) if bounded else math.nan
    return {"gate_mean": float(v.mean()), "gate_std": float(v.std(unbiased=False)), "saturated": sat}


def _nonfinite(*tensors: torch.Tensor) -> int:
    return int(sum((~torch.isfinite(t)).sum() for t in tensors if torch.is_tensor(t)))


@torch.no_grad()
def _block_row(key: tuple[int, str], block, rec: dict, per_image: list, out) -> dict:
    """One block's health row from its captured gates (``rec``), its maps on every image and its output ``out``
    (``knockout`` left NaN: ``measure`` fills it in)."""
    gates = [rec["gate:" + p] for p in block_gates(block) if "gate:" + p in rec]
    row = {"layer": f"{key[0]}.{key[1]}" if key[1] else str(key[0]), "block": type(block).__name__,
           **_gate_stats(gates)}  # fmt: skip
    if has_attention_weights(block) and "q" in rec:
        row["entropy"], row["peak_share"] = attention_entropy(rec["q"], rec["k"])
    else:
        kinds: dict[str, list[dict]] = {}
        for maps in per_image:
            for m in maps:
                if (m.layer, m.part) == key:
                    kinds.setdefault(m.kind, []).append(m.stats if m.map.size > 1 else None)
        ent = [np.mean([s["entropy_norm"] for s in v]) for v in kinds.values() if None not in v]
        peak = [np.mean([s["peak_share"] for s in v]) for v in kinds.values() if None not in v]
        row["entropy"] = float(min(ent)) if ent else math.nan
        row["peak_share"] = float(max(peak)) if peak else math.nan
    scale = getattr(block, "scale", None)
    row["gamma"] = math.nan if scale is None else float(scale.gamma.detach().double().abs().mean())
    row["knockout"] = row["mean_ablation"] = math.nan
    row["nonfinite"] = _nonfinite(*gates, out)
    return row


@torch.no_grad()
def _ablations(model: nn.Module, block: nn.Module, mean: MeanAblation, images: torch.Tensor, ref) -> dict:
    """``knockout`` (the identity in the block's place: the relative change of the raw head outputs) and
    ``mean_ablation`` (its gates at their means ``mean`` recorded over ``images``, its attention uniform:
    ``detection_change``) of one block, against the model's own ``(raw outputs, class probabilities)`` ``ref``."""
    h = block.register_forward_hook(lambda m, a, o: a[0])  # the block's output replaced by its input
    try:
        out = {"knockout": relative_change(raw_outputs(model(images)), ref[0])}
    finally:
        h.remove()
    if not mean.parts:
        return {**out, "mean_ablation": math.nan}
    with mean.replacing():
        out["mean_ablation"] = detection_change(class_probabilities(model(images)), ref[1])
    return out


@torch.no_grad()
def measure(model: nn.Module, images: torch.Tensor, knockout: bool = True) -> dict[str, dict]:
    """Health of every attention block of ``model`` on ``images``.

    Args:
        model: an Ultralytics detection model (``DetectionModel``) with attention blocks.
        images: ``(B, 3, H, W)`` model input in ``[0, 1]``, on the model's device and dtype.
        knockout: also measure each block's knock-out and mean-ablation effects (two more forward passes per block).

    Returns:
        ``{block name (L06_CBAM): {"layer": "6", "block": "CBAM", COLUMNS...}}`` in layer order; empty for a model
        without attention blocks.
    """
    blocks = attention_blocks(model)
    if not blocks:
        return {}
    was_training = model.training
    model.eval()
    try:
        names = {m: n for n, m in model.named_modules()} if knockout else {}
        means = {key: MeanAblation(model, [names[b]]) for key, b in blocks.items()} if knockout else {}
        with GateCapture(model, blocks) as cap, contextlib.ExitStack() as recording:
            for mean in means.values():  # each block's gate means, recorded in the same pass
                recording.enter_context(mean.recording())
                mean.arm()
            outs: dict[tuple[int, str], torch.Tensor] = {}
            handles = [b.register_forward_hook(lambda m, a, o, key=key: outs.__setitem__(key, o.detach()))
                       for key, b in blocks.items()]
            try:
                out = model(images)
                ref = raw_outputs(out), class_probabilities(out)
            finally:
                for h in handles:
                    h.remove()
        per_image = [cap.maps(b) for b in range(images.shape[0])]
        result = {block_name(key, block): _block_row(key, block, cap.records.get(key, {}), per_image, outs.get(key))
                  for key, block in blocks.items()}
        if knockout:
            for key, block in blocks.items():
                result[block_name(key, block)].update(_ablations(model, block, means[key], images, ref))
        return result
    finally:
        model.train(was_training)
