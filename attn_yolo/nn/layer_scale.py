"""Residual gate that lets an inserted block start as the identity function."""

from __future__ import annotations

import torch
from torch import nn


class LayerScale(nn.Module):
    """Per-channel learnable scale ``γ ⊙ x`` (LayerScale: Touvron et al., "Going deeper with Image Transformers", 2021).

    Used on residual branches: ``y = x + γ ⊙ branch(x)``. With ``γ`` initialised to 0 the block is exactly the identity
    at initialisation (as ReZero, Bachlechner et al., 2020, and zero-γ residual init, Goyal et al., 2017), so a block
    inserted into a pretrained detector does not change its predictions until training moves ``γ``.

    Args:
        c (int): number of channels.
        init_values (float): initial value of every ``γ_c``.
        channel_dim (int): 1 for ``(B, C, H, W)`` inputs, -1 for token inputs ``(B, N, C)``.

    Shapes:
        input and output: ``(B, C, H, W)`` (channel_dim=1) or ``(B, N, C)`` (channel_dim=-1).
    """

    def __init__(self, c: int, init_values: float = 0.0, channel_dim: int = 1):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((c,), float(init_values)))
        self.channel_dim = channel_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (self.gamma.view(-1, 1, 1) if self.channel_dim == 1 else self.gamma)


def gated(x: torch.Tensor, y: torch.Tensor, scale: LayerScale | None) -> torch.Tensor:
    """Return ``y`` (the paper's block output) or, with a residual gate, ``x + γ ⊙ (y − x)``: identity at ``γ = 0``."""
    return y if scale is None else x + scale(y - x)
