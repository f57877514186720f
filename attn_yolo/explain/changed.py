"""The images that changed: each validation image's paired AP change over the seeds, the largest each way.

The change is variant − baseline, mean over the paired seeds."""

from __future__ import annotations

import dataclasses

import numpy as np

from attn_yolo.ablate.statistics.weighted_ap import WeightedMetrics


def image_ap(rec) -> np.ndarray:
    """mAP50-95 of each validation image on its own: (n_images,), the record's AP with that image's weight 1 and
    every other 0 (``weighted_ap.WeightedMetrics``, Ultralytics' AP); 0 for an image without ground truth."""
    return WeightedMetrics(rec)(np.eye(rec.n_images, dtype=np.int32))["map50_95"]


@dataclasses.dataclass
class ChangedImage:
    """One image that moved.

    Attributes:
        index: image index in the records (validation order); path: its file.
        delta: mean over seeds of its paired AP change (variant − baseline, mAP50-95 of the image alone).
        per_seed: ``{seed: Δ}``; seed: the seed shown (the one with the largest change in the image's direction).
        ap_variant, ap_baseline: the image's AP50-95 in that seed.
    """

    index: int
    path: str
    delta: float
    per_seed: dict[int, float]
    seed: int
    ap_variant: float
    ap_baseline: float


def changed_images(records: dict, variant: str, baseline: str, seeds: list[int], top: int = 3
                   ) -> tuple[list[ChangedImage], list[ChangedImage]]:
    """The ``top`` images whose paired AP rose most and the ``top`` whose fell most (mean over ``seeds``).

    Args:
        records: ``{(variant, seed): perimage.Record}`` on the same validation images.

    Returns:
        ``(up, down)``: images with a mean Δ > 0, largest first, and with Δ < 0, most negative first (an image
        that did not move is in neither).
    """
    ap = {(m, s): image_ap(records[(m, s)]) for s in seeds for m in (variant, baseline)}
    d = np.stack([ap[(variant, s)] - ap[(baseline, s)] for s in seeds])  # (S, n_images)
    mean = d.mean(0)
    files = records[(baseline, seeds[0])].images

    def item(i: int, sign: int) -> ChangedImage:
        k = int(np.argmax(sign * d[:, i]))
        s = seeds[k]
        return ChangedImage(int(i), files[i], float(mean[i]), {sd: float(d[j, i]) for j, sd in enumerate(seeds)}, s,
                            float(ap[(variant, s)][i]), float(ap[(baseline, s)][i]))

    order = np.argsort(-mean, kind="stable")
    up = [item(i, 1) for i in order[:top] if mean[i] > 0]
    down = [item(i, -1) for i in order[::-1][:top] if mean[i] < 0]
    return up, down
