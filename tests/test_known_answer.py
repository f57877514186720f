"""The known-answer config end to end (``configs/ablation/known-answer.yaml``, slow: about 4 minutes on 2 cores).

On ``synthetic-key`` a key marker anywhere in the image decides which shapes are targets. Seed 0 of the config, as
shipped (CBAM at the neck, 5 epochs from scratch), is the case where the baseline does not learn to read the key and
CBAM does (BENCHMARKS.md, section 12): CBAM's model relies on its gates, so holding them at their mean over the
validation images costs it a large share of its mAP50-95 (with one seed the attention check has no interval to
compare with: the test reads the run's own figures). Run with ``pytest -m slow tests/test_known_answer.py``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from attn_yolo.health import CSV_NAME, read_csv
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_cbam_reads_the_key_and_passes_the_attention_check(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_YOLO_DATA", os.environ.get("ATTN_YOLO_DATA", str(tmp_path / "cache")))
    out = tmp_path / "out"
    code = cli_main(["ablate", str(REPO / "configs/ablation/known-answer.yaml"), "seeds=[0]", f"out={out}",
                     "latency.repeats=5"])
    assert code == 0
    rows = {r["variant"]: r for r in csv.DictReader((out / "results.csv").open())}
    base, cbam = float(rows["baseline"]["map50_95"]), float(rows["cbam"]["map50_95"])
    a = abs(float(rows["cbam"]["attention_map50_95"]))
    assert rows["cbam"]["attention_check"] == "mean ablation"
    assert cbam > base + 0.1, (base, cbam)  # seed 0: CBAM reads the key, the baseline does not (0.4824 vs 0.2401)
    assert a > 0.1 and a > 0.25 * cbam, a  # its gates at their mean: most of what reading the key gave it is lost
    # attention health: the block that reads the key is not flagged uniform. Its maps are nearly flat (entropy
    # >= 0.99), but holding its gates at their mean moves the detections' class probabilities by tenths.
    blocks = read_csv(out / "runs" / "cbam-seed0" / CSV_NAME)
    last = [b for b in blocks if b["epoch"] == max(x["epoch"] for x in blocks)]
    reading = [b for b in last if b["mean_ablation"] > 0.1]
    assert reading and all("uniform" not in b["flags"] for b in reading), [(b["name"], b["flags"]) for b in last]
