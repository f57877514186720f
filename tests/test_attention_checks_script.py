"""scripts/attention_checks.py: the attention-check table of a finished ablation, read from its verdicts.json."""

import json

from conftest import load_script

from attn_yolo.ablate.statistics.verdicts import Verdict


def load():
    return load_script("attention_checks")


def test_one_row_per_arm_with_blocks_from_the_verdicts_figures(tmp_path, capsys):
    check = {"criterion": "mean ablation", "A": 0.00069, "knockout": 0.0195, "reinit": 0.00116, "status": "failed",
             "resolution": 0.01714, "health": {"gamma": 0.2997, "entropy": 0.99574, "uniform": 2 / 3}}
    verdicts = {"cbam": Verdict("cbam", "not tested", "not tested: …", mean=-0.00059, n=3, check=check).to_dict(),
                "placebo": Verdict("placebo", "n/a", "n/a", check={}).to_dict()}  # no figures: no row
    (tmp_path / "verdicts.json").write_text(json.dumps({"baseline": "baseline", "family": 2, "level": 0.975,
                                                        "verdicts": verdicts}))
    assert load().main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[0].count("|") == len(load().HEADERS) + 1 + 2  # the escaped |γ| in the header
    assert lines[2] == "| cbam | 0.0007 | 0.0195 | 0.0012 | 0.996 | 67 % | 0.300 | -0.0006 | ±0.0171 | failed |"


def test_a_folder_without_verdicts_exits_2_naming_the_file(tmp_path, capsys):
    assert load().main([str(tmp_path)]) == 2
    assert str(tmp_path / "verdicts.json") in capsys.readouterr().err


def test_malformed_or_missing_input_is_one_line_with_exit_2(tmp_path, capsys):
    for text in ('{"verdicts": 5}', '{"verdicts": {"a": 5}, "level": 0.95}', "not json"):
        (tmp_path / "verdicts.json").write_text(text)
        assert load().main([str(tmp_path)]) == 2
        assert "no readable verdicts" in capsys.readouterr().err
    assert load().main([str(tmp_path / "nowhere")]) == 2 and "no such folder" in capsys.readouterr().err
    assert load().main(["--help"]) == 0 and "usage" in capsys.readouterr().out
