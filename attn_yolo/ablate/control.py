"""The yardstick as a standing positive control: whether the design resolved the reference's change from the baseline.

An ablation with ``reference: {model: yolo11s.yaml}`` compares the next model scale with the baseline as one more
arm. A gain of a model scale is larger than any the blocks are hoped to give, so a design that cannot call the
reference better than the baseline cannot resolve the blocks' effects either: its "no difference" says nothing of
them. ``positive_control`` words this from the reference's verdict (the same reading as every arm's:
``readings.reading``), for the top of summary.md.
"""

from __future__ import annotations

import re
from pathlib import Path

from attn_yolo.ablate import readings
from attn_yolo.ablate.config import Ablation

SCALE = re.compile(r"^(?P<stem>.*?\d+)(?P<scale>[nsmlx])(?P<rest>[-.].*)?$")  # yolo11n.yaml, yolov8s-p2.yaml


def scale_change(base: str, ref: str) -> str | None:
    """``"yolo11n → yolo11s"`` when ``ref`` is ``base`` at another model scale (the same family, another n/s/m/l/x
    letter), else None."""
    a, b = SCALE.match(Path(base).name), SCALE.match(Path(ref).name)
    if a and b and a["stem"] == b["stem"] and (a["rest"] or "") == (b["rest"] or "") and a["scale"] != b["scale"]:
        return f"{Path(base).stem} → {Path(ref).stem}"
    return None


def positive_control(ab: Ablation, rows: list[dict], boot: dict | None, dec: dict | None) -> list[str]:
    """The positive-control paragraph: [] without a reference; else whether the reference was called better than
    the baseline (passed), not yet readable (fewer than 2 paired seeds), or not (failed: the design cannot resolve
    even a model-scale change, or the reference's change where it is not another scale)."""
    ref = ab.reference
    if ref is None:
        return []
    v = {x.name: x for x in ab.variants}
    change = scale_change(v[ab.baseline].model, v[ref].model)
    what = f"a model-scale change, {change}" if change else f"the change to `{Path(v[ref].model).name}`"
    r = readings.reading(ab, rows, boot, ref, dec)
    figs = f"Δ mAP50-95 {r['mean']:+.4f}, {r['interval']} CI [{r['lo']:+.4f}, {r['hi']:+.4f}], n = {r['n']}"
    if r["n"] < 2:
        return [f"**Positive control: not read yet**: the reference `{ref}` ({what}) has {r['n']} paired seed(s) "
                "with the baseline; it needs 2 or more.", ""]
    if r["verdict"] == "better":
        return [f"**Positive control passed**: the design calls the reference `{ref}` ({what}) better than "
                f"`{ab.baseline}` ({figs}): it resolves a change of that size.", ""]
    even = "even a model-scale change" if change else "even the reference's change"
    return [f"**Positive control failed: this design cannot resolve {even}**: the reference `{ref}` ({what}) is not "
            f"called better than `{ab.baseline}` ({r['verdict']}; {figs}). Its other verdicts cannot tell \"the block "
            "does not help\" from \"this design cannot see it\": train longer, on more data, or with more seeds "
            "until the reference is called better.", ""]
