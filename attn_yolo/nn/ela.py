"""Efficient Local Attention (ELA): direction-aware 1-D conv + GroupNorm gates, no channel reduction."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import AttnBuildError, check, check_c1, check_init_values, group_count
from attn_yolo.nn.declaration import UNPROVIDED, CopyDefault, Param, Signature, declare
from attn_yolo.nn.layer_scale import LayerScale, gated

ELA_VARIANTS: dict[str, tuple[int, int | None, int]] = {"T": (5, None, 32), "B": (7, None, 16), "S": (5, 8, 16),
                                                        "L": (7, 8, 16)}  # fmt: skip
"""Variant → ``(kernel k, channels per conv group (None: depthwise), GroupNorm groups)``: ELA-T, -B, -S, -L."""


@declare(
    "ELA",
    paper="Xu & Wan, ELA: Efficient Local Attention for Deep Convolutional Neural Networks, 2024",
    params=(Param("variant", "'T', 'B', 'S' or 'L' (ELA-T/B/S/L)", copies=(CopyDefault(
        UNPROVIDED, "ELA(channels) (cv-attention) is a dense 1x1 Conv1d with bias and GroupNorm 16", "variant"),)),),
    aliases=("EfficientLocalizationAttention", "EfficientLocalAttention"),
    # cv-attention/ELA.py: no hyperparameters; a dense 1x1 Conv1d with bias and GroupNorm 16 (the variant's copy)
    signatures=(Signature("ELA(channels)", "cv-attention", ()),),
    gate_maps={"coord": ("gain", "gate_h", "gate_w")},
    opset_ops="ReduceMean, grouped 1-D Conv, InstanceNormalization (GroupNorm), Sigmoid, Mul",
    example_args=("T",),
)
class ELA(nn.Module):
    """Efficient Local Attention (Xu, Wan, "ELA: Efficient Local Attention for Deep CNNs", arXiv 2403.01123, 2024).

    Paper: Xu, Wan, "ELA: Efficient Local Attention for Deep Convolutional Neural Networks", arXiv 2403.01123, 2024.

    As Coordinate Attention's directional pooling, without its channel reduction and BatchNorm:
    ``z^h_c(h) = 1/W Σ_i x_c(h, i)``, ``z^w_c(w) = 1/H Σ_j x_c(j, w)``; one 1-D conv ``F`` over each sequence (no
    bias, zero padding ``k // 2``), GroupNorm ``G_n``, sigmoid: ``y^h = σ(G_n(F(z^h)))`` ``(B, C, H)``,
    ``y^w = σ(G_n(F(z^w)))`` ``(B, C, W)``; ``y_c(i, j) = x_c(i, j) · y^h_c(i) · y^w_c(j)``. ``F`` and ``G_n`` are
    shared by the two directions.

    Variants (``variant``, ``ELA_VARIANTS``), the paper's three hyperparameters (kernel, conv groups, GN groups):
    ``T`` k = 5, depthwise, GN 32; ``B`` k = 7, depthwise, GN 16; ``S`` k = 5, groups ``C/8``, GN 16; ``L`` k = 7,
    groups ``C/8``, GN 16. Settled by the authors' code: the table above, no conv bias, one ``F`` and one ``G_n`` for
    both directions. The default is ``B``: the paper names no default (the authors' code requires the variant);
    ``B`` is the setting public YOLO code fixes (k = 7, depthwise, GN 16). The GN group count is the variant's where
    it divides ``C`` (every Ultralytics scale), else the largest divisor of ``C`` below it; ``S`` and ``L`` need ``C``
    divisible by 8.

    YAML: ``[-1, 1, ELA, []]`` or ``[-1, 1, ELA, [variant]]``, e.g. ``[S]``.

    Args:
        c1 (int): input channels ``C``.
        variant (str): ``"T"``, ``"B"``, ``"S"`` or ``"L"``. Default ``"B"``.
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; gates ``self.gate_h`` ``(B, C, H, 1)`` and ``self.gate_w`` ``(B, C, 1, W)``.

    Raises:
        AttnBuildError: ``variant`` not one of T, B, S, L; ``S``/``L`` with ``C`` not divisible by 8; ``c1`` invalid.
    """

    def __init__(self, c1: int, variant: str = "B", init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "ELA")
        ok = isinstance(variant, str) and variant in ELA_VARIANTS
        check(ok, where, "variant", variant, "'T', 'B', 'S' or 'L' (ELA-T/B/S/L; default B)")
        check_init_values(init_values, where)
        k, per_group, gn = ELA_VARIANTS[variant]
        if per_group and c1 % per_group:
            raise AttnBuildError(f"{where}: variant={variant!r} needs C divisible by 8 (conv groups C/8); "
                                 f"C={c1}: use 'T' or 'B'")
        self.c1, self.variant, self.k = c1, variant, k
        groups = c1 // per_group if per_group else c1
        self.gn_groups = group_count(None, [g for g in range(1, c1 + 1) if c1 % g == 0], gn, where, "gn_groups")
        self.conv = nn.Conv1d(c1, c1, k, padding=k // 2, groups=groups, bias=False)
        self.gn = nn.GroupNorm(self.gn_groups, c1)
        self.gate_h = nn.Sigmoid()
        self.gate_w = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gh = self.gate_h(self.gn(self.conv(x.mean(3))).unsqueeze(3))  # (B, C, H, 1)
        gw = self.gate_w(self.gn(self.conv(x.mean(2))).unsqueeze(2))  # (B, C, 1, W)
        return gated(x, x * gw * gh, self.scale)
