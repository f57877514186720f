"""Convolutional Block Attention Module (CBAM) and its spatial attention module (SAM)."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values, check_kernel, check_r
from attn_yolo.nn.declaration import Param, Signature, declare, fixed, hp, int_in, is_names
from attn_yolo.nn.layer_scale import LayerScale, gated


class ChannelGate(nn.Module):
    """CBAM channel attention ``M_c = σ(MLP(AvgPool(x)) + MLP(MaxPool(x)))`` (Woo et al., ECCV 2018, Eq. 2).

    The MLP ``C→C/r→C`` (1×1 convs, ReLU) is shared by both descriptors. Hidden width ``C // r``, as in ``SE``.

    Shapes:
        ``(B, C, H, W) -> (B, C, 1, 1)`` gate in ``[0, 1]`` (output of ``self.gate``).
    """

    def __init__(self, c1: int, r: int = 16):
        super().__init__()
        self.hidden = c1 // r
        self.mlp = nn.Sequential(nn.Conv2d(c1, self.hidden, 1), nn.ReLU(inplace=True), nn.Conv2d(self.hidden, c1, 1))
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(self.mlp(x.mean((2, 3), keepdim=True)) + self.mlp(x.amax((2, 3), keepdim=True)))


class SpatialGate(nn.Module):
    """CBAM spatial attention ``M_s = σ(f^{k×k}([AvgPool_c(x); MaxPool_c(x)]))`` (Woo et al., ECCV 2018, Eq. 3).

    Channel-wise mean and max maps are concatenated and convolved by one ``k×k`` conv (with bias, padding ``k//2``).
    This follows the paper's Eq. 3. The authors' code (Jongchan/attention-module ``MODELS/cbam.py``) differs: its
    conv has no bias and is followed by a BatchNorm (momentum 0.01, eps 1e-5) before the sigmoid, its kernel is
    fixed at 7, and it stacks ``[max; mean]`` (a permutation of the conv's two input channels).

    Shapes:
        ``(B, C, H, W) -> (B, 1, H, W)`` gate in ``[0, 1]`` (output of ``self.gate``).
    """

    def __init__(self, k: int = 7):
        super().__init__()
        self.conv = nn.Conv2d(2, 1, k, padding=k // 2)
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(self.conv(torch.cat((x.mean(1, keepdim=True), x.amax(1, keepdim=True)), 1)))


@declare(
    "SAM",
    paper="Woo et al., CBAM: Convolutional Block Attention Module, ECCV 2018 (its spatial attention module)",
    params=(Param("k", "the int 3 or 7 (spatial kernel)"),),
    aliases=("SpatialAttention", "SpatialAttentionModule"),  # also Ultralytics' SpatialAttention(kernel_size=7)
    # ultralytics/nn/modules/conv.py and External-Attention-pytorch model/attention/CBAM.py
    signatures=(Signature("SpatialAttention(kernel_size=7)", "Ultralytics, External-Attention-pytorch",
                          (hp("kernel_size", "k", 7),)),),
    gate_maps={"spatial": ("plane", "spatial.gate")},
    opset_ops="ReduceMean, ReduceMax (channel pools), Concat, Conv, Sigmoid, Mul",
    example_args=(7,),
    helpers=(SpatialGate,),
)
class SAM(nn.Module):
    """Spatial attention module of CBAM (Woo et al., "CBAM: Convolutional Block Attention Module", ECCV 2018).

    ``y = x ⊙ M_s(x)`` with ``M_s`` the ``SpatialGate``: channel-mean and channel-max maps, ``k×k`` conv, sigmoid.

    YAML: ``[-1, 1, SAM, []]`` or ``[-1, 1, SAM, [k]]`` (Ultralytics' ``SpatialAttention, [7]`` reads the same).

    Args:
        c1 (int): input channels ``C`` (only used by the residual gate and for checking).
        k (int): spatial kernel, 3 or 7. Default 7 (paper).
        init_values (float | None): residual gate init, as in ``SE``.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.spatial.gate`` outputs ``(B, 1, H, W)``.

    Raises:
        AttnBuildError: ``k`` not the int 3 or 7, ``init_values`` out of range.
    """

    def __init__(self, c1: int, k: int = 7, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "SAM")
        check_kernel(k, where)
        check_init_values(init_values, where)
        self.c1, self.k = c1, k
        self.spatial = SpatialGate(k)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, x * self.spatial(x), self.scale)


@declare(
    "CBAM",
    paper="Woo et al., CBAM: Convolutional Block Attention Module, ECCV 2018",
    params=(Param("r", "an int in 1..C (hidden width C // r >= 1)", (int_in(1, 32), "1..32 (as SE)")),
            Param("k", "the int 3 or 7 (spatial kernel)")),
    aliases=("CBAMBlock", "CBAMAttention"),
    signatures=(
        # ultralytics/nn/modules/conv.py: CBAM(c1, kernel_size=7); a lone 3 or 7 is its kernel
        Signature("CBAM(c1, kernel_size=7)", "Ultralytics", (hp("kernel_size", "k", 7),), prefer=True),
        # Jongchan/attention-module MODELS/cbam.py (the CBAM authors): spatial kernel fixed at 7
        Signature("CBAM(gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False)",
                  "Jongchan/attention-module", (
                      hp("reduction_ratio", "r", 16),
                      fixed("pool_types", (["avg", "max"], ("avg", "max")), "other pooled descriptors ('lp', 'lse'), "
                            "which attn_yolo does not provide", is_names),
                      fixed("no_spatial", (False,), "the channel gate alone, which attn_yolo does not provide as "
                            "CBAM (for a channel gate write SE or ECA)"),
                  )),
        # External-Attention-pytorch model/attention/CBAM.py (kernel_size=49; it also adds the input back,
        # out + x) and cv-attention/CBAM.py (kernel_size=7, no residual). Its default kernel_size=49 is not a CBAM
        # kernel here (3 or 7), so it is not offered as a differing default.
        Signature("CBAMBlock(channel=512, reduction=16, kernel_size=49)", "External-Attention-pytorch, cv-attention",
                  (hp("reduction", "r", 16), hp("kernel_size", "k", 49))),
    ),
    kernel_alone="k",
    gate_maps={"channel": ("gain", "channel.gate"), "spatial": ("plane", "spatial.gate")},
    opset_ops="ReduceMean, ReduceMax (global and channel pools), Conv, Relu, Sigmoid, Mul",
    example_args=(4, 7),
    helpers=(ChannelGate, SpatialGate),
)
class CBAM(nn.Module):
    """Convolutional Block Attention Module (Woo et al., "CBAM: Convolutional Block Attention Module", ECCV 2018).

    As in the paper (Eq. 1), channel then spatial attention, each applied multiplicatively:
    ``x' = M_c(x) ⊙ x``, ``y = M_s(x') ⊙ x'``. ``M_c`` uses both average- and max-pooled descriptors through a shared
    MLP with reduction ``r``. (Ultralytics' own ``CBAM`` is a different, average-only variant without reduction.)

    Differences from the authors' code (Jongchan/attention-module ``MODELS/cbam.py``): the spatial gate there has a
    BatchNorm after a bias-free conv, ours follows Eq. 3 without it (``SpatialGate``); the spatial kernel is fixed at 7
    there; their MLP is ``nn.Linear`` with bias on the pooled vectors, the same function as ours (1×1 convs with
    bias). Their options ``pool_types`` other than ``['avg', 'max']`` and ``no_spatial=True`` are not provided.

    YAML: ``[-1, 1, CBAM, []]``, ``[-1, 1, CBAM, [r]]`` or ``[-1, 1, CBAM, [r, k]]``. A single arg 3 or 7 is the
    kernel size, as in Ultralytics' ``CBAM(c1, kernel_size=7)``: ``[7]`` is ``r=16, k=7`` (``attn_yolo.conventions``).

    Args:
        c1 (int): input channels ``C``.
        r (int): channel reduction ratio, ``1 <= r <= C``. Default 16 (paper).
        k (int): spatial kernel, 3 or 7. Default 7 (paper).
        init_values (float | None): residual gate init, as in ``SE``.

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.channel.gate`` ``(B, C, 1, 1)``, ``self.spatial.gate``
        ``(B, 1, H, W)``.

    Raises:
        AttnBuildError: ``r`` not an int in ``1..C``, ``k`` not the int 3 or 7, ``init_values`` out of range.
    """

    def __init__(self, c1: int, r: int = 16, k: int = 7, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "CBAM")
        check_r(r, where, c1)
        check_kernel(k, where)
        check_init_values(init_values, where)
        self.c1, self.r, self.k = c1, r, k
        self.channel = ChannelGate(c1, r)
        self.spatial = SpatialGate(k)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.channel(x)
        return gated(x, y * self.spatial(y), self.scale)
