"""Triplet Attention: three Z-pool gates over the (C, W), (H, C) and (H, W) planes of a map, averaged."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import C1, check_init_values, check_odd_k, in_place_ok, resolve
from attn_yolo.nn.layer_scale import LayerScale, gated


def z_pool(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Triplet Attention's Z-pool: ``[max; mean]`` of ``x`` over ``dim``, stacked as a new axis 1.

    Plain reductions (``ReduceMax``, ``ReduceMean`` in ONNX), so any input size exports. Shapes: ``(B, C, H, W)``
    with ``dim`` 1, 2 or 3 ``-> (B, 2, ·, ·)``, the two remaining axes in order.
    """
    return torch.stack((x.amax(dim), x.mean(dim)), 1)


class ZPoolGate(nn.Module):
    """One Triplet Attention branch on a Z-pooled plane: ``σ(BN(Conv_k×k(z)))``, conv ``2 → 1`` without bias.

    The BatchNorm has momentum 0.01 and eps 1e-5, as the authors' ``BasicConv`` (PyTorch's default momentum is 0.1);
    the momentum only weights the running statistics, so checkpoints are unchanged.

    Shapes:
        ``(B, 2, P, Q) -> (B, 1, P, Q)`` gate in ``[0, 1]`` (output of ``self.gate``).
    """

    def __init__(self, k: int = 7):
        super().__init__()
        self.conv = nn.Conv2d(2, 1, k, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(1, eps=1e-5, momentum=0.01)
        self.gate = nn.Sigmoid()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.gate(self.bn(self.conv(z)))


class TripletAttention(nn.Module):
    """Triplet Attention (Misra et al., "Rotate to Attend: Convolutional Triplet Attention Module", WACV 2021).

    Three branches, each a ``ZPoolGate`` on the map turned so that a different axis is pooled away, and the three
    gated maps averaged: ``y = 1/3 (x ⊙ s_cw + x ⊙ s_hc + x ⊙ s_hw)`` with

    * ``s_cw = ZPoolGate(Z-pool over H)`` on the ``(C, W)`` plane, broadcast over ``H`` (channel-width interaction);
    * ``s_hc = ZPoolGate(Z-pool over W)`` on the ``(H, C)`` plane, broadcast over ``W`` (height-channel interaction);
    * ``s_hw = ZPoolGate(Z-pool over C)`` on the ``(H, W)`` plane, broadcast over ``C`` (spatial attention).

    The paper "rotates" the map by 90°, which is an axis transposition plus a flip of one axis; the authors' code only
    transposes (permutes axes), and so does this block. Rotated as ``torch.rot90(k=1)`` the flip falls on the pooled
    axis and changes nothing; rotated the other way it mirrors the ``k×k`` kernel, the same function class. Plane
    orientation, Z-pool order ``[max; mean]``, convs without bias and BatchNorm (momentum 0.01) as in the authors'
    code (landskape-ai/triplet-attention ``triplet_attention.py``). Differences from it: the kernel is an argument
    here (fixed at 7 there), and their ``no_spatial=True`` two-branch variant is not provided. The branches
    pool with reductions on ``x`` itself (no permuted copy of the map), and ``y`` is computed as
    ``x ⊙ (s_cw/3 + s_hc/3 + s_hw/3)``: the 1/3 scales the small gates (three full-size ops after the pools, not
    four), and without autograd (not while tracing) the sum and the product go into one full-size buffer.

    YAML: ``[-1, 1, TripletAttention, []]`` or ``[-1, 1, TripletAttention, [k]]``.

    Args:
        c1 (int): input channels ``C`` (only used by the residual gate and for checking).
        k (int): kernel of the three convs, a positive odd int. Default 7 (paper).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.cw.gate`` ``(B, 1, C, W)``, ``self.hc.gate`` ``(B, 1, H, C)``,
        ``self.hw.gate`` ``(B, 1, H, W)``.

    Raises:
        AttnBuildError: ``k`` not a positive odd int, or ``c1`` invalid.
    """

    def __init__(self, c1: int = C1, k: int = 7, init_values: float | None = None):
        super().__init__()
        c1, where, (k, init_values) = resolve(c1, "TripletAttention", k, init_values)
        check_init_values(init_values, where)
        check_odd_k(k, where)
        self.c1, self.k = c1, k
        self.cw, self.hc, self.hw = ZPoolGate(k), ZPoolGate(k), ZPoolGate(k)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s_cw = self.cw(z_pool(x, 2)).transpose(1, 2)  # (B, 2, C, W) → (B, C, 1, W)
        s_hc = self.hc(z_pool(x, 3).transpose(2, 3)).permute(0, 3, 2, 1)  # (B, 2, H, C) → (B, C, H, 1)
        s_hw = self.hw(z_pool(x, 1))  # (B, 1, H, W)
        if in_place_ok():  # no autograd: the sum and the product in one buffer of x's layout (the broadcast sum
            s = torch.add(s_cw / 3, s_hc / 3, out=torch.empty_like(x))  # alone would lay it out (B, H, C, W))
            return gated(x, s.add_(s_hw / 3).mul_(x), self.scale)
        s = s_cw / 3 + s_hc / 3  # the 1/3 on the small gates; s is the first full-size (B, C, H, W) tensor
        return gated(x, x * (s + s_hw / 3), self.scale)
