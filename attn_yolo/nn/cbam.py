"""Convolutional Block Attention Module (CBAM) and its spatial attention module (SAM)."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import C1, check_init_values, check_kernel, check_r, resolve
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

    def __init__(self, c1: int = C1, k: int = 7, init_values: float | None = None):
        super().__init__()
        c1, where, (k, init_values) = resolve(c1, "SAM", k, init_values)
        check_kernel(k, where)
        check_init_values(init_values, where)
        self.c1, self.k = c1, k
        self.spatial = SpatialGate(k)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gated(x, x * self.spatial(x), self.scale)


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

    def __init__(self, c1: int = C1, r: int = 16, k: int = 7, init_values: float | None = None):
        super().__init__()
        c1, where, (r, k, init_values) = resolve(c1, "CBAM", r, k, init_values)
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
