"""Squeeze-and-Excitation (SE) channel attention."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import C1, check_r, resolve_c1
from attn_yolo.nn.layer_scale import LayerScale, gated


def reduced_width(c1: int, r: int, min_width: int = 8) -> int:
    """Hidden width ``C/r`` of an SE-style bottleneck, clamped below at ``min(min_width, C)`` so it never reaches 0."""
    return max(c1 // r, min(min_width, c1))


class SE(nn.Module):
    """Squeeze-and-Excitation block (Hu et al., "Squeeze-and-Excitation Networks", CVPR 2018).

    ``s = σ(W2 δ(W1 GAP(x)))``, ``y = x ⊙ s``: global average pool, FC ``C→C/r``, ReLU, FC ``C/r→C``, sigmoid,
    channel-wise scale. The FCs are 1×1 convolutions with bias. The hidden width is ``max(C // r, min(8, C))``: at
    small ``C`` it is clamped to 8 channels (or ``C`` if smaller) instead of dropping to 0.

    YAML: ``[-1, 1, SE, []]`` or ``[-1, 1, SE, [r]]``; ``C`` comes from the layer the row reads.

    Args:
        c1 (int): input channels ``C``.
        r (int): reduction ratio, ``r >= 1``. Default 16 (paper).
        init_values (float | None): if set, a residual gate ``y = x + γ ⊙ (x ⊙ s − x)`` with ``γ`` initialised to this
            value (0.0: identity at init, see ``LayerScale``). None (default): the paper's block.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; the gate ``self.gate`` outputs ``s`` of shape ``(B, C, 1, 1)`` in ``[0, 1]``.

    Raises:
        AttnBuildError: ``r`` not a positive int, or ``c1`` invalid.
    """

    def __init__(self, c1: int = C1, r: int = 16, init_values: float | None = None):
        super().__init__()
        c1, where = resolve_c1(c1, "SE")
        check_r(r, where)
        self.c1, self.r, self.hidden = c1, r, reduced_width(c1, r)
        self.fc1 = nn.Conv2d(c1, self.hidden, 1)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(self.hidden, c1, 1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.fc2(self.act(self.fc1(x.mean((2, 3), keepdim=True)))))
        return gated(x, x * s, self.scale)
