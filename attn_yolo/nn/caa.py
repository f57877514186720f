"""Context Anchor Attention (CAA, PKINet): local average pool, 1×1 conv, strip depthwise convs, 1×1 conv, sigmoid."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import C1, check, check_init_values, is_int, resolve
from attn_yolo.nn.layer_scale import LayerScale, gated


def conv_bn_silu(c: int) -> nn.Sequential:
    """1×1 conv ``C → C`` without bias, BatchNorm (eps 1e-3, momentum 0.03), SiLU: PKINet's ``ConvModule``."""
    return nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c, eps=1e-3, momentum=0.03), nn.SiLU())


class CAA(nn.Module):
    """Context Anchor Attention (Cai et al., "Poly Kernel Inception Network for Remote Sensing Detection", CVPR 2024).

    ``F_pool = Conv1×1(P_avg(x))`` (``P_avg`` a 7×7 average pool, stride 1), then a horizontal and
    a vertical strip depthwise conv, ``F_w = DWConv_{1×k_b}(F_pool)``, ``F_h = DWConv_{k_b×1}(F_w)``, and
    ``A = σ(Conv1×1(F_h))``; the block output is ``y = A ⊙ x`` (PKINet multiplies its block's features by ``A``; the
    YOLO code that uses CAA as a row multiplies its input).

    Settled by the authors' code: the 1×1 convs are conv (no bias) + BatchNorm (eps 1e-3, momentum 0.03) + SiLU; the
    strip convs have bias and no norm or activation; the average pool zero-pads by 3 and counts the padding
    (``count_include_pad``). The pool runs as a 1×7 then a 7×1 average pool: the same 7×7 box mean (zero padding
    counted, so it factorises exactly), in 14 instead of 49 additions per value. ``k_b`` defaults to 11, the authors'
    default (PKINet enlarges it with depth). In eval each BatchNorm is folded into its 1×1 conv (``conv_bn_act``).

    YAML: ``[-1, 1, CAA, []]`` or ``[-1, 1, CAA, [h_kernel_size, v_kernel_size]]``.

    Args:
        c1 (int): input channels ``C``.
        h_kernel_size (int): horizontal strip kernel ``k_b``, a positive odd int. Default 11.
        v_kernel_size (int): vertical strip kernel, a positive odd int. Default 11.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``A`` of shape ``(B, C, H, W)`` in ``[0, 1]``.

    Raises:
        AttnBuildError: a kernel size not a positive odd int, ``init_values`` out of range, or ``c1`` invalid.
    """

    def __init__(
        self, c1: int = C1, h_kernel_size: int = 11, v_kernel_size: int = 11, init_values: float | None = None
    ):
        super().__init__()
        c1, where, (hk, vk, init_values) = resolve(c1, "CAA", h_kernel_size, v_kernel_size, init_values)
        for name, k in (("h_kernel_size", hk), ("v_kernel_size", vk)):
            check(is_int(k) and 1 <= k <= 63 and k % 2 == 1, where, name, k, "a positive odd int <= 63 (paper: 11)")
        check_init_values(init_values, where)
        self.c1, self.h_kernel_size, self.v_kernel_size = c1, hk, vk
        self.pool_w = nn.AvgPool2d((1, 7), 1, (0, 3))  # count_include_pad=True, as nn.AvgPool2d(7, 1, 3)
        self.pool_h = nn.AvgPool2d((7, 1), 1, (3, 0))
        self.conv1 = conv_bn_silu(c1)
        self.h_conv = nn.Conv2d(c1, c1, (1, hk), padding=(0, hk // 2), groups=c1)
        self.v_conv = nn.Conv2d(c1, c1, (vk, 1), padding=(vk // 2, 0), groups=c1)
        self.conv2 = conv_bn_silu(c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    @staticmethod
    def conv_bn_act(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """``seq(x)`` (1×1 conv, BatchNorm, SiLU); in eval the BatchNorm is folded into the conv, one pass fewer.
        (Ultralytics' ``fuse()`` folds only its own ``Conv`` layers, so the block folds its own at inference.)"""
        conv, bn, act = seq
        if bn.training:
            return seq(x)
        s = bn.weight * torch.rsqrt(bn.running_var + bn.eps)
        return act(F.conv2d(x, conv.weight * s.view(-1, 1, 1, 1), bn.bias - bn.running_mean * s))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.conv_bn_act(self.conv1, self.pool_h(self.pool_w(x)))
        a = self.gate(self.conv_bn_act(self.conv2, self.v_conv(self.h_conv(f))))
        return gated(x, x * a, self.scale)
