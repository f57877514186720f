"""Shuffle Attention (SA-Net): grouped channel and spatial gates, then a channel shuffle."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, group_count
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, declare, hp, int_in, positive_int, unused
from attn_yolo.nn.layer_scale import LayerScale, gated


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's channel shuffle (Zhang et al., CVPR 2018): view ``C`` as ``(groups, C / groups)``, transpose.

    Input channel ``g · (C / groups) + i`` goes to output channel ``i · groups + g``. A permutation; its inverse is
    ``channel_shuffle(·, C / groups)``. ``groups`` must divide ``C``. Shapes: ``(B, C, H, W) -> (B, C, H, W)``.
    """
    b, c, h, w = x.shape  # explicit sizes: torch's ONNX exporter loses the batch size of unflatten/flatten here
    return x.reshape(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


@declare(
    "ShuffleAttention",
    paper="Zhang & Yang, SA-Net: Shuffle Attention for Deep Convolutional Neural Networks, ICASSP 2021",
    params=(Param("groups", "None (adaptive) or a divisor of C // 2 (groups G)",
                  (lambda v: v is None or int_in(1, 64)(v), "1..64 groups (paper: 64)"), "adaptive",
                  (CopyDefault(8, "ShuffleAttention(channel=512, reduction=16, G=8) (cv-attention, yoloair) uses 8 "
                               "groups", "groups"),)),),
    aliases=("SA", "sa_layer", "ShuffleAttBlock"),  # sa_layer: the SA-Net authors' class name
    alias_notes={"SA": "in YOLO YAMLs SA (with a group count) is Shuffle Attention (SA-Net, Zhang & Yang 2021), not "
                 "spatial attention; for CBAM's spatial attention write SAM"},
    signatures=(
        # wofmanaf/SA-Net models/sa_resnet.py (the authors)
        Signature("sa_layer(channel, groups=64)", "wofmanaf/SA-Net", (hp("groups", "groups", 64),)),
        # cv-attention/ShuffleAttention.py, iscyy/yoloair models/Models/Attention/ShuffleAttention.py: reduction
        # accepted and unused, G=8
        Signature("ShuffleAttention(channel=512, reduction=16, G=8)", "cv-attention, yoloair",
                  (unused("reduction", 16, positive_int), hp("G", "groups", 8))),
    ),
    gate_maps={"channel": ("half0", "gate_c"), "spatial": ("half1", "gate_s")},
    opset_ops="Reshape, Transpose (groups, channel shuffle), InstanceNormalization",
    example_args=(4,),
)
class ShuffleAttention(nn.Module):
    """Shuffle Attention (Zhang, Yang, "SA-Net: Shuffle Attention for Deep Convolutional Neural Networks", ICASSP 2021).

    The channels are split into ``G`` groups, each group into two halves ``X_k1``, ``X_k2`` of ``c = C / 2G``
    channels (all groups share the parameters):

    ::

        X'_k1 = σ(W1 · GAP(X_k1) + b1) ⊙ X_k1          # channel gate
        X'_k2 = σ(W2 · GN(X_k2) + b2) ⊙ X_k2           # spatial gate
        Y = channel_shuffle([X'_1 ... X'_G], 2)        # each X'_k = [X'_k1; X'_k2]

    ``W1, b1, W2, b2`` are per-channel ``(c,)`` scale and shift. Settled by the authors' code: ``GN`` normalises
    each channel of ``X_k2`` over ``H·W`` (one group per channel); the shuffle uses 2 groups; ``W`` start at 0 and
    ``b`` at 1. Their ``GN`` also has its own affine parameters, which ``W2, b2`` make redundant (a per-channel affine
    followed by another); the paper's formula has only ``W2, b2``, and so has this block.

    Groups: ``C`` must be even, and ``groups`` must divide ``C / 2`` (the allowed values are listed if not). Left at
    None, it is the paper's 64 where 64 divides ``C / 2``, else the largest divisor of ``C / 2`` below 64 (e.g. 32
    for ``C = 64``); the authors' ``sa_layer(channel, groups=64)`` (wofmanaf/SA-Net) has no such adaptation. The
    widely copied ``ShuffleAttention(channel=512, reduction=16, G=8)`` (cv-attention, yoloair)
    ignores ``reduction`` and defaults to 8 groups (a row that leaves the groups out logs the edit ``[8]``).

    YAML: ``[-1, 1, ShuffleAttention, []]`` or ``[-1, 1, ShuffleAttention, [groups]]``.

    Args:
        c1 (int): input channels ``C``, even.
        groups (int | None): group count ``G``, a divisor of ``C / 2``; None (default): 64 adapted to ``C`` (above).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.gate_c`` ``(B·G, c, 1, 1)`` and ``self.gate_s``
        ``(B·G, c, H, W)``.

    Raises:
        AttnBuildError: ``C`` odd, ``groups`` not a divisor of ``C / 2``, or ``c1`` invalid.
    """

    def __init__(self, c1: int, groups: int | None = None, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "ShuffleAttention")
        check_init_values(init_values, where)
        check(c1 % 2 == 0, where, "input channels C", c1, "an even number (each group is split into two halves)")
        half = c1 // 2
        self.groups = group_count(groups, [g for g in range(1, half + 1) if half % g == 0], 64, where, "groups")
        self.c1, self.c = c1, half // self.groups  # channels per half-group
        shape = (1, self.c, 1, 1)
        self.cweight, self.cbias = nn.Parameter(torch.zeros(shape)), nn.Parameter(torch.ones(shape))
        self.sweight, self.sbias = nn.Parameter(torch.zeros(shape)), nn.Parameter(torch.ones(shape))
        self.gate_c = nn.Sigmoid()
        self.gate_s = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        g = x.reshape(b * self.groups, 2 * self.c, h, w)
        x0, x1 = g[:, : self.c], g[:, self.c :]  # 2 × (B·G, c, H, W)
        xn = x0 * self.gate_c(self.cweight * x0.mean((2, 3), keepdim=True) + self.cbias)
        xs = x1 * self.gate_s(self.sweight * F.group_norm(x1, self.c) + self.sbias)
        y = torch.cat((xn, xs), 1).reshape(x.shape)
        return gated(x, channel_shuffle(y, 2), self.scale)
