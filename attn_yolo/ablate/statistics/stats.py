"""Ablation statistics, the only place they are computed: mean ± std, paired differences to the baseline, verdicts.

Differences are paired by seed; their seeds-only CI comes from the t distribution and p from the two-sided paired
t-test. With the runs' per-image records (``perimage``), the validation images are bootstrapped too: images-only
intervals per seed and pooled, and the hierarchical interval (seeds and images) that verdicts use, with the power of
the design. All resampling is seeded (``BOOT_SEED``): a rerun prints the same numbers.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from attn_yolo.ablate.config.ablation import BOOTSTRAP_DEFAULTS

# Summary metrics: results.csv column, label, decimals, sense (+1 higher is better, -1 lower is better).
METRICS = (
    ("precision", "P", 4, +1),
    ("recall", "R", 4, +1),
    ("map50", "mAP50", 4, +1),
    ("map50_95", "mAP50-95", 4, +1),
    ("ap_small", "AP small", 4, +1),
    ("ap_medium", "AP medium", 4, +1),
    ("ap_large", "AP large", 4, +1),
    ("best_epoch", "best epoch", 1, 0),
    ("train_time_s", "train time (s)", 1, 0),
)
PRIMARY = "map50_95"
CONFIDENCE = 0.95


def _t_ppf(q, df):
    """Quantile of Student's t (``scipy.stats.t.ppf``'s own kernel, without importing scipy.stats: seconds)."""
    from scipy.special import stdtrit

    return stdtrit(df, q)


def _t_sf(x, df):
    """Survival function of Student's t (``scipy.stats.t.sf``'s kernel)."""
    from scipy.special import stdtr

    return stdtr(df, -x)


def paired_difference(diffs: list[float], confidence: float = CONFIDENCE) -> dict:
    """Mean of paired differences (variant − baseline, one per seed), its t-distribution CI and paired t-test p.

    Returns:
        dict with ``n``, ``mean``, ``lo``, ``hi`` (CI bounds) and ``p`` (two-sided); CI and p are NaN for n < 2.
        Identical differences (zero spread) give a CI of zero width and p = 0 (or 1 when they are all 0).
    """
    n = len(diffs)
    mean = statistics.fmean(diffs) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "lo": math.nan, "hi": math.nan, "p": math.nan}
    se = statistics.stdev(diffs) / math.sqrt(n)
    if se == 0:
        return {"n": n, "mean": mean, "lo": mean, "hi": mean, "p": 1.0 if mean == 0 else 0.0}
    half = float(_t_ppf(0.5 + confidence / 2, n - 1)) * se
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half, "p": float(2 * _t_sf(abs(mean) / se, n - 1))}


def verdict(stats: dict, sense: int = +1) -> str:
    """``better`` / ``worse`` when the CI excludes 0 (``sense`` −1: lower is better), else ``no detectable
    difference``; ``n/a`` with fewer than 2 paired seeds."""
    if stats["n"] < 2:
        return "n/a (needs >= 2 paired seeds)"
    if stats["lo"] > 0 or stats["hi"] < 0:
        return "better" if (stats["lo"] > 0) == (sense > 0) else "worse"
    return "no detectable difference"


def _number(x) -> bool:
    """A recorded metric: not missing (None: an older results.csv) and not NaN (e.g. no small box to score)."""
    return x is not None and not math.isnan(x)


def summarize(rows: list[dict], variants: list[str], baseline: str, confidence: float = CONFIDENCE) -> dict:
    """Per-variant statistics over the ``ok`` runs, and paired differences to the baseline (intervals at
    ``confidence``: the ablation's joint level, ``comparisons.joint_level``, in its reports).

    Returns:
        ``{"variants": {name: {"n", "runs", "failed", "params", "gflops", metric: (mean, std)}}, "diffs": {name:
        {metric: paired_difference(...) + {"verdict"}}}}``; std is NaN for n < 2. Missing and NaN values are left
        out (a metric without values: mean NaN).
    """
    ok = {v: {r["seed"]: r for r in rows if r["variant"] == v and r["status"] == "ok"} for v in variants}
    out = {"variants": {}, "diffs": {}}
    for v in variants:
        runs = list(ok[v].values())
        s = {"n": len(runs), "runs": sum(r["variant"] == v for r in rows),
             "failed": sum(r["variant"] == v and r["status"] != "ok" for r in rows)}  # fmt: skip
        for key in ("params", "gflops"):
            s[key] = next((r[key] for r in rows if r["variant"] == v and r[key] is not None), None)
        for key, *_ in METRICS:
            vals = [r[key] for r in runs if _number(r.get(key))]
            mean = statistics.fmean(vals) if vals else math.nan
            s[key] = (mean, statistics.stdev(vals) if len(vals) > 1 else math.nan)
        out["variants"][v] = s
        if v != baseline:
            seeds = sorted(set(ok[v]) & set(ok[baseline]))
            out["diffs"][v] = {}
            for key, _, _, sense in METRICS:
                if sense == 0:
                    continue
                pairs = [(ok[v][k].get(key), ok[baseline][k].get(key)) for k in seeds]
                d = paired_difference([a - b for a, b in pairs if _number(a) and _number(b)], confidence)
                out["diffs"][v][key] = {**d, "verdict": verdict(d, sense)}
    return out


# ------------------------------------------------------------------------------------- per-image bootstrap (records)

N_BOOT = BOOTSTRAP_DEFAULTS["resamples"]  # image resamples
BOOT_SEED = BOOTSTRAP_DEFAULTS["seed"]  # of the resamples: a rerun prints the same numbers
POWER = 0.80
TARGET_DELTA = 0.01  # the Δ mAP50-95 the power line asks about
# Metrics the per-image records give (results.csv column, label); the first is the primary one.
BOOT_METRICS = (("map50_95", "mAP50-95"), ("map50", "mAP50"), ("ap_small", "AP small"), ("ap_medium", "AP medium"),
                ("ap_large", "AP large"))  # fmt: skip
LEARNED = ("precision", "recall", "map50", "map50_95")  # all 0 in every run: the variant learned nothing


def image_weights(n_images: int, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> np.ndarray:
    """Bootstrap resamples of ``n_images`` validation images drawn with replacement, as weights.

    Returns:
        (n_images, n_boot) int32: how many times each image is drawn in each resample (each column sums to
        ``n_images``); the same ``seed`` gives the same resamples.
    """
    rng = np.random.default_rng(seed)
    counts = np.empty((n_images, n_boot), np.int32)
    step = max(1, 2_000_000 // max(n_images, 1))
    for b0 in range(0, n_boot, step):
        b = min(step, n_boot - b0)
        draws = rng.integers(0, n_images, (b, n_images)) + np.arange(b)[:, None] * n_images
        counts[:, b0:b0 + b] = np.bincount(draws.ravel(), minlength=b * n_images).reshape(b, n_images).T
    return counts


def record_fingerprint(rec) -> str:
    """A digest of everything in a ``perimage.Record`` that its metrics depend on (classes, images, predictions,
    ground truth, size statuses): equal digests, equal resampled metrics."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(repr((rec.names, rec.images)).encode())
    for name in ("pred_img", "pred_cls", "pred_conf", "pred_tp", "gt_img", "gt_cls", "gt_area", "size_status"):
        a = getattr(rec, name)
        h.update(name.encode() + (b"-" if a is None else np.ascontiguousarray(a).tobytes() + a.dtype.str.encode()))
    return h.hexdigest()


def resample_records(records: dict, n_boot: int = N_BOOT, seed: int = BOOT_SEED, workers: int | None = None,
                     cache: dict | None = None) -> dict:
    """Metrics of every run on its record and on ``n_boot`` image resamples, the same resamples for every run.

    Args:
        records: ``{key: perimage.Record}``, one per run; all must hold the same validation images.
        n_boot: resamples.
        seed: of the resamples.
        workers: threads (default: up to 2; numpy releases the GIL in the heavy loops).
        cache: a dict the caller keeps between calls (e.g. after every seed of a sequential ablation): a run whose
            record, ``n_boot`` and ``seed`` are unchanged (``record_fingerprint``) is taken from it, not recomputed;
            new results are added to it.

    Returns:
        ``{key: {"point": metrics, "boot": metrics}}`` with ``weighted_ap.WeightedMetrics`` outputs (B = 1 and
        B = n_boot).

    Raises:
        ValueError: the records hold different validation images.
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    from attn_yolo.ablate.statistics.weighted_ap import WeightedMetrics, Weights

    keys = list(records)
    if not keys:
        return {}
    first = records[keys[0]].images
    for k in keys[1:]:
        if records[k].images != first:
            raise ValueError(f"the per-image records of {keys[0]} and {k} hold different validation images")
    tags = {k: (record_fingerprint(records[k]), n_boot, seed) for k in keys} if cache is not None else {}
    todo = [k for k in keys if cache is None or tags[k] not in cache]
    # the record itself (all weights one) as column 0 of the same call: one pass instead of two; laid out once for all
    wt = Weights(np.hstack([np.ones((len(first), 1), np.int32), image_weights(len(first), n_boot, seed)])) \
        if todo else None

    def one(key):
        m = WeightedMetrics(records[key])(wt)
        return key, {"point": {k: v[:1] for k, v in m.items()}, "boot": {k: v[1:] for k, v in m.items()}}

    workers = workers or min(2, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as ex:
        done = dict(ex.map(one, todo))
    if cache is None:
        return done
    cache.update({tags[k]: v for k, v in done.items()})
    return {k: cache[tags[k]] for k in keys}


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of bootstrap values (NaN resamples, e.g. without any small object, left out)."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return math.nan, math.nan
    lo, hi = np.percentile(v, [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(lo), float(hi)


def hierarchical_interval(point: np.ndarray, boot: np.ndarray, confidence: float = CONFIDENCE) -> dict:
    """CI of the mean paired Δ over seeds that accounts for training noise and for the finite validation set.

    ``point`` (S,) holds each seed's Δ on the validation set; ``boot`` (S, B) the same Δ on B image resamples,
    each resample shared by all seeds (they are all evaluated on the same images). The variance of the mean Δ has
    two parts:

    - seeds: the spread of the per-seed Δ, s² / S, exactly what resampling seeds estimates. It already holds the
      part of the test-set noise that differs from seed to seed (each model errs on other images);
    - the validation set: the part of the test-set noise common to all seeds (an image set that happens to favour
      the variant, favours it for every seed), which no number of seeds removes. From the shared resamples:
      V_pooled = var(mean over seeds) = g + h/S and V_seed = mean var per seed = g + h, so g = (S·V_pooled −
      V_seed) / (S − 1).

    SE² = s²/S + g; the interval is mean ± t·SE with Welch–Satterthwaite degrees of freedom (S − 1 when the seed
    part dominates, large when the well-estimated test-set part does), and never narrower than the seeds-only
    t-interval (an added source of noise cannot narrow it; g is itself estimated, and Satterthwaite's degrees of
    freedom grow fast with it). Resampling 3 seeds directly would never leave [min, max] of them, which holds the
    true mean only 75% of the time: hence t at the seed level.

    Returns:
        ``n``, ``mean``, ``lo``, ``hi``, ``se``, ``df``, ``seed_var`` (s²), ``test_var`` (g), ``p`` (two-sided,
        t); interval and p NaN for fewer than 2 seeds.
    """
    point = np.asarray(point, np.float64)
    s = len(point)
    mean = float(point.mean()) if s else math.nan
    out = {"n": s, "mean": mean, "lo": math.nan, "hi": math.nan, "se": math.nan, "df": math.nan,
           "seed_var": math.nan, "test_var": math.nan, "p": math.nan}  # fmt: skip
    if s < 2:
        return out
    boot = np.asarray(boot, np.float64)
    ok = np.isfinite(boot).all(0)
    boot = boot[:, ok]
    seed_var = float(point.var(ddof=1))
    if boot.shape[1] > 1:
        v_pooled = float(boot.mean(0).var(ddof=1))
        v_seed = float(boot.var(axis=1, ddof=1).mean())
        test_var = max(0.0, (s * v_pooled - v_seed) / (s - 1))
    else:
        test_var = 0.0
    se, df = _se_df(seed_var, test_var, s, confidence)
    half = float(_t_ppf(0.5 + confidence / 2, df)) * se
    p = float(2 * _t_sf(abs(mean) / se, df)) if se > 0 else (1.0 if mean == 0 else 0.0)
    return {**out, "lo": mean - half, "hi": mean + half, "se": se, "df": df, "seed_var": seed_var,
            "test_var": test_var, "p": p}  # fmt: skip


def _se_df(seed_var: float, test_var: float, seeds: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """SE and degrees of freedom of the hierarchical interval (see ``hierarchical_interval``): Satterthwaite, unless
    the seeds-only t-interval is wider, then that one's."""
    var = seed_var / seeds + test_var
    df = (seeds - 1) * (var / (seed_var / seeds)) ** 2 if seed_var > 0 else math.inf
    q = 0.5 + confidence / 2
    if seed_var > 0 and _t_ppf(q, seeds - 1) * math.sqrt(seed_var / seeds) > _t_ppf(q, df) * math.sqrt(var):
        return math.sqrt(seed_var / seeds), seeds - 1
    return math.sqrt(var), df


def detectable_delta(seed_var: float, test_var: float, seeds: int, alpha: float = 1 - CONFIDENCE,
                     power: float = POWER) -> float:
    """Smallest Δ a design of ``seeds`` paired seeds detects with ``power`` (two-sided level ``alpha``), given the
    per-seed variance of Δ and the validation set's common variance (``hierarchical_interval``)."""
    if seeds < 2 or not (math.isfinite(seed_var) and math.isfinite(test_var)):
        return math.nan
    se, df = _se_df(seed_var, test_var, seeds, 1 - alpha)
    return float((_t_ppf(1 - alpha / 2, df) + _t_ppf(power, df)) * se)


def seeds_needed(seed_var: float, test_var: float, delta: float = TARGET_DELTA, limit: int = 10**6,
                 alpha: float = 1 - CONFIDENCE) -> int | None:
    """Fewest paired seeds that detect ``delta`` with 80% power at two-sided level ``alpha`` (that of the interval
    that decides: the joint one where an ablation has several arms); None when no number of seeds does (the
    validation set's own noise alone is too large: more validation images are needed, not more seeds) or it exceeds
    ``limit``."""
    if not detectable_delta(seed_var, test_var, limit, alpha) <= delta:
        return None
    lo, hi = 2, limit  # the detectable Δ falls as seeds are added: the first design below delta
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detectable_delta(seed_var, test_var, mid, alpha) <= delta else (mid + 1, hi)
    return lo


def learned_nothing(rows: list[dict], variant: str) -> bool:
    """True when ``variant`` has ok runs and every one of them has P, R, mAP50 and mAP50-95 all 0."""
    runs = [r for r in rows if r["variant"] == variant and r["status"] == "ok"]
    return bool(runs) and all(not (r.get(k) or 0) for r in runs for k in LEARNED)


def bootstrap_compare(resampled: dict, variants: list[str], baseline: str, seeds: list[int],
                      confidence: float = CONFIDENCE) -> dict:
    """Paired Δ to the baseline from the runs' resampled metrics (``resample_records``).

    Args:
        resampled: ``{(variant, seed): {"point", "boot"}}``.
        variants: variant names (the baseline among them is skipped).
        baseline: baseline name.
        seeds: seeds to pair (those with both runs resampled are used).
        confidence: interval level.

    Returns:
        ``{variant: {"seeds": [...], metric: {"deltas": per-seed Δ, "t": paired_difference, "image_seed": [(lo, hi)
        per seed],
        "image": (lo, hi) pooled over seeds, "hier": hierarchical_interval, "verdict"}, "classes": {class id:
        hierarchical_interval}}}``; metrics absent from the records (no size statuses) are left out.
    """
    out = {}
    for v in variants:
        if v == baseline:
            continue
        paired = [s for s in seeds if (v, s) in resampled and (baseline, s) in resampled]
        res = {"seeds": paired}
        if not paired:
            out[v] = res
            continue
        for key, _ in BOOT_METRICS:
            if key not in resampled[(v, paired[0])]["point"]:
                continue
            point = np.array([resampled[(v, s)]["point"][key][0] - resampled[(baseline, s)]["point"][key][0]
                              for s in paired])
            boot = np.stack([resampled[(v, s)]["boot"][key] - resampled[(baseline, s)]["boot"][key] for s in paired])
            if not np.isfinite(point).all():  # e.g. no small object in the validation set
                continue
            hier = hierarchical_interval(point, boot, confidence)
            res[key] = {
                "deltas": point.tolist(),
                "t": paired_difference(point.tolist(), confidence),
                "image_seed": [percentile_interval(b, confidence) for b in boot],
                "image": percentile_interval(np.nanmean(boot, 0) if len(paired) > 1 else boot[0], confidence),
                "hier": hier,
                "verdict": verdict(hier),
            }
        classes = {}
        ap_v = np.stack([resampled[(v, s)]["point"]["ap_class"][0] for s in paired])
        ap_b = np.stack([resampled[(baseline, s)]["point"]["ap_class"][0] for s in paired])
        for c in np.flatnonzero(np.isfinite(ap_v - ap_b).all(0)):
            boot = np.stack([resampled[(v, s)]["boot"]["ap_class"][:, c] - resampled[(baseline, s)]["boot"]
                             ["ap_class"][:, c] for s in paired])
            classes[int(c)] = {**hierarchical_interval(ap_v[:, c] - ap_b[:, c], boot, confidence),
                               "variant": float(ap_v[:, c].mean()), "baseline": float(ap_b[:, c].mean())}
        res["classes"] = classes
        out[v] = res
    return out


def detectable_from_t(lo: float, hi: float, n: int, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """Smallest Δ a design of ``n`` paired seeds detects with ``power``, from its seeds-only t-interval [lo, hi]:
    SE = half-width / t quantile (n − 1 df), Δ = (t_{1−α/2} + t_power) · SE. NaN for n < 2 or an unbounded interval."""
    from scipy.stats import t

    if n < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan
    q = float(t.ppf(0.5 + confidence / 2, n - 1))
    return float((q + t.ppf(power, n - 1)) * (hi - lo) / 2 / q)

