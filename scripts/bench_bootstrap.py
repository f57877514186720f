#!/usr/bin/env python
"""Time the ablation's image bootstrap on simulated per-image records (no training; seconds).

    python scripts/bench_bootstrap.py                          # 5 variants x 3 seeds x 5,000 images, 2,000 resamples
    python scripts/bench_bootstrap.py --images 500 --classes 80 --gt-per-image 7 --no-sizes
    python scripts/bench_bootstrap.py --per-seed               # the stopping rule's decision after each seed
    python scripts/bench_bootstrap.py --per-seed --records out/runs   # on real records (<variant>-seed<k>/perimage.npz)

Each run's record comes from ``attn_yolo.ablate.runs.perimage.simulate_run`` on one shared simulated validation set; the
timed part is what ``summary.md`` needs: every run's mAP50, mAP50-95, per-class AP and (unless ``--no-sizes``) COCO
AP small / medium / large on every resample (``stats.resample_records``), then the intervals
(``stats.bootstrap_compare``). Prints the wall time, CPU time and the threads used. The AP kernel (numba) is loaded
before the clock starts, its time printed apart: compiled on first use (seconds) and cached on disk after that.

``--per-seed`` times what a sequential ablation does after each new paired seed: the bootstrap of the runs so far (the
runs already resampled are taken from a cache, ``--no-cache`` recomputes them all), the intervals, and the stopping
rule's decision (``sequential.decide_from_bootstrap``), one table row per seed. Its defaults are the default
ablation's: 2 variants, 200 validation images, 4 classes, about 7 boxes and 130 background predictions per image (as
the records of ``attn-yolo ablate`` on synthetic-shapes), up to 10 seeds, rule min 3.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without `pip install`

import numpy as np  # noqa: E402

from attn_yolo.ablate.runs import perimage  # noqa: E402
from attn_yolo.ablate.statistics import stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", type=int, default=None, help="variants, the baseline among them (default 5; 2)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per variant (default 3; --per-seed: at most 10)")
    p.add_argument("--images", type=int, default=None, help="validation images (default 5000; --per-seed 200)")
    p.add_argument("--classes", type=int, default=4, help="classes (default 4, as synthetic-shapes)")
    p.add_argument("--gt-per-image", type=float, default=None, help="mean boxes per image (default 3; 6.8)")
    p.add_argument("--fp-per-image", type=float, default=None, help="mean background predictions (default 3; 130)")
    p.add_argument("--resamples", type=int, default=stats.N_BOOT, help=f"default {stats.N_BOOT}")
    p.add_argument("--workers", type=int, default=None, help="threads (default: up to 2)")
    p.add_argument("--no-sizes", action="store_true", help="leave out the size APs (records without size statuses)")
    p.add_argument("--per-seed", action="store_true", help="time the stopping rule's decision after each seed")
    p.add_argument("--records", type=Path, default=None, help="--per-seed on real records: DIR/<variant>-seed<k>/")
    p.add_argument("--no-cache", action="store_true", help="--per-seed: recompute every run's bootstrap each time")
    a = p.parse_args(argv)
    per = a.per_seed
    defaults = {"variants": (5, 2), "seeds": (3, 10), "images": (5000, 200), "gt_per_image": (3.0, 6.8),
                "fp_per_image": (3.0, 130.0)}  # fmt: skip
    for key, (full, seq) in defaults.items():
        if getattr(a, key) is None:
            setattr(a, key, seq if per else full)
    workers = a.workers or min(2, os.cpu_count() or 1)
    records = load_records(a.records) if a.records else simulate(a)
    variants = sorted({v for v, _ in records}, key=lambda v: (v != "baseline", v))
    seeds = sorted({s for _, s in records})
    preds = sum(len(r.pred_img) for r in records.values()) / len(records)
    first = next(iter(records.values()))
    print(f"{len(variants)} variants x {len(seeds)} seeds x {first.n_images} images, {first.nc} classes, "
          f"{len(first.gt_img)} boxes, {preds:.0f} predictions per run, {a.resamples} resamples, size APs "
          f"{'off' if first.size_status is None else 'on'}" + (f", records from {a.records}" if a.records else ""))
    warm_up(first)
    if per:
        return per_seed(records, variants, seeds, a.resamples, workers, cache=not a.no_cache)
    t0, c0 = time.perf_counter(), time.process_time()
    resampled = stats.resample_records(records, a.resamples, workers=workers)
    stats.bootstrap_compare(resampled, variants, variants[0], seeds)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"bootstrap: {wall:.1f} s wall, {cpu:.1f} s CPU, {workers} thread(s), {os.cpu_count()} cores")
    return 0


def warm_up(rec) -> None:
    """Load (or, the first time, compile) the compiled AP kernel on one record, and print how long it took."""
    from attn_yolo.ablate.statistics.weighted_ap import WeightedMetrics

    t0, c0 = time.perf_counter(), time.process_time()
    WeightedMetrics(rec)(np.ones((rec.n_images, 1), np.int32))
    print(f"AP kernel loaded (numba; compiled on first use, then cached): {time.perf_counter() - t0:.1f} s wall, "
          f"{time.process_time() - c0:.1f} s CPU")


def simulate(a) -> dict:
    """Records of ``a.variants`` x ``a.seeds`` simulated runs on one simulated validation set; variant k has a
    small-object skill of 0.1·k, every run its own skill (seed noise)."""
    rng = np.random.default_rng(0)
    val = perimage.simulate_val_set(rng, a.images, a.classes, a.gt_per_image)
    records = {}
    for v in range(a.variants):
        for s in range(a.seeds):
            rec = perimage.simulate_run(rng, val, skill=1.0 + rng.normal(0, 0.1), small_skill=0.1 * v,
                                        fp_per_image=a.fp_per_image)
            if a.no_sizes:
                rec.size_status = None
            records[("baseline" if v == 0 else f"v{v}", s)] = rec
    return records


def load_records(root: Path) -> dict:
    """``{(variant, seed): Record}`` from ``root/<variant>-seed<k>/perimage.npz`` (an ablation's runs folder)."""
    records = {}
    for f in sorted(root.glob("*-seed*/perimage.npz")):
        variant, _, seed = f.parent.name.rpartition("-seed")
        records[(variant, int(seed))] = perimage.load_record(f)
    if not records:
        raise SystemExit(f"--records {root}: no <variant>-seed<k>/perimage.npz under it")
    return records


def per_seed(records: dict, variants: list[str], seeds: list[int], n_boot: int, workers: int, cache: bool) -> int:
    """One row per seed: the bootstrap of the runs so far, the intervals and the stopping rule's decision, timed."""
    from attn_yolo.ablate.statistics.sequential import SeedRule, decide_from_bootstrap

    rule = SeedRule(min=min(3, len(seeds)) if len(seeds) >= 2 else 2, max=max(len(seeds), 2))
    store = {} if cache else None
    print(f"rule: min {rule.min}, max {rule.max} seeds; bootstrap cache {'on' if cache else 'off'}; {workers} "
          f"thread(s), {os.cpu_count()} cores")
    print("| seeds | runs resampled | wall (s) | CPU (s) | decision |")
    print("|---|---|---|---|---|")
    walls = []
    for k in range(1, len(seeds) + 1):
        have = {key: r for key, r in records.items() if key[1] in seeds[:k]}
        before = len(store) if cache else 0
        t0, c0 = time.perf_counter(), time.process_time()
        resampled = stats.resample_records(have, n_boot, workers=workers, cache=store)
        compared = stats.bootstrap_compare(resampled, variants, variants[0], seeds[:k])
        d = decide_from_bootstrap(compared, rule)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        walls.append(wall)
        fresh = len(store) - before if cache else len(have)
        text = "; ".join(f"{v}: {x['text']}" for v, x in d["variants"].items())
        print(f"| {k} | {fresh} | {wall:.2f} | {cpu:.2f} | {text} |")
    print(f"per-seed decision: median {np.median(walls):.2f} s wall, max {max(walls):.2f} s (seed 1 includes the "
          f"one-off imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
