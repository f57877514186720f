"""Efficient Channel Attention (ECA)."""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, declare, hp, int_in
from attn_yolo.nn.layer_scale import LayerScale, gated


def eca_kernel_size(c: int, gamma: float = 2, b: float = 1) -> int:
    """Adaptive ECA kernel size ``k = ψ(C) = |(log2 C + b) / γ|_odd`` (Wang et al., CVPR 2020, Eq. 12).

    ``|t|_odd`` is the odd number nearest to ``t``; the paper leaves a tie (``t`` even) open, and it goes up here.
    Computed as ``2 ⌊t / 2⌋ + 1``, odd for every ``C``. The widely copied rule ``t = int(t); k = t if t % 2 else
    t + 1`` (e.g. the ``ECALayer`` / ``ECA(channel, gamma=2, b=1)`` copies) gives the same ``k`` for every ``t >= 1``.
    It is not the authors' code: their ``eca_layer(channel, k_size=3)`` (BangguWu/ECANet ``models/eca_module.py``)
    takes ``k_size``, default 3, and their ResNets pass it per stage; no function there computes ``ψ(C)``.
    """
    t = abs((math.log2(c) + b) / gamma)
    return 2 * math.floor(t / 2) + 1


ECA_WHO = "eca_layer(channel, k_size=3) (BangguWu/ECANet) and ECAAttention(kernel_size=3) (cv-attention) fix k=3"


@declare(
    "ECA",
    paper="Wang et al., ECA-Net: Efficient Channel Attention for Deep Convolutional Neural Networks, CVPR 2020",
    params=(Param("k", "None (adaptive) or a positive odd int", (lambda v: v is None or int_in(1, 9)(v),
                  "1..9 (paper: adaptive, 3 to 9 in its tests)"), "adaptive", (CopyDefault(3, ECA_WHO, "k"),)),),
    aliases=("ECAAttention", "EfficientChannelAttention", "ECALayer", "eca_layer"),
    signatures=(
        # BangguWu/ECANet models/eca_module.py: channel is accepted and unused; k_size fixed per stage (default 3)
        Signature("eca_layer(channel, k_size=3)", "BangguWu/ECANet", (hp("k_size", "k", 3),)),
        # cv-attention/ECA.py: no channel arg (its readme: need_channel False); its Conv1d has a bias (ours: none,
        # as the authors')
        Signature("ECAAttention(kernel_size=3)", "cv-attention", (hp("kernel_size", "k", 3),)),
    ),
    gate_maps={"channel": ("gain", "gate")},
    opset_ops="ReduceMean (global pool), 1-D Conv, Transpose, Sigmoid, Mul",
)
class ECA(nn.Module):
    """Efficient Channel Attention (Wang et al., "ECA-Net: Efficient Channel Attention for Deep CNNs", CVPR 2020).

    ``s = σ(conv1d_k(GAP(x)))``, ``y = x ⊙ s``: global average pool, a 1-D convolution of kernel ``k`` across the
    channel axis (no bias, zero padding ``(k-1)/2``), sigmoid, channel-wise scale. No dimensionality reduction.

    Differences from the authors' code (``eca_layer``): its ``k_size`` defaults to 3, ours to the paper's adaptive
    ``k`` (a row that leaves ``k`` out logs the edit ``[3]`` for theirs); its ``channel`` argument is unused.

    YAML: ``[-1, 1, ECA, []]`` (adaptive ``k``) or ``[-1, 1, ECA, [k]]``.

    Args:
        c1 (int): input channels ``C``.
        k (int | None): kernel size, a positive odd int ``<= C``; None (default): adaptive ``eca_kernel_size(C)``.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``s`` of shape ``(B, C, 1, 1)``.

    Raises:
        AttnBuildError: ``k`` not a positive odd int ``<= C``, ``init_values`` out of range.
    """

    def __init__(self, c1: int, k: int | None = None, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "ECA")
        if k is not None:
            ok = is_int(k) and 1 <= k <= c1 and k % 2 == 1
            allowed = f"a positive odd int <= C={c1} (1, 3, 5, ...), or None ([] in a YAML) for the adaptive k"
            check(ok, where, "k", k, allowed)
        check_init_values(init_values, where)
        self.c1, self.k = c1, eca_kernel_size(c1) if k is None else k
        self.conv = nn.Conv1d(1, 1, self.k, padding=(self.k - 1) // 2, bias=False)
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.mean((2, 3)).unsqueeze(1)  # (B, 1, C): channels as a 1-D sequence
        s = self.gate(self.conv(y)).transpose(1, 2).unsqueeze(-1)  # (B, C, 1, 1)
        return gated(x, x * s, self.scale)
