"""The placement search (attn_yolo.search): the rule by simulation and against the confidence sequence computed on
its own, ``sites: auto`` golden lists written by hand, bad input (exit 2 before any training), a search end to end
with a stand-in runner (outputs, SIGTERM and resume, a larger budget continues), and a real one on the embedded data
(slow)."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from attn_yolo.search import run
from attn_yolo.search.rule import SearchRule, replay
from attn_yolo.search.simulate import simulate
from attn_yolo_console import main as cli_main

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------------ the rule


CHOSEN, EARLIER = "each vs baseline and best, pooled spread (chosen)", "every pair (earlier rule)"


@pytest.mark.parametrize("arms", [8, 12])
def test_simulated_searches_answer_within_the_budget(arms):
    """500 simulated searches per case (fixed seeds; scripts/search_budget.py prints the 1,000-search table) of
    ``arms`` arms, seed SD of Δ 0.004 mAP50-95, within the default budget (6 rounds of every arm and the baseline):
    one arm 2 seed-SDs better is returned in >= 90 %; with every Δ = 0 any false verdict happens in <= 5 % (+ 2 %:
    500 searches' sampling error), also with unequal spreads (0.5–1.5 × SD), and the search mostly answers "none
    better than the baseline beyond w" with w <= 0.01. The earlier rule (every pair of arms), on the same draws,
    returns the arm in under 10 % of searches, uses more runs and ends with a bound over twice as wide."""
    sd = 0.004
    one = simulate([2 * sd] + [0.0] * (arms - 1), sd, searches=500, seed=arms, candidates=[CHOSEN, EARLIER])
    null = simulate([0.0] * arms, sd, searches=500, seed=arms + 1, candidates=[CHOSEN, EARLIER])
    assert one[CHOSEN]["returned"] >= 0.90, one
    assert null[CHOSEN]["any_false"] <= 0.07 and one[CHOSEN]["any_false"] <= 0.07, (one, null)
    assert null[CHOSEN]["answered"] >= 0.80 and null[CHOSEN]["bound"] <= 0.01, null
    assert one[EARLIER]["returned"] < 0.10 and null[EARLIER]["answered"] < 0.05, (one, null)
    assert one[CHOSEN]["runs"] < 0.8 * one[EARLIER]["runs"], one  # arms dropped: the saving
    assert null[EARLIER]["bound"] > 2 * null[CHOSEN]["bound"], null
    uneven = simulate([0.0] * arms, sd, searches=500, seed=arms + 2, candidates=[CHOSEN],
                      spreads=np.linspace(0.5, 1.5, arms))[CHOSEN]
    assert uneven["any_false"] <= 0.07, uneven


def two_way_by_hand(y: np.ndarray) -> tuple[float, int]:
    """The seed SD of Δ and its df from per-run mAP ``y`` (V runs × S seeds, row 0 the baseline): least squares of
    y = run + seed by an explicit design matrix (numpy's lstsq), independent of ``rule.pooled_sd``."""
    v, n = y.shape
    x = np.zeros((v * n, v + n))
    for i in range(v):
        for j in range(n):
            x[i * n + j, i] = x[i * n + j, v + j] = 1
    coef, _, rank, _ = np.linalg.lstsq(x, y.ravel(), rcond=None)
    rss = float(((y.ravel() - x @ coef) ** 2).sum())
    df = v * n - rank
    return math.sqrt(2 * rss / df), df


def test_the_look_is_the_two_way_t_interval_and_hsus_bound_computed_by_hand():
    """At the first look (3 seeds, every arm in), each arm's interval is Δ̄ ± t(df, 1 − (2α/3)/K · share / 2) ·
    s/√3 with s the two-way layout's pooled SD (by hand: lstsq, scipy.stats.t, Pocock's share ln(1 + (e − 1) · 3/8)),
    and an arm is dropped below another exactly when Δ̄_j − Δ̄_i exceeds t(df, 1 − (α/3)/(K − 1) · share) · s/√3."""
    from scipy import stats

    rng = np.random.default_rng(7)
    k, e = 4, 30
    rule = SearchRule(max=8, looks=[3, 4, 6, 8], precision=None)
    share = math.log(1 + (math.e - 1) * 3 / 8)
    assert rule.shares()[3] == pytest.approx(share)
    dropped = 0
    for _ in range(e):
        y = rng.normal(0.5, 0.003, (k + 1, 3)) + np.array([0, 0.012, 0, -0.01, 0.004])[:, None]
        r = replay((y[1:] - y[0])[None], rule)
        sd, df = two_way_by_hand(y)
        assert r["df"][0] == df == k * 2 and r["sd"][0] == pytest.approx(sd)
        mean = (y[1:] - y[0]).mean(1)
        half = stats.t.ppf(1 - 0.05 * 2 / 3 / k * share / 2, df) * sd / math.sqrt(3)
        assert r["lo"][0] == pytest.approx(mean - half) and r["hi"][0] == pytest.approx(mean + half)
        h = stats.t.ppf(1 - 0.05 / 3 / (k - 1) * share, df) * sd / math.sqrt(3)
        beaten = (mean[:, None] - mean[None, :] > h).any(0)  # [j, i]: j's bound over i above 0
        expect = np.where(mean + half < 0, 1, np.where(beaten, 2, 0))
        assert (r["state"][0] == expect).all(), (r["state"][0], expect)
        dropped += int((expect == 2).sum())
    assert dropped > 0  # the check saw drops below another arm


# ------------------------------------------------------------------------------------------------------ sites


GOLDEN = {  # by hand, from each YAML's rows (Ultralytics 8.4): taps of the neck, SPPF / C2PSA, Detect's inputs
    "yolov8n.yaml": [("backbone", None, [4, 6, 9]), ("4", None, [4]), ("6", None, [6]), ("sppf", None, [9]),
                     ("neck", None, [15, 18, 21]), ("backbone", "C2f", [2, 4, 6, 8]),
                     ("neck", "C2f", [12, 15, 18, 21])],
    "yolo11n.yaml": [("backbone", None, [4, 6, 10]), ("4", None, [4]), ("6", None, [6]), ("sppf", None, [10]),
                     ("neck", None, [16, 19, 22]), ("backbone", "C3k2", [2, 4, 6, 8]),
                     ("neck", "C3k2", [13, 16, 19, 22])],
    "yolo26n.yaml": [("backbone", None, [4, 6, 10]), ("4", None, [4]), ("6", None, [6]), ("sppf", None, [10]),
                     ("neck", None, [16, 19, 22]), ("backbone", "C3k2", [2, 4, 6, 8]),
                     ("neck", "C3k2", [13, 16, 19, 22])],
}


@pytest.mark.parametrize("model", list(GOLDEN))
def test_auto_sites_are_the_documented_ones(model):
    from attn_yolo.insertion.base import load_base
    from attn_yolo.search.sites import auto_sites, layers

    d = load_base(model)
    got = [(s.at, s.csp, layers(d, s)) for s in auto_sites(d)]
    assert got == GOLDEN[model]


# ------------------------------------------------------------------------------------------------------ bad input


def search_config(folder: Path, data: Path, **search) -> Path:
    cfg = {"data": str(data), "search": {"model": "yolo11n.yaml", "blocks": ["ECA", "SE"], "sites": ["sppf", 4],
                                         "seeds": {"min": 2, "max": 4}, **search},
           "train": {"epochs": 1, "imgsz": 64, "batch": 4, "workers": 0, "plots": False, "device": "cpu"},
           "out": str(folder / "out"), "latency": {"repeats": 2, "warmup": 0}, "health": False}
    path = folder / "search.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize("search, key", [
    ({"blocks": ["CBAMM"]}, "search.blocks[0]: unknown block 'CBAMM' (did you mean 'CBAM'?)"),
    ({"sites": ["sppf", "nek"]}, "search.sites[1]: at='nek': unknown site 'nek'. Did you mean 'neck'?"),
    ({"sites": ["C2f:neck"]}, "search.sites[0]: module=C2f_CBAM at='neck' selects no C2f row"),
    ({"blocks": [{"module": "MHSA", "args": [3]}]}, "search: arm mhsa.sppf"),  # 3 heads do not divide the width
    ({"max_runs": 9}, "search.max_runs: 9; below one round: the first round runs the baseline and 4 arms to 2 seeds "
                      "= 10 runs"),
    ({"seeds": {"max": 6, "design": "cs"}}, "search.seeds.design: unknown key"),
    ({"seeds": {"max": 6, "spending": "linear"}}, "search.seeds.spending: 'linear'; expected one of obf, pocock"),
    ({"seeds": {"min": 3, "max": 6, "looks": [8]}}, "search.seeds.max: 6; below the first look of search.seeds.looks "
                                                    "(8): set search.seeds.max >= 8"),
    ({"seeds": {"min": 3, "max": 6, "looks": [2, 6]}}, "search.seeds.looks: [2, 6]; expected seed counts from "
                                                       "search.seeds.min (3) to search.seeds.max (6)"),
    ({"seeds": {"min": 1, "max": 6}}, "search.seeds.min: 1; expected an int >= 2"),
    ({"seeds": {"min": 5, "max": 4}}, "search.seeds.max: 4; expected an int >= search.seeds.min (5)"),
    ({"seeds": {"max": 1}}, "search.seeds.max: 1; expected an int in [2, 1000]"),
    ({"precision": 0}, "search.precision: 0; expected a number > 0"),
    ({"precision": "fine"}, "search.precision: 'fine'; expected a number > 0"),
    ({"confidence": 1.5}, "search.confidence: 1.5; expected a number in (0, 1)"),
])  # fmt: skip
def test_bad_input_exits_2_naming_the_key_before_any_training(tmp_path, tiny_data, capsys, search, key):
    cfg = search_config(tmp_path, tiny_data, **search)
    assert cli_main(["search", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert key in err, err
    assert not (tmp_path / "out").exists()  # nothing trained nor written


@pytest.mark.parametrize("command, override, key", [
    ("search", "search.seeds={min: 1, max: 8}", "search.seeds.min: 1; expected an int >= 2"),
    ("search", "search.precision=-0.01", "search.precision: -0.01; expected a number > 0"),
    ("search", "search.seeds={max: 9, looks: [2, 9]}", "search.seeds.looks: [2, 9]; expected seed counts from "
                                                       "search.seeds.min (3) to search.seeds.max (9)"),
    ("search", "search.confidence=0", "search.confidence: 0; expected a number in (0, 1)"),
    ("ablate", "seeds.confidence=1.5", "seeds.confidence: 1.5; expected a number in (0, 1)"),
    ("ablate", "seeds.min=1", "seeds.min: 1; expected an int >= 2"),
])  # fmt: skip
def test_a_rule_key_out_of_range_on_the_command_line_exits_2_naming_it(tmp_path, tiny_data, capsys, command,
                                                                       override, key):
    """A stopping-rule key out of range given on the command line (the search's or the ablation's) exits 2 with a
    line naming the key and what is allowed, before any training: nothing is written in ``out``."""
    cfg = search_config(tmp_path, tiny_data)
    if command == "ablate":
        raw = yaml.safe_load(cfg.read_text())
        raw.pop("search")
        raw |= {"variants": [{"name": "baseline", "model": "yolo11n.yaml"},
                             {"name": "eca", "base": "yolo11n.yaml", "module": "ECA", "at": "sppf"}],
                "seeds": {"min": 2, "max": 3}}
        cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert cli_main([command, str(cfg), override]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_the_search_records_its_design_and_a_rerun_may_not_change_it(tmp_path, tiny_data):
    """The search's design (its SearchRule, ``min`` filled in) is the config's ``seeds`` in config.yaml, so a rerun
    on the same runs with another ``search.seeds.max`` is refused as an ablation's (``rerun.check_seed_design``)."""
    import dataclasses

    from attn_yolo.ablate.runs.rerun import check_seed_design
    from attn_yolo.args import UsageError
    from attn_yolo.search.config import DESIGN, validate

    raw = yaml.safe_load(search_config(tmp_path, tiny_data).read_text())
    first = validate(raw, tmp_path, "s", "s.yaml")
    assert first.ab.config["seeds"] == {**dataclasses.asdict(first.rule), "design": DESIGN}
    assert first.rule.spending == "pocock"
    check_seed_design(tmp_path, first.ab.config, first.ab.config, 10)  # the same design goes on
    raw["search"]["seeds"] = {"min": 2, "max": 6}
    wider = validate(raw, tmp_path, "s", "s.yaml")
    with pytest.raises(UsageError, match=r"seeds\.max: 4 -> 6"):
        check_seed_design(tmp_path, first.ab.config, wider.ab.config, 10)
    earlier = {"seeds": {**dataclasses.asdict(first.rule), "design": "spending"}}  # a search of the earlier rule
    with pytest.raises(UsageError, match=r"seeds\.design: spending -> 'search: each arm"):
        check_seed_design(tmp_path, earlier, first.ab.config, 10)


WIDE_ONLY = '''"""A test block that refuses maps narrower than 128 channels."""

from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values
from attn_yolo.nn.declaration import declare


@declare("WideOnly", paper="Nobody, A test block, 2026", example_args=())
class WideOnly(nn.Module):
    """WideOnly: the identity, built at 128 channels or more (a test block)."""

    def __init__(self, c1: int, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "WideOnly")
        check(c1 >= 128, where, "c1", c1, "an int >= 128 (a test block)")
        check_init_values(init_values, where)
        self.gate = nn.Identity()

    def forward(self, x):
        return self.gate(x)
'''


@pytest.fixture
def wide_only(tmp_path, monkeypatch):
    """A block declared in a temporary file that cannot be built below 128 channels (yolo11n's neck P3: 64)."""
    import importlib

    import attn_yolo
    from attn_yolo.registry import DECLARATIONS

    (tmp_path / "wide_only_block.py").write_text(WIDE_ONLY)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("wide_only_block")
    yield "WideOnly"
    attn_yolo.unregister()
    del DECLARATIONS["WideOnly"]
    sys.modules.pop("wide_only_block", None)
    attn_yolo.register()


def test_auto_sites_leave_out_where_a_block_cannot_be_built_given_sites_refuse_it(wide_only, tmp_path, tiny_data,
                                                                                  capsys):
    """``sites: auto``: the arms a block cannot be built at are left out, each with its reason, in the plan and the
    summary; the others are searched. The same site written by the user is an error naming the arm (exit 2)."""
    from attn_yolo.search.config import validate
    from attn_yolo.search.report import summary

    raw = yaml.safe_load(search_config(tmp_path, tiny_data, blocks=[wide_only], sites="auto",
                                       seeds={"min": 2, "max": 8}).read_text())
    search = validate(raw, tmp_path, "t", "<t>")
    assert "wideonly.neck" in search.unbuildable and "c1=64" in search.unbuildable["wideonly.neck"]
    assert {"wideonly.backbone", "wideonly.4", "wideonly.sppf"} <= {a.name for a in search.arms}
    assert not set(search.unbuildable) & {a.name for a in search.arms}
    dec = {"lo": [], "hi": [], "n": [], "state": [], "by": [], "mean": [], "stop": 0, "settled": 0, "rounds": 0}
    text = summary(search, [], dec, 0, 0.0)
    assert "## Not searched" in text and "- wideonly.neck: " in text

    cfg = search_config(tmp_path, tiny_data, blocks=[wide_only], sites=["sppf", "neck"])
    assert cli_main(["search", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "search: arm wideonly.neck: " in err and "c1" in err, err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------------ end to end


EFFECT = {"eca.sppf": 0.006}  # the stand-in runner's true Δ per arm (0 elsewhere)

DRIVER = """
import os, sys, time, zlib
from pathlib import Path
sys.path.insert(0, os.environ["TESTS"])
from test_search import fake_runner
from attn_yolo.search import run
sys.exit(run(sys.argv[1], sys.argv[2:], runner=fake_runner))
"""


def fake_runner(spec, device):
    """Stands in for execute_run: mAP50-95 0.3 + the arm's effect + seed noise (deterministic), knock-out figures
    that pass the attention check; sleeps ``SLOW`` s for arms named in ``HANG`` (a signal's window)."""
    import zlib

    Path(spec.run_dir).mkdir(parents=True, exist_ok=True)
    if spec.variant in os.environ.get("HANG", "").split(","):
        Path(spec.run_dir, "started").write_text("")
        time.sleep(float(os.environ.get("SLOW", "60")))
    noise = (zlib.crc32(f"{spec.variant}/{spec.seed}".encode()) % 1000 - 500) / 1e5
    m = 0.3 + EFFECT.get(spec.variant, 0.0) + noise
    return {"variant": spec.variant, "seed": spec.seed, "status": "ok", "params": spec.params, "gflops": spec.gflops,
            "map50_95": m, "latency_ms": 1.0, "device": device, "run_dir": spec.run_dir, "model": spec.model,
            "error": "", "fingerprint": spec.fingerprint, "knockout_effect": 0.05, "mean_ablation_effect": 0.05,
            "attention_check": "mean ablation"}


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def interrupt_in_process(tmp_path: Path, cfg: Path) -> None:
    """Ctrl-C in the run of se.4 seed 0 (in this process): exit 130."""
    def runner(spec, device):
        if (spec.variant, spec.seed) == ("se.4", 0):
            raise KeyboardInterrupt
        return fake_runner(spec, device)

    assert run(str(cfg), runner=runner) == 130


def sigterm_subprocess(tmp_path: Path, cfg: Path) -> None:
    """SIGTERM to a search in a subprocess while se.4 seed 0 trains: exit 143."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(script), str(cfg)], start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TESTS": str(REPO / "tests"),
                                 "HANG": "se.4"})
    try:
        t0 = time.time()
        while not (tmp_path / "out/runs/se.4-seed0/started").exists():
            assert time.time() - t0 < 180 and proc.poll() is None, "the driver never reached se.4"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("stop", [interrupt_in_process, pytest.param(sigterm_subprocess, marks=pytest.mark.slow)])
def test_search_end_to_end_stopped_resumed_and_a_larger_budget(tmp_path, tiny_data, stop):
    """A search of 2 blocks × 2 sites: stopped mid-round (Ctrl-C in this process; SIGTERM to a subprocess, slow) it
    keeps finished runs; the rerun redoes none of them and writes every output; its intervals are the two-way
    t-intervals of the records computed by hand; best.yaml builds; a rerun with a larger budget continues the same
    search until it answers (the arm with the effect returned)."""
    from scipy import stats

    cfg = search_config(tmp_path, tiny_data, max_runs=10, seeds={"min": 2, "max": 6})
    stop(tmp_path, cfg)
    done = {(r["variant"], r["seed"]) for r in read_csv(tmp_path / "out/results.csv") if r["status"] == "ok"}
    assert done and ("se.4", "0") not in done
    calls = []
    assert run(str(cfg), runner=lambda s, d: calls.append((s.variant, str(s.seed))) or fake_runner(s, d)) == 0
    assert not set(calls) & done and len(calls) + len(done) == 10  # the first round: 5 arms × 2 seeds, once each
    out = tmp_path / "out"
    for f in ("summary.md", "search.csv", "results.csv", "placement.png"):
        assert (out / f).is_file(), f
    text = (out / "summary.md").read_text()
    assert "With probability at least 95%, every verdict of this search holds at once" in text
    assert "the budget is spent (max_runs 10" in text and "runs: 10 of the full design's 30" in text
    assert "**None better than the baseline beyond +0.0214**" in text and "a larger budget narrows it" in text
    assert not (out / "best.yaml").exists()  # no arm returned: no best.yaml
    rows = read_csv(out / "results.csv")
    m = {(r["variant"], int(r["seed"])): float(r["map50_95"]) for r in rows}
    arms = ["eca.sppf", "eca.4", "se.sppf", "se.4"]
    sd, df = two_way_by_hand(np.array([[m[(a, s)] for s in range(2)] for a in ["baseline", *arms]]))
    half = stats.t.ppf(1 - 0.05 * 2 / 3 / 4 * math.log(1 + (math.e - 1) * 2 / 6) / 2, df) * sd / math.sqrt(2)
    for t in read_csv(out / "search.csv"):
        deltas = [m[(t["arm"], s)] - m[("baseline", s)] for s in range(int(t["seeds"]))]
        assert float(t["delta"]) == pytest.approx(np.mean(deltas))
        assert (float(t["lo"]), float(t["hi"])) == (pytest.approx(np.mean(deltas) - half),
                                                    pytest.approx(np.mean(deltas) + half))
    calls.clear()  # a larger budget: the same search goes on until it answers
    assert run(str(cfg), ["search.max_runs=40"], runner=lambda s, d: calls.append(s.seed) or fake_runner(s, d)) == 0
    assert calls and min(calls) >= 2  # only new seeds
    text = (out / "summary.md").read_text()
    assert "runs: 10 of" not in text and "**Returned: eca.sppf** (ECA at sppf): better than the baseline" in text
    spread = next(line for line in text.splitlines() if line.startswith("- spread: "))
    m = {(r["variant"], int(r["seed"])): float(r["map50_95"]) for r in read_csv(out / "results.csv")}
    own = [np.std([m[(t["arm"], s)] - m[("baseline", s)] for s in range(int(t["seeds"]))], ddof=1)
           for t in read_csv(out / "search.csv")]
    assert f"each arm's own, {min(own):.4f} to {max(own):.4f}" in spread, spread
    from ultralytics import YOLO

    import attn_yolo  # noqa: F401  the blocks registered

    assert read_csv(out / "search.csv")[0]["arm"] == "eca.sppf"
    model = YOLO(str(out / "best.yaml"))
    assert any(type(m).__name__ == "ECA" for m in model.model.modules())


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a start and 20 real runs: about 15 min on 2 loaded cores
def test_real_search_on_the_embedded_data_and_its_winner_trains(tmp_path):
    """3 blocks × 3 sites on the embedded data (tiny: imgsz 64, 16 images, a 1-epoch start), 2 seeds: every output,
    the winner's YAML and weights train with Ultralytics."""
    from attn_yolo.synthetic import generate

    data = generate(tmp_path / "data", n_train=16, n_val=8, imgsz=64, seed=0)
    cfg = search_config(tmp_path, data, blocks=["ECA", "SE", "CBAM"], sites=["sppf", 4, "C3k2:neck"],
                        seeds={"min": 2, "max": 5}, max_runs=20)
    raw = yaml.safe_load(cfg.read_text())
    raw["start"] = {"epochs": 1}
    raw["new_blocks"] = {"gamma": 0.3}
    cfg.write_text(yaml.safe_dump(raw))
    assert cli_main(["search", str(cfg)]) == 0
    out = tmp_path / "out"
    for f in ("summary.md", "search.csv", "placement.png"):
        assert (out / f).is_file(), f
    assert len(read_csv(out / "search.csv")) == 9
    if (out / "best.yaml").is_file():
        from ultralytics import YOLO

        model = YOLO(str(out / "best.pt"))
        model.train(data=str(data), epochs=1, imgsz=64, batch=4, workers=0, plots=False, device="cpu",
                    project=str(tmp_path), name="winner", val=False)
        assert (tmp_path / "winner/weights/last.pt").is_file()


def test_placebo_arms_at_one_site_each(tmp_path, tiny_data):
    """``placebo: true``: each arm gets a Placebo arm at its one site, sized to its block's parameters (a one-block
    placebo is insert's one-module form: its args are the block's, not a list of them)."""
    from attn_yolo.ablate.config.ablation import load_config
    from attn_yolo.ablate.runs.prepare import prepare
    from attn_yolo.search.config import validate

    cfg = search_config(tmp_path, tiny_data, blocks=["SE"], sites=["sppf"], placebo=True)
    search = validate(*load_config(cfg))
    prepare(search.ab)
    assert search.arm_names == ["se.sppf", "se.sppf-placebo"]
    arm, placebo = (next(v for v in search.ab.variants if v.name == n) for n in search.arm_names)
    assert placebo.spec["module"] == "Placebo" and placebo.spec["at"] == 10 and len(placebo.new_blocks) == 1
    assert abs(placebo.params - arm.params) < 0.05 * (arm.params - search.ab.variants[0].params) + 600


def test_a_round_begins_only_when_expected_to_end_within_the_minutes():
    """``minutes``: a round is begun only when this session's pace says it ends within the budget; before any round
    ran, while any minute is left; ``max_runs`` counts runs."""
    from types import SimpleNamespace

    from attn_yolo.search.rounds import budget_left

    search = SimpleNamespace(max_runs=None, minutes=10)
    pace = [(27, 300.0), (9, 120.0)]  # 420 s for 36 runs: 11.7 s a run, so 9 runs take 105 s
    assert budget_left(search, 36, 9, 8 * 60, pace) == ""  # 8 + 1.75 min <= 10
    why = budget_left(search, 36, 9, 8.5 * 60, pace)  # 8.5 + 1.75 > 10
    assert "8.5 min spent" in why and "about 1.8 min at this session's pace" in why
    assert budget_left(search, 0, 27, 9.9 * 60) == ""  # no pace yet: begun
    assert "10 min spent" in budget_left(search, 0, 27, 10 * 60)
    assert "the next round needs 9" in budget_left(SimpleNamespace(max_runs=40, minutes=None), 36, 9, 0.0)


@pytest.mark.parametrize("seeds", [{"min": 1, "max": 6}, {"min": 5, "max": 4}, {"max": 1}, {"max": 2.5},
                                   {"min": 3, "max": 6, "spending": "linear"}, {"min": 3, "max": 6, "looks": [2, 6]},
                                   {"min": 3, "max": 6, "looks": [8]}, {"min": 3, "max": 6, "looks": [4, 4]}])
def test_the_seed_rule_is_checked_once_for_the_ablation_and_the_search(seeds):
    """One check of ``seeds: {min, max, ...}``: the ablation's and the search's problems are the same lines, each
    under its own prefix (``seeds.``, ``search.seeds.``)."""
    from attn_yolo.ablate.config.design import check_seed_rule
    from attn_yolo.search.config import _rule

    ablation = check_seed_rule(seeds)[2]
    search = _rule({"seeds": seeds})[1]
    assert ablation and all(p.startswith("seeds.") for p in ablation), ablation
    assert [p.replace("search.seeds.", "seeds.") for p in search] == ablation
