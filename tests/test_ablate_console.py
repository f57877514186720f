"""Readable ablations: the default main job prints a few lines (one per run, under a progress bar) and keeps each
run's full Ultralytics output in its folder; the summary leads with worded verdicts and their power; the plots show
every error bar and make the deciding interval stand out; Ray Tune's warning is silenced."""

import math
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import trained_start, write_config

from attn_yolo import ablate
from attn_yolo.ablate.runs import console
from attn_yolo.ablate.runs.records import new_record

REPO = Path(__file__).resolve().parents[1]
T975 = {2: 4.302652729911275}  # Student t 0.975 quantile, 2 degrees of freedom (tables)


def t_df2(p: float) -> float:
    """Student t quantile with 2 degrees of freedom, closed form: (2p − 1) · sqrt(2 / (4p(1 − p)))."""
    return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))


def test_default_main_job_prints_at_most_40_lines_and_keeps_each_log(tmp_path, tiny_data):
    """`attn-yolo ablate` (the embedded default config, on tiny data, 1 epoch, its shared start a 1-epoch checkpoint:
    a 1-epoch recipe on 8 images detects nothing and stops the ablation, ``start.START_FLOOR``): real
    Ultralytics training in a subprocess; at most 40 lines reach the terminal (bar frames redraw within a line), every
    run folder has the full Ultralytics output."""
    out = tmp_path / "out"
    args = [sys.executable, "-m", "attn_yolo_console", "ablate", f"data={tiny_data}", "epochs=1", "imgsz=64",
            "seeds=[0,1]",
            f"start={trained_start(tiny_data, tmp_path)}",  # 1 epoch on the same data
            "latency={'repeats':2,'warmup':1}", f"out={out}", "device=cpu"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1", "MPLBACKEND": "Agg",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = p.stdout + p.stderr
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert sum(line.count("[done ") for line in lines) == 4
    assert "## Verdict: mAP50-95 vs `baseline`" in text and "## Results" not in text  # the lead; tables in summary.md
    assert "delta.png" in text or not (out / "delta.png").exists()
    for run in ("baseline-seed0", "baseline-seed1", "cbam-seed0", "cbam-seed1"):
        log = (out / "runs" / run / console.LOG_NAME).read_text()
        assert "Starting training for 1 epochs" in log and "Validating" in log, run  # Ultralytics' own lines
        assert "engine/trainer:" in log  # the argument dump
    assert "engine/trainer:" not in text and "Starting training" not in text


def test_verbose_shows_everything_and_still_logs(tmp_path, capfd):
    from ultralytics.utils import LOGGER

    def runner(spec, device):
        LOGGER.info("ultralytics says hello")
        print("a print")
        return {}

    spec = type("Spec", (), {"run_dir": str(tmp_path / "run")})()
    console.LoggedRunner(runner)(spec, None)
    assert "hello" not in "".join(capfd.readouterr())
    console.LoggedRunner(runner, verbose=True)(spec, None)
    shown = "".join(capfd.readouterr())
    assert "ultralytics says hello" in shown and "a print" in shown
    assert (tmp_path / "run" / console.LOG_NAME).read_text().count("ultralytics says hello") == 2


def test_ray_tune_warning_is_silenced(tmp_path):
    tune = pytest.importorskip("ray.tune")

    def runner(spec, device):
        return tune.get_context().get_trial_id()  # what Ultralytics' raytune callback asks every epoch

    spec = type("Spec", (), {"run_dir": str(tmp_path / "run")})()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        assert console.LoggedRunner(runner)(spec, None) is None
    assert not [w for w in seen if "get_trial_id" in str(w.message)]


def fake(deltas: dict):
    def runner(spec, device):
        m = 0.3 + (deltas[spec.seed] if spec.variant == "cbam" else 0.0)
        return {**new_record(spec, device), "status": "ok", "precision": 0.5, "recall": 0.5, "map50": 0.5,
                "map50_95": m, "epochs": 1, "best_epoch": 1, "train_time_s": 0.1, "latency_ms": 1.0}

    return runner


@pytest.mark.parametrize("deltas", [{0: 0.05, 1: -0.03, 2: 0.02}, {0: 0.001, 1: -0.001, 2: 0.0005}])
def test_summary_leads_with_worded_verdicts(tmp_path, tiny_data, deltas):
    """The wording from the seeds-only t-interval (no per-image records), computed here by hand: an interval with 0
    wider than ±0.01 is "inconclusive" with the design's detectable |Δ| = (t_.975 + t_.80) · SE; a narrow one reads
    "no difference beyond ±w" (w rounded up)."""
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    assert ablate.run(cfg, runner=fake(deltas)) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    d = list(deltas.values())
    se = statistics.stdev(d) / math.sqrt(3)
    lo, hi = statistics.fmean(d) - T975[2] * se, statistics.fmean(d) + T975[2] * se
    assert lo < 0 < hi
    w = max(-lo, hi)
    if w > 0.01:
        expected = f"inconclusive: this design detects only |Δ| ≥ {(T975[2] + t_df2(0.8)) * se:.4f}"
    else:
        expected = f"no difference beyond ±{math.ceil(w * 1e4) / 1e4:.4f}"
    first = text.split("## Verdict")[1].split("## Setup")[0]
    want = f"- **cbam**: **{expected}** (Δ {statistics.fmean(d):+.4f}, seeds-only 95% CI [{lo:+.4f}, {hi:+.4f}]"
    assert want in first
    assert text.index("## Verdict") < text.index("## Setup") < text.index("## Results")
    assert "no detectable difference**" not in text


def test_delta_plot_makes_the_deciding_interval_stand_out(tmp_path):
    from attn_yolo.ablate.reports.plots import plot_delta
    from attn_yolo.ablate.statistics.verdicts import Interval, Verdict

    c = {"hier": {"mean": 0.01, "lo": -0.02, "hi": 0.04}, "t": {"lo": -0.03, "hi": 0.05}, "image": (0.0, 0.02)}
    v = Verdict("cbam", "inconclusive", "inconclusive", 0.01, 3, Interval("hierarchical", 0.95, -0.02, 0.04, True))
    fig = plot_delta(tmp_path / "d.png", {"cbam": {"map50_95": c}}, "baseline", 0.95, {"cbam": v})
    ax = fig.axes[0]
    widths = {col.get_label(): (col.get_linewidth()[0], col.get_alpha()) for col in ax.collections}
    hier = widths.pop("hierarchical (decides)")
    assert all(hier[0] >= 3 * w for w, _ in widths.values()) and all(a < 1 for _, a in widths.values())
    assert (tmp_path / "d.png").stat().st_size > 0


def test_eta_counts_fraction():
    """A run's work trains on fraction × the train images."""
    from attn_yolo.ablate.runs.eta import work

    train = {"epochs": 2, "batch": 10, "val": False, "imgsz": 64}
    assert work(train, 1000, 0).steps == 200 and work({**train, "fraction": 0.1}, 1000, 0).steps == 20
