"""placement.png stays readable from 1 arm to 20: no text leaves the figure, the colour bar (with its ticks and label)
overlaps neither the diagram nor its labels, and the title clears the diagram (the figure's drawn artists' bounding
boxes, by matplotlib's renderer)."""

from __future__ import annotations

import types

import numpy as np
import pytest

BLOCKS = ["CBAM", "ECA", "SE", "CoordAtt"]
SITES = ["backbone", "sppf", "neck", "C3k2:neck", 4]


def fake_search(n: int):
    """A search of ``n`` arms (blocks × sites of yolo11n) and its ranked rows: Δ of both signs, some arms out, one
    not tested."""
    from attn_yolo.insertion.base import load_base
    from attn_yolo.search.config import Arm
    from attn_yolo.search.sites import parse_site

    d = load_base("yolo11n.yaml")
    sites = [parse_site(d, s) for s in SITES]
    arms = [Arm(f"{b.lower()}.{s.slug}", b, None, s) for b in BLOCKS for s in sites][:n]
    ranked = [{"arm": a.name, "delta": 0.002 * (i - 3), "verdict": "not tested" if i == 2 else "better",
               "state": "in" if i % 3 else "below the baseline"} for i, a in enumerate(arms)]
    return types.SimpleNamespace(model="yolo11n.yaml", arms=arms), ranked


def overlap(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def inside(inner, outer) -> bool:
    return (inner.x0 >= outer.x0 - 1 and inner.y0 >= outer.y0 - 1 and inner.x1 <= outer.x1 + 1
            and inner.y1 <= outer.y1 + 1)


@pytest.mark.parametrize("n", [1, 20])
def test_placement_is_readable_with_1_and_20_arms(n, tmp_path):
    import matplotlib.pyplot as plt

    from attn_yolo.search.plot import placement_figure, plot_placement

    search, ranked = fake_search(n)
    fig = placement_figure(search, ranked)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    frame = fig.bbox
    ax, bar = fig.axes  # the diagram, the colour bar
    texts = [t for t in fig.findobj(plt.Text) if t.get_visible() and t.get_text()]
    assert any(t.get_text().startswith("yolo11n.yaml: Δ mAP50-95") for t in texts)
    drawn = [t for t in texts if np.isfinite(t.get_window_extent(r).extents).all()]  # ticks off the bar: not drawn
    assert len(drawn) > len(ax.get_yticklabels()) + n
    for t in drawn:
        assert inside(t.get_window_extent(r), frame), f"text {t.get_text()!r} leaves the figure"
    assert not overlap(bar.get_tightbbox(r), ax.get_window_extent(r)), "the colour bar covers the diagram"
    for t in ax.get_yticklabels() + ax.get_xticklabels():
        assert not overlap(t.get_window_extent(r), bar.get_tightbbox(r)), t.get_text()
    title = fig._suptitle.get_window_extent(r)
    assert not overlap(title, ax.get_window_extent(r)) and not overlap(title, bar.get_tightbbox(r))
    assert len(ax.get_xticklabels()) == n and len(ax.patches) > 0
    plt.close(fig)
    plot_placement(tmp_path / "placement.png", search, ranked)
    assert (tmp_path / "placement.png").stat().st_size > 10_000
