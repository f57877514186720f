"""Normalization-based Attention Module (NAM): channel gates weighted by BatchNorm's scale factors."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import C1, check_init_values, in_place_ok, resolve
from attn_yolo.nn.layer_scale import LayerScale, gated


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
    ``W_γ`` is folded into the BatchNorm's affine (``weighted_bn``): one pass over the map for ``W_γ ⊙ BN(x)``, the
    same numbers and running statistics.

    YAML: ``[-1, 1, NAM, []]``.

    Args:
        c1 (int): input channels ``C``.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``M_c`` of shape ``(B, C, H, W)``.

    Raises:
        AttnBuildError: ``c1`` invalid.
    """

    def __init__(self, c1: int = C1, init_values: float | None = None):
        super().__init__()
        self.c1, where, (init_values,) = resolve(c1, "NAM", init_values)
        check_init_values(init_values, where)
        self.bn = nn.BatchNorm2d(self.c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(self.c1, init_values)

    def channel_weights(self) -> torch.Tensor:
        """``W_γ``: ``|γ_i| / Σ_j |γ_j|`` of the BatchNorm, shape ``(C,)``, detached (a constant in backprop)."""
        g = self.bn.weight.detach().abs()
        return g / g.sum()

    def weighted_bn(self, x: torch.Tensor) -> torch.Tensor:
        """``W_γ ⊙ BN(x)`` in one pass: ``self.bn`` run with scale ``γ ⊙ W_γ`` and shift ``β ⊙ W_γ``
        (``W_γ (x̂ γ + β) = x̂ (γ W_γ) + β W_γ``), with ``nn.BatchNorm2d``'s own statistics and running-stat update."""
        bn, w = self.bn, self.channel_weights()
        momentum = 0.0 if bn.momentum is None else bn.momentum
        if bn.training and bn.track_running_stats:
            bn.num_batches_tracked.add_(1)
            momentum = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
        use_batch = bn.training or bn.running_mean is None
        stats = (bn.running_mean, bn.running_var) if not bn.training or bn.track_running_stats else (None, None)
        return F.batch_norm(x, *stats, bn.weight * w, bn.bias * w, use_batch, momentum, bn.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.weighted_bn(x)
        s = self.gate(z)
        # without autograd the product goes into z's buffer (z is no longer needed; s is the recorded gate)
        return gated(x, torch.mul(x, s, out=z) if in_place_ok() else x * s, self.scale)
