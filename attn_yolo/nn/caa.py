"""Context Anchor Attention (CAA, PKINet): local average pool, 1×1 conv, strip depthwise convs, 1×1 conv, sigmoid."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int
from attn_yolo.nn.declaration import Param, Signature, declare, hp
from attn_yolo.nn.layer_scale import LayerScale, gated


def conv_bn_silu(c: int) -> nn.Sequential:
    """1×1 conv ``C → C`` without bias, BatchNorm (eps 1e-3, momentum 0.03), SiLU: PKINet's ``ConvModule``."""
    return nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c, eps=1e-3, momentum=0.03), nn.SiLU())


@declare(
    "CAA",
    paper="Cai et al., Poly Kernel Inception Network for Remote Sensing Detection, CVPR 2024",
    params=(Param("h_kernel_size", "a positive odd int <= 63"), Param("v_kernel_size", "a positive odd int <= 63")),
    aliases=("ContextAnchorAttention",),
    signatures=(
        # NUST-Machine-Intelligence-Laboratory/PKINet (the authors) and cv-attention/CAA.py: our order and defaults
        Signature("CAA(ch, h_kernel_size=11, v_kernel_size=11)", "PKINet, cv-attention", (
            hp("h_kernel_size", "h_kernel_size", 11), hp("v_kernel_size", "v_kernel_size", 11),
        )),
    ),
    gate_maps={"gain": ("gain", "gate")},
    opset_ops="AveragePool (7×7, fixed window), Conv, Sigmoid, Mul",
)
class CAA(nn.Module):
    """Context Anchor Attention (Cai et al., "Poly Kernel Inception Network for Remote Sensing Detection", CVPR 2024).

    ``F_pool = Conv1×1(P_avg(x))`` (``P_avg`` a 7×7 average pool, stride 1), then a horizontal and
    a vertical strip depthwise conv, ``F_w = DWConv_{1×k_b}(F_pool)``, ``F_h = DWConv_{k_b×1}(F_w)``, and
    ``A = σ(Conv1×1(F_h))``; the block output is ``y = A ⊙ x`` (PKINet multiplies its block's features by ``A``; the
    YOLO code that uses CAA as a row multiplies its input).

    Settled by the authors' code: the 1×1 convs are conv (no bias) + BatchNorm (eps 1e-3, momentum 0.03) + SiLU; the
    strip convs have bias and no norm or activation; the average pool zero-pads by 3 and counts the padding
    (``count_include_pad``). ``k_b`` defaults to 11, the authors' default (PKINet enlarges it with depth).

    Cost: the two dense 1×1 convs C→C are most of it, 2·C² MACs per pixel (0.31 G of the block's 0.36 GMACs on
    yolo11n at 640, P3, P4, P5, against the baseline's 3.27 GMACs).

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
        self, c1: int, h_kernel_size: int = 11, v_kernel_size: int = 11, init_values: float | None = None
    ):
        super().__init__()
        where = check_c1(c1, "CAA")
        hk, vk = h_kernel_size, v_kernel_size
        for name, k in (("h_kernel_size", hk), ("v_kernel_size", vk)):
            check(is_int(k) and 1 <= k <= 63 and k % 2 == 1, where, name, k, "a positive odd int <= 63 (paper: 11)")
        check_init_values(init_values, where)
        self.c1, self.h_kernel_size, self.v_kernel_size = c1, hk, vk
        self.pool = nn.AvgPool2d(7, 1, 3)  # zero padding counted (count_include_pad), as PKINet
        self.conv1 = conv_bn_silu(c1)
        self.h_conv = nn.Conv2d(c1, c1, (1, hk), padding=(0, hk // 2), groups=c1)
        self.v_conv = nn.Conv2d(c1, c1, (vk, 1), padding=(vk // 2, 0), groups=c1)
        self.conv2 = conv_bn_silu(c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.conv1(self.pool(x))  # F_pool = Conv1×1(P_avg(x))
        a = self.gate(self.conv2(self.v_conv(self.h_conv(f))))  # A = σ(Conv1×1(DWConv_{k×1}(DWConv_{1×k}(F_pool))))
        return gated(x, x * a, self.scale)
