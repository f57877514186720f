"""The yardstick as a standing positive control (issue 45): an ablation with ``reference: {model: yolo11s.yaml}``
says at the top of its summary whether the design called the reference better than the baseline, from the
reference's own verdict, on recorded rows: passed where the reference gains far beyond the seeds' spread, failed
("cannot resolve even a model-scale change") where the seeds' spread hides it, and not read before 2 seeds."""

from __future__ import annotations

import pytest
from conftest import write_config

from attn_yolo import ablate
from attn_yolo.ablate.reports.controls import positive_control, scale_change
from attn_yolo.ablate.reports.summary import results, summary_markdown
from attn_yolo.ablate.statistics.stats import summarize
from attn_yolo.ablate.statistics.verdicts import all_verdicts


@pytest.fixture(scope="module")
def ablation(tiny_data, tmp_path_factory):
    """A fixed-seed ablation (seeds 0–3) of CBAM with the yolo11s yardstick, validated as the CLI would."""
    folder = tmp_path_factory.mktemp("control")
    cfg = write_config(folder, tiny_data, seeds=[0, 1, 2, 3], reference={"name": "yolo11s", "model": "yolo11s.yaml"})
    ab = ablate.validate(*ablate.load_config(cfg))
    assert ab.reference == "yolo11s"
    return ab


def recorded(ab, gains: dict, noise: list[float], seeds=(0, 1, 2, 3)) -> list[dict]:
    """Records as the runner writes them: mAP50-95 = 0.3 + the arm's gain + a per-(arm, seed) offset."""
    rows = []
    for i, v in enumerate(x.name for x in ab.variants):
        for s in seeds:
            m = 0.3 + gains.get(v, 0.0) + noise[(3 * i + s) % len(noise)]
            rows.append({"variant": v, "seed": s, "status": "ok", "map50_95": m, "map50": m + 0.2, "precision": 0.5,
                         "recall": 0.5, "params": 1, "gflops": 1.0, "train_time_s": 0.1, "latency_ms": 1.0,
                         "error": "", "run_dir": "", "best_epoch": 1, "epochs": 1})
    return rows


NOISE = [0.004, -0.003, 0.001, -0.002, 0.003, 0.0, -0.004, 0.002, -0.001]  # a seed SD of about 0.003


def text_of(ab, rows) -> str:
    stats = summarize(rows, [v.name for v in ab.variants], ab.baseline)
    return summary_markdown(results(ab, rows, stats))


def verdicts_of(ab, rows) -> dict:
    """Every arm's verdict (``verdicts.all_verdicts``), the one the summary reads."""
    return all_verdicts(ab, rows, summarize(rows, [v.name for v in ab.variants], ab.baseline))


def test_a_reference_called_better_passes_the_control(ablation):
    rows = recorded(ablation, {"yolo11s": 0.05}, NOISE)
    text = text_of(ablation, rows)
    head = text.split("## Verdict")[0]
    assert "**Positive control passed**: the design calls the reference `yolo11s` (a model-scale change, yolo11n → " \
           "yolo11s) better than `baseline` (Δ mAP50-95 +0.05" in head
    assert "cannot resolve" not in text


def test_a_reference_hidden_by_the_spread_fails_the_control_in_words(ablation):
    """The same gain as the seeds' spread: the reference's verdict is not "better", and the summary says so first."""
    rows = recorded(ablation, {"yolo11s": 0.002}, NOISE)
    text = text_of(ablation, rows)
    head = text.split("## Verdict")[0]
    assert ("**Positive control failed: this design cannot resolve even a model-scale change**: the reference "
            "`yolo11s` (a model-scale change, yolo11n → yolo11s) is not called better than `baseline`") in head
    lines = positive_control(ablation, verdicts_of(ablation, rows))
    assert lines == [line for line in head.splitlines() if "Positive control" in line] + [""]


def test_before_two_seeds_the_control_is_not_read(ablation):
    rows = recorded(ablation, {"yolo11s": 0.05}, NOISE, seeds=(0,))
    assert positive_control(ablation, verdicts_of(ablation, rows))[0].startswith("**Positive control: not read yet**")


def test_without_a_reference_there_is_no_control(tiny_data, tmp_path):
    ab = ablate.validate(*ablate.load_config(write_config(tmp_path, tiny_data, seeds=[0, 1])))
    assert positive_control(ab, verdicts_of(ab, recorded(ab, {}, NOISE, (0, 1)))) == []


@pytest.mark.parametrize("base, ref, words", [
    ("yolo11n.yaml", "yolo11s.yaml", "yolo11n → yolo11s"), ("yolov8n.yaml", "yolov8m.yaml", "yolov8n → yolov8m"),
    ("/a/yolo11n-p2.yaml", "yolo11s-p2.yaml", "yolo11n-p2 → yolo11s-p2"), ("yolo11n.yaml", "yolov8s.yaml", None),
    ("yolo11n.yaml", "yolo11n.yaml", None), ("mine.yaml", "yolo11s.yaml", None),
])  # fmt: skip
def test_scale_change(base, ref, words):
    assert scale_change(base, ref) == words
