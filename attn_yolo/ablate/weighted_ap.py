"""Average precision of a per-image record under image weights: the metrics of bootstrap resamples, computed fast.

A bootstrap resample of the validation images (drawn with replacement) is a weight per image: how many times it
was drawn. Repeating an image repeats its predictions and its ground truth, so a resample's AP is the AP of the
record with every prediction and box counted ``weight`` times. This module computes that without building the
resample: predictions are ranked by confidence once per run, and a resample is a weighted cumulative sum along that
ranking. The result equals Ultralytics' ``ap_per_class`` (mAP50, mAP50-95, per-class AP: 101-point interpolated
precision envelope, trapezoid rule) and COCO's ``COCOeval.accumulate`` (the size APs: precision at recall >= r,
mean over 101 points) on the explicitly resampled record, up to the order of predictions with equal confidence.

How, per class and IoU threshold, for many weight vectors at once (rows = ranked TP predictions, columns =
resamples): ``T`` = weighted TP count and ``C`` = weighted count of predictions so far, precision ``P = T / C``, its
suffix maximum (the precision envelope), and for each of the 101 recall points the first row whose recall reaches
it: there the envelope is read. Only TP rows matter (between two TPs precision falls, so the envelope is attained at
a TP), and of a run of consecutive TPs only the last (precision rises along it). Counts are exact integers; rows go
down memory and resamples along it, so each step is one vector operation over all resamples. Equal to the originals
up to float rounding (~1e-16) and the order of predictions with equal confidence.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading

import numpy as np

from attn_yolo.ablate.perimage import FP, IGNORED, SIZE_RANGES, SIZES, TP, Record

GRID = np.linspace(0.0, 1.0, 101)  # recall points of Ultralytics' compute_ap and of COCO's recThrs
# Ultralytics: trapezoid rule over GRID (np.trapezoid); COCO: mean over the 101 points.
_W_ULTRA = np.zeros(101)
_W_ULTRA[:-1] += np.diff(GRID) / 2
_W_ULTRA[1:] += np.diff(GRID) / 2
_W_COCO = np.full(101, 1 / 101)
_CHUNK = 2_000_000  # rows x resamples per step (memory: about 40 bytes each)


def grid_counts(n: np.ndarray, style: str) -> np.ndarray:
    """For each total ``n`` of (weighted) ground truth, the TP count at which each recall point is reached.

    ``style="ultralytics"``: the smallest j with j/n > x (``np.interp`` reads the envelope at the last point whose
    recall is <= x, which belongs to TP number j). ``style="coco"``: the smallest j with j/n >= x (COCO's
    ``searchsorted(rc, recThrs, "left")``). Both with the same float arithmetic as the originals (ties at j/n = x
    decide as there). Returns (len(n), 101) int64.
    """
    nf = np.maximum(np.asarray(n, np.float64), 1.0)[:, None]
    x = GRID[None]
    strict = style == "ultralytics"
    q = np.floor(x * nf) + (1 if strict else 0)

    def passes(j):  # does TP count j reach recall point x
        return j / nf > x if strict else j / nf >= x

    for _ in range(2):  # correct the float estimate by up to two in each direction
        q = np.where((q > 0) & passes(q - 1), q - 1, q)
    for _ in range(2):
        q = np.where(passes(q), q, q + 1)
    return q.astype(np.int64)


def _scan_rows(x: np.ndarray, op) -> np.ndarray:
    """Inclusive scan of ``op`` (``np.add``, ``np.fmax``) down the rows of an (n, b) array, in place.

    Row by row costs n vector operations (numpy's own axis-0 scan is slower still for many columns); instead the
    rows are cut into blocks of m ≈ √n, scanned within all blocks at once (m operations, each over every block),
    then the blocks' totals (n/m) are scanned and carried into the blocks (one operation): about 2√n vector
    operations over many rows each, with the GIL released for most of the time. Exact: the same operations on the
    same numbers, only grouped (``op`` associative: integer addition, maximum).
    """
    if x.shape[1] < 32:  # few columns: numpy's own scan, its strides are short
        return op.accumulate(x, axis=0, out=x)
    n = len(x)
    m = math.isqrt(n)
    nb = n // m if m else 0
    start = 1
    blocks = x[: nb * m].reshape(nb, m, x.shape[1]) if m >= 2 and nb >= 2 else None
    if blocks is not None and np.may_share_memory(blocks, x):  # a view (also of a reversed view: the strides split)
        for i in range(1, m):
            op(blocks[:, i - 1], blocks[:, i], out=blocks[:, i])
        carry = blocks[:, -1].copy()
        for k in range(1, nb):
            op(carry[k - 1], carry[k], out=carry[k])
        op(blocks[1:], carry[:-1, None, :], out=blocks[1:])
        start = nb * m
    for i in range(start, n):  # the rows after the last whole block
        op(x[i - 1], x[i], out=x[i])
    return x


def _cumsum_rows(x: np.ndarray) -> np.ndarray:
    """Cumulative sum down the rows, in place."""
    return _scan_rows(x, np.add)


def _suffix_max_rows(x: np.ndarray) -> np.ndarray:
    """Maximum from each row to the last, in place; NaN is skipped (stays only where every row below is NaN)."""
    _scan_rows(x[::-1], np.fmax)
    return x


_TABLES: collections.OrderedDict = collections.OrderedDict()  # (style, n) -> reached table, least recent first
_TABLES_LOCK = threading.Lock()
TABLE_CACHE_BYTES = 256 * 2**20  # the tables of one validation set's chunks: shared by every run evaluated on it


def reached_table(n: np.ndarray, style: str) -> np.ndarray:
    """``reached[count × b + j]``: how many recall points a TP count reaches in column j whose class has ``n[j]``
    (weighted) ground-truth boxes; a step at each of ``grid_counts``. uint8, (max count + 1) × b, count-major.

    Depends only on the ground-truth counts of the resamples, which every run on the same validation set shares,
    so tables are cached (``TABLE_CACHE_BYTES``, least recently used out first).
    """
    key = (style, n.dtype.str, n.tobytes())
    with _TABLES_LOCK:
        table = _TABLES.get(key)
        if table is not None:
            _TABLES.move_to_end(key)
            return table
    b = len(n)
    q = grid_counts(n, style)  # (b, 101), non-decreasing along the recall points
    width = int(q.max()) + 1
    steps = np.diff(q, prepend=0, append=width, axis=1).ravel()
    table = np.repeat(np.tile(np.arange(102, dtype=np.uint8), b), steps).reshape(b, width).T.ravel()
    with _TABLES_LOCK:
        _TABLES[key] = table
        total = sum(t.nbytes for t in _TABLES.values())
        while total > TABLE_CACHE_BYTES and len(_TABLES) > 1:
            total -= _TABLES.popitem(last=False)[1].nbytes
    return table


@dataclasses.dataclass
class _Threshold:
    """One IoU threshold of one class. Its TP predictions come in runs (consecutive in the ranking among the
    predictions counted at this threshold); precision only rises along a run, so the envelope and every recall
    point's reading can be taken at run ends alone."""

    runs: object  # CSR (n_runs, n_images): TP predictions of each run, per image
    ends: np.ndarray  # (n_runs,) index of each run's last prediction among the class's TP predictions (union)
    seg_b: object  # CSR (n_runs, n_images): predictions counted at this threshold but not at all, before each run


@dataclasses.dataclass
class _Class:
    """One class of a ranking: what a weight vector needs to give its AP at every threshold."""

    seg_a: object  # CSR (n_union, n_images): predictions counted at all thresholds, up to each TP prediction
    thresholds: list


class Ranking:
    """The predictions of one record ranked by confidence per class, ready for weighted AP (one style).

    Args:
        n_images: images of the record.
        nc: number of classes.
        img, cls, conf: (E,) image, class and confidence of each prediction (record order: grouped by image).
        tp: (E, T) bool, TP at each IoU threshold.
        counted: (E, T) bool, counted (not ignored) at each threshold; None = all counted (Ultralytics).
        gt_img, gt_cls: counted ground-truth boxes.
        style: ``"ultralytics"`` or ``"coco"`` (precision formula, recall points, their weights).
    """

    def __init__(self, n_images, nc, img, cls, conf, tp, counted, gt_img, gt_cls, style):
        from scipy.sparse import csr_matrix

        self.n_images, self.nc, self.style, self.n_thr = n_images, nc, style, tp.shape[1]
        order = np.argsort(-np.asarray(conf, np.float64), kind="stable")  # as COCO's mergesort, record order on ties

        def per_image(groups, members, n_rows):
            """CSR (n_rows, n_images): how many predictions ``members`` (ranked indices) each group has per image;
            ``groups`` is non-decreasing. Predictions after the last group never matter."""
            keep = groups < n_rows
            indptr = np.concatenate([[0], np.cumsum(np.bincount(groups[keep], minlength=n_rows))])
            return csr_matrix((np.ones(keep.sum(), np.int32), img_c[members[keep]], indptr), shape=(n_rows, n_images))

        self.classes = []
        for c in range(nc):
            o = order[cls[order] == c]
            img_c, tp_c = img[o], tp[o]
            cnt_c = np.ones_like(tp_c) if counted is None else counted[o]
            union = np.flatnonzero(tp_c.any(1))
            all_counted = cnt_c.all(1)
            thresholds = []
            for t in range(self.n_thr):
                seen = np.flatnonzero(cnt_c[:, t])  # predictions counted at t, ranked
                is_tp = tp_c[seen, t]
                end = is_tp & ~np.append(is_tp[1:], False)  # TP followed by a counted non-TP (or the last one)
                ends = seen[end]
                tps = seen[is_tp]
                runs = per_image(np.searchsorted(ends, tps, "left"), tps, len(ends))
                only_some = np.flatnonzero(cnt_c[:, t] & ~all_counted)
                seg_b = per_image(np.searchsorted(ends, only_some, "left"), only_some, len(ends)) \
                    if len(only_some) else None
                thresholds.append(_Threshold(runs=runs, ends=np.searchsorted(union, ends), seg_b=seg_b))
            every = np.flatnonzero(all_counted)
            seg_a = per_image(np.searchsorted(union, every, "left"), every, len(union))
            self.classes.append(_Class(seg_a=seg_a, thresholds=thresholds))
        self.gt_counts = csr_matrix((np.ones(len(gt_img), np.int32), (gt_cls, gt_img)), shape=(nc, n_images))
        self.most = int(np.bincount(cls, minlength=nc).max(initial=0)) if len(cls) else 0  # predictions, one class

    def average_precision(self, wt: np.ndarray) -> np.ndarray:
        """AP per resample, class and threshold: (B, nc, T), NaN where a class has no counted ground truth.

        Args:
            wt: (n_images, B) int image weights, one column per resample (all ones: the record itself).
        """
        wt = np.asarray(wt, np.int32)
        b_total = wt.shape[1]
        out = np.full((b_total, self.nc, self.n_thr), np.nan)
        n_all = np.asarray(self.gt_counts @ wt).T  # (B, nc) weighted ground truth per class
        rows = max([k.seg_a.shape[0] for k in self.classes] + [int(n_all.max(initial=0)) + 3])
        step = max(1, _CHUNK // rows)
        for b0 in range(0, b_total, step):
            sl = slice(b0, b0 + step)
            w = wt[:, sl]
            b = w.shape[1]
            # see _class_ap: counts are kept × b; int32 unless a count could overflow it
            big = b * int(w.max(initial=0)) * max(self.most, 1) >= 2**31
            scaled = w.astype(np.int64 if big else np.int32) * b
            for c, k in enumerate(self.classes):
                has = n_all[sl, c] > 0
                if has.any():
                    out[sl, c][has] = self._class_ap(k, scaled, n_all[sl, c])[has]
        return out

    def _class_ap(self, k: _Class, scaled: np.ndarray, n: np.ndarray) -> np.ndarray:
        """AP (b, T) of one class for the b weight columns of ``scaled`` = weights × b.

        Counts are kept as b × count (exact integers), so that b × count + column indexes ``reached``, a
        (count, column) table laid out count-major, in one pass; their ratio is the precision all the same.
        """
        b = scaled.shape[1]
        ap = np.zeros((b, self.n_thr))
        if not k.seg_a.shape[0]:
            return ap
        cols = np.arange(b, dtype=scaled.dtype)
        reached = reached_table(n, self.style)
        cum_w = np.concatenate([[0.0], np.cumsum(_W_ULTRA if self.style == "ultralytics" else _W_COCO)])  # first k
        counted = _cumsum_rows(np.asarray(k.seg_a @ scaled))  # b × weighted predictions so far, at each TP
        for t, thr in enumerate(k.thresholds):
            if not len(thr.ends):
                continue
            tp = _cumsum_rows(np.asarray(thr.runs @ scaled))  # b × weighted TP count at each run end
            seen = counted[thr.ends]
            if thr.seg_b is not None:
                seen += _cumsum_rows(np.asarray(thr.seg_b @ scaled))
            with np.errstate(invalid="ignore"):  # 0/0 before anything is counted: NaN, skipped by the envelope
                env = _suffix_max_rows(np.divide(tp, seen))  # precision envelope (Ultralytics' and COCO's)
            points = cum_w.take(reached.take(np.add(tp, cols)))  # weight of the recall points reached so far
            # each run end is the first to reach the points between its count and the previous run end's
            ap[:, t] = np.einsum("ij,ij->j", env, points) - np.einsum("ij,ij->j", env[1:], points[:-1])
        return np.nan_to_num(ap)  # a column without any counted prediction: AP 0


class WeightedMetrics:
    """The bootstrap metrics of one record: mAP50, mAP50-95, per-class AP50-95 and (if recorded) the size APs.

    Args:
        rec: the per-image record.
    """

    def __init__(self, rec: Record):
        self.nc = rec.nc
        self.n_images = rec.n_images
        self.ultra = Ranking(rec.n_images, rec.nc, rec.pred_img, rec.pred_cls, rec.pred_conf, rec.pred_tp, None,
                             rec.gt_img, rec.gt_cls, "ultralytics")
        self.sizes = {}
        if rec.size_status is not None:
            for a, (name, lo, hi) in enumerate(SIZE_RANGES):
                status = rec.size_status[:, a, :]
                keep = np.flatnonzero((status != IGNORED).any(1))
                in_range = (rec.gt_area >= lo) & (rec.gt_area <= hi)
                self.sizes[name] = Ranking(
                    rec.n_images, rec.nc, rec.pred_img[keep], rec.pred_cls[keep], rec.pred_conf[keep],
                    status[keep] == TP, np.isin(status[keep], (TP, FP)), rec.gt_img[in_range], rec.gt_cls[in_range],
                    "coco",
                )  # fmt: skip

    def __call__(self, wt: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Metrics per resample.

        Args:
            wt: (n_images, B) int weights; None = the record itself (B = 1).

        Returns:
            ``map50``, ``map50_95`` (B,); ``ap_class`` (B, nc) AP50-95 per class, NaN where the resample holds no
            box of the class; ``ap_small`` / ``ap_medium`` / ``ap_large`` (B,) COCO AP50-95 of that size range, NaN
            where it holds no box of that size (absent when the record has no size statuses).
        """
        if wt is None:
            wt = np.ones((self.n_images, 1), np.int32)
        ap = self.ultra.average_precision(wt)
        ap_class = ap.mean(2)
        out = {
            "map50": np.nan_to_num(_nanmean_rows(ap[:, :, 0])),  # no ground truth at all: 0, as Ultralytics
            "map50_95": np.nan_to_num(_nanmean_rows(ap_class)),
            "ap_class": ap_class,
        }
        for name in SIZES:
            if name in self.sizes:
                out[f"ap_{name}"] = _nanmean_rows(self.sizes[name].average_precision(wt).mean(2))
        return out


def _nanmean_rows(x: np.ndarray) -> np.ndarray:
    """``np.nanmean(x, 1)`` (same arithmetic), NaN for an all-NaN row (a class or size absent from a resample) without
    the RuntimeWarning, whose suppression (``warnings.catch_warnings``) is not thread-safe."""
    nan = np.isnan(x)
    count = (~nan).sum(1)
    total = np.where(nan, 0.0, x).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)



def size_ap(rec: Record) -> dict[str, float]:
    """COCO AP50-95 per object size of a record: ``ap_small``, ``ap_medium``, ``ap_large`` (results.csv columns);
    NaN for a size the validation set holds no box of; empty when the record has no size statuses."""
    m = WeightedMetrics(rec)()
    return {f"ap_{s}": float(m[f"ap_{s}"][0]) for s in SIZES if f"ap_{s}" in m}
