"""Flags: what a block's measured health says is wrong with it (uniform, one-hot, saturated, switched off, non-finite).

Thresholds (module constants):

- ``uniform``: ``entropy >= UNIFORM_ENTROPY`` (0.99): every map of the block is nearly flat (for MHSA: every query
  attends to all tokens almost equally), **and** what it does barely depends on the input: holding its gates at their
  mean over the images moves the detections' class probabilities by less than ``INPUT_EFFECT`` (0.01) on average
  (``mean_ablation``). Such a block acts as a fixed rescale. Entropy alone cannot tell this: a map normalised to sum 1
  with entropy ``>= 0.99 · ln N`` varies little (on a 16×16 grid a gate uniform in ``[0.3, 0.7]`` scores about
  0.995, one in ``[0.1, 0.9]`` 0.98), and sigmoid gates that read a cue in the image and switch the detector with it
  keep their entropy that high. Measured (BENCHMARKS.md, section 12.2): the CBAM that reads synthetic-key's marker
  0.29 at P3, every warm-started CBAM, SE and ECA of the studies at most 0.005. Where ``mean_ablation`` was not
  measured (NaN), entropy alone decides.
- ``one-hot``: ``peak_share >= ONE_HOT_SHARE`` (0.5, the heatmap tool's threshold): half a map's mass in one cell.
- ``saturated``: ``saturated >= SATURATED_SHARE`` (0.9): at least 90 % of the gate elements are ``< 0.01`` or
  ``> 0.99`` (a sigmoid there passes almost no gradient).
- ``switched off``: ``knockout < KNOCKOUT_OFF`` (1e-4: removing the block changes the raw outputs by less than 0.01 %)
  or, with a residual gate, mean ``|γ| < GAMMA_OFF`` (1e-3: the block's contribution is scaled to nothing).
- ``non-finite``: a NaN/inf in the block's gates or output, or in any measured value.
"""

from __future__ import annotations

import math

from attn_yolo.heatmap.maps import ONE_HOT_SHARE

UNIFORM_ENTROPY = 0.99
INPUT_EFFECT = 0.01
SATURATED_SHARE = 0.9
KNOCKOUT_OFF = 1e-4
GAMMA_OFF = 1e-3
FLAGS = ("uniform", "one-hot", "saturated", "switched off", "non-finite")


def _num(row: dict, key: str) -> float:
    try:
        return float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan


def flags(row: dict) -> list[str]:
    """The flags of one block's health row (``measure``'s values or a ``gates.csv`` row), in ``FLAGS`` order."""
    ent, peak, sat = _num(row, "entropy"), _num(row, "peak_share"), _num(row, "saturated")
    ko, gamma, bad = _num(row, "knockout"), _num(row, "gamma"), _num(row, "nonfinite")
    held = _num(row, "mean_ablation")  # NaN where not measured: NaN compares false, so entropy alone decides
    values = [_num(row, k) for k in ("gate_mean", "gate_std", "entropy", "knockout", "mean_ablation", "gamma")]
    out = []
    if ent >= UNIFORM_ENTROPY and not held >= INPUT_EFFECT:
        out.append("uniform")
    if peak >= ONE_HOT_SHARE:
        out.append("one-hot")
    if sat >= SATURATED_SHARE:
        out.append("saturated")
    if ko < KNOCKOUT_OFF or gamma < GAMMA_OFF:
        out.append("switched off")
    if (bad > 0) or any(math.isinf(v) for v in values):
        out.append("non-finite")
    return out
