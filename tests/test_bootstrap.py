"""Per-image records and the image bootstrap: the record's mAP is Ultralytics' own, weighted AP equals Ultralytics'
and COCO's on explicitly resampled records, size AP against pycocotools and faster-coco-eval, the hierarchical
interval (hand computation, self vs self, coverage over simulated experiments, power)."""

import contextlib
import io
import itertools
import math
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from attn_yolo.ablate.runs import perimage
from attn_yolo.ablate.statistics import stats
from attn_yolo.ablate.statistics.weighted_ap import GRID, WeightedMetrics, grid_counts

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------- fixtures


def box_record(rng: np.random.Generator, n_img: int, nc: int) -> perimage.Record:
    """A record with real boxes on 640x480 images: jittered copies of the ground truth (some with a wrong class) and
    random false positives, object sides 6-200 px (all three COCO sizes); COCO statuses from pycocotools."""
    gi, gc, gb, pimg, pc, pconf, pb = [], [], [], [], [], [], []
    for i in range(n_img):
        for _ in range(rng.integers(0, 6)):
            side = np.exp(rng.uniform(np.log(6), np.log(200)))
            w, h = side * rng.uniform(0.6, 1.6), side * rng.uniform(0.6, 1.6)
            x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
            c = int(rng.integers(0, nc))
            gi.append(i), gc.append(c), gb.append([x, y, x + w, y + h])
            if rng.random() < 0.7:
                j = rng.normal(0, 0.08, 4) * [w, h, w, h]
                pimg.append(i), pc.append(c if rng.random() < 0.9 else int(rng.integers(0, nc)))
                pconf.append(rng.random()), pb.append([x + j[0], y + j[1], x + w + j[2], y + h + j[3]])
        for _ in range(rng.integers(0, 4)):
            side = np.exp(rng.uniform(np.log(6), np.log(200)))
            x, y = rng.uniform(0, 640 - side), rng.uniform(0, 480 - side)
            pimg.append(i), pc.append(int(rng.integers(0, nc))), pconf.append(0.6 * rng.random())
            pb.append([x, y, x + side, y + side])
    gb = np.array(gb, np.float32).reshape(-1, 4)
    rec = perimage.Record(
        names=[f"c{k}" for k in range(nc)], images=[f"{i}.jpg" for i in range(n_img)],
        pred_img=np.array(pimg, np.int32), pred_cls=np.array(pc, np.int32), pred_conf=np.array(pconf, np.float32),
        pred_tp=np.zeros((len(pimg), 10), bool), gt_img=np.array(gi, np.int32), gt_cls=np.array(gc, np.int32),
        gt_area=perimage.box_area(gb), pred_box=np.array(pb, np.float32).reshape(-1, 4), gt_box=gb,
    )  # fmt: skip
    rec.size_status = perimage.size_status(rec)
    return rec


def coco_size_ap(rec: perimage.Record, weights=None, faster: bool = False) -> np.ndarray:
    """AP small / medium / large by pycocotools (or faster-coco-eval) on the record, with each image repeated
    ``weights[i]`` times as separate images (an explicit bootstrap resample); NaN where COCO gives -1."""
    gt, dets = perimage.coco_inputs(rec)
    if weights is not None:
        images, anns, res = [], [], []
        for i in range(rec.n_images):
            for _ in range(weights[i]):
                images.append({"id": len(images) + 1})
                anns += [{**a, "image_id": len(images)} for a in gt["annotations"] if a["image_id"] == i + 1]
                res += [{**d, "image_id": len(images)} for d in dets if d["image_id"] == i + 1]
        for k, a in enumerate(anns):
            a["id"] = k + 1
        gt, dets = {**gt, "images": images, "annotations": anns}, res
    if faster:
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as COCOeval
    else:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(dets), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    out = np.array(ev.stats[3:6], np.float64)
    return np.where(out < 0, np.nan, out)


def expanded(rec: perimage.Record, w: np.ndarray):
    """Indices of the predictions and boxes of an explicit resample (image i repeated w[i] times)."""
    pe = np.concatenate([np.tile(np.flatnonzero(rec.pred_img == i), w[i]) for i in range(rec.n_images)]).astype(int)
    ge = np.concatenate([np.tile(np.flatnonzero(rec.gt_img == i), w[i]) for i in range(rec.n_images)]).astype(int)
    return pe, ge


# --------------------------------------------------------------------------------------- AP under image weights


def test_grid_counts_match_the_float_comparisons():
    """The TP count at which each recall point is reached, as np.interp (x < recall) and COCO (x <= recall) decide
    it in floats, ties at recall = k/100 included."""
    for n in range(1, 400):
        rc = np.arange(n + 3) / (n + 1e-16)  # Ultralytics' recall j / (n_l + eps)
        assert (grid_counts(np.array([n]), "ultralytics")[0] == np.searchsorted(rc, GRID, "right")).all(), n
        rc = np.arange(n + 3) / n  # COCO's tps / npig
        assert (grid_counts(np.array([n]), "coco")[0] == np.searchsorted(rc, GRID, "left")).all(), n


def test_weighted_ap_equals_ap_per_class_on_explicit_resamples():
    """Image weights = the record with images repeated: mAP50, mAP50-95 and per-class AP equal Ultralytics'
    ap_per_class on that explicit resample; weights of one = ``perimage.recompute``."""
    from ultralytics.utils.metrics import ap_per_class

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        val = perimage.simulate_val_set(rng, int(rng.integers(2, 30)), nc=int(rng.integers(1, 4)), gt_per_image=2)
        rec = perimage.simulate_run(rng, val, fp_per_image=2)
        wm = WeightedMetrics(rec)
        one = wm()
        ref = perimage.recompute(rec)
        assert one["map50_95"][0] == pytest.approx(ref["map50_95"], abs=1e-12)
        np.testing.assert_allclose(one["ap_class"][0], ref["ap_class"], atol=1e-12)
        w = rng.integers(0, 3, (rec.n_images, 3))
        got = wm(w)
        for b in range(3):
            pe, ge = expanded(rec, w[:, b])
            if not len(ge):
                continue
            ap, classes = ap_per_class(rec.pred_tp[pe], rec.pred_conf[pe], rec.pred_cls[pe], rec.gt_cls[ge])[5:7]
            assert got["map50_95"][b] == pytest.approx(ap.mean(), abs=1e-12)
            assert got["map50"][b] == pytest.approx(ap[:, 0].mean(), abs=1e-12)
            np.testing.assert_allclose(got["ap_class"][b, classes], ap.mean(1), atol=1e-12)
            assert np.isnan(np.delete(got["ap_class"][b], classes)).all()  # classes absent from the resample
            checked += 1
    assert checked > 80


def coco_accumulate(rec: perimage.Record, w: np.ndarray) -> np.ndarray:
    """AP small / medium / large of the explicit resample (image i repeated w[i] times) from the recorded statuses,
    written out as pycocotools' ``COCOeval.accumulate`` does it (per class and IoU threshold: detections by score,
    mergesort; precision tp / (tp + fp + eps), its envelope, read at the first recall >= each of 101 points; mean over
    the thresholds, then over the classes with ground truth of that size); NaN where the resample has none."""
    pe, ge = expanded(rec, w)
    out = []
    for a, (_, lo, hi) in enumerate(perimage.SIZE_RANGES):
        in_range = (rec.gt_area[ge] >= lo) & (rec.gt_area[ge] <= hi)
        per_class = []
        for c in range(rec.nc):
            npig = int((rec.gt_cls[ge][in_range] == c).sum())
            if not npig:
                continue
            aps = []
            for t in range(10):
                st = rec.size_status[pe, a, t]
                keep = (rec.pred_cls[pe] == c) & (st != perimage.IGNORED)
                order = np.argsort(-rec.pred_conf[pe][keep].astype(np.float64), kind="mergesort")
                s = st[keep][order]
                tps, fps = np.cumsum(s == perimage.TP), np.cumsum(s == perimage.FP)
                rc, pr = tps / npig, tps / (fps + tps + np.spacing(1))
                pr = np.maximum.accumulate(pr[::-1])[::-1] if len(pr) else pr
                inds = np.searchsorted(rc, GRID, "left")
                aps.append(np.where(inds < len(pr), pr[np.minimum(inds, len(pr) - 1)] if len(pr) else 0, 0).mean())
            per_class.append(np.mean(aps))
        out.append(np.mean(per_class) if per_class else np.nan)
    return np.array(out)


def test_blocked_kernel_equals_independent_ap_on_random_records():
    """Many resamples at once (several blocks of the kernel, the last one partial; zero weights; a weight above 255,
    so int32 weights): every resample's mAP50, mAP50-95 and per-class AP equal ``ap_per_class`` on the explicit
    resample, and the size APs a plain COCO accumulate of it, to 1e-9."""
    from ultralytics.utils.metrics import ap_per_class

    from attn_yolo.ablate.statistics.weighted_ap import BLOCK, Weights

    rng = np.random.default_rng(7)
    for trial in range(4):
        val = perimage.simulate_val_set(rng, int(rng.integers(12, 40)), nc=int(rng.integers(1, 4)), gt_per_image=2.5)
        rec = perimage.simulate_run(rng, val, fp_per_image=3, small_skill=0.3)
        b = 2 * BLOCK + int(rng.integers(1, BLOCK))
        w = rng.integers(0, 4, (rec.n_images, b))
        if trial == 3:
            w[0, 5] = 300  # one image drawn 300 times: weights no longer fit a byte
        weights = Weights(w)
        assert weights.blocks.dtype == (np.int32 if trial == 3 else np.uint8)
        got = WeightedMetrics(rec)(weights)
        for j in rng.choice(b, 12, replace=False).tolist() + [5]:
            pe, ge = expanded(rec, w[:, j])
            ap, classes = ap_per_class(rec.pred_tp[pe], rec.pred_conf[pe], rec.pred_cls[pe], rec.gt_cls[ge])[5:7]
            assert got["map50_95"][j] == pytest.approx(ap.mean(), abs=1e-9)
            assert got["map50"][j] == pytest.approx(ap[:, 0].mean(), abs=1e-9)
            np.testing.assert_allclose(got["ap_class"][j, classes], ap.mean(1), atol=1e-9)
            mine = np.array([got[f"ap_{s}"][j] for s in perimage.SIZES])
            np.testing.assert_allclose(mine, coco_accumulate(rec, w[:, j]), atol=1e-9, equal_nan=True)


def test_weights_are_checked():
    from attn_yolo.ablate.statistics.weighted_ap import Weights

    rng = np.random.default_rng(3)
    rec = perimage.simulate_run(rng, perimage.simulate_val_set(rng, 6, nc=2))
    with pytest.raises(ValueError, match=">= 0"):
        Weights(np.array([[1, -1]] * 6))
    with pytest.raises(ValueError, match="integer"):
        Weights(np.ones((6, 2)))
    with pytest.raises(ValueError, match="for 5 images, the record holds 6"):
        WeightedMetrics(rec)(np.ones((5, 2), np.int32))


def test_size_ap_matches_pycocotools_and_faster_coco_eval():
    """AP small / medium / large from the record equal pycocotools' and faster-coco-eval's COCOeval on the same boxes,
    on the record itself and on explicit resamples (images repeated as new images)."""
    rng = np.random.default_rng(1)
    for trial in range(6):
        rec = box_record(rng, int(rng.integers(4, 12)), int(rng.integers(1, 4)))
        wm = WeightedMetrics(rec)
        mine = np.array([wm()[f"ap_{s}"][0] for s in perimage.SIZES])
        np.testing.assert_allclose(mine, coco_size_ap(rec), atol=1e-4, equal_nan=True)
        np.testing.assert_allclose(mine, coco_size_ap(rec, faster=True), atol=1e-4, equal_nan=True)
        assert np.isfinite(mine).sum() >= 2, mine
        w = rng.integers(0, 3, rec.n_images)
        if w.sum():
            got = wm(w[:, None])
            mine = np.array([got[f"ap_{s}"][0] for s in perimage.SIZES])
            np.testing.assert_allclose(mine, coco_size_ap(rec, w), atol=1e-4, equal_nan=True)


def test_record_save_load_and_errors(tmp_path):
    rng = np.random.default_rng(2)
    rec = box_record(rng, 5, 2)
    rec.reported = {"map50": 0.5, "map50_95": 0.25}
    path = perimage.save_record(rec, tmp_path / perimage.PERIMAGE_NAME)
    back = perimage.load_record(path)
    assert (back.names, back.images, back.reported) == (rec.names, rec.images, rec.reported)
    for k in ("pred_img", "pred_cls", "pred_conf", "pred_tp", "gt_img", "gt_cls", "gt_area", "size_status",
              "pred_box", "gt_box"):
        np.testing.assert_array_equal(getattr(back, k), getattr(rec, k))
    with pytest.raises(perimage.RecordError, match="no per-image record"):
        perimage.load_record(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(perimage.RecordError, match="missing pred_img"):
        perimage.load_record(tmp_path / "other.npz")
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    np.savez(tmp_path / "v9.npz", **{**data, "version": np.array(9)})
    with pytest.raises(perimage.RecordError, match="record version 9"):
        perimage.load_record(tmp_path / "v9.npz")
    np.savez(tmp_path / "cut.npz", **{**data, "pred_conf": data["pred_conf"][:-1]})
    with pytest.raises(perimage.RecordError, match="pred_conf"):
        perimage.load_record(tmp_path / "cut.npz")


# ------------------------------------------------------------------------------------------------- intervals


def test_image_weights_are_seeded_resamples():
    a, b = stats.image_weights(50, 300, seed=3), stats.image_weights(50, 300, seed=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (50, 300) and (a.sum(0) == 50).all()
    assert not np.array_equal(a, stats.image_weights(50, 300, seed=4))
    assert abs(a.mean() - 1) < 1e-12 and abs(a.var() - (1 - 1 / 50)) < 0.05  # multinomial(50, 1/50) per image


def test_hierarchical_interval_against_hand_computation():
    """The interval against a simulation with a known answer and against textbook formulas written out here:

    - the validation set's common variance g: the bootstrap is built from a common part of SD 0.02 (g = 0.02²) and a
      per-seed part of SD 0.004; the estimate recovers g within its sampling error;
    - SE² = s²/S + g, and the Welch–Satterthwaite degrees of freedom ν = (Σ vᵢ)² / Σ (vᵢ² / νᵢ) with
      (v₁, ν₁) = (s²/S, S − 1) and (v₂, ν₂) = (g, ∞) (the bootstrap part is known to any precision);
    - scipy's Welch test (``ttest_ind(equal_var=False)``) on the seeds' Δ against a very large zero-mean sample whose
      s²/n is g: the same statistic, ν (its second term → 0), interval and p.
    """
    from scipy import stats as sps

    point = np.array([0.01, 0.03, 0.02])  # mean 0.02, sample variance s² = 0.01² (textbook: deviations ±0.01, 0)
    rng = np.random.default_rng(0)
    common, own = rng.normal(0, 0.02, 20000), rng.normal(0, 0.004, (3, 20000))
    boot = point[:, None] + common + own  # a resample moves every seed's Δ alike (common) and each its own way
    h = stats.hierarchical_interval(point, boot)
    s2, g = 0.01**2, h["test_var"]
    assert h["seed_var"] == pytest.approx(s2) and h["mean"] == pytest.approx(0.02)
    assert g == pytest.approx(0.02**2, rel=0.05)  # known: the common part's variance (the estimate's SE: ~1.5%)
    v = [s2 / 3, g]  # the two variance components of the mean Δ, with 2 and infinitely many degrees of freedom
    nu = sum(v) ** 2 / sum(vi**2 / dfi for vi, dfi in zip(v, (2, math.inf)))
    assert h["se"] == pytest.approx(math.sqrt(sum(v))) and h["df"] == pytest.approx(nu)
    assert 300 < nu < 400  # dominated by the well-estimated test-set part
    assert h["hi"] - h["mean"] == pytest.approx(sps.t.ppf(0.975, nu) * math.sqrt(sum(v)))

    n2 = 10**6  # the second sample: zero mean, s²/n = g exactly; its ν term g² / (n2 − 1) is negligible
    z = rng.standard_normal(n2)
    z = (z - z.mean()) / z.std(ddof=1) * math.sqrt(g * n2)
    welch = sps.ttest_ind(point, z, equal_var=False)
    assert welch.statistic == pytest.approx(0.02 / h["se"], rel=1e-9)
    assert welch.df == pytest.approx(h["df"], rel=1e-3) and welch.pvalue == pytest.approx(h["p"], rel=1e-3)
    ci = welch.confidence_interval(0.95)
    assert (ci.low, ci.high) == pytest.approx((h["lo"], h["hi"]), rel=1e-4)

    one_sample = sps.ttest_1samp(point, 0.0)  # the seeds-only t-interval, df 2
    seeds_only = one_sample.confidence_interval(0.95)
    assert h["lo"] < seeds_only.low and h["hi"] > seeds_only.high  # wider: the test set is noisier here
    # a common part too small to outweigh t with 2 degrees of freedom, or none: the seeds-only t-interval
    for sd in (0.004, 0.0):
        h = stats.hierarchical_interval(point, point[:, None] + rng.normal(0, sd, 20000) + own)
        want = (seeds_only.low, seeds_only.high, one_sample.pvalue, 2)
        assert (h["lo"], h["hi"], h["p"], h["df"]) == pytest.approx(want)
    assert math.isnan(stats.hierarchical_interval(point[:1], boot[:1])["lo"])  # one seed: n/a


def test_self_comparison_is_zero_with_zero_width():
    rng = np.random.default_rng(3)
    val = perimage.simulate_val_set(rng, 40, nc=3)
    recs = {("base", s): perimage.simulate_run(rng, val, skill=1 + 0.3 * s) for s in range(3)}
    recs |= {("same", s): recs[("base", s)] for s in range(3)}
    res = stats.resample_records(recs, n_boot=200)
    c = stats.bootstrap_compare(res, ["base", "same"], "base", [0, 1, 2])["same"]
    for key, _ in stats.BOOT_METRICS:
        assert c[key]["deltas"] == [0.0, 0.0, 0.0]
        assert (c[key]["t"]["lo"], c[key]["t"]["hi"]) == (0.0, 0.0)
        assert c[key]["image"] == (0.0, 0.0) and c[key]["image_seed"] == [(0.0, 0.0)] * 3
        h = c[key]["hier"]
        assert (h["mean"], h["lo"], h["hi"]) == (0.0, 0.0, 0.0) and c[key]["verdict"] == "no detectable difference"
    assert c["classes"] and all((h["lo"], h["hi"]) == (0.0, 0.0) for h in c["classes"].values())


def _experiment(rng, seeds: int, small_skill: float, affinity: float = 1.0, n_boot: int = 200) -> dict:
    """One simulated ablation: a fresh 60-image validation set, `seeds` paired runs of baseline and variant.

    The affinity (mirrored between the two: no gain on average) adds test-set noise common to all seeds."""
    val = perimage.simulate_val_set(rng, 60, nc=1, gt_per_image=2)
    recs = {}
    for s in range(seeds):
        recs[("b", s)] = perimage.simulate_run(rng, val, skill=1 + rng.normal(0, 0.05), affinity=-affinity,
                                               fp_per_image=2)
        recs[("v", s)] = perimage.simulate_run(rng, val, skill=1 + rng.normal(0, 0.05), affinity=affinity,
                                               small_skill=small_skill, fp_per_image=2)
    for r in recs.values():
        r.size_status = None  # mAP only: keeps 400 experiments at a few seconds
    res = stats.resample_records(recs, n_boot=n_boot, seed=int(rng.integers(1 << 31)), workers=1)
    return stats.bootstrap_compare(res, ["b", "v"], "b", list(range(seeds)))["v"]["map50_95"]


def test_hierarchical_interval_covers_the_true_delta():
    """Over 200 simulated experiments each (3 seeds, 60 images), the hierarchical 95% interval holds the true Δ
    95% ± 3% of the time: Δ = 0 (baseline and variant are mirror images: zero by symmetry) and Δ > 0 (the true
    value is the mean Δ of 400 more simulated runs)."""
    rng = np.random.default_rng(2024)
    truth = {0.0: 0.0}
    deltas = []
    for _ in range(400):
        val = perimage.simulate_val_set(rng, 60, nc=1, gt_per_image=2)
        b = perimage.simulate_run(rng, val, skill=1 + rng.normal(0, 0.05), affinity=-1.0, fp_per_image=2)
        v = perimage.simulate_run(rng, val, skill=1 + rng.normal(0, 0.05), affinity=1.0, small_skill=0.8,
                                  fp_per_image=2)
        deltas.append(perimage.recompute(v)["map50_95"] - perimage.recompute(b)["map50_95"])
    truth[0.8] = float(np.mean(deltas))
    assert truth[0.8] > 0.01
    for small_skill, delta in truth.items():
        hits = [_experiment(rng, 3, small_skill)["hier"] for _ in range(200)]
        coverage = np.mean([h["lo"] <= delta <= h["hi"] for h in hits])
        assert 0.92 <= coverage <= 0.98, (small_skill, delta, coverage)


def test_power_rises_with_seeds():
    """A real gain is found more often with more seeds, in simulated experiments and in the power formula."""
    rng = np.random.default_rng(7)
    found = {s: np.mean([_experiment(rng, s, 0.8, affinity=0.0, n_boot=100)["hier"]["lo"] > 0 for _ in range(40)])
             for s in (2, 4, 8)}
    assert found[2] < found[4] < found[8], found
    mde = [stats.detectable_delta(1e-4, 1e-6, s) for s in (2, 3, 5, 10, 30)]
    assert all(a > b for a, b in itertools.pairwise(mde))
    need = stats.seeds_needed(1e-4, 1e-6, delta=mde[2])
    assert need == 5  # the design that detects exactly that Δ
    assert stats.seeds_needed(1e-4, 1e-4, delta=0.01) is None  # test-set noise alone exceeds it: more images needed


# ------------------------------------------------------------------------------------------- a real validation


@pytest.mark.parametrize("data", ["synthetic", "coco128"])
def test_recorded_validation_equals_ultralytics(tmp_path, data, oracle, request):
    """A real Ultralytics validation (its validator, matcher, metrics and faster-coco-eval), with detections made
    from the labels (``oracle``) so that every metric is far from 0, on synthetic 256-px images and (when present)
    COCO128 images: the record's mAP50 / mAP50-95 equal Ultralytics', its size APs equal Ultralytics'
    faster-coco-eval APsmall / medium / large within 1e-4 (Ultralytics rounds boxes and scores for COCO), and its
    ground-truth areas are in px of the original images."""
    from ultralytics.nn.tasks import DetectionModel

    from attn_yolo.checkpoint import save_checkpoint
    from attn_yolo.synthetic import generate

    if data == "synthetic":
        data = generate(tmp_path / "data", n_train=2, n_val=12, imgsz=256, seed=1, size_range=(0.06, 0.5))
    else:
        data = request.getfixturevalue("coco_few")
    import yaml

    nc = len(yaml.safe_load(Path(data).read_text())["names"])
    ckpt = save_checkpoint(DetectionModel("yolo11n.yaml", nc=nc, verbose=False), tmp_path / "m.pt")

    class Oracle(perimage.RecordingValidator):
        def update_metrics(self, preds, batch):
            super().update_metrics(oracle(self, batch), batch)

    v = Oracle(args={"model": str(ckpt), "data": str(data), "imgsz": 64, "batch": 4, "device": "cpu", "plots": False,
                     "save_json": True, "project": str(tmp_path), "name": "val", "mode": "val", "rect": True,
                     "verbose": False})
    out = v(model=str(ckpt))
    reported = {"map50": out["metrics/mAP50(B)"], "map50_95": out["metrics/mAP50-95(B)"]}
    assert 0.2 < reported["map50_95"] < reported["map50"] < 1
    rec = perimage.record_from_validator(v, reported)  # raises unless its own mAP equals `reported`
    again = perimage.recompute(rec)
    assert (again["map50"], again["map50_95"]) == (reported["map50"], reported["map50_95"])
    sizes = WeightedMetrics(rec)()
    for s in perimage.SIZES:
        theirs = out[f"metrics/mAP_{s}(B)"]
        if theirs < 0:  # faster-coco-eval: no box of that size
            assert np.isnan(sizes[f"ap_{s}"][0]), s
        else:
            assert sizes[f"ap_{s}"][0] == pytest.approx(theirs, abs=1e-4), s
    # ground-truth areas in px of the original images, from the label files
    import cv2

    labels = Path(data).parent / "labels" / ("val" if (Path(data).parent / "labels" / "val").exists() else "val2017")
    areas = []
    for f in rec.images:
        h, w = cv2.imread(f).shape[:2]
        label = labels / f"{Path(f).stem}.txt"
        lines = label.read_text().splitlines() if label.exists() else []
        areas += [float(bw) * float(bh) * w * h for _, _, _, bw, bh in (line.split()[:5] for line in lines)]
    np.testing.assert_allclose(np.sort(rec.gt_area), np.sort(areas), rtol=1e-3)
    assert len(rec.images) == len(set(rec.images))
    assert np.isfinite([sizes[f"ap_{s}"][0] for s in perimage.SIZES]).sum() >= 2


def test_bench_script_runs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["bench_bootstrap.py", "--variants", "2", "--seeds", "2", "--images", "30",
                                      "--resamples", "100"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path(str(REPO / "scripts" / "bench_bootstrap.py"), run_name="__main__")
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "2 variants x 2 seeds x 30 images" in out and "bootstrap:" in out and "s wall" in out
