"""placement.png: the base model's layers against the searched arms, each touched cell coloured by Δ.

placement.png: the base model's layers (rows) against the searched arms (columns), each cell an arm touches
coloured by that arm's Δ mAP50-95 (diverging, 0 white); not-tested arms hatched, arms out of the search faded.
"""

from __future__ import annotations

import math
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


def plot_placement(path: Path, search, ranked: list[dict]) -> None:
    """Write the diagram (module docstring) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    labels, arms, grid = cells(search, ranked)
    vals = [r["delta"] for r in grid.values() if math.isfinite(r["delta"])]
    lim = max([abs(v) for v in vals] + [1e-4])
    cmap, norm = plt.get_cmap("RdBu"), TwoSlopeNorm(0.0, -lim, lim)
    fig, ax = plt.subplots(figsize=(2.2 + 0.55 * len(arms), 0.28 * len(labels) + 1.8))
    for (t, j), r in grid.items():
        ok = math.isfinite(r["delta"]) and r["verdict"] != "not tested"
        ax.add_patch(Rectangle((j, t), 1, 1, facecolor=cmap(norm(r["delta"])) if ok else "lightgrey",
                               hatch="" if ok else "//", alpha=1.0 if r["state"] == "in" else 0.45,
                               edgecolor="black", linewidth=0.5))
    ax.set_xlim(0, len(arms))
    ax.set_ylim(len(labels), 0)
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels, fontsize=7)
    ax.set_xticks([j + 0.5 for j in range(len(arms))], arms, rotation=60, ha="right", fontsize=7)
    ax.set_title(f"{Path(search.model).name}: Δ mAP50-95 by site (faded: out; hatched: not tested)", fontsize=8)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="Δ mAP50-95 vs baseline")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
