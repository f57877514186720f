"""The ablation's plots: ablation.png, curves.png and delta.png.

ablation.png: Δ with its deciding interval against the extra cost; curves.png: validation mAP per epoch, after the
shared start's (arms of one epoch: each arm's points, one per seed, against the start's last validation, since one
epoch makes no curve); delta.png: each paired Δ with its intervals and the ±w band."""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.ablate.runs.records import epoch_table
from attn_yolo.ablate.statistics.stats import BOOT_METRICS, PRIMARY
from attn_yolo.files import atomic_write

PLOT_TAG = "attn-yolo"  # PNG text key in every plot the runner writes: only such a plot is ever deleted
PLOT_TAG_VALUE = "ablate plot"


def save_figure(fig, path) -> None:
    """Write ``fig`` to ``path`` atomically (``files.atomic_write``) as a PNG tagged ``PLOT_TAG`` (a text chunk
    that tells the runner's plot from a file of the same name the user put there, ``is_own_plot``)."""
    atomic_write(path, lambda p: fig.savefig(p, format="png", metadata={PLOT_TAG: PLOT_TAG_VALUE}))


def is_own_plot(path) -> bool:
    """Whether ``path`` is a PNG the runner wrote: it carries ``save_figure``'s ``PLOT_TAG`` text chunk (Pillow's PNG
    reader, which reads the chunks before the image data); False for anything else, a missing or unreadable file
    included."""
    from PIL import PngImagePlugin

    path = Path(path)
    if not path.is_file() or path.is_symlink():
        return False
    try:
        with PngImagePlugin.PngImageFile(path) as im:
            return im.text.get(PLOT_TAG) == PLOT_TAG_VALUE
    except (OSError, SyntaxError, ValueError):  # not a PNG (SyntaxError is Pillow's "not a PNG file"), or broken
        return False


def plot_ablation(path: Path, points: list[dict], baseline: str, imgsz: int, note: str = ""):
    """What the user decides on: per variant its Δ mAP50-95 to the baseline with the interval that decides its verdict
    (y) against its extra cost (x): GFLOPs in % of the baseline's, and, where it was timed apart from training
    (``attn_yolo.ablate.runs.latency``), latency Δ in ms with its interval. One point per variant, its name, interval
    kind and level next to it; the baseline is the origin; the band ±``stats.TARGET_DELTA`` is where an interval reads
    "no difference beyond ±w". An arm without a verdict from its interval (not tested, learned nothing, n/a) is drawn as
    such: a grey cross on a strip above the band, labelled with its status, never inside the band. Returns the
    matplotlib Figure.

    Args:
        points: ``report.tradeoff_points``: ``{"variant", "delta", "lo", "hi", "gflops_pct", "latency": (Δ ms, lo, hi)
            | None, "interval", "level", "status", "words"}`` per variant; an unbounded interval (lo or hi infinite)
            is drawn as the point alone, said in its label.
        note: a line under the axes (e.g. why latency is not drawn).
    """
    from matplotlib.figure import Figure

    timed = [p for p in points if p.get("latency") is not None]
    fig = Figure(figsize=(12 if timed else 7, 5), dpi=120)
    axes = fig.subplots(1, 2 if timed else 1, squeeze=False).ravel()
    panels = [(axes[0], f"extra GFLOPs at imgsz {imgsz} (% of {baseline})", lambda p: (p["gflops_pct"], None))]
    if timed:
        panels.append((axes[1], f"latency Δ to {baseline} (ms, batch 1, interval of the repeats)",
                       lambda p: (p["latency"][0], p["latency"][1:]) if p.get("latency") else (None, None)))
    for ax, xlabel, x_of in panels:
        _tradeoff_panel(ax, points, x_of, baseline)
        ax.set_xlabel(xlabel)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("Δ mAP50-95 with the interval that decides, against the extra cost", fontsize=11)
    if note:
        fig.text(0.01, 0.01, note, fontsize=8, color="0.3", wrap=True)
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    save_figure(fig, path)
    return fig


def _deciding(p: dict) -> bool:
    """Whether a point's interval decides a verdict (an arm compared and tested)."""
    from attn_yolo.ablate.statistics.verdicts import COMPARED

    return p.get("status", "better") in COMPARED


def _tradeoff_panel(ax, points: list[dict], x_of, baseline: str) -> None:
    """One panel of ablation.png: the band, the baseline, each compared arm with its deciding interval, and the arms
    without a verdict on a strip above the band."""
    from matplotlib.ticker import MaxNLocator
    from matplotlib.transforms import blended_transform_factory

    from attn_yolo.ablate.statistics.stats import TARGET_DELTA
    from attn_yolo.ablate.statistics.verdicts import level_words

    ax.axhspan(-TARGET_DELTA, TARGET_DELTA, color="0.85", alpha=0.6, zorder=0,
               label=f"±{TARGET_DELTA}: \"no difference beyond ±w\" when the interval lies inside")
    ax.axhline(0, color="0.3", lw=0.8, ls="--", zorder=1)
    ax.plot(0, 0, "s", color="0.2", ms=7, zorder=4)
    ax.annotate(baseline if "baseline" in baseline.lower() else f"{baseline} (baseline)", (0, 0),
                textcoords="offset points", xytext=(6, -12), fontsize=9)
    apart = []
    for i, p in enumerate(points):
        x, xerr = x_of(p)
        if x is None or not math.isfinite(x):
            continue
        if not _deciding(p):
            apart.append((x, p))
            continue
        if not math.isfinite(p["delta"]):
            continue
        bounded = math.isfinite(p["lo"]) and math.isfinite(p["hi"])
        yerr = [[p["delta"] - p["lo"]], [p["hi"] - p["delta"]]] if bounded else None
        xe = [[x - xerr[0]], [xerr[1] - x]] if xerr is not None and all(map(math.isfinite, xerr)) else None
        ax.errorbar(x, p["delta"], yerr=yerr, xerr=xe, fmt="o", ms=7, capsize=5, elinewidth=1.6,
                    color=f"C{i % 10}", zorder=3)
        kind = f"{p['interval']} {level_words(p['level'])}" if p.get("interval") else ""
        ax.annotate(p["variant"] + (f" ({kind})" if kind else "") + ("" if bounded else " (interval unbounded)"),
                    (x, p["delta"]), textcoords="offset points", xytext=(6, 6), fontsize=9, color=f"C{i % 10}")
    ax.set_ylabel(f"Δ mAP50-95 (variant − {baseline}), the interval that decides")
    ax.grid(alpha=0.3)
    ax.margins(x=0.25, y=0.15)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    if apart:  # a strip above the band: y in axes units, above 2.5 × the band's edge in data units
        lo, hi = ax.get_ylim()
        lo = min(lo, -2.5 * TARGET_DELTA)
        hi = max(hi, 2.5 * TARGET_DELTA, (2 * TARGET_DELTA - 0.05 * lo) / 0.95)  # axes 0.95 at >= 2 × the edge
        ax.set_ylim(lo, hi + 0.15 * (hi - lo))
        strip = blended_transform_factory(ax.transData, ax.transAxes)
        for x, p in apart:
            ax.plot(x, 0.95, "X", color="0.45", ms=8, transform=strip, zorder=4)
            delta = f" (Δ {p['delta']:+.4f}, drawn apart)" if math.isfinite(p.get("delta", math.nan)) else ""
            right = x > sum(ax.get_xlim()) / 2  # the label inward, so that it stays inside the axes
            ax.annotate(f"{p['variant']}: {p['words']}{delta}", (x, 0.95), xycoords=strip, textcoords="offset points",
                        xytext=(-8 if right else 8, -4), ha="right" if right else "left", fontsize=9, color="0.35")


METRIC_COLUMNS = (("metrics/mAP50(B)", "mAP50"), ("metrics/mAP50-95(B)", "mAP50-95"))  # results.csv's, as shown


def arm_epochs(rows: list[dict]) -> int:
    """The most validated epochs a finished run's results.csv holds (0: none): 1 means no arm makes a curve (it
    trained one epoch, or validated only after its last: ``val: false``)."""
    ok = [epoch_table(Path(r["run_dir"]) / "results.csv") for r in rows if r["status"] == "ok"]
    return max((sum(validated(t)) for t in ok), default=0)


def plot_curves(path: Path, rows: list[dict], names: list[str], start_csv: Path | None = None):
    """Validation mAP50 and mAP50-95 per epoch: every seed thin, the mean over seeds thick, one colour per variant;
    with a warm start (``start_csv``: the shared start's results.csv) its epochs come first, in grey, and the arms'
    epochs continue after them. Integer epoch ticks. Arms of one epoch make no curve: ``plot_points`` draws them
    instead. Returns the Figure."""
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    if arm_epochs(rows) <= 1:
        return plot_points(path, rows, names, start_csv)
    fig = Figure(figsize=(12, 4.5), dpi=120)
    axes = fig.subplots(1, 2)
    start = epoch_table(Path(start_csv)) if start_csv is not None else {}
    offset = len(start.get("epoch", []))
    seen = validated(start) if offset else []
    longest = offset
    for ax, (col, label) in zip(axes, METRIC_COLUMNS):
        last = None
        if start.get(col) and any(seen):
            xs = [e + 1 for e in range(offset) if seen[e]]
            last = (xs[-1], start[col][xs[-1] - 1])
            ax.plot(xs, [start[col][x - 1] for x in xs], "o-", color="0.45", lw=2, ms=4,
                    label=f"shared start ({offset} epochs, {len(xs)} validated)")
            ax.axvline(offset + 0.5, color="0.6", ls=":", lw=1)
        for i, v in enumerate(names):
            curves = []
            for r in rows:
                if r["variant"] == v and r["status"] == "ok":
                    t = epoch_table(Path(r["run_dir"]) / "results.csv")
                    if t.get(col):  # an epoch not validated (val: false) is no point, not a 0
                        curves.append(np.where(validated(t), np.array(t[col], float), np.nan))
                        ax.plot(offset + np.arange(1, len(t[col]) + 1), curves[-1], ".-", color=f"C{i % 10}",
                                lw=0.8, ms=3, alpha=0.35)
            if curves:
                n = max(map(len, curves))
                longest = max(longest, offset + n)
                m = np.array([np.nanmean([c[e] for c in curves if len(c) > e]) for e in range(n)])
                ax.plot(offset + np.arange(1, n + 1), m, "o-", color=f"C{i % 10}", lw=2.2, ms=4,
                        label=f"{v} (mean of {len(curves)})")
                if last is not None:  # the arm continues from the start's weights: joined to its last validation
                    ax.plot([last[0], offset + 1], [last[1], m[0]], "--", color=f"C{i % 10}", lw=1.2)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10, min_n_ticks=1))  # whole epochs only
        ax.set_xlim(0.5, max(longest, 1) + 0.5)
        ax.set_xlabel("epoch (the shared start's, then the arm's)" if offset else "epoch")
        ax.set_ylabel(f"{label} (val)")
        ax.set_title(f"Validation {label} per epoch")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def plot_points(path: Path, rows: list[dict], names: list[str], start_csv: Path | None = None):
    """curves.png for arms validated once (one epoch, or ``val: false``), where no curve exists: per arm (x) its
    validation mAP50 and mAP50-95 after its last epoch, a dot per seed and a diamond for the mean (named in the
    legend), and the shared start's last validated value (``start_csv``) as a grey dashed line: what the arm added,
    seed by seed. Returns the Figure."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5), dpi=120)
    start = epoch_table(Path(start_csv)) if start_csv is not None else {}
    seen = validated(start) if start.get("epoch") else []
    for ax, (col, label) in zip(fig.subplots(1, 2), METRIC_COLUMNS):
        for i, v in enumerate(names):
            ys = [t[col][-1] for r in rows if r["variant"] == v and r["status"] == "ok"
                  if (t := epoch_table(Path(r["run_dir"]) / "results.csv")).get(col)]
            if ys:
                xs = i + 0.06 * (np.arange(len(ys)) - (len(ys) - 1) / 2)  # seeds side by side, not on one spot
                ax.plot(xs, ys, "o", color=f"C{i % 10}", ms=5, alpha=0.55)
                ax.plot([i], [np.mean(ys)], "D", color=f"C{i % 10}", ms=9, mec="black",
                        label=f"{v}: mean {np.mean(ys):.3f} of {len(ys)} seed{'s' * (len(ys) != 1)}")
        if start.get(col) and any(seen):
            e = max(k for k, ok in enumerate(seen) if ok)
            ax.axhline(start[col][e], color="0.45", ls="--", lw=1.2,
                       label=f"shared start after epoch {e + 1} of {len(seen)}: {start[col][e]:.3f}")
        ax.set_xticks(range(len(names)), names, rotation=20 if len(names) > 4 else 0)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_ylabel(f"{label} (val)")
        ax.set_title(f"Validation {label} after each arm's last epoch (a dot per seed)", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def validated(table: dict) -> list[bool]:
    """Per epoch of an Ultralytics results.csv (``records.epoch_table``), whether it was validated: with
    ``val=False`` Ultralytics writes 0 for every metric and validation loss of the epochs it did not validate (a
    validated epoch has a validation loss > 0)."""
    losses = [k for k in table if k.startswith("val/")]
    n = len(table.get("epoch", []))
    return [any(table[k][e] for k in losses) if losses else True for e in range(n)]


INTERVALS = (("t", "seeds only (t)", "C0"), ("image", "images only (bootstrap)", "C1"),
             ("hier", "hierarchical", "C3"))  # fmt: skip
DECIDING_COLOR = "C2"


def _delta_rows(ax, compare: dict, key: str, kinds: list, verdicts: dict, primary: bool) -> list:
    """Draw each variant's intervals of one metric (``kinds``; on the primary panel the one that decides thick and
    capped; for an arm without a verdict none, but a note in its row: why, and its Δ) and its mean; returns every
    drawn x (for the limits)."""
    span = []
    for i, v in enumerate(verdicts):
        c = compare.get(v, {}).get(key)
        x = verdicts[v]
        if primary and not x.compared:  # no interval decides: say so where it would be, not an empty row
            delta = f", Δ {c['hier']['mean']:+.4f}" if c is not None else ""
            ax.text(0.5, i, f"{x.label}: no verdict{delta}", transform=ax.get_yaxis_transform(), ha="center",
                    va="center", fontsize=9, color="0.3")
            continue
        if c is None:
            continue
        mean = c["hier"]["mean"]
        for j, (kind, name, color) in enumerate(kinds):
            if kind == "seq":
                lo, hi = (x.interval.lo, x.interval.hi) if x.interval.kind not in _BOOT_KINDS else (math.nan,) * 2
            else:
                lo, hi = (c[kind]["lo"], c[kind]["hi"]) if kind != "image" else c["image"]
            y = i + (j - (len(kinds) - 1) / 2) * 0.2
            decides = primary and _decides(kind, x)  # the verdict's interval: thick, opaque, capped
            if math.isfinite(lo) and math.isfinite(hi):
                ax.hlines(y, lo, hi, color=color, lw=6 if decides else 1.5, alpha=1.0 if decides else 0.45,
                          zorder=3 if decides else 2, label=(name + " (decides)" * decides))
                if decides:
                    ax.plot([lo, hi], [y, y], "|", color=color, ms=14, mew=2.5, zorder=3)
                span += [lo, hi]
            ax.plot(mean, y, "o", color=color if decides else "0.4", ms=6 if decides else 3, zorder=4)
        span.append(mean)
    return span


_BOOT_KINDS = {"hierarchical": "hier", "seeds-only": "t", "images-only": "image"}


def _decides(kind: str, x) -> bool:
    """Whether the drawn interval ``kind`` (``INTERVALS``' key, or ``seq``) is the one that decides verdict ``x``."""
    return _BOOT_KINDS.get(x.interval.kind, "seq") == kind


def _delta_axis(ax, span: list, primary: bool, label: str, baseline: str, verdicts: dict) -> None:
    """Limits, at most 4 short tick labels, labels and title of one metric's panel; each arm's tick says its verdict
    where it has none from its interval (not tested, learned nothing, n/a)."""
    from matplotlib.ticker import FormatStrFormatter, MaxNLocator

    lo, hi = min(span), max(span)
    pad = 0.08 * (hi - lo) if hi > lo else 0.01
    ax.set_xlim(lo - pad, hi + pad)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=primary))
    step = (hi - lo + 2 * pad) / 4
    ax.xaxis.set_major_formatter(FormatStrFormatter(f"%.{max(0, min(4, 1 - math.floor(math.log10(step))))}f"))
    ax.set_xlabel(f"Δ {label} (variant − {baseline})")
    ax.set_title(f"{label} (verdict)" if primary else f"{label} (exploratory, uncorrected)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_yticks(range(len(verdicts)), [v if x.compared else f"{v} ({x.label})" for v, x in verdicts.items()])
    ax.set_ylim(len(verdicts) - 0.5, -0.5)


def plot_delta(path: Path, compare: dict, baseline: str, confidence: float, verdicts: dict):
    """Forest plot: per metric one panel, per arm Δ (arm − baseline, mean over seeds) with its seeds-only,
    images-only and hierarchical intervals; a line marks Δ = 0. The mAP50-95 panel holds the verdicts: the interval
    that decides each (``verdicts.Verdict.interval``: the hierarchical one, or the sequential one with seeds chosen by
    the data) is drawn thick and capped, and the band ±``stats.TARGET_DELTA`` shows where a deciding interval that
    contains 0 reads "no difference beyond ±w"; an arm without a verdict from its interval (not tested, learned
    nothing, n/a) has no interval there, its tick label says why. The other metrics' panels are exploratory (titled
    so). Tick labels are at most 4 per axis, short, so that they never run into each other. Returns the Figure.

    Args:
        compare: ``stats.bootstrap_compare``'s result. confidence: each interval's level (the joint level).
        verdicts: ``verdicts.all_verdicts``: every arm, in the order drawn.
    """
    from matplotlib.figure import Figure

    from attn_yolo.ablate.statistics.stats import TARGET_DELTA

    metrics = [(k, label) for k, label in BOOT_METRICS if any(k in c for c in compare.values())]
    cols = min(3, len(metrics))
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(4.6 * cols + 1.2, rows * (1.5 + 0.9 * len(verdicts)) + 1.1), dpi=120)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    seq = sorted({x.interval.kind for x in verdicts.values() if x.compared and x.interval.kind not in _BOOT_KINDS})
    for ax, (key, label) in zip(axes, metrics):
        primary = key == PRIMARY
        kinds = list(INTERVALS) + ([("seq", seq[0], DECIDING_COLOR)] if primary and seq else [])
        ax.axvline(0.0, color="0.3", lw=1, ls="--", zorder=1)
        span = [0.0]
        if primary:
            ax.axvspan(-TARGET_DELTA, TARGET_DELTA, color="0.88", zorder=0,
                       label=f"±{TARGET_DELTA}: within it, an interval with 0 reads \"no difference beyond ±w\"")
            span += [-TARGET_DELTA, TARGET_DELTA]
        span += _delta_rows(ax, compare, key, kinds, verdicts, primary)
        _delta_axis(ax, span, primary, label, baseline, verdicts)
    handles = {}
    for ax in axes[: len(metrics)]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Paired Δ to {baseline} (mean over seeds) with {100 * confidence:.3g}% intervals; "
                 "the thick one decides the mAP50-95 verdict")
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight(), 1, 1))
    save_figure(fig, path)
    return fig
