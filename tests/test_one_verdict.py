"""One verdict, computed once: for one set of recorded runs every output agrees on each arm's verdict, the interval
that decides it and its level: summary.md's verdict lines (and the terminal's lead), the difference table, the health
table, the attention check, the yardstick and placebo lines, ablation.png's and delta.png's labels, the search's
rule and explain.md. K = 1 and K = 3 comparisons, with and without per-image records, and a baseline that learned
nothing. The truth is verdicts.json, which the report writes from the same verdicts; the other intervals, p-values and
secondary metrics are in a section that says they do not decide, and the verdict line holds exactly one interval."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import write_config
from test_ablate import fake_runner
from test_bootstrap import box_record

from attn_yolo import ablate
from attn_yolo.ablate.reports import report
from attn_yolo.ablate.runs import perimage
from attn_yolo.ablate.statistics.stats import TARGET_DELTA
from attn_yolo.ablate.statistics.verdicts import COMPARED, NOT_TESTED, VERDICTS_NAME, judge, level_words, read_verdicts
from attn_yolo.health.gatescsv import CSV_NAME

SE = {"name": "se", "base": "yolo11n.yaml", "module": "SE", "at": "backbone", "args": [16]}
SHIFT = {"cbam": 0.02, "se": 0.0005, "cbam-placebo": 0.004, "reference": 0.03}
LINE = re.compile(r"^- \*\*(?P<arm>[^*]+)\*\*: \*\*(?P<words>.+?)\*\* \(Δ (?P<mean>\S+), (?P<kind>.+?) "
                  r"(?P<level>[\d.]+%) CI (?P<iv>\[[^\]]+\]), n = (?P<n>\d+) paired seeds")


def runner_for(records: bool, nothing: bool):
    """Fake runs: each arm shifted by ``SHIFT`` (seed noise added); cbam's blocks matter (mean ablation 0.05), se's
    change nothing (0: not tested); a gates.csv per run with blocks; per-image records (``records``); the baseline all
    zero (``nothing``)."""

    def runner(spec, device):
        row = fake_runner(spec, device)
        noise = 0.002 * np.sin(3.0 * spec.seed + len(spec.variant))
        row["map50_95"] = 0.3 + SHIFT.get(spec.variant, 0.0) + noise
        if spec.variant not in ("baseline", "reference"):
            fx = {"se": 0.0, "cbam-placebo": 0.03}.get(spec.variant, 0.05)
            key = "knockout_effect" if spec.variant.endswith("placebo") else "mean_ablation_effect"
            row |= {"attention_check": "knock-out" if spec.variant.endswith("placebo") else "mean ablation", key: fx}
            if spec.variant != "reference":
                d = Path(spec.run_dir)
                d.mkdir(parents=True, exist_ok=True)
                (d / CSV_NAME).write_text(
                    "epoch,name,layer,block,gate_mean,gate_std,saturated,entropy,peak_share,gamma,knockout,nonfinite,"
                    "flags\n1,L05_X,5,X,0.5,0.1,0,0.9,0.01,,0.02,0,\n")
        if nothing and spec.variant == "baseline":
            row |= {k: 0.0 for k in ("precision", "recall", "map50", "map50_95")}
        if records:
            rec = box_record(np.random.default_rng(0), 12, 2)  # the same images in every run: paired
            rng = np.random.default_rng([spec.seed, len(spec.variant)])
            rec.pred_tp = rng.random(rec.pred_tp.shape) < (0.5 + SHIFT.get(spec.variant, 0.0) * 5)
            perimage.save_record(rec, Path(spec.run_dir) / perimage.PERIMAGE_NAME)
        return row

    return runner


CASES = {
    "K1": {},
    "K3": {"variants": "se", "reference": {"model": "yolo11s.yaml"}},
    "K3-placebo": {"placebo": True},
}


def _config(tmp_path, tiny_data, case):
    over = dict(CASES[case])
    cfg = write_config(tmp_path, tiny_data, seeds=[0, 1, 2])
    raw = yaml.safe_load(cfg.read_text())
    if over.pop("variants", None):
        raw["variants"].append(SE)
    raw.update(over)
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    return cfg


@pytest.fixture
def drawn(monkeypatch):
    """The figures the report draws, kept (``report.plot_ablation``, ``report.plot_delta``)."""
    figs = {}
    for name in ("plot_ablation", "plot_delta"):
        orig = getattr(report, name)
        monkeypatch.setattr(report, name, lambda *a, _o=orig, _n=name, **k: figs.setdefault(_n, _o(*a, **k)))
    return figs


@pytest.mark.parametrize(("case", "records", "nothing"), [
    ("K1", False, False), ("K1", True, False), ("K3", False, False), ("K3", True, False),
    ("K3-placebo", False, False), ("K1", False, True), ("K3", True, True)])  # fmt: skip
def test_every_output_agrees_on_each_arms_verdict(tmp_path, tiny_data, capsys, drawn, case, records, nothing):
    cfg = _config(tmp_path, tiny_data, case)
    assert ablate.run(cfg, runner=runner_for(records, nothing)) == 0
    out = tmp_path / "out"
    said = capsys.readouterr().out
    verdicts, level = read_verdicts(out / VERDICTS_NAME)
    k = {"K1": 1, "K3": 3, "K3-placebo": 3}[case]
    assert level == pytest.approx(1 - 0.05 / k)
    lv = level_words(level)
    text = (out / "summary.md").read_text()
    head = text.split("## Verdict")[1].split("\n## ")[0]
    lines = {m.split("**")[1]: m for m in head.splitlines() if m.startswith("- **")}
    assert set(lines) == set(verdicts)
    statuses = set()
    for arm, v in verdicts.items():
        statuses.add(v.status)
        line = lines[arm]
        assert line in said  # the terminal's lead shows the same line
        if nothing:
            assert v.interval is None and v.status in ("n/a", "learned nothing")
            assert line.startswith(f"- **{arm}**: **{v.words}**: ") and "[" not in line
            continue
        m = LINE.match(line)
        assert m, line
        iv = v.interval
        assert (m["words"], m["kind"], m["level"]) == (v.words, iv.kind, lv)
        assert m["iv"] == f"[{iv.lo:+.4f}, {iv.hi:+.4f}]"
        assert line.count("[") == 1 and line.count(" CI ") == 1 and "p = " not in line  # exactly one interval
        assert iv.kind == ("hierarchical" if records else "seeds-only")
        # the one rule, as the search's table applies it to the same interval and check
        assert judge(iv.lo, iv.hi, v.n, v.check, v.detectable) == (v.status, v.words)
        # the difference table: the mAP50-95 row reads the verdict, its intervals are at the same level
        row = next(x for x in text.splitlines() if x.startswith(f"| {arm} | mAP50-95 |"))
        cells = _cells(row)
        assert cells[-1] == v.label
        deciding_col = 5 if records else 3  # hierarchical, else seeds only (t)
        assert cells[deciding_col] == f"[{iv.lo:+.4f}, {iv.hi:+.4f}]"
        # the health table
        if arm != "reference":  # its cells as the difference table's: a `|` in the words escaped
            health = text.split("## Attention health")[1].split("\n## ")[0]
            assert _cells(next(x for x in health.splitlines() if x.startswith(f"| {arm} |")))[1:3] == [v.label, "L05_X"]
        # the attention check section
        if v.status == NOT_TESTED:
            assert f"- **{arm}**: **{v.words}**" in text.split("## Attention check")[1].split("\n## ")[0]
    assert f"intervals each at {lv})" in text
    nd = text.split("## Not deciding")[1].split("\n## ")[0] if not nothing else ""
    if not nothing:
        assert "do **not** decide" in nd and "exploratory, uncorrected" in nd
    if case == "K3" and not nothing:
        assert NOT_TESTED in statuses  # se's blocks change nothing
        yard = text.split("## Yardstick")[1].split("\n## ")[0]
        ref = verdicts["reference"]
        assert f"{ref.interval.text()} ({ref.label})" in yard
        for arm in ("cbam", "se"):
            v = verdicts[arm]
            if v.status == NOT_TESTED:
                assert f"- **{arm}**: not tested" in yard
            elif ref.status == "better":
                assert f"{v.interval.text()} vs" in yard and yard.split(f"- **{arm}**")[1].splitlines()[0].endswith(
                    v.label)
    if case == "K3-placebo":
        plac = text.split("## Placebo")[1].split("\n## ")[0]
        p = verdicts["cbam-placebo"]
        if p.status != NOT_TESTED and verdicts["cbam"].status != NOT_TESTED:
            assert f"**{p.label}** vs `baseline` (Δ {p.mean:+.4f}, {p.interval.text()}, n = {p.n})" in plac
        for x in plac.splitlines():
            if x.startswith("- `cbam` − `cbam-placebo`"):
                assert f"{lv} CI" in x
    _plots_agree(drawn, verdicts, lv, records and not nothing)
    if records and not nothing:
        _explain_agrees(out, verdicts, lv)
    assert "no detectable difference" not in text


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, ``\\|`` inside a cell kept as ``|``."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def _plots_agree(drawn, verdicts, lv, delta: bool):
    """ablation.png: each compared arm labelled with its own interval kind and level, its error bar that interval;
    an arm without a verdict from its interval drawn apart, above the band, with its status; delta.png likewise."""
    ax = drawn["plot_ablation"].axes[0]
    texts = [t.get_text() for t in ax.texts]
    for arm, v in verdicts.items():
        if v.status in COMPARED:
            assert f"{arm} ({v.interval.kind} {lv})" in texts
        else:
            t = next(t for t in ax.texts if t.get_text().startswith(f"{arm}: {v.label}"))
            assert t.get_text().endswith(", drawn apart)")  # its Δ beside, never read off the Δ axis
            y = t.xy[1]  # axes units on a blended transform: above the band in data units
            y_data = ax.transLimits.inverted().transform((0, y))[1]
            assert y_data > TARGET_DELTA
    for c in (c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"):
        seg = c.lines[2][0].get_segments()[0]
        lo, hi = float(seg[0][1]), float(seg[1][1])
        assert any(math.isclose(lo, v.interval.lo, rel_tol=1e-6, abs_tol=1e-9)
                   and math.isclose(hi, v.interval.hi, rel_tol=1e-6, abs_tol=1e-9)
                   for v in verdicts.values() if v.status in COMPARED)
    if not delta:
        assert "plot_delta" not in drawn
        return
    fig = drawn["plot_delta"]
    primary = next(a for a in fig.axes if a.get_title().startswith("mAP50-95"))
    ticks = [t.get_text() for t in primary.get_yticklabels()]
    assert ticks == [a if v.status in COMPARED else f"{a} ({v.label})" for a, v in verdicts.items()]
    notes = [t.get_text() for t in primary.texts]  # an arm without a verdict: a note in its row, not an empty row
    apart = [v for v in verdicts.values() if v.status not in COMPARED]
    assert len(notes) == len(apart) and all(n.startswith(f"{v.label}: no verdict") for n, v in zip(notes, apart))
    thick = [c for c in primary.collections if c.get_label().endswith("(decides)")]
    bounds = sorted(tuple(s[:, 0]) for c in thick for s in c.get_segments())
    want = sorted((v.interval.lo, v.interval.hi) for v in verdicts.values() if v.status in COMPARED)
    assert len(bounds) == len(want)
    flat = [(a, b) for got, exp in zip(bounds, want) for a, b in zip(got, exp)]
    assert all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) for a, b in flat)
    assert f"{lv} intervals" in fig._suptitle.get_text()


def _explain_agrees(out, verdicts, lv):
    from attn_yolo.explain import explain

    res = explain(out, figures=False)
    text = res["text"]
    top = text.split("How to read it")[0]
    for arm in res["runs"].variants:
        v = verdicts[arm]
        assert f"- `{arm}`: **{v.words}** ({v.interval.text()})" in top  # it opens with the verdicts it explains
        sec = text.split(f"## {arm} vs baseline")[1].split("\n## ")[0]
        assert f"**{v.words}** (Δ {v.mean:+.4f}, {v.interval.text()}, n = {v.n} paired seeds)" in sec
        assert f"| part | Δ mAP50-95 | hierarchical {lv} CI |" in sec
        settled = v.status in ("better", "worse")
        for row in sec.split("### Δ mAP50-95 by TIDE error type")[1].split("###")[0].splitlines():
            if not row.startswith("| ") or row.startswith("| part"):
                continue
            cells = _cells(row)
            if cells[2] in ("n/a", "[unbounded]"):
                continue
            lo, hi = (float(x) for x in cells[2].strip("[]").split(","))
            marked = cells[-1].startswith("exploratory")
            assert marked == ((lo > 0 or hi < 0) and not settled), row


def test_an_unbounded_interval_is_written_one_way():
    from attn_yolo.ablate.statistics.verdicts import Interval, verdict_words
    from attn_yolo.text import bracket

    assert bracket(-math.inf, 0.1) == bracket(0.0, math.inf) == "[unbounded]"
    assert Interval("anytime-valid", 0.95, -math.inf, math.inf).text() == "anytime-valid 95% CI [unbounded]"
    assert verdict_words(-math.inf, math.inf, 3) == ("inconclusive", "inconclusive: the interval is unbounded")
