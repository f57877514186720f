"""Cost of the attention-health callback at the default ablation's settings: training with it on and off, interleaved.

    python scripts/health_cost.py            # 3 pairs of yolo11n + CBAM (P3/P4/P5) runs, the default ablation's args
    python scripts/health_cost.py pairs=1 epochs=1 imgsz=64 data=path/to/data.yaml   # a smoke run

Prints a Markdown block for BENCHMARKS.md: per run the epoch times (train + validation + the callback), the callback's
own time (measuring, and the NaN/inf guard's hooks), and the medians; the load average before and after.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("YOLO_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]


def run(health: bool, data: str, train: dict, project: str, name: str) -> dict:
    from ultralytics import YOLO

    from attn_yolo.health import attach

    yolo = YOLO(str(REPO / "models" / "yolo11n-cbam.yaml"))
    marks: dict = {"start": [], "end": []}
    yolo.add_callback("on_train_epoch_start", lambda t: marks["start"].append(time.perf_counter()))
    yolo.add_callback("on_fit_epoch_end", lambda t: marks["end"].append(time.perf_counter()))
    if health:
        yolo.add_callback("on_pretrain_routine_start", attach)
    yolo.train(data=data, project=project, name=name, exist_ok=True, verbose=False, **train)
    epochs = [e - s for s, e in zip(marks["start"], marks["end"])]
    m = getattr(yolo.trainer, "attn_health", None)
    return {"health": health, "epochs": epochs, "measure_s": m.time_s if m else 0.0, "guard_s": m.guard_s if m else 0.0}


def main(argv: list[str]) -> int:
    import attn_yolo  # noqa: F401
    from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML
    from attn_yolo.synthetic import default_data_yaml

    opts = dict(a.split("=", 1) for a in argv)
    pairs = int(opts.get("pairs", 3))
    train = {**yaml.safe_load(SHAPES_WARM_CONFIG_YAML)["train"], "device": "cpu", "workers": 0}
    for key in ("epochs", "imgsz", "batch"):
        if key in opts:
            train[key] = int(opts[key])
    data = opts.get("data") or default_data_yaml()
    load0 = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(pairs):
            for health in ((True, False) if k % 2 == 0 else (False, True)):  # alternate which goes first
                r = run(health, data, train, tmp, f"{'on' if health else 'off'}{k}")
                results.append(r)
                print(f"pair {k} health={health}: epochs {[round(e, 2) for e in r['epochs']]} s, measuring "
                      f"{r['measure_s']:.2f} s, guard {r['guard_s']:.3f} s", flush=True)
    load1 = os.getloadavg()
    on = [r for r in results if r["health"]]
    off = [r for r in results if not r["health"]]
    ep_on = statistics.median(e for r in on for e in r["epochs"])
    ep_off = statistics.median(e for r in off for e in r["epochs"])
    own = statistics.median((r["measure_s"] + r["guard_s"]) / sum(r["epochs"]) for r in on)
    print("\n| runs | epoch time, health on (median) | off (median) | on / off − 1 | callback's own time / epoch time "
          "(median over runs) | of which guard |")
    print("|---|---|---|---|---|---|")
    guard = statistics.median(r["guard_s"] / sum(r["epochs"]) for r in on)
    print(f"| {len(on)} on, {len(off)} off, {train['epochs']} epochs each | {ep_on:.2f} s | {ep_off:.2f} s | "
          f"{100 * (ep_on / ep_off - 1):+.1f} % | {100 * own:.2f} % | {100 * guard:.3f} % |")
    print(f"\nload average (1, 5, 15 min) before {tuple(round(x, 2) for x in load0)}, after "
          f"{tuple(round(x, 2) for x in load1)}; train args: {train}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
