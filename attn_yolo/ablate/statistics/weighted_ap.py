"""Average precision of a per-image record under image weights: the metrics of bootstrap resamples, computed fast.

A bootstrap resample of the validation images (drawn with replacement) is a weight per image: how many times it
was drawn. Repeating an image repeats its predictions and its ground truth, so a resample's AP is the AP of the
record with every prediction and box counted ``weight`` times. This module computes that without building the
resample: predictions are ranked by confidence once per run, and a resample is a weighted cumulative sum along that
ranking. The result equals Ultralytics' ``ap_per_class`` (mAP50, mAP50-95, per-class AP: 101-point interpolated
precision envelope, trapezoid rule) and COCO's ``COCOeval.accumulate`` (the size APs: precision at recall >= r,
mean over 101 points) on the explicitly resampled record, up to the order of predictions with equal confidence.

How, per class and IoU threshold and resample: ``T`` = weighted TP count and ``C`` = weighted count of predictions
so far, precision ``P = T / C``, its suffix maximum (the precision envelope), and for each of the 101 recall points
the first position whose recall reaches it: there the envelope is read. Only TP predictions matter (between two TPs
precision falls, so the envelope is attained at a TP), and of a run of consecutive TPs only the last (precision
rises along it). So a ranking is stored once per run as *run ends* (rows), each with the images of the predictions
it adds to ``T`` and ``C``; resamples walk the rows forward (counts: sums of their image weights, exact integers),
then backward (envelope and recall points), in a compiled kernel (numba; it releases the GIL, so runs are evaluated
on threads in parallel). It takes 64 resamples at a time, so an image's weights are one short vector and a row costs
a few vector operations; buffers are rows × 64. Equal to the direct computation up to float rounding (~1e-16) and the
order of predictions with equal confidence.
"""

from __future__ import annotations

import collections
import threading

import numba
import numpy as np

from attn_yolo.ablate.runs.perimage import FP, IGNORED, SIZE_RANGES, SIZES, TP, Record

GRID = np.linspace(0.0, 1.0, 101)  # recall points of Ultralytics' compute_ap and of COCO's recThrs
# Ultralytics: trapezoid rule over GRID (np.trapezoid); COCO: mean over the 101 points.
_W_ULTRA = np.zeros(101)
_W_ULTRA[:-1] += np.diff(GRID) / 2
_W_ULTRA[1:] += np.diff(GRID) / 2
_W_COCO = np.full(101, 1 / 101)
_CUM_W = {"ultralytics": np.concatenate([[0.0], np.cumsum(_W_ULTRA)]),  # weight of the first k recall points
          "coco": np.concatenate([[0.0], np.cumsum(_W_COCO)])}  # fmt: skip


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


_REACH: collections.OrderedDict = collections.OrderedDict()  # (style, counts) -> grid_counts, least recent first
_REACH_LOCK = threading.Lock()
REACH_CACHE = 32  # entries: one per validation set, size range and resample set, shared by every run on them


def reach_counts(n: np.ndarray, style: str) -> np.ndarray:
    """``grid_counts`` of the (B, nc) weighted ground-truth counts ``n``, as (B, nc, 102) with a last entry no count
    reaches (int64 max), cached: every run on the same validation set (and resamples) has the same counts."""
    key = (style, n.shape, n.tobytes())
    with _REACH_LOCK:
        q = _REACH.get(key)
        if q is not None:
            _REACH.move_to_end(key)
            return q
    q = np.full((*n.shape, len(GRID) + 1), np.iinfo(np.int64).max, np.int64)
    values, where = np.unique(n.ravel(), return_inverse=True)  # counts repeat a lot: each distinct one once
    q[..., :-1] = grid_counts(values, style)[where.ravel()].reshape(*n.shape, len(GRID))
    with _REACH_LOCK:
        _REACH[key] = q
        while len(_REACH) > REACH_CACHE:
            _REACH.popitem(last=False)
    return q


BLOCK = 64  # resamples per kernel step: their weights of one image are one short contiguous vector


@numba.njit(cache=True, nogil=True)
def _row_sums(wblk, ptr, idx, out):  # pragma: no cover - compiled
    """out[j, r] = sum of the weights in resample j of the images idx[ptr[r]:ptr[r + 1]] (``Weights`` blocks)."""
    cb = wblk.shape[2]
    acc = np.zeros(cb, np.int64)
    for blk in range(wblk.shape[0]):
        j0 = blk * cb
        m = min(cb, out.shape[0] - j0)
        wb = wblk[blk]
        for r in range(len(ptr) - 1):
            acc[:] = 0
            for k in range(ptr[r], ptr[r + 1]):
                acc += wb[idx[k]]
            out[j0:j0 + m, r] = acc[:m]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _row_step(seen_a, seen_b, tp, reached, env, ap):  # pragma: no cover - compiled
    """One row, backward, for a block of resamples: precision tp / (seen_a + seen_b) (-1 where nothing is counted),
    ``env`` its running maximum from the last row (the envelope, from 0), ``ap`` += ``reached`` (weight of the recall
    points reached here) × the envelope's rise. Its own function: alone, the loop over a block vectorizes."""
    for jj in range(BLOCK):
        s = seen_a[jj] + seen_b[jj]
        x = np.float64(tp[jj]) / s if s > 0 else -1.0
        y = env[jj]
        z = x if x > y else y
        ap[jj] += reached[jj] * (z - y)
        env[jj] = z


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ap_kernel(wblk, n_gt, q, cw, ptr, idx, a_row, n_union, n_run, run_row, b_row, end_off, ends, proto,
               out):  # pragma: no cover - compiled
    """AP of every resample, class and threshold, into ``out`` (B, nc, T) where it is not NaN (NaN: the class has
    no ground truth in that resample). See the module docstring and ``Ranking`` for the rows.

    Args:
        wblk: (B / BLOCK, n_images, BLOCK) image weights (``Weights.blocks``).
        n_gt: (B, nc) weighted ground-truth count; q: (B, nc, 102) the TP count reaching each recall point
            (``reach_counts``); cw: (102,) weight of the first k recall points.
        ptr, idx: the images of row r are idx[ptr[r]:ptr[r + 1]]; the other arrays locate each class's and
            threshold's rows (``Ranking``). proto: an array of the integer type counts are kept in.

    Resamples go BLOCK at a time: a row adds the block's weights of its images (short vectors); buffers of rows ×
    BLOCK keep each row's precision and the weight of the recall points reached by then, read off a table (BLOCK,
    count) built per class (a TP count never exceeds the ground truth's, one match per box), so no search and no
    branch per row; a backward pass takes the envelope and the AP. Its steps are compiled inline (``inline="always"``):
    called as separate functions they made the kernel ~1.5x slower.
    """
    nc, n_thr = n_run.shape
    n_b = out.shape[0]
    cb = BLOCK
    cbuf = np.zeros((max(1, n_union.max()), cb), proto.dtype)  # count of predictions counted at every threshold
    acc = np.zeros(cb, proto.dtype)
    tp = np.zeros(cb, proto.dtype)
    seen_b = np.zeros(cb, proto.dtype)
    reached = np.zeros(cb)  # weight of the recall points reached, at one row
    env = np.zeros(cb)
    ap = np.zeros(cb)
    cap = np.zeros(cb, np.int64)
    reach = np.zeros((cb, n_gt.max() + 2), np.uint8)  # reach[jj, count]: recall points reached with that TP count
    for j0 in range(0, n_b, cb):
        m = min(cb, n_b - j0)
        wb = wblk[j0 // cb]
        for c in range(nc):
            if not _has_ground_truth(out, j0, m, c):
                continue
            _reach_table(reach, cap, q, n_gt, j0, m, c)
            _union_counts(cbuf, acc, wb, ptr, idx, a_row[c], n_union[c])
            for t in range(n_thr):
                _threshold_ap(cbuf, wb, ptr, idx, run_row[c, t], b_row[c, t], n_run[c, t], ends, end_off[c, t], cw,
                              reach, cap, m, tp, seen_b, reached, env, ap)
                for jj in range(m):
                    if not np.isnan(out[j0 + jj, c, t]):
                        out[j0 + jj, c, t] = ap[jj]


@numba.njit(cache=True, nogil=True, inline="always")
def _has_ground_truth(out, j0, m, c):  # pragma: no cover - compiled
    """Whether class ``c`` has ground truth in any resample of the block from ``j0`` (``out`` is NaN where not)."""
    todo = False
    for jj in range(m):
        todo |= not np.isnan(out[j0 + jj, c, 0])
    return todo


@numba.njit(cache=True, nogil=True, inline="always")
def _reach_table(reach, cap, q, n_gt, j0, m, c):  # pragma: no cover - compiled
    """Per resample jj of the block: ``reach[jj, count]`` = the recall points reached with that TP count of class
    ``c``, and ``cap[jj]`` = the count above which every point is reached (its ground truth + 1)."""
    for jj in range(m):
        cap[jj] = n_gt[j0 + jj, c] + 1  # counts above: every point reached (grid_counts <= n + 1)
        lo = 0
        for p in range(101):
            hi = min(q[j0 + jj, c, p], cap[jj] + 1)
            reach[jj, lo:hi] = p
            lo = max(lo, hi)
        reach[jj, lo:cap[jj] + 1] = 101


@numba.njit(cache=True, nogil=True, inline="always")
def _union_counts(cbuf, acc, wb, ptr, idx, r0, n_u):  # pragma: no cover - compiled
    """Forward: ``cbuf[u]`` = the count of predictions up to union row ``u`` (rows ``r0`` on), per resample."""
    acc[:] = 0
    for u in range(n_u):
        for k in range(ptr[r0 + u], ptr[r0 + u + 1]):
            acc += wb[idx[k]]
        cbuf[u] = acc


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _threshold_ap(cbuf, wb, ptr, idx, rr, br, n, ends, eo, cw, reach, cap, m, tp, seen_b, reached, env,
                  ap):  # pragma: no cover - compiled
    """AP of one class at one threshold into ``ap``, per resample: TP totals (rows ``rr`` on) and the counts of the
    other set (rows ``br`` on, none if < 0), then the backward pass over the ``n`` run ends."""
    tp[:] = 0  # totals over all rows, then taken off row by row going backward
    for k in range(ptr[rr], ptr[rr + n]):
        tp += wb[idx[k]]
    seen_b[:] = 0
    if br >= 0:
        for k in range(ptr[br], ptr[br + n]):
            seen_b += wb[idx[k]]
    # backward: the precision envelope (suffix maximum); each row reads it for the recall points it is
    # the first to reach: sum_r env_r (c_r - c_{r-1}) = sum_r c_r (env_r - env_{r+1}), env_n = 0
    env[:] = 0.0
    ap[:] = 0.0
    for r in range(n - 1, -1, -1):
        for jj in range(m):  # weight of the recall points reached with the TP count at this row
            reached[jj] = cw[reach[jj, min(tp[jj], cap[jj])]]
        _row_step(cbuf[ends[eo + r]], seen_b, tp, reached, env, ap)
        for k in range(ptr[rr + r], ptr[rr + r + 1]):
            tp -= wb[idx[k]]
        if br >= 0:
            for k in range(ptr[br + r], ptr[br + r + 1]):
                seen_b -= wb[idx[k]]


class Weights:
    """Image weights laid out for the kernel: (B / BLOCK, n_images, BLOCK), one byte each when they fit (bootstrap
    counts do), else int32; resamples padded with zero weights to whole blocks. Build once, evaluate many records.

    Args:
        wt: (n_images, B) int image weights, one column per resample.

    Raises:
        ValueError: not a 2-d integer array, or a weight is negative.
    """

    def __init__(self, wt):
        wt = np.asarray(wt)
        if wt.ndim != 2 or not (np.issubdtype(wt.dtype, np.integer) or wt.dtype == bool):
            raise ValueError(f"image weights must be a 2-d integer array (n_images, B), got {wt.dtype} {wt.shape}")
        if wt.size and wt.min() < 0:
            raise ValueError(f"image weights must be >= 0 (how many times each image is drawn), got {wt.min()}")
        self.n_images, self.n = wt.shape
        self.most = int(wt.max(initial=0))
        n_blk = -(-self.n // BLOCK)
        blocks = np.zeros((self.n_images, n_blk * BLOCK), np.uint8 if self.most < 256 else np.int32)
        blocks[:, : self.n] = wt
        self.blocks = np.ascontiguousarray(blocks.reshape(self.n_images, n_blk, BLOCK).transpose(1, 0, 2))


class _Rows:
    """Image lists of rows (CSR without values: row r holds the images ``idx[ptr[r]:ptr[r + 1]]``), built by parts."""

    def __init__(self):
        self.counts, self.images, self.n = [], [], 0

    def add(self, groups: np.ndarray, images: np.ndarray, n_rows: int) -> int:
        """Append ``n_rows`` rows: image ``images[i]`` to row ``groups[i]`` (non-decreasing; those >= n_rows are
        dropped). Returns the first row's index."""
        keep = groups < n_rows
        self.counts.append(np.bincount(groups[keep], minlength=n_rows))
        self.images.append(images[keep])
        first, self.n = self.n, self.n + n_rows
        return first

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        counts = np.concatenate(self.counts) if self.counts else np.zeros(0, np.int64)
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        idx = np.concatenate(self.images).astype(np.int64) if self.images else np.zeros(0, np.int64)
        return ptr, idx


class Ranking:
    """The predictions of one record ranked by confidence per class, ready for weighted AP (one style).

    Per class, the *union* rows are its predictions that are TP at some threshold (ranked); each holds the images
    of the predictions counted at every threshold since the previous union row. Per class and threshold, the run
    ends (the last TP of each run of consecutive TPs among the predictions counted there) are rows holding the
    images of the run's TPs and of the predictions counted at this threshold only (COCO's ignored ones differ).

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
        self.n_images, self.nc, self.style, self.n_thr = n_images, nc, style, tp.shape[1]
        self.n_pred = len(img)
        order = np.argsort(-np.asarray(conf, np.float64), kind="stable")  # as COCO's mergesort, record order on ties
        img = np.asarray(img, np.int64)
        rows = _Rows()
        shape = (nc, self.n_thr)
        self.a_row, self.n_union = np.zeros(nc, np.int64), np.zeros(nc, np.int64)
        self.n_run, self.run_row = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        self.b_row, self.end_off = np.full(shape, -1, np.int64), np.zeros(shape, np.int64)
        ends_all, n_ends = [], 0
        for c in range(nc):
            o = order[cls[order] == c]
            img_c, tp_c = img[o], tp[o]
            cnt_c = np.ones_like(tp_c) if counted is None else counted[o]
            union = np.flatnonzero(tp_c.any(1))
            all_counted = cnt_c.all(1)
            for t in range(self.n_thr):
                seen = np.flatnonzero(cnt_c[:, t])  # predictions counted at t, ranked
                is_tp = tp_c[seen, t]
                end = is_tp & ~np.append(is_tp[1:], False)  # TP followed by a counted non-TP (or the last one)
                ends = seen[end]
                tps = seen[is_tp]
                self.n_run[c, t] = len(ends)
                self.run_row[c, t] = rows.add(np.searchsorted(ends, tps, "left"), img_c[tps], len(ends))
                only_some = np.flatnonzero(cnt_c[:, t] & ~all_counted)
                if len(only_some):
                    self.b_row[c, t] = rows.add(np.searchsorted(ends, only_some, "left"), img_c[only_some], len(ends))
                self.end_off[c, t] = n_ends
                ends_all.append(np.searchsorted(union, ends))
                n_ends += len(ends)
            every = np.flatnonzero(all_counted)
            self.n_union[c] = len(union)
            self.a_row[c] = rows.add(np.searchsorted(union, every, "left"), img_c[every], len(union))
        self.ptr, self.idx = rows.arrays()
        self.ends = np.concatenate(ends_all).astype(np.int64) if ends_all else np.zeros(0, np.int64)
        gt = _Rows()
        o = np.argsort(gt_cls, kind="stable")
        gt.add(np.asarray(gt_cls, np.int64)[o], np.asarray(gt_img, np.int64)[o], nc)
        self.gt_ptr, self.gt_idx = gt.arrays()

    def average_precision(self, wt: np.ndarray) -> np.ndarray:
        """AP per resample, class and threshold: (B, nc, T), NaN where a class has no counted ground truth.

        Args:
            wt: (n_images, B) int image weights, one column per resample (all ones: the record itself), or
                ``Weights`` of them.
        """
        w = wt if isinstance(wt, Weights) else Weights(wt)
        if w.n_images != self.n_images:
            raise ValueError(f"image weights for {w.n_images} images, the record holds {self.n_images}")
        b = w.n
        n_all = np.zeros((b, self.nc), np.int64)  # weighted ground truth per class
        _row_sums(w.blocks, self.gt_ptr, self.gt_idx, n_all)
        out = np.zeros((b, self.nc, self.n_thr))
        out[n_all == 0] = np.nan
        if self.nc and self.n_thr and b:
            q = reach_counts(n_all, self.style)
            blocks = w.blocks  # two compiled kinds: byte weights with int32 counts, int32 weights with int64 counts
            if blocks.dtype == np.uint8 and w.most * self.n_pred >= 2**31:
                blocks = blocks.astype(np.int32)  # counts could overflow int32 (never with bootstrap weights)
            proto = np.zeros(1, np.int32 if blocks.dtype == np.uint8 else np.int64)
            _ap_kernel(blocks, n_all, q, _CUM_W[self.style], self.ptr, self.idx, self.a_row, self.n_union, self.n_run,
                       self.run_row, self.b_row, self.end_off, self.ends, proto, out)
        return out


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
            wt: (n_images, B) int weights, or ``Weights`` of them (laid out once for many records); None = the
                record itself (B = 1).

        Returns:
            ``map50``, ``map50_95`` (B,); ``ap_class`` (B, nc) AP50-95 per class, NaN where the resample holds no
            box of the class; ``ap_small`` / ``ap_medium`` / ``ap_large`` (B,) COCO AP50-95 of that size range, NaN
            where it holds no box of that size (absent when the record has no size statuses).
        """
        if wt is None:
            wt = np.ones((self.n_images, 1), np.int32)
        wt = wt if isinstance(wt, Weights) else Weights(wt)  # laid out once, shared by the rankings
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
