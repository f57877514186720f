"""The ablation's pictures as a researcher reads them, checked on the figures' own data (matplotlib's renderer), not
only that a file exists: tick labels that do not run into each other at the default size, the ±w band that decides
"no difference beyond ±w", the deciding interval, integer epochs after the shared start's, and each variant's name
next to its own point."""

import itertools
import math
from pathlib import Path

import pytest

from attn_yolo.ablate.reports.plots import arm_epochs, plot_ablation, plot_curves, plot_delta
from attn_yolo.ablate.statistics.stats import TARGET_DELTA
from attn_yolo.ablate.statistics.verdicts import Interval, Verdict


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _overlaps(labels, renderer) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty tick labels whose rendered boxes intersect."""
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_visible() and t.get_text()]
    return [(a, b) for (a, x), (b, y) in itertools.combinations(boxes, 2) if x.overlaps(y)]


def assert_ticks_readable(fig):
    r = _draw(fig)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            assert not _overlaps(labels, r), (ax.get_title(), [t.get_text() for t in labels])


def compare_like_the_default():
    """Δ of the default's size: mAP50 moves by ±0.001 (the panel whose ticks ran into each other), mAP50-95 by 0.003."""
    def metric(mean, half, t_half, img):
        return {"hier": {"mean": mean, "lo": mean - half, "hi": mean + half},
                "t": {"lo": mean - t_half, "hi": mean + t_half}, "image": (mean - img, mean + img)}  # fmt: skip

    return {"cbam": {"map50_95": metric(0.0005, 0.0023, 0.002, 0.001), "map50": metric(-0.0002, 0.0009, 0.0008, 0.0004),
                     "ap_small": metric(0.001, 0.004, 0.003, 0.002), "ap_medium": metric(0.002, 0.0015, 0.001, 0.001),
                     "ap_large": metric(-0.0004, 0.0012, 0.001, 0.0006)}}  # fmt: skip


def test_delta_ticks_do_not_overlap_and_the_band_and_deciding_interval_are_drawn(tmp_path):
    deciding = {"cbam": (-0.0091, 0.0101)}  # the group-sequential interval, wider than the hierarchical one
    v = Verdict("cbam", "inconclusive", "inconclusive", 0.0005, 3, Interval("group-sequential", 0.95, -0.0091, 0.0101,
                                                                           True))
    fig = plot_delta(tmp_path / "d.png", compare_like_the_default(), "baseline", 0.95, {"cbam": v})
    assert_ticks_readable(fig)
    primary = next(ax for ax in fig.axes if ax.get_title().startswith("mAP50-95"))
    bands = [p for p in primary.patches if p.get_x() == pytest.approx(-TARGET_DELTA)
             and p.get_width() == pytest.approx(2 * TARGET_DELTA)]
    assert len(bands) == 1  # the ±w band that decides "no difference beyond ±w"
    lines = {c.get_label(): c for c in primary.collections}
    thick = lines.pop("group-sequential (decides)")
    seg = thick.get_segments()[0]
    assert (seg[0][0], seg[1][0]) == pytest.approx(deciding["cbam"])
    assert all(thick.get_linewidth()[0] >= 3 * c.get_linewidth()[0] for c in lines.values())
    lo, hi = primary.get_xlim()
    assert lo <= -TARGET_DELTA and hi >= TARGET_DELTA
    others = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax is not primary]
    assert others and all("exploratory" in t for t in others)  # the secondary metrics are no verdicts
    assert (tmp_path / "d.png").stat().st_size > 0


def _results_csv(path: Path, values: list[float | None]) -> None:
    """Ultralytics' results.csv columns; None: an epoch not validated (val=False: metrics and val losses 0)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ["epoch,metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss"] + [
        f"{i + 1},0,0,0" if v is None else f"{i + 1},{v + 0.2},{v},1.1" for i, v in enumerate(values)]
    path.write_text("\n".join(rows) + "\n")


def _runs(tmp_path: Path, epochs: int) -> list[dict]:
    """Finished runs of baseline and cbam, seeds 0 and 1, each validated every one of ``epochs`` epochs."""
    rows = []
    for v, seed in itertools.product(("baseline", "cbam"), (0, 1)):
        run = tmp_path / "runs" / f"{v}-seed{seed}"
        _results_csv(run / "results.csv", [0.61 + 0.01 * seed + 0.02 * e for e in range(epochs)])
        rows.append({"variant": v, "seed": seed, "status": "ok", "run_dir": str(run)})
    return rows


def test_curves_put_the_arms_epochs_after_the_shared_starts_on_integer_ticks(tmp_path):
    """Two fine-tuning epochs per arm after a 5-epoch start: the arms' curves sit at epochs 6 and 7, after the start's
    curve at 1..5, and every tick is a whole epoch (not 0.945 … 1.050)."""
    _results_csv(tmp_path / "start" / "results.csv", [None, 0.3, None, 0.55, 0.6])  # epochs 1, 3 not validated
    fig = plot_curves(tmp_path / "c.png", _runs(tmp_path, 2), ["baseline", "cbam"], tmp_path / "start" / "results.csv")
    assert_ticks_readable(fig)
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        start = [line for line in ax.get_lines() if line.get_color() == "0.45" and line.get_linestyle() == "-"]
        assert [tuple(line.get_xdata()) for line in start] == [(2, 4, 5)]  # validated epochs only: no false zeros
        assert list(start[0].get_ydata()) == pytest.approx([0.3, 0.55, 0.6] if "95" in ax.get_title() else
                                                           [0.5, 0.75, 0.8])  # fmt: skip
        arms = [line for line in ax.get_lines() if line.get_color() != "0.45" and line.get_linestyle() == "-"]
        assert arms and {x for line in arms for x in line.get_xdata()} == {6, 7}  # after the start's 5 epochs
        joins = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert {tuple(line.get_xdata()) for line in joins} == {(5, 6)}  # each arm goes on from the start's end


@pytest.mark.parametrize("with_start", [True, False])
def test_one_epoch_arms_are_drawn_as_points_per_arm_not_on_an_epoch_axis(tmp_path, with_start):
    """Arms of one epoch make no curve (a 5-epoch start and one more epoch drew two points on an axis 1..6): each
    arm is a column of its own, a dot per seed and the mean (named with its value in the legend), and the shared
    start's last validated value is a dashed grey line across them; no epoch axis."""
    csv = tmp_path / "start" / "results.csv"
    _results_csv(csv, [None, 0.3, None, 0.55, 0.6])
    fig = plot_curves(tmp_path / "c.png", _runs(tmp_path, 1), ["baseline", "cbam"], csv if with_start else None)
    assert_ticks_readable(fig)
    for ax in fig.axes:
        assert "last epoch" in ax.get_title() and "epoch" not in ax.get_xlabel()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["baseline", "cbam"]
        lines = ax.get_lines()
        dots = [line for line in lines if line.get_marker() == "o"]
        assert [len(line.get_xdata()) for line in dots] == [2, 2]  # a dot per seed, per arm
        assert all(abs(x - i) < 0.5 for i, line in enumerate(dots) for x in line.get_xdata())  # in its arm's column
        means = [line for line in lines if line.get_marker() == "D"]
        shift = 0 if "95" in ax.get_title() else 0.2
        assert [line.get_ydata()[0] for line in means] == pytest.approx([0.615 + shift] * 2)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert f"baseline: mean {0.615 + shift:.3f} of 2 seeds" in legend
        grey = [line for line in lines if line.get_color() == "0.45" and line.get_linestyle() == "--"]
        assert [line.get_ydata()[0] for line in grey] == ([pytest.approx(0.6 + shift)] if with_start else [])
        assert any("shared start after epoch 5 of 5" in t for t in legend) == with_start


def test_ablation_plot_is_delta_with_its_interval_against_extra_cost_labels_next_to_own_points(tmp_path):
    """Δ with the interval that decides against extra GFLOPs % and latency Δ: the default's baseline and CBAM differ
    by 0.04 % GFLOPs (once one spot on an axis from 0), and each name sits next to its own point."""
    points = [{"variant": "cbam", "delta": 0.0005, "lo": -0.0091, "hi": 0.0101, "gflops_pct": 0.04,
               "latency": (0.4, 0.1, 0.7), "interval": "anytime-valid", "level": 0.95},
              {"variant": "se", "delta": -0.004, "lo": -0.012, "hi": 0.004, "gflops_pct": 0.02,
               "latency": (0.2, -0.1, 0.5), "interval": "anytime-valid", "level": 0.95},
              {"variant": "eca", "delta": 0.003, "lo": -math.inf, "hi": math.inf, "gflops_pct": 0.01,
               "latency": None, "interval": "anytime-valid", "level": 0.95}]  # fmt: skip
    fig = plot_ablation(tmp_path / "a.png", points, "baseline", 128)
    r = _draw(fig)
    assert_ticks_readable(fig)
    gflops_ax, latency_ax = fig.axes
    for ax, x_of in ((gflops_ax, lambda p: p["gflops_pct"]), (latency_ax, lambda p: (p["latency"] or [None])[0])):
        shown = {p["variant"]: ax.transData.transform((x_of(p), p["delta"])) for p in points if x_of(p) is not None}
        shown["baseline"] = ax.transData.transform((0, 0))
        labels = {t.get_text().split(" (")[0]: t for t in ax.texts}
        assert set(labels) == set(shown)
        for name, t in labels.items():
            box = t.get_window_extent(r)
            anchor = (box.x0, box.y0 + box.height / 2)
            nearest = min(shown, key=lambda k: math.dist(shown[k], anchor))
            assert nearest == name, (name, nearest)  # each label next to its own point
            assert math.dist(shown[name], anchor) < 40  # pixels
        xs = sorted(v[0] for v in shown.values())
        assert min(b - a for a, b in itertools.pairwise(xs)) > 5  # not squeezed into one spot
    bars = [c for c in gflops_ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(bars) == 3  # one point per variant
    cbam = next(c for c in gflops_ax.containers if type(c).__name__ == "ErrorbarContainer"
                and c.lines[0].get_xdata()[0] == pytest.approx(0.04))  # fmt: skip
    seg = cbam.lines[2][0].get_segments()[0]
    assert (seg[0][1], seg[1][1]) == pytest.approx((-0.0091, 0.0101))  # the deciding interval, not ± std
    assert any("unbounded" in t.get_text() for t in gflops_ax.texts)


def test_gates_png_knockout_panel_draws_zeros_and_every_flag_threshold():
    """Epoch 0's knock-out is exactly 0 (a block at the identity): on the panel it is a point at 0 (symlog, linear
    below the switched-off threshold), not a line falling off a log axis; each flag's threshold is drawn on its panel
    at the value ``attn_yolo.health.flags`` flags at."""
    import importlib

    import numpy as np

    from attn_yolo.health.report import PLOTTED, gates_figure

    rows = [{"name": n, "epoch": e, "gate_mean": 0.5, "saturated": 0.0, "entropy": 0.995, "peak_share": 0.01,
             "gamma": 0.3, "knockout": k} for n, ks in (("b6", (0.0, 0.05)), ("b8", (0.0, 0.003)))
            for e, k in enumerate(ks)]  # fmt: skip
    flags = importlib.import_module("attn_yolo.health.flags")  # (attn_yolo.health.flags is also a function's name)
    fig = gates_figure(rows)
    assert_ticks_readable(fig)
    panels = dict(zip([k for k, _ in PLOTTED], fig.axes))
    ko = panels["knockout"]
    assert ko.get_yscale() == "symlog"
    for line in ko.get_lines()[:2]:
        y = ko.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]))[:, 1]
        assert np.isfinite(y).all()  # 0 is drawn where it is
        assert ko.get_ylim()[0] <= 0
    want = {"entropy": flags.UNIFORM_ENTROPY, "peak_share": flags.ONE_HOT_SHARE, "saturated": flags.SATURATED_SHARE,
            "gamma": flags.GAMMA_OFF, "knockout": flags.KNOCKOUT_OFF}
    for key, y in want.items():
        drawn = [line for line in panels[key].get_lines() if line.get_label().startswith("flag:")]
        assert len(drawn) == 1 and drawn[0].get_ydata()[0] == pytest.approx(y), key


def test_arms_validated_only_after_their_last_epoch_are_points_not_curves_through_zero(tmp_path):
    """``val: false`` (the default ablation): Ultralytics writes 0 for the epochs it did not validate. Those are no
    points: three epochs validated once give the per-seed points, never a curve that climbs from 0."""
    rows = []
    for v, seed in itertools.product(("baseline", "cbam"), (0, 1)):
        run = tmp_path / "runs" / f"{v}-seed{seed}"
        _results_csv(run / "results.csv", [None, None, 0.3 + 0.01 * seed])
        rows.append({"variant": v, "seed": seed, "status": "ok", "run_dir": str(run)})
    assert arm_epochs(rows) == 1
    fig = plot_curves(tmp_path / "c.png", rows, ["baseline", "cbam"])
    ys = [y for ax in fig.axes for line in ax.get_lines() for y in line.get_ydata()]
    assert ys and 0.0 not in ys and "last epoch" in fig.axes[0].get_title()
    mixed = _runs(tmp_path / "mixed", 3)  # validated every epoch, but one run's first epoch not
    _results_csv(Path(mixed[0]["run_dir"]) / "results.csv", [None, 0.62, 0.64])
    fig = plot_curves(tmp_path / "m.png", mixed, ["baseline", "cbam"])
    ys = [y for line in fig.axes[0].get_lines() for y in line.get_ydata() if y == y]
    assert ys and min(ys) > 0.5


def test_the_summary_says_which_curves_png_it_is(tmp_path):
    """summary.md's list of plots names what curves.png shows: the curves, or for arms of one epoch the points."""
    from types import SimpleNamespace

    from attn_yolo.ablate.reports.summary import curves_caption

    start = SimpleNamespace(start=SimpleNamespace(kind="recipe"))
    one = curves_caption(start, _runs(tmp_path / "one", 1))
    assert one.startswith("`curves.png` (each arm's validation mAP after its last epoch, a dot per seed, against the "
                          "shared start's last validation: an arm validated once is no curve)")
    assert "against" not in curves_caption(SimpleNamespace(start=None), _runs(tmp_path / "one", 1))
    assert curves_caption(start, _runs(tmp_path / "two", 2)) == ("`curves.png` (validation mAP per epoch, after the "
                                                                 "shared start's)")
