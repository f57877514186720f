#!/usr/bin/env python
"""Time the ablation's image bootstrap on simulated per-image records (no training; about a minute).

    python scripts/bench_bootstrap.py                          # 5 variants x 3 seeds x 5,000 images, 2,000 resamples
    python scripts/bench_bootstrap.py --images 500 --classes 80 --gt-per-image 7 --no-sizes

Each run's record comes from ``attn_yolo.ablate.perimage.simulate_run`` on one shared simulated validation set; the
timed part is what ``summary.md`` needs: every run's mAP50, mAP50-95, per-class AP and (unless ``--no-sizes``) COCO
AP small / medium / large on every resample (``stats.resample_records``), then the intervals
(``stats.bootstrap_compare``). Prints the wall time, CPU time and the threads used.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without `pip install`

import numpy as np  # noqa: E402

from attn_yolo.ablate import perimage, stats  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", type=int, default=5, help="variants, the baseline among them (default 5)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per variant (default 3)")
    p.add_argument("--images", type=int, default=5000, help="validation images (default 5000)")
    p.add_argument("--classes", type=int, default=4, help="classes (default 4, as synthetic-shapes)")
    p.add_argument("--gt-per-image", type=float, default=3.0, help="mean boxes per image (default 3)")
    p.add_argument("--fp-per-image", type=float, default=3.0, help="mean background false positives (default 3)")
    p.add_argument("--resamples", type=int, default=stats.N_BOOT, help=f"default {stats.N_BOOT}")
    p.add_argument("--workers", type=int, default=None, help="threads (default: up to 2)")
    p.add_argument("--no-sizes", action="store_true", help="leave out the size APs (records without size statuses)")
    a = p.parse_args(argv)

    rng = np.random.default_rng(0)
    val = perimage.simulate_val_set(rng, a.images, a.classes, a.gt_per_image)
    records = {}
    for v in range(a.variants):
        for s in range(a.seeds):
            rec = perimage.simulate_run(rng, val, skill=1.0 + rng.normal(0, 0.1), small_skill=0.1 * v,
                                        fp_per_image=a.fp_per_image)
            if a.no_sizes:
                rec.size_status = None
            records[(f"v{v}", s)] = rec
    preds = sum(len(r.pred_img) for r in records.values()) / len(records)
    print(f"{a.variants} variants x {a.seeds} seeds x {a.images} images, {a.classes} classes, {len(val.gt_img)} boxes, "
          f"{preds:.0f} predictions per run, {a.resamples} resamples, size APs {'off' if a.no_sizes else 'on'}")
    workers = a.workers or min(2, os.cpu_count() or 1)
    t0, c0 = time.perf_counter(), time.process_time()
    resampled = stats.resample_records(records, a.resamples, workers=workers)
    stats.bootstrap_compare(resampled, [f"v{v}" for v in range(a.variants)], "v0", list(range(a.seeds)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"bootstrap: {wall:.1f} s wall, {cpu:.1f} s CPU, {workers} thread(s), {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
