"""Large Separable Kernel Attention (LSKA): a large depthwise kernel split into 1-D and dilated 1-D convolutions."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check, check_c1, check_init_values, is_int
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, declare, hp
from attn_yolo.nn.layer_scale import LayerScale, gated

LSKA_KERNELS: dict[int, tuple[int, int, int]] = {
    7: (3, 3, 2),
    11: (3, 5, 2),
    23: (5, 7, 3),
    35: (5, 11, 3),
    41: (5, 13, 3),
    53: (5, 17, 3),
}
"""Kernel size ``k`` → ``(local kernel 2d − 1, dilated kernel, dilation d)``, as in the paper's table and the authors'
code. The two stages together see ``(2d − 1) + (k_d − 1)·d = k`` pixels along each axis."""


LSKA_COPIES = "the LSKA copied beside SPPF_LSKA in YOLO collections"


@declare(
    "LSKA",
    paper="Lau et al., Large Separable Kernel Attention, Expert Systems with Applications 2024",
    params=(Param("k", "one of the table's kernels (7, 11, 23, 35, 41, 53)",
                  copies=(CopyDefault(11, f"LSKA(dim, k_size=11) ({LSKA_COPIES}) uses k_size=11", "k"),)),),
    aliases=("LargeSeparableKernelAttention",),
    signatures=(
        # StevenLauHKHK/Large-Separable-Kernel-Attention (the authors) and cv-attention/LSKA.py: k_size=7
        Signature("LSKA(dim, k_size=7)", "StevenLauHKHK/Large-Separable-Kernel-Attention, cv-attention",
                  (hp("k_size", "k", 7),)),
        # the LSKA that YOLO collections copy beside SPPF_LSKA (which builds LSKA(c_ * 4, k_size=11)): k_size=11
        Signature("LSKA(dim, k_size=11)", LSKA_COPIES, (hp("k_size", "k", 11),)),
    ),
    gate_maps={"gain": ("absgain", "gate")},
    opset_ops="depthwise and dilated depthwise Conv, 1×1 Conv, Mul",
    example_args=(11,),
    inside_defaults={"SPPF": ({"k": 11}, "the hand-written SPPF_LSKA of YOLO collections builds LSKA(c_ * 4, "
                              "k_size=11)")},
)
class LSKA(nn.Module):
    """Large Separable Kernel Attention (Lau, Po, Rehman, "Large Separable Kernel Attention", ESWA 2024).

    Paper: Lau, Po, Rehman, "Large Separable Kernel Attention: Rethinking the Large Kernel Attention Design in CNN",
    Expert Systems with Applications 236, 2024.

    VAN's large kernel attention (a ``k×k`` depthwise conv decomposed into a ``(2d−1)×(2d−1)`` depthwise conv, a
    ``⌈k/d⌉×⌈k/d⌉`` depthwise conv with dilation ``d`` and a 1×1 conv) with each 2-D depthwise conv split into a
    horizontal and a vertical 1-D one:

    ``A = Conv1×1(DW-D_{k_d×1}(DW-D_{1×k_d}(DW_{(2d−1)×1}(DW_{1×(2d−1)}(x)))))``, ``y = A ⊙ x``

    (``DW``: depthwise, ``DW-D``: depthwise dilated by ``d``; all with bias and zero padding that keeps the size).
    ``A`` is not squashed: LSKA multiplies by the raw attention map, as VAN's LKA does.

    Kernel sizes ``k`` and their ``(2d−1, k_d, d)`` are ``LSKA_KERNELS``: 7 (3, 3, 2), 11 (3, 5, 2), 23 (5, 7, 3),
    35 (5, 11, 3), 41 (5, 13, 3), 53 (5, 17, 3), as the authors' code builds them. VAN's rule
    ``⌈k/d⌉`` would give dilated kernels one larger (4, 6, 8, 12, 14, 18); with the table's the receptive field is
    exactly ``(2d − 1) + (k_d − 1)·d = k``. Default ``k`` = 7, the authors' code default (their VAN-LSKA models).
    This is the LSKA module only: the VAN block around it (1×1 proj, GELU, shortcut, MLP) is not part of it, as in
    the YOLO code that uses LSKA as a row or inside SPPF.

    YAML: ``[-1, 1, LSKA, []]`` or ``[-1, 1, LSKA, [k]]``, e.g. ``[11]``.

    Args:
        c1 (int): input channels ``C``.
        k (int): kernel size, one of 7, 11, 23, 35, 41, 53. Default 7.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` (identity) outputs ``A`` of shape ``(B, C, H, W)``, unbounded.

    Raises:
        AttnBuildError: ``k`` not one of the table's sizes, ``init_values`` out of range, or ``c1`` invalid.
    """

    def __init__(self, c1: int, k: int = 7, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "LSKA")
        check(is_int(k) and k in LSKA_KERNELS, where, "k", k, f"one of {list(LSKA_KERNELS)} (paper's table; default 7)")
        check_init_values(init_values, where)
        self.c1, self.k = c1, k
        k0, kd, d = LSKA_KERNELS[k]
        p0, pd = (k0 - 1) // 2, d * (kd - 1) // 2
        self.conv0h = nn.Conv2d(c1, c1, (1, k0), padding=(0, p0), groups=c1)
        self.conv0v = nn.Conv2d(c1, c1, (k0, 1), padding=(p0, 0), groups=c1)
        self.conv_spatial_h = nn.Conv2d(c1, c1, (1, kd), padding=(0, pd), dilation=d, groups=c1)
        self.conv_spatial_v = nn.Conv2d(c1, c1, (kd, 1), padding=(pd, 0), dilation=d, groups=c1)
        self.conv1 = nn.Conv2d(c1, c1, 1)
        self.gate = nn.Identity()  # marks the attention map as applied (heatmaps hook it)
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv_spatial_v(self.conv_spatial_h(self.conv0v(self.conv0h(x))))
        return gated(x, x * self.gate(self.conv1(a)), self.scale)
