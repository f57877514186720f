"""Context Anchor Attention (CAA, PKINet): local average pool, 1×1 conv, strip depthwise convs, 1×1 conv, sigmoid."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo.nn.common import (
    C1,
    check,
    check_init_values,
    conv1x1,
    fold_bn,
    gate_product,
    in_place_ok,
    is_int,
    resolve,
)
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
    (``count_include_pad``). ``k_b`` defaults to 11, the authors' default (PKINet enlarges it with depth).

    Cost, with the same function: the pool runs as a 1×7 then a 7×1 box filter (the same 7×7 mean, zero padding
    counted, so it factorises exactly), as depthwise convs of constant weights 1/7 (``box_mean``: PyTorch's CPU
    ``avg_pool2d`` with stride 1 was the block's largest op, over half its time). In eval each BatchNorm is folded
    into its 1×1 conv (``folded``), and on CPU without autograd ``fast_logits`` runs the 1×1 convs as GEMMs that
    change the layout (channels-last for the depthwise convs, NCHW for the output) instead of separate copies: on
    yolo11n's P3 at 640 (1×128×80×80, 1 thread) the block went from 81 to 18 ms (BENCHMARKS.md section 2e). What
    is left is mostly the paper's design: the two dense 1×1 convs C→C cost 2·C² MACs per pixel, 0.31 G of the
    block's 0.36 GMACs on yolo11n at 640 (P3, P4, P5), against the baseline's 3.27 GMACs (+9.6 % from them alone).

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
        self.conv1 = conv_bn_silu(c1)
        self.h_conv = nn.Conv2d(c1, c1, (1, hk), padding=(0, hk // 2), groups=c1)
        self.v_conv = nn.Conv2d(c1, c1, (vk, 1), padding=(vk // 2, 0), groups=c1)
        self.conv2 = conv_bn_silu(c1)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    @staticmethod
    def folded(seq: nn.Sequential) -> tuple[torch.Tensor, torch.Tensor]:
        """The eval-mode 1×1 conv + BatchNorm of ``seq`` as one affine map: weight ``(C, C)`` and bias ``(C,)``."""
        conv, bn, _ = seq
        return fold_bn(conv.weight.flatten(1), bn)

    @staticmethod
    def conv_bn_act(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """``seq(x)`` (1×1 conv, BatchNorm, SiLU); in eval the BatchNorm is folded into the conv, one pass fewer.
        (Ultralytics' ``fuse()`` folds only its own ``Conv`` layers, so the block folds its own at inference.)"""
        conv, bn, act = seq
        if bn.training:
            return seq(x)
        w, b = CAA.folded(seq)
        return act(F.conv2d(x, w[:, :, None, None], b))

    def box_mean(self, x: torch.Tensor) -> torch.Tensor:
        """PKINet's ``AvgPool2d(7, 1, 3)`` (zero padding counted): a 1×7 then a 7×1 depthwise conv of weights 1/7.
        Shapes: ``(B, C, H, W) -> (B, C, H, W)``."""
        c = self.c1
        x = F.conv2d(x, x.new_full((c, 1, 1, 7), 1 / 7), None, 1, (0, 3), 1, c)
        return F.conv2d(x, x.new_full((c, 1, 7, 1), 1 / 7), None, 1, (3, 0), 1, c)

    def fast_path_ok(self, x: torch.Tensor) -> bool:
        """True for CPU inference (eval, no autograd, not tracing): ``fast_logits`` then replaces the conv path."""
        return x.device.type == "cpu" and not (self.conv1[1].training or self.conv2[1].training) and in_place_ok()

    def fast_logits(self, x: torch.Tensor) -> torch.Tensor:
        """``SiLU(BN(Conv1×1(F_h)))``, the pre-sigmoid gate, in eval on CPU: ``Conv1×1(P_avg(x)) = P_avg(Conv1×1(x))``
        (both linear, zero padding maps to zero), so the first 1×1 conv runs first, as a GEMM that writes its output
        channels-last (``conv1x1``), where the pool and the strip convs are fast; the second one writes NCHW again.
        No transposing copy, and the same values as the conv path to float rounding. Shapes: ``(B, C, H, W)`` in
        and out, the output NCHW."""
        (w1, b1), (w2, b2) = self.folded(self.conv1), self.folded(self.conv2)
        f = F.silu(self.box_mean(conv1x1(x, w1, channels_last=True)).add_(b1.view(-1, 1, 1)), inplace=True)
        a = conv1x1(self.v_conv(self.h_conv(f)), w2, channels_last=False)
        return F.silu(a.add_(b2.view(-1, 1, 1)), inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fast_path_ok(x):
            return gated(x, gate_product(self.gate, self.fast_logits(x), x), self.scale)
        f = self.conv_bn_act(self.conv1, self.box_mean(x))
        a = self.gate(self.conv_bn_act(self.conv2, self.v_conv(self.h_conv(f))))
        return gated(x, x * a, self.scale)
