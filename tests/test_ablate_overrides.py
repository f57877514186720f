"""Command-line overrides of an ablation config: one key of a mapping (``seeds.max=12``), YAML values in braces or
brackets, and the errors for a dotted key into a value that is not a mapping."""

from __future__ import annotations

import pytest

from attn_yolo.ablate.config.ablation import apply_overrides, load_config
from attn_yolo.args import UsageError

RAW = {"seeds": {"min": 3, "max": 6}, "train": {"epochs": 1, "imgsz": 128}, "start": {"epochs": 5}}


def test_one_key_of_a_mapping_keeps_the_others():
    out = apply_overrides(RAW, ["seeds.max=12", "start.epochs=3", "train.imgsz=96", "new_blocks.gamma=0.1"])
    assert out["seeds"] == {"min": 3, "max": 12}
    assert out["start"] == {"epochs": 3}
    assert out["train"] == {"epochs": 1, "imgsz": 96}
    assert out["new_blocks"] == {"gamma": 0.1}
    assert RAW["seeds"] == {"min": 3, "max": 6}  # the loaded config is not changed in place


def test_yaml_values_in_braces_and_brackets():
    assert apply_overrides(RAW, ["seeds={min: 2, max: 4}"])["seeds"] == {"min": 2, "max": 4}
    assert apply_overrides(RAW, ["seeds={max:4}"])["seeds"] == {"max": 4}
    assert apply_overrides(RAW, ["seeds=[0, 1, 2]"])["seeds"] == [0, 1, 2]
    assert apply_overrides(RAW, ["seeds=0,1"])["seeds"] == [0, 1]
    assert apply_overrides(RAW, ["devices=[cpu,cpu]"])["devices"] == ["cpu", "cpu"]
    assert apply_overrides(RAW, ["epochs=2"])["train"]["epochs"] == 2  # an Ultralytics train argument


def test_dotted_key_into_a_list_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"seeds.max=3: seeds is \[0, 1\] in the config, not a mapping"):
        apply_overrides({**RAW, "seeds": [0, 1]}, ["seeds.max=3"])


def test_the_default_config_takes_seeds_max():
    raw, *_ = load_config(None)
    assert apply_overrides(raw, ["seeds.max=12"])["seeds"]["max"] == 12


def test_a_key_two_mappings_deep_and_the_configs_own_section():
    """The search guide's rule keys: ``search.seeds.max=12`` sets one key of the search's seed rule, keeping the
    others; ``search={...}`` replaces the search's own section (a key of that config, not of the ablation's)."""
    raw = {"search": {"blocks": ["CBAM"], "seeds": {"min": 3, "max": 8}}}
    out = apply_overrides(raw, ["search.seeds.max=12", "search.seeds.spending=obf"], tool="search")
    assert out["search"] == {"blocks": ["CBAM"], "seeds": {"min": 3, "max": 12, "spending": "obf"}}
    assert apply_overrides(raw, ["search={blocks: [SE]}"], tool="search")["search"] == {"blocks": ["SE"]}
    with pytest.raises(UsageError, match=r"search.blocks is \['CBAM'\] in the config, not a mapping"):
        apply_overrides(raw, ["search.blocks.max=3"], tool="search")


def test_device_and_seeds_max_are_refused_before_any_run(tmp_path):
    """``device=gpu7`` is checked as ``devices`` is (it used to reach Ultralytics after the start had trained), and
    ``seeds.max`` has a ceiling (100000 made the design's boundaries run for minutes before any output)."""
    import subprocess
    import sys

    for arg, words in (("device=gpu7", "train.device: 'gpu7'; expected a CUDA index"),
                       ("seeds.max=100000", "seeds.max: 100000; expected an int in [2, 1000]")):
        p = subprocess.run([sys.executable, "-m", "attn_yolo_console", "ablate", arg, f"out={tmp_path / 'o'}"],
                           capture_output=True, text=True, timeout=120, env={**__import__("os").environ,
                                                                              "YOLO_OFFLINE": "1"})
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr[-1500:]
        assert not (tmp_path / "o").exists()
