"""Triplet Attention: three Z-pool gates over the (C, W), (H, C) and (H, W) planes of a map, averaged."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values, check_odd_k
from attn_yolo.nn.declaration import Param, Signature, declare, fixed, int_in, is_names, positive_int, unused
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


NO_SPATIAL = fixed("no_spatial", (False,), "the two-branch variant without the spatial gate, which attn_yolo does "
                   "not provide")


@declare(
    "TripletAttention",
    paper="Misra et al., Rotate to Attend: Convolutional Triplet Attention Module, WACV 2021",
    params=(Param("k", "a positive odd int", (int_in(1, 15), "1..15 (paper: 7)")),),
    aliases=("Triplet",),
    signatures=(
        # landskape-ai/triplet-attention triplet_attention.py (the authors), External-Attention-pytorch,
        # cv-attention: kernel fixed at 7
        Signature("TripletAttention(no_spatial=False)", "landskape-ai/triplet-attention, External-Attention-pytorch",
                  (NO_SPATIAL,)),
        # landskape-ai/triplet-attention MODELS/triplet_attention.py (the authors' first version): CBAM's signature,
        # gate_channels, reduction_ratio and pool_types unused
        Signature("TripletAttention(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)",
                  "landskape-ai/triplet-attention MODELS/", (
                      unused("reduction_ratio", 16, positive_int), unused("pool_types", ["avg", "max"], is_names),
                      NO_SPATIAL,
                  )),
    ),
    gate_maps={"cw": ("cw", "cw.gate"), "hc": ("hc", "hc.gate"), "hw": ("plane", "hw.gate")},
    opset_ops="ReduceMax, ReduceMean (Z-pools), Transpose, Conv, Sigmoid",
    example_args=(7,),
    helpers=(ZPoolGate,),
)
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
    pool with reductions on ``x`` itself (no permuted copy of the map); ``y = x ⊙ (s_cw + s_hc + s_hw) / 3``.

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

    def __init__(self, c1: int, k: int = 7, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "TripletAttention")
        check_init_values(init_values, where)
        check_odd_k(k, where)
        self.c1, self.k = c1, k
        self.cw, self.hc, self.hw = ZPoolGate(k), ZPoolGate(k), ZPoolGate(k)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s_cw = self.cw(z_pool(x, 2)).transpose(1, 2)  # (B, 2, C, W) → (B, C, 1, W)
        s_hc = self.hc(z_pool(x, 3).transpose(2, 3)).permute(0, 3, 2, 1)  # (B, 2, H, C) → (B, C, H, 1)
        s_hw = self.hw(z_pool(x, 1))  # (B, 1, H, W)
        return gated(x, x * ((s_cw + s_hc + s_hw) / 3), self.scale)
