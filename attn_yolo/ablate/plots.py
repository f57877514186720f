"""The ablation's plots: ablation.png, curves.png and delta.png.

The ablation's plots: ablation.png (mAP50-95 against GFLOPs), curves.png (validation mAP per epoch) and
delta.png (each paired Δ with its three intervals)."""

from __future__ import annotations

import math
from pathlib import Path

from attn_yolo.ablate.records import epoch_table
from attn_yolo.ablate.stats import BOOT_METRICS, CONFIDENCE, PRIMARY
from attn_yolo.checkpoint import atomic_write

PLOT_TAG = "attn-yolo"  # PNG text key in every plot the runner writes: only such a plot is ever deleted
PLOT_TAG_VALUE = "ablate plot"


def save_figure(fig, path) -> None:
    """Write ``fig`` to ``path`` atomically (``checkpoint.atomic_write``) as a PNG tagged ``PLOT_TAG`` (a text chunk
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


def plot_ablation(path: Path, stats: dict, names: list[str], baseline: str, imgsz: int):
    """mAP50-95 (mean ± std over seeds) against GFLOPs, one point per variant; returns the matplotlib Figure.

    The GFLOPs axis starts at 0, so a cost difference shows at its true proportion (an attention block adding 0.04 %
    does not look like a gap), and the mAP axis stays within [0, 1]. Variants are set 2 % of the axis apart in
    config order, so that near-equal costs do not hide one error bar behind another.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5), dpi=120)
    ax = fig.subplots()
    if stats["variants"][baseline]["n"]:
        ax.axhline(stats["variants"][baseline][PRIMARY][0], color="C0", ls="--", lw=0.8, alpha=0.6)
    shown = [v for v in names if stats["variants"][v]["n"] and stats["variants"][v]["gflops"] is not None]
    gflops = [stats["variants"][v]["gflops"] for v in shown]
    step = 0.02 * max(gflops, default=0.0)  # 2 % of the largest cost: near-equal GFLOPs would hide each other's bar
    for i, v in enumerate(names):
        s = stats["variants"][v]
        mean, sd = s[PRIMARY]
        if v not in shown:
            continue
        x = s["gflops"] + step * (shown.index(v) - (len(shown) - 1) / 2)  # drawn side by side; the tick is the cost
        ax.errorbar(x, mean, yerr=0 if math.isnan(sd) else sd, fmt="s" if v == baseline else "o", ms=7, capsize=5,
                    elinewidth=1.6, color=f"C{i % 10}", alpha=0.9, label=f"{v} (n={s['n']}, ± std)")
        ax.annotate(v, (x, mean), textcoords="offset points", xytext=(7, 7 + 10 * (i % 3)), fontsize=9)
    ax.set_xlabel(f"GFLOPs at imgsz {imgsz}")
    ax.set_ylabel("mAP50-95 (val), mean ± std over seeds")
    ax.set_title("Ablation: accuracy vs cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.margins(x=0.15, y=0.15)
    if gflops:
        ax.set_xlim(0, 1.2 * max(gflops))
    ax.ticklabel_format(axis="x", useOffset=False)
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(0.0, lo), min(1.0, hi))
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def plot_curves(path: Path, rows: list[dict], names: list[str]) -> None:
    """Validation mAP50 and mAP50-95 per epoch: every seed thin, the mean over seeds thick, one colour per variant."""
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(12, 4.5), dpi=120)
    axes = fig.subplots(1, 2)
    for ax, (col, label) in zip(axes, (("metrics/mAP50(B)", "mAP50"), ("metrics/mAP50-95(B)", "mAP50-95"))):
        for i, v in enumerate(names):
            curves = []
            for r in rows:
                if r["variant"] == v and r["status"] == "ok":
                    t = epoch_table(Path(r["run_dir"]) / "results.csv")
                    if t.get(col):
                        curves.append(np.array(t[col]))
                        ax.plot(t["epoch"], t[col], ".-", color=f"C{i % 10}", lw=0.8, ms=3, alpha=0.35)
            if curves:
                n = max(map(len, curves))
                m = np.array([np.nanmean([c[e] for c in curves if len(c) > e]) for e in range(n)])
                ax.plot(np.arange(1, n + 1), m, "o-", color=f"C{i % 10}", lw=2.2, ms=4,
                        label=f"{v} (mean of {len(curves)})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(f"{label} (val)")
        ax.set_title(f"Validation {label} per epoch")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


INTERVALS = (("t", "seeds only (t)", "C0"), ("image", "images only (bootstrap)", "C1"),
             ("hier", "hierarchical (verdict)", "C3"))  # fmt: skip


def plot_delta(path: Path, compare: dict, baseline: str, confidence: float = CONFIDENCE):
    """Forest plot: per metric one panel, per variant Δ (variant − baseline, mean over seeds) with its seeds-only,
    images-only and hierarchical intervals (the hierarchical one decides the verdict: drawn thick and capped, the
    others thin and faint); a line marks Δ = 0. Returns the matplotlib Figure."""
    from matplotlib.figure import Figure

    variants = list(compare)
    metrics = [(k, label) for k, label in BOOT_METRICS if any(k in compare[v] for v in variants)]
    cols = min(3, len(metrics))
    rows = -(-len(metrics) // cols)
    fig = Figure(figsize=(4.2 * cols + 1.0, rows * (1.3 + 0.8 * len(variants)) + 0.9), dpi=120)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    for ax, (key, label) in zip(axes, metrics):
        ax.axvline(0.0, color="0.3", lw=1, ls="--", zorder=1)
        span = [0.0]
        for i, v in enumerate(variants):
            c = compare[v].get(key)
            if c is None:
                continue
            mean = c["hier"]["mean"]
            for j, (kind, name, color) in enumerate(INTERVALS):
                lo, hi = (c[kind]["lo"], c[kind]["hi"]) if kind != "image" else c["image"]
                y = i + (j - 1) * 0.22
                decides = kind == "hier"  # the verdict's interval: thick, opaque, capped; the others thin and faint
                if math.isfinite(lo) and math.isfinite(hi):
                    ax.hlines(y, lo, hi, color=color, lw=6 if decides else 1.5, alpha=1.0 if decides else 0.45,
                              zorder=3 if decides else 2, label=name if i == 0 else None)
                    if decides:
                        ax.plot([lo, hi], [y, y], "|", color=color, ms=14, mew=2.5, zorder=3)
                    span += [lo, hi]
                ax.plot(mean, y, "o", color=color if decides else "0.4", ms=6 if decides else 3, zorder=4)
            span.append(mean)
        lo, hi = min(span), max(span)
        pad = 0.08 * (hi - lo) if hi > lo else 0.01
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_xlabel(f"Δ {label} (variant − {baseline})")
        ax.set_title(label)
        ax.grid(axis="x", alpha=0.3)
        ax.set_yticks(range(len(variants)), variants)
        ax.set_ylim(len(variants) - 0.5, -0.5)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(f"Paired Δ to {baseline} (mean over seeds) with {int(confidence * 100)}% intervals; "
                 "the verdict uses the hierarchical one")
    fig.tight_layout(rect=(0, 0.6 / fig.get_figheight(), 1, 1))
    save_figure(fig, path)
    return fig
