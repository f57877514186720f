"""attn-yolo explain: TIDE's error types on hand-built records against the AP of the explicitly fixed record
(Ultralytics' matcher and ap_per_class), the decomposition summing to the summary's Δ on a tiny real ablation,
the changed-images figure read back from its matplotlib Figure, and bad input as one line (exit 2) before any work."""

import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import oracle_predictions, write_config

from attn_yolo.ablate.runs import perimage
from attn_yolo.ablate.statistics.stats import bootstrap_compare, resample_records
from attn_yolo.explain import decompose, explain, read_runs, tide
from attn_yolo.explain.changed import changed_images
from attn_yolo.explain.figure import DRAW_CONF, changed_figure
from attn_yolo_console import main as cli_main

# ------------------------------------------------------------------------------------------------ hand-built


def ultralytics_tp(pred_box, pred_cls, gt_box, gt_cls) -> np.ndarray:
    """TP flags (P, 10) of one image by Ultralytics' own ``match_predictions`` (independent of ``tide.matches``)."""
    from ultralytics.engine.validator import BaseValidator
    from ultralytics.utils.metrics import box_iou

    if not len(pred_box):
        return np.zeros((0, 10), bool)
    if not len(gt_box):
        return np.zeros((len(pred_box), 10), bool)
    iou = box_iou(torch.tensor(np.asarray(gt_box, np.float32)), torch.tensor(np.asarray(pred_box, np.float32)))
    ns = SimpleNamespace(iouv=torch.linspace(0.5, 0.95, 10))
    return BaseValidator.match_predictions(ns, torch.tensor(pred_cls), torch.tensor(gt_cls), iou).numpy()


def make_record(gts, preds, nc: int = 2) -> perimage.Record:
    """A record from ``gts`` [(image, class, box)] and ``preds`` [(image, class, conf, box)] (each image's
    predictions in descending confidence), TP flags by Ultralytics' matcher."""
    n_img = 1 + max([g[0] for g in gts] + [p[0] for p in preds])
    preds = sorted(preds, key=lambda p: (p[0], -p[2]))
    tp = []
    for i in range(n_img):
        g = [x for x in gts if x[0] == i]
        p = [x for x in preds if x[0] == i]
        tp.append(ultralytics_tp([x[3] for x in p], [x[1] for x in p], [x[2] for x in g], [x[1] for x in g]))
    gts = sorted(gts, key=lambda g: g[0])
    gb = np.array([g[2] for g in gts], np.float32).reshape(-1, 4)
    return perimage.Record(
        names=[f"c{k}" for k in range(nc)], images=[f"{i}.jpg" for i in range(n_img)],
        pred_img=np.array([p[0] for p in preds], np.int32), pred_cls=np.array([p[1] for p in preds], np.int32),
        pred_conf=np.array([p[2] for p in preds], np.float32), pred_tp=np.concatenate(tp).reshape(-1, 10),
        gt_img=np.array([g[0] for g in gts], np.int32), gt_cls=np.array([g[1] for g in gts], np.int32),
        gt_area=perimage.box_area(gb), pred_box=np.array([p[3] for p in preds], np.float32).reshape(-1, 4), gt_box=gb,
    )  # fmt: skip


def hand_map(gts, preds) -> float:
    """mAP50-95 of a record built from the lists, by Ultralytics' ``ap_per_class`` (``perimage.recompute``)."""
    return perimage.recompute(make_record(gts, preds))["map50_95"]


A, B = [100, 100, 200, 200], [300, 100, 400, 200]
SHIFTED = [143, 100, 243, 200]  # IoU 0.40 with A: past every threshold 0.50:0.95 (localisation)
GTS = [(0, 0, A), (0, 1, B), (1, 0, A), (1, 0, [20, 300, 80, 360]), (2, 1, A), (3, 0, A), (3, 1, B)]
PREDS = {  # name → (image, class, conf, box); one error of each type, plus true positives
    "tp0": (0, 0, 0.95, A), "dupe": (0, 0, 0.50, [101, 100, 200, 201]), "tp1": (0, 1, 0.90, B),
    "loc": (1, 0, 0.80, SHIFTED), "bkg": (1, 1, 0.70, [500, 300, 560, 380]),
    "cls": (2, 0, 0.60, A),  # the class-1 box A of image 2, called class 0
    "both": (3, 0, 0.85, [300, 143, 400, 243]),  # IoU 0.40 with image 3's class-1 box only (and 0 with A)
    "tp3": (3, 0, 0.40, A), "tp3b": (3, 1, 0.30, B),
}  # fmt: skip
MISSED = (1, 0, [20, 300, 80, 360])  # image 1's second box: nothing near it


def fixed_by_hand(kind: str):
    """The hand-built case with its one error of ``kind`` fixed explicitly (TIDE's fix, by hand)."""
    preds, gts = dict(PREDS), list(GTS)
    if kind == "loc":
        preds["loc"] = (1, 0, 0.80, A)  # the box of its target
    elif kind == "cls":
        preds["cls"] = (2, 1, 0.60, A)  # the class of its target
    elif kind == "miss":
        gts.remove(MISSED)
    else:
        del preds[kind]  # dupe, bkg, both: suppressed
    return gts, list(preds.values())


def test_each_error_type_on_hand_built_cases():
    """Each hand-built error gets its TIDE type at every threshold, and the AP after each oracle fix equals
    Ultralytics' AP of the record fixed by hand."""
    rec = make_record(GTS, list(PREDS.values()))
    err = tide.classify(rec)
    assert err.disagree == 0
    order = sorted(PREDS.values(), key=lambda p: (p[0], -p[2]))
    want = {"loc": tide.LOC, "cls": tide.CLS, "both": tide.BOTH, "dupe": tide.DUPE, "bkg": tide.BKG}
    for name, p in PREDS.items():
        k = order.index(p)
        assert (err.pred_type[k] == want.get(name, 0)).all(), (name, err.pred_type[k])
    missed = [k for k in range(len(rec.gt_img)) if err.missed[k].all()]
    assert [(int(rec.gt_img[k]), rec.gt_box[k].tolist()) for k in missed] == [(MISSED[0], MISSED[2])]
    assert err.missed.sum() == 10  # nothing else missed: the Cls error's target is fixable, not missed

    wt = decompose.resample_weights(rec.n_images, 0, 0)
    fm = decompose.fixed_maps(rec, wt, sizes=False)
    base = hand_map(GTS, list(PREDS.values()))
    assert fm["none"][0][0] == pytest.approx(base, abs=1e-12)
    for kind in tide.ERROR_NAMES:
        got = fm[kind][0][0]
        assert got == pytest.approx(hand_map(*fixed_by_hand(kind)), abs=1e-12), kind
        assert got > base, kind  # every fix helps here
    assert fm["all"][0][0] == pytest.approx(1.0, abs=0.01)  # every error fixed: (nearly) perfect, as interpolated


def test_fix_rules_of_tidecv():
    """Of two localisation errors on one box the higher-scoring one is fixed, the other suppressed; an error on an
    already matched box is a duplicate, not a localisation error; a box missed by every detection of its class at
    every threshold leaves AP 1 for that class when the Miss fix removes it and no detection of it is left."""
    gts = [(0, 0, A), (1, 1, B)]
    two = [(0, 0, 0.9, SHIFTED), (0, 0, 0.8, [57, 100, 157, 200])]
    rec = make_record(gts, two + [(1, 1, 0.5, B)])
    err = tide.classify(rec)
    assert (err.pred_type[:2] == tide.LOC).all() and err.pred_fixed[0].all() and not err.pred_fixed[1].any()
    fm = decompose.fixed_maps(rec, decompose.resample_weights(rec.n_images, 0, 0), sizes=False)
    assert fm["loc"][0][0] == pytest.approx(hand_map(gts, [(0, 0, 0.9, A), (1, 1, 0.5, B)]), abs=1e-12)

    dup = make_record([(0, 0, A)], [(0, 0, 0.9, A), (0, 0, 0.8, [100, 100, 200, 215])])  # IoU 0.87 with A
    assert (tide.classify(dup).pred_type[1] == [tide.DUPE] * 8 + [tide.LOC] * 2).all()  # IoU <= t: Loc from 0.9

    only_missed = make_record([(0, 0, A), (0, 1, B)], [(0, 0, 0.9, A)])
    fm = decompose.fixed_maps(only_missed, decompose.resample_weights(1, 0, 0), sizes=False)
    assert fm["miss"][1][0, 1] == 1.0 and fm["none"][1][0, 1] == 0.0  # class 1: its one box missed
    assert fm["miss"][1][0, 0] == fm["none"][1][0, 0] > 0.99


def test_matches_is_ultralytics_matching():
    """``tide.matches`` (which box each detection took) gives Ultralytics' own TP flags on random images."""
    rng = np.random.default_rng(0)
    for _ in range(30):
        g = rng.uniform(0, 200, (rng.integers(1, 8), 2))
        gb = np.hstack([g, g + rng.uniform(10, 80, g.shape)])
        pb = np.repeat(gb, 3, 0) + rng.normal(0, 8, (3 * len(gb), 4))
        gc, pc = rng.integers(0, 2, len(gb)), rng.integers(0, 2, len(pb))
        got = tide.matches(tide.box_iou(pb, gb), pc, gc) >= 0
        assert (got == ultralytics_tp(pb, pc, gb, gc)).all()


def random_case(rng: np.random.Generator, n_img: int = 4, nc: int = 3):
    """Random ground truth and detections: jittered copies of the boxes (30 % with a random class) and a few
    background boxes, on 4 images."""
    gts, preds = [], []
    for i in range(n_img):
        for _ in range(rng.integers(0, 5)):
            x, y, w, h = *rng.uniform(0, 400, 2), *rng.uniform(10, 100, 2)
            c = int(rng.integers(0, nc))
            gts.append((i, c, [x, y, x + w, y + h]))
            for _ in range(rng.integers(0, 3)):
                j = rng.normal(0, 0.25, 4) * [w, h, w, h]
                cls = int(rng.integers(0, nc)) if rng.random() < 0.3 else c
                preds.append((i, cls, float(rng.random()), [x + j[0], y + j[1], x + w + j[2], y + h + j[3]]))
        for _ in range(rng.integers(0, 3)):
            x, y = rng.uniform(0, 400, 2)
            preds.append((i, int(rng.integers(0, nc)), float(rng.random() / 2), [x, y, x + 40, y + 40]))
    return gts, preds


def test_error_types_equal_tidecv():
    """On random records, at each threshold 0.50:0.95, every detection's error type and every missed box equal
    TIDE's reference code (tidecv 1.0.1), on the images with ground truth (tidecv skips the others)."""
    tidecv = pytest.importorskip("tidecv")
    from tidecv.errors import main_errors as me

    code = {me.ClassError: tide.CLS, me.BoxError: tide.LOC, me.OtherError: tide.BOTH, me.DuplicateError: tide.DUPE,
            me.BackgroundError: tide.BKG}
    rng = np.random.default_rng(1)
    for _ in range(20):
        gts, preds = random_case(rng)
        if not gts or not preds:
            continue
        rec = make_record(gts, preds, nc=3)
        err = tide.classify(rec)
        xywh = lambda b: [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])]  # noqa: E731
        for t, thr in enumerate(perimage.IOU_THRESHOLDS):
            g, p = tidecv.Data("gt"), tidecv.Data("pred")
            for k in range(len(rec.gt_img)):
                g.add_ground_truth(int(rec.gt_img[k]), int(rec.gt_cls[k]), xywh(rec.gt_box[k]))
            for k in range(len(rec.pred_img)):
                p.add_detection(int(rec.pred_img[k]), int(rec.pred_cls[k]), float(rec.pred_conf[k]),
                                xywh(rec.pred_box[k]))
            ref = tidecv.TIDE()
            ref.evaluate(g, p, pos_threshold=float(thr), mode=tidecv.TIDE.BOX, name="x")
            want, missed = np.zeros(len(rec.pred_img), np.int8), np.zeros(len(rec.gt_img), bool)
            for e in ref.runs["x"].errors:
                if isinstance(e, me.MissedError):
                    missed[e.gt["_id"]] = True
                else:
                    want[e.pred["_id"]] = code[type(e)]
            has_gt = np.isin(rec.pred_img, rec.gt_img)
            assert (err.pred_type[has_gt, t] == want[has_gt]).all() and (err.missed[:, t] == missed).all()


# ------------------------------------------------------------------------------------------ a tiny real ablation


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    """A real 2 × 2 ablation (baseline yolo11n vs + CBAM, 1 epoch at 64 px, synthetic shapes) whose final
    validations score far from 0 (Ultralytics' validator on detections made from the labels, ``oracle``)."""
    from ultralytics.models.yolo.detect import DetectionValidator

    from attn_yolo.synthetic import generate

    tmp = tmp_path_factory.mktemp("explain")
    data = generate(tmp / "data", n_train=8, n_val=8, imgsz=256, seed=3, size_range=(0.06, 0.5))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perimage.RecordingValidator, "update_metrics", lambda self, preds, batch: DetectionValidator
                   .update_metrics(self, oracle_predictions(self, batch, Path(self.save_dir).name), batch))
        cfg = write_config(tmp, data, bootstrap={"resamples": 300, "seed": 1})
        assert cli_main(["ablate", str(cfg)]) == 0
    return tmp / "out"


@pytest.fixture(scope="module")
def explained(ablation):
    return explain(ablation, top=2)


def test_decomposition_sums_to_the_summarys_delta(ablation, explained):
    """On the real records: per seed and per image resample the parts sum to Δ mAP50-95, and the total (point and
    hierarchical interval) is the summary's (``stats.bootstrap_compare`` on ``stats.resample_records``)."""
    runs = explained["runs"]
    wt = decompose.resample_weights(8, runs.resamples, runs.boot_seed)
    maps = {k: decompose.fixed_maps(r, wt) for k, r in runs.records.items()}
    for s in (0, 1):
        d = decompose.difference(maps[("cbam", s)], maps[("baseline", s)])
        np.testing.assert_allclose(sum(d[k] for k in decompose.PARTS), d["total"], atol=1e-12, rtol=0)
        assert max(abs(d[k][0]) for k in tide.ERROR_NAMES) > 1e-3  # the errors do differ between the models
    cmp = bootstrap_compare(resample_records(runs.records, runs.resamples, runs.boot_seed), ["baseline", "cbam"],
                            "baseline", [0, 1])["cbam"]["map50_95"]
    dec = explained["results"]["cbam"]["decomposition"]
    assert dec["per_seed"]["total"] == pytest.approx(cmp["deltas"], abs=1e-12)
    for k in ("mean", "lo", "hi"):
        assert dec["parts"]["total"][k] == pytest.approx(cmp["hier"][k], abs=1e-12)
    assert sum(dec["parts"][k]["mean"] for k in decompose.PARTS) == pytest.approx(cmp["hier"]["mean"], abs=1e-12)
    text = (ablation / "explain.md").read_text()
    assert text.startswith("<!-- written by attn-yolo explain -->") and "| localisation |" in text
    assert "### By object size" in text and "### Attention health beside Δ" in text and "L05_CBAM" in text


def single_image_ap(rec, i: int) -> float:
    """mAP50-95 of image ``i`` alone by Ultralytics' ap_per_class (``perimage.recompute`` on the sub-record)."""
    p, g = rec.pred_img == i, rec.gt_img == i
    sub = perimage.Record(names=rec.names, images=[rec.images[i]], pred_img=np.zeros(p.sum(), np.int32),
                          pred_cls=rec.pred_cls[p], pred_conf=rec.pred_conf[p], pred_tp=rec.pred_tp[p],
                          gt_img=np.zeros(g.sum(), np.int32), gt_cls=rec.gt_cls[g], gt_area=rec.gt_area[g])
    return perimage.recompute(sub)["map50_95"]


def test_changed_figure_shows_the_images_that_moved(explained, ablation):
    """changed-cbam.png holds, row by row, the images whose paired AP moved most (against an independent per-image
    AP), each with both models' recorded detections, both CAMs and the variant's maps, same image and seed."""
    from attn_yolo.ablate.reports.plots import is_own_plot

    runs = explained["runs"]
    assert is_own_plot(ablation / "changed-cbam.png")
    d = np.mean([[single_image_ap(runs.records[("cbam", s)], i) - single_image_ap(runs.records[("baseline", s)], i)
                  for i in range(8)] for s in (0, 1)], 0)
    up, down = changed_images(runs.records, "cbam", "baseline", [0, 1], top=2)
    assert [im.index for im in up] == [i for i in np.argsort(-d)[:2] if d[i] > 0]
    assert [im.index for im in down] == [i for i in np.argsort(d)[:2] if d[i] < 0]
    assert up and down
    fig = changed_figure(runs, "cbam", up + down)
    rows = {}
    for ax in fig.axes:
        if ax.get_gid():
            kind, model, index, seed = ax.get_gid().split("|")
            rows.setdefault((int(index), int(seed)), []).append((kind, model, ax))
    assert list(rows) == [(im.index, im.seed) for im in up + down]
    for (index, seed), panels in rows.items():
        kinds = [(k, m) for k, m, _ in panels]
        assert kinds[:4] == [("det", "baseline"), ("det", "cbam"), ("cam", "baseline"), ("cam", "cbam")]
        assert sum(k == "map" for k, _ in kinds) >= 2 and all(m == "cbam" for k, m in kinds if k == "map")
        for kind, model, ax in panels:
            rec = runs.records[(model, seed)]
            boxes = {p.get_gid(): [round(v, 2) for v in (*p.get_xy(), p.get_width(), p.get_height())]
                     for p in ax.patches}
            assert sum(p.get_gid() == "gt" for p in ax.patches) == (rec.gt_img == index).sum() > 0
            if kind == "det":
                want = np.flatnonzero((rec.pred_img == index) & (rec.pred_conf >= DRAW_CONF))
                got = sorted(int(g.split(":")[1]) for g in boxes if g != "gt")
                assert got == want.tolist()
                for k in want:
                    x1, y1, x2, y2 = rec.pred_box[k]
                    tag = f"{'tp' if rec.pred_tp[k, 0] else 'fp'}:{k}"
                    assert boxes[tag] == [round(float(v), 2) for v in (x1, y1, x2 - x1, y2 - y1)]
            else:
                im = ax.get_images()
                assert len(im) == 2 and im[1].get_clim() == (0.0, 1.0)  # the fixed [0, 1] gate scale
                assert im[1].get_array().shape == im[0].get_array().shape[:2]  # the map on the image


def test_explain_shows_its_progress_on_a_terminal_only(ablation, explained, monkeypatch, capsys):
    """explain (minutes on real runs): a bar over the runs' error decompositions and the variants, on stderr when it is
    a terminal; nothing elsewhere."""
    import attn_yolo.progress

    explain(ablation, top=1, figures=False)
    assert capsys.readouterr().err == ""  # not a terminal: silent
    monkeypatch.setattr(attn_yolo.progress, "is_terminal", lambda stream: True)
    explain(ablation, top=1, figures=False)
    err = capsys.readouterr().err
    assert "explain: errors of each run" in err and "explain: images and figures" in err


def test_rerun_refuses_files_it_did_not_write(ablation, tmp_path, capsys):
    """A second run replaces its own files; a foreign explain.md or changed PNG stops it (exit 2, one line naming
    the file and overwrite=True) unless overwrite=True."""
    out = tmp_path / "out"
    shutil.copytree(ablation, out)
    assert cli_main(["explain", f"out={out}", "top=1", "cam=none"]) == 0
    (out / "explain.md").write_text("my notes\n")
    assert cli_main(["explain", f"out={out}", "top=1", "cam=none"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "explain.md" in err and "overwrite=True" in err
    assert (out / "explain.md").read_text() == "my notes\n"
    assert cli_main(["explain", f"out={out}", "top=1", "cam=none", "overwrite=True"]) == 0
    assert (out / "explain.md").read_text().startswith("<!-- written by attn-yolo explain -->")


def test_an_ablation_running_in_out_is_refused(ablation, tmp_path, capsys, monkeypatch):
    """While an ablation holds out's lock, explain exits 2 naming it, before any work."""
    from attn_yolo.ablate.runs.outdir import OutLock

    monkeypatch.setattr(decompose, "fixed_maps", None)  # never reached
    out = tmp_path / "out"
    shutil.copytree(ablation, out, ignore=shutil.ignore_patterns("weights"))
    with OutLock(out):
        assert cli_main(["explain", f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is in use by another ablation" in err, err


@pytest.mark.parametrize("case", ["no-out", "no-runs", "no-record", "variant", "key", "top"])
def test_bad_input_is_one_line_before_any_work(case, ablation, tmp_path, capsys, monkeypatch):
    """Each bad input exits 2 with one line naming the key or file and what is allowed, before any TIDE work."""
    def boom(*a, **k):
        raise AssertionError("explain did heavy work before checking its input")

    monkeypatch.setattr(decompose, "fixed_maps", boom)
    out = tmp_path / "out"
    argv = [f"out={out}"]
    if case == "no-runs":
        out.mkdir()
        shutil.copy(ablation / "config.yaml", out)
    elif case in ("no-record", "variant", "key", "top"):
        shutil.copytree(ablation, out, ignore=shutil.ignore_patterns("weights"))
    if case == "no-record":
        (out / "runs" / "cbam-seed1" / perimage.PERIMAGE_NAME).unlink()
    argv += {"variant": ["variants=cbma"], "key": ["variant=cbam"], "top": ["top=0"]}.get(case, [])
    assert cli_main(["explain", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    want = {"no-out": "no such folder", "no-runs": "holds no finished runs", "no-record": "cbam-seed1/perimage.npz",
            "variant": "allowed: cbam", "key": "variant: unknown key (did you mean 'variants'?)",
            "top": "top: 0; expected an int >= 1"}
    assert want[case] in err, err


def test_explain_of_many_seeds_and_images_is_quick(ablation, tmp_path):
    """An ablation of 5 seeds × 200 images (records made from the real ones, tiled 25 times): the decomposition (300
    resamples here; README: 2000 measured) and the changed images well under a minute, the figure drawn and written
    (models loaded from their checkpoints, maps and CAMs computed) under 10 s on 2 cores."""
    runs = read_runs(ablation)
    big = {}
    for (v, s), rec in runs.records.items():
        for k in range(5 // 2 + 1):
            big[(v, s + 2 * k)] = tile(rec, 25)
    seeds = sorted({s for _, s in big})[:5]
    t0 = time.perf_counter()
    wt = decompose.resample_weights(200, 300, 0)
    maps = {k: decompose.fixed_maps(big[k], wt) for k in big if k[1] in seeds}
    decompose.decompose(maps, "cbam", "baseline", seeds)
    up, down = changed_images({k: big[k] for k in maps}, "cbam", "baseline", seeds, top=3)
    took = time.perf_counter() - t0
    assert took < 60, f"decomposition and changed images took {took:.1f} s"
    rows = dict(runs.rows)
    runs.records = {k: big[k] for k in maps}
    runs.rows = {(v, s): rows[(v, s % 2)] for v, s in maps}
    t0, c0 = time.perf_counter(), time.process_time()
    fig = changed_figure(runs, "cbam", up + down)
    from attn_yolo.ablate.reports.plots import save_figure

    save_figure(fig, tmp_path / "changed.png")
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    # CPU time of this process: what the figure costs whatever else the machine runs (the test suite's other worker)
    assert cpu < 10, f"the figure took {cpu:.1f} s of CPU ({took:.1f} s wall)"
    print(f"figure of 5 seeds x 200 images: {took:.1f} s wall, {cpu:.1f} s CPU")


def tile(rec: perimage.Record, times: int) -> perimage.Record:
    """``rec`` with its images repeated ``times`` times (image i + k·n is image i again)."""
    n = rec.n_images
    reps = np.arange(times)
    cat = np.concatenate
    return perimage.Record(
        names=rec.names, images=rec.images * times,
        pred_img=cat([rec.pred_img + k * n for k in reps]).astype(np.int32), pred_cls=np.tile(rec.pred_cls, times),
        pred_conf=np.tile(rec.pred_conf, times), pred_tp=np.tile(rec.pred_tp, (times, 1)),
        gt_img=cat([rec.gt_img + k * n for k in reps]).astype(np.int32), gt_cls=np.tile(rec.gt_cls, times),
        gt_area=np.tile(rec.gt_area, times), pred_box=np.tile(rec.pred_box, (times, 1)),
        gt_box=np.tile(rec.gt_box, (times, 1)),
    )  # fmt: skip


def test_the_console_names_the_largest_part_even_when_no_single_error_type_holds_it():
    """The default run's explain: localisation +0.0261 against Δ -0.0638, the interaction -0.0772. The console line
    names the interaction, not the largest single type."""
    from attn_yolo.explain import decompose, largest_part

    parts = {k: {"mean": 0.0} for k in decompose.PARTS} | {"loc": {"mean": 0.0261}, "interaction": {"mean": -0.0772}}
    assert largest_part(parts) == "interaction"
    parts["cls"] = {"mean": -0.09}
    assert largest_part(parts) == "cls"
