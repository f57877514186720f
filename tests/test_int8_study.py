"""The trained-model INT8 study (``attn_yolo.export.int8_study``, ``scripts/int8_study.py``): its ablation config, the
page it renders from results, and (slow) the whole study on two blocks with tiny settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_yolo.export.int8_study import FP32_FLOOR, notes, render, study_config, table

CPU = {"name": "Example CPU 9000", "cores": 2, "isa": "AVX2", "vnni": [], "amx": []}


def test_study_config_is_the_default_ablation_with_one_arm_per_block(tmp_path):
    import yaml

    from attn_yolo import ablate
    from attn_yolo.ablate.config.ablation import SHAPES_WARM_CONFIG_YAML

    default = yaml.safe_load(SHAPES_WARM_CONFIG_YAML)
    cfg = study_config(tmp_path / "ab", ["CBAM", "MHSA"], [0, 1], devices="cpu", start={"epochs": 3})
    assert [v["name"] for v in cfg["variants"]] == ["baseline", "cbam", "mhsa"]
    assert all(v["at"] == "backbone" and v["base"] == default["variants"][0]["model"] for v in cfg["variants"][1:])
    assert cfg["seeds"] == [0, 1] and cfg["devices"] == "cpu"
    assert cfg["start"] == {**default["start"], "epochs": 3} and cfg["train"] == default["train"]
    assert cfg["new_blocks"] == default["new_blocks"]  # fine-tuned as the ablation does
    ablate.validate(cfg, tmp_path, "study", "study.yaml")  # a config the ablation takes


def _m(fp32, drop, ratio, lo=None, hi=None, excess=None):
    return {"fp32": fp32, "int8": fp32 - drop, "drop": drop, "lo": drop - 0.2 if lo is None else lo,
            "hi": drop + 0.2 if hi is None else hi, "n_images": 100, "latency": {"ratio": ratio},
            "ran": {"model.5": {"gate": {"int8": 0, "float": 2}, "conv": {"int8": 2, "float": 3}}}, "kept": 7,
            **({"excess": excess} if excess else {})}


def results() -> dict:
    check = {"status": "passed", "why": "mean-ablation effect 0.0200 >= 1 × resolution ±0.0050"}
    failed = {"status": "failed", "why": "mean-ablation effect 0.0010 < 1 × resolution ±0.0050"}
    ex = {"excess": 0.3, "lo": -0.1, "hi": 0.7}
    return {"start": {"map50_95": 0.581}, "baseline": "baseline", "imgsz": 128, "seeds": [0, 1, 2], "cpu": CPU,
            "minutes": 90.0, "loads": [1.0, 2.5],
            "arms": {"baseline": {"block": "baseline", "check": None, "onnx": _m(58.0, 0.5, 1.8),
                                  "openvino": _m(58.0, 0.2, 0.6)},
                     "cbam": {"block": "CBAM", "check": check, "onnx": _m(59.0, 0.8, 1.7, excess=ex),
                              "openvino": _m(59.0, 0.1, 0.55, excess=ex)},
                     "se": {"block": "SE", "check": failed, "onnx": _m(35.0, 0.4, 1.9, excess=ex),
                            "openvino": _m(35.0, 0.3, 0.7, excess=ex)}}}


def test_table_has_one_row_per_block_and_runtime_with_the_baselines_drop():
    rows = table(results())
    assert len(rows) == 2 + 3 * 2
    cbam = [r for r in rows if r.startswith("| CBAM | passed")]
    assert len(cbam) == 2 and "| +0.80 [+0.60, +1.00] | +0.50 | +0.30 [-0.10, +0.70] | 1.70 |" in cbam[0]
    assert "gate 2 float · conv 2 INT8 + 3 float" in cbam[0]
    assert any(r.startswith("| SE | failed: mean-ablation effect 0.0010") and "35.00 (below 40)" in r for r in rows)


def test_notes_flag_the_floor_the_failed_checks_and_the_slower_runtime():
    text = "\n".join(notes(results()))
    assert "mAP50-95 58.10 at 128 px" in text
    assert f"below {FP32_FLOOR:g}: SE." in text and "Attention check failed" in text and ": SE." in text
    onnx = next(ln for ln in text.splitlines() if ln.startswith("- ONNX Runtime"))
    assert "median INT8/fp32 latency 1.80" in onnx and "SLOWER" in onnx and "Example CPU 9000" in onnx
    assert "VNNI no" in onnx and "OpenVINO (NNCF) INT8 ran ×0.60" in onnx  # the faster runtime, measured here
    assert "not decided" not in text
    r = results()
    r["arms"]["cbam"]["check"] = {"status": "n/a", "why": "the deciding interval is still unbounded"}
    assert "- Attention check not decided (n/a: no bounded interval, e.g. one seed): CBAM." in notes(r)
    ov = next(ln for ln in text.splitlines() if ln.startswith("- OpenVINO"))
    assert "SLOWER" not in ov
    page = render(results(), "python scripts/int8_study.py --blocks CBAM SE")
    assert page.startswith("Regenerate: `python scripts/int8_study.py --blocks CBAM SE`") and "Example CPU" in page


def test_script_refuses_an_unknown_block_with_exit_2(tmp_path):
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, str(root / "scripts" / "int8_study.py"), "--blocks", "CBAMM", "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=root)
    assert p.returncode == 2 and "unknown blocks ['CBAMM']" in p.stderr


@pytest.mark.parametrize("args, words", [
    (["--devices", "gpu7"], "devices[0]: 'gpu7'"),
    (["--imgsz", "0"], "imgsz"),
    (["--start", "missing.pt"], "start"),
])
def test_script_refuses_bad_settings_in_one_line_with_exit_2_and_writes_no_page(tmp_path, args, words):
    """A bad setting is the ablation's one-line refusal (no traceback, exit 2) before any training; no page is
    written, and none in the repository for a study whose --out is elsewhere."""
    root = Path(__file__).resolve().parents[1]
    page = root / "docs" / "benchmarks" / "int8.md"
    before = page.read_bytes()
    p = subprocess.run([sys.executable, str(root / "scripts" / "int8_study.py"), "--blocks", "CBAM", "--out",
                        str(tmp_path), *args], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "YOLO_OFFLINE": "1"})
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and words in p.stderr
    assert not (tmp_path / "ablation" / "runs").exists() and not (tmp_path / "int8.md").exists()
    assert page.read_bytes() == before


def test_a_study_interrupted_or_with_no_finished_run_writes_nothing(tmp_path, monkeypatch):
    """Ctrl-C during the training (exit 130) or an ablation that finished no run: StudyError, no results."""
    from attn_yolo import ablate
    from attn_yolo.export import int8_study

    cfg = int8_study.study_config(tmp_path / "ablation", ["CBAM"], [0, 1])
    monkeypatch.setattr(ablate, "run", lambda path: 130)
    with pytest.raises(int8_study.StudyError, match="interrupted"):
        int8_study.run_study(cfg, tmp_path)
    monkeypatch.setattr(ablate, "run", lambda path: 1)
    with pytest.raises(int8_study.StudyError, match="no run"):
        int8_study.run_study(cfg, tmp_path)
    assert not (tmp_path / "int8-study.json").exists()


@pytest.mark.slow
def test_the_study_on_two_blocks_with_tiny_settings(tmp_path):
    """The whole study, 2 blocks, 1 seed, 400 images at 96 px, a 3-epoch start (its command took 51 min on 2 busy
    cores): the page has both blocks and the baseline in both runtimes, each drop equals fp32 − INT8, each excess
    equals the block's drop minus the baseline's and lies in its interval."""
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "data", n_train=400, n_val=60, imgsz=96, seed=0)
    page = tmp_path / "int8.md"
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(root / "scripts" / "int8_study.py"), "--blocks", "CBAM", "MHSA", "--seeds", "0",
           "--out", str(tmp_path / "run"), "--page", str(page), "--data", str(data), "--imgsz", "96",
           "--start-epochs", "3", "--devices", "cpu", "--n-boot", "200"]
    assert subprocess.run(cmd, cwd=root).returncode == 0
    res = json.loads((tmp_path / "run" / "int8-study.json").read_text())
    assert set(res["arms"]) == {"baseline", "cbam", "mhsa"}
    for arm, a in res["arms"].items():
        for fmt in ("onnx", "openvino"):
            m = a[fmt]
            assert m["drop"] == pytest.approx(m["fp32"] - m["int8"]) and m["latency"]["ratio"] > 0
            if arm != "baseline":
                ex = m["excess"]
                assert ex["excess"] == pytest.approx(m["drop"] - res["arms"]["baseline"][fmt]["drop"])
                assert ex["lo"] <= ex["excess"] <= ex["hi"]
                assert a["check"]["status"] in ("passed", "failed", "n/a")
    text = page.read_text()
    assert "<!-- int8-study:begin -->" in text and text.count("| CBAM |") == 2 and text.count("| MHSA |") == 2
