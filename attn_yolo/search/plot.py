"""placement.png: the base model's layers against the searched arms, each touched cell coloured by Δ.

Rows are the base model's layers, columns the searched arms; a cell an arm touches is coloured by that arm's
Δ mAP50-95 (diverging, 0 white); not-tested arms hatched, arms out of the search faded. The
figure is sized by its labels and arms (constrained layout, the title wrapped to the figure's width, the colour bar
in its own slot), so it stays readable from 1 arm to 20 and more.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from attn_yolo.insertion.base import load_base, model_rows
from attn_yolo.search.sites import layers


def cells(search, ranked: list[dict]) -> tuple[list[str], list[str], dict]:
    """(layer labels, arm names in the config's order, {(layer, column): table row}) of the diagram."""
    d = load_base(search.model)
    rows = model_rows(d)
    labels = [f"{i} {r[2]}" + (" (head)" if i >= len(d["backbone"]) else "") for i, r in enumerate(rows)]
    by = {r["arm"]: r for r in ranked}
    arms = [a for a in search.arms if a.name in by]
    grid = {(t, j): by[a.name] for j, a in enumerate(arms) for t in layers(d, a.site)}
    return labels, [a.name for a in arms], grid


def placement_figure(search, ranked: list[dict]):
    """The diagram (module docstring) as a matplotlib Figure (Agg), not yet saved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    labels, arms, grid = cells(search, ranked)
    vals = [r["delta"] for r in grid.values() if math.isfinite(r["delta"])]
    lim = max([abs(v) for v in vals] + [1e-4])
    cmap, norm = plt.get_cmap("RdBu"), TwoSlopeNorm(0.0, -lim, lim)
    label_in = 0.055 * max(len(s) for s in labels + [""])  # inches the layer labels take at 7 pt
    arm_in = 0.05 * max(len(s) for s in arms + [""])  # the rotated arm names' height
    width = max(5.0, label_in + 0.32 * len(arms) + 1.6)  # labels, a column per arm, the colour bar
    fig, ax = plt.subplots(figsize=(width, 0.26 * len(labels) + arm_in + 1.2), layout="constrained")
    for (t, j), r in grid.items():
        ok = math.isfinite(r["delta"]) and r["verdict"] != "not tested"
        ax.add_patch(Rectangle((j, t), 1, 1, facecolor=cmap(norm(r["delta"])) if ok else "lightgrey",
                               hatch="" if ok else "//", alpha=1.0 if r["state"] == "in" else 0.45,
                               edgecolor="black", linewidth=0.5))
    ax.set_xlim(0, max(len(arms), 1))
    ax.set_ylim(len(labels), 0)
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels, fontsize=7)
    ax.set_xticks([j + 0.5 for j in range(len(arms))], arms, rotation=60, ha="right", rotation_mode="anchor",
                  fontsize=7)
    title = f"{Path(search.model).name}: Δ mAP50-95 by site (faded: out of the search; hatched: not tested)"
    fig.suptitle("\n".join(textwrap.wrap(title, max(20, int(width * 72 / 8 / 0.55)))), fontsize=8)
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=min(0.3, 0.6 / width), pad=0.02)
    bar.set_label("Δ mAP50-95 vs baseline", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return fig


def plot_placement(path: Path, search, ranked: list[dict]) -> None:
    """Write the diagram (module docstring) to ``path``."""
    import matplotlib.pyplot as plt

    fig = placement_figure(search, ranked)
    fig.savefig(path, dpi=110)
    plt.close(fig)
