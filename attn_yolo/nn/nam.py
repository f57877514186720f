"""Normalization-based Attention Module (NAM): channel gates weighted by BatchNorm's scale factors."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values
from attn_yolo.nn.declaration import Signature, ch, declare, is_bool, positive_int, unused
from attn_yolo.nn.layer_scale import LayerScale, gated


@declare(
    "NAM",
    paper="Liu et al., NAM: Normalization-based Attention Module, NeurIPS 2021 Workshop",
    aliases=("NAMAttention", "NAM_Attention"),
    signatures=(
        # Christian-lyc/NAM MODELS/attention.py (the authors): Channel_Att(channels, t=16), t unused
        Signature("Channel_Att(channels, t=16)", "Christian-lyc/NAM", (unused("t", 16, positive_int),)),
        # iscyy/yoloair models/Models/Attention/NAMAttention.py: the channel gate only; out_channels and no_spatial
        # accepted and unused
        Signature("NAMAttention(channels, out_channels=None, no_spatial=True)", "yoloair",
                  (ch("out_channels", none_ok=True), unused("no_spatial", True, is_bool))),
    ),
    gate_maps={"gain": ("gain", "gate")},
    opset_ops="BatchNormalization, Abs, ReduceSum, Div, Sigmoid, Mul",
)
class NAM(nn.Module):
    """Normalization-based Attention Module, channel attention (Liu et al., arXiv 2111.12419, 2021).

    Paper: Liu, Shao, Teng, Hoffmann, "NAM: Normalization-based Attention Module", arXiv 2111.12419, 2021.

    ``M_c = σ(W_γ · BN(x))``, ``y = M_c ⊙ x``: each channel's BatchNorm output is weighted by its share of the scale
    factors, ``w_i = |γ_i| / Σ_j |γ_j|`` (``channel_weights``), so a channel whose ``γ`` is small (little variance
    kept) gets a gate near 1/2 whatever its input.

    Settled by the authors' code (Christian-lyc/NAM ``MODELS/attention.py``): ``|γ|`` (the paper writes
    ``γ_i / Σ_j γ_j``, which a negative ``γ`` would flip), and ``W_γ`` enters as a constant (they read
    ``weight.data``): gradients reach ``γ`` through ``BN(x)`` only. Differences from it: one version of that file
    applies a ReLU before the sigmoid (gates in ``[1/2, 1]``); the other version, the widely copied ``NAMAttention``
    and the paper's ``M_c`` have none, nor has this block. That version also has a spatial (pixel-normalisation)
    gate, a ``BatchNorm1d`` over a fixed ``H·W`` sized at build time, which is not included here (it fixes the input
    size); nor is the paper's optional L1 penalty on ``γ`` (a loss term, not part of the block). Their
    ``Channel_Att(channels, t=16)`` never uses ``t``.

    YAML: ``[-1, 1, NAM, []]``.

    Args:
        c1 (int): input channels ``C``.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``M_c`` of shape ``(B, C, H, W)``.

    Raises:
        AttnBuildError: ``c1`` invalid.
    """

    def __init__(self, c1: int, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "NAM")
        self.c1 = c1
        check_init_values(init_values, where)
        self.bn = nn.BatchNorm2d(self.c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(self.c1, init_values)

    def channel_weights(self) -> torch.Tensor:
        """``W_γ``: ``|γ_i| / Σ_j |γ_j|`` of the BatchNorm, shape ``(C,)``, detached (a constant in backprop)."""
        g = self.bn.weight.detach().abs()
        return g / g.sum()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gate(self.bn(x) * self.channel_weights().view(1, -1, 1, 1))  # M_c = σ(W_γ ⊙ BN(x))
        return gated(x, x * s, self.scale)
