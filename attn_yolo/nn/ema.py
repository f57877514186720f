"""Efficient Multi-Scale Attention (EMA): grouped 1×1 and 3×3 branches joined by cross-spatial learning."""

from __future__ import annotations

import torch
from torch import nn

from attn_yolo.nn.common import check_c1, check_init_values, group_count
from attn_yolo.nn.declaration import CopyDefault, Param, Signature, ch, declare, hp, int_in
from attn_yolo.nn.layer_scale import LayerScale, gated


@declare(
    "EMA",
    paper="Ouyang et al., Efficient Multi-Scale Attention Module with Cross-Spatial Learning, ICASSP 2023",
    params=(Param("factor", "None (adaptive) or a divisor of C (groups)", (lambda v: v is None or int_in(1, 64)(v),
                  "1..64 groups (paper: 32)"), "adaptive",
                  (CopyDefault(8, "EMA(channels, factor=8) (cv-attention) uses 8 groups", "groups"),)),),
    aliases=("EMA_attention", "EMAttention"),
    signatures=(
        # YOLOonMe/EMA-attention-module EMA_attention_module (the authors): c2 accepted, unused
        Signature("EMA(channels, c2=None, factor=32)", "YOLOonMe/EMA-attention-module",
                  (ch("c2", none_ok=True), hp("factor", "factor", 32))),
        # cv-attention/EMA.py: default factor 8
        Signature("EMA(channels, factor=8)", "cv-attention", (hp("factor", "factor", 8),)),
    ),
    gate_maps={"gain": ("gain", "gate")},
    min_opset=10,
    opset_ops="Slice with the input's H as a dynamic bound (as CoordAtt), Reshape into groups, MatMul, Softmax",
    example_args=(8,),
)
class EMA(nn.Module):
    """Efficient Multi-Scale Attention with cross-spatial learning (Ouyang et al., ICASSP 2023).

    Paper: Ouyang, He, Zhang, Luo, Guo, Zhan, Huang, "Efficient Multi-Scale Attention Module with Cross-Spatial
    Learning", ICASSP 2023.

    The channels are split into ``G`` groups of ``c = C / G``; every group ``X_g`` ``(c, H, W)`` is processed alike
    (shared weights), as a batch of ``B·G`` maps:

    ::

        1×1 branch:  [z^h; z^w] = [mean_W X_g; mean_H X_g]           # directional pools, as CoordAtt
                     [f^h; f^w] = Conv1x1([z^h; z^w])                  # shared c → c conv, no reduction
                     X1 = GN(X_g ⊙ σ(f^h) ⊙ σ(f^w))                     # (c, H, W)
        3×3 branch:  X2 = Conv3x3(X_g)                                 # (c, H, W)
        cross-spatial learning:
                     M = softmax(GAP(X1)) · X2 + softmax(GAP(X2)) · X1 # (1, c)·(c, HW) → (1, H, W)
        Y_g = X_g ⊙ σ(M)

    Settled by the authors' code (the paper names the operations, not all their settings): ``GN`` has one group
    per channel, with affine parameters; both convs have bias; the softmax runs over the ``c`` channels of each
    pooled vector. The directional pools are means over one axis (``ReduceMean`` in ONNX, any input size), not
    adaptive pools.

    Groups: ``factor`` must divide ``C`` (the allowed values are listed if not). Left at None, it is the paper's 32
    where 32 divides ``C`` (every Ultralytics scale), else the largest divisor of ``C`` below 32. Differences from the
    authors' code (YOLOonMe/EMA-attention-module ``EMA(channels, c2=None, factor=32)``): its ``c2`` is unused, and
    it only asserts ``C // factor > 0`` (a ``factor`` that does not divide ``C`` fails in its reshape); the widely
    copied cv-attention ``EMA(channels, factor=8)`` defaults to 8 groups (a row that leaves ``factor`` out logs the
    edit ``[8]``).

    YAML: ``[-1, 1, EMA, []]`` or ``[-1, 1, EMA, [factor]]``.

    Args:
        c1 (int): input channels ``C``.
        factor (int | None): group count ``G``, a divisor of ``C``; None (default): 32 adapted to ``C`` (above).
        init_values (float | None): residual gate init, as in ``SE`` (0.0: identity at init; None: the paper's block).

    Shapes:
        ``(B, C, H, W) -> (B, C, H, W)``; ``self.gate`` outputs ``σ(M)`` of shape ``(B·G, 1, H, W)``; the 1×1
        branch's gates ``self.gate_h`` ``(B·G, c, H, 1)`` and ``self.gate_w`` ``(B·G, c, 1, W)``.

    Raises:
        AttnBuildError: ``factor`` not a divisor of ``C``, or ``c1`` invalid.
    """

    def __init__(self, c1: int, factor: int | None = None, init_values: float | None = None):
        super().__init__()
        where = check_c1(c1, "EMA")
        check_init_values(init_values, where)
        self.groups = group_count(factor, [g for g in range(1, c1 + 1) if c1 % g == 0], 32, where, "factor")
        self.c1, c = c1, c1 // self.groups
        self.conv1x1 = nn.Conv2d(c, c, 1)
        self.conv3x3 = nn.Conv2d(c, c, 3, padding=1)
        self.gn = nn.GroupNorm(c, c)
        self.gate_h = nn.Sigmoid()
        self.gate_w = nn.Sigmoid()
        self.gate = nn.Sigmoid()
        self.scale = None if init_values is None else LayerScale(c1, init_values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        g = x.reshape(b * self.groups, self.c1 // self.groups, h, w)  # (B·G, c, H, W)
        f = self.conv1x1(torch.cat((g.mean(3, keepdim=True), g.mean(2, keepdim=True).transpose(2, 3)), 2))
        x1 = self.gn(g * self.gate_h(f[:, :, :h]) * self.gate_w(f[:, :, h:].transpose(2, 3)))
        x2 = self.conv3x3(g)
        a1 = x1.mean((2, 3)).softmax(-1).unsqueeze(1)  # (B·G, 1, c)
        a2 = x2.mean((2, 3)).softmax(-1).unsqueeze(1)
        m = a1 @ x2.flatten(2) + a2 @ x1.flatten(2)  # (B·G, 1, H·W)
        y = g * self.gate(m.reshape(-1, 1, h, w))
        return gated(x, y.reshape(x.shape), self.scale)
