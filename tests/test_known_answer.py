"""The known-answer configs: the from-scratch config end to end (slow), the key reference and the key search as shipped.

``configs/ablation/known-answer.yaml`` (slow: about 4 minutes on 2 cores). On ``synthetic-key`` a key marker anywhere
in the image decides which shapes are targets. Seed 0 of the config, as shipped (CBAM at the neck, 5 epochs from
scratch), is the case where the baseline does not learn to read the key and CBAM does (BENCHMARKS.md, section 12):
CBAM's model relies on its gates, so holding them at their mean over the validation images costs it a large share of
its mAP50-95 (with one seed the attention check has no interval to compare with: the test reads the run's own
figures). Run with ``pytest -m slow tests/test_known_answer.py``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import yaml

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
    a = abs(float(rows["cbam"]["mean_ablation_effect"]))
    assert rows["cbam"]["attention_check"] == "mean ablation"
    assert cbam > base + 0.1, (base, cbam)  # seed 0: CBAM reads the key, the baseline does not (0.4824 vs 0.2401)
    assert a > 0.1 and a > 0.25 * cbam, a  # its gates at their mean: most of what reading the key gave it is lost
    # attention health: the block that reads the key is not flagged uniform. Its maps are nearly flat (entropy
    # >= 0.99), but holding its gates at their mean moves the detections' class probabilities by tenths.
    blocks = read_csv(out / "runs" / "cbam-seed0" / CSV_NAME)
    last = [b for b in blocks if b["epoch"] == max(x["epoch"] for x in blocks)]
    reading = [b for b in last if b["mean_ablation"] > 0.1]
    assert reading and all("uniform" not in b["flags"] for b in reading), [(b["name"], b["flags"]) for b in last]


def test_the_key_reference_and_the_key_search_are_the_main_jobs_design_with_seeds_of_their_own():
    """The reference (``configs/ablation/key-reference.yaml``) and the quick search on the key data
    (``configs/search/key-search.yaml``) validate as shipped, train what the main job trains (its data, start, new
    blocks and train arguments), cover 3 blocks × 2 sites with the same names, and the reference's seeds are none of
    the quick designs' (the main job's 0-5, the search's 0-7), so the agreement table compares independent runs."""
    from attn_yolo.ablate.config.ablation import DEFAULT_CONFIG_YAML
    from attn_yolo.ablate.config.validate import validate as validate_ablation
    from attn_yolo.search.config import validate as validate_search

    main_job = yaml.safe_load(DEFAULT_CONFIG_YAML)
    ref_path, search_path = REPO / "configs/ablation/key-reference.yaml", REPO / "configs/search/key-search.yaml"
    ref = validate_ablation(yaml.safe_load(ref_path.read_text()), ref_path.parent, "key-reference", str(ref_path))
    search = validate_search(yaml.safe_load(search_path.read_text()), search_path.parent, "key-search",
                             str(search_path))
    for raw in (yaml.safe_load(ref_path.read_text()), yaml.safe_load(search_path.read_text())):
        for key in ("data", "start", "new_blocks", "train"):
            assert raw[key] == main_job[key], key
    arms = {v.name for v in search.ab.variants} - {"baseline"}
    assert arms == {v.name for v in ref.variants} - {"baseline"}
    assert len(arms) == 6
    assert not set(ref.seeds) & set(range(search.rule.max))
