"""scripts/known_answer.py: the reference table of an ablation, and the agreement of quick designs (an ablation, a
search) with it, read from their own verdicts.json, results.csv and search.csv."""

import csv
import json
from pathlib import Path

from conftest import load_script

from attn_yolo.ablate.runs.records import FIELDS
from attn_yolo.ablate.statistics.verdicts import Interval, Verdict


def load():
    return load_script("known_answer")


def ablation(folder: Path, arms: dict, base: list[float]) -> Path:
    """An ablation out folder: ``arms`` name -> (Δ, lo, hi, status, per-seed mean-ablation effects)."""
    folder.mkdir()
    verdicts = {a: Verdict(a, status, status, mean=d, n=len(ps), interval=Interval("hierarchical", 0.95, lo, hi),
                           check={"A": sum(map(abs, ps)) / len(ps), "per_seed": ps}).to_dict()
                for a, (d, lo, hi, status, ps) in arms.items()}
    (folder / "verdicts.json").write_text(json.dumps({"baseline": "baseline", "family": len(arms), "level": 0.95,
                                                      "verdicts": verdicts}))
    with (folder / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows({"variant": "baseline", "seed": s, "status": "ok", "map50_95": m} for s, m in enumerate(base))
    return folder


def test_the_reference_table_and_the_agreement_of_a_search_and_a_renamed_ablation(tmp_path, capsys):
    ref = ablation(tmp_path / "ref", {"cbam.backbone": (0.0121, -0.0951, 0.1192, "not tested", [0.2, 0.0, 0.13, 0.0]),
                                      "se.neck": (0.03, 0.01, 0.05, "better", [0.0, 0.001, 0.0, 0.0])},
                   [0.1689, 0.1894, 0.3389, 0.1703])
    search = tmp_path / "search"
    search.mkdir()
    (search / "search.csv").write_text("rank,arm,block,site,delta,lo,hi,verdict,treatment,seeds,state\n"
                                       "1,se.neck,SE,neck,0.06,0.02,0.10,better,passed,3,in\n"
                                       "2,cbam.backbone,CBAM,backbone,-0.0533,-0.2398,0.1332,not tested,failed,3,in\n")
    main_job = ablation(tmp_path / "main", {"cbam": (-0.0638, -0.1942, 0.0666, "not tested", [0.15, 0.0])}, [0.2])
    assert load().main([str(ref), str(search), f"{main_job}:cbam=cbam.backbone"]) == 0
    out = capsys.readouterr().out
    assert ("| cbam.backbone | +0.0121 | [-0.0951, +0.1192] (hierarchical) | not tested | 0.0825 | 2 of 4 | 4 |"
            in out)  # seeds above 0.05: 0.2 and 0.13
    assert "| se.neck | +0.0300 | [+0.0100, +0.0500] (hierarchical) | better | 0.0003 | 0 of 4 | 4 |" in out
    assert "baseline mAP50-95 per seed: 0: 0.1689, 1: 0.1894, 2: 0.3389, 3: 0.1703" in out
    assert ("| search | cbam.backbone | +0.0121 [-0.0951, +0.1192] | not tested | -0.0533 [-0.2398, +0.1332] | "
            "not tested | no | yes | yes |") in out
    assert ("| search | se.neck | +0.0300 [+0.0100, +0.0500] | better | +0.0600 [+0.0200, +0.1000] | better | yes | "
            "yes | no |") in out  # the same verdict, its Δ outside the reference interval
    assert ("| main | cbam.backbone | +0.0121 [-0.0951, +0.1192] | not tested | -0.0638 [-0.1942, +0.0666] | "
            "not tested | no | yes | yes |") in out


def test_a_folder_without_verdicts_or_a_search_table_exits_2_naming_it(tmp_path, capsys):
    ref = ablation(tmp_path / "ref", {"cbam": (0.0, -0.1, 0.1, "not tested", [0.0])}, [0.2])
    (tmp_path / "empty").mkdir()
    assert load().main([str(ref), str(tmp_path / "empty")]) == 2
    assert f"{tmp_path / 'empty'}: neither a search's search.csv" in capsys.readouterr().err
    assert load().main([str(tmp_path / "nowhere")]) == 2 and "no such folder" in capsys.readouterr().err
    assert load().main([]) == 2 and load().main(["--help"]) == 0
