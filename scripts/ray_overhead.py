#!/usr/bin/env python
"""Ray backend overhead per run against local scheduling, on the tiny ablation config; prints a Markdown line.

    python scripts/ray_overhead.py                                        # configs/ablation/tiny-test.yaml
    python scripts/ray_overhead.py configs/ablation/tiny-test.yaml seeds=[0]

Runs the same ablation twice into fresh folders: with the local backend (one run at a time, in this process), then
with ``backend=ray`` on a local Ray instance whose every task takes all CPUs (so also one run at a time, with as many
threads; the instance is started before and timed apart). Each run's own time (``execute_run``: training, validation,
latency) is measured where it runs and taken out, so that a shared machine's noise in training time cancels:
overhead per run = ((Ray wall - Σ Ray run times) - (local wall - Σ local run times)) / runs, i.e. task submission,
the worker process's imports, the run folder's round trip as a tar archive. Target: at most 5 s per run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without `pip install`
TARGET_S = 5.0


def timed_runner(spec, device):
    """``execute_run``, its duration (s) added to the record as ``run_s`` (kept in result.json)."""
    from attn_yolo.ablate.runs.train import execute_run

    t0 = time.perf_counter()
    row = execute_run(spec, device)
    return {**row, "run_s": time.perf_counter() - t0}


def main(argv: list[str]) -> int:
    import ray

    from attn_yolo import ablate
    from attn_yolo.ablate.runs.results import collect_records

    config = argv[0] if argv and "=" not in argv[0] else str(REPO / "configs/ablation/tiny-test.yaml")
    overrides = argv[1:] if argv and "=" not in argv[0] else argv
    tmp = Path(tempfile.mkdtemp(prefix="attn-yolo-ray-overhead-"))
    cpus = os.cpu_count()
    raw, base, name, source = ablate.load_config(config)
    walls, inside = {}, {}
    for backend in ("local", "ray"):
        if backend == "ray":
            t0 = time.perf_counter()
            ray.init(num_cpus=cpus, include_dashboard=False, logging_level="warning")
            start_s = time.perf_counter() - t0
        over = ablate.apply_overrides(raw, [*overrides, f"out={tmp / backend}", f"backend={backend}"])
        ab = ablate.validate({**over, "resources": {"num_cpus": cpus}}, base, name, source)
        t0 = time.perf_counter()
        code = ablate.run_ablation(ab, runner=timed_runner)
        walls[backend] = time.perf_counter() - t0
        rows = collect_records(tmp / backend)[0]
        inside[backend] = sum(r["run_s"] for r in rows)
        if code != 0:
            print(f"ray_overhead: the {backend} ablation exited {code}", file=sys.stderr)
            return 1
    t0 = time.perf_counter()
    ray.shutdown()
    stop_s = time.perf_counter() - t0
    n = len(rows)
    per_run = ((walls["ray"] - inside["ray"]) - (walls["local"] - inside["local"])) / n
    print(f"\n| config | runs | local: wall / runs (s) | Ray: wall / runs (s) | Ray overhead per run (s) | "
          f"Ray start + stop (s) |\n|---|---|---|---|---|---|\n| `{Path(config).name}` {' '.join(overrides)} | {n} | "
          f"{walls['local']:.1f} / {inside['local']:.1f} | {walls['ray']:.1f} / {inside['ray']:.1f} | {per_run:+.2f} "
          f"({'within' if per_run <= TARGET_S else 'over'} the {TARGET_S:.0f} s target) | "
          f"{start_s:.1f} + {stop_s:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
