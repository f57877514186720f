"""The error decomposition of each variant's Δ mAP50-95, paired by seed, with the summary's hierarchical intervals.

TIDE's ΔAP_e (``attn_yolo.explain.tide``) is what fixing every error of type e would add to one model's AP; these
oracle gains do not add up to the model's gap to a perfect AP (fixing two types at once gains more or less than
the two alone). For the *difference* between a variant v and the baseline b on one seed, with AP_all the AP after
fixing all six types at once and I = ΔAP_all − Σ_e ΔAP_e their interaction, AP = AP_all − ΔAP_all gives exactly::

    Δ = AP(v) − AP(b) = Σ_e [ΔAP_e(b) − ΔAP_e(v)] + [I(b) − I(v)] + [AP_all(v) − AP_all(b)]

- part e, ΔAP_e(b) − ΔAP_e(v): what the variant gains by making fewer (or cheaper) errors of type e; positive when
  the baseline has more to gain from fixing them;
- ``interaction``: the part the oracle fixes do not attribute to one type (errors that overlap, e.g. a missed box
  that a fixed localisation error would have found);
- ``ceiling``: the difference left after every fix (0 when both reach AP 1; not 0 where Ultralytics' interpolation
  keeps AP below 1, or a class's every box is both missed and its detections suppressed).

The parts sum to the summary's Δ mAP50-95 of that seed exactly (up to float rounding), per image resample too, so
each part gets ``stats.hierarchical_interval`` from the same resamples as the summary's Δ, and the parts of the
mean over seeds sum to the mean Δ. Why not TIDE's sequential fixing (fix types one after another, each credited with
the AP it adds): it also sums exactly but its credits depend on the order, which TIDE's paper rejects as arbitrary;
the fixed-AP gaps here are TIDE's own per-type numbers, and what the order would decide is isolated in one term.
By object size: the same gaps when only the errors counted under one size are fixed (``tide.error_sizes``); by
class: the same decomposition of each class's Δ AP50-95.
"""

from __future__ import annotations

import numpy as np

from attn_yolo.ablate.runs.perimage import SIZES, Record
from attn_yolo.ablate.statistics.stats import hierarchical_interval, image_weights
from attn_yolo.ablate.statistics.weighted_ap import Weights
from attn_yolo.explain import tide

PARTS = (*tide.ERROR_NAMES, "interaction", "ceiling")


def resample_weights(n_images: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_images, 1 + n_boot) int32: the record itself (all ones) then the summary's resamples
    (``stats.image_weights``), as ``stats.resample_records`` lays them out."""
    return np.hstack([np.ones((n_images, 1), np.int32), image_weights(n_images, n_boot, seed)])


def fixed_maps(rec: Record, wt: np.ndarray, sizes: bool = True) -> dict:
    """mAP50-95 and per-class AP50-95 of one run's record as recorded and after each oracle fix, per resample.

    Args:
        rec: the run's per-image record (with boxes).
        wt: (n_images, B) int image weights (``resample_weights``).
        sizes: also the fixes restricted to each object size.

    Returns:
        ``{version: (map (B,), ap_class (B, nc))}``, versions ``"none"``, each name of ``tide.ERROR_NAMES``,
        ``"all"`` and (``sizes``) ``"<error>@<size>"``; plus ``"errors"``: the ``tide.Errors``.
    """
    err = tide.classify(rec)
    weights = Weights(wt)

    def ap(fix, pred_mask=None, gt_mask=None):
        return tide.mean_ap(tide.fixed_ap(rec, wt, weights, *tide.fixed_arrays(rec, err, fix, pred_mask, gt_mask)))

    out = {"errors": err, "none": ap(()), "all": ap(tide.ERROR_NAMES)}
    out |= {e: ap((e,)) for e in tide.ERROR_NAMES}
    if sizes:
        pred_size, gt_size = tide.error_sizes(rec, err)
        for s, name in enumerate(SIZES):
            for e in tide.ERROR_NAMES:
                out[f"{e}@{name}"] = ap((e,), pred_size == s, gt_size == s)
    return out


def parts(fm: dict, which: int = 0) -> dict[str, np.ndarray]:
    """One model's terms: ``gap_<e>`` = ΔAP_e, ``inter`` = I, ``all`` = AP_all, ``ap`` = AP, each (B,) (``which``
    0: mAP50-95) or (B, nc) (``which`` 1: per class), from ``fixed_maps``."""
    ap = fm["none"][which]
    gaps = {e: fm[e][which] - ap for e in tide.ERROR_NAMES}
    return {"ap": ap, "all": fm["all"][which], "inter": fm["all"][which] - ap - sum(gaps.values()),
            **{f"gap_{e}": g for e, g in gaps.items()}}


def difference(fv: dict, fb: dict, which: int = 0) -> dict[str, np.ndarray]:
    """The decomposition of one seed's Δ (variant ``fv`` − baseline ``fb``, ``fixed_maps``): ``{part: (B,) or
    (B, nc)}`` for ``PARTS`` and ``"total"``; the parts sum to ``total`` (see the module docstring)."""
    v, b = parts(fv, which), parts(fb, which)
    out = {e: b[f"gap_{e}"] - v[f"gap_{e}"] for e in tide.ERROR_NAMES}
    out |= {"interaction": b["inter"] - v["inter"], "ceiling": v["all"] - b["all"], "total": v["ap"] - b["ap"]}
    return out


def size_differences(fv: dict, fb: dict) -> dict[tuple[str, str], np.ndarray]:
    """``{(error, size): (B,)}``: ΔAP_e(b) − ΔAP_e(v) when only the errors counted under that size are fixed."""
    out = {}
    for s in SIZES:
        for e in tide.ERROR_NAMES:
            gv = fv[f"{e}@{s}"][0] - fv["none"][0]
            gb = fb[f"{e}@{s}"][0] - fb["none"][0]
            out[(e, s)] = gb - gv
    return out


def intervals(per_seed: list[np.ndarray], confidence: float = 0.95) -> dict:
    """``stats.hierarchical_interval`` of one term from each seed's (B,) values (column 0: the record itself)."""
    arr = np.stack(per_seed)
    return hierarchical_interval(arr[:, 0], arr[:, 1:], confidence)


def decompose(maps: dict, variant: str, baseline: str, seeds: list[int], confidence: float = 0.95) -> dict:
    """A variant's Δ decomposed, each term with its hierarchical interval over the paired ``seeds``.

    Args:
        maps: ``{(variant, seed): fixed_maps(...)}`` on the same resamples.
        confidence: the intervals' level (the summary's, ``verdicts.json``).

    Returns:
        ``{"seeds", "parts": {part | "total": interval}, "per_seed": {part | "total": [Δ per seed]},
        "sizes": {(error, size): interval}, "classes": {class id: {part | "total": mean over seeds}},
        "class_total": {class id: interval}}``; intervals as ``hierarchical_interval`` (``mean``, ``lo``, ``hi``).
    """
    diffs = [difference(maps[(variant, s)], maps[(baseline, s)]) for s in seeds]
    out = {"seeds": list(seeds), "parts": {}, "per_seed": {}, "sizes": {}, "classes": {}, "class_total": {}}
    for k in (*PARTS, "total"):
        out["parts"][k] = intervals([d[k] for d in diffs], confidence)
        out["per_seed"][k] = [float(d[k][0]) for d in diffs]
    if all(f"miss@{SIZES[0]}" in maps[(m, s)] for m in (variant, baseline) for s in seeds):
        sd = [size_differences(maps[(variant, s)], maps[(baseline, s)]) for s in seeds]
        out["sizes"] = {k: intervals([d[k] for d in sd], confidence) for k in sd[0]}
    cd = [difference(maps[(variant, s)], maps[(baseline, s)], which=1) for s in seeds]
    total = np.stack([d["total"] for d in cd])  # (S, B, nc)
    for c in np.flatnonzero(np.isfinite(total[:, 0]).all(0)):
        out["class_total"][int(c)] = hierarchical_interval(total[:, 0, c], total[:, 1:, c], confidence)
        out["classes"][int(c)] = {k: float(np.mean([d[k][0, c] for d in cd])) for k in (*PARTS, "total")}
    return out
